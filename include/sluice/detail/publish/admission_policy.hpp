// The run-time knobs every publish reads: performance mode and the fill limit
// per priority. They share one read-mostly cache line; writes are rare.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// kLaneCapacity != 0: also the limits of a producer lane of that capacity
// (the same thresholds applied to the lane's fill).
template <Position kCapacity, Position kLaneCapacity = 0>
class alignas(kCacheLineSize) AdmissionPolicy {
 public:
  // The default thresholds' limits, computed at compile time: no division
  // or fence runs at construction (a microcontroller's image is smaller).
  AdmissionPolicy() noexcept = default;

  // A publish reads the mode once and acts on that value: a switch is a hint
  // with no ordering, so relaxed suffices on both sides.
  PerformanceMode Mode() const noexcept { return mode_.load(std::memory_order_relaxed); }
  void SetMode(PerformanceMode mode) noexcept { mode_.store(mode, std::memory_order_relaxed); }

  // How many queued messages refuse `priority` in `mode`.
  Position LimitFor(PerformanceMode mode, MessagePriority priority) const noexcept {
    if (mode == PerformanceMode::BARE_METAL) return kCapacity;
    return limits_[static_cast<std::size_t>(priority)].load(std::memory_order_relaxed);
  }
  // As LimitFor, for a producer lane.
  Position LaneLimitFor(PerformanceMode mode, MessagePriority priority) const noexcept {
    static_assert(kLaneCapacity != 0, "no lanes");
    if (mode == PerformanceMode::BARE_METAL) return kLaneCapacity;
    return lane_limits_[static_cast<std::size_t>(priority)].load(std::memory_order_relaxed);
  }

  // Any thread or interrupt handler. False, keeping the old thresholds,
  // unless valid. Lock-free: the percentages are one atomic word, and the
  // limits derived from them are rewritten until they match the word as it
  // stands after the rewrite. A setter that interrupts (or races with)
  // another therefore never waits for it, and whichever finishes last leaves
  // limits that agree with the last percentages stored. A publish that runs
  // during a change may act on old or new limits, one priority at a time.
  //
  // Ordering: every access of a setter is seq_cst, so all setters' stores
  // and re-reads fall into one total order; the last rewrite of each limit
  // follows the last store of the word (its re-read saw that store), so no
  // stale rewrite can land after it. Publishers read relaxed: a limit is a
  // hint with no data behind it.
  bool SetThresholds(const AdmissionThresholds& thresholds) noexcept {
    if (!thresholds.IsValid()) return false;
    packed_.store(Pack(thresholds), std::memory_order_seq_cst);
    for (std::uint32_t seen = packed_.load(std::memory_order_seq_cst);;) {
      StoreLimits(Unpack(seen));
      const std::uint32_t now = packed_.load(std::memory_order_seq_cst);
      if (now == seen) return true;
      seen = now;
    }
  }

  AdmissionThresholds Thresholds() const noexcept {
    return Unpack(packed_.load(std::memory_order_relaxed));
  }

  // The level of `depth` under BackpressureScale::kFollowAdmission:
  // ClassifyBackpressure(depth, kCapacity, Thresholds()) while no setter
  // runs, read from the very limits publishers compare against (whatever
  // the mode; BARE_METAL admits up to the capacity, so it warns early).
  // Relaxed, as the publishers' reads: during a change the two limits may
  // come from either side of it, one at a time.
  BackpressureLevel LevelAt(Position depth) const noexcept {
    const Position low = limits_[kLow].load(std::memory_order_relaxed);
    const Position medium = limits_[kMedium].load(std::memory_order_relaxed);
    if (depth >= kCapacity) return BackpressureLevel::FULL;
    if (depth >= medium) return BackpressureLevel::CRITICAL;
    if (depth >= low) return BackpressureLevel::WARNING;
    return BackpressureLevel::NORMAL;
  }
  // As LevelAt, for a producer lane's depth against its own limits.
  BackpressureLevel LaneLevelAt(Position depth) const noexcept {
    static_assert(kLaneCapacity != 0, "no lanes");
    const Position low = lane_limits_[kLow].load(std::memory_order_relaxed);
    const Position medium = lane_limits_[kMedium].load(std::memory_order_relaxed);
    if (depth >= kLaneCapacity) return BackpressureLevel::FULL;
    if (depth >= medium) return BackpressureLevel::CRITICAL;
    if (depth >= low) return BackpressureLevel::WARNING;
    return BackpressureLevel::NORMAL;
  }

 private:
  static constexpr std::uint32_t Pack(const AdmissionThresholds& t) noexcept {
    return std::uint32_t{t.low_percent} | std::uint32_t{t.medium_percent} << 8 |
           std::uint32_t{t.high_percent} << 16;
  }
  static constexpr AdmissionThresholds Unpack(std::uint32_t packed) noexcept {
    AdmissionThresholds t;
    t.low_percent = static_cast<std::uint8_t>(packed);
    t.medium_percent = static_cast<std::uint8_t>(packed >> 8);
    t.high_percent = static_cast<std::uint8_t>(packed >> 16);
    return t;
  }

  void StoreLimits(const AdmissionThresholds& t) noexcept {
    const std::uint8_t percents[kPriorityCount] = {t.low_percent, t.medium_percent, t.high_percent};
    for (std::size_t i = 0; i < kPriorityCount; ++i) {
      limits_[i].store(FillLimit(percents[i], kCapacity), std::memory_order_seq_cst);
      if constexpr (kLaneCapacity != 0) {
        lane_limits_[i].store(FillLimit(percents[i], kLaneCapacity), std::memory_order_seq_cst);
      }
    }
  }

  static constexpr std::size_t kLow = static_cast<std::size_t>(MessagePriority::LOW);
  static constexpr std::size_t kMedium = static_cast<std::size_t>(MessagePriority::MEDIUM);

  std::atomic<PerformanceMode> mode_{PerformanceMode::FULL_FEATURED};
  // Of `capacity` under the default thresholds, indexed by MessagePriority.
  static constexpr Position DefaultLimit(std::size_t priority, Position capacity) noexcept {
    constexpr AdmissionThresholds kDefaults{};
    const std::uint8_t percents[kPriorityCount] = {kDefaults.low_percent, kDefaults.medium_percent,
                                                   kDefaults.high_percent};
    return FillLimit(percents[priority], capacity);
  }

  // indexed by MessagePriority
  std::atomic<Position> limits_[kPriorityCount] = {
      DefaultLimit(0, kCapacity), DefaultLimit(1, kCapacity), DefaultLimit(2, kCapacity)};
  std::atomic<std::uint32_t> packed_{Pack(AdmissionThresholds{})};
  struct NoLaneLimits {};
  struct LaneLimits {
    std::atomic<Position> limits[kPriorityCount] = {DefaultLimit(0, kLaneCapacity),
                                                    DefaultLimit(1, kLaneCapacity),
                                                    DefaultLimit(2, kLaneCapacity)};
    std::atomic<Position>& operator[](std::size_t i) noexcept { return limits[i]; }
    const std::atomic<Position>& operator[](std::size_t i) const noexcept { return limits[i]; }
  };
  std::conditional_t<kLaneCapacity != 0, LaneLimits, NoLaneLimits> lane_limits_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
