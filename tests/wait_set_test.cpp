// WaitSet (sluice/wait_set.hpp): one consumer sleeping on several buses.
// Each result of Wait, ProcessBatchWait's totals and order, the bus's own
// ProcessBatchWait inside a set, for every parker (the membarrier one runs
// the heavy-fence mode, where notifiers skip their fence). A test that
// needs the waiter parked publishes only once the set counts it as a
// waiter, and then checks that no park ran into its timeout (a lost
// wake-up). Every wait has a long timeout: one that should end at once and
// slept instead fails on its outcome or that check. Nothing asserts a
// speed.
#include "sluice/wait_set.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <variant>

#include "sluice/detail/test_access.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#endif

namespace wait_set_test {
namespace {

using sluice::MessagePriority;
using sluice::WaitSetOutcome;

// Far above any wake-up; a wait that runs into it was not woken.
constexpr auto kLongWait = std::chrono::seconds(20);

struct Reading {
  char bus;
  std::uint32_t seq;
};
struct Command {
  char bus;
  std::uint32_t seq;
};
using ReadingPayload = std::variant<Reading>;
using CommandPayload = std::variant<Command>;

// A parker that counts the parks that ran into their timeout: a wait that
// was to be ended by a wake-up and was not. (After its timeout a wait
// re-checks and still finds the message, so the outcome alone cannot tell
// a lost wake-up.)
std::atomic<std::uint64_t> g_unwoken_parks{0};
template <typename Inner>
struct WatchedParker {
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    const auto start = std::chrono::steady_clock::now();
    inner.Wait(word, expected, timeout);
    if (std::chrono::steady_clock::now() - start >= timeout) {
      g_unwoken_parks.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void WakeAll(std::atomic<std::uint32_t>& word) noexcept { inner.WakeAll(word); }
  Inner inner;
};
#if defined(__linux__)
struct WatchedMembarrierParker : WatchedParker<sluice::MembarrierFutexParker> {
  bool EnableHeavyFence() noexcept { return inner.EnableHeavyFence(); }
  bool HeavyFence() noexcept { return inner.HeavyFence(); }
};
#endif

// Parks at once (no polls), so a wait that finds nothing really sleeps.
template <typename ParkerType>
struct EagerTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitInSet<ParkerType, 0>;
};
template <typename ParkerType>
struct EagerPriorityTraits : sluice::PriorityOrderTraits {
  using Waiting = sluice::WaitInSet<ParkerType, 0>;
};

template <typename ParkerType>
class WaitSetTest : public ::testing::Test {
 protected:
  using Parker = ParkerType;
  using Set = sluice::WaitSet<Parker>;
  using Traits = EagerTraits<Parker>;
  // An MPSC bus and an SPSC bus of different payloads, in one set.
  using ReadingBus = sluice::MpscBus<ReadingPayload, 16, Traits>;
  using CommandBus = sluice::SpscBus<CommandPayload, 16, Traits>;

  // Waits until `waiters` threads have announced a sleep on the set.
  static void AwaitWaiters(const Set& set, std::uint32_t waiters = 1) {
    while (set.Waiters() < waiters) std::this_thread::yield();
  }

  void SetUp() override { unwoken_before_ = g_unwoken_parks.load(); }
  // Every park of this test so far ended with a wake-up, not its timeout.
  void ExpectEveryParkWoken() const {
    EXPECT_EQ(g_unwoken_parks.load() - unwoken_before_, 0u)
        << "a wait ran into its timeout: the wake-up was lost";
  }
  std::uint64_t unwoken_before_ = 0;
};

#if defined(__linux__)
using Parkers = ::testing::Types<WatchedParker<sluice::ConditionVariableParker>,
                                 WatchedParker<sluice::FutexParker>, WatchedMembarrierParker>;
#else
using Parkers = ::testing::Types<WatchedParker<sluice::ConditionVariableParker>>;
#endif
TYPED_TEST_SUITE(WaitSetTest, Parkers, sluice_test::IndexNames);

TYPED_TEST(WaitSetTest, AMessageOnTheSecondBusWakesTheParkedWaiter) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  sluice::WaitSetResult result;
  std::thread waiter([&] { result = set.Wait(kLongWait, readings, commands); });
  TestFixture::AwaitWaiters(set);
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  waiter.join();
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 1u);
  EXPECT_TRUE(static_cast<bool>(result));
  EXPECT_EQ(set.Waiters(), 0u);
  // Wait only looks: the message is still queued.
  EXPECT_EQ(commands.QueueDepth(), 1u);
  this->ExpectEveryParkWoken();
}

TYPED_TEST(WaitSetTest, ReadyNamesTheFirstReadyBusInArgumentOrder) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  ASSERT_TRUE(readings.Publish(Reading{'r', 1}));
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  EXPECT_EQ(set.Wait(kLongWait, readings, commands).index, 0u);
  EXPECT_EQ(set.Wait(kLongWait, commands, readings).index, 0u);
  EXPECT_EQ(readings.ProcessBatch(), 1u);
  const sluice::WaitSetResult result = set.Wait(kLongWait, readings, commands);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 1u);
}

// A bus in no set cannot be listed at all (compile_fail_case_57: a bus
// without WaitInSet; a WaitInSet bus has no constructor without a set,
// compile_fail_case_58). One of another set is refused at run time.
TYPED_TEST(WaitSetTest, ABusOfAnotherSetIsRefusedWithoutWaiting) {
  typename TestFixture::Set set;
  typename TestFixture::Set other_set;
  typename TestFixture::ReadingBus member(set);
  typename TestFixture::CommandBus elsewhere(other_set);  // in another set
  int dispatched = 0;
  ASSERT_TRUE(member.template Subscribe<Reading>([&](const Reading&) { ++dispatched; }).IsValid());
  // Even with a message ready on the member.
  ASSERT_TRUE(member.Publish(Reading{'r', 1}));
  sluice::WaitSetResult result = set.Wait(kLongWait, member, elsewhere);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kNotMember);
  EXPECT_EQ(result.index, 1u);
  EXPECT_FALSE(static_cast<bool>(result));
  result = set.Wait(kLongWait, elsewhere, member);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kNotMember);
  EXPECT_EQ(result.index, 0u);
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 8, member, elsewhere), 0u);
  EXPECT_EQ(dispatched, 0);
  EXPECT_EQ(set.Waiters(), 0u);
  // The other set does take its own bus.
  ASSERT_TRUE(elsewhere.Publish(Command{'c', 1}));
  EXPECT_EQ(other_set.Wait(kLongWait, elsewhere).outcome, WaitSetOutcome::kReady);
}

TYPED_TEST(WaitSetTest, AllDrainedOnceEveryListedBusIsClosedAndEmpty) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  readings.Close();
  commands.Close();
  // Closed but not drained: the queued message is still ready.
  sluice::WaitSetResult result = set.Wait(kLongWait, readings, commands);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 1u);
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 8, readings, commands), 1u);
  result = set.Wait(kLongWait, readings, commands);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kAllDrained);
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 8, readings, commands), 0u);
}

template <typename ParkerType>
struct EagerLaneTraits : EagerTraits<ParkerType> {
  using Lanes = sluice::ProducerLanes<2, 16>;
};

// A lane publish in flight keeps a closed bus from being drained (it may
// still admit its message), so a waiter that re-checked then sleeps; the
// publish, refused as the bus is closed, must wake it when it leaves.
// The flag is set here as the producer's own preempted publish would have
// set it; the producer's next call then runs the real refusal path.
TYPED_TEST(WaitSetTest, ALanePublishRefusedAfterCloseWakesAWaiterThatSawItInFlight) {
  using LaneBus =
      sluice::MpscBus<ReadingPayload, 16, EagerLaneTraits<typename TestFixture::Parker>>;
  typename TestFixture::Set set;
  LaneBus sensors(set);
  auto lidar = sensors.RegisterProducer("lidar");
  ASSERT_TRUE(lidar);
  sluice::detail::TestAccess::SetLanePublishing(sensors, 0, true);  // preempted in a publish
  sensors.Close();
  ASSERT_FALSE(sensors.IsDrained());
  sluice::WaitSetResult result;
  std::thread waiter([&] { result = set.Wait(kLongWait, sensors); });
  TestFixture::AwaitWaiters(set);
  // Lets the waiter finish its re-check and park (not needed for the
  // outcome, only for the lost wake-up to have a chance to show).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(lidar.Publish(Reading{'s', 1}).Outcome(), sluice::PublishOutcome::kClosed);
  waiter.join();
  EXPECT_EQ(result.outcome, WaitSetOutcome::kAllDrained);
  this->ExpectEveryParkWoken();
}

TYPED_TEST(WaitSetTest, CloseOfTheLastOpenBusWakesTheParkedWaiter) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  readings.Close();  // drained at once; the commands keep the waiter waiting
  sluice::WaitSetResult result;
  std::thread waiter([&] { result = set.Wait(kLongWait, readings, commands); });
  TestFixture::AwaitWaiters(set);
  commands.Close();
  waiter.join();
  EXPECT_EQ(result.outcome, WaitSetOutcome::kAllDrained);
  this->ExpectEveryParkWoken();
}

TYPED_TEST(WaitSetTest, OneDrainedBusDoesNotEndTheWait) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  readings.Close();
  EXPECT_EQ(set.Wait(std::chrono::milliseconds(1), readings, commands).outcome,
            WaitSetOutcome::kTimedOut);
  // The drained bus alone is all drained.
  EXPECT_EQ(set.Wait(kLongWait, readings).outcome, WaitSetOutcome::kAllDrained);
}

TYPED_TEST(WaitSetTest, NothingQueuedTimesOut) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  sluice::WaitSetResult result = set.Wait(std::chrono::milliseconds(1), readings, commands);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kTimedOut);
  EXPECT_EQ(result.index, 0u);
  EXPECT_EQ(set.Wait(std::chrono::nanoseconds(0), readings, commands).outcome,
            WaitSetOutcome::kTimedOut);
  EXPECT_EQ(set.Wait(std::chrono::seconds(-5), commands).outcome, WaitSetOutcome::kTimedOut);
  EXPECT_EQ(set.ProcessBatchWait(std::chrono::microseconds(100), 8, readings, commands), 0u);
  EXPECT_EQ(set.Waiters(), 0u);
}

TYPED_TEST(WaitSetTest, ProcessBatchWaitServesBusesInArgumentOrderOneBatchEach) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  std::string order;
  ASSERT_TRUE(readings
                  .template Subscribe<Reading>([&](const Reading& r) {
                    order += r.bus;
                    order += std::to_string(r.seq);
                  })
                  .IsValid());
  ASSERT_TRUE(commands
                  .template Subscribe<Command>([&](const Command& c) {
                    order += c.bus;
                    order += std::to_string(c.seq);
                  })
                  .IsValid());
  for (std::uint32_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(readings.Publish(Reading{'r', i}));
    ASSERT_TRUE(commands.Publish(Command{'c', i}));
  }
  // Commands listed first: served first, at most 2 from each bus a call.
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 2, commands, readings), 4u);
  EXPECT_EQ(order, "c1c2r1r2");
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 2, commands, readings), 2u);
  EXPECT_EQ(order, "c1c2r1r2c3r3");
  // A bus with nothing queued is skipped; the other is still served.
  ASSERT_TRUE(readings.Publish(Reading{'r', 4}));
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 2, commands, readings), 1u);
  EXPECT_EQ(order, "c1c2r1r2c3r3r4");
  // No batch size: nothing dispatched, and no wait.
  ASSERT_TRUE(readings.Publish(Reading{'r', 5}));
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 0, commands, readings), 0u);
  EXPECT_EQ(readings.QueueDepth(), 1u);
}

TYPED_TEST(WaitSetTest, APriorityOrderedBusDeliversHighFirstWithinItsBatch) {
  using PriorityBus = sluice::MpscBus<ReadingPayload, 16, EagerPriorityTraits<TypeParam>>;
  typename TestFixture::Set set;
  typename TestFixture::CommandBus commands(set);
  PriorityBus readings(set);
  std::string order;
  ASSERT_TRUE(readings
                  .template Subscribe<Reading>(
                      [&](const Reading& r) { order += std::string(1, r.bus) + "r"; })
                  .IsValid());
  ASSERT_TRUE(
      commands.template Subscribe<Command>([&](const Command&) { order += "c "; }).IsValid());
  ASSERT_TRUE(readings.PublishWithPriority(Reading{'L', 1}, 0, MessagePriority::LOW));
  ASSERT_TRUE(readings.PublishWithPriority(Reading{'H', 2}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  // Across buses: argument order, whatever the priorities; within the
  // priority-ordered bus: HIGH first.
  EXPECT_EQ(set.ProcessBatchWait(kLongWait, 8, commands, readings), 3u);
  EXPECT_EQ(order, "c HrLr");
}

TYPED_TEST(WaitSetTest, InsideACallbackOfAListedBusItNeverWaits) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  sluice::WaitSetResult inner_wait;
  std::uint32_t inner_batch = 99;
  ASSERT_TRUE(commands
                  .template Subscribe<Command>([&](const Command&) {
                    // The commands bus is listed second; the readings bus
                    // has a message ready, and still no wait and no batch.
                    inner_wait = set.Wait(kLongWait, readings, commands);
                    inner_batch = set.ProcessBatchWait(kLongWait, 8, readings, commands);
                  })
                  .IsValid());
  ASSERT_TRUE(readings.Publish(Reading{'r', 1}));
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  EXPECT_EQ(commands.ProcessBatch(), 1u);
  EXPECT_EQ(inner_wait.outcome, WaitSetOutcome::kInsideCallback);
  EXPECT_EQ(inner_batch, 0u);
  EXPECT_EQ(readings.QueueDepth(), 1u);
  // A bus that is not listed does not count: waiting on the readings alone
  // from inside a commands callback is allowed.
  ASSERT_TRUE(commands
                  .template Subscribe<Command>([&](const Command&) {
                    inner_batch = set.ProcessBatchWait(kLongWait, 8, readings);
                  })
                  .IsValid());
  ASSERT_TRUE(commands.Publish(Command{'c', 2}));
  EXPECT_EQ(commands.ProcessBatch(), 1u);
  EXPECT_EQ(inner_batch, 1u);
}

TYPED_TEST(WaitSetTest, TheBusesOwnProcessBatchWaitWorksInASet) {
  typename TestFixture::Set set;
  typename TestFixture::ReadingBus readings(set);
  typename TestFixture::CommandBus commands(set);
  std::uint32_t got = 0;
  std::thread consumer(
      [&] { got = readings.ProcessBatchWithWait([](const Reading&) {}, kLongWait); });
  TestFixture::AwaitWaiters(set);
  // A publish on the other bus wakes the shared signal: the readings'
  // consumer re-checks its own bus, finds nothing and sleeps again.
  ASSERT_TRUE(commands.Publish(Command{'c', 1}));
  ASSERT_TRUE(readings.Publish(Reading{'r', 1}));
  consumer.join();
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(commands.QueueDepth(), 1u);
  EXPECT_EQ(commands.ProcessBatch(), 1u);
  // Its own sleep ends at its bus's close.
  got = 99;
  std::thread closing([&] { got = commands.ProcessBatchWait(kLongWait); });
  TestFixture::AwaitWaiters(set);
  commands.Close();
  closing.join();
  EXPECT_EQ(got, 0u);
  EXPECT_TRUE(commands.IsDrained());
  this->ExpectEveryParkWoken();
}

}  // namespace
}  // namespace wait_set_test
