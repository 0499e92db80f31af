// WakeSignal: lets threads sleep until a condition another thread makes true,
// with no lost wake-up. A bus uses one for its consumer (waiting for a
// message; model: tests/spin/consumer_wakeup.pml) and one per priority for
// producers in PublishBlocking (waiting for room; tests/spin/room_wakeup.pml).
//
// Protocol. A waiter, finding its condition false:
//   ticket = PrepareWait()   reads `sequence_`, increments `waiters_`, fence
//   re-checks the condition  true: CancelWait(), go on
//   Wait(ticket, timeout)    parks while `sequence_` == ticket
// A notifier, after the store that may make the condition true (a publish's
// slot store; the consumer's release of slots; Close):
//   Notify()                 fence, loads `waiters_`; if non-zero, bumps
//                            `sequence_` and wakes the parker
//
// SYNC POINT (W), a Dekker pair: the notifier's store, then its seq_cst
// fence, then its load of `waiters_`; the waiter's increment of `waiters_`,
// then its seq_cst fence, then its loads for the re-check. The fences order
// each side's store before its load, so at least one side sees the other's
// store: either the re-check sees the notifier's store, or the notifier sees
// the waiter and bumps `sequence_`. The bump happens after the waiter read
// its ticket (that read precedes its increment), so the park, which compares
// `sequence_` with the ticket atomically with going to sleep (futex, or under
// the condition variable's mutex), returns at once. The bump is a release RMW
// and the ticket load is acquire: a waiter that sees the new sequence also
// sees the store before it.
//
// Asymmetric fences. A parker may offer a heavy fence (MembarrierFutexParker: Linux
// membarrier, which makes every running thread of the process execute a full
// barrier before it returns). Waiters then use it in place of their fence,
// and notifiers need only keep their load after their store in the compiled
// code (a signal fence): any notifier store not yet visible when the heavy
// fence runs is made visible by it, and any notifier load after that point
// sees the waiter counted. It is the same Dekker pair, with the whole cost
// moved to the way into sleep (about a microsecond, after polling).
//
// Cost to a notifier: nothing unless the bus's traits name a Parker; with
// one, a load of a line written only when a waiter goes to sleep or wakes,
// plus a full fence unless the parker's heavy fence is in use.
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

// Whether `Parker` offers EnableHeavyFence() and HeavyFence().
template <typename Parker, typename = void>
struct HasHeavyFence : std::false_type {};
template <typename Parker>
struct HasHeavyFence<Parker, std::void_t<decltype(std::declval<Parker&>().EnableHeavyFence()),
                                         decltype(std::declval<Parker&>().HeavyFence())>>
    : std::true_type {};

// Whether a parker's word is shared between processes
// (`static constexpr bool kProcessShared = true;`: sluice/ipc's futex
// parkers), so that a wait on several words at once keys it by its page.
template <typename Parker, typename = void>
struct ParkerIsProcessShared : std::false_type {};
template <typename Parker>
struct ParkerIsProcessShared<Parker, std::void_t<decltype(Parker::kProcessShared)>>
    : std::bool_constant<Parker::kProcessShared> {};

template <typename Parker>
class WakeSignal {
 public:
  static constexpr bool kProcessShared = ParkerIsProcessShared<Parker>::value;

  WakeSignal() noexcept { (void)DecideHeavyFence(); }

  // Whether waiters use the heavy fence, decided by this process's
  // registration (the constructor's; again by a consumer that takes over a
  // signal in shared memory, sluice/ipc); notifiers follow what it stores.
  bool DecideHeavyFence() noexcept {
    bool heavy = false;
    if constexpr (HasHeavyFence<Parker>::value) heavy = parker_.EnableHeavyFence();
    asymmetric_.store(heavy ? 1 : 0, std::memory_order_relaxed);
    return heavy;
  }

  // The notifying side (any thread), after the store the sleeper waits for
  // (a publish, freed slots, Close): wakes the sleepers, if any.
  void Notify() noexcept {
    NotifierFence();
    WakeIfWaiting();
  }

  // Notify in two steps, for a notifier that fences once for several
  // signals: NotifierFence, then WakeIfWaiting on each (or HasWaiters and
  // Wake, to wake only some).
  void NotifierFence() const noexcept {
    // SYNC POINT WRITE/READ (W), notifying side: see the file comment.
    if (Asymmetric()) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      FullFence();
    }
  }
  // Whether NotifierFence is only a compiler fence (the heavy fence is in use).
  bool Asymmetric() const noexcept { return asymmetric_.load(std::memory_order_relaxed) != 0; }
  // The byte Asymmetric() reads, for a notifier that reads it at each
  // notify through a pointer of its own (sluice/ipc's producers).
  const std::atomic<std::uint8_t>& AsymmetricByte() const noexcept { return asymmetric_; }
  bool HasWaiters() const noexcept { return waiters_.load(std::memory_order_relaxed) != 0; }
  void Wake() noexcept {
    sequence_.fetch_add(1, std::memory_order_release);
    parker_.WakeAll(sequence_);
  }
  void WakeIfWaiting() noexcept {
    if (HasWaiters()) Wake();
  }

  // A waiter: announces that it is about to sleep and returns true with the
  // ticket to wait with; the caller re-checks its condition before waiting,
  // and then calls exactly one of CancelWait or Wait. False (nothing
  // announced) only if the heavy fence failed: the caller must not sleep
  // then, and polls instead.
  bool PrepareWait(std::uint32_t* ticket) noexcept { return PrepareWait(ticket, Asymmetric()); }

  // PrepareWait with the waiter's own record of whether the heavy fence is
  // in use (`heavy_fence`: what Asymmetric() said when the waiter took the
  // signal), for a signal in memory that others can write (sluice/ipc: a
  // producer that set the byte would turn a sandboxed consumer's sleep into
  // polling).
  bool PrepareWait(std::uint32_t* ticket, bool heavy_fence) noexcept {
    *ticket = sequence_.load(std::memory_order_acquire);
    waiters_.fetch_add(1, std::memory_order_relaxed);
    // SYNC POINT WRITE/READ (W), waiting side: see the file comment.
    if constexpr (HasHeavyFence<Parker>::value) {
      if (heavy_fence) {
        if (parker_.HeavyFence()) return true;
        waiters_.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
    }
    FullFence();
    return true;
  }

  // A waiter: the re-check found what it waits for; no wait.
  void CancelWait() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }

  // A waiter: parks until a Wake after PrepareWait, the timeout, or a
  // spurious wake-up (the caller re-checks in every case).
  void Wait(std::uint32_t ticket, std::chrono::nanoseconds timeout) noexcept {
    parker_.Wait(sequence_, ticket, timeout);
    EndWait();
  }

  // For a waiter that parks on several signals at once
  // (detail/wait/signal_group.hpp): the word Wait would park on, compared
  // with the ticket; and the end of a wait parked there instead of in Wait.
  const std::atomic<std::uint32_t>& Word() const noexcept { return sequence_; }
  void EndWait() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }

  // For a signal whose only waiter is known to be gone (a process killed
  // asleep, sluice/ipc): no one is counted as waiting any more, so that
  // notifiers stop waking no one.
  void ForgetWaiters() noexcept { waiters_.store(0, std::memory_order_relaxed); }

  // For tests: how many waiters have announced that they sleep.
  std::uint32_t Waiters() const noexcept { return waiters_.load(std::memory_order_relaxed); }
  bool ConsumerSleeping() const noexcept { return Waiters() != 0; }

 private:
  // Read by every notifier on every notify, written by waiters only when
  // they go to sleep or wake: a line of its own.
  alignas(kCacheLineSize) std::atomic<std::uint32_t> waiters_{0};
  // Set before any notifier runs (and by a consumer taking over). A byte
  // read as != 0, not a bool: in shared memory (sluice/ipc) any process that
  // can write the segment can leave any value here, and a bool holding
  // another value than 0 or 1 is undefined behaviour to read. Relaxed: it
  // says which fence to use, and carries no data.
  std::atomic<std::uint8_t> asymmetric_{0};
  std::atomic<std::uint32_t> sequence_{0};
  Parker parker_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
