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

#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

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

}  // namespace
