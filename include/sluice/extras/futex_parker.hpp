// FutexParker and MembarrierFutexParker: a bus consumer (or a producer in
// PublishBlocking) sleeps on a Linux futex (see sluice/parker.hpp for what a
// parker is). Lighter than ConditionVariableParker: no mutex, and the kernel
// compares the word and sleeps in one step.
//
// Which one: with FutexParker every publish (and every consumer batch) adds a
// full fence; with MembarrierFutexParker it adds none, and each way into
// sleep pays a membarrier system call instead, which interrupts every other
// running thread of the process. That call takes longer than a fence by
// orders of magnitude, so MembarrierFutexParker suits a consumer that sleeps
// rarely (bursts with long idle gaps between them); at message gaps shorter
// than the call, the consumer re-checks, finds a message and never sleeps
// (docs/performance.md, "The sleeping consumer", has the figures).
#pragma once

#if !defined(__linux__)
#error "Sluice: FutexParker needs Linux; use sluice::ConditionVariableParker"
#endif

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "sluice/config.hpp"
#include "sluice/parker.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

namespace detail {

// A futex wait on `word` while it holds `expected`, at most `timeout`, and a
// wake of every waiter; `op` says whether the word is private to the process
// (FUTEX_*_PRIVATE) or shared through a mapping (sluice/ipc).
inline void FutexWait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::chrono::nanoseconds timeout, int op) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                    std::atomic<std::uint32_t>::is_always_lock_free,
                "Sluice: a futex word must be a plain 32-bit lock-free atomic");
  if (timeout <= std::chrono::nanoseconds::zero()) return;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timespec relative{};
  relative.tv_sec = static_cast<std::time_t>(seconds.count());
  relative.tv_nsec = static_cast<long>((timeout - seconds).count());
  // Returns at once (EAGAIN) when the word no longer holds `expected`;
  // EINTR and ETIMEDOUT are returns too: the caller re-checks. The kernel
  // reads the word's 4 bytes; the atomic is exactly those.
  syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), op, expected, &relative,
          nullptr, 0);
}

inline void FutexWakeAll(std::atomic<std::uint32_t>& word, int op) noexcept {
  syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), op, INT_MAX, nullptr, nullptr,
          0);
}

// The vectored futex wait (Linux 5.16): its system call number, the same on
// every architecture since 5.1's unified numbering, and its entry, whose
// layout is the kernel's ABI (spelled here, so that older kernel headers
// build too).
inline constexpr long kFutexWaitvCall = 449;
struct FutexWaitvEntry {
  std::uint64_t value;
  std::uint64_t address;
  std::uint32_t flags;
  std::uint32_t reserved;
};
inline constexpr std::uint32_t kFutexSize32 = 2;    // FUTEX_32
inline constexpr std::size_t kFutexWaitvMax = 128;  // FUTEX_WAITV_MAX

// Whether futex_waitv is known to be missing (a kernel before 5.16, or a
// sandbox or emulator that refuses it): found at the first refusal, so
// that later waits go straight to the fallback. Tests set it to exercise
// the fallback.
inline std::atomic<bool>& FutexWaitvMissing() noexcept {
  static std::atomic<bool> missing{false};
  return missing;
}

// Without futex_waitv, a wait on several words parks on the first one only
// (the WaitSet's own), at most this long at a time: a notify of another
// word is then seen within a slice instead of at once.
inline constexpr std::chrono::milliseconds kWaitAnyFallbackSlice{1};

// Parks until any word leaves its expected value (compared and slept on
// atomically, all together), the timeout, or spuriously.
inline void FutexWaitAny(const ParkWord* words, std::size_t count,
                         std::chrono::nanoseconds timeout) noexcept {
  if (timeout <= std::chrono::nanoseconds::zero() || count == 0) return;
  if (count <= kFutexWaitvMax && !FutexWaitvMissing().load(std::memory_order_relaxed)) {
    FutexWaitvEntry entries[kFutexWaitvMax];
    for (std::size_t i = 0; i < count; ++i) {
      entries[i].value = words[i].expected;
      entries[i].address = reinterpret_cast<std::uintptr_t>(words[i].word);
      entries[i].flags = kFutexSize32 | (words[i].process_shared ? 0u : FUTEX_PRIVATE_FLAG);
      entries[i].reserved = 0;
    }
    // futex_waitv's timeout is a point on the named clock.
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    constexpr long long max_seconds = 86400;  // WaitUntil parks an hour at most
    timespec deadline{};
    deadline.tv_sec = static_cast<std::time_t>(
        now.tv_sec + (seconds.count() > max_seconds ? max_seconds : seconds.count()));
    deadline.tv_nsec = now.tv_nsec + static_cast<long>((timeout - seconds).count());
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_nsec -= 1000000000L;
      ++deadline.tv_sec;
    }
    // Returns at once (EAGAIN) when a word no longer holds its value; the
    // index of a woken word, EINTR and ETIMEDOUT are returns too: the
    // caller re-checks.
    if (syscall(kFutexWaitvCall, entries, static_cast<unsigned>(count), 0u, &deadline,
                CLOCK_MONOTONIC) >= 0 ||
        (errno != ENOSYS && errno != EPERM)) {
      return;
    }
    FutexWaitvMissing().store(true, std::memory_order_relaxed);
  }
  FutexWait(*words[0].word, words[0].expected,
            timeout < kWaitAnyFallbackSlice ? timeout : kWaitAnyFallbackSlice,
            words[0].process_shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE);
}

}  // namespace detail

class FutexParker {
 public:
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    detail::FutexWait(word, expected, timeout, FUTEX_WAIT_PRIVATE);
  }
  void WakeAll(std::atomic<std::uint32_t>& word) noexcept {
    detail::FutexWakeAll(word, FUTEX_WAKE_PRIVATE);
  }
  // A wait on several words at once, private or shared (a WaitSet that
  // lists a ShmBus): futex_waitv; where the kernel lacks it (before Linux
  // 5.16), a park on the first word in slices of kWaitAnyFallbackSlice.
  static void WaitAny(const ParkWord* words, std::size_t count,
                      std::chrono::nanoseconds timeout) noexcept {
    detail::FutexWaitAny(words, count, timeout);
  }
};

// FutexParker plus the heavy fence (see detail/wait/wake_signal.hpp): producers on
// the bus need no fence of their own.
class MembarrierFutexParker : public FutexParker {
 public:
  // Registers the process for expedited private membarrier once; false where
  // the kernel does not offer it (the bus then fences on every publish).
  bool EnableHeavyFence() noexcept {
    static const bool registered =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    return registered;
  }
  // Every running thread of the process executes a full memory barrier
  // before this returns.
  bool HeavyFence() noexcept {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  }
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
