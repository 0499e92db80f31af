// The priority-ordered queue on its own (detail/queue/message_queue.hpp,
// PriorityQueue): one fill cursor over three rings, driven from one thread
// as producers and the consumer drive it (claim, construct at Storage,
// Publish; TryFront, PopFront). What is asserted is the exact order of
// dispatch: HIGH first, FIFO within a priority, the look above after a run
// of the check interval, a starved priority served after exactly the
// starvation limit, a higher claim not yet published holding the rings
// below it (MPSC only), the fill limit over the whole queue, and all of it
// across the wrap of Position.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "sluice/detail/queue/message_queue.hpp"

namespace sluice_test {
namespace priority_queue_test {
namespace {

using sluice::MessagePriority;
using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;
using sluice::detail::PriorityQueue;

constexpr Position kMaxPosition = std::numeric_limits<Position>::max();
constexpr MessagePriority kLow = MessagePriority::LOW;
constexpr MessagePriority kMedium = MessagePriority::MEDIUM;
constexpr MessagePriority kHigh = MessagePriority::HIGH;

// A message: its priority's letter and its number within the test.
struct Item {
  char priority;
  int number;
};

char Letter(MessagePriority priority) {
  return priority == kHigh ? 'H' : priority == kMedium ? 'M' : 'L';
}

template <typename Queue, Position kCapacity = 16>
class Driver {
 public:
  explicit Driver(Position first) : queue_(first) {}

  // Claims, constructs and publishes one message; false when refused.
  bool Push(MessagePriority priority, int number, Position limit = kAny) {
    typename Queue::Claim claim{};
    if (!queue_.TryClaim(limit == kAny ? Capacity() : limit, priority, &claim)) return false;
    new (queue_.Storage(claim)) Item{Letter(priority), number};
    ids_.push_back(Queue::MessageId(claim));
    queue_.Publish(claim);
    return true;
  }
  // Claims without publishing (a producer preempted mid-publish).
  typename Queue::Claim ClaimOnly(MessagePriority priority) {
    typename Queue::Claim claim{};
    EXPECT_TRUE(queue_.TryClaim(Capacity(), priority, &claim));
    return claim;
  }
  void Finish(const typename Queue::Claim& claim, int number) {
    new (queue_.Storage(claim)) Item{Letter(static_cast<MessagePriority>(claim.ring)), number};
    queue_.Publish(claim);
  }
  // The next message as "H3", or "" when TryFront has none.
  std::string Pop() {
    Item* item = queue_.TryFront();
    if (item == nullptr) return "";
    std::string text = item->priority + std::to_string(item->number);
    queue_.PopFront();
    return text;
  }
  // Everything TryFront gives until it gives nothing, space-separated.
  std::string Drain() {
    std::string all;
    for (std::string one = Pop(); !one.empty(); one = Pop()) all += (all.empty() ? "" : " ") + one;
    return all;
  }

  Queue& queue() { return queue_; }
  const std::vector<Position>& ids() const { return ids_; }
  static constexpr Position kAny = ~Position{0};
  static Position Capacity() { return kCapacity; }

 private:
  Queue queue_;
  std::vector<Position> ids_;
};

// Capacity 16, check interval 4, no starvation limit.
template <ProducerModel kModel, std::uint32_t kInterval = 4, std::uint32_t kStarvation = 0,
          std::size_t kCapacity = 16>
using Queue = PriorityQueue<Item, kCapacity, kModel, SlotStorage::kInline, kInterval, kStarvation>;

template <typename Model>
class PriorityQueueTest : public ::testing::Test {};
template <ProducerModel kModel>
struct ModelIs {
  static constexpr ProducerModel kValue = kModel;
};
using Models = ::testing::Types<ModelIs<ProducerModel::kMulti>, ModelIs<ProducerModel::kSingle>>;
class ModelNames {
 public:
  template <typename M>
  static std::string GetName(int) {
    return M::kValue == ProducerModel::kMulti ? "Mpsc" : "Spsc";
  }
};
TYPED_TEST_SUITE(PriorityQueueTest, Models, ModelNames);

TYPED_TEST(PriorityQueueTest, HighThenMediumThenLowEachInItsOwnOrderAcrossTheWrap) {
  Driver<Queue<TypeParam::kValue>> q(kMaxPosition - 4);
  // Interleaved, so admission order is no priority's order.
  const MessagePriority order[] = {kLow, kHigh, kMedium, kLow, kHigh, kLow, kMedium, kHigh};
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.Push(order[i], i));
  EXPECT_EQ(q.queue().Depth(), Position{8});
  EXPECT_EQ(q.Drain(), "H1 H4 H7 M2 M6 L0 L3 L5");
  EXPECT_EQ(q.queue().Depth(), Position{0});
  // Ids are the admission order, and cross zero.
  ASSERT_EQ(q.ids().size(), 8u);
  for (std::size_t i = 0; i < 8; ++i)
    EXPECT_EQ(q.ids()[i], static_cast<Position>(kMaxPosition - 4 + i));
  // A second lap over the same slots: the same order again.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.Push(order[i], 10 + i));
  EXPECT_EQ(q.Drain(), "H11 H14 H17 M12 M16 L10 L13 L15");
}

TYPED_TEST(PriorityQueueTest, AHighPublishedDuringALowRunIsTakenWhenTheRunOfTheIntervalEnds) {
  Driver<Queue<TypeParam::kValue, 4>> q(0);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.Push(kLow, i));
  EXPECT_EQ(q.Pop(), "L0");  // starts a run of 4 on LOW
  ASSERT_TRUE(q.Push(kHigh, 100));
  // The rest of the run, then the look above finds HIGH.
  EXPECT_EQ(q.Pop(), "L1");
  EXPECT_EQ(q.Pop(), "L2");
  EXPECT_EQ(q.Pop(), "L3");
  EXPECT_EQ(q.Pop(), "H100");
  // A MEDIUM published while on LOW again is found by the look above too.
  EXPECT_EQ(q.Pop(), "L4");
  ASSERT_TRUE(q.Push(kMedium, 200));
  EXPECT_EQ(q.Drain(), "L5 L6 L7 M200 L8 L9");
}

TYPED_TEST(PriorityQueueTest, AnIntervalOfOneLooksAboveAfterEveryMessage) {
  Driver<Queue<TypeParam::kValue, 1>> q(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(kLow, i));
  EXPECT_EQ(q.Pop(), "L0");
  ASSERT_TRUE(q.Push(kHigh, 9));
  EXPECT_EQ(q.Drain(), "H9 L1 L2");
}

TYPED_TEST(PriorityQueueTest, AStarvedLowIsServedAfterExactlyTheLimitOfHighs) {
  constexpr std::uint32_t kLimit = 3;
  Driver<Queue<TypeParam::kValue, 1, kLimit>> q(kMaxPosition - 2);
  ASSERT_TRUE(q.Push(kLow, 0));
  ASSERT_TRUE(q.Push(kLow, 1));
  int next_high = 100;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(kHigh, next_high++));
  // HIGH keeps coming: one more published after every dispatch.
  std::string seen;
  for (int i = 0; i < 10; ++i) {
    seen += (seen.empty() ? "" : " ") + q.Pop();
    ASSERT_TRUE(q.Push(kHigh, next_high++));
  }
  EXPECT_EQ(seen, "H100 H101 H102 L0 H103 H104 H105 L1 H106 H107");
}

TYPED_TEST(PriorityQueueTest, StarvedLowAndMediumAreServedLowestFirst) {
  Driver<Queue<TypeParam::kValue, 1, 2>> q(0);
  ASSERT_TRUE(q.Push(kLow, 0));
  ASSERT_TRUE(q.Push(kMedium, 1));
  int next_high = 100;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(kHigh, next_high++));
  std::string seen;
  for (int i = 0; i < 6; ++i) {
    seen += (seen.empty() ? "" : " ") + q.Pop();
    ASSERT_TRUE(q.Push(kHigh, next_high++));
  }
  // Both starved after two HIGHs; a starved run passes no one over, so
  // MEDIUM is served next rather than HIGH.
  EXPECT_EQ(seen, "H100 H101 L0 M1 H102 H103");
}

TYPED_TEST(PriorityQueueTest, StrictPriorityStarvesLowWhileHighKeepsComing) {
  Driver<Queue<TypeParam::kValue, 1, 0>> q(0);
  ASSERT_TRUE(q.Push(kLow, 0));
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(q.Push(kHigh, i));
    ASSERT_EQ(q.Pop(), "H" + std::to_string(i));
  }
  EXPECT_EQ(q.Pop(), "L0");
}

TYPED_TEST(PriorityQueueTest, TheFillLimitCountsEveryPriorityAndRefusesAtTheLimit) {
  Driver<Queue<TypeParam::kValue>> q(kMaxPosition - 1);
  // A limit of 0 refuses every priority.
  for (MessagePriority p : {kLow, kMedium, kHigh}) EXPECT_FALSE(q.Push(p, 0, 0));
  // 5 LOW, then MEDIUM up to a limit of 9 counts those 5.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.Push(kLow, i, 5));
  EXPECT_FALSE(q.Push(kLow, 5, 5));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(kMedium, 10 + i, 9));
  EXPECT_FALSE(q.Push(kMedium, 14, 9));
  EXPECT_FALSE(q.Push(kHigh, 20, 9)) << "the limit is over the whole queue";
  // HIGH up to the capacity.
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(q.Push(kHigh, 20 + i, 16));
  EXPECT_FALSE(q.Push(kHigh, 27, 16));
  EXPECT_EQ(q.queue().Depth(), Position{16});
  // One dispatch frees exactly one admission, of any priority.
  EXPECT_EQ(q.Pop(), "H20");
  EXPECT_EQ(q.queue().Depth(), Position{15});
  ASSERT_TRUE(q.Push(kLow, 99, 16));
  EXPECT_FALSE(q.Push(kHigh, 98, 16));
  EXPECT_EQ(q.Drain(), "H21 H22 H23 H24 H25 H26 M10 M11 M12 M13 L0 L1 L2 L3 L4 L99");
}

TYPED_TEST(PriorityQueueTest, CapacityTwoFillsFromEachPriorityAndCloses) {
  Driver<Queue<TypeParam::kValue, 4, 0, 2>, 2> q(kMaxPosition);
  for (int lap = 0; lap < 6; ++lap) {
    ASSERT_TRUE(q.Push(kLow, lap, 2));
    ASSERT_TRUE(q.Push(kHigh, 10 + lap, 2));
    EXPECT_FALSE(q.Push(kMedium, 20, 2));
    EXPECT_EQ(q.Drain(), "H" + std::to_string(10 + lap) + " L" + std::to_string(lap));
  }
  ASSERT_TRUE(q.Push(kMedium, 30, 2));
  const Position tail = q.queue().Close();
  EXPECT_TRUE(q.queue().IsClosed());
  EXPECT_EQ(tail, static_cast<Position>(kMaxPosition + 13));
  EXPECT_FALSE(q.Push(kHigh, 31, 2)) << "closed";
  EXPECT_EQ(q.queue().Depth(), Position{1});
  EXPECT_EQ(q.Drain(), "M30");
  EXPECT_EQ(q.queue().Released(), tail);
}

TYPED_TEST(PriorityQueueTest, ARunKeepsItsOrderAndItsIdsAreConsecutive) {
  using Q = Queue<TypeParam::kValue>;
  Driver<Q> q(kMaxPosition - 1);
  ASSERT_TRUE(q.Push(kHigh, 0));
  typename Q::Run run{};
  const Position count = q.queue().TryClaimRun(16, kLow, 4, &run);
  ASSERT_EQ(count, Position{4});
  for (Position i = 0; i < count; ++i) {
    const auto claim = Q::InRun(run, i);
    EXPECT_EQ(Q::MessageId(claim), static_cast<Position>(kMaxPosition + i));
    q.Finish(claim, static_cast<int>(10 + i));
  }
  // Wanting more than the limit leaves: the run stops at it.
  EXPECT_EQ(q.queue().TryClaimRun(7, kMedium, 5, &run), Position{2});
  q.Finish(Q::InRun(run, 0), 20);
  q.Finish(Q::InRun(run, 1), 21);
  EXPECT_EQ(q.queue().TryClaimRun(7, kMedium, 1, &run), Position{0});
  EXPECT_EQ(q.Drain(), "H0 M20 M21 L10 L11 L12 L13");
}

// MPSC only: a claim of a higher priority not yet published holds every
// ring below it, as the message on its way may have been admitted before
// the lower ones were published.
TEST(PriorityQueueMpscTest, AnUnpublishedHighClaimHoldsTheRingsBelow) {
  Driver<Queue<ProducerModel::kMulti>> q(kMaxPosition - 1);
  ASSERT_TRUE(q.Push(kLow, 0));
  const auto high = q.ClaimOnly(kHigh);
  ASSERT_TRUE(q.Push(kMedium, 1));
  EXPECT_EQ(q.Pop(), "") << "HIGH is on its way: nothing below it is taken";
  EXPECT_EQ(q.Pop(), "");
  q.Finish(high, 2);
  EXPECT_EQ(q.Drain(), "H2 M1 L0");
  // A held MEDIUM holds LOW, not HIGH.
  ASSERT_TRUE(q.Push(kLow, 3));
  const auto medium = q.ClaimOnly(kMedium);
  ASSERT_TRUE(q.Push(kHigh, 4));
  EXPECT_EQ(q.Pop(), "H4");
  EXPECT_EQ(q.Pop(), "");
  q.Finish(medium, 5);
  EXPECT_EQ(q.Drain(), "M5 L3");
}

// SPSC: the one producer publishes in claim order, so its claim on its way
// never hides a publish that returned; the rings below are not held.
TEST(PriorityQueueSpscTest, AnUnpublishedHighClaimDoesNotHoldTheRingsBelow) {
  Driver<Queue<ProducerModel::kSingle>> q(kMaxPosition);
  ASSERT_TRUE(q.Push(kLow, 0));
  const auto high = q.ClaimOnly(kHigh);
  EXPECT_EQ(q.Pop(), "L0");
  EXPECT_EQ(q.Pop(), "");
  q.Finish(high, 1);
  EXPECT_EQ(q.Drain(), "H1");
}

}  // namespace
}  // namespace priority_queue_test
}  // namespace sluice_test
