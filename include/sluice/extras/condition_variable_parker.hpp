// ConditionVariableParker: a bus consumer sleeps on a mutex and a condition
// variable (see sluice/parker.hpp for what a parker is), and
// SleepingConsumerTraits, bus traits that use it. Hosted builds only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/parker.hpp"

#if SLUICE_FREESTANDING
#error \
    "Sluice: ConditionVariableParker needs threads; on one core, write a parker (sluice/parker.hpp)"
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Portable parker from the standard library: a mutex and a condition
// variable. A WakeAll takes the mutex only when someone announced that it
// sleeps (WakeSignal checks first): the consumer, for a publish or Close;
// producers in PublishBlocking, for the consumer's batch or Close. So an
// awake bus costs no lock, but while someone sleeps, publishing, dispatching
// and Close take this mutex: they are then neither lock-free nor safe in a
// signal handler. The futex parkers keep both (a system call, no lock).
// Linux users may prefer FutexParker or MembarrierFutexParker
// (sluice/extras/futex_parker.hpp).
class ConditionVariableParker {
 public:
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds timeout) noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    // The predicate is read under the mutex that WakeAll takes after
    // changing `word`: a change before the wait is seen here, one after it
    // is followed by a notify this wait receives.
    condition_.wait_for(lock, timeout,
                        [&] { return word.load(std::memory_order_acquire) != expected; });
  }

  void WakeAll(std::atomic<std::uint32_t>& /*word*/) noexcept {
    { const std::lock_guard<std::mutex> lock(mutex_); }
    condition_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable condition_;
};

// A bus whose consumer may sleep in ProcessBatchWait on a condition variable.
struct SleepingConsumerTraits : DefaultBusTraits {
  using Waiting = WaitWith<ConditionVariableParker>;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
