// The claim cursor on its own (detail/queue/claim_cursor.hpp): claims under a
// limit, the consumer's releases, runs of claims, Close and Depth, driven
// from one thread as a producer and the consumer drive it. Every test runs
// with capacities 1, 2, 8 and 1,024, MPSC and SPSC, and starts a few
// positions before Position wraps (2^64, or 2^32 with 32-bit positions), so
// that every fill and every claimed position is computed across the wrap.
#include "sluice/detail/queue/claim_cursor.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <string>

namespace sluice_test {
namespace claim_cursor_test {
namespace {

using sluice::Position;
using sluice::ProducerModel;
using sluice::detail::ClaimCursor;

constexpr Position kMaxPosition = std::numeric_limits<Position>::max();

template <std::size_t kCapacityValue, ProducerModel kModelValue>
struct Config {
  static constexpr std::size_t kCapacity = kCapacityValue;
  static constexpr ProducerModel kModel = kModelValue;
};

using Configs =
    ::testing::Types<Config<1, ProducerModel::kMulti>, Config<2, ProducerModel::kMulti>,
                     Config<8, ProducerModel::kMulti>, Config<1024, ProducerModel::kMulti>,
                     Config<1, ProducerModel::kSingle>, Config<2, ProducerModel::kSingle>,
                     Config<8, ProducerModel::kSingle>, Config<1024, ProducerModel::kSingle>>;

class ConfigNames {
 public:
  template <typename C>
  static std::string GetName(int) {
    return std::string(C::kModel == ProducerModel::kMulti ? "Mpsc" : "Spsc") +
           std::to_string(C::kCapacity);
  }
};

template <typename C>
class ClaimCursorTest : public ::testing::Test {
 protected:
  static constexpr Position kCapacity = C::kCapacity;
  using Cursor = ClaimCursor<C::kCapacity, C::kModel>;

  // Positions before the wrap at which every test starts: half the capacity
  // (at least one), so a fill to the capacity straddles zero.
  static constexpr Position kFirst = kMaxPosition - (kCapacity + 1) / 2 + 1;

  // One claim taken as a producer takes it (an SPSC claim is taken by
  // Commit, which the ring calls at its publish).
  static bool Claim(Cursor& cursor, Position limit, Position* claimed) {
    if (!cursor.TryClaim(limit, claimed)) return false;
    cursor.Commit(*claimed);
    return true;
  }
  static void CommitRun(Cursor& cursor, Position first, Position count) {
    for (Position i = 0; i < count; ++i) cursor.Commit(first + i);
  }
};

TYPED_TEST_SUITE(ClaimCursorTest, Configs, ConfigNames);

TYPED_TEST(ClaimCursorTest, ClaimsAreConsecutiveAndRefusedExactlyAtTheLimit) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  for (Position limit : {Position{0}, Position{1}, kCapacity / 2, kCapacity - 1, kCapacity}) {
    typename TestFixture::Cursor cursor(TestFixture::kFirst);
    Position expected = TestFixture::kFirst;
    for (Position i = 0; i < limit; ++i) {
      ASSERT_EQ(cursor.Depth(), i);
      Position claimed = 0;
      ASSERT_TRUE(TestFixture::Claim(cursor, limit, &claimed)) << "limit " << limit << ", " << i;
      EXPECT_EQ(claimed, expected++);
    }
    EXPECT_EQ(cursor.Depth(), limit);
    Position untouched = 12345;
    EXPECT_FALSE(cursor.TryClaim(limit, &untouched)) << "limit " << limit;
    EXPECT_EQ(untouched, Position{12345}) << "a refusal writes no position";
    EXPECT_FALSE(cursor.TryClaim(limit, &untouched)) << "a refusal changes nothing";
    EXPECT_EQ(cursor.ClaimedTail(), expected);
    EXPECT_EQ(cursor.Depth(), limit);
  }
}

TYPED_TEST(ClaimCursorTest, EachReleaseAdmitsExactlyOneMoreAcrossTheWrap) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  typename TestFixture::Cursor cursor(TestFixture::kFirst);
  Position claimed = 0;
  for (Position i = 0; i < kCapacity; ++i)
    ASSERT_TRUE(TestFixture::Claim(cursor, kCapacity, &claimed));
  bool crossed_zero = false;
  // Three laps at the capacity: the producer's cached consumer position is
  // stale at every refusal, so each admission needs the refresh.
  for (Position lap = 0; lap < 3 * kCapacity; ++lap) {
    ASSERT_FALSE(cursor.TryClaim(kCapacity, &claimed)) << "lap " << lap;
    const Position released_before = cursor.Released();
    EXPECT_EQ(cursor.ConsumerPosition(), released_before);
    cursor.Release();
    EXPECT_EQ(cursor.Released(), released_before + 1);
    EXPECT_EQ(cursor.Depth(), kCapacity - 1);
    ASSERT_TRUE(TestFixture::Claim(cursor, kCapacity, &claimed)) << "lap " << lap;
    EXPECT_EQ(claimed, TestFixture::kFirst + kCapacity + lap);
    crossed_zero = crossed_zero || claimed == 0 || released_before == 0;
    EXPECT_EQ(cursor.Depth(), kCapacity);
  }
  EXPECT_TRUE(crossed_zero) << "the test must cross the wrap";
  for (Position i = 0; i < kCapacity; ++i) cursor.Release();
  EXPECT_EQ(cursor.Depth(), Position{0});
  EXPECT_EQ(cursor.Released(), cursor.ClaimedTail());
}

TYPED_TEST(ClaimCursorTest, ARunOfExactlyNIsAllOrNothingAndCrossesTheWrap) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  // The run starts before the wrap and ends after it.
  typename TestFixture::Cursor cursor(kMaxPosition - (kCapacity - 1) / 2);
  Position first = 0;
  ASSERT_TRUE(cursor.TryClaimExactly(kCapacity, kCapacity, &first)) << "the whole capacity";
  EXPECT_EQ(first, kMaxPosition - (kCapacity - 1) / 2);
  TestFixture::CommitRun(cursor, first, kCapacity);
  EXPECT_EQ(cursor.ClaimedTail(), static_cast<Position>(first + kCapacity));
  EXPECT_EQ(cursor.Depth(), kCapacity);
  Position untouched = 7;
  EXPECT_FALSE(cursor.TryClaimExactly(kCapacity, 1, &untouched));
  EXPECT_EQ(untouched, Position{7});
  // Room for one less than the run: none of it is claimed.
  if (kCapacity >= 2) {
    cursor.Release();
    EXPECT_FALSE(cursor.TryClaimExactly(kCapacity, 2, &untouched));
    EXPECT_EQ(cursor.Depth(), kCapacity - 1) << "a refused run claims nothing";
    cursor.Release();
    ASSERT_TRUE(cursor.TryClaimExactly(kCapacity, 2, &first));
    EXPECT_EQ(first, static_cast<Position>(kMaxPosition - (kCapacity - 1) / 2 + kCapacity));
    TestFixture::CommitRun(cursor, first, 2);
    EXPECT_EQ(cursor.Depth(), kCapacity);
  }
  // Against a limit below the capacity: fill + count > limit refuses.
  if (kCapacity >= 2) {
    typename TestFixture::Cursor other(TestFixture::kFirst);
    const Position limit = kCapacity / 2 + 1;
    ASSERT_TRUE(other.TryClaimExactly(limit, limit - 1, &first));
    TestFixture::CommitRun(other, first, limit - 1);
    EXPECT_FALSE(other.TryClaimExactly(limit, 2, &untouched));
    EXPECT_EQ(other.Depth(), limit - 1);
    ASSERT_TRUE(other.TryClaimExactly(limit, 1, &first));
    EXPECT_EQ(first, static_cast<Position>(TestFixture::kFirst + limit - 1));
  }
}

TYPED_TEST(ClaimCursorTest, ARunOfUpToNTakesWhatFitsAcrossTheWrap) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  typename TestFixture::Cursor cursor(TestFixture::kFirst);
  Position first = 0;
  EXPECT_EQ(cursor.TryClaimUpTo(kCapacity, 0, &first), Position{0}) << "nothing wanted";
  EXPECT_EQ(cursor.ClaimedTail(), TestFixture::kFirst);
  // Wanting more than the capacity: the run stops at the limit.
  const Position taken = cursor.TryClaimUpTo(kCapacity, kCapacity + 5, &first);
  ASSERT_EQ(taken, kCapacity);
  EXPECT_EQ(first, TestFixture::kFirst);
  TestFixture::CommitRun(cursor, first, taken);
  EXPECT_EQ(cursor.Depth(), kCapacity);
  Position untouched = 9;
  EXPECT_EQ(cursor.TryClaimUpTo(kCapacity, 1, &untouched), Position{0}) << "at the limit";
  EXPECT_EQ(untouched, Position{9});
  // Freed positions: the run takes exactly them, even with the producer's
  // cached consumer position stale.
  const Position freed = (kCapacity + 1) / 2;
  for (Position i = 0; i < freed; ++i) cursor.Release();
  const Position again = cursor.TryClaimUpTo(kCapacity, kCapacity, &first);
  EXPECT_EQ(again, freed);
  EXPECT_EQ(first, static_cast<Position>(TestFixture::kFirst + kCapacity));
  TestFixture::CommitRun(cursor, first, again);
  EXPECT_EQ(cursor.Depth(), kCapacity);
  // A limit of 0 admits nothing, however much room there is.
  typename TestFixture::Cursor empty(TestFixture::kFirst);
  EXPECT_EQ(empty.TryClaimUpTo(0, 3, &untouched), Position{0});
  Position claimed = 0;
  EXPECT_FALSE(empty.TryClaim(0, &claimed));
}

TYPED_TEST(ClaimCursorTest, CloseRefusesEveryLaterClaimAndKeepsTheDepth) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  typename TestFixture::Cursor cursor(TestFixture::kFirst);
  Position claimed = 0;
  const Position held = (kCapacity + 1) / 2;
  for (Position i = 0; i < held; ++i) ASSERT_TRUE(TestFixture::Claim(cursor, kCapacity, &claimed));
  EXPECT_FALSE(cursor.IsClosed());
  const Position closed_tail = cursor.Close();
  EXPECT_EQ(closed_tail, static_cast<Position>(TestFixture::kFirst + held));
  EXPECT_TRUE(cursor.IsClosed());
  EXPECT_EQ(cursor.Depth(), held) << "the true depth survives the jump";
  EXPECT_EQ(cursor.Close(), closed_tail) << "Close is idempotent";
  // The consumer drains what was claimed; no limit admits anything again.
  for (Position i = 0; i < held; ++i) cursor.Release();
  EXPECT_EQ(cursor.Depth(), Position{0});
  EXPECT_EQ(cursor.Released(), closed_tail);
  Position untouched = 3;
  EXPECT_FALSE(cursor.TryClaim(kCapacity, &untouched));
  EXPECT_FALSE(cursor.TryClaimExactly(kCapacity, 1, &untouched));
  EXPECT_EQ(cursor.TryClaimUpTo(kCapacity, kCapacity, &untouched), Position{0});
  EXPECT_EQ(untouched, Position{3});
  EXPECT_TRUE(cursor.IsClosed());
  EXPECT_EQ(cursor.Close(), closed_tail) << "still the same tail once drained";
  EXPECT_EQ(cursor.Depth(), Position{0});
}

TYPED_TEST(ClaimCursorTest, AFullCursorClosesAndAnEmptyOneToo) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  typename TestFixture::Cursor empty(kMaxPosition);
  EXPECT_EQ(empty.Close(), kMaxPosition);
  EXPECT_TRUE(empty.IsClosed());
  EXPECT_EQ(empty.Depth(), Position{0});
  typename TestFixture::Cursor full(TestFixture::kFirst);
  Position claimed = 0;
  for (Position i = 0; i < kCapacity; ++i)
    ASSERT_TRUE(TestFixture::Claim(full, kCapacity, &claimed));
  EXPECT_EQ(full.Close(), static_cast<Position>(TestFixture::kFirst + kCapacity));
  EXPECT_TRUE(full.IsClosed());
  EXPECT_EQ(full.Depth(), kCapacity);
}

TYPED_TEST(ClaimCursorTest, TakingOverTheConsumerFinishesItsRelease) {
  constexpr Position kCapacity = TestFixture::kCapacity;
  typename TestFixture::Cursor cursor(TestFixture::kFirst);
  Position claimed = 0;
  for (Position i = 0; i < kCapacity; ++i)
    ASSERT_TRUE(TestFixture::Claim(cursor, kCapacity, &claimed));
  // The new consumer has consumed everything up to the tail.
  cursor.TakeOverConsumer(cursor.ClaimedTail());
  EXPECT_EQ(cursor.ConsumerPosition(), cursor.ClaimedTail());
  EXPECT_EQ(cursor.Depth(), Position{0});
  ASSERT_TRUE(TestFixture::Claim(cursor, kCapacity, &claimed));
  EXPECT_EQ(claimed, static_cast<Position>(TestFixture::kFirst + kCapacity));
}

// The largest capacity a ring allows (a quarter of the position range: 2^30
// slots with 32-bit positions, 2^62 with 64), where the cursor is all that
// is made (a bus that large would need gigabytes of slots). A queue filled to
// it is open, Close moves it, and nothing is claimed after the consumer took
// everything. (When the line between an open and a closed tail was half the
// position range, a full queue of this capacity read as closed: Close moved
// nothing and claims were admitted again once it had room.)
template <ProducerModel kModel>
void AFullQueueOfTheLargestCapacityReadsAsOpenAndCloses() {
  constexpr unsigned kBits = SLUICE_ATOMIC_BITS < sizeof(std::size_t) * 8
                                 ? SLUICE_ATOMIC_BITS
                                 : static_cast<unsigned>(sizeof(std::size_t) * 8);
  constexpr std::size_t kLargest = std::size_t{1} << (kBits - 2);
  // Starts before the wrap, so the fill straddles zero.
  constexpr Position kStart = kMaxPosition - Position{kLargest / 2} + 1;
  ClaimCursor<kLargest, kModel> cursor(kStart);
  Position first = 0;
  ASSERT_EQ(cursor.TryClaimUpTo(kLargest, kLargest, &first), Position{kLargest});
  ASSERT_EQ(first, kStart);
  cursor.Commit(static_cast<Position>(first + kLargest - 1));
  EXPECT_FALSE(cursor.IsClosed()) << "a full queue is open";
  EXPECT_EQ(cursor.Depth(), Position{kLargest});
  Position untouched = 0;
  EXPECT_FALSE(cursor.TryClaim(kLargest, &untouched)) << "full";
  const Position closed_tail = cursor.Close();
  EXPECT_EQ(closed_tail, static_cast<Position>(kStart + kLargest));
  EXPECT_TRUE(cursor.IsClosed());
  EXPECT_EQ(cursor.Depth(), Position{kLargest}) << "the true depth survives the jump";
  cursor.ReleaseRun(kLargest);
  EXPECT_EQ(cursor.Depth(), Position{0});
  EXPECT_TRUE(cursor.IsClosed());
  EXPECT_FALSE(cursor.TryClaim(kLargest, &untouched)) << "closed: room admits nothing";
  EXPECT_EQ(cursor.TryClaimUpTo(kLargest, 1, &untouched), Position{0});
  EXPECT_EQ(cursor.Close(), closed_tail) << "Close is idempotent";
}

TEST(ClaimCursorLargestCapacityTest, AFullMpscQueueReadsAsOpenAndCloses) {
  AFullQueueOfTheLargestCapacityReadsAsOpenAndCloses<ProducerModel::kMulti>();
}

TEST(ClaimCursorLargestCapacityTest, AFullSpscQueueReadsAsOpenAndCloses) {
  AFullQueueOfTheLargestCapacityReadsAsOpenAndCloses<ProducerModel::kSingle>();
}

}  // namespace
}  // namespace claim_cursor_test
}  // namespace sluice_test
