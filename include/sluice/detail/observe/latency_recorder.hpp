// The consumer's latency histograms. One writer (the consumer), read by any
// thread: counts are added once per run of equal buckets with plain relaxed
// load+store on lines no producer touches; a reader sees a batch's counts
// when the batch ends. A reset moves a baseline instead of writing the
// counters (see StatisticsCounters).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/bits.hpp"
#include "sluice/detail/observe/counter.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// The bucket of a latency of `nanos`: 0 for at most 128 ns, else the number
// of bits of (nanos - 1) >> 7 (so 2^(6+i) < nanos <= 2^(7+i)), capped at the
// last bucket.
inline std::size_t LatencyBucket(std::uint64_t nanos) noexcept {
  if (nanos <= (std::uint64_t{1} << kLatencyFirstBucketBits)) return 0;
  const std::size_t bucket = BitWidth((nanos - 1) >> kLatencyFirstBucketBits);
  return bucket < kLatencyBucketCount ? bucket : kLatencyBucketCount - 1;
}

// A latency sum: 64 bits in every configuration, so it does not wrap after
// 2^32 ns (4.3 seconds of total latency) where counters are 32-bit. One
// thread (the consumer) adds; any thread loads; Reset stores baselines.
//
// Where 64-bit atomics are lock-free: one atomic.
class NativeSum {
 public:
  // Writer only: a plain load and store (no locked instruction).
  void Add(std::uint64_t amount) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
  // SYNC POINT READ (V) and WRITE (V) when used as a baseline: see Since().
  std::uint64_t Load() const noexcept { return value_.load(std::memory_order_acquire); }
  void Store(std::uint64_t value) noexcept { value_.store(value, std::memory_order_release); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// Where they are not (SLUICE_ATOMIC_BITS=32): three 32-bit words, the high
// word stored twice, so a reader never waits, not even an interrupt handler
// that preempted the writer half-way. Writing stores hi_first_, then lo_,
// then hi_last_ (each store releases the ones before); reading loads them in
// the reverse order with acquire. A reader whose hi_last_ load sees update a
// then loads lo_ from an update b >= a and hi_first_ from an update c >= b
// (each acquire load makes the earlier stores of that update visible). If
// the two high words agree, no carry happened between a and c, so
// (high, lo_) is exactly update b's value. If they differ, a carry did, and
// the reader returns the carry's boundary, high_c * 2^32, which lies between
// update a's value and update c's: a value the sum passed, never a torn one.
// This relies on the value only growing, as a sum of latencies does.
class SplitSum {
 public:
  // Writer only.
  void Add(std::uint64_t amount) noexcept {
    const std::uint64_t now = (std::uint64_t{hi_last_.load(std::memory_order_relaxed)} << 32) |
                              lo_.load(std::memory_order_relaxed);
    Write(now + amount);
  }
  std::uint64_t Load() const noexcept {
    const std::uint32_t high_last = hi_last_.load(std::memory_order_acquire);
    const std::uint32_t low = lo_.load(std::memory_order_acquire);
    const std::uint32_t high_first = hi_first_.load(std::memory_order_relaxed);
    if (high_last == high_first) return (std::uint64_t{high_last} << 32) | low;
    return std::uint64_t{high_first} << 32;
  }
  // As a baseline. Two Resets that overlap may interleave their words; the
  // value then read is clamped by Since(), never wraps.
  void Store(std::uint64_t value) noexcept { Write(value); }

 private:
  void Write(std::uint64_t value) noexcept {
    const auto high = static_cast<std::uint32_t>(value >> 32);
    hi_first_.store(high, std::memory_order_relaxed);
    lo_.store(static_cast<std::uint32_t>(value), std::memory_order_release);
    hi_last_.store(high, std::memory_order_release);
  }

  std::atomic<std::uint32_t> hi_first_{0};
  std::atomic<std::uint32_t> lo_{0};
  std::atomic<std::uint32_t> hi_last_{0};
};

using LatencySum = std::conditional_t<sizeof(Counter) == 8, NativeSum, SplitSum>;

// A batch that records no latency (histograms off, or not FULL_FEATURED).
struct NoLatencyBatch {
  static constexpr bool kReadsStamps = false;  // reads no message's timestamp
  void Add(const MessageHeader&) noexcept {}
  void AddBeforeReading(const MessageHeader&) noexcept {}
  void TakenBeforeReading(std::uint32_t) noexcept {}
  static constexpr std::uint32_t TakenBeforeReading() noexcept { return ~std::uint32_t{0}; }
  static constexpr bool ReadsFreshClock(const MessageHeader&) noexcept { return false; }
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
  //
  // The clock, in nanoseconds (ClockNanos): `now_nanos`, read just before
  // the batch's first message, serves messages 0 to kClockInterval - 1; Add()
  // re-reads Clock before messages kClockInterval, 2 * kClockInterval, ...,
  // so message k is measured to a reading taken before the consumer took it
  // up (Add comes before its dispatch) and after it had taken up all but the
  // last k mod kClockInterval <= kClockInterval - 1 messages before it.
  // A message stamped at or after that reading may have been published
  // after it (a producer published while the batch ran, and the consumer
  // took the message in the same batch; with a coarse clock, one published
  // in the reading's own tick): Add() then reads the clock once more, before
  // its dispatch, measures it to that fresh reading and keeps the reading
  // for the messages after it until the next scheduled one. With a clock
  // that never goes back and that every thread reads alike, the recorded
  // latency so is never above the true one (publish to being taken up: the
  // start of its dispatch) and short of it by at most the time the consumer
  // spent on those kClockInterval - 1 messages before it (their dispatch and
  // the bus's own work), and a message published after the last reading is
  // measured against a reading taken after it was published. It is 0 only
  // when even the fresh reading is not later than the stamp (clocks of two
  // cores that disagree, or a coarse clock that has not ticked since the
  // publish). Per message: a decrement, a compare and two branches; the
  // extra read only for a message stamped at or after the reading (with a
  // coarse clock, every message stamped in the reading's tick).
  // kClockInterval 0 and Clock void: `now_nanos` serves the whole batch and a
  // later stamp records 0 (the recorder's own tests; the bus always passes a
  // clock and an interval of at least 1).
  template <typename Clock = void, std::uint32_t kClockInterval = 0>
  class Batch {
   public:
    // `now_nanos` (not 0) was read just before the batch's first message.
    Batch(LatencyRecorder* recorder, std::uint64_t now_nanos) noexcept
        : recorder_(recorder), now_(now_nanos) {}

    static constexpr bool kReadsStamps = true;  // each message's timestamp

    SLUICE_ALWAYS_INLINE void Add(const MessageHeader& header) noexcept {
      if constexpr (kClockInterval != 0) {
        // Counts every message, stamped or not: the bound is in dispatches.
        if (--until_read_ == 0) {
          until_read_ = kClockInterval;
          now_ = ClockNanos<Clock>();
        }
      }
      AddBeforeReading(header);
    }

    // Add for a message that a caller taking several up before it
    // dispatches them (the consumer core's runs) knows to come before the
    // next scheduled reading (TakenBeforeReading() more after the one it
    // has Add()ed, and none that ReadsFreshClock()): no countdown per
    // message; the caller then counts them all with
    // TakenBeforeReading(count), which leaves the next reading where Add()
    // would have put it.
    SLUICE_ALWAYS_INLINE void AddBeforeReading(const MessageHeader& header) noexcept {
      const std::uint64_t stamp = header.timestamp_ns;
      // 0: published without a clock (BARE_METAL Publish, NullClock).
      if (stamp == 0) return;
      if constexpr (!std::is_void_v<Clock>) {
        // Stamped at or after the reading: measured to a fresh one (see
        // above). Equal counts too: with a coarse clock (a 1 ms tick, or
        // whole microseconds) a message published in the reading's tick may
        // have been published after it.
        if (SLUICE_UNLIKELY(stamp >= now_)) now_ = ClockNanos<Clock>();
      }
      const std::uint64_t latency = now_ > stamp ? now_ - stamp : 0;
      const auto priority = static_cast<std::size_t>(header.priority);
      // The run's priority, and a latency in the run's bucket: two
      // compares instead of the bucket's search (a bit width and a cap).
      // Before the first message the run's range is empty.
      if (SLUICE_UNLIKELY(priority != run_priority_ || latency - run_low_ >= run_width_)) {
        StartRun(priority, latency);
      }
      ++run_count_;
      run_sum_ += latency;
    }

    // When Add reads the clock next: after TakenBeforeReading() more
    // messages (a scheduled reading), or for a message for which
    // ReadsFreshClock(header) (a stamp at or after the reading). A
    // consumer that takes several messages up before it dispatches them
    // (the consumer core's runs) ends a run before such a message, so that
    // every reading is taken when the dispatch of the message it is for
    // comes next, as one message at a time, and the bound above holds
    // unchanged.
    SLUICE_ALWAYS_INLINE std::uint32_t TakenBeforeReading() const noexcept {
      if constexpr (kClockInterval != 0) {
        return until_read_ - 1;
      } else {
        return ~std::uint32_t{0};
      }
    }
    // Counts `count` messages AddBeforeReading() took, at most
    // TakenBeforeReading() (so the count never reaches the reading).
    SLUICE_ALWAYS_INLINE void TakenBeforeReading(std::uint32_t count) noexcept {
      if constexpr (kClockInterval != 0) until_read_ -= count;
    }
    SLUICE_ALWAYS_INLINE bool ReadsFreshClock(const MessageHeader& header) const noexcept {
      if constexpr (!std::is_void_v<Clock>) {
        const std::uint64_t stamp = header.timestamp_ns;
        return stamp != 0 && stamp >= now_;
      } else {
        (void)header;
        return false;
      }
    }

    // Adds the current run to the recorder. Call at the end of the batch.
    void Finish() noexcept {
      if (run_count_ == 0) return;
      recorder_->AddRun(run_key_, run_count_, run_sum_);
      run_count_ = 0;
      run_sum_ = 0;
    }

   private:
    // A message outside the run: its key (priority and bucket) and the
    // latencies that share that bucket, [run_low_, run_low_ + run_width_)
    // in unsigned arithmetic (LatencyBucket's ranges; the last bucket's
    // reaches the largest latency). A key equal to the run's goes on with it.
    void StartRun(std::size_t priority, std::uint64_t latency) noexcept {
      const std::size_t bucket = LatencyBucket(latency);
      const std::size_t key = priority * kLatencyBucketCount + bucket;
      if (key != run_key_) {
        Finish();
        run_key_ = key;
      }
      run_priority_ = priority;
      constexpr std::uint64_t kFirst = std::uint64_t{1} << kLatencyFirstBucketBits;
      if (bucket == 0) {
        run_low_ = 0;
        run_width_ = kFirst + 1;
      } else {
        // Bucket b >= 1: 2^(6+b) < latency <= 2^(7+b) (kFirst = 2^7).
        const std::uint64_t half = (kFirst >> 1) << bucket;
        run_low_ = half + 1;
        run_width_ = bucket == kLatencyBucketCount - 1 ? 0 - run_low_ : half;
      }
    }

    LatencyRecorder* recorder_;
    std::uint64_t now_;
    // Messages until the next reading, counting this one: the batch's own
    // reading serves the first kClockInterval.
    std::uint32_t until_read_ = kClockInterval + 1;
    std::size_t run_key_ = 0;
    Counter run_count_ = 0;
    std::uint64_t run_sum_ = 0;
    std::size_t run_priority_ = 0;
    std::uint64_t run_low_ = 0;
    std::uint64_t run_width_ = 0;  // 0: no run yet, no latency matches
  };

  // `now_nanos`: Clock read (ClockNanos) just before the batch's first message.
  template <typename Clock = void, std::uint32_t kClockInterval = 0>
  Batch<Clock, kClockInterval> BeginBatch(std::uint64_t now_nanos) noexcept {
    return Batch<Clock, kClockInterval>(this, now_nanos);
  }

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
      // Baseline first, as in Since(); a baseline above the sum (two
      // overlapping Resets on a 32-bit build) reads as 0, never wraps.
      const std::uint64_t base = baseline_[p].sum_nanos.Load();
      const std::uint64_t sum = rows_[p].sum_nanos.Load();
      histogram.sum_nanos = sum >= base ? sum - base : 0;
    }
    return snapshot;
  }

  // Any thread.
  void Reset() noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
        Copy(rows_[p].buckets[b], baseline_[p].buckets[b]);
      }
      baseline_[p].sum_nanos.Store(rows_[p].sum_nanos.Load());
    }
  }

 private:
  void AddRun(std::size_t key, Counter count, std::uint64_t sum) noexcept {
    Row& row = rows_[key / kLatencyBucketCount];
    Increment<true>(row.buckets[key % kLatencyBucketCount], count);
    row.sum_nanos.Add(sum);
  }

  struct Row {
    std::atomic<Counter> buckets[kLatencyBucketCount] = {};
    LatencySum sum_nanos;
  };

  // A counter's value since the last reset, never "negative".
  //
  // SYNC POINT READ (V): the baseline is loaded first, with acquire; it pairs
  // with the release store in Copy(). If it reads a baseline some Reset
  // stored, that Reset's load of the counter happens-before the load below,
  // so (read-read coherence) the load below returns that value or a later
  // one; the counter only grows (one writer adds to it), so the difference is
  // what was added since. Loaded the other way round, a Reset could read a
  // newer counter and store it as the baseline between the two loads, and
  // the difference would wrap to nearly the largest Counter.
  static std::uint64_t Since(const std::atomic<Counter>& value,
                             const std::atomic<Counter>& base) noexcept {
    const Counter baseline = base.load(std::memory_order_acquire);
    return static_cast<Counter>(value.load(std::memory_order_relaxed) - baseline);
  }
  // SYNC POINT WRITE (V): the counter is read before the baseline is
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
  template <typename Clock = void, std::uint32_t kClockInterval = 0>
  NoLatencyBatch BeginBatch(std::uint64_t) noexcept {
    return {};
  }
  LatencySnapshot Snapshot() const noexcept { return {}; }
  void Reset() noexcept {}
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
