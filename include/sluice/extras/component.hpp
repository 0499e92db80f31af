// Component: an object's subscriptions on one bus, removed when the component
// is destroyed. Make it a member of the object whose state the callbacks use;
// no std::shared_ptr is needed.
//
//   class Logger {
//    public:
//     explicit Logger(Bus& bus) : subscriptions_(bus) {
//       subscriptions_.Subscribe<Reading>([this](const Reading& r) { Write(r); });
//     }
//    private:
//     void Write(const Reading& r);
//     sluice::Component<Bus> subscriptions_;  // last member: destroyed first
//   };
//
// Destroying a component on any thread but the consumer returns only once
// none of its callbacks is running or will run again (Unsubscribe's guarantee),
// so the owner's other members may be destroyed after it. Destroyed on the
// consumer thread, inside a callback, its callbacks are not called again.
//
// For objects owned by std::shared_ptr that may die on any thread, use
// SubscribeWeak: each call locks a std::weak_ptr, so a dispatch in flight
// keeps the object alive until its callback returns. A call that finds the
// object dead retires the subscription (see WeakHandler), so a long-lived
// component serving short-lived owners neither fills up nor keeps their
// memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/consume/one_signature.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"
#include "sluice/message.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// `Bus` is any Sluice bus type; `kMaxSubscriptions` handles are kept inline.
// A component is used by one thread at a time (its owner's); the bus it
// subscribes to may be used by any.
template <typename Bus, std::size_t kMaxSubscriptions = 8>
class Component {
  static_assert(kMaxSubscriptions > 0, "Sluice: a Component needs room for a subscription");
  static_assert(kMaxSubscriptions <= 0xFFFF,
                "Sluice: a Component holds at most 65535 subscriptions");

 public:
  explicit Component(Bus& bus) noexcept : bus_(&bus) {}
  ~Component() { UnsubscribeAll(); }

  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;

  // Subscribes `callback` for messages of type T (see Bus::Subscribe). False,
  // with nothing subscribed, when this component already holds
  // kMaxSubscriptions or the bus's table for T is full.
  template <typename T, typename Callback>
  [[nodiscard]] bool Subscribe(Callback&& callback) {
    RetireExpired();
    const std::size_t index = FreeEntry();
    if (index == kMaxSubscriptions) return false;
    return Publish(index, bus_->template Subscribe<T>(std::forward<Callback>(callback)));
  }

  // Subscribes `handler` to T for as long as `owner` lives: each message
  // locks `owner` and, if it is still alive, calls
  // std::invoke(handler, *owner, message) (or with the header as a third
  // argument, when the handler takes it). The first message that finds the
  // owner dead unsubscribes it and drops its weak reference (the callable is
  // destroyed at the end of that batch). A member function pointer works:
  //   component.SubscribeWeak<Reading>(weak_from_this(), &Logger::Write);
  template <typename T, typename Owner, typename Handler>
  [[nodiscard]] bool SubscribeWeak(std::weak_ptr<Owner> owner, Handler handler) {
    static_assert(std::is_invocable_v<Handler&, Owner&, const T&, const MessageHeader&> ||
                      std::is_invocable_v<Handler&, Owner&, const T&>,
                  "Sluice: SubscribeWeak's handler takes (Owner&, const T&) or "
                  "(Owner&, const T&, const MessageHeader&)");
    // A member function's message is its first parameter; a callable's, its
    // second (after the owner).
    static_assert(detail::TakesOneOfAt < Handler,
                  std::is_member_function_pointer_v<Handler> ? 0 : 1, T > (),
                  "Sluice: SubscribeWeak's handler takes the message as T itself, not a type "
                  "T converts to");
    RetireExpired();
    const std::size_t index = FreeEntry();
    if (index == kMaxSubscriptions) return false;
    const std::uint32_t generation =
        GenerationOf(entries_[index].state.load(std::memory_order_relaxed)) + 1;
    std::weak_ptr<void> watch = owner;
    return Publish(index,
                   bus_->template Subscribe<T>(WeakHandler<T, Owner, Handler>{
                       std::move(owner), std::move(handler), this, generation,
                       static_cast<std::uint16_t>(index)}),
                   &watch);
  }

  // Unsubscribes every weak subscription whose owner has died, whether or
  // not a message has reached it since; returns how many. Subscribe and
  // SubscribeWeak call it first, so owners that die without a message free
  // their entry, their table slot and (make_shared) their memory by the
  // component's next subscription. Like Unsubscribe, off the consumer thread
  // it waits for a batch in flight.
  std::size_t RetireExpired() noexcept {
    std::size_t retired = 0;
    for (std::size_t i = 0; i < kMaxSubscriptions; ++i) {
      Entry& entry = entries_[i];
      std::uint32_t state = entry.state.load(std::memory_order_acquire);
      const std::uint32_t generation = GenerationOf(state);
      // The watch belongs to whoever holds the entry out of kLive: claim it
      // first, so a weak callback retiring it meanwhile fails its CAS (and
      // tries again on its next message).
      if (PhaseOf(state) != kLive || !entry.state.compare_exchange_strong(
                                         state, Pack(generation, kSweeping),
                                         std::memory_order_acq_rel, std::memory_order_relaxed)) {
        continue;
      }
      if (watching_[i] && watched_[i].expired()) {
        Unwatch(i);
        // Not kLive now, so no callback touches the entry: unsubscribe it.
        retired += bus_->Unsubscribe(LoadHandle(entry)) ? 1 : 0;
        entry.state.store(Pack(generation, kFree), std::memory_order_release);
      } else {
        entry.state.store(Pack(generation, kLive), std::memory_order_release);
      }
    }
    return retired;
  }

  // Unsubscribes everything this component holds; returns how many (weak
  // subscriptions that already retired themselves are not counted).
  std::size_t UnsubscribeAll() noexcept {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < kMaxSubscriptions; ++i) {
      removed += Remove(entries_[i]);
      Unwatch(i);  // the entry is free now: the owner thread's alone
    }
    return removed;
  }

  // Subscriptions held: not counting weak ones that retired themselves.
  std::size_t SubscriptionCount() const noexcept {
    std::size_t count = 0;
    for (const Entry& entry : entries_) {
      count += PhaseOf(entry.state.load(std::memory_order_relaxed)) == kLive ? 1 : 0;
    }
    return count;
  }
  Bus& AttachedBus() const noexcept { return *bus_; }

 private:
  struct Entry;

  void Unwatch(std::size_t index) noexcept {
    watching_[index] = false;
    watched_[index].reset();
  }

  // Owner thread: frees `entry`; 1 when that unsubscribed a live
  // subscription, 0 when it was free or had retired itself.
  std::size_t Remove(Entry& entry) noexcept {
    std::uint32_t state = entry.state.load(std::memory_order_acquire);
    for (;;) {
      // A weak callback on the consumer thread is unsubscribing this entry's
      // subscription: a few instructions, no user code. Wait for it, so that
      // the component outlives its last touch of the entry (and of the
      // entry's watch).
      while (PhaseOf(state) == kRetiring) {
        detail::CpuRelax();
        state = entry.state.load(std::memory_order_acquire);
      }
      const std::uint32_t generation = GenerationOf(state);
      if (PhaseOf(state) == kLive) {
        if (entry.state.compare_exchange_strong(state, Pack(generation, kFree),
                                                std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
          // Ours to remove. On another thread, Unsubscribe waits for the
          // consumer's batch.
          return bus_->Unsubscribe(LoadHandle(entry)) ? 1 : 0;
        }
        // A weak callback moved it first (to kRetiring): the CAS loaded
        // the new state; wait for that callback as above.
        continue;
      }
      if (PhaseOf(state) == kRetired) {
        // Its callback unsubscribed it and no longer touches the entry.
        entry.state.store(Pack(generation, kFree), std::memory_order_relaxed);
      }
      return 0;
    }
  }

  // An entry's state is generation << 3 | phase. The owner thread moves it
  // kFree -> kLive (publishing the handle) and kLive -> kFree (removing),
  // and kLive -> kSweeping -> kLive or kFree (RetireExpired); a weak
  // callback that finds its owner dead moves it kLive -> kRetiring,
  // unsubscribes, then stores kRetired, after which it no longer touches the
  // entry, and the owner thread turns kRetired into kFree. The entry's watch
  // (watched_, watching_) is touched only by whoever moved it out of kLive,
  // or by the owner thread while it is kFree; the CAS that leaves kLive
  // (acq_rel) and the release store that ends each phase order those touches. An entry is
  // reused only once its bus subscription is gone, so the bus never holds
  // more of this component's subscriptions than it has entries. The generation, bumped on each
  // reuse, keeps a callback of an earlier subscription from retiring a later one.
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kLive = 1;
  static constexpr std::uint32_t kRetired = 2;
  static constexpr std::uint32_t kRetiring = 3;  // the callback is unsubscribing
  static constexpr std::uint32_t kSweeping = 4;  // the owner thread checks the watch
  static constexpr std::uint32_t Pack(std::uint32_t generation, std::uint32_t phase) noexcept {
    return (generation << 3) | phase;
  }
  static constexpr std::uint32_t PhaseOf(std::uint32_t state) noexcept { return state & 7u; }
  static constexpr std::uint32_t GenerationOf(std::uint32_t state) noexcept { return state >> 3; }

  static_assert(std::is_trivially_copyable_v<SubscriptionHandle>);
  static constexpr std::size_t kHandleWords = (sizeof(SubscriptionHandle) + 3) / 4;

  // The handle is kept in 32-bit atomic words (a 64-bit atomic is not
  // lock-free everywhere) so that a weak callback may read it while the
  // owner thread rewrites it for a later subscription; the generation in
  // `state` tells the callback whether what it read is its own.
  struct Entry {
    std::atomic<std::uint32_t> state{0};
    std::atomic<std::uint32_t> handle[kHandleWords] = {};
  };

  // SYNC POINT READ (M): acquire, pairing with the release stores in
  // Publish(); see there.
  static SubscriptionHandle LoadHandle(const Entry& entry) noexcept {
    std::uint32_t words[kHandleWords];
    for (std::size_t i = 0; i < kHandleWords; ++i) {
      words[i] = entry.handle[i].load(std::memory_order_acquire);
    }
    SubscriptionHandle handle;
    std::memcpy(&handle, words, sizeof handle);
    return handle;
  }

  // Owner thread: a free entry (first returning retired ones to kFree), or
  // kMaxSubscriptions when there is none.
  std::size_t FreeEntry() noexcept {
    std::size_t free = kMaxSubscriptions;
    for (std::size_t i = 0; i < kMaxSubscriptions; ++i) {
      Entry& entry = entries_[i];
      const std::uint32_t state = entry.state.load(std::memory_order_acquire);
      if (PhaseOf(state) == kRetired) {
        entry.state.store(Pack(GenerationOf(state), kFree), std::memory_order_relaxed);
      } else if (PhaseOf(state) != kFree) {
        continue;
      }
      if (free == kMaxSubscriptions) free = i;
    }
    return free;
  }

  // Owner thread: records `handle` in entry `index` as its next generation.
  // `watch` is the owner of a weak subscription (null for the others); it
  // is recorded before the release store below, for a callback that retires.
  bool Publish(std::size_t index, const SubscriptionHandle& handle,
               std::weak_ptr<void>* watch = nullptr) noexcept {
    if (!handle.IsValid()) return false;
    watching_[index] = watch != nullptr;
    if (watch != nullptr) watched_[index] = std::move(*watch);
    Entry& entry = entries_[index];
    const std::uint32_t generation = GenerationOf(entry.state.load(std::memory_order_relaxed)) + 1;
    // SYNC POINT WRITE (M): the entry left its previous generation's kLive
    // before these release stores. A callback of that generation that reads
    // one of these words (acquire) therefore finds its generation over when
    // it then tries its CAS, and retires nothing; so a handle it read half
    // old, half new is never used.
    std::uint32_t words[kHandleWords] = {};
    std::memcpy(words, &handle, sizeof handle);
    for (std::size_t i = 0; i < kHandleWords; ++i) {
      entry.handle[i].store(words[i], std::memory_order_release);
    }
    // SYNC POINT WRITE (K): the handle words, for the callback's acquire load.
    entry.state.store(Pack(generation, kLive), std::memory_order_release);
    return true;
  }

  template <typename T, typename Owner, typename Handler>
  struct WeakHandler {
    std::weak_ptr<Owner> owner;
    Handler handler;
    Component* component;
    std::uint32_t generation;
    std::uint16_t index;

    void operator()(const T& message, const MessageHeader& header) {
      // The lock keeps the owner alive for the call, whichever thread drops
      // the last other reference meanwhile.
      if (const std::shared_ptr<Owner> alive = owner.lock()) {
        if constexpr (std::is_invocable_v<Handler&, Owner&, const T&, const MessageHeader&>) {
          std::invoke(handler, *alive, message, header);
        } else {
          std::invoke(handler, *alive, message);
        }
      } else {
        Retire();
      }
    }

    // Consumer thread, owner dead. The component is alive here: it removes
    // a live entry with Unsubscribe, which waits for this batch on another
    // thread and stops these calls at once on this one.
    void Retire() noexcept {
      Entry& entry = component->entries_[index];
      const std::uint32_t live = Pack(generation, kLive);
      // SYNC POINT READ (K): the handle words of this generation.
      if (entry.state.load(std::memory_order_acquire) != live) return;  // not published yet
      // If any word is already a later generation's, the CAS below fails (M).
      const SubscriptionHandle handle = LoadHandle(entry);
      Bus* const bus = component->bus_;
      std::uint32_t expected = live;
      if (!entry.state.compare_exchange_strong(expected, Pack(generation, kRetiring),
                                               std::memory_order_acq_rel,
                                               std::memory_order_relaxed)) {
        return;  // the owner thread is removing it
      }
      // The entry is this callable's until kRetired: drop the component's
      // watch of the dead owner too, so its memory goes now.
      component->Unwatch(index);
      // Inside the batch, Unsubscribe does not wait; this callable is
      // destroyed when the batch ends.
      (void)bus->Unsubscribe(handle);
      owner.reset();  // the owner's control block (and make_shared memory) now
      // The entry is the owner thread's again: only this callable's own
      // members (not the entry) are used from here on.
      entry.state.store(Pack(generation, kRetired), std::memory_order_release);
    }
  };

  Bus* bus_;
  Entry entries_[kMaxSubscriptions];
  // Owner thread only: the owner of each weak entry, watched for expiry
  // (empty for the other entries). The callbacks never touch it.
  std::weak_ptr<void> watched_[kMaxSubscriptions];
  bool watching_[kMaxSubscriptions] = {};
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
