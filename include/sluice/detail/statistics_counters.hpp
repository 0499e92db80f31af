// Counters behind BusStatisticsSnapshot, laid out so that no cache line is
// written by both sides: producers count admissions on their own line, the
// (rare) refusal path on another, the consumer on a third.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/counter.hpp"
#include "sluice/message.hpp"
#include "sluice/statistics.hpp"

namespace sluice::detail {

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
  void CountProcessed(std::uint32_t count) noexcept { Increment<true>(consumer_.processed, count); }
  void CountError() noexcept { Increment<true>(consumer_.errors); }

  // Any thread. Differences are taken in Counter arithmetic, so they stay
  // right when a 32-bit counter wraps after the baseline.
  BusStatisticsSnapshot Snapshot() const noexcept {
    const Fields raw = Raw();
    Fields since;
    for (std::size_t i = 0; i < kFieldCount; ++i) {
      since.values[i] = static_cast<Counter>(raw.values[i] - Read(baseline_[i]));
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
    s.messages_processed = since.values[kProcessed];
    s.processing_errors = since.values[kErrors];
    return s;
  }

  // Any thread. Counters are never written by the resetting thread (a single
  // writer's load+store could lose the reset); the current values become the
  // baseline that Snapshot() subtracts instead.
  void Reset() noexcept {
    const Fields raw = Raw();
    for (std::size_t i = 0; i < kFieldCount; ++i) {
      baseline_[i].store(raw.values[i], std::memory_order_relaxed);
    }
  }

 private:
  static constexpr std::size_t Index(MessagePriority priority) noexcept {
    return static_cast<std::size_t>(priority);
  }

  // Raw counter values, indexed as below.
  static constexpr std::size_t kPublished = 0;  // + priority
  static constexpr std::size_t kDropped = 3;    // + priority
  static constexpr std::size_t kProcessed = 6;
  static constexpr std::size_t kErrors = 7;
  static constexpr std::size_t kFieldCount = 8;
  struct Fields {
    Counter values[kFieldCount] = {};
  };

  Fields Raw() const noexcept {
    Fields f;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      f.values[kPublished + p] = Read(published_.by_priority[p]);
      f.values[kDropped + p] = Read(dropped_.by_priority[p]);
    }
    f.values[kProcessed] = Read(consumer_.processed);
    f.values[kErrors] = Read(consumer_.errors);
    return f;
  }

  static Counter Read(const std::atomic<Counter>& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  struct alignas(kCacheLineSize) PriorityCounters {
    std::atomic<Counter> by_priority[kPriorityCount] = {};
  };
  struct alignas(kCacheLineSize) ConsumerCounters {
    std::atomic<Counter> processed{0};
    std::atomic<Counter> errors{0};
  };
  static_assert(sizeof(PriorityCounters) == kCacheLineSize &&
                    sizeof(ConsumerCounters) == kCacheLineSize,
                "each counter group must own exactly one cache line");

  PriorityCounters published_;  // producers
  PriorityCounters dropped_;    // refusal path
  ConsumerCounters consumer_;   // consumer
  alignas(kCacheLineSize) std::atomic<Counter> baseline_[kFieldCount] = {};
};

}  // namespace sluice::detail
