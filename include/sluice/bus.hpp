// AsyncBus: the public facade. Producers publish envelopes into the ring under
// priority admission; one consumer thread dispatches them to subscriptions or
// to a visitor. Every call here forwards to one part of the bus
// (detail/bus_core.hpp holds them and the hot path; docs/design.md maps them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/admission.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/bus_core.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/detail/publish/lane_producer.hpp"
#include "sluice/detail/publish/publish_api.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/error.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/loan_pool.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"
#include "sluice/wait_set.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

inline constexpr std::size_t kDefaultCapacity = 131072;

// A bounded in-process message bus. `Payload` is a std::variant of message
// types; `kCapacity` slots (a power of two) hold envelopes inline.
//
// Threads: any number of producers (one for ProducerModel::kSingle) may
// publish concurrently; exactly one thread at a time may call ProcessBatch or
// ProcessBatchWith. Every other call is safe from any thread.
//
// Ordering: what a producer wrote before a successful publish happens-before
// the callback or visitor that receives the message (publish is release,
// dispatch is acquire).
//
// The publish calls (Publish, PublishWithPriority, PublishFast, Emplace,
// PublishLoan, PublishBatch, PublishBlocking) are documented where they are
// written once for the bus and its Producers: detail/publish/publish_api.hpp.
template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          ProducerModel kProducers = ProducerModel::kMulti, typename Traits = DefaultBusTraits>
class AsyncBus
    : public detail::PublishApi<AsyncBus<Payload, kCapacity, kProducers, Traits>, Payload> {
  using Core = detail::BusCore<Payload, kCapacity, kProducers, Traits>;

 public:
  using Envelope = MessageEnvelope<Payload>;
  // A registered producer's handle (RegisterProducer): the bus's publish
  // calls into a lane of its own (detail/publish/lane_producer.hpp).
  using Producer = detail::LaneProducer<Core, Payload, Traits>;
  // Memory of one slot (sequence number + envelope) and of all slots: one
  // ring of kCapacity, or three with DeliveryOrder::kPriority.
  static constexpr std::size_t kBytesPerSlot = Core::Queue::kBytesPerSlot;
  static constexpr std::size_t kRingBytes = kBytesPerSlot * kCapacity * Core::Queue::kRingCount;
  static constexpr DeliveryOrder kDeliveryOrder = Traits::Delivery::kOrder;
  static constexpr ProducerModel kProducerModel = kProducers;
  // What the bus keeps (Traits::Observation, Traits::Latency), for the
  // exporters (extras/prometheus.hpp).
  static constexpr bool kKeepsStatistics = Core::kKeeps;
  static constexpr bool kKeepsLatencyHistograms = Traits::Latency::kEnabled && kKeepsStatistics;
  static constexpr bool kHasProducerLanes = Core::kHasLanes;

  AsyncBus() : core_(0) {
    static_assert(!Core::kJoinsWaitSet,
                  "Sluice: a bus whose traits say `using Waiting = sluice::WaitInSet<Parker>;` is "
                  "a bus of a WaitSet: construct it with its set, `Bus bus(set);`");
  }
  // For tests: counting starts at `first` (near the wrap), not at 0.
  explicit AsyncBus(detail::FirstPosition first) : core_(first.value) {
    static_assert(!Core::kJoinsWaitSet,
                  "Sluice: a bus whose traits say `using Waiting = sluice::WaitInSet<Parker>;` is "
                  "a bus of a WaitSet: construct it with its set, `Bus bus(set);`");
  }
  // A bus in `set` (sluice/wait_set.hpp): its publishes and Close wake the
  // set's signal, so one thread can sleep on this bus and others with
  // set.Wait or set.ProcessBatchWait. The set must outlive the bus (declare
  // it first). ProcessBatchWait on this bus still works: it sleeps on the
  // set's signal. Needs `using Waiting = sluice::WaitInSet<Parker>;` in the
  // traits, the set's Parker; such a bus has no other constructor.
  template <typename SetParker>
  explicit AsyncBus(WaitSet<SetParker>& set) : core_(0) {
    static_assert(Core::kJoinsWaitSet,
                  "Sluice: a bus joins a WaitSet only with `using Waiting = "
                  "sluice::WaitInSet<Parker>;` in its traits (the set's Parker)");
    static_assert(!Core::kJoinsWaitSet || std::is_same_v<SetParker, typename Core::Parker>,
                  "Sluice: a bus joins only a WaitSet of the Parker its traits name");
    if constexpr (std::is_same_v<SetParker, typename Core::Parker>) {
      // Before the constructor returns, so before any other thread can
      // publish here (handing the bus to one is the synchronisation).
      core_.JoinWaitSet(&set.signal_);
    }
  }
  AsyncBus(const AsyncBus&) = delete;
  AsyncBus& operator=(const AsyncBus&) = delete;
  // Destroys queued payloads and subscription callables. No thread may be
  // publishing or dispatching.
  ~AsyncBus() = default;

  static constexpr std::size_t Capacity() noexcept { return kCapacity; }

  // ---- Producer lanes ----------------------------------------------------------

  // Takes a free lane for the calling producer: a valid Producer, or an
  // invalid one when all Traits::Lanes::kMaxProducers lanes are taken.
  // `name` (optional, NUL-terminated, copied: it need not outlive the call)
  // labels its counters in ForEachProducer and the Prometheus export;
  // a name longer than kProducerNameCapacity - 1 bytes is cut at a UTF-8
  // boundary. Lock-free; any thread. A compile error when the traits allow
  // no lanes.
  [[nodiscard]] Producer RegisterProducer(const char* name = nullptr) noexcept {
    static_assert(Core::kHasLanes,
                  "Sluice: RegisterProducer needs producer lanes: `using Lanes = "
                  "sluice::ProducerLanes<kMaxProducers>;` in the bus traits");
    if constexpr (Core::kHasLanes) {
      const int lane = core_.RegisterLane(name);
      if (lane >= 0) return Producer(&core_, static_cast<std::uint32_t>(lane));
    }
    return Producer();
  }

  // Any thread: calls `visit(const ProducerStatisticsSnapshot&)` for each
  // registered producer, in lane order, with its name and its counters since
  // it registered or since the last ResetStatistics(), whichever came later
  // (counts that go into GetStatistics() too); returns how many it visited.
  // A lane changing hands meanwhile is read again (lock-free) or skipped
  // when it has no holder. Nothing without lanes.
  template <typename Visit>
  std::size_t ForEachProducer(Visit&& visit) const {
    std::size_t visited = 0;
    if constexpr (Core::kHasLanes) {
      for (std::uint32_t i = 0; i < Traits::Lanes::kMaxProducers; ++i) {
        ProducerStatisticsSnapshot snapshot;
        if (!core_.ReadLaneHolder(i, &snapshot)) continue;
        visit(static_cast<const ProducerStatisticsSnapshot&>(snapshot));
        ++visited;
      }
    }
    return visited;
  }

  // How many lanes are taken now (a snapshot).
  std::size_t RegisteredProducers() const noexcept {
    if constexpr (Core::kHasLanes) {
      return core_.LanesTaken();
    } else {
      return 0;
    }
  }

  // ---- Shutdown ---------------------------------------------------------------

  // Closes the bus for good: every publish that starts after Close returns
  // (or after IsClosed() says true) is refused with kClosed, counted in
  // messages_refused_closed; one that overlaps Close is either admitted (and
  // then drained) or refused; what was admitted before stays queued for the
  // consumer, and a sleeping consumer is woken. Idempotent, and it never
  // waits for another Close: a Close that preempts another (a signal
  // handler, an interrupt) closes the bus itself and returns. MPSC: any
  // thread; lock-free (its claim on the tail retries only when a producer
  // claims meanwhile). SPSC: the producer thread (or while it does not
  // publish): its claims are stores, not read-modify-writes. With producer lanes it runs the
  // heavy fence (a system call with MembarrierHeavyFence). No cost on the
  // publish path: closing moves the ring's tail so far that every later
  // claim is refused as over its limit.
  void Close() noexcept { core_.Close(); }

  // Whether the bus is closed: true once a Close has returned; from then on
  // every publish that starts is refused. Any thread; wait-free.
  bool IsClosed() const noexcept { return core_.IsClosed(); }

  // Whether the bus is closed and every message admitted before Close has
  // been dispatched (and destroyed). Any thread; wait-free.
  bool IsDrained() const noexcept { return core_.IsDrained(); }

#if !SLUICE_FREESTANDING
  // Waits up to `timeout` until IsDrained(); returns it. For a thread other
  // than the consumer (which drains by dispatching until IsDrained()): on the
  // consumer thread it only waits out the timeout. False at once when the
  // bus is not closed. Polls, yielding the processor between looks.
  template <typename Rep, typename Period>
  bool Drain(std::chrono::duration<Rep, Period> timeout) const {
    if (!IsClosed()) return false;
    detail::NoSignal no_signal;
    return detail::WaitUntil(
               no_signal, 0, detail::SaturatingNanos(timeout), [this] { return IsDrained(); },
               [] { return false; }) == detail::WaitEnd::kReady;
  }
#endif

  // ---- Consumer (one thread at a time) ---------------------------------------

  // Dispatches up to `max_messages` queued messages to their subscriptions and
  // returns how many it took. Messages of a type without subscribers are
  // consumed silently. A throwing callback is counted and reported, and the
  // remaining subscribers and messages are still dispatched. Called from
  // inside a callback, it returns 0. Wait-free apart from the callbacks.
  // The first call that finds the queue empty just after one that took
  // messages may spin a few pause instructions first (Traits::CatchUp,
  // adapting and often skipped; docs/api.md, "The catch-up pause").
  std::uint32_t ProcessBatch(std::uint32_t max_messages = kCapacity) {
    return core_.DispatchToSubscriptions(max_messages);
  }

  // As ProcessBatch, but when nothing is queued it waits up to `timeout` for
  // a message instead of returning 0 at once: it polls the queue
  // Traits::Waiting::kPollsBeforePark times, then sleeps on its Parker until a
  // publish wakes it (no lost wake-up: docs/design.md, "The sleeping
  // consumer"). Returns how many it dispatched: 0 when the timeout passed
  // with nothing queued, when the bus is drained, or when called from inside
  // a callback (which never waits). Needs a parker in the traits, e.g.
  // SleepingConsumerTraits.
  template <typename Rep, typename Period>
  std::uint32_t ProcessBatchWait(std::chrono::duration<Rep, Period> timeout,
                                 std::uint32_t max_messages = kCapacity) {
    static_assert(Core::kCanPark,
                  "Sluice: ProcessBatchWait needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    if (core_.IsDispatching() || max_messages == 0) return 0;
    if (!core_.WaitForMessage(detail::SaturatingNanos(timeout))) {
      core_.Consumer().NoteEmptyWait();
      return 0;
    }
    return ProcessBatch(max_messages);
  }

  // As ProcessBatchWith, waiting as ProcessBatchWait does.
  template <typename Visitor, typename Rep, typename Period>
  std::uint32_t ProcessBatchWithWait(Visitor&& visitor, std::chrono::duration<Rep, Period> timeout,
                                     std::uint32_t max_messages = kCapacity) {
    static_assert(Core::kCanPark,
                  "Sluice: ProcessBatchWithWait needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    if (core_.IsDispatching() || max_messages == 0) return 0;
    if (!core_.WaitForMessage(detail::SaturatingNanos(timeout))) {
      core_.Consumer().NoteEmptyWait();
      return 0;
    }
    return ProcessBatchWith(std::forward<Visitor>(visitor), max_messages);
  }

  // Dispatches up to `max_messages` messages to `visitor`, bypassing the
  // subscription table. The visitor is called through std::visit with each
  // message if it accepts every alternative, else as visitor(message, header)
  // if it accepts that for every alternative, else as visitor(envelope).
  // A throwing visitor is counted and reported; the batch goes on.
  template <typename Visitor>
  std::uint32_t ProcessBatchWith(Visitor&& visitor, std::uint32_t max_messages = kCapacity) {
    return core_.DispatchToVisitor(visitor, max_messages);
  }

  // ---- Subscriptions (any thread, also from inside a callback) -------------

  // Registers `callback` for messages of type T, taking (const T&, const
  // MessageHeader&), (const T&) or (const MessageEnvelope<Payload>&). The
  // callable is stored inline. Returns an invalid handle when T already has
  // Traits::kMaxSubscribersPerType subscriptions. Lock-free.
  template <typename T, typename Callback>
  [[nodiscard]] SubscriptionHandle Subscribe(Callback&& callback) {
    return core_.Subscriptions().template Subscribe<T>(std::forward<Callback>(callback));
  }

  // Removes a subscription: true (explicitly convertible) once per live
  // handle of this bus; kNotSubscribed for an invalid, stale, foreign or
  // already used one. From a thread other than the consumer it returns only
  // when the callback is not running and will never run again, so its
  // captured state may be destroyed (it waits for the consumer's current
  // batch). From inside a callback it returns at once: the callback is not
  // called again, and if it is the one running (the caller itself) the
  // result says StillRunning() and the callable is destroyed at the end of
  // the batch. SLUICE_FREESTANDING: the same from an interrupt that preempted
  // the consumer, where StillRunning() means the preempted callback.
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return core_.Unsubscribe(handle);
  }

  // Active subscriptions for payload type T.
  template <typename T>
  std::size_t SubscriberCount() const noexcept {
    static_assert(detail::kIsAlternative<T, Payload>,
                  "Sluice: T must be exactly one alternative of the payload variant");
    return core_.Subscriptions().SubscriberCount(detail::VariantIndex<T, Payload>::kValue);
  }

  // ---- Configuration and observation (any thread) --------------------------

  // Whether the traits fix the mode (FixedMode): then SetPerformanceMode
  // does not compile and GetPerformanceMode is that mode.
  static constexpr bool kModeIsFixed = Traits::Mode::kFixed;
  // Producers waiting in PublishBlocking see a new mode at the consumer's
  // next batch (waking them here would take the parker's lock, which a
  // signal handler must not).
  // A value that is none of the three modes (a cast) is ignored: the mode
  // stays.
  void SetPerformanceMode(PerformanceMode mode) noexcept {
    if (mode == PerformanceMode::FULL_FEATURED || mode == PerformanceMode::BARE_METAL ||
        mode == PerformanceMode::NO_STATS) {
      core_.SetMode(mode);
    }
  }
  PerformanceMode GetPerformanceMode() const noexcept { return core_.Mode(); }

  // Percent fill at which LOW, MEDIUM and HIGH are refused. Returns false and
  // keeps the old thresholds unless 0 < low <= medium <= high <= 100.
  // Waiting producers see the new limits at the consumer's next batch.
  // Taken as int, so that a value out of range is refused, not cut to a
  // byte at the call (356 would have been 100).
  [[nodiscard]] bool SetAdmissionThresholds(int low_percent, int medium_percent,
                                            int high_percent) noexcept {
    const auto in_range = [](int percent) { return percent >= 0 && percent <= 100; };
    if (!in_range(low_percent) || !in_range(medium_percent) || !in_range(high_percent)) {
      return false;
    }
    AdmissionThresholds thresholds;
    thresholds.low_percent = static_cast<std::uint8_t>(low_percent);
    thresholds.medium_percent = static_cast<std::uint8_t>(medium_percent);
    thresholds.high_percent = static_cast<std::uint8_t>(high_percent);
    return core_.SetThresholds(thresholds);
  }
  AdmissionThresholds GetAdmissionThresholds() const noexcept { return core_.Thresholds(); }

  // Called on the consumer thread for each error, with `context`. Pass
  // nullptr to remove. Returns true when the previous callback is not running
  // and will not be called again: from a thread other than the consumer it
  // waits for the consumer's batch and always returns true. False only from
  // inside the error callback itself, or (SLUICE_FREESTANDING) from an
  // interrupt that preempted a report: that report may still call the
  // previous callback once; no later one will.
  [[nodiscard]] bool SetErrorCallback(ErrorCallback callback, void* context = nullptr) noexcept {
    return core_.SetErrorCallback(callback, context);
  }

  // Counters since construction or the last reset. Publish, drop and
  // processed counts advance only in FULL_FEATURED; errors are always counted.
  // With producer lanes: every lane's counters added in.
  BusStatisticsSnapshot GetStatistics() const noexcept { return core_.Statistics(); }

  // Publish-to-dispatch latency per priority since construction or the last
  // reset, in nanoseconds, kept by the consumer in FULL_FEATURED mode: it
  // reads the bus clock at the start of each batch and again every
  // Traits::Latency::kClockInterval (N) messages, and measures each message
  // from its timestamp_ns to the latest reading before the consumer took it
  // up: never more than the true latency to that moment, and short of it by
  // at most the time the consumer spent on the at most N - 1 messages it took
  // before it in the batch. A message published after that reading (taken in
  // the same batch) is measured to a reading the consumer takes then, after
  // it was published, not recorded as 0 (docs/api.md). Messages with
  // timestamp_ns 0 are not counted.
  // Empty with NoLatencyHistograms in the traits.
  LatencySnapshot GetLatencyHistograms() const noexcept { return core_.Latencies(); }

  // Resets the counters and the latency histograms.
  void ResetStatistics() noexcept { core_.ResetStatistics(); }

  // The observer the traits name (sluice/observer.hpp), to read what it
  // saw; its own thread-safety rules apply.
  typename Traits::Observer& GetObserver() noexcept { return core_.observer(); }
  const typename Traits::Observer& GetObserver() const noexcept { return core_.observer(); }

  // Any thread: how many more messages of `priority` admission would take
  // now into the shared queue (a publish without a Producer): the
  // priority's limit under the mode and thresholds in force, less the
  // shared queue's fill, from the numbers a claim compares; 0 once closed
  // or for an unknown priority. An estimate while other producers publish
  // (a publish may still be refused). Each Producer has its lane's.
  std::size_t RoomFor(MessagePriority priority) const noexcept {
    return static_cast<std::size_t>(core_.RoomFor(priority));
  }
#if !SLUICE_FREESTANDING
  // A producer thread, not the consumer (between batches it could only wait
  // out its timeout; inside one, with a parker, it returns false at once):
  // waits up to `timeout` until
  // RoomFor(priority) > 0 and returns true, or returns false at the timeout
  // or once the bus is closed (at once for an unknown priority, and on the
  // consumer's own thread inside a batch with a parker). With a parker in
  // the traits it sleeps until the consumer's batch makes room, as
  // PublishBlocking; without one it yields, then sleeps in short slices. For
  // a producer that wants to publish itself when there is room (a
  // PublishAttempt after it, which may still lose the room to another).
  template <typename Rep, typename Period>
  bool WaitForRoom(MessagePriority priority, std::chrono::duration<Rep, Period> timeout) {
    return core_.WaitForRoom(priority, detail::SaturatingNanos(timeout));
  }
#endif

  // Admitted messages not yet released by the consumer (an estimate while
  // the bus runs). With producer lanes: in the shared queue and every lane.
  std::size_t QueueDepth() const noexcept { return static_cast<std::size_t>(core_.Depth()); }
  // The gauges cover what admission judges: the shared queue and, with
  // producer lanes, every lane, each on its own capacity (each Producer also
  // reports its own lane's). QueueUtilizationPercent: the fullest of them,
  // in percent of its capacity.
  double QueueUtilizationPercent() const noexcept { return core_.Fullest().utilization_percent; }
  // The highest level among them: by default WARNING from the fill at which
  // LOW is refused, CRITICAL from MEDIUM's (following
  // SetAdmissionThresholds); Traits::kBackpressureScale =
  // BackpressureScale::kFixed: 75 % and 90 %. A lane at LOW's threshold of
  // its own capacity reads WARNING although the shared queue is empty.
  BackpressureLevel GetBackpressureLevel() const noexcept { return core_.Fullest().level; }

  // Any thread: the highest fill (in messages, of the shared queue or of
  // one lane) since the last call (or construction) and the highest level
  // GetBackpressureLevel() would have reported at the fills noted (each a
  // maximum of its own, the level classified when noted); the next period
  // starts at this call (reset on read: two observers taking peaks split
  // them between them). Noted: the gauges at this call, what every refusal
  // for fill saw (the shared queue's or the lane's, at least the refused
  // priority's limit; every mode), and the shared queue's fill at the start
  // of each dispatch batch (FULL_FEATURED). So, with the default
  // BackpressureScale, a period in which a priority was refused for fill
  // reports at least the level at which it is refused (LOW: WARNING;
  // MEDIUM and HIGH: CRITICAL; FULL once every slot was taken); a rise that
  // refused nothing and that the consumer took back within one batch can be
  // missed. Lock-free.
  BackpressurePeak TakeBackpressurePeak() noexcept { return core_.TakePeak(); }
  // As TakeBackpressurePeak, without starting a new period.
  BackpressurePeak PeekBackpressurePeak() const noexcept { return core_.PeekPeak(); }

 private:
  friend struct detail::TestAccess;
  template <typename>
  friend class WaitSet;
  friend class detail::PublishApi<AsyncBus, Payload>;
  static constexpr bool kOffersBlocking = true;

  // The publish API's hooks: the shared queue.
  static constexpr bool CanPublish() noexcept { return true; }
  Core& PublishCore() noexcept { return core_; }
  typename Core::SharedSource PublishSource() noexcept { return core_.Shared(); }

  Core core_;
};

template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          typename Traits = DefaultBusTraits>
using MpscBus = AsyncBus<Payload, kCapacity, ProducerModel::kMulti, Traits>;

template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          typename Traits = DefaultBusTraits>
using SpscBus = AsyncBus<Payload, kCapacity, ProducerModel::kSingle, Traits>;

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
