// Backpressure levels that warn before LOW is refused: under the default
// BackpressureScale::kFollowAdmission a publish of LOW is refused only while
// GetBackpressureLevel() (and the Prometheus gauge) reads WARNING or above,
// and MEDIUM only at CRITICAL or above, at every fill, for any thresholds,
// across the position wrap, and with producers racing. Built and run under
// ThreadSanitizer in CI with the other threaded tests.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/extras/prometheus.hpp"
#include "test_support.hpp"
#include "typed_test_names.hpp"

namespace sluice_test {
namespace backpressure_levels_test {
namespace {

using sluice::AdmissionThresholds;
using sluice::BackpressureLevel;
using sluice::MessagePriority;
using sluice::PerformanceMode;
using sluice::Position;
using sluice::ProducerModel;

// The level sluice_backpressure_level reports for `bus`.
template <typename Bus>
int Gauge(const Bus& bus) {
  std::string text;
  sluice::WritePrometheus(text, "b", bus);
  const std::string key = "sluice_backpressure_level{bus=\"b\"} ";
  const std::size_t at = text.find(key);
  if (at == std::string::npos || at + key.size() >= text.size()) return -1;
  return text[at + key.size()] - '0';
}

AdmissionThresholds Thresholds(std::uint8_t low, std::uint8_t medium, std::uint8_t high) {
  AdmissionThresholds t;
  t.low_percent = low;
  t.medium_percent = medium;
  t.high_percent = high;
  return t;
}

// Custom and degenerate thresholds: equal ones, 1 % (one message), 100 %.
const AdmissionThresholds kThresholdCases[] = {AdmissionThresholds{},  Thresholds(1, 1, 1),
                                               Thresholds(1, 50, 100), Thresholds(33, 66, 99),
                                               Thresholds(50, 50, 50), Thresholds(100, 100, 100),
                                               Thresholds(10, 90, 95), Thresholds(61, 79, 100)};

template <ProducerModel kModel, sluice::DeliveryOrder kOrder, std::size_t kCapacity, bool kNearWrap>
struct Kind {
  struct Traits : sluice::DefaultBusTraits {
    using Delivery = std::conditional_t<kOrder == sluice::DeliveryOrder::kPriority,
                                        sluice::PriorityDelivery<>, sluice::FifoDelivery>;
  };
  using Bus = sluice::AsyncBus<BasicPayload, kCapacity, kModel, Traits>;
  static std::unique_ptr<Bus> Make() {
    if constexpr (kNearWrap) {
      // Half a ring before the positions wrap: every walk crosses it.
      constexpr Position kFirst = std::numeric_limits<Position>::max() - kCapacity / 2;
      return std::make_unique<Bus>(sluice::detail::FirstPosition{kFirst});
    } else {
      return std::make_unique<Bus>();
    }
  }
};

template <typename K>
class BackpressureLevelsTest : public ::testing::Test {};
using Kinds =
    ::testing::Types<Kind<ProducerModel::kMulti, sluice::DeliveryOrder::kFifo, 16, false>,
                     Kind<ProducerModel::kSingle, sluice::DeliveryOrder::kFifo, 128, false>,
                     Kind<ProducerModel::kMulti, sluice::DeliveryOrder::kFifo, 1024, true>,
                     Kind<ProducerModel::kSingle, sluice::DeliveryOrder::kFifo, 64, true>,
                     Kind<ProducerModel::kMulti, sluice::DeliveryOrder::kPriority, 128, false>,
                     Kind<ProducerModel::kSingle, sluice::DeliveryOrder::kPriority, 16, true>>;
TYPED_TEST_SUITE(BackpressureLevelsTest, Kinds, IndexNames);

// Fills the bus one message at a time, always with the lowest priority still
// admitted, up to every slot (BARE_METAL for the last ones, which admits up
// to the capacity and reports the same levels), then drains it one by one.
// At every depth: LOW is admitted exactly while the level is NORMAL, MEDIUM
// exactly while it is below CRITICAL; the level is the thresholds' and the
// gauge says the same.
TYPED_TEST(BackpressureLevelsTest, LowIsRefusedOnlyAtWarningOrAboveAtEveryFill) {
  using Bus = typename TypeParam::Bus;
  constexpr Position kCapacity = static_cast<Position>(Bus::Capacity());
  for (const AdmissionThresholds& thresholds : kThresholdCases) {
    SCOPED_TRACE(::testing::Message()
                 << "thresholds " << int{thresholds.low_percent} << "/"
                 << int{thresholds.medium_percent} << "/" << int{thresholds.high_percent});
    auto bus = TypeParam::Make();
    ASSERT_TRUE(bus->SetAdmissionThresholds(thresholds.low_percent, thresholds.medium_percent,
                                            thresholds.high_percent));
    for (Position depth = 0; depth < kCapacity; ++depth) {
      ASSERT_EQ(bus->QueueDepth(), depth);
      const BackpressureLevel level = bus->GetBackpressureLevel();
      ASSERT_EQ(level, sluice::ClassifyBackpressure(depth, kCapacity, thresholds)) << depth;
      ASSERT_EQ(Gauge(*bus), static_cast<int>(level)) << depth;
      if (bus->PublishWithPriority(MotorCmd{1}, 0, MessagePriority::LOW)) {
        ASSERT_EQ(level, BackpressureLevel::NORMAL) << depth;
        continue;
      }
      ASSERT_NE(level, BackpressureLevel::NORMAL) << "LOW refused at NORMAL, depth " << depth;
      ASSERT_NE(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL) << depth;
      if (bus->PublishWithPriority(MotorCmd{2}, 0, MessagePriority::MEDIUM)) {
        ASSERT_EQ(level, BackpressureLevel::WARNING) << depth;
        continue;
      }
      ASSERT_GE(level, BackpressureLevel::CRITICAL) << "MEDIUM refused below CRITICAL, " << depth;
      if (bus->PublishWithPriority(MotorCmd{3}, 0, MessagePriority::HIGH)) continue;
      bus->SetPerformanceMode(PerformanceMode::BARE_METAL);
      ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{4}, 0, MessagePriority::LOW)) << depth;
      bus->SetPerformanceMode(PerformanceMode::FULL_FEATURED);
    }
    EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::FULL);
    EXPECT_EQ(Gauge(*bus), static_cast<int>(BackpressureLevel::FULL));
    EXPECT_FALSE(bus->PublishWithPriority(MotorCmd{5}, 0, MessagePriority::LOW));
    for (Position depth = kCapacity; depth > 0; --depth) {
      ASSERT_EQ(bus->GetBackpressureLevel(),
                sluice::ClassifyBackpressure(depth, kCapacity, thresholds))
          << depth;
      ASSERT_EQ(bus->ProcessBatch(1), 1u);
    }
    EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);
  }
}

// Exactly at a threshold: one message below it is NORMAL and LOW still goes
// in; that message reaches it, turns the level WARNING, and the next LOW is
// refused. The same for MEDIUM and CRITICAL.
TYPED_TEST(BackpressureLevelsTest, TheLevelTurnsWithTheMessageThatReachesTheThreshold) {
  using Bus = typename TypeParam::Bus;
  constexpr Position kCapacity = static_cast<Position>(Bus::Capacity());
  auto bus = TypeParam::Make();
  const AdmissionThresholds thresholds = bus->GetAdmissionThresholds();
  const Position low_limit = sluice::FillLimit(thresholds.low_percent, kCapacity);
  const Position medium_limit = sluice::FillLimit(thresholds.medium_percent, kCapacity);
  ASSERT_LT(low_limit, medium_limit);
  while (bus->QueueDepth() + 1 < low_limit) {
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::HIGH));
  }
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);
  ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));  // the last one
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::WARNING);
  EXPECT_EQ(Gauge(*bus), static_cast<int>(BackpressureLevel::WARNING));
  EXPECT_FALSE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  while (bus->QueueDepth() + 1 < medium_limit) {
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::HIGH));
  }
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::WARNING);
  ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::MEDIUM));
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::CRITICAL);
  EXPECT_EQ(Gauge(*bus), static_cast<int>(BackpressureLevel::CRITICAL));
  EXPECT_FALSE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::MEDIUM));
  // A batch refused in part: refused only at the limit, at CRITICAL.
  const MotorCmd more[2] = {MotorCmd{0}, MotorCmd{0}};
  EXPECT_EQ(bus->PublishBatch(more, more + 2, 0, MessagePriority::MEDIUM).AdmittedCount(), 0u);
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::CRITICAL);
}

// SetAdmissionThresholds moves the levels with the limits, at once; refused
// thresholds move neither.
TYPED_TEST(BackpressureLevelsTest, LevelsFollowSetAdmissionThresholds) {
  using Bus = typename TypeParam::Bus;
  constexpr Position kCapacity = static_cast<Position>(Bus::Capacity());
  auto bus = TypeParam::Make();
  const Position half = kCapacity / 2;
  while (bus->QueueDepth() < half) {
    ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::HIGH));
  }
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);  // 50 % < 60 %
  ASSERT_TRUE(bus->SetAdmissionThresholds(50, 90, 99));
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::WARNING);
  EXPECT_EQ(Gauge(*bus), static_cast<int>(BackpressureLevel::WARNING));
  EXPECT_FALSE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  ASSERT_TRUE(bus->SetAdmissionThresholds(10, 50, 99));
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::CRITICAL);
  EXPECT_FALSE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::MEDIUM));
  EXPECT_FALSE(bus->SetAdmissionThresholds(90, 80, 99));  // invalid: kept
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::CRITICAL);
  ASSERT_TRUE(bus->SetAdmissionThresholds(60, 100, 100));
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);
  EXPECT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);
}

// The reference's fixed levels stay available, and are what they were:
// 75 % and 90 %, whatever the thresholds; with the default ones LOW is then
// refused from 60 % while the level still reads NORMAL.
struct FixedLevelsTraits : sluice::DefaultBusTraits {
  static constexpr sluice::BackpressureScale kBackpressureScale = sluice::BackpressureScale::kFixed;
};

TEST(BackpressureLevelsFixedTest, FixedLevelsAreTheReferenceOnes) {
  constexpr Position kCapacity = 128;
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, kCapacity, FixedLevelsTraits>>();
  bool refused_at_normal = false;
  bus->SetPerformanceMode(PerformanceMode::BARE_METAL);
  for (Position depth = 0; depth < kCapacity; ++depth) {
    ASSERT_EQ(bus->GetBackpressureLevel(), sluice::ClassifyBackpressure(depth, kCapacity));
    ASSERT_EQ(Gauge(*bus), static_cast<int>(sluice::ClassifyBackpressure(depth, kCapacity)));
    bus->SetPerformanceMode(PerformanceMode::FULL_FEATURED);
    if (!bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW) &&
        bus->GetBackpressureLevel() == BackpressureLevel::NORMAL) {
      refused_at_normal = true;
    }
    bus->SetPerformanceMode(PerformanceMode::BARE_METAL);
    if (bus->QueueDepth() == depth) {
      ASSERT_TRUE(bus->PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
    }
  }
  EXPECT_TRUE(refused_at_normal);
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::FULL);
  ASSERT_TRUE(bus->SetAdmissionThresholds(10, 20, 30));
  bus->ProcessBatch(kCapacity / 2);
  EXPECT_EQ(bus->GetBackpressureLevel(), BackpressureLevel::NORMAL);  // 50 %, fixed levels
}

// Producers race for the last slots of each threshold while nobody
// consumes, so the depth only grows within a round: every producer that is
// refused LOW must then read WARNING or above, and CRITICAL or above after a
// MEDIUM refusal. Meanwhile the main thread watches the level never go down.
// Between rounds the main thread drains the bus and changes the thresholds;
// the bus starts half a ring before the position wrap, so rounds cross it.
//
// Round handshake: the main thread publishes round r with a release store of
// `round`, which each producer acquires before publishing (so it sees the
// drained bus and the new thresholds); each producer's release increment of
// `finished` is acquired by the main thread before it checks and drains.
//
// Count: 6 rounds, one per set of thresholds, each a race of three
// producers for the last slots below every limit (a measured run: 2,175
// LOW refusals in all on the 1,024-slot bus, 547 on the 256-slot one, up to
// hundreds a round); the long tier repeats the six sets.
template <typename Bus>
void RaceForTheThresholds() {
  constexpr int kProducers = 3;
  constexpr int kThresholdSets = 6;
  const auto kRounds = static_cast<int>(StressCount(kThresholdSets));
  constexpr Position kCapacity = static_cast<Position>(Bus::Capacity());
  const AdmissionThresholds round_thresholds[kThresholdSets] = {
      AdmissionThresholds{},  Thresholds(1, 50, 100),  Thresholds(33, 66, 99),
      Thresholds(50, 50, 50), Thresholds(61, 79, 100), AdmissionThresholds{}};
  auto bus = std::make_unique<Bus>(
      sluice::detail::FirstPosition{std::numeric_limits<Position>::max() - kCapacity / 2});
  std::atomic<int> round{-1};
  std::atomic<int> finished{0};
  std::atomic<std::uint64_t> low_refusals{0};
  std::atomic<std::uint64_t> low_refused_at_normal{0};
  std::atomic<std::uint64_t> medium_refused_below_critical{0};

  std::vector<std::thread> producers;
  producers.reserve(kProducers);
  for (int id = 0; id < kProducers; ++id) {
    producers.emplace_back([&, id] {
      for (int r = 0; r < kRounds; ++r) {
        while (round.load(std::memory_order_acquire) < r) std::this_thread::yield();
        // LOW, MEDIUM, HIGH in turn until HIGH is refused: the bus is then
        // at HIGH's limit and every producer has met the lower ones.
        for (std::uint32_t n = static_cast<std::uint32_t>(id);; ++n) {
          const auto priority = static_cast<MessagePriority>(n % 3);
          if (bus->PublishWithPriority(MotorCmd{id}, 0, priority)) continue;
          const BackpressureLevel level = bus->GetBackpressureLevel();
          if (priority == MessagePriority::LOW) {
            low_refusals.fetch_add(1, std::memory_order_relaxed);
            if (level == BackpressureLevel::NORMAL) {
              low_refused_at_normal.fetch_add(1, std::memory_order_relaxed);
            }
          } else if (priority == MessagePriority::MEDIUM) {
            if (level < BackpressureLevel::CRITICAL) {
              medium_refused_below_critical.fetch_add(1, std::memory_order_relaxed);
            }
          } else {
            break;
          }
        }
        finished.fetch_add(1, std::memory_order_release);
      }
    });
  }

  StressProgress progress("threshold race rounds", static_cast<std::uint64_t>(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    const AdmissionThresholds& t = round_thresholds[r % kThresholdSets];
    ASSERT_TRUE(bus->SetAdmissionThresholds(t.low_percent, t.medium_percent, t.high_percent));
    round.store(r, std::memory_order_release);
    BackpressureLevel highest = BackpressureLevel::NORMAL;
    std::uint64_t went_down = 0;
    while (finished.load(std::memory_order_acquire) < kProducers * (r + 1)) {
      const BackpressureLevel level = bus->GetBackpressureLevel();
      if (level < highest) ++went_down;
      if (level > highest) highest = level;
    }
    EXPECT_EQ(went_down, 0u) << "round " << r;
    const auto depth = static_cast<Position>(bus->QueueDepth());
    EXPECT_EQ(depth, sluice::FillLimit(t.high_percent, kCapacity)) << "round " << r;
    const BackpressureLevel level = bus->GetBackpressureLevel();
    EXPECT_EQ(level, sluice::ClassifyBackpressure(depth, kCapacity, t)) << "round " << r;
    EXPECT_NE(level, BackpressureLevel::NORMAL) << "round " << r;
    EXPECT_EQ(Gauge(*bus), static_cast<int>(level)) << "round " << r;
    while (bus->ProcessBatch() != 0) {
    }
    progress.Step();
  }
  for (std::thread& producer : producers) producer.join();
  EXPECT_GT(low_refusals.load(), 0u);
  EXPECT_EQ(low_refused_at_normal.load(), 0u);
  EXPECT_EQ(medium_refused_below_critical.load(), 0u);
}

TEST(BackpressureLevelsConcurrencyTest, RacingProducersAreRefusedLowOnlyAtWarningOrAbove) {
  RaceForTheThresholds<sluice::MpscBus<BasicPayload, 1024>>();
}

TEST(BackpressureLevelsConcurrencyTest, RacingProducersOnThePriorityOrderedBus) {
  RaceForTheThresholds<sluice::MpscBus<BasicPayload, 256, sluice::PriorityOrderTraits>>();
}

// The peak is a fill the queue held, while another thread changes the
// thresholds between a refusal and its noting. LOW is refused against a
// narrow limit (1 %: 41 of 4,096) while the thresholds flip to a wide one
// (90 %: 3,687) and back; the refusal must note the limit it was judged
// against, not the one in force a moment later, which the queue never
// reached. The publishing thread is also the consumer: it empties the queue
// whenever it holds kDrainAt messages, so it knows the most the queue ever
// held. Counts: 200,000 attempts give thousands of refusals inside the flips
// on two cores (a few seconds under ThreadSanitizer); no count of refusals is
// asserted, as a flipper descheduled throughout would give none.
TEST(BackpressurePeakConcurrencyTest, APeakIsAFillTheQueueHeldWhileThresholdsChange) {
  constexpr std::size_t kCapacity = 4096;
  constexpr std::uint32_t kAttempts = 200'000;
  constexpr std::size_t kDrainAt = 100;  // far below the wide limit
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, kCapacity>>();
  ASSERT_TRUE(bus->SetAdmissionThresholds(1, 80, 99));
  std::atomic<bool> done{false};
  std::thread flipper([&] {
    while (!done.load(std::memory_order_relaxed)) {
      (void)bus->SetAdmissionThresholds(90, 95, 99);
      (void)bus->SetAdmissionThresholds(1, 80, 99);
    }
  });
  std::size_t held = 0;  // the most the queue held: this thread alone fills and empties it
  std::uint32_t refused = 0;
  StressProgress progress("threshold flips, LOW attempts", kAttempts);
  for (std::uint32_t i = 0; i < kAttempts; ++i) {
    if (bus->PublishWithPriority(MotorCmd{1}, 0, MessagePriority::LOW)) {
      const std::size_t depth = bus->QueueDepth();
      if (depth > held) held = depth;
      if (depth >= kDrainAt) {
        while (bus->ProcessBatch() != 0) {
        }
      }
    } else {
      ++refused;
    }
    progress.Step();
  }
  done = true;
  flipper.join();
  const sluice::BackpressurePeak peak = bus->TakeBackpressurePeak();
  EXPECT_LE(peak.fill, held) << "a peak of " << peak.fill
                             << " while the queue never held more than " << held << " (" << refused
                             << " refusals)";
  std::printf("%u refusals in %u attempts, at most %zu queued\n", refused, kAttempts, held);
}

}  // namespace
}  // namespace backpressure_levels_test
}  // namespace sluice_test
