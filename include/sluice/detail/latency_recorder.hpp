// The consumer's latency histograms. One writer (the consumer), read by any
// thread: counts are added once per run of equal buckets with plain relaxed
// load+store on lines no producer touches; a reader sees a batch's counts
// when the batch ends. A reset moves a baseline instead of writing the
// counters (see StatisticsCounters).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/bits.hpp"
#include "sluice/detail/counter.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"

namespace sluice::detail {

// The bucket of a latency of `micros`: 0 for at most 1 us, else the number of
// bits of micros - 1 (so 2^(i-1) < micros <= 2^i), capped at the last bucket.
inline std::size_t LatencyBucket(std::uint64_t micros) noexcept {
  if (micros <= 1) return 0;
  const std::size_t bucket = BitWidth(micros - 1);
  return bucket < kLatencyBucketCount ? bucket : kLatencyBucketCount - 1;
}

// A batch that records no latency (histograms off, or not FULL_FEATURED).
struct NoLatencyBatch {
  void Add(const MessageHeader&) noexcept {}
  void Finish() noexcept {}
};

template <bool kEnabled>
class LatencyRecorder {
 public:
  static constexpr bool kRecords = true;

  // Consumer only: the latencies of one dispatch batch. Consecutive messages
  // of one priority usually share a bucket, so they are counted in registers
  // as a run and added to the shared counters when the run or the batch ends,
  // not once per message (a per-message increment would chain every message
  // through one memory location).
  class Batch {
   public:
    // `now_micros` (not 0) was read once for the whole batch.
    Batch(LatencyRecorder* recorder, std::uint64_t now_micros) noexcept
        : recorder_(recorder), now_(now_micros) {}

    void Add(const MessageHeader& header) noexcept {
      // 0: published without a clock (BARE_METAL Publish, NullClock).
      if (header.timestamp_us == 0) return;
      const std::uint64_t latency = now_ > header.timestamp_us ? now_ - header.timestamp_us : 0;
      const std::size_t key =
          static_cast<std::size_t>(header.priority) * kLatencyBucketCount + LatencyBucket(latency);
      if (key != run_key_) {
        Finish();
        run_key_ = key;
      }
      ++run_count_;
      run_sum_ += latency;
    }

    // Adds the current run to the recorder. Call at the end of the batch.
    void Finish() noexcept {
      if (run_count_ == 0) return;
      recorder_->AddRun(run_key_, run_count_, run_sum_);
      run_count_ = 0;
      run_sum_ = 0;
    }

   private:
    LatencyRecorder* recorder_;
    std::uint64_t now_;
    std::size_t run_key_ = 0;
    Counter run_count_ = 0;
    std::uint64_t run_sum_ = 0;
  };

  Batch BeginBatch(std::uint64_t now_micros) noexcept { return Batch(this, now_micros); }

  // Any thread. Counts are read one by one; `count` is the sum of the
  // buckets as read, so a snapshot is always self-consistent.
  LatencySnapshot Snapshot() const noexcept {
    LatencySnapshot snapshot;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      LatencyHistogram& histogram = snapshot.by_priority[p];
      for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
        histogram.buckets[b] = Since(rows_[p].buckets[b], baseline_[p].buckets[b]);
        histogram.count += histogram.buckets[b];
      }
      histogram.sum_micros = Since(rows_[p].sum_micros, baseline_[p].sum_micros);
    }
    return snapshot;
  }

  // Any thread.
  void Reset() noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
        Copy(rows_[p].buckets[b], baseline_[p].buckets[b]);
      }
      Copy(rows_[p].sum_micros, baseline_[p].sum_micros);
    }
  }

 private:
  void AddRun(std::size_t key, Counter count, std::uint64_t sum) noexcept {
    Row& row = rows_[key / kLatencyBucketCount];
    Increment<true>(row.buckets[key % kLatencyBucketCount], count);
    Increment<true>(row.sum_micros, static_cast<Counter>(sum));
  }

  struct Row {
    std::atomic<Counter> buckets[kLatencyBucketCount] = {};
    std::atomic<Counter> sum_micros{0};
  };

  // A counter's value since the last reset, never "negative".
  //
  // SYNC POINT READ (R): the baseline is loaded first, with acquire; it pairs
  // with the release store in Copy(). If it reads a baseline some Reset
  // stored, that Reset's load of the counter happens-before the load below,
  // so (read-read coherence) the load below returns that value or a later
  // one; the counter only grows (one writer adds to it), so the difference is
  // what was added since. Loaded the other way round, a Reset could read a
  // newer counter and store it as the baseline between the two loads, and
  // the difference would wrap to nearly 2^64.
  static std::uint64_t Since(const std::atomic<Counter>& value,
                             const std::atomic<Counter>& base) noexcept {
    const Counter baseline = base.load(std::memory_order_acquire);
    return static_cast<Counter>(value.load(std::memory_order_relaxed) - baseline);
  }
  // SYNC POINT WRITE (R): the counter is read before the baseline is
  // published with release; see Since().
  static void Copy(const std::atomic<Counter>& from, std::atomic<Counter>& to) noexcept {
    const Counter now = from.load(std::memory_order_relaxed);
    to.store(now, std::memory_order_release);
  }

  alignas(kCacheLineSize) Row rows_[kPriorityCount];  // consumer
  alignas(kCacheLineSize) Row baseline_[kPriorityCount];
};

// Histograms turned off in the bus traits: no memory, no work.
template <>
class LatencyRecorder<false> {
 public:
  static constexpr bool kRecords = false;
  using Batch = NoLatencyBatch;
  Batch BeginBatch(std::uint64_t) noexcept { return {}; }
  LatencySnapshot Snapshot() const noexcept { return {}; }
  void Reset() noexcept {}
};

}  // namespace sluice::detail
