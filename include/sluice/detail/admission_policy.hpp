// The run-time knobs every publish reads: performance mode and the fill limit
// per priority. They share one read-mostly cache line; writes are rare.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/cpu_relax.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice::detail {

template <Position kCapacity>
class alignas(kCacheLineSize) AdmissionPolicy {
 public:
  AdmissionPolicy() noexcept { StoreLimits(AdmissionThresholds{}); }

  // A publish reads the mode once and acts on that value: a switch is a hint
  // with no ordering, so relaxed suffices on both sides.
  PerformanceMode Mode() const noexcept { return mode_.load(std::memory_order_relaxed); }
  void SetMode(PerformanceMode mode) noexcept { mode_.store(mode, std::memory_order_relaxed); }

  // How many queued messages refuse `priority` in `mode`.
  Position LimitFor(PerformanceMode mode, MessagePriority priority) const noexcept {
    if (mode == PerformanceMode::BARE_METAL) return kCapacity;
    return limits_[static_cast<std::size_t>(priority)].load(std::memory_order_relaxed);
  }

  // Any thread. False, keeping the old thresholds, unless valid.
  bool SetThresholds(const AdmissionThresholds& thresholds) noexcept {
    if (!thresholds.IsValid()) return false;
    // Setters are serialised so two of them cannot interleave their limits.
    while (writer_lock_.test_and_set(std::memory_order_acquire)) CpuRelax();
    StoreLimits(thresholds);
    writer_lock_.clear(std::memory_order_release);
    return true;
  }

  AdmissionThresholds Thresholds() const noexcept {
    AdmissionThresholds t;
    t.low_percent = percents_[0].load(std::memory_order_relaxed);
    t.medium_percent = percents_[1].load(std::memory_order_relaxed);
    t.high_percent = percents_[2].load(std::memory_order_relaxed);
    return t;
  }

 private:
  void StoreLimits(const AdmissionThresholds& t) noexcept {
    const std::uint8_t percents[kPriorityCount] = {t.low_percent, t.medium_percent, t.high_percent};
    for (std::size_t i = 0; i < kPriorityCount; ++i) {
      percents_[i].store(percents[i], std::memory_order_relaxed);
      limits_[i].store(FillLimit(percents[i], kCapacity), std::memory_order_relaxed);
    }
  }

  std::atomic<PerformanceMode> mode_{PerformanceMode::FULL_FEATURED};
  std::atomic<Position> limits_[kPriorityCount] = {};  // indexed by MessagePriority
  std::atomic<std::uint8_t> percents_[kPriorityCount] = {};
  std::atomic_flag writer_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace sluice::detail
