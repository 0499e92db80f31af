// Claiming positions under a limit: a counter producers claim from (the
// tail) and the consumer's released position. The fill of a queue is
// tail - released; a claim is admitted only while the fill is below the
// caller's limit. The ring (detail/queue/ring.hpp) pairs one cursor with its
// slots; the priority-ordered queue (detail/queue/message_queue.hpp) uses one for
// the fill of the whole bus and one per priority ring.
//
// Positions only grow, modulo 2^bits (Position: 64 bits, or 32 with
// SLUICE_ATOMIC_BITS=32), and are compared only as differences, which stay
// right across the wrap.
//
// Synchronisation, each release named with its acquire:
//  (B) slot reuse, consumer -> producer: Release() stores `released` with
//      release after the consumer destroyed what it releases, for every
//      message, so a claim counts exactly the messages not yet destroyed;
//      TryClaim() loads it with acquire before its caller constructs into a
//      slot of the next lap. Producers read it only when their cached copy
//      says the queue may be near their limit, so the consumer's line stays
//      its own. The producers' shared cache of it (MPSC) is stored with
//      release and loaded with acquire, so a producer that uses another
//      producer's cached value still inherits (B) through that producer.
//  The claim itself (`tail`) carries no data and is relaxed, but for one
//  producer: there the tail is stored only when a message is published
//  (Publish), and the consumer reads it as its index of what it may read
//  (SYNC POINT (A) of detail/queue/ring.hpp, SPSC: a release store, an
//  acquire load).
//  With CursorHome::kApart the same words are where the caller put them
//  (the claims in memory producers write, `released` in memory only the
//  consumer writes, its positions in its own object): the same pairs.
//  (H) depth, for observers: every position below `released` was claimed
//      (the claim is sequenced before the caller's publication, which the
//      consumer acquired before releasing), so Depth() loads `released` with
//      acquire and then `tail`, and never sees the tail behind it.
//
// With 32-bit positions one case is not covered: a producer preempted
// between loading the tail (or `released`) and its claiming CAS (or its
// refresh of the shared cache) while other producers claim exactly a
// multiple of 2^32 positions can succeed on a recycled value (ABA) and admit
// past the limit. That takes 4,294,967,296 publishes during one preemption
// of one producer; 64-bit positions would need 2^64.
#pragma once

#include <atomic>
#include <cstddef>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/producer_model.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Where a cursor's two lines live. kTogether: both inside the cursor (a
// bus). kApart: the producers' line (the claims) and the released
// position each where the caller says, and the consumer's own positions in
// the cursor object (a bus across processes keeps the claims in the lane
// its producer writes, the released position in the header only the
// consumer writes, and its positions in its own process: what a producer
// can write never moves the consumer: sluice/ipc/shm_layout.hpp).
enum class CursorHome { kTogether, kApart };

// The producers' line of a cursor: the claims, and the producers' cache
// of the consumer's released position. Written by producers only.
struct alignas(kCacheLineSize) ClaimLine {
  explicit ClaimLine(Position first_position = 0) noexcept
      : tail(first_position), consumer_position_cache(first_position) {}
  std::atomic<Position> tail;
  // The last consumer position a producer read: lets admission skip the
  // consumer's line until the queue may be near the caller's limit.
  std::atomic<Position> consumer_position_cache;
};
static_assert(sizeof(ClaimLine) == kCacheLineSize, "the producers' line is one cache line");

template <std::size_t kCapacity, ProducerModel kModel, CursorHome kHome = CursorHome::kTogether>
class ClaimCursor {
 public:
  static constexpr bool kMultiProducer = kModel == ProducerModel::kMulti;
  // How far Close() moves the tail: half the position range, so every later
  // claim computes a fill far beyond the capacity (and any limit) and is
  // refused, while the true depth is still recoverable (Depth()).
  static constexpr Position kClosedJump = Position{1} << (SLUICE_ATOMIC_BITS - 1);

  // kTogether: both lines inside the cursor, counting from `first_position`.
  template <CursorHome kH = kHome, std::enable_if_t<kH == CursorHome::kTogether, int> = 0>
  explicit ClaimCursor(Position first_position = 0) noexcept {
    parts_.Producer().tail.store(first_position, std::memory_order_relaxed);
    parts_.Producer().consumer_position_cache.store(first_position, std::memory_order_relaxed);
    parts_.position = first_position;
    parts_.ReleasedWord().store(first_position, std::memory_order_relaxed);
    parts_.published = first_position;
  }
  // kApart: the producers' line at `line` and the released position at
  // `released`, both made already (ClaimLine's constructor, and a store of
  // the first position) and outliving the cursor. A consumer's cursor
  // starts at the released position: every position below it was taken.
  // A producer's never reads its own `position` or `published`.
  template <CursorHome kH = kHome, std::enable_if_t<kH == CursorHome::kApart, int> = 0>
  ClaimCursor(ClaimLine* line, std::atomic<Position>* released) noexcept {
    parts_.line = line;
    parts_.released = released;
    parts_.position = released->load(std::memory_order_relaxed);
    parts_.published = parts_.position;
  }

  ClaimCursor(const ClaimCursor&) = delete;
  ClaimCursor& operator=(const ClaimCursor&) = delete;

  // Producer. Claims the next position if fewer than `limit` positions are
  // claimed and not released (limit <= capacity).
  // MPSC: lock-free (a failed CAS means another producer claimed); the claim
  // is taken at once. SPSC: wait-free (at most one re-read of the consumer
  // position); the claim is taken by Commit().
  bool TryClaim(Position limit, Position* claimed) noexcept {
    if constexpr (kMultiProducer) {
      return TryClaimShared<true>(limit, 1, claimed);
    } else {
      return TryClaimExclusive<true>(limit, 1, claimed);
    }
  }

  // Producer: claims `count` consecutive positions (1 <= count <= limit) if
  // fewer than limit - count + 1 are claimed and not released, else none;
  // the first in *first. As TryClaim otherwise.
  bool TryClaimExactly(Position limit, Position count, Position* first) noexcept {
    if constexpr (kMultiProducer) {
      return TryClaimShared<false>(limit, count, first);
    } else {
      return TryClaimExclusive<false>(limit, count, first);
    }
  }

  // Producer: claims up to `wanted` consecutive positions with one claim (one
  // CAS in MPSC), as many as fit below `limit`; returns how many (0 when the
  // queue is at the limit) and the first in *first.
  Position TryClaimUpTo(Position limit, Position wanted, Position* first) noexcept {
    if (wanted == 0) return 0;
    if constexpr (kMultiProducer) {
      Position position = parts_.Producer().tail.load(std::memory_order_relaxed);
      // SYNC POINT READ (B), through another producer's refresh.
      Position released = parts_.Producer().consumer_position_cache.load(std::memory_order_acquire);
      for (;;) {
        Position fill = position - released;
        // The cache may be stale: unless it already leaves room for all
        // `wanted`, ask the consumer, so that the run is cut short only by
        // the queue's real fill (as a single claim is refused only then).
        if (fill > kCapacity || fill >= limit || wanted > limit - fill) {
          // SYNC POINT READ (B): see Release().
          released = parts_.ReleasedWord().load(std::memory_order_acquire);
          parts_.Producer().consumer_position_cache.store(released, std::memory_order_release);
          fill = position - released;
          if (fill > kCapacity || fill >= limit) {
            // As TryClaimShared: refuse only if the tail held still.
            const Position tail = parts_.Producer().tail.load(std::memory_order_relaxed);
            if (tail == position) return 0;
            position = tail;
            continue;
          }
        }
        const Position room = limit - fill;
        const Position count = wanted < room ? wanted : room;
        if (parts_.Producer().tail.compare_exchange_weak(
                position, position + count, std::memory_order_relaxed, std::memory_order_relaxed)) {
          *first = position;
          return count;
        }
        // Another producer claimed; the CAS loaded the new tail.
      }
    } else {
      const Position position = parts_.Producer().tail.load(std::memory_order_relaxed);
      Position released = parts_.Producer().consumer_position_cache.load(std::memory_order_relaxed);
      if (position - released + wanted > limit) {
        // SYNC POINT READ (B): see Release().
        released = parts_.ReleasedWord().load(std::memory_order_acquire);
        parts_.Producer().consumer_position_cache.store(released, std::memory_order_relaxed);
      }
      const Position fill = position - released;
      if (fill >= limit) return 0;
      const Position room = limit - fill;
      *first = position;
      return wanted < room ? wanted : room;
    }
  }

  // Producer, SPSC ring (detail/queue/ring.hpp): publishes the message at
  // `position`, and so every one before it: the tail is the consumer's
  // index of what it may read (the SPSC index protocol).
  SLUICE_ALWAYS_INLINE void Publish(Position position) noexcept {
    static_assert(!kMultiProducer, "several producers publish through their slots");
    // SYNC POINT WRITE (A), SPSC: the envelopes below position + 1 were
    // constructed before this store (each by the one producer, in order).
    parts_.Producer().tail.store(position + 1, std::memory_order_release);
  }

  // Consumer, SPSC ring: whether the message at the front is published.
  // The consumer's copy of the tail answers; only when it says no is the
  // tail read again, so a consumer behind the producer reads the
  // producer's line once per catch-up, not a sequence word per message.
  SLUICE_ALWAYS_INLINE bool IsFrontPublished() noexcept {
    const Position front = parts_.position;
    if (parts_.published != front) return true;
    // SYNC POINT READ (A), SPSC: see Publish().
    const Position tail = parts_.Producer().tail.load(std::memory_order_acquire);
    if (tail == front) return false;
    if (SLUICE_UNLIKELY(tail - front > kCapacity)) return ReadBackTail(front, tail);
    parts_.published = tail;
    return true;
  }

  // Consumer, SPSC ring: whether the message at `position`, from the front
  // to less than kCapacity past it, is published; as IsFrontPublished. The
  // copy is never more than a ring past the front, so it covers `position`
  // exactly when it is 1 to kCapacity past it.
  SLUICE_ALWAYS_INLINE bool IsPublished(Position position) noexcept {
    if (parts_.published - position - 1 < kCapacity) return true;
    const Position front = parts_.position;
    // SYNC POINT READ (A), SPSC: see Publish().
    const Position tail = parts_.Producer().tail.load(std::memory_order_acquire);
    if (SLUICE_UNLIKELY(tail - front > kCapacity)) return ReadBackTail(position, tail);
    parts_.published = tail;
    return position - front < tail - front;
  }

  // Consumer, SPSC ring: its copy of the tail (every position below it is
  // published, and was acquired as such by IsFrontPublished/IsPublished).
  Position PublishedCopy() const noexcept { return parts_.published; }

  // Producer: takes the claim of `position` (SPSC; MPSC claims are taken by
  // the CAS). Call before the claimed position's message becomes visible, so
  // that observers (H) never see the tail behind `released`.
  void Commit(Position position) noexcept {
    if constexpr (!kMultiProducer) {
      parts_.Producer().tail.store(position + 1, std::memory_order_relaxed);
    } else {
      (void)position;
    }
  }

  // The tail: every position below it is claimed (SPSC: committed just
  // before its publication). Relaxed: a claim carries no data.
  Position ClaimedTail() const noexcept {
    return parts_.Producer().tail.load(std::memory_order_relaxed);
  }

  // Consumer: the next position to release.
  Position ConsumerPosition() const noexcept { return parts_.position; }

  // Consumer: hands the position at ConsumerPosition() back to the producers,
  // after destroying what it held.
  SLUICE_ALWAYS_INLINE void Release() noexcept {
    ++parts_.position;
    // SYNC POINT WRITE (B): what the caller destroyed before this store.
    parts_.ReleasedWord().store(parts_.position, std::memory_order_release);
  }

  // Consumer: moves past an unpublished position (a ring no producer
  // writes any more: Ring::SkipFront) and releases it. One producer: the
  // copy of the tail, which did not cover it, must not fall behind the new
  // front, where it would read as covering a ring's worth.
  void Skip() noexcept {
    Release();
    if constexpr (!kMultiProducer) {
      if (parts_.published - parts_.position > kCapacity) {
        parts_.published = parts_.position;
      }
    }
  }

  // Consumer: hands `count` positions from ConsumerPosition() back at once,
  // after destroying what they held (a run of messages dispatched
  // together). One store: the producers see the room of the whole run when
  // it ends, as they would have seen it from a consumer that much slower.
  SLUICE_ALWAYS_INLINE void ReleaseRun(Position count) noexcept {
    parts_.position += count;
    // SYNC POINT WRITE (B): what the caller destroyed before this store.
    parts_.ReleasedWord().store(parts_.position, std::memory_order_release);
  }

  // A consumer taking over the cursor from one killed (shared memory):
  // sets the consumer's position to `position` and releases up to it, which
  // finishes a Release the killed one was inside.
  void TakeOverConsumer(Position position) noexcept {
    parts_.position = position;
    parts_.published = position;  // read the tail again
    parts_.ReleasedWord().store(position, std::memory_order_release);
  }

  // Closes the cursor to new claims and returns the tail it closed at: every
  // position below it was claimed before, none at or above it is ever
  // claimed. Idempotent: a call after (or preempting) another finds the tail
  // already moved and returns the same closed tail, so no Close waits for
  // another. MPSC: any thread; the jump is a CAS on the tail, so the claims'
  // CAS total order puts each claim before it (below the returned tail) or
  // after it (refused); lock-free (a retry means a producer claimed). SPSC:
  // the producer thread, or while it does not publish (the producer stores
  // the tail with its own stores, no read-modify-write); wait-free.
  Position Close() noexcept {
    if constexpr (kMultiProducer) {
      for (;;) {
        const Position released = parts_.ReleasedWord().load(std::memory_order_acquire);
        Position tail = parts_.Producer().tail.load(std::memory_order_relaxed);
        if (IsClosedTail(tail, released)) return tail - kClosedJump;
        if (parts_.Producer().tail.compare_exchange_weak(
                tail, tail + kClosedJump, std::memory_order_relaxed, std::memory_order_relaxed)) {
          return tail;
        }
      }
    } else {
      const Position released = parts_.ReleasedWord().load(std::memory_order_acquire);
      // Acquire and release: a consumer that reads the closed tail (the
      // SPSC index protocol) inherits the publications it carries, also
      // when another thread closes while the producer is idle.
      const Position tail = parts_.Producer().tail.load(std::memory_order_acquire);
      if (IsClosedTail(tail, released)) return tail - kClosedJump;
      parts_.Producer().tail.store(tail + kClosedJump, std::memory_order_release);
      return tail;
    }
  }

  // The consumer's position, for observers (Drain): every position below it
  // has been released. SYNC POINT READ (B).
  Position Released() const noexcept {
    return parts_.ReleasedWord().load(std::memory_order_acquire);
  }

  // Positions claimed and not yet released, exactly, at one instant during
  // the call (the read of `released`): the tail is read on both sides of it
  // and the pair is retried until the tail held still. Lock-free: a retry
  // means a producer claimed meanwhile. Any thread or interrupt handler.
  Position Depth() const noexcept {
    Position tail = parts_.Producer().tail.load(std::memory_order_relaxed);
    for (;;) {
      // SYNC POINT READ (H): see the file comment.
      const Position released = parts_.ReleasedWord().load(std::memory_order_acquire);
      const Position tail_after = parts_.Producer().tail.load(std::memory_order_relaxed);
      // (H) gives tail_after >= released; equal tails bound the moment. A
      // closed cursor's tail is kClosedJump ahead of its last claim.
      if (tail_after == tail) {
        const Position depth = tail - released;
        return depth > kCapacity ? depth - kClosedJump : depth;
      }
      tail = tail_after;
    }
  }

  // Whether Close has moved the tail: any thread. A caller whose claim was
  // refused for a closed tail sees it closed here (the tail's values come in
  // one order to every thread). Relaxed: it carries no data.
  bool IsClosed() const noexcept {
    const Position released = parts_.ReleasedWord().load(std::memory_order_relaxed);
    return IsClosedTail(parts_.Producer().tail.load(std::memory_order_relaxed), released);
  }

 private:
  // IsPublished, for a tail read further than a ring ahead of the
  // consumer: a closed tail, kClosedJump ahead of the last publish, reads
  // back to it; anything else (a tail written by something that breaks the
  // protocol, in shared memory) publishes nothing.
  SLUICE_NOINLINE bool ReadBackTail(Position position, Position tail) noexcept {
    const Position front = parts_.position;
    tail -= kClosedJump;
    if (tail - front > kCapacity) tail = front;
    parts_.published = tail;
    return position - front < tail - front;
  }

  // Whether Close moved `tail`, given a `released` loaded before it: an open
  // tail is then at or ahead of it (the consumer never passes a claim) by
  // the fill (at most kCapacity, at most a quarter of the position range,
  // half the jump: Ring's static_assert) plus what the consumer released
  // meanwhile; a closed one by at least kClosedJump (half the range). The
  // line is drawn at three quarters of the jump (three eighths of the
  // range), so a full queue of the largest capacity reads as open (at half
  // the jump it read as closed, and Close then moved nothing), and a
  // quarter of the jump lies between them unless the consumer released
  // 2^61 messages (2^29 with 32-bit positions) while the caller was
  // preempted between its two loads: the same kind of bound as the claims'
  // ABA case in the file comment.
  static constexpr Position kClosedLine = kClosedJump / 2 + kClosedJump / 4;
  static_assert(kCapacity <= kClosedJump / 2, "a full queue must read as open");
  static bool IsClosedTail(Position tail, Position released) noexcept {
    return tail - released >= kClosedLine;
  }

  // Whether `count` more positions would take the fill past `limit`:
  // fill + count > limit, written fill > limit - count (count <= limit keeps
  // the subtraction from wrapping); for one position (kOne), fill >= limit.
  template <bool kOne>
  static bool OverLimit(Position fill, Position limit, Position count) noexcept {
    if constexpr (kOne) {
      return fill >= limit;
    } else {
      return fill > limit - count;
    }
  }

  template <bool kOne>
  bool TryClaimShared(Position limit, Position count, Position* claimed) noexcept {
    Position position = parts_.Producer().tail.load(std::memory_order_relaxed);
    // SYNC POINT READ (B), through another producer's refresh.
    Position released = parts_.Producer().consumer_position_cache.load(std::memory_order_acquire);
    for (;;) {
      // Unsigned: a stale `position` behind `released` yields a huge fill and
      // takes the slow path, which re-reads the tail.
      if (OverLimit<kOne>(position - released, limit, count)) {
        // The cache says the queue may be at the limit: ask the consumer.
        // SYNC POINT READ (B): see Release().
        released = parts_.ReleasedWord().load(std::memory_order_acquire);
        parts_.Producer().consumer_position_cache.store(released, std::memory_order_release);
        if (position - released > kCapacity || OverLimit<kOne>(position - released, limit, count)) {
          // Refuse only if the tail has not moved since `released` was read:
          // then the queue held position - released >= limit messages at
          // that moment, so the refusal is real and not a lost race.
          const Position tail = parts_.Producer().tail.load(std::memory_order_relaxed);
          if (tail == position) return false;
          position = tail;
          continue;
        }
      }
      if (parts_.Producer().tail.compare_exchange_weak(
              position, position + count, std::memory_order_relaxed, std::memory_order_relaxed)) {
        *claimed = position;
        return true;
      }
      // Another producer claimed `position`; the CAS loaded the new tail.
    }
  }

  template <bool kOne>
  bool TryClaimExclusive(Position limit, Position count, Position* claimed) noexcept {
    const Position position = parts_.Producer().tail.load(std::memory_order_relaxed);
    Position released = parts_.Producer().consumer_position_cache.load(std::memory_order_relaxed);
    if (OverLimit<kOne>(position - released, limit, count)) {
      // SYNC POINT READ (B): see Release().
      released = parts_.ReleasedWord().load(std::memory_order_acquire);
      parts_.Producer().consumer_position_cache.store(released, std::memory_order_relaxed);
      if (OverLimit<kOne>(position - released, limit, count)) return false;
    }
    *claimed = position;
    return true;
  }

  // kTogether: the producers' line, then the consumer's, each one cache
  // line. The consumer never touches the first; producers read `released`
  // only on refresh.
  struct TogetherParts {
    ClaimLine producer;
    alignas(kCacheLineSize) Position position = 0;  // consumer-private
    std::atomic<Position> released{0};
    // SPSC: the tail as the consumer last read it (consumer-private).
    Position published = 0;
    ClaimLine& Producer() noexcept { return producer; }
    const ClaimLine& Producer() const noexcept { return producer; }
    std::atomic<Position>& ReleasedWord() noexcept { return released; }
    const std::atomic<Position>& ReleasedWord() const noexcept { return released; }
  };
  static_assert(sizeof(TogetherParts) == 2 * kCacheLineSize,
                "producer and consumer cursors must each fill one cache line");
  // kApart: where the two shared words are, and the consumer's own
  // positions in this object (a process's own memory).
  struct ApartParts {
    ClaimLine* line = nullptr;
    std::atomic<Position>* released = nullptr;
    Position position = 0;   // consumer-private
    Position published = 0;  // SPSC: consumer-private
    ClaimLine& Producer() noexcept { return *line; }
    const ClaimLine& Producer() const noexcept { return *line; }
    std::atomic<Position>& ReleasedWord() noexcept { return *released; }
    const std::atomic<Position>& ReleasedWord() const noexcept { return *released; }
  };

  std::conditional_t<kHome == CursorHome::kTogether, TogetherParts, ApartParts> parts_;
  friend struct TestAccess;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
