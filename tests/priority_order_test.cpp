// DeliveryOrder::kPriority on one thread: HIGH before MEDIUM before LOW, the
// check interval and the starvation limit as exact dispatch sequences, and
// everything else (admission, fill, statistics, message ids, Close, the
// publish calls, payload lifetimes, the position wrap) as on the FIFO bus.
//
// Messages are written as labels: "H3" is the message with sequence number
// 3 published with priority HIGH.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/detail/observe/latency_recorder.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"
#include "typed_test_names.hpp"

namespace priority_order_test {
namespace {

using sluice::MessagePriority;

struct Item {
  std::uint32_t seq;
};
// Has a constructor that cannot throw: Emplace builds it in its slot.
struct Built {
  explicit Built(std::uint32_t s) noexcept : seq(s) {}
  std::uint32_t seq;
};
using Payload = std::variant<Item, Built>;

std::uint32_t SeqOf(const Payload& payload) {
  return std::holds_alternative<Item>(payload) ? std::get<Item>(payload).seq
                                               : std::get<Built>(payload).seq;
}

constexpr char kLetters[] = "LMH";  // indexed by MessagePriority

MessagePriority PriorityOf(char letter) {
  return static_cast<MessagePriority>(std::string(kLetters).find(letter));
}

std::string Label(MessagePriority priority, std::uint32_t seq) {
  return kLetters[static_cast<std::size_t>(priority)] + std::to_string(seq);
}

// "H0 L1" -> {"H0", "L1"}.
std::vector<std::string> Labels(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> labels;
  for (std::string label; in >> label;) labels.push_back(label);
  return labels;
}

std::uint32_t SeqOf(const std::string& label) {
  return static_cast<std::uint32_t>(std::stoul(label.substr(1)));
}

// Publishes every labelled message, each of which must be admitted.
template <typename Bus>
void PublishAll(Bus& bus, const std::string& text) {
  for (const std::string& label : Labels(text)) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{SeqOf(label)}, 0, PriorityOf(label[0]))) << label;
  }
}

// Dispatches up to `max` messages to a visitor and returns their labels.
template <typename Bus>
std::vector<std::string> Take(Bus& bus, std::uint32_t max = Bus::Capacity()) {
  std::vector<std::string> seen;
  const std::uint32_t count = bus.ProcessBatchWith(
      [&](const sluice::MessageEnvelope<Payload>& envelope) {
        seen.push_back(Label(envelope.header.priority, SeqOf(envelope.payload)));
      },
      max);
  EXPECT_EQ(count, seen.size());
  return seen;
}

// Publishes the labelled messages, then dispatches everything queued to a
// visitor.
template <typename Bus>
std::vector<std::string> PublishThenTake(Bus& bus, const std::string& text) {
  PublishAll(bus, text);
  return Take(bus);
}

// Records what the subscriptions receive, and lets a test act from inside a
// callback.
template <typename Bus>
class Recorder {
 public:
  explicit Recorder(Bus& bus) : bus_(bus) {
    handle_ =
        bus.template Subscribe<Item>([this](const Item& item, const sluice::MessageHeader& h) {
          seen.push_back(Label(h.priority, item.seq));
          ids.push_back(h.msg_id);
          if (on_item) on_item(seen.back());
        });
    EXPECT_TRUE(handle_.IsValid());
  }
  ~Recorder() { (void)bus_.Unsubscribe(handle_); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  std::vector<std::string> seen;
  std::vector<std::uint64_t> ids;
  std::function<void(const std::string& label)> on_item;

 private:
  Bus& bus_;
  sluice::SubscriptionHandle handle_;
};

// Publishes `prefill`, then dispatches one batch through a subscription
// whose callback, when it receives `trigger`, publishes `published` into the
// same bus. Returns what the batch dispatched.
template <typename Bus>
std::vector<std::string> DispatchPublishingFromACallback(Bus& bus, const std::string& prefill,
                                                         const std::string& trigger,
                                                         const std::string& published) {
  Recorder<Bus> recorder(bus);
  PublishAll(bus, prefill);
  recorder.on_item = [&](const std::string& label) {
    if (label == trigger) PublishAll(bus, published);
  };
  const std::uint32_t count = bus.ProcessBatch();
  EXPECT_EQ(count, recorder.seen.size());
  return recorder.seen;
}

// A clock the test sets, in microseconds: a clock with only NowMicros (as
// before 0.4), which the bus reads times 1000.
struct ManualClock {
  static inline std::atomic<std::uint64_t> now{1000};
  static std::uint64_t NowMicros() noexcept { return now.load(); }
};
struct ManualClockTraits : sluice::DefaultBusTraits {
  using Clock = ManualClock;
};

// A priority bus of one producer model and slot storage; the check interval,
// the starvation limit, the other traits (`Base`), the payload and the
// capacity vary per test.
template <sluice::ProducerModel kModel, sluice::SlotStorage kStorage>
struct Kind {
  template <typename Base, std::uint32_t kInterval, std::uint32_t kStarvation>
  struct Traits : Base {
    using Delivery = sluice::PriorityDelivery<kInterval, kStarvation>;
    static constexpr sluice::SlotStorage kSlotStorage = kStorage;
  };
  template <std::uint32_t kInterval = 1, std::uint32_t kStarvation = 0,
            typename Base = sluice::DefaultBusTraits, typename P = Payload,
            std::size_t kCapacity = 16>
  using Bus = sluice::AsyncBus<P, kCapacity, kModel, Traits<Base, kInterval, kStarvation>>;
};

template <typename K>
class PriorityOrderTest : public ::testing::Test {};
using Kinds = ::testing::Types<Kind<sluice::ProducerModel::kMulti, sluice::SlotStorage::kHeap>,
                               Kind<sluice::ProducerModel::kSingle, sluice::SlotStorage::kHeap>,
                               Kind<sluice::ProducerModel::kMulti, sluice::SlotStorage::kInline>,
                               Kind<sluice::ProducerModel::kSingle, sluice::SlotStorage::kInline>>;
TYPED_TEST_SUITE(PriorityOrderTest, Kinds, sluice_test::IndexNames);

// Capacity 16 with the default thresholds: LOW is refused at 10 queued,
// MEDIUM at 13, HIGH at 16.
constexpr std::size_t kLowLimit = 10;
constexpr std::size_t kMediumLimit = 13;
constexpr std::size_t kHighLimit = 16;

// ---- Order --------------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, APrefilledBusIsDispatchedHighThenMediumThenLowThroughSubscriptions) {
  typename TypeParam::template Bus<> bus;
  Recorder<decltype(bus)> recorder(bus);
  PublishAll(bus, "H0 L0 M0 H1 L1 M1 L2 H2 M2 L3 M3 H3");
  EXPECT_EQ(bus.ProcessBatch(), 12u);
  EXPECT_EQ(recorder.seen, Labels("H0 H1 H2 H3 M0 M1 M2 M3 L0 L1 L2 L3"));
}

TYPED_TEST(PriorityOrderTest, APrefilledBusIsDispatchedHighThenMediumThenLowThroughAVisitor) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0 M0 H0 L1 M1 H1 L2 M2 H2");
  EXPECT_EQ(Take(bus, 4), Labels("H0 H1 H2 M0"));
  EXPECT_EQ(Take(bus), Labels("M1 M2 L0 L1 L2"));
  EXPECT_TRUE(Take(bus).empty());
}

TYPED_TEST(PriorityOrderTest, OneMessageBatchesInterleavedWithPublishes) {
  typename TypeParam::template Bus<> bus;
  Recorder<decltype(bus)> recorder(bus);
  PublishAll(bus, "L0 M0 H0");
  EXPECT_EQ(bus.ProcessBatch(1), 1u);  // H0
  PublishAll(bus, "L1 H1");
  EXPECT_EQ(bus.ProcessBatch(1), 1u);  // H1
  EXPECT_EQ(bus.ProcessBatch(1), 1u);  // M0
  PublishAll(bus, "M1");
  std::uint32_t more = 0;
  while (bus.ProcessBatch(1) == 1) ++more;
  EXPECT_EQ(more, 3u);
  EXPECT_EQ(recorder.seen, Labels("H0 H1 M0 M1 L0 L1"));
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// A check interval of 3: a run of a priority is up to 3 messages long, and
// a HIGH published once a run has started waits for the rest of that run,
// never longer.
TYPED_TEST(PriorityOrderTest, AHighPublishedDuringARunIsTakenWhenTheRunOfNEnds) {
  typename TypeParam::template Bus<3> bus;
  PublishAll(bus, "L0 L1 L2 L3 L4 L5 L6");
  EXPECT_EQ(Take(bus, 1), Labels("L0"));  // a LOW run starts
  EXPECT_EQ(PublishThenTake(bus, "H0"), Labels("L1 L2 H0 L3 L4 L5 L6"));
  // Published between runs: first.
  EXPECT_EQ(PublishThenTake(bus, "L7 L8 H1"), Labels("H1 L7 L8"));
  // A MEDIUM run, with HIGH and LOW arriving after its first message.
  PublishAll(bus, "M0 M1 M2 M3");
  EXPECT_EQ(Take(bus, 1), Labels("M0"));
  EXPECT_EQ(PublishThenTake(bus, "L9 H2"), Labels("M1 M2 H2 M3 L9"));
}

TYPED_TEST(PriorityOrderTest, AHighPublishedFromALowCallbackIsNextInTheSameBatch) {
  typename TypeParam::template Bus<> bus;
  EXPECT_EQ(DispatchPublishingFromACallback(bus, "L0 L1 L2", "L0", "H0"), Labels("L0 H0 L1 L2"));
}

TYPED_TEST(PriorityOrderTest, AHighPublishedFromALowCallbackIsTakenWithinNInTheSameBatch) {
  typename TypeParam::template Bus<3> bus;
  EXPECT_EQ(DispatchPublishingFromACallback(bus, "L0 L1 L2 L3 L4", "L0", "H0"),
            Labels("L0 L1 L2 H0 L3 L4"));
}

// ---- Starvation limit ------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, StarvationLimitGivesLowOneMessageAfterEveryKHighs) {
  typename TypeParam::template Bus<1, 2> bus;
  EXPECT_EQ(PublishThenTake(bus, "L0 L1 H0 H1 H2 H3 H4 H5"), Labels("H0 H1 L0 H2 H3 L1 H4 H5"));
}

// LOW and MEDIUM are both passed over by H0 and H1: LOW runs first, then
// MEDIUM. A run granted to a starved priority passes over no one (M0's run
// does not count against L1, L0's not against M1), so HIGH gets K messages
// between one round of starved runs and the next: HIGH waits for at most one
// run of each lower priority.
TYPED_TEST(PriorityOrderTest, StarvedLowAndMediumAreServedLowestFirst) {
  typename TypeParam::template Bus<1, 2> bus;
  EXPECT_EQ(PublishThenTake(bus, "L0 L1 M0 M1 H0 H1 H2 H3 H4 H5"),
            Labels("H0 H1 L0 M0 H2 H3 L1 M1 H4 H5"));
}

// A starved priority's run is up to the check interval's messages long, and
// so is every HIGH run.
TYPED_TEST(PriorityOrderTest, AStarvedRunIsUpToNMessages) {
  typename TypeParam::template Bus<2, 2> bus;
  EXPECT_EQ(PublishThenTake(bus, "L0 L1 L2 L3 H0 H1 H2 H3 H4 H5 H6 H7"),
            Labels("H0 H1 L0 L1 H2 H3 L2 L3 H4 H5 H6 H7"));
}

// L0 arrives while H0 is being dispatched: H0 did not pass it over (it was
// chosen before L0 was there); H1 and H2 do.
TYPED_TEST(PriorityOrderTest, AMessageIsPassedOverOnlyByMessagesChosenWhileItWaits) {
  typename TypeParam::template Bus<1, 2> bus;
  EXPECT_EQ(DispatchPublishingFromACallback(bus, "H0 H1 H2 H3 H4", "H0", "L0"),
            Labels("H0 H1 H2 L0 H3 H4"));
}

TYPED_TEST(PriorityOrderTest, StrictPriorityStarvesLowWhileHighKeepsComing) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0");
  for (std::uint32_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::HIGH));
    ASSERT_EQ(Take(bus, 1), std::vector<std::string>{Label(MessagePriority::HIGH, i)});
  }
  EXPECT_EQ(Take(bus), Labels("L0"));
}

TYPED_TEST(PriorityOrderTest, AStarvationLimitLetsLowThroughWhileHighKeepsComing) {
  typename TypeParam::template Bus<1, 3> bus;
  PublishAll(bus, "L0");
  std::vector<std::string> seen;
  for (std::uint32_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::HIGH));
    for (const std::string& label : Take(bus, 1)) seen.push_back(label);
  }
  EXPECT_EQ(seen, Labels("H0 H1 H2 L0 H3 H4"));
  EXPECT_EQ(Take(bus), Labels("H5"));
}

// ---- Admission, fill and statistics over the whole bus ------------------------

TYPED_TEST(PriorityOrderTest, AdmissionThresholdsCountTheMessagesOfEveryPriority) {
  typename TypeParam::template Bus<> bus;
  for (std::uint32_t i = 0; i < kLowLimit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::HIGH));
  }
  // Ten HIGH messages fill LOW's share: LOW is refused.
  EXPECT_FALSE(bus.PublishWithPriority(Item{100}, 0, MessagePriority::LOW));
  for (std::size_t depth = kLowLimit; depth < kMediumLimit; ++depth) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{200}, 0, MessagePriority::MEDIUM));
  }
  EXPECT_FALSE(bus.PublishWithPriority(Item{201}, 0, MessagePriority::MEDIUM));
  for (std::size_t depth = kMediumLimit; depth < kHighLimit; ++depth) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{300}, 0, MessagePriority::HIGH));
  }
  EXPECT_FALSE(bus.PublishWithPriority(Item{301}, 0, MessagePriority::HIGH));
  EXPECT_EQ(bus.QueueDepth(), kHighLimit);
  sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.high_priority_published, 13u);
  EXPECT_EQ(stats.medium_priority_published, 3u);
  EXPECT_EQ(stats.low_priority_published, 0u);
  EXPECT_EQ(stats.high_priority_dropped, 1u);
  EXPECT_EQ(stats.medium_priority_dropped, 1u);
  EXPECT_EQ(stats.low_priority_dropped, 1u);
  EXPECT_EQ(stats.messages_dropped, 3u);
  // One dispatched (a HIGH): one slot of room, for HIGH only.
  EXPECT_EQ(Take(bus, 1), Labels("H0"));
  EXPECT_FALSE(bus.PublishWithPriority(Item{202}, 0, MessagePriority::MEDIUM));
  EXPECT_TRUE(bus.PublishWithPriority(Item{302}, 0, MessagePriority::HIGH));
  // Down to 9 queued: LOW is admitted again.
  EXPECT_EQ(Take(bus, 7).size(), 7u);
  EXPECT_EQ(bus.QueueDepth(), kLowLimit - 1);
  EXPECT_TRUE(bus.PublishWithPriority(Item{101}, 0, MessagePriority::LOW));
  EXPECT_FALSE(bus.PublishWithPriority(Item{102}, 0, MessagePriority::LOW));
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.low_priority_dropped, 2u);
  EXPECT_EQ(stats.medium_priority_dropped, 2u);
  EXPECT_EQ(stats.low_priority_published, 1u);
}

TYPED_TEST(PriorityOrderTest, BareMetalModeAdmitsEveryPriorityUpToTheCapacity) {
  typename TypeParam::template Bus<> bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  for (std::uint32_t i = 0; i < kHighLimit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::LOW)) << i;
  }
  EXPECT_FALSE(bus.PublishWithPriority(Item{99}, 0, MessagePriority::HIGH));
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::FULL);
  EXPECT_EQ(Take(bus, 1), Labels("L0"));
  EXPECT_TRUE(bus.PublishWithPriority(Item{99}, 0, MessagePriority::HIGH));
  EXPECT_EQ(Take(bus, 2), Labels("H99 L1"));
}

// The reference's fixed levels, whose 75 % and 90 % fall between messages of
// a 16-slot bus (the default levels follow admission: backpressure_levels_test).
struct FixedLevelsTraits : sluice::DefaultBusTraits {
  static constexpr sluice::BackpressureScale kBackpressureScale = sluice::BackpressureScale::kFixed;
};

TYPED_TEST(PriorityOrderTest, DepthUtilizationAndBackpressureAreOverTheWholeBus) {
  typename TypeParam::template Bus<1, 0, FixedLevelsTraits> bus;
  PublishAll(bus, "L0 M0 H0 L1 M1 H1 L2 M2 H2 L3 M3 H3");
  EXPECT_EQ(bus.QueueDepth(), 12u);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 75.0);
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::WARNING);
  PublishAll(bus, "H4");
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::WARNING);
  PublishAll(bus, "H5 H6");
  EXPECT_EQ(bus.QueueDepth(), 15u);
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::CRITICAL);
  PublishAll(bus, "H7");
  EXPECT_EQ(bus.QueueDepth(), 16u);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 100.0);
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::FULL);
  // Each dispatch, from whichever ring, frees one message of the whole.
  for (std::size_t taken = 1; taken <= 16; ++taken) {
    ASSERT_EQ(Take(bus, 1).size(), 1u);
    const std::size_t depth = 16 - taken;
    EXPECT_EQ(bus.QueueDepth(), depth);
    EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), static_cast<double>(depth) * 100.0 / 16.0);
  }
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::NORMAL);
}

TYPED_TEST(PriorityOrderTest, ProcessedEqualsPublishedPerPriorityOnceDrained) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0 L1 L2 M0 M1 M2 M3 H0 H1 H2 H3 H4");
  EXPECT_EQ(Take(bus, 5).size(), 5u);
  sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_processed, 5u);
  EXPECT_EQ(Take(bus).size(), 7u);
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.low_priority_published, 3u);
  EXPECT_EQ(stats.medium_priority_published, 4u);
  EXPECT_EQ(stats.high_priority_published, 5u);
  EXPECT_EQ(stats.messages_published, 12u);
  EXPECT_EQ(stats.messages_processed, stats.messages_published);
  EXPECT_EQ(stats.messages_dropped, 0u);
}

TYPED_TEST(PriorityOrderTest, LatencyHistogramsAreKeptPerPriority) {
  typename TypeParam::template Bus<1, 0, ManualClockTraits> bus;
  ManualClock::now = 1000;
  PublishAll(bus, "L0 L1 M0 M1 M2 H0 H1 H2 H3");
  ManualClock::now = 1010;
  EXPECT_EQ(Take(bus).size(), 9u);
  const sluice::LatencySnapshot latency = bus.GetLatencyHistograms();
  const std::uint64_t expected[3] = {2, 3, 4};  // LOW, MEDIUM, HIGH
  for (std::size_t p = 0; p < 3; ++p) {
    const sluice::LatencyHistogram& histogram = latency.by_priority[p];
    EXPECT_EQ(histogram.count, expected[p]) << p;
    EXPECT_EQ(histogram.buckets[sluice::detail::LatencyBucket(10'000)], expected[p]) << p;
  }
}

// ResetStatistics with messages queued: those were published before the
// reset and are no part of the new counts, while a HIGH published after the
// reset is, also when it is dispatched ahead of them (BusStatisticsSnapshot:
// processed counts the dispatched messages whose publish was counted in
// messages_published).
TYPED_TEST(PriorityOrderTest, AfterAResetProcessedCountsAHighThatOvertakesOlderMessages) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0 L1");
  bus.ResetStatistics();
  PublishAll(bus, "H0");
  EXPECT_EQ(Take(bus, 1), Labels("H0"));
  sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 1u);
  EXPECT_EQ(stats.messages_processed, 1u) << "H0 was published and dispatched since the reset";
  EXPECT_EQ(Take(bus), Labels("L0 L1"));
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_processed, 1u);
  EXPECT_EQ(stats.messages_processed, stats.messages_published);
}

// ---- Message ids ----------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, MessageIdsFollowAdmissionOrderNotDispatchOrder) {
  typename TypeParam::template Bus<> bus;
  Recorder<decltype(bus)> recorder(bus);
  PublishAll(bus, "L0 M0 H0 L1 H1 M1");
  EXPECT_EQ(bus.ProcessBatch(), 6u);
  EXPECT_EQ(recorder.seen, Labels("H0 H1 M0 M1 L0 L1"));
  EXPECT_EQ(recorder.ids, (std::vector<std::uint64_t>{2, 4, 1, 5, 0, 3}));
  // A refused publish takes no id; a batch takes consecutive ones.
  for (std::uint32_t i = 0; i < kLowLimit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{10 + i}, 0, MessagePriority::MEDIUM));  // ids 6..15
  }
  EXPECT_FALSE(bus.PublishWithPriority(Item{99}, 0, MessagePriority::LOW));
  const std::vector<Item> batch{{20}, {21}};
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0, MessagePriority::HIGH).AdmittedCount(),
            2u);
  recorder.seen.clear();
  recorder.ids.clear();
  EXPECT_EQ(bus.ProcessBatch(3), 3u);
  EXPECT_EQ(recorder.seen, Labels("H20 H21 M10"));
  EXPECT_EQ(recorder.ids, (std::vector<std::uint64_t>{16, 17, 6}));
}

// ---- Close ------------------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, AClosedBusIsDrainedOnlyOnceEveryPriorityIsDispatched) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0 M0 H0 L1");
  bus.Close();
  EXPECT_TRUE(bus.IsClosed());
  EXPECT_FALSE(bus.PublishWithPriority(Item{9}, 0, MessagePriority::HIGH));
  EXPECT_FALSE(bus.PublishWithPriority(Item{9}, 0, MessagePriority::MEDIUM));
  EXPECT_FALSE(bus.PublishWithPriority(Item{9}, 0, MessagePriority::LOW));
  EXPECT_FALSE(bus.template Emplace<Built>(0, MessagePriority::HIGH, 9u));
  const std::vector<Item> batch{{7}, {8}};
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0, MessagePriority::HIGH).AdmittedCount(),
            0u);
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 6u);
  EXPECT_EQ(bus.GetStatistics().messages_dropped, 0u);
  EXPECT_EQ(bus.QueueDepth(), 4u);
  EXPECT_FALSE(bus.Drain(std::chrono::milliseconds(0)));
  for (const char* expected : {"H0", "M0", "L0"}) {
    EXPECT_FALSE(bus.IsDrained()) << "before " << expected;
    EXPECT_EQ(Take(bus, 1), Labels(expected));
  }
  EXPECT_FALSE(bus.IsDrained()) << "L1 is still queued";
  EXPECT_EQ(Take(bus), Labels("L1"));
  EXPECT_TRUE(bus.IsDrained());
  EXPECT_TRUE(bus.Drain(std::chrono::milliseconds(0)));
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// ---- Every publish call -------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, PublishBatchAdmitsUpToItsPrioritysThresholdAndKeepsItsOrder) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "H0 H1 H2 H3 H4 H5 H6");
  const std::vector<Item> lows{{100}, {101}, {102}, {103}, {104}};
  EXPECT_EQ(bus.PublishBatch(lows.begin(), lows.end(), 3, MessagePriority::LOW).AdmittedCount(),
            3u);
  EXPECT_EQ(bus.QueueDepth(), kLowLimit);
  std::vector<Item> highs;
  for (std::uint32_t i = 200; i < 208; ++i) highs.push_back(Item{i});
  EXPECT_EQ(bus.PublishBatch(highs.begin(), highs.end(), 3, MessagePriority::HIGH).AdmittedCount(),
            6u);
  EXPECT_EQ(bus.QueueDepth(), kHighLimit);
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.low_priority_published, 3u);
  EXPECT_EQ(stats.low_priority_dropped, 2u);
  EXPECT_EQ(stats.high_priority_published, 13u);
  EXPECT_EQ(stats.high_priority_dropped, 2u);
  EXPECT_EQ(Take(bus), Labels("H0 H1 H2 H3 H4 H5 H6 H200 H201 H202 H203 H204 H205 L100 L101 L102"));
}

TYPED_TEST(PriorityOrderTest, EveryPublishCallIsOrderedByItsPriority) {
  typename TypeParam::template Bus<> bus;
  PublishAll(bus, "L0 L1");
  ASSERT_TRUE(bus.Publish(Item{0}));                                        // MEDIUM
  ASSERT_TRUE(bus.template Emplace<Built>(0, MessagePriority::HIGH, 1u));   // in its slot
  ASSERT_TRUE(bus.template Emplace<Item>(0, MessagePriority::MEDIUM, 2u));  // an aggregate
  ASSERT_TRUE(bus.PublishFast(Item{3}, 0, std::chrono::nanoseconds(42), MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishFast(Built{4}, 0, std::chrono::nanoseconds(43), MessagePriority::LOW));
  const std::vector<Payload> batch{Item{5}, Built{6}};
  ASSERT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0, MessagePriority::HIGH).AdmittedCount(),
            2u);
  std::vector<std::string> seen;
  std::vector<std::uint64_t> stamps;
  EXPECT_EQ(bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
    seen.push_back(Label(envelope.header.priority, SeqOf(envelope.payload)));
    stamps.push_back(envelope.header.timestamp_ns);
  }),
            9u);
  EXPECT_EQ(seen, Labels("H1 H3 H5 H6 M0 M2 L0 L1 L4"));
  EXPECT_EQ(stamps[1], 42u);
  EXPECT_EQ(stamps[8], 43u);
}

TYPED_TEST(PriorityOrderTest, AnUnknownPriorityIsRejectedByEveryPublishCall) {
  typename TypeParam::template Bus<> bus;
  const auto bad = static_cast<MessagePriority>(3);
  EXPECT_FALSE(bus.PublishWithPriority(Item{0}, 0, bad));
  EXPECT_FALSE(bus.PublishFast(Item{0}, 0, std::chrono::nanoseconds(1), bad));
  EXPECT_FALSE(bus.template Emplace<Built>(0, bad, 0u));
  const std::vector<Item> batch{{0}};
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0, bad).AdmittedCount(), 0u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 4u);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_TRUE(Take(bus).empty());
}

TYPED_TEST(PriorityOrderTest, PublishBlockingAndProcessBatchWaitWithAParker) {
  typename TypeParam::template Bus<1, 0, sluice::SleepingConsumerTraits> bus;
  EXPECT_EQ(bus.PublishBlocking(Item{0}, 0, MessagePriority::LOW, std::chrono::seconds(0)),
            sluice::PublishOutcome::kAdmitted);
  for (std::uint32_t i = 0; i + 1 < kLowLimit; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(Item{i}, 0, MessagePriority::HIGH));
  }
  // LOW's share is full (counted over every priority): nobody makes room.
  EXPECT_EQ(bus.PublishBlocking(Item{1}, 0, MessagePriority::LOW, std::chrono::milliseconds(1)),
            sluice::PublishOutcome::kTimedOut);
  EXPECT_EQ(bus.GetStatistics().low_priority_dropped, 1u);
  EXPECT_EQ(bus.PublishBlocking(Item{2}, 0, MessagePriority::MEDIUM, std::chrono::seconds(0)),
            sluice::PublishOutcome::kAdmitted);
  std::vector<std::string> seen;
  const auto visitor = [&](const sluice::MessageEnvelope<Payload>& envelope) {
    seen.push_back(Label(envelope.header.priority, SeqOf(envelope.payload)));
  };
  EXPECT_EQ(bus.ProcessBatchWithWait(visitor, std::chrono::seconds(0), 10), 10u);
  EXPECT_EQ(bus.ProcessBatchWithWait(visitor, std::chrono::seconds(0)), 1u);
  EXPECT_EQ(seen, Labels("H0 H1 H2 H3 H4 H5 H6 H7 H8 M2 L0"));
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(1)), 0u);
}

// ---- Payload lifetimes ---------------------------------------------------------------

TYPED_TEST(PriorityOrderTest, PayloadsAreDestroyedExactlyOnceQueuedOnesWithTheBus) {
  using sluice_test::LifetimeCounter;
  using Owning = std::variant<LifetimeCounter, std::unique_ptr<int>, std::string>;
  LifetimeCounter::ResetCounts();
  {
    auto bus = std::make_unique<
        typename TypeParam::template Bus<1, 0, sluice::DefaultBusTraits, Owning>>();
    int next_value = 0;
    for (int round = 0; round < 3; ++round) {
      for (const MessagePriority p :
           {MessagePriority::LOW, MessagePriority::MEDIUM, MessagePriority::HIGH}) {
        ASSERT_TRUE(bus->PublishWithPriority(LifetimeCounter(next_value++), 0, p));
      }
    }
    ASSERT_TRUE(bus->PublishWithPriority(std::make_unique<int>(7), 0, MessagePriority::LOW));
    ASSERT_TRUE(bus->PublishWithPriority(std::string(100, 'x'), 0, MessagePriority::HIGH));
    EXPECT_EQ(LifetimeCounter::Live(), 9);
    std::vector<int> values;
    EXPECT_EQ(bus->ProcessBatchWith(
                  [&](const auto& message) {
                    using T = std::decay_t<decltype(message)>;
                    if constexpr (std::is_same_v<T, LifetimeCounter>)
                      values.push_back(message.value);
                  },
                  5),
              5u);
    // The HIGH ones (2, 5, 8, then the string), then MEDIUM 1.
    EXPECT_EQ(values, (std::vector<int>{2, 5, 8, 1}));
    EXPECT_EQ(LifetimeCounter::Live(), 5);
    // Destroyed with the bus: MEDIUM 4 and 7, LOW 0, 3, 6 and the pointer.
  }
  EXPECT_EQ(LifetimeCounter::Live(), 0);
  EXPECT_EQ(LifetimeCounter::constructed.load(), LifetimeCounter::destroyed.load());
}

// Runs a callback when destroyed, unless moved from.
struct DestructionProbe {
  explicit DestructionProbe(std::function<void()>* callback) : on_destroy(callback) {}
  DestructionProbe(DestructionProbe&& other) noexcept : on_destroy(other.on_destroy) {
    other.on_destroy = nullptr;
  }
  DestructionProbe(const DestructionProbe&) = delete;
  DestructionProbe& operator=(const DestructionProbe&) = delete;
  DestructionProbe& operator=(DestructionProbe&&) = delete;
  ~DestructionProbe() {
    if (on_destroy != nullptr) (*on_destroy)();
  }
  std::function<void()>* on_destroy;
};

// The consumer destroys a message before it releases its place in the whole
// bus: while the payload's destructor runs, the message still counts in the
// depth, and a closed bus is not yet drained (IsDrained promises that every
// message was dispatched and destroyed).
TYPED_TEST(PriorityOrderTest, AMessageCountsInTheDepthUntilItIsDestroyed) {
  using ProbePayload = std::variant<Item, DestructionProbe>;
  typename TypeParam::template Bus<1, 0, sluice::DefaultBusTraits, ProbePayload> bus;
  std::vector<std::size_t> depths;
  std::vector<bool> drained;
  std::function<void()> record = [&] {
    depths.push_back(bus.QueueDepth());
    drained.push_back(bus.IsDrained());
  };
  ASSERT_TRUE(bus.PublishWithPriority(Item{0}, 0, MessagePriority::LOW));
  ASSERT_TRUE(bus.PublishWithPriority(DestructionProbe(&record), 0, MessagePriority::LOW));
  ASSERT_TRUE(bus.PublishWithPriority(DestructionProbe(&record), 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishWithPriority(Item{1}, 0, MessagePriority::MEDIUM));
  bus.Close();
  EXPECT_EQ(bus.ProcessBatchWith([](const auto&) {}), 4u);
  // The HIGH probe first (4 queued), the LOW probe last (1 queued).
  EXPECT_EQ(depths, (std::vector<std::size_t>{4, 1}));
  EXPECT_EQ(drained, (std::vector<bool>{false, false}));
  EXPECT_TRUE(bus.IsDrained());
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// ---- The position wrap --------------------------------------------------------------

// Strict priority (interval 1, no starvation limit): the oldest message of the
// highest priority that has one is next.
struct StrictModel {
  struct Entry {
    std::string label;
    sluice::Position id;
  };
  std::deque<Entry> queues[sluice::kPriorityCount];

  std::size_t Size() const { return queues[0].size() + queues[1].size() + queues[2].size(); }
  Entry Pop() {
    for (std::size_t p = sluice::kPriorityCount; p-- > 0;) {
      if (!queues[p].empty()) {
        Entry entry = queues[p].front();
        queues[p].pop_front();
        return entry;
      }
    }
    ADD_FAILURE() << "the model is empty";
    return {};
  }
};

// Starting a few laps before the position type wraps, the whole bus's
// position (the message id) and every ring's position cross the wrap while
// the bus fills with all three priorities and drains in priority order.
TYPED_TEST(PriorityOrderTest, ClaimsIdsAndOrderStayRightAcrossThePositionWrap) {
  using Bus = typename TypeParam::template Bus<>;
  constexpr sluice::Position kMax = std::numeric_limits<sluice::Position>::max();
  constexpr sluice::Position kFirst = kMax - 3 * Bus::Capacity() / 2;
  auto bus = std::make_unique<Bus>(sluice::detail::FirstPosition{kFirst});
  StrictModel model;
  sluice::Position next_id = kFirst;
  std::uint32_t next_seq = 0;
  std::size_t admitted[sluice::kPriorityCount] = {0, 0, 0};
  bool wrapped = false;
  const std::size_t limits[sluice::kPriorityCount] = {kLowLimit, kMediumLimit, kHighLimit};
  // Three quarters drained each round leave room for LOW in every round.
  constexpr std::uint32_t kDrained = 3 * Bus::Capacity() / 4;
  for (int round = 0; round < 24; ++round) {
    // Publish a rotating mix until HIGH is refused (the bus is full).
    for (std::size_t i = static_cast<std::size_t>(round);; ++i) {
      const auto p = static_cast<MessagePriority>(i % 3);
      const std::size_t limit = limits[i % 3];
      const bool admitted_now = bus->PublishWithPriority(Item{next_seq}, 0, p).IsAdmitted();
      ASSERT_EQ(admitted_now, model.Size() < limit) << round << " " << i;
      if (admitted_now) {
        model.queues[i % 3].push_back({Label(p, next_seq), next_id++});
        ++admitted[i % 3];
        ++next_seq;
      } else if (p == MessagePriority::HIGH) {
        break;
      }
    }
    ASSERT_EQ(bus->QueueDepth(), model.Size());
    // Drain, checking order and ids.
    std::vector<std::string> seen;
    std::vector<sluice::Position> ids;
    EXPECT_EQ(bus->ProcessBatchWith(
                  [&](const sluice::MessageEnvelope<Payload>& envelope) {
                    seen.push_back(Label(envelope.header.priority, SeqOf(envelope.payload)));
                    ids.push_back(static_cast<sluice::Position>(envelope.header.msg_id));
                  },
                  kDrained),
              kDrained);
    for (std::size_t m = 0; m < seen.size(); ++m) {
      const StrictModel::Entry expected = model.Pop();
      EXPECT_EQ(seen[m], expected.label);
      EXPECT_EQ(ids[m], expected.id);
      wrapped = wrapped || ids[m] == 0;
    }
    ASSERT_EQ(bus->QueueDepth(), model.Size());
  }
  EXPECT_TRUE(wrapped) << "the test must actually cross the wrap";
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    // A ring's positions start 3/2 laps before the wrap as well.
    EXPECT_GT(admitted[p], 3 * Bus::Capacity() / 2) << "every ring must cross the wrap too";
  }
}

// ---- The traits ----------------------------------------------------------------

TEST(PriorityOrderTraitsTest, SlotMemoryIsThreeRingsAndTheConvenienceTraitsAreStrict) {
  using Fifo = sluice::MpscBus<Payload, 16>;
  using Priority = sluice::MpscBus<Payload, 16, sluice::PriorityOrderTraits>;
  static_assert(Fifo::kDeliveryOrder == sluice::DeliveryOrder::kFifo);
  static_assert(Priority::kDeliveryOrder == sluice::DeliveryOrder::kPriority);
  static_assert(sluice::PriorityOrderTraits::Delivery::kCheckInterval == 1);
  static_assert(sluice::PriorityOrderTraits::Delivery::kStarvationLimit == 0);
  static_assert(Priority::kBytesPerSlot == Fifo::kBytesPerSlot);
  static_assert(Priority::kRingBytes == 3 * Fifo::kRingBytes);
  using Inline = Kind<sluice::ProducerModel::kSingle, sluice::SlotStorage::kInline>::Bus<>;
  static_assert(Inline::kRingBytes == 3 * Inline::kBytesPerSlot * 16);
  static_assert(sizeof(Inline) > Inline::kRingBytes, "inline storage holds all three rings");
  Priority bus;
  EXPECT_EQ(PublishThenTake(bus, "L0 M0 H0"), Labels("H0 M0 L0"));
  Fifo fifo;
  PublishAll(fifo, "L0 M0 H0");
  EXPECT_EQ(Take(fifo), Labels("L0 M0 H0"));
}

}  // namespace
}  // namespace priority_order_test
