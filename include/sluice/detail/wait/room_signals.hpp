// PublishBlocking's part of a bus: one wake signal per priority, on which
// producers wait for room (a waiter of a priority is woken only when there is
// room for it), and the thread inside a batch (consumer-written; read by
// PublishBlocking to refuse waiting for itself). A bus without a parker (or
// on bare metal, where nothing may sleep but the consumer) has the empty
// specialisation: no member, and every call compiles to nothing.
//
// SYNC POINT (R), a Dekker pair per priority (detail/wait/wake_signal.hpp): the
// waiter announces itself on its priority's signal, fences and re-checks
// admission (the ring's acquire load of the consumer's released position, in
// the claim); the consumer, after a batch released slots (or Close, after
// closing), fences once for all three signals and loads their waiter counts.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/message.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Parker, bool kEnabled = !SLUICE_FREESTANDING>
class RoomSignals {
 public:
  void EnterBatch() noexcept {}
  void LeaveBatch() noexcept {}
  template <typename HasRoom>
  void NotifyWaiters(bool, HasRoom&&) noexcept {}
};

#if !SLUICE_FREESTANDING
template <typename Parker>
class RoomSignals<Parker, true> {
  static_assert(std::atomic<std::thread::id>::is_always_lock_free,
                "Sluice: PublishBlocking needs a lock-free std::atomic<std::thread::id>");

 public:
  // Consumer, around a batch. Only this thread stores its own id here, so a
  // relaxed load that finds it is this thread's own store.
  void EnterBatch() noexcept {
    consumer_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  void LeaveBatch() noexcept {
    consumer_thread_.store(std::thread::id(), std::memory_order_relaxed);
  }
  // A producer: whether it is the consumer inside a batch (a callback that
  // publishes), which would wait for its own batch.
  bool InsideBatchOnThisThread() const noexcept {
    return consumer_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  // A producer: waits on `priority`'s signal as detail/wait/waiting.hpp does.
  template <typename Ready, typename Stop>
  WaitEnd WaitForRoom(MessagePriority priority, std::uint32_t polls,
                      std::chrono::nanoseconds timeout, Ready& ready, Stop&& stop) {
    return WaitUntil(signals_[static_cast<std::size_t>(priority)], polls, timeout, ready, stop);
  }

  // Wakes producers waiting for room: all of them (only_with_room false:
  // Close), or (the consumer, after a batch) those of each priority for
  // which `has_room(priority)`. SYNC POINT WRITE (R): the fence orders the
  // consumer's release of slots (or Close's store) before the loads of the
  // waiter counts. Skipping a wake is safe: the queue holds at least the
  // limit, and the batch that takes it below looks again.
  template <typename HasRoom>
  void NotifyWaiters(bool only_with_room, HasRoom&& has_room) noexcept {
    if (signals_[0].Asymmetric() && signals_[1].Asymmetric() && signals_[2].Asymmetric()) {
      signals_[0].NotifierFence();
    } else {
      FullFence();
    }
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      if (!signals_[p].HasWaiters()) continue;
      if (only_with_room && !has_room(static_cast<MessagePriority>(p))) continue;
      signals_[p].Wake();
    }
  }

  // For tests: producers announced on `priority`'s signal.
  std::uint32_t Waiters(std::size_t priority) const noexcept {
    return signals_[priority].Waiters();
  }

 private:
  std::array<WakeSignal<Parker>, kPriorityCount> signals_;
  std::atomic<std::thread::id> consumer_thread_{};
};
#endif

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
