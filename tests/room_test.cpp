// RoomFor: how many more messages of a priority admission would take now,
// from the numbers a claim compares. At every fill and for every priority
// and mode, exactly RoomFor(p) publishes of p are admitted and the next is
// refused; the shared queue's room ignores producer lanes and a Producer's
// is its lane's; 0 once closed or for an unknown priority.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <variant>

#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace room_test {
namespace {

using sluice::MessagePriority;
using sluice::PerformanceMode;

struct Item {
  std::uint32_t seq;
};
using Payload = std::variant<Item>;

constexpr MessagePriority kPriorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                           MessagePriority::HIGH};

template <typename Bus>
class RoomTest : public ::testing::Test {};
using Buses = ::testing::Types<sluice::MpscBus<Payload, 16>, sluice::SpscBus<Payload, 16>,
                               sluice::MpscBus<Payload, 16, sluice::PriorityOrderTraits>>;
TYPED_TEST_SUITE(RoomTest, Buses, sluice_test::IndexNames);

// Every fill from empty to full, every priority, both counting modes and
// BARE_METAL (which admits every priority up to the capacity).
TYPED_TEST(RoomTest, ExactlyRoomForMessagesAreAdmittedAtEveryFill) {
  for (PerformanceMode mode : {PerformanceMode::FULL_FEATURED, PerformanceMode::BARE_METAL}) {
    for (std::uint32_t fill = 0; fill <= 16; ++fill) {
      for (MessagePriority priority : kPriorities) {
        TypeParam bus;
        bus.SetPerformanceMode(mode);
        for (std::uint32_t i = 0; i < fill; ++i) {
          ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::HIGH));
        }
        const std::size_t room = bus.RoomFor(priority);
        const auto limit =
            mode == PerformanceMode::BARE_METAL
                ? std::size_t{16}
                : static_cast<std::size_t>(sluice::FillLimit(
                      priority == MessagePriority::LOW ? bus.GetAdmissionThresholds().low_percent
                      : priority == MessagePriority::MEDIUM
                          ? bus.GetAdmissionThresholds().medium_percent
                          : bus.GetAdmissionThresholds().high_percent,
                      16));
        const std::size_t depth = bus.QueueDepth();
        EXPECT_EQ(room, depth < limit ? limit - depth : 0) << "fill " << fill;
        for (std::size_t i = 0; i < room; ++i) {
          EXPECT_TRUE(bus.PublishAttempt(Item{100}, 0, priority)) << "fill " << fill << ", " << i;
        }
        EXPECT_FALSE(bus.PublishAttempt(Item{100}, 0, priority)) << "fill " << fill;
        EXPECT_EQ(bus.RoomFor(priority), 0u);
      }
    }
  }
}

TYPED_TEST(RoomTest, NoRoomOnceClosedOrForAnUnknownPriority) {
  TypeParam bus;
  EXPECT_EQ(bus.RoomFor(static_cast<MessagePriority>(3)), 0u);
  EXPECT_GT(bus.RoomFor(MessagePriority::HIGH), 0u);
  bus.Close();
  for (MessagePriority priority : kPriorities) EXPECT_EQ(bus.RoomFor(priority), 0u);
}

TYPED_TEST(RoomTest, NewThresholdsChangeTheRoomAtOnce) {
  TypeParam bus;
  ASSERT_TRUE(bus.Publish(Item{0}));
  ASSERT_TRUE(bus.SetAdmissionThresholds(25, 50, 100));
  EXPECT_EQ(bus.RoomFor(MessagePriority::LOW), 3u);  // 4 of 16, one queued
  EXPECT_EQ(bus.RoomFor(MessagePriority::MEDIUM), 7u);
  EXPECT_EQ(bus.RoomFor(MessagePriority::HIGH), 15u);
}

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<2, 8>;
};

// The shared queue's room is what a publish without a Producer is judged
// by: a full lane does not take from it (QueueDepth counts the lane, the
// room does not); a Producer's room is its lane's.
TEST(RoomLaneTest, TheBussRoomIsTheSharedQueuesAndAProducersIsItsLanes) {
  sluice::MpscBus<Payload, 16, LaneTraits> bus;
  auto producer = bus.RegisterProducer("p");
  ASSERT_TRUE(producer);
  EXPECT_EQ(producer.RoomFor(MessagePriority::HIGH), 8u);
  while (producer.PublishWithPriority(Item{1}, 0, MessagePriority::HIGH)) {
  }
  EXPECT_EQ(producer.RoomFor(MessagePriority::HIGH), 0u);
  EXPECT_EQ(bus.QueueDepth(), 8u);
  EXPECT_EQ(bus.RoomFor(MessagePriority::LOW), 10u);
  EXPECT_TRUE(bus.PublishWithPriority(Item{2}, 0, MessagePriority::LOW));
  EXPECT_EQ(bus.RoomFor(MessagePriority::LOW), 9u);
  decltype(producer) invalid;
  EXPECT_EQ(invalid.RoomFor(MessagePriority::HIGH), 0u);
}

}  // namespace
}  // namespace room_test
