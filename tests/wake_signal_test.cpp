// The sleeping consumer's wake-up protocol (detail/wait/wake_signal.hpp) under
// stress: producers hand over one message at a time, so the consumer finds
// the queue empty and parks before nearly every message. A lost wake-up
// leaves it parked (its wait has no useful timeout) with a message queued:
// the watchdog sees no progress, records it, and wakes it so the test ends
// and fails. The watchdog only detects a hang; it asserts no time.
#include "sluice/detail/wait/wake_signal.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "sluice/extras/condition_variable_parker.hpp"
#include "test_support.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#include "typed_test_names.hpp"
#endif

namespace wake_signal_test {
namespace {

// Handshakes per producer: each is one chance for a notify to land between
// the consumer's re-check and its park, the window a lost wake-up needs
// (ANotifyBeforeTheWaitIsNotLost below puts a notify in it on purpose, and
// tests/spin/consumer_wakeup.pml checks every interleaving). With the
// sequence bump planted out of Wake(), the consumer stayed parked within
// the first 10,000 of these 2 x 50,000 handshakes in each of 4 runs on the
// 2-vCPU machine (and the watchdog cannot free it: the test then fails by
// its CTest timeout). Under ThreadSanitizer, some ten times slower, a tenth.
#if defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kBaseMessagesPerProducer = 5000;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr std::uint64_t kBaseMessagesPerProducer = 5000;
#else
constexpr std::uint64_t kBaseMessagesPerProducer = 50000;
#endif
#else
constexpr std::uint64_t kBaseMessagesPerProducer = 50000;
#endif
constexpr int kProducers = 2;

template <typename Parker>
class WakeSignalTest : public ::testing::Test {};

#if defined(__linux__)
using Parkers = ::testing::Types<sluice::ConditionVariableParker, sluice::FutexParker,
                                 sluice::MembarrierFutexParker>;
#else
using Parkers = ::testing::Types<sluice::ConditionVariableParker>;
#endif
TYPED_TEST_SUITE(WakeSignalTest, Parkers, sluice_test::IndexNames);

TYPED_TEST(WakeSignalTest, NoLostWakeUpAcrossManyParks) {
  sluice::detail::WakeSignal<TypeParam> signal;
  // The "queue": a count of published messages (release) and of consumed
  // ones; a producer publishes its next message only once the consumer
  // has taken everything, so the consumer keeps running dry.
  std::atomic<std::uint64_t> published{0};
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<bool> done{false};
  std::atomic<bool> stuck{false};
  // Relaxed: a count the producers poll to let the consumer park; the
  // wake-up itself is the signal's (SYNC POINT W).
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> parks_at_publish{0};  // the count when the last message went
  const std::uint64_t kMessagesPerProducer = sluice_test::StressCount(kBaseMessagesPerProducer);
  const std::uint64_t kTotal = kMessagesPerProducer * kProducers;
  sluice_test::StressProgress progress("wake-ups, messages consumed", kTotal);

  std::thread consumer([&] {
    std::uint64_t taken = 0;
    while (taken < kTotal) {
      if (taken < published.load(std::memory_order_acquire)) {
        consumed.store(++taken, std::memory_order_release);
        progress.Step();
        continue;
      }
      std::uint32_t ticket = 0;
      if (!signal.PrepareWait(&ticket)) continue;  // no heavy fence: poll
      if (taken < published.load(std::memory_order_acquire)) {
        signal.CancelWait();
        continue;
      }
      parks.fetch_add(1, std::memory_order_relaxed);
      signal.Wait(ticket, std::chrono::hours(1));
    }
  });
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      for (std::uint64_t i = 0; i < kMessagesPerProducer; ++i) {
        // Wait until the consumer has drained, so it parks again.
        std::uint64_t seen = published.load(std::memory_order_acquire);
        while (consumed.load(std::memory_order_acquire) < seen) {
          std::this_thread::yield();
          seen = published.load(std::memory_order_acquire);
        }
        // Gives the consumer a moment to go to sleep (its park count moves
        // just before it waits), so that most messages take the wake-up
        // path whatever the scheduling: sharded runs under
        // ThreadSanitizer parked too seldom otherwise.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(500);
        while (parks.load(std::memory_order_relaxed) <=
                   parks_at_publish.load(std::memory_order_relaxed) &&
               std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
        }
        parks_at_publish.store(parks.load(std::memory_order_relaxed), std::memory_order_relaxed);
        published.fetch_add(1, std::memory_order_release);
        signal.Notify();
      }
    });
  }
  // Watchdog: a consumer that makes no progress for 20 s with a message
  // queued lost a wake-up. Woken by hand so that the test can end.
  std::thread watchdog([&] {
    std::uint64_t last = consumed.load();
    auto last_change = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::uint64_t now_consumed = consumed.load();
      if (now_consumed != last) {
        last = now_consumed;
        last_change = std::chrono::steady_clock::now();
      } else if (now_consumed < published.load() &&
                 std::chrono::steady_clock::now() - last_change > std::chrono::seconds(20)) {
        stuck.store(true);
        while (!done.load()) {
          // Forces a wake: the consumer has announced that it sleeps.
          signal.Notify();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    }
  });
  for (auto& t : producers) t.join();
  consumer.join();
  done.store(true);
  watchdog.join();
  EXPECT_FALSE(stuck.load()) << "the consumer stayed parked with a message queued";
  EXPECT_EQ(consumed.load(), kTotal);
  // The test means something only if the consumer really parked, many
  // times (tens of thousands here; thousands under ThreadSanitizer).
  EXPECT_GT(parks.load(), 100u) << "parks: " << parks.load();
  std::printf("[ wake     ] %llu messages, %llu parks\n", static_cast<unsigned long long>(kTotal),
              static_cast<unsigned long long>(parks.load()));
}

TYPED_TEST(WakeSignalTest, ATimedWaitReturnsWithoutANotify) {
  sluice::detail::WakeSignal<TypeParam> signal;
  std::uint32_t ticket = 0;
  ASSERT_TRUE(signal.PrepareWait(&ticket));
  EXPECT_TRUE(signal.ConsumerSleeping());
  signal.Wait(ticket, std::chrono::milliseconds(1));
  EXPECT_FALSE(signal.ConsumerSleeping());
}

TYPED_TEST(WakeSignalTest, ANotifyBeforeTheWaitIsNotLost) {
  sluice::detail::WakeSignal<TypeParam> signal;
  std::uint32_t ticket = 0;
  ASSERT_TRUE(signal.PrepareWait(&ticket));
  signal.Notify();  // between the re-check and the park
  // Returns at once: the sequence moved past the ticket (an hour otherwise).
  signal.Wait(ticket, std::chrono::hours(1));
  EXPECT_FALSE(signal.ConsumerSleeping());
}

}  // namespace
}  // namespace wake_signal_test
