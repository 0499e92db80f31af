#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "sluice/detail/observe/latency_recorder.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace latency_test {
namespace {

using sluice::LatencyHistogram;
using sluice::MessagePriority;
using sluice::PerformanceMode;
using std::chrono::nanoseconds;

// A clock the test sets (nanoseconds), counting its reads.
struct ManualClock {
  static inline std::atomic<std::uint64_t> now{1000};
  static inline std::atomic<int> reads{0};
  static std::uint64_t NowNanos() noexcept {
    ++reads;
    return now.load();
  }
};

struct ManualClockTraits : sluice::DefaultBusTraits {
  using Clock = ManualClock;
};
struct NoHistogramTraits : ManualClockTraits {
  using Latency = sluice::NoLatencyHistograms;
};

template <typename Traits = ManualClockTraits>
using Bus = sluice::MpscBus<BasicPayload, 64, Traits>;

static_assert(sluice::kLatencyBucketCount == 28);

TEST(LatencyBucketTest, BucketIHoldsLatenciesUpToTwoToTheSevenPlusINanoseconds) {
  using sluice::detail::LatencyBucket;
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(1), 0u);
  EXPECT_EQ(LatencyBucket(128), 0u);
  EXPECT_EQ(LatencyBucket(129), 1u);
  EXPECT_EQ(LatencyBucket(256), 1u);
  EXPECT_EQ(LatencyBucket(257), 2u);
  EXPECT_EQ(LatencyBucket(512), 2u);
  EXPECT_EQ(LatencyBucket(513), 3u);
  EXPECT_EQ(LatencyBucket(1000), 3u);
  EXPECT_EQ(LatencyBucket(1024), 3u);
  EXPECT_EQ(LatencyBucket(1025), 4u);
  EXPECT_EQ(LatencyBucket(std::uint64_t{1} << 33), 26u);
  EXPECT_EQ(LatencyBucket((std::uint64_t{1} << 33) + 1), 27u);
  EXPECT_EQ(LatencyBucket(~std::uint64_t{0}), 27u);
  for (std::size_t bucket = 0; bucket + 1 < sluice::kLatencyBucketCount; ++bucket) {
    const std::uint64_t bound = LatencyHistogram::UpperBoundNanos(bucket);
    EXPECT_EQ(bound, std::uint64_t{128} << bucket);
    EXPECT_EQ(LatencyBucket(bound), bucket);
    EXPECT_EQ(LatencyBucket(bound + 1), bucket + 1);
  }
  EXPECT_EQ(LatencyHistogram::UpperBoundNanos(26), std::uint64_t{1} << 33);  // about 8.6 s
  EXPECT_EQ(LatencyHistogram::UpperBoundNanos(27), LatencyHistogram::kUnbounded);
}

TEST(LatencyHistogramTest, PercentilesAreBucketBounds) {
  LatencyHistogram histogram;
  EXPECT_EQ(histogram.PercentileNanos(0.5), 0u);  // empty
  histogram.buckets[0] = 50;                      // <= 128 ns
  histogram.buckets[3] = 49;                      // 513-1024 ns
  histogram.buckets[10] = 1;                      // 65.5-131 us
  histogram.count = 100;
  EXPECT_EQ(histogram.PercentileNanos(0.0), 128u);
  EXPECT_EQ(histogram.PercentileNanos(0.5), 128u);
  EXPECT_EQ(histogram.PercentileNanos(0.51), 1024u);
  EXPECT_EQ(histogram.PercentileNanos(0.99), 1024u);
  EXPECT_EQ(histogram.PercentileNanos(0.991), 131'072u);
  EXPECT_EQ(histogram.PercentileNanos(1.0), 131'072u);
  EXPECT_EQ(histogram.PercentileNanos(2.0), 131'072u);
  histogram.buckets[27] = 100;
  histogram.count = 200;
  EXPECT_EQ(histogram.PercentileNanos(1.0), LatencyHistogram::kUnbounded);
}

// The rank of quantile k/100 among n latencies is ceil(k * n / 100): with the
// first `rank` latencies in bucket 0 and the rest in bucket 1, the percentile
// is bucket 0's bound exactly when the rank is computed without rounding error.
TEST(LatencyHistogramTest, ExactRankPercentilesLandInTheirBucket) {
  int wrong = 0;
  for (std::uint64_t n = 1; n <= 2000; ++n) {
    for (std::uint64_t k = 1; k < 100; ++k) {
      const std::uint64_t rank = (k * n + 99) / 100;
      LatencyHistogram histogram;
      histogram.buckets[0] = rank;
      histogram.buckets[1] = n - rank;
      histogram.count = n;
      if (histogram.PercentileNanos(static_cast<double>(k) / 100.0) != 128u) ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// 1,000 latencies of 5 s: 5,000 s, far past 2^32 ns (4.3 s). The sum is
// 64-bit in both configurations, also with SLUICE_ATOMIC_BITS=32.
TEST(LatencyTest, TheSumDoesNotWrapAt32Bits) {
  sluice::detail::LatencyRecorder<true> recorder;
  constexpr std::uint64_t kFiveSeconds = 5'000'000'000;
  constexpr std::uint64_t kNow = 100 * kFiveSeconds;
  for (int i = 0; i < 1000; ++i) {
    auto batch = recorder.BeginBatch(kNow);
    sluice::MessageHeader header;
    header.timestamp_ns = kNow - kFiveSeconds;
    batch.Add(header);
    batch.Finish();
  }
  const LatencyHistogram& medium = recorder.Snapshot().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1000u);
  EXPECT_EQ(medium.sum_nanos, 5'000'000'000'000u);
  EXPECT_EQ(medium.buckets[26], 1000u);  // 4.3-8.6 s
  recorder.Reset();
  EXPECT_EQ(recorder.Snapshot().For(MessagePriority::MEDIUM).sum_nanos, 0u);
}

// A run of one priority and one bucket is counted in registers and a
// message is compared with the run's range, not searched for its bucket:
// every message still lands in LatencyBucket's bucket. Latencies on each
// side of every bucket's bounds (and 0, and near the largest), in runs of
// one priority of 1 to 4 messages, several batches.
TEST(LatencyTest, MessagesInRunsLandInTheBucketsTheirLatenciesName) {
  std::vector<std::uint64_t> latencies = {0, 1, 127, 128, 129, 130};
  for (unsigned bits = 8; bits < 63; ++bits) {
    const std::uint64_t bound = std::uint64_t{1} << bits;
    latencies.insert(latencies.end(), {bound - 1, bound, bound + 1, bound + 2});
  }
  latencies.push_back((std::uint64_t{1} << 62) + 12345);
  constexpr std::uint64_t kNow = std::uint64_t{1} << 63;
  sluice::detail::LatencyRecorder<true> recorder;
  std::uint64_t expected[sluice::kPriorityCount][sluice::kLatencyBucketCount] = {};
  std::uint64_t expected_sum[sluice::kPriorityCount] = {};
  std::uint32_t state = 12345;  // a fixed linear congruential sequence
  const auto next = [&state](std::uint32_t below) {
    state = state * 1664525U + 1013904223U;
    return (state >> 8) % below;
  };
  for (int batch_number = 0; batch_number < 20; ++batch_number) {
    auto batch = recorder.BeginBatch(kNow);
    for (int run = 0; run < 200; ++run) {
      const auto priority = static_cast<MessagePriority>(next(sluice::kPriorityCount));
      const std::uint32_t length = 1 + next(4);
      for (std::uint32_t i = 0; i < length; ++i) {
        const std::uint64_t latency = latencies[next(static_cast<std::uint32_t>(latencies.size()))];
        sluice::MessageHeader header;
        header.priority = priority;
        header.timestamp_ns = kNow - latency;
        batch.Add(header);
        const auto p = static_cast<std::size_t>(priority);
        ++expected[p][sluice::detail::LatencyBucket(latency)];
        expected_sum[p] += latency;
      }
    }
    batch.Finish();
  }
  const sluice::LatencySnapshot snapshot = recorder.Snapshot();
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    for (std::size_t b = 0; b < sluice::kLatencyBucketCount; ++b) {
      EXPECT_EQ(snapshot.by_priority[p].buckets[b], expected[p][b])
          << "priority " << p << ", bucket " << b;
    }
    EXPECT_EQ(snapshot.by_priority[p].sum_nanos, expected_sum[p]) << "priority " << p;
  }
}

// The two-word sum used where 64-bit atomics are not lock-free, tested on
// every target: carries, a reset baseline above 2^32, and large additions.
TEST(LatencyTest, TheSplitSumCarries) {
  sluice::detail::SplitSum sum;
  std::uint64_t expected = 0;
  for (std::uint64_t amount : {std::uint64_t{0xFFFFFFFF}, std::uint64_t{1}, std::uint64_t{5},
                               std::uint64_t{0x1'0000'0000}, std::uint64_t{0xFFFF'FFFF'FFFF}}) {
    sum.Add(amount);
    expected += amount;
    EXPECT_EQ(sum.Load(), expected);
  }
  sluice::detail::SplitSum baseline;
  baseline.Store(sum.Load());
  EXPECT_EQ(baseline.Load(), expected);
}

TEST(LatencyTest, EachPriorityGetsItsOwnHistogram) {
  Bus<> bus;
  ManualClock::now = 1'000'000;
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{2}, 0, MessagePriority::LOW));
  ManualClock::now = 1'005'000;
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{3}, 0, MessagePriority::LOW));
  ManualClock::now = 1'300'000;
  EXPECT_EQ(bus.ProcessBatch(), 3u);

  const sluice::LatencySnapshot snapshot = bus.GetLatencyHistograms();
  const LatencyHistogram& high = snapshot.For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 1u);
  EXPECT_EQ(high.sum_nanos, 300'000u);
  EXPECT_EQ(high.buckets[12], 1u);  // 262-524 us
  const LatencyHistogram& low = snapshot.For(MessagePriority::LOW);
  EXPECT_EQ(low.count, 2u);
  EXPECT_EQ(low.sum_nanos, 300'000u + 295'000u);
  EXPECT_EQ(low.buckets[12], 2u);
  EXPECT_EQ(snapshot.For(MessagePriority::MEDIUM).count, 0u);
  EXPECT_EQ(low.PercentileNanos(0.99), 524'288u);
}

// Runs of equal buckets are counted together: alternating buckets and
// priorities within one batch must still land exactly.
TEST(LatencyTest, AlternatingBucketsAndPrioritiesInOneBatch) {
  Bus<> bus;
  ManualClock::now = 10'000'000;
  const std::uint64_t ages[] = {300, 300, 100'000, 300, 100'000, 100'000, 300};  // buckets 2, 10
  const MessagePriority priorities[] = {
      MessagePriority::LOW,  MessagePriority::LOW, MessagePriority::LOW, MessagePriority::HIGH,
      MessagePriority::HIGH, MessagePriority::LOW, MessagePriority::LOW};
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, nanoseconds(10'000'000 - ages[i]), priorities[i]));
  }
  EXPECT_EQ(bus.ProcessBatch(), 7u);
  const sluice::LatencySnapshot snapshot = bus.GetLatencyHistograms();
  const LatencyHistogram& low = snapshot.For(MessagePriority::LOW);
  EXPECT_EQ(low.buckets[2], 3u);
  EXPECT_EQ(low.buckets[10], 2u);
  EXPECT_EQ(low.count, 5u);
  EXPECT_EQ(low.sum_nanos, 300u + 300 + 100'000 + 100'000 + 300);
  const LatencyHistogram& high = snapshot.For(MessagePriority::HIGH);
  EXPECT_EQ(high.buckets[2], 1u);
  EXPECT_EQ(high.buckets[10], 1u);
  EXPECT_EQ(high.sum_nanos, 100'300u);
}

TEST(LatencyTest, TheConsumerReadsTheClockOncePerBatch) {
  Bus<> bus;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, nanoseconds(500'000)));
  ManualClock::reads = 0;
  ManualClock::now = 600'000;
  EXPECT_EQ(bus.ProcessBatch(), 10u);
  EXPECT_EQ(ManualClock::reads.load(), 1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, nanoseconds(500'000)));
  EXPECT_EQ(bus.ProcessBatchWith([](const auto&) {}), 10u);
  EXPECT_EQ(ManualClock::reads.load(), 2);
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // nothing queued: no read
  EXPECT_EQ(ManualClock::reads.load(), 2);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 20u);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).buckets[10], 20u);
}

TEST(LatencyTest, OnlyFullFeaturedRecords) {
  Bus<> bus;
  for (PerformanceMode mode : {PerformanceMode::NO_STATS, PerformanceMode::BARE_METAL}) {
    bus.SetPerformanceMode(mode);
    ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(500)));
    ManualClock::reads = 0;
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(ManualClock::reads.load(), 0) << sluice::ToString(mode);
  }
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
}

// A stamp ahead even of a fresh reading (clocks of two cores that disagree)
// is recorded as 0, after that one extra read.
TEST(LatencyTest, UnstampedAndFutureMessages) {
  Bus<> bus;
  ManualClock::now = 100'000;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(0)));        // no timestamp
  ASSERT_TRUE(bus.PublishFast(MotorCmd{2}, 0, nanoseconds(150'000)));  // ahead of the clock
  ManualClock::reads = 0;
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  EXPECT_EQ(ManualClock::reads.load(), 2);  // the batch's reading and the fresh one
  const LatencyHistogram& medium = bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1u);
  EXPECT_EQ(medium.buckets[0], 1u);
  EXPECT_EQ(medium.sum_nanos, 0u);
}

TEST(LatencyTest, ResetStatisticsClearsTheHistograms) {
  Bus<> bus;
  ManualClock::now = 10'000;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(5'000)));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  bus.ResetStatistics();
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(6'000)));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  const LatencyHistogram& medium = bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1u);
  EXPECT_EQ(medium.sum_nanos, 4'000u);
  EXPECT_EQ(medium.buckets[5], 1u);  // 2049-4096 ns
}

TEST(LatencyTest, TraitsCanTurnTheHistogramsOff) {
  Bus<NoHistogramTraits> bus;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(5)));
  ManualClock::reads = 0;
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(ManualClock::reads.load(), 0);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
  EXPECT_LT(sizeof(Bus<NoHistogramTraits>), sizeof(Bus<>));
}

// A clock whose readings the test sets one by one: NowNanos() returns the
// next of `readings` (then the last again), counting its reads.
struct ScriptedClock {
  static inline std::uint64_t readings[4] = {};
  static inline int reads = 0;
  static std::uint64_t NowNanos() noexcept {
    const int index = reads < 4 ? reads : 3;
    ++reads;
    return readings[index];
  }
  static void Script(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
    readings[0] = a;
    readings[1] = b;
    readings[2] = c;
    readings[3] = d;
    reads = 0;
  }
};

sluice::MessageHeader Stamped(std::uint64_t timestamp_ns) {
  sluice::MessageHeader header;
  header.priority = MessagePriority::HIGH;
  header.timestamp_ns = timestamp_ns;
  return header;
}

// The user report: the batch's reading is taken at 1,000 ns; an e-stop
// published at 1,400 ns is taken in the same batch, when the clock reads
// 2,000 ns. Its latency is 600 ns, not 0: the stamp is later than the
// batch's reading, so the recorder reads the clock once more. The next
// message uses that fresh reading without another read (the scripted 9,999
// would show), and one stamped before the batch's reading reads nothing.
TEST(LatencyTest, AMessagePublishedAfterTheBatchReadingIsMeasuredToAFreshReading) {
  sluice::detail::LatencyRecorder<true> recorder;
  ScriptedClock::Script(2'000, 9'999, 9'999, 9'999);
  auto batch = recorder.BeginBatch<ScriptedClock, 16>(1'000);
  batch.Add(Stamped(400));  // before the reading: 600 ns, no read
  EXPECT_EQ(ScriptedClock::reads, 0);
  batch.Add(Stamped(1'400));  // after it: measured to the fresh 2,000
  EXPECT_EQ(ScriptedClock::reads, 1);
  batch.Add(Stamped(1'500));  // after the first reading, before the fresh one
  EXPECT_EQ(ScriptedClock::reads, 1);
  batch.Finish();
  const LatencyHistogram& high = recorder.Snapshot().For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 3u);
  EXPECT_EQ(high.sum_nanos, 600u + 600u + 500u);
  EXPECT_EQ(high.buckets[0], 0u) << "a message published after the reading recorded as 0";
  EXPECT_EQ(high.buckets[3], 2u);  // 600 ns twice: 513-1024 ns
  EXPECT_EQ(high.buckets[2], 1u);  // 500 ns: 257-512 ns
}

// Without a clock (the recorder's own tests) a later stamp still records 0.
TEST(LatencyTest, WithoutAClockALaterStampRecordsZero) {
  sluice::detail::LatencyRecorder<true> recorder;
  auto batch = recorder.BeginBatch(1'000);
  batch.Add(Stamped(1'400));
  batch.Finish();
  const LatencyHistogram& high = recorder.Snapshot().For(MessagePriority::HIGH);
  EXPECT_EQ(high.buckets[0], 1u);
  EXPECT_EQ(high.sum_nanos, 0u);
}

// The same through a bus, FIFO and priority-ordered: a subscriber publishes
// a HIGH message while the batch runs, the consumer takes it in that batch.
template <typename Traits>
struct ManualClocked : Traits {
  using Clock = ManualClock;
};

template <typename Traits>
void ExpectPublishedDuringTheBatchIsMeasured() {
  sluice::MpscBus<BasicPayload, 64, ManualClocked<Traits>> bus;
  bool published = false;
  auto handle = bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
    if (command.speed != 1 || published) return;
    ManualClock::now = 3'000'000;  // the e-stop is published now,
    published = bus.PublishWithPriority(MotorCmd{2}, 0, MessagePriority::HIGH).IsAdmitted();
    ManualClock::now = 3'000'600;  // and taken up 600 ns later
  });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, nanoseconds(1'000'000), MessagePriority::LOW));
  ManualClock::now = 2'000'000;  // the batch's reading
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  ASSERT_TRUE(published);
  const LatencyHistogram high = bus.GetLatencyHistograms().For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 1u);
  EXPECT_EQ(high.sum_nanos, 600u);
  EXPECT_EQ(high.buckets[3], 1u);  // 513-1024 ns: not 0, not "at most 1 us"
  EXPECT_EQ(high.PercentileNanos(0.5), 1024u);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::LOW).sum_nanos, 1'000'000u);
}

TEST(LatencyTest, AMessagePublishedDuringTheBatchIsMeasuredFifo) {
  ExpectPublishedDuringTheBatchIsMeasured<sluice::DefaultBusTraits>();
}

TEST(LatencyTest, AMessagePublishedDuringTheBatchIsMeasuredPriorityOrdered) {
  ExpectPublishedDuringTheBatchIsMeasured<sluice::PriorityOrderTraits>();
}

// A coarse clock (a 1 ms tick, as the Cortex-M SysTick clock): an e-stop
// published in the tick of the batch's reading, behind a LOW message whose
// callback takes 3 ms, is taken up 3 ms later. Its stamp equals the reading,
// so it may have been published after it: it is measured to a fresh reading
// (3 ms), not to the batch's (0).
TEST(LatencyTest, AMessageStampedInTheReadingsTickIsMeasuredToAFreshReading) {
  Bus<> bus;
  constexpr std::uint64_t kTick = 1'000'000;
  ManualClock::now = 7 * kTick;
  auto handle = bus.Subscribe<MotorCmd>([&](const MotorCmd& command) {
    if (command.speed == 1) ManualClock::now = 10 * kTick;  // a slow callback: 3 ticks
  });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, MessagePriority::LOW));
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{2}, 0, MessagePriority::HIGH));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  const LatencyHistogram high = bus.GetLatencyHistograms().For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 1u);
  EXPECT_EQ(high.sum_nanos, 3 * kTick)
      << "a HIGH message taken up 3 ms late recorded as " << high.sum_nanos << " ns";
  EXPECT_EQ(high.buckets[0], 0u);
}

// The recorder alone: a stamp equal to the reading reads the clock again;
// one before it does not.
TEST(LatencyTest, AStampEqualToTheReadingIsMeasuredToAFreshReading) {
  sluice::detail::LatencyRecorder<true> recorder;
  ScriptedClock::Script(4'000, 9'999, 9'999, 9'999);
  auto batch = recorder.BeginBatch<ScriptedClock, 16>(1'000);
  batch.Add(Stamped(999));  // before the reading: 1 ns, no read
  EXPECT_EQ(ScriptedClock::reads, 0);
  batch.Add(Stamped(1'000));  // in the reading's tick: measured to the fresh 4,000
  EXPECT_EQ(ScriptedClock::reads, 1);
  batch.Finish();
  const LatencyHistogram& high = recorder.Snapshot().For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 2u);
  EXPECT_EQ(high.sum_nanos, 1u + 3'000u);
}

// Sub-microsecond latencies fall in buckets of their own: 300, 600 and
// 1,900 ns in three different buckets, the first two below 1.024 us.
TEST(LatencyTest, SubMicrosecondLatenciesAreToldApart) {
  Bus<> bus;
  ManualClock::now = 1'000'000;
  for (std::uint64_t age : {300u, 600u, 1'900u}) {
    ASSERT_TRUE(
        bus.PublishFast(MotorCmd{1}, 0, nanoseconds(1'000'000 - age), MessagePriority::HIGH));
  }
  EXPECT_EQ(bus.ProcessBatch(), 3u);
  const LatencyHistogram high = bus.GetLatencyHistograms().For(MessagePriority::HIGH);
  EXPECT_EQ(high.buckets[2], 1u);  // 300 ns: 257-512 ns
  EXPECT_EQ(high.buckets[3], 1u);  // 600 ns: 513-1024 ns
  EXPECT_EQ(high.buckets[4], 1u);  // 1.9 us: 1025-2048 ns
  EXPECT_EQ(high.sum_nanos, 2'800u);
  EXPECT_LT(LatencyHistogram::UpperBoundNanos(3), 2'000u);
  EXPECT_EQ(high.PercentileNanos(0.6), 1024u);
}

// A clock written before 0.4, with only NowMicros(): the bus reads it times
// 1000 (microsecond granularity).
struct MicrosOnlyClock {
  static inline std::uint64_t now = 0;
  static std::uint64_t NowMicros() noexcept { return now; }
};
struct MicrosOnlyClockTraits : sluice::DefaultBusTraits {
  using Clock = MicrosOnlyClock;
};

TEST(LatencyTest, AClockWithOnlyNowMicrosIsReadInNanoseconds) {
  sluice::MpscBus<BasicPayload, 64, MicrosOnlyClockTraits> bus;
  MicrosOnlyClock::now = 7;
  std::uint64_t stamp = 0;
  auto handle = bus.Subscribe<MotorCmd>(
      [&](const MotorCmd&, const sluice::MessageHeader& header) { stamp = header.timestamp_ns; });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  MicrosOnlyClock::now = 10;
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(stamp, 7'000u);
  const LatencyHistogram medium = bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.sum_nanos, 3'000u);
  EXPECT_EQ(medium.buckets[5], 1u);  // 2049-4096 ns
}

}  // namespace
}  // namespace latency_test
}  // namespace sluice_test
