// The bus's one observation point. The publish core (detail/publish/publish_core.hpp)
// and the consumer core (detail/consume/consume_core.hpp) tell each event
// here and nowhere else; each event goes to the two observers a bus has:
//
//  - its own, the traits' Observation (sluice/observer.hpp):
//    FullObservation keeps the statistics, the latency histograms, the
//    backpressure peak, the per-producer counts and the error count;
//    NoObservation keeps none, and none of its calls is compiled;
//  - the traits' Observer, a type of the user's (NoObserver: none).
//
// What is kept lives where it is read (a source's counters, a lane's
// counts, the bus's gauges, the consumer's histograms); a source or a
// front names it (below) and only this file writes it:
//
//   source (publish)          kKeeps, kObserves, Watcher(), Counters(),
//                             NoteRefusedFill(limit)
//   front (consume)           kKeeps, kObserves, Watcher(), Mode(),
//                             NoteBatchFill(), BatchFill(), Tally,
//                             Count(tally, header), Flush(tally),
//                             CountError(), Consumer().Latencies()
//
// The run-time mode decides what is kept: a publish is counted in
// FULL_FEATURED only (its header's `counted`), refusals for closed and bad
// input in every mode, latency and the batch's fill in FULL_FEATURED only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/latency_recorder.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Whether an Observer takes a message event with the message's payload
// index (std::variant::index()): OnAdmitted(header, type_index),
// OnTaken(header, type_index), OnDispatched(header, type_index). Each is
// optional: an observer without it gets the header alone, and the core
// reads no index for it.
template <typename Observer, typename = void>
struct HasTypedOnAdmitted : std::false_type {};
template <typename Observer>
struct HasTypedOnAdmitted<Observer, std::void_t<decltype(std::declval<Observer&>().OnAdmitted(
                                        std::declval<const MessageHeader&>(), std::size_t{}))>>
    : std::true_type {};
template <typename Observer, typename = void>
struct HasTypedOnTaken : std::false_type {};
template <typename Observer>
struct HasTypedOnTaken<Observer, std::void_t<decltype(std::declval<Observer&>().OnTaken(
                                     std::declval<const MessageHeader&>(), std::size_t{}))>>
    : std::true_type {};
template <typename Observer, typename = void>
struct HasTypedOnDispatched : std::false_type {};
template <typename Observer>
struct HasTypedOnDispatched<Observer, std::void_t<decltype(std::declval<Observer&>().OnDispatched(
                                          std::declval<const MessageHeader&>(), std::size_t{}))>>
    : std::true_type {};
// Whether an Observer takes the message itself (header and payload) when
// it is taken: OnTakenMessage(const MessageEnvelope<Payload>&), optional
// (sluice/record/flight_recorder.hpp keeps a copy). The core passes it only
// to an observer that has it.
template <typename Observer, typename Envelope, typename = void>
struct HasOnTakenMessage : std::false_type {};
template <typename Observer, typename Envelope>
struct HasOnTakenMessage<Observer, Envelope,
                         std::void_t<decltype(std::declval<Observer&>().OnTakenMessage(
                             std::declval<const Envelope&>()))>> : std::true_type {};
// Whether an Observer lets the consumer take a run of messages before it
// dispatches them (`static constexpr bool kTakesRuns = true;`): its
// OnTaken events need not come just before each message's dispatch. One
// without it (a tracer, which pairs each OnTaken with the dispatch after
// it) gets one message at a time. An observer with OnDispatched, which
// follows each message's dispatch, cannot take runs.
template <typename Observer, typename = void>
struct ObserverTakesRuns : std::false_type {};
template <typename Observer>
struct ObserverTakesRuns<Observer, std::void_t<decltype(Observer::kTakesRuns)>>
    : std::bool_constant<Observer::kTakesRuns> {};
// Whether an Observer has the optional OnClosed(): the bus was closed.
template <typename Observer, typename = void>
struct HasOnClosed : std::false_type {};
template <typename Observer>
struct HasOnClosed<Observer, std::void_t<decltype(std::declval<Observer&>().OnClosed())>>
    : std::true_type {};
// Whether an Observer has the optional OnLaneEvent(event).
template <typename Observer, typename = void>
struct HasOnLaneEvent : std::false_type {};
template <typename Observer>
struct HasOnLaneEvent<Observer, std::void_t<decltype(std::declval<Observer&>().OnLaneEvent(
                                    std::declval<const LaneEvent&>()))>> : std::true_type {};
// Whether an Observer has the optional OnDispatched(header).
template <typename Observer, typename = void>
struct HasOnDispatched : std::false_type {};
template <typename Observer>
struct HasOnDispatched<Observer, std::void_t<decltype(std::declval<Observer&>().OnDispatched(
                                     std::declval<const MessageHeader&>()))>> : std::true_type {};

// The events of one publish into `source`. Every call is behind a
// compile-time test of the observer it reaches, so that with NoObserver not
// even an empty call reaches the inliner (whose per-function budget it
// would spend: the instruction budget's BARE_METAL rows rose by 4 a message
// when they were plain calls).
struct ObservePublish {
  // Whether a publish in `mode` is counted: then Claimed is told before
  // its messages become visible, and its header says so (`counted`).
  template <typename Source>
  SLUICE_ALWAYS_INLINE static bool Counts(PerformanceMode mode) noexcept {
    return Source::kKeeps && mode == PerformanceMode::FULL_FEATURED;
  }

  // `count` messages claimed, before they become visible (processed never
  // runs ahead of published, SYNC POINT (F)), and before their envelopes
  // are written: with several producers the count is a locked instruction,
  // which would otherwise wait for the envelope's stores to reach a cache
  // line the consumer may be polling. Only when Counts().
  template <typename Source>
  SLUICE_ALWAYS_INLINE static void Claimed(const Source& source, MessagePriority priority,
                                           Position count) noexcept {
    if constexpr (Source::kKeeps) source.Counters().CountPublished(priority, count);
  }

  // The payload index of the envelope just written, for an observer that
  // takes it with OnAdmitted (else 0, and nothing is read). Read before
  // the slot is published: after it, the slot is the consumer's.
  template <typename Source, typename Envelope>
  SLUICE_ALWAYS_INLINE static std::size_t TypeIndex(const Source& source,
                                                    const Envelope& written) noexcept {
    (void)source;
    if constexpr (Source::kObserves &&
                  HasTypedOnAdmitted<std::decay_t<decltype(source.Watcher())>>::value) {
      return written.payload.index();
    } else {
      (void)written;
      return 0;
    }
  }

  // A message published: its header as written into the slot, made by
  // `make_header()` only when there is an observer to see it (a header made
  // here, or returned from the publish core, cost 4 instructions a publish
  // even with NoObserver: GCC 12 -O3), and its payload index (TypeIndex).
  template <typename Source, typename MakeHeader>
  SLUICE_ALWAYS_INLINE static void Admitted(const Source& source, const MakeHeader& make_header,
                                            std::size_t type_index) noexcept {
    if constexpr (Source::kObserves) {
      if constexpr (HasTypedOnAdmitted<std::decay_t<decltype(source.Watcher())>>::value) {
        source.Watcher().OnAdmitted(make_header(), type_index);
      } else {
        (void)type_index;
        source.Watcher().OnAdmitted(make_header());
      }
    } else {
      (void)source;
      (void)make_header;
      (void)type_index;
    }
  }

  // `count` messages refused with `outcome`: closed in every mode, a drop
  // (kRefusedFull, kLaneFull, kPoolEmpty, kTimedOut, kWouldDeadlock) only
  // in FULL_FEATURED.
  template <typename Source>
  SLUICE_ALWAYS_INLINE static void Refused(const Source& source, PublishOutcome outcome,
                                           PerformanceMode mode, MessagePriority priority,
                                           Position count) noexcept {
    if constexpr (Source::kKeeps) {
      if (outcome == PublishOutcome::kClosed) {
        source.Counters().CountClosed(count);
      } else if (mode == PerformanceMode::FULL_FEATURED) {
        source.Counters().CountDropped(priority, count);
      }
    }
    if constexpr (Source::kObserves) source.Watcher().OnRefused(outcome, priority, count);
  }

  // A claim refused for fill, judged against `limit`: for the peak, whether
  // or not the refusal is counted (PublishBlocking counts one a call).
  template <typename Source>
  SLUICE_ALWAYS_INLINE static void RefusedForFill(const Source& source, Position limit) noexcept {
    if constexpr (Source::kKeeps) source.NoteRefusedFill(limit);
  }

  // Bad input (a valueless variant, an unknown priority), in every mode.
  template <typename Source>
  SLUICE_ALWAYS_INLINE static void Rejected(const Source& source,
                                            MessagePriority priority) noexcept {
    if constexpr (Source::kKeeps) source.Counters().CountRejected();
    if constexpr (Source::kObserves) {
      source.Watcher().OnRefused(PublishOutcome::kRejected, priority, 1);
    }
  }
};

// The events of one dispatch batch of `front`.
struct ObserveConsume {
  // Before the batch's first message: the fill it starts from, for the
  // peak (FULL_FEATURED).
  template <typename Front>
  SLUICE_ALWAYS_INLINE static void BatchBegins(Front& front) noexcept {
    if constexpr (Front::kKeeps) {
      if (front.Mode() == PerformanceMode::FULL_FEATURED) front.NoteBatchFill();
    }
    if constexpr (Front::kObserves) front.Watcher().OnBatchBegin(front.BatchFill());
  }

  // A message's callbacks or visitor have returned (or thrown, reported),
  // before its slot is released: the traits' Observer's OnDispatched, for
  // an observer that has one (the event is optional, so observers written
  // before it still compile). A front that observes dispatches one message
  // at a time (ConsumeCore::kRunLength), so this follows each one.
  template <typename Front, typename Envelope>
  SLUICE_ALWAYS_INLINE static void Dispatched(Front& front, const Envelope& envelope) noexcept {
    using Observer = std::decay_t<decltype(front.Watcher())>;
    // Every dispatch loop calls this: the one place the rule is checked.
    static_assert(
        !Front::kObserves || !ObserverTakesRuns<Observer>::value ||
            !(HasOnDispatched<Observer>::value || HasTypedOnDispatched<Observer>::value),
        "Sluice: an observer that takes runs (kTakesRuns) cannot have OnDispatched: a run's "
        "messages are dispatched together");
    if constexpr (Front::kObserves && HasTypedOnDispatched<Observer>::value) {
      front.Watcher().OnDispatched(envelope.header, envelope.payload.index());
    } else if constexpr (Front::kObserves && HasOnDispatched<Observer>::value) {
      front.Watcher().OnDispatched(envelope.header);
    } else {
      (void)front;
      (void)envelope;
    }
  }

  // A message taken, before its dispatch, for an observer that takes its
  // payload index (OnTaken(header, type_index)); the run's `taken(header)`
  // tells every other observer. Called by the dispatch loops right after
  // `taken`, behind `if constexpr (Front::kObserves)`: a run's `taken`
  // that took the envelope instead of its header cost the shared-memory
  // bus 11 instructions a message with NoObserver (GCC 12 -O3).
  // The message itself goes to an observer that takes it
  // (OnTakenMessage), after its header's stamp is in nanoseconds.
  template <typename Front, typename Envelope>
  SLUICE_ALWAYS_INLINE static void TakenWithType(Front& front, const Envelope& envelope) noexcept {
    using Observer = std::decay_t<decltype(front.Watcher())>;
    if constexpr (Front::kObserves && HasTypedOnTaken<Observer>::value) {
      front.Watcher().OnTaken(envelope.header, envelope.payload.index());
    }
    if constexpr (Front::kObserves && HasOnTakenMessage<Observer, Envelope>::value) {
      front.Watcher().OnTakenMessage(envelope);
    }
    (void)front;
    (void)envelope;
  }

  // After the batch's last message.
  template <typename Front>
  SLUICE_ALWAYS_INLINE static void BatchEnds(Front& front, std::uint32_t count) noexcept {
    if constexpr (Front::kObserves) {
      front.Watcher().OnBatchEnd(count);
    } else {
      (void)front;
      (void)count;
    }
  }

  // A callback or the visitor threw: counted, then seen, before the error
  // callback runs.
  template <typename Front>
  SLUICE_ALWAYS_INLINE static void Failed(Front& front, const BusError& error) noexcept {
    if constexpr (Front::kKeeps) front.CountError();
    if constexpr (Front::kObserves) {
      front.Watcher().OnError(error);
    } else {
      (void)error;
    }
  }

  // Runs a batch's messages: `run(taken, taken_before_reading, clock)`,
  // which calls `taken(header)` for each message before its dispatch (then
  // TakenWithType) and
  // returns how many it took; `clock` says when `taken` reads the clock
  // next (TakenBeforeReading(), ReadsFreshClock: see
  // LatencyRecorder::Batch), for a run that takes several messages up
  // before their dispatch. Such a run may take the messages it knows to
  // come before that reading with `taken_before_reading(header)`, which
  // counts nothing towards it, and then count them with
  // clock.TakenBeforeReading(count). Around
  // it: the processed tally, counted per message and added at the end, and
  // the latency histograms, whose batch reads the clock (FULL_FEATURED,
  // histograms on). `run` is instantiated with and without latency
  // recording, so a run that records nothing tests nothing per message.
  template <typename Clock, std::uint32_t kClockInterval, typename Front, typename Run>
  SLUICE_ALWAYS_INLINE static std::uint32_t Messages(Front& front, Run&& run) {
    if constexpr (!Front::kKeeps) {
      const auto taken = [&front](const MessageHeader& header) SLUICE_LAMBDA_ALWAYS_INLINE {
        if constexpr (Front::kObserves) {
          TakenWithoutType(front, header);
        } else {
          (void)front;
          (void)header;
        }
      };
      NoLatencyBatch none;
      return run(taken, taken, none);
    } else {
      typename Front::Tally tally;
      const auto with = [&](auto& latency) SLUICE_LAMBDA_ALWAYS_INLINE {
        const std::uint32_t count = run(
            [&front, &tally, &latency](const MessageHeader& header) SLUICE_LAMBDA_ALWAYS_INLINE {
              latency.Add(header);
              front.Count(tally, header);
              if constexpr (Front::kObserves) TakenWithoutType(front, header);
            },
            // A message the run knows to come before the histograms'
            // next reading (LatencyRecorder::Batch::AddBeforeReading).
            [&front, &tally, &latency](const MessageHeader& header) SLUICE_LAMBDA_ALWAYS_INLINE {
              latency.AddBeforeReading(header);
              front.Count(tally, header);
              if constexpr (Front::kObserves) TakenWithoutType(front, header);
            },
            latency);
        latency.Finish();
        return count;
      };
      std::uint32_t count;
      if (const std::uint64_t now = LatencyClock<Clock>(front); now != 0) {
        // Re-reads the clock every kClockInterval messages (see
        // detail::LatencyRecorder::Batch for the bound this gives).
        auto latency = front.Consumer().Latencies().template BeginBatch<Clock, kClockInterval>(now);
        count = with(latency);
      } else {
        NoLatencyBatch none;
        count = with(none);
      }
      front.Flush(tally);
      return count;
    }
  }

 private:
  // OnTaken(header), for an observer that does not take the payload index
  // (TakenWithType tells one that does).
  template <typename Front>
  SLUICE_ALWAYS_INLINE static void TakenWithoutType(Front& front,
                                                    const MessageHeader& header) noexcept {
    if constexpr (!HasTypedOnTaken<std::decay_t<decltype(front.Watcher())>>::value) {
      front.Watcher().OnTaken(header);
    } else {
      (void)front;
      (void)header;
    }
  }

  // The batch's first clock reading for the latency histograms, or 0 when
  // they are off (traits, mode, or a clock that reads 0): then the batch
  // reads no clock at all.
  template <typename Clock, typename Front>
  SLUICE_ALWAYS_INLINE static std::uint64_t LatencyClock(Front& front) noexcept {
    using Recorder = std::decay_t<decltype(front.Consumer().Latencies())>;
    if constexpr (!Recorder::kRecords) {
      (void)front;
      return 0;
    } else {
      if (front.Mode() != PerformanceMode::FULL_FEATURED) return 0;
      return ClockNanos<Clock>();
    }
  }
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
