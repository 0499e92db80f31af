// A shared-memory producer's lane (sluice/ipc/shm_producer.hpp) as a source
// of the publish core every bus shares (detail/publish/publish_core.hpp), as
// the in-process bus's lanes are (detail/publish/bus_sources.hpp): its rings,
// its counters in the segment, its limits, how a refusal tells a closed bus
// or a consumer gone, and how a publish wakes the consumer. They reach the
// producer's parts as its friends.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/ipc/host_clock.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// What a producer's lane counts: its refusals for room, in the segment
// (relaxed: tallies). Publishes are not counted: each claimed one slot of
// its ring, and the consumer reads the rings' claims. Nothing when not
// attached.
template <typename LaneControl>
struct ShmLaneCounters {
  LaneControl* control;
  static constexpr void CountPublished(MessagePriority, Position = 1) noexcept {}
  void CountDropped(MessagePriority priority, Position count) const noexcept {
    if (control == nullptr) return;
    control->dropped[static_cast<std::size_t>(priority)].fetch_add(count,
                                                                   std::memory_order_relaxed);
  }
  static constexpr void CountClosed(Position) noexcept {}
  static constexpr void CountRejected() noexcept {}
};
// Where an empty loan's refusal is counted: the lane's `pool_empty`, a
// drop in the statistics that the backpressure peak does not read (as
// in process, where it is the bus's drop and not the lane's).
template <typename LaneControl>
struct ShmEmptyLoanCounters : ShmLaneCounters<LaneControl> {
  void CountDropped(MessagePriority priority, Position count) const noexcept {
    if (this->control == nullptr) return;
    this->control->pool_empty[static_cast<std::size_t>(priority)].fetch_add(
        count, std::memory_order_relaxed);
  }
};

// A producer's lane as a source of the publish core
// (detail/publish/publish_core.hpp).
template <typename Producer>
struct ShmLaneSource {
  using Target = typename Producer::Queue;
  using Clock = HostMonotonicClock;
  using Observer = typename Producer::Observer;
  using LaneCounters = ShmLaneCounters<typename Producer::LaneControl>;
  static constexpr bool kKeeps = true;
  static constexpr bool kObserves = !std::is_same_v<Observer, NoObserver>;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = Producer::kSlots;
  Producer& producer;
  // Whether a refusal looks whether the consumer still runs (its role:
  // two system calls), or reads the closed state only (PublishBlocking's
  // tries).
  bool look_for_consumer = true;

  Target& Slots() const noexcept { return *producer.queue_; }
  LaneCounters Counters() const noexcept { return LaneCounters{producer.control_}; }
  // Every message is stamped and counted: the shared bus has no mode.
  static constexpr PerformanceMode Mode() noexcept { return PerformanceMode::FULL_FEATURED; }
  Position Limit(PerformanceMode, MessagePriority priority) const noexcept {
    return producer.limits_[static_cast<std::size_t>(priority)];
  }
  // The consumer rewrites it from the lane the message came through.
  std::uint16_t Lane() const noexcept { return producer.lane_; }
  bool Enter() const noexcept { return producer.queue_.has_value(); }
  static constexpr void Leave() noexcept {}
  // (X): a refusal by a closed cursor: the cursor says so; else the
  // consumer's state (and, looking for it, whether it still runs).
  bool ClosedAfterRefusal() const noexcept {
    if (producer.queue_->IsClosed()) return true;
    return look_for_consumer ? !producer.IsOpenForPublishing()
                             : producer.header_->state.load(std::memory_order_relaxed) != kOpen;
  }
  static constexpr void NoteRefusedFill(Position) noexcept {}
  static constexpr void LeftUnadmitted() noexcept {}
  // SYNC POINT WRITE/READ (W), notifying side: the publish, then the
  // consumer's waiter count. With the heavy fence the consumer's sleep
  // fences this process, so a compiler fence keeps the order here. Whether
  // the consumer uses it is read at each publish, from the waiter count's
  // own line: a consumer that takes over decides again.
  void Notify() const noexcept {
    if (producer.heavy_fence_choice_->load(std::memory_order_relaxed) != 0) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      sluice::detail::FullFence();
    }
    producer.wake_page_->consumer_wake.WakeIfWaiting();
  }
  Observer& Watcher() const noexcept { return producer.observer_; }
};
// The source an empty loan is refused through: its counters differ.
template <typename Producer>
struct ShmEmptyLoanSource : ShmLaneSource<Producer> {
  using EmptyLoanCounters = ShmEmptyLoanCounters<typename Producer::LaneControl>;
  EmptyLoanCounters Counters() const noexcept { return {{this->producer.control_}}; }
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
