// Shutdown under load: producers publish until the bus refuses them as
// closed; the consumer sleeps between messages and dispatches until the bus
// is drained; another thread closes and drains. Everything admitted is
// dispatched exactly once and in order per producer, nothing after Close is
// admitted, and destroying the drained bus loses nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <variant>
#include <vector>

#include "counting_observer.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace close_concurrency_test {
namespace {

struct Item {
  std::uint32_t producer;
  std::uint32_t seq;
};
using Payload = std::variant<Item>;
using Bus = sluice::MpscBus<Payload, 256, sluice::SleepingConsumerTraits>;

// Count: 20 rounds, each one Close racing three producers mid-publish (and
// the consumer parked or dispatching), at 20 different depths of the stream
// (1,000 to 10,500 messages admitted); the long tier repeats the 20 depths.
TEST(CloseConcurrencyTest, EverythingAdmittedBeforeCloseIsDispatchedOnce) {
  const std::uint64_t rounds = sluice_test::StressCount(20);
  sluice_test::StressProgress progress("close rounds", rounds);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    constexpr std::uint32_t kProducers = 3;
    std::vector<std::uint32_t> dispatched(kProducers, 0);  // consumer's
    bool in_order = true;
    std::vector<std::uint32_t> admitted(kProducers, 0);     // each producer's own
    std::vector<std::uint32_t> after_close(kProducers, 0);  // admitted after IsClosed()
    std::atomic<std::uint64_t> total_admitted{0};
    {
      Bus bus;
      std::thread consumer([&] {
        while (!bus.IsDrained()) {
          bus.ProcessBatchWithWait(
              [&](const Item& item) {
                in_order = in_order && item.seq == dispatched[item.producer];
                ++dispatched[item.producer];
              },
              std::chrono::minutes(1));
        }
      });
      std::vector<std::thread> producers;
      for (std::uint32_t p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
          for (;;) {
            const bool closed_before = bus.IsClosed();
            if (bus.Publish(Item{p, admitted[p]}, p)) {
              after_close[p] += closed_before ? 1 : 0;
              ++admitted[p];
              total_admitted.fetch_add(1, std::memory_order_relaxed);
            } else if (bus.IsClosed()) {
              return;
            } else {
              std::this_thread::yield();  // full: try again
            }
          }
        });
      }
      // Close mid-stream, at a different point each round.
      while (total_admitted.load() < 1000u + 500u * static_cast<unsigned>(round % 20)) {
        std::this_thread::yield();
      }
      bus.Close();
      EXPECT_TRUE(bus.Drain(std::chrono::minutes(1)));
      for (auto& t : producers) t.join();
      consumer.join();
      EXPECT_EQ(bus.QueueDepth(), 0u);
      EXPECT_EQ(bus.GetStatistics().messages_published, total_admitted.load());
    }  // the drained bus is destroyed here
    for (std::uint32_t p = 0; p < kProducers; ++p) {
      EXPECT_EQ(dispatched[p], admitted[p]) << "producer " << p << ", round " << round;
      EXPECT_EQ(after_close[p], 0u) << "admitted after Close returned";
    }
    EXPECT_TRUE(in_order);
    progress.Step();
  }
}

struct ClosedCountingTraits : sluice::SleepingConsumerTraits {
  using Observer = sluice_test::CountingObserver;
};

// The observer's OnClosed is told once however many threads close the bus
// at once (the close state's compare-and-swap picks the one that tells
// it), and every Close returns with the bus closed and its sleeping
// consumer woken. Count: 200 rounds of four closers let go together, so
// that in many of them two or more Close calls overlap (ThreadSanitizer in
// CI); the long tier repeats them.
TEST(CloseConcurrencyTest, ConcurrentClosesTellTheObserverOnce) {
  const std::uint64_t rounds = sluice_test::StressCount(200);
  sluice_test::StressProgress progress("concurrent close rounds", rounds);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    constexpr int kClosers = 4;
    sluice::MpscBus<Payload, 64, ClosedCountingTraits> bus;
    ASSERT_TRUE(bus.Publish(Item{0, 0}));
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::atomic<int> closed_on_return{0};
    std::thread consumer([&] {
      std::uint32_t seen = 0;
      while (!bus.IsDrained()) {
        (void)bus.ProcessBatchWithWait([&seen](const Item&) { ++seen; }, std::chrono::minutes(1));
      }
      EXPECT_EQ(seen, 1u);
    });
    std::vector<std::thread> closers;
    for (int c = 0; c < kClosers; ++c) {
      closers.emplace_back([&] {
        ready.fetch_add(1);
        while (!go.load()) {
        }
        bus.Close();
        closed_on_return.fetch_add(bus.IsClosed() ? 1 : 0);
      });
    }
    while (ready.load() != kClosers) std::this_thread::yield();
    go.store(true);
    for (auto& t : closers) t.join();
    consumer.join();
    EXPECT_EQ(closed_on_return.load(), kClosers);
    EXPECT_EQ(bus.GetObserver().Closed(), 1u) << "round " << round;
    EXPECT_FALSE(bus.Publish(Item{0, 1}));
    progress.Step();
  }
}

}  // namespace
}  // namespace close_concurrency_test
