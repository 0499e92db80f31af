// The promises every bus keeps, written once and run against each: the
// in-process bus (MPSC, SPSC, priority-ordered, a registered producer's
// lane) and the shared-memory bus (a producer's lane in a segment).
// Publish results and counts, priority admission at each threshold, every
// admitted message dispatched once (HIGH first where the bus orders by
// priority), Close refusing what follows, latency never above the truth,
// the statistics identities. The shared bus runs twice: its producer in
// the consumer's process, and in a process of its own (forked, told what
// to publish over a pipe).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <sluice/admission.hpp>
#include <sluice/clock.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <variant>
#include <vector>

#include "../typed_test_names.hpp"
#include "ipc_test_peer.hpp"

namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::Position;
using sluice::PublishOutcome;
using sluice::PublishResult;

struct Reading {
  std::uint64_t seq;
};
using Payload = std::variant<Reading>;
constexpr std::size_t kCapacity = 64;

constexpr MessagePriority kPriorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                           MessagePriority::HIGH};

// What a test asks of a bus. Publish goes through the producer each bus
// offers; Totals reads the counters as each bus keeps them.
struct Totals {
  std::uint64_t published = 0;
  std::uint64_t dropped = 0;
  std::uint64_t processed = 0;
};

// The consumer's side of a test, the same calls on every bus.
template <typename BusType>
struct ConsumerSide {
  using Bus = BusType;
  Bus bus;

  template <typename Visitor>
  std::uint32_t Dispatch(Visitor&& visitor) {
    return bus.ProcessBatchWith(visitor);
  }
  void Close() { bus.Close(); }
  std::size_t Depth() const { return bus.QueueDepth(); }
  Totals Counts() const {
    const auto s = bus.GetStatistics();
    return {s.messages_published, s.messages_dropped, s.messages_processed};
  }
  sluice::LatencySnapshot Latency() const { return bus.GetLatencyHistograms(); }
};

// The producer's side in this process: Self::Publisher() is the bus or a
// producer of it, which offer the same calls.
template <typename Self>
struct PublishesInProcess {
  PublishResult Publish(std::uint64_t seq, MessagePriority priority) {
    return static_cast<Self&>(*this).Publisher().PublishWithPriority(Reading{seq}, 7, priority);
  }
  PublishResult PublishStamped(std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    return static_cast<Self&>(*this).Publisher().PublishFast(
        Reading{seq}, 7, std::chrono::nanoseconds(stamp), priority);
  }
};

// An in-process bus publishing on the shared queue.
template <sluice::ProducerModel kModel, typename Traits>
struct InProcess : ConsumerSide<sluice::AsyncBus<Payload, kCapacity, kModel, Traits>>,
                   PublishesInProcess<InProcess<kModel, Traits>> {
  static constexpr bool kPriorityOrder =
      Traits::Delivery::kOrder == sluice::DeliveryOrder::kPriority;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = kCapacity;
  auto& Publisher() { return this->bus; }
  static std::uint64_t Now() { return sluice::detail::ClockNanos<typename Traits::Clock>(); }
};

struct LaneTraits : sluice::PriorityOrderTraits {
  using Lanes = sluice::ProducerLanes<4, kCapacity>;
};

// An in-process bus publishing through a registered producer's lane.
struct InProcessLane : ConsumerSide<sluice::MpscBus<Payload, kCapacity, LaneTraits>>,
                       PublishesInProcess<InProcessLane> {
  static constexpr bool kPriorityOrder = true;
  static constexpr PublishOutcome kFull = PublishOutcome::kLaneFull;
  static constexpr Position kSlots = kCapacity;
  Bus::Producer producer = bus.RegisterProducer("conformance");
  Bus::Producer& Publisher() { return producer; }
  static std::uint64_t Now() { return sluice::detail::ClockNanos<LaneTraits::Clock>(); }
};

// The shared-memory bus: a segment, a producer attached to it.
struct SharedMemory : ConsumerSide<sluice::ipc::ShmBus<Payload, kCapacity>>,
                      PublishesInProcess<SharedMemory> {
  static constexpr bool kPriorityOrder = true;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = kCapacity;
  sluice::ipc::ShmProducer<Payload, kCapacity> producer;

  SharedMemory() {
    const std::string name = sluice_ipc_test::UniqueName();
    EXPECT_EQ(bus.Create(name), sluice::ipc::AttachError::kNone);
    EXPECT_EQ(producer.Attach(name), sluice::ipc::AttachError::kNone);
  }
  sluice::ipc::ShmProducer<Payload, kCapacity>& Publisher() { return producer; }
  static std::uint64_t Now() { return sluice::SteadyClock::NowNanos(); }
};

// The shared-memory bus with its producer in another process: a child
// forked with the bus made, which attaches and publishes what it is told
// over a pipe and answers each publish's outcome.
struct SharedMemoryAcrossProcesses : ConsumerSide<sluice::ipc::ShmBus<Payload, kCapacity>> {
  using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
  static constexpr bool kPriorityOrder = true;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = kCapacity;
  struct Command {
    std::uint64_t seq;
    std::uint64_t stamp;  // 0: the producer's clock
    std::uint8_t priority;
  };
  pid_t child = -1;
  int to_child = -1;
  int from_child = -1;

  SharedMemoryAcrossProcesses() {
    const std::string name = sluice_ipc_test::UniqueName();
    EXPECT_EQ(bus.Create(name), sluice::ipc::AttachError::kNone);
    int commands[2];
    int answers[2];
    if (::pipe(commands) != 0 || ::pipe(answers) != 0) {
      ADD_FAILURE() << "pipe";
      return;
    }
    child = ::fork();
    if (child == 0) {
      ::close(commands[1]);
      ::close(answers[0]);
      Producer producer;
      std::uint8_t answer = producer.Attach(name) == sluice::ipc::AttachError::kNone ? 0 : 0xFF;
      if (::write(answers[1], &answer, 1) != 1) ::_exit(2);
      Command command;
      while (::read(commands[0], &command, sizeof command) == sizeof command) {
        const auto priority = static_cast<MessagePriority>(command.priority);
        const PublishResult result =
            command.stamp == 0
                ? producer.PublishWithPriority(Reading{command.seq}, 7, priority)
                : producer.PublishFast(Reading{command.seq}, 7,
                                       std::chrono::nanoseconds(command.stamp), priority);
        answer = static_cast<std::uint8_t>(result.Outcome());
        if (::write(answers[1], &answer, 1) != 1) ::_exit(3);
      }
      producer.Detach();
      ::_exit(0);
    }
    ::close(commands[0]);
    ::close(answers[1]);
    to_child = commands[1];
    from_child = answers[0];
    std::uint8_t attached = 0xFF;
    EXPECT_EQ(::read(from_child, &attached, 1), 1);
    EXPECT_EQ(attached, 0) << "the producer process could not attach";
  }
  ~SharedMemoryAcrossProcesses() {
    if (to_child >= 0) ::close(to_child);
    if (from_child >= 0) ::close(from_child);
    if (child > 0) {
      int status = 0;
      ::waitpid(child, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  PublishResult Ask(std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    const Command command{seq, stamp, static_cast<std::uint8_t>(priority)};
    std::uint8_t outcome = 0xFF;
    if (::write(to_child, &command, sizeof command) != sizeof command ||
        ::read(from_child, &outcome, 1) != 1) {
      ADD_FAILURE() << "the producer process did not answer";
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    return PublishResult(static_cast<PublishOutcome>(outcome), priority);
  }
  PublishResult Publish(std::uint64_t seq, MessagePriority priority) {
    return Ask(seq, 0, priority);
  }
  PublishResult PublishStamped(std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    return Ask(seq, stamp, priority);
  }
  static std::uint64_t Now() { return sluice::SteadyClock::NowNanos(); }
};

template <typename Adapter>
class ConformanceTest : public ::testing::Test {
 protected:
  static Position Limit(MessagePriority priority) {
    const sluice::AdmissionThresholds thresholds;
    const std::uint8_t percent[] = {thresholds.low_percent, thresholds.medium_percent,
                                    thresholds.high_percent};
    return sluice::FillLimit(percent[static_cast<std::size_t>(priority)], Adapter::kSlots);
  }
  // Dispatches everything queued: each message's seq and priority, in
  // order.
  std::vector<std::pair<std::uint64_t, MessagePriority>> DispatchAll() {
    std::vector<std::pair<std::uint64_t, MessagePriority>> seen;
    while (bus_.Dispatch([&seen](const Reading& reading, const MessageHeader& header) {
      seen.emplace_back(reading.seq, header.priority);
    }) != 0) {
    }
    return seen;
  }
  Adapter bus_;
};

using Buses =
    ::testing::Types<InProcess<sluice::ProducerModel::kMulti, sluice::DefaultBusTraits>,
                     InProcess<sluice::ProducerModel::kSingle, sluice::DefaultBusTraits>,
                     InProcess<sluice::ProducerModel::kMulti, sluice::PriorityOrderTraits>,
                     InProcessLane, SharedMemory, SharedMemoryAcrossProcesses>;
TYPED_TEST_SUITE(ConformanceTest, Buses, sluice_test::IndexNames);

// Each priority is admitted while the fill is below its threshold and
// refused at it, LOW first, then MEDIUM, HIGH last; each refusal is
// counted once, as dropped, and says why.
TYPED_TEST(ConformanceTest, EachPriorityIsAdmittedBelowItsThresholdAndRefusedAtIt) {
  std::uint64_t seq = 0;
  Position fill = 0;
  for (MessagePriority priority : kPriorities) {
    for (; fill < this->Limit(priority); ++fill) {
      ASSERT_TRUE(this->bus_.Publish(seq++, priority)) << fill;
    }
    const PublishResult refused = this->bus_.Publish(seq++, priority);
    EXPECT_EQ(refused.Outcome(), TypeParam::kFull);
    EXPECT_FALSE(refused.IsAdmitted());
  }
  EXPECT_EQ(this->bus_.Depth(), this->Limit(MessagePriority::HIGH));
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published, this->Limit(MessagePriority::HIGH));
  EXPECT_EQ(totals.dropped, 3u);
}

// Every admitted message is dispatched exactly once; a bus that orders by
// priority hands HIGH before MEDIUM before LOW, each in publish order.
TYPED_TEST(ConformanceTest, EveryAdmittedMessageIsDispatchedOnceInItsOrder) {
  std::vector<std::pair<std::uint64_t, MessagePriority>> published;
  for (std::uint64_t seq = 0; seq < 30; ++seq) {
    const MessagePriority priority = kPriorities[(seq * 7) % 3];
    ASSERT_TRUE(this->bus_.Publish(seq, priority));
    published.emplace_back(seq, priority);
  }
  const auto seen = this->DispatchAll();
  ASSERT_EQ(seen.size(), published.size());
  std::set<std::uint64_t> once;
  for (const auto& [seq, priority] : seen) EXPECT_TRUE(once.insert(seq).second) << seq;
  if constexpr (TypeParam::kPriorityOrder) {
    std::vector<std::pair<std::uint64_t, MessagePriority>> expected;
    for (MessagePriority priority :
         {MessagePriority::HIGH, MessagePriority::MEDIUM, MessagePriority::LOW}) {
      for (const auto& message : published) {
        if (message.second == priority) expected.push_back(message);
      }
    }
    EXPECT_EQ(seen, expected);
  } else {
    EXPECT_EQ(seen, published);
  }
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published, 30u);
  EXPECT_EQ(totals.processed, 30u);
}

// After Close every publish is refused as closed; nothing more is admitted.
TYPED_TEST(ConformanceTest, AfterCloseEveryPublishIsRefusedAsClosed) {
  ASSERT_TRUE(this->bus_.Publish(1, MessagePriority::HIGH));
  this->bus_.Close();
  for (MessagePriority priority : kPriorities) {
    EXPECT_EQ(this->bus_.Publish(2, priority).Outcome(), PublishOutcome::kClosed);
  }
  EXPECT_EQ(this->bus_.Counts().dropped, 0u);  // closed is not dropped
}

// The statistics add up at any point: what was published is processed or
// still queued; what was attempted is published or dropped.
TYPED_TEST(ConformanceTest, TheStatisticsAddUp) {
  std::uint64_t attempted = 0;
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    (void)this->bus_.Publish(seq, kPriorities[seq % 3]);
    ++attempted;
    if (seq % 50 == 49) {  // fills past LOW's threshold in between
      (void)this->bus_.Dispatch([](const Reading&) {});
    }
  }
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published + totals.dropped, attempted);
  EXPECT_EQ(totals.published, totals.processed + this->bus_.Depth());
  EXPECT_GT(totals.dropped, 0u);
}

// The latency recorded is never above the truth: a message stamped a known
// time ago is recorded at least that, and at most the time from its stamp
// to the end of the dispatch that took it.
TYPED_TEST(ConformanceTest, LatencyIsNeverAboveTheTruth) {
  constexpr std::uint64_t kAgo = 5'000'000;  // 5 ms
  const std::uint64_t stamp = TypeParam::Now() - kAgo;
  ASSERT_TRUE(this->bus_.PublishStamped(1, stamp, MessagePriority::HIGH));
  ASSERT_EQ(this->DispatchAll().size(), 1u);
  const std::uint64_t after = TypeParam::Now();
  const sluice::LatencyHistogram high = this->bus_.Latency().For(MessagePriority::HIGH);
  ASSERT_EQ(high.count, 1u);
  EXPECT_GE(high.sum_nanos, kAgo);
  EXPECT_LE(high.sum_nanos, after - stamp);
}

}  // namespace
