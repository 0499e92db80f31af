// The shared-memory bus's parts: their layout and their protocol. The bus
// across processes on one host: the queue of the in-process bus
// (detail/queue/message_queue.hpp: one ring per priority, HIGH first, one fill
// cursor for admission) placed in shared memory, once per producer process
// (its lane). One consumer process creates the bus and dispatches (ShmBus);
// producer processes attach, each getting a lane from the consumer, and
// publish (ShmProducer). No daemon. Linux.
//
// A bus is one object per part, each mapped at a fixed offset of one range
// each process reserves (sluice/ipc/address_reservation.hpp), so one base and
// the offsets below reach them all: the Header ("/name", mode 0600: the
// consumer's user; producers map it read-only), the WakePage ("/name.wake",
// the bus's permissions: the one part a producer opens by name, read-write)
// and each lane ("/name.laneN", mode 0600: its LaneControl, its rings, its
// loan blocks; mapped read-write by the consumer and by its producer only,
// who gets it from the consumer: sluice/ipc/lane_handout.hpp). Everything in
// them is fixed-width or a lock-free atomic, and holds offsets, never
// pointers, so each process may map the range at another address.
//
// Why a lane per process: a process killed between its claim and its
// publish leaves a claim no one will publish. In a lane only that
// process's threads claim, so once its process is gone every claim left
// there is known to be abandoned: the consumer skips each (counted lost),
// dispatches what the process did publish, and hands the lane to the next
// producer. In a queue shared by processes no one could tell whose claim a
// hole is.
//
// Synchronisation, each release named with its acquire:
//  (T) segment ready, creator -> attacher: Create writes the header and
//      constructs the rings, then stores `magic` with release; Attach loads
//      it with acquire before reading anything else.
//  (A), (B), (H) of the rings and the fill cursor, as in process
//      (detail/queue/ring.hpp, detail/queue/claim_cursor.hpp): a lock-free atomic is
//      address-free, so they hold between processes as between threads.
//  (U) a lane changing hands. Taking, on the consumer's hand-out thread
//      (ConsumerLanes::HandOut, under the lock it shares with the consumer
//      thread's looks at the lanes): it clears the lane's bit in
//      `lanes_free`, takes the lane's role on a new open of its object,
//      writes `owner` and `name`, stores kLaneOwned with release and sets
//      the bit in `lanes_active` with release, all before that open leaves
//      for the producer; the consumer loads `lanes_active` with acquire
//      before reading the lane's rings, and `state` with acquire before
//      reading `owner`. Leaving, producer -> consumer: Detach stores
//      kLaneDetached with release after its last publish; the consumer's
//      acquire of `state` then sees every publish and count of the lane.
//      Handing back: the consumer clears the bit in `lanes_active`, makes
//      the lane's object anew (a producer that kept the old one mapped
//      reaches nothing of the next owner's) with its rings and counters,
//      then sets its bit in `lanes_free` with release, which the hand-out's
//      acquire pairs with. A lane in neither set after a consumer's death
//      (its hand-out or hand-back cut short) has no owner: the next
//      consumer makes it anew and frees it. Whether a lane has an owner is
//      the header's `lanes_active` and whether that owner runs its role,
//      never the lane's `state`, which its producer can write: `state`
//      only tells a detach from a kill (tests/spin/lane_handout.pml).
//  (W) and (R) sleeping, the in-process Dekker pairs of
//      detail/wait/wake_signal.hpp with their signals in the segment and a
//      futex any process can wait on (ipc/shared_futex_parker.hpp): (W) the
//      consumer in ProcessBatchWait on `consumer_wake`, woken by each
//      publish; (R) a producer in PublishBlocking on its lane's `room`,
//      woken after each batch that took from its lane and by Close. On
//      `consumer_wake` the heavy fence is membarrier's global expedited
//      command, run by the consumer on its way to sleep,
//      which reaches every process that registered at Attach (or at
//      Create); a producer whose registration failed fences itself. The
//      `room` signals use no heavy fence (a producer in a sandbox may not
//      call membarrier): the consumer fences once per batch, the producer
//      on its way to sleep.
//      Processes can die: a producer killed between its publish and its
//      wake-up call leaves the consumer asleep with a message queued, so
//      the consumer's sleep is cut into slices of the producer check
//      interval; a consumer killed leaves producers waiting for room, so
//      their sleep is cut into slices after which they look for it
//      (tests/spin/ipc_wakeup.pml models both).
//  (I) the message in hand, killed consumer -> the consumer taking over:
//      before it pops a message (the pop's releases are release stores,
//      which keep the mark before them), the consumer stores which message
//      it takes in `in_hand`, and 0 once the message is dispatched (or
//      counted corrupt). A killed process's stores up to its last
//      instruction are all in memory once the kernel has dropped its role,
//      which the consumer taking over saw when it took the role: it finds
//      the mark with the message popped exactly when it died holding it.
//  (X) close: the consumer stores `state` = kClosed, then closes every
//      lane's fill cursor (every later claim is refused); a producer whose
//      claim was refused asks its cursor whether it is closed (the tail's
//      values come in one order to every thread, so one refused by the
//      closed tail sees it) and reads `state`. Then the consumer fences and
//      wakes every producer waiting for room, which reads `state` after
//      announcing its sleep (the other half of that Dekker pair).
//
// The consumer copies each message out of the segment before it looks at
// it: a producer process (or anything else that can write the segment)
// could change it while it is read. The copy's priority and alternative
// index are checked before dispatch; a message that fails is counted as
// corrupt and skipped. Slot indices are masked and lane numbers bounded,
// so no position read from the segment reaches outside it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <variant>

#include "sluice/config.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/detail/queue/message_queue.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/shared_futex_parker.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// Whether a type may cross a process boundary by copy: trivially copyable
// (no owned memory, no virtual table) and not itself a pointer of any kind.
// A pointer inside a struct cannot be seen at compile time in C++17: do not
// put one there (the other process's addresses mean nothing here).
template <typename T>
inline constexpr bool kCanCrossProcesses =
    std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> && !std::is_member_pointer_v<T> &&
    !std::is_null_pointer_v<T> && !std::is_reference_v<T>;

template <typename Payload>
struct CrossProcessAlternatives;
template <typename... Ts>
struct CrossProcessAlternatives<std::variant<Ts...>> {
  static constexpr bool value = (kCanCrossProcesses<Ts> && ...);
};

namespace detail {

inline constexpr std::uint64_t kMagic =
    0x534C554943453033ULL;  // "SLUICE03": released positions in the header

constexpr std::size_t RoundUp(std::size_t value, std::size_t alignment) noexcept {
  return (value + alignment - 1) / alignment * alignment;
}

enum SegmentState : std::uint32_t { kOpen = 1, kClosed = 2 };

// Who is alive (Segment::TakeRole): the consumer holds kConsumerRole on the
// header object from Create (or its takeover) until it closes or exits; a
// producer holds kLaneRole on its lane's object from before its lane reads
// as owned until it detaches or exits (the consumer takes it for the
// producer on a description of its own and hands that description over:
// sluice/ipc/lane_handout.hpp). The kernel drops a dead holder's role;
// nothing in memory says who is alive.
inline constexpr std::uint32_t kConsumerRole = 0;
inline constexpr std::uint32_t kLaneRole = 0;
enum LaneState : std::uint32_t { kLaneFree = 0, kLaneOwned = 1, kLaneDetached = 2 };

template <typename Payload, std::size_t kCapacity, typename Traits>
struct Layout {
  static_assert(sluice::detail::IsVariant<Payload>::value,
                "Sluice: the bus payload must be a std::variant of message types");
  static_assert(CrossProcessAlternatives<Payload>::value,
                "Sluice: every payload alternative of a shared-memory bus must be trivially "
                "copyable and not a pointer: it is copied between processes as bytes");
  static_assert(std::atomic<Position>::is_always_lock_free &&
                    std::atomic<std::uint32_t>::is_always_lock_free &&
                    std::atomic<std::uint64_t>::is_always_lock_free,
                "Sluice: a shared-memory bus needs lock-free (address-free) atomics");
  static_assert(Traits::kMaxProducers >= 1 && Traits::kMaxProducers <= 64,
                "Sluice: ShmBusTraits::kMaxProducers must be 1 to 64");

  static constexpr std::size_t kLanes = Traits::kMaxProducers;
  static constexpr std::uint64_t kAllLanes =
      kLanes == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << kLanes) - 1;

  using Envelope = MessageEnvelope<Payload>;
  // The consumer's state (which ring, how long a run) lives in each
  // process's queue object; only the rings are in the segment.
  using Queue = sluice::detail::PriorityQueue<Envelope, kCapacity, ProducerModel::kMulti,
                                              SlotStorage::kInline, Traits::kCheckInterval,
                                              Traits::kStarvationLimit, sluice::detail::RingsAt>;
  using Rings = typename Queue::Rings;

  using Signal = sluice::detail::WakeSignal<SharedFutexParker>;
  // Producers wait for room with a full fence of their own: their waits
  // never depend on their process being allowed membarrier.
  using RoomSignal = sluice::detail::WakeSignal<SharedFutexParkerFenced>;

  // A producer's name, as 32-bit words (lock-free everywhere).
  static constexpr std::size_t kNameWords = kProducerNameCapacity / 4;
  static_assert(kProducerNameCapacity % 4 == 0, "Sluice: the name is stored in whole words");

  struct alignas(kCacheLineSize) LaneControl {
    std::atomic<std::uint32_t> state;  // LaneState: (U)
    ProcessIdentity owner;             // written before kLaneOwned
    // The name the owner gave at Attach (UTF-8, NUL-filled), written by the
    // consumer's hand-out before kLaneOwned. A label, as `owner` is: the
    // lane's producer can write it, so the consumer cleans what it reads
    // (ForEachProducerLane).
    std::atomic<std::uint32_t> name[kNameWords];
    RoomSignal room;  // the owner's PublishBlocking waits here: (R)
    // Which loan blocks are free, and which the consumer holds (LoanWords
    // of sluice/ipc/loan.hpp). The owner takes, the consumer gives back: (P).
    alignas(kCacheLineSize) std::atomic<std::uint64_t> loans[kLoanWords];
    // The owner's threads count refusals here (relaxed: tallies), on a line
    // of their own: for room (`dropped`, what the backpressure peak reads)
    // and empty loans (`pool_empty`; both are the statistics' drops, as in
    // process). Publishes are not counted: each claimed one slot of its
    // ring, and the consumer reads the rings' claims (GetStatistics).
    alignas(kCacheLineSize) std::atomic<std::uint64_t> dropped[kPriorityCount];
    std::atomic<std::uint64_t> pool_empty[kPriorityCount];
  };

  // The header: the consumer's alone. Its object is mode 0600; a producer
  // maps it read-only, through a descriptor the consumer hands it.
  struct alignas(kCacheLineSize) Header {
    std::atomic<std::uint64_t> magic;  // kMagic once ready: (T)
    Fingerprint fingerprint;
    // The consumer's pid, as its PID namespace numbers it: a label for
    // people, written (relaxed) at Create and at each takeover; its role,
    // not this, says whether it runs.
    std::atomic<std::int32_t> consumer_pid;
    AdmissionThresholds thresholds;
    std::uint64_t peer_check_nanoseconds;  // how long a wait sleeps between looks
    std::atomic<std::uint32_t> state;
    // Whether every part is linked under its name: a consumer killed
    // before leaves a bus no producer ever reached, replaced, not taken
    // over.
    std::atomic<std::uint32_t> parts_named;
    std::atomic<std::uint64_t> lanes_active;  // bit l: lane l has an owner: (U)
    std::atomic<std::uint64_t> lanes_free;    // bit l: lane l is ready to hand out: (U)
    // The message the consumer has taken and not finished dispatching, if
    // any: InHandMark(lane, its loan block, its position in the lane's fill), 0 when none. (I)
    alignas(kCacheLineSize) std::atomic<std::uint64_t> in_hand;
    // Each lane's released positions (its fill's and each ring's), a line
    // per lane: the consumer stores them, the lane's producer reads them to
    // admit (SYNC POINT (B) of detail/queue/claim_cursor.hpp). Here, where
    // no producer can write, so that none moves what the consumer takes
    // next; the consumer's positions themselves are in its own process.
    sluice::detail::ReleasedLine released[kLanes];
  };
  // The wake page: the one part every producer writes (its mode is the
  // bus's permissions). A producer can at most wake the consumer for
  // nothing, or leave it asleep until its slice ends.
  struct alignas(kCacheLineSize) WakePage {
    // Where the consumer's hand-out listens (first, at offset 0: read by
    // RemoveHandoutSocket without the layout).
    HandoutAddress handout;
    alignas(kCacheLineSize) Signal consumer_wake;  // ProcessBatchWait sleeps here: (W)
  };

  static constexpr std::size_t kRingsAlign = alignof(Rings) > kCacheLineSize ? alignof(Rings)
                                                                             : kCacheLineSize;
  using Loans = LoanShape<Payload>;
  static constexpr std::size_t kLoanBlocks = Loans::kAny ? Traits::kLoanBlocks : 0;
  static_assert(!Loans::kAny || (Traits::kLoanBlocks >= 1 && Traits::kLoanBlocks <= 64),
                "Sluice: ShmBusTraits::kLoanBlocks must be 1 to 64");
  static constexpr std::size_t kLaneAlign =
      kRingsAlign > Loans::kAlign ? kRingsAlign : Loans::kAlign;
  static_assert(kLaneAlign <= 4096, "Sluice: a loaned type may be aligned to at most a page");
  // The parts, each an object of its own mapped at a page of one reserved
  // range (sluice/ipc/address_reservation.hpp): the header, the wake page,
  // then each lane: its control, its rings, its loan blocks.
  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kHeaderBytes = RoundUp(sizeof(Header), kPage);
  static constexpr std::size_t kWakeOffset = kHeaderBytes;
  static constexpr std::size_t kWakeBytes = RoundUp(sizeof(WakePage), kPage);
  static constexpr std::size_t kRingsOffset = RoundUp(sizeof(LaneControl), kRingsAlign);
  static constexpr std::size_t kLoansOffset = RoundUp(kRingsOffset + sizeof(Rings), Loans::kAlign);
  static constexpr std::size_t kLaneStride =
      RoundUp(kLoansOffset + kLoanBlocks * Loans::kBlockBytes, kPage);
  static constexpr std::size_t kLanesOffset = kWakeOffset + kWakeBytes;
  // The whole range: every part.
  static constexpr std::size_t kSegmentSize = kLanesOffset + kLanes * kLaneStride;

  static Fingerprint Expected() {
    return MakeFingerprint<Payload, kCapacity, Envelope, Rings>(
        kSegmentSize, Traits::kSchemaVersion, static_cast<std::uint32_t>(kLanes), kLoanBlocks,
        Loans::kBlockBytes);
  }
  static Header* HeaderOf(void* base) noexcept { return static_cast<Header*>(base); }
  static WakePage* WakeOf(void* base) noexcept {
    return std::launder(
        reinterpret_cast<WakePage*>(static_cast<unsigned char*>(base) + kWakeOffset));
  }
  static std::size_t LaneOffset(std::size_t lane) noexcept {
    return kLanesOffset + lane * kLaneStride;
  }
  // `lane` < kLanes (callers bound it).
  static void* LaneAt(void* base, std::size_t lane) noexcept {
    return static_cast<unsigned char*>(base) + LaneOffset(lane);
  }
  static LaneControl* ControlOf(void* base, std::size_t lane) noexcept {
    return std::launder(reinterpret_cast<LaneControl*>(LaneAt(base, lane)));
  }
  static Rings* RingsOf(void* base, std::size_t lane) noexcept {
    return std::launder(
        reinterpret_cast<Rings*>(static_cast<unsigned char*>(LaneAt(base, lane)) + kRingsOffset));
  }
  // Lane `lane`'s released positions, in the header. A producer maps the
  // header read-only: its queue only loads them (a store would fault).
  static sluice::detail::ReleasedLine* ReleasedOf(void* base, std::size_t lane) noexcept {
    return &HeaderOf(base)->released[lane];
  }
  // `block` < kLoanBlocks (callers bound it).
  static void* LoanBlock(void* base, std::size_t lane, std::size_t block) noexcept {
    return static_cast<unsigned char*>(LaneAt(base, lane)) + kLoansOffset +
           block * Loans::kBlockBytes;
  }
};

inline int LowestBit(std::uint64_t bits) noexcept { return __builtin_ctzll(bits); }

// A message's loan block, when it names none: not a loan (kNoBlock), or a
// number that is none of its lane's blocks (kBadBlock).
inline constexpr std::uint32_t kNoBlock = 0xFFFFFFFFU;
inline constexpr std::uint32_t kBadBlock = 0xFFFFFFFEU;

// Header::in_hand: lane + 1 in the top byte, the message's loan block + 1
// in the next (0: none), and its position in its lane's fill (how many the
// lane had released before it) in the low 48 bits.
inline constexpr std::uint64_t kInHandPositionMask = (std::uint64_t{1} << 48) - 1;
constexpr std::uint64_t InHandMark(std::size_t lane, std::uint32_t block,
                                   Position position) noexcept {
  return (static_cast<std::uint64_t>(lane + 1) << 56) |
         (block == kNoBlock ? 0 : (static_cast<std::uint64_t>(block + 1) & 0xFF) << 48) |
         (static_cast<std::uint64_t>(position) & kInHandPositionMask);
}

}  // namespace detail

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
