// The dispatch table: for each payload alternative, a fixed array of
// subscription slots holding callables inline, and a bitmask of the active
// ones. Subscribe and Unsubscribe are safe from any thread; dispatch takes no
// lock.
//
// Slot life cycle (state = generation << 3 | phase):
//   kFree --Subscribe CAS--> kClaimed --construct, set mask bit--> kActive
//   kActive --Unsubscribe CAS--> kRetiring --clear mask bit, grace--> kFree
//                                   \--(on the consumer thread)--> kDeferred
//   kDeferred --consumer at batch end--> kFree
// Each return to kFree bumps the generation, so stale handles fail.
//
// Synchronisation:
//  (C) callable, subscriber -> consumer: Subscribe constructs the callable,
//      then sets the mask bit with a seq_cst (release) RMW; the consumer loads
//      the mask seq_cst (acquire) before calling through the slot.
//  (D) retirement, unsubscriber -> consumer: the mask bit is cleared with a
//      seq_cst RMW and DispatchEpoch::WaitForReaders() waits out any batch
//      that may have loaded it set; see dispatch_epoch.hpp.
//  (E) slot reuse: the return to kFree is a release store after the callable
//      is destroyed; Subscribe's claiming CAS is acquire.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/config.hpp"
#include "sluice/detail/bits.hpp"
#include "sluice/detail/dispatch_epoch.hpp"
#include "sluice/detail/variant_index.hpp"
#include "sluice/message.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice::detail {

template <typename Payload, typename Traits>
class SubscriptionRegistry {
 public:
  using Envelope = MessageEnvelope<Payload>;
  static constexpr std::size_t kTypeCount = std::variant_size_v<Payload>;
  static constexpr std::size_t kSlotsPerType = Traits::kMaxSubscribersPerType;
  static constexpr std::size_t kCallableBytes = Traits::kCallbackStorageBytes;

  static_assert(kSlotsPerType >= 1 && kSlotsPerType <= 64,
                "Sluice: kMaxSubscribersPerType must be between 1 and 64");
  static_assert(kTypeCount < SubscriptionHandle::kInvalidIndex,
                "Sluice: too many payload alternatives");

  // A 32-bit mask where it suffices, so 32-bit targets keep it lock-free.
  using Mask = std::conditional_t<(kSlotsPerType <= 32), std::uint32_t, std::uint64_t>;

  SubscriptionRegistry() = default;
  SubscriptionRegistry(const SubscriptionRegistry&) = delete;
  SubscriptionRegistry& operator=(const SubscriptionRegistry&) = delete;

  // Destroys every remaining callable. No thread may use the registry now.
  ~SubscriptionRegistry() {
    for (TypeTable& table : tables_) {
      for (Slot& slot : table.slots) {
        const std::uint32_t phase = PhaseOf(slot.state.load(std::memory_order_relaxed));
        if (phase == kActive || phase == kDeferred) slot.destroy(slot.storage);
      }
    }
  }

  template <typename T, typename Callback>
  SubscriptionHandle Subscribe(Callback&& callback) {
    using Stored = std::decay_t<Callback>;
    static_assert(kIsAlternative<T, Payload>,
                  "Sluice: Subscribe<T> needs T to be exactly one alternative of the "
                  "bus payload variant");
    static_assert(sizeof(Stored) <= kCallableBytes,
                  "Sluice: callback too large for inline storage; capture less or "
                  "raise kCallbackStorageBytes in the bus traits");
    static_assert(alignof(Stored) <= alignof(std::max_align_t),
                  "Sluice: callback over-aligned for inline storage");
    static_assert(std::is_invocable_v<Stored&, const T&, const MessageHeader&> ||
                      std::is_invocable_v<Stored&, const T&> ||
                      std::is_invocable_v<Stored&, const Envelope&>,
                  "Sluice: a callback takes (const T&, const MessageHeader&), "
                  "(const T&) or (const MessageEnvelope<Payload>&)");
    constexpr std::size_t kType = VariantIndex<T, Payload>::kValue;

    TypeTable& table = tables_[kType];
    for (std::size_t index = 0; index < kSlotsPerType; ++index) {
      Slot& slot = table.slots[index];
      std::uint32_t state = slot.state.load(std::memory_order_relaxed);
      if (PhaseOf(state) != kFree) continue;
      const std::uint32_t generation = GenerationOf(state);
      // SYNC POINT READ (E): the previous callable's destruction.
      if (!slot.state.compare_exchange_strong(state, Pack(generation, kClaimed),
                                              std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
        continue;
      }
#if SLUICE_HAS_EXCEPTIONS
      try {
        new (slot.storage) Stored(std::forward<Callback>(callback));
      } catch (...) {
        slot.state.store(Pack(generation, kFree), std::memory_order_release);
        throw;
      }
#else
      new (slot.storage) Stored(std::forward<Callback>(callback));
#endif
      slot.invoke = &Invoke<Stored, T, kType>;
      slot.destroy = &Destroy<Stored>;
      // SYNC POINT WRITE (C): the callable and its function pointers.
      table.active.fetch_or(BitOf(index), std::memory_order_seq_cst);
      slot.state.store(Pack(generation, kActive), std::memory_order_release);
      return SubscriptionHandle(static_cast<std::uint16_t>(kType),
                                static_cast<std::uint16_t>(index), generation);
    }
    return SubscriptionHandle();
  }

  // True for the first Unsubscribe of a live handle. On a thread other than
  // the dispatching one, returns only once the callback is not running and
  // will not run again. On the dispatching thread (inside a callback) the
  // callback is not called again and is destroyed at the end of the batch;
  // so too, under SLUICE_BARE_METAL, from a context that preempted a batch.
  bool Unsubscribe(const SubscriptionHandle& handle, const DispatchEpoch& epoch) noexcept {
    if (!handle.valid() || handle.type_index_ >= kTypeCount || handle.slot_ >= kSlotsPerType) {
      return false;
    }
    TypeTable& table = tables_[handle.type_index_];
    Slot& slot = table.slots[handle.slot_];
    std::uint32_t expected = Pack(handle.generation_, kActive);
    if (!slot.state.compare_exchange_strong(expected, Pack(handle.generation_, kRetiring),
                                            std::memory_order_acquire, std::memory_order_relaxed)) {
      return false;  // stale, foreign or already unsubscribed
    }
    // SYNC POINT WRITE (D): unpublish before asking whether a batch runs.
    table.active.fetch_and(static_cast<Mask>(~BitOf(handle.slot_)), std::memory_order_seq_cst);
    if (epoch.WaitForReaders()) {
      Free(slot, handle.generation_);
    } else {
      // The dispatching thread (or, bare metal, a context that preempted it).
      slot.state.store(Pack(handle.generation_, kDeferred), std::memory_order_relaxed);
      deferred_pending_.store(true, std::memory_order_relaxed);
    }
    return true;
  }

  // Consumer, inside the dispatch epoch. Calls every active subscriber of the
  // envelope's type, in slot order. A subscriber that throws is reported via
  // `on_error(what)` and the remaining subscribers still run.
  template <typename OnError>
  void Dispatch(const Envelope& envelope, OnError&& on_error) {
    TypeTable& table = tables_[envelope.payload.index()];
    // SYNC POINT READ (C)/(D): see Subscribe() and Unsubscribe().
    Mask pending = table.active.load(std::memory_order_seq_cst);
    while (pending != 0) {
      const unsigned index = LowestSetBit(pending);
      Slot& slot = table.slots[index];
#if SLUICE_HAS_EXCEPTIONS
      try {
        slot.invoke(slot.storage, envelope);
      } catch (const std::exception& error) {
        on_error(error.what());
      } catch (...) {
        on_error("non-standard exception");
      }
#else
      (void)on_error;
      slot.invoke(slot.storage, envelope);
#endif
      // Re-read: a callback may have unsubscribed a later subscriber (which
      // must not run) or subscribed one (which may).
      const Mask later = static_cast<Mask>(~Mask{0} << index << 1);
      pending = table.active.load(std::memory_order_seq_cst) & later;
    }
  }

  // Consumer, at the end of a batch: destroys callables unsubscribed from
  // inside callbacks. Cheap when there are none.
  void ReclaimDeferred() noexcept {
    if (!deferred_pending_.load(std::memory_order_relaxed)) return;
    deferred_pending_.store(false, std::memory_order_relaxed);
    for (TypeTable& table : tables_) {
      for (Slot& slot : table.slots) {
        const std::uint32_t state = slot.state.load(std::memory_order_relaxed);
        if (PhaseOf(state) == kDeferred) Free(slot, GenerationOf(state));
      }
    }
  }

  // Active subscriptions of alternative `type_index`. Any thread.
  std::size_t SubscriberCount(std::size_t type_index) const noexcept {
    if (type_index >= kTypeCount) return 0;
    Mask mask = tables_[type_index].active.load(std::memory_order_relaxed);
    std::size_t count = 0;
    for (; mask != 0; mask &= static_cast<Mask>(mask - 1)) ++count;
    return count;
  }

 private:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kClaimed = 1;
  static constexpr std::uint32_t kActive = 2;
  static constexpr std::uint32_t kRetiring = 3;
  static constexpr std::uint32_t kDeferred = 4;
  static constexpr unsigned kPhaseBits = 3;

  static constexpr std::uint32_t Pack(std::uint32_t generation, std::uint32_t phase) noexcept {
    return (generation << kPhaseBits) | phase;
  }
  static constexpr std::uint32_t PhaseOf(std::uint32_t state) noexcept {
    return state & ((1u << kPhaseBits) - 1);
  }
  static constexpr std::uint32_t GenerationOf(std::uint32_t state) noexcept {
    return state >> kPhaseBits;
  }
  static constexpr Mask BitOf(std::size_t index) noexcept {
    return static_cast<Mask>(Mask{1} << index);
  }

  struct Slot {
    std::atomic<std::uint32_t> state{0};
    void (*invoke)(void* storage, const Envelope& envelope) = nullptr;
    void (*destroy)(void* storage) noexcept = nullptr;
    alignas(std::max_align_t) unsigned char storage[kCallableBytes];
  };

  struct alignas(kCacheLineSize) TypeTable {
    std::atomic<Mask> active{0};
    Slot slots[kSlotsPerType];
  };

  template <typename Stored, typename T, std::size_t kType>
  static void Invoke(void* storage, const Envelope& envelope) {
    Stored& callback = *std::launder(reinterpret_cast<Stored*>(storage));
    const T& message = *std::get_if<kType>(&envelope.payload);
    if constexpr (std::is_invocable_v<Stored&, const T&, const MessageHeader&>) {
      callback(message, envelope.header);
    } else if constexpr (std::is_invocable_v<Stored&, const T&>) {
      callback(message);
    } else {
      callback(envelope);
    }
  }

  template <typename Stored>
  static void Destroy(void* storage) noexcept {
    std::launder(reinterpret_cast<Stored*>(storage))->~Stored();
  }

  static void Free(Slot& slot, std::uint32_t generation) noexcept {
    slot.destroy(slot.storage);
    // SYNC POINT WRITE (E): the destruction above.
    slot.state.store(Pack(generation + 1, kFree), std::memory_order_release);
  }

  TypeTable tables_[kTypeCount];
  // Set with a deferral, cleared by the consumer. Hosted: both on the
  // consumer thread. Bare metal: a context that preempted the consumer runs
  // to completion before the consumer reads it.
  std::atomic<bool> deferred_pending_{false};
};

}  // namespace sluice::detail
