#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "sluice/detail/latency_recorder.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace {

using sluice::LatencyHistogram;
using sluice::MessagePriority;
using sluice::PerformanceMode;

// A clock the test sets, counting its reads.
struct ManualClock {
  static inline std::atomic<std::uint64_t> now{1000};
  static inline std::atomic<int> reads{0};
  static std::uint64_t NowMicros() noexcept {
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

TEST(LatencyBucketTest, BucketIHoldsLatenciesUpToTwoToTheI) {
  using sluice::detail::LatencyBucket;
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(1), 0u);
  EXPECT_EQ(LatencyBucket(2), 1u);
  EXPECT_EQ(LatencyBucket(3), 2u);
  EXPECT_EQ(LatencyBucket(4), 2u);
  EXPECT_EQ(LatencyBucket(5), 3u);
  EXPECT_EQ(LatencyBucket(1024), 10u);
  EXPECT_EQ(LatencyBucket(1025), 11u);
  EXPECT_EQ(LatencyBucket(std::uint64_t{1} << 23), 23u);
  EXPECT_EQ(LatencyBucket((std::uint64_t{1} << 23) + 1), 24u);
  EXPECT_EQ(LatencyBucket(~std::uint64_t{0}), 24u);
  for (std::size_t bucket = 0; bucket + 1 < sluice::kLatencyBucketCount; ++bucket) {
    const std::uint64_t bound = LatencyHistogram::UpperBoundMicros(bucket);
    EXPECT_EQ(LatencyBucket(bound), bucket);
    EXPECT_EQ(LatencyBucket(bound + 1), bucket + 1);
  }
  EXPECT_EQ(LatencyHistogram::UpperBoundMicros(24), LatencyHistogram::kUnbounded);
}

TEST(LatencyHistogramTest, PercentilesAreBucketBounds) {
  LatencyHistogram histogram;
  EXPECT_EQ(histogram.PercentileMicros(0.5), 0u);  // empty
  histogram.buckets[0] = 50;                       // <= 1 us
  histogram.buckets[3] = 49;                       // 5-8 us
  histogram.buckets[10] = 1;                       // 513-1024 us
  histogram.count = 100;
  EXPECT_EQ(histogram.PercentileMicros(0.0), 1u);
  EXPECT_EQ(histogram.PercentileMicros(0.5), 1u);
  EXPECT_EQ(histogram.PercentileMicros(0.51), 8u);
  EXPECT_EQ(histogram.PercentileMicros(0.99), 8u);
  EXPECT_EQ(histogram.PercentileMicros(0.991), 1024u);
  EXPECT_EQ(histogram.PercentileMicros(1.0), 1024u);
  EXPECT_EQ(histogram.PercentileMicros(2.0), 1024u);
  histogram.buckets[24] = 100;
  histogram.count = 200;
  EXPECT_EQ(histogram.PercentileMicros(1.0), LatencyHistogram::kUnbounded);
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
      if (histogram.PercentileMicros(static_cast<double>(k) / 100.0) != 1u) ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// 1,000 latencies of 5 s: 5,000 s, past 2^32 us (71.6 minutes). The sum is
// 64-bit in both configurations, also with SLUICE_ATOMIC_BITS=32.
TEST(LatencyTest, TheSumDoesNotWrapAt32Bits) {
  sluice::detail::LatencyRecorder<true> recorder;
  constexpr std::uint64_t kFiveSeconds = 5'000'000;
  constexpr std::uint64_t kNow = 100 * kFiveSeconds;
  for (int i = 0; i < 1000; ++i) {
    auto batch = recorder.BeginBatch(kNow);
    sluice::MessageHeader header;
    header.timestamp_us = kNow - kFiveSeconds;
    batch.Add(header);
    batch.Finish();
  }
  const LatencyHistogram& medium = recorder.Snapshot().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1000u);
  EXPECT_EQ(medium.sum_micros, 5'000'000'000u);
  recorder.Reset();
  EXPECT_EQ(recorder.Snapshot().For(MessagePriority::MEDIUM).sum_micros, 0u);
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
  ManualClock::now = 1000;
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{2}, 0, MessagePriority::LOW));
  ManualClock::now = 1005;
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{3}, 0, MessagePriority::LOW));
  ManualClock::now = 1300;
  EXPECT_EQ(bus.ProcessBatch(), 3u);

  const sluice::LatencySnapshot snapshot = bus.GetLatencyHistograms();
  const LatencyHistogram& high = snapshot.For(MessagePriority::HIGH);
  EXPECT_EQ(high.count, 1u);
  EXPECT_EQ(high.sum_micros, 300u);
  EXPECT_EQ(high.buckets[9], 1u);  // 257-512 us
  const LatencyHistogram& low = snapshot.For(MessagePriority::LOW);
  EXPECT_EQ(low.count, 2u);
  EXPECT_EQ(low.sum_micros, 300u + 295u);
  EXPECT_EQ(low.buckets[9], 2u);
  EXPECT_EQ(snapshot.For(MessagePriority::MEDIUM).count, 0u);
  EXPECT_EQ(low.PercentileMicros(0.99), 512u);
}

// Runs of equal buckets are counted together: alternating buckets and
// priorities within one batch must still land exactly.
TEST(LatencyTest, AlternatingBucketsAndPrioritiesInOneBatch) {
  Bus<> bus;
  ManualClock::now = 10'000;
  const std::uint64_t ages[] = {3, 3, 100, 3, 100, 100, 3};  // buckets 2 and 7
  const MessagePriority priorities[] = {
      MessagePriority::LOW,  MessagePriority::LOW, MessagePriority::LOW, MessagePriority::HIGH,
      MessagePriority::HIGH, MessagePriority::LOW, MessagePriority::LOW};
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, 10'000 - ages[i], priorities[i]));
  }
  EXPECT_EQ(bus.ProcessBatch(), 7u);
  const sluice::LatencySnapshot snapshot = bus.GetLatencyHistograms();
  const LatencyHistogram& low = snapshot.For(MessagePriority::LOW);
  EXPECT_EQ(low.buckets[2], 3u);
  EXPECT_EQ(low.buckets[7], 2u);
  EXPECT_EQ(low.count, 5u);
  EXPECT_EQ(low.sum_micros, 3u + 3 + 100 + 100 + 3);
  const LatencyHistogram& high = snapshot.For(MessagePriority::HIGH);
  EXPECT_EQ(high.buckets[2], 1u);
  EXPECT_EQ(high.buckets[7], 1u);
  EXPECT_EQ(high.sum_micros, 103u);
}

TEST(LatencyTest, TheConsumerReadsTheClockOncePerBatch) {
  Bus<> bus;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, 500));
  ManualClock::reads = 0;
  ManualClock::now = 600;
  EXPECT_EQ(bus.ProcessBatch(), 10u);
  EXPECT_EQ(ManualClock::reads.load(), 1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, 500));
  EXPECT_EQ(bus.ProcessBatchWith([](const auto&) {}), 10u);
  EXPECT_EQ(ManualClock::reads.load(), 2);
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // nothing queued: no read
  EXPECT_EQ(ManualClock::reads.load(), 2);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 20u);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).buckets[7], 20u);
}

TEST(LatencyTest, OnlyFullFeaturedRecords) {
  Bus<> bus;
  for (PerformanceMode mode : {PerformanceMode::NO_STATS, PerformanceMode::BARE_METAL}) {
    bus.SetPerformanceMode(mode);
    ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, 500));
    ManualClock::reads = 0;
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(ManualClock::reads.load(), 0) << sluice::ToString(mode);
  }
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
}

TEST(LatencyTest, UnstampedAndFutureMessages) {
  Bus<> bus;
  ManualClock::now = 100;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, 0));    // no timestamp: not counted
  ASSERT_TRUE(bus.PublishFast(MotorCmd{2}, 0, 150));  // ahead of the clock: latency 0
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  const LatencyHistogram& medium = bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1u);
  EXPECT_EQ(medium.buckets[0], 1u);
  EXPECT_EQ(medium.sum_micros, 0u);
}

TEST(LatencyTest, ResetStatisticsClearsTheHistograms) {
  Bus<> bus;
  ManualClock::now = 10;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, 5));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  bus.ResetStatistics();
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, 6));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  const LatencyHistogram& medium = bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(medium.count, 1u);
  EXPECT_EQ(medium.sum_micros, 4u);
  EXPECT_EQ(medium.buckets[2], 1u);
}

TEST(LatencyTest, TraitsCanTurnTheHistogramsOff) {
  Bus<NoHistogramTraits> bus;
  ASSERT_TRUE(bus.PublishFast(MotorCmd{1}, 0, 5));
  ManualClock::reads = 0;
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(ManualClock::reads.load(), 0);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 0u);
  EXPECT_LT(sizeof(Bus<NoHistogramTraits>), sizeof(Bus<>));
}

}  // namespace
}  // namespace sluice_test
