// A parker that counts the parks, so a threaded test knows it exercised the
// way into sleep (and fails if it never did); forwards the heavy fence where
// the parker has one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#endif

namespace sluice_test {

inline std::atomic<std::uint64_t> g_parks{0};

template <typename Inner>
struct CountingParker {
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    g_parks.fetch_add(1, std::memory_order_relaxed);
    inner.Wait(word, expected, timeout);
  }
  void WakeAll(std::atomic<std::uint32_t>& word) noexcept { inner.WakeAll(word); }
  Inner inner;
};

#if defined(__linux__)
struct CountingMembarrierParker : CountingParker<sluice::MembarrierFutexParker> {
  bool EnableHeavyFence() noexcept { return inner.EnableHeavyFence(); }
  bool HeavyFence() noexcept { return inner.HeavyFence(); }
};
#endif

}  // namespace sluice_test
