// The one wait of the bus, for its three waiters: the sleeping consumer (for
// a message), a producer in PublishBlocking (for room) and Drain (for the
// last dispatch).
//
// It polls, then, with a wake signal (detail/wake_signal.hpp), announces a
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
#include "sluice/detail/cpu_relax.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

enum class WaitEnd : std::uint8_t { kReady, kStopped, kTimedOut };

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
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
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
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return WaitEnd::kTimedOut;
      if (looks < kYieldingLooks) {
        ++looks;
        std::this_thread::yield();
      } else {
        const Clock::duration left = deadline - now;
        std::this_thread::sleep_for(left < kSlice ? left : Clock::duration(kSlice));
      }
      continue;
    }
    if (const WaitEnd end = RecheckAfterAnnouncing(signal, ready, stop);
        end != WaitEnd::kTimedOut) {
      return end;
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      signal.CancelWait();
      return WaitEnd::kTimedOut;
    }
    const std::chrono::nanoseconds left = deadline - now;
    signal.Wait(ticket, left < std::chrono::hours(1) ? left : std::chrono::hours(1));
    if (ready()) return WaitEnd::kReady;
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
