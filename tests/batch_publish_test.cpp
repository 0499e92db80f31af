// Emplace (a message constructed in its slot) and PublishBatch (several
// messages with one claim), on one thread.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace batch_publish_test {
namespace {

// Counts copies and moves: constructed in place means neither happened.
struct Counted {
  static inline int copies = 0;
  static inline int moves = 0;
  std::uint32_t a;
  std::uint32_t b;
  Counted(std::uint32_t x, std::uint32_t y) noexcept : a(x), b(y) {}
  Counted(const Counted& other) noexcept : a(other.a), b(other.b) { ++copies; }
  Counted(Counted&& other) noexcept : a(other.a), b(other.b) { ++moves; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) = default;
};

struct Reading {
  std::uint32_t seq;
};

#if SLUICE_HAS_EXCEPTIONS
// Not trivially copyable, so a throwing emplace leaves a variant valueless.
struct MayThrow {
  int value;
  explicit MayThrow(int v) : value(v) {
    if (v < 0) throw std::runtime_error("negative");
  }
  MayThrow(const MayThrow& other) noexcept : value(other.value) {}
  MayThrow& operator=(const MayThrow&) = default;
};
using Payload = std::variant<Counted, Reading, MayThrow>;
#else
using Payload = std::variant<Counted, Reading>;
#endif

using Bus = sluice::MpscBus<Payload, 16>;
using SpscBus = sluice::SpscBus<Payload, 16>;

TEST(EmplaceTest, ConstructsTheMessageInItsSlot) {
  Bus bus;
  Counted::copies = Counted::moves = 0;
  ASSERT_TRUE(bus.Emplace<Counted>(7, sluice::MessagePriority::HIGH, 1u, 2u));
  EXPECT_EQ(Counted::copies, 0);
  EXPECT_EQ(Counted::moves, 0);
  int seen = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
    const auto& message = std::get<Counted>(envelope.payload);
    EXPECT_EQ(message.a, 1u);
    EXPECT_EQ(message.b, 2u);
    EXPECT_EQ(envelope.header.sender_id, 7u);
    EXPECT_EQ(envelope.header.priority, sluice::MessagePriority::HIGH);
    ++seen;
  }),
            1u);
  EXPECT_EQ(seen, 1);
}

TEST(EmplaceTest, RefusesABadPriorityAndCountsItAsRejected) {
  Bus bus;
  EXPECT_FALSE(bus.Emplace<Reading>(0, static_cast<sluice::MessagePriority>(9), 1u));
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
}

TEST(EmplaceTest, IsRefusedAtTheThresholdLikeAPublish) {
  Bus bus;
  std::size_t admitted = 0;
  while (bus.Emplace<Reading>(0, sluice::MessagePriority::LOW, 1u)) ++admitted;
  EXPECT_EQ(admitted, sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 16));
  EXPECT_EQ(bus.GetStatistics().low_priority_dropped, 1u);
}

#if SLUICE_HAS_EXCEPTIONS
TEST(EmplaceTest, AThrowingConstructorClaimsNoSlot) {
  Bus bus;
  EXPECT_THROW((void)bus.Emplace<MayThrow>(0, sluice::MessagePriority::HIGH, -1),
               std::runtime_error);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  ASSERT_TRUE(bus.Emplace<MayThrow>(0, sluice::MessagePriority::HIGH, 5));
  EXPECT_EQ(bus.ProcessBatchWith([](const auto&) {}), 1u);
}
#endif

template <typename B>
void ExpectBatchInOrder(B& bus, std::uint32_t count, std::uint32_t first_seq) {
  std::uint32_t next = first_seq;
  std::uint64_t previous_id = 0;
  std::uint64_t stamp = 0;
  bool first = true;
  EXPECT_EQ(bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
    EXPECT_EQ(std::get<Reading>(envelope.payload).seq, next++);
    if (!first) {
      EXPECT_EQ(envelope.header.msg_id, previous_id + 1);  // each its own id
      EXPECT_EQ(envelope.header.timestamp_ns, stamp);      // one clock reading
    }
    previous_id = envelope.header.msg_id;
    stamp = envelope.header.timestamp_ns;
    first = false;
  }),
            count);
}

template <typename B>
class PublishBatchTest : public ::testing::Test {};
using Buses = ::testing::Types<Bus, SpscBus>;
TYPED_TEST_SUITE(PublishBatchTest, Buses, sluice_test::IndexNames);

TYPED_TEST(PublishBatchTest, AdmitsAWholeBatchInOrder) {
  TypeParam bus;
  std::vector<Reading> batch;
  for (std::uint32_t i = 0; i < 10; ++i) batch.push_back(Reading{i});
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 3, sluice::MessagePriority::HIGH)
                .AdmittedCount(),
            10u);
  EXPECT_EQ(bus.GetStatistics().high_priority_published, 10u);
  ExpectBatchInOrder(bus, 10, 0);
}

TYPED_TEST(PublishBatchTest, AdmitsAsManyAsFitAndCountsTheRestAsDropped) {
  TypeParam bus;
  // LOW is refused from 60 % of 16 slots: 10 fit.
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 16);
  ASSERT_TRUE(bus.Publish(Reading{100}));  // one already queued (MEDIUM)
  std::array<Reading, 16> batch{};
  for (std::uint32_t i = 0; i < 16; ++i) batch[i] = Reading{i};
  const std::size_t admitted =
      bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::LOW).AdmittedCount();
  EXPECT_EQ(admitted, limit - 1);
  EXPECT_EQ(bus.QueueDepth(), limit);
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.low_priority_published, limit - 1);
  EXPECT_EQ(stats.low_priority_dropped, 16 - (limit - 1));
  // At the limit: nothing more.
  EXPECT_EQ(
      bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::LOW).AdmittedCount(),
      0u);
}

TYPED_TEST(PublishBatchTest, AnEmptyRangeOrABadPriorityAdmitsNothing) {
  TypeParam bus;
  std::vector<Reading> none;
  EXPECT_EQ(bus.PublishBatch(none.begin(), none.end(), 0).AdmittedCount(), 0u);
  std::vector<Reading> some{{1}, {2}};
  EXPECT_EQ(bus.PublishBatch(some.begin(), some.end(), 0, static_cast<sluice::MessagePriority>(3))
                .AdmittedCount(),
            0u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TYPED_TEST(PublishBatchTest, ABatchLargerThanTheRingIsCutAtTheThreshold) {
  TypeParam bus;
  std::vector<Reading> batch;
  for (std::uint32_t i = 0; i < 40; ++i) batch.push_back(Reading{i});
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().high_percent, 16);
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::HIGH)
                .AdmittedCount(),
            limit);
  ExpectBatchInOrder(bus, static_cast<std::uint32_t>(limit), 0);
}

// Every message of a batch is admitted or counted: attempts = published +
// dropped, also for a batch split into several runs (it is longer than the
// ring). Before, only the first run's refused part was counted.
TYPED_TEST(PublishBatchTest, ABatchLongerThanTheRingCountsEveryRefusal) {
  TypeParam bus;
  std::vector<Reading> batch;
  for (std::uint32_t i = 0; i < 53; ++i) batch.push_back(Reading{i});
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().low_percent, 16);
  const sluice::PublishResult result =
      bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::LOW);
  EXPECT_EQ(result.AdmittedCount(), limit);
  EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kRefusedFull);
  EXPECT_EQ(result.Priority(), sluice::MessagePriority::LOW);
  EXPECT_FALSE(result);
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.low_priority_published, limit);
  EXPECT_EQ(stats.low_priority_dropped, 53 - limit);
  EXPECT_EQ(stats.messages_published + stats.messages_dropped, 53u);
}

TYPED_TEST(PublishBatchTest, OnAClosedBusEveryMessageIsCountedAsRefusedClosed) {
  TypeParam bus;
  bus.Close();
  std::vector<Reading> batch;
  for (std::uint32_t i = 0; i < 53; ++i) batch.push_back(Reading{i});
  const sluice::PublishResult result =
      bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::LOW);
  EXPECT_EQ(result.AdmittedCount(), 0u);
  EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kClosed);
  EXPECT_EQ(bus.GetStatistics().messages_refused_closed, 53u);
  EXPECT_EQ(bus.GetStatistics().messages_dropped, 0u);
}

TYPED_TEST(PublishBatchTest, AWholeBatchIsAdmittedWithItsCount) {
  TypeParam bus;
  std::vector<Reading> batch{{1}, {2}, {3}};
  const sluice::PublishResult result =
      bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::HIGH);
  EXPECT_TRUE(result);
  EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kAdmitted);
  EXPECT_EQ(result.AdmittedCount(), 3u);
}

#if SLUICE_HAS_EXCEPTIONS
TYPED_TEST(PublishBatchTest, StopsAtAValuelessVariantAndRejectsIt) {
  TypeParam bus;
  std::vector<Payload> batch{Reading{0}, Reading{1}, Reading{2}, Reading{3}};
  try {
    batch[2].template emplace<MayThrow>(-1);
  } catch (const std::runtime_error&) {
  }
  ASSERT_TRUE(batch[2].valueless_by_exception());
  EXPECT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0).AdmittedCount(), 2u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
  EXPECT_EQ(bus.QueueDepth(), 2u);
}

// A batch refused before it reaches a valueless variant counts the messages
// before it as refused, the variant as rejected (as a single publish of it
// would be) and those after it not at all: by the queue's fill or by Close,
// the same count. Before, every message from the refusal on was counted as
// refused, the valueless one and those after it included.
TYPED_TEST(PublishBatchTest, ARefusedBatchCountsAValuelessVariantAsRejected) {
  std::vector<Payload> batch{Reading{0}, Reading{1}, Reading{2}, Reading{3}};
  try {
    batch[2].template emplace<MayThrow>(-1);
  } catch (const std::runtime_error&) {
  }
  ASSERT_TRUE(batch[2].valueless_by_exception());
  {
    TypeParam bus;
    const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().high_percent, 16);
    for (std::size_t i = 0; i < limit; ++i) {
      ASSERT_TRUE(bus.PublishWithPriority(Reading{0}, 0, sluice::MessagePriority::HIGH));
    }
    const sluice::PublishResult result =
        bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::HIGH);
    EXPECT_EQ(result.AdmittedCount(), 0u);
    EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kRefusedFull);
    const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
    EXPECT_EQ(stats.high_priority_dropped, 2u);
    EXPECT_EQ(stats.messages_rejected, 1u);
  }
  {
    TypeParam bus;
    bus.Close();
    const sluice::PublishResult result =
        bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::HIGH);
    EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kClosed);
    const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
    EXPECT_EQ(stats.messages_refused_closed, 2u);
    EXPECT_EQ(stats.messages_rejected, 1u);
  }
}
#endif

// A single-pass range (std::istream_iterator: a copy shares the stream, so
// looking ahead consumes it) is walked once: "10 20 30 40 50" arrives as
// 10 20 30 40 50, not as the first value five times. On a bus of 8 slots,
// LOW admits 5 of 8 (60 %): the rest is counted as dropped and left unread
// past the first refused value.
template <typename B>
class SinglePassBatchTest : public ::testing::Test {};
using IntBuses =
    ::testing::Types<sluice::MpscBus<std::variant<int>, 8>, sluice::SpscBus<std::variant<int>, 8>,
                     sluice::MpscBus<std::variant<int>, 8, sluice::PriorityOrderTraits>>;
TYPED_TEST_SUITE(SinglePassBatchTest, IntBuses, sluice_test::IndexNames);

template <typename B>
std::string Taken(B& bus) {
  std::string text;
  bus.ProcessBatchWith([&](const sluice::MessageEnvelope<std::variant<int>>& envelope) {
    text += (text.empty() ? "" : " ") + std::to_string(std::get<int>(envelope.payload));
  });
  return text;
}

TYPED_TEST(SinglePassBatchTest, AStreamIsWalkedOnce) {
  TypeParam bus;
  std::istringstream text("10 20 30 40 50");
  const sluice::PublishResult result =
      bus.PublishBatch(std::istream_iterator<int>(text), std::istream_iterator<int>(), 0);
  EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kAdmitted);
  EXPECT_EQ(result.AdmittedCount(), 5u);
  EXPECT_EQ(Taken(bus), "10 20 30 40 50");
  EXPECT_EQ(bus.GetStatistics().medium_priority_published, 5u);
}

// A generator: an input iterator that returns each message by value. Each
// is moved into its slot, never copied: a move-only type publishes, and a
// type whose copy may throw is never copied after its slot is claimed.
struct MoveOnly {
  explicit MoveOnly(int v) noexcept : value(v) {}
  MoveOnly(MoveOnly&& other) noexcept : value(other.value) {}
  MoveOnly(const MoveOnly&) = delete;
  MoveOnly& operator=(const MoveOnly&) = delete;
  MoveOnly& operator=(MoveOnly&&) = delete;
  int value;
};
class Generator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = MoveOnly;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = MoveOnly;
  explicit Generator(int next) : next_(next) {}
  MoveOnly operator*() const { return MoveOnly(next_); }
  Generator& operator++() {
    ++next_;
    return *this;
  }
  bool operator!=(const Generator& other) const { return next_ != other.next_; }
  bool operator==(const Generator& other) const { return next_ == other.next_; }

 private:
  int next_;
};

TEST(SinglePassGeneratorTest, AGeneratorsMessagesAreMovedNotCopied) {
  sluice::MpscBus<std::variant<MoveOnly>, 8> bus;
  const sluice::PublishResult result = bus.PublishBatch(Generator(1), Generator(4), 0);
  EXPECT_EQ(result.AdmittedCount(), 3u);
  std::string taken;
  bus.ProcessBatchWith([&](const sluice::MessageEnvelope<std::variant<MoveOnly>>& envelope) {
    taken += std::to_string(std::get<MoveOnly>(envelope.payload).value);
  });
  EXPECT_EQ(taken, "123");
}

TYPED_TEST(SinglePassBatchTest, AStreamPastTheThresholdCountsTheRestAsDropped) {
  TypeParam bus;
  std::istringstream text("1 2 3 4 5 6 7 8");
  const sluice::PublishResult result =
      bus.PublishBatch(std::istream_iterator<int>(text), std::istream_iterator<int>(), 0,
                       sluice::MessagePriority::LOW);
  EXPECT_EQ(result.Outcome(), sluice::PublishOutcome::kRefusedFull);
  EXPECT_EQ(result.AdmittedCount(), 5u);
  EXPECT_EQ(bus.GetStatistics().low_priority_dropped, 3u);
  EXPECT_EQ(Taken(bus), "1 2 3 4 5");
}

// A batch's runs are cut short only by the queue's real fill: once the
// consumer has freed the ring, a batch takes as much as an empty bus would.
// Before, several producers' shared cache of the consumer's position, left
// stale by earlier publishes, cut an MPSC batch short of room the consumer
// had freed, and the rest was counted as dropped.
template <typename B>
class PublishBatchRoomTest : public ::testing::Test {};
using AllBuses =
    ::testing::Types<Bus, SpscBus, sluice::MpscBus<Payload, 16, sluice::PriorityOrderTraits>,
                     sluice::SpscBus<Payload, 16, sluice::PriorityOrderTraits>>;
TYPED_TEST_SUITE(PublishBatchRoomTest, AllBuses, sluice_test::IndexNames);

TYPED_TEST(PublishBatchRoomTest, AfterTheConsumerFreedTheRingABatchTakesItAll) {
  TypeParam bus;
  const auto limit = sluice::FillLimit(bus.GetAdmissionThresholds().high_percent, 16);
  for (std::uint32_t round = 0; round < 4; ++round) {
    // Fill partly one by one, then drain: the producers' view is stale now.
    for (std::uint32_t i = 0; i < 10; ++i) {
      ASSERT_TRUE(bus.PublishWithPriority(Reading{i}, 0, sluice::MessagePriority::HIGH));
    }
    while (bus.ProcessBatch() > 0) {
    }
    ASSERT_EQ(bus.QueueDepth(), 0u);
    std::vector<Reading> batch(16, Reading{0});
    const sluice::PublishResult result =
        bus.PublishBatch(batch.begin(), batch.end(), 0, sluice::MessagePriority::HIGH);
    EXPECT_EQ(result.AdmittedCount(), limit) << "round " << round;
    EXPECT_EQ(bus.GetStatistics().high_priority_dropped, (round + 1) * (16 - limit));
    while (bus.ProcessBatch() > 0) {
    }
  }
}

}  // namespace
}  // namespace batch_publish_test
