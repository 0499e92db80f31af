// The per-publish feature set, switchable while the bus runs.
#pragma once

#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class PerformanceMode : std::uint8_t {
  // Priority admission, backpressure, statistics, error callback.
  FULL_FEATURED = 0,
  // Enqueue only: capacity is the sole admission check, nothing is counted and
  // Publish leaves timestamp_ns at 0 (PublishFast still stores the caller's).
  BARE_METAL = 1,
  // Priority admission without statistics counters.
  NO_STATS = 2,
};

// The bus traits' choice of mode (`using Mode = ...;`, sluice/bus_traits.hpp).
//
// RunTimeMode, the default: the bus starts FULL_FEATURED and
// SetPerformanceMode switches it while it runs; each publish and each batch
// reads it once.
struct RunTimeMode {
  static constexpr bool kFixed = false;
  // Whether Publish may stamp the bus clock (not in BARE_METAL).
  static constexpr bool kMayStamp = true;
};

// One mode for the bus's life, fixed at compile time: no publish or batch
// reads a mode, and the code of the other modes is not compiled in (for a
// bus that never switches, a small microcontroller's above all).
// GetPerformanceMode returns it; SetPerformanceMode does not compile.
template <PerformanceMode kMode>
struct FixedMode {
  static_assert(kMode == PerformanceMode::FULL_FEATURED || kMode == PerformanceMode::BARE_METAL ||
                    kMode == PerformanceMode::NO_STATS,
                "Sluice: FixedMode takes FULL_FEATURED, BARE_METAL or NO_STATS");
  static constexpr bool kFixed = true;
  static constexpr PerformanceMode kValue = kMode;
  static constexpr bool kMayStamp = kMode != PerformanceMode::BARE_METAL;
};

constexpr const char* ToString(PerformanceMode mode) noexcept {
  switch (mode) {
    case PerformanceMode::FULL_FEATURED:
      return "FULL_FEATURED";
    case PerformanceMode::BARE_METAL:
      return "BARE_METAL";
    case PerformanceMode::NO_STATS:
      return "NO_STATS";
  }
  return "INVALID";
}

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
