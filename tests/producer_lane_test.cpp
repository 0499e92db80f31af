// Producer lanes on one thread: registration and reuse, per-lane admission,
// statistics and fill, the consumer's merge (round robin on the FIFO bus,
// priority order across lanes on the priority-ordered bus, as exact dispatch
// sequences), Close and IsDrained, the position wrap, payload lifetimes.
// The threaded tests are in producer_lane_concurrency_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/extras/membarrier_fence.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace producer_lane_test {
namespace {

using sluice::MessagePriority;

struct Item {
  std::uint32_t seq;
};
struct Counted {
  explicit Counted(int* live) noexcept : live(live) { ++*live; }
  Counted(const Counted& other) noexcept : live(other.live) { ++*live; }
  Counted(Counted&& other) noexcept : live(other.live) { ++*live; }
  Counted& operator=(const Counted&) = delete;
  Counted& operator=(Counted&&) = delete;
  ~Counted() { --*live; }
  int* live;
};
using Payload = std::variant<Item, Counted>;

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<3, 16, 2>;
};
struct OrderedLaneTraits : LaneTraits {
  using Delivery = sluice::PriorityDelivery<>;
};
struct InlineLaneTraits : LaneTraits {
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
};
struct MembarrierLaneTraits : OrderedLaneTraits {
  using Lanes = sluice::ProducerLanes<3, 16, 2, sluice::MembarrierHeavyFence>;
};
struct SingleCoreLaneTraits : LaneTraits {
  using Lanes = sluice::ProducerLanes<3, 16, 2, sluice::SingleCoreHeavyFence>;
};

template <typename Bus>
constexpr bool kOrdered = Bus::kDeliveryOrder == sluice::DeliveryOrder::kPriority;

// Dispatches up to `max` messages and returns them as "source:seq" labels,
// where the source is the header's lane (0: the shared queue) and a priority
// letter is prefixed on the priority-ordered bus ("H1:3").
template <typename Bus>
std::vector<std::string> Dispatch(Bus& bus, std::uint32_t max = Bus::Capacity()) {
  std::vector<std::string> out;
  bus.ProcessBatchWith(
      [&](const sluice::MessageEnvelope<Payload>& envelope) {
        std::string label;
        if (kOrdered<Bus>) label += "LMH"[static_cast<std::size_t>(envelope.header.priority)];
        label += std::to_string(envelope.header.lane) + ":";
        label += std::holds_alternative<Item>(envelope.payload)
                     ? std::to_string(std::get<Item>(envelope.payload).seq)
                     : std::string("c");
        out.push_back(label);
      },
      max);
  return out;
}

std::string Join(const std::vector<std::string>& labels) {
  std::string text;
  for (const std::string& label : labels) text += (text.empty() ? "" : " ") + label;
  return text;
}

template <typename Bus>
class ProducerLaneTest : public ::testing::Test {};
using LaneBuses = ::testing::Types<
    sluice::MpscBus<Payload, 64, LaneTraits>, sluice::SpscBus<Payload, 64, LaneTraits>,
    sluice::MpscBus<Payload, 64, OrderedLaneTraits>,
    sluice::SpscBus<Payload, 64, OrderedLaneTraits>, sluice::MpscBus<Payload, 64, InlineLaneTraits>,
    sluice::MpscBus<Payload, 64, MembarrierLaneTraits>,
    sluice::MpscBus<Payload, 64, SingleCoreLaneTraits>>;
TYPED_TEST_SUITE(ProducerLaneTest, LaneBuses, sluice_test::IndexNames);

TYPED_TEST(ProducerLaneTest, RegistersUpToTheMaximumThenRefusesWithAnInvalidProducer) {
  TypeParam bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  auto c = bus.RegisterProducer();
  auto d = bus.RegisterProducer();
  EXPECT_TRUE(a.IsValid() && b.IsValid() && c.IsValid());
  EXPECT_FALSE(d.IsValid());
  EXPECT_FALSE(static_cast<bool>(d));
  EXPECT_EQ(bus.RegisteredProducers(), 3u);
  // Distinct lanes, numbered from 1.
  EXPECT_NE(a.Lane(), b.Lane());
  EXPECT_NE(b.Lane(), c.Lane());
  EXPECT_NE(a.Lane(), c.Lane());
  EXPECT_EQ(d.Lane(), 0);
  // An invalid producer refuses and counts nothing anywhere.
  EXPECT_FALSE(d.Publish(Item{1}));
  EXPECT_FALSE(d.PublishWithPriority(Item{1}, 0, MessagePriority::HIGH));
  EXPECT_FALSE(d.PublishFast(Item{1}, 0, std::chrono::nanoseconds(5)));
  EXPECT_FALSE(d.template Emplace<Item>(0, MessagePriority::HIGH, Item{1}));
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.MessagesAttempted(), 0u);
  EXPECT_EQ(stats.messages_rejected, 0u);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TYPED_TEST(ProducerLaneTest, AnUnregisteredLaneIsReusedAndItsQueuedMessagesStillArrive) {
  TypeParam bus;
  std::uint16_t first_lane = 0;
  {
    auto producer = bus.RegisterProducer();
    first_lane = producer.Lane();
    ASSERT_TRUE(producer.Publish(Item{1}));
    ASSERT_TRUE(producer.Publish(Item{2}));
  }  // unregistered, two messages left in its lane
  EXPECT_EQ(bus.RegisteredProducers(), 0u);
  auto again = bus.RegisterProducer();
  ASSERT_TRUE(again.IsValid());
  EXPECT_EQ(again.Lane(), first_lane);  // the first free lane
  ASSERT_TRUE(again.Publish(Item{3}));
  const std::string lane = std::to_string(first_lane);
  const std::string m = kOrdered<TypeParam> ? "M" : "";
  EXPECT_EQ(Join(Dispatch(bus)), m + lane + ":1 " + m + lane + ":2 " + m + lane + ":3");
  again.Unregister();
  EXPECT_FALSE(again.IsValid());
  EXPECT_FALSE(again.Publish(Item{4}));
  EXPECT_EQ(bus.RegisteredProducers(), 0u);
}

TYPED_TEST(ProducerLaneTest, MovingAProducerMovesItsLaneAndAssignmentHandsTheOldOneBack) {
  TypeParam bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  const std::uint16_t lane_a = a.Lane();
  typename TypeParam::Producer moved(std::move(a));
  EXPECT_FALSE(a.IsValid());  // NOLINT(bugprone-use-after-move): moved from is invalid
  EXPECT_EQ(moved.Lane(), lane_a);
  EXPECT_EQ(bus.RegisteredProducers(), 2u);
  moved = std::move(b);  // lane_a handed back
  EXPECT_EQ(bus.RegisteredProducers(), 1u);
  auto c = bus.RegisterProducer();
  EXPECT_EQ(c.Lane(), lane_a);
  moved = std::move(moved);  // self-move keeps the lane
  EXPECT_TRUE(moved.IsValid());
  EXPECT_EQ(bus.RegisteredProducers(), 2u);
}

TYPED_TEST(ProducerLaneTest, HeadersNameTheLaneAndIdsCountPerLane) {
  TypeParam bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  ASSERT_TRUE(a.Publish(Item{0}, 11));
  ASSERT_TRUE(b.Publish(Item{1}, 22));
  ASSERT_TRUE(a.Publish(Item{2}, 11));
  ASSERT_TRUE(bus.Publish(Item{3}, 33));
  std::vector<sluice::MessageHeader> headers;
  bus.ProcessBatchWith(
      [&](const auto&, const sluice::MessageHeader& header) { headers.push_back(header); });
  ASSERT_EQ(headers.size(), 4u);
  for (const sluice::MessageHeader& h : headers) {
    if (h.sender_id == 11) {
      EXPECT_EQ(h.lane, a.Lane());
    } else if (h.sender_id == 22) {
      EXPECT_EQ(h.lane, b.Lane());
    } else {
      EXPECT_EQ(h.lane, 0);
    }
    EXPECT_NE(h.timestamp_ns, 0u);  // Publish stamps in FULL_FEATURED
  }
  // Per lane: ids 0, 1, ... in that lane's publish order.
  std::vector<std::uint64_t> ids_a;
  for (const sluice::MessageHeader& h : headers) {
    if (h.lane == a.Lane()) ids_a.push_back(h.msg_id);
  }
  EXPECT_EQ(ids_a, (std::vector<std::uint64_t>{0, 1}));
}

TYPED_TEST(ProducerLaneTest, AdmissionAppliesTheThresholdsToTheLanesOwnFill) {
  TypeParam bus;
  auto producer = bus.RegisterProducer();
  // 16 slots, thresholds 60/80/99 %: LOW below 10, MEDIUM below 13, HIGH
  // below 16 queued messages.
  std::uint32_t seq = 0;
  // The lane's level follows its admission: LOW is never refused at NORMAL.
  while (producer.GetBackpressureLevel() == sluice::BackpressureLevel::NORMAL) {
    ASSERT_TRUE(producer.PublishWithPriority(Item{seq++}, 0, MessagePriority::LOW));
  }
  EXPECT_EQ(seq, 10u);
  EXPECT_FALSE(producer.PublishWithPriority(Item{seq}, 0, MessagePriority::LOW));
  EXPECT_EQ(producer.GetBackpressureLevel(), sluice::BackpressureLevel::WARNING);
  while (producer.PublishWithPriority(Item{seq}, 0, MessagePriority::MEDIUM)) ++seq;
  EXPECT_EQ(seq, 13u);
  EXPECT_EQ(producer.GetBackpressureLevel(), sluice::BackpressureLevel::CRITICAL);
  while (producer.PublishWithPriority(Item{seq}, 0, MessagePriority::HIGH)) ++seq;
  EXPECT_EQ(seq, 16u);
  EXPECT_EQ(producer.QueueDepth(), 16u);
  EXPECT_EQ(producer.GetBackpressureLevel(), sluice::BackpressureLevel::FULL);
  // The lane is full; the shared queue and other lanes are not.
  EXPECT_TRUE(bus.PublishWithPriority(Item{100}, 0, MessagePriority::LOW));
  auto other = bus.RegisterProducer();
  EXPECT_TRUE(other.PublishWithPriority(Item{101}, 0, MessagePriority::LOW));
  EXPECT_EQ(bus.QueueDepth(), 18u);
  // The bus's level covers every source admission judges: the full lane,
  // though the shared queue holds 1 of 64.
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::FULL);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 100.0);
  const sluice::BusStatisticsSnapshot lane = producer.GetStatistics();
  EXPECT_EQ(lane.low_priority_published, 10u);
  EXPECT_EQ(lane.medium_priority_published, 3u);
  EXPECT_EQ(lane.high_priority_published, 3u);
  EXPECT_EQ(lane.low_priority_dropped, 1u);
  EXPECT_EQ(lane.medium_priority_dropped, 1u);
  EXPECT_EQ(lane.high_priority_dropped, 1u);
  const sluice::BusStatisticsSnapshot all = bus.GetStatistics();
  EXPECT_EQ(all.messages_published, 18u);
  EXPECT_EQ(all.messages_dropped, 3u);
  // New thresholds apply to lanes too.
  Dispatch(bus);
  ASSERT_TRUE(bus.SetAdmissionThresholds(25, 50, 100));
  seq = 0;
  while (producer.PublishWithPriority(Item{seq}, 0, MessagePriority::LOW)) ++seq;
  EXPECT_EQ(seq, 4u);
  while (producer.PublishWithPriority(Item{seq}, 0, MessagePriority::HIGH)) ++seq;
  EXPECT_EQ(seq, 16u);
  // BARE_METAL: the whole lane for every priority, nothing counted.
  Dispatch(bus);
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  seq = 0;
  while (producer.PublishWithPriority(Item{seq}, 0, MessagePriority::LOW)) ++seq;
  EXPECT_EQ(seq, 16u);
  // Refusals in BARE_METAL are not counted: still the two above.
  EXPECT_EQ(producer.GetStatistics().low_priority_dropped, 2u);
}

TYPED_TEST(ProducerLaneTest, StatisticsArePerLaneAndAddUpOnTheBus) {
  TypeParam bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(a.Publish(Item{i}));
  for (std::uint32_t i = 0; i < 2; ++i) ASSERT_TRUE(b.Publish(Item{i}));
  ASSERT_TRUE(bus.Publish(Item{9}));
  EXPECT_FALSE(a.PublishWithPriority(Item{0}, 0, static_cast<MessagePriority>(7)));
  EXPECT_EQ(a.GetStatistics().medium_priority_published, 3u);
  EXPECT_EQ(a.GetStatistics().messages_rejected, 1u);
  EXPECT_EQ(b.GetStatistics().medium_priority_published, 2u);
  EXPECT_EQ(a.GetStatistics().messages_processed, 0u);
  EXPECT_EQ(Dispatch(bus, 2).size(), 2u);
  sluice::BusStatisticsSnapshot all = bus.GetStatistics();
  EXPECT_EQ(all.messages_published, 6u);
  EXPECT_EQ(all.messages_processed, 2u);
  EXPECT_EQ(all.messages_rejected, 1u);
  Dispatch(bus);
  all = bus.GetStatistics();
  EXPECT_EQ(all.messages_processed, 6u);
  EXPECT_EQ(a.GetStatistics().messages_processed, 3u);
  EXPECT_EQ(b.GetStatistics().messages_processed, 2u);
  // A reset covers the lanes; messages queued at the reset count nowhere.
  ASSERT_TRUE(a.Publish(Item{10}));
  bus.ResetStatistics();
  ASSERT_TRUE(a.Publish(Item{11}));
  Dispatch(bus);
  EXPECT_EQ(bus.GetStatistics().messages_published, 1u);
  EXPECT_EQ(bus.GetStatistics().messages_processed, 1u);
  EXPECT_EQ(a.GetStatistics().messages_processed, 1u);
  // NO_STATS: lane publishes count nothing.
  bus.SetPerformanceMode(sluice::PerformanceMode::NO_STATS);
  ASSERT_TRUE(a.Publish(Item{12}));
  Dispatch(bus);
  EXPECT_EQ(bus.GetStatistics().messages_published, 1u);
  EXPECT_EQ(bus.GetStatistics().messages_processed, 1u);
}

TYPED_TEST(ProducerLaneTest, CloseRefusesLanePublishesAndDrainsWhatTheLanesHold) {
  TypeParam bus;
  auto producer = bus.RegisterProducer();
  ASSERT_TRUE(producer.Publish(Item{1}));
  ASSERT_TRUE(bus.Publish(Item{2}));
  bus.Close();
  EXPECT_FALSE(producer.Publish(Item{3}));
  EXPECT_FALSE(producer.template Emplace<Item>(0, MessagePriority::HIGH, Item{4}));
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 2u);
  EXPECT_EQ(producer.GetStatistics().messages_refused_closed, 2u);
  EXPECT_FALSE(bus.IsDrained());
  // Either message alone is not enough.
  std::vector<std::string> first = Dispatch(bus, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(bus.IsDrained());
  Dispatch(bus);
  EXPECT_TRUE(bus.IsDrained());
  // Registering after Close works; publishing does not.
  auto late = bus.RegisterProducer();
  ASSERT_TRUE(late.IsValid());
  EXPECT_FALSE(late.Publish(Item{5}));
  EXPECT_TRUE(bus.IsDrained());
}

TYPED_TEST(ProducerLaneTest, ABusWhoseSharedQueueIsEmptyIsNotDrainedWhileALaneHoldsMessages) {
  TypeParam bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  ASSERT_TRUE(b.Publish(Item{1}));
  ASSERT_TRUE(b.Publish(Item{2}));
  bus.Close();
  EXPECT_FALSE(bus.IsDrained());
  EXPECT_FALSE(bus.Drain(std::chrono::milliseconds(1)));
  EXPECT_EQ(Dispatch(bus, 1).size(), 1u);
  EXPECT_FALSE(bus.IsDrained());
  EXPECT_EQ(Dispatch(bus).size(), 1u);
  EXPECT_TRUE(bus.IsDrained());
  EXPECT_TRUE(bus.Drain(std::chrono::milliseconds(0)));
}

TYPED_TEST(ProducerLaneTest, QueuedLaneMessagesAreDestroyedWithTheBus) {
  int live = 0;
  {
    TypeParam bus;
    auto producer = bus.RegisterProducer();
    ASSERT_TRUE(producer.template Emplace<Counted>(0, MessagePriority::HIGH, &live));
    ASSERT_TRUE(producer.Publish(Counted(&live)));
    EXPECT_EQ(live, 2);
    EXPECT_EQ(Dispatch(bus, 1).size(), 1u);
    EXPECT_EQ(live, 1);
    producer.Unregister();
  }
  EXPECT_EQ(live, 0);
}

TYPED_TEST(ProducerLaneTest, LanePositionsWrapCleanly) {
  constexpr sluice::Position kStart = std::numeric_limits<sluice::Position>::max() - 20;
  TypeParam bus{sluice::detail::FirstPosition{kStart}};
  auto producer = bus.RegisterProducer();
  std::uint32_t next = 0;
  std::uint32_t seen = 0;
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 9; ++i) ASSERT_TRUE(producer.Publish(Item{next++}));
    bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
      EXPECT_EQ(std::get<Item>(envelope.payload).seq, seen++);
    });
  }
  EXPECT_EQ(seen, next);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_EQ(bus.GetStatistics().messages_processed, next);
}

TYPED_TEST(ProducerLaneTest, UnknownPrioritiesAreRejectedAndCountedInTheLane) {
  TypeParam bus;
  auto producer = bus.RegisterProducer();
  EXPECT_FALSE(producer.PublishWithPriority(Item{1}, 0, static_cast<MessagePriority>(3)));
  EXPECT_FALSE(producer.template Emplace<Item>(0, static_cast<MessagePriority>(200), Item{1}));
  EXPECT_EQ(producer.GetStatistics().messages_rejected, 2u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 2u);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// ---- The merge ---------------------------------------------------------------

using FifoBus = sluice::MpscBus<Payload, 64, LaneTraits>;
using OrderedBus = sluice::MpscBus<Payload, 64, OrderedLaneTraits>;

TEST(ProducerLaneMergeTest, FifoTakesTheSourcesInTurnsOfTheBurst) {
  FifoBus bus;
  auto a = bus.RegisterProducer();  // lane 1
  auto b = bus.RegisterProducer();  // lane 2
  for (std::uint32_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(bus.Publish(Item{i}));
    ASSERT_TRUE(a.Publish(Item{i}));
    ASSERT_TRUE(b.Publish(Item{i}));
  }
  // A burst of 2, starting after the shared queue: lane 1, lane 2, shared.
  EXPECT_EQ(Join(Dispatch(bus)), "1:0 1:1 2:0 2:1 0:0 0:1 1:2 1:3 2:2 2:3 0:2 0:3 1:4 2:4 0:4");
}

TEST(ProducerLaneMergeTest, FifoSkipsEmptySourcesAndKeepsEachSourcesOrder) {
  FifoBus bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  auto c = bus.RegisterProducer();
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(c.Publish(Item{i}));
  ASSERT_TRUE(a.Publish(Item{0}));
  EXPECT_EQ(Join(Dispatch(bus)), "1:0 3:0 3:1 3:2");
  // One message a batch: the turn goes on across batches.
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(c.Publish(Item{i}));
  ASSERT_TRUE(b.Publish(Item{0}));
  std::string one_by_one;
  for (std::vector<std::string> got = Dispatch(bus, 1); !got.empty(); got = Dispatch(bus, 1)) {
    one_by_one += (one_by_one.empty() ? "" : " ") + got[0];
  }
  EXPECT_EQ(one_by_one, "2:0 3:0 3:1 3:2");
}

TEST(ProducerLaneMergeTest, OrderedTakesTheHighestPriorityAcrossEverySource) {
  OrderedBus bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  ASSERT_TRUE(bus.PublishWithPriority(Item{0}, 0, MessagePriority::LOW));
  ASSERT_TRUE(a.PublishWithPriority(Item{1}, 0, MessagePriority::LOW));
  ASSERT_TRUE(b.PublishWithPriority(Item{2}, 0, MessagePriority::MEDIUM));
  ASSERT_TRUE(a.PublishWithPriority(Item{3}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishWithPriority(Item{4}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(b.PublishWithPriority(Item{5}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishWithPriority(Item{6}, 0, MessagePriority::MEDIUM));
  // HIGH first, ties in turn (starting after the shared queue), then MEDIUM,
  // then LOW.
  EXPECT_EQ(Join(Dispatch(bus)), "H1:3 H2:5 H0:4 M2:2 M0:6 L1:1 L0:0");
}

TEST(ProducerLaneMergeTest, OrderedLooksAcrossLanesBeforeEveryMessage) {
  OrderedBus bus;
  auto a = bus.RegisterProducer();
  auto b = bus.RegisterProducer();
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(a.PublishWithPriority(Item{i}, 0, MessagePriority::LOW));
  }
  // Inside the batch, after the first LOW: a HIGH in another lane comes
  // next, not after the rest of lane a's LOW run.
  std::vector<std::string> order;
  bool published = false;
  bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
    order.push_back(std::string(1, "LMH"[static_cast<std::size_t>(envelope.header.priority)]) +
                    std::to_string(envelope.header.lane));
    if (!published) {
      published = true;
      ASSERT_TRUE(b.PublishWithPriority(Item{9}, 0, MessagePriority::HIGH));
    }
  });
  EXPECT_EQ(Join(order), "L1 H2 L1 L1 L1");
}

// A lane producer interrupted at its last store (its HIGH's claim committed,
// the slot not yet published) holds up no one: not the other lanes, not its
// own lower priorities. One producer publishes in claim order, so no publish
// that has returned can be behind that claim.
TEST(ProducerLaneMergeTest, ALaneProducerInterruptedMidPublishHoldsNoOne) {
  OrderedBus bus;
  auto x = bus.RegisterProducer();
  auto y = bus.RegisterProducer();
  ASSERT_TRUE(x.PublishWithPriority(Item{1}, 0, MessagePriority::LOW));
  ASSERT_TRUE(x.PublishWithPriority(Item{2}, 0, MessagePriority::MEDIUM));
  ASSERT_TRUE(sluice::detail::TestAccess::StartLanePublish(bus, x.Lane() - 1u,
                                                           MessagePriority::HIGH, Item{3}));
  ASSERT_TRUE(y.PublishWithPriority(Item{4}, 0, MessagePriority::LOW));
  EXPECT_EQ(Join(Dispatch(bus)), "M1:2 L2:4 L1:1");
  sluice::detail::TestAccess::FinishLanePublish(bus, x.Lane() - 1u);
  EXPECT_EQ(Join(Dispatch(bus)), "H1:3");
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// ---- Other traits ------------------------------------------------------------------

struct SleepingLaneTraits : sluice::SleepingConsumerTraits {
  using Lanes = sluice::ProducerLanes<2, 8>;
};

TEST(ProducerLaneWakeTest, ALanePublishWakesASleepingConsumer) {
  sluice::MpscBus<Payload, 16, SleepingLaneTraits> bus;
  auto producer = bus.RegisterProducer();
  std::thread publisher([&] {
    // Publishes only once the consumer has announced its sleep: from then on
    // only the publish's wake-up can end the wait before the timeout.
    while (sluice::detail::TestAccess::ConsumerWaiters(bus) == 0) std::this_thread::yield();
    EXPECT_TRUE(producer.Publish(Item{7}));
  });
  // A minute: a lost wake-up returns 0 at the timeout and fails the test.
  const std::uint32_t got = bus.ProcessBatchWait(std::chrono::minutes(1));
  publisher.join();
  EXPECT_EQ(got, 1u);
}

}  // namespace
}  // namespace producer_lane_test
