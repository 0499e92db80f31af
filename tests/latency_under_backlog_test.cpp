// The latency histograms under a backlog of slow messages: each message is
// measured close to its own dispatch, within the bound docs/api.md states.
//
// The bus's clock is a test clock that only the callbacks move: a callback
// "spins" for its message's cost by advancing it, so the test knows, for
// every message, its true latency (the clock when its callback starts, minus
// its timestamp) and the time the consumer spent on the messages before it,
// and asserts no real time at all. The bound: a recorded latency is never
// above the true one, and below it by at most the time the
// Latency::kClockInterval - 1 messages before it in its batch took; a message
// published after the consumer's last reading (a follow-up published by a
// callback) is measured to a fresh reading. Times are in nanoseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "typed_test_names.hpp"

namespace sluice_test {
namespace latency_under_backlog_test {
namespace {

using sluice::DeliveryOrder;
using sluice::LatencyHistogram;
using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::PerformanceMode;
using sluice::ProducerModel;

// Only the test's thread reads and moves it (the consumer is that thread).
struct StepClock {
  static inline std::uint64_t now = 1'000'000;
  static inline std::uint64_t reads = 0;
  static std::uint64_t NowNanos() noexcept {
    ++reads;
    return now;
  }
};

template <std::uint32_t kInterval, DeliveryOrder kOrder, ProducerModel kModel>
struct Config {
  struct Traits : sluice::DefaultBusTraits {
    using Clock = StepClock;
    using Latency = sluice::LatencyHistograms<kInterval>;
    using Delivery = std::conditional_t<kOrder == DeliveryOrder::kPriority,
                                        sluice::PriorityDelivery<>, sluice::FifoDelivery>;
  };
  static constexpr std::uint32_t kClockInterval = kInterval;
  using Bus = sluice::AsyncBus<BasicPayload, 1024, kModel, Traits>;
};

constexpr std::uint32_t kDefaultInterval = sluice::DefaultBusTraits::Latency::kClockInterval;

// What the application saw of one message: its priority, its stamp, its
// latency by its own timing, and how long its callback spun.
struct Observed {
  MessagePriority priority;
  std::uint64_t stamp;
  std::uint64_t true_latency;
  std::uint64_t cost;
  std::uint32_t batch;
};

// A message's cost in nanoseconds: mostly slow, some free, none alike for long.
std::uint64_t CostOf(std::int32_t speed) { return speed % 11 == 0 ? 0 : 1 + (speed * 37) % 53; }

MessagePriority PriorityOf(std::int32_t i) {
  return i % 7 == 0 ? MessagePriority::HIGH
                    : (i % 3 == 0 ? MessagePriority::LOW : MessagePriority::MEDIUM);
}

// Cumulative counts of a histogram up to each bucket.
std::vector<std::uint64_t> Cumulative(const LatencyHistogram& histogram) {
  std::vector<std::uint64_t> cumulative(sluice::kLatencyBucketCount);
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < sluice::kLatencyBucketCount; ++b) {
    seen += histogram.buckets[b];
    cumulative[b] = seen;
  }
  return cumulative;
}

void Record(LatencyHistogram* histogram, std::uint64_t nanos) {
  ++histogram->buckets[sluice::detail::LatencyBucket(nanos)];
  ++histogram->count;
  histogram->sum_nanos += nanos;
}

template <typename C>
class LatencyUnderBacklogTest : public ::testing::Test {};
using Configs =
    ::testing::Types<Config<kDefaultInterval, DeliveryOrder::kFifo, ProducerModel::kMulti>,
                     Config<kDefaultInterval, DeliveryOrder::kPriority, ProducerModel::kMulti>,
                     Config<1, DeliveryOrder::kFifo, ProducerModel::kSingle>,
                     Config<5, DeliveryOrder::kFifo, ProducerModel::kMulti>,
                     Config<5, DeliveryOrder::kPriority, ProducerModel::kSingle>>;
TYPED_TEST_SUITE(LatencyUnderBacklogTest, Configs, IndexNames);

// A backlog of kBacklog messages, published over time, then dispatched in
// batches of at most `batch_limit`; some callbacks publish a message that
// the same batch dispatches. Returns the application's observations in
// dispatch order and checks the bus's histograms against them.
template <typename C>
void RunBacklog(std::uint32_t batch_limit) {
  using Bus = typename C::Bus;
  constexpr std::uint32_t kInterval = C::kClockInterval;
  constexpr std::int32_t kBacklog = 500;
  constexpr std::int32_t kFollowUpBase = 100'000;
  auto bus = std::make_unique<Bus>();
  StepClock::now = 1'000'000;

  std::vector<Observed> observed;
  std::uint32_t batch = 0;
  std::uint64_t republished = 0;
  const sluice::SubscriptionHandle handle =
      bus->template Subscribe<MotorCmd>([&](const MotorCmd& m, const MessageHeader& h) {
        // The application's own timing: the clock as its callback starts.
        ASSERT_GE(StepClock::now, h.timestamp_ns);
        const std::uint64_t cost = CostOf(m.speed);
        observed.push_back(
            Observed{h.priority, h.timestamp_ns, StepClock::now - h.timestamp_ns, cost, batch});
        StepClock::now += cost;  // spins for `cost` on the bus clock
        if (m.speed < kFollowUpBase && m.speed % 50 == 7) {
          // Published mid-batch, stamped with the clock as it is now.
          ++republished;
          ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{kFollowUpBase + m.speed}, 0,
                                               PriorityOf(m.speed + 1)));
        }
      });
  ASSERT_TRUE(handle.IsValid());

  for (std::int32_t i = 0; i < kBacklog; ++i) {
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{i}, 0, PriorityOf(i)));
    StepClock::now += static_cast<std::uint64_t>(i % 5);
  }

  std::uint64_t taken = 0;
  StepClock::reads = 0;
  for (;;) {
    const std::uint32_t count = bus->ProcessBatch(batch_limit);
    if (count == 0) break;
    taken += count;
    ++batch;
  }
  ASSERT_EQ(taken, static_cast<std::uint64_t>(kBacklog) + republished);
  ASSERT_EQ(observed.size(), taken);
  EXPECT_GT(republished, 0u);

  // The recorder replayed: only callbacks move the clock, so when message k
  // was taken up (and its callback started) the clock read its stamp plus
  // its true latency. Each batch reads it before its first message and
  // before messages kInterval, 2 * kInterval, ...; and again for a message
  // stamped at or after the current reading. Each follow-up publish stamps once.
  LatencyHistogram replayed[sluice::kPriorityCount];
  std::uint64_t expected_reads = republished;
  std::uint64_t fresh_reads = 0;
  std::uint64_t reading = 0;
  std::uint32_t in_batch = 0;
  for (std::size_t k = 0; k < observed.size(); ++k) {
    const Observed& o = observed[k];
    const std::uint64_t clock = o.stamp + o.true_latency;
    in_batch = (k == 0 || observed[k - 1].batch != o.batch) ? 0 : in_batch + 1;
    if (in_batch % kInterval == 0) {
      reading = clock;
      ++expected_reads;
    }
    if (o.stamp >= reading) {  // stamped at or after the reading: maybe published after it
      reading = clock;
      ++expected_reads;
      ++fresh_reads;
    }
    Record(&replayed[static_cast<std::size_t>(o.priority)],
           reading > o.stamp ? reading - o.stamp : 0);
  }
  // In priority order a follow-up of a higher priority is taken within the
  // interval of its publish: measured to a fresh reading. (In FIFO order it
  // waits behind the backlog, past a scheduled reading.)
  if constexpr (Bus::kDeliveryOrder == DeliveryOrder::kPriority && kInterval > 1) {
    EXPECT_GT(fresh_reads, 0u) << "no follow-up was published after its batch's reading";
  }
  EXPECT_EQ(StepClock::reads, expected_reads)
      << "one clock read per " << kInterval << " messages, and one per late stamp";

  // The bound, per message: at most the true latency, at least the true
  // latency less the cost of the kInterval - 1 messages before it in its batch.
  LatencyHistogram truth[sluice::kPriorityCount];
  LatencyHistogram lowest[sluice::kPriorityCount];
  std::uint64_t largest_slack = 0;
  for (std::size_t k = 0; k < observed.size(); ++k) {
    std::uint64_t slack = 0;
    for (std::size_t j = k;
         j > 0 && k - j + 1 < kInterval && observed[j - 1].batch == observed[k].batch; --j) {
      slack += observed[j - 1].cost;
    }
    largest_slack = std::max(largest_slack, slack);
    const auto p = static_cast<std::size_t>(observed[k].priority);
    Record(&truth[p], observed[k].true_latency);
    Record(&lowest[p], observed[k].true_latency > slack ? observed[k].true_latency - slack : 0);
  }
  if constexpr (kInterval == 1) {
    EXPECT_EQ(largest_slack, 0u);
  }

  const sluice::LatencySnapshot snapshot = bus->GetLatencyHistograms();
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    const LatencyHistogram& recorded = snapshot.by_priority[p];
    SCOPED_TRACE(::testing::Message() << "priority " << p << ", interval " << kInterval
                                      << ", batches of " << batch_limit);
    ASSERT_GT(truth[p].count, 0u);
    EXPECT_EQ(recorded.count, truth[p].count);
    EXPECT_LE(recorded.sum_nanos, truth[p].sum_nanos) << "recorded above the true latency";
    EXPECT_GE(recorded.sum_nanos, lowest[p].sum_nanos) << "recorded below the bound";
    EXPECT_EQ(recorded.sum_nanos, replayed[p].sum_nanos) << "not the readings replayed";
    EXPECT_EQ(Cumulative(recorded), Cumulative(replayed[p])) << "not the readings replayed";
    // Every message's bucket lies between its lowest allowed latency's and
    // its true latency's, so the cumulative counts lie between theirs.
    const std::vector<std::uint64_t> by_bus = Cumulative(recorded);
    const std::vector<std::uint64_t> by_truth = Cumulative(truth[p]);
    const std::vector<std::uint64_t> by_lowest = Cumulative(lowest[p]);
    for (std::size_t b = 0; b < sluice::kLatencyBucketCount; ++b) {
      EXPECT_GE(by_bus[b], by_truth[b]) << "bucket " << b << ": recorded above the true latency";
      EXPECT_LE(by_bus[b], by_lowest[b]) << "bucket " << b << ": recorded below the bound";
    }
    if constexpr (kInterval == 1) {
      EXPECT_EQ(recorded.sum_nanos, truth[p].sum_nanos);
      EXPECT_EQ(by_bus, by_truth);
    }
  }
}

TYPED_TEST(LatencyUnderBacklogTest, OneBatchDrainingTheBacklog) {
  RunBacklog<TypeParam>(TypeParam::Bus::Capacity());
}

TYPED_TEST(LatencyUnderBacklogTest, BatchesOfThirtySeven) { RunBacklog<TypeParam>(37); }

TYPED_TEST(LatencyUnderBacklogTest, BatchesShorterThanTheInterval) { RunBacklog<TypeParam>(3); }

// A message behind a backlog, at every position of its batch through three
// clock intervals: the bus must report the wait the application measured, not
// the time since its batch began, within the bound for that one message.
template <typename C>
void ProbeEveryPosition() {
  using Bus = typename C::Bus;
  constexpr std::uint32_t kInterval = C::kClockInterval;
  constexpr std::uint64_t kCost = 100;  // every message spins 100 ns
  auto bus = std::make_unique<Bus>();
  std::uint64_t probe_latency = 0;
  ASSERT_TRUE(bus->template Subscribe<MotorCmd>([&](const MotorCmd& m, const MessageHeader& h) {
                   if (m.speed == -1) probe_latency = StepClock::now - h.timestamp_ns;
                   StepClock::now += kCost;
                 })
                  .IsValid());
  for (std::uint32_t position = 0; position <= 3 * kInterval + 1; ++position) {
    SCOPED_TRACE(::testing::Message() << "position " << position << ", interval " << kInterval);
    StepClock::now = 5'000'000;
    bus->ResetStatistics();
    for (std::uint32_t i = 0; i < position; ++i) {
      ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{static_cast<std::int32_t>(i)}, 0,
                                           MessagePriority::MEDIUM));
    }
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{-1}, 0, MessagePriority::HIGH));
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{1}, 0, MessagePriority::MEDIUM));  // after it
    ASSERT_EQ(bus->ProcessBatch(), position + 2);
    EXPECT_EQ(probe_latency, kCost * position);
    const LatencyHistogram high = bus->GetLatencyHistograms().For(MessagePriority::HIGH);
    ASSERT_EQ(high.count, 1u);
    EXPECT_LE(high.sum_nanos, probe_latency) << "recorded above the true latency";
    const std::uint64_t slack = kCost * std::min(position, kInterval - 1);
    EXPECT_GE(high.sum_nanos, probe_latency - slack) << "recorded below the bound";
  }
}

TEST(LatencyUnderBacklogTest, AMessageAtAnyPositionIsMeasuredToItsOwnDispatch) {
  ProbeEveryPosition<Config<kDefaultInterval, DeliveryOrder::kFifo, ProducerModel::kMulti>>();
  ProbeEveryPosition<Config<1, DeliveryOrder::kFifo, ProducerModel::kSingle>>();
  ProbeEveryPosition<Config<5, DeliveryOrder::kFifo, ProducerModel::kMulti>>();
}

// The bound's price: the histograms' batches read the clock once per
// Latency::kClockInterval messages; batches that record nothing read none.
struct NoHistogramTraits : Config<4, DeliveryOrder::kFifo, ProducerModel::kMulti>::Traits {
  using Latency = sluice::NoLatencyHistograms;
};

TEST(LatencyUnderBacklogTest, OnlyRecordingBatchesReadTheClock) {
  using Bus = Config<4, DeliveryOrder::kFifo, ProducerModel::kMulti>::Bus;
  constexpr int kMessages = 50;
  {
    auto bus = std::make_unique<Bus>();
    for (PerformanceMode mode : {PerformanceMode::NO_STATS, PerformanceMode::BARE_METAL}) {
      bus->SetPerformanceMode(mode);
      for (int i = 0; i < kMessages; ++i)
        ASSERT_TRUE(bus->PublishFast(MotorCmd{i}, 0, std::chrono::nanoseconds(7)));
      StepClock::reads = 0;
      EXPECT_EQ(bus->ProcessBatch(), static_cast<std::uint32_t>(kMessages));
      EXPECT_EQ(StepClock::reads, 0u) << sluice::ToString(mode);
    }
    bus->SetPerformanceMode(PerformanceMode::FULL_FEATURED);
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(bus->PublishFast(MotorCmd{i}, 0, std::chrono::nanoseconds(7)));
    StepClock::reads = 0;
    EXPECT_EQ(bus->ProcessBatchWith([](const auto&) {}), static_cast<std::uint32_t>(kMessages));
    EXPECT_EQ(StepClock::reads, (kMessages + 3u) / 4u);
  }
  {
    auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 1024, NoHistogramTraits>>();
    for (int i = 0; i < kMessages; ++i)
      ASSERT_TRUE(bus->PublishFast(MotorCmd{i}, 0, std::chrono::nanoseconds(7)));
    StepClock::reads = 0;
    EXPECT_EQ(bus->ProcessBatch(), static_cast<std::uint32_t>(kMessages));
    EXPECT_EQ(StepClock::reads, 0u);
  }
}

}  // namespace
}  // namespace latency_under_backlog_test
}  // namespace sluice_test
