#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.hpp"

namespace sluice_test {
namespace visitor_test {
namespace {

struct Overloads {
  std::vector<std::string>* log;
  void operator()(const SensorData& d) const {
    log->push_back("sensor:" + std::to_string(static_cast<int>(d.temperature)));
  }
  void operator()(const MotorCmd& c) const { log->push_back("motor:" + std::to_string(c.speed)); }
  void operator()(const Sequenced&) const { log->push_back("seq"); }
};

TEST(VisitorTest, VisitsEveryAlternativeInOrder) {
  sluice::SpscBus<BasicPayload, 16> bus;
  ASSERT_TRUE(bus.Publish(SensorData{20.0f}));
  ASSERT_TRUE(bus.Publish(MotorCmd{3}));
  ASSERT_TRUE(bus.Publish(Sequenced{1, 2}));
  std::vector<std::string> log;
  EXPECT_EQ(bus.ProcessBatchWith(Overloads{&log}), 3u);
  EXPECT_EQ(log, (std::vector<std::string>{"sensor:20", "motor:3", "seq"}));
  EXPECT_EQ(bus.GetStatistics().messages_processed, 3u);
}

TEST(VisitorTest, VisitorMayTakeTheHeaderOrTheEnvelope) {
  sluice::MpscBus<BasicPayload, 16> bus;
  ASSERT_TRUE(bus.Publish(MotorCmd{1}, 11));
  ASSERT_TRUE(bus.Publish(MotorCmd{2}, 12));
  std::vector<std::uint32_t> senders;
  bus.ProcessBatchWith(
      [&](const auto&, const sluice::MessageHeader& header) {
        senders.push_back(header.sender_id);
      },
      1);
  bus.ProcessBatchWith([&](const sluice::MessageEnvelope<BasicPayload>& envelope) {
    senders.push_back(envelope.header.sender_id + 100);
  });
  EXPECT_EQ(senders, (std::vector<std::uint32_t>{11, 112}));
}

TEST(VisitorTest, VisitorBypassesSubscriptions) {
  sluice::MpscBus<BasicPayload, 16> bus;
  int callback_calls = 0;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++callback_calls; }).IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  int visits = 0;
  bus.ProcessBatchWith([&](const auto&) { ++visits; });
  EXPECT_EQ(visits, 1);
  EXPECT_EQ(callback_calls, 0);
}

}  // namespace
}  // namespace visitor_test
}  // namespace sluice_test
