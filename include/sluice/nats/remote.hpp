// Where a bridged message came from, for a subscriber that needs to know:
// put Remote<T> in the bus payload and Receive<Remote<T>> instead of
// Receive<T>, and each message arrives with its frame's provenance (the
// sending bridge, its stream and sequence number, the sender's msg_id,
// sender id and clock; over JetStream, the stream's sequence and how many
// times the message was delivered). The frame carries T as a Receive<T>
// would (same codec, same type id); Remote<T> costs the payload slot 64 more
// bytes.
// Standard library only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// How a frame reached the receiving bridge: over a JetStream route, the
// message's sequence in its stream and how many times the stream has
// delivered it (1 the first time; more after hand-backs or a receiver
// that stopped before acknowledging); over core NATS, both 0.
struct Arrival {
  std::uint64_t stream_sequence = 0;
  std::uint64_t deliveries = 0;
};

// The frame's header fields, as the sending bridge wrote them (docs/nats.md,
// "The frame"), and how it arrived. A version 1 frame has instance_id and
// sequence 0.
struct Provenance {
  std::uint64_t origin_id = 0;    // the sending bridge
  std::uint64_t instance_id = 0;  // its Start (a random id)
  std::uint64_t sequence = 0;     // the frame's number on its subject in that instance
  std::uint64_t msg_id = 0;       // MessageHeader::msg_id on the sender's bus
  // MessageHeader::timestamp_ns on the sender's bus clock: comparable with
  // the receiver's only when both use the same clock (a system clock, or
  // both in one process).
  std::uint64_t timestamp_ns = 0;
  std::uint32_t sender_id = 0;  // MessageHeader::sender_id on the sender's bus
  std::uint16_t type_id = 0;
  MessagePriority priority = MessagePriority::MEDIUM;
  // Signed, and verified with a key of BridgeOptions::frame_keys for its
  // origin (always so on a route with require_signed); false for a frame
  // taken unsigned, or signed with a key this receiver does not have.
  bool verified = false;
  // JetStream: the stream's sequence of the message, and its delivery
  // count (Arrival); 0 and 0 over core NATS.
  std::uint64_t stream_sequence = 0;
  std::uint64_t deliveries = 0;
};

template <typename T>
struct Remote {
  T value;
  Provenance provenance;
};

template <typename T>
struct IsRemote : std::false_type {};
template <typename T>
struct IsRemote<Remote<T>> : std::true_type {};

// The type a frame carries for a route of T: T, or U for Remote<U>.
template <typename T>
struct WireTypeOf {
  using Type = T;
};
template <typename T>
struct WireTypeOf<Remote<T>> {
  using Type = T;
};
template <typename T>
using WireType = typename WireTypeOf<T>::Type;

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
