// Close, IsClosed, IsDrained and Drain on one thread: what a closed bus
// refuses, counts and still delivers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace close_test {
namespace {

struct Reading {
  std::uint32_t seq;
};
using Payload = std::variant<Reading>;

template <typename B>
class CloseTest : public ::testing::Test {};
using Buses = ::testing::Types<sluice::MpscBus<Payload, 16>, sluice::SpscBus<Payload, 16>>;
TYPED_TEST_SUITE(CloseTest, Buses, sluice_test::IndexNames);

TYPED_TEST(CloseTest, AClosedBusRefusesEveryPublishAndCountsIt) {
  TypeParam bus;
  ASSERT_TRUE(bus.Publish(Reading{1}));
  EXPECT_FALSE(bus.IsClosed());
  bus.Close();
  EXPECT_TRUE(bus.IsClosed());
  EXPECT_FALSE(bus.Publish(Reading{2}));
  EXPECT_FALSE(bus.PublishWithPriority(Reading{3}, 0, sluice::MessagePriority::HIGH));
  EXPECT_FALSE(bus.PublishFast(Reading{4}, 0, std::chrono::nanoseconds(1)));
  EXPECT_FALSE(bus.template Emplace<Reading>(0, sluice::MessagePriority::HIGH, 5u));
  std::vector<Reading> batch{{6}, {7}, {8}};
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0).AdmittedCount(), 0u);
  // Every mode counts it, and it is neither dropped nor attempted.
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  EXPECT_FALSE(bus.Publish(Reading{9}));
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_refused_closed, 8u);
  EXPECT_EQ(stats.messages_dropped, 0u);
  EXPECT_EQ(stats.MessagesAttempted(), 1u);
  EXPECT_EQ(bus.QueueDepth(), 1u);
}

TYPED_TEST(CloseTest, WhatWasAdmittedBeforeIsStillDeliveredThenTheBusIsDrained) {
  TypeParam bus;
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(bus.Publish(Reading{i}));
  bus.Close();
  EXPECT_FALSE(bus.IsDrained());
  EXPECT_FALSE(bus.Drain(std::chrono::milliseconds(1)));  // nobody dispatches here
  std::vector<std::uint32_t> seen;
  EXPECT_EQ(bus.ProcessBatchWith([&](const Reading& r) { seen.push_back(r.seq); }, 3), 3u);
  EXPECT_FALSE(bus.IsDrained());
  EXPECT_EQ(bus.ProcessBatchWith([&](const Reading& r) { seen.push_back(r.seq); }), 2u);
  EXPECT_EQ(seen, (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(bus.IsDrained());
  EXPECT_TRUE(bus.Drain(std::chrono::seconds(0)));
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TYPED_TEST(CloseTest, AnOpenBusIsNeitherClosedNorDrained) {
  TypeParam bus;
  EXPECT_FALSE(bus.IsDrained());
  EXPECT_FALSE(bus.Drain(std::chrono::hours(1)));  // returns at once: not closed
  bus.Close();
  bus.Close();                   // again: no effect
  EXPECT_TRUE(bus.IsDrained());  // nothing was queued
}

TYPED_TEST(CloseTest, ClosingNearThePositionWrapKeepsTheDepthAndTheDrain) {
  constexpr auto kMax = std::numeric_limits<sluice::Position>::max();
  TypeParam bus(sluice::detail::FirstPosition{kMax - 2});
  for (std::uint32_t i = 0; i < 6; ++i) ASSERT_TRUE(bus.Publish(Reading{i}));  // across the wrap
  bus.Close();
  EXPECT_EQ(bus.QueueDepth(), 6u);
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::ClassifyBackpressure(6, 16));
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 6u);
  EXPECT_TRUE(bus.IsDrained());
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TEST(CloseSleepingTest, AWaitOnAClosedDrainedBusReturnsAtOnce) {
  sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits> bus;
  bus.Close();
  // A minute's timeout: returns 0 at once, nothing will ever come.
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::minutes(1)), 0u);
}

}  // namespace
}  // namespace close_test
