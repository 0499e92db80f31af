#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.hpp"

namespace sluice_test {
namespace subscription_test {
namespace {

using Bus = sluice::MpscBus<BasicPayload, 64>;
using Envelope = sluice::MessageEnvelope<BasicPayload>;

TEST(SubscriptionTest, AllThreeCallbackShapesAreCalledInSubscriptionOrder) {
  Bus bus;
  std::vector<std::string> calls;
  ASSERT_TRUE(
      bus.Subscribe<MotorCmd>([&](const MotorCmd& cmd, const sluice::MessageHeader& header) {
           calls.push_back("header:" + std::to_string(cmd.speed) + ":" +
                           std::to_string(header.sender_id));
         })
          .IsValid());
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd& cmd) {
                   calls.push_back("plain:" + std::to_string(cmd.speed));
                 })
                  .IsValid());
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const Envelope& envelope) {
                   calls.push_back("envelope:" +
                                   std::to_string(std::get<MotorCmd>(envelope.payload).speed));
                 })
                  .IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{5}, 3));
  bus.ProcessBatch();
  EXPECT_EQ(calls, (std::vector<std::string>{"header:5:3", "plain:5", "envelope:5"}));
}

TEST(SubscriptionTest, TableCapacityIsFixedAndSlotsAreReused) {
  Bus bus;
  std::vector<sluice::SubscriptionHandle> handles;
  for (std::size_t i = 0; i < sluice::DefaultBusTraits::kMaxSubscribersPerType; ++i) {
    handles.push_back(bus.Subscribe<MotorCmd>([](const MotorCmd&) {}));
    ASSERT_TRUE(handles.back().IsValid());
  }
  const auto overflow = bus.Subscribe<MotorCmd>([](const MotorCmd&) {});
  EXPECT_FALSE(overflow.IsValid());
  EXPECT_FALSE(bus.Unsubscribe(overflow));
  EXPECT_TRUE(bus.Subscribe<SensorData>([](const SensorData&) {}).IsValid())
      << "each type has its own table";
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), sluice::DefaultBusTraits::kMaxSubscribersPerType);

  EXPECT_TRUE(bus.Unsubscribe(handles[3]));
  const auto reused = bus.Subscribe<MotorCmd>([](const MotorCmd&) {});
  EXPECT_TRUE(reused.IsValid());
  EXPECT_NE(reused, handles[3]);
  EXPECT_FALSE(bus.Unsubscribe(handles[3])) << "a stale handle must not remove the new subscriber";
  EXPECT_TRUE(bus.Unsubscribe(reused));
}

TEST(SubscriptionTest, UnsubscribeIsTrueOnce) {
  Bus bus;
  int calls = 0;
  const auto handle = bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++calls; });
  EXPECT_TRUE(bus.Unsubscribe(handle));
  EXPECT_FALSE(bus.Unsubscribe(handle));
  EXPECT_FALSE(bus.Unsubscribe(sluice::SubscriptionHandle{}));
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  bus.ProcessBatch();
  EXPECT_EQ(calls, 0);
}

TEST(SubscriptionTest, UnsubscribeSelfInsideCallbackStopsFurtherCalls) {
  Bus bus;
  int calls = 0;
  sluice::SubscriptionHandle self;
  self = bus.Subscribe<MotorCmd>([&](const MotorCmd&) {
    ++calls;
    EXPECT_TRUE(bus.Unsubscribe(self));
    EXPECT_FALSE(bus.Unsubscribe(self));
  });
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  EXPECT_EQ(bus.ProcessBatch(), 5u);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

TEST(SubscriptionTest, UnsubscribeOtherInsideCallbackTakesEffectAtOnce) {
  Bus bus;
  int first_calls = 0;
  int second_calls = 0;
  sluice::SubscriptionHandle second;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&) {
                   ++first_calls;
                   if (first_calls == 2) (void)bus.Unsubscribe(second);
                 })
                  .IsValid());
  second = bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++second_calls; });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.ProcessBatch();
  EXPECT_EQ(first_calls, 4);
  EXPECT_EQ(second_calls, 1) << "not called for the message whose dispatch unsubscribed it";
}

TEST(SubscriptionTest, SubscribeInsideCallbackReceivesLaterMessages) {
  Bus bus;
  int late_calls = 0;
  bool subscribed = false;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&) {
                   if (!subscribed) {
                     subscribed =
                         bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++late_calls; }).IsValid();
                   }
                 })
                  .IsValid());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.ProcessBatch();
  EXPECT_TRUE(subscribed);
  EXPECT_EQ(late_calls, 3) << "a later slot joins the current message and all after it";
}

TEST(SubscriptionTest, ReentrantProcessBatchFromCallbackReturnsZero) {
  Bus bus;
  std::uint32_t nested = 99;
  ASSERT_TRUE(
      bus.Subscribe<MotorCmd>([&](const MotorCmd&) { nested = bus.ProcessBatch(); }).IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  ASSERT_TRUE(bus.Publish(MotorCmd{2}));
  EXPECT_EQ(bus.ProcessBatch(1), 1u);
  EXPECT_EQ(nested, 0u);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
}

TEST(SubscriptionTest, CallableStateIsDestroyedOnUnsubscribeAndWithTheBus) {
  auto token = std::make_shared<int>(7);
  {
    Bus bus;
    const auto handle = bus.Subscribe<MotorCmd>([token](const MotorCmd&) {});
    ASSERT_TRUE(bus.Subscribe<SensorData>([token](const SensorData&) {}).IsValid());
    EXPECT_EQ(token.use_count(), 3);
    (void)bus.Unsubscribe(handle);
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(SubscriptionTest, SelfUnsubscribedCallableIsDestroyedAtBatchEnd) {
  Bus bus;
  auto token = std::make_shared<int>(7);
  sluice::SubscriptionHandle self;
  long count_inside = 0;
  self = bus.Subscribe<MotorCmd>([&, token](const MotorCmd&) {
    (void)bus.Unsubscribe(self);
    count_inside = token.use_count();  // still alive while it runs
  });
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  bus.ProcessBatch();
  EXPECT_EQ(count_inside, 2);
  EXPECT_EQ(token.use_count(), 1);
}

}  // namespace
}  // namespace subscription_test
}  // namespace sluice_test
