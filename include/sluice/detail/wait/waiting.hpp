// The one wait of the bus, for its three waiters: the sleeping consumer (for
// a message), a producer in PublishBlocking (for room) and Drain (for the
// last dispatch).
//
// It polls, then, with a wake signal (detail/wait/wake_signal.hpp), announces a
// sleep, re-checks and parks until a notify, the deadline or a spurious
// wake-up, and re-checks again; without one it yields between looks, then
// sleeps short slices. The
// re-check after PrepareWait is the waiter's half of SYNC POINT (W): the
// condition's own acquire load (the ring's slot, the released position, the
// close state) follows the waiter's announcement and fence.
#pragma once

#include <chrono>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

enum class WaitEnd : std::uint8_t { kReady, kStopped, kTimedOut };

// `timeout` in nanoseconds without overflow: negative and NaN give zero,
// anything beyond nanoseconds::max() gives nanoseconds::max().
template <typename Rep, typename Period>
std::chrono::nanoseconds SaturatingNanos(std::chrono::duration<Rep, Period> timeout) noexcept {
  using Wide = std::chrono::duration<long double, std::nano>;
  const long double nanos = std::chrono::duration_cast<Wide>(timeout).count();
  if (!(nanos > 0)) return std::chrono::nanoseconds::zero();
  if (nanos >= static_cast<long double>(std::chrono::nanoseconds::max().count())) {
    return std::chrono::nanoseconds::max();
  }
  return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(nanos));
}

// A signal that never parks: WaitUntil then polls with yields (Drain).
struct NoSignal {
  bool PrepareWait(std::uint32_t*) noexcept { return false; }
  void CancelWait() noexcept {}
  void Wait(std::uint32_t, std::chrono::nanoseconds) noexcept {}
};

// Calls `ready()` once, then up to `polls` more times with a pause before
// each: true as soon as it says so.
template <typename Ready>
bool PollFor(std::uint32_t polls, Ready& ready) {
  if (ready()) return true;
  for (std::uint32_t i = 0; i < polls; ++i) {
    CpuRelax();
    if (ready()) return true;
  }
  return false;
}

// After the waiter announced its sleep (PrepareWait): SYNC POINT READ (W),
// the re-check that a notifier's store before the announcement is seen.
// kReady or kStopped (the announcement cancelled), or kTimedOut meaning
// "neither: go to sleep".
template <typename Signal, typename Ready, typename Stop>
WaitEnd RecheckAfterAnnouncing(Signal& signal, Ready& ready, Stop& stop) {
  if (ready()) {
    signal.CancelWait();
    return WaitEnd::kReady;
  }
  if (stop()) {
    signal.CancelWait();
    return WaitEnd::kStopped;
  }
  return WaitEnd::kTimedOut;
}

#if !SLUICE_FREESTANDING
// The one deadline of every wait: `timeout` from now on steady_clock. A
// timeout too long to add (nanoseconds::max(): for ever) is no deadline;
// one of 0 or less has passed at once.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(std::chrono::nanoseconds timeout) noexcept {
    const Clock::time_point start = Clock::now();
    at_ = timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
  }
  // What is left of it now: zero once it has passed.
  std::chrono::nanoseconds Left() const noexcept {
    const Clock::time_point now = Clock::now();
    return now >= at_ ? std::chrono::nanoseconds(0) : at_ - now;
  }

 private:
  Clock::time_point at_;
};

// Waits until `ready()` (kReady), `stop()` (kStopped: nothing it waits for
// can come) or `timeout` has passed (kTimedOut; a timeout of
// nanoseconds::max() is for ever). `ready` may act (a producer's ready is
// its admission); each call of it is one attempt. Polls `polls` times with a
// pause before it parks. A park lasts at most an hour, so a parker never
// adds a huge timeout to its own clock.
template <typename Signal, typename Ready, typename Stop>
WaitEnd WaitUntil(Signal& signal, std::uint32_t polls, std::chrono::nanoseconds timeout,
                  Ready&& ready, Stop&& stop) {
  if (PollFor(polls, ready)) return WaitEnd::kReady;
  const Deadline deadline(timeout);
  // Looks without a sleep announced: yields for the first kYieldingLooks,
  // then sleeps a slice between looks, so a long wait without a parker
  // (Drain, WaitForRoom) does not hold a core.
  constexpr std::uint32_t kYieldingLooks = 64;
  constexpr std::chrono::microseconds kSlice{50};
  std::uint32_t looks = 0;
  for (;;) {
    if (stop()) return WaitEnd::kStopped;
    std::uint32_t ticket = 0;
    if (!signal.PrepareWait(&ticket)) {
      // No sleep announced (no signal, or its heavy fence failed): poll.
      if (ready()) return WaitEnd::kReady;
      const std::chrono::nanoseconds left = deadline.Left();
      if (left.count() == 0) return WaitEnd::kTimedOut;
      if (looks < kYieldingLooks) {
        ++looks;
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(left < kSlice ? left : std::chrono::nanoseconds(kSlice));
      }
      continue;
    }
    if (const WaitEnd end = RecheckAfterAnnouncing(signal, ready, stop);
        end != WaitEnd::kTimedOut) {
      return end;
    }
    const std::chrono::nanoseconds left = deadline.Left();
    if (left.count() == 0) {
      signal.CancelWait();
      return WaitEnd::kTimedOut;
    }
    signal.Wait(ticket, left < std::chrono::hours(1) ? left : std::chrono::hours(1));
    if (ready()) return WaitEnd::kReady;
  }
}

// As WaitUntil, parked at most `slice` at a time: before each slice
// `stop()` is asked again, so a waiter whose notifier may die without
// notifying (another process) looks for it at least once a slice. The wait
// ends at kReady, kStopped, or the deadline.
template <typename Signal, typename Ready, typename Stop>
WaitEnd WaitUntilInSlices(Signal& signal, std::uint32_t polls, std::chrono::nanoseconds timeout,
                          std::chrono::nanoseconds slice, Ready&& ready, Stop&& stop) {
  const Deadline deadline(timeout);
  for (;;) {
    const std::chrono::nanoseconds left = deadline.Left();
    const WaitEnd end = WaitUntil(signal, polls, left < slice ? left : slice, ready, stop);
    if (end != WaitEnd::kTimedOut || deadline.Left().count() == 0) return end;
  }
}
#else
// Bare metal, where Sluice has no clock of its own and only the consumer
// waits: polls, then one park bounded by the parker's `timeout`.
template <typename Signal, typename Ready, typename Stop>
WaitEnd WaitUntil(Signal& signal, std::uint32_t polls, std::chrono::nanoseconds timeout,
                  Ready&& ready, Stop&& stop) {
  if (PollFor(polls, ready)) return WaitEnd::kReady;
  std::uint32_t ticket = 0;
  if (!signal.PrepareWait(&ticket)) return ready() ? WaitEnd::kReady : WaitEnd::kTimedOut;
  if (const WaitEnd end = RecheckAfterAnnouncing(signal, ready, stop); end != WaitEnd::kTimedOut) {
    return end;
  }
  signal.Wait(ticket, timeout);
  return ready() ? WaitEnd::kReady : WaitEnd::kTimedOut;
}
#endif

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
