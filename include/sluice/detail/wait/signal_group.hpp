// SignalGroup: one waiter sleeping on several wake signals at once. A
// WaitSet uses one when it lists a bus whose notifiers cannot reach the
// set's own signal (a ShmBus: its producers run in other processes and
// wake the segment's signal), so the set's waiter announces its sleep on
// the set's signal and on each such bus's, re-checks every bus, and parks
// on all their words in one call (the parker's WaitAny), which any one
// notify ends.
//
// SYNC POINT (W), once per signal: PrepareWait announces on every signal
// (each WakeSignal::PrepareWait: ticket, waiter count, its fence or heavy
// fence) before the caller's re-check, so for each signal the Dekker pair
// of detail/wait/wake_signal.hpp holds as it does alone: a notifier's
// store is seen by the re-check, or the notifier sees the waiter counted
// on its signal and bumps that signal's word, which WaitAny compares with
// the ticket read before the announcement. A signal left out of the
// announcement or of the park breaks the pair, as does a re-check that
// skips a bus: tests/spin/wait_set_two_signals.pml plants each.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/parker.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// A WakeSignal of any parker, as a SignalGroup member: the calls of its
// wait protocol without its type (a group mixes the set's parker and the
// segment's).
class SignalRef {
 public:
  SignalRef() noexcept = default;
  template <typename Signal>
  explicit SignalRef(Signal& signal) noexcept
      : signal_(&signal),
        word_(&signal.Word()),
        process_shared_(Signal::kProcessShared),
        prepare_([](void* s, std::uint32_t* ticket) noexcept {
          return static_cast<Signal*>(s)->PrepareWait(ticket);
        }),
        cancel_([](void* s) noexcept { static_cast<Signal*>(s)->CancelWait(); }),
        end_([](void* s) noexcept { static_cast<Signal*>(s)->EndWait(); }) {}

  bool PrepareWait(std::uint32_t* ticket) const noexcept { return prepare_(signal_, ticket); }
  void CancelWait() const noexcept { cancel_(signal_); }
  void EndWait() const noexcept { end_(signal_); }
  ParkWord Park(std::uint32_t ticket) const noexcept {
    return ParkWord{word_, ticket, process_shared_};
  }

 private:
  void* signal_ = nullptr;
  const std::atomic<std::uint32_t>* word_ = nullptr;
  bool process_shared_ = false;
  bool (*prepare_)(void*, std::uint32_t*) noexcept = nullptr;
  void (*cancel_)(void*) noexcept = nullptr;
  void (*end_)(void*) noexcept = nullptr;
};

// Whether a parker offers WaitAny (sluice/parker.hpp).
template <typename Parker, typename = void>
struct HasWaitAny : std::false_type {};
template <typename Parker>
struct HasWaitAny<Parker,
                  std::void_t<decltype(Parker::WaitAny(std::declval<const ParkWord*>(),
                                                       std::size_t{}, std::chrono::nanoseconds{}))>>
    : std::true_type {};

// Whether a bus wakes a signal of its own rather than its WaitSet's
// (`static constexpr bool kWakesItsOwnSignal = true;`, a ShmBus): a set
// that lists it sleeps on that signal too, through the bus's
// WaitSetView().
template <typename Bus, typename = void>
struct WakesItsOwnSignal : std::false_type {};
template <typename Bus>
struct WakesItsOwnSignal<Bus, std::void_t<decltype(Bus::kWakesItsOwnSignal)>>
    : std::bool_constant<Bus::kWakesItsOwnSignal> {};

// The signals of one wait (the first `count` of `signals`, at most
// kMost), with the signal interface detail::WaitUntil takes (PrepareWait,
// CancelWait, Wait); the ticket it passes is unused, each signal's own is
// kept here.
template <typename Parker, std::size_t kMost>
class SignalGroup {
  static_assert(kMost > 0, "Sluice: a signal group needs a signal");

 public:
  SignalGroup(const std::array<SignalRef, kMost>& signals, std::size_t count) noexcept
      : signals_(signals), count_(count < kMost ? count : kMost) {}

  // Announces on every signal, in order. False (nothing left announced)
  // when one of them could not announce (its heavy fence failed): the
  // caller polls instead of sleeping, as with one signal.
  bool PrepareWait(std::uint32_t* ticket) noexcept {
    *ticket = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      if (!signals_[i].PrepareWait(&tickets_[i])) {
        for (std::size_t j = 0; j < i; ++j) signals_[j].CancelWait();
        return false;
      }
    }
    return true;
  }

  void CancelWait() noexcept {
    for (std::size_t i = 0; i < count_; ++i) signals_[i].CancelWait();
  }

  // Parks until any signal's word leaves its ticket (a notify of any of
  // them), the timeout, or spuriously; then ends the wait on every signal.
  void Wait(std::uint32_t /*ticket*/, std::chrono::nanoseconds timeout) noexcept {
    std::array<ParkWord, kMost> words{};
    for (std::size_t i = 0; i < count_; ++i) words[i] = signals_[i].Park(tickets_[i]);
    Parker::WaitAny(words.data(), count_, timeout);
    for (std::size_t i = 0; i < count_; ++i) signals_[i].EndWait();
  }

 private:
  std::array<SignalRef, kMost> signals_;
  std::size_t count_;
  std::array<std::uint32_t, kMost> tickets_{};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
