// The sleeping consumer through the bus: ProcessBatchWait parks when the
// queue is empty and every publish that finds it parked wakes it. Producers
// hand over a few messages at a time, so the consumer runs dry and parks
// over and over; a lost wake-up leaves it parked with messages queued, which
// the watchdog records; the consumer then stops at its wait's timeout and the
// test fails. The watchdog only detects a hang; nothing asserts a time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "counting_parker.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#include "typed_test_names.hpp"
#endif

namespace sleeping_consumer_test {
namespace {

struct Tick {
  std::uint32_t producer;
  std::uint32_t seq;
};
using Payload = std::variant<Tick>;

using sluice_test::CountingParker;
using sluice_test::g_parks;

// Park at once: every empty poll is a park, so the stress test parks often.
struct EagerCondVarTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::ConditionVariableParker>, 0>;
};
#if defined(__linux__)
struct EagerFutexTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::FutexParker>, 0>;
};
#endif
// The public traits as they are: polls first, then parks.
struct PollingTraits : sluice::SleepingConsumerTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::ConditionVariableParker>>;
};

template <typename Traits>
class SleepingConsumerTest : public ::testing::Test {};
#if defined(__linux__)
using TraitsList = ::testing::Types<EagerCondVarTraits, EagerFutexTraits, PollingTraits>;
#else
using TraitsList = ::testing::Types<EagerCondVarTraits, PollingTraits>;
#endif
TYPED_TEST_SUITE(SleepingConsumerTest, TraitsList, sluice_test::IndexNames);

// Messages per producer. Every fourth message a producer waits for the
// queue to run dry, so 3 x 50,000 messages are some 37,500 hand-overs, each
// a chance for a publish to find the consumer between its re-check and its
// park (where a lost wake-up happens); with the eager traits the consumer
// parked 20,000 to 26,000 times in a measured run. Under ThreadSanitizer,
// some ten times slower, a tenth.
#if defined(__SANITIZE_THREAD__)
constexpr std::uint32_t kBasePerProducer = 5000;
#else
constexpr std::uint32_t kBasePerProducer = 50000;
#endif

TYPED_TEST(SleepingConsumerTest, EveryMessageIsDispatchedOnceWithTheConsumerParkingBetween) {
  using Bus = sluice::AsyncBus<Payload, 64, sluice::ProducerModel::kMulti, TypeParam>;
  Bus bus;
  constexpr std::uint32_t kProducers = 3;
  const auto kPerProducer = static_cast<std::uint32_t>(sluice_test::StressCount(kBasePerProducer));
  const std::uint64_t kTotal = std::uint64_t{kPerProducer} * kProducers;
  sluice_test::StressProgress progress("sleeping consumer, messages dispatched", kTotal);
  std::vector<std::uint32_t> next(kProducers, 0);
  std::atomic<std::uint64_t> dispatched{0};
  bool in_order = true;
  ASSERT_TRUE(bus.template Subscribe<Tick>([&](const Tick& tick) {
                   in_order = in_order && tick.seq == next[tick.producer];
                   next[tick.producer] = tick.seq + 1;
                   dispatched.fetch_add(1, std::memory_order_relaxed);
                   progress.Step();  // on the consumer thread
                 })
                  .IsValid());
  std::atomic<bool> done{false};
  std::atomic<bool> stuck{false};
  std::uint64_t empty_waits = 0;
  g_parks.store(0);

  std::thread consumer([&] {
    // A minute per wait: far above any wake-up, short enough that a lost
    // one ends the test (the watchdog has flagged it by then).
    while (dispatched.load(std::memory_order_relaxed) < kTotal && !stuck.load()) {
      if (bus.ProcessBatchWait(std::chrono::minutes(1)) == 0) ++empty_waits;
    }
  });
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (std::uint32_t i = 0; i < kPerProducer; ++i) {
        while (!bus.Publish(Tick{p, i})) {
          if (stuck.load()) return;
          std::this_thread::yield();
        }
        // Every few messages, let the consumer run dry, so that it parks.
        if (i % 4 == 3) {
          while (bus.QueueDepth() != 0 && !stuck.load()) std::this_thread::yield();
          std::this_thread::yield();
        }
      }
    });
  }
  std::thread watchdog([&] {
    std::uint64_t last = dispatched.load();
    auto last_change = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::uint64_t now = dispatched.load();
      if (now != last) {
        last = now;
        last_change = std::chrono::steady_clock::now();
      } else if (bus.QueueDepth() != 0 &&
                 std::chrono::steady_clock::now() - last_change > std::chrono::seconds(20)) {
        stuck.store(true);  // the consumer gives up at its wait's timeout
        break;
      }
    }
  });
  for (auto& t : producers) t.join();
  consumer.join();
  done.store(true);
  watchdog.join();
  EXPECT_FALSE(stuck.load()) << "the consumer stayed parked with messages queued";
  EXPECT_EQ(dispatched.load(), kTotal);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  // It means something only if the consumer really parked, many times
  // (with polling first, most hand-overs arrive while it still polls).
  if (TypeParam::Waiting::kPollsBeforePark == 0) {
    EXPECT_GT(g_parks.load(), 100u);
  }
  std::printf("[ sleep    ] %llu messages, %llu parks; %llu waits returned nothing\n",
              static_cast<unsigned long long>(kTotal),
              static_cast<unsigned long long>(g_parks.load()),
              static_cast<unsigned long long>(empty_waits));
}

TYPED_TEST(SleepingConsumerTest, AWaitWithNothingQueuedReturnsZeroAtTheTimeout) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(1)), 0u);
  EXPECT_EQ(bus.ProcessBatchWithWait([](const Tick&) {}, std::chrono::microseconds(100)), 0u);
}

TYPED_TEST(SleepingConsumerTest, AQueuedMessageIsTakenWithoutWaiting) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  int seen = 0;
  ASSERT_TRUE(bus.template Subscribe<Tick>([&](const Tick&) { ++seen; }).IsValid());
  ASSERT_TRUE(bus.Publish(Tick{0, 1}));
  ASSERT_TRUE(bus.Publish(Tick{0, 2}));
  // A minute's timeout: returns at once because messages are queued.
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::minutes(1)), 2u);
  EXPECT_EQ(seen, 2);
}

TYPED_TEST(SleepingConsumerTest, InsideACallbackItNeverWaits) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  std::uint32_t inner = 99;
  ASSERT_TRUE(bus.template Subscribe<Tick>(
                     [&](const Tick&) { inner = bus.ProcessBatchWait(std::chrono::minutes(1)); })
                  .IsValid());
  ASSERT_TRUE(bus.Publish(Tick{0, 1}));
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::minutes(1)), 1u);
  EXPECT_EQ(inner, 0u);
}

TYPED_TEST(SleepingConsumerTest, APublishWakesAParkedConsumer) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  std::uint32_t got = 0;
  // A minute: a lost wake-up returns 0 at the timeout and fails the test.
  std::thread consumer(
      [&] { got = bus.ProcessBatchWithWait([](const Tick&) {}, std::chrono::minutes(1)); });
  // Publish whenever: before the park (taken by the re-check) or after (woken).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(bus.Publish(Tick{0, 1}));
  consumer.join();
  EXPECT_EQ(got, 1u);
}

TYPED_TEST(SleepingConsumerTest, HugeTimeoutsMeanForEverNotAWrap) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  const auto wait_for_one = [&bus](auto timeout) {
    std::uint32_t got = 0;
    std::thread consumer([&] { got = bus.ProcessBatchWithWait([](const Tick&) {}, timeout); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_TRUE(bus.Publish(Tick{0, 1}));
    consumer.join();
    return got;
  };
  // A deadline that wrapped would lie in the past: 0 at once, before the
  // message. Saturated, each waits for it.
  EXPECT_EQ(wait_for_one(std::chrono::nanoseconds::max()), 1u);
  EXPECT_EQ(wait_for_one(std::chrono::hours::max()), 1u);
  EXPECT_EQ(wait_for_one(std::chrono::duration<double>(1e300)), 1u);
}

TYPED_TEST(SleepingConsumerTest, ZeroNegativeAndNanTimeoutsPollAndReturn) {
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, TypeParam> bus;
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::nanoseconds(0)), 0u);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::seconds(-5)), 0u);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::duration<double>(std::nan(""))), 0u);
  ASSERT_TRUE(bus.Publish(Tick{0, 1}));
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::seconds(-5)), 1u);
}

}  // namespace
}  // namespace sleeping_consumer_test
