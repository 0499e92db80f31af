#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace sluice_test {
namespace error_test {
namespace {

#if SLUICE_HAS_EXCEPTIONS

struct ErrorLog {
  std::vector<sluice::BusError> errors;
  std::vector<std::string> texts;
  static void Record(const sluice::BusError& error, void* context) {
    auto* self = static_cast<ErrorLog*>(context);
    self->errors.push_back(error);
    self->texts.emplace_back(error.what);
  }
};

TEST(ErrorTest, ThrowingCallbackIsCountedReportedAndDispatchGoesOn) {
  sluice::MpscBus<BasicPayload, 64> bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  std::vector<int> after;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([](const MotorCmd& cmd) {
                   if (cmd.speed % 3 == 0)
                     throw std::runtime_error("speed " + std::to_string(cmd.speed));
                 })
                  .IsValid());
  ASSERT_TRUE(
      bus.Subscribe<MotorCmd>([&](const MotorCmd& cmd) { after.push_back(cmd.speed); }).IsValid());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}, 5));
  EXPECT_EQ(bus.ProcessBatch(), 7u);

  EXPECT_EQ(after, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}))
      << "the next subscriber and the next messages still run, each exactly once";
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.processing_errors, 3u);
  EXPECT_EQ(stats.messages_processed, 7u);
  ASSERT_EQ(log.errors.size(), 3u);
  EXPECT_EQ(log.errors[1].code, sluice::BusErrorCode::kCallbackThrew);
  EXPECT_EQ(log.errors[1].sender_id, 5u);
  EXPECT_EQ(log.errors[1].type_index, 1u);
  EXPECT_EQ(log.texts[1], "speed 3");
  EXPECT_EQ(log.errors[2].msg_id, log.errors[0].msg_id + 6);
}

TEST(ErrorTest, NonStandardExceptionIsReported) {
  sluice::SpscBus<BasicPayload, 8> bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  ASSERT_TRUE(bus.Subscribe<SensorData>([](const SensorData&) { throw 42; }).IsValid());
  ASSERT_TRUE(bus.Publish(SensorData{}));
  bus.ProcessBatch();
  ASSERT_EQ(log.texts.size(), 1u);
  EXPECT_EQ(log.texts[0], "non-standard exception");
}

TEST(ErrorTest, ThrowingVisitorIsCountedAndTheBatchGoesOn) {
  sluice::MpscBus<BasicPayload, 8> bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  int visited = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&) {
    if (++visited == 2) throw std::logic_error("visitor");
  }),
            4u);
  EXPECT_EQ(visited, 4);
  EXPECT_EQ(bus.GetStatistics().processing_errors, 1u);
  ASSERT_EQ(log.errors.size(), 1u);
  EXPECT_EQ(log.errors[0].code, sluice::BusErrorCode::kVisitorThrew);
}

// The error callback runs on the consumer thread; an Unsubscribe made there
// while a visitor's error is reported must still free the callable when the
// report ends, not at some later ProcessBatch.
TEST(ErrorTest, UnsubscribeFromTheErrorCallbackOfAVisitorFreesTheCallable) {
  using Bus = sluice::MpscBus<BasicPayload, 8>;
  Bus bus;
  auto token = std::make_shared<int>(1);
  struct Context {
    Bus* bus;
    sluice::SubscriptionHandle handle;
    bool answer = false;
  } context{&bus, {}};
  context.handle = bus.Subscribe<MotorCmd>([token](const MotorCmd&) {});
  ASSERT_TRUE(bus.SetErrorCallback(
      [](const sluice::BusError&, void* c) {
        auto* self = static_cast<Context*>(c);
        self->answer = self->bus->Unsubscribe(self->handle).Removed();
      },
      &context));
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  EXPECT_EQ(token.use_count(), 2);
  bus.ProcessBatchWith([](const auto&) { throw std::runtime_error("visitor"); });
  EXPECT_TRUE(context.answer);
  EXPECT_EQ(token.use_count(), 1) << "the callable must be destroyed when the report ends";
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

TEST(ErrorTest, ErrorsAreCountedWithoutACallbackAndCallbackCanBeRemoved) {
  sluice::MpscBus<BasicPayload, 8> bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  ASSERT_TRUE(bus.SetErrorCallback(nullptr));
  ASSERT_TRUE(
      bus.Subscribe<MotorCmd>([](const MotorCmd&) { throw std::runtime_error("x"); }).IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{}));
  bus.ProcessBatch();
  EXPECT_TRUE(log.errors.empty());
  EXPECT_EQ(bus.GetStatistics().processing_errors, 1u);
}

TEST(ErrorTest, ThrowingErrorCallbackIsSwallowed) {
  sluice::MpscBus<BasicPayload, 8> bus;
  ASSERT_TRUE(bus.SetErrorCallback(
      [](const sluice::BusError&, void*) { throw std::runtime_error("again"); }));
  ASSERT_TRUE(
      bus.Subscribe<MotorCmd>([](const MotorCmd&) { throw std::runtime_error("x"); }).IsValid());
  ASSERT_TRUE(bus.Publish(MotorCmd{}));
  ASSERT_TRUE(bus.Publish(MotorCmd{}));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  EXPECT_EQ(bus.GetStatistics().processing_errors, 2u);
}

struct ThrowingCopy {
  ThrowingCopy() = default;
  ThrowingCopy(const ThrowingCopy&) { throw std::runtime_error("copy"); }
  ThrowingCopy(ThrowingCopy&&) noexcept = default;
};

TEST(ErrorTest, ThrowingCopyIsMadeBeforeClaimingSoNoSlotIsLost) {
  sluice::MpscBus<std::variant<ThrowingCopy, int>, 8> bus;
  const ThrowingCopy original;
  EXPECT_THROW((void)bus.Publish(original), std::runtime_error);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  ASSERT_TRUE(bus.Publish(5));
  int got = 0;
  ASSERT_TRUE(bus.Subscribe<int>([&](const int& v) { got = v; }).IsValid());
  EXPECT_EQ(bus.ProcessBatch(), 1u) << "the consumer is not blocked by an unfilled slot";
  EXPECT_EQ(got, 5);
}

// The error callback unsubscribes the subscriber that just threw: it has
// returned, so it is removed (and destroyed) at once, not "still running".
TEST(ErrorTest, UnsubscribingTheThrowerFromTheErrorCallbackRemovesItAtOnce) {
  using Bus = sluice::MpscBus<BasicPayload, 8>;
  Bus bus;
  auto token = std::make_shared<int>(1);
  struct Context {
    Bus* bus;
    sluice::SubscriptionHandle handle;
    std::weak_ptr<int> token;
    sluice::UnsubscribeStatus status = sluice::UnsubscribeStatus::kNotSubscribed;
    long uses_after = -1;
  } context{&bus, {}, token, {}, -1};
  context.handle =
      bus.Subscribe<MotorCmd>([token](const MotorCmd&) { throw std::runtime_error("x"); });
  token.reset();
  (void)bus.SetErrorCallback(
      [](const sluice::BusError&, void* c) {
        auto* self = static_cast<Context*>(c);
        self->status = self->bus->Unsubscribe(self->handle).Status();
        self->uses_after = self->token.use_count();
      },
      &context);
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  bus.ProcessBatch();
  EXPECT_EQ(context.status, sluice::UnsubscribeStatus::kRemoved);
  EXPECT_EQ(context.uses_after, 0) << "the callable is destroyed when Unsubscribe returns";
}

// Bad input is refused before the copy that may throw is made.
TEST(ErrorTest, OutOfRangePriorityIsRefusedBeforeAThrowingCopy) {
  sluice::MpscBus<std::variant<ThrowingCopy, int>, 8> bus;
  const ThrowingCopy original;
  bool refused = false;
  EXPECT_NO_THROW(
      refused = !bus.PublishWithPriority(original, 0, static_cast<sluice::MessagePriority>(7)));
  EXPECT_TRUE(refused);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
}

#else
TEST(ErrorTest, NeedsExceptions) { GTEST_SKIP() << "built without exceptions: nothing can throw"; }
#endif

}  // namespace
}  // namespace error_test
}  // namespace sluice_test
