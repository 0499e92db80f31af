// The signal that wakes a bus's consumer (SYNC POINT (W)): the bus's own
// wake signal, the one of the WaitSet the bus joined (sluice/wait_set.hpp),
// or, without a parker, none.
#pragma once

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// A wake signal for a bus without a parker: nobody sleeps, nothing to wake.
struct NoWakeSignal {
  void Notify() noexcept {}
};

// The signal that wakes the bus's consumer: the bus's own, or the one of the
// WaitSet the bus joined (sluice/wait_set.hpp), which every bus of the set
// notifies. Set once, in the bus's constructor, before any other thread can
// reach the bus; read-only after that. `wake_->` reaches the signal in use.
template <typename Signal>
class ConsumerWake {
 public:
  ConsumerWake() noexcept = default;
  ConsumerWake(const ConsumerWake&) = delete;
  ConsumerWake& operator=(const ConsumerWake&) = delete;

  void Join(Signal* shared) noexcept { signal_ = shared; }
  bool Uses(const Signal* signal) const noexcept { return signal_ == signal; }
  Signal* operator->() const noexcept { return signal_; }
  Signal& operator*() const noexcept { return *signal_; }

 private:
  Signal own_;
  Signal* signal_ = &own_;
};

// Without a parker: the empty signal alone, no pointer to load.
template <>
class ConsumerWake<NoWakeSignal> {
 public:
  NoWakeSignal* operator->() noexcept { return &none_; }

 private:
  NoWakeSignal none_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
