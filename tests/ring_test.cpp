// The ring on its own, driven as the bus drives it: TryClaim, construct at
// Storage, Publish on the producer side; TryFront, PopFront on the consumer
// side.
#include "sluice/detail/queue/ring.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <new>
#include <string>
#include <vector>

namespace sluice_test {
namespace ring_test {
namespace {

using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;
using sluice::detail::Ring;

constexpr Position kMaxPosition = std::numeric_limits<Position>::max();

// An envelope that records its own destruction in a per-test tally, indexed
// by its value, so a test can assert that each one died exactly once.
struct Tracked {
  Tracked(int v, std::vector<int>* tally) noexcept : value(v), destroyed(tally) {}
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() { ++(*destroyed)[static_cast<std::size_t>(value)]; }

  int value;
  std::vector<int>* destroyed;
};

template <ProducerModel kModel, SlotStorage kStorage>
struct Config {
  static constexpr ProducerModel kProducers = kModel;
  static constexpr SlotStorage kSlots = kStorage;
};

template <typename C>
class RingTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kCapacity = 8;
  using TestRing = Ring<Tracked, kCapacity, C::kProducers, C::kSlots>;

  // Claims, constructs and publishes one envelope; false when refused.
  static bool Push(TestRing& ring, Position limit, int value, std::vector<int>* tally,
                   Position* claimed = nullptr) {
    Position position = 0;
    if (!ring.TryClaim(limit, &position)) return false;
    new (ring.Storage(position)) Tracked(value, tally);
    ring.Publish(position);
    if (claimed != nullptr) *claimed = position;
    return true;
  }

  // Pops the front envelope and returns its value; -1 when none is ready.
  static int Pop(TestRing& ring) {
    Tracked* front = ring.TryFront();
    if (front == nullptr) return -1;
    const int value = front->value;
    ring.PopFront();
    return value;
  }
};

using Configs = ::testing::Types<Config<ProducerModel::kMulti, SlotStorage::kHeap>,
                                 Config<ProducerModel::kMulti, SlotStorage::kInline>,
                                 Config<ProducerModel::kSingle, SlotStorage::kHeap>,
                                 Config<ProducerModel::kSingle, SlotStorage::kInline>>;

class ConfigNames {
 public:
  template <typename C>
  static std::string GetName(int) {
    return std::string(C::kProducers == ProducerModel::kMulti ? "Mpsc" : "Spsc") +
           (C::kSlots == SlotStorage::kHeap ? "Heap" : "Inline");
  }
};

TYPED_TEST_SUITE(RingTest, Configs, ConfigNames);

TYPED_TEST(RingTest, ClaimPublishFrontPopInOrder) {
  std::vector<int> destroyed(100, 0);
  typename TestFixture::TestRing ring;
  EXPECT_EQ(ring.TryFront(), nullptr);
  int next_in = 0;
  int next_out = 0;
  // Several laps, in bursts of different sizes, so every slot is reused.
  for (int burst : {3, 8, 1, 5, 7, 2, 8, 4}) {
    for (int i = 0; i < burst; ++i) {
      Position claimed = 0;
      ASSERT_TRUE(TestFixture::Push(ring, TestFixture::kCapacity, next_in, &destroyed, &claimed));
      // The position counts from 0 and is the admission order.
      EXPECT_EQ(claimed, static_cast<Position>(next_in));
      ++next_in;
    }
    for (int i = 0; i < burst; ++i) EXPECT_EQ(TestFixture::Pop(ring), next_out++);
    EXPECT_EQ(ring.TryFront(), nullptr);
  }
  ASSERT_EQ(next_out, next_in);
  for (int i = 0; i < next_in; ++i) EXPECT_EQ(destroyed[i], 1) << "envelope " << i;
}

TYPED_TEST(RingTest, TryClaimRefusesExactlyAtTheLimit) {
  std::vector<int> destroyed(100, 0);
  typename TestFixture::TestRing ring;
  int value = 0;
  for (Position limit : {Position{1}, Position{5}, Position{TestFixture::kCapacity}}) {
    // limit - 1 queued: one more is admitted; limit queued: refused.
    for (Position queued = 0; queued < limit; ++queued) {
      ASSERT_EQ(ring.Depth(), queued);
      ASSERT_TRUE(TestFixture::Push(ring, limit, value++, &destroyed)) << "limit " << limit;
    }
    EXPECT_EQ(ring.Depth(), limit);
    Position untouched = 12345;
    EXPECT_FALSE(ring.TryClaim(limit, &untouched));
    EXPECT_EQ(untouched, Position{12345}) << "a refusal writes no position";
    EXPECT_FALSE(ring.TryClaim(limit, &untouched)) << "a refusal changes nothing";
    EXPECT_EQ(ring.Depth(), limit);
    // A larger limit still admits: the refusal is the caller's limit, not the ring's.
    if (limit < TestFixture::kCapacity) {
      ASSERT_TRUE(TestFixture::Push(ring, limit + 1, value++, &destroyed));
      EXPECT_FALSE(ring.TryClaim(limit + 1, &untouched));
      TestFixture::Pop(ring);
    }
    // The consumer releasing one slot makes room for exactly one.
    TestFixture::Pop(ring);
    EXPECT_EQ(ring.Depth(), limit - 1);
    ASSERT_TRUE(TestFixture::Push(ring, limit, value++, &destroyed));
    EXPECT_FALSE(ring.TryClaim(limit, &untouched));
    while (TestFixture::Pop(ring) != -1) {
    }
    EXPECT_EQ(ring.Depth(), Position{0});
  }
  for (int i = 0; i < value; ++i) EXPECT_EQ(destroyed[i], 1) << "envelope " << i;
}

TYPED_TEST(RingTest, DepthIsExactAtQuiescence) {
  std::vector<int> destroyed(100, 0);
  typename TestFixture::TestRing ring;
  EXPECT_EQ(ring.Depth(), Position{0});
  int value = 0;
  Position expected = 0;
  // Fill to the capacity, drain part, refill: depth tracks every step.
  for (int round = 0; round < 4; ++round) {
    while (TestFixture::Push(ring, TestFixture::kCapacity, value, &destroyed)) {
      ++value;
      ++expected;
      ASSERT_EQ(ring.Depth(), expected);
    }
    ASSERT_EQ(expected, Position{TestFixture::kCapacity});
    for (int i = 0; i < 3 + round; ++i) {
      TestFixture::Pop(ring);
      --expected;
      ASSERT_EQ(ring.Depth(), expected);
    }
  }
}

// The ring promises (see ~Ring) to destroy the envelopes still queued; the bus
// relies on that and has no destructor of its own.
TYPED_TEST(RingTest, DestructionDestroysQueuedEnvelopesOnce) {
  std::vector<int> destroyed(100, 0);
  {
    typename TestFixture::TestRing ring;
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(TestFixture::Push(ring, 8, i, &destroyed));
    EXPECT_EQ(TestFixture::Pop(ring), 0);
    EXPECT_EQ(TestFixture::Pop(ring), 1);
    EXPECT_EQ(destroyed[0], 1);
    EXPECT_EQ(destroyed[2], 0) << "still queued";
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(destroyed[i], 1) << "envelope " << i;
  for (int i = 6; i < 100; ++i) EXPECT_EQ(destroyed[i], 0);
}

// Starting a few slots before Position wraps, the positions, the slot
// sequences and the fill arithmetic all cross zero while the ring fills and
// drains.
TYPED_TEST(RingTest, WrapsAroundThePositionType) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  std::vector<int> destroyed(200, 0);
  const Position first = kMaxPosition - kCapacity - 2;
  typename TestFixture::TestRing ring(first);
  int next_in = 0;
  int next_out = 0;
  bool crossed_zero = false;
  for (int round = 0; round < 12; ++round) {
    // Fill to a limit of 6, then drain 4: the depth keeps a standing backlog
    // across the wrap.
    Position claimed = 0;
    while (TestFixture::Push(ring, 6, next_in, &destroyed, &claimed)) {
      EXPECT_EQ(claimed, static_cast<Position>(first + static_cast<Position>(next_in)));
      crossed_zero = crossed_zero || claimed == 0;
      ++next_in;
    }
    ASSERT_EQ(ring.Depth(), Position{6}) << "round " << round;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(TestFixture::Pop(ring), next_out++);
    ASSERT_EQ(ring.Depth(), Position{2});
  }
  while (ring.TryFront() != nullptr) EXPECT_EQ(TestFixture::Pop(ring), next_out++);
  EXPECT_EQ(next_out, next_in);
  EXPECT_EQ(ring.Depth(), Position{0});
  EXPECT_TRUE(crossed_zero) << "the test must actually cross the wrap";
  EXPECT_GT(next_in, static_cast<int>(3 * kCapacity));
  for (int i = 0; i < next_in; ++i) EXPECT_EQ(destroyed[i], 1) << "envelope " << i;
}

// MPSC only: two claims may be outstanding at once. (An SPSC ring has one
// producer, which publishes each claim before the next.)
template <SlotStorage kStorage>
void UnpublishedClaimHidesLaterSlots() {
  using TestRing = Ring<Tracked, 8, ProducerModel::kMulti, kStorage>;
  std::vector<int> destroyed(10, 0);
  TestRing ring;
  Position a = 0;
  Position b = 0;
  Position c = 0;
  ASSERT_TRUE(ring.TryClaim(8, &a));
  ASSERT_TRUE(ring.TryClaim(8, &b));
  ASSERT_TRUE(ring.TryClaim(8, &c));
  EXPECT_EQ(b, a + 1);
  EXPECT_EQ(c, a + 2);
  // Claimed, even unpublished, counts toward the depth and every limit.
  EXPECT_EQ(ring.Depth(), Position{3});
  Position refused = 0;
  EXPECT_FALSE(ring.TryClaim(3, &refused));

  new (ring.Storage(c)) Tracked(2, &destroyed);
  ring.Publish(c);
  new (ring.Storage(b)) Tracked(1, &destroyed);
  ring.Publish(b);
  // b and c are readable, but the consumer goes in position order.
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.TryFront(), nullptr);

  new (ring.Storage(a)) Tracked(0, &destroyed);
  ring.Publish(a);
  for (int expected = 0; expected < 3; ++expected) {
    Tracked* front = ring.TryFront();
    ASSERT_NE(front, nullptr);
    EXPECT_EQ(front->value, expected);
    ring.PopFront();
    EXPECT_EQ(destroyed[static_cast<std::size_t>(expected)], 1);
  }
  EXPECT_EQ(ring.TryFront(), nullptr);
  EXPECT_EQ(ring.Depth(), Position{0});
}

TEST(RingMpscTest, UnpublishedClaimHidesLaterSlotsHeap) {
  UnpublishedClaimHidesLaterSlots<SlotStorage::kHeap>();
}
TEST(RingMpscTest, UnpublishedClaimHidesLaterSlotsInline) {
  UnpublishedClaimHidesLaterSlots<SlotStorage::kInline>();
}

}  // namespace
}  // namespace ring_test
}  // namespace sluice_test
