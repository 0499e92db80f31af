// The NATS bridge's wire frame: a fixed 40-byte header, then the payload
// bytes a codec wrote. Standard library only (no NATS client), so the
// decoder can be fuzzed and tested on its own. Every multi-byte field is
// little-endian, written and read byte by byte: no alignment, no aliasing,
// the same bytes on every host. docs/nats.md has the layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// "SLNF": Sluice NATS frame.
inline constexpr std::uint8_t kFrameMagic[4] = {'S', 'L', 'N', 'F'};
// The one version this header writes and reads; any other is refused.
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::size_t kFrameHeaderSize = 40;
// The payload bound a decoder applies unless told another (NATS's own
// default max_payload is 1 MiB, which also bounds the frame).
inline constexpr std::uint32_t kDefaultMaxFramePayload = 1024 * 1024;

// Why a frame was refused. Frames are refused whole: nothing of a refused
// frame reaches the bus.
enum class FrameError : std::uint8_t {
  kNone = 0,
  kTooShort,        // fewer bytes than the header
  kBadMagic,        // not a Sluice frame
  kUnknownVersion,  // a version this decoder does not read
  kBadPriority,     // not LOW, MEDIUM or HIGH
  kOversized,       // payload length above the receiver's bound
  kLengthMismatch,  // payload length field differs from the bytes present
  kUnknownType,     // no inbound route for the type id on this subject (the bridge's check)
  kBadPayload,      // the type's codec refused the payload bytes
  // The bridge's checks, after the ones above:
  kPriorityMismatch,  // the frame's priority is not its subject's priority suffix
  kDecodeThrew,       // the type's codec threw (or making the message did)
};
inline constexpr std::size_t kFrameErrorCount = 11;

constexpr const char* ToString(FrameError error) noexcept {
  switch (error) {
    case FrameError::kNone:
      return "none";
    case FrameError::kTooShort:
      return "too_short";
    case FrameError::kBadMagic:
      return "bad_magic";
    case FrameError::kUnknownVersion:
      return "unknown_version";
    case FrameError::kBadPriority:
      return "bad_priority";
    case FrameError::kOversized:
      return "oversized";
    case FrameError::kLengthMismatch:
      return "length_mismatch";
    case FrameError::kUnknownType:
      return "unknown_type";
    case FrameError::kBadPayload:
      return "bad_payload";
    case FrameError::kPriorityMismatch:
      return "priority_mismatch";
    case FrameError::kDecodeThrew:
      return "decode_threw";
  }
  return "invalid";
}

// The header fields, as the sender's bus saw its message.
struct FrameHeader {
  std::uint8_t version = kFrameVersion;
  MessagePriority priority = MessagePriority::MEDIUM;
  std::uint16_t type_id = 0;       // the route's id for the message type
  std::uint32_t sender_id = 0;     // MessageHeader::sender_id at the sender
  std::uint32_t payload_size = 0;  // bytes after the header
  std::uint64_t msg_id = 0;        // MessageHeader::msg_id at the sender
  // MessageHeader::timestamp_ns / 1000 (the sender's bus clock): on the wire
  // in microseconds, as before 0.4, so the frame layout and version stay;
  // times 1000 gives nanoseconds again, to microsecond precision.
  std::uint64_t timestamp_us = 0;
  std::uint64_t origin_id = 0;  // the sending bridge (loop prevention)

  // The sender's MessageHeader::timestamp_ns, to microsecond precision.
  constexpr std::uint64_t TimestampNanos() const noexcept { return timestamp_us * 1000; }
};

// The wire's timestamp for a MessageHeader::timestamp_ns: microseconds
// (rounded down), as the frame has carried since version 1.
constexpr std::uint64_t FrameTimestampMicros(std::uint64_t timestamp_ns) noexcept {
  return timestamp_ns / 1000;
}

// A decoded frame: the header and a view of the payload inside the input.
struct FrameView {
  FrameHeader header;
  const std::uint8_t* payload = nullptr;
  std::size_t payload_size = 0;
};

namespace detail {

template <typename T>
constexpr void StoreLittle(std::uint8_t* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

template <typename T>
constexpr T LoadLittle(const std::uint8_t* in) noexcept {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<T>(value | static_cast<T>(static_cast<T>(in[i]) << (8 * i)));
  }
  return value;
}

}  // namespace detail

// Writes the header into out[0, kFrameHeaderSize). `header.payload_size`
// must be the number of payload bytes that follow; the version written is
// always kFrameVersion.
inline void EncodeFrameHeader(const FrameHeader& header, std::uint8_t* out) noexcept {
  for (std::size_t i = 0; i < 4; ++i) out[i] = kFrameMagic[i];
  out[4] = kFrameVersion;
  out[5] = static_cast<std::uint8_t>(header.priority);
  detail::StoreLittle<std::uint16_t>(out + 6, header.type_id);
  detail::StoreLittle<std::uint32_t>(out + 8, header.sender_id);
  detail::StoreLittle<std::uint32_t>(out + 12, header.payload_size);
  detail::StoreLittle<std::uint64_t>(out + 16, header.msg_id);
  detail::StoreLittle<std::uint64_t>(out + 24, header.timestamp_us);
  detail::StoreLittle<std::uint64_t>(out + 32, header.origin_id);
}

// Checks and decodes `size` bytes at `data` (which may be null when size is
// 0). On success fills `out` (its payload points into `data`) and returns
// FrameError::kNone; otherwise returns the first failed check, in the
// order of the enum, and leaves `out` unspecified. Reads only inside
// [data, data + size), for any input.
inline FrameError DecodeFrame(const std::uint8_t* data, std::size_t size, FrameView* out,
                              std::uint32_t max_payload = kDefaultMaxFramePayload) noexcept {
  if (data == nullptr || size < kFrameHeaderSize) return FrameError::kTooShort;
  for (std::size_t i = 0; i < 4; ++i) {
    if (data[i] != kFrameMagic[i]) return FrameError::kBadMagic;
  }
  if (data[4] != kFrameVersion) return FrameError::kUnknownVersion;
  if (data[5] >= kPriorityCount) return FrameError::kBadPriority;
  FrameHeader& header = out->header;
  header.version = data[4];
  header.priority = static_cast<MessagePriority>(data[5]);
  header.type_id = detail::LoadLittle<std::uint16_t>(data + 6);
  header.sender_id = detail::LoadLittle<std::uint32_t>(data + 8);
  header.payload_size = detail::LoadLittle<std::uint32_t>(data + 12);
  header.msg_id = detail::LoadLittle<std::uint64_t>(data + 16);
  header.timestamp_us = detail::LoadLittle<std::uint64_t>(data + 24);
  header.origin_id = detail::LoadLittle<std::uint64_t>(data + 32);
  if (header.payload_size > max_payload) return FrameError::kOversized;
  // No overflow: size >= kFrameHeaderSize here.
  if (header.payload_size != size - kFrameHeaderSize) return FrameError::kLengthMismatch;
  out->payload = data + kFrameHeaderSize;
  out->payload_size = header.payload_size;
  return FrameError::kNone;
}

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
