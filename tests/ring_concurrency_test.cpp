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

#include "sluice/detail/queue/ring.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace ring_concurrency_test {
namespace {

using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;

struct Item {
  std::uint32_t producer;
  std::uint32_t sequence;
  Position position;  // what TryClaim returned, written by the producer
};

constexpr std::size_t kCapacity = 16;
constexpr std::uint32_t kProducers = 3;

// Count: 3 x 20,000 claims through 16 slots, so the ring wraps some 3,750
// times; every claim races two other producers for the position, and the
// limit below the capacity makes producers refresh their shared cache over
// and over: tens of thousands of chances for a position claimed twice or
// skipped, or a slot read before its publication.
std::uint32_t PerProducer() { return static_cast<std::uint32_t>(sluice_test::StressCount(20000)); }

template <SlotStorage kStorage>
void RunProducers(const char* what, Position first_position) {
  const std::uint32_t kPerProducer = PerProducer();
  sluice_test::StressProgress progress(what, std::uint64_t{kProducers} * kPerProducer);
  sluice::detail::Ring<Item, kCapacity, ProducerModel::kMulti, kStorage> ring(first_position);

  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, &go, kPerProducer, p] {
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
    progress.Step();
  }
  for (std::thread& t : producers) t.join();
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.Depth(), Position{0});
  for (std::uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

TEST(RingConcurrencyTest, ProducersRaceEveryPositionPoppedOnceInOrder) {
  RunProducers<SlotStorage::kHeap>("ring positions popped", 0);
}

TEST(RingConcurrencyTest, ProducersRaceAcrossThePositionWrap) {
  // The wrap falls in the middle of the run.
  const Position half = static_cast<Position>(std::uint64_t{kProducers} * PerProducer() / 2);
  RunProducers<SlotStorage::kInline>("ring positions popped across the wrap",
                                     std::numeric_limits<Position>::max() - half);
}

}  // namespace
}  // namespace ring_concurrency_test
}  // namespace sluice_test
