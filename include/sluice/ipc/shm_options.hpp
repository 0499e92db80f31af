// The shared-memory bus's public value types: its traits, its options,
// its statistics and what a producer's exit reports (sluice/ipc/shm_bus.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "sluice/admission.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// The parts of the in-process traits the shared bus uses: its delivery
// order's knobs (always priority order across processes) and the
// subscription table's sizes, and how many producer processes it holds.
struct ShmBusTraits {
  // Part of the fingerprint: raise it when a payload type changes in a way
  // its name, size and alignment do not show (fields reordered or retyped
  // alike, a field put where padding was), so old and new builds refuse
  // each other.
  static constexpr std::uint64_t kSchemaVersion = 0;
  // Producers attached at once (ShmProducer objects, in any processes):
  // each has a lane of kCapacity messages per priority in the segment.
  static constexpr std::size_t kMaxProducers = 8;
  // Blocks each lane lends for Loaned<T> alternatives (1 to 64), each as
  // large as the largest such T; none when the payload has no Loaned<T>.
  static constexpr std::size_t kLoanBlocks = 8;
  // The consumer's publish-to-dispatch histograms (ShmBus::
  // GetLatencyHistograms): LatencyHistograms<kClockInterval> or
  // NoLatencyHistograms.
  using Latency = LatencyHistograms<>;
  static constexpr std::size_t kMaxSubscribersPerType = 16;
  static constexpr std::size_t kCallbackStorageBytes = 48;
  static constexpr std::uint32_t kCheckInterval = 1;
  static constexpr std::uint32_t kStarvationLimit = 0;
  // As DefaultBusTraits::CatchUp (sluice/bus_traits.hpp): ProcessBatch's
  // pause after an empty poll that follows a batch.
  using CatchUp = CatchUpPause<>;
  // Looks at the queue (or for room) this many times, with a pause before
  // each, before a wait parks on its futex.
  static constexpr std::uint32_t kPollsBeforePark = 256;
  // What else sees each event (sluice/observer.hpp), in the process where
  // it happens: each ShmProducer's own observer its admissions and
  // refusals (OnAdmitted, OnRefused), the ShmBus's its batches, the
  // messages it takes and errors (OnBatchBegin with the fullest lane's
  // fill, OnTaken, OnBatchEnd, OnError). NoObserver, or a type of your own;
  // not part of the segment, so the two sides may name different ones.
  using Observer = NoObserver;
};

struct ShmBusOptions {
  SegmentPermissions permissions;
  // Fixed for the segment's life; producers read them at Attach.
  AdmissionThresholds thresholds;
  // How often, at most, each side looks whether the other still runs.
  // ProcessBatch looks for producer processes that exited without
  // detaching (two system calls per attached producer) on a batch that
  // took nothing, or after 4,096 batches; 0: on every such batch
  // (ShmBus::CheckProducers looks at once). It is also the longest a wait
  // sleeps between two looks (1 ms when 0): ProcessBatchWait (a producer
  // killed between its publish and its wake-up call costs at most that),
  // and PublishBlocking (a consumer killed wakes no one).
  std::chrono::nanoseconds peer_check_interval = std::chrono::milliseconds(10);
};

// What the consumer process counted; `published` and `dropped` come from
// the segment (every producer's publishes). It is the in-process bus's
// snapshot (BusStatisticsSnapshot: messages_published, messages_dropped,
// messages_processed and processing_errors, each also by priority, filled
// from the fields below; nothing is rejected or refused as closed in its
// counts, which producers do not report), with what only a bus across
// processes has.
struct ShmBusStatistics : BusStatisticsSnapshot {
  std::uint64_t published[kPriorityCount] = {};  // admitted, by every producer
  std::uint64_t dropped[kPriorityCount] = {};    // refused: for room, or an empty loan
  std::uint64_t processed = 0;                   // dispatched by this consumer
  std::uint64_t corrupt = 0;  // skipped: a priority or alternative index out of range
  // Skipped: taken from a lane that held more messages of its priority and
  // below than that priority's threshold admits (only a producer that
  // skips admission makes one).
  std::uint64_t over_limit = 0;
  std::uint64_t callback_errors = 0;     // a subscriber, visitor or exit handler threw (counted)
  std::uint64_t producers_attached = 0;  // lanes taken: held now, killed or detached
  std::uint64_t lost = 0;                // claims a killed producer never published, skipped
  std::uint64_t producers_killed = 0;    // lanes taken back from processes that exited attached
  std::uint64_t producers_detached = 0;  // lanes handed back by Detach (or a destructor)
  std::uint64_t taken_over =
      0;  // messages queued when Create took over a killed consumer's segment
  // Taken over: the message the killed consumer had taken from its ring and
  // not finished dispatching (0 or 1): it reached none, some or all of its
  // subscribers, and is not dispatched again.
  std::uint64_t lost_in_hand = 0;
};

// A producer's lane handed back, reported to ShmBus::OnProducerExit after
// everything it published has been dispatched.
struct ProducerExit {
  std::uint16_t lane = 0;  // 1..kMaxProducers, as MessageHeader::lane of its messages
  std::int32_t pid = 0;  // its process, as the kernel named it to the consumer at Attach (a label)
  bool killed = false;   // its process exited without detaching
  std::uint64_t lost = 0;  // its claims never published (killed between claim and publish)
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
