// Counters behind BusStatisticsSnapshot, laid out so that no cache line is
// written by both sides: producers count admissions on their own line, the
// (rare) refusal path on another, the consumer on a third.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/detail/observe/counter.hpp"
#include "sluice/message.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Counters behind the snapshot. Counts are relaxed, with two exceptions that
// make the documented inequalities hold for any reader at any time:
//  (F) processed <= published: a producer counts a message before it
//      publishes the slot (release, ring SYNC POINT (A)); the consumer counts
//      it after acquiring the slot, and stores the processed count with
//      release; Snapshot() loads processed with acquire before it loads
//      published, so it sees every publish count behind what it processed.
//  (G) no count below its reset: Reset() reads the counters, then stores the
//      baselines with release; Snapshot() loads the baselines with acquire
//      before the counters, so each counter it reads is at least the value
//      its baseline was taken from.
// Processed counts only messages whose publish was counted
// (MessageHeader::counted), whatever the mode at dispatch, and its baseline
// is the published total at the reset: the messages still queued then were
// counted before the reset, and within one priority dispatch is FIFO (a
// priority-ordered bus takes a later HIGH before an earlier LOW, a FIFO bus
// keeps admission order), so processed is counted per priority, each
// against its priority's published baseline. That baseline is not stored:
// a snapshot takes the published baselines it read, so even baselines mixed
// from two overlapping resets (stores are one field at a time) keep
// processed <= published per priority and equal after a drain.
// Adds `more` into `*sum`, field by field (a bus with producer lanes sums
// the lanes' counters into the shared queue's).
inline void AddStatistics(BusStatisticsSnapshot* sum, const BusStatisticsSnapshot& more) noexcept {
  sum->messages_published += more.messages_published;
  sum->messages_dropped += more.messages_dropped;
  sum->messages_processed += more.messages_processed;
  sum->high_priority_processed += more.high_priority_processed;
  sum->medium_priority_processed += more.medium_priority_processed;
  sum->low_priority_processed += more.low_priority_processed;
  sum->processing_errors += more.processing_errors;
  sum->messages_rejected += more.messages_rejected;
  sum->messages_refused_closed += more.messages_refused_closed;
  sum->high_priority_published += more.high_priority_published;
  sum->medium_priority_published += more.medium_priority_published;
  sum->low_priority_published += more.low_priority_published;
  sum->high_priority_dropped += more.high_priority_dropped;
  sum->medium_priority_dropped += more.medium_priority_dropped;
  sum->low_priority_dropped += more.low_priority_dropped;
}

// kSingleWriterRefusals: refusals too have one writer (a producer lane's
// counters), so no count takes a locked instruction.
template <bool kSingleProducer, bool kSingleWriterRefusals = false>
class StatisticsCounters {
  // A producer lane's counters (every count single-writer) are stored with
  // release, so that ForEachProducer, reading them with acquire, retries
  // when it read a count of the lane's next holder (SYNC POINT (N),
  // detail/queue/lane_holder.hpp). A plain store on x86; elsewhere, a release
  // store on a line only that producer writes.
  static constexpr std::memory_order kCountOrder =
      kSingleWriterRefusals ? std::memory_order_release : std::memory_order_relaxed;

 public:
  void CountPublished(MessagePriority priority, Counter count = 1) noexcept {
    Increment<kSingleProducer, kCountOrder>(published_.by_priority[Index(priority)], count);
  }
  void CountDropped(MessagePriority priority, Counter count = 1) noexcept {
    // Any producer, including with kSingleProducer when several threads
    // publish under an external lock: refusals are rare, so always atomic.
    Increment<kSingleWriterRefusals, kCountOrder>(refused_.by_priority[Index(priority)], count);
  }
  // Any producer: bad input (a valueless payload, an unknown priority).
  void CountRejected() noexcept {
    Increment<kSingleWriterRefusals, kCountOrder>(refused_.rejected);
  }
  // Any producer: refused because the bus is closed.
  void CountClosed(Counter count = 1) noexcept {
    Increment<kSingleWriterRefusals, kCountOrder>(refused_.closed, count);
  }
  // Consumer only: `count` dispatched messages of `priority` whose publish
  // was counted.
  void CountProcessed(Counter count, MessagePriority priority) noexcept {
    if (count == 0) return;
    std::atomic<Counter>& processed = consumer_.processed[Index(priority)];
    // SYNC POINT WRITE (F).
    processed.store(static_cast<Counter>(processed.load(std::memory_order_relaxed) + count),
                    std::memory_order_release);
  }
  void CountError() noexcept { Increment<true>(consumer_.errors); }

  // Any thread. Differences are taken in Counter arithmetic, so they stay
  // right when a 32-bit counter wraps after the baseline.
  BusStatisticsSnapshot Snapshot() const noexcept {
    Fields base;
    for (std::size_t i = 0; i < kFieldCount; ++i) {
      // SYNC POINT READ (G): see Reset().
      base.values[i] = baseline_[i].load(std::memory_order_acquire);
    }
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      base.values[kProcessed + p] = base.values[kPublished + p];
    }
    const Fields raw = Raw();
    Fields since;
    for (std::size_t i = 0; i < kFieldCount; ++i) {
      since.values[i] = static_cast<Counter>(raw.values[i] - base.values[i]);
    }
    // Messages counted before the reset and dispatched after it are no part
    // of either count: processed (of their priority) is 0 until they are
    // through.
    using Signed = std::make_signed_t<Counter>;
    Counter processed[kPriorityCount] = {};
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const Counter value = since.values[kProcessed + p];
      if (static_cast<Signed>(value) > 0) processed[p] = value;
    }
    BusStatisticsSnapshot s;
    s.low_priority_published = since.values[kPublished + 0];
    s.medium_priority_published = since.values[kPublished + 1];
    s.high_priority_published = since.values[kPublished + 2];
    s.low_priority_dropped = since.values[kDropped + 0];
    s.medium_priority_dropped = since.values[kDropped + 1];
    s.high_priority_dropped = since.values[kDropped + 2];
    s.messages_published =
        s.low_priority_published + s.medium_priority_published + s.high_priority_published;
    s.messages_dropped =
        s.low_priority_dropped + s.medium_priority_dropped + s.high_priority_dropped;
    s.low_priority_processed = processed[0];
    s.medium_priority_processed = processed[1];
    s.high_priority_processed = processed[2];
    s.messages_processed =
        s.low_priority_processed + s.medium_priority_processed + s.high_priority_processed;
    s.processing_errors = since.values[kErrors];
    s.messages_rejected = since.values[kRejected];
    s.messages_refused_closed = since.values[kClosed];
    return s;
  }

  // The counters a producer writes, as ProducerCounts indexes them:
  // published by priority, dropped by priority, refused closed, rejected.
  static constexpr std::size_t kProducerFieldCount = 8;
  struct ProducerCounts {
    Counter values[kProducerFieldCount] = {};
  };
  // Any thread: their raw values (a registration's baseline).
  ProducerCounts ReadProducerCounts() const noexcept {
    ProducerCounts counts;
    for (std::size_t i = 0; i < kProducerFieldCount; ++i) {
      counts.values[i] = Read(ProducerCounter(i));
    }
    return counts;
  }
  // Any thread: each producer counter since the later of the last Reset()
  // and `holder` (raw values read when the holder registered): the smaller
  // difference, as both baselines are earlier values of the counter.
  void ProducerSince(const ProducerCounts& holder, ProducerStatisticsSnapshot* out) const noexcept {
    Counter since[kProducerFieldCount];
    for (std::size_t i = 0; i < kProducerFieldCount; ++i) {
      // SYNC POINT READ (G): the reset baseline before the counter.
      const Counter reset = baseline_[ProducerField(i)].load(std::memory_order_acquire);
      // SYNC POINT READ (N): see kCountOrder.
      const Counter raw = ProducerCounter(i).load(std::memory_order_acquire);
      const auto since_reset = static_cast<Counter>(raw - reset);
      const auto since_holder = static_cast<Counter>(raw - holder.values[i]);
      since[i] = since_reset < since_holder ? since_reset : since_holder;
    }
    out->low_priority_published = since[0];
    out->medium_priority_published = since[1];
    out->high_priority_published = since[2];
    out->low_priority_dropped = since[3];
    out->medium_priority_dropped = since[4];
    out->high_priority_dropped = since[5];
    out->messages_refused_closed = since[6];
    out->messages_rejected = since[7];
  }

  // Any thread. Counters are never written by the resetting thread (a single
  // writer's load+store could lose the reset); the current values become the
  // baseline that Snapshot() subtracts instead.
  void Reset() noexcept {
    const Fields raw = Raw();
    for (std::size_t i = 0; i < kFieldCount; ++i) {
      // Processed is derived from the published baselines.
      if (i >= kProcessed && i < kProcessed + kPriorityCount) continue;
      // SYNC POINT WRITE (G): the counter reads above.
      baseline_[i].store(raw.values[i], std::memory_order_release);
    }
  }

 private:
  static constexpr std::size_t Index(MessagePriority priority) noexcept {
    return static_cast<std::size_t>(priority);
  }

  // Raw counter values, indexed as below.
  static constexpr std::size_t kPublished = 0;  // + priority
  static constexpr std::size_t kDropped = 3;    // + priority
  static constexpr std::size_t kProcessed = 6;  // + priority
  static constexpr std::size_t kErrors = 9;
  static constexpr std::size_t kRejected = 10;
  static constexpr std::size_t kClosed = 11;
  static constexpr std::size_t kFieldCount = 12;
  struct Fields {
    Counter values[kFieldCount] = {};
  };

  // Processed first, with acquire: see (F).
  Fields Raw() const noexcept {
    Fields f;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      // SYNC POINT READ (F): see CountProcessed().
      f.values[kProcessed + p] = consumer_.processed[p].load(std::memory_order_acquire);
    }
    f.values[kErrors] = Read(consumer_.errors);
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      f.values[kPublished + p] = Read(published_.by_priority[p]);
      f.values[kDropped + p] = Read(refused_.by_priority[p]);
    }
    f.values[kRejected] = Read(refused_.rejected);
    f.values[kClosed] = Read(refused_.closed);
    return f;
  }

  // ProducerCounts' index i: its counter and its field in baseline_.
  const std::atomic<Counter>& ProducerCounter(std::size_t i) const noexcept {
    if (i < 3) return published_.by_priority[i];
    if (i < 6) return refused_.by_priority[i - 3];
    return i == 6 ? refused_.closed : refused_.rejected;
  }
  static constexpr std::size_t ProducerField(std::size_t i) noexcept {
    return i < 6 ? kPublished + i : (i == 6 ? kClosed : kRejected);
  }

  static Counter Read(const std::atomic<Counter>& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  struct alignas(kCacheLineSize) PriorityCounters {
    std::atomic<Counter> by_priority[kPriorityCount] = {};
  };
  struct alignas(kCacheLineSize) RefusalCounters {
    std::atomic<Counter> by_priority[kPriorityCount] = {};
    std::atomic<Counter> rejected{0};
    std::atomic<Counter> closed{0};
  };
  struct alignas(kCacheLineSize) ConsumerCounters {
    std::atomic<Counter> processed[kPriorityCount] = {};
    std::atomic<Counter> errors{0};
  };
  // Each group starts a line of its own and no other group shares its last
  // line (a group may take more than one line where lines are small, such
  // as SLUICE_CACHE_LINE_SIZE=16).
  static_assert(alignof(PriorityCounters) == kCacheLineSize &&
                    alignof(RefusalCounters) == kCacheLineSize &&
                    alignof(ConsumerCounters) == kCacheLineSize,
                "each counter group must start a cache line of its own");

  PriorityCounters published_;  // producers
  RefusalCounters refused_;     // refusal path
  ConsumerCounters consumer_;   // consumer
  alignas(kCacheLineSize) std::atomic<Counter> baseline_[kFieldCount] = {};
};

// The counters of a bus that keeps none (NoObservation): its snapshot
// reads 0. Nothing counts into it (detail/observe/observation.hpp).
struct NoStatisticsCounters {
  static BusStatisticsSnapshot Snapshot() noexcept { return {}; }
  static void Reset() noexcept {}
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
