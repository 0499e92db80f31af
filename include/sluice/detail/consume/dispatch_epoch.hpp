// A grace period for state the consumer reads while it dispatches
// (subscriptions, the error callback). A writer unpublishes the old state,
// then waits until no dispatch that could still see it is running; after that
// the old state may be destroyed.
//
// The counter is odd while the consumer is inside a dispatch batch. The
// decision "is the consumer inside?" is a store->load (Dekker) race: the
// consumer stores `counter_` then loads the published state; the writer
// updates the published state then loads `counter_`. Both sides use seq_cst
// operations, so in their single total order either
//  (1) the consumer's odd store comes first: the writer sees it (or a later
//      value) and waits for the batch to end, or
//  (2) the writer's update comes first: the consumer's later seq_cst load of
//      the published state sees the update, so that batch never uses the old
//      state.
// The batch-ending store is release and the writer's wait loads acquire, so
// every use of the old state happens-before the writer's return.
//
// SLUICE_FREESTANDING (one core): a writer that sees an odd counter is either
// the consumer itself or a context that preempted it; waiting could never end,
// so WaitForReaders() returns false at once and the caller defers.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

#if !SLUICE_FREESTANDING
// An address unique to the calling thread: tells a writer that it is itself
// the dispatching thread (e.g. Unsubscribe inside a callback), which must not
// wait for its own batch to end.
inline const void* CurrentThreadToken() noexcept {
  static thread_local const char token = 0;
  return &token;
}
#endif

class DispatchEpoch {
 public:
  // Consumer, before the first read of published state in a batch.
  void Enter() noexcept {
#if !SLUICE_FREESTANDING
    dispatching_thread_.store(CurrentThreadToken(), std::memory_order_relaxed);
#endif
    const Counter odd = counter_.load(std::memory_order_relaxed) + 1;
    // Case (1)/(2) above; also publishes dispatching_thread_ (release).
    counter_.store(odd, std::memory_order_seq_cst);
  }

  // Consumer, after the last use of published state in a batch.
  void Exit() noexcept {
    const Counter even = counter_.load(std::memory_order_relaxed) + 1;
    // SYNC POINT WRITE (D): every use of the old state in this batch.
    counter_.store(even, std::memory_order_release);
  }

  // Any thread, after unpublishing state with a seq_cst operation. Returns
  // true once no batch that might use the old state is running. Returns false
  // at once when the caller is the dispatching thread itself: it must defer
  // the destruction to the end of the batch.
  bool WaitForReaders() const noexcept {
    const Counter observed = counter_.load(std::memory_order_seq_cst);
    if ((observed & 1) == 0) return true;
#if SLUICE_FREESTANDING
    return false;
#else
    if (dispatching_thread_.load(std::memory_order_relaxed) == CurrentThreadToken()) {
      return false;
    }
    // SYNC POINT READ (D): see Exit().
    for (unsigned spins = 0; counter_.load(std::memory_order_acquire) == observed; ++spins) {
      if (spins < 128) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    return true;
#endif
  }

 private:
  std::atomic<Counter> counter_{0};
#if !SLUICE_FREESTANDING
  std::atomic<const void*> dispatching_thread_{nullptr};
#endif
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
