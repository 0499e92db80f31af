// PublishBlocking: a producer waits for room instead of being refused, and is
// woken by the consumer's batch that makes room for its priority, by Close,
// or by a change of mode or thresholds. Nothing here asserts a time: a
// producer that is never woken runs into its (long) timeout and the test
// fails on the status it returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"
#include "typed_test_names.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
// Failure messages name the status.
inline void PrintTo(PublishOutcome status, std::ostream* out) { *out << ToString(status); }
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice

namespace publish_blocking_test {
namespace {

using sluice::MessagePriority;
using sluice::PublishOutcome;
using Access = sluice::detail::TestAccess;

struct Tick {
  std::uint32_t producer;
  std::uint32_t seq;
};
// Moved from: `moved` is set on the source, so a test sees whether a refused
// message was left to the caller.
struct Tracked {
  Tracked() = default;
  explicit Tracked(int v) : value(v) {}
  Tracked(const Tracked&) = default;
  Tracked(Tracked&& other) noexcept : value(other.value) { other.moved = true; }
  Tracked& operator=(const Tracked&) = default;
  Tracked& operator=(Tracked&&) = default;
  int value = 0;
  bool moved = false;
};
using Payload = std::variant<Tick, Tracked>;

// Counts parks made by producer threads (marked by `t_producer`), so the
// stress test knows it made producers wait, and those that lasted their whole
// timeout (kPatience: nothing else ends them), so a test sees a lost wake-up
// even though PublishBlocking re-checks at its deadline and would then admit. Forwards the heavy
// fence when the inner parker has one, so both fence schemes are tested.
std::atomic<std::uint64_t> g_producer_parks{0};
std::atomic<std::uint64_t> g_producer_parks_unwoken{0};
thread_local bool t_producer = false;
template <typename Inner>
struct CountingParker {
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    if (!t_producer) return inner.Wait(word, expected, timeout);
    g_producer_parks.fetch_add(1, std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    inner.Wait(word, expected, timeout);
    // Not "the word is unchanged": a futex wake meant for an earlier bump may
    // end a later wait early, which is a harmless spurious return.
    if (std::chrono::steady_clock::now() - start >= timeout) {
      g_producer_parks_unwoken.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void WakeAll(std::atomic<std::uint32_t>& word) noexcept { inner.WakeAll(word); }
  Inner inner;
};
#if defined(__linux__)
struct CountingMembarrierParker : CountingParker<sluice::MembarrierFutexParker> {
  bool EnableHeavyFence() noexcept { return inner.EnableHeavyFence(); }
  bool HeavyFence() noexcept { return inner.HeavyFence(); }
};
#endif

struct CondVarTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::ConditionVariableParker>>;
};
// Parks at once: every refused poll is a park.
struct EagerCondVarTraits : CondVarTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::ConditionVariableParker>, 0>;
};
#if defined(__linux__)
struct EagerFutexTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<CountingParker<sluice::FutexParker>, 0>;
};
struct EagerMembarrierTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<CountingMembarrierParker, 0>;
};
#endif

// Long enough never to pass while the machine is merely slow; a producer
// that waits this long was not woken.
constexpr auto kPatience = std::chrono::seconds(60);

template <typename Traits>
class PublishBlockingTest : public ::testing::Test {
 protected:
  void SetUp() override { unwoken_before_ = g_producer_parks_unwoken.load(); }
  // Every producer park in this test ended with a wake, not its timeout.
  void ExpectNoUnwokenPark() {
    EXPECT_EQ(g_producer_parks_unwoken.load() - unwoken_before_, 0u)
        << "a waiting producer ran into its timeout: it was not woken";
  }
  std::uint64_t unwoken_before_ = 0;

  // Capacity 16: LOW is refused at 10 queued, MEDIUM at 13, HIGH at 16.
  using Bus = sluice::AsyncBus<Payload, 16, sluice::ProducerModel::kMulti, Traits>;
  static constexpr std::size_t kLowLimit = 10;
  static constexpr std::size_t kMediumLimit = 13;

  void FillTo(std::size_t depth) {
    while (bus_.QueueDepth() < depth) {
      ASSERT_TRUE(bus_.PublishWithPriority(Tick{9, 0}, 9, MessagePriority::HIGH));
    }
  }
  // Starts a producer that publishes with PublishBlocking and kPatience;
  // `*status` holds its result once the thread is joined.
  std::thread StartWaiter(MessagePriority priority, PublishOutcome* status) {
    return std::thread([this, priority, status] {
      t_producer = true;
      *status = bus_.PublishBlocking(Tick{1, 1}, 1, priority, kPatience).Outcome();
    });
  }
  // Waits (yielding) until `count` producers wait for room for `priority`.
  void AwaitWaiters(MessagePriority priority, std::uint32_t count) {
    while (Access::RoomWaiters(bus_, static_cast<std::size_t>(priority)) < count) {
      std::this_thread::yield();
    }
  }

  Bus bus_;
};
#if defined(__linux__)
using TraitsList =
    ::testing::Types<CondVarTraits, EagerCondVarTraits, EagerFutexTraits, EagerMembarrierTraits>;
#else
using TraitsList = ::testing::Types<CondVarTraits, EagerCondVarTraits>;
#endif
TYPED_TEST_SUITE(PublishBlockingTest, TraitsList, sluice_test::IndexNames);

TYPED_TEST(PublishBlockingTest, AdmitsAtOnceWhenThereIsRoom) {
  Tracked message(7);
  EXPECT_EQ(this->bus_.PublishBlocking(std::move(message), 3, MessagePriority::LOW, kPatience),
            PublishOutcome::kAdmitted);
  EXPECT_TRUE(message.moved);
  int seen = 0;
  (void)this->bus_.ProcessBatchWith([&](const auto& m) {
    if constexpr (std::is_same_v<std::decay_t<decltype(m)>, Tracked>) seen = m.value;
  });
  EXPECT_EQ(seen, 7);
  const auto stats = this->bus_.GetStatistics();
  EXPECT_EQ(stats.low_priority_published, 1u);
  EXPECT_EQ(stats.messages_dropped, 0u);
}

TYPED_TEST(PublishBlockingTest, TimesOutWithoutAConsumerAndCountsOneDropPerCall) {
  this->FillTo(this->kMediumLimit);
  Tracked message(1);
  EXPECT_EQ(this->bus_.PublishBlocking(std::move(message), 0, MessagePriority::MEDIUM,
                                       std::chrono::milliseconds(5)),
            PublishOutcome::kTimedOut);
  EXPECT_FALSE(message.moved) << "a refused message is left to the caller";
  EXPECT_EQ(this->bus_.QueueDepth(), this->kMediumLimit);
  const auto stats = this->bus_.GetStatistics();
  EXPECT_EQ(stats.medium_priority_dropped, 1u) << "one drop per call, not per attempt";
  EXPECT_EQ(stats.messages_dropped, 1u);
}

TYPED_TEST(PublishBlockingTest, ZeroNegativeAndHugeTimeoutsAreWellDefined) {
  this->FillTo(this->kMediumLimit);
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::MEDIUM,
                                       std::chrono::nanoseconds(0)),
            PublishOutcome::kTimedOut);
  EXPECT_EQ(
      this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::MEDIUM, std::chrono::seconds(-5)),
      PublishOutcome::kTimedOut);
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::MEDIUM,
                                       std::chrono::duration<double>(-1e300)),
            PublishOutcome::kTimedOut);
  // Room for HIGH: a "for ever" timeout must not wrap into the past.
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::HIGH,
                                       std::chrono::nanoseconds::max()),
            PublishOutcome::kAdmitted);
  EXPECT_EQ(
      this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::HIGH, std::chrono::hours::max()),
      PublishOutcome::kAdmitted);
  // Full for MEDIUM, a for-ever wait that the consumer ends.
  std::thread consumer([&] {
    this->AwaitWaiters(MessagePriority::MEDIUM, 1);
    while (this->bus_.QueueDepth() >= this->kMediumLimit) (void)this->bus_.ProcessBatch(1);
  });
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{0, 0}, 0, MessagePriority::MEDIUM,
                                       std::chrono::duration<double>(1e300)),
            PublishOutcome::kAdmitted);
  consumer.join();
  this->ExpectNoUnwokenPark();
}

TYPED_TEST(PublishBlockingTest, RejectsBadInputWithoutWaiting) {
  this->FillTo(16);  // full: a valid call would wait
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{}, 0, static_cast<MessagePriority>(3), kPatience),
            PublishOutcome::kRejected);
#if SLUICE_HAS_EXCEPTIONS
  Payload valueless{Tick{}};
  struct Throws {
    operator Tracked() const { throw std::runtime_error("no"); }
  };
  try {
    valueless.template emplace<Tracked>(Throws{});
  } catch (const std::runtime_error&) {
  }
  ASSERT_TRUE(valueless.valueless_by_exception());
  EXPECT_EQ(this->bus_.PublishBlocking(valueless, 0, MessagePriority::HIGH, kPatience),
            PublishOutcome::kRejected);
#endif
  const auto stats = this->bus_.GetStatistics();
  EXPECT_EQ(stats.messages_rejected, SLUICE_HAS_EXCEPTIONS ? 2u : 1u);
  EXPECT_EQ(stats.messages_dropped, 0u);
}

TYPED_TEST(PublishBlockingTest, ClosedBusRefusesAtOnceAndCountsIt) {
  this->bus_.Close();
  Tracked message(1);
  EXPECT_EQ(this->bus_.PublishBlocking(std::move(message), 0, MessagePriority::HIGH, kPatience),
            PublishOutcome::kClosed);
  EXPECT_FALSE(message.moved);
  EXPECT_EQ(this->bus_.GetStatistics().messages_refused_closed, 1u);
  EXPECT_EQ(this->bus_.GetStatistics().messages_dropped, 0u);
}

TYPED_TEST(PublishBlockingTest, CloseWakesEveryWaitingProducer) {
  this->FillTo(16);
  std::vector<PublishOutcome> statuses(3, PublishOutcome::kAdmitted);
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      t_producer = true;
      statuses[static_cast<std::size_t>(p)] =
          this->bus_
              .PublishBlocking(Tick{static_cast<std::uint32_t>(p), 0}, 0,
                               static_cast<MessagePriority>(p), kPatience)
              .Outcome();
    });
  }
  for (int p = 0; p < 3; ++p) this->AwaitWaiters(static_cast<MessagePriority>(p), 1);
  this->bus_.Close();
  for (auto& producer : producers) producer.join();
  for (const PublishOutcome status : statuses) EXPECT_EQ(status, PublishOutcome::kClosed);
  EXPECT_EQ(this->bus_.GetStatistics().messages_refused_closed, 3u);
  // What was admitted before stays for the consumer.
  EXPECT_EQ(this->bus_.ProcessBatch(), 16u);
  EXPECT_TRUE(this->bus_.IsDrained());
  this->ExpectNoUnwokenPark();
}

TYPED_TEST(PublishBlockingTest, TheConsumersBatchWakesAProducerOnceThereIsRoom) {
  this->FillTo(this->kMediumLimit);
  PublishOutcome status = PublishOutcome::kTimedOut;
  std::thread producer = this->StartWaiter(MessagePriority::MEDIUM, &status);
  this->AwaitWaiters(MessagePriority::MEDIUM, 1);
  EXPECT_EQ(this->bus_.ProcessBatch(1), 1u);  // one slot below MEDIUM's limit
  producer.join();
  EXPECT_EQ(status, PublishOutcome::kAdmitted);
  EXPECT_EQ(this->bus_.QueueDepth(), this->kMediumLimit);
  this->ExpectNoUnwokenPark();
}

TYPED_TEST(PublishBlockingTest, LowWaitsForLowsThresholdAndNeverTakesTheReserve) {
  this->FillTo(this->kMediumLimit);
  PublishOutcome status = PublishOutcome::kTimedOut;
  std::thread producer = this->StartWaiter(MessagePriority::LOW, &status);
  this->AwaitWaiters(MessagePriority::LOW, 1);
  // Room for MEDIUM and HIGH, none for LOW: LOW keeps waiting (a LOW
  // admission would raise the depth above what the consumer left).
  for (std::size_t depth = this->kMediumLimit - 1; depth >= this->kLowLimit; --depth) {
    EXPECT_EQ(this->bus_.ProcessBatch(1), 1u);
    EXPECT_EQ(this->bus_.QueueDepth(), depth);
  }
  // A HIGH publisher is not held up by the waiting LOW one.
  EXPECT_EQ(this->bus_.PublishBlocking(Tick{3, 3}, 3, MessagePriority::HIGH, kPatience),
            PublishOutcome::kAdmitted);
  EXPECT_EQ(this->bus_.ProcessBatch(2), 2u);  // depth 9: below LOW's limit
  producer.join();
  EXPECT_EQ(status, PublishOutcome::kAdmitted);
  EXPECT_EQ(this->bus_.QueueDepth(), this->kLowLimit);
  EXPECT_EQ(this->bus_.GetStatistics().low_priority_published, 1u);
  this->ExpectNoUnwokenPark();
}

// A mode or threshold change wakes no one by itself (the setters stay
// wait-free and signal-safe); the consumer's next batch judges room by the
// limits then in force. Queue at 12: LOW (limit 10) waits; one batch takes it
// to 11, which admits LOW only under the new limit.
TYPED_TEST(PublishBlockingTest, RaisedThresholdsApplyAtTheConsumersNextBatch) {
  this->FillTo(12);
  PublishOutcome status = PublishOutcome::kTimedOut;
  std::thread producer = this->StartWaiter(MessagePriority::LOW, &status);
  this->AwaitWaiters(MessagePriority::LOW, 1);
  ASSERT_TRUE(this->bus_.SetAdmissionThresholds(80, 80, 99));  // LOW: 16 * 80 % -> 13
  EXPECT_EQ(this->bus_.ProcessBatch(1), 1u);
  producer.join();
  EXPECT_EQ(status, PublishOutcome::kAdmitted);
  EXPECT_EQ(this->bus_.QueueDepth(), 12u);
  this->ExpectNoUnwokenPark();
}

TYPED_TEST(PublishBlockingTest, BareMetalModeAppliesAtTheConsumersNextBatch) {
  this->FillTo(12);
  PublishOutcome status = PublishOutcome::kTimedOut;
  std::thread producer = this->StartWaiter(MessagePriority::LOW, &status);
  this->AwaitWaiters(MessagePriority::LOW, 1);
  this->bus_.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);  // every limit: 16
  EXPECT_EQ(this->bus_.ProcessBatch(1), 1u);
  producer.join();
  EXPECT_EQ(status, PublishOutcome::kAdmitted);
  this->ExpectNoUnwokenPark();
}

TYPED_TEST(PublishBlockingTest, InsideItsOwnDispatchItDoesNotWaitForItself) {
  this->FillTo(16);
  std::vector<PublishOutcome> statuses;
  const auto handle = this->bus_.template Subscribe<Tick>([&](const Tick&) {
    if (statuses.size() < 2) {
      // Full for LOW (the batch has freed one slot at most): no room.
      statuses.push_back(
          this->bus_.PublishBlocking(Tick{4, 4}, 4, MessagePriority::LOW, kPatience).Outcome());
    }
  });
  ASSERT_TRUE(handle.IsValid());
  EXPECT_EQ(this->bus_.ProcessBatch(2), 2u);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0], PublishOutcome::kWouldDeadlock);
  EXPECT_EQ(statuses[1], PublishOutcome::kWouldDeadlock);
  EXPECT_EQ(this->bus_.GetStatistics().low_priority_dropped, 2u);
  // With room, a callback may publish this way (it is admitted at once).
  (void)this->bus_.ProcessBatch();  // empty the queue (the callback no longer publishes)
  statuses.clear();
  ASSERT_TRUE(this->bus_.PublishWithPriority(Tick{5, 5}, 5, MessagePriority::HIGH));
  EXPECT_EQ(this->bus_.ProcessBatch(1), 1u);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0], PublishOutcome::kAdmitted);
  // From a visitor as well.
  this->FillTo(16);
  PublishOutcome from_visitor = PublishOutcome::kAdmitted;
  EXPECT_EQ(this->bus_.ProcessBatchWith(
                [&](const auto&) {
                  from_visitor =
                      this->bus_.PublishBlocking(Tick{6, 6}, 6, MessagePriority::LOW, kPatience)
                          .Outcome();
                },
                1),
            1u);
  EXPECT_EQ(from_visitor, PublishOutcome::kWouldDeadlock);
}

#if SLUICE_HAS_EXCEPTIONS
TYPED_TEST(PublishBlockingTest, ACopyThatThrowsIsMadeBeforeAnyWaitAndClaimsNothing) {
  struct Throwing {
    Throwing() = default;
    Throwing(const Throwing&) { throw std::runtime_error("copy"); }
    Throwing(Throwing&&) noexcept = default;
  };
  using ThrowingBus =
      sluice::AsyncBus<std::variant<Throwing>, 16, sluice::ProducerModel::kMulti, TypeParam>;
  ThrowingBus bus;
  const Throwing message;
  EXPECT_THROW(
      (void)bus.PublishBlocking(message, 0, MessagePriority::HIGH, std::chrono::seconds(0)),
      std::runtime_error);
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_EQ(bus.PublishBlocking(Throwing{}, 0, MessagePriority::HIGH, std::chrono::seconds(0)),
            PublishOutcome::kAdmitted);
}
#endif

// Stress: producers of every priority publish through a small queue with
// PublishBlocking while the consumer takes one message at a time and works a
// little on each, so producers wait and are woken over and over. Every call
// must be admitted (a lost wake-up shows as kTimedOut after kPatience), every
// message dispatched exactly once and in order per producer.
// Count: 4 x 30,000 blocking publishes through 8 slots, with the consumer
// slower than the producers, so producers park over and over (measured:
// 3,900 parks with polling first, 22,000 to 88,000 with the eager
// parkers), each ended by a wake that the consumer's batch must not send
// before the producer has parked (a lost wake-up). Under ThreadSanitizer,
// some ten times slower, a tenth.
#if defined(__SANITIZE_THREAD__)
constexpr std::uint32_t kBasePerProducer = 3000;
#else
constexpr std::uint32_t kBasePerProducer = 30000;
#endif
std::uint32_t PerProducer() {
  return static_cast<std::uint32_t>(sluice_test::StressCount(kBasePerProducer));
}

TYPED_TEST(PublishBlockingTest, EveryWaitingProducerIsWokenAndEveryMessageArrivesOnce) {
  constexpr std::uint32_t kProducers = 4;
  const std::uint32_t kPerProducer = PerProducer();
  const std::uint64_t total = std::uint64_t{kProducers} * kPerProducer;
  sluice_test::StressProgress progress("blocking publishes dispatched", total);
  using SmallBus = sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kMulti, TypeParam>;
  SmallBus bus;
  std::vector<std::uint32_t> next(kProducers, 0);
  std::uint64_t dispatched = 0;
  bool in_order = true;
  volatile std::uint32_t sink = 0;
  const auto handle = bus.template Subscribe<Tick>([&](const Tick& tick) {
    in_order = in_order && tick.seq == next[tick.producer];
    next[tick.producer] = tick.seq + 1;
    ++dispatched;
    for (int i = 0; i < 200; ++i) sink = sink + 1;  // slower than the producers
    progress.Step();
  });
  ASSERT_TRUE(handle.IsValid());
  const std::uint64_t parks_before = g_producer_parks.load();
  std::atomic<std::uint64_t> not_admitted{0};
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      t_producer = true;
      // Two LOW producers, one MEDIUM, one HIGH (capacity 8: limits 5, 7, 8).
      const auto priority = static_cast<MessagePriority>(p < 2 ? 0 : p == 2 ? 1 : 2);
      for (std::uint32_t seq = 0; seq < kPerProducer; ++seq) {
        if (bus.PublishBlocking(Tick{p, seq}, p, priority, kPatience) !=
            PublishOutcome::kAdmitted) {
          not_admitted.fetch_add(1);
        }
      }
    });
  }
  while (dispatched < total && not_admitted.load() == 0) (void)bus.ProcessBatch(1);
  for (auto& producer : producers) producer.join();
  (void)bus.ProcessBatch();
  EXPECT_EQ(not_admitted.load(), 0u) << "a producer was not woken (lost wake-up)";
  EXPECT_EQ(dispatched, total);
  EXPECT_TRUE(in_order);
  for (std::uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, total);
  EXPECT_EQ(stats.messages_dropped, 0u);
  EXPECT_GT(g_producer_parks.load() - parks_before, 0u) << "no producer ever waited";
  this->ExpectNoUnwokenPark();
}

// Close while producers wait and the consumer drains: every call either is
// admitted (and then dispatched exactly once) or returns kClosed.
// Count: 20 rounds, each one Close landing while producers wait for room in
// the 8 slots: in a measured run 73 of the 80 Closes (four parkers) found
// a producer waiting, 37 of them all three, waits only the Close can end.
TYPED_TEST(PublishBlockingTest, CloseDuringWaitsLosesNothingAdmitted) {
  constexpr std::uint32_t kProducers = 3;
  using SmallBus = sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kMulti, TypeParam>;
  const std::uint64_t rounds = sluice_test::StressCount(20);
  sluice_test::StressProgress progress("close-during-wait rounds", rounds);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    SmallBus bus;
    std::uint64_t dispatched = 0;
    const auto handle = bus.template Subscribe<Tick>([&](const Tick&) { ++dispatched; });
    ASSERT_TRUE(handle.IsValid());
    std::atomic<std::uint64_t> admitted{0}, closed{0}, other{0};
    std::vector<std::thread> producers;
    for (std::uint32_t p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        t_producer = true;
        for (std::uint32_t seq = 0;; ++seq) {
          const PublishOutcome status =
              bus.PublishBlocking(Tick{p, seq}, p, static_cast<MessagePriority>(p), kPatience)
                  .Outcome();
          if (status == PublishOutcome::kAdmitted) {
            admitted.fetch_add(1);
          } else {
            (status == PublishOutcome::kClosed ? closed : other).fetch_add(1);
            return;
          }
        }
      });
    }
    for (int i = 0; i < 200; ++i) (void)bus.ProcessBatch(1);
    bus.Close();
    while (!bus.IsDrained()) (void)bus.ProcessBatch();
    for (auto& producer : producers) producer.join();
    EXPECT_EQ(other.load(), 0u);
    EXPECT_EQ(closed.load(), kProducers);
    EXPECT_EQ(dispatched, admitted.load());
    EXPECT_EQ(bus.GetStatistics().messages_refused_closed, kProducers);
    progress.Step();
  }
  this->ExpectNoUnwokenPark();
}

// SPSC: the one producer waits as well.
// Count: 30,000 blocking publishes of LOW through 8 slots (LOW's limit is 5)
// against a consumer that takes one message at a time and parks when it
// runs dry: each waits for the other over and over (some 6,000 producer
// parks in a measured run).
TEST(PublishBlockingSpscTest, TheOneProducerWaitsForTheConsumer) {
  const std::uint32_t kPerProducer = PerProducer();
  sluice_test::StressProgress progress("SPSC blocking publishes dispatched", kPerProducer);
  sluice::AsyncBus<Payload, 8, sluice::ProducerModel::kSingle, EagerCondVarTraits> bus;
  std::uint64_t dispatched = 0;
  std::uint32_t expected = 0;
  bool in_order = true;
  const auto handle = bus.Subscribe<Tick>([&](const Tick& tick) {
    in_order = in_order && tick.seq == expected++;
    ++dispatched;
    progress.Step();
  });
  ASSERT_TRUE(handle.IsValid());
  std::atomic<std::uint64_t> not_admitted{0};
  std::thread producer([&] {
    t_producer = true;
    for (std::uint32_t seq = 0; seq < kPerProducer; ++seq) {
      if (bus.PublishBlocking(Tick{0, seq}, 0, MessagePriority::LOW, kPatience) !=
          PublishOutcome::kAdmitted) {
        not_admitted.fetch_add(1);
      }
    }
  });
  while (dispatched < kPerProducer && not_admitted.load() == 0) {
    (void)bus.ProcessBatchWait(std::chrono::milliseconds(10), 1);
  }
  producer.join();
  EXPECT_EQ(not_admitted.load(), 0u);
  EXPECT_EQ(dispatched, kPerProducer);
  EXPECT_TRUE(in_order);
}

}  // namespace
}  // namespace publish_blocking_test
