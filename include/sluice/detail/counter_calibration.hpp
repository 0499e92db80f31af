// CounterClock's calibration (sluice/clock.hpp): converting a constant-rate
// counter's ticks to steady_clock's microseconds and nanoseconds, the
// bracketed pairings that measure its rate, and the process-wide state that
// refines it and tags publish stamps. `Source` supplies the reads, so tests
// drive it with a simulated counter.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// (delta * scale_q32) >> 32, modulo 2^64: one 128-bit product where the
// target has one (3 instructions on x86-64 against 7), else two 64-bit
// products, so 32-bit targets compile too; those agree while scale_q32 <
// 2^32 (a counter of 1 GHz or faster: every x86 constant-rate counter).
constexpr std::uint64_t ScaleQ32(std::uint64_t delta, std::uint64_t scale_q32) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ using Wide = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<Wide>(delta) * scale_q32) >> 32);
#else
  const std::uint64_t high = (delta >> 32) * scale_q32;
  const std::uint64_t low = ((delta & 0xFFFFFFFFu) * scale_q32) >> 32;
  return high + low;
#endif
}

// Converts counter ticks to microseconds or nanoseconds: base + (ticks -
// base_ticks) * scale, each scale (per tick) a 32.32 fixed-point number of
// its own, both taken from the same measured rate. The nanosecond scale is
// not the microsecond one times 1000: that one carries about 7 significant
// digits at 3 GHz (0.000333 us a tick), 1000 times too few for nanoseconds.
struct CounterCalibration {
  std::uint64_t base_ticks = 0;
  std::uint64_t base_micros = 0;
  std::uint64_t base_nanos = 0;  // base_micros * 1000
  std::uint64_t micros_per_tick_q32 = 0;
  std::uint64_t nanos_per_tick_q32 = 0;
  std::uint64_t next_check_ticks = 0;  // when to refine (UINT64_MAX: never)

  std::uint64_t MicrosAt(std::uint64_t ticks) const noexcept {
    // A reading taken just before this calibration was published (or on a
    // core whose counter lags slightly) must not wrap around.
    if (ticks <= base_ticks) return base_micros;
    return base_micros + ScaleQ32(ticks - base_ticks, micros_per_tick_q32);
  }
  // The same instant in nanoseconds. The base has microsecond precision (the
  // pairing's steady_clock reading); differences have the counter's.
  std::uint64_t NanosAt(std::uint64_t ticks) const noexcept {
    if (ticks <= base_ticks) return base_nanos;
    return base_nanos + ScaleQ32(ticks - base_ticks, nanos_per_tick_q32);
  }
};

// A steady_clock reading and the counter's value when it was taken.
struct CounterPairing {
  std::uint64_t ticks = 0;
  std::uint64_t steady = 0;
  std::uint64_t bracket_ticks = ~std::uint64_t{0};  // width of the bracket it came from
};

// Brackets tried per pairing.
inline constexpr int kPairingAttempts = 8;

// The widest bracket a pairing accepts: 2^15 ticks, 6.6 us at 5 GHz, 11 us at
// 3 GHz, 33 us at 1 GHz. A steady_clock read costs tens of nanoseconds through
// the vDSO and a microsecond or two as a system call, well inside it; a
// preemption (a time slice is a millisecond or more) is far outside it.
inline constexpr std::uint64_t kMaxPairingBracketTicks = std::uint64_t{1} << 15;

// Pairs a steady_clock reading with the counter. Reading the counter, then
// steady_clock, then the counter again brackets the moment of the steady_clock
// read; the bracket's middle is then off by at most half its width, however
// long the thread was stopped between the reads. Keeps the narrowest of
// kPairingAttempts brackets; false when even that one is wider than
// `max_bracket_ticks` (*pairing then holds it, for a caller with no better).
template <typename ReadCounterFn, typename ReadSteadyFn>
bool PairCounterWithSteady(ReadCounterFn read_counter, ReadSteadyFn read_steady,
                           std::uint64_t max_bracket_ticks, CounterPairing* pairing) noexcept {
  std::uint64_t narrowest = ~std::uint64_t{0};
  for (int attempt = 0; attempt < kPairingAttempts; ++attempt) {
    const std::uint64_t before = read_counter();
    const std::uint64_t steady = read_steady();
    const std::uint64_t after = read_counter();
    // after < before: moved to a core whose counter lags; no bracket.
    if (after < before || after - before >= narrowest) continue;
    narrowest = after - before;
    pairing->ticks = before + narrowest / 2;
    pairing->steady = steady;
    pairing->bracket_ticks = narrowest;
  }
  return narrowest <= max_bracket_ticks;
}

// Process-wide calibration state of CounterClock. An anchor pairing is taken
// at construction; calibrations at fixed ages of the clock (kMilestoneMicros)
// pair again and take the rate from the anchor to the new pairing. Every
// pairing is bracketed (PairCounterWithSteady); one without an acceptable
// bracket changes nothing and is retried later, backing off. Each calibration
// starts at its own pairing's steady_clock reading, so no error carries over
// from the one before; see CounterClock for the bound.
//
// Memory ordering: each calibration is written once into its own slot and
// then published by a release store of `current_`; readers acquire `current_`,
// so they only ever read a complete slot, and a published slot is never
// written again (`current_` only grows). Calibrating is exclusive: `busy_` is
// a try-lock taken with an acquire exchange and released with a release
// store, so each holder sees everything the previous holder wrote, including
// the fields only holders touch (anchor_, anchored_, failures_) and
// `current_`, which only holders store. `due_micros_` is a relaxed hint: a
// stale value only makes a caller skip an attempt or make one that finds
// nothing due.
// `Source` supplies the reads (the counter, steady_clock in microseconds for
// the pairings and, for NowNanos() before the first calibration, in
// nanoseconds), so tests can drive a simulated counter.
template <typename Source>
class BasicCounterClockState {
 public:
  static constexpr int kSteps = 4;
  static constexpr std::uint64_t kMilestoneMicros[kSteps] = {10'000, 250'000, 5'000'000,
                                                             60'000'000};
  // After a pairing without an acceptable bracket: the first retry's delay,
  // doubled per further failure up to the second.
  static constexpr std::uint64_t kFirstRetryMicros = 1'000;
  static constexpr std::uint64_t kMaxRetryMicros = 1'000'000;

  // The process's state: constant-initialised (no guard to test on a
  // read), anchored by the first reading (Refine: nothing is due yet).
  static BasicCounterClockState& Instance() noexcept;

  // Anchors now. No other thread can see the object yet: no need for `busy_`.
  BasicCounterClockState() noexcept { Calibrate(); }
  // Anchors at the first reading.
  struct AnchorAtFirstRead {};
  constexpr explicit BasicCounterClockState(AnchorAtFirstRead) noexcept {}
  BasicCounterClockState(const BasicCounterClockState&) = delete;
  BasicCounterClockState& operator=(const BasicCounterClockState&) = delete;

  std::uint64_t NowMicros() noexcept { return Now<false>(); }
  std::uint64_t NowNanos() noexcept { return Now<true>(); }

  // A publish stamp: while the current calibration serves (before its next
  // check, as NowNanos() would use it), the counter as read, tagged with
  // that calibration (kStampTagged, its index at kStampIndexShift); else
  // NowNanos(), which also makes the refinement that is due, on time, as
  // every reading does. StampNanos() turns a tagged stamp into the
  // nanoseconds NowNanos() would have returned at the read, less the
  // per-thread floor of CounterClock: the conversion moves off the
  // publishing thread, and a stamp means one instant whenever it is
  // converted (a later calibration does not change it).
  //
  // One word says both which calibration and until when (StampWord()): the
  // tag's bits over the calibration's next check, capped at kMaxTaggedTicks,
  // so a stamp is never tagged with a calibration past its range, and the
  // counter never reaches the tag's bits.
  //
  // Memory ordering: the word is stored (release) after its calibration
  // slot was written and `current_` published; Stamp() loads it with
  // acquire. A stamp reaches its converter through the bus (a slot's
  // release store, the consumer's acquire load), so StampNanos() reads a
  // slot whose writes happen before it.
  std::uint64_t Stamp() noexcept {
    const std::uint64_t word = StampWord();
    const std::uint64_t until = word & kStampTicksMask;
    const std::uint64_t ticks = Source::Counter();
    if (ticks < until) return (word ^ until) | ticks;
    return NowNanos();
  }
  // The tag over the tick at which it stops serving (0 until a
  // calibration is published: nothing is tagged).
  std::uint64_t StampWord() const noexcept { return stamp_word_.load(std::memory_order_acquire); }
  // A stamp without kStampTagged is nanoseconds already: returned as it is.
  std::uint64_t StampNanos(std::uint64_t stamp) const noexcept {
    if ((stamp & kStampTagged) == 0) return stamp;
    const int index = static_cast<int>((stamp >> kStampIndexShift) & (kSteps - 1));
    return steps_[index].NanosAt(stamp & kStampTicksMask);
  }
  // StampNanos() for a consumer converting many stamps: it holds the
  // calibration of the last stamp it had to look up, and converts a stamp
  // tagged with that one in one subtraction, one compare and the product;
  // any other stamp (another calibration's, one at or before the base, the
  // first one) goes through StampNanos(), and the converter then holds that
  // stamp's calibration. Both ways give the same value for every stamp:
  // NanosAt, base_nanos + (ticks - base_ticks) * scale past the base,
  // base_nanos at and before it. A new calibration costs a consumer one
  // look-up at its first stamp; a backlog of older stamps behind it, one
  // more at its first (the stamps of a queue are in order on one thread).
  //
  // One thread uses a converter (the bus's consumer). Memory ordering: it
  // reads the slot of the stamp's own calibration, as StampNanos() does: the
  // stamp reached the consumer through the bus (a release store, an acquire
  // load) from a producer whose Stamp() acquired the stamp word, released
  // after that slot was written; a published slot is never written again.
  class StampConverter {
   public:
    SLUICE_ALWAYS_INLINE std::uint64_t Nanos(const BasicCounterClockState& state,
                                             std::uint64_t stamp) noexcept {
      // Tagged with the held calibration and past its base: the difference
      // is the ticks past the base. Every other stamp lands at or past
      // `span_` (see Hold()).
      const std::uint64_t past_base = stamp - tagged_base_;
      if (SLUICE_UNLIKELY(past_base >= span_)) return Other(state, stamp);
      return base_nanos_ + ScaleQ32(past_base, scale_q32_);
    }

   private:
    // Out of line: the lookup's registers stay out of the caller's loop.
    SLUICE_NOINLINE std::uint64_t Other(const BasicCounterClockState& state,
                                        std::uint64_t stamp) noexcept {
      Hold(state, stamp);
      return state.StampNanos(stamp);
    }
    // Holds the calibration a stamp is tagged with (none for a stamp
    // without the tag: every stamp then goes through StampNanos()).
    void Hold(const BasicCounterClockState& state, std::uint64_t stamp) noexcept {
      span_ = 0;
      if ((stamp & kStampTagged) == 0) return;
      const int index = static_cast<int>((stamp >> kStampIndexShift) & (kSteps - 1));
      const CounterCalibration& calibration = state.steps_[index];
      // A base at or past the tag's bits could not be a tagged stamp's ticks.
      if (calibration.base_ticks > kStampTicksMask) return;
      // tagged_base_ = tag | base_ticks, so stamp - tagged_base_ is the
      // ticks past the base for this tag's stamps, below span_ = 2^61 -
      // base_ticks. Another tag's stamp differs from tagged_base_ by a
      // nonzero multiple of 2^61 in the top bits, and one without the tag
      // (below 2^63) by 2^61 - base_ticks or more modulo 2^64: either way
      // the difference is span_ or more.
      tagged_base_ = kStampTagged | (static_cast<std::uint64_t>(index) << kStampIndexShift) |
                     calibration.base_ticks;
      span_ = (kStampTicksMask + 1) - calibration.base_ticks;
      base_nanos_ = calibration.base_nanos;
      scale_q32_ = calibration.nanos_per_tick_q32;
    }

    std::uint64_t tagged_base_ = 0;
    std::uint64_t span_ = 0;  // 0: every stamp goes through StampNanos()
    std::uint64_t base_nanos_ = 0;
    std::uint64_t scale_q32_ = 0;
  };

  static constexpr std::uint64_t kStampTagged = std::uint64_t{1} << 63;
  static constexpr int kStampIndexShift = 61;  // two bits: kSteps calibrations
  static constexpr std::uint64_t kStampTicksMask = (std::uint64_t{1} << kStampIndexShift) - 1;
  // Stamps are tagged only while the counter is below this (2^60 ticks:
  // 7.3 years at 5 GHz), far below the tag's bits; past it, Stamp() reads
  // NowNanos().
  static constexpr std::uint64_t kMaxTaggedTicks = std::uint64_t{1} << 60;

  bool Calibrated() const noexcept { return current_.load(std::memory_order_acquire) >= 0; }

 private:
  // Before the first calibration: steady_clock. After it: the current
  // calibration, which also tells well enough whether the next one is due.
  // When one is due, the caller that takes `busy_` calibrates; the others go
  // on without waiting.
  template <bool kNanos>
  std::uint64_t Now() noexcept {
    const std::uint64_t ticks = Source::Counter();
    const int index = current_.load(std::memory_order_acquire);
    if (index >= 0) {
      const CounterCalibration& calibration = steps_[index];
      if (ticks < calibration.next_check_ticks) {
        return kNanos ? calibration.NanosAt(ticks) : calibration.MicrosAt(ticks);
      }
    }
    return Refine<kNanos>(ticks, index);
  }

  // Out of line: the rare path of every reading and conversion.
  template <bool kNanos>
  SLUICE_NOINLINE std::uint64_t Refine(std::uint64_t ticks, int index) noexcept {
    std::uint64_t now = 0;  // in the unit asked for
    std::uint64_t micros = 0;
    if (index >= 0) {
      micros = steps_[index].MicrosAt(ticks);
      now = kNanos ? steps_[index].NanosAt(ticks) : micros;
    } else if constexpr (kNanos) {
      now = Source::SteadyNanos();
      micros = now / 1000;
    } else {
      now = micros = Source::SteadyMicros();
    }
    if (micros < due_micros_.load(std::memory_order_relaxed)) return now;
    if (busy_.exchange(true, std::memory_order_acquire)) return now;
    Calibrate();
    busy_.store(false, std::memory_order_release);
    return now;
  }

  // Runs with `busy_` held (or from the constructor).
  void Calibrate() noexcept {
    CounterPairing pairing;
    const bool bracketed = PairCounterWithSteady([] { return Source::Counter(); },
                                                 [] { return Source::SteadyMicros(); },
                                                 kMaxPairingBracketTicks, &pairing);
    // Behind the anchor: a core whose counter lags; as unusable as a wide bracket.
    if (!bracketed || (anchored_ && pairing.ticks <= anchor_.ticks)) {
      const int doublings = failures_ < 10 ? failures_ : 10;
      const std::uint64_t delay = kFirstRetryMicros << doublings;
      ++failures_;
      due_micros_.store(
          Source::SteadyMicros() + (delay < kMaxRetryMicros ? delay : kMaxRetryMicros),
          std::memory_order_relaxed);
      return;
    }
    failures_ = 0;
    if (!anchored_) {
      anchor_ = pairing;
      anchored_ = true;
      due_micros_.store(anchor_.steady + kMilestoneMicros[0], std::memory_order_relaxed);
      return;
    }
    // Only `busy_` holders store `current_`: a relaxed load sees the last store.
    const int next = current_.load(std::memory_order_relaxed) + 1;
    if (next >= kSteps) {
      due_micros_.store(~std::uint64_t{0}, std::memory_order_relaxed);
      return;
    }
    const std::uint64_t age = pairing.steady - anchor_.steady;
    if (age < kMilestoneMicros[next]) {
      due_micros_.store(anchor_.steady + kMilestoneMicros[next], std::memory_order_relaxed);
      return;
    }
    CounterCalibration& calibration = steps_[next];
    // Floating point: `age` may be hours if the clock was not read for a
    // while, and the shift would overflow; this path runs four times.
    constexpr double kQ32 = 4294967296.0;
    const double micros_per_tick =
        static_cast<double>(age) / static_cast<double>(pairing.ticks - anchor_.ticks);
    calibration.micros_per_tick_q32 = static_cast<std::uint64_t>(micros_per_tick * kQ32);
    calibration.nanos_per_tick_q32 = static_cast<std::uint64_t>(micros_per_tick * 1000.0 * kQ32);
    calibration.base_ticks = pairing.ticks;
    calibration.base_micros = pairing.steady;
    calibration.base_nanos = pairing.steady * 1000;
    if (next + 1 < kSteps) {
      const double wait_micros =
          age < kMilestoneMicros[next + 1] ? double(kMilestoneMicros[next + 1] - age) : 0.0;
      calibration.next_check_ticks =
          pairing.ticks +
          static_cast<std::uint64_t>(wait_micros * kQ32 /
                                     static_cast<double>(calibration.micros_per_tick_q32));
      due_micros_.store(anchor_.steady + kMilestoneMicros[next + 1], std::memory_order_relaxed);
    } else {
      calibration.next_check_ticks = ~std::uint64_t{0};
      due_micros_.store(~std::uint64_t{0}, std::memory_order_relaxed);
    }
    // Publishes the slot written above (see the class comment).
    current_.store(next, std::memory_order_release);
    // ... and its stamp word (see Stamp()).
    static_assert(kSteps <= 4, "a stamp has two bits for the calibration");
    const std::uint64_t until = calibration.next_check_ticks < kMaxTaggedTicks
                                    ? calibration.next_check_ticks
                                    : kMaxTaggedTicks;
    stamp_word_.store(
        pairing.ticks < until
            ? kStampTagged | (static_cast<std::uint64_t>(next) << kStampIndexShift) | until
            : 0,
        std::memory_order_release);
  }

  // Read and written by `busy_` holders only.
  CounterPairing anchor_;
  bool anchored_ = false;
  int failures_ = 0;  // pairings in a row without an acceptable bracket

  CounterCalibration steps_[kSteps];
  std::atomic<int> current_{-1};
  std::atomic<bool> busy_{false};
  std::atomic<std::uint64_t> due_micros_{0};
  std::atomic<std::uint64_t> stamp_word_{0};  // 0: Stamp() reads NowNanos()
};

template <typename Source>
inline BasicCounterClockState<Source> counter_clock_state{
    typename BasicCounterClockState<Source>::AnchorAtFirstRead{}};

template <typename Source>
BasicCounterClockState<Source>& BasicCounterClockState<Source>::Instance() noexcept {
  return counter_clock_state<Source>;
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
