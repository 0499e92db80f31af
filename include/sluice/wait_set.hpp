// WaitSet: one consumer thread sleeps on several buses at once.
//
//   sluice::WaitSet<sluice::FutexParker> set;      // declared before its buses
//   SensorBus sensors(set);                        // each joins at construction
//   CommandBus commands(set);
//   while (!(sensors.IsDrained() && commands.IsDrained())) {
//     set.ProcessBatchWait(std::chrono::milliseconds(100), 64, commands, sensors);
//   }
//
// A bus constructed with a set wakes the set's one wake signal instead of its
// own (detail/bus_core.hpp, ConsumerWake), so a publish or Close on any of
// them wakes the set's waiter. The buses' traits say `using Waiting =
// sluice::WaitInSet<Parker>;` with the set's Parker, and such a bus is
// constructed only with a set: a bus outside every set cannot be listed (a
// compile error); one of another set is refused at run time (kNotMember).
//
// Lifetime: the set must outlive every bus that joined it (declare it
// first), as a mutex outlives the locks that name it: each publish and Close
// of such a bus touches the set.
//
// Threads: the thread that calls Wait or ProcessBatchWait must be the
// consumer of every bus it lists (one consumer per bus, as always). Other
// threads may wait on other buses of the same set (each bus's own
// ProcessBatchWait waits on the set's signal too); every wake-up wakes them
// all, and each re-checks its own buses.
//
// A shared-memory bus (sluice::ipc::ShmBus) may be listed too, with no
// joining: its producers, in other processes, wake the segment's signal,
// so the set sleeps on that signal beside its own (detail/wait/signal_group.hpp;
// the set's Parker must offer WaitAny: FutexParker).
//
// No lost wake-up, SYNC POINT (W) across buses: see Wait below and
// docs/design.md, "One thread, several buses"; model:
// tests/spin/wait_set_wakeup.pml.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/detail/consume/catch_up_pacer.hpp"
#include "sluice/detail/wait/signal_group.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/parker.hpp"
#include "sluice/producer_model.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Why a WaitSet's wait ended.
enum class WaitSetOutcome : std::uint8_t {
  kReady,           // a listed bus has a message ready; `index` names the first
  kTimedOut,        // the timeout passed with nothing ready
  kAllDrained,      // every listed bus is closed and drained: nothing will come
  kNotMember,       // `index` names a bus not constructed with this set: no wait
  kInsideCallback,  // called from inside a callback of a listed bus: no wait
};

struct WaitSetResult {
  WaitSetOutcome outcome = WaitSetOutcome::kTimedOut;
  // kReady: the first bus, in argument order, with a message ready.
  // kNotMember: the first bus, in argument order, outside the set. Else 0.
  std::uint32_t index = 0;

  explicit operator bool() const noexcept { return outcome == WaitSetOutcome::kReady; }
};

template <typename Parker>
class WaitSet {
  static_assert(!std::is_same_v<Parker, NoParker>,
                "Sluice: a WaitSet needs a parker (for example sluice::FutexParker or "
                "sluice::ConditionVariableParker), the same one its buses' traits name");

 public:
  WaitSet() noexcept = default;
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;
  // No thread may be waiting on the set, and no bus that joined it may still
  // exist.
  ~WaitSet() = default;

  // Waits up to `timeout` until a listed bus has a message ready (kReady
  // with its index), every listed bus is drained (kAllDrained), or the
  // timeout passes (kTimedOut; nanoseconds::max() is for ever). Polls the
  // first bus's Traits::Waiting::kPollsBeforePark times, then sleeps. Returns
  // at once, without waiting, with kNotMember when a listed bus did not join
  // this set (its publishes would not wake the set: a sleep could miss them),
  // and with kInsideCallback from inside a callback or visitor of a listed
  // bus. A bus that is drained is never ready; the others are still waited
  // for. On the consumer thread of every listed bus. SLUICE_FREESTANDING:
  // one park at most (as the bus's ProcessBatchWait), so any wake-up of the
  // set, for any bus of it, may end the wait early with kTimedOut.
  template <typename Rep, typename Period, typename... Buses>
  WaitSetResult Wait(std::chrono::duration<Rep, Period> timeout, Buses&... buses) {
    static_assert(sizeof...(Buses) > 0, "Sluice: WaitSet::Wait needs at least one bus");
    constexpr bool kSameParker = (SameParker<Buses>() && ...);
    static_assert(kSameParker,
                  "Sluice: every bus a WaitSet waits on must name the set's Parker in its traits");
    constexpr bool kJoined = (Joined<Buses>() && ...);
    static_assert(!kSameParker || kJoined,
                  "Sluice: a WaitSet waits only on buses of a set: `using Waiting = "
                  "sluice::WaitInSet<Parker>;` in their traits, each constructed with the set "
                  "(`Bus bus(set);`); a bus outside every set would never wake it");
    constexpr bool kCanWaitOnAll =
        (kOwnSignals<Buses...> == 0) || detail::HasWaitAny<Parker>::value;
    static_assert(
        kCanWaitOnAll,
        "Sluice: a WaitSet that lists a sluice::ipc::ShmBus sleeps on the segment's futex "
        "beside its own, so its Parker must offer WaitAny: sluice::FutexParker or "
        "sluice::MembarrierFutexParker");
    WaitSetResult result;
    if constexpr (kSameParker && kJoined && kCanWaitOnAll) {
      result = WaitOn(detail::SaturatingNanos(timeout), buses...);
    }
    return result;
  }

  // Wait, then one ProcessBatch(max_per_bus) on each listed bus in argument
  // order; returns how many messages it dispatched in all: 0 when the wait
  // ended without a ready bus (timeout, every bus drained, a bus outside the
  // set, inside a callback) or max_per_bus is 0. Order: a bus listed first
  // is served first on every call, and every listed bus with messages gets
  // a batch on every call, so none waits more than one call behind the
  // others; within a priority-ordered bus, HIGH first as that bus delivers.
  // Across buses no priority order is kept: a LOW message of a bus listed
  // first goes before a HIGH one of a bus listed after it (each bus orders
  // its own queue; comparing heads across buses would mean a second look at
  // every queue per message). List the urgent bus first.
  template <typename Rep, typename Period, typename... Buses>
  std::uint32_t ProcessBatchWait(std::chrono::duration<Rep, Period> timeout,
                                 std::uint32_t max_per_bus, Buses&... buses) {
    if (max_per_bus == 0) return 0;
    if (!Wait(timeout, buses...)) {
      (NoteEmptyWait(buses), ...);
      return 0;
    }
    // A comma fold: its operands run left to right (a `+` fold's need not).
    // No bus makes its catch-up pause here: the buses after it would wait.
    [[maybe_unused]] const detail::CatchUpHold hold;
    std::uint32_t total = 0;
    ((total += buses.ProcessBatch(max_per_bus)), ...);
    return total;
  }

  // For tests: how many threads have announced that they sleep on the set.
  std::uint32_t Waiters() const noexcept { return signal_.Waiters(); }

 private:
  template <typename, std::size_t, ProducerModel, typename>
  friend class AsyncBus;

  // How many of `Buses` wake a signal of their own, not the set's (a
  // ShmBus: `kWakesItsOwnSignal`); the set then sleeps on theirs too.
  template <typename... Buses>
  static constexpr std::size_t kOwnSignals = (std::size_t{detail::WakesItsOwnSignal<Buses>::value} +
                                              ...);

  template <typename Bus>
  static constexpr bool SameParker() noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return true;
    } else {
      return std::is_same_v<typename Bus::Core::Parker, Parker>;
    }
  }
  template <typename Bus>
  static constexpr bool Joined() noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return true;
    } else {
      return Bus::Core::kJoinsWaitSet;
    }
  }

  // One listed bus, as the wait sees it: an in-process bus of the set
  // through its core; a bus that wakes its own signal through its
  // WaitSetView (sluice/ipc/shm_bus.hpp).
  template <typename Bus>
  static bool Ready(Bus& bus) noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return bus.WaitSetView().Ready();
    } else {
      return bus.core_.HasReadyMessage();
    }
  }
  // A wait that took nothing: for each bus's catch-up pause, an empty call.
  template <typename Bus>
  static void NoteEmptyWait(Bus& bus) noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      bus.WaitSetView().NoteEmptyWait();
    } else {
      bus.core_.Consumer().NoteEmptyWait();
    }
  }
  template <typename Bus>
  static bool Drained(Bus& bus) noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return bus.WaitSetView().Drained();
    } else {
      return bus.core_.IsDrained();
    }
  }
  template <typename Bus>
  static bool InsideCallback(Bus& bus) noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return bus.WaitSetView().InsideCallback();
    } else {
      return bus.core_.IsDispatching();
    }
  }
  template <typename Bus>
  bool Foreign(const Bus& bus) const noexcept {
    if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
      return false;  // its own signal is waited on: nothing to join
    } else {
      return !bus.core_.UsesSignal(&signal_);
    }
  }

  // Wait, for buses of the set's parker.
  template <typename... Buses>
  WaitSetResult WaitOn(std::chrono::nanoseconds timeout, Buses&... buses) {
    WaitSetResult result;
    if (std::uint32_t foreign = 0; FirstForeign(&foreign, buses...)) {
      result.outcome = WaitSetOutcome::kNotMember;
      result.index = foreign;
      return result;
    }
    if ((InsideCallback(buses) || ...)) {
      result.outcome = WaitSetOutcome::kInsideCallback;
      return result;
    }
    // SYNC POINT READ (W), across buses. WaitUntil announces the sleep on
    // the set's signal (PrepareWait: the waiter count's increment, then the
    // seq_cst fence), then calls `ready` and `stop`, which re-check EVERY
    // listed bus: its front slot (TryFront's acquire load, SYNC POINT READ
    // (A)) and its close state (IsDrained: IsClosed's acquire load, SYNC
    // POINT READ (S); the released position is the waiter's own).
    // Every bus's notifier (a publish after its slot's release store, Close
    // after the closed tail's) runs NotifierFence and loads the waiter count
    // of the same signal, the set's (ConsumerWake in detail/bus_core.hpp).
    // So each bus forms the Dekker pair of W with this waiter: a store made
    // before the announcement is seen by the re-check of its bus, and a
    // notifier that fenced after it sees the waiter and bumps the sequence,
    // which the park compares with the ticket read before the announcement.
    // A bus left out of the re-check, or notifying another signal, would
    // break the pair (planted bugs of the model). The heavy-fence mode holds
    // too: every notifier reads the set's Asymmetric(), and the set's
    // parker runs the heavy fence in PrepareWait.
    // A bus that wakes its own signal (a ShmBus) adds that signal to the
    // announcement and the park (detail/wait/signal_group.hpp): the same
    // pair, once per signal; tests/spin/wait_set_two_signals.pml.
    std::uint32_t ready_index = 0;
    const auto ready = [&] { return FirstReady(&ready_index, buses...); };
    const auto stop = [&] { return (Drained(buses) && ...); };
    detail::WaitEnd end = detail::WaitEnd::kTimedOut;
    if constexpr (kOwnSignals<Buses...> == 0) {
      end = detail::WaitUntil(signal_, FirstPolls<Buses...>(), timeout, ready, stop);
    } else {
#if !SLUICE_FREESTANDING
      end = WaitOnSeveralSignals(timeout, ready, stop, buses...);
#endif
    }
    switch (end) {
      case detail::WaitEnd::kReady:
        result.outcome = WaitSetOutcome::kReady;
        result.index = ready_index;
        break;
      case detail::WaitEnd::kStopped:
        result.outcome = WaitSetOutcome::kAllDrained;
        break;
      case detail::WaitEnd::kTimedOut:
        break;
    }
    return result;
  }

#if !SLUICE_FREESTANDING
  // The wait on the set's signal and on the signal of each open listed bus
  // that wakes its own, in slices of the shortest of their slices (a
  // producer process killed between its publish and its wake-up call
  // wakes no one: the next slice's re-check finds its message).
  template <typename Ready, typename Stop, typename... Buses>
  detail::WaitEnd WaitOnSeveralSignals(std::chrono::nanoseconds timeout, Ready& ready, Stop& stop,
                                       Buses&... buses) {
    constexpr std::size_t kMost = 1 + kOwnSignals<Buses...>;
    std::array<detail::SignalRef, kMost> signals{};
    std::size_t count = 0;
    signals[count++] = detail::SignalRef(signal_);
    std::chrono::nanoseconds slice = std::chrono::nanoseconds::max();
    const auto add = [&](auto& bus) {
      using Bus = std::remove_reference_t<decltype(bus)>;
      if constexpr (detail::WakesItsOwnSignal<Bus>::value) {
        auto view = bus.WaitSetView();
        if (view.Drained()) return;  // closed: nothing will wake it
        signals[count++] = view.Signal();
        if (view.Slice() < slice) slice = view.Slice();
      }
    };
    (add(buses), ...);
    detail::SignalGroup<Parker, kMost> group(signals, count);
    return detail::WaitUntilInSlices(group, FirstPolls<Buses...>(), timeout, slice, ready, stop);
  }
#endif

  template <typename First, typename...>
  static constexpr std::uint32_t FirstPolls() noexcept {
    if constexpr (detail::WakesItsOwnSignal<First>::value) {
      return First::kPollsBeforePark;
    } else {
      return First::Core::kPollsBeforePark;
    }
  }

  // Whether a listed bus has a message ready; the first one's index (in
  // argument order) in *index. Consumer: TryFront is its call.
  template <typename... Buses>
  static bool FirstReady(std::uint32_t* index, Buses&... buses) noexcept {
    std::uint32_t i = 0;
    const bool found = ((Ready(buses) || (++i, false)) || ...);
    *index = i;
    return found;
  }

  // Whether a listed bus did not join this set; the first one's index in
  // *index.
  template <typename... Buses>
  bool FirstForeign(std::uint32_t* index, Buses&... buses) const noexcept {
    std::uint32_t i = 0;
    const bool found = ((Foreign(buses) || (++i, false)) || ...);
    *index = i;
    return found;
  }

  detail::WakeSignal<Parker> signal_;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
