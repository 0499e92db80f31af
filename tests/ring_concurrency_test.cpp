// The ring on its own with racing producers: every claimed position is
// popped exactly once, and each producer's messages come out in its order.
// Small and quick, so ThreadSanitizer can check the orderings (A) and (B).
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <thread>
#include <vector>

#include "sluice/detail/ring.hpp"

namespace sluice_test {
namespace {

using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;

struct Item {
  std::uint32_t producer;
  std::uint32_t sequence;
  Position position;  // what TryClaim returned, written by the producer
};

template <SlotStorage kStorage>
void RunProducers(Position first_position) {
  constexpr std::size_t kCapacity = 16;
  constexpr std::uint32_t kProducers = 3;
  constexpr std::uint32_t kPerProducer = 20000;
  sluice::detail::Ring<Item, kCapacity, ProducerModel::kMulti, kStorage> ring(first_position);

  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, &go, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::uint32_t i = 0; i < kPerProducer;) {
        Position position = 0;
        // A limit below the capacity, so refusals and refreshes of the
        // producers' shared cache happen too.
        if (!ring.TryClaim(kCapacity - 3, &position)) {
          std::this_thread::yield();
          continue;
        }
        new (ring.Storage(position)) Item{p, i, position};
        ring.Publish(position);
        ++i;
      }
    });
  }
  go.store(true, std::memory_order_release);

  std::vector<std::uint32_t> next(kProducers, 0);
  Position expected_position = first_position;
  std::uint64_t popped = 0;
  while (popped < std::uint64_t{kProducers} * kPerProducer) {
    const Item* item = ring.TryFront();
    if (item == nullptr) {
      std::this_thread::yield();
      continue;
    }
    // Positions come out consecutively: none skipped, none twice.
    ASSERT_EQ(item->position, expected_position);
    ASSERT_LT(item->producer, kProducers);
    ASSERT_EQ(item->sequence, next[item->producer]) << "producer " << item->producer;
    ++next[item->producer];
    ++expected_position;
    ring.PopFront();
    ++popped;
  }
  for (std::thread& t : producers) t.join();
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.Depth(), Position{0});
  for (std::uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

TEST(RingConcurrencyTest, ProducersRaceEveryPositionPoppedOnceInOrder) {
  RunProducers<SlotStorage::kHeap>(0);
}

TEST(RingConcurrencyTest, ProducersRaceAcrossThePositionWrap) {
  // The wrap falls in the middle of the run.
  RunProducers<SlotStorage::kInline>(std::numeric_limits<Position>::max() - 30000);
}

}  // namespace
}  // namespace sluice_test
