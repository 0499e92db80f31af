// The one consumer core: every batch of every bus (the in-process bus, the
// shared-memory bus) runs here, to its subscriptions or to a visitor. It
// owns what only the consumer uses: the subscription table and its epoch,
// the error reporter, the latency histograms and the re-entrancy guard.
// What differs between buses is where messages come from and what taking
// one means, which the core takes as a front (a template argument):
//
//   Envelope* First()            the first message, or nullptr: no batch
//   Envelope* Next()             after Release: the next, or nullptr
//   void Release()               the message was handed on: free its slot
//   PerformanceMode Mode()       the mode in force
//   void BeginBatch()            before the first message (room, after it is seen)
//   void EndBatch(count)         after the last (room wake-ups)
//   ConsumeCore& Consumer()      this core, a part of the front
//   what the observation needs   detail/observe/observation.hpp, where every
//                                event of a batch goes
//
// The in-process bus's front takes each message in place and frees its
// slot after dispatch (detail/bus_core.hpp); the shared-memory bus's copies
// each one out of the segment, checks it and binds its loan before
// dispatch (ipc/shm_front.hpp).
//
//  - Guard: one batch at a time on the consumer thread; from inside a
//    callback, visitor or error callback (`dispatching_`) it returns 0.
//  - Epoch: a subscription batch reads the subscription table, so it enters
//    the epoch before its first message and leaves after its last. A
//    visitor batch reads no published state: it stays outside, so that
//    Unsubscribe and SetErrorCallback on other threads never wait for a
//    visitor, and enters the epoch only around an error report.
//  - Observation (ObserveConsume) and slot hand-back: DispatchRun, for both;
//    on a front that can look past its front, in runs (DispatchRuns for
//    subscriptions, DispatchEachOfRuns for a visitor).
//  - Errors: ReportError, for both; seen, then reported inside the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/consume/catch_up_pacer.hpp"
#include "sluice/detail/consume/dispatch_epoch.hpp"
#include "sluice/detail/consume/error_reporter.hpp"
#include "sluice/detail/consume/subscription_registry.hpp"
#include "sluice/detail/consume/visit_envelope.hpp"
#include "sluice/detail/observe/latency_recorder.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Traits: Latency (kEnabled, kClockInterval), Clock (the stamps' clock),
// Observation (whether the histograms are kept) and the subscription
// table's sizes. Its batch functions are static and
// reach the core through the front (Front::Consumer()), so that a batch
// that is not inlined holds one pointer, the front's, not two.
// Whether a publish in the traits' mode may stamp the bus clock (a front
// without a mode of its own: yes).
template <typename Traits, typename = void>
struct ModeMayStamp : std::true_type {};
template <typename Traits>
struct ModeMayStamp<Traits, std::void_t<typename Traits::Mode>>
    : std::bool_constant<Traits::Mode::kMayStamp> {};

// A deferred stamp (the bus clock's Stamp(): detail::ClockStamp) turned
// into nanoseconds in the slot before anyone sees the message, which is the
// consumer's from the acquire that found it published on. Converting twice
// changes nothing. A bus fixed in BARE_METAL stamps nothing. The consumer
// keeps the clock's converter (StampConversion), so that a stamp of the
// calibration of the last one it looked up is converted without the
// look-up. The consumer core's base, so that a bus with nothing to convert
// keeps no byte for it.
template <typename Traits, bool kResolves = std::conjunction_v<
                               DefersStampConversion<typename Traits::Clock>, ModeMayStamp<Traits>>>
class StampResolver {
 public:
  SLUICE_ALWAYS_INLINE void Resolve(MessageHeader&) noexcept {}
};
template <typename Traits>
class StampResolver<Traits, true> {
 public:
  SLUICE_ALWAYS_INLINE void Resolve(MessageHeader& header) noexcept {
    if ((header.timestamp_ns & kDeferredStamp) != 0) {
      header.timestamp_ns = converter_.Nanos(header.timestamp_ns);
    }
  }

 private:
  StampConversion<typename Traits::Clock> converter_;  // consumer-private
};

template <typename Payload, typename Traits>
class ConsumeCore : private StampResolver<Traits> {
 public:
  using Envelope = MessageEnvelope<Payload>;
  using Latency = typename Traits::Latency;
  using Registry = SubscriptionRegistry<Payload, Traits>;

  // Whether a batch of this bus is running on this thread (inside a
  // callback, visitor or error callback of it).
  bool Dispatching() const noexcept { return dispatching_; }

  // A subscription batch: each message to its type's callbacks. On a front
  // that can look past its front message, in runs of one type (see
  // DispatchRuns); on any other, message by message.
  template <typename Front>
  static std::uint32_t DispatchToSubscriptions(Front& front, std::uint32_t max_messages) {
    return RunBatch<BatchKind::kSubscriptions>(
        front, max_messages, [&front](const Envelope& current) SLUICE_LAMBDA_ALWAYS_INLINE {
          front.Consumer().registry_.Dispatch(current, [&front, &current](const char* what) {
            ReportError<BatchKind::kSubscriptions>(front, BusErrorCode::kCallbackThrew, current,
                                                   what);
          });
        });
  }

  // A visitor batch: each message to `visitor` (see VisitEnvelope).
  template <typename Front, typename Visitor>
  static std::uint32_t DispatchToVisitor(Front& front, Visitor& visitor,
                                         std::uint32_t max_messages) {
    constexpr bool kHeaderBlind = AcceptsEveryAlternative<Payload, Visitor>(
        std::make_index_sequence<std::variant_size_v<Payload>>{});
    return RunBatch<BatchKind::kVisitor, kHeaderBlind>(
        front, max_messages, [&](const Envelope& current) SLUICE_LAMBDA_ALWAYS_INLINE {
          // A valueless payload is refused by Publish; std::visit would throw.
          if (current.payload.valueless_by_exception()) return;
#if SLUICE_HAS_EXCEPTIONS
          try {
            VisitEnvelope<Payload>(visitor, current);
          } catch (const std::exception& error) {
            ReportError<BatchKind::kVisitor>(front, BusErrorCode::kVisitorThrew, current,
                                             error.what());
          } catch (...) {
            ReportError<BatchKind::kVisitor>(front, BusErrorCode::kVisitorThrew, current,
                                             "non-standard exception");
          }
#else
      VisitEnvelope<Payload>(visitor, current);
#endif
        });
  }

  // What the front ends reach: subscriptions, the error callback, the
  // histograms (their own synchronisation is theirs).
  Registry& Subscriptions() noexcept { return registry_; }
  const Registry& Subscriptions() const noexcept { return registry_; }
  DispatchEpoch& Epoch() noexcept { return epoch_; }
  // A wait (ProcessBatchWait, WaitSet::ProcessBatchWait) that ended with
  // nothing taken: for the catch-up pause, an empty call.
  void NoteEmptyWait() noexcept { catch_up_.NoteEmptyWait(); }
  ErrorReporter& Errors() noexcept { return error_reporter_; }
  using Recorder = LatencyRecorder<Latency::kEnabled && Traits::Observation::kKeeps>;
  Recorder& Latencies() noexcept { return latency_; }
  const Recorder& Latencies() const noexcept { return latency_; }

 private:
  enum class BatchKind { kSubscriptions, kVisitor };
  using Pacer = CatchUpPacer<typename CatchUpOf<Traits>::Type>;

  // How many messages a batch takes in one run: a front that can look
  // `kLookAhead` messages past its front (Position FrontPosition(),
  // Position KnownPublished(), kSlotStride, SlotsToEnd(position),
  // RunSlotAt(position), NextRunSlot(slot), IsPublishedIn(slot, position),
  // EnvelopeIn(slot), RunBytes(slot), void ReleaseRun(n)) and has no
  // traits Observer that sees each dispatch (kObservesEachDispatch: a
  // tracer's OnTaken must come just before each message's dispatch, so
  // that a trace pairs them) takes runs of up to this many; any other
  // front, and bare metal (where an interrupt may unsubscribe between any
  // two calls: freestanding_unsubscribe.pml), one message at a time.
  template <typename Front, typename = void>
  struct LookAheadOf {
    static constexpr Position kValue = 0;
  };
  template <typename Front>
  struct LookAheadOf<Front, std::void_t<decltype(Front::kLookAhead)>> {
    static constexpr Position kValue = Front::kLookAhead;
  };
  static constexpr std::uint32_t kMaxRun = 32;
  template <typename Front>
  using ObserverOf = std::decay_t<decltype(std::declval<Front&>().Watcher())>;
  // Whether `Front`'s observer needs each message's events next to its
  // dispatch (ObserverTakesRuns): then runs are one message long.
  template <typename Front>
  static constexpr bool kObservesEachDispatch =
      Front::kObserves && !ObserverTakesRuns<ObserverOf<Front>>::value;
  template <typename Front>
  static constexpr std::uint32_t kRunLength =
      SLUICE_FREESTANDING || kObservesEachDispatch<Front>
          ? 1
          : static_cast<std::uint32_t>(LookAheadOf<Front>::kValue + 1 < kMaxRun
                                           ? LookAheadOf<Front>::kValue + 1
                                           : kMaxRun);

  // Inlined into ProcessBatch and ProcessBatchWith: with the stamp's test
  // in the loop GCC 12 stopped inlining it there, which cost the one-core
  // BARE_METAL visitor rows 1-3 instructions a message.
  // kHeaderBlind: `dispatch_one` reads no message's header (a visitor that
  // takes the payload alone), so a run that records no latency and has no
  // observer leaves a deferred stamp unconverted: nobody reads it.
  template <BatchKind kKind, bool kHeaderBlind = false, typename Front, typename DispatchOne>
  SLUICE_ALWAYS_INLINE static std::uint32_t RunBatch(Front& front, std::uint32_t max_messages,
                                                     DispatchOne&& dispatch_one) {
    ConsumeCore& self = front.Consumer();
    if (self.dispatching_ || max_messages == 0) return 0;
    Envelope* envelope = front.First();
    if (envelope == nullptr) {
      self.catch_up_.PauseIfJustCaughtUp();
      return 0;
    }
    // Polls inside this batch (a callback polling another bus) never
    // pause. Counted by hand, not held by an object: a destructor on the
    // way out of the batch cost a busy loop registers (4.5 instructions a
    // message, MPSC with histograms); as `dispatching_`, it is left as it
    // is if anything escapes the batch.
    EnterCatchUpBatch();
    ObserveConsume::BatchBegins(front);
    front.BeginBatch();
    self.dispatching_ = true;
    if constexpr (kKind == BatchKind::kSubscriptions) self.epoch_.Enter();
    std::uint32_t count;
#if !SLUICE_FREESTANDING
    if constexpr (kKind == BatchKind::kSubscriptions && kRunLength < Front >> 1) {
      (void)dispatch_one;
      count = DispatchRuns(front, envelope, max_messages);
    } else if constexpr (kKind == BatchKind::kVisitor && kRunLength < Front >> 1) {
      count = DispatchEachOfRuns<kHeaderBlind>(front, envelope, max_messages, dispatch_one);
    } else
#endif
    {
      count = DispatchRun<kHeaderBlind>(front, envelope, max_messages, dispatch_one);
    }
    if constexpr (kKind == BatchKind::kSubscriptions) self.LeaveEpoch();
    self.dispatching_ = false;
    LeaveCatchUpBatch();
    self.catch_up_.NoteTook(count, max_messages, CatchUpRoomOf<Front>::kValue);
    ObserveConsume::BatchEnds(front, count);
    front.EndBatch(count);
    return count;
  }

  // Ends a stretch inside the epoch. Callables unsubscribed on this thread
  // meanwhile (by a callback or the error callback) were deferred to here.
  void LeaveEpoch() noexcept {
    registry_.ReclaimDeferred();
    epoch_.Exit();
  }

  // Hands each ready envelope from `envelope` on (at most `max_messages`)
  // to `dispatch_one` and releases it; each is seen first, where the bus's
  // observation counts it and records its latency
  // (detail/observe/observation.hpp).
  template <bool kHeaderBlind, typename Front, typename DispatchOne>
  SLUICE_ALWAYS_INLINE static std::uint32_t DispatchRun(Front& front, Envelope* envelope,
                                                        std::uint32_t max_messages,
                                                        DispatchOne& dispatch_one) {
    return ObserveConsume::Messages<typename Traits::Clock, Latency::kClockInterval>(
        front, [&](auto&& taken, auto&&, auto&& clock) SLUICE_LAMBDA_ALWAYS_INLINE {
          // Whether anything reads a message's timestamp: the callbacks or
          // visitor, the observer or the latency histograms of this batch.
          constexpr bool kStampsRead =
              !kHeaderBlind || Front::kObserves || std::decay_t<decltype(clock)>::kReadsStamps;
          // Counted down: the count is computed once, after the loop.
          std::uint32_t left = max_messages;
          do {
            if constexpr (kStampsRead) front.Consumer().Stamps().Resolve(envelope->header);
            taken(envelope->header);
            if constexpr (Front::kObserves) ObserveConsume::TakenWithType(front, *envelope);
            dispatch_one(*envelope);
            ObserveConsume::Dispatched(front, *envelope);
            front.Release();
            --left;
          } while (left != 0 && (envelope = front.Next()) != nullptr);
          return max_messages - left;
        });
  }

#if !SLUICE_FREESTANDING
  // DispatchRun for subscriptions, in runs: from `envelope`, the messages
  // of one alternative that are ready, up to kRunLength (and the batch's
  // `max_messages`; one while the type has several subscribers), are each
  // seen, then handed to the type's subscriber together
  // (SubscriptionRegistry::DispatchRun: one call into it for the run), then
  // released together (one release store).
  // Every message is seen before its dispatch and released after it, as
  // message by message, and the latency histograms record what they would
  // one at a time (a run ends before a message whose reading they take);
  // the slots of a run, and what its envelopes own (a loan's block), are
  // freed when the run ends.
  template <typename Front>
  SLUICE_ALWAYS_INLINE static std::uint32_t DispatchRuns(Front& front, Envelope* envelope,
                                                         std::uint32_t max_messages) {
    return ObserveConsume::Messages<typename Traits::Clock, Latency::kClockInterval>(
        front,
        [&](auto&& taken, auto&& taken_before_reading, auto& clock) SLUICE_LAMBDA_ALWAYS_INLINE {
          constexpr std::uint32_t kLength = kRunLength<Front>;
          std::uint32_t count = 0;
          do {
            // Read once: the run's stores could alias them for the compiler.
            const Position front_position = front.FrontPosition();
            // Published for certain (one producer: the consumer's copy of
            // the tail), so looked at without a check; past them, IsPublishedIn.
            const Position known = front.KnownPublished();
            const std::size_t type = envelope->payload.index();
            const std::uint32_t left = max_messages - count;
            // Several subscribers of the type: one message, so that each
            // message's slot is freed after its dispatch, as the messages
            // of a run are not (what the slot holds goes with it).
            std::uint32_t most = !front.Consumer().registry_.HasAtMostOneSubscriber(type) ? 1
                                 : left < kLength                                         ? left
                                                                                          : kLength;
            // ... and ends at the end of the slot array (walked slot by slot).
            const Position to_end = Front::SlotsToEnd(front_position);
            if (to_end < most) most = static_cast<std::uint32_t>(to_end);
            front.Consumer().Stamps().Resolve(envelope->header);
            taken(envelope->header);
            if constexpr (Front::kObserves) ObserveConsume::TakenWithType(front, *envelope);
            const auto first_slot = front.RunSlotAt(front_position);
            auto slot = first_slot;
            // The run ends before a message for which the latency
            // histograms read the clock (a scheduled reading here, a fresh
            // one below): that reading is taken when its dispatch comes next.
            const std::uint32_t before_reading = clock.TakenBeforeReading();
            const std::uint32_t until = before_reading < most - 1 ? before_reading + 1 : most;
            std::uint32_t length = 1;
            // ... and before a message not yet published or of another
            // type. The slot after, within the array; its envelope is
            // looked at only once its position is known to be published:
            // first those known published, one compare a message for the
            // run's length, then each slot tested.
            const auto takes = [&](Envelope* next) SLUICE_LAMBDA_ALWAYS_INLINE {
              // One alternative: every message is of the run's type (a
              // valueless payload is never admitted).
              if constexpr (std::variant_size_v < Payload >> 1) {
                if (next->payload.index() != type) return false;
              }
              front.Consumer().Stamps().Resolve(next->header);
              if (clock.ReadsFreshClock(next->header)) return false;
              // Before the next reading (length < until): counted below.
              taken_before_reading(next->header);
              if constexpr (Front::kObserves) ObserveConsume::TakenWithType(front, *next);
              ++length;
              return true;
            };
            const std::uint32_t sure = known < until ? static_cast<std::uint32_t>(known) : until;
            while (length < sure) {
              slot = Front::NextRunSlot(slot);
              if (!takes(Front::EnvelopeIn(slot))) break;
            }
            // Every known slot taken (a refused one leaves length < sure):
            // the run goes on past them. (>=: several producers know only
            // the front, sure <= 1, which the compiler sees.)
            if (length >= sure) {
              while (length < until) {
                slot = Front::NextRunSlot(slot);
                if (!front.IsPublishedIn(slot, front_position + length) ||
                    !takes(Front::EnvelopeIn(slot))) {
                  break;
                }
              }
            }
            clock.TakenBeforeReading(length - 1);
            front.Consumer().registry_.DispatchRun(
                {Front::RunBytes(first_slot), Front::kSlotStride}, length,
                [&front](const Envelope& current, const char* what) {
                  ReportError<BatchKind::kSubscriptions>(front, BusErrorCode::kCallbackThrew,
                                                         current, what);
                });
            // A front whose observer sees each dispatch has runs one
            // message long: `envelope`.
            static_assert(!kObservesEachDispatch<Front> || kLength == 1,
                          "an observed run is one message");
            ObserveConsume::Dispatched(front, *envelope);
            front.ReleaseRun(length);
            count += length;
          } while (count < max_messages && (envelope = front.Next()) != nullptr);
          return count;
        });
  }
#endif

  // DispatchRun for a visitor, on a front that can look past its front:
  // each message is seen and handed to the visitor in turn, as message by
  // message, but the messages are taken in runs (up to kRunLength<Front>
  // and the batch's `max_messages`; a run ends before a message not yet
  // published) whose slots are released together when the run ends (one
  // release store, as DispatchRuns). The positions are read once a run,
  // so the loop keeps its position in a register: the visitor's stores
  // could alias the front's for the compiler, which otherwise reloaded the
  // position and stored it twice for every message. A run walks first the
  // slots known to be published (KnownPublished), one compare a message,
  // then tests each slot after them.
  template <bool kHeaderBlind, typename Front, typename DispatchOne>
  SLUICE_ALWAYS_INLINE static std::uint32_t DispatchEachOfRuns(Front& front, Envelope* envelope,
                                                               std::uint32_t max_messages,
                                                               DispatchOne& dispatch_one) {
    return ObserveConsume::Messages<typename Traits::Clock, Latency::kClockInterval>(
        front, [&](auto&& taken, auto&&, auto&& clock) SLUICE_LAMBDA_ALWAYS_INLINE {
          constexpr std::uint32_t kLength = kRunLength<Front>;
          // Whether anything reads a message's timestamp (as DispatchRun).
          constexpr bool kStampsRead =
              !kHeaderBlind || Front::kObserves || std::decay_t<decltype(clock)>::kReadsStamps;
          const auto one = [&](Envelope& current) SLUICE_LAMBDA_ALWAYS_INLINE {
            if constexpr (kStampsRead) front.Consumer().Stamps().Resolve(current.header);
            taken(current.header);
            if constexpr (Front::kObserves) ObserveConsume::TakenWithType(front, current);
            dispatch_one(current);
            ObserveConsume::Dispatched(front, current);
          };
          std::uint32_t left = max_messages;
          do {
            const Position front_position = front.FrontPosition();
            // A run ends at the end of the slot array, so that it walks
            // the slots one by one.
            const Position to_end = Front::SlotsToEnd(front_position);
            std::uint32_t most = left < kLength ? left : kLength;
            if (to_end < most) most = static_cast<std::uint32_t>(to_end);
            // Published for certain (one producer: the consumer's copy of
            // the tail; at least the front), so looked at without a check.
            const Position known = front.KnownPublished();
            const std::uint32_t sure = known < most ? static_cast<std::uint32_t>(known) : most;
            auto slot = front.RunSlotAt(front_position);
            std::uint32_t length = 0;
            for (;;) {
              one(*envelope);
              if (++length == sure) break;
              slot = Front::NextRunSlot(slot);
              envelope = Front::EnvelopeIn(slot);
            }
            // Past them, each slot's position is tested for publication
            // before its envelope is looked at.
            while (length < most) {
              slot = Front::NextRunSlot(slot);
              if (!front.IsPublishedIn(slot, front_position + length)) break;
              envelope = Front::EnvelopeIn(slot);
              one(*envelope);
              ++length;
            }
            front.ReleaseRun(length);
            left -= length;
          } while (left != 0 && (envelope = front.Next()) != nullptr);
          return max_messages - left;
        });
  }

  StampResolver<Traits>& Stamps() noexcept { return *this; }

  // Counts an error (ObserveConsume::Failed) and reports it to the error
  // callback, which the reporter reads inside the epoch: a subscription
  // batch is already in it, a visitor batch enters it for the report alone.
  template <BatchKind kKind, typename Front>
  static void ReportError(Front& front, BusErrorCode code, const Envelope& envelope,
                          const char* what) noexcept {
    ConsumeCore& self = front.Consumer();
    BusError error;
    error.code = code;
    error.msg_id = envelope.header.msg_id;
    error.sender_id = envelope.header.sender_id;
    error.type_index = envelope.payload.index();
    error.what = what;
    ObserveConsume::Failed(front, error);
    if constexpr (kKind == BatchKind::kVisitor) self.epoch_.Enter();
    self.error_reporter_.Report(error);
    if constexpr (kKind == BatchKind::kVisitor) self.LeaveEpoch();
  }

  alignas(kCacheLineSize) DispatchEpoch epoch_;
  ErrorReporter error_reporter_;
  bool dispatching_ = false;  // consumer-private re-entrancy guard
  // Consumer-private; packed, at most 6 bytes: in the padding after
  // `dispatching_` whether latency_ is kept or empty (no bus is larger).
  Pacer catch_up_;
  static_assert(alignof(Pacer) == 1 && sizeof(Pacer) <= 6,
                "Sluice: the catch-up pause's state must fit in the core's padding");
  Recorder latency_;
  Registry registry_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
