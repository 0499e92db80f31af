// The clocks Publish() stamps messages with. Choose one through
// BusTraits::Clock: any type with `static std::uint64_t NowMicros() noexcept`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "sluice/config.hpp"

#if SLUICE_BARE_METAL
// No counter clock: CounterClock falls back to steady_clock.
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define SLUICE_COUNTER_X86 1
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define SLUICE_COUNTER_ARM64 1
#endif

namespace sluice {

// No clock: every reading is 0. The default under SLUICE_BARE_METAL, where
// only the application knows its timer; set BusTraits::Clock to a type that
// reads it (a SysTick count, the DWT cycle counter) or pass timestamps to
// PublishFast().
struct NullClock {
  static constexpr std::uint64_t NowMicros() noexcept { return 0; }
};

// std::chrono::steady_clock in microseconds. Portable; on virtual machines a
// read can cost tens of nanoseconds and serialise the pipeline.
struct SteadyClock {
  static std::uint64_t NowMicros() noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }
};

namespace detail {

// The CPU's constant-rate counter: the invariant TSC on x86, the generic
// timer on ARMv8. Reading it does not serialise and costs a few nanoseconds.
inline bool HasConstantRateCounter() noexcept {
#if defined(SLUICE_COUNTER_X86)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx);
  return (edx & (1u << 8)) != 0;  // invariant TSC
#elif defined(SLUICE_COUNTER_ARM64)
  return true;
#else
  return false;
#endif
}

inline std::uint64_t ReadCounter() noexcept {
#if defined(SLUICE_COUNTER_X86)
  return __rdtsc();
#elif defined(SLUICE_COUNTER_ARM64)
  std::uint64_t value;
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(value));
  return value;
#else
  return 0;
#endif
}

// Converts counter ticks to microseconds: base + (ticks - base_ticks) * scale,
// scale in microseconds per tick as a 32.32 fixed-point number.
struct CounterCalibration {
  std::uint64_t base_ticks = 0;
  std::uint64_t base_micros = 0;
  std::uint64_t micros_per_tick_q32 = 0;
  std::uint64_t next_check_ticks = 0;  // when to refine (UINT64_MAX: never)

  std::uint64_t MicrosAt(std::uint64_t ticks) const noexcept {
    // A reading taken just before this calibration was published (or on a
    // core whose counter lags slightly) must not wrap around.
    if (ticks <= base_ticks) return base_micros;
    const std::uint64_t delta = ticks - base_ticks;
    // (delta * scale) >> 32 without a 128-bit product, so 32-bit targets compile too.
    const std::uint64_t high = (delta >> 32) * micros_per_tick_q32;
    const std::uint64_t low = ((delta & 0xFFFFFFFFu) * micros_per_tick_q32) >> 32;
    return base_micros + high + low;
  }
};

// What CounterClockState reads: the CPU's counter and steady_clock.
struct HardwareCounterSource {
  static std::uint64_t Counter() noexcept { return ReadCounter(); }
  static std::uint64_t SteadyMicros() noexcept { return SteadyClock::NowMicros(); }
};

// Process-wide calibration state of CounterClock. Each refinement is written
// once into its own slot and then published by a release store of `current`;
// readers acquire `current`, so they only ever read a complete, immutable
// slot. Refinements happen at fixed ages of the clock (kMilestoneMicros), each
// re-anchored where the previous one stood, so time stays continuous.
// `Source` supplies the two reads, so tests can drive a simulated counter.
template <typename Source>
class BasicCounterClockState {
 public:
  static constexpr int kSteps = 4;
  static constexpr std::uint64_t kMilestoneMicros[kSteps] = {10'000, 250'000, 5'000'000,
                                                             60'000'000};

  static BasicCounterClockState& Instance() noexcept {
    static BasicCounterClockState state;
    return state;
  }

  BasicCounterClockState() noexcept
      : anchor_ticks_(Source::Counter()), anchor_micros_(Source::SteadyMicros()) {}
  BasicCounterClockState(const BasicCounterClockState&) = delete;
  BasicCounterClockState& operator=(const BasicCounterClockState&) = delete;

  std::uint64_t NowMicros() noexcept {
    const std::uint64_t ticks = Source::Counter();
    const int index = current_.load(std::memory_order_acquire);
    if (index >= 0) {
      const CounterCalibration& calibration = steps_[index];
      if (ticks < calibration.next_check_ticks) return calibration.MicrosAt(ticks);
    }
    return Refine(ticks, index);
  }

  bool Calibrated() const noexcept { return current_.load(std::memory_order_acquire) >= 0; }

 private:
  // Before the first calibration: steady_clock. Past a milestone: the first
  // caller to claim it computes the next calibration; the others go on with
  // the current one.
  std::uint64_t Refine(std::uint64_t ticks, int index) noexcept {
    const std::uint64_t now = Source::SteadyMicros();
    const int next = index + 1;
    const std::uint64_t age = now - anchor_micros_;
    if (next < kSteps && age >= kMilestoneMicros[next] && ticks > anchor_ticks_) {
      int expected = next;
      if (claimed_.compare_exchange_strong(expected, next + 1, std::memory_order_relaxed)) {
        CounterCalibration& calibration = steps_[next];
        // Floating point: `age` may be hours if the clock was not read for a
        // while, and the shift would overflow; this path runs four times.
        constexpr double kQ32 = 4294967296.0;
        calibration.micros_per_tick_q32 = static_cast<std::uint64_t>(
            static_cast<double>(age) / static_cast<double>(ticks - anchor_ticks_) * kQ32);
        calibration.base_ticks = ticks;
        calibration.base_micros = index >= 0 ? steps_[index].MicrosAt(ticks) : now;
        if (next + 1 < kSteps) {
          const double wait_micros =
              age < kMilestoneMicros[next + 1] ? double(kMilestoneMicros[next + 1] - age) : 0.0;
          calibration.next_check_ticks =
              ticks +
              static_cast<std::uint64_t>(wait_micros * kQ32 /
                                         static_cast<double>(calibration.micros_per_tick_q32));
        } else {
          calibration.next_check_ticks = ~std::uint64_t{0};
        }
        // Publishes the slot written above (see the class comment).
        current_.store(next, std::memory_order_release);
        return calibration.base_micros;
      }
    }
    return index >= 0 ? steps_[index].MicrosAt(ticks) : now;
  }

  const std::uint64_t anchor_ticks_;
  const std::uint64_t anchor_micros_;
  CounterCalibration steps_[kSteps];
  std::atomic<int> current_{-1};
  std::atomic<int> claimed_{0};  // calibrations started so far
};

using CounterClockState = BasicCounterClockState<HardwareCounterSource>;

}  // namespace detail

// The default bus clock: microseconds on steady_clock's time line, read from
// the CPU's constant-rate counter (x86-64 with invariant TSC, ARMv8), which
// costs a few nanoseconds and does not serialise; steady_clock elsewhere. On
// x86 the counter is calibrated against steady_clock about 10 ms after first
// use (steady_clock is read until then) and refined at 0.25 s, 5 s and 60 s;
// after that it may drift from steady_clock by parts per million. Readings
// never decrease on any one thread.
struct CounterClock {
  static std::uint64_t NowMicros() noexcept {
#if defined(SLUICE_COUNTER_X86)
    static const bool usable = detail::HasConstantRateCounter();
    if (!usable) return SteadyClock::NowMicros();
    // Counters of different cores (vCPUs above all) may differ by a little,
    // and calibrations re-anchor: never let a thread see time go back.
    static thread_local std::uint64_t last_reading = 0;
    std::uint64_t now = detail::CounterClockState::Instance().NowMicros();
    if (now < last_reading) now = last_reading;
    last_reading = now;
    return now;
#elif defined(SLUICE_COUNTER_ARM64)
    // The generic timer's frequency is architectural: no calibration.
    static const std::uint64_t frequency = [] {
      std::uint64_t value;
      __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(value));
      return value;
    }();
    static const std::uint64_t base_ticks = detail::ReadCounter();
    static const std::uint64_t base_micros = SteadyClock::NowMicros();
    const std::uint64_t delta = detail::ReadCounter() - base_ticks;
    return base_micros + (delta / frequency) * 1'000'000 +
           (delta % frequency) * 1'000'000 / frequency;
#else
    return SteadyClock::NowMicros();
#endif
  }

  // True once readings come from the counter rather than steady_clock.
  static bool UsesCounter() noexcept {
#if defined(SLUICE_COUNTER_X86)
    return detail::HasConstantRateCounter() && detail::CounterClockState::Instance().Calibrated();
#elif defined(SLUICE_COUNTER_ARM64)
    return true;
#else
    return false;
#endif
  }
};

}  // namespace sluice
