// Holds the user's error callback and context, replaceable from any thread
// while the consumer may be reporting through the old pair.
//
// Two pair slots and a version: a writer fills the slot the version does not
// select, bumps the version, then waits for the dispatch epoch so that no
// reader still copies the old slot before the next writer may overwrite it.
// Readers run only inside the epoch (see DispatchEpoch); the version store and
// load are seq_cst for its Dekker argument.
//
// Under SLUICE_BARE_METAL a writer that preempts a report does not wait, so a
// second writer may overwrite the slot a reader was copying. The reader then
// sees a new version and copies again (a sequence lock). The pair is stored
// with release and loaded with acquire: a reader that loads a second writer's
// store also sees the version bump that came before it (the writer lock
// orders the first writer's bump before the second writer's stores), and its
// re-check cannot move above its loads.
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
  // Any thread (bare metal: never from two contexts that preempt each other).
  // When it returns on a thread other than the consumer, the old callback is
  // not running and will not run again; bare metal, it will not be called
  // again.
  void Set(ErrorCallback callback, void* context, const DispatchEpoch& epoch) noexcept {
    while (writer_lock_.test_and_set(std::memory_order_acquire)) CpuRelax();
    const std::uint32_t version = version_.load(std::memory_order_relaxed);
    Target& next = targets_[(version + 1) & 1];
    // SYNC POINT WRITE (sequence lock): see the file comment.
    next.callback.store(callback, std::memory_order_release);
    next.context.store(context, std::memory_order_release);
    // Publishes the pair above (seq_cst includes release).
    version_.store(version + 1, std::memory_order_seq_cst);
    // From the consumer thread itself no copy of the old slot is in progress.
    (void)epoch.WaitForReaders();
    writer_lock_.clear(std::memory_order_release);
  }

  // Consumer, inside the dispatch epoch.
  void Report(const BusError& error) const noexcept {
    ErrorCallback callback;
    void* context;
    for (;;) {
      // Acquire (seq_cst): the pair published with this version.
      const std::uint32_t version = version_.load(std::memory_order_seq_cst);
      const Target& target = targets_[version & 1];
      // SYNC POINT READ (sequence lock): see the file comment.
      callback = target.callback.load(std::memory_order_acquire);
      context = target.context.load(std::memory_order_acquire);
      if (version_.load(std::memory_order_relaxed) == version) break;
    }
    if (callback == nullptr) return;
#if SLUICE_HAS_EXCEPTIONS
    try {
      callback(error, context);
    } catch (...) {
      // Documented: an exception escaping the error callback is swallowed.
    }
#else
    callback(error, context);
#endif
  }

 private:
  struct Target {
    std::atomic<ErrorCallback> callback{nullptr};
    std::atomic<void*> context{nullptr};
  };

  Target targets_[2];
  std::atomic<std::uint32_t> version_{0};
  std::atomic_flag writer_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace sluice::detail
