// What a WaitSet (sluice/wait_set.hpp) reads of a ShmBus it lists: whether
// the bus has something for ProcessBatch, whether it is drained, whether
// its batch is running, the segment's consumer signal and the slice a
// sleep on it is cut into. On the bus's consumer thread, which is the
// set's.
#pragma once

#include <chrono>

#include "sluice/config.hpp"
#include "sluice/detail/wait/signal_group.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

template <typename Bus>
class ShmSetView {
 public:
  explicit ShmSetView(Bus* bus) noexcept : bus_(bus) {}

  // Something for ProcessBatch: a message, a lane its producer left, or a
  // producer check due (a lane is found gone only by a check). Due once a
  // slice at most, as between the bus's own sleeps: an interval shorter
  // than a slice (0: on every batch that takes nothing) would make the set
  // ready on every look, and it would never sleep.
  bool Ready() const noexcept {
    if (!bus_->segment_.IsOpen()) return false;
    const std::chrono::nanoseconds due =
        bus_->check_interval_ > bus_->sleep_slice_ ? bus_->check_interval_ : bus_->sleep_slice_;
    return bus_->front_.Lanes().HasWork() ||
           std::chrono::steady_clock::now() - bus_->last_check_ >= due;
  }
  // Closed: nothing will come (Close drops what was queued).
  bool Drained() const noexcept { return !bus_->segment_.IsOpen(); }
  bool InsideCallback() const noexcept { return bus_->front_.Consumer().Dispatching(); }
  // A set's wait that took nothing: for the catch-up pause, an empty call.
  void NoteEmptyWait() noexcept { bus_->front_.Consumer().NoteEmptyWait(); }
  // The segment's consumer signal, open buses only. The set's thread is
  // its only waiter, and not counted now: a count left by a killed
  // consumer (or written by anyone) is wrong, and is cleared here, before
  // the set announces (as ShmBus::RunWaiting does before each sleep).
  sluice::detail::SignalRef Signal() const noexcept {
    auto& wake = bus_->segment_.ConsumerWakeSignal();
    if (wake.Waiters() != 0) wake.ForgetWaiters();
    return sluice::detail::SignalRef(wake);
  }
  // A producer killed between its publish and its wake-up call wakes no
  // one: the sleep is cut into slices of the peer check interval.
  std::chrono::nanoseconds Slice() const noexcept { return bus_->sleep_slice_; }

 private:
  Bus* bus_;
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
