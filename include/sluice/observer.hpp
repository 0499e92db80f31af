// The bus's observation point: one type in the bus traits (`using Observer
// = ...;`) that the publish core and the consumer core call at each event,
// so that a tracing or recording back end is one new type in one file
// (tests/counting_observer.hpp is one). The default, NoObserver, is empty:
// its calls compile to nothing, and a bus that names it costs what it cost
// before (the instruction budget, tools/check_instruction_budget.sh).
//
// The events, and who calls them (an observer must be safe for that):
//   OnAdmitted(header)        a producer, after the message was published
//                             (its header as written into the slot); any
//                             number of producer threads at once, and an
//                             interrupt handler where producers are ones.
//   OnRefused(outcome, priority, count)
//                             a producer, for `count` messages refused and
//                             counted in the statistics (kRefusedFull,
//                             kLaneFull, kPoolEmpty, kClosed, kRejected,
//                             kTimedOut, kWouldDeadlock); a PublishAttempt's
//                             refusal, which is not counted, is not seen.
//   OnBatchBegin(fill)        the consumer, before a dispatch batch's first
//                             message (the shared queue's fill then).
//   OnTaken(header)           the consumer, per message, before its
//                             callbacks or visitor run.
//   OnDispatched(header)      the consumer, per message, once its callbacks
//                             or visitor have returned (or thrown: after
//                             OnError), before its slot is released, so
//                             before the bus can read as drained. Optional:
//                             an observer without it is not called.
//   OnBatchEnd(count)         the consumer, after the batch's last message.
//   OnError(error)            the consumer, when a callback or the visitor
//                             threw, after the error is counted and before
//                             the error callback runs.
//   OnClosed()                the call that closed the bus (Close), once,
//                             after producers are refused and woken; on the
//                             shared-memory bus, its consumer's Close.
//                             Optional: an observer without it is not
//                             called.
//   OnLaneEvent(event)        the shared-memory bus's consumer process, as
//                             a producer's lane changes hands (LaneEvent):
//                             kAttached on its hand-out thread, before the
//                             producer has the lane (so before any of the
//                             lane's messages is taken); kExited and
//                             kHandedBack on the consumer thread. None
//                             after Close. Optional.
// Each is noexcept and must not call the bus it observes: no publish, no
// dispatch, no Close or Create (its own counts are its concern). The
// in-process bus holds no lock while an event runs; the shared-memory bus
// tells kAttached and kExited holding the lock its hand-out shares with
// its liveness check, which Close also takes.
// A message event may also take the payload's index (std::variant::index()):
// OnAdmitted(header, type_index), OnTaken(header, type_index),
// OnDispatched(header, type_index), each optional and called instead of the
// header-only form where the observer has it; the core reads the index only
// for an observer that takes it (sluice/trace/tracing_observer.hpp does).
// The message itself, header and payload, goes to an observer that takes
// it when it is taken: OnTakenMessage(const MessageEnvelope<Payload>&),
// optional (sluice/record/flight_recorder_observer.hpp keeps a copy). An
// observer that declares `static constexpr bool kTakesRuns = true;` lets
// the consumer take a run of messages before it dispatches them (their
// OnTaken events then come before the run's dispatch); it may not have
// OnDispatched (a compile-time error).
//
// Every event goes to two observers, in one place
// (detail/observe/observation.hpp): the traits' Observer, and before it
// the bus's own observation (`using Observation = ...;`), which keeps what
// GetStatistics, GetLatencyHistograms, TakeBackpressurePeak and
// ForEachProducer read. FullObservation, the default, keeps them all
// (what the performance mode allows: sluice/performance_mode.hpp).
// NoObservation keeps none, for a bus that never reads them (a
// microcontroller's smallest bus): none of its calls is compiled, its
// statistics and every producer's counts read 0, its histograms are empty
// and its peak is the gauges' level at the time it is read. The gauges
// (GetBackpressureLevel, GetQueueDepth), the error callback and this
// Observer work as with FullObservation.
#pragma once

#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// The bus keeps its statistics, latency histograms, backpressure peak,
// producer counts and error count (the default).
struct FullObservation {
  static constexpr bool kKeeps = true;
};
// The bus keeps none of them; see above.
struct NoObservation {
  static constexpr bool kKeeps = false;
};

// A shared-memory bus's producer lane changing hands (OnLaneEvent).
enum class LaneEventKind : std::uint8_t {
  kAttached = 1,  // a producer process was given the lane
  kExited = 2,    // its producer left: detached, or exited without detaching (killed)
  // Its last message was taken; told before the lane is free for the next
  // producer, so before that producer's kAttached.
  kHandedBack = 3,
};
struct LaneEvent {
  LaneEventKind kind = LaneEventKind::kAttached;
  std::uint16_t lane = 0;  // 1.., as MessageHeader::lane of its messages
  std::int32_t pid = 0;    // the producer's process, as the kernel named it to the consumer
  bool killed = false;     // kExited, kHandedBack: it exited without detaching
  std::uint64_t lost = 0;  // kHandedBack: its claims never published (killed mid-publish)
};

// Observes nothing; every call compiles to nothing.
struct NoObserver {
  void OnAdmitted(const MessageHeader&) noexcept {}
  void OnRefused(PublishOutcome, MessagePriority, std::uint64_t) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {}
  void OnTaken(const MessageHeader&) noexcept {}
  void OnDispatched(const MessageHeader&) noexcept {}
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const BusError&) noexcept {}
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
