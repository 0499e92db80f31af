// Holds the user's error callback and context, replaceable from any thread
// while the consumer may be reporting through the old pair.
//
// Two pair slots and an index: a writer fills the inactive slot, flips the
// index, then waits for the dispatch epoch so that no reader still copies the
// old slot before the next writer may overwrite it. Readers run only inside
// the epoch (see DispatchEpoch); the index store and load are seq_cst for its
// Dekker argument.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/cpu_relax.hpp"
#include "sluice/detail/dispatch_epoch.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {

class ErrorReporter {
 public:
  // Any thread. When it returns on a thread other than the consumer, the old
  // callback is not running and will not run again.
  void Set(ErrorCallback callback, void* context, const DispatchEpoch& epoch) noexcept {
    while (writer_lock_.test_and_set(std::memory_order_acquire)) CpuRelax();
    const std::uint8_t next =
        static_cast<std::uint8_t>(1 - active_.load(std::memory_order_relaxed));
    targets_[next] = Target{callback, context};
    active_.store(next, std::memory_order_seq_cst);
    // From the consumer thread itself no copy of the old slot is in progress.
    (void)epoch.WaitForReaders();
    writer_lock_.clear(std::memory_order_release);
  }

  // Consumer, inside the dispatch epoch.
  void Report(const BusError& error) const noexcept {
    const Target target = targets_[active_.load(std::memory_order_seq_cst)];
    if (target.callback == nullptr) return;
#if SLUICE_HAS_EXCEPTIONS
    try {
      target.callback(error, target.context);
    } catch (...) {
      // Documented: an exception escaping the error callback is swallowed.
    }
#else
    target.callback(error, target.context);
#endif
  }

 private:
  struct Target {
    ErrorCallback callback = nullptr;
    void* context = nullptr;
  };

  Target targets_[2];
  std::atomic<std::uint8_t> active_{0};
  std::atomic_flag writer_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace sluice::detail
