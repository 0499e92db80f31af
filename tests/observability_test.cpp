// What a dashboard reads between scrapes: processed counts by priority on
// every bus, each registered producer's counters under its name
// (ForEachProducer), and the backpressure peak since the last read
// (TakeBackpressurePeak). The threaded checks (a name never shown with
// another holder's counts) are in producer_lane_concurrency_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "sluice/detail/queue/lane_holder.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace observability_test {
namespace {

using sluice::BackpressureLevel;
using sluice::MessagePriority;

using Payload = std::variant<int>;

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<3, 16>;
};
struct OrderedTraits : sluice::DefaultBusTraits {
  using Delivery = sluice::PriorityDelivery<>;
};
using FifoBus = sluice::AsyncBus<Payload, 16>;
using SpscBus = sluice::AsyncBus<Payload, 16, sluice::ProducerModel::kSingle>;
using OrderedBus = sluice::AsyncBus<Payload, 16, sluice::ProducerModel::kMulti, OrderedTraits>;
using LaneBus = sluice::AsyncBus<Payload, 16, sluice::ProducerModel::kMulti, LaneTraits>;

template <typename Bus>
class ProcessedByPriorityTest : public ::testing::Test {};
using Buses = ::testing::Types<FifoBus, SpscBus, OrderedBus, LaneBus>;
TYPED_TEST_SUITE(ProcessedByPriorityTest, Buses, sluice_test::IndexNames);

TYPED_TEST(ProcessedByPriorityTest, EachPriorityIsCountedAndTheySumToTheTotal) {
  TypeParam bus;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(bus.PublishWithPriority(i, 0, MessagePriority::LOW));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(bus.PublishWithPriority(i, 0, MessagePriority::MEDIUM));
  ASSERT_TRUE(bus.PublishWithPriority(9, 0, MessagePriority::HIGH));
  // Half of them first: processed by priority never above published.
  ASSERT_EQ(bus.ProcessBatchWith([](const int&) {}, 3), 3u);
  sluice::BusStatisticsSnapshot s = bus.GetStatistics();
  EXPECT_LE(s.low_priority_processed, s.low_priority_published);
  EXPECT_LE(s.medium_priority_processed, s.medium_priority_published);
  EXPECT_LE(s.high_priority_processed, s.high_priority_published);
  EXPECT_EQ(s.messages_processed, 3u);
  EXPECT_EQ(s.low_priority_processed + s.medium_priority_processed + s.high_priority_processed, 3u);
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  s = bus.GetStatistics();
  EXPECT_EQ(s.low_priority_processed, 2u);
  EXPECT_EQ(s.medium_priority_processed, 3u);
  EXPECT_EQ(s.high_priority_processed, 1u);
  EXPECT_EQ(s.messages_processed, 6u);
}

TYPED_TEST(ProcessedByPriorityTest, MessagesQueuedAtAResetAreNotCountedPerPriority) {
  TypeParam bus;
  ASSERT_TRUE(bus.PublishWithPriority(1, 0, MessagePriority::LOW));
  ASSERT_TRUE(bus.PublishWithPriority(2, 0, MessagePriority::HIGH));
  bus.ResetStatistics();
  ASSERT_TRUE(bus.PublishWithPriority(3, 0, MessagePriority::LOW));
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  const sluice::BusStatisticsSnapshot s = bus.GetStatistics();
  EXPECT_EQ(s.low_priority_published, 1u);
  EXPECT_EQ(s.low_priority_processed, 1u);
  EXPECT_EQ(s.high_priority_processed, 0u);
  EXPECT_EQ(s.messages_processed, 1u);
}

// ---- Registered producers by name ----------------------------------------------

std::vector<sluice::ProducerStatisticsSnapshot> Producers(const LaneBus& bus) {
  std::vector<sluice::ProducerStatisticsSnapshot> out;
  const std::size_t visited =
      bus.ForEachProducer([&](const sluice::ProducerStatisticsSnapshot& p) { out.push_back(p); });
  EXPECT_EQ(visited, out.size());
  return out;
}

TEST(ProducerStatisticsTest, EachRegisteredProducerIsListedUnderItsNameWithItsCounts) {
  LaneBus bus;
  char name[] = "lidar-front";
  auto lidar = bus.RegisterProducer(name);
  std::strcpy(name, "overwritten");  // the bus keeps its own copy
  auto imu = bus.RegisterProducer("imu");
  auto anonymous = bus.RegisterProducer();
  ASSERT_TRUE(lidar && imu && anonymous);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(lidar.Publish(i));
  ASSERT_TRUE(imu.PublishWithPriority(1, 0, MessagePriority::HIGH));
  // The lane holds 16; LOW is refused from 60 % of it.
  int low_refused = 0;
  for (int i = 0; i < 16; ++i)
    low_refused += imu.PublishWithPriority(i, 0, MessagePriority::LOW) ? 0 : 1;
  ASSERT_GT(low_refused, 0);
  bus.Close();
  EXPECT_EQ(anonymous.Publish(1).Outcome(), sluice::PublishOutcome::kClosed);

  const auto producers = Producers(bus);
  ASSERT_EQ(producers.size(), 3u);
  EXPECT_STREQ(producers[0].name, "lidar-front");
  EXPECT_EQ(producers[0].lane, lidar.Lane());
  EXPECT_EQ(producers[0].medium_priority_published, 3u);
  EXPECT_EQ(producers[0].high_priority_published, 0u);
  EXPECT_STREQ(producers[1].name, "imu");
  EXPECT_EQ(producers[1].lane, imu.Lane());
  EXPECT_EQ(producers[1].high_priority_published, 1u);
  EXPECT_EQ(producers[1].low_priority_dropped, static_cast<std::uint64_t>(low_refused));
  EXPECT_EQ(producers[1].low_priority_published + producers[1].low_priority_dropped, 16u);
  EXPECT_STREQ(producers[2].name, "");
  EXPECT_EQ(producers[2].messages_refused_closed, 1u);
  EXPECT_EQ(producers[2].medium_priority_published, 0u);
}

TEST(ProducerStatisticsTest, ANewHolderOfALaneStartsFromZeroWhileTheBusKeepsTheTotal) {
  LaneBus bus;
  {
    auto first = bus.RegisterProducer("first");
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(first.Publish(i));
  }                                     // hands the lane back
  EXPECT_TRUE(Producers(bus).empty());  // a lane without a holder is not listed
  auto second = bus.RegisterProducer("second");
  ASSERT_EQ(second.Lane(), 1);  // the same lane
  ASSERT_TRUE(second.Publish(7));
  const auto producers = Producers(bus);
  ASSERT_EQ(producers.size(), 1u);
  EXPECT_STREQ(producers[0].name, "second");
  EXPECT_EQ(producers[0].medium_priority_published, 1u);
  EXPECT_EQ(bus.GetStatistics().medium_priority_published, 5u);
  EXPECT_EQ(second.GetStatistics().medium_priority_published, 5u);  // the lane's, documented
}

TEST(ProducerStatisticsTest, CountsStartAgainAtAReset) {
  LaneBus bus;
  auto producer = bus.RegisterProducer("p");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(producer.Publish(i));
  bus.ResetStatistics();
  ASSERT_TRUE(producer.Publish(5));
  const auto producers = Producers(bus);
  ASSERT_EQ(producers.size(), 1u);
  EXPECT_EQ(producers[0].medium_priority_published, 1u);
}

TEST(ProducerStatisticsTest, ALongNameIsCutAtACharacterBoundary) {
  LaneBus bus;
  // "ab" then 20 two-byte characters: 42 bytes; 31 fit, and the 31st byte
  // is the first half of a character.
  std::string name = "ab";
  for (int i = 0; i < 20; ++i) name += "\xC3\xA9";  // U+00E9
  auto producer = bus.RegisterProducer(name.c_str());
  const auto producers = Producers(bus);
  ASSERT_EQ(producers.size(), 1u);
  const std::string kept = producers[0].name;
  EXPECT_EQ(kept, name.substr(0, 30));  // "ab" and 14 whole characters
  EXPECT_LT(kept.size(), sluice::kProducerNameCapacity);
  // Exactly 31 ASCII bytes fit whole.
  LaneBus other;
  const std::string ascii(31, 'x');
  auto whole = other.RegisterProducer((ascii + "yz").c_str());
  std::vector<sluice::ProducerStatisticsSnapshot> seen;
  other.ForEachProducer([&](const auto& p) { seen.push_back(p); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(std::string(seen[0].name), ascii);
}

// The sequence check of SYNC POINT (N) at its worst instant: the holder
// changes after the reader read the name and baseline and while it reads
// the counts. The read must be retried and show the new holder, or none.
struct Counts {
  sluice::Counter values[2] = {};
};

TEST(LaneHolderTest, AHolderChangingDuringAReadIsReadAgain) {
  sluice::detail::LaneHolder<Counts> holder;
  holder.Occupy("old", Counts{{5, 6}});
  char name[sluice::kProducerNameCapacity];
  int reads = 0;
  std::uint64_t seen_baseline = 0;
  const bool held = holder.Read(name, [&](const Counts& baseline) {
    seen_baseline = baseline.values[0];
    if (++reads == 1) {
      holder.Vacate();
      holder.Occupy("new", Counts{{7, 8}});
    }
  });
  EXPECT_TRUE(held);
  EXPECT_EQ(reads, 2);
  EXPECT_STREQ(name, "new");
  EXPECT_EQ(seen_baseline, 7u);
}

TEST(LaneHolderTest, AHolderLeavingDuringAReadIsNotShown) {
  sluice::detail::LaneHolder<Counts> holder;
  holder.Occupy("old", Counts{});
  char name[sluice::kProducerNameCapacity];
  EXPECT_FALSE(holder.Read(name, [&](const Counts&) { holder.Vacate(); }));
  EXPECT_FALSE(holder.Read(name, [](const Counts&) {}));  // still vacant
}

// A label must be valid UTF-8 (the export is served as UTF-8): invalid
// bytes become '?', valid characters are kept whole.
TEST(ProducerStatisticsTest, InvalidUtf8InANameBecomesQuestionMarks) {
  const auto registered = [](const std::string& name) {
    LaneBus bus;
    auto producer = bus.RegisterProducer(name.c_str());
    std::string kept;
    bus.ForEachProducer([&](const auto& p) { kept = p.name; });
    return kept;
  };
  EXPECT_EQ(registered("abc\x80\x80"), "abc??");      // stray continuation bytes
  EXPECT_EQ(registered("a\xC3"), "a?");               // a sequence cut short
  EXPECT_EQ(registered("\xC0\xAF"), "??");            // an overlong form
  EXPECT_EQ(registered("\xED\xA0\x80"), "???");       // a surrogate
  EXPECT_EQ(registered("\xF4\x90\x80\x80"), "????");  // above U+10FFFF
  EXPECT_EQ(registered("\xF0\x9F\x9A\x97 car"), "\xF0\x9F\x9A\x97 car");  // 4 bytes, valid
  // 30 ASCII bytes and a 3-byte character: the character does not fit whole.
  EXPECT_EQ(registered(std::string(30, 'x') + "\xE2\x82\xAC"), std::string(30, 'x'));
  EXPECT_EQ(registered(std::string(28, 'x') + "\xE2\x82\xAC"),
            std::string(28, 'x') + "\xE2\x82\xAC");
}

TEST(ProducerStatisticsTest, ABusWithoutLanesHasNoProducers) {
  FifoBus bus;
  int calls = 0;
  EXPECT_EQ(bus.ForEachProducer([&](const auto&) { ++calls; }), 0u);
  EXPECT_EQ(calls, 0);
}

// ---- The backpressure peak between reads ---------------------------------------

template <typename Bus>
class BackpressurePeakTest : public ::testing::Test {};
using PeakBuses = ::testing::Types<FifoBus, SpscBus, OrderedBus>;
TYPED_TEST_SUITE(BackpressurePeakTest, PeakBuses, sluice_test::IndexNames);

TYPED_TEST(BackpressurePeakTest, ALowRefusedIsSeenAsWarningAfterTheQueueEmptied) {
  TypeParam bus;
  int refused = 0;
  for (int i = 0; i < 16; ++i)
    refused += bus.PublishWithPriority(i, 0, MessagePriority::LOW) ? 0 : 1;
  ASSERT_GT(refused, 0);
  const std::size_t low_limit = 16 - static_cast<std::size_t>(refused);
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  ASSERT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::NORMAL);
  const sluice::BackpressurePeak peak = bus.TakeBackpressurePeak();
  EXPECT_GE(peak.fill, low_limit);
  EXPECT_GE(peak.level, BackpressureLevel::WARNING);
  // Reset on read: the next period starts empty.
  const sluice::BackpressurePeak next = bus.TakeBackpressurePeak();
  EXPECT_EQ(next.fill, 0u);
  EXPECT_EQ(next.level, BackpressureLevel::NORMAL);
}

TYPED_TEST(BackpressurePeakTest, ARefusalIsSeenInEveryModeAndAFullOneMeansFull) {
  TypeParam bus;
  // BARE_METAL admits every priority up to the capacity, and its batches
  // note no fill: only the refusal can tell.
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(bus.PublishWithPriority(i, 0, MessagePriority::LOW));
  ASSERT_FALSE(bus.PublishWithPriority(16, 0, MessagePriority::LOW));
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  const sluice::BackpressurePeak peak = bus.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, 16u);
  EXPECT_EQ(peak.level, BackpressureLevel::FULL);
}

TYPED_TEST(BackpressurePeakTest, TheFillABatchStartsFromIsSeenInFullFeaturedMode) {
  TypeParam bus;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(bus.PublishWithPriority(i, 0, MessagePriority::HIGH));
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, 9u);
}

TYPED_TEST(BackpressurePeakTest, APeakIsNeverBelowTheFillNow) {
  TypeParam bus;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(bus.PublishWithPriority(i, 0, MessagePriority::HIGH));
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, 5u);
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, 5u);  // still queued
}

// HIGH's limit is 99 %: on a bus of more than 100 slots it is refused
// before every slot is taken, at CRITICAL.
TEST(BackpressurePeakLevelTest, AHighRefusedOnALargeBusReadsAtLeastCritical) {
  sluice::AsyncBus<Payload, 128> bus;
  int admitted = 0;
  while (bus.PublishWithPriority(admitted, 0, MessagePriority::HIGH)) ++admitted;
  ASSERT_LT(admitted, 128);
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  const sluice::BackpressurePeak peak = bus.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, static_cast<std::size_t>(admitted));
  EXPECT_GE(peak.level, BackpressureLevel::CRITICAL);
}

// The level is the one the bus reported when the refusal happened, not one
// computed later with other thresholds.
TEST(BackpressurePeakLevelTest, TheLevelIsTakenWhenTheRefusalHappens) {
  FifoBus bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::NO_STATS);  // batches note nothing
  int refused = 0;
  for (int i = 0; i < 16; ++i)
    refused += bus.PublishWithPriority(i, 0, MessagePriority::LOW) ? 0 : 1;
  ASSERT_GT(refused, 0);
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  ASSERT_TRUE(bus.SetAdmissionThresholds(90, 95, 99));  // the refused fill is NORMAL now
  EXPECT_GE(bus.TakeBackpressurePeak().level, BackpressureLevel::WARNING);
}

TEST(BackpressurePeakLevelTest, PeekingLeavesThePeriodRunning) {
  FifoBus bus;
  for (int i = 0; i < 16; ++i) (void)bus.PublishWithPriority(i, 0, MessagePriority::LOW);
  while (bus.ProcessBatchWith([](const int&) {}) > 0) {
  }
  const FifoBus& view = bus;
  const sluice::BackpressurePeak peeked = view.PeekBackpressurePeak();
  EXPECT_GE(peeked.level, BackpressureLevel::WARNING);
  EXPECT_EQ(view.PeekBackpressurePeak().fill, peeked.fill);
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, peeked.fill);
  EXPECT_EQ(view.PeekBackpressurePeak().fill, 0u);
}

// The gauges cover what admission judges, lanes included: a lane that
// overflows while the shared queue stays empty shows in the bus's level,
// utilisation and peak (on the lane's capacity), and the peak keeps it after
// the consumer emptied the lane.
TEST(BackpressurePeakLaneTest, ALaneRefusalIsSeenInTheBussGauges) {
  LaneBus bus;
  constexpr std::size_t kLaneSlots = LaneTraits::Lanes::kCapacity;
  auto producer = bus.RegisterProducer("p");
  int refused = 0;
  for (std::size_t i = 0; i <= kLaneSlots; ++i) {
    refused += producer.PublishWithPriority(static_cast<int>(i), 0, MessagePriority::HIGH) ? 0 : 1;
  }
  ASSERT_GT(refused, 0);
  EXPECT_EQ(bus.QueueDepth(), kLaneSlots);
  EXPECT_EQ(producer.GetBackpressureLevel(), BackpressureLevel::FULL);
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::FULL)
      << "a full lane invisible to the bus's level";
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 100.0);
  while (bus.ProcessBatch() > 0) {
  }
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::NORMAL);
  const sluice::BackpressurePeak peak = bus.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, kLaneSlots) << "a lane's overflow invisible to the peak";
  EXPECT_EQ(peak.level, BackpressureLevel::FULL);
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, 0u);
}

}  // namespace
}  // namespace observability_test
