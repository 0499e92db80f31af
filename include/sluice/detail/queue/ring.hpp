// The bounded ring: slots that hold envelopes inline, and a claim cursor
// (detail/queue/claim_cursor.hpp) whose positions producers claim under a limit
// and the consumer releases.
//
// Every message gets a position; slot = position & (capacity - 1). With
// several producers, a slot's `sequence` holds position + 1 once the message
// at `position` is readable, and an older value (position + 1 - k *
// capacity) before that. With one producer (the SPSC index protocol), the
// claim cursor's tail says it for every position at once: the producer
// publishes in position order, so the consumer reads the tail once and then
// takes every message below it without looking at the slots' sequences
// (which that ring does not write). Producers
// decide whether a slot is free from the consumer's released position (the
// cursor), not from the slot, so a claim is refused only when the queue
// really is at the caller's limit.
//
// Synchronisation, each release named with its acquire:
//  (A) slot data, producer -> consumer: Publish() stores `sequence` (one
//      producer: the tail) with release after constructing the envelope;
//      TryFront() and TryAt() load it with acquire before reading the
//      envelope (one producer: when the consumer's copy of the tail does
//      not already cover the position, itself taken by such a load).
//  (B) slot reuse, consumer -> producer: PopFront() destroys the envelope,
//      then releases its position (the cursor's release store); TryClaim()
//      acquires it before its caller constructs into a slot of the next lap.
//  (H) depth, for observers: see detail/queue/claim_cursor.hpp.
//
// A producer stalled between TryClaim() and Publish() holds the consumer at
// its position: later messages stay queued (not lost, not reordered) until it
// publishes, and producers are refused once the queue fills behind it.
#pragma once

#include <atomic>
#include <cstddef>
#include <new>
#include <type_traits>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/bits.hpp"
#include "sluice/detail/queue/claim_cursor.hpp"
#include "sluice/detail/queue/slot_storage.hpp"
#include "sluice/producer_model.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Where a bus starts counting positions (and so message ids). A test seam:
// tests start near the wrap of Position to exercise it.
struct FirstPosition {
  Position value = 0;
};

template <typename Envelope, std::size_t kCapacity, ProducerModel kModel, SlotStorage kStorage,
          CursorHome kHome = CursorHome::kTogether>
class Ring {
  static_assert(kCapacity >= 2 && IsPowerOfTwo(kCapacity),
                "Sluice: the bus capacity must be a power of two and at least 2");
  static_assert(kCapacity <= (Position{1} << (SLUICE_ATOMIC_BITS - 2)),
                "Sluice: the capacity must leave the position arithmetic room to wrap");
  static_assert(std::is_nothrow_destructible_v<Envelope>,
                "Sluice: payload types must have non-throwing destructors");

 public:
  static constexpr Position kSize = kCapacity;
  static constexpr Position kIndexMask = kCapacity - 1;
  static constexpr bool kMultiProducer = kModel == ProducerModel::kMulti;
  static constexpr Position kClosedJump = ClaimCursor<kCapacity, kModel>::kClosedJump;

  static constexpr bool kApart = kHome == CursorHome::kApart;

  struct Slot {
    std::atomic<Position> sequence{0};
    alignas(Envelope) unsigned char storage[sizeof(Envelope)];
  };

  // kApart: what the ring's producers write, made by the consumer where
  // they map it (the producers' line and the slots); the released position
  // and the consumer's own positions live elsewhere (CursorHome).
  struct Shared {
    explicit Shared(Position first_position) noexcept : line(first_position) {
      InitialSequences(slots, first_position);
    }
    ClaimLine line;
    SlotArray<Slot, kCapacity, kStorage> slots;
  };

  // kTogether. `first_position` is where counting starts (0 normally). Tests
  // start near the wrap of Position (2^64, or 2^32 with 32-bit positions) to
  // prove that arithmetic wraps cleanly.
  template <CursorHome kH = kHome, std::enable_if_t<kH == CursorHome::kTogether, int> = 0>
  explicit Ring(Position first_position = 0) noexcept : cursor_(first_position) {
    InitialSequences(slots_, first_position);
  }
  // kApart: a view of the ring `shared` whose released position is at
  // `released` (see ClaimCursor's kApart constructor).
  template <CursorHome kH = kHome, std::enable_if_t<kH == CursorHome::kApart, int> = 0>
  Ring(Shared* shared, std::atomic<Position>* released) noexcept
      : cursor_(&shared->line, released), slots_(&shared->slots[0]) {}

  // kTogether: destroys every envelope still queued (none to destroy when
  // the envelope's destructor does nothing). No thread may use the ring now.
  // kApart: a view; what its slots hold is the consumer's to account for.
  ~Ring() {
    if constexpr (!kApart && !std::is_trivially_destructible_v<Envelope>) {
      for (Envelope* envelope = TryFront(); envelope != nullptr; envelope = TryFront()) {
        PopFront();
      }
    }
  }

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Producer. Claims the next position if fewer than `limit` messages are
  // queued (limit <= capacity). On success the caller must construct an
  // envelope at Storage(*claimed) and then call Publish(*claimed).
  // MPSC: lock-free (a failed CAS means another producer claimed).
  // SPSC: wait-free (at most one re-read of the consumer position).
  bool TryClaim(Position limit, Position* claimed) noexcept {
    return cursor_.TryClaim(limit, claimed);
  }

  // Producer: claims exactly `count` consecutive slots (1 <= count <= limit),
  // or none; see ClaimCursor::TryClaimExactly.
  bool TryClaimExactly(Position limit, Position count, Position* first) noexcept {
    return cursor_.TryClaimExactly(limit, count, first);
  }

  // Producer: claims up to `wanted` consecutive slots with one claim (one
  // CAS in MPSC), as many as fit below `limit`; returns how many (0 when the
  // queue is at the limit) and the first in *first. Each claimed slot must be
  // published, in any order; the consumer takes them in position order.
  Position TryClaimUpTo(Position limit, Position wanted, Position* first) noexcept {
    return cursor_.TryClaimUpTo(limit, wanted, first);
  }

  void* Storage(Position position) noexcept { return slots_[position & kIndexMask].storage; }

  // Producer: makes the envelope at `position` visible to the consumer.
  SLUICE_ALWAYS_INLINE void Publish(Position position) noexcept {
    if constexpr (kMultiProducer) {
      // SYNC POINT WRITE (A): the envelope constructed before this store.
      slots_[position & kIndexMask].sequence.store(position + 1, std::memory_order_release);
    } else {
      // SYNC POINT WRITE (A), one producer: the tail (the claim, for
      // observers (H), and the consumer's index), after the envelope.
      cursor_.Publish(position);
    }
  }

  // Consumer. The next envelope in position order, or nullptr when the
  // producer that claimed it has not published it yet. Wait-free.
  SLUICE_ALWAYS_INLINE Envelope* TryFront() noexcept {
    const Position position = cursor_.ConsumerPosition();
    if constexpr (kMultiProducer) {
      Slot& slot = slots_[position & kIndexMask];
      // SYNC POINT READ (A): see Publish().
      if (slot.sequence.load(std::memory_order_acquire) != position + 1) return nullptr;
      return std::launder(reinterpret_cast<Envelope*>(slot.storage));
    } else {
      // SYNC POINT READ (A), one producer: ClaimCursor::IsFrontPublished.
      if (!cursor_.IsFrontPublished()) return nullptr;
      return std::launder(reinterpret_cast<Envelope*>(slots_[position & kIndexMask].storage));
    }
  }

  // Consumer. The envelope at `position`, from ConsumerPosition() to less
  // than kCapacity past it, or nullptr when it is not yet published: what
  // TryFront would return once those before it are popped. A slot that far
  // on holds that position's message or one already released (a lap
  // behind), never a later lap's. Wait-free.
  SLUICE_ALWAYS_INLINE Envelope* TryAt(Position position) noexcept {
    if constexpr (kMultiProducer) {
      Slot& slot = slots_[position & kIndexMask];
      // SYNC POINT READ (A): see Publish().
      if (slot.sequence.load(std::memory_order_acquire) != position + 1) return nullptr;
      return std::launder(reinterpret_cast<Envelope*>(slot.storage));
    } else {
      // SYNC POINT READ (A), one producer: ClaimCursor::IsPublished.
      if (!cursor_.IsPublished(position)) return nullptr;
      return std::launder(reinterpret_cast<Envelope*>(slots_[position & kIndexMask].storage));
    }
  }

  // Consumer, holding the front (TryFront returned it): how many positions
  // from the front are known to be published without reading anything a
  // producer writes. One producer: what the consumer's copy of the tail
  // covers (taken by an acquire load of the tail, SYNC POINT READ (A));
  // several: the front alone. From 1 to kCapacity.
  SLUICE_ALWAYS_INLINE Position KnownPublished() const noexcept {
    if constexpr (kMultiProducer) {
      return 1;
    } else {
      return cursor_.PublishedCopy() - cursor_.ConsumerPosition();
    }
  }
  // Consumer, walking a run slot by slot (the consumer core's runs): the
  // slot of `position`; the slot after one, within the array (a run ends
  // at its end: SlotsToEnd, at least 1); whether a slot's position is
  // published, SYNC POINT READ (A) as TryAt's, with the slot's sequence
  // (several producers) or the tail; and the envelope in a slot whose
  // position is published (looked at only then). The run's bytes
  // (RunBytes: the first envelope's, then one kSlotStride apart) are how
  // the subscription table reads a run of published envelopes.
  using RunSlot = Slot*;
  static constexpr std::size_t kSlotStride = sizeof(Slot);
  static constexpr Position SlotsToEnd(Position position) noexcept {
    return kCapacity - (position & kIndexMask);
  }
  SLUICE_ALWAYS_INLINE RunSlot RunSlotAt(Position position) noexcept {
    return &slots_[position & kIndexMask];
  }
  SLUICE_ALWAYS_INLINE static RunSlot NextRunSlot(RunSlot slot) noexcept { return slot + 1; }
  SLUICE_ALWAYS_INLINE bool IsPublishedIn(RunSlot slot, Position position) noexcept {
    if constexpr (kMultiProducer) {
      return slot->sequence.load(std::memory_order_acquire) == position + 1;
    } else {
      (void)slot;
      return cursor_.IsPublished(position);
    }
  }
  SLUICE_ALWAYS_INLINE static Envelope* EnvelopeIn(RunSlot slot) noexcept {
    return std::launder(reinterpret_cast<Envelope*>(slot->storage));
  }
  static const unsigned char* RunBytes(RunSlot slot) noexcept {
    static_assert(std::is_standard_layout_v<Slot>,
                  "Sluice: a run's envelopes are found by their offset in the slots");
    return reinterpret_cast<const unsigned char*>(slot) + offsetof(Slot, storage);
  }

  // Consumer: whether a producer has claimed the position at the front and
  // not yet published it (TryFront() returned nullptr with a claim taken).
  // The claim carries no data: relaxed.
  bool HasUnpublishedClaim() const noexcept {
    return cursor_.ClaimedTail() != cursor_.ConsumerPosition();
  }

  // Consumer: destroys the front envelope, moves past it and hands its slot
  // back to the producers (SYNC POINT WRITE (B), in the cursor).
  SLUICE_ALWAYS_INLINE void PopFront() noexcept {
    Slot& slot = slots_[cursor_.ConsumerPosition() & kIndexMask];
    std::launder(reinterpret_cast<Envelope*>(slot.storage))->~Envelope();
    cursor_.Release();
  }

  // Consumer: PopFront for the `count` envelopes from the front (each one
  // TryFront, TryAt or a run's EnvelopeIn returned), with one release for
  // them all.
  SLUICE_ALWAYS_INLINE void PopFronts(Position count) noexcept {
    if constexpr (!std::is_trivially_destructible_v<Envelope>) {
      const Position first = cursor_.ConsumerPosition();
      for (Position i = 0; i < count; ++i) {
        Slot& slot = slots_[(first + i) & kIndexMask];
        std::launder(reinterpret_cast<Envelope*>(slot.storage))->~Envelope();
      }
    }
    cursor_.ReleaseRun(count);
  }

  // Consumer, for a ring no producer can write any more (shared memory,
  // its producer process gone): whether a position is claimed at the front
  // and not published, and moving past it without reading its slot (what
  // a dead producer began writing there is never looked at).
  bool HasUnpublishedFront() noexcept {
    const Position position = cursor_.ConsumerPosition();
    return cursor_.ClaimedTail() != position && !IsPublished(position);
  }
  void SkipFront() noexcept { cursor_.Skip(); }
  // The claim tail: the next position a producer will claim. Relaxed: it
  // carries no data.
  Position ClaimedTail() const noexcept { return cursor_.ClaimedTail(); }
  // Consumer: the next position to take.
  Position ConsumerPosition() const noexcept { return cursor_.ConsumerPosition(); }
  // Consumer: whether every claimed position has been taken or skipped.
  bool IsDrained() const noexcept { return cursor_.ClaimedTail() == cursor_.ConsumerPosition(); }

  // A consumer taking over from one killed (shared memory): its position
  // is what the killed one released (a release it was inside and had not
  // stored is not made: that message was not yet dispatched); returns it.
  Position TakeOverConsumer() noexcept {
    const Position position = cursor_.Released();
    cursor_.TakeOverConsumer(position);
    return position;
  }

  // Closes the ring to new claims: see ClaimCursor::Close.
  Position Close() noexcept { return cursor_.Close(); }

  // The consumer's position, for observers (Drain): every message below it
  // has been destroyed. SYNC POINT READ (B).
  Position Released() const noexcept { return cursor_.Released(); }

  // Messages claimed and not yet destroyed: see ClaimCursor::Depth.
  Position Depth() const noexcept { return cursor_.Depth(); }

 private:
  // SYNC POINT READ (A): the slot's sequence (several producers), or the
  // tail (one producer: ClaimCursor::IsPublished); see Publish().
  SLUICE_ALWAYS_INLINE bool IsPublished(Position position) noexcept {
    if constexpr (kMultiProducer) {
      return slots_[position & kIndexMask].sequence.load(std::memory_order_acquire) == position + 1;
    } else {
      return cursor_.IsPublished(position);
    }
  }

  // The value of the lap before each position: never position + 1.
  template <typename Slots>
  static void InitialSequences(Slots& slots, Position first_position) noexcept {
    for (Position i = 0; i < kCapacity; ++i) {
      const Position position = first_position + i;
      slots[position & kIndexMask].sequence.store(position + 1 - kCapacity,
                                                  std::memory_order_relaxed);
    }
  }

  friend struct TestAccess;
  ClaimCursor<kCapacity, kModel, kHome> cursor_;
  std::conditional_t<kApart, Slot*, SlotArray<Slot, kCapacity, kStorage>> slots_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
