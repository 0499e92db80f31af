// Where traced events wait to be drained: a bounded ring, allocated once at
// construction, that any number of threads (and interrupt handlers) record
// into without a lock and one drainer empties when it has time (an idle
// loop on a microcontroller, a thread on a host). An event that finds it
// full is counted lost, never waited for.
//
// The ring is a Sluice bus of TraceEvent (one publish core and one consumer
// core for every queue of the project): its publish is the bus's MPSC claim
// (lock-free: a compare-and-swap on the tail, then a release store of the
// slot), and its drain is the bus's dispatch to a visitor, which acquires
// each slot's store before reading the event. The bus is fixed in
// BARE_METAL, keeps no statistics, reads no clock and is observed by no one,
// so tracing never traces itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "sluice/bus.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/counter.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

// The ring's bus: see above. `kStorage`: kHeap (allocated in the
// constructor) or kInline (in the ring object, for a static ring on a
// target without a heap).
template <SlotStorage kStorage>
struct TraceRingTraits : DefaultBusTraits {
  static constexpr SlotStorage kSlotStorage = kStorage;
  using Clock = NullClock;
  using Mode = FixedMode<PerformanceMode::BARE_METAL>;
  using Latency = NoLatencyHistograms;
  using Observation = NoObservation;
  using Observer = NoObserver;
  using CatchUp = NoCatchUpPause;
  static constexpr bool kRequireTriviallyCopyablePayloads = true;
};

template <std::size_t kCapacity, SlotStorage kStorage = SlotStorage::kHeap>
class TraceRing {
 public:
  using Bus = AsyncBus<std::variant<TraceEvent>, kCapacity, ProducerModel::kMulti,
                       TraceRingTraits<kStorage>>;
  static constexpr std::size_t kEvents = kCapacity;

  // `ring_id`: the bus id of the ring's own kLost records.
  explicit TraceRing(std::uint16_t ring_id = 0) noexcept : ring_id_(ring_id) {}
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  // Any thread, and an interrupt handler (it never waits for the thread it
  // interrupted): true once recorded; false, and counted in Lost(), when
  // the ring is full (or closed). The first Record to find room after
  // events were lost first records a kLost event with their count (and
  // takes the count back from Lost()), so the trace says where its hole
  // is: after the events the full ring held, before this one. A loss that
  // no later Record reports is reported by the drain (TakeLost).
  bool Record(const TraceEvent& event) noexcept {
    // Relaxed: the count is a number, not a guard for other memory.
    if (lost_.load(std::memory_order_relaxed) != 0) ReportLost();
    if (Publish(event)) return true;
    sluice::detail::Increment</*kSingleWriter=*/false>(lost_);
    return false;
  }

  // The drainer (one thread at a time): hands the recorded events to
  // `sink(const TraceEvent&)`, oldest first (in the order their records
  // were claimed), at most `most` of them; how many. `sink` must not throw
  // (a throw is counted by the ring's bus and the drain goes on).
  template <typename Sink>
  std::uint32_t Drain(Sink&& sink, std::uint32_t most = static_cast<std::uint32_t>(kCapacity)) {
    return bus_.ProcessBatchWith([&sink](const TraceEvent& event) { sink(event); }, most);
  }

  // Events lost (the ring full) and not yet reported by a kLost event,
  // since construction or the last TakeLost. Any thread. With 32-bit
  // counters (SLUICE_ATOMIC_BITS=32) it wraps after 2^32 losses unreported.
  Counter Lost() const noexcept { return lost_.load(std::memory_order_relaxed); }
  // Lost(), set back to 0 in the same step (an exchange: no loss counted
  // between the read and the reset is missed), for the drainer to report
  // after the events it drained (DrainRecords: trace_stream.hpp).
  Counter TakeLost() noexcept { return lost_.exchange(0, std::memory_order_relaxed); }

  std::uint16_t Id() const noexcept { return ring_id_; }

  // Events recorded and not yet drained.
  std::size_t Depth() const noexcept { return bus_.QueueDepth(); }

 private:
  bool Publish(const TraceEvent& event) noexcept {
    return static_cast<bool>(
        bus_.PublishFast(event, 0, std::chrono::nanoseconds(0), MessagePriority::HIGH));
  }

  // Records kLost events for the count taken from lost_ (one per 2^32 - 1),
  // as far as there is room; what finds none goes back to lost_. Out of
  // line: rare, and inlined it made Record too large to inline into the
  // observer (12 instructions an event more).
  SLUICE_NOINLINE void ReportLost() noexcept {
    Counter count = lost_.exchange(0, std::memory_order_relaxed);
    TraceEvent lost;
    lost.kind = TraceEventKind::kLost;
    lost.bus_id = ring_id_;
    while (count != 0) {
      lost.value = count > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(count);
      if (!Publish(lost)) {
        sluice::detail::Increment</*kSingleWriter=*/false>(lost_, count);
        return;
      }
      count -= lost.value;
    }
  }

  Bus bus_;
  std::atomic<Counter> lost_{0};
  const std::uint16_t ring_id_;
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
