// A mode fixed in the traits (FixedMode) behaves as the run-time mode set to
// the same value: the same admissions and refusals at every priority, the
// same counts, the same stamps and latency records, the same backpressure.
// Each mode's own rule is checked too, so the comparison cannot pass on two
// buses that both ignore the mode.
#include <gtest/gtest.h>

#include <cstdint>
#include <variant>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace fixed_mode_test {
namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::PerformanceMode;
using sluice::PublishOutcome;

struct Reading {
  std::uint32_t seq;
};
using Payload = std::variant<Reading>;
constexpr std::size_t kCapacity = 32;

constexpr MessagePriority kPriorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                           MessagePriority::HIGH};

template <PerformanceMode kMode>
struct FixedTraits : sluice::DefaultBusTraits {
  using Clock = sluice::SteadyClock;  // stamps are never 0 once read
  using Mode = sluice::FixedMode<kMode>;
};
struct RunTimeTraits : sluice::DefaultBusTraits {
  using Clock = sluice::SteadyClock;
};

// What a script saw of a bus.
struct Seen {
  std::vector<PublishOutcome> outcomes;
  std::uint32_t batch_admitted = 0;
  std::vector<bool> stamped;  // per dispatched message: timestamp_ns != 0
  std::vector<bool> counted;  // per dispatched message: MessageHeader::counted
  sluice::BackpressureLevel level_when_full = sluice::BackpressureLevel::NORMAL;
  std::uint64_t published[3] = {};
  std::uint64_t dropped[3] = {};
  std::uint64_t processed[3] = {};
  std::uint64_t latency_records[3] = {};
  PerformanceMode mode = PerformanceMode::FULL_FEATURED;

  bool operator==(const Seen& other) const {
    for (int p = 0; p < 3; ++p) {
      if (published[p] != other.published[p] || dropped[p] != other.dropped[p] ||
          processed[p] != other.processed[p] || latency_records[p] != other.latency_records[p]) {
        return false;
      }
    }
    return outcomes == other.outcomes && batch_admitted == other.batch_admitted &&
           stamped == other.stamped && counted == other.counted &&
           level_when_full == other.level_when_full && mode == other.mode;
  }
};

// Fills the bus at each priority in turn until a publish is refused, tries
// a batch, reads the gauge, then dispatches everything.
template <typename Bus>
Seen RunScript(Bus& bus) {
  Seen seen;
  std::uint32_t seq = 0;
  for (MessagePriority priority : kPriorities) {
    for (std::size_t i = 0; i <= kCapacity; ++i) {
      const sluice::PublishResult result = bus.PublishWithPriority(Reading{seq++}, 1, priority);
      seen.outcomes.push_back(result.Outcome());
      if (!result) break;
    }
  }
  const Reading batch[3] = {{100}, {101}, {102}};
  seen.batch_admitted = bus.PublishBatch(batch, batch + 3, 1, MessagePriority::LOW).AdmittedCount();
  seen.level_when_full = bus.GetBackpressureLevel();
  auto visitor = [&seen](const Reading&, const MessageHeader& header) {
    seen.stamped.push_back(header.timestamp_ns != 0);
    seen.counted.push_back(header.counted);
  };
  while (bus.ProcessBatchWith(visitor) != 0) {
  }
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  seen.published[0] = stats.low_priority_published;
  seen.published[1] = stats.medium_priority_published;
  seen.published[2] = stats.high_priority_published;
  seen.dropped[0] = stats.low_priority_dropped;
  seen.dropped[1] = stats.medium_priority_dropped;
  seen.dropped[2] = stats.high_priority_dropped;
  seen.processed[0] = stats.low_priority_processed;
  seen.processed[1] = stats.medium_priority_processed;
  seen.processed[2] = stats.high_priority_processed;
  const sluice::LatencySnapshot latency = bus.GetLatencyHistograms();
  for (int p = 0; p < 3; ++p) seen.latency_records[p] = latency.by_priority[p].count;
  seen.mode = bus.GetPerformanceMode();
  return seen;
}

template <PerformanceMode kMode>
struct ModeCase {
  static constexpr PerformanceMode kValue = kMode;
};

template <typename Case>
class FixedModeTest : public ::testing::Test {};

using Modes =
    ::testing::Types<ModeCase<PerformanceMode::FULL_FEATURED>,
                     ModeCase<PerformanceMode::BARE_METAL>, ModeCase<PerformanceMode::NO_STATS>>;
TYPED_TEST_SUITE(FixedModeTest, Modes, sluice_test::IndexNames);

TYPED_TEST(FixedModeTest, BehavesAsTheRunTimeModeSetToTheSameValue) {
  constexpr PerformanceMode kMode = TypeParam::kValue;
  sluice::MpscBus<Payload, kCapacity, RunTimeTraits> switched;
  switched.SetPerformanceMode(kMode);
  sluice::MpscBus<Payload, kCapacity, FixedTraits<kMode>> fixed;
  const Seen expected = RunScript(switched);
  const Seen got = RunScript(fixed);
  EXPECT_TRUE(got == expected);
  EXPECT_EQ(got.outcomes, expected.outcomes);
  EXPECT_EQ(got.stamped, expected.stamped);
  EXPECT_EQ(got.counted, expected.counted);
  EXPECT_EQ(got.mode, kMode);
  static_assert(decltype(fixed)::kModeIsFixed && !decltype(switched)::kModeIsFixed);
}

// A fixed mode is not read at run time: with another mode stored in the
// word a run-time bus reads (as SetPerformanceMode would store it), the
// fixed bus still behaves as its own mode.
TYPED_TEST(FixedModeTest, IgnoresTheRunTimeModeWord) {
  constexpr PerformanceMode kMode = TypeParam::kValue;
  constexpr PerformanceMode kOther = kMode == PerformanceMode::BARE_METAL
                                         ? PerformanceMode::FULL_FEATURED
                                         : PerformanceMode::BARE_METAL;
  sluice::MpscBus<Payload, kCapacity, RunTimeTraits> switched;
  switched.SetPerformanceMode(kMode);
  sluice::MpscBus<Payload, kCapacity, FixedTraits<kMode>> fixed;
  sluice::detail::TestAccess::StoreRunTimeMode(fixed, kOther);
  const Seen expected = RunScript(switched);
  const Seen got = RunScript(fixed);
  EXPECT_TRUE(got == expected);
  EXPECT_EQ(got.outcomes, expected.outcomes);
  EXPECT_EQ(got.mode, kMode);
}

// Each mode's own rule, on the fixed bus: what makes the comparison above
// mean something.
TYPED_TEST(FixedModeTest, KeepsItsModesRule) {
  constexpr PerformanceMode kMode = TypeParam::kValue;
  sluice::MpscBus<Payload, kCapacity, FixedTraits<kMode>> bus;
  const Seen seen = RunScript(bus);
  // LOW is the first priority filled: admitted until its limit.
  std::size_t low_admitted = 0;
  while (seen.outcomes[low_admitted] == PublishOutcome::kAdmitted) ++low_admitted;
  const sluice::AdmissionThresholds thresholds;
  const std::size_t low_limit = sluice::FillLimit(thresholds.low_percent, kCapacity);
  ASSERT_FALSE(seen.stamped.empty());
  if constexpr (kMode == PerformanceMode::BARE_METAL) {
    EXPECT_EQ(low_admitted, kCapacity);  // capacity is the only check
    EXPECT_FALSE(seen.stamped.front());  // Publish leaves the stamp 0
    EXPECT_EQ(seen.published[0], 0u);    // nothing counted
    EXPECT_EQ(seen.processed[0], 0u);
    EXPECT_EQ(seen.latency_records[0], 0u);
  } else {
    EXPECT_EQ(low_admitted, low_limit);  // refused at its threshold
    EXPECT_TRUE(seen.stamped.front());
    EXPECT_EQ(seen.outcomes[low_admitted], PublishOutcome::kRefusedFull);
    if constexpr (kMode == PerformanceMode::FULL_FEATURED) {
      EXPECT_EQ(seen.published[0], low_limit);
      EXPECT_GE(seen.dropped[0], 1u);
      EXPECT_EQ(seen.processed[0], low_limit);
      EXPECT_EQ(seen.latency_records[0], low_limit);
      EXPECT_TRUE(seen.counted.front());
    } else {  // NO_STATS: admission without counters
      EXPECT_EQ(seen.published[0], 0u);
      EXPECT_EQ(seen.dropped[0], 0u);
      EXPECT_FALSE(seen.counted.front());
    }
  }
}

}  // namespace
}  // namespace fixed_mode_test
