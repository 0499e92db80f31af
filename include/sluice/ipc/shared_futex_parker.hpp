// The parker of the shared-memory bus: a futex that any process mapping the
// segment can wait on and wake (FUTEX_WAIT / FUTEX_WAKE without
// FUTEX_PRIVATE_FLAG: the kernel keys the word by its page, not by the
// address one process sees), with a heavy fence across processes (Linux
// membarrier's global expedited command). Used by detail::WakeSignal in the
// segment; see sluice/parker.hpp for what a parker is, and
// detail/wait/wake_signal.hpp for the protocol. Linux.
//
// The heavy fence: every process that publishes registers with
// MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED when it attaches
// (RegisterProcess); a waiter on its way into sleep runs
// MEMBARRIER_CMD_GLOBAL_EXPEDITED, which makes every running thread of every
// registered process execute a full memory barrier before it returns. A
// notifier in a registered process then needs only a compiler fence between
// its store and its load of the waiter count; one whose registration failed
// fences itself (ShmProducer decides per process).
#pragma once

#if !defined(__linux__)
#error "Sluice: the shared-memory bus needs Linux"
#endif

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/extras/futex_parker.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// The futex alone: for signals whose waiters may run in a process that
// cannot call membarrier (a sandbox), so both sides fence themselves
// (producers waiting for room: the consumer, their notifier, fences once
// per batch).
class SharedFutexParkerFenced {
 public:
  // Its word lives in the segment, which other processes map.
  static constexpr bool kProcessShared = true;
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    sluice::detail::FutexWait(word, expected, timeout, FUTEX_WAIT);
  }
  void WakeAll(std::atomic<std::uint32_t>& word) noexcept {
    sluice::detail::FutexWakeAll(word, FUTEX_WAKE);
  }
};

// The futex with the heavy fence (the consumer's sleep).
class SharedFutexParker : public SharedFutexParkerFenced {
 public:
  // Registers this process for the heavy fence: true when its notifiers may
  // skip their own fence. Idempotent; called by every attaching process
  // (a registration is not assumed to survive a fork).
  [[nodiscard]] static bool RegisterProcess() noexcept {
    const long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (commands < 0 || (commands & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }
  // The consumer, when it makes the signals: whether waiters use the heavy
  // fence (its own process registered).
  [[nodiscard]] bool EnableHeavyFence() noexcept { return RegisterProcess(); }
  // Every running thread of every registered process executes a full
  // memory barrier before this returns.
  [[nodiscard]] bool HeavyFence() noexcept {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
  }
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
