// The promises every bus keeps, written once and run against each: the
// in-process bus (MPSC, SPSC, priority-ordered, a registered producer's
// lane) and the shared-memory bus (a producer's lane in a segment).
// Publish results and counts, priority admission at each threshold, every
// admitted message dispatched once (HIGH first where the bus orders by
// priority), Close refusing what follows, latency never above the truth,
// the statistics identities. Typed subscriptions: each receives every
// message of its type once, in order, two of one type both receive it,
// none after Unsubscribe. Close then drain: each message admitted
// dispatched once, the bus drained only after the last, nothing after it,
// processed equal to what was dispatched. Close from inside a batch:
// nothing dispatched twice, publishes refused as closed. Loans: a loaned
// message dispatched once with the bytes written into it, an empty loan
// (the pool exhausted) refused as kPoolEmpty (kClosed once closed),
// blocks back after dispatch.
// Where the shared bus promises otherwise (docs/ipc.md, `Close`: what is
// queued at a Close is not dispatched, and a Close from a callback ends the
// batch after that message), the test asserts that promise. The shared bus
// runs twice: its producer in the consumer's process, and in a process of
// its own (forked, told what to publish over a pipe).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <sluice/admission.hpp>
#include <sluice/clock.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../typed_test_names.hpp"
#include "ipc_test_peer.hpp"

namespace conformance_test {
namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::Position;
using sluice::PublishOutcome;
using sluice::PublishResult;

struct Reading {
  std::uint64_t seq;
};
// A second type, for typed subscriptions.
struct Setting {
  std::uint64_t seq;
};
// A large payload, published by loan: its bytes follow from its seq.
struct Blob {
  std::uint64_t seq;
  unsigned char bytes[200];
};
constexpr unsigned char BlobByte(std::uint64_t seq, std::size_t i) {
  return static_cast<unsigned char>(seq * 31 + i);
}
bool HoldsItsBytes(const Blob& blob) {
  for (std::size_t i = 0; i < sizeof blob.bytes; ++i) {
    if (blob.bytes[i] != BlobByte(blob.seq, i)) return false;
  }
  return true;
}

// The payloads differ only in how a loan is carried: a LoanPool block in
// process, a block of the producer's lane in the segment.
using InProcessPayload = std::variant<Reading, Setting, sluice::Loan<Blob>>;
using SharedPayload = std::variant<Reading, Setting, sluice::ipc::Loaned<Blob>>;
constexpr std::size_t kCapacity = 64;
// Blocks a producer may have out: a lane's in the segment, and the
// in-process pool as many.
constexpr std::size_t kLoanBlocks = sluice::ipc::ShmBusTraits::kLoanBlocks;

constexpr MessagePriority kPriorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                           MessagePriority::HIGH};

// Every message's seq, whatever its type.
std::uint64_t SeqOf(const Reading& reading) { return reading.seq; }
std::uint64_t SeqOf(const Setting& setting) { return setting.seq; }
template <typename Loaned>
std::uint64_t SeqOf(const Loaned& loan) {
  return loan->seq;
}

// What a test asks of a bus. Publish goes through the producer each bus
// offers; Totals reads the counters as each bus keeps them.
struct Totals {
  std::uint64_t published = 0;
  std::uint64_t dropped = 0;
  std::uint64_t processed = 0;
  std::uint64_t dropped_by[3] = {};  // LOW, MEDIUM, HIGH
};

template <typename Bus>
constexpr bool kIsShared = false;
template <typename Payload, std::size_t kSize, typename Traits>
constexpr bool kIsShared<sluice::ipc::ShmBus<Payload, kSize, Traits>> = true;

// The consumer's side of a test, the same calls on every bus.
template <typename BusType>
struct ConsumerSide {
  using Bus = BusType;
  Bus bus;

  // Where the shared bus promises otherwise (docs/ipc.md, `Close`): its
  // Close discards what is queued (the in-process bus keeps it for the
  // consumer to drain), and a Close from a callback ends that batch after
  // the message.
  static constexpr bool kDrainsAfterClose = !kIsShared<Bus>;

  template <typename Visitor>
  std::uint32_t Dispatch(Visitor&& visitor,
                         std::uint32_t max = static_cast<std::uint32_t>(kCapacity)) {
    return bus.ProcessBatchWith(visitor, max);
  }
  std::uint32_t DispatchToSubscriptions() { return bus.ProcessBatch(); }
  template <typename T, typename Callback>
  sluice::SubscriptionHandle Subscribe(Callback&& callback) {
    return bus.template Subscribe<T>(std::forward<Callback>(callback));
  }
  sluice::UnsubscribeResult Unsubscribe(const sluice::SubscriptionHandle& handle) {
    return bus.Unsubscribe(handle);
  }
  void Close() { bus.Close(); }
  // Closed, and nothing left that the bus will dispatch: IsDrained in
  // process; the shared bus dispatches nothing once closed.
  bool Drained() const {
    if constexpr (kDrainsAfterClose) {
      return bus.IsDrained();
    } else {
      return !bus.IsOpen();
    }
  }
  std::size_t Depth() const { return bus.QueueDepth(); }
  Totals Counts() const {
    const auto s = bus.GetStatistics();
    return {s.messages_published,
            s.messages_dropped,
            s.messages_processed,
            {s.low_priority_dropped, s.medium_priority_dropped, s.high_priority_dropped}};
  }
  sluice::LatencySnapshot Latency() const { return bus.GetLatencyHistograms(); }
};

// The producer's side in this process: Self::Publisher() is the bus or a
// producer of it, which offer the same calls, and Self::TakeLoan() a
// block to write (empty when none is free).
template <typename Self>
struct PublishesInProcess {
  PublishResult Publish(std::uint64_t seq, MessagePriority priority) {
    return static_cast<Self&>(*this).Publisher().PublishWithPriority(Reading{seq}, 7, priority);
  }
  PublishResult PublishStamped(std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    return static_cast<Self&>(*this).Publisher().PublishFast(
        Reading{seq}, 7, std::chrono::nanoseconds(stamp), priority);
  }
  PublishResult PublishSetting(std::uint64_t seq, MessagePriority priority) {
    return static_cast<Self&>(*this).Publisher().PublishWithPriority(Setting{seq}, 7, priority);
  }
  // A Blob written into a loaned block and published; an empty loan (no
  // block free) is published as it is, for the bus to refuse.
  PublishResult PublishLoan(std::uint64_t seq, MessagePriority priority) {
    auto loan = static_cast<Self&>(*this).TakeLoan();
    if (loan) {
      loan->seq = seq;
      for (std::size_t i = 0; i < sizeof loan->bytes; ++i) loan->bytes[i] = BlobByte(seq, i);
    }
    return static_cast<Self&>(*this).Publisher().PublishLoan(std::move(loan), 7, priority);
  }
  // A loan that holds no block, whatever the pool has free.
  PublishResult PublishEmptyLoan(MessagePriority priority) {
    decltype(static_cast<Self&>(*this).TakeLoan()) empty;
    return static_cast<Self&>(*this).Publisher().PublishLoan(std::move(empty), 7, priority);
  }
};

// The in-process loans: a pool, a base listed before the bus so that it
// outlives the loans still queued there.
struct InProcessLoans {
  sluice::LoanPool<Blob, kLoanBlocks> pool;
  sluice::Loan<Blob> TakeLoan() { return pool.Acquire(); }
};

// An in-process bus publishing on the shared queue.
template <sluice::ProducerModel kModel, typename Traits>
struct InProcess : InProcessLoans,
                   ConsumerSide<sluice::AsyncBus<InProcessPayload, kCapacity, kModel, Traits>>,
                   PublishesInProcess<InProcess<kModel, Traits>> {
  using LoanMessage = sluice::Loan<Blob>;
  static constexpr bool kPriorityOrder =
      Traits::Delivery::kOrder == sluice::DeliveryOrder::kPriority;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = kCapacity;
  auto& Publisher() { return this->bus; }
  static std::uint64_t Now() { return sluice::detail::ClockNanos<typename Traits::Clock>(); }
};

// The lane is smaller than the bus's shared queue, so that a lane judged on
// the bus's capacity instead of its own is seen.
struct LaneTraits : sluice::PriorityOrderTraits {
  using Lanes = sluice::ProducerLanes<4, kCapacity>;
};

// An in-process bus publishing through a registered producer's lane.
struct InProcessLane : InProcessLoans,
                       ConsumerSide<sluice::MpscBus<InProcessPayload, 4 * kCapacity, LaneTraits>>,
                       PublishesInProcess<InProcessLane> {
  using LoanMessage = sluice::Loan<Blob>;
  static constexpr bool kPriorityOrder = true;
  static constexpr PublishOutcome kFull = PublishOutcome::kLaneFull;
  static constexpr Position kSlots = kCapacity;
  Bus::Producer producer = bus.RegisterProducer("conformance");
  Bus::Producer& Publisher() { return producer; }
  static std::uint64_t Now() { return sluice::detail::ClockNanos<LaneTraits::Clock>(); }
};

// A producer of the shared bus and its publish calls, in whichever process
// holds it (the consumer's, or the forked one's).
struct SharedProducer : PublishesInProcess<SharedProducer> {
  using Producer = sluice::ipc::ShmProducer<SharedPayload, kCapacity>;
  Producer producer;
  Producer& Publisher() { return producer; }
  sluice::ipc::ShmLoan<Blob> TakeLoan() { return producer.Loan<Blob>(); }
};

// What the shared-memory setups have in common: the bus, made.
struct SharedConsumer : ConsumerSide<sluice::ipc::ShmBus<SharedPayload, kCapacity>> {
  using LoanMessage = sluice::ipc::Loaned<Blob>;
  static constexpr bool kPriorityOrder = true;
  static constexpr PublishOutcome kFull = PublishOutcome::kRefusedFull;
  static constexpr Position kSlots = kCapacity;
  const std::string name = sluice_ipc_test::UniqueName();

  SharedConsumer() { EXPECT_EQ(bus.Create(name), sluice::ipc::AttachError::kNone); }
  static std::uint64_t Now() { return sluice::SteadyClock::NowNanos(); }
};

// The shared-memory bus: a segment, a producer attached to it.
struct SharedMemory : SharedConsumer, SharedProducer {
  SharedMemory() { EXPECT_EQ(producer.Attach(name), sluice::ipc::AttachError::kNone); }
};

// The shared-memory bus with its producer in another process: a child
// forked with the bus made, which attaches and publishes what it is told
// over a pipe and answers each publish's outcome.
struct SharedMemoryAcrossProcesses : SharedConsumer {
  enum class Kind : std::uint8_t { kReading, kSetting, kLoan, kEmptyLoan };
  struct Command {
    std::uint64_t seq;
    std::uint64_t stamp;  // 0: the producer's clock
    std::uint8_t priority;
    Kind kind;
  };
  pid_t child = -1;
  int to_child = -1;
  int from_child = -1;

  SharedMemoryAcrossProcesses() {
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
      SharedProducer publisher;
      std::uint8_t answer =
          publisher.producer.Attach(name) == sluice::ipc::AttachError::kNone ? 0 : 0xFF;
      if (::write(answers[1], &answer, 1) != 1) ::_exit(2);
      Command command;
      while (::read(commands[0], &command, sizeof command) == sizeof command) {
        answer = static_cast<std::uint8_t>(Perform(publisher, command).Outcome());
        if (::write(answers[1], &answer, 1) != 1) ::_exit(3);
      }
      publisher.producer.Detach();
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
  // In the child: the command, through the same calls as in process.
  static PublishResult Perform(SharedProducer& publisher, const Command& command) {
    const auto priority = static_cast<MessagePriority>(command.priority);
    switch (command.kind) {
      case Kind::kReading:
        return command.stamp == 0 ? publisher.Publish(command.seq, priority)
                                  : publisher.PublishStamped(command.seq, command.stamp, priority);
      case Kind::kSetting:
        return publisher.PublishSetting(command.seq, priority);
      case Kind::kLoan:
        return publisher.PublishLoan(command.seq, priority);
      case Kind::kEmptyLoan:
        return publisher.PublishEmptyLoan(priority);
    }
    return PublishResult(PublishOutcome::kRejected, priority);
  }
  PublishResult Ask(Kind kind, std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    const Command command{seq, stamp, static_cast<std::uint8_t>(priority), kind};
    std::uint8_t outcome = 0xFF;
    if (::write(to_child, &command, sizeof command) != sizeof command ||
        ::read(from_child, &outcome, 1) != 1) {
      ADD_FAILURE() << "the producer process did not answer";
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    return PublishResult(static_cast<PublishOutcome>(outcome), priority);
  }
  PublishResult Publish(std::uint64_t seq, MessagePriority priority) {
    return Ask(Kind::kReading, seq, 0, priority);
  }
  PublishResult PublishStamped(std::uint64_t seq, std::uint64_t stamp, MessagePriority priority) {
    return Ask(Kind::kReading, seq, stamp, priority);
  }
  PublishResult PublishSetting(std::uint64_t seq, MessagePriority priority) {
    return Ask(Kind::kSetting, seq, 0, priority);
  }
  PublishResult PublishLoan(std::uint64_t seq, MessagePriority priority) {
    return Ask(Kind::kLoan, seq, 0, priority);
  }
  PublishResult PublishEmptyLoan(MessagePriority priority) {
    return Ask(Kind::kEmptyLoan, 0, 0, priority);
  }
};

// A message as a test sees it dispatched: its seq and priority.
using Dispatched = std::pair<std::uint64_t, MessagePriority>;

template <typename Adapter>
class ConformanceTest : public ::testing::Test {
 protected:
  static Position Limit(MessagePriority priority) {
    const sluice::AdmissionThresholds thresholds;
    const std::uint8_t percent[] = {thresholds.low_percent, thresholds.medium_percent,
                                    thresholds.high_percent};
    return sluice::FillLimit(percent[static_cast<std::size_t>(priority)], Adapter::kSlots);
  }
  // The order in which the bus dispatches `published` (in publish order):
  // HIGH, MEDIUM, LOW, each in publish order, where it orders by priority.
  static std::vector<Dispatched> InDispatchOrder(const std::vector<Dispatched>& published) {
    if (!Adapter::kPriorityOrder) return published;
    std::vector<Dispatched> ordered;
    for (MessagePriority priority :
         {MessagePriority::HIGH, MessagePriority::MEDIUM, MessagePriority::LOW}) {
      for (const Dispatched& message : published) {
        if (message.second == priority) ordered.push_back(message);
      }
    }
    return ordered;
  }
  static std::vector<Dispatched> FirstOf(const std::vector<Dispatched>& messages,
                                         std::size_t count) {
    return {messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(count)};
  }
  // Publishes `count` readings from `first` on, of every priority by
  // turns; returns them in publish order.
  std::vector<Dispatched> PublishReadings(std::uint64_t first, std::uint64_t count) {
    std::vector<Dispatched> published;
    for (std::uint64_t seq = first; seq < first + count; ++seq) {
      const MessagePriority priority = kPriorities[(seq * 7) % 3];
      EXPECT_TRUE(bus_.Publish(seq, priority)) << seq;
      published.emplace_back(seq, priority);
    }
    return published;
  }
  // Dispatches everything queued: each message's seq and priority, in
  // order.
  std::vector<Dispatched> DispatchAll() {
    std::vector<Dispatched> seen;
    while (bus_.Dispatch([&seen](const auto& message, const MessageHeader& header) {
      seen.emplace_back(SeqOf(message), header.priority);
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
  for (int p = 0; p < 3; ++p) EXPECT_EQ(totals.dropped_by[p], 1u) << "priority " << p;
}

// Every admitted message is dispatched exactly once; a bus that orders by
// priority hands HIGH before MEDIUM before LOW, each in publish order.
TYPED_TEST(ConformanceTest, EveryAdmittedMessageIsDispatchedOnceInItsOrder) {
  const std::vector<Dispatched> published = this->PublishReadings(0, 30);
  const auto seen = this->DispatchAll();
  ASSERT_EQ(seen.size(), published.size());
  std::set<std::uint64_t> once;
  for (const auto& [seq, priority] : seen) EXPECT_TRUE(once.insert(seq).second) << seq;
  EXPECT_EQ(seen, this->InDispatchOrder(published));
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
      (void)this->bus_.Dispatch([](const auto&) {});
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
  for (MessagePriority priority : kPriorities) {
    ASSERT_TRUE(this->bus_.PublishStamped(1, stamp, priority));
  }
  ASSERT_EQ(this->DispatchAll().size(), 3u);
  const std::uint64_t after = TypeParam::Now();
  for (MessagePriority priority : kPriorities) {
    const sluice::LatencyHistogram histogram = this->bus_.Latency().For(priority);
    ASSERT_EQ(histogram.count, 1u) << sluice::ToString(priority);
    EXPECT_GE(histogram.sum_nanos, kAgo) << sluice::ToString(priority);
    EXPECT_LE(histogram.sum_nanos, after - stamp) << sluice::ToString(priority);
  }
}

// A typed subscription receives every admitted message of its type once,
// in the bus's order, through ProcessBatch, and none of another type; two
// subscriptions of one type each receive every such message; after
// Unsubscribe (removed once) a subscription receives nothing more while
// the other goes on.
TYPED_TEST(ConformanceTest, SubscriptionsReceiveEachMessageOfTheirTypeOnceUntilUnsubscribed) {
  std::vector<Dispatched> first;
  std::vector<Dispatched> second;
  std::vector<Dispatched> settings;
  const sluice::SubscriptionHandle first_handle = this->bus_.template Subscribe<Reading>(
      [&first](const Reading& reading, const MessageHeader& header) {
        first.emplace_back(reading.seq, header.priority);
      });
  const sluice::SubscriptionHandle second_handle = this->bus_.template Subscribe<Reading>(
      [&second](const Reading& reading, const MessageHeader& header) {
        second.emplace_back(reading.seq, header.priority);
      });
  const sluice::SubscriptionHandle settings_handle = this->bus_.template Subscribe<Setting>(
      [&settings](const Setting& setting, const MessageHeader& header) {
        settings.emplace_back(setting.seq, header.priority);
      });
  ASSERT_TRUE(first_handle.IsValid());
  ASSERT_TRUE(second_handle.IsValid());
  ASSERT_TRUE(settings_handle.IsValid());

  std::vector<Dispatched> readings_published;
  std::vector<Dispatched> settings_published;
  for (std::uint64_t seq = 0; seq < 24; ++seq) {
    const MessagePriority priority = kPriorities[(seq * 7) % 3];
    if (seq % 3 == 1) {
      ASSERT_TRUE(this->bus_.PublishSetting(seq, priority));
      settings_published.emplace_back(seq, priority);
    } else {
      ASSERT_TRUE(this->bus_.Publish(seq, priority));
      readings_published.emplace_back(seq, priority);
    }
  }
  std::uint32_t taken = 0;
  while (const std::uint32_t batch = this->bus_.DispatchToSubscriptions()) taken += batch;
  EXPECT_EQ(taken, 24u);
  const std::vector<Dispatched> readings = this->InDispatchOrder(readings_published);
  EXPECT_EQ(first, readings);
  EXPECT_EQ(second, readings);
  EXPECT_EQ(settings, this->InDispatchOrder(settings_published));

  EXPECT_TRUE(this->bus_.Unsubscribe(first_handle).Removed());
  EXPECT_FALSE(this->bus_.Unsubscribe(first_handle).Removed());  // once
  const std::vector<Dispatched> later = this->PublishReadings(100, 6);
  while (this->bus_.DispatchToSubscriptions() != 0) {
  }
  EXPECT_EQ(first, readings);  // nothing after Unsubscribe
  std::vector<Dispatched> both = readings;
  for (const Dispatched& message : this->InDispatchOrder(later)) both.push_back(message);
  EXPECT_EQ(second, both);
  EXPECT_EQ(this->bus_.Counts().processed, 30u);
  EXPECT_TRUE(this->bus_.Unsubscribe(second_handle).Removed());
  EXPECT_TRUE(this->bus_.Unsubscribe(settings_handle).Removed());
}

// Close then drain: some messages dispatched, Close, then one message per
// batch until the bus is drained. Each admitted message is dispatched
// exactly once, in order; the bus says drained only after the last, and a
// batch after that takes nothing; processed counts what was dispatched,
// which in process is everything admitted. The shared bus dispatches
// nothing queued at the Close (docs/ipc.md, `Close`: "What is still queued
// is not dispatched"): it is drained at the Close, having dispatched what
// it took before.
TYPED_TEST(ConformanceTest, AfterCloseEachAdmittedMessageIsDispatchedOnceThenTheBusIsDrained) {
  constexpr std::uint64_t kMessages = 20;
  constexpr std::size_t kBeforeClose = 6;
  const std::vector<Dispatched> expected =
      this->InDispatchOrder(this->PublishReadings(0, kMessages));
  std::vector<Dispatched> seen;
  auto record = [&seen](const auto& message, const MessageHeader& header) {
    seen.emplace_back(SeqOf(message), header.priority);
  };
  for (std::size_t i = 0; i < kBeforeClose; ++i) ASSERT_EQ(this->bus_.Dispatch(record, 1), 1u);
  EXPECT_FALSE(this->bus_.Drained());  // not closed
  this->bus_.Close();
  const std::size_t dispatched = TypeParam::kDrainsAfterClose ? kMessages : kBeforeClose;
  while (!this->bus_.Drained()) {
    // Not drained: a message is left, and the next batch takes it.
    ASSERT_LT(seen.size(), dispatched) << "not drained after the last message";
    ASSERT_EQ(this->bus_.Dispatch(record, 1), 1u) << "not drained, and nothing to dispatch";
  }
  EXPECT_EQ(seen, this->FirstOf(expected, dispatched));  // each once, in order
  EXPECT_EQ(this->bus_.Dispatch(record), 0u);
  EXPECT_TRUE(this->bus_.Drained());
  EXPECT_EQ(this->bus_.Depth(), 0u);
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published, kMessages);
  EXPECT_EQ(totals.processed, dispatched);
  EXPECT_EQ(totals.dropped, 0u);
}

// Close from inside a batch, at its fifth message, which then publishes:
// refused as closed, as is a publish after the batch. Nothing is
// dispatched twice. In process the batch goes on and every message
// admitted before the Close is dispatched once, in this batch or a later
// one. The shared bus ends the batch after the message whose callback
// closed it, and what was still queued is not dispatched (docs/ipc.md,
// `Close`: "From a callback it ends the batch after that message";
// statistics as at the end of that batch).
TYPED_TEST(ConformanceTest, ACloseFromInsideABatchDispatchesNothingTwice) {
  constexpr std::uint64_t kMessages = 12;
  constexpr std::size_t kClosingMessage = 5;
  const std::vector<Dispatched> expected =
      this->InDispatchOrder(this->PublishReadings(0, kMessages));
  std::vector<Dispatched> seen;
  std::vector<PublishOutcome> inside;
  auto visitor = [this, &seen, &inside](const auto& message, const MessageHeader& header) {
    seen.emplace_back(SeqOf(message), header.priority);
    if (seen.size() == kClosingMessage) {
      this->bus_.Close();
      for (MessagePriority priority : kPriorities) {
        inside.push_back(this->bus_.Publish(100, priority).Outcome());
      }
    }
  };
  const std::uint32_t first_batch = this->bus_.Dispatch(visitor);
  const std::size_t dispatched = TypeParam::kDrainsAfterClose ? kMessages : kClosingMessage;
  if (!TypeParam::kDrainsAfterClose) {
    EXPECT_EQ(first_batch, kClosingMessage);
  }
  for (std::uint64_t batches = 0; !this->bus_.Drained(); ++batches) {
    ASSERT_LT(batches, kMessages) << "never drained";
    ASSERT_NE(this->bus_.Dispatch(visitor), 0u) << "not drained, and nothing to dispatch";
  }
  EXPECT_EQ(this->bus_.Dispatch(visitor), 0u);
  EXPECT_EQ(seen, this->FirstOf(expected, dispatched));  // each once, in order
  EXPECT_EQ(inside, std::vector<PublishOutcome>(3, PublishOutcome::kClosed));
  for (MessagePriority priority : kPriorities) {
    EXPECT_EQ(this->bus_.Publish(101, priority).Outcome(), PublishOutcome::kClosed);
  }
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published, kMessages);
  EXPECT_EQ(totals.processed, dispatched);
  EXPECT_EQ(totals.dropped, 0u);  // closed is not dropped
}

// A loaned message is dispatched once, holding the bytes written into its
// block. With every block out (in messages not yet dispatched) the next
// loan is empty and its PublishLoan refused, kPoolEmpty, never admitted,
// counted once as dropped. Dispatch hands the blocks back: the next loan is
// admitted.
TYPED_TEST(ConformanceTest, ALoanIsDispatchedOnceWithItsBytesAndAnEmptyPoolIsRefused) {
  std::vector<Dispatched> published;
  for (std::uint64_t seq = 0; seq < kLoanBlocks; ++seq) {
    const MessagePriority priority = kPriorities[seq % 3];
    ASSERT_TRUE(this->bus_.PublishLoan(seq, priority)) << seq;
    published.emplace_back(seq, priority);
  }
  const PublishResult refused = this->bus_.PublishLoan(kLoanBlocks, MessagePriority::HIGH);
  EXPECT_EQ(refused.Outcome(), PublishOutcome::kPoolEmpty);
  EXPECT_FALSE(refused.IsAdmitted());
  EXPECT_EQ(this->bus_.Counts().published, kLoanBlocks);
  EXPECT_EQ(this->bus_.Counts().dropped, 1u);

  std::vector<Dispatched> seen;
  std::size_t loans = 0;
  std::size_t intact = 0;
  auto record = [&](const auto& message, const MessageHeader& header) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>,
                                 typename TypeParam::LoanMessage>) {
      ++loans;
      intact += HoldsItsBytes(*message) ? 1 : 0;
    }
    seen.emplace_back(SeqOf(message), header.priority);
  };
  while (this->bus_.Dispatch(record) != 0) {
  }
  EXPECT_EQ(seen, this->InDispatchOrder(published));
  EXPECT_EQ(loans, kLoanBlocks);
  EXPECT_EQ(intact, kLoanBlocks);

  // Every block came back: as many loans again are admitted.
  for (std::uint64_t seq = 50; seq < 50 + kLoanBlocks; ++seq) {
    ASSERT_TRUE(this->bus_.PublishLoan(seq, MessagePriority::LOW)) << seq;
  }
  while (this->bus_.Dispatch(record) != 0) {
  }
  EXPECT_EQ(seen.back(), Dispatched(50 + kLoanBlocks - 1, MessagePriority::LOW));
  EXPECT_EQ(intact, 2 * kLoanBlocks);
  const Totals totals = this->bus_.Counts();
  EXPECT_EQ(totals.published, 2 * kLoanBlocks);
  EXPECT_EQ(totals.processed, 2 * kLoanBlocks);
}

// Once the bus is closed, a PublishLoan is refused as closed on every bus,
// whether its loan holds a block or the pool had none left (an empty loan):
// the closed bus is the reason it cannot be published either way.
TYPED_TEST(ConformanceTest, AfterCloseAnEmptyLoanIsRefusedAsClosed) {
  for (std::uint64_t seq = 0; seq < kLoanBlocks; ++seq) {
    ASSERT_TRUE(this->bus_.PublishLoan(seq, MessagePriority::HIGH)) << seq;
  }
  EXPECT_EQ(this->bus_.PublishLoan(kLoanBlocks, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kPoolEmpty);
  this->bus_.Close();
  for (MessagePriority priority : kPriorities) {
    EXPECT_EQ(this->bus_.PublishEmptyLoan(priority).Outcome(), PublishOutcome::kClosed)
        << sluice::ToString(priority);
    EXPECT_EQ(this->bus_.PublishLoan(kLoanBlocks + 1, priority).Outcome(), PublishOutcome::kClosed)
        << sluice::ToString(priority);
  }
}

}  // namespace
}  // namespace conformance_test
