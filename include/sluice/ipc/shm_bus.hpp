// The bus across processes on one host: one consumer process creates the
// bus's shared-memory objects and dispatches (ShmBus, here); producer
// processes attach, each given a lane, and publish
// (sluice/ipc/shm_producer.hpp). No daemon. Linux. The parts' layout and
// their protocol, each release named with its acquire: sluice/ipc/shm_layout.hpp.
//
// ShmBus is the facade: it opens the bus and closes it, runs each batch and
// sleeps; its parts are the consumer's hold on the segment, which makes it
// or takes it over and hands out lanes (sluice/ipc/shm_consumer_segment.hpp;
// sluice/ipc/shm_session.hpp judges a name another segment holds), the
// consumer's side of the producers' lanes (sluice/ipc/shm_lanes.hpp), the
// consumer core's front that takes each message out of the segment
// (sluice/ipc/shm_front.hpp) and the gauges, peak and statistics
// (sluice/ipc/shm_statistics.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/admission.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/consume/catch_up_pacer.hpp"
#include "sluice/detail/consume/consume_core.hpp"
#include "sluice/detail/observe/peak_fill.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/error.hpp"
#include "sluice/ipc/address_reservation.hpp"
#include "sluice/ipc/create_steps.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/host_clock.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/lane_handout_service.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_consumer_segment.hpp"
#include "sluice/ipc/shm_front.hpp"
#include "sluice/ipc/shm_lanes.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/ipc/shm_producer.hpp"
#include "sluice/ipc/shm_session.hpp"
#include "sluice/ipc/shm_set_view.hpp"
#include "sluice/ipc/shm_statistics.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"
#include "sluice/wait_set.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// The consumer: creates the segment and dispatches what producer processes
// publish, HIGH first. One thread dispatches (ProcessBatch,
// ProcessBatchWith, CheckProducers); Subscribe and Unsubscribe are safe from
// any thread of this process. Not movable (subscriptions point into it).
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmBus {
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using LaneControl = typename LayoutType::LaneControl;
  // The consumer core's front: the core, the lanes, the batch and the counts.
  using Front = detail::ShmFront<Payload, kCapacity, Traits>;
  using ConsumeCore = typename Front::ConsumeCore;
  // The segment as the consumer holds it: made or taken over, named, the
  // hand-out of lanes.
  using ConsumerSegment = detail::ConsumerSegment<Payload, kCapacity, Traits>;

 public:
  using Envelope = MessageEnvelope<Payload>;
  static constexpr std::size_t kSegmentSize = LayoutType::kSegmentSize;

  ShmBus() noexcept = default;
  ShmBus(const ShmBus&) = delete;
  ShmBus& operator=(const ShmBus&) = delete;
  ~ShmBus() { Close(); }

  // Creates the segment `name` ("/name") and opens the bus. A segment of
  // that name left by a consumer that exited (or was killed) is removed
  // and made again, or taken over; one whose consumer still runs is
  // kConsumerExists; one of another user or group, or of a wider mode than
  // `options.permissions`, is kUntrustedSegment.
  //
  // The protocol (tests/spin/segment_create.pml; ConsumerSegment::Create,
  // sluice/ipc/shm_consumer_segment.hpp): the new segment is made whole and
  // unnamed, then linked under the name, which fails while the name is
  // taken; a taken name is judged under the lock of the segment it names,
  // rechecked to name it still, and removed or taken over while that lock
  // is held. So no half-made segment is ever named, a consumer killed at
  // any step leaves the name made, stale or free (never stuck), and two
  // consumers are never both told that they made or took it.
  [[nodiscard]] AttachError Create(const std::string& name, const ShmBusOptions& options = {}) {
    // From a callback of this bus (even after a Close there) its batch is
    // still running and would count into the new bus: refused.
    if (segment_.IsOpen() || front_.Consumer().Dispatching()) {
      return AttachError::kConsumerExists;
    }
    if (!options.thresholds.IsValid() || options.peer_check_interval.count() < 0) {
      return AttachError::kBadOptions;
    }
    if (!IsSegmentName(name)) return AttachError::kBadName;
    // The clock's offset, read now, before this process can move its
    // children into another time namespace.
    HostMonotonicClock::ReadForThisProcess();
    std::uint64_t lost_in_hand = 0;
    const AttachError error = segment_.Create(name, options, &lost_in_hand);
    if (error != AttachError::kNone) return error;
    BeginConsuming(options, lost_in_hand);
    return AttachError::kNone;
  }

  // Removes the names of the bus `name`: its header's, its wake page's,
  // each lane's, and its hand-out socket (what Close removes of its own
  // bus). For a bus whose consumer was killed and will not be started
  // again; processes that have it mapped keep it, and a consumer that
  // still runs dispatches on, but no producer can attach by that name, and
  // no consumer take it over. Names of another user's bus are left (the
  // directory is sticky).
  static void RemoveName(const std::string& name) { ConsumerSegment::RemoveName(name); }

  // Whether Create took over a segment whose consumer had been killed (its
  // queued messages are dispatched by this one) rather than making one.
  bool TookOver() const noexcept { return segment_.TookOver(); }

  // Closes the bus: producers' publishes are refused (kClosed) from now on,
  // and producers waiting for room are woken; the name is removed (the
  // memory goes with the last mapping). What is still queued is not
  // dispatched. Then Create may be called again; GetStatistics keeps the
  // closed bus's figures until then. From a child forked after Create (a
  // copy of this object), it only unmaps: the bus is the parent's.
  void Close() noexcept {
    if (!segment_.IsOpen()) return;
    // No lane is handed out from here on (a request being answered is
    // finished first).
    segment_.StopHandout();
    if (segment_.IsCreator()) {
      // (X): the state, then the cursors; a refused producer asks its
      // cursor too, so a refusal by a closed cursor says kClosed whichever
      // it sees first.
      segment_.SegmentHeader()->state.store(detail::kClosed, std::memory_order_relaxed);
      front_.Lanes().CloseQueues();
      // SYNC POINT WRITE (R): the state, then every producer waiting for
      // room wakes to read it.
      sluice::detail::FullFence();
      front_.Lanes().WakeEveryRoom();
      front_.Counts().totals = GetStatistics();
      // The traits' Observer's optional OnClosed (sluice/observer.hpp).
      if constexpr (sluice::detail::HasOnClosed<typename Traits::Observer>::value) {
        front_.Watcher().OnClosed();
      }
      segment_.RemoveOwnNames();
    }
    if (front_.Consumer().Dispatching()) {
      // From a callback: the message being dispatched may be a loan, read
      // in place by the subscribers still to come, so the mapping stays
      // until the batch ends (Run), and the batch takes nothing more.
      retired_ = segment_.ReleaseRange();
      front_.MarkClosed();
    }
    segment_.Unmap();
  }

  bool IsOpen() const noexcept { return segment_.IsOpen(); }

  // ---- Subscriptions (any thread of this process) -----------------------------

  template <typename T, typename Callback>
  [[nodiscard]] SubscriptionHandle Subscribe(Callback&& callback) {
    return front_.Consumer().Subscriptions().template Subscribe<T>(
        std::forward<Callback>(callback));
  }
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return front_.Consumer().Subscriptions().Unsubscribe(handle, front_.Consumer().Epoch());
  }

  // Called on the consumer thread, from ProcessBatch, each time a
  // producer's lane is handed back (after its last message was taken).
  // Set it before dispatching.
  void OnProducerExit(std::function<void(const ProducerExit&)> handler) {
    front_.Lanes().OnExit(std::move(handler));
  }

  // ---- Dispatch (the consumer thread) -------------------------------------------

  // Dispatches up to `max_messages` to the subscribers of each message's
  // type; returns how many were taken from the queue (corrupt ones too).
  // A callback that throws is counted (callback_errors) and reported to the
  // error callback; the batch goes on.
  std::uint32_t ProcessBatch(std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this](std::uint32_t max) {
      return ConsumeCore::DispatchToSubscriptions(front_, max);
    });
  }

  // As the in-process bus's ProcessBatchWith: the visitor takes (const T&)
  // or (const T&, const MessageHeader&) for every alternative, or the
  // envelope. A visitor that throws is counted and reported; the batch goes on.
  template <typename Visitor>
  std::uint32_t ProcessBatchWith(Visitor&& visitor, std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this, &visitor](std::uint32_t max) {
      return ConsumeCore::DispatchToVisitor(front_, visitor, max);
    });
  }

  // As the in-process bus's SetErrorCallback (sluice/bus.hpp): called on the
  // consumer thread for each callback or visitor that threw; nullptr removes it.
  [[nodiscard]] bool SetErrorCallback(ErrorCallback callback, void* context = nullptr) noexcept {
    return front_.Consumer().Errors().Set(callback, context, front_.Consumer().Epoch());
  }

  // Publish-to-dispatch latency per priority since Create, in nanoseconds,
  // as the in-process bus keeps it (sluice/bus.hpp, GetLatencyHistograms):
  // from each message's timestamp_ns (HostMonotonicClock in the producer's
  // process: one clock for the host, in any time namespace) to the consumer's
  // latest reading of it before it took the message up: never above the
  // true latency. A stamp ahead of the consumer's clock (written wrong) is
  // measured to a fresh reading, then 0; messages stamped 0 are not counted.
  LatencySnapshot GetLatencyHistograms() const noexcept {
    return front_.Consumer().Latencies().Snapshot();
  }
  // The traits' observer (ShmBusTraits::Observer): the consumer's events.
  typename Traits::Observer& GetObserver() noexcept { return front_.Watcher(); }
  const typename Traits::Observer& GetObserver() const noexcept { return front_.Watcher(); }

  // As ProcessBatch, but when nothing is queued it waits up to `timeout`
  // for a message: it polls kPollsBeforePark times, then sleeps on a futex
  // in the segment until a publish wakes it (no lost wake-up: (W)), in
  // slices of the producer check interval. Returns how many it took: 0
  // when the timeout passed with nothing queued, or when closed.
  template <typename Rep, typename Period>
  std::uint32_t ProcessBatchWait(std::chrono::duration<Rep, Period> timeout,
                                 std::uint32_t max_messages = kCapacity) {
    if (max_messages == 0) return 0;
    return RunWaiting(sluice::detail::SaturatingNanos(timeout),
                      [&] { return ProcessBatch(max_messages); });
  }

  // As ProcessBatchWith, waiting as ProcessBatchWait does.
  template <typename Visitor, typename Rep, typename Period>
  std::uint32_t ProcessBatchWithWait(Visitor&& visitor, std::chrono::duration<Rep, Period> timeout,
                                     std::uint32_t max_messages = kCapacity) {
    if (max_messages == 0) return 0;
    return RunWaiting(sluice::detail::SaturatingNanos(timeout),
                      [&] { return ProcessBatchWith(visitor, max_messages); });
  }

  // Looks now for producers that left: a lane whose process exited without
  // detaching (killed), or that detached. Their published messages are
  // still dispatched; then their claims never published are skipped and
  // counted lost, and the lane is handed back (OnProducerExit). ProcessBatch
  // calls it itself (ShmBusOptions::peer_check_interval).
  void CheckProducers() {
    // A lane handed back loses its refusal counts: the peak notes them first.
    gauges_.NoteRefusals(front_.Lanes());
    front_.Lanes().CheckProducers(front_, front_.Consumer().Dispatching());
  }

  // ---- Observation ---------------------------------------------------------------

  // Messages admitted and not yet taken, in every lane (0 when closed).
  std::size_t QueueDepth() const noexcept {
    if (!segment_.IsOpen()) return 0;
    return front_.Lanes().Depth();
  }

  // The gauges, as the in-process bus's (sluice/bus.hpp) with a lane per
  // producer: admission judges each lane on its own fill, so the gauges
  // read the fullest lane. QueueUtilizationPercent: its fill in percent of
  // kCapacity. GetBackpressureLevel: the highest level among the lanes,
  // following the segment's thresholds (WARNING from the fill at which LOW
  // is refused, CRITICAL from MEDIUM's, FULL at kCapacity). NORMAL and 0
  // when closed. The consumer thread.
  double QueueUtilizationPercent() const noexcept {
    return static_cast<double>(gauges_.Fullest(front_.Lanes()).fill) * 100.0 /
           static_cast<double>(kCapacity);
  }
  BackpressureLevel GetBackpressureLevel() const noexcept {
    return gauges_.Fullest(front_.Lanes()).level;
  }

  // The highest fill of a lane since the last call (or Create) and the
  // highest level GetBackpressureLevel() would have reported at the fills
  // noted; the next period starts at this call. Noted: the gauges at this
  // call, every lane's fill at the start of each dispatch batch, and every
  // refusal for room a producer counted since (a refusal at priority p
  // means its lane held at least p's threshold: the consumer notes that
  // fill, reading the producers' counts, as a producer in another process
  // cannot write this process's peak). So a period in which a priority was
  // refused reports at least the level at which it is refused, as in
  // process. The consumer thread.
  BackpressurePeak TakeBackpressurePeak() noexcept { return gauges_.TakePeak(front_.Lanes()); }
  // As TakeBackpressurePeak, without starting a new period (nor noting
  // anything: the refusals not yet noted count in this answer only).
  BackpressurePeak PeekBackpressurePeak() const noexcept {
    return gauges_.PeekPeak(front_.Lanes());
  }

  // What the in-process bus's exporters (extras/prometheus.hpp) read: every
  // message counted and stamped (no performance mode); each producer's lane
  // as a registered producer, named at Attach (else "pid 1234").
  static constexpr bool kKeepsStatistics = true;
  static constexpr bool kKeepsLatencyHistograms = Traits::Latency::kEnabled;
  static constexpr bool kHasProducerLanes = true;
  static constexpr std::size_t Capacity() noexcept { return kCapacity; }
  static constexpr PerformanceMode GetPerformanceMode() noexcept {
    return PerformanceMode::FULL_FEATURED;
  }
  // Calls `visit(const ProducerStatisticsSnapshot&)` for each lane taken
  // (held, or left and not yet handed back): its admissions (its rings'
  // claims) and refusals for room since its producer took it. The consumer
  // thread.
  template <typename Visit>
  void ForEachProducer(Visit&& visit) const {
    detail::ForEachProducerLane(front_.Lanes(), visit);
  }

  // The consumer thread's figures (from another thread it would be a data
  // race): closed, as they were at Close.
  ShmBusStatistics GetStatistics() const noexcept {
    return detail::ReadStatistics(front_.Lanes(), front_.Counts());
  }

  // ---- In a WaitSet<FutexParker>, with no joining: it sleeps on the segment's futex beside
  // its own (sluice/wait_set.hpp; docs/api.md, "WaitSet").
  static constexpr bool kWakesItsOwnSignal = true;
  static constexpr std::uint32_t kPollsBeforePark = Traits::kPollsBeforePark;

 private:
  template <typename>
  friend class sluice::WaitSet;
  template <typename>
  friend class detail::ShmSetView;
  // What a WaitSet reads of this bus (sluice/ipc/shm_set_view.hpp).
  detail::ShmSetView<ShmBus> WaitSetView() noexcept { return detail::ShmSetView<ShmBus>(this); }

  // What a bus just made or taken over starts from, in this process: the
  // counts, the producer check's interval and the gauges; taken over, what
  // the killed consumer left (`lost_in_hand`, ConsumerSegment::TakeOver).
  void BeginConsuming(const ShmBusOptions& options, std::uint64_t lost_in_hand) {
    front_.Counts() = detail::ConsumerCounts();
    front_.Consumer().Latencies().Reset();
    check_interval_ = options.peer_check_interval;
    sleep_slice_ = detail::SleepSlice(options);
    last_check_ = std::chrono::steady_clock::now();
    // The segment's (a taken-over one keeps its own); the refusals its
    // producers counted before this Create are not this period's.
    gauges_.Begin(segment_.SegmentHeader()->thresholds);
    front_.Lanes().SetLimits(segment_.SegmentHeader()->thresholds);
    gauges_.ForgetRefusals(front_.Lanes());
    if (segment_.TookOver()) {
      front_.Counts().totals.taken_over = QueueDepth();
      front_.Counts().totals.lost_in_hand = lost_in_hand;
    }
  }

  template <typename Batch>
  std::uint32_t RunWaiting(std::chrono::nanoseconds timeout, Batch&& batch) {
    const sluice::detail::Deadline deadline(timeout);
    const std::chrono::nanoseconds slice = sleep_slice_;
    // No catch-up pause here: an empty look is followed by a wait.
    [[maybe_unused]] const sluice::detail::CatchUpHold hold;
    for (;;) {
      if (!segment_.IsOpen() || front_.Consumer().Dispatching()) return 0;
      if (const std::uint32_t taken = batch()) return taken;
      // A batch between slices: a producer killed between its publish and
      // its wake-up call leaves this one asleep with a message queued.
      const std::chrono::nanoseconds left = deadline.Left();
      if (left.count() == 0) return 0;
      // This thread is the signal's only waiter, and not counted now: a
      // count left by a killed consumer (or written by anyone) is wrong.
      auto& wake = segment_.ConsumerWakeSignal();
      if (wake.Waiters() != 0) wake.ForgetWaiters();
      (void)sluice::detail::WaitUntil(
          wake, Traits::kPollsBeforePark, left < slice ? left : slice,
          [this] { return front_.Lanes().HasWork(); }, [] { return false; });
    }
  }

  // One batch: lanes left by their owner tended first, then the consumer
  // core's batch (`dispatch`) with this bus's front, then the loans
  // dispatched go back, the lanes that got room are woken, and now and then
  // producers are looked for.
  template <typename Dispatch>
  std::uint32_t Run(std::uint32_t max_messages, Dispatch&& dispatch) {
    // Inside a callback of this bus: no batch (as in process).
    if (!segment_.IsOpen() || front_.Consumer().Dispatching()) return 0;
    if (front_.Lanes().AnyGone()) {
      // A lane handed back loses its refusal counts: the peak notes them
      // first. (The exit handler may close the bus.)
      gauges_.NoteRefusals(front_.Lanes());
      front_.Lanes().TendGoneLanes(front_, /*dispatching=*/false);
    }
    if (!segment_.IsOpen()) return 0;
    front_.BeginRun(max_messages);
    // The fills this batch starts from, for the peak.
    gauges_.NoteBatchStart(front_.Lanes());
    (void)dispatch(max_messages);
    const std::uint32_t taken = front_.Taken();
    if (front_.ClosedInBatch()) {
      // A callback closed the bus (and may have made it again): the
      // blocks dispatched were the closed segment's, now unmapped.
      retired_ = AddressReservation();
      return taken;
    }
    front_.EndRun();
    if (taken == 0 || ++batches_since_check_ >= kBatchesPerCheck) {
      batches_since_check_ = 0;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_check_ >= check_interval_) {
        last_check_ = now;
        CheckProducers();
      }
    }
    return taken;
  }

  static constexpr std::uint32_t kBatchesPerCheck = 4096;

  // The bus's segment as this consumer holds it: the range, the header
  // (the consumer's role and the name's lock on it), the wake page and the
  // hand-out (sluice/ipc/shm_consumer_segment.hpp); the lanes are front_'s.
  ConsumerSegment segment_{front_};
  // What a batch reaches, through this one member: the consumer core, the
  // lanes, the batch's state and the counts (the core's loop is handed
  // `front_` and reloads no pointer to the bus after a callback).
  Front front_;
  // The segment's thresholds and the peak.
  detail::ShmGauges<Payload, kCapacity, Traits> gauges_;
  // The range a callback closed, mapped until its batch ends.
  AddressReservation retired_;
  std::chrono::nanoseconds check_interval_{0};
  std::chrono::nanoseconds sleep_slice_{0};
  std::chrono::steady_clock::time_point last_check_{};
  std::uint32_t batches_since_check_ = 0;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
