// The observer sees every event the bus counts, once, with its figures:
// admissions by priority, refusals by outcome (full, lane full, pool
// empty, closed, rejected, timed out), batches with their fill and count,
// messages taken, errors. Its counts equal the bus's own statistics in
// FULL_FEATURED. The observer is tests/counting_observer.hpp, one file.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "counting_observer.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace sluice_test {
namespace observer_test {
namespace {

using sluice::MessagePriority;
using sluice::PublishOutcome;

struct Item {
  std::uint32_t seq;
};
using Payload = std::variant<Item, sluice::Loan<Item>>;

struct ObservedTraits : sluice::DefaultBusTraits {
  using Observer = CountingObserver;
};
struct ObservedOrderedTraits : sluice::PriorityOrderTraits {
  using Observer = CountingObserver;
};
struct ObservedLaneTraits : sluice::DefaultBusTraits {
  using Observer = CountingObserver;
  using Lanes = sluice::ProducerLanes<2, 8>;
};
struct ObservedSleepingTraits : sluice::SleepingConsumerTraits {
  using Observer = CountingObserver;
};

// The default is empty: its calls compile to nothing.
static_assert(std::is_empty_v<sluice::NoObserver>);
static_assert(std::is_same_v<sluice::DefaultBusTraits::Observer, sluice::NoObserver>);

template <typename Bus>
class ObserverTest : public ::testing::Test {};
using Buses = ::testing::Types<sluice::MpscBus<Payload, 16, ObservedTraits>,
                               sluice::SpscBus<Payload, 16, ObservedTraits>,
                               sluice::MpscBus<Payload, 16, ObservedOrderedTraits>>;
TYPED_TEST_SUITE(ObserverTest, Buses, IndexNames);

// Every admission, refusal and take, against the statistics.
TYPED_TEST(ObserverTest, SeesWhatTheStatisticsCountAndNothingMore) {
  TypeParam bus;
  const CountingObserver& seen = bus.GetObserver();
  ASSERT_TRUE(bus.PublishWithPriority(Item{0}, 0, MessagePriority::HIGH));
  ASSERT_TRUE(bus.Publish(Item{1}));
  std::uint32_t low = 0;
  while (bus.PublishWithPriority(Item{2}, 0, MessagePriority::LOW)) ++low;  // one refused
  EXPECT_FALSE(bus.PublishAttempt(Item{3}, 0, MessagePriority::LOW));       // not counted: not seen
  EXPECT_FALSE(bus.PublishWithPriority(Item{4}, 0, static_cast<MessagePriority>(9)));
  Item batch[8] = {};
  const sluice::PublishResult partial =
      bus.PublishBatch(batch, batch + 8, 0, MessagePriority::MEDIUM);  // MEDIUM: 13 of 16
  sluice::LoanPool<Item, 1> pool;
  [[maybe_unused]] const sluice::Loan<Item> held = pool.Acquire();  // the pool's only block
  EXPECT_EQ(bus.PublishLoan(pool.Acquire(), 0, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kPoolEmpty);

  EXPECT_EQ(seen.Admitted(MessagePriority::HIGH), 1u);
  EXPECT_EQ(seen.Admitted(MessagePriority::MEDIUM), 1u + partial.AdmittedCount());
  EXPECT_EQ(seen.Admitted(MessagePriority::LOW), low);
  EXPECT_EQ(seen.Refused(PublishOutcome::kRefusedFull), 1u + (8u - partial.AdmittedCount()));
  EXPECT_EQ(seen.Refused(PublishOutcome::kRejected), 1u);
  EXPECT_EQ(seen.Refused(PublishOutcome::kPoolEmpty), 1u);
  sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(seen.Admitted(), stats.messages_published);
  EXPECT_EQ(seen.Refused(PublishOutcome::kRefusedFull) + seen.Refused(PublishOutcome::kPoolEmpty),
            stats.messages_dropped);
  EXPECT_EQ(seen.Refused(PublishOutcome::kRejected), stats.messages_rejected);

  const auto depth = bus.QueueDepth();
  EXPECT_EQ(seen.Batches(), 0u);
  EXPECT_EQ(bus.ProcessBatch(5), 5u);
  EXPECT_EQ(seen.Batches(), 1u);
  EXPECT_EQ(seen.LastBatchFill(), depth);
  EXPECT_EQ(seen.LastBatchCount(), 5u);
  EXPECT_EQ(seen.Taken(), 5u);
  while (bus.ProcessBatch() > 0) {
  }
  EXPECT_EQ(seen.Taken(), depth);
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // an empty queue starts no batch
  EXPECT_EQ(seen.Batches(), 2u);
  bus.Close();
  EXPECT_FALSE(bus.Publish(Item{5}));
  EXPECT_EQ(seen.Refused(PublishOutcome::kClosed), 1u);
  stats = bus.GetStatistics();
  EXPECT_EQ(seen.Taken(), stats.messages_processed);
  EXPECT_EQ(seen.Refused(PublishOutcome::kClosed), stats.messages_refused_closed);
}

// OnDispatched (optional: CountingObserver has none) follows each message's
// callbacks or visitor, before its slot is released: the message is still
// in the queue's depth, and every callback of it has run.
struct DispatchEndObserver : sluice::NoObserver {
  // What OnDispatched saw: the callbacks run so far, the queue's depth.
  static inline std::vector<std::pair<std::uint32_t, std::size_t>> seen;
  static inline const std::uint32_t* callbacks = nullptr;
  static inline std::function<std::size_t()> depth;
  void OnDispatched(const sluice::MessageHeader&) noexcept {
    seen.emplace_back(*callbacks, depth());
  }
};
struct DispatchEndTraits : sluice::DefaultBusTraits {
  using Observer = DispatchEndObserver;
};
struct DispatchEndOrderedTraits : sluice::PriorityOrderTraits {
  using Observer = DispatchEndObserver;
};

template <typename Bus>
class DispatchEndTest : public ::testing::Test {};
using DispatchEndBuses = ::testing::Types<sluice::MpscBus<Payload, 16, DispatchEndTraits>,
                                          sluice::SpscBus<Payload, 16, DispatchEndTraits>,
                                          sluice::MpscBus<Payload, 16, DispatchEndOrderedTraits>>;
TYPED_TEST_SUITE(DispatchEndTest, DispatchEndBuses, IndexNames);

TYPED_TEST(DispatchEndTest, ComesAfterEachMessagesCallbacksBeforeItsRelease) {
  TypeParam bus;
  std::uint32_t callbacks = 0;
  DispatchEndObserver::callbacks = &callbacks;
  DispatchEndObserver::depth = [&bus] { return bus.QueueDepth(); };
  DispatchEndObserver::seen.clear();
  // Two subscribers: each message's OnDispatched after both.
  auto first = bus.template Subscribe<Item>([&callbacks](const Item&) { ++callbacks; });
  auto second = bus.template Subscribe<Item>([&callbacks](const Item&) { ++callbacks; });
  ASSERT_TRUE(first.IsValid() && second.IsValid());
  for (std::uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(Item{i}));
  EXPECT_EQ(bus.ProcessBatch(), 4u);
  const std::vector<std::pair<std::uint32_t, std::size_t>> by_callbacks{
      {2, 4}, {4, 3}, {6, 2}, {8, 1}};
  EXPECT_EQ(DispatchEndObserver::seen, by_callbacks);
  // Through a visitor: once each, after the visitor.
  DispatchEndObserver::seen.clear();
  callbacks = 0;
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(bus.Publish(Item{i}));
  EXPECT_EQ(bus.ProcessBatchWith([&callbacks](const auto&) { ++callbacks; }), 3u);
  const std::vector<std::pair<std::uint32_t, std::size_t>> by_visitor{{1, 3}, {2, 2}, {3, 1}};
  EXPECT_EQ(DispatchEndObserver::seen, by_visitor);
  DispatchEndObserver::depth = nullptr;
}

#if SLUICE_HAS_EXCEPTIONS
TYPED_TEST(ObserverTest, SeesEachErrorBeforeTheErrorCallback) {
  TypeParam bus;
  auto handle = bus.template Subscribe<Item>([](const Item& item) {
    if (item.seq == 1) throw std::runtime_error("bad item");
  });
  ASSERT_TRUE(handle.IsValid());
  static const CountingObserver* observed = nullptr;
  static std::uint64_t errors_seen_first = 0;
  observed = &bus.GetObserver();
  ASSERT_TRUE(bus.SetErrorCallback(
      [](const sluice::BusError&, void*) { errors_seen_first = observed->Errors(); }, nullptr));
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(bus.Publish(Item{i}));
  EXPECT_EQ(bus.ProcessBatch(), 3u);
  EXPECT_EQ(bus.GetObserver().Errors(), 1u);
  EXPECT_EQ(errors_seen_first, 1u);
  EXPECT_EQ(bus.GetStatistics().processing_errors, 1u);
}
#endif

TEST(ObserverLaneTest, SeesALanesRefusals) {
  sluice::MpscBus<Payload, 16, ObservedLaneTraits> bus;
  auto producer = bus.RegisterProducer("p");
  ASSERT_TRUE(producer);
  std::uint32_t admitted = 0;
  while (producer.PublishWithPriority(Item{admitted}, 0, MessagePriority::HIGH)) ++admitted;
  EXPECT_EQ(bus.GetObserver().Admitted(), admitted);
  EXPECT_EQ(bus.GetObserver().Refused(PublishOutcome::kLaneFull), 1u);
  EXPECT_EQ(bus.GetObserver().Refused(PublishOutcome::kLaneFull),
            producer.GetStatistics().messages_dropped);
}

TEST(ObserverBlockingTest, SeesATimedOutBlockingPublishOnce) {
  sluice::MpscBus<Payload, 16, ObservedSleepingTraits> bus;
  while (bus.PublishWithPriority(Item{0}, 0, MessagePriority::LOW)) {
  }
  const std::uint64_t full = bus.GetObserver().Refused(PublishOutcome::kRefusedFull);
  EXPECT_EQ(
      bus.PublishBlocking(Item{1}, 0, MessagePriority::LOW, std::chrono::milliseconds(1)).Outcome(),
      PublishOutcome::kTimedOut);
  EXPECT_EQ(bus.GetObserver().Refused(PublishOutcome::kTimedOut), 1u);
  EXPECT_EQ(bus.GetObserver().Refused(PublishOutcome::kRefusedFull), full);  // attempts unseen
}

}  // namespace
}  // namespace observer_test
}  // namespace sluice_test
