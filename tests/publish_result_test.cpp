// Every publish says why it was refused (PublishResult), on the bus and on a
// Producer, and each outcome is counted where the docs say.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"

namespace publish_result_test {
namespace {

using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::PublishResult;

struct Reading {
  std::uint32_t value;
};
struct Block {
  std::uint64_t words[4];
};
using Payload = std::variant<Reading, sluice::Loan<Block>>;
using Bus = sluice::MpscBus<Payload, 16>;

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<2, 8>;
};
using LaneBus = sluice::MpscBus<Payload, 16, LaneTraits>;

static_assert(sizeof(PublishResult) <= 8, "a result travels in a register");
// Only contextually a bool: `bool ok = bus.Publish(m);` fails to compile
// with a hint to IsAdmitted() (tests/compile_fail/misuse.cpp, case 56).
static_assert(std::is_constructible_v<bool, PublishResult>, "contextually a bool");

}  // namespace
}  // namespace publish_result_test

// A user's own printer for PublishResult (written before the library had
// one) is still the one chosen, for every stream.
namespace user_code {
std::ostream& operator<<(std::ostream& stream, const sluice::PublishResult&) {
  return stream << "user";
}
std::string Print(const sluice::PublishResult& result) {
  std::ostringstream text;
  text << result;
  return text.str();
}
}  // namespace user_code

namespace publish_result_test {
namespace {

TEST(PublishResultTest, AUsersOwnPrinterIsStillChosen) {
  EXPECT_EQ(user_code::Print(sluice::PublishResult::MakeAdmitted(MessagePriority::LOW)), "user");
}

TEST(PublishResultTest, AResultPrintsItsOutcome) {
  std::ostringstream text;
  text << PublishResult(PublishOutcome::kRefusedFull, MessagePriority::LOW) << " / "
       << PublishResult::MakeAdmitted(MessagePriority::HIGH);
  EXPECT_EQ(text.str(), std::string(sluice::ToString(PublishOutcome::kRefusedFull)) + " / " +
                            sluice::ToString(PublishOutcome::kAdmitted));
}

TEST(PublishResultTest, AnAdmittedPublishIsTrueAndNamesItsPriority) {
  Bus bus;
  const PublishResult result = bus.PublishWithPriority(Reading{1}, 0, MessagePriority::HIGH);
  EXPECT_TRUE(result);
  EXPECT_TRUE(result.IsAdmitted());
  EXPECT_EQ(result, PublishOutcome::kAdmitted);
  EXPECT_EQ(result.Priority(), MessagePriority::HIGH);
  EXPECT_EQ(result.AdmittedCount(), 1u);
  EXPECT_FALSE(result.Dropped());
}

TEST(PublishResultTest, AFullQueueRefusesWithThePriorityAndCountsADrop) {
  Bus bus;
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 16);
  for (std::size_t i = 0; i < limit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Reading{1}, 0, MessagePriority::LOW));
  }
  const PublishResult result = bus.PublishWithPriority(Reading{2}, 0, MessagePriority::LOW);
  EXPECT_FALSE(result);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kRefusedFull);
  EXPECT_EQ(result.Priority(), MessagePriority::LOW);
  EXPECT_TRUE(result.Dropped());
  EXPECT_FALSE(result.Closed());
  EXPECT_EQ(bus.GetStatistics().low_priority_dropped, 1u);
  // MEDIUM still has room: its own outcome.
  EXPECT_TRUE(bus.Publish(Reading{3}));
}

// PublishAttempt: the same admission and outcome, but a refusal (full or
// closed) is counted nowhere, and an admitted attempt counts as a publish;
// on a Producer's lane too.
TEST(PublishResultTest, APublishAttemptRefusedCountsNothingAndAdmittedCountsAPublish) {
  Bus bus;
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().high_percent, 16);
  for (std::size_t i = 0; i < limit; ++i) {
    ASSERT_TRUE(bus.PublishAttempt(Reading{1}, 0, MessagePriority::HIGH));
  }
  EXPECT_EQ(bus.GetStatistics().high_priority_published, limit);
  const PublishResult refused = bus.PublishAttempt(Reading{2}, 0, MessagePriority::HIGH);
  EXPECT_EQ(refused.Outcome(), PublishOutcome::kRefusedFull);
  EXPECT_EQ(refused.Priority(), MessagePriority::HIGH);
  EXPECT_EQ(bus.GetStatistics().high_priority_dropped, 0u);
  EXPECT_EQ(bus.GetStatistics().messages_dropped, 0u);
  // The last try, the one given up after: counted once.
  EXPECT_FALSE(bus.PublishWithPriority(Reading{2}, 0, MessagePriority::HIGH));
  EXPECT_EQ(bus.GetStatistics().high_priority_dropped, 1u);
  // Bad input is counted as any publish counts it.
  EXPECT_EQ(bus.PublishAttempt(Reading{3}, 0, static_cast<MessagePriority>(7)).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
  bus.Close();
  EXPECT_EQ(bus.PublishAttempt(Reading{4}, 0, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 0u);

  LaneBus lanes;
  LaneBus::Producer producer = lanes.RegisterProducer();
  ASSERT_TRUE(producer.IsValid());
  const auto lane_limit = sluice::FillLimit(lanes.GetAdmissionThresholds().low_percent, 8);
  for (std::size_t i = 0; i < lane_limit; ++i) {
    ASSERT_TRUE(producer.PublishAttempt(Reading{5}, 0, MessagePriority::LOW));
  }
  EXPECT_EQ(producer.PublishAttempt(Reading{6}, 0, MessagePriority::LOW).Outcome(),
            PublishOutcome::kLaneFull);
  EXPECT_EQ(producer.GetStatistics().low_priority_dropped, 0u);
  EXPECT_EQ(producer.GetStatistics().low_priority_published, lane_limit);
}

TEST(PublishResultTest, AClosedBusRefusesWithClosedEveryCall) {
  Bus bus;
  bus.Close();
  EXPECT_EQ(bus.Publish(Reading{1}), PublishOutcome::kClosed);
  EXPECT_EQ(bus.PublishFast(Reading{1}, 0, std::chrono::nanoseconds(5)), PublishOutcome::kClosed);
  EXPECT_EQ(bus.Emplace<Reading>(0, MessagePriority::HIGH, 1u), PublishOutcome::kClosed);
  EXPECT_TRUE(bus.PublishWithPriority(Reading{1}, 0, MessagePriority::HIGH).Closed());
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 4u);
  EXPECT_EQ(bus.GetStatistics().messages_dropped, 0u);
}

TEST(PublishResultTest, BadInputIsRejected) {
  Bus bus;
  const PublishResult result =
      bus.PublishWithPriority(Reading{1}, 0, static_cast<MessagePriority>(7));
  EXPECT_EQ(result.Outcome(), PublishOutcome::kRejected);
  EXPECT_TRUE(result.Rejected());
  EXPECT_EQ(bus.Emplace<Reading>(0, static_cast<MessagePriority>(3), 1u),
            PublishOutcome::kRejected);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 2u);
}

TEST(PublishResultTest, AnEmptyLoanIsPoolEmptyAndThenClosed) {
  Bus bus;
  sluice::LoanPool<Block, 1> pool;
  sluice::Loan<Block> held = pool.Acquire();
  ASSERT_TRUE(held);
  sluice::Loan<Block> empty = pool.Acquire();
  ASSERT_FALSE(empty);
  const PublishResult result = bus.PublishLoan(std::move(empty), 0, MessagePriority::MEDIUM);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kPoolEmpty);
  EXPECT_TRUE(result.Dropped());
  EXPECT_EQ(bus.GetStatistics().medium_priority_dropped, 1u);
  bus.Close();
  sluice::Loan<Block> still_empty = pool.Acquire();
  EXPECT_EQ(bus.PublishLoan(std::move(still_empty), 0, MessagePriority::MEDIUM),
            PublishOutcome::kClosed);
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 1u);
}

TEST(PublishResultTest, AProducerSaysLaneFullClosedOrInvalid) {
  LaneBus bus;
  LaneBus::Producer producer = bus.RegisterProducer();
  ASSERT_TRUE(producer.IsValid());
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 8);
  for (std::size_t i = 0; i < limit; ++i) {
    ASSERT_TRUE(producer.PublishWithPriority(Reading{1}, 0, MessagePriority::LOW));
  }
  const PublishResult full = producer.PublishWithPriority(Reading{2}, 0, MessagePriority::LOW);
  EXPECT_EQ(full.Outcome(), PublishOutcome::kLaneFull);
  EXPECT_TRUE(full.Dropped());
  EXPECT_EQ(producer.GetStatistics().low_priority_dropped, 1u);

  LaneBus::Producer invalid;
  EXPECT_EQ(invalid.Publish(Reading{3}), PublishOutcome::kRejected);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 0u) << "an invalid Producer counts nothing";

  bus.Close();
  EXPECT_EQ(producer.Publish(Reading{4}), PublishOutcome::kClosed);
  EXPECT_EQ(producer.GetStatistics().messages_refused_closed, 1u);
}

TEST(PublishResultTest, AProducerPublishesABatchIntoItsLane) {
  LaneBus bus;
  LaneBus::Producer producer = bus.RegisterProducer();
  ASSERT_TRUE(producer.IsValid());
  Reading batch[12];
  for (std::uint32_t i = 0; i < 12; ++i) batch[i] = Reading{i};
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().high_percent, 8);
  const PublishResult result = producer.PublishBatch(batch, batch + 12, 5, MessagePriority::HIGH);
  EXPECT_EQ(result.AdmittedCount(), limit);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kLaneFull);
  const sluice::BusStatisticsSnapshot stats = producer.GetStatistics();
  EXPECT_EQ(stats.high_priority_published, limit);
  EXPECT_EQ(stats.high_priority_dropped, 12 - limit);
  std::uint32_t next = 0;
  std::uint16_t lane = 0;
  bus.ProcessBatchWith([&](const auto& message, const sluice::MessageHeader& header) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Reading>) {
      EXPECT_EQ(message.value, next++);
    }
    lane = header.lane;
  });
  EXPECT_EQ(next, limit);
  EXPECT_EQ(lane, producer.Lane());
}

using SleepingBus = sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits>;

TEST(PublishResultTest, PublishBlockingTimesOutOrWouldDeadlock) {
  SleepingBus bus;
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 16);
  for (std::size_t i = 0; i < limit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Reading{1}, 0, MessagePriority::LOW));
  }
  const PublishResult timed_out =
      bus.PublishBlocking(Reading{2}, 0, MessagePriority::LOW, std::chrono::milliseconds(1));
  EXPECT_EQ(timed_out.Outcome(), PublishOutcome::kTimedOut);
  EXPECT_TRUE(timed_out.Dropped());
  // Inside the consumer's own batch the message being dispatched still holds
  // its slot: no room, and none can come while the callback waits.
  PublishResult deadlock;
  EXPECT_EQ(bus.ProcessBatchWith(
                [&](const auto&) {
                  deadlock = bus.PublishBlocking(Reading{5}, 0, MessagePriority::LOW,
                                                 std::chrono::seconds(10));
                },
                1),
            1u);
  EXPECT_EQ(deadlock.Outcome(), PublishOutcome::kWouldDeadlock);
}

TEST(PublishResultTest, EveryOutcomeHasAName) {
  for (const PublishOutcome outcome :
       {PublishOutcome::kAdmitted, PublishOutcome::kRefusedFull, PublishOutcome::kLaneFull,
        PublishOutcome::kPoolEmpty, PublishOutcome::kClosed, PublishOutcome::kRejected,
        PublishOutcome::kTimedOut, PublishOutcome::kWouldDeadlock}) {
    EXPECT_STRNE(sluice::ToString(outcome), "invalid");
  }
}

}  // namespace
}  // namespace publish_result_test
