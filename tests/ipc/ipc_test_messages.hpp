// The payload the shared-memory bus's tests send between processes: every
// kind of alternative a user may have (floating point, integers, an
// over-aligned struct, a byte array of odd size), each carrying its
// message's number so that the receiver can check every byte it got.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <variant>

#include "sluice/ipc/loan.hpp"
#include "sluice/message.hpp"

namespace sluice_ipc_test {

struct Pose {
  double x;
  double y;
  double theta;
  std::uint64_t seq;
};

struct Stop {
  std::uint32_t reason;
  std::uint64_t seq;
};

struct alignas(32) Aligned {
  std::uint8_t tag;
  std::uint64_t seq;
};

struct Bytes13 {
  unsigned char bytes[13];  // the number in the first 8, a pattern after
};

using Payload = std::variant<Pose, Stop, Aligned, Bytes13>;
// The same types in another order: a different payload for the fingerprint.
using OtherPayload = std::variant<Stop, Pose, Aligned, Bytes13>;
inline constexpr std::size_t kCapacity = 64;
inline constexpr std::size_t kTypeCount = std::variant_size_v<Payload>;

// Message `seq`: its type and priority cycle, its contents follow from it.
inline Payload MakeMessage(std::uint64_t seq) {
  switch (seq % kTypeCount) {
    case 0:
      return Pose{seq * 1.5, seq * 2.0, seq * 0.25, seq};
    case 1:
      return Stop{static_cast<std::uint32_t>(seq % 7), seq};
    case 2:
      return Aligned{static_cast<std::uint8_t>(seq & 0xFF), seq};
    default: {
      Bytes13 bytes{};
      std::memcpy(bytes.bytes, &seq, sizeof(seq));
      for (std::size_t i = sizeof(seq); i < sizeof(bytes.bytes); ++i) {
        bytes.bytes[i] = static_cast<unsigned char>(seq + i);
      }
      return bytes;
    }
  }
}

inline sluice::MessagePriority PriorityOf(std::uint64_t seq) {
  return static_cast<sluice::MessagePriority>(seq % sluice::kPriorityCount);
}

// The number a message carries, whatever its type.
inline std::uint64_t SeqOf(const Payload& payload) {
  if (const auto* pose = std::get_if<Pose>(&payload)) return pose->seq;
  if (const auto* stop = std::get_if<Stop>(&payload)) return stop->seq;
  if (const auto* aligned = std::get_if<Aligned>(&payload)) return aligned->seq;
  std::uint64_t seq = 0;
  std::memcpy(&seq, std::get<Bytes13>(payload).bytes, sizeof(seq));
  return seq;
}

// Whether `payload` is exactly message SeqOf(payload), byte for byte.
inline bool IsIntact(const Payload& payload) {
  const Payload expected = MakeMessage(SeqOf(payload));
  if (expected.index() != payload.index()) return false;
  return std::visit(
      [&](const auto& message) {
        using T = std::decay_t<decltype(message)>;
        const T& want = std::get<T>(expected);
        if constexpr (std::is_same_v<T, Aligned>) {
          return want.tag == message.tag && want.seq == message.seq;
        } else if constexpr (std::is_same_v<T, Stop>) {
          return want.reason == message.reason && want.seq == message.seq;
        } else if constexpr (std::is_same_v<T, Pose>) {
          return want.x == message.x && want.y == message.y && want.theta == message.theta &&
                 want.seq == message.seq;
        } else {
          return std::memcmp(want.bytes, message.bytes, sizeof(want.bytes)) == 0;
        }
      },
      payload);
}

// Large payloads, loaned: 4 KB and 64 KB frames whose bytes follow from
// their number.
template <std::size_t kBytes>
struct Frame {
  std::uint64_t seq;
  unsigned char data[kBytes - sizeof(std::uint64_t)];
};
using Frame4K = Frame<4096>;
using Frame64K = Frame<65536>;
using LoanPayload = std::variant<Stop, sluice::ipc::Loaned<Frame4K>, sluice::ipc::Loaned<Frame64K>>;
inline constexpr std::size_t kLoanCapacity = 16;

template <std::size_t kBytes>
void FillFrame(Frame<kBytes>& frame, std::uint64_t seq) {
  frame.seq = seq;
  for (std::size_t i = 0; i < sizeof(frame.data); ++i) {
    frame.data[i] = static_cast<unsigned char>(seq * 31 + i * 7);
  }
}

template <std::size_t kBytes>
bool FrameIsIntact(const Frame<kBytes>& frame) {
  for (std::size_t i = 0; i < sizeof(frame.data); ++i) {
    if (frame.data[i] != static_cast<unsigned char>(frame.seq * 31 + i * 7)) return false;
  }
  return true;
}

}  // namespace sluice_ipc_test
