// The laned queue on its own (detail/queue/producer_lanes.hpp, LanedQueue): the
// shared queue plus one single-producer queue per lane, driven from one
// thread as the bus drives it (a lane publish: BeginLanePublish, claim in
// the lane's queue, construct, Publish, EndLanePublish). Asserted: lanes
// taken and handed back, the holder shown under its name only while it holds
// the lane, the exact merge sequence (runs of the burst in turns; the
// highest priority across sources, held by a higher claim on its way in the
// shared queue), a lane's own limit, and the close handshake (SYNC POINT
// (L)): a publish begun after Close is refused, and one begun before it
// keeps the lanes from counting as drained until it ends. Every queue
// starts a few positions before Position wraps.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "sluice/detail/observe/statistics_counters.hpp"
#include "sluice/detail/queue/message_queue.hpp"
#include "sluice/detail/queue/producer_lanes.hpp"
#include "sluice/heavy_fence.hpp"

namespace sluice_test {
namespace laned_queue_test {
namespace {

using sluice::DeliveryOrder;
using sluice::MessagePriority;
using sluice::Position;
using sluice::ProducerModel;
using sluice::SlotStorage;
using sluice::detail::FifoQueue;
using sluice::detail::LanedQueue;
using sluice::detail::PriorityQueue;

constexpr Position kMaxPosition = std::numeric_limits<Position>::max();
constexpr Position kShared = 16;
constexpr Position kLaneSlots = 4;
constexpr std::uint32_t kBurst = 3;
constexpr std::uint32_t kInterval = 4;

// A message: its source ('S' shared, 'A' lane 0, 'B' lane 1) and number.
struct Item {
  char source;
  int number;
};

using LaneStatistics = sluice::detail::StatisticsCounters<true, true>;
using FifoLaned =
    LanedQueue<Item, FifoQueue<Item, kShared, ProducerModel::kMulti, SlotStorage::kInline>,
               FifoQueue<Item, kLaneSlots, ProducerModel::kSingle, SlotStorage::kInline>, 2,
               DeliveryOrder::kFifo, kBurst, kInterval, sluice::NoHeavyFence, LaneStatistics>;
// Priority order with the default check interval, 1: the merge looks across
// the sources before every message.
template <ProducerModel kModel, std::size_t kSlots>
using Ordered = PriorityQueue<Item, kSlots, kModel, SlotStorage::kInline, 1, 0>;
using OrderedLaned =
    LanedQueue<Item, Ordered<ProducerModel::kMulti, kShared>,
               Ordered<ProducerModel::kSingle, kLaneSlots>, 2, DeliveryOrder::kPriority, kBurst, 1,
               sluice::NoHeavyFence, LaneStatistics>;

template <typename Laned>
class Driver {
 public:
  explicit Driver(Position first) : laned_(first) {}

  bool PushShared(int number, MessagePriority priority = MessagePriority::LOW) {
    typename Laned::Claim claim{};
    if (!laned_.TryClaim(kShared, priority, &claim)) return false;
    new (laned_.Storage(claim)) Item{'S', number};
    laned_.Publish(claim);
    return true;
  }
  // A whole lane publish, as the bus makes it; false when refused (closed,
  // or the lane's fill at `limit`).
  bool PushLane(std::uint32_t lane, int number, MessagePriority priority = MessagePriority::LOW,
                Position limit = kLaneSlots) {
    auto& state = laned_.LaneAt(lane);
    if (!laned_.BeginLanePublish(state)) return false;
    typename decltype(state.queue)::Claim claim{};
    const bool admitted = state.queue.TryClaim(limit, priority, &claim);
    if (admitted) {
      new (state.queue.Storage(claim)) Item{static_cast<char>('A' + lane), number};
      state.queue.Publish(claim);
    }
    Laned::EndLanePublish(state);
    return admitted;
  }
  // The next message as "A3", or "" when TryFront has none.
  std::string Pop() {
    Item* item = laned_.TryFront();
    if (item == nullptr) return "";
    std::string text = item->source + std::to_string(item->number);
    laned_.PopFront();
    return text;
  }
  std::string Drain() {
    std::string all;
    for (std::string one = Pop(); !one.empty(); one = Pop()) all += (all.empty() ? "" : " ") + one;
    return all;
  }
  std::string HolderName(std::uint32_t lane) {
    sluice::ProducerStatisticsSnapshot snapshot{};
    if (!laned_.ReadHolder(lane, &snapshot)) return "<none>";
    EXPECT_EQ(snapshot.lane, lane + 1);
    return snapshot.name;
  }
  Laned& laned() { return laned_; }

 private:
  Laned laned_;
};

TEST(LanedQueueTest, LanesAreTakenUntilNoneIsFreeAndAHandedBackLaneIsTakenAgain) {
  Driver<FifoLaned> q(0);
  EXPECT_EQ(q.laned().LanesTaken(), 0u);
  EXPECT_EQ(q.HolderName(0), "<none>");
  EXPECT_EQ(q.laned().Register("a"), 0);
  EXPECT_EQ(q.laned().Register("b"), 1);
  EXPECT_EQ(q.laned().Register("c"), -1) << "every lane is taken";
  EXPECT_EQ(q.laned().LanesTaken(), 2u);
  EXPECT_EQ(q.HolderName(0), "a");
  EXPECT_EQ(q.HolderName(1), "b");
  q.laned().Unregister(0);
  EXPECT_EQ(q.HolderName(0), "<none>") << "a vacant lane shows no holder";
  EXPECT_EQ(q.laned().LanesTaken(), 1u);
  EXPECT_EQ(q.laned().Register(nullptr), 0) << "the lowest free lane";
  EXPECT_EQ(q.HolderName(0), "");
  q.laned().Unregister(1);
  EXPECT_EQ(q.laned().Register("d"), 1);
  EXPECT_EQ(q.HolderName(1), "d");
}

TEST(LanedQueueTest, FifoTakesRunsOfTheBurstInTurnsAcrossTheWrap) {
  Driver<FifoLaned> q(kMaxPosition - 2);
  ASSERT_EQ(q.laned().Register("a"), 0);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(q.PushShared(i));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.PushLane(0, i));
  // A run of 3 from the lane, then from the shared queue, in turns; a source
  // that runs dry mid-run hands over at once.
  EXPECT_EQ(q.Drain(), "A0 A1 A2 S0 S1 S2 A3 S3 S4 S5 S6");
  EXPECT_EQ(q.laned().Depth(), Position{0});
  // Three sources: the turns go round all three.
  ASSERT_EQ(q.laned().Register("b"), 1);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(q.PushShared(10 + i));
    ASSERT_TRUE(q.PushLane(0, 20 + i));
    ASSERT_TRUE(q.PushLane(1, 30 + i));
  }
  EXPECT_EQ(q.laned().Depth(), Position{12});
  const std::string merged = q.Drain();
  EXPECT_EQ(merged, "A20 A21 A22 B30 B31 B32 S10 S11 S12 A23 B33 S13") << merged;
}

TEST(LanedQueueTest, ALaneAdmitsUpToItsOwnLimitAndTheSharedQueueGoesOn) {
  Driver<FifoLaned> q(kMaxPosition);
  ASSERT_EQ(q.laned().Register("a"), 0);
  EXPECT_FALSE(q.PushLane(0, 0, MessagePriority::LOW, 0)) << "a limit of 0 admits nothing";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.PushLane(0, i, MessagePriority::LOW, kLaneSlots));
  EXPECT_FALSE(q.PushLane(0, 4, MessagePriority::LOW, kLaneSlots)) << "the lane is full";
  EXPECT_EQ(q.laned().LaneAt(0).publishing.load(), 0u) << "a refused publish ends too";
  ASSERT_TRUE(q.PushShared(0)) << "the shared queue has its own fill";
  EXPECT_EQ(q.laned().SharedDepth(), Position{1});
  EXPECT_EQ(q.laned().Depth(), Position{5});
  EXPECT_EQ(q.Pop(), "A0");
  ASSERT_TRUE(q.PushLane(0, 5, MessagePriority::LOW, kLaneSlots)) << "one popped, one admitted";
  EXPECT_FALSE(q.PushLane(0, 6, MessagePriority::LOW, kLaneSlots));
}

TEST(LanedQueueTest, APublishBegunAfterCloseIsRefusedAndOneOnItsWayKeepsTheLanesUndrained) {
  Driver<FifoLaned> q(kMaxPosition - 1);
  ASSERT_EQ(q.laned().Register("a"), 0);
  ASSERT_EQ(q.laned().Register("b"), 1);
  ASSERT_TRUE(q.PushShared(0));
  ASSERT_TRUE(q.PushLane(0, 0));
  // Lane B's producer is inside a publish, admitted before Close.
  auto& b = q.laned().LaneAt(1);
  ASSERT_TRUE(q.laned().BeginLanePublish(b));
  const Position tail = q.laned().Close();
  EXPECT_EQ(tail, kMaxPosition) << "the shared queue's closed tail";
  EXPECT_FALSE(q.PushShared(1)) << "the shared queue is closed";
  EXPECT_FALSE(q.PushLane(0, 1)) << "a lane publish begun after Close is refused";
  EXPECT_EQ(q.laned().LaneAt(0).publishing.load(), 0u) << "and leaves no publish on its way";
  EXPECT_FALSE(q.laned().LanesDrained());
  EXPECT_EQ(q.Drain(), "A0 S0");
  // Nothing queued anywhere, but B's publish is still on its way.
  EXPECT_EQ(q.laned().Depth(), Position{0});
  EXPECT_FALSE(q.laned().LanesDrained()) << "a publish on its way is not drained";
  typename decltype(b.queue)::Claim claim{};
  ASSERT_TRUE(b.queue.TryClaim(kLaneSlots, MessagePriority::LOW, &claim));
  new (b.queue.Storage(claim)) Item{'B', 0};
  b.queue.Publish(claim);
  FifoLaned::EndLanePublish(b);
  EXPECT_FALSE(q.laned().LanesDrained()) << "its message is queued";
  EXPECT_EQ(q.Drain(), "B0");
  EXPECT_TRUE(q.laned().LanesDrained());
  EXPECT_EQ(q.laned().Released(), tail);
}

TEST(LanedQueueTest, OrderedTakesTheHighestPriorityAcrossSourcesUnlessTheSharedQueueHoldsIt) {
  Driver<OrderedLaned> q(kMaxPosition - 1);
  ASSERT_EQ(q.laned().Register("a"), 0);
  ASSERT_TRUE(q.PushShared(0, MessagePriority::LOW));
  ASSERT_TRUE(q.PushShared(1, MessagePriority::MEDIUM));
  ASSERT_TRUE(q.PushLane(0, 2, MessagePriority::HIGH));
  ASSERT_TRUE(q.PushLane(0, 3, MessagePriority::LOW));
  // Ties in turn, starting after the source taken last.
  EXPECT_EQ(q.Drain(), "A2 S1 A3 S0");
  // A HIGH claimed in the shared queue and not yet published holds the
  // lane's MEDIUM (it may have been admitted first).
  ASSERT_TRUE(q.PushShared(4, MessagePriority::LOW));
  typename OrderedLaned::Claim high{};
  ASSERT_TRUE(q.laned().TryClaim(kShared, MessagePriority::HIGH, &high));
  ASSERT_TRUE(q.PushLane(0, 5, MessagePriority::MEDIUM));
  EXPECT_EQ(q.Pop(), "") << "HIGH on its way in the shared queue";
  new (q.laned().Storage(high)) Item{'S', 6};
  q.laned().Publish(high);
  EXPECT_EQ(q.Drain(), "S6 A5 S4");
}

}  // namespace
}  // namespace laned_queue_test
}  // namespace sluice_test
