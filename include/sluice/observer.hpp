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
//   OnBatchEnd(count)         the consumer, after the batch's last message.
//   OnError(error)            the consumer, when a callback or the visitor
//                             threw, after the error is counted and before
//                             the error callback runs.
// Each is noexcept and must not publish to or dispatch the bus it observes
// (its own counts are its concern; the bus holds no lock while it runs).
// The statistics, latency histograms, backpressure peak and producer
// tallies are the bus's own observation, kept beside this one.
#pragma once

#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Observes nothing; every call compiles to nothing.
struct NoObserver {
  void OnAdmitted(const MessageHeader&) noexcept {}
  void OnRefused(PublishOutcome, MessagePriority, std::uint64_t) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {}
  void OnTaken(const MessageHeader&) noexcept {}
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const BusError&) noexcept {}
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
