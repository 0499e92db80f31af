// The bounded ring: slots that hold envelopes inline, a producer cursor that
// claims positions, and a consumer cursor that releases them.
//
// Position scheme. Every message gets a position (Position: 64 bits, or 32
// with SLUICE_ATOMIC_BITS=32) from a counter that only grows, modulo 2^bits;
// slot = position & (capacity - 1). A slot's `sequence` holds
// position + 1 once the message at `position` is readable, and an older value
// (position + 1 - k * capacity) before that. Producers decide whether a slot
// is free from the consumer's released position, not from the slot, so a
// claim is refused only when the queue really is at the caller's limit.
//
// Synchronisation, each release named with its acquire:
//  (A) slot data, producer -> consumer: Publish() stores `sequence` with
//      release after constructing the envelope; TryFront() loads it with
//      acquire before reading the envelope.
//  (B) slot reuse, consumer -> producer: PopFront() stores `released` with
//      release after destroying the envelope below it, for every message, so
//      admission counts exactly the messages not yet destroyed; TryClaim()
//      loads it with acquire before its caller constructs into a slot of the
//      next lap. Producers read it only when their cached copy says the
//      queue may be near their limit, so the consumer's line stays its own.
//      The producers' shared cache of it (MPSC) is stored with release and
//      loaded with acquire, so a producer that uses another producer's cached
//      value still inherits (B) through that producer.
//  The claim itself (`tail_`) carries no data and is relaxed.
//  (H) depth, for observers: every position below `released` was claimed
//      (the claim is sequenced before the slot's release store, which the
//      consumer acquired before releasing), so Depth() loads `released` with
//      acquire and then `tail`, and never sees the tail behind it.
//
// Wrap-around. Positions are compared only as differences, which stay right
// across the wrap. With 32-bit positions one case is not covered: a producer
// preempted between loading the tail (or `released`) and its claiming CAS
// (or its refresh of the shared cache) while other producers claim exactly a
// multiple of 2^32 positions can succeed on a recycled value (ABA) and admit
// past the limit. That takes 4,294,967,296 publishes during one preemption
// of one producer; 64-bit positions would need 2^64.
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
#include "sluice/detail/slot_storage.hpp"
#include "sluice/producer_model.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Where a bus starts counting positions (and so message ids). A test seam:
// tests start near the wrap of Position to exercise it.
struct FirstPosition {
  Position value = 0;
};

template <typename Envelope, std::size_t kCapacity, ProducerModel kModel, SlotStorage kStorage>
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
  // How far Close() moves the tail: half the position range, so every later
  // claim computes a fill far beyond the capacity (and any limit) and is
  // refused, while the true depth is still recoverable (Depth()).
  static constexpr Position kClosedJump = Position{1} << (SLUICE_ATOMIC_BITS - 1);

  struct Slot {
    std::atomic<Position> sequence{0};
    alignas(Envelope) unsigned char storage[sizeof(Envelope)];
  };

  // `first_position` is where counting starts (0 normally). Tests start near
  // the wrap of Position (2^64, or 2^32 with 32-bit positions) to prove that arithmetic wraps
  // cleanly.
  explicit Ring(Position first_position = 0) noexcept {
    for (Position i = 0; i < kCapacity; ++i) {
      const Position position = first_position + i;
      // The value of the lap before `position`: never position + 1.
      slots_[position & kIndexMask].sequence.store(position + 1 - kCapacity,
                                                   std::memory_order_relaxed);
    }
    producer_.tail.store(first_position, std::memory_order_relaxed);
    producer_.consumer_position_cache.store(first_position, std::memory_order_relaxed);
    consumer_.position = first_position;
    consumer_.released.store(first_position, std::memory_order_relaxed);
  }

  // Destroys every envelope still queued. No thread may use the ring now.
  ~Ring() {
    for (Envelope* envelope = TryFront(); envelope != nullptr; envelope = TryFront()) {
      PopFront();
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
    if constexpr (kMultiProducer) {
      return TryClaimShared(limit, claimed);
    } else {
      return TryClaimExclusive(limit, claimed);
    }
  }

  // Producer: claims up to `wanted` consecutive slots with one claim (one
  // CAS in MPSC), as many as fit below `limit`; returns how many (0 when the
  // queue is at the limit) and the first in *first. Each claimed slot must be
  // published, in any order; the consumer takes them in position order.
  Position TryClaimUpTo(Position limit, Position wanted, Position* first) noexcept {
    if (wanted == 0) return 0;
    if constexpr (kMultiProducer) {
      Position position = producer_.tail.load(std::memory_order_relaxed);
      // SYNC POINT READ (B), through another producer's refresh.
      Position released = producer_.consumer_position_cache.load(std::memory_order_acquire);
      for (;;) {
        Position fill = position - released;
        if (fill >= limit || fill > kCapacity) {
          // SYNC POINT READ (B): see PopFront().
          released = consumer_.released.load(std::memory_order_acquire);
          producer_.consumer_position_cache.store(released, std::memory_order_release);
          fill = position - released;
          if (fill > kCapacity || fill >= limit) {
            // As TryClaimShared: refuse only if the tail held still.
            const Position tail = producer_.tail.load(std::memory_order_relaxed);
            if (tail == position) return 0;
            position = tail;
            continue;
          }
        }
        const Position room = limit - fill;
        const Position count = wanted < room ? wanted : room;
        if (producer_.tail.compare_exchange_weak(
                position, position + count, std::memory_order_relaxed, std::memory_order_relaxed)) {
          *first = position;
          return count;
        }
        // Another producer claimed; the CAS loaded the new tail.
      }
    } else {
      const Position position = producer_.tail.load(std::memory_order_relaxed);
      Position released = producer_.consumer_position_cache.load(std::memory_order_relaxed);
      if (position - released + wanted > limit) {
        // SYNC POINT READ (B): see PopFront().
        released = consumer_.released.load(std::memory_order_acquire);
        producer_.consumer_position_cache.store(released, std::memory_order_relaxed);
      }
      const Position fill = position - released;
      if (fill >= limit) return 0;
      const Position room = limit - fill;
      *first = position;
      return wanted < room ? wanted : room;
    }
  }

  void* Storage(Position position) noexcept { return slots_[position & kIndexMask].storage; }

  // Producer: makes the envelope at `position` visible to the consumer.
  void Publish(Position position) noexcept {
    if constexpr (!kMultiProducer) {
      // The claim, for observers (H): before the slot, like a shared claim.
      producer_.tail.store(position + 1, std::memory_order_relaxed);
    }
    // SYNC POINT WRITE (A): the envelope constructed before this store.
    slots_[position & kIndexMask].sequence.store(position + 1, std::memory_order_release);
  }

  // Consumer. The next envelope in position order, or nullptr when the
  // producer that claimed it has not published it yet. Wait-free.
  Envelope* TryFront() noexcept {
    Slot& slot = slots_[consumer_.position & kIndexMask];
    // SYNC POINT READ (A): see Publish().
    if (slot.sequence.load(std::memory_order_acquire) != consumer_.position + 1) {
      return nullptr;
    }
    return std::launder(reinterpret_cast<Envelope*>(slot.storage));
  }

  // Consumer: destroys the front envelope, moves past it and hands its slot
  // back to the producers.
  void PopFront() noexcept {
    Slot& slot = slots_[consumer_.position & kIndexMask];
    std::launder(reinterpret_cast<Envelope*>(slot.storage))->~Envelope();
    ++consumer_.position;
    // SYNC POINT WRITE (B): the envelope destroyed above.
    consumer_.released.store(consumer_.position, std::memory_order_release);
  }

  // Closes the ring to new claims and returns the tail it closed at: every
  // position below it was claimed before (and will be published), none at or
  // above it is ever claimed. MPSC: any thread, once (the caller makes sure):
  // the jump is one RMW on the tail, so the claims' CAS total order puts
  // each claim before it (below the returned tail) or after it (refused).
  // SPSC: the producer thread, or while it does not publish (the producer
  // stores the tail with plain stores).
  Position Close() noexcept {
    if constexpr (kMultiProducer) {
      return producer_.tail.fetch_add(kClosedJump, std::memory_order_relaxed);
    } else {
      const Position tail = producer_.tail.load(std::memory_order_relaxed);
      producer_.tail.store(tail + kClosedJump, std::memory_order_relaxed);
      return tail;
    }
  }

  // The consumer's position, for observers (Drain): every message below it
  // has been destroyed. SYNC POINT READ (B).
  Position Released() const noexcept { return consumer_.released.load(std::memory_order_acquire); }

  // Messages claimed and not yet destroyed, exactly, at one instant during
  // the call (the read of `released`): the tail is read on both sides of it
  // and the pair is retried until the tail held still. Lock-free: a retry
  // means a producer claimed meanwhile. Any thread or interrupt handler.
  Position Depth() const noexcept {
    Position tail = producer_.tail.load(std::memory_order_relaxed);
    for (;;) {
      // SYNC POINT READ (H): see the file comment.
      const Position released = consumer_.released.load(std::memory_order_acquire);
      const Position tail_after = producer_.tail.load(std::memory_order_relaxed);
      // (H) gives tail_after >= released; equal tails bound the moment. A
      // closed ring's tail is kClosedJump ahead of its last claim.
      if (tail_after == tail) {
        const Position depth = tail - released;
        return depth > kCapacity ? depth - kClosedJump : depth;
      }
      tail = tail_after;
    }
  }

 private:
  bool TryClaimShared(Position limit, Position* claimed) noexcept {
    Position position = producer_.tail.load(std::memory_order_relaxed);
    // SYNC POINT READ (B), through another producer's refresh.
    Position released = producer_.consumer_position_cache.load(std::memory_order_acquire);
    for (;;) {
      // Unsigned: a stale `position` behind `released` yields a huge fill and
      // takes the slow path, which re-reads the tail.
      if (position - released >= limit) {
        // The cache says the queue may be at the limit: ask the consumer.
        // SYNC POINT READ (B): see PopFront().
        released = consumer_.released.load(std::memory_order_acquire);
        producer_.consumer_position_cache.store(released, std::memory_order_release);
        if (position - released > kCapacity || position - released >= limit) {
          // Refuse only if the tail has not moved since `released` was read:
          // then the queue held position - released >= limit messages at
          // that moment, so the refusal is real and not a lost race.
          const Position tail = producer_.tail.load(std::memory_order_relaxed);
          if (tail == position) return false;
          position = tail;
          continue;
        }
      }
      if (producer_.tail.compare_exchange_weak(position, position + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed)) {
        *claimed = position;
        return true;
      }
      // Another producer claimed `position`; the CAS loaded the new tail.
    }
  }

  bool TryClaimExclusive(Position limit, Position* claimed) noexcept {
    const Position position = producer_.tail.load(std::memory_order_relaxed);
    Position released = producer_.consumer_position_cache.load(std::memory_order_relaxed);
    if (position - released >= limit) {
      // SYNC POINT READ (B): see PopFront().
      released = consumer_.released.load(std::memory_order_acquire);
      producer_.consumer_position_cache.store(released, std::memory_order_relaxed);
      if (position - released >= limit) return false;
    }
    *claimed = position;
    return true;
  }

  // Written by producers. The consumer never touches this line.
  struct alignas(kCacheLineSize) ProducerCursor {
    std::atomic<Position> tail{0};
    // The last consumer position a producer read: lets admission skip the
    // consumer's line until the queue may be near the caller's limit.
    std::atomic<Position> consumer_position_cache{0};
  };
  // Written by the consumer; producers read `released` only on refresh.
  struct alignas(kCacheLineSize) ConsumerCursor {
    Position position = 0;  // consumer-private
    std::atomic<Position> released{0};
  };
  static_assert(sizeof(ProducerCursor) == kCacheLineSize &&
                    sizeof(ConsumerCursor) == kCacheLineSize,
                "producer and consumer cursors must each fill one cache line");

  ProducerCursor producer_;
  ConsumerCursor consumer_;
  SlotArray<Slot, kCapacity, kStorage> slots_;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
