// WaitSet under stress: one consumer sleeps on two or three buses (MPSC and
// SPSC, FIFO and priority-ordered) in set.ProcessBatchWait while producers
// hand over a few messages at a time, so it runs dry and parks over and
// over. Every message must be dispatched exactly once, in each producer's
// order. A lost wake-up leaves the consumer parked with messages queued:
// the watchdog sees no progress for a long bound, records it with a
// message, and closes the buses (a close wakes the set) so the test ends
// and fails; the consumer's own wait timeout is the last resort. The
// watchdog only detects a hang; nothing asserts a time.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <variant>
#include <vector>

#include "counting_parker.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "sluice/wait_set.hpp"
#include "test_support.hpp"
#include "typed_test_names.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#endif

namespace wait_set_concurrency_test {
namespace {

struct Tick {
  std::uint32_t producer;
  std::uint32_t seq;
};
using Payload = std::variant<Tick>;

using sluice_test::CountingParker;
using sluice_test::g_parks;
#if defined(__linux__)
using sluice_test::CountingMembarrierParker;
#endif

// Park at once: every empty look is a park, the path a lost wake-up needs.
template <typename ParkerType>
struct EagerTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitInSet<ParkerType, 0>;
};
template <typename ParkerType>
struct EagerPriorityTraits : sluice::PriorityOrderTraits {
  using Waiting = sluice::WaitInSet<ParkerType, 0>;
};

#if defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// No progress for this long with messages queued: a lost wake-up.
constexpr auto kPatience = std::chrono::seconds(15);
// The consumer's wait: far above any wake-up, so a lost one is seen by the
// watchdog first, and short enough to end a test whose close did not wake.
constexpr auto kConsumerWait = std::chrono::seconds(30);

// Watches `dispatched`; when it has not moved for kPatience while
// `queued()` says messages wait, sets `stuck`, prints why and calls
// `rescue()` (which closes the buses, waking the consumer).
template <typename Queued, typename Rescue>
void Watch(const std::atomic<std::uint64_t>& dispatched, const std::atomic<bool>& done,
           std::atomic<bool>& stuck, Queued queued, Rescue rescue) {
  std::uint64_t last = dispatched.load();
  auto last_change = std::chrono::steady_clock::now();
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::uint64_t now = dispatched.load();
    if (now != last) {
      last = now;
      last_change = std::chrono::steady_clock::now();
    } else if (queued() && std::chrono::steady_clock::now() - last_change > kPatience) {
      std::fprintf(stderr,
                   "watchdog: no message dispatched for %lld s with messages queued after %llu: "
                   "the consumer stayed asleep (a lost wake-up)\n",
                   static_cast<long long>(kPatience.count()), static_cast<unsigned long long>(now));
      stuck.store(true);
      rescue();
      return;
    }
  }
}

template <typename ParkerType>
class WaitSetConcurrencyTest : public ::testing::Test {};
#if defined(__linux__)
using Parkers = ::testing::Types<CountingParker<sluice::ConditionVariableParker>,
                                 CountingParker<sluice::FutexParker>, CountingMembarrierParker>;
#else
using Parkers = ::testing::Types<CountingParker<sluice::ConditionVariableParker>>;
#endif
TYPED_TEST_SUITE(WaitSetConcurrencyTest, Parkers, sluice_test::IndexNames);

// Four producers on three buses: two on an MPSC bus, one on an SPSC bus,
// one on a priority-ordered MPSC bus (cycling LOW, MEDIUM, HIGH). Every
// fourth message a producer waits for its bus to run dry, so the consumer
// parks some thousands of times, each time with the others' publishes
// racing its announcement. 4 x 20,000 messages (a tenth under
// ThreadSanitizer); the last producer of each bus closes it, and the
// consumer stops when the set reports every bus drained.
TYPED_TEST(WaitSetConcurrencyTest, ProducersOnThreeBusesEveryMessageDispatchedExactlyOnce) {
  using Traits = EagerTraits<TypeParam>;
  sluice::WaitSet<TypeParam> set;
  sluice::MpscBus<Payload, 64, Traits> shared(set);
  sluice::SpscBus<Payload, 64, Traits> single(set);
  sluice::MpscBus<Payload, 64, EagerPriorityTraits<TypeParam>> ordered(set);

  constexpr std::uint32_t kProducers = 4;  // 0, 1: shared; 2: single; 3: ordered
  const auto kPerProducer =
      static_cast<std::uint32_t>(sluice_test::StressCount(kSanitized ? 2000 : 20000));
  const std::uint64_t kTotal = std::uint64_t{kPerProducer} * kProducers;
  sluice_test::StressProgress progress("wait set, messages dispatched", kTotal);
  // The next sequence number due from each producer, per priority: the
  // priority-ordered bus keeps each producer's order within a priority
  // only (message i goes at priority i % 3); the FIFO buses keep it whole,
  // which the per-priority check also sees.
  std::array<std::array<std::uint32_t, 3>, kProducers> next{};
  for (auto& due : next) due = {0, 1, 2};
  bool in_order = true;
  std::atomic<std::uint64_t> dispatched{0};
  // On the consumer thread only (callbacks).
  const auto on_tick = [&](const Tick& tick) {
    const std::uint32_t priority = tick.seq % 3;
    in_order = in_order && tick.producer < kProducers && tick.seq == next[tick.producer][priority];
    if (tick.producer < kProducers) next[tick.producer][priority] = tick.seq + 3;
    dispatched.fetch_add(1, std::memory_order_relaxed);
    progress.Step();
  };
  ASSERT_TRUE(shared.template Subscribe<Tick>(on_tick).IsValid());
  ASSERT_TRUE(single.template Subscribe<Tick>(on_tick).IsValid());
  ASSERT_TRUE(ordered.template Subscribe<Tick>(on_tick).IsValid());

  std::atomic<bool> done{false};
  std::atomic<bool> stuck{false};
  std::atomic<std::uint32_t> shared_left{2};
  // The watchdog's rescue: the MPSC buses may be closed from any thread,
  // and either close wakes the set (the SPSC bus is its producer's to close).
  const auto close_multi = [&] {
    shared.Close();
    ordered.Close();
  };
  const auto all_drained = [&] {
    return shared.IsDrained() && single.IsDrained() && ordered.IsDrained();
  };

  std::uint64_t empty_waits = 0;
  g_parks.store(0);
  std::thread consumer([&] {
    while (!all_drained() && !stuck.load()) {
      if (set.ProcessBatchWait(kConsumerWait, 16, shared, single, ordered) == 0) ++empty_waits;
    }
    // After a rescue, take what is left so the count says what was lost.
    while (set.ProcessBatchWait(std::chrono::seconds(0), 64, shared, single, ordered) != 0) {
    }
  });
  const auto produce = [&](auto& bus, std::uint32_t producer) {
    for (std::uint32_t i = 0; i < kPerProducer; ++i) {
      const auto priority = static_cast<sluice::MessagePriority>(i % 3);
      while (!bus.PublishWithPriority(Tick{producer, i}, producer, priority)) {
        if (stuck.load()) return;
        std::this_thread::yield();
      }
      if (i % 4 == 3) {
        while (bus.QueueDepth() != 0 && !stuck.load()) std::this_thread::yield();
      }
    }
  };
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      produce(shared, p);
      if (shared_left.fetch_sub(1) == 1) shared.Close();
    });
  }
  producers.emplace_back([&] {
    produce(single, 2);
    single.Close();  // SPSC: its producer thread
  });
  producers.emplace_back([&] {
    produce(ordered, 3);
    ordered.Close();
  });
  std::thread watchdog([&] {
    Watch(
        dispatched, done, stuck,
        [&] { return shared.QueueDepth() + single.QueueDepth() + ordered.QueueDepth() != 0; },
        close_multi);
  });
  for (auto& t : producers) t.join();
  consumer.join();
  done.store(true);
  watchdog.join();

  EXPECT_FALSE(stuck.load()) << "the consumer stayed asleep with messages queued";
  EXPECT_EQ(dispatched.load(), kTotal);
  EXPECT_TRUE(in_order) << "a message was dispatched twice, out of order, or from nowhere";
  EXPECT_TRUE(all_drained());
  EXPECT_EQ(set.Waiters(), 0u);
  // It means something only if the consumer really parked: from some tens
  // (membarrier, whose heavy fence slows the way into sleep, so the next
  // publish is often there before it parks) to 70,000 times in measured
  // runs.
  EXPECT_GT(g_parks.load(), 0u);
  std::printf("[ waitset ] %llu messages on 3 buses, %llu parks; %llu waits returned nothing\n",
              static_cast<unsigned long long>(kTotal),
              static_cast<unsigned long long>(g_parks.load()),
              static_cast<unsigned long long>(empty_waits));
}

// One message at a time, each on the next bus in turn, the consumer
// sleeping between them: while a message is in flight the other buses are
// silent, so nothing but its own bus's notify (or the re-check of that bus
// after the announcement) can wake the consumer. A publish that lands
// between the consumer's last look and its announcement is found only by
// the re-check of every bus. With the re-check of the first bus alone
// planted in WaitSet::Wait, 15 of 18 runs of this test (3 parkers, 6 runs
// of the binary, on a loaded 2-core machine) left the consumer asleep and
// failed, and every run of the binary failed (the test above, whose other
// buses' traffic soon wakes the consumer, did not); with the publish's
// notify planted on the bus's own signal, every run. A notifier without
// its fence was not caught here on x86 (the SPIN model catches it).
// 30,000 hand-overs (a tenth under ThreadSanitizer).
TYPED_TEST(WaitSetConcurrencyTest, HandOversThatRotateAcrossBusesNeverLoseAWakeUp) {
  using Traits = EagerTraits<TypeParam>;
  sluice::WaitSet<TypeParam> set;
  sluice::MpscBus<Payload, 8, Traits> first(set);
  sluice::SpscBus<Payload, 8, Traits> second(set);
  sluice::MpscBus<Payload, 8, Traits> third(set);

  const std::uint64_t kMessages = sluice_test::StressCount(kSanitized ? 3000 : 30000);
  sluice_test::StressProgress progress("wait set hand-overs", kMessages);
  std::atomic<std::uint64_t> dispatched{0};
  std::uint64_t expected_seq = 0;
  bool in_order = true;
  std::uint32_t jitter = 12345;
  const auto on_tick = [&](const Tick& tick) {
    in_order = in_order && tick.seq == expected_seq;
    ++expected_seq;
    dispatched.fetch_add(1, std::memory_order_release);
    progress.Step();
    jitter = jitter * 1664525u + 1013904223u;
    for (volatile std::uint32_t spin = jitter >> 20; spin != 0; spin = spin - 1) {
    }
  };
  ASSERT_TRUE(first.template Subscribe<Tick>(on_tick).IsValid());
  ASSERT_TRUE(second.template Subscribe<Tick>(on_tick).IsValid());
  ASSERT_TRUE(third.template Subscribe<Tick>(on_tick).IsValid());

  std::atomic<bool> done{false};
  std::atomic<bool> stuck{false};
  g_parks.store(0);
  std::thread consumer([&] {
    while (dispatched.load(std::memory_order_acquire) < kMessages && !stuck.load()) {
      (void)set.ProcessBatchWait(kConsumerWait, 4, first, second, third);
    }
  });
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kMessages && !stuck.load(); ++i) {
      const Tick tick{0, static_cast<std::uint32_t>(i)};
      const sluice::PublishResult result = i % 3 == 0   ? first.Publish(tick)
                                           : i % 3 == 1 ? second.Publish(tick)
                                                        : third.Publish(tick);
      const bool admitted = static_cast<bool>(result);
      if (!admitted) break;  // closed by the watchdog
      // Spins a while before yielding, so that it sees the message counted
      // while the consumer is still on its way back into the wait; then a
      // pause of varying length spreads the next publish over that way:
      // before the consumer's last look, between it and the announcement
      // (the window a lost wake-up needs), and after it.
      for (std::uint32_t spins = 0; dispatched.load(std::memory_order_acquire) <= i; ++spins) {
        if (stuck.load()) return;
        if (spins >= 20000) std::this_thread::yield();
      }
    }
  });
  std::thread watchdog([&] {
    Watch(
        dispatched, done, stuck,
        [&] { return first.QueueDepth() + second.QueueDepth() + third.QueueDepth() != 0; },
        [&] {
          // The consumer may still be asleep: a close of an MPSC bus wakes
          // the set (the SPSC bus is its producer's to close).
          first.Close();
          third.Close();
        });
  });
  producer.join();
  consumer.join();
  done.store(true);
  watchdog.join();

  EXPECT_FALSE(stuck.load()) << "the consumer stayed asleep with a message queued";
  EXPECT_EQ(dispatched.load(), kMessages);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(set.Waiters(), 0u);
  // How many hand-overs found the consumer parked depends on the pauses
  // and the machine: printed, not asserted (the test above asserts parks).
  std::printf("[ waitset ] %llu hand-overs, %llu parks\n",
              static_cast<unsigned long long>(kMessages),
              static_cast<unsigned long long>(g_parks.load()));
}

}  // namespace
}  // namespace wait_set_concurrency_test
