// The in-process bus's two sources for the publish core
// (detail/publish/publish_core.hpp): the shared queue, which every unregistered
// producer publishes into, and a registered producer's lane. Each names its
// queue, its counters, its limit, what a fill refusal is called, and how a
// publish enters and leaves it (a lane's close handshake, SYNC POINT (L) in
// detail/queue/producer_lanes.hpp; nothing for the shared queue, which Close
// closes by moving its tail). The mode is read here, once a publish
// (Mode, from BusCore::Mode), and nowhere else on the path. They reach the bus's parts
// as its friends (detail/bus_core.hpp).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Core>
struct BusSourceBase {
  using Clock = typename Core::Clock;
  using Observer = typename Core::Observer;
  static constexpr bool kKeeps = Core::kKeeps;
  static constexpr bool kObserves = Core::kObserves;
  static constexpr bool kModeIsFixed = Core::kModeIsFixed;
  Core& core;
  SLUICE_ALWAYS_INLINE PerformanceMode Mode() const noexcept { return core.Mode(); }
  // SYNC POINT WRITE (W): after the slot's release store, the fence and
  // the waiter load of the consumer's signal, the bus's own or its
  // WaitSet's (sluice/wait_set.hpp): whichever its consumer sleeps on.
  void Notify() const noexcept { core.wake_->Notify(); }
  Observer& Watcher() const noexcept { return core.observer_; }
};

template <typename Core>
struct SharedQueueSource : BusSourceBase<Core> {
  using Target =
      std::conditional_t<Core::kHasLanes, typename Core::Queue, typename Core::SharedQueue>;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = Core::kSlots;
  Target& Slots() const noexcept { return this->core.queue_; }
  typename Core::SharedStatistics& Counters() const noexcept { return this->core.statistics_; }
  static constexpr std::uint16_t Lane() noexcept { return 0; }
  static constexpr bool Enter() noexcept { return true; }
  static constexpr void Leave() noexcept {}
  // After a refused claim: whether Close refused it (the closed tail is
  // over every limit). One that races with Close may be counted either way.
  bool ClosedAfterRefusal() const noexcept { return !this->core.close_.IsOpen(); }
  Position Limit(PerformanceMode mode, MessagePriority priority) const noexcept {
    return this->core.policy_.LimitFor(mode, priority);
  }
  // A refusal for fill: the refused claim saw the shared queue at least at
  // `limit`, the limit it was judged against. That limit, not one read
  // again: thresholds changed since would note a fill the queue never held.
  void NoteRefusedFill(Position limit) const noexcept {
    const Position now = this->core.SharedDepth();
    this->core.gauges_.NoteShared(this->core.policy_, limit > now ? limit : now);
  }
  // Nothing: the shared queue's drained state does not count refused
  // publishes.
  static constexpr void LeftUnadmitted() noexcept {}
};

// A registered producer's lane (only with ProducerLanes). A lane publish
// enters the lane (refused once Close has closed the lanes) and leaves it
// after its last store; its counters are the lane's own, single writer. A
// fill refusal is the lane's: it was open when entered.
template <typename Core>
struct ProducerLaneSource : BusSourceBase<Core> {
  using LaneState = typename Core::Queue::Lane;
  using Target = decltype(std::declval<LaneState&>().queue);
  static constexpr PublishOutcome kFull = PublishOutcome::kLaneFull;
  static constexpr Position kSlots = Core::Lanes::kCapacity;
  LaneState& lane_state;
  std::uint16_t number;  // MessageHeader::lane: 1 to Lanes::kMaxProducers
  Target& Slots() const noexcept { return lane_state.queue; }
  typename Core::LaneStatistics& Counters() const noexcept { return lane_state.statistics; }
  std::uint16_t Lane() const noexcept { return number; }
  bool Enter() const noexcept { return this->core.queue_.BeginLanePublish(lane_state); }
  void Leave() const noexcept { Core::Queue::EndLanePublish(lane_state); }
  static constexpr bool ClosedAfterRefusal() noexcept { return false; }
  Position Limit(PerformanceMode mode, MessagePriority priority) const noexcept {
    return this->core.policy_.LaneLimitFor(mode, priority);
  }
  // A lane's fill is its own (see SharedQueueSource::NoteRefusedFill).
  void NoteRefusedFill(Position limit) const noexcept {
    const Position now = lane_state.queue.Depth();
    this->core.gauges_.NoteLane(this->core.policy_, limit > now ? limit : now);
  }
  // IsDrained counts a lane publish in flight (its `publishing` flag) as
  // not drained, so a consumer that re-checked while this one was in
  // flight and went to sleep must be woken now that it has left (SYNC
  // POINT (W): the flag's store, then the notifier's fence and its load of
  // the waiters). Refusals only: an admitted publish notifies anyway.
  void LeftUnadmitted() const noexcept { this->core.wake_->Notify(); }
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
