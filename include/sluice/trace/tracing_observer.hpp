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
#include <type_traits>
#include <utility>

#include "sluice/bus_traits.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

// `Ring`: a TraceRing (or any type with `bool Record(const TraceEvent&)
// noexcept` safe from every thread that publishes to or dispatches the
// bus; one that also has `bool Enabled() const noexcept` is asked first,
// and an event it does not want is not built further: LttngSink). `Clock`: the clock of each
// event's time_ns (the bus clock's kind: NowNanos()); NullClock records 0.
template <typename Ring, typename Clock = typename DefaultBusTraits::Clock>
class TracingObserver {
 public:
  TracingObserver() = default;
  // Moves the attachment (a shared-memory bus's producer moves its
  // observer with it); the one moved from records nothing. Not while the
  // bus's threads run.
  TracingObserver(TracingObserver&& other) noexcept { *this = std::move(other); }
  TracingObserver& operator=(TracingObserver&& other) noexcept {
    bus_id_.store(other.bus_id_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    ring_.store(other.ring_.exchange(nullptr, std::memory_order_relaxed),
                std::memory_order_release);
    return *this;
  }

  // Starts recording into `ring` as bus `bus_id`: true. The bus id is the
  // first Attach's: a later Attach (to another ring, after a Detach) with
  // another id is refused (false), so no event ever carries an id its bus
  // did not have. Call it before the bus's producers and consumer start,
  // or while they run: the release store pairs with each event's acquire
  // load, so an event that sees the ring sees the id too.
  bool Attach(Ring* ring, std::uint16_t bus_id) noexcept {
    std::uint32_t expected = kNoBusId;
    if (!bus_id_.compare_exchange_strong(expected, bus_id, std::memory_order_relaxed) &&
        expected != bus_id) {
      return false;
    }
    ring_.store(ring, std::memory_order_release);
    return true;
  }
  // Stops recording. An event already past its load of the ring may still
  // be recorded: keep the ring until the bus's threads have stopped.
  void Detach() noexcept { ring_.store(nullptr, std::memory_order_release); }

  void OnAdmitted(const MessageHeader& header, std::size_t type_index) noexcept {
    RecordMessage(TraceEventKind::kAdmitted, header, type_index);
  }
  // A count past 32 bits is several events. Bad input whose priority is
  // none of the three (kRejected) is recorded as MEDIUM: a record holds
  // only values its fields have (trace_event.hpp).
  void OnRefused(PublishOutcome outcome, MessagePriority priority, std::uint64_t count) noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kRefused;
    event.priority = IsValidPriority(priority) ? priority : MessagePriority::MEDIUM;
    event.detail = static_cast<std::uint8_t>(outcome);
    do {
      const std::uint32_t part =
          count > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(count);
      event.value = part;
      Record(event);
      count -= part;
    } while (count != 0);
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
  void OnClosed() noexcept {
    TraceEvent event;
    event.kind = TraceEventKind::kClosed;
    Record(event);
  }
  void OnLaneEvent(const LaneEvent& lane) noexcept {
    TraceEvent event;
    switch (lane.kind) {
      case LaneEventKind::kAttached:
        event.kind = TraceEventKind::kLaneAttached;
        break;
      case LaneEventKind::kExited:
        event.kind = TraceEventKind::kLaneExited;
        break;
      case LaneEventKind::kHandedBack:
        event.kind = TraceEventKind::kLaneHandedBack;
        break;
    }
    event.lane = lane.lane;
    event.sender_id = static_cast<std::uint32_t>(lane.pid);
    event.detail = lane.kind != LaneEventKind::kAttached && lane.killed ? 1 : 0;
    event.value = lane.lost > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(lane.lost);
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
    // A place that says it keeps nothing now (LttngSink with no session):
    // no clock reading for an event no one keeps.
    if constexpr (HasEnabled<Ring>::value) {
      if (!ring->Enabled()) return;
    }
    event.bus_id = static_cast<std::uint16_t>(bus_id_.load(std::memory_order_relaxed));
    event.time_ns = sluice::detail::ClockNanos<Clock>();
    (void)ring->Record(event);
  }

  template <typename R, typename = void>
  struct HasEnabled : std::false_type {};
  template <typename R>
  struct HasEnabled<R, std::void_t<decltype(std::declval<const R&>().Enabled())>> : std::true_type {
  };

  // Above any 16-bit id: not attached yet.
  static constexpr std::uint32_t kNoBusId = 0x10000;
  std::atomic<Ring*> ring_{nullptr};
  std::atomic<std::uint32_t> bus_id_{kNoBusId};
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
