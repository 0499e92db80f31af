// The in-process bus's backpressure gauges: the level of a fill on the
// traits' scale, the fullest of what admission judges (the shared queue
// and, with producer lanes, each lane on its own capacity), and the peak of
// those fills between two reads (PeakFill). The shared-memory bus's gauges
// read a segment's lanes instead (ipc/shm_statistics.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/peak_fill.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// kScale: the traits' kBackpressureScale; the capacities of the shared
// queue and of a lane (0 lanes: none). `policy` below is the bus's
// AdmissionPolicy, whose thresholds the kFollowAdmission scale reads.
template <std::size_t kSharedCapacity, std::size_t kLaneCapacity, std::uint32_t kLanes,
          BackpressureScale kScale>
class BackpressureGauges {
 public:
  struct Gauge {
    Position fill = 0;                                    // the fullest of them, in messages
    BackpressureLevel level = BackpressureLevel::NORMAL;  // the highest level among them
    double utilization_percent = 0;                       // the highest fill, in percent
  };

  // The level of a fill of the shared queue.
  template <typename Policy>
  static BackpressureLevel LevelOf(const Policy& policy, Position fill) noexcept {
    if constexpr (kScale == BackpressureScale::kFixed) {
      (void)policy;
      return ClassifyBackpressure(fill, kSharedCapacity);
    } else {
      return policy.LevelAt(fill);
    }
  }
  // The level of a fill of one producer lane.
  template <typename Policy>
  static BackpressureLevel LaneLevelOf(const Policy& policy, Position fill) noexcept {
    if constexpr (kScale == BackpressureScale::kFixed) {
      (void)policy;
      return ClassifyBackpressure(fill, kLaneCapacity);
    } else {
      return policy.LaneLevelAt(fill);
    }
  }

  // The gauges now: the shared queue's fill `shared`, and each lane's
  // (`lane_depth(i)`, read once each), so the figure is a recent one, not
  // one instant's.
  template <typename Policy, typename LaneDepth>
  static Gauge Fullest(const Policy& policy, Position shared, LaneDepth lane_depth) noexcept {
    Gauge gauge;
    const auto add = [&gauge](Position fill, BackpressureLevel level, std::size_t capacity) {
      if (fill > gauge.fill) gauge.fill = fill;
      if (level > gauge.level) gauge.level = level;
      const double percent = static_cast<double>(fill) * 100.0 / static_cast<double>(capacity);
      if (percent > gauge.utilization_percent) gauge.utilization_percent = percent;
    };
    add(shared, LevelOf(policy, shared), kSharedCapacity);
    if constexpr (kLanes > 0) {
      for (std::uint32_t i = 0; i < kLanes; ++i) {
        const Position lane = lane_depth(i);
        add(lane, LaneLevelOf(policy, lane), kLaneCapacity);
      }
    } else {
      (void)lane_depth;
    }
    return gauge;
  }

  // A fill the shared queue or a lane held (a refusal's, a batch's start).
  template <typename Policy>
  void NoteShared(const Policy& policy, Position fill) noexcept {
    peak_.Note(fill, LevelOf(policy, fill));
  }
  template <typename Policy>
  void NoteLane(const Policy& policy, Position fill) noexcept {
    peak_.Note(fill, LaneLevelOf(policy, fill));
  }

  // The peak since the last Take, at least the gauges `now`; Take starts
  // the next period.
  BackpressurePeak Take(const Gauge& now) noexcept { return peak_.Take(now.fill, now.level); }
  BackpressurePeak Peek(const Gauge& now) const noexcept { return peak_.Peek(now.fill, now.level); }

 private:
  // Written only by refusals for fill and by the consumer when a batch
  // starts above it; no admitted publish touches it.
  PeakFill peak_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
