// The queue behind a bus, in one of two delivery orders (DeliveryOrder in
// sluice/bus_traits.hpp): FifoQueue, one ring taken in admission order, or
// PriorityQueue, one ring per priority taken HIGH first. Both offer the bus
// the same calls: claim under the fill limit, construct at Storage, Publish;
// TryFront and PopFront for the consumer; Close, Released and Depth over the
// whole queue.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/queue/claim_cursor.hpp"
#include "sluice/detail/queue/ring.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"
#include "sluice/message.hpp"
#include "sluice/producer_model.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Admission order: the ring itself. A claim is the message's position.
template <typename Envelope, std::size_t kCapacity, ProducerModel kModel, SlotStorage kStorage>
class FifoQueue {
  using RingType = Ring<Envelope, kCapacity, kModel, kStorage>;

 public:
  using Claim = Position;
  static constexpr std::size_t kRingCount = 1;
  static constexpr std::size_t kBytesPerSlot = sizeof(typename RingType::Slot);

  explicit FifoQueue(Position first_position) noexcept : ring_(first_position) {}

  // Consecutive claims of one producer: its first position.
  using Run = Position;

  bool TryClaim(Position limit, MessagePriority /*priority*/, Claim* claim) noexcept {
    return ring_.TryClaim(limit, claim);
  }
  // Up to `wanted` consecutive admissions with one claim: how many, and the
  // run they form (InRun gives the i-th). No other producer's message falls
  // between them.
  Position TryClaimRun(Position limit, MessagePriority /*priority*/, Position wanted,
                       Run* run) noexcept {
    return ring_.TryClaimUpTo(limit, wanted, run);
  }
  static Claim InRun(const Run& run, Position i) noexcept { return run + i; }
  static Position MessageId(Claim claim) noexcept { return claim; }
  void* Storage(Claim claim) noexcept { return ring_.Storage(claim); }
  void Publish(Claim claim) noexcept { ring_.Publish(claim); }

  SLUICE_ALWAYS_INLINE Envelope* TryFront() noexcept { return ring_.TryFront(); }
  SLUICE_ALWAYS_INLINE void PopFront() noexcept { ring_.PopFront(); }
  // One ring, in position order: the consumer may look past the front and
  // pop a run at once (the consumer core's runs, detail/consume/consume_core.hpp).
  Position ConsumerPosition() const noexcept { return ring_.ConsumerPosition(); }
  SLUICE_ALWAYS_INLINE Position KnownPublished() const noexcept { return ring_.KnownPublished(); }
  using RunSlot = typename RingType::RunSlot;
  static constexpr std::size_t kSlotStride = RingType::kSlotStride;
  static constexpr Position SlotsToEnd(Position position) noexcept {
    return RingType::SlotsToEnd(position);
  }
  SLUICE_ALWAYS_INLINE RunSlot RunSlotAt(Position position) noexcept {
    return ring_.RunSlotAt(position);
  }
  SLUICE_ALWAYS_INLINE static RunSlot NextRunSlot(RunSlot slot) noexcept {
    return RingType::NextRunSlot(slot);
  }
  SLUICE_ALWAYS_INLINE bool IsPublishedIn(RunSlot slot, Position position) noexcept {
    return ring_.IsPublishedIn(slot, position);
  }
  SLUICE_ALWAYS_INLINE static Envelope* EnvelopeIn(RunSlot slot) noexcept {
    return RingType::EnvelopeIn(slot);
  }
  static const unsigned char* RunBytes(RunSlot slot) noexcept { return RingType::RunBytes(slot); }
  SLUICE_ALWAYS_INLINE void PopFronts(Position count) noexcept { ring_.PopFronts(count); }

  Position Close() noexcept { return ring_.Close(); }
  Position Released() const noexcept { return ring_.Released(); }
  Position Depth() const noexcept { return ring_.Depth(); }

 private:
  RingType ring_;
};

// What the producers of a priority-ordered queue write, made where they
// map it (shared memory: sluice/ipc/shm_layout.hpp): the fill's claims and
// each ring's claims and slots. Positions and inline slots only, no
// pointers. What the consumer releases is in a ReleasedLine of its own.
template <typename Envelope, std::size_t kCapacity, ProducerModel kModel, SlotStorage kStorage>
struct PriorityRings {
  using RingType = Ring<Envelope, kCapacity, kModel, kStorage, CursorHome::kApart>;
  explicit PriorityRings(Position first_position) noexcept
      : fill(first_position),
        rings{typename RingType::Shared(first_position), typename RingType::Shared(first_position),
              typename RingType::Shared(first_position)} {}

  ClaimLine fill;
  typename RingType::Shared rings[kPriorityCount];
};

// The consumer's released positions of a PriorityRings: the fill's and each
// ring's, on one line only the consumer writes (producers read them to
// admit). Stores of the first position make them.
struct alignas(kCacheLineSize) ReleasedLine {
  std::atomic<Position> fill;
  std::atomic<Position> rings[kPriorityCount];
  void Reset(Position first_position) noexcept {
    fill.store(first_position, std::memory_order_relaxed);
    for (auto& ring : rings) ring.store(first_position, std::memory_order_relaxed);
  }
};

// Where a PriorityQueue keeps its fill cursor and rings: inside itself (a
// bus), or a PriorityRings and a ReleasedLine at addresses given at
// construction (shared memory), with the consumer's own positions in the
// queue object (CursorHome::kApart). The consumer's other state (which
// ring, how long a run) is in the queue object either way.
struct RingsInside {};
struct RingsAt {};

// Priority order: one ring per priority, each of the full capacity, and one
// claim cursor for the fill of the whole queue (admission, Depth, Close).
//
// Producer: a publish first claims a position of the whole queue under its
// priority's limit (that position is the message id), then a slot in its
// priority's ring (a run of n publishes: n positions, then n consecutive
// slots). The second claim always finds room: the ring's positions claimed
// and not released number no more than the whole queue's (the consumer
// releases a ring position before it counts it released in the queue),
// and those number at most the capacity, this producer's own n among them.
// A ring claim can thus be refused only by a
// stale read of the ring's released position, a store the consumer has
// already made; the producer re-reads until it sees it (no wait for any
// thread to run). A producer stalled between its ring claim and its publish
// holds up its own priority's ring and, by the hold below, every lower
// priority; higher priorities go on.
//
// Consumer: takes the front of the highest priority ring that has a
// published message, and checks the higher rings again after at most
// kCheckInterval messages. Within a ring, messages go in the order of their
// ring claims: one producer's in its publish order; two producers' need not
// follow their ids (fill claims). With kStarvationLimit != 0, a lower priority
// whose front message has been passed over by kStarvationLimit messages of
// higher priorities gets the next run (lowest such priority first).
//
// Synchronisation: each ring keeps its own (A) and (B) (detail/queue/ring.hpp);
// the queue's cursor keeps (B) and (H) for the whole fill
// (detail/queue/claim_cursor.hpp). PopFront releases the ring's position (release
// store) before the queue's (release store), so a producer whose admission
// acquired the queue's released position also finds the ring's.
template <typename Envelope, std::size_t kCapacity, ProducerModel kModel, SlotStorage kStorage,
          std::uint32_t kCheckInterval, std::uint32_t kStarvationLimit,
          typename Place = RingsInside>
class PriorityQueue {
  static_assert(kCheckInterval >= 1,
                "Sluice: PriorityDelivery's check interval must be at least 1");
  static constexpr bool kInside = std::is_same_v<Place, RingsInside>;
  static constexpr CursorHome kHome = kInside ? CursorHome::kTogether : CursorHome::kApart;
  using RingType = Ring<Envelope, kCapacity, kModel, kStorage, kHome>;
  static constexpr std::uint8_t kTop = kPriorityCount - 1;

 public:
  struct Claim {
    Position id;
    Position slot;
    std::uint8_t ring;
  };
  static constexpr std::size_t kRingCount = kPriorityCount;
  static constexpr std::size_t kBytesPerSlot = sizeof(typename RingType::Slot);

  using Rings = PriorityRings<Envelope, kCapacity, kModel, kStorage>;

  // RingsInside: counting starts at `first_position`.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsInside>, int> = 0>
  explicit PriorityQueue(Position first_position) noexcept
      : fill_(first_position),
        rings_{RingType(first_position), RingType(first_position), RingType(first_position)} {}
  // RingsAt: the rings made at `at` and their released positions at
  // `released` already, both outliving the queue.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  PriorityQueue(Rings* at, ReleasedLine* released) noexcept
      : fill_(&at->fill, &released->fill),
        rings_{RingType(&at->rings[0], &released->rings[0]),
               RingType(&at->rings[1], &released->rings[1]),
               RingType(&at->rings[2], &released->rings[2])} {}

  using Run = Claim;  // the first of the run

  bool TryClaim(Position limit, MessagePriority priority, Claim* claim) noexcept {
    Position id = 0;
    if (!fill_.TryClaim(limit, &id)) return false;
    const auto ring = static_cast<std::uint8_t>(priority);
    Position slot = 0;
    if (!ClaimRingSlots(ring, 1, &slot)) return false;
    *claim = Claim{id, slot, ring};
    return true;
  }

  Position TryClaimRun(Position limit, MessagePriority priority, Position wanted,
                       Run* run) noexcept {
    Position first = 0;
    const Position count = fill_.TryClaimUpTo(limit, wanted, &first);
    if (count == 0) return 0;
    const auto ring = static_cast<std::uint8_t>(priority);
    // All of the run's slots with one claim, so that no other producer's
    // message falls between them in their ring either.
    Position slot = 0;
    if (!ClaimRingSlots(ring, count, &slot)) return 0;
    *run = Claim{first, slot, ring};
    return count;
  }
  static Claim InRun(const Run& run, Position i) noexcept {
    return Claim{run.id + i, run.slot + i, run.ring};
  }

  static Position MessageId(const Claim& claim) noexcept { return claim.id; }
  void* Storage(const Claim& claim) noexcept { return rings_[claim.ring].Storage(claim.slot); }
  void Publish(const Claim& claim) noexcept {
    // The queue's claim first, for observers (H).
    fill_.Commit(claim.id);
    rings_[claim.ring].Publish(claim.slot);
  }

  // Consumer: the message to dispatch next, or nullptr when there is none to
  // take now: no ring has a published front, or a ring above the one that
  // has is held by a claim not yet published (a higher message is on its
  // way; taking a lower one meanwhile would break the order). Wait-free.
  SLUICE_ALWAYS_INLINE Envelope* TryFront() noexcept {
    if constexpr (kStarvationLimit == 0) {
      if (run_left_ == 0) {
        // Time to look above the current ring; the rings below wait anyway.
        run_left_ = kCheckInterval;
        // Unrolled for three priorities: HIGH, then MEDIUM when the current
        // ring is LOW.
        static_assert(kPriorityCount == 3, "the look above assumes three priorities");
        if (current_ != kTop) {
          bool held = false;
          if (Envelope* envelope = Look(kTop, &held)) return envelope;
          if (!held && current_ == 0) {
            if (Envelope* envelope = Look(1, &held)) return envelope;
          }
          if (held) {
            run_left_ = 0;
            return nullptr;
          }
        }
      }
      if (Envelope* envelope = rings_[current_].TryFront()) return envelope;
    } else {
      if (run_left_ != 0) {
        if (Envelope* envelope = rings_[current_].TryFront()) return envelope;
      }
    }
    return Select();
  }

  // Consumer: destroys the message TryFront returned and frees its slot.
  SLUICE_ALWAYS_INLINE void PopFront() noexcept {
    // SYNC POINT WRITE (B) of the ring, then of the whole queue: the order
    // the class comment's argument needs.
    rings_[current_].PopFront();
    fill_.Release();
    --run_left_;
    if constexpr (kStarvationLimit != 0) {
      // A run granted to a starved priority passes over no one: counting it
      // would let two starved priorities take turns ahead of HIGH.
      if (!starvation_run_) {
        for (std::uint8_t p = 0; p < current_; ++p) {
          if ((waiting_below_ & (1u << p)) != 0 && passed_over_[p] < kStarvationLimit) {
            ++passed_over_[p];
          }
        }
      }
    }
  }

  Position Close() noexcept { return fill_.Close(); }
  Position Released() const noexcept { return fill_.Released(); }
  Position Depth() const noexcept { return fill_.Depth(); }
  // Whether Close has run: see ClaimCursor::IsClosed.
  bool IsClosed() const noexcept { return fill_.IsClosed(); }

  // Consumer, for a merge of several queues (detail/queue/producer_lanes.hpp): the
  // highest priority with a published front, or -1; *held is the highest
  // priority above it whose ring is held by a claim not yet published, or
  // -1. SYNC POINT READ (A) of each ring looked at, as in TryFront.
  // Consumer, for such a merge: the next TryFront looks above its current
  // ring first, as at the end of a run.
  void EndRun() noexcept { run_left_ = 0; }

  // Consumer, once no producer can write the rings again (shared memory:
  // the producer process that owned them is gone). Moves past every front
  // claimed and never published, at most kCapacity per ring (positions read
  // from shared memory bound nothing), adding how many to skipped[ring].
  // Each skipped message is released in the fill as a taken one is.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  void SkipUnpublishedFronts(Position (&skipped)[kPriorityCount]) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      for (Position i = 0; i < kCapacity && rings_[p].HasUnpublishedFront(); ++i) {
        rings_[p].SkipFront();
        fill_.Release();
        ++skipped[p];
      }
    }
    run_left_ = 0;
  }
  // Consumer: how many slots of ring p have been claimed since the rings
  // were made at position 0 (once no producer can claim any more).
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  Position RingClaims(std::size_t p) const noexcept {
    return rings_[p].ClaimedTail();
  }
  // A consumer taking over the rings from one killed (shared memory): each
  // ring's position is what the killed one released there, and the fill's
  // is what the rings released (each message is released once in its ring
  // and once in the fill, the ring first; the rings were made at position
  // 0), so a consumer killed between the two releases leaves no position
  // counted twice or not at all.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  void TakeOverConsumer() noexcept {
    Position released = 0;
    for (std::size_t p = 0; p < kPriorityCount; ++p) released += rings_[p].TakeOverConsumer();
    fill_.TakeOverConsumer(released);
    run_left_ = 0;
  }
  // Consumer, shared memory: whether a ring claims more positions ahead of
  // its consumer than it has slots (only rings written wrong do).
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  bool HasImpossibleClaims() const noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      if (rings_[p].ClaimedTail() - rings_[p].ConsumerPosition() > kCapacity) return true;
    }
    return false;
  }
  // Consumer: whether every ring's claims have been taken or skipped.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  bool IsDrained() const noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      if (!rings_[p].IsDrained()) return false;
    }
    return true;
  }

  // Consumer, shared memory: the ring of the envelope TryFront returned.
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  std::size_t FrontRing() const noexcept {
    return current_;
  }
  // Consumer, shared memory: ring `p`'s claims (read from the line its
  // producers write) and its consumer position (this consumer's own).
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  Position ClaimedIn(std::size_t p) const noexcept {
    return rings_[p].ClaimedTail();
  }
  template <typename P = Place, std::enable_if_t<std::is_same_v<P, RingsAt>, int> = 0>
  Position TakenIn(std::size_t p) const noexcept {
    return rings_[p].ConsumerPosition();
  }

  int ReadyPriority(int* held) noexcept {
    *held = -1;
    for (int p = static_cast<int>(kTop); p >= 0; --p) {
      if (rings_[p].TryFront() != nullptr) return p;
      if (*held < 0 && Held(static_cast<std::uint8_t>(p))) *held = p;
    }
    return -1;
  }

 private:
  friend struct TestAccess;
  // `count` consecutive slots of `ring` for admissions already claimed from
  // fill_ (see the class comment for why the loop ends as soon as the
  // consumer's release is visible).
  // In shared memory (RingsAt) that argument rests on every process that
  // can write the rings keeping to the protocol: rings written wrong must
  // not hang a producer, so there the loop gives up after kSharedClaimTries
  // (false; the fill position stays claimed, in a segment no longer to be
  // trusted anyway).
  bool ClaimRingSlots(std::uint8_t ring, Position count, Position* slot) noexcept {
    if constexpr (std::is_same_v<Place, RingsAt>) {
      for (std::uint32_t i = 0; i < kSharedClaimTries; ++i) {
        if (rings_[ring].TryClaimExactly(kCapacity, count, slot)) return true;
        CpuRelax();
      }
      return false;
    } else {
      while (!rings_[ring].TryClaimExactly(kCapacity, count, slot)) CpuRelax();
      return true;
    }
  }
  static constexpr std::uint32_t kSharedClaimTries = 1u << 16;

  // Whether ring p holds the rings below it: a claim there not yet
  // published. Only with several producers: one producer (SPSC, or a
  // producer lane) publishes in claim order, so its unpublished claim never
  // hides a publish that has returned, and holding would only delay the
  // lower rings while that producer is preempted.
  bool Held(std::uint8_t p) const noexcept {
    if constexpr (kModel == ProducerModel::kMulti) {
      return rings_[p].HasUnpublishedClaim();
    } else {
      (void)p;
      return false;
    }
  }

  // Ring p's front if published (and makes p the current ring with a new
  // run); else nullptr, with *held set when a message is claimed there but
  // not yet published. SYNC POINT READ (A) of ring p, in its TryFront; the
  // tail read for `held` carries no data (relaxed).
  Envelope* Look(std::uint8_t p, bool* held) noexcept {
    if (Envelope* envelope = rings_[p].TryFront()) {
      current_ = p;
      run_left_ = kCheckInterval;
      return envelope;
    }
    *held = Held(p);
    return nullptr;
  }

  // Every ring from HIGH down (and, with a starvation limit, the starved
  // ones first): the first published front, or nullptr at the first held
  // ring or when all are empty.
  Envelope* Select() noexcept {
    run_left_ = 0;
    if constexpr (kStarvationLimit == 0) {
      for (int p = static_cast<int>(kTop); p >= 0; --p) {
        bool held = false;
        if (Envelope* envelope = Look(static_cast<std::uint8_t>(p), &held)) return envelope;
        if (held) return nullptr;
      }
      return nullptr;
    } else {
      Envelope* fronts[kPriorityCount] = {nullptr, nullptr, nullptr};
      bool held[kPriorityCount] = {false, false, false};
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        fronts[p] = rings_[p].TryFront();
        if (fronts[p] == nullptr) held[p] = Held(static_cast<std::uint8_t>(p));
      }
      int chosen = -1;
      starvation_run_ = false;
      for (std::size_t p = 0; p < kTop && chosen < 0; ++p) {
        if (fronts[p] != nullptr && passed_over_[p] >= kStarvationLimit) {
          chosen = static_cast<int>(p);
          starvation_run_ = true;
        }
      }
      for (int p = static_cast<int>(kTop); p >= 0 && chosen < 0; --p) {
        if (fronts[p] != nullptr) {
          chosen = p;
        } else if (held[p]) {
          break;  // a message above the rest is on its way: take nothing
        }
      }
      waiting_below_ = 0;
      for (int p = 0; p < chosen; ++p) {
        if (fronts[p] != nullptr) {
          waiting_below_ |= 1u << p;
        } else {
          passed_over_[p] = 0;  // nothing waits there
        }
      }
      if (chosen < 0) return nullptr;
      passed_over_[chosen] = 0;
      current_ = static_cast<std::uint8_t>(chosen);
      run_left_ = kCheckInterval;
      return fronts[chosen];
    }
  }

  ClaimCursor<kCapacity, kModel, kHome> fill_;
  RingType rings_[kPriorityCount];
  // Consumer-private (never in the shared rings: a segment other processes
  // can write must not hold the index of the current ring).
  std::uint8_t current_ = 0;
  std::uint32_t run_left_ = 0;
  std::uint32_t waiting_below_ = 0;
  std::uint32_t passed_over_[kPriorityCount] = {0, 0, 0};
  bool starvation_run_ = false;  // the current run was granted to a starved priority
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
