// Tracing a bus: an Observer (sluice/observer.hpp) that records each event
// the bus tells it into a TraceRing (sluice/trace/trace_ring.hpp), with the
// tracer's clock reading, the bus's name and the message's payload index.
//
//   sluice::trace::TraceRing<4096> ring;
//   struct Traced : sluice::DefaultBusTraits {
//     using Observer = sluice::trace::TracingObserver<sluice::trace::TraceRing<4096>>;
//   };
//   sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti, Traced> bus;
//   bus.GetObserver().Attach(&ring, /*bus_id=*/1);
//
// A bus whose Observer is NoObserver (the default) compiles none of this:
// tracing off costs nothing (the instruction budget's rows hold it, and
// the Cortex-M4 images are the same bytes). Before Attach, and after
// Detach, the observer records nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sluice/bus_traits.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

// `Ring`: a TraceRing (or any type with `bool Record(const TraceEvent&)
// noexcept` safe from every thread that publishes to or dispatches the
// bus). `Clock`: the clock of each event's time_ns (the bus clock's kind:
// NowNanos()); NullClock records 0.
template <typename Ring, typename Clock = typename DefaultBusTraits::Clock>
class TracingObserver {
 public:
  // Starts recording into `ring` as bus `bus_id`. Call it before the bus's
  // producers and consumer start (or while they run: the release store
  // pairs with each event's acquire load, so an event that sees the ring
  // sees its bus_id too).
  void Attach(Ring* ring, std::uint16_t bus_id) noexcept {
    bus_id_.store(bus_id, std::memory_order_relaxed);
    ring_.store(ring, std::memory_order_release);
  }
  // Stops recording. An event already past its load of the ring may still
  // be recorded: keep the ring until the bus's threads have stopped.
  void Detach() noexcept { ring_.store(nullptr, std::memory_order_release); }

  void OnAdmitted(const MessageHeader& header, std::size_t type_index) noexcept {
    RecordMessage(TraceEventKind::kAdmitted, header, type_index);
  }
  void OnRefused(PublishOutcome outcome, MessagePriority priority, std::uint64_t count) noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kRefused;
    event.priority = priority;
    event.detail = static_cast<std::uint8_t>(outcome);
    event.value = Saturate(count);
    Record(event);
  }
  void OnBatchBegin(std::uint64_t fill) noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kBatchBegin;
    event.msg_id = fill;
    Record(event);
  }
  void OnTaken(const MessageHeader& header, std::size_t type_index) noexcept {
    RecordMessage(TraceEventKind::kTaken, header, type_index);
  }
  void OnDispatched(const MessageHeader& header, std::size_t type_index) noexcept {
    RecordMessage(TraceEventKind::kDispatched, header, type_index);
  }
  void OnBatchEnd(std::uint32_t count) noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kBatchEnd;
    event.value = count;
    Record(event);
  }
  void OnError(const BusError& error) noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kError;
    event.detail = static_cast<std::uint8_t>(error.code);
    event.msg_id = error.msg_id;
    event.sender_id = error.sender_id;
    event.type_index = static_cast<std::uint32_t>(error.type_index);
    Record(event);
  }

 private:
  static std::uint32_t Saturate(std::uint64_t count) noexcept {
    return count > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(count);
  }

  void RecordMessage(TraceEventKind kind, const MessageHeader& header,
                     std::size_t type_index) noexcept {
    TraceEvent event;
    event.kind = kind;
    event.msg_id = header.msg_id;
    event.stamp_ns = header.timestamp_ns;
    event.sender_id = header.sender_id;
    event.type_index = static_cast<std::uint32_t>(type_index);
    event.lane = header.lane;
    event.priority = header.priority;
    Record(event);
  }

  void Record(TraceEvent& event) noexcept {
    // Acquire: pairs with Attach's release store (bus_id_ written before).
    Ring* ring = ring_.load(std::memory_order_acquire);
    if (ring == nullptr) return;
    event.bus_id = bus_id_.load(std::memory_order_relaxed);
    event.time_ns = sluice::detail::ClockNanos<Clock>();
    (void)ring->Record(event);
  }

  std::atomic<Ring*> ring_{nullptr};
  std::atomic<std::uint16_t> bus_id_{0};
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
