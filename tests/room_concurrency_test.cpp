// WaitForRoom: a producer waits for the room admission would give its
// priority, woken by the consumer's batch that makes it (with a parker) or
// looking in slices (without), and gives up at the timeout or at Close.
// Bounded by the bus's own state: every wait here ends when the condition
// it waits for holds, or fails the test at its hour-long timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <variant>

#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace room_concurrency_test {
namespace {

using sluice::MessagePriority;
using namespace std::chrono_literals;

struct Item {
  std::uint32_t seq;
};
using Payload = std::variant<Item>;

template <typename Bus>
class WaitForRoomTest : public ::testing::Test {};
using Buses = ::testing::Types<sluice::MpscBus<Payload, 16>,
                               sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits>,
                               sluice::SpscBus<Payload, 16, sluice::SleepingConsumerTraits>>;
TYPED_TEST_SUITE(WaitForRoomTest, Buses, sluice_test::IndexNames);

// Fills LOW's share (10 of 16).
template <typename Bus>
void FillLowsShare(Bus& bus) {
  std::uint32_t seq = 0;
  while (bus.PublishWithPriority(Item{seq++}, 0, MessagePriority::LOW)) {
  }
  ASSERT_EQ(bus.RoomFor(MessagePriority::LOW), 0u);
}

TYPED_TEST(WaitForRoomTest, TrueAtOnceWhenThereIsRoom) {
  TypeParam bus;
  EXPECT_TRUE(bus.WaitForRoom(MessagePriority::LOW, 0ms));
}

TYPED_TEST(WaitForRoomTest, FalseAtTheTimeoutWhileNobodyMakesRoom) {
  TypeParam bus;
  FillLowsShare(bus);
  EXPECT_FALSE(bus.WaitForRoom(MessagePriority::LOW, 1ms));
  // HIGH still has room.
  EXPECT_TRUE(bus.WaitForRoom(MessagePriority::HIGH, 0ms));
  EXPECT_FALSE(bus.WaitForRoom(static_cast<MessagePriority>(5), 1h));
}

TYPED_TEST(WaitForRoomTest, TheConsumersBatchEndsTheWait) {
  TypeParam bus;
  FillLowsShare(bus);
  std::atomic<int> result{-1};
  std::thread producer([&] {
    const bool room = bus.WaitForRoom(MessagePriority::LOW, 1h);
    result = room ? 1 : 0;
    if (room) (void)bus.PublishAttempt(Item{99}, 0, MessagePriority::LOW);
  });
  // Whether the producer already sleeps or not, the batch makes room and
  // the wait must end with it.
  while (bus.ProcessBatch() == 0) {
  }
  producer.join();
  EXPECT_EQ(result.load(), 1);
}

TYPED_TEST(WaitForRoomTest, CloseEndsTheWaitWithFalse) {
  TypeParam bus;
  FillLowsShare(bus);
  std::atomic<int> result{-1};
  std::thread producer([&] { result = bus.WaitForRoom(MessagePriority::LOW, 1h) ? 1 : 0; });
  bus.Close();
  producer.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_FALSE(bus.WaitForRoom(MessagePriority::HIGH, 1h));
}

// With a parker, from inside the bus's own batch: no wait for itself.
TEST(WaitForRoomCallbackTest, InsideItsOwnBatchItReturnsAtOnce) {
  sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits> bus;
  int inside = -1;
  auto handle = bus.Subscribe<Item>([&](const Item& item) {
    if (item.seq == 0) inside = bus.WaitForRoom(MessagePriority::LOW, 1h) ? 1 : 0;
  });
  ASSERT_TRUE(handle.IsValid());
  FillLowsShare(bus);
  // Still full for LOW when the first message's callback runs: 9 remain.
  EXPECT_GT(bus.ProcessBatch(1), 0u);
  EXPECT_EQ(inside, 0);
}

}  // namespace
}  // namespace room_concurrency_test
