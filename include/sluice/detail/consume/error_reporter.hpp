// Holds the user's error callback and context, replaceable from any thread
// while the consumer may be reporting through the old pair.
//
// SYNC POINT (Y): two pair slots and a version, a double buffer. Not the
// library's sequence lock (detail/seqlock.hpp): a reader there may give up
// after a bounded number of attempts, and a report must always find the
// pair; here the writer fills the slot no reader selects, so a reader
// retries only when a second writer refills the slot it is copying. A writer takes
// the writer lock (writers only: serialises the slot they fill), fills the
// slot the version does not select, bumps the version, and drops the lock
// BEFORE it waits for the dispatch epoch: a callback in the batch it waits
// for may itself replace the callback, and must find the lock free.
// Readers run only inside the epoch (see DispatchEpoch); the version store
// and load are seq_cst for its Dekker argument.
//
// A second writer may therefore refill the slot a reader is still copying.
// The reader then sees a new version and copies again. The pair is stored
// with release and loaded with acquire: a reader that loads a second
// writer's store also sees the version bump that came before it (the writer
// lock orders the first writer's bump before the second writer's stores), and
// its re-check cannot move above its loads.
//
// `reporting_` is set by the consumer before it reads the pair and cleared
// after the call: a writer that may not wait (the consumer thread itself, or
// under SLUICE_FREESTANDING an interrupt that preempted a report) learns from it
// whether the old callback may still be running.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/consume/dispatch_epoch.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"
#include "sluice/error.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

class ErrorReporter {
 public:
  // Any thread (bare metal: never from two contexts that preempt each other).
  // Returns true when the previous callback is not running and will not run
  // again: on a thread other than the consumer it waits for the consumer's
  // batch. Returns false when it cannot wait and a report is in progress on
  // the stack it interrupted or runs on (inside the error callback itself, or
  // bare metal in an interrupt that preempted a report): that report may
  // still call the previous callback once; no later one will.
  bool Set(ErrorCallback callback, void* context, const DispatchEpoch& epoch) noexcept {
    while (writer_lock_.test_and_set(std::memory_order_acquire)) CpuRelax();
    const std::uint32_t version = version_.load(std::memory_order_relaxed);
    Target& next = targets_[(version + 1) & 1];
    // SYNC POINT WRITE (Y): see the file comment.
    next.callback.store(callback, std::memory_order_release);
    next.context.store(context, std::memory_order_release);
    // Publishes the pair above (seq_cst includes release).
    version_.store(version + 1, std::memory_order_seq_cst);
    writer_lock_.clear(std::memory_order_release);
    if (epoch.WaitForReaders()) return true;
    // Bare metal: keeps the load of `reporting_` below the version bump.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return !reporting_.load(std::memory_order_relaxed);
  }

  // Consumer, inside the dispatch epoch.
  void Report(const BusError& error) noexcept {
    reporting_.store(true, std::memory_order_relaxed);
    // Bare metal: an interrupt that replaces the pair after this point sees
    // `reporting_`; one before it is seen by the loads below.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ErrorCallback callback;
    void* context;
    for (;;) {
      // Acquire (seq_cst): the pair published with this version.
      const std::uint32_t version = version_.load(std::memory_order_seq_cst);
      const Target& target = targets_[version & 1];
      // SYNC POINT READ (Y): see the file comment.
      callback = target.callback.load(std::memory_order_acquire);
      context = target.context.load(std::memory_order_acquire);
      if (version_.load(std::memory_order_relaxed) == version) break;
    }
    if (callback != nullptr) {
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
    std::atomic_signal_fence(std::memory_order_seq_cst);
    reporting_.store(false, std::memory_order_relaxed);
  }

 private:
  struct Target {
    std::atomic<ErrorCallback> callback{nullptr};
    std::atomic<void*> context{nullptr};
  };

  Target targets_[2];
  std::atomic<std::uint32_t> version_{0};
  std::atomic_flag writer_lock_ = ATOMIC_FLAG_INIT;
  std::atomic<bool> reporting_{false};  // written by the consumer only
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
