// The clocks Publish() stamps messages with. Choose one through
// BusTraits::Clock: any type with `static std::uint64_t NowNanos() noexcept`
// (nanoseconds). A clock with only `static std::uint64_t NowMicros()
// noexcept` still works: the bus reads NowMicros() * 1000, so its timestamps
// and latencies then have microsecond granularity. A clock may also defer
// its conversion off the publishing thread (CounterClock does): Publish then
// stores `static std::uint64_t Stamp() noexcept`, and the bus's consumer
// converts a stored value with the top bit set with `static std::uint64_t
// StampNanos(std::uint64_t) noexcept` before anyone reads the message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/counter_calibration.hpp"

#if SLUICE_FREESTANDING
// No counter clock: CounterClock falls back to steady_clock.
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define SLUICE_COUNTER_X86 1
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define SLUICE_COUNTER_ARM64 1
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// No clock: every reading is 0. The default under SLUICE_FREESTANDING, where
// only the application knows its timer; set BusTraits::Clock to a type that
// reads it (a SysTick count, the DWT cycle counter) or pass timestamps to
// PublishFast().
struct NullClock {
  static constexpr std::uint64_t NowNanos() noexcept { return 0; }
  static constexpr std::uint64_t NowMicros() noexcept { return 0; }
};

// std::chrono::steady_clock in nanoseconds (NowNanos, what the bus reads) or
// microseconds. Portable; on virtual machines a read can cost tens of
// nanoseconds and serialise the pipeline.
struct SteadyClock {
  static std::uint64_t NowNanos() noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }
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

// What CounterClockState reads: the CPU's counter and steady_clock.
struct HardwareCounterSource {
  static std::uint64_t Counter() noexcept { return ReadCounter(); }
  static std::uint64_t SteadyMicros() noexcept { return SteadyClock::NowMicros(); }
  static std::uint64_t SteadyNanos() noexcept { return SteadyClock::NowNanos(); }
};

using CounterClockState = BasicCounterClockState<HardwareCounterSource>;

}  // namespace detail

// The default bus clock: nanoseconds (NowNanos, what the bus reads) or
// microseconds (NowMicros) on steady_clock's time line, read from the CPU's
// constant-rate counter (x86-64 with invariant TSC, ARMv8), which costs a
// few nanoseconds and does not serialise; steady_clock elsewhere. Readings
// of either never decrease on any one thread. The two share the calibration
// (below), each with its own scale: NowNanos() has the counter's resolution
// (0.33 ns a tick at 3 GHz), not NowMicros() * 1000.
//
// On x86 the counter is calibrated against steady_clock about 10 ms after
// first use (steady_clock is read until then) and refined at 0.25 s, 5 s and
// 60 s. Each pairing of a counter value with a steady_clock reading reads the
// counter just before and just after steady_clock, keeps the narrowest of 8
// such brackets and accepts it only if it spans at most
// detail::kMaxPairingBracketTicks (2^15 ticks: 11 us at 3 GHz, 33 us at 1 GHz);
// a preemption between the reads widens the bracket and is thrown away
// instead of being taken for elapsed time. A calibration without an
// acceptable bracket leaves the clock as it was and is retried 1 ms later,
// backing off to once a second. With W the widest accepted bracket in
// microseconds, each calibration starts within W/2 + 1 us of steady_clock and
// its rate errs by at most (W + 2 us) over the clock's age at that
// calibration. Until the 60 s calibration the clock so stays within
// 25.5 W + 51 us of steady_clock (under 0.9 ms even at 1 GHz; brackets are
// usually a few tens of nanoseconds); after it, it drifts by at most
// W + 2 us a minute (0.6 ppm at 1 GHz). The same bounds hold for NowNanos()
// (in nanoseconds: times 1000). A calibration that comes late (no
// acceptable bracket) lets the previous rate error run on until it does. A
// calibration may step the clock by
// the previous one's error, forward or back; a thread does not see it go back.
struct CounterClock {
  static std::uint64_t NowNanos() noexcept { return Read<true>(); }
  static std::uint64_t NowMicros() noexcept { return Read<false>(); }

  // What Publish stores (BusTraits::Clock's optional Stamp/StampNanos pair):
  // once calibrated, the counter as read, tagged with the calibration that
  // converts it (top bit set); before, NowNanos(). The bus's consumer
  // converts a tagged stamp with StampNanos() before anyone sees the
  // message, to what NowNanos() would have read at that instant (without
  // its per-thread floor: two stamps of one thread may so differ from
  // their order by the counters' disagreement between two cores or a
  // calibration step, as two threads' NowNanos() readings may). A counter
  // read costs a few instructions; the conversion, about 11 through the
  // consumer's StampConverter, is the consumer's. A value without the top bit is nanoseconds
  // already, and StampNanos() returns it as it is.
  static std::uint64_t Stamp() noexcept {
#if defined(SLUICE_COUNTER_X86)
    using State = detail::CounterClockState;
    const std::uint64_t word = State::Instance().StampWord();
    const std::uint64_t until = word & State::kStampTicksMask;
    const std::uint64_t ticks = detail::ReadCounter();
    if (ticks < until) return ticks + (word - until);  // the tag | ticks (ticks < until < 2^61)
#endif
    return NowNanos();
  }
  static std::uint64_t StampNanos(std::uint64_t stamp) noexcept {
#if defined(SLUICE_COUNTER_X86)
    return detail::CounterClockState::Instance().StampNanos(stamp);
#else
    return stamp;
#endif
  }

#if defined(SLUICE_COUNTER_X86)
  // StampNanos() for one thread converting many stamps (the bus's
  // consumer keeps one): a stamp of the calibration of the last stamp it
  // looked up converts without the look-up, about 10 instructions fewer;
  // any other as StampNanos() does, to the same value.
  class StampConverter {
   public:
    SLUICE_ALWAYS_INLINE std::uint64_t Nanos(std::uint64_t stamp) noexcept {
      return converter_.Nanos(detail::CounterClockState::Instance(), stamp);
    }

   private:
    detail::CounterClockState::StampConverter converter_;
  };
#endif

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

 private:
  template <bool kNanos>
  static std::uint64_t Read() noexcept {
#if defined(SLUICE_COUNTER_X86)
    static const bool usable = detail::HasConstantRateCounter();
    if (!usable) return kNanos ? SteadyClock::NowNanos() : SteadyClock::NowMicros();
    // Counters of different cores (vCPUs above all) may differ by a little,
    // and calibrations re-anchor: never let a thread see time go back (one
    // last reading per unit: each instantiation has its own).
    static thread_local std::uint64_t last_reading = 0;
    detail::CounterClockState& state = detail::CounterClockState::Instance();
    std::uint64_t now = kNanos ? state.NowNanos() : state.NowMicros();
    if (now < last_reading) now = last_reading;
    last_reading = now;
    return now;
#elif defined(SLUICE_COUNTER_ARM64)
    const std::uint64_t frequency = Arm64Frequency();
    const detail::CounterPairing& anchor = Arm64Anchor();
    const std::uint64_t unit = kNanos ? 1'000'000'000 : 1'000'000;
    const std::uint64_t base = kNanos ? anchor.steady * 1000 : anchor.steady;
    const std::uint64_t ticks = detail::ReadCounter();
    if (ticks <= anchor.ticks) return base;  // a core whose counter lags slightly
    const std::uint64_t delta = ticks - anchor.ticks;
    return base + (delta / frequency) * unit + (delta % frequency) * unit / frequency;
#else
    return kNanos ? SteadyClock::NowNanos() : SteadyClock::NowMicros();
#endif
  }

#if defined(SLUICE_COUNTER_ARM64)
  // The generic timer's frequency is architectural: no calibration.
  static std::uint64_t Arm64Frequency() noexcept {
    static const std::uint64_t frequency = [] {
      std::uint64_t value;
      __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(value));
      return value;
    }();
    return frequency;
  }
  // Bracketed like x86's pairings (10 us at most). With no retry here, the
  // narrowest of a few rounds is kept even if wider: still the best there is.
  static const detail::CounterPairing& Arm64Anchor() noexcept {
    static const detail::CounterPairing anchor = [] {
      detail::CounterPairing pairing;
      for (int round = 0;
           round < 4 && !detail::PairCounterWithSteady([] { return detail::ReadCounter(); },
                                                       [] { return SteadyClock::NowMicros(); },
                                                       Arm64Frequency() / 100'000 + 1, &pairing);
           ++round) {
      }
      return pairing;
    }();
    return anchor;
  }
#endif
};

namespace detail {

// Whether `Clock` has `static std::uint64_t NowNanos() noexcept`.
template <typename Clock, typename = void>
struct HasNowNanos : std::false_type {};
template <typename Clock>
struct HasNowNanos<Clock, std::void_t<decltype(Clock::NowNanos())>> : std::true_type {};

template <typename Clock, typename = void>
struct HasNowMicros : std::false_type {};
template <typename Clock>
struct HasNowMicros<Clock, std::void_t<decltype(Clock::NowMicros())>> : std::true_type {};

// Whether `Clock` stamps publishes with `static std::uint64_t Stamp()
// noexcept`, a value its `static std::uint64_t StampNanos(std::uint64_t)
// noexcept` converts to nanoseconds on the consumer's side (CounterClock);
// a stamp with the top bit clear must be nanoseconds already.
template <typename Clock, typename = void>
struct DefersStampConversion : std::false_type {};
template <typename Clock>
struct DefersStampConversion<
    Clock, std::void_t<decltype(Clock::Stamp()), decltype(Clock::StampNanos(std::uint64_t{}))>>
    : std::true_type {};

inline constexpr std::uint64_t kDeferredStamp = std::uint64_t{1} << 63;

// Whether a clock's StampConverter has `std::uint64_t Nanos(std::uint64_t)
// noexcept`.
template <typename Converter, typename = void>
struct ConvertsStamps : std::false_type {};
template <typename Converter>
struct ConvertsStamps<Converter,
                      std::void_t<decltype(std::declval<Converter&>().Nanos(std::uint64_t{}))>>
    : std::bool_constant<std::is_same_v<decltype(std::declval<Converter&>().Nanos(std::uint64_t{})),
                                        std::uint64_t>&& noexcept(std::declval<Converter&>()
                                                                      .Nanos(std::uint64_t{}))> {};

// StampNanos for one thread converting many stamps (the bus's consumer):
// the clock's optional `StampConverter`, a type whose default-constructed
// object converts with `std::uint64_t Nanos(std::uint64_t) noexcept`,
// agreeing with StampNanos for every stored value (a StampConverter of
// another shape does not compile); else StampNanos itself.
template <typename Clock, typename = void>
class StampConversion {
 public:
  SLUICE_ALWAYS_INLINE std::uint64_t Nanos(std::uint64_t stamp) noexcept {
    return Clock::StampNanos(stamp);
  }
};
template <typename Clock>
class StampConversion<Clock, std::void_t<typename Clock::StampConverter>> {
  static_assert(std::is_nothrow_default_constructible_v<typename Clock::StampConverter>,
                "Sluice: a clock's StampConverter must be default-constructible (noexcept)");
  static_assert(ConvertsStamps<typename Clock::StampConverter>::value,
                "Sluice: a clock's StampConverter needs a public "
                "`std::uint64_t Nanos(std::uint64_t) noexcept`");

 public:
  SLUICE_ALWAYS_INLINE std::uint64_t Nanos(std::uint64_t stamp) noexcept {
    return converter_.Nanos(stamp);
  }

 private:
  typename Clock::StampConverter converter_;
};

// What Publish stores in timestamp_ns: Clock::Stamp() or ClockNanos().
template <typename Clock>
SLUICE_ALWAYS_INLINE std::uint64_t ClockStamp() noexcept;

// A stored timestamp in nanoseconds: a deferred stamp converted.
template <typename Clock>
SLUICE_ALWAYS_INLINE std::uint64_t StampNanos(std::uint64_t stamp) noexcept {
  if constexpr (DefersStampConversion<Clock>::value) {
    if ((stamp & kDeferredStamp) != 0) return Clock::StampNanos(stamp);
  }
  return stamp;
}

// A bus clock's reading in nanoseconds: NowNanos(), or for a clock written
// before 0.4 that only has NowMicros(), NowMicros() * 1000 (microsecond
// granularity then). 0 still means "no clock".
template <typename Clock>
SLUICE_ALWAYS_INLINE std::uint64_t ClockNanos() noexcept {
  if constexpr (HasNowNanos<Clock>::value) {
    return Clock::NowNanos();
  } else {
    static_assert(HasNowMicros<Clock>::value,
                  "Sluice: a bus clock (BusTraits::Clock) needs "
                  "`static std::uint64_t NowNanos() noexcept` (or, at microsecond "
                  "granularity, `static std::uint64_t NowMicros() noexcept`)");
    return Clock::NowMicros() * 1000;
  }
}

template <typename Clock>
SLUICE_ALWAYS_INLINE std::uint64_t ClockStamp() noexcept {
  if constexpr (DefersStampConversion<Clock>::value) {
    return Clock::Stamp();
  } else {
    return ClockNanos<Clock>();
  }
}

}  // namespace detail

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
