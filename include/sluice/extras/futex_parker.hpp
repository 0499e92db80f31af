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
#include <cstdint>
#include <ctime>

#include "sluice/config.hpp"

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
