// The highest fill of the shared queue since an observer last took it, so a
// scrape sees the pressure between scrapes, not only at them (docs/api.md,
// "Backpressure"). Noted where the fill is known at no cost to an admitted
// publish: by every refusal for fill (the refused claim saw at least the
// priority's limit) and by the consumer at the start of each batch
// (FULL_FEATURED). Only a maximum: relaxed throughout, as it orders no
// other data.
#pragma once

#include <atomic>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

class PeakFill {
 public:
  // Any thread: raises the peak to `fill`. Lock-free: a failed CAS means
  // another thread raised it, or an observer took it.
  void Note(Position fill) noexcept {
    Position peak = peak_.load(std::memory_order_relaxed);
    while (fill > peak && !peak_.compare_exchange_weak(peak, fill, std::memory_order_relaxed,
                                                       std::memory_order_relaxed)) {
    }
  }
  // Any thread: the peak since the last Take (at least `now`, the fill at
  // this moment), and starts the next period at 0.
  Position Take(Position now) noexcept {
    const Position peak = peak_.exchange(0, std::memory_order_relaxed);
    return peak > now ? peak : now;
  }

 private:
  std::atomic<Position> peak_{0};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
