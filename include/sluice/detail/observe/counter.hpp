// The one way Sluice bumps a statistics counter.
#pragma once

#include <atomic>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Adds `amount` to a counter. With a single writer a plain load and store suffice
// (no locked instruction); otherwise an atomic increment. `kStore`: the
// store's (or the increment's) order, relaxed unless a reader must tell
// whose counts it read (a producer lane's, SYNC POINT (N)).
template <bool kSingleWriter, std::memory_order kStore = std::memory_order_relaxed>
inline void Increment(std::atomic<Counter>& counter, Counter amount = 1) noexcept {
  if constexpr (kSingleWriter) {
    counter.store(static_cast<Counter>(counter.load(std::memory_order_relaxed) + amount), kStore);
  } else {
    counter.fetch_add(amount, kStore);
  }
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
