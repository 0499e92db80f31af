// What travels through the bus: a header and a payload, stored inline in a
// ring slot.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Admission class of a message; see AdmissionThresholds for what each gets.
enum class MessagePriority : std::uint8_t { LOW = 0, MEDIUM = 1, HIGH = 2 };

inline constexpr std::size_t kPriorityCount = 3;

constexpr bool IsValidPriority(MessagePriority priority) noexcept {
  return static_cast<std::size_t>(priority) < kPriorityCount;
}

constexpr const char* ToString(MessagePriority priority) noexcept {
  switch (priority) {
    case MessagePriority::LOW:
      return "LOW";
    case MessagePriority::MEDIUM:
      return "MEDIUM";
    case MessagePriority::HIGH:
      return "HIGH";
  }
  return "INVALID";
}

struct MessageHeader {
  // The position the message was admitted at: unique per source (the shared
  // queue, or one lane: see `lane`) and increasing in admission order there
  // (also on a priority-ordered bus, which dispatches in another order).
  std::uint64_t msg_id = 0;
  // Nanoseconds from the bus clock (Publish) or from the caller (PublishFast);
  // 0: no timestamp (not counted in the latency histograms). Was
  // timestamp_us (microseconds) before 0.4. A clock that defers its
  // conversion (CounterClock) stores a raw stamp with the top bit set; the
  // consumer converts it before anyone reads the header.
  std::uint64_t timestamp_ns = 0;
  std::uint32_t sender_id = 0;
  MessagePriority priority = MessagePriority::MEDIUM;
  // Whether the publish was counted in the statistics (FULL_FEATURED then);
  // the consumer counts it as processed only if so. Fills header padding.
  bool counted = false;
  // 0: published into the shared queue; k: by the registered producer that
  // held lane k (AsyncBus::RegisterProducer), whose msg_ids count on their
  // own: (lane, msg_id) is unique per bus. Fills header padding.
  std::uint16_t lane = 0;
};

// An aggregate, so a payload prvalue is constructed straight into the slot.
template <typename Payload>
struct MessageEnvelope {
  MessageHeader header;
  Payload payload;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
