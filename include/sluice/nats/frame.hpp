// The NATS bridge's wire frame: a fixed 56-byte header (version 2; 40 bytes
// in version 1, which is still read), then the payload bytes a codec wrote;
// version 3 is version 2 followed by a signature block (the key id and an
// HMAC-SHA256: sluice/nats/frame_signature.hpp checks it). Standard library only
// (no NATS client), so the decoder can be fuzzed and tested on its own. Every multi-byte field is
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
// The version this header writes. It reads it and version 1 (without the
// stream fields), and refuses any other.
inline constexpr std::uint8_t kFrameVersion = 2;
inline constexpr std::size_t kFrameHeaderSize = 56;
inline constexpr std::uint8_t kFrameVersion1 = 1;
inline constexpr std::size_t kFrameHeaderSizeV1 = 40;
// A signed frame: version 2's header (with this version), the payload, then
// the signature block: the key id (4 bytes) and the MAC (32 bytes) over
// every byte before the MAC.
inline constexpr std::uint8_t kFrameVersionSigned = 3;
inline constexpr std::size_t kFrameKeyIdSize = 4;
inline constexpr std::size_t kFrameMacSize = 32;
inline constexpr std::size_t kFrameSignatureSize = kFrameKeyIdSize + kFrameMacSize;
// The payload bound a decoder applies unless told another (NATS's own
// default max_payload is 1 MiB, which also bounds the frame).
inline constexpr std::uint32_t kDefaultMaxFramePayload = 1024 * 1024;

// Why a frame was refused. Frames are refused whole: nothing of a refused
// frame reaches the bus.
enum class FrameError : std::uint8_t {
  kNone = 0,
  kTooShort,        // fewer bytes than the header its version has
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
  kOriginNotAllowed,  // the origin is not on the route's allow-list for the priority
  kDuplicate,         // its stream's sequence number was seen already (a replay)
  kStale,             // its sequence number is behind its stream's window
  kUnsequenced,       // a version 1 frame (no stream fields), and they are not accepted
  // A new stream while the streams of its part of the table (known or
  // unknown origins) fill it and none is idle.
  kStreamTableFull,
  // Numbered more than a window ahead of its stream while the stream holds
  // as many such frames as it may (StreamTracker::kMaxHeld), none below it.
  kTooFarAhead,
  // Without a signature, on a route that takes signed frames only
  // (ReceiveOptions::require_signed).
  kUnsigned,
  // Signed, and its MAC is not the one a key of its origin and key id gives
  // (BridgeOptions::frame_keys); or, on a route that takes signed frames
  // only, no such key is known.
  kBadSignature,
};
inline constexpr std::size_t kFrameErrorCount = 19;

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
    case FrameError::kOriginNotAllowed:
      return "origin_not_allowed";
    case FrameError::kDuplicate:
      return "duplicate";
    case FrameError::kStale:
      return "stale";
    case FrameError::kUnsequenced:
      return "unsequenced";
    case FrameError::kStreamTableFull:
      return "stream_table_full";
    case FrameError::kTooFarAhead:
      return "too_far_ahead";
    case FrameError::kUnsigned:
      return "unsigned";
    case FrameError::kBadSignature:
      return "bad_signature";
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
  // MessageHeader::timestamp_ns at the sender (its bus clock). Version 1
  // carried microseconds: read from one, this is them times 1000.
  std::uint64_t timestamp_ns = 0;
  std::uint64_t origin_id = 0;  // the sending bridge (loop prevention, allow-lists)
  // The stream: a random id the sending bridge draws at each Start, and the
  // frame's number among those it sent on this subject since (from 1). Both
  // 0 in a version 1 frame, which has no stream fields.
  std::uint64_t instance_id = 0;
  std::uint64_t sequence = 0;
};

// A version 3 frame's signature block, as read (not checked: see
// sluice/nats/frame_signature.hpp).
struct FrameSignature {
  bool present = false;
  std::uint32_t key_id = 0;
  const std::uint8_t* mac = nullptr;  // kFrameMacSize bytes inside the input
  // The bytes the MAC is over: the input's first signed_size bytes.
  const std::uint8_t* signed_bytes = nullptr;
  std::size_t signed_size = 0;
  // Set by the receiver once a key verified it (never by the decoder).
  bool verified = false;
};

// A decoded frame: the header and a view of the payload inside the input.
// header.version is 2 for a signed frame (its layout); signature.present
// tells it apart.
struct FrameView {
  FrameHeader header;
  const std::uint8_t* payload = nullptr;
  std::size_t payload_size = 0;
  FrameSignature signature;
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

// Writes a version 2 header into out[0, kFrameHeaderSize), or with
// `signed_frame` a version 3 one (a signature block to follow the payload).
// `header.payload_size` must be the number of payload bytes that follow;
// header.version is not read.
inline void EncodeFrameHeader(const FrameHeader& header, std::uint8_t* out,
                              bool signed_frame = false) noexcept {
  for (std::size_t i = 0; i < 4; ++i) out[i] = kFrameMagic[i];
  out[4] = signed_frame ? kFrameVersionSigned : kFrameVersion;
  out[5] = static_cast<std::uint8_t>(header.priority);
  detail::StoreLittle<std::uint16_t>(out + 6, header.type_id);
  detail::StoreLittle<std::uint32_t>(out + 8, header.sender_id);
  detail::StoreLittle<std::uint32_t>(out + 12, header.payload_size);
  detail::StoreLittle<std::uint64_t>(out + 16, header.msg_id);
  detail::StoreLittle<std::uint64_t>(out + 24, header.timestamp_ns);
  detail::StoreLittle<std::uint64_t>(out + 32, header.origin_id);
  detail::StoreLittle<std::uint64_t>(out + 40, header.instance_id);
  detail::StoreLittle<std::uint64_t>(out + 48, header.sequence);
}

// Checks and decodes `size` bytes at `data` (which may be null when size is
// 0): a version 2 frame, a version 3 frame (version 2 signed: its signature
// block read, not checked), or a version 1 frame (its timestamp converted
// to nanoseconds, no stream fields). On success fills `out` (its payload
// points into `data`) and returns FrameError::kNone; otherwise returns the
// first failed check, in the order of the enum, and leaves `out`
// unspecified. Reads only inside [data, data + size), for any input.
inline FrameError DecodeFrame(const std::uint8_t* data, std::size_t size, FrameView* out,
                              std::uint32_t max_payload = kDefaultMaxFramePayload) noexcept {
  // The shorter header first: magic and version are in both.
  if (data == nullptr || size < kFrameHeaderSizeV1) return FrameError::kTooShort;
  for (std::size_t i = 0; i < 4; ++i) {
    if (data[i] != kFrameMagic[i]) return FrameError::kBadMagic;
  }
  std::uint8_t version = data[4];
  const bool signed_frame = version == kFrameVersionSigned;
  if (signed_frame) version = kFrameVersion;  // the same header
  if (version != kFrameVersion && version != kFrameVersion1) return FrameError::kUnknownVersion;
  const std::size_t header_size = version == kFrameVersion ? kFrameHeaderSize : kFrameHeaderSizeV1;
  const std::size_t trailer_size = signed_frame ? kFrameSignatureSize : 0;
  if (size < header_size + trailer_size) return FrameError::kTooShort;
  if (data[5] >= kPriorityCount) return FrameError::kBadPriority;
  FrameHeader& header = out->header;
  header.version = version;
  header.priority = static_cast<MessagePriority>(data[5]);
  header.type_id = detail::LoadLittle<std::uint16_t>(data + 6);
  header.sender_id = detail::LoadLittle<std::uint32_t>(data + 8);
  header.payload_size = detail::LoadLittle<std::uint32_t>(data + 12);
  header.msg_id = detail::LoadLittle<std::uint64_t>(data + 16);
  header.timestamp_ns = detail::LoadLittle<std::uint64_t>(data + 24);
  header.origin_id = detail::LoadLittle<std::uint64_t>(data + 32);
  if (version == kFrameVersion) {
    header.instance_id = detail::LoadLittle<std::uint64_t>(data + 40);
    header.sequence = detail::LoadLittle<std::uint64_t>(data + 48);
  } else {
    // Microseconds in version 1; saturates rather than wraps.
    constexpr std::uint64_t kMaxMicros = ~std::uint64_t{0} / 1000;
    header.timestamp_ns =
        header.timestamp_ns > kMaxMicros ? ~std::uint64_t{0} : header.timestamp_ns * 1000;
    header.instance_id = 0;
    header.sequence = 0;
  }
  if (header.payload_size > max_payload) return FrameError::kOversized;
  // No overflow: size >= header_size + trailer_size here.
  if (header.payload_size != size - header_size - trailer_size) return FrameError::kLengthMismatch;
  out->payload = data + header_size;
  out->payload_size = header.payload_size;
  FrameSignature& signature = out->signature;
  signature = FrameSignature{};
  if (signed_frame) {
    const std::uint8_t* block = data + header_size + header.payload_size;
    signature.present = true;
    signature.key_id = detail::LoadLittle<std::uint32_t>(block);
    signature.mac = block + kFrameKeyIdSize;
    signature.signed_bytes = data;
    signature.signed_size = size - kFrameMacSize;
  }
  return FrameError::kNone;
}

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
