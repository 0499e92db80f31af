#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "test_support.hpp"

namespace sluice_test {
namespace admission_test {
namespace {

using sluice::BackpressureLevel;
using sluice::MessagePriority;
using sluice::PerformanceMode;

// Fills a bus with HIGH messages up to `depth` queued.
template <typename Bus>
void FillTo(Bus& bus, std::size_t depth) {
  while (bus.QueueDepth() < depth) {
    ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{0}, 0, MessagePriority::HIGH));
  }
}

// Publishes `priority` until refused; returns the queue depth at refusal.
template <typename Bus>
std::size_t RefusalDepth(Bus& bus, MessagePriority priority) {
  while (bus.PublishWithPriority(MotorCmd{1}, 0, priority)) {
    if (bus.QueueDepth() > Bus::Capacity()) break;
  }
  return bus.QueueDepth();
}

TEST(AdmissionTest, DefaultThresholdsRefuseLowThenMediumThenHigh) {
  using Bus = sluice::MpscBus<BasicPayload, 128>;
  // 128 slots: LOW at ceil(76.8) = 77, MEDIUM at ceil(102.4) = 103,
  // HIGH at ceil(126.72) = 127 queued.
  for (auto [priority, expected] :
       {std::pair{MessagePriority::LOW, 77u}, std::pair{MessagePriority::MEDIUM, 103u},
        std::pair{MessagePriority::HIGH, 127u}}) {
    Bus bus;
    EXPECT_EQ(RefusalDepth(bus, priority), expected) << sluice::ToString(priority);
  }
}

TEST(AdmissionTest, ThresholdArithmeticIsExactAtTheBoundary) {
  constexpr sluice::Position kCapacity = 131072;
  EXPECT_EQ(sluice::FillLimit(60, kCapacity), 78644u);   // 78643.2 rounded up
  EXPECT_EQ(sluice::FillLimit(80, kCapacity), 104858u);  // 104857.6
  EXPECT_EQ(sluice::FillLimit(99, kCapacity), 129762u);  // 129761.28
  EXPECT_EQ(sluice::FillLimit(100, kCapacity), kCapacity);
  EXPECT_EQ(sluice::FillLimit(50, 8), 4u);
  // 78643 queued is 59.9993 % (admitted); 78644 is 60.0002 % (refused).
  EXPECT_LT(78643.0 / kCapacity, 0.60);
  EXPECT_GE(78644.0 / kCapacity, 0.60);
}

// Up to the largest capacity (2^30 with 32-bit positions), every percentage,
// against ceil(capacity * percent / 100) in 64-bit arithmetic.
TEST(AdmissionTest, FillLimitNeverOverflows) {
  for (std::uint64_t capacity : {2ull, 100ull, 1000ull, 131072ull, 1ull << 24, 1ull << 30}) {
    for (std::uint32_t percent = 0; percent <= 100; ++percent) {
      const std::uint64_t expected = (capacity * percent + 99) / 100;
      ASSERT_EQ(sluice::FillLimit(percent, static_cast<sluice::Position>(capacity)), expected)
          << capacity << " at " << percent << " %";
    }
    EXPECT_EQ(
        sluice::ClassifyBackpressure(static_cast<sluice::Position>(capacity - 1),
                                     static_cast<sluice::Position>(capacity)),
        capacity >= 10 ? sluice::BackpressureLevel::CRITICAL : sluice::BackpressureLevel::NORMAL);
  }
}

TEST(AdmissionTest, SetAdmissionThresholdsValidatesAndApplies) {
  sluice::MpscBus<BasicPayload, 64> bus;
  EXPECT_FALSE(bus.SetAdmissionThresholds(0, 50, 90));
  EXPECT_FALSE(bus.SetAdmissionThresholds(60, 50, 90));
  EXPECT_FALSE(bus.SetAdmissionThresholds(40, 95, 90));
  EXPECT_FALSE(bus.SetAdmissionThresholds(40, 50, 101));
  // Out of a byte's range: refused, not cut to a byte (356 was 100, 256 + 50
  // was 50).
  EXPECT_FALSE(bus.SetAdmissionThresholds(60, 80, 356));
  EXPECT_FALSE(bus.SetAdmissionThresholds(256 + 50, 256 + 60, 256 + 70));
  EXPECT_FALSE(bus.SetAdmissionThresholds(-1, 50, 90));
  const sluice::AdmissionThresholds kept = bus.GetAdmissionThresholds();
  EXPECT_EQ(kept.low_percent, 60);
  EXPECT_EQ(kept.medium_percent, 80);
  EXPECT_EQ(kept.high_percent, 99);

  ASSERT_TRUE(bus.SetAdmissionThresholds(25, 50, 100));
  EXPECT_EQ(bus.GetAdmissionThresholds().low_percent, 25);
  EXPECT_EQ(RefusalDepth(bus, MessagePriority::LOW), 16u);
  EXPECT_EQ(RefusalDepth(bus, MessagePriority::MEDIUM), 32u);
  EXPECT_EQ(RefusalDepth(bus, MessagePriority::HIGH), 64u) << "100 % lets HIGH fill the ring";
  EXPECT_TRUE(bus.SetAdmissionThresholds(100, 100, 100));
}

TEST(AdmissionTest, BareMetalChecksCapacityOnly) {
  sluice::MpscBus<BasicPayload, 32> bus;
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  EXPECT_EQ(RefusalDepth(bus, MessagePriority::LOW), 32u);
}

TEST(AdmissionTest, NoStatsAdmitsLikeFullFeaturedWithoutCounting) {
  sluice::SpscBus<BasicPayload, 32> bus;
  bus.SetPerformanceMode(PerformanceMode::NO_STATS);
  EXPECT_EQ(RefusalDepth(bus, MessagePriority::LOW), 20u);  // ceil(19.2)
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 0u);
  EXPECT_EQ(stats.messages_dropped, 0u);
}

// A mode that is none of the three (a cast of another value) is ignored:
// the mode stays, and admission and counting go on as before. (Before, the
// bus took it: admission applied, nothing was counted, and
// GetPerformanceMode returned a value ToString called "INVALID".)
TEST(AdmissionTest, AModeThatIsNoneOfTheThreeIsIgnored) {
  sluice::MpscBus<BasicPayload, 32> bus;
  bus.SetPerformanceMode(static_cast<PerformanceMode>(7));
  EXPECT_EQ(bus.GetPerformanceMode(), PerformanceMode::FULL_FEATURED);
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  EXPECT_EQ(bus.GetStatistics().messages_published, 1u) << "still counting";
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  bus.SetPerformanceMode(static_cast<PerformanceMode>(3));
  EXPECT_EQ(bus.GetPerformanceMode(), PerformanceMode::BARE_METAL);
}

TEST(AdmissionTest, ModeSwitchTakesEffectOnTheNextPublish) {
  sluice::MpscBus<BasicPayload, 32> bus;
  FillTo(bus, 20);
  EXPECT_FALSE(bus.PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  EXPECT_TRUE(bus.PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  bus.SetPerformanceMode(PerformanceMode::FULL_FEATURED);
  EXPECT_FALSE(bus.PublishWithPriority(MotorCmd{0}, 0, MessagePriority::LOW));
  EXPECT_EQ(bus.GetPerformanceMode(), PerformanceMode::FULL_FEATURED);
}

// The reference's fixed levels (the default levels follow admission:
// backpressure_levels_test).
struct FixedLevelsTraits : sluice::DefaultBusTraits {
  static constexpr sluice::BackpressureScale kBackpressureScale = sluice::BackpressureScale::kFixed;
};

TEST(AdmissionTest, BackpressureLevelsFollowFill) {
  sluice::MpscBus<BasicPayload, 128, FixedLevelsTraits> bus;
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::NORMAL);
  FillTo(bus, 95);  // 74.2 %
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::NORMAL);
  FillTo(bus, 96);  // 75 %
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::WARNING);
  FillTo(bus, 115);  // 89.8 %
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::WARNING);
  FillTo(bus, 116);  // 90.6 %
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::CRITICAL);
  FillTo(bus, 127);
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::CRITICAL);
  FillTo(bus, 128);
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::FULL);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 100.0);
  bus.ProcessBatch(64);
  EXPECT_EQ(bus.GetBackpressureLevel(), BackpressureLevel::NORMAL);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 50.0);
}

// The reference's burst: consumer paused, 150,000 messages, 20 % HIGH and the
// rest MEDIUM and LOW alternating, into 131,072 slots.
template <typename Bus>
void RunReferenceBurst() {
  auto bus = std::make_unique<Bus>();
  std::uint64_t sent[3] = {};
  std::uint64_t admitted[3] = {};
  std::size_t max_depth_at_admission[3] = {};
  std::size_t rest = 0;
  for (int i = 0; i < 150000; ++i) {
    MessagePriority priority;
    if (i % 5 == 0) {
      priority = MessagePriority::HIGH;
    } else {
      priority = (rest++ % 2 == 0) ? MessagePriority::MEDIUM : MessagePriority::LOW;
    }
    const auto p = static_cast<std::size_t>(priority);
    const std::size_t depth_before = bus->QueueDepth();
    ++sent[p];
    if (bus->PublishWithPriority(Sequenced{0, static_cast<std::uint64_t>(i)}, 0, priority)) {
      ++admitted[p];
      max_depth_at_admission[p] = std::max(max_depth_at_admission[p], depth_before);
    }
  }
  const auto stats = bus->GetStatistics();
  const std::size_t low_limit = sluice::FillLimit(60, 131072);
  const std::size_t medium_limit = sluice::FillLimit(80, 131072);
  const std::size_t high_limit = sluice::FillLimit(99, 131072);

  EXPECT_EQ(sent[2], 30000u);
  EXPECT_EQ(admitted[2], 30000u) << "no HIGH message may be lost";
  EXPECT_EQ(stats.high_priority_dropped, 0u);
  EXPECT_LT(max_depth_at_admission[0], low_limit);
  EXPECT_LT(max_depth_at_admission[1], medium_limit);
  EXPECT_LT(max_depth_at_admission[2], high_limit);
  EXPECT_GT(stats.low_priority_dropped, 0u);
  EXPECT_GT(stats.medium_priority_dropped, 0u);
  EXPECT_LE(bus->QueueDepth(), high_limit);
  EXPECT_EQ(stats.low_priority_published, admitted[0]);
  EXPECT_EQ(stats.medium_priority_published, admitted[1]);
  EXPECT_EQ(stats.high_priority_published, admitted[2]);
  EXPECT_EQ(stats.MessagesAttempted(), 150000u);
  EXPECT_EQ(bus->QueueDepth(), admitted[0] + admitted[1] + admitted[2]);
}

TEST(AdmissionTest, ReferenceBurstLosesNoHighMpsc) {
  RunReferenceBurst<sluice::MpscBus<BasicPayload, 131072>>();
}
TEST(AdmissionTest, ReferenceBurstLosesNoHighSpsc) {
  RunReferenceBurst<sluice::SpscBus<BasicPayload, 131072>>();
}

}  // namespace
}  // namespace admission_test
}  // namespace sluice_test
