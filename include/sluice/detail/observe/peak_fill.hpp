// The highest fill of the shared queue since an observer last took it, and
// the highest level the bus reported at those fills, so a scrape sees the
// pressure between scrapes, not only at them (docs/api.md, "Between two
// reads"). Noted where the fill is known at no cost to an admitted publish:
// by every refusal for fill (the refused claim saw at least the priority's
// limit) and by the consumer at the start of each batch (FULL_FEATURED).
// The level is taken when the fill is noted, so thresholds changed later do
// not change it. Only maxima: relaxed throughout, as they order no other
// data (fill and level are each a maximum of their own; a Take between two
// notes may split a note's pair, never lose its larger values).
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

class PeakFill {
 public:
  // Any thread: raises the peaks to `fill` and `level`. Lock-free: a failed
  // CAS means another thread raised them, or an observer took them.
  void Note(Position fill, BackpressureLevel level) noexcept {
    Raise(fill_, fill);
    Raise(level_, static_cast<std::uint32_t>(level));
  }
  // Any thread: the peaks since the last Take, at least `now_fill` and
  // `now_level` (the fill and its level at this moment); starts the next
  // period at 0.
  BackpressurePeak Take(Position now_fill, BackpressureLevel now_level) noexcept {
    return Combine(fill_.exchange(0, std::memory_order_relaxed),
                   level_.exchange(0, std::memory_order_relaxed), now_fill, now_level);
  }
  // As Take, leaving the period running.
  BackpressurePeak Peek(Position now_fill, BackpressureLevel now_level) const noexcept {
    return Combine(fill_.load(std::memory_order_relaxed), level_.load(std::memory_order_relaxed),
                   now_fill, now_level);
  }

 private:
  static BackpressurePeak Combine(Position fill, std::uint32_t level, Position now_fill,
                                  BackpressureLevel now_level) noexcept {
    BackpressurePeak peak;
    peak.fill = static_cast<std::size_t>(fill > now_fill ? fill : now_fill);
    peak.level = level > static_cast<std::uint32_t>(now_level)
                     ? static_cast<BackpressureLevel>(level)
                     : now_level;
    return peak;
  }

  template <typename T>
  static void Raise(std::atomic<T>& peak, T value) noexcept {
    T seen = peak.load(std::memory_order_relaxed);
    while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed,
                                                       std::memory_order_relaxed)) {
    }
  }

  std::atomic<Position> fill_{0};
  std::atomic<std::uint32_t> level_{0};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
