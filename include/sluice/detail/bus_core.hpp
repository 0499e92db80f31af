// The bus behind the facade (sluice/bus.hpp): its parts, the one publish
// core every publish goes through (on the bus and on a Producer) and the one
// consumer core every batch goes through. The hot path of a bus, publish and
// dispatch, reads top to bottom in this file:
//
//   publish:  PublishApi (detail/publish/publish_api.hpp): bad input, copy
//             -> Admit: mode, clock, claim under the limit, count,
//                envelope, publish, wake
//   dispatch: RunBatch: guard, epoch -> DispatchRun: per message latency,
//             processed tally, dispatch, destroy and release -> counts
//
// Each optional feature is a part here whose default is empty and whose
// calls compile to nothing: the wake signal and the room signals (a Parker
// in the traits), the latency recorder (Latency), the producer
// lanes (Lanes), the priority rings (Delivery).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/admission.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/close_state.hpp"
#include "sluice/detail/consume/consume_core.hpp"
#include "sluice/detail/consume/dispatch_epoch.hpp"
#include "sluice/detail/consume/error_reporter.hpp"
#include "sluice/detail/consume/subscription_registry.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/detail/consume/visit_envelope.hpp"
#include "sluice/detail/observe/backpressure_gauges.hpp"
#include "sluice/detail/observe/latency_recorder.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/detail/observe/statistics_counters.hpp"
#include "sluice/detail/publish/admission_policy.hpp"
#include "sluice/detail/publish/bus_sources.hpp"
#include "sluice/detail/publish/publish_core.hpp"
#include "sluice/detail/queue/message_queue.hpp"
#include "sluice/detail/queue/producer_lanes.hpp"
#include "sluice/detail/wait/consumer_wake.hpp"
#include "sluice/detail/wait/room_signals.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/publish_result.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Payload, std::size_t kCapacity, ProducerModel kProducers, typename Traits>
class BusCore : public PublishCore<Payload> {
  static_assert(IsVariant<Payload>::value,
                "Sluice: the bus payload must be a std::variant of message types");
  static_assert(std::is_nothrow_move_constructible_v<Payload>,
                "Sluice: every payload alternative must be nothrow move constructible, "
                "so that a claimed slot is always filled");
  static_assert(!Traits::kRequireTriviallyCopyablePayloads ||
                    TriviallyCopyableAlternatives<Payload>::value,
                "Sluice: kRequireTriviallyCopyablePayloads is set, so every payload alternative "
                "must be trivially copyable (no std::vector, std::string or other type that "
                "owns memory)");
  static_assert(kCapacity <= (std::size_t{1} << 31),
                "Sluice: the capacity must be at most 2^31 slots (a batch counts in 32 bits)");
  static_assert(CheckTraits<Traits>());

 public:
  using Envelope = MessageEnvelope<Payload>;
  using Delivery = typename Traits::Delivery;
  using Lanes = typename Traits::Lanes;
  using Latency = typename Traits::Latency;
  using Observer = typename Traits::Observer;
  // The bus's two observers (detail/observe/observation.hpp): its own
  // (kKeeps: FullObservation keeps statistics, histograms, peak and
  // counts) and the traits' Observer (kObserves: not NoObserver).
  static constexpr bool kKeeps = Traits::Observation::kKeeps;
  static constexpr bool kObserves = !std::is_same_v<Observer, NoObserver>;
  Observer& observer() noexcept { return observer_; }
  const Observer& observer() const noexcept { return observer_; }
  static constexpr bool kPriorityOrder = Delivery::kOrder == DeliveryOrder::kPriority;
  static constexpr bool kHasLanes = Lanes::kMaxProducers > 0;
  using Parker = typename Traits::Waiting::Parker;
  static constexpr std::uint32_t kPollsBeforePark = Traits::Waiting::kPollsBeforePark;
  // Whether threads may park: the consumer in ProcessBatchWait, producers in
  // PublishBlocking.
  static constexpr bool kCanPark = !std::is_same_v<Parker, NoParker>;
  // A bus of a WaitSet (Waiting = WaitInSet<Parker>): constructed with its set.
  static constexpr bool kJoinsWaitSet = JoinsWaitSet<typename Traits::Waiting>::value;

  static_assert(!kHasLanes || Delivery::kStarvationLimit == 0,
                "Sluice: producer lanes need strict priority order (PriorityDelivery's "
                "starvation limit 0)");

  // The queue of one source: the shared queue (every unregistered producer)
  // or a producer lane.
  template <std::size_t kSlots, ProducerModel kModel>
  using SourceQueue =
      std::conditional_t<kPriorityOrder,
                         PriorityQueue<Envelope, kSlots, kModel, Traits::kSlotStorage,
                                       Delivery::kCheckInterval, Delivery::kStarvationLimit>,
                         FifoQueue<Envelope, kSlots, kModel, Traits::kSlotStorage>>;
  using SharedQueue = SourceQueue<kCapacity, kProducers>;
  using SharedStatistics =
      std::conditional_t<kKeeps, StatisticsCounters<kProducers == ProducerModel::kSingle>,
                         NoStatisticsCounters>;
  using LaneStatistics = StatisticsCounters<true, true>;
  using Queue = std::conditional_t<
      kHasLanes,
      LanedQueue<Envelope, SharedQueue, SourceQueue<Lanes::kCapacity, ProducerModel::kSingle>,
                 Lanes::kMaxProducers, Delivery::kOrder, Lanes::kBurst, Delivery::kCheckInterval,
                 typename Lanes::HeavyFence, LaneStatistics>,
      SharedQueue>;
  using Policy = AdmissionPolicy<kCapacity, Lanes::kCapacity>;

  explicit BusCore(Position first_position) noexcept : queue_(first_position) {}

  // The publish core (detail/publish/publish_core.hpp), shared with every bus.
  using Publisher = PublishCore<Payload>;

  // ---- Sources: where a publish goes ----------------------------------------
  // The publish core takes one of two (detail/publish/bus_sources.hpp): the shared
  // queue, or a producer's lane.
  using Clock = typename Traits::Clock;
  static constexpr Position kSlots = kCapacity;
  using SharedSource = SharedQueueSource<BusCore>;
  using LaneSource = ProducerLaneSource<BusCore>;
  SharedSource Shared() noexcept { return SharedSource{{*this}}; }
  LaneSource Lane(std::uint32_t index) noexcept {
    return LaneSource{{*this}, queue_.LaneAt(index), static_cast<std::uint16_t>(index + 1)};
  }

  // ---- Publish calls the core does not do alone ----------------------------------

  // PublishLoan of an empty Loan (its pool was exhausted): kClosed, counted
  // where `source` counts closed refusals, once the bus is closed; else
  // kPoolEmpty, a drop counted in the shared statistics whatever the source,
  // since a lane's own drop count is its refusals for fill (the shared
  // refusal counters are atomic: any producer may write them).
  template <typename Source>
  PublishResult RefuseEmptyLoan(Source& source, MessagePriority priority) noexcept {
    const PerformanceMode mode = Mode();
    if (!close_.IsOpen()) {
      return Publisher::Refuse(source, PublishOutcome::kClosed, mode, priority, 1);
    }
    SharedSource shared = Shared();
    return Publisher::Refuse(shared, PublishOutcome::kPoolEmpty, mode, priority, 1);
  }

  // ---- The consumer core ---------------------------------------------------------
  // Every batch runs in the one consumer core (detail/consume/consume_core.hpp),
  // with this bus as its front: it takes each message in place, from the
  // queue's front, and frees its slot after dispatch. (The bus itself, not
  // a front object holding a pointer to it: the core's loop would reload
  // that pointer after every callback.)
  std::uint32_t DispatchToSubscriptions(std::uint32_t max_messages) {
    return consume_.DispatchToSubscriptions(*this, max_messages);
  }
  template <typename Visitor>
  std::uint32_t DispatchToVisitor(Visitor& visitor, std::uint32_t max_messages) {
    return consume_.DispatchToVisitor(*this, visitor, max_messages);
  }
  bool IsDispatching() const noexcept { return consume_.Dispatching(); }

  // The room a batch draws from, for the catch-up pause's limit
  // (detail/consume/catch_up_pacer.hpp): the shared queue, or a lane when
  // lanes are smaller.
  static constexpr Position kCatchUpRoom =
      Lanes::kMaxProducers > 0 && Lanes::kCapacity < kCapacity ? Lanes::kCapacity : kCapacity;
  // The front, for the consumer core.
  SLUICE_ALWAYS_INLINE ConsumeCore<Payload, Traits>& Consumer() noexcept { return consume_; }
  SLUICE_ALWAYS_INLINE Envelope* First() noexcept { return queue_.TryFront(); }
  SLUICE_ALWAYS_INLINE Envelope* Next() noexcept { return queue_.TryFront(); }
  SLUICE_ALWAYS_INLINE void Release() noexcept { queue_.PopFront(); }
  // One ring in position order (neither lanes nor priority order): the core
  // may look past the front, slot by slot (FrontPosition, KnownPublished,
  // RunSlotAt and the calls after it), and release a run at once.
  static constexpr Position kLookAhead = kHasLanes || kPriorityOrder ? 0 : kCapacity - 1;
  SLUICE_ALWAYS_INLINE Position FrontPosition() const noexcept { return queue_.ConsumerPosition(); }
  SLUICE_ALWAYS_INLINE Position KnownPublished() const noexcept { return queue_.KnownPublished(); }
  // (Templates and deduced types: only a queue of one ring has them.)
  static constexpr std::size_t kSlotStride = Queue::kSlotStride;
  static constexpr Position SlotsToEnd(Position position) noexcept {
    return Queue::SlotsToEnd(position);
  }
  SLUICE_ALWAYS_INLINE auto RunSlotAt(Position position) noexcept {
    return queue_.RunSlotAt(position);
  }
  template <typename RunSlot>
  SLUICE_ALWAYS_INLINE static RunSlot NextRunSlot(RunSlot slot) noexcept {
    return Queue::NextRunSlot(slot);
  }
  template <typename RunSlot>
  SLUICE_ALWAYS_INLINE bool IsPublishedIn(RunSlot slot, Position position) noexcept {
    return queue_.IsPublishedIn(slot, position);
  }
  template <typename RunSlot>
  SLUICE_ALWAYS_INLINE static Envelope* EnvelopeIn(RunSlot slot) noexcept {
    return Queue::EnvelopeIn(slot);
  }
  template <typename RunSlot>
  static const unsigned char* RunBytes(RunSlot slot) noexcept {
    return Queue::RunBytes(slot);
  }
  SLUICE_ALWAYS_INLINE void ReleaseRun(Position count) noexcept { queue_.PopFronts(count); }
  // The mode in force: the one place it is read, by every publish (through
  // its source), every batch, RoomFor and GetPerformanceMode. A FixedMode
  // is a constant here, so no test of it is compiled anywhere.
  static constexpr bool kModeIsFixed = Traits::Mode::kFixed;
  SLUICE_ALWAYS_INLINE PerformanceMode Mode() const noexcept {
    if constexpr (Traits::Mode::kFixed) {
      return Traits::Mode::kValue;
    } else {
      return policy_.Mode();
    }
  }
  // A batch runs on the consumer's thread (a PublishBlocking there would
  // wait for itself).
  SLUICE_ALWAYS_INLINE void BeginBatch() noexcept { room_.EnterBatch(); }
  // The batch released slots: wake producers waiting for that room.
  SLUICE_ALWAYS_INLINE void EndBatch(std::uint32_t) noexcept {
    room_.LeaveBatch();
    room_.NotifyWaiters(/*only_with_room=*/true,
                        [this](MessagePriority priority) { return RoomFor(priority) != 0; });
  }

  // What the observation keeps of a batch and who else sees it
  // (detail/observe/observation.hpp): the fill it starts from, for the
  // peak between scrapes; the error count; the processed tally, below.
  Observer& Watcher() noexcept { return observer_; }
  Position BatchFill() const noexcept { return SharedDepth(); }
  SLUICE_ALWAYS_INLINE void NoteBatchFill() noexcept { gauges_.NoteShared(policy_, SharedDepth()); }
  void CountError() noexcept { statistics_.CountError(); }
  // Processed messages, counted per priority (see
  // detail/observe/statistics_counters.hpp): in a run's tally, added to the shared
  // statistics at its end; with lanes, by the lane each came through.
  struct Tally {
    Counter counted[kPriorityCount] = {};
  };
  SLUICE_ALWAYS_INLINE void Count(Tally& tally, const MessageHeader& header) noexcept {
    if constexpr (kHasLanes) {
      (void)tally;
      queue_.TallyProcessed(header);
    } else {
      tally.counted[static_cast<std::size_t>(header.priority)] += header.counted ? 1 : 0;
    }
  }
  SLUICE_ALWAYS_INLINE void Flush(Tally& tally) noexcept {
    if constexpr (kHasLanes) {
      (void)tally;
      queue_.FlushProcessed(statistics_);
    } else {
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        statistics_.CountProcessed(tally.counted[p], static_cast<MessagePriority>(p));
      }
    }
  }

  // ---- Waiting -----------------------------------------------------------------

  // Consumer: true once a message is ready, false when `timeout` passed
  // first or the bus is drained (nothing will ever come).
  bool WaitForMessage(std::chrono::nanoseconds timeout) {
    // In a WaitSet: sleeps on the set's signal, which any bus of the set
    // may wake (a spurious wake-up here: WaitUntil re-checks this bus).
    return WaitUntil(
               *wake_, kPollsBeforePark, timeout, [this] { return queue_.TryFront() != nullptr; },
               [this] { return IsDrained(); }) == WaitEnd::kReady;
  }

#if !SLUICE_FREESTANDING
  // PublishBlocking: admits through `source` as Admit does, waiting up to
  // `timeout` for room below the priority's threshold (room_signals.hpp,
  // SYNC POINT (R)), or until Close. A refusal is counted once.
  template <typename Source, typename MakePayloadFn>
  PublishResult AdmitWaiting(Source& source, std::uint32_t sender_id, MessagePriority priority,
                             std::chrono::nanoseconds timeout, MakePayloadFn& make_payload) {
    return Publisher::AdmitWaiting(source, sender_id, priority, make_payload, [&](auto& try_admit) {
      if (IsClosed()) return PublishOutcome::kClosed;
      if (room_.InsideBatchOnThisThread()) return PublishOutcome::kWouldDeadlock;
      switch (room_.WaitForRoom(priority, kPollsBeforePark, timeout, try_admit,
                                [this] { return IsClosed(); })) {
        case WaitEnd::kReady:
          return PublishOutcome::kAdmitted;
        case WaitEnd::kStopped:
          return PublishOutcome::kClosed;
        case WaitEnd::kTimedOut:
          break;
      }
      return PublishOutcome::kTimedOut;
    });
  }
#endif

  // ---- Room --------------------------------------------------------------------

  // How many more messages of `priority` admission would take into the
  // shared queue now: the priority's limit under the mode in force, less the
  // shared queue's fill, from the numbers a claim compares. 0 once closed,
  // or for an unknown priority. Any thread; an estimate while other
  // producers publish.
  Position RoomFor(MessagePriority priority) const noexcept {
    if (!IsValidPriority(priority) || IsClosed()) return 0;
    return RoomBelow(policy_.LimitFor(Mode(), priority), SharedDepth());
  }
  // As RoomFor, for producer lane `index`, on the lane's own limit and fill.
  Position LaneRoomFor(std::uint32_t index, MessagePriority priority) const noexcept {
    if (!IsValidPriority(priority) || IsClosed()) return 0;
    return RoomBelow(policy_.LaneLimitFor(Mode(), priority), queue_.LaneAt(index).queue.Depth());
  }
  static constexpr Position RoomBelow(Position limit, Position fill) noexcept {
    return fill < limit ? limit - fill : 0;
  }

#if !SLUICE_FREESTANDING
  // Waits up to `timeout` until RoomFor(priority) > 0 (true), or
  // false at the timeout or once the bus is closed. With a parker: the
  // wait of PublishBlocking, woken by the consumer's batch that makes room
  // (SYNC POINT (R)), and false at once on the consumer's own thread inside
  // a batch (it would wait for itself); without one: WaitUntil's looks
  // without a signal (yields, then short sleeps).
  bool WaitForRoom(MessagePriority priority, std::chrono::nanoseconds timeout) {
    const auto has_room = [this, priority] { return RoomFor(priority) != 0; };
    const auto closed = [this] { return IsClosed(); };
    if (has_room()) return true;
    if (!IsValidPriority(priority) || IsClosed()) return false;
    if constexpr (kCanPark) {
      if (room_.InsideBatchOnThisThread()) return false;
      return room_.WaitForRoom(priority, kPollsBeforePark, timeout, has_room, closed) ==
             WaitEnd::kReady;
    } else {
      NoSignal no_signal;
      return WaitUntil(no_signal, kPollsBeforePark, timeout, has_room, closed) == WaitEnd::kReady;
    }
  }
#endif

  // ---- Shutdown ------------------------------------------------------------------

  // See AsyncBus::Close. Every call returns without waiting on another: the
  // close is idempotent (CloseState), so a call preempted by another (a
  // signal handler on the same thread) is finished by the one that
  // preempted it, which closes the queue itself.
  void Close() noexcept {
    if (close_.IsClosed()) return;
    const bool first = close_.Begin();
    const Position tail = queue_.Close();
    close_.Finish(tail);
    wake_->Notify();
    // Every producer waiting for room re-checks and finds the bus closed.
    room_.NotifyWaiters(/*only_with_room=*/false, [](MessagePriority) { return true; });
    // The optional event, once: told by the call that began the close.
    if constexpr (HasOnClosed<Observer>::value) {
      if (first) observer_.OnClosed();
    } else {
      (void)first;
    }
  }

  bool IsClosed() const noexcept { return close_.IsClosed(); }

  bool IsDrained() const noexcept {
    if (!close_.IsClosed()) return false;
    // Wrap-safe: the consumer never passes the closed tail.
    if (queue_.Released() != close_.ClosedTail()) return false;
    if constexpr (kHasLanes) {
      return queue_.LanesDrained();
    } else {
      return true;
    }
  }

  // The gauges (detail/observe/backpressure_gauges.hpp) cover what admission
  // judges: the shared queue and, with producer lanes, each lane on its own
  // capacity. Any thread.
  using Gauges = BackpressureGauges<kCapacity, Lanes::kCapacity, Lanes::kMaxProducers,
                                    Traits::kBackpressureScale>;
  using Gauge = typename Gauges::Gauge;
  BackpressureLevel LaneLevelOf(Position fill) const noexcept {
    return Gauges::LaneLevelOf(policy_, fill);
  }
  Gauge Fullest() const noexcept {
    return Gauges::Fullest(policy_, SharedDepth(),
                           [this](auto lane) { return this->LaneDepth(lane); });
  }
  // The peak of the gauges since the last Take (TakeBackpressurePeak), at
  // least what they read now.
  BackpressurePeak TakePeak() noexcept { return gauges_.Take(Fullest()); }
  BackpressurePeak PeekPeak() const noexcept { return gauges_.Peek(Fullest()); }

  Position SharedDepth() const noexcept {
    if constexpr (kHasLanes) {
      return queue_.SharedDepth();
    } else {
      return queue_.Depth();
    }
  }

  // ---- Named operations for the front ends ---------------------------------------
  // What the facade (bus.hpp), a Producer (lane_producer.hpp) and a WaitSet
  // (wait_set.hpp) ask of the bus; its parts are private below.

  // Producer lanes (only with ProducerLanes).
  int RegisterLane(const char* name) noexcept { return queue_.Register(name); }
  void UnregisterLane(std::uint32_t lane) noexcept { queue_.Unregister(lane); }
  bool ReadLaneHolder(std::uint32_t lane, ProducerStatisticsSnapshot* out) const noexcept {
    return queue_.ReadHolder(lane, out);
  }
  std::size_t LanesTaken() const noexcept { return queue_.LanesTaken(); }
  BusStatisticsSnapshot LaneCounts(std::uint32_t lane) const noexcept {
    return queue_.LaneAt(lane).statistics.Snapshot();
  }
  Position LaneDepth(std::uint32_t lane) const noexcept {
    return queue_.LaneAt(lane).queue.Depth();
  }

  // Subscriptions, the error callback, the histograms.
  auto& Subscriptions() noexcept { return consume_.Subscriptions(); }
  const auto& Subscriptions() const noexcept { return consume_.Subscriptions(); }
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return consume_.Subscriptions().Unsubscribe(handle, consume_.Epoch());
  }
  bool SetErrorCallback(ErrorCallback callback, void* context) noexcept {
    return consume_.Errors().Set(callback, context, consume_.Epoch());
  }
  LatencySnapshot Latencies() const noexcept { return consume_.Latencies().Snapshot(); }

  // The counters: the shared ones, every lane's added in.
  BusStatisticsSnapshot Statistics() const noexcept {
    BusStatisticsSnapshot snapshot = statistics_.Snapshot();
    if constexpr (kHasLanes) {
      for (std::uint32_t i = 0; i < Lanes::kMaxProducers; ++i) {
        AddStatistics(&snapshot, queue_.LaneAt(i).statistics.Snapshot());
      }
    }
    return snapshot;
  }
  // The counters and the latency histograms.
  void ResetStatistics() noexcept {
    statistics_.Reset();
    if constexpr (kHasLanes) {
      for (std::uint32_t i = 0; i < Lanes::kMaxProducers; ++i) queue_.LaneAt(i).statistics.Reset();
    }
    consume_.Latencies().Reset();
  }

  // The mode (Mode(), above, reads it) and the thresholds.
  void SetMode(PerformanceMode mode) noexcept {
    static_assert(!Traits::Mode::kFixed,
                  "Sluice: this bus's mode is fixed (`using Mode = sluice::FixedMode<...>;` in its "
                  "traits); SetPerformanceMode needs `using Mode = sluice::RunTimeMode;`");
    policy_.SetMode(mode);
  }
  bool SetThresholds(const AdmissionThresholds& thresholds) noexcept {
    return policy_.SetThresholds(thresholds);
  }
  AdmissionThresholds Thresholds() const noexcept { return policy_.Thresholds(); }

  // Messages admitted and not yet released (with lanes: theirs too).
  Position Depth() const noexcept { return queue_.Depth(); }

  // A WaitSet's: the signal this bus's consumer sleeps on, and whether a
  // message is ready.
  template <typename Signal>
  void JoinWaitSet(Signal* signal) noexcept {
    wake_.Join(signal);
  }
  template <typename Signal>
  bool UsesSignal(const Signal* signal) const noexcept {
    return wake_.Uses(signal);
  }
  bool HasReadyMessage() noexcept { return queue_.TryFront() != nullptr; }

 private:
  friend struct TestAccess;
  friend struct BusSourceBase<BusCore>;
  friend struct SharedQueueSource<BusCore>;
  friend struct ProducerLaneSource<BusCore>;

  // ---- The parts -------------------------------------------------------------------
  using WakeSignalType = std::conditional_t<kCanPark, WakeSignal<Parker>, NoWakeSignal>;

  Queue queue_;
  Policy policy_;
  ConsumerWake<WakeSignalType> wake_;
  // PublishBlocking's room signals and the thread inside a batch; empty
  // without a parker.
  RoomSignals<Parker, kCanPark && !SLUICE_FREESTANDING> room_;
  CloseState close_;
  Gauges gauges_;
  SharedStatistics statistics_;
  // The consumer's parts: subscriptions, epoch, error reporter, latency
  // histograms, re-entrancy guard.
  ConsumeCore<Payload, Traits> consume_;
  // The traits' observer. An observer with counters that producers write
  // should keep them on lines of their own.
  Observer observer_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
