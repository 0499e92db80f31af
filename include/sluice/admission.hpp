// Priority admission thresholds and backpressure levels: pure arithmetic on
// queue fill, shared by the bus, its tests and its documentation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Fill percentages at which each priority is refused. A message is admitted
// while the queue holds fewer than ceil(percent * capacity / 100) messages.
struct AdmissionThresholds {
  std::uint8_t low_percent = 60;
  std::uint8_t medium_percent = 80;
  std::uint8_t high_percent = 99;

  // 0 < LOW <= MEDIUM <= HIGH <= 100.
  constexpr bool IsValid() const noexcept {
    return low_percent > 0 && low_percent <= medium_percent && medium_percent <= high_percent &&
           high_percent <= 100;
  }
};

// The number of queued messages at which `percent` fill is reached, rounded up
// so that nothing is admitted at or past the threshold.
constexpr Position FillLimit(std::uint32_t percent, Position capacity) noexcept {
  // ceil(capacity * percent / 100), split so that nothing overflows with
  // 32-bit positions and no 64-bit division is needed on 32-bit cores.
  const Position hundreds = capacity / 100;
  const Position rest = capacity % 100;
  return static_cast<Position>(hundreds * percent + (rest * percent + 99) / 100);
}

// How full the queue is, as GetBackpressureLevel() reports it. By default
// (BackpressureScale::kFollowAdmission) the levels start where admission
// refuses: WARNING where LOW is refused, CRITICAL where MEDIUM is. With
// BackpressureScale::kFixed they are the fixed fills in the comments.
enum class BackpressureLevel : std::uint8_t {
  NORMAL = 0,    // every priority admitted (fixed: below 75 % fill)
  WARNING = 1,   // LOW refused (fixed: 75 % up to 90 %)
  CRITICAL = 2,  // MEDIUM refused too (fixed: 90 % up to 100 %)
  FULL = 3,      // every slot taken
};

// The highest fill since the last AsyncBus::TakeBackpressurePeak() and its
// level.
struct BackpressurePeak {
  std::size_t fill = 0;
  BackpressureLevel level = BackpressureLevel::NORMAL;
};

// Where the levels start: BusTraits::kBackpressureScale.
enum class BackpressureScale : std::uint8_t {
  // WARNING from the fill at which LOW is refused, CRITICAL from MEDIUM's,
  // both following SetAdmissionThresholds: a producer is refused LOW only
  // while the level is WARNING or above.
  kFollowAdmission,
  // WARNING from 75 %, CRITICAL from 90 %, whatever the thresholds. With the
  // default thresholds LOW is refused from 60 %, still NORMAL.
  kFixed,
};

// The fixed levels (BackpressureScale::kFixed).
constexpr BackpressureLevel ClassifyBackpressure(Position depth, Position capacity) noexcept {
  if (depth >= capacity) return BackpressureLevel::FULL;
  const std::uint64_t percent_scaled = std::uint64_t{depth} * 100;
  if (percent_scaled >= std::uint64_t{capacity} * 90) return BackpressureLevel::CRITICAL;
  if (percent_scaled >= std::uint64_t{capacity} * 75) return BackpressureLevel::WARNING;
  return BackpressureLevel::NORMAL;
}

// The levels that follow admission (BackpressureScale::kFollowAdmission):
// WARNING from FillLimit(low_percent), the depth at which LOW is refused,
// CRITICAL from FillLimit(medium_percent), FULL at `capacity`.
constexpr BackpressureLevel ClassifyBackpressure(Position depth, Position capacity,
                                                 const AdmissionThresholds& thresholds) noexcept {
  if (depth >= capacity) return BackpressureLevel::FULL;
  if (depth >= FillLimit(thresholds.medium_percent, capacity)) return BackpressureLevel::CRITICAL;
  if (depth >= FillLimit(thresholds.low_percent, capacity)) return BackpressureLevel::WARNING;
  return BackpressureLevel::NORMAL;
}

constexpr const char* ToString(BackpressureLevel level) noexcept {
  switch (level) {
    case BackpressureLevel::NORMAL:
      return "NORMAL";
    case BackpressureLevel::WARNING:
      return "WARNING";
    case BackpressureLevel::CRITICAL:
      return "CRITICAL";
    case BackpressureLevel::FULL:
      return "FULL";
  }
  return "INVALID";
}

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
