// The dispatch table: for each payload alternative, a fixed array of
// subscription slots holding callables inline, and a bitmask of the active
// ones. Subscribe and Unsubscribe are safe from any thread; dispatch takes no
// lock.
//
// Slot life cycle (state = generation << 3 | phase, Position-wide):
//   kFree --Subscribe CAS--> kClaimed --construct, set mask bit--> kActive
//   kActive --Unsubscribe CAS--> kRetiring --clear mask bit, grace--> kFree
//                                   \--(the callable is running)--> kDeferred
//   kDeferred --consumer at batch end--> kFree
// Each return to kFree bumps the generation, so stale handles fail. A slot
// whose generation would wrap is retired for good instead (kRetired): with
// 64-bit positions after 2^61 reuses, never in practice; with 32-bit ones
// after 2^29, after which Subscribe uses the type's other slots. A stale
// handle therefore never matches a later subscription.
//
// Handles carry the id of the registry that issued them (a process-wide
// counter: 64-bit ids never repeat; 32-bit ones after 2^32 buses), so a
// handle from another bus is refused.
//
// "Running": the consumer stores the key of the callable it is about to call
// in `running_`. An Unsubscribe that may not wait for the batch (on the
// consumer thread, or under SLUICE_FREESTANDING from an interrupt that
// preempted it) defers the destruction only when its callable is the running
// one, and says so; any other callable is freed at once. Under
// SLUICE_FREESTANDING the consumer re-reads the mask after storing `running_`
// (signal fences keep the compiler from reordering; one core needs no more):
// an interrupt that clears the bit before that re-read is seen by it, and
// one that clears it after sees `running_` and defers.
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
#include "sluice/detail/consume/dispatch_epoch.hpp"
#include "sluice/detail/consume/one_signature.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/message.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

struct TestAccess;

// Ids of registries (and so of buses); 0 is never issued.
inline Position NextRegistryId() noexcept {
  static std::atomic<Position> next{1};
  Position id;
  do {
    id = next.fetch_add(1, std::memory_order_relaxed);
  } while (id == 0);  // the counter wrapped
  return id;
}

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

  SubscriptionRegistry() noexcept : id_(NextRegistryId()) {}
  SubscriptionRegistry(const SubscriptionRegistry&) = delete;
  SubscriptionRegistry& operator=(const SubscriptionRegistry&) = delete;

  // Destroys every remaining callable. No thread may use the registry now.
  ~SubscriptionRegistry() {
    for (TypeTable& table : tables_) {
      for (Slot& slot : table.slots) {
        const Position phase = PhaseOf(slot.state.load(std::memory_order_relaxed));
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
    static_assert(TakesOneOfAt<Stored, 0, T, Envelope>(),
                  "Sluice: a callback's message parameter is the subscribed type T itself "
                  "(or the envelope), not a type T converts to");
    constexpr std::size_t kType = VariantIndex<T, Payload>::kValue;

    TypeTable& table = tables_[kType];
    for (std::size_t index = 0; index < kSlotsPerType; ++index) {
      Slot& slot = table.slots[index];
      Position state = slot.state.load(std::memory_order_relaxed);
      if (PhaseOf(state) != kFree) continue;
      const Position generation = GenerationOf(state);
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
#if !SLUICE_FREESTANDING
      slot.invoke_run = &InvokeRun<Stored, T, kType>;
#endif
      slot.destroy = &Destroy<Stored>;
      // SYNC POINT WRITE (C): the callable and its function pointers.
      table.active.fetch_or(BitOf(index), std::memory_order_seq_cst);
      slot.state.store(Pack(generation, kActive), std::memory_order_release);
      return SubscriptionHandle(static_cast<std::uint16_t>(kType),
                                static_cast<std::uint16_t>(index), generation, id_);
    }
    return SubscriptionHandle();
  }

  // Removes the subscription of a live handle of this registry. On a thread
  // other than the dispatching one, returns only once the callback is not
  // running and will not run again. On the dispatching thread (inside a
  // callback), and under SLUICE_FREESTANDING from a context that preempted a
  // batch, it never waits: a callable that is not running is destroyed at
  // once; the running one is not called again, is destroyed at the end of
  // the batch, and the result says kRemovedWhileRunning.
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle,
                                const DispatchEpoch& epoch) noexcept {
    if (!handle.IsValid() || handle.bus_id_ != id_ || handle.type_index_ >= kTypeCount ||
        handle.slot_ >= kSlotsPerType) {
      return UnsubscribeResult(UnsubscribeStatus::kNotSubscribed);
    }
    TypeTable& table = tables_[handle.type_index_];
    Slot& slot = table.slots[handle.slot_];
    Position expected = Pack(handle.generation_, kActive);
    if (!slot.state.compare_exchange_strong(expected, Pack(handle.generation_, kRetiring),
                                            std::memory_order_acquire, std::memory_order_relaxed)) {
      return UnsubscribeResult(UnsubscribeStatus::kNotSubscribed);  // stale or already unsubscribed
    }
    // SYNC POINT WRITE (D): unpublish before asking whether a batch runs.
    table.active.fetch_and(static_cast<Mask>(~BitOf(handle.slot_)), std::memory_order_seq_cst);
    // Bare metal: keeps the check of `running_` below the mask update.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (epoch.WaitForReaders() ||
        running_.load(std::memory_order_relaxed) != KeyOf(handle.type_index_, handle.slot_)) {
      Free(slot, handle.generation_);
      return UnsubscribeResult(UnsubscribeStatus::kRemoved);
    }
    // The callable is running on the dispatching thread (this thread, or the
    // context this interrupt preempted): destroy it when the batch ends.
    slot.state.store(Pack(handle.generation_, kDeferred), std::memory_order_relaxed);
    deferred_pending_.store(true, std::memory_order_relaxed);
    return UnsubscribeResult(UnsubscribeStatus::kRemovedWhileRunning);
  }

  // Consumer, inside the dispatch epoch. Calls every active subscriber of the
  // envelope's type, in slot order. A subscriber that throws is reported via
  // `on_error(what)` and the remaining subscribers still run.
  template <typename OnError>
  SLUICE_ALWAYS_INLINE void Dispatch(const Envelope& envelope, OnError&& on_error) {
    const std::size_t type = envelope.payload.index();
    // A valueless payload is refused by Publish; never index past the table.
    if (type >= kTypeCount) return;
    // SYNC POINT READ (C)/(D): see Subscribe() and Unsubscribe().
    TypeTable& table = tables_[type];
    DispatchFrom(envelope, type, table, table.active.load(std::memory_order_seq_cst), on_error);
  }

#if !SLUICE_FREESTANDING
  // A run of published envelopes `stride` bytes apart from `first`, in the
  // bytes of one array of slots (Ring::RunBytes): the i-th is at
  // first + i * stride.
  struct EnvelopeRun {
    const unsigned char* first;
    std::size_t stride;
    const Envelope& operator[](std::uint32_t i) const noexcept {
      return *std::launder(reinterpret_cast<const Envelope*>(first + i * stride));
    }
  };

  // Consumer, inside the dispatch epoch: Dispatch for each of `count`
  // envelopes (at least one) of one alternative, in order, with the same
  // outcome. When the type has one subscriber, the run goes to it in one
  // call (InvokeRun: the table is read once, the callable is called in a
  // loop); the loop ends early when the type's mask changes (a callback, or
  // another thread, subscribed or unsubscribed), and the rest of the run,
  // from the subscribers after this one for the message it stopped after,
  // goes the way Dispatch goes. Several subscribers: Dispatch, message by
  // message, so each message reaches them all before the next is seen.
  // `on_error(envelope, what)`.
  template <typename OnError>
  void DispatchRun(const EnvelopeRun& envelopes, std::uint32_t count, OnError&& on_error) {
    const std::size_t type = envelopes[0].payload.index();
    if (type >= kTypeCount) return;  // valueless: refused by Publish
    TypeTable& table = tables_[type];
    // SYNC POINT READ (C)/(D): see Subscribe() and Unsubscribe().
    const Mask mask = table.active.load(std::memory_order_seq_cst);
    std::uint32_t next = 0;
    if (mask != 0 && (mask & static_cast<Mask>(mask - 1)) == 0) {
      const unsigned index = LowestSetBit(mask);
      Slot& slot = table.slots[index];
      Announce(KeyOf(type, index));
      std::uint32_t calling = 0;  // the message being handed over (a throw's)
#if SLUICE_HAS_EXCEPTIONS
      try {
        next = slot.invoke_run(slot.storage, envelopes.first, envelopes.stride, count, table.active,
                               mask, calling);
      } catch (const std::exception& error) {
        Announce(kNothingRunning);  // it has returned
        on_error(envelopes[calling], error.what());
        next = calling + 1;
      } catch (...) {
        Announce(kNothingRunning);
        on_error(envelopes[calling], "non-standard exception");
        next = calling + 1;
      }
#else
      next = slot.invoke_run(slot.storage, envelopes.first, envelopes.stride, count, table.active,
                             mask, calling);
#endif
      // The message the loop stopped after: the subscribers after this one
      // (which Dispatch's re-read would have found).
      if (next < count || mask != table.active.load(std::memory_order_seq_cst)) {
        const Envelope& last = envelopes[next - 1];
        DispatchFrom(last, type, table,
                     table.active.load(std::memory_order_seq_cst) &
                         static_cast<Mask>(~Mask{0} << index << 1),
                     [&](const char* what) { on_error(last, what); });
      }
    } else if (mask == 0) {
      // No subscriber, and no callback runs that could add one; another
      // thread's Subscribe may be seen or not, as it may for any message.
      return;
    }
    for (; next < count; ++next) {
      const Envelope& envelope = envelopes[next];
      Dispatch(envelope, [&](const char* what) { on_error(envelope, what); });
    }
  }
#endif

  // Consumer, at the end of a batch: nothing runs any more, and callables
  // unsubscribed from inside callbacks are destroyed. Cheap when there are
  // none.
  void ReclaimDeferred() noexcept {
    Announce(kNothingRunning);
    if (!deferred_pending_.load(std::memory_order_relaxed)) return;
    deferred_pending_.store(false, std::memory_order_relaxed);
    for (TypeTable& table : tables_) {
      for (Slot& slot : table.slots) {
        const Position state = slot.state.load(std::memory_order_relaxed);
        if (PhaseOf(state) == kDeferred) Free(slot, GenerationOf(state));
      }
    }
  }

  // Consumer: whether alternative `type` (< kTypeCount) has one subscriber
  // or none now (a run of it is taken only then). Relaxed: a hint for the
  // run's length; DispatchRun reads the mask it dispatches by (C).
  bool HasAtMostOneSubscriber(std::size_t type) const noexcept {
    if (type >= kTypeCount) return true;
    const Mask mask = tables_[type].active.load(std::memory_order_relaxed);
    return (mask & static_cast<Mask>(mask - 1)) == 0;
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
  friend struct TestAccess;

  static constexpr Position kFree = 0;
  static constexpr Position kClaimed = 1;
  static constexpr Position kActive = 2;
  static constexpr Position kRetiring = 3;
  static constexpr Position kDeferred = 4;
  static constexpr Position kRetired = 5;  // generation exhausted; never reused
  static constexpr unsigned kPhaseBits = 3;
  static constexpr Position kLastGeneration = ~Position{0} >> kPhaseBits;
  static constexpr std::uint32_t kNothingRunning = 0;

  static constexpr Position Pack(Position generation, Position phase) noexcept {
    return static_cast<Position>(generation << kPhaseBits) | phase;
  }
  static constexpr Position PhaseOf(Position state) noexcept {
    return state & ((Position{1} << kPhaseBits) - 1);
  }
  static constexpr Position GenerationOf(Position state) noexcept { return state >> kPhaseBits; }
  // Names one callable of the table for `running_`; never kNothingRunning.
  static constexpr std::uint32_t KeyOf(std::size_t type, std::size_t index) noexcept {
    return static_cast<std::uint32_t>(type * 64 + index + 1);
  }
  // Consumer: names the callable it is about to call (or kNothingRunning).
  // Hosted, `running_` is read only on the consumer thread, by an
  // Unsubscribe inside a callback, so it is stored only when it changes and
  // cleared at the end of the batch: between two calls of one subscriber it
  // still names it, which no reader can see. Bare metal, an interrupt reads
  // it between any two instructions: stored for every call, cleared after
  // each message.
  void Announce(std::uint32_t key) noexcept {
#if SLUICE_FREESTANDING
    running_.store(key, std::memory_order_relaxed);
#else
    if (announced_ == key) return;
    announced_ = key;
    running_.store(key, std::memory_order_relaxed);
#endif
  }

  static constexpr Mask BitOf(std::size_t index) noexcept {
    return static_cast<Mask>(Mask{1} << index);
  }

  struct Slot {
    std::atomic<Position> state{0};
    void (*invoke)(void* storage, const Envelope& envelope) = nullptr;
#if !SLUICE_FREESTANDING
    std::uint32_t (*invoke_run)(void* storage, const unsigned char* first, std::size_t stride,
                                std::uint32_t count, const std::atomic<Mask>& active, Mask mask,
                                std::uint32_t& calling) = nullptr;
#endif
    void (*destroy)(void* storage) noexcept = nullptr;
    alignas(std::max_align_t) unsigned char storage[kCallableBytes];
  };

  struct alignas(kCacheLineSize) TypeTable {
    std::atomic<Mask> active{0};
    Slot slots[kSlotsPerType];
  };

  // Consumer, inside the dispatch epoch: calls the subscribers of `type`
  // (its `table`) in `pending` (a read of its mask) and those after them that the mask
  // shows after each call, in slot order.
  template <typename OnError>
  SLUICE_ALWAYS_INLINE void DispatchFrom(const Envelope& envelope, std::size_t type,
                                         TypeTable& table, Mask pending, OnError&& on_error) {
    while (pending != 0) {
      const unsigned index = LowestSetBit(pending);
      Slot& slot = table.slots[index];
      Announce(KeyOf(type, index));
#if SLUICE_FREESTANDING
      // See the file comment: re-check after announcing the call.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if ((table.active.load(std::memory_order_seq_cst) & BitOf(index)) == 0) {
        pending = table.active.load(std::memory_order_seq_cst) &
                  static_cast<Mask>(~Mask{0} << index << 1);
        continue;
      }
#endif
#if SLUICE_HAS_EXCEPTIONS
      try {
        slot.invoke(slot.storage, envelope);
      } catch (const std::exception& error) {
        Announce(kNothingRunning);  // it has returned
        on_error(error.what());
      } catch (...) {
        Announce(kNothingRunning);
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
#if SLUICE_FREESTANDING
    Announce(kNothingRunning);
#endif
  }

  template <typename Stored, typename T, std::size_t kType>
  SLUICE_ALWAYS_INLINE static void Call(Stored& callback, const Envelope& envelope) {
    // Called through the table of the envelope's own alternative (Dispatch
    // indexes it by the payload's index; a run holds one alternative only).
    SLUICE_ASSUME(envelope.payload.index() == kType);
    const T& message = *std::get_if<kType>(&envelope.payload);
    if constexpr (std::is_invocable_v<Stored&, const T&, const MessageHeader&>) {
      callback(message, envelope.header);
    } else if constexpr (std::is_invocable_v<Stored&, const T&>) {
      callback(message);
    } else {
      callback(envelope);
    }
  }

  template <typename Stored, typename T, std::size_t kType>
  static void Invoke(void* storage, const Envelope& envelope) {
    Call<Stored, T, kType>(*std::launder(reinterpret_cast<Stored*>(storage)), envelope);
  }

#if !SLUICE_FREESTANDING
  // The callable on the `count` envelopes `stride` bytes apart from
  // `first` (an EnvelopeRun), all of alternative kType, while the type's
  // mask still reads `mask` (this one its only subscriber): how many it was
  // called for. `calling` names the message being handed over when a call
  // throws, for the throw's report: set on the way out of the throw, not
  // stored for every message. SYNC POINT READ (C)/(D) after each call, as
  // Dispatch's re-read.
  template <typename Stored, typename T, std::size_t kType>
  static std::uint32_t InvokeRun(void* storage, const unsigned char* first, std::size_t stride,
                                 std::uint32_t count, const std::atomic<Mask>& active, Mask mask,
                                 std::uint32_t& calling) {
    Stored& callback = *std::launder(reinterpret_cast<Stored*>(storage));
    // Counted down: one test a message for the run's end, and the index of
    // the message being called (count - left) worked out only when needed.
    const unsigned char* at = first;
    std::uint32_t left = count;
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      for (;;) {
        Call<Stored, T, kType>(callback, *std::launder(reinterpret_cast<const Envelope*>(at)));
        if (--left == 0 || active.load(std::memory_order_seq_cst) != mask) break;
        at += stride;
      }
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      calling = count - left;
      throw;  // to DispatchRun, which reports it
    }
#else
    (void)calling;
#endif
    return count - left;
  }
#endif

  template <typename Stored>
  static void Destroy(void* storage) noexcept {
    std::launder(reinterpret_cast<Stored*>(storage))->~Stored();
  }

  static void Free(Slot& slot, Position generation) noexcept {
    slot.destroy(slot.storage);
    // SYNC POINT WRITE (E): the destruction above.
    slot.state.store(
        generation == kLastGeneration ? Pack(generation, kRetired) : Pack(generation + 1, kFree),
        std::memory_order_release);
  }

  TypeTable tables_[kTypeCount];
  const Position id_;
  // The callable the consumer is calling (KeyOf), or kNothingRunning. Written
  // by the consumer; read by Unsubscribe on the consumer thread or, bare
  // metal, in an interrupt that preempted it: relaxed suffices for both.
  std::atomic<std::uint32_t> running_{kNothingRunning};
#if !SLUICE_FREESTANDING
  // Hosted: the consumer's copy of what it last stored in `running_`.
  std::uint32_t announced_ = kNothingRunning;
#endif
  // Set with a deferral, cleared by the consumer. Hosted: both on the
  // consumer thread. Bare metal: a context that preempted the consumer runs
  // to completion before the consumer reads it.
  std::atomic<bool> deferred_pending_{false};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
