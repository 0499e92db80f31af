// WakeSignal: lets the one consumer sleep while the queue is empty and be
// woken by the next publish, with no lost wake-up (model:
// tests/spin/consumer_wakeup.pml).
//
// Protocol. The consumer, finding the queue empty:
//   ticket = PrepareWait()   reads `sequence_`, stores `sleeping_` = 1, fence
//   re-checks the queue      a message there: CancelWait(), dispatch it
//   Wait(ticket, timeout)    parks while `sequence_` == ticket
// A producer, after its message is published (the slot's release store):
//   Notify()                 fence, loads `sleeping_`; if set, bumps
//                            `sequence_` and wakes the parker
//
// SYNC POINT (W), a Dekker pair: the producer's publish store, then its
// seq_cst fence, then its load of `sleeping_`; the consumer's store of
// `sleeping_`, then its seq_cst fence, then its load of the slot. The fences
// order each side's store before its load, so at least one side sees the
// other's store: either the consumer's re-check finds the message, or the
// producer finds `sleeping_` set and bumps `sequence_`. The bump happens after
// the consumer read its ticket (that read precedes its `sleeping_` store), so
// the park, which compares `sequence_` with the ticket atomically with going
// to sleep (futex, or under the condition variable's mutex), returns at once.
// The bump is a release RMW and the consumer's ticket load is acquire: a
// consumer that sees the new sequence also sees the publish before it.
//
// Asymmetric fences. A parker may offer a heavy fence (FutexParker: Linux
// membarrier, which makes every running thread of the process execute a full
// barrier before it returns). The consumer then uses it in place of its
// fence, and producers need only keep their load after their store in the
// compiled code (a signal fence): any producer store not yet visible when
// the consumer's heavy fence runs is made visible by it, and any producer
// load after that point sees `sleeping_` set. It is the same Dekker pair,
// with the whole cost moved to the consumer's way into sleep (about a
// microsecond, after it has polled).
//
// Cost to a producer: nothing unless the bus's traits name a Parker; with
// one, a load of a line the consumer writes only when it goes to sleep or
// wakes, plus a full fence unless the parker's heavy fence is in use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

#if defined(__SANITIZE_THREAD__)
#define SLUICE_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_THREAD_SANITIZER 1
#endif
#endif

// A sequentially consistent fence. Under ThreadSanitizer, which does not
// model fences (GCC rejects them there), a seq_cst read-modify-write of a
// word no one else uses: the same full barrier in the hardware on the
// targets the sanitizer runs on.
inline void FullFence() noexcept {
#if defined(SLUICE_THREAD_SANITIZER)
  static std::atomic<std::uint32_t> fence_word{0};
  fence_word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

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

// Whether `Parker` offers EnableHeavyFence() and HeavyFence().
template <typename Parker, typename = void>
struct HasHeavyFence : std::false_type {};
template <typename Parker>
struct HasHeavyFence<Parker, std::void_t<decltype(std::declval<Parker&>().EnableHeavyFence()),
                                         decltype(std::declval<Parker&>().HeavyFence())>>
    : std::true_type {};

template <typename Parker>
class WakeSignal {
 public:
  WakeSignal() noexcept {
    if constexpr (HasHeavyFence<Parker>::value) asymmetric_ = parker_.EnableHeavyFence();
  }

  // Producers (any thread), after the message is published.
  void Notify() noexcept {
    // SYNC POINT WRITE/READ (W), producer side: see the file comment.
    if (asymmetric_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      FullFence();
    }
    if (sleeping_.load(std::memory_order_relaxed) != 0) {
      sequence_.fetch_add(1, std::memory_order_release);
      parker_.WakeAll(sequence_);
    }
  }

  // Consumer: announces that it is about to sleep and returns true with the
  // ticket to wait with; the caller re-checks the queue before waiting.
  // False (nothing announced) only if the heavy fence failed: the caller
  // must not sleep then, and polls instead.
  bool PrepareWait(std::uint32_t* ticket) noexcept {
    *ticket = sequence_.load(std::memory_order_acquire);
    sleeping_.store(1, std::memory_order_relaxed);
    // SYNC POINT WRITE/READ (W), consumer side: see the file comment.
    if constexpr (HasHeavyFence<Parker>::value) {
      if (asymmetric_) {
        if (parker_.HeavyFence()) return true;
        sleeping_.store(0, std::memory_order_relaxed);
        return false;
      }
    }
    FullFence();
    return true;
  }

  // Consumer: the re-check found work; no wait.
  void CancelWait() noexcept { sleeping_.store(0, std::memory_order_relaxed); }

  // Consumer: parks until a Notify after PrepareWait, the timeout, or a
  // spurious wake-up (the caller re-checks in every case).
  void Wait(std::uint32_t ticket, std::chrono::nanoseconds timeout) noexcept {
    parker_.Wait(sequence_, ticket, timeout);
    sleeping_.store(0, std::memory_order_relaxed);
  }

  // For tests: whether the consumer has announced that it sleeps.
  bool ConsumerSleeping() const noexcept { return sleeping_.load(std::memory_order_relaxed) != 0; }

 private:
  // Read by every producer on every publish, written by the consumer only
  // when it goes to sleep or wakes: a line of its own.
  alignas(kCacheLineSize) std::atomic<std::uint32_t> sleeping_{0};
  bool asymmetric_ = false;  // set once, before any producer runs
  std::atomic<std::uint32_t> sequence_{0};
  Parker parker_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
