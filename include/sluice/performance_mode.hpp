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
