#include <gtest/gtest.h>

#include "test_support.hpp"

namespace sluice_test {
namespace statistics_test {
namespace {

using sluice::MessagePriority;
using sluice::PerformanceMode;

template <typename Bus>
void ExpectIdentities() {
  Bus bus;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([](const MotorCmd&) {}).IsValid());
  int attempts = 0;
  for (int i = 0; i < 40; ++i) {
    const auto priority = static_cast<MessagePriority>(i % 3);
    // Refusals are what this test counts.
    (void)bus.PublishWithPriority(MotorCmd{i}, 0, priority);
    ++attempts;
  }
  auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published + stats.messages_dropped,
            static_cast<std::uint64_t>(attempts));
  EXPECT_EQ(stats.messages_published, bus.QueueDepth());
  EXPECT_EQ(stats.messages_published, stats.high_priority_published +
                                          stats.medium_priority_published +
                                          stats.low_priority_published);
  EXPECT_EQ(stats.messages_dropped, stats.high_priority_dropped + stats.medium_priority_dropped +
                                        stats.low_priority_dropped);
  // 32 slots: LOW refused from 20 queued, MEDIUM from 26, HIGH from 32.
  EXPECT_GT(stats.low_priority_dropped, 0u);
  EXPECT_EQ(stats.high_priority_dropped, 0u);
  EXPECT_EQ(stats.messages_processed, 0u);

  bus.ProcessBatch();
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_processed, stats.messages_published);
  EXPECT_EQ(stats.processing_errors, 0u);
}

TEST(StatisticsTest, IdentitiesHoldMpsc) { ExpectIdentities<sluice::MpscBus<BasicPayload, 32>>(); }
TEST(StatisticsTest, IdentitiesHoldSpsc) { ExpectIdentities<sluice::SpscBus<BasicPayload, 32>>(); }

TEST(StatisticsTest, ResetStartsFromZero) {
  sluice::MpscBus<BasicPayload, 32> bus;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.ProcessBatch();
  bus.ResetStatistics();
  auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 0u);
  EXPECT_EQ(stats.messages_processed, 0u);
  EXPECT_EQ(stats.medium_priority_published, 0u);
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, MessagePriority::HIGH));
  bus.ProcessBatch();
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 1u);
  EXPECT_EQ(stats.high_priority_published, 1u);
  EXPECT_EQ(stats.messages_processed, 1u);
}

TEST(StatisticsTest, OnlyFullFeaturedCounts) {
  for (PerformanceMode mode : {PerformanceMode::BARE_METAL, PerformanceMode::NO_STATS}) {
    sluice::MpscBus<BasicPayload, 8> bus;
    bus.SetPerformanceMode(mode);
    for (int i = 0; i < 20; ++i)
      (void)bus.Publish(MotorCmd{i});  // Refused once full; this mode counts neither.
    bus.ProcessBatch();
    const auto stats = bus.GetStatistics();
    EXPECT_EQ(stats.messages_published, 0u) << sluice::ToString(mode);
    EXPECT_EQ(stats.messages_dropped, 0u) << sluice::ToString(mode);
    EXPECT_EQ(stats.messages_processed, 0u) << sluice::ToString(mode);
  }
}

}  // namespace
}  // namespace statistics_test
}  // namespace sluice_test
