// Counters behind BusStatisticsSnapshot, laid out so that no cache line is
// written by both sides: producers count admissions on their own line, the
// (rare) refusal path on another, the consumer on a third.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/statistics.hpp"

namespace sluice::detail {

// Adds one to a counter. With a single writer a plain load and store suffice
// (no locked instruction); otherwise an atomic increment.
template <bool kSingleWriter>
inline void Increment(std::atomic<std::uint64_t>& counter, std::uint64_t amount = 1) noexcept {
  if constexpr (kSingleWriter) {
    counter.store(counter.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  } else {
    counter.fetch_add(amount, std::memory_order_relaxed);
  }
}

// Counters are only ever read as statistics: every access is relaxed.
template <bool kSingleProducer>
class StatisticsCounters {
 public:
  void CountPublished(MessagePriority priority) noexcept {
    Increment<kSingleProducer>(published_.by_priority[Index(priority)]);
  }
  void CountDropped(MessagePriority priority) noexcept {
    // Any producer, including with kSingleProducer when several threads
    // publish under an external lock: refusals are rare, so always atomic.
    Increment<false>(dropped_.by_priority[Index(priority)]);
  }
  // Consumer only.
  void CountProcessed(std::uint64_t count) noexcept { Increment<true>(consumer_.processed, count); }
  void CountError() noexcept { Increment<true>(consumer_.errors); }

  // Any thread.
  BusStatisticsSnapshot Snapshot() const noexcept {
    BusStatisticsSnapshot raw = Raw();
    const BusStatisticsSnapshot base = Load(baseline_);
    raw.messages_published -= base.messages_published;
    raw.messages_dropped -= base.messages_dropped;
    raw.messages_processed -= base.messages_processed;
    raw.processing_errors -= base.processing_errors;
    raw.high_priority_published -= base.high_priority_published;
    raw.medium_priority_published -= base.medium_priority_published;
    raw.low_priority_published -= base.low_priority_published;
    raw.high_priority_dropped -= base.high_priority_dropped;
    raw.medium_priority_dropped -= base.medium_priority_dropped;
    raw.low_priority_dropped -= base.low_priority_dropped;
    return raw;
  }

  // Any thread. Counters are never written by the resetting thread (a single
  // writer's load+store could lose the reset); the current values become the
  // baseline that Snapshot() subtracts instead.
  void Reset() noexcept { Store(baseline_, Raw()); }

 private:
  static constexpr std::size_t Index(MessagePriority priority) noexcept {
    return static_cast<std::size_t>(priority);
  }

  BusStatisticsSnapshot Raw() const noexcept {
    BusStatisticsSnapshot s;
    s.low_priority_published = Read(published_.by_priority[0]);
    s.medium_priority_published = Read(published_.by_priority[1]);
    s.high_priority_published = Read(published_.by_priority[2]);
    s.low_priority_dropped = Read(dropped_.by_priority[0]);
    s.medium_priority_dropped = Read(dropped_.by_priority[1]);
    s.high_priority_dropped = Read(dropped_.by_priority[2]);
    s.messages_published =
        s.low_priority_published + s.medium_priority_published + s.high_priority_published;
    s.messages_dropped =
        s.low_priority_dropped + s.medium_priority_dropped + s.high_priority_dropped;
    s.messages_processed = Read(consumer_.processed);
    s.processing_errors = Read(consumer_.errors);
    return s;
  }

  struct Baseline {
    std::atomic<std::uint64_t> fields[10] = {};
  };
  static BusStatisticsSnapshot Load(const Baseline& b) noexcept {
    BusStatisticsSnapshot s;
    s.messages_published = Read(b.fields[0]);
    s.messages_dropped = Read(b.fields[1]);
    s.messages_processed = Read(b.fields[2]);
    s.processing_errors = Read(b.fields[3]);
    s.high_priority_published = Read(b.fields[4]);
    s.medium_priority_published = Read(b.fields[5]);
    s.low_priority_published = Read(b.fields[6]);
    s.high_priority_dropped = Read(b.fields[7]);
    s.medium_priority_dropped = Read(b.fields[8]);
    s.low_priority_dropped = Read(b.fields[9]);
    return s;
  }
  static void Store(Baseline& b, const BusStatisticsSnapshot& s) noexcept {
    const std::uint64_t values[10] = {s.messages_published,      s.messages_dropped,
                                      s.messages_processed,      s.processing_errors,
                                      s.high_priority_published, s.medium_priority_published,
                                      s.low_priority_published,  s.high_priority_dropped,
                                      s.medium_priority_dropped, s.low_priority_dropped};
    for (int i = 0; i < 10; ++i) b.fields[i].store(values[i], std::memory_order_relaxed);
  }
  static std::uint64_t Read(const std::atomic<std::uint64_t>& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  struct alignas(kCacheLineSize) PriorityCounters {
    std::atomic<std::uint64_t> by_priority[kPriorityCount] = {};
  };
  struct alignas(kCacheLineSize) ConsumerCounters {
    std::atomic<std::uint64_t> processed{0};
    std::atomic<std::uint64_t> errors{0};
  };
  static_assert(sizeof(PriorityCounters) == kCacheLineSize &&
                    sizeof(ConsumerCounters) == kCacheLineSize,
                "each counter group must own exactly one cache line");

  PriorityCounters published_;  // producers
  PriorityCounters dropped_;    // refusal path
  ConsumerCounters consumer_;   // consumer
  alignas(kCacheLineSize) Baseline baseline_;
};

}  // namespace sluice::detail
