// The admission policy on its own (detail/publish/admission_policy.hpp): the fill
// limit of each priority in each mode, for the bus and for a producer lane,
// after every change of thresholds; the thresholds' round trip through their
// packed word; the backpressure level at every depth. Capacities 2, 8 and
// 128, 2^30 (the largest with 32-bit positions), and a lane of 2 slots, the
// smallest a lane may have.
#include "sluice/detail/publish/admission_policy.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace sluice_test {
namespace admission_policy_test {
namespace {

using sluice::AdmissionThresholds;
using sluice::BackpressureLevel;
using sluice::FillLimit;
using sluice::MessagePriority;
using sluice::PerformanceMode;
using sluice::Position;

constexpr MessagePriority kPriorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                           MessagePriority::HIGH};

AdmissionThresholds Make(std::uint8_t low, std::uint8_t medium, std::uint8_t high) {
  AdmissionThresholds t;
  t.low_percent = low;
  t.medium_percent = medium;
  t.high_percent = high;
  return t;
}

std::uint8_t PercentOf(const AdmissionThresholds& t, MessagePriority priority) {
  return priority == MessagePriority::LOW      ? t.low_percent
         : priority == MessagePriority::MEDIUM ? t.medium_percent
                                               : t.high_percent;
}

// Every limit the policy gives, in every mode, for the bus and its lanes,
// against FillLimit of the thresholds it reports.
template <Position kCapacity, Position kLane>
void ExpectLimitsFollow(const sluice::detail::AdmissionPolicy<kCapacity, kLane>& policy,
                        const AdmissionThresholds& expected) {
  const AdmissionThresholds now = policy.Thresholds();
  EXPECT_EQ(now.low_percent, expected.low_percent);
  EXPECT_EQ(now.medium_percent, expected.medium_percent);
  EXPECT_EQ(now.high_percent, expected.high_percent);
  for (MessagePriority p : kPriorities) {
    const Position limit = FillLimit(PercentOf(expected, p), kCapacity);
    EXPECT_EQ(policy.LimitFor(PerformanceMode::FULL_FEATURED, p), limit) << sluice::ToString(p);
    EXPECT_EQ(policy.LimitFor(PerformanceMode::NO_STATS, p), limit) << sluice::ToString(p);
    EXPECT_EQ(policy.LimitFor(PerformanceMode::BARE_METAL, p), kCapacity) << sluice::ToString(p);
    EXPECT_GE(limit, Position{1}) << "every valid threshold admits at least one";
    EXPECT_LE(limit, kCapacity);
    if constexpr (kLane != 0) {
      EXPECT_EQ(policy.LaneLimitFor(PerformanceMode::FULL_FEATURED, p),
                FillLimit(PercentOf(expected, p), kLane));
      EXPECT_EQ(policy.LaneLimitFor(PerformanceMode::BARE_METAL, p), kLane);
    }
  }
}

TEST(AdmissionPolicyTest, DefaultLimitsAreTheDefaultThresholdsRoundedUp) {
  sluice::detail::AdmissionPolicy<128, 16> policy;
  EXPECT_EQ(policy.Mode(), PerformanceMode::FULL_FEATURED);
  EXPECT_EQ(policy.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::LOW), 77u);
  EXPECT_EQ(policy.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::MEDIUM), 103u);
  EXPECT_EQ(policy.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::HIGH), 127u);
  EXPECT_EQ(policy.LaneLimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::LOW), 10u);
  EXPECT_EQ(policy.LaneLimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::MEDIUM), 13u);
  EXPECT_EQ(policy.LaneLimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::HIGH), 16u);
  ExpectLimitsFollow(policy, AdmissionThresholds{});
}

TEST(AdmissionPolicyTest, InvalidThresholdsAreRefusedAndChangeNothing) {
  sluice::detail::AdmissionPolicy<8, 2> policy;
  ASSERT_TRUE(policy.SetThresholds(Make(25, 50, 75)));
  for (const AdmissionThresholds& bad : {Make(0, 50, 90), Make(60, 50, 90), Make(40, 95, 90),
                                         Make(40, 50, 101), Make(0, 0, 0), Make(255, 255, 255)}) {
    EXPECT_FALSE(policy.SetThresholds(bad));
    ExpectLimitsFollow(policy, Make(25, 50, 75));
  }
}

TEST(AdmissionPolicyTest, EveryValidChangeMovesEveryLimitAtTheEdges) {
  sluice::detail::AdmissionPolicy<8, 2> small;
  sluice::detail::AdmissionPolicy<2> pair;
  sluice::detail::AdmissionPolicy<Position{1} << 30, 4> large;
  // The extremes (1 % and 100 %: a limit of one, and the whole capacity),
  // equal thresholds, and a sweep where each priority's percent differs.
  for (const AdmissionThresholds& t :
       {Make(1, 1, 1), Make(100, 100, 100), Make(1, 50, 100), Make(99, 99, 100), Make(12, 13, 14),
        Make(60, 80, 99), Make(50, 50, 51)}) {
    ASSERT_TRUE(small.SetThresholds(t));
    ExpectLimitsFollow(small, t);
    ASSERT_TRUE(pair.SetThresholds(t));
    ExpectLimitsFollow(pair, t);
    ASSERT_TRUE(large.SetThresholds(t));
    ExpectLimitsFollow(large, t);
  }
  // 1 % of 8 rounds up to one message; 100 % is the capacity exactly.
  ASSERT_TRUE(small.SetThresholds(Make(1, 50, 100)));
  EXPECT_EQ(small.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::LOW), 1u);
  EXPECT_EQ(small.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::MEDIUM), 4u);
  EXPECT_EQ(small.LimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::HIGH), 8u);
  EXPECT_EQ(small.LaneLimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::LOW), 1u);
  EXPECT_EQ(small.LaneLimitFor(PerformanceMode::FULL_FEATURED, MessagePriority::HIGH), 2u);
}

TEST(AdmissionPolicyTest, TheModeIsKeptAndOnlyBareMetalIgnoresTheThresholds) {
  sluice::detail::AdmissionPolicy<64> policy;
  ASSERT_TRUE(policy.SetThresholds(Make(10, 20, 30)));
  for (PerformanceMode mode :
       {PerformanceMode::BARE_METAL, PerformanceMode::NO_STATS, PerformanceMode::FULL_FEATURED}) {
    policy.SetMode(mode);
    EXPECT_EQ(policy.Mode(), mode);
    const Position low = policy.LimitFor(policy.Mode(), MessagePriority::LOW);
    EXPECT_EQ(low, mode == PerformanceMode::BARE_METAL ? Position{64} : Position{7});
  }
}

// LevelAt against ClassifyBackpressure at every depth from empty to past
// the capacity, for thresholds that put the levels' edges at 1, in the
// middle and at the capacity.
template <Position kCapacity, Position kLane>
void ExpectLevelsAtEveryDepth(sluice::detail::AdmissionPolicy<kCapacity, kLane>& policy) {
  for (const AdmissionThresholds& t : {Make(60, 80, 99), Make(1, 1, 1), Make(1, 100, 100),
                                       Make(100, 100, 100), Make(30, 31, 32)}) {
    ASSERT_TRUE(policy.SetThresholds(t));
    for (Position depth = 0; depth <= kCapacity + 1; ++depth) {
      ASSERT_EQ(policy.LevelAt(depth), sluice::ClassifyBackpressure(depth, kCapacity, t))
          << "depth " << depth << " of " << kCapacity;
    }
    if constexpr (kLane != 0) {
      for (Position depth = 0; depth <= kLane + 1; ++depth) {
        ASSERT_EQ(policy.LaneLevelAt(depth), sluice::ClassifyBackpressure(depth, kLane, t))
            << "lane depth " << depth << " of " << kLane;
      }
    }
  }
}

TEST(AdmissionPolicyTest, TheLevelAtEveryDepthIsWhereAdmissionRefuses) {
  sluice::detail::AdmissionPolicy<2, 2> two;
  ExpectLevelsAtEveryDepth(two);
  sluice::detail::AdmissionPolicy<8, 4> eight;
  ExpectLevelsAtEveryDepth(eight);
  sluice::detail::AdmissionPolicy<128, 16> many;
  ExpectLevelsAtEveryDepth(many);
  // The edges themselves, with the default thresholds on 128 slots.
  ASSERT_TRUE(many.SetThresholds(AdmissionThresholds{}));
  EXPECT_EQ(many.LevelAt(76), BackpressureLevel::NORMAL);
  EXPECT_EQ(many.LevelAt(77), BackpressureLevel::WARNING);  // LOW refused from here
  EXPECT_EQ(many.LevelAt(102), BackpressureLevel::WARNING);
  EXPECT_EQ(many.LevelAt(103), BackpressureLevel::CRITICAL);  // MEDIUM refused from here
  EXPECT_EQ(many.LevelAt(127), BackpressureLevel::CRITICAL);
  EXPECT_EQ(many.LevelAt(128), BackpressureLevel::FULL);
}

}  // namespace
}  // namespace admission_policy_test
}  // namespace sluice_test
