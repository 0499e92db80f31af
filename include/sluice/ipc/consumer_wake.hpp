// The consumer's side of the wake page's signal (SYNC POINT (W) of
// sluice/ipc/shm_layout.hpp): it waits with its own record of whether it
// uses the heavy fence, decided by its own registration when it made the
// segment or took it over (and stored in the page, for producers to follow
// at each publish), never the page's byte at each sleep, which any producer
// can write. A producer that sets the byte changes only what other
// producers do: they fence when they need not, or skip the fence this
// consumer needs, and a wake-up may then be missed until the sleep's slice
// ends; it cannot make this consumer poll.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// What a producer that did not register for the heavy fence reads as the
// consumer's choice: never (its publishes fence themselves).
inline const std::atomic<std::uint8_t> kNoHeavyFence{0};

// The signal interface detail::WaitUntil and detail::SignalRef take.
template <typename Signal>
class ConsumerWake {
 public:
  static constexpr bool kProcessShared = Signal::kProcessShared;

  ConsumerWake() noexcept = default;
  // `signal`: the page's, just made or just taken over; `heavy_fence`: what
  // this process decided (Signal::DecideHeavyFence).
  ConsumerWake(Signal& signal, bool heavy_fence) noexcept
      : signal_(&signal), heavy_fence_(heavy_fence) {}

  bool PrepareWait(std::uint32_t* ticket) noexcept {
    return signal_->PrepareWait(ticket, heavy_fence_);
  }
  void CancelWait() noexcept { signal_->CancelWait(); }
  void Wait(std::uint32_t ticket, std::chrono::nanoseconds timeout) noexcept {
    signal_->Wait(ticket, timeout);
  }
  void EndWait() noexcept { signal_->EndWait(); }
  const std::atomic<std::uint32_t>& Word() const noexcept { return signal_->Word(); }
  std::uint32_t Waiters() const noexcept { return signal_->Waiters(); }
  void ForgetWaiters() noexcept { signal_->ForgetWaiters(); }

 private:
  Signal* signal_ = nullptr;
  bool heavy_fence_ = false;
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
