#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "test_support.hpp"

namespace sluice_test {
namespace publish_test {
namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;

TEST(PublishTest, DeliversHeaderAndPayloadToSubscriber) {
  sluice::MpscBus<BasicPayload, 64> bus;
  std::vector<MessageHeader> headers;
  std::vector<float> temperatures;
  ASSERT_TRUE(bus.Subscribe<SensorData>([&](const SensorData& data, const MessageHeader& header) {
                   temperatures.push_back(data.temperature);
                   headers.push_back(header);
                 })
                  .IsValid());

  ASSERT_TRUE(bus.Publish(SensorData{25.5f}, 7));
  ASSERT_TRUE(bus.PublishWithPriority(SensorData{1.0f}, 8, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishFast(SensorData{2.0f}, 9, std::chrono::nanoseconds(123456)));
  ASSERT_TRUE(
      bus.PublishFast(SensorData{3.0f}, 10, std::chrono::nanoseconds(42), MessagePriority::LOW));
  EXPECT_EQ(bus.ProcessBatch(), 4u);

  ASSERT_EQ(temperatures, (std::vector<float>{25.5f, 1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(headers[0].sender_id, 7u);
  EXPECT_EQ(headers[0].priority, MessagePriority::MEDIUM);
  EXPECT_GT(headers[0].timestamp_ns, 0u);
  EXPECT_EQ(headers[1].priority, MessagePriority::HIGH);
  EXPECT_EQ(headers[2].timestamp_ns, 123456u);
  EXPECT_EQ(headers[2].priority, MessagePriority::MEDIUM);
  EXPECT_EQ(headers[3].timestamp_ns, 42u);
  EXPECT_EQ(headers[3].priority, MessagePriority::LOW);
  for (std::size_t i = 1; i < headers.size(); ++i) {
    EXPECT_EQ(headers[i].msg_id, headers[i - 1].msg_id + 1) << "ids follow admission order";
  }
}

TEST(PublishTest, AcceptsTheVariantItself) {
  sluice::SpscBus<BasicPayload, 16> bus;
  int speed = 0;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd& cmd) { speed = cmd.speed; }).IsValid());
  const BasicPayload payload = MotorCmd{42};
  ASSERT_TRUE(bus.Publish(payload));
  ASSERT_TRUE(bus.Publish(BasicPayload{MotorCmd{43}}));
  EXPECT_EQ(bus.ProcessBatch(1), 1u);
  EXPECT_EQ(speed, 42);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(speed, 43);
}

TEST(PublishTest, OutOfRangePriorityIsRefusedWithoutSideEffects) {
  sluice::MpscBus<BasicPayload, 16> bus;
  EXPECT_FALSE(bus.PublishWithPriority(MotorCmd{1}, 0, static_cast<MessagePriority>(7)));
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_EQ(bus.GetStatistics().MessagesAttempted(), 0u);
}

TEST(PublishTest, BareMetalLeavesTimestampZeroButPublishFastKeepsCallers) {
  sluice::MpscBus<BasicPayload, 16> bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  std::vector<std::uint64_t> stamps;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&, const MessageHeader& header) {
                   stamps.push_back(header.timestamp_ns);
                 })
                  .IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  ASSERT_TRUE(bus.PublishFast(MotorCmd{2}, 0, std::chrono::nanoseconds(99)));
  bus.ProcessBatch();
  EXPECT_EQ(stamps, (std::vector<std::uint64_t>{0, 99}));
}

template <typename Bus>
void ExpectRefusalOnlyWhenFull() {
  Bus bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  for (std::size_t i = 0; i < Bus::Capacity(); ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{static_cast<int>(i)}, 0, MessagePriority::LOW))
        << "slot " << i;
  }
  EXPECT_FALSE(bus.Publish(MotorCmd{-1}));
  EXPECT_EQ(bus.QueueDepth(), Bus::Capacity());
  EXPECT_EQ(bus.ProcessBatch(1), 1u);
  EXPECT_TRUE(bus.Publish(MotorCmd{-2})) << "the released slot is reusable";
  EXPECT_FALSE(bus.Publish(MotorCmd{-3}));
}

TEST(PublishTest, MpscRefusesOnlyWhenFull) {
  ExpectRefusalOnlyWhenFull<sluice::MpscBus<BasicPayload, 8>>();
}
TEST(PublishTest, SpscRefusesOnlyWhenFull) {
  ExpectRefusalOnlyWhenFull<sluice::SpscBus<BasicPayload, 8>>();
}

TEST(PublishTest, ProcessBatchHonoursItsLimitAndConsumesUnsubscribedTypes) {
  sluice::MpscBus<BasicPayload, 64> bus;
  int motor_calls = 0;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++motor_calls; }).IsValid());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(bus.Publish(MotorCmd{i}));
    ASSERT_TRUE(bus.Publish(SensorData{1.0f}));  // no subscriber: consumed silently
  }
  EXPECT_EQ(bus.ProcessBatch(0), 0u);
  EXPECT_EQ(bus.ProcessBatch(5), 5u);
  EXPECT_EQ(bus.ProcessBatch(), 15u);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(motor_calls, 10);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TEST(PublishTest, SeveralBusesCoexist) {
  sluice::MpscBus<BasicPayload, 16> a;
  sluice::SpscBus<std::variant<int, double>, 32> b;
  int a_count = 0;
  double b_sum = 0;
  ASSERT_TRUE(a.Subscribe<MotorCmd>([&](const MotorCmd&) { ++a_count; }).IsValid());
  ASSERT_TRUE(b.Subscribe<double>([&](const double& d) { b_sum += d; }).IsValid());
  ASSERT_TRUE(a.Publish(MotorCmd{1}));
  ASSERT_TRUE(b.Publish(2.5));
  ASSERT_TRUE(b.Publish(1));
  EXPECT_EQ(b.ProcessBatch(), 2u);
  EXPECT_EQ(a.ProcessBatch(), 1u);
  EXPECT_EQ(a_count, 1);
  EXPECT_DOUBLE_EQ(b_sum, 2.5);
}

struct InlineTraits : sluice::DefaultBusTraits {
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
};
sluice::MpscBus<BasicPayload, 1024, InlineTraits> static_bus;

TEST(PublishTest, InlineStorageBusWorksFromStaticStorage) {
  int calls = 0;
  auto handle = static_bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++calls; });
  int admitted = 0;
  for (int i = 0; i < 1024; ++i) {
    admitted += static_bus.PublishWithPriority(MotorCmd{i}, 0, MessagePriority::HIGH) ? 1 : 0;
  }
  EXPECT_EQ(admitted, 1014) << "HIGH is refused at ceil(99 % of 1024) queued";
  EXPECT_EQ(static_bus.ProcessBatch(), 1014u);
  EXPECT_EQ(calls, 1014);
  EXPECT_TRUE(static_bus.Unsubscribe(handle));
}

TEST(PublishTest, HeapStorageBusOfDefaultCapacityLivesOnTheStack) {
  sluice::AsyncBus<BasicPayload> bus;  // 131,072 slots, allocated once
  EXPECT_EQ(bus.Capacity(), 131072u);
  EXPECT_LT(sizeof(bus), 64u * 1024u) << "the ring must not live inside the object";
  EXPECT_TRUE(bus.Publish(SensorData{1.0f}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
}

}  // namespace
}  // namespace publish_test
}  // namespace sluice_test
