// PublishBatch from several producers at once: each admitted batch reaches
// the consumer whole (no other producer's message inside it), in order, and
// every admitted message exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace batch_concurrency_test {
namespace {

struct Item {
  std::uint32_t producer;
  std::uint32_t seq;
};
using Bus = sluice::MpscBus<std::variant<Item>, 256>;

// Count: 3 x 3,000 batches of 7 through 256 slots: 9,000 claims of several
// slots at once, each racing the other producers' claims (a chance for
// another producer's message to land inside the batch), while the ring
// wraps some 250 times; when the consumer falls behind a batch is admitted
// in part and its rest retried (some 75 per producer in a measured run).
// Under ThreadSanitizer, some ten times slower, a tenth.
#if defined(__SANITIZE_THREAD__)
constexpr std::uint32_t kBaseBatchesPerProducer = 300;
#else
constexpr std::uint32_t kBaseBatchesPerProducer = 3000;
#endif

TEST(BatchConcurrencyTest, BatchesFromSeveralProducersArriveWholeAndOnce) {
  Bus bus;
  constexpr std::uint32_t kProducers = 3;
  constexpr std::uint32_t kBatch = 7;
  const auto kBatchesPerProducer =
      static_cast<std::uint32_t>(sluice_test::StressCount(kBaseBatchesPerProducer));
  const std::uint32_t kPerProducer = kBatchesPerProducer * kBatch;
  sluice_test::StressProgress progress("batched messages dispatched",
                                       std::uint64_t{kProducers} * kPerProducer);
  // Consumer: for each producer's message, the run of consecutive messages
  // from one producer it arrived in.
  std::vector<std::vector<std::uint32_t>> run_of(kProducers,
                                                 std::vector<std::uint32_t>(kPerProducer, 0));
  std::vector<std::uint32_t> next(kProducers, 0);
  std::uint64_t received = 0;
  bool in_order = true;
  std::uint32_t run = 0;
  std::uint32_t last_producer = kProducers;
  std::atomic<bool> producers_done{false};
  std::thread consumer([&] {
    const auto take = [&](const Item& item) {
      if (item.producer != last_producer) ++run;
      last_producer = item.producer;
      in_order = in_order && item.seq == next[item.producer];
      next[item.producer] = item.seq + 1;
      if (item.seq < kPerProducer) run_of[item.producer][item.seq] = run;
      ++received;
      progress.Step();
    };
    while (!producers_done.load()) {
      if (bus.ProcessBatchWith(take) == 0) std::this_thread::yield();
    }
    while (bus.ProcessBatchWith(take) != 0) {
    }
  });
  // Producers: what each PublishBatch call admitted, as (first seq, count).
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> calls(kProducers);
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&bus, &calls, kBatchesPerProducer, p] {
      std::vector<Item> batch(kBatch);
      for (std::uint32_t b = 0; b < kBatchesPerProducer; ++b) {
        for (std::uint32_t i = 0; i < kBatch; ++i) batch[i] = Item{p, b * kBatch + i};
        // A partly admitted batch: the rest is retried as a call of its own.
        auto first = batch.begin();
        while (first != batch.end()) {
          const std::size_t admitted =
              bus.PublishBatch(first, batch.end(), p, sluice::MessagePriority::HIGH)
                  .AdmittedCount();
          if (admitted != 0) {
            calls[p].emplace_back(first->seq, static_cast<std::uint32_t>(admitted));
          }
          first += static_cast<std::ptrdiff_t>(admitted);
          if (first != batch.end()) std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  producers_done.store(true);
  consumer.join();
  EXPECT_EQ(received, std::uint64_t{kProducers} * kPerProducer);
  EXPECT_TRUE(in_order);
  // Every call's admitted messages arrived in one run: nothing in between.
  std::uint64_t broken = 0;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    EXPECT_EQ(next[p], kPerProducer);
    for (const auto& [start, count] : calls[p]) {
      for (std::uint32_t i = 1; i < count; ++i) {
        broken += run_of[p][start + i] != run_of[p][start] ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(broken, 0u);
}

}  // namespace
}  // namespace batch_concurrency_test
