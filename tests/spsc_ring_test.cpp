// A ring with one producer publishes through its tail (the SPSC index
// protocol, detail/queue/ring.hpp): what the consumer may read is exactly
// what the tail covers, a closed tail reads back to the last publish, and a
// tail written past a ring (shared memory, a writer that breaks the
// protocol) publishes nothing, also once the consumer skips past a
// position.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>

#include "sluice/detail/queue/ring.hpp"
#include "sluice/detail/test_access.hpp"

namespace sluice_test {
namespace spsc_ring_test {
namespace {

using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;

struct Item {
  std::uint32_t value;
};
constexpr std::size_t kCapacity = 4;
using SpscRing =
    sluice::detail::Ring<Item, kCapacity, ProducerModel::kSingle, SlotStorage::kInline>;

void Publish(SpscRing& ring, std::uint32_t value) {
  Position position = 0;
  ASSERT_TRUE(ring.TryClaim(kCapacity, &position));
  new (ring.Storage(position)) Item{value};
  ring.Publish(position);
}

// Near the position wrap, so that the copy's arithmetic crosses it.
constexpr Position kNearWrap = ~Position{0} - 5;

TEST(SpscRingTest, TheConsumerReadsExactlyWhatTheTailCovers) {
  SpscRing ring(kNearWrap);
  EXPECT_EQ(ring.TryFront(), nullptr);
  for (std::uint32_t lap = 0; lap < 3; ++lap) {
    Publish(ring, 10 * lap + 1);
    Publish(ring, 10 * lap + 2);
    const Position front = ring.ConsumerPosition();
    EXPECT_EQ(ring.TryAt(front + 2), nullptr);
    ASSERT_NE(ring.TryFront(), nullptr);
    EXPECT_EQ(ring.TryFront()->value, 10 * lap + 1);
    ASSERT_NE(ring.TryAt(front + 1), nullptr);
    EXPECT_EQ(ring.TryAt(front + 1)->value, 10 * lap + 2);
    EXPECT_EQ(ring.KnownPublished(), 2u);
    EXPECT_EQ(ring.TryAt(front + 2), nullptr);
    Publish(ring, 10 * lap + 3);  // after the copy: found by a re-read
    ASSERT_NE(ring.TryAt(front + 2), nullptr);
    EXPECT_EQ(ring.TryAt(front + 2)->value, 10 * lap + 3);
    ring.PopFronts(3);
    EXPECT_EQ(ring.TryFront(), nullptr);
  }
}

TEST(SpscRingTest, AClosedTailReadsBackToTheLastPublish) {
  SpscRing ring(kNearWrap);
  Publish(ring, 1);
  Publish(ring, 2);
  ring.Close();
  Position refused = 0;
  EXPECT_FALSE(ring.TryClaim(kCapacity, &refused));
  ASSERT_NE(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryFront()->value, 1u);
  ring.PopFront();
  ASSERT_NE(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryFront()->value, 2u);
  ring.PopFront();
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryAt(ring.ConsumerPosition() + 1), nullptr);
  EXPECT_EQ(ring.Depth(), 0u);
}

TEST(SpscRingTest, ATailWrittenPastARingPublishesNothingEvenAfterASkip) {
  SpscRing ring(kNearWrap);
  Publish(ring, 1);
  ASSERT_NE(ring.TryFront(), nullptr);
  ring.PopFront();
  // A writer that breaks the protocol moves the tail 256 rings ahead.
  sluice::detail::TestAccess::RingTail(ring).fetch_add(Position{kCapacity} << 8);
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryAt(ring.ConsumerPosition() + 1), nullptr);
  // A consumer that gives the front up as never coming (Ring::SkipFront)
  // still finds nothing published after it.
  ring.SkipFront();
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryAt(ring.ConsumerPosition() + 1), nullptr);
}

}  // namespace
}  // namespace spsc_ring_test
}  // namespace sluice_test
