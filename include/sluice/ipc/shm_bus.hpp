// The bus across processes on one host: the queue of the in-process bus
// (detail/message_queue.hpp: one ring per priority, HIGH first, one fill
// cursor for admission) placed in a named shared-memory segment, once per
// producer process (its lane). One consumer process creates the segment
// and dispatches (ShmBus); producer processes attach, each taking a lane,
// and publish (ShmProducer). No daemon. Linux.
//
// Segment layout: a Header (magic, fingerprint, consumer identity, admission
// thresholds, state, one LaneControl per lane: owner, state, counters), then
// each lane's rings at LaneOffset(lane). Everything in it is fixed-width or
// a lock-free atomic, and holds offsets, never pointers, so each process
// may map it at another address.
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
//      (detail/ring.hpp, detail/claim_cursor.hpp): a lock-free atomic is
//      address-free, so they hold between processes as between threads.
//  (U) a lane changing hands. Taking, producer -> consumer: under the
//      segment's lock (flock, which the kernel drops with a dead holder),
//      Attach loads a lane's `state` with acquire, and on kLaneFree writes
//      `owner`, stores kLaneOwned with release and sets the lane's bit in
//      `lanes_active` with release; the consumer loads `lanes_active` with
//      acquire before reading the lane's rings, and `state` with acquire
//      before reading `owner`. Leaving, producer -> consumer: Detach stores
//      kLaneDetached with release after its last publish; the consumer's
//      acquire of `state` then sees every publish and count of the lane.
//      Handing back, consumer -> next producer: the consumer clears the bit,
//      constructs the lane's rings and counters anew, then stores
//      kLaneFree with release, which the next Attach's acquire pairs with.
//  (W) sleeping, the in-process Dekker pair of detail/wake_signal.hpp
//      with its signals in the segment and a futex any process can wait on
//      (ipc/shared_futex_parker.hpp): the consumer in ProcessBatchWait on
//      `consumer_wake`, woken by each publish; a producer in PublishBlocking
//      on its lane's `room`, woken after each batch that took from its lane
//      and by Close. On `consumer_wake` the heavy fence is membarrier's
//      global expedited command, run by the consumer on its way to sleep,
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
//  (I) who the consumer is, which a consumer taking over a killed one's
//      segment rewrites: a sequence lock of atomics (ConsumerIdentity).
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
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/admission.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/dispatch_epoch.hpp"
#include "sluice/detail/message_queue.hpp"
#include "sluice/detail/subscription_registry.hpp"
#include "sluice/detail/variant_index.hpp"
#include "sluice/detail/visit_envelope.hpp"
#include "sluice/detail/waiting.hpp"
#include "sluice/detail/wake_signal.hpp"
#include "sluice/ipc/create_steps.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shared_futex_parker.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/subscription_handle.hpp"

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

// The parts of the in-process traits the shared bus uses: its delivery
// order's knobs (always priority order across processes) and the
// subscription table's sizes, and how many producer processes it holds.
struct ShmBusTraits {
  // Part of the fingerprint: raise it when a payload type changes in a way
  // its name, size and alignment do not show (fields reordered or retyped
  // alike, a field put where padding was), so old and new builds refuse
  // each other.
  static constexpr std::uint64_t kSchemaVersion = 0;
  // Producers attached at once (ShmProducer objects, in any processes):
  // each has a lane of kCapacity messages per priority in the segment.
  static constexpr std::size_t kMaxProducers = 8;
  // Blocks each lane lends for Loaned<T> alternatives (1 to 64), each as
  // large as the largest such T; none when the payload has no Loaned<T>.
  static constexpr std::size_t kLoanBlocks = 8;
  static constexpr std::size_t kMaxSubscribersPerType = 16;
  static constexpr std::size_t kCallbackStorageBytes = 48;
  static constexpr std::uint32_t kCheckInterval = 1;
  static constexpr std::uint32_t kStarvationLimit = 0;
  // Looks at the queue (or for room) this many times, with a pause before
  // each, before a wait parks on its futex.
  static constexpr std::uint32_t kPollsBeforePark = 256;
};

struct ShmBusOptions {
  SegmentPermissions permissions;
  // Fixed for the segment's life; producers read them at Attach.
  AdmissionThresholds thresholds;
  // How often, at most, each side looks whether the other still runs.
  // ProcessBatch looks for producer processes that exited without
  // detaching (one read of /proc per attached producer) on a batch that
  // took nothing, or after 4,096 batches; 0: on every such batch
  // (ShmBus::CheckProducers looks at once). It is also the longest a wait
  // sleeps between two looks (1 ms when 0): ProcessBatchWait (a producer
  // killed between its publish and its wake-up call costs at most that),
  // and PublishBlocking (a consumer killed wakes no one).
  std::chrono::nanoseconds peer_check_interval = std::chrono::milliseconds(10);
};

// What the consumer process counted; `published` and `dropped` come from
// the segment (every producer's publishes).
struct ShmBusStatistics {
  std::uint64_t published[kPriorityCount] = {};  // admitted, by every producer
  std::uint64_t dropped[kPriorityCount] = {};    // refused for room
  std::uint64_t processed = 0;                   // dispatched by this consumer
  std::uint64_t corrupt = 0;             // skipped: a priority or alternative index out of range
  std::uint64_t callback_errors = 0;     // a subscriber, visitor or exit handler threw (counted)
  std::uint64_t producers_attached = 0;  // lanes taken: held now, killed or detached
  std::uint64_t lost = 0;                // claims a killed producer never published, skipped
  std::uint64_t producers_killed = 0;    // lanes taken back from processes that exited attached
  std::uint64_t producers_detached = 0;  // lanes handed back by Detach (or a destructor)
  std::uint64_t taken_over =
      0;  // messages queued when Create took over a killed consumer's segment
};

// A producer's lane handed back, reported to ShmBus::OnProducerExit after
// everything it published has been dispatched.
struct ProducerExit {
  std::uint16_t lane = 0;  // 1..kMaxProducers, as MessageHeader::lane of its messages
  std::int32_t pid = 0;    // its process, as seen from the consumer's PID namespace
  bool killed = false;     // its process exited without detaching
  std::uint64_t lost = 0;  // its claims never published (killed between claim and publish)
};

namespace detail {

inline constexpr std::uint64_t kMagic = 0x534C554943453031ULL;  // "SLUICE01"

constexpr std::size_t RoundUp(std::size_t value, std::size_t alignment) noexcept {
  return (value + alignment - 1) / alignment * alignment;
}

enum SegmentState : std::uint32_t { kOpen = 1, kClosed = 2 };
enum LaneState : std::uint32_t { kLaneFree = 0, kLaneOwned = 1, kLaneDetached = 2 };

// The consumer's identity in the segment, which a consumer taking over a
// segment rewrites while producers may read it: a sequence lock of
// atomics. SYNC POINT (I): the writer makes `generation` odd, stores the
// fields with release (each after the odd value), then makes it even again
// with release; a reader loads it with acquire, the fields with acquire
// (so that a field written by a later writer brings its odd value along),
// then `generation` again, and keeps what it read only if both loads saw
// the same even value. No fences: ThreadSanitizer checks it as it is.
struct ConsumerIdentity {
  std::atomic<std::uint32_t> generation;
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint64_t> start_time;
  std::atomic<std::uint64_t> pid_namespace;

  void Store(const ProcessIdentity& identity) noexcept {
    const std::uint32_t odd = generation.load(std::memory_order_relaxed) | 1u;
    generation.store(odd, std::memory_order_relaxed);
    pid.store(identity.pid, std::memory_order_release);
    start_time.store(identity.start_time, std::memory_order_release);
    pid_namespace.store(identity.pid_namespace, std::memory_order_release);
    generation.store(odd + 1, std::memory_order_release);
  }
  // False while a writer is inside Store (try again later).
  bool Load(ProcessIdentity* identity) const noexcept {
    const std::uint32_t before = generation.load(std::memory_order_acquire);
    if ((before & 1u) != 0) return false;
    ProcessIdentity read;
    read.pid = pid.load(std::memory_order_acquire);
    read.start_time = start_time.load(std::memory_order_acquire);
    read.pid_namespace = pid_namespace.load(std::memory_order_acquire);
    if (generation.load(std::memory_order_relaxed) != before) return false;
    *identity = read;
    return true;
  }
  // Whether the consumer is known to have exited (a reader racing a
  // takeover counts it as running).
  bool IsGone() const noexcept {
    ProcessIdentity identity;
    return Load(&identity) && identity.IsGone();
  }
};

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

  struct alignas(kCacheLineSize) LaneControl {
    std::atomic<std::uint32_t> state;  // LaneState: (U)
    ProcessIdentity owner;             // written before kLaneOwned
    RoomSignal room;                   // the owner's PublishBlocking waits here: (W)
    // Bit b: loan block b is free. The owner takes, the consumer gives back: (P).
    alignas(kCacheLineSize) std::atomic<std::uint64_t> loans_free;
    // The owner's threads count refusals here (relaxed: tallies). Their own
    // line. Publishes are not counted: each claimed one slot of its ring,
    // and the consumer reads the rings' claims (GetStatistics).
    alignas(kCacheLineSize) std::atomic<std::uint64_t> dropped[kPriorityCount];
  };

  struct alignas(kCacheLineSize) Header {
    std::atomic<std::uint64_t> magic;  // kMagic once ready: (T)
    Fingerprint fingerprint;
    ConsumerIdentity consumer;  // who dispatches: (I)
    AdmissionThresholds thresholds;
    std::uint64_t peer_check_nanoseconds;  // how long a wait sleeps between looks
    std::atomic<std::uint32_t> state;
    std::atomic<std::uint64_t> lanes_active;  // bit l: lane l has an owner: (U)
    Signal consumer_wake;                     // ProcessBatchWait sleeps here: (W)
    LaneControl lanes[kLanes];
  };

  static constexpr std::size_t kRingsAlign = alignof(Rings) > kCacheLineSize ? alignof(Rings)
                                                                             : kCacheLineSize;
  using Loans = LoanShape<Payload>;
  static constexpr std::size_t kLoanBlocks = Loans::kAny ? Traits::kLoanBlocks : 0;
  static_assert(!Loans::kAny || (Traits::kLoanBlocks >= 1 && Traits::kLoanBlocks <= 64),
                "Sluice: ShmBusTraits::kLoanBlocks must be 1 to 64");
  static constexpr std::size_t kLaneAlign =
      kRingsAlign > Loans::kAlign ? kRingsAlign : Loans::kAlign;
  // A lane: its rings, then its loan blocks.
  static constexpr std::size_t kLoansOffset = RoundUp(sizeof(Rings), Loans::kAlign);
  static constexpr std::size_t kLaneStride =
      RoundUp(kLoansOffset + kLoanBlocks * Loans::kBlockBytes, kLaneAlign);
  static constexpr std::size_t kLanesOffset = RoundUp(sizeof(Header), kLaneAlign);
  static constexpr std::size_t kSegmentSize = RoundUp(kLanesOffset + kLanes * kLaneStride, 4096);
  static_assert(kLaneAlign <= 4096, "Sluice: a loaned type may be aligned to at most a page");

  static Fingerprint Expected() {
    return MakeFingerprint<Payload, kCapacity, Envelope, Rings>(
        kSegmentSize, Traits::kSchemaVersion, static_cast<std::uint32_t>(kLanes), kLoanBlocks,
        Loans::kBlockBytes);
  }
  static Header* HeaderOf(void* base) noexcept { return static_cast<Header*>(base); }
  // `lane` < kLanes (callers bound it).
  static void* LaneAt(void* base, std::size_t lane) noexcept {
    return static_cast<unsigned char*>(base) + kLanesOffset + lane * kLaneStride;
  }
  static Rings* RingsOf(void* base, std::size_t lane) noexcept {
    return std::launder(reinterpret_cast<Rings*>(LaneAt(base, lane)));
  }
  // `block` < kLoanBlocks (callers bound it).
  static void* LoanBlock(void* base, std::size_t lane, std::size_t block) noexcept {
    return static_cast<unsigned char*>(LaneAt(base, lane)) + kLoansOffset +
           block * Loans::kBlockBytes;
  }
};

inline int LowestBit(std::uint64_t bits) noexcept { return __builtin_ctzll(bits); }

}  // namespace detail

// The consumer: creates the segment and dispatches what producer processes
// publish, HIGH first. One thread dispatches (ProcessBatch,
// ProcessBatchWith, CheckProducers); Subscribe and Unsubscribe are safe from
// any thread of this process. Not movable (subscriptions point into it).
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmBus {
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using LaneControl = typename LayoutType::LaneControl;
  using Queue = typename LayoutType::Queue;
  using Rings = typename LayoutType::Rings;
  static constexpr std::size_t kLanes = LayoutType::kLanes;

 public:
  using Envelope = MessageEnvelope<Payload>;
  static constexpr std::size_t kSegmentSize = LayoutType::kSegmentSize;

  ShmBus() noexcept = default;
  ShmBus(const ShmBus&) = delete;
  ShmBus& operator=(const ShmBus&) = delete;
  ~ShmBus() { Close(); }

  // Creates the segment `name` ("/name") and opens the bus. A segment of
  // that name left by a consumer that exited (or was killed) is removed
  // and made again, or taken over; one whose consumer still runs is
  // kConsumerExists; one of another user or group, or of a wider mode than
  // `options.permissions`, is kUntrustedSegment.
  //
  // The protocol (tests/spin/segment_create.pml): the new segment is made
  // whole and unnamed, then linked under the name, which fails while the
  // name is taken; a taken name is judged under the lock of the segment it
  // names, rechecked to name it still, and removed or taken over while
  // that lock is held. So no half-made segment is ever named, a consumer
  // killed at any step leaves the name made, stale or free (never stuck),
  // and two consumers are never both told that they made or took it.
  [[nodiscard]] AttachError Create(const std::string& name, const ShmBusOptions& options = {}) {
    if (header_ != nullptr) return AttachError::kConsumerExists;
    if (!options.thresholds.IsValid() || options.peer_check_interval.count() < 0) {
      return AttachError::kBadOptions;
    }
    if (!IsSegmentName(name)) return AttachError::kBadName;
    AttachError error = Segment::CreateUnnamed(kSegmentSize, options.permissions, &segment_);
    if (error != AttachError::kNone) return error;
    void* base = segment_.Base();
    header_ = new (base) Header();
    header_->fingerprint = LayoutType::Expected();
    header_->consumer.Store(ProcessIdentity::Self());
    header_->thresholds = options.thresholds;
    header_->peer_check_nanoseconds = static_cast<std::uint64_t>(SleepSlice(options).count());
    header_->state.store(detail::kOpen, std::memory_order_relaxed);
    for (std::size_t lane = 0; lane < kLanes; ++lane) ResetLane(lane);
    // SYNC POINT WRITE (T): the header and rings above, before any attach
    // (the name, below, is what lets a producer find the segment at all).
    header_->magic.store(detail::kMagic, std::memory_order_release);
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kMade);
    // A name that comes free between two looks (its consumer closed) is
    // tried again, a few times: each retry means another consumer moved.
    for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
      error = segment_.Link(name);
      if (error == AttachError::kNone) {
        SLUICE_IPC_CREATE_STEP(detail::CreateStep::kLinked);
        Begin(name, options);
        return AttachError::kNone;
      }
      if (error != AttachError::kConsumerExists) break;
      SLUICE_IPC_CREATE_STEP(detail::CreateStep::kNameTaken);
      Segment old;  // locked while its name is judged, removed and made again
      const NameVerdict verdict = JudgeName(name, options.permissions, &old, &error);
      if (verdict == NameVerdict::kRetry) continue;
      if (verdict == NameVerdict::kTakeOver) {
        Discard();
        return TakeOver(name, std::move(old), options);
      }
      if (verdict == NameVerdict::kReplace) {
        // Still under the old segment's lock: a consumer that judged it
        // too finds the name made anew when it gets the lock.
        error = segment_.Link(name);
        if (error == AttachError::kNone) {
          SLUICE_IPC_CREATE_STEP(detail::CreateStep::kLinked);
          Begin(name, options);
          return AttachError::kNone;
        }
      }
      break;  // kRefuse, or a consumer made the name between unlink and link
    }
    Discard();
    return error == AttachError::kNone ? AttachError::kNotReady : error;
  }

  // Whether Create took over a segment whose consumer had been killed (its
  // queued messages are dispatched by this one) rather than making one.
  bool TookOver() const noexcept { return took_over_; }

  // Closes the bus: producers' publishes are refused (kClosed) from now on,
  // and producers waiting for room are woken; the name is removed (the
  // memory goes with the last mapping). What is still queued is not
  // dispatched. Then Create may be called again; GetStatistics keeps the
  // closed bus's figures until then. From a child forked after Create (a
  // copy of this object), it only unmaps: the bus is the parent's.
  void Close() noexcept {
    if (header_ == nullptr) return;
    if (::getpid() == creator_) {
      // (X): the state, then the cursors; a refused producer asks its
      // cursor too, so a refusal by a closed cursor says kClosed whichever
      // it sees first.
      header_->state.store(detail::kClosed, std::memory_order_relaxed);
      for (auto& lane : lanes_) (void)lane.queue->Close();
      // SYNC POINT WRITE (W): the state, then every producer waiting for
      // room wakes to read it.
      sluice::detail::FullFence();
      for (LaneControl& control : header_->lanes) control.room.WakeIfWaiting();
      totals_ = GetStatistics();
      // The name is removed only while it is still this segment's (under
      // the lock a consumer making the name again takes). A lock held for
      // over a second (by any process that can open the segment) leaves
      // the name: closed, it is the next Create's to replace.
      if (segment_.TryLockFor(1000)) {
        if (segment_.IsNamed(name_)) Segment::Unlink(name_);
        segment_.Unlock();
      }
    }
    segment_ = Segment();
    header_ = nullptr;
    for (auto& lane : lanes_) lane.Clear();
    gone_ = 0;
  }

  bool IsOpen() const noexcept { return header_ != nullptr; }

  // ---- Subscriptions (any thread of this process) -----------------------------

  template <typename T, typename Callback>
  [[nodiscard]] SubscriptionHandle Subscribe(Callback&& callback) {
    return registry_.template Subscribe<T>(std::forward<Callback>(callback));
  }
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return registry_.Unsubscribe(handle, epoch_);
  }

  // Called on the consumer thread, from ProcessBatch, each time a
  // producer's lane is handed back (after its last message was taken).
  // Set it before dispatching.
  void OnProducerExit(std::function<void(const ProducerExit&)> handler) {
    on_exit_ = std::move(handler);
  }

  // ---- Dispatch (the consumer thread) -------------------------------------------

  // Dispatches up to `max_messages` to the subscribers of each message's
  // type; returns how many were taken from the queue (corrupt ones too).
  std::uint32_t ProcessBatch(std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this](const Envelope& envelope) {
      registry_.Dispatch(envelope, [this](const char*) { ++callback_errors_; });
    });
  }

  // As the in-process bus's ProcessBatchWith: the visitor takes (const T&)
  // or (const T&, const MessageHeader&) for every alternative, or the
  // envelope. A visitor that throws is counted; the batch goes on.
  template <typename Visitor>
  std::uint32_t ProcessBatchWith(Visitor&& visitor, std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this, &visitor](const Envelope& envelope) {
#if SLUICE_HAS_EXCEPTIONS
      try {
        sluice::detail::VisitEnvelope<Payload>(visitor, envelope);
      } catch (...) {
        ++callback_errors_;
      }
#else
      (void)callback_errors_;  // nothing throws
      sluice::detail::VisitEnvelope<Payload>(visitor, envelope);
#endif
    });
  }

  // As ProcessBatch, but when nothing is queued it waits up to `timeout`
  // for a message: it polls kPollsBeforePark times, then sleeps on a futex
  // in the segment until a publish wakes it (no lost wake-up: (W)), in
  // slices of the producer check interval. Returns how many it took: 0
  // when the timeout passed with nothing queued, or when closed.
  template <typename Rep, typename Period>
  std::uint32_t ProcessBatchWait(std::chrono::duration<Rep, Period> timeout,
                                 std::uint32_t max_messages = kCapacity) {
    if (max_messages == 0) return 0;
    return RunWaiting(sluice::detail::SaturatingNanos(timeout),
                      [&] { return ProcessBatch(max_messages); });
  }

  // As ProcessBatchWith, waiting as ProcessBatchWait does.
  template <typename Visitor, typename Rep, typename Period>
  std::uint32_t ProcessBatchWithWait(Visitor&& visitor, std::chrono::duration<Rep, Period> timeout,
                                     std::uint32_t max_messages = kCapacity) {
    if (max_messages == 0) return 0;
    return RunWaiting(sluice::detail::SaturatingNanos(timeout),
                      [&] { return ProcessBatchWith(visitor, max_messages); });
  }

  // Looks now for producers that left: a lane whose process exited without
  // detaching (killed), or that detached. Their published messages are
  // still dispatched; then their claims never published are skipped and
  // counted lost, and the lane is handed back (OnProducerExit). ProcessBatch
  // calls it itself (ShmBusOptions::peer_check_interval).
  void CheckProducers() {
    if (header_ == nullptr) return;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const std::uint64_t bit = std::uint64_t{1} << lane;
      if ((gone_ & bit) != 0) continue;
      const LaneControl& control = header_->lanes[lane];
      // SYNC POINT READ (U): the owner's identity, or its last publishes.
      const std::uint32_t state = control.state.load(std::memory_order_acquire);
      if (state == detail::kLaneDetached) {
        lanes_[lane].killed = false;
      } else if (state == detail::kLaneOwned) {
        const ProcessIdentity owner = control.owner;
        if (!owner.IsGone()) continue;
        // A killed owner stored nothing with release on its way out; its
        // stores are ordered before this by the kernel: it had exited (every
        // store of its last instructions done, the exit path fenced) before
        // /proc said so, and that read was a system call of this thread.
        // The fence keeps the compiler from moving the lane's reads above it.
        std::atomic_signal_fence(std::memory_order_seq_cst);
        lanes_[lane].killed = true;
      } else {
        continue;  // free (or a value no producer writes: left alone)
      }
      lanes_[lane].pid = control.owner.pid;
      gone_ |= bit;
    }
    if (gone_ != 0) TendGoneLanes();
  }

  // ---- Observation ---------------------------------------------------------------

  // Messages admitted and not yet taken, in every lane (0 when closed).
  std::size_t QueueDepth() const noexcept {
    if (header_ == nullptr) return 0;
    std::size_t depth = 0;
    for (const auto& lane : lanes_) depth += static_cast<std::size_t>(lane.queue->Depth());
    return depth;
  }

  ShmBusStatistics GetStatistics() const noexcept {
    ShmBusStatistics s = totals_;
    s.processed = processed_;
    s.corrupt = corrupt_;
    s.callback_errors = callback_errors_;
    if (header_ == nullptr) return s;  // closed: as it was at Close
    s.producers_attached = totals_.producers_killed + totals_.producers_detached;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const LaneControl& control = header_->lanes[lane];
      if (control.state.load(std::memory_order_relaxed) == detail::kLaneFree) continue;
      ++s.producers_attached;  // held, or left and not yet handed back
      const ConsumerLane& consumer = lanes_[lane];
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        // Each admission claimed one slot of its priority's ring; claims
        // skipped after their owner left are lost, not published (as when
        // the lane is handed back, TendGoneLanes).
        const Position claims = consumer.queue->RingClaims(p);
        const Position skipped = consumer.skipped[p] < claims ? consumer.skipped[p] : claims;
        s.published[p] += claims - skipped;
        s.dropped[p] += control.dropped[p].load(std::memory_order_relaxed);
      }
    }
    return s;
  }

 private:
  // The consumer's side of one lane.
  struct ConsumerLane {
    std::optional<Queue> queue;             // its view of the lane's rings
    Position skipped[kPriorityCount] = {};  // claims skipped since its owner left
    std::int32_t pid = 0;                   // the owner that left
    bool killed = false;
    void Clear() noexcept {
      queue.reset();  // a view holds references: made again, never assigned
      for (Position& count : skipped) count = 0;
      pid = 0;
      killed = false;
    }
  };

  // What Create does about a name that another segment holds.
  enum class NameVerdict {
    kRefuse,    // *error says why
    kRetry,     // the name came free, or names another segment now: link again
    kReplace,   // stale and removed: link ours (`old` stays locked meanwhile)
    kTakeOver,  // its consumer was killed, same layout: take it (`old` locked)
  };
  static constexpr int kCreateAttempts = 8;

  // Judges the segment `name` names, under its lock (`old`, locked when the
  // verdict is kReplace or kTakeOver; the lock goes with `old`).
  NameVerdict JudgeName(const std::string& name, const SegmentPermissions& permissions,
                        Segment* old, AttachError* error) {
    // Looked at before it is opened: another user's file, or one that is
    // no segment, is refused untouched (a non-root consumer could not even
    // open another user's 0600 segment, which would say kPermissionDenied).
    *error = Segment::Inspect(name, permissions);
    if (*error == AttachError::kNone)
      *error = Segment::Open(name, sizeof(Header), old, &permissions);
    if (*error == AttachError::kNotFound) return NameVerdict::kRetry;  // removed meanwhile
    // Too small or of another user: not ours, left alone; empty: being
    // made by a program that is not Sluice (kNotReady).
    if (*error != AttachError::kNone) return NameVerdict::kRefuse;
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kOpened);
    *error = AttachError::kSystemError;
    if (!old->Lock()) return NameVerdict::kRefuse;
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kLocked);
    // Judged or replaced by another consumer before we had the lock.
    if (!old->IsNamed(name)) return NameVerdict::kRetry;
    const Header* header = LayoutType::HeaderOf(old->Base());
    // (T): the identity is read only from a segment whose creator finished.
    const std::uint64_t magic = header->magic.load(std::memory_order_acquire);
    // Sluice names a segment only once it is stamped: one without the
    // stamp is another program's, or half written by one.
    *error = AttachError::kNotReady;
    if (magic == 0) return NameVerdict::kRefuse;
    *error = AttachError::kNotASegment;  // someone else's
    if (magic != detail::kMagic) return NameVerdict::kRefuse;
    // (I): consumers write the identity only under this lock, which is ours
    // now: one seen half written was being written by a consumer that died.
    ProcessIdentity consumer;
    const bool gone = !header->consumer.Load(&consumer) || consumer.IsGone();
    // Read after `gone`: only a live owner closes (Close stores the state
    // before it takes this lock), so once it is seen gone the state can
    // change no more. Read before, a consumer killed inside Close between
    // the two reads would have its closed segment taken over, and a third
    // consumer would then replace it under its new owner
    // (tests/spin/segment_create.pml, planted bug 7).
    const bool closed = header->state.load(std::memory_order_relaxed) == detail::kClosed;
    *error = AttachError::kConsumerExists;
    if (!closed && !gone) return NameVerdict::kRefuse;
    *error = AttachError::kNone;
    // A consumer that was killed (not closed), of this very layout: its
    // queue is taken over, not thrown away.
    if (!closed && LayoutType::Expected().Compare(header->fingerprint) == AttachError::kNone &&
        old->Size() >= kSegmentSize) {
      return NameVerdict::kTakeOver;
    }
    Segment::Unlink(name);
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kUnlinked);
    return NameVerdict::kReplace;
  }

  // Drops the segment Create made and did not name (nothing else saw it).
  void Discard() noexcept {
    segment_ = Segment();
    header_ = nullptr;
    for (auto& lane : lanes_) lane.Clear();
  }

  // Takes over the segment `old` (locked) of a consumer that was killed:
  // every lane, queued message and producer as it left them. Its
  // thresholds and permissions stay; `options` gives the check interval.
  AttachError TakeOver(const std::string& name, Segment old, const ShmBusOptions& options) {
    segment_ = std::move(old);
    header_ = LayoutType::HeaderOf(segment_.Base());
    header_->consumer.Store(ProcessIdentity::Self());
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kIdentityWritten);
    header_->peer_check_nanoseconds = static_cast<std::uint64_t>(SleepSlice(options).count());
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      lanes_[lane].Clear();
      lanes_[lane].queue.emplace(LayoutType::RingsOf(segment_.Base(), lane));
      // The killed consumer may have been inside a release.
      lanes_[lane].queue->TakeOverConsumer();
    }
    // The killed consumer may have been counted asleep.
    header_->consumer_wake.ForgetWaiters();
    Begin(name, options);
    took_over_ = true;
    totals_.taken_over = QueueDepth();
    segment_.Unlock();
    return AttachError::kNone;
  }

  // What Create and TakeOver both set, in this process.
  void Begin(const std::string& name, const ShmBusOptions& options) {
    totals_ = ShmBusStatistics();
    processed_ = 0;
    corrupt_ = 0;
    callback_errors_ = 0;
    took_over_ = false;
    creator_ = ::getpid();
    check_interval_ = options.peer_check_interval;
    sleep_slice_ = SleepSlice(options);
    last_check_ = std::chrono::steady_clock::now();
    name_ = name;
  }

  // 1 ms to an hour.
  static std::chrono::nanoseconds SleepSlice(const ShmBusOptions& options) noexcept {
    if (options.peer_check_interval < std::chrono::milliseconds(1)) {
      return std::chrono::milliseconds(1);
    }
    return options.peer_check_interval > std::chrono::hours(1) ? std::chrono::hours(1)
                                                               : options.peer_check_interval;
  }

  // Constructs lane `lane`'s rings and counters anew and makes its queue
  // view; the lane is free afterwards (SYNC POINT WRITE (U)).
  void ResetLane(std::size_t lane) noexcept {
    void* base = segment_.Base();
    LaneControl& control = header_->lanes[lane];
    new (LayoutType::LaneAt(base, lane)) Rings(0);
    // A producer killed while it waited for room left itself counted, and
    // its loans taken.
    new (&control.room) typename LayoutType::RoomSignal();
    control.loans_free.store(detail::AllBlocks(LayoutType::kLoanBlocks), std::memory_order_relaxed);
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      control.dropped[p].store(0, std::memory_order_relaxed);
    }
    lanes_[lane].Clear();
    lanes_[lane].queue.emplace(LayoutType::RingsOf(base, lane));
    control.state.store(detail::kLaneFree, std::memory_order_release);
  }

  // Lanes whose owner left: moves past the claims it never published at
  // each ring's front (what it published is dispatched as usual), and
  // hands each lane with nothing left back. Re-entered from the exit
  // handler (which may call CheckProducers or Close), it does nothing: the
  // outer call reads `gone_` afresh for each lane. Nor from a callback
  // during a batch: the batch may hold blocks of a lane still to give back
  // (the next batch, or the end of this one, hands the lane on).
  void TendGoneLanes() {
    if (tending_ || dispatching_) return;
    tending_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{tending_};
    for (std::size_t lane = 0; lane < kLanes && header_ != nullptr; ++lane) {
      const std::uint64_t bit = std::uint64_t{1} << lane;
      if ((gone_ & bit) == 0) continue;
      ConsumerLane& consumer = lanes_[lane];
      consumer.queue->SkipUnpublishedFronts(consumer.skipped);
      // Claims more than a ring holds: rings written wrong, which would never
      // drain. Handed on now, what they held counted corrupt.
      if (consumer.queue->HasImpossibleClaims()) {
        ++corrupt_;
      } else if (!consumer.queue->IsDrained()) {
        continue;
      }
      // Its owner can claim no more: each ring's claims are exactly its
      // publishes and the claims skipped.
      LaneControl& control = header_->lanes[lane];
      ProducerExit exit;
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        const Position claims = consumer.queue->RingClaims(p);
        const Position skipped = consumer.skipped[p] < claims ? consumer.skipped[p] : claims;
        totals_.published[p] += claims - skipped;
        totals_.dropped[p] += control.dropped[p].load(std::memory_order_relaxed);
        exit.lost += skipped;
      }
      totals_.lost += exit.lost;
      ++(consumer.killed ? totals_.producers_killed : totals_.producers_detached);
      exit.lane = static_cast<std::uint16_t>(lane + 1);
      exit.pid = consumer.pid;
      exit.killed = consumer.killed;
      // Off the active set before it is free, so that the next owner's bit
      // is not cleared after it was set.
      header_->lanes_active.fetch_and(~bit, std::memory_order_relaxed);
      gone_ &= ~bit;
      ResetLane(lane);
      if (on_exit_) {
#if SLUICE_HAS_EXCEPTIONS
        try {
          on_exit_(exit);
        } catch (...) {
          ++callback_errors_;
        }
#else
        on_exit_(exit);
#endif
      }
    }
  }

  // The front of the lane to take from next: the highest priority published
  // in any lane not held (a claim above it in the same lane not yet
  // published: the in-process rule, per lane, since only one process's
  // threads can order their publishes); ties go round the lanes.
  Envelope* Next(std::uint64_t active, std::size_t* lane) noexcept {
    if (active == 0) return nullptr;
    if ((active & (active - 1)) == 0) {
      *lane = static_cast<std::size_t>(detail::LowestBit(active));
      return lanes_[*lane].queue->TryFront();
    }
    int best = -1;
    for (std::size_t i = 1; i <= kLanes; ++i) {
      const std::size_t candidate = (last_lane_ + i) % kLanes;
      if ((active & (std::uint64_t{1} << candidate)) == 0) continue;
      int held = -1;
      const int priority = lanes_[candidate].queue->ReadyPriority(&held);
      if (priority > best && held < priority) {
        best = priority;
        *lane = candidate;
      }
    }
    if (best < 0) return nullptr;
    last_lane_ = *lane;
    return lanes_[*lane].queue->TryFront();
  }

  // A loaned message: points it at its block in this process's mapping, if
  // the block number is one of the lane's; its bit in *loan. False when it
  // is not (the message is corrupt).
  bool BindLoan(Envelope* envelope, std::size_t lane, std::uint64_t* loan) noexcept {
    return std::visit(
        [&](auto& message) {
          using Message = std::decay_t<decltype(message)>;
          if constexpr (detail::IsLoaned<Message>::value) {
            if (message.block_ >= LayoutType::kLoanBlocks) return false;
            message.data_ = std::launder(reinterpret_cast<const typename Message::Type*>(
                LayoutType::LoanBlock(segment_.Base(), lane, message.block_)));
            *loan = std::uint64_t{1} << message.block_;
          }
          return true;
        },
        envelope->payload);
  }

  // Gives the dispatched blocks in *blocks back to lane `lane`'s producer.
  void ReturnLoans(std::size_t lane, std::uint64_t* blocks) noexcept {
    if (*blocks == 0 || header_ == nullptr) return;
    // SYNC POINT WRITE (P): the subscribers' reads of the blocks, before
    // their next taker's writes.
    header_->lanes[lane].loans_free.fetch_or(*blocks, std::memory_order_release);
    *blocks = 0;
  }

  // Whether a batch would find something to do: a message to take, or a
  // lane whose owner left still to tend. SYNC POINT READ (W) in a waiter's
  // re-check: the slot's acquire load, after the announcement's fence.
  bool HasWork() noexcept {
    if (gone_ != 0) return true;
    std::size_t lane = 0;
    return Next(header_->lanes_active.load(std::memory_order_acquire) & LayoutType::kAllLanes,
                &lane) != nullptr;
  }

  template <typename Batch>
  std::uint32_t RunWaiting(std::chrono::nanoseconds timeout, Batch&& batch) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
    const std::chrono::nanoseconds slice = sleep_slice_;
    for (;;) {
      if (header_ == nullptr || dispatching_) return 0;
      if (const std::uint32_t taken = batch()) return taken;
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return 0;
      const std::chrono::nanoseconds left = deadline - now;
      // This thread is the signal's only waiter, and not counted now: a
      // count left by a killed consumer (or written by anyone) is wrong.
      if (header_->consumer_wake.Waiters() != 0) header_->consumer_wake.ForgetWaiters();
      (void)sluice::detail::WaitUntil(
          header_->consumer_wake, Traits::kPollsBeforePark, left < slice ? left : slice,
          [this] { return HasWork(); }, [] { return false; });
    }
  }

  template <typename Deliver>
  std::uint32_t Run(std::uint32_t max_messages, Deliver&& deliver) {
    // Inside a callback of this bus: no batch (as in process).
    if (header_ == nullptr || dispatching_) return 0;
    if (gone_ != 0) TendGoneLanes();  // (its exit handler may close the bus)
    if (header_ == nullptr) return 0;
    dispatching_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{dispatching_};
    std::uint32_t taken = 0;
    epoch_.Enter();
    std::uint64_t touched = 0;  // lanes that got room
    std::size_t returning_lane = 0;
    std::uint64_t returning = 0;  // loan blocks of returning_lane dispatched
    while (taken < max_messages && header_ != nullptr) {
      // SYNC POINT READ (U): the lanes taken, before their rings are read;
      // for every message, so that a lane taken during the batch has its
      // HIGH taken first too.
      const std::uint64_t active =
          header_->lanes_active.load(std::memory_order_acquire) & LayoutType::kAllLanes;
      std::size_t lane = 0;
      Envelope* front = Next(active, &lane);
      if (front == nullptr) break;
      // The copy is what gets checked and dispatched: the slot is memory
      // other processes can write. Freed at once for the producers.
      alignas(Envelope) unsigned char bytes[sizeof(Envelope)];
      std::memcpy(bytes, static_cast<const void*>(front), sizeof(Envelope));
      lanes_[lane].queue->PopFront();
      touched |= std::uint64_t{1} << lane;
      ++taken;
      Envelope& envelope = *std::launder(reinterpret_cast<Envelope*>(bytes));
      if (envelope.payload.index() >= std::variant_size_v<Payload> ||
          static_cast<std::size_t>(envelope.header.priority) >= kPriorityCount) {
        ++corrupt_;
        continue;
      }
      // Fields a writer could leave as any byte, set to what they mean
      // here: `counted` is a bool (only 0 and 1 are values); `lane` says
      // which producer's lane the message came through.
      std::memset(static_cast<void*>(&envelope.header.counted), 1, sizeof(bool));
      envelope.header.lane = static_cast<std::uint16_t>(lane + 1);
      std::uint64_t loan = 0;  // the block a loaned message names, as a bit
      if constexpr (LayoutType::Loans::kAny) {
        if (!BindLoan(&envelope, lane, &loan)) {
          ++corrupt_;
          continue;
        }
      }
      ++processed_;
      deliver(envelope);
      if constexpr (LayoutType::Loans::kAny) {
        // Blocks go back a lane at a time: one read-modify-write of the
        // lane's mask (a line its producer writes too) per run of messages
        // of one lane, not per message.
        if (loan != 0) {
          if (lane != returning_lane) ReturnLoans(returning_lane, &returning);
          returning_lane = lane;
          returning |= loan;
        }
      }
    }
    if constexpr (LayoutType::Loans::kAny) ReturnLoans(returning_lane, &returning);
    registry_.ReclaimDeferred();
    epoch_.Exit();
    if (header_ == nullptr) return taken;  // a callback closed the bus
    if (touched != 0) {
      // SYNC POINT WRITE/READ (W), notifying side: the releases above, a
      // full fence, then the waiter counts of the lanes that got room.
      sluice::detail::FullFence();
      for (; touched != 0; touched &= touched - 1) {
        header_->lanes[detail::LowestBit(touched)].room.WakeIfWaiting();
      }
    }
    dispatching_ = false;  // callbacks done: lanes may be handed back
    if (taken == 0 || ++batches_since_check_ >= kBatchesPerCheck) {
      batches_since_check_ = 0;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_check_ >= check_interval_) {
        last_check_ = now;
        CheckProducers();
      }
    }
    return taken;
  }

  static constexpr std::uint32_t kBatchesPerCheck = 4096;

  Segment segment_;
  Header* header_ = nullptr;
  ConsumerLane lanes_[kLanes];
  std::uint64_t gone_ = 0;    // bit l: lane l's owner left, its lane not yet handed back
  bool tending_ = false;      // inside TendGoneLanes
  bool dispatching_ = false;  // inside a batch (its callbacks included)
  pid_t creator_ = 0;         // the process that called Create
  bool took_over_ = false;    // Create took over a killed consumer's segment
  std::size_t last_lane_ = 0;
  std::string name_;
  sluice::detail::SubscriptionRegistry<Payload, Traits> registry_;
  sluice::detail::DispatchEpoch epoch_;
  std::function<void(const ProducerExit&)> on_exit_;
  std::chrono::nanoseconds check_interval_{0};
  std::chrono::nanoseconds sleep_slice_{0};
  std::chrono::steady_clock::time_point last_check_{};
  std::uint32_t batches_since_check_ = 0;
  // The consumer thread's tallies, plain: GetStatistics reads them, so it is
  // for the consumer thread too (from another thread it would be a data race).
  std::uint64_t processed_ = 0;
  std::uint64_t corrupt_ = 0;
  std::uint64_t callback_errors_ = 0;
  ShmBusStatistics totals_;  // of lanes handed back
};

// A producer's handle on a bus segment: attaches (checking the
// fingerprint), takes a lane of its own, and publishes into it with
// priority admission. Publish is lock-free and safe from any thread of
// this process. Movable; detaches when destroyed. Not for a forked child
// (attach there anew): the lane belongs to the process that attached.
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmProducer {
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using LaneControl = typename LayoutType::LaneControl;
  using Queue = typename LayoutType::Queue;
  static constexpr std::size_t kLanes = LayoutType::kLanes;

 public:
  using Envelope = MessageEnvelope<Payload>;

  ShmProducer() noexcept = default;
  ShmProducer(ShmProducer&& other) noexcept { *this = std::move(other); }
  ShmProducer& operator=(ShmProducer&& other) noexcept {
    if (this != &other) {
      Detach();
      segment_ = std::move(other.segment_);
      header_ = std::exchange(other.header_, nullptr);
      control_ = std::exchange(other.control_, nullptr);
      lane_ = std::exchange(other.lane_, 0);
      fence_free_ = other.fence_free_;
      attacher_ = other.attacher_;
      loan_home_ = std::move(other.loan_home_);
      sleep_slice_ = other.sleep_slice_;
      // A view holds references into the mapping, which did not move.
      if (other.queue_) queue_.emplace(LayoutType::RingsOf(segment_.Base(), lane_ - 1u));
      other.queue_.reset();
      for (std::size_t p = 0; p < kPriorityCount; ++p) limits_[p] = other.limits_[p];
    }
    return *this;
  }
  ~ShmProducer() { Detach(); }

  // Maps the segment, checks that it is a ready Sluice bus of this
  // payload, capacity and layout whose consumer runs, and takes a free
  // lane; on any refusal nothing stays mapped and the error says why.
  [[nodiscard]] AttachError Attach(const std::string& name) {
    Detach();
    Segment segment;
    const AttachError opened = Segment::Open(name, sizeof(Header), &segment);
    if (opened != AttachError::kNone) return opened;
    Header* header = LayoutType::HeaderOf(segment.Base());
    // SYNC POINT READ (T): see ShmBus::Create.
    const std::uint64_t magic = header->magic.load(std::memory_order_acquire);
    if (magic == 0) return AttachError::kNotReady;
    if (magic != detail::kMagic) return AttachError::kNotASegment;
    const AttachError differs = LayoutType::Expected().Compare(header->fingerprint);
    if (differs != AttachError::kNone) return differs;
    // The fingerprint matched ours, so its size is ours; the mapping must
    // hold it (a segment that lies about its size is refused here).
    if (segment.Size() < LayoutType::kSegmentSize) return AttachError::kNotASegment;
    if (header->state.load(std::memory_order_relaxed) != detail::kOpen ||
        header->consumer.IsGone()) {
      return AttachError::kConsumerGone;
    }
    const AdmissionThresholds thresholds = header->thresholds;
    if (!thresholds.IsValid()) return AttachError::kNotASegment;
    // Producers take lanes in turn; the kernel drops a dead taker's lock.
    if (!segment.Lock()) return AttachError::kSystemError;
    std::size_t lane = kLanes;
    for (std::size_t l = 0; l < kLanes && lane == kLanes; ++l) {
      // SYNC POINT READ (U): a free lane's rings as the consumer reset them.
      if (header->lanes[l].state.load(std::memory_order_acquire) == detail::kLaneFree) lane = l;
    }
    if (lane == kLanes) {
      segment.Unlock();
      return AttachError::kNoFreeLane;
    }
    LaneControl& control = header->lanes[lane];
    control.owner = ProcessIdentity::Self();
    // SYNC POINT WRITE (U): the owner, before the consumer judges it; then
    // the lane's bit, before any publish into it.
    control.state.store(detail::kLaneOwned, std::memory_order_release);
    header->lanes_active.fetch_or(std::uint64_t{1} << lane, std::memory_order_release);
    segment.Unlock();
    limits_[0] = FillLimit(thresholds.low_percent, kCapacity);
    limits_[1] = FillLimit(thresholds.medium_percent, kCapacity);
    limits_[2] = FillLimit(thresholds.high_percent, kCapacity);
    // 1 ms to an hour, whatever the segment says (one written wrong must
    // neither make a wait spin nor keep it from looking for the consumer).
    const std::uint64_t slice = header->peer_check_nanoseconds;
    sleep_slice_ = std::chrono::nanoseconds(
        static_cast<std::chrono::nanoseconds::rep>(slice < kMinSliceNanos   ? kMinSliceNanos
                                                   : slice > kMaxSliceNanos ? kMaxSliceNanos
                                                                            : slice));
    // Publishes skip their fence only if the consumer's sleep fences this
    // process too (both registered for the heavy fence).
    fence_free_ = header->consumer_wake.Asymmetric() && SharedFutexParker::RegisterProcess();
    segment_ = std::move(segment);
    header_ = header;
    control_ = &control;
    lane_ = static_cast<std::uint16_t>(lane + 1);
    attacher_ = ::getpid();
    if constexpr (LayoutType::kLoanBlocks != 0) {
      loan_home_ = std::make_shared<detail::LoanHome>();
      loan_home_->free = &control.loans_free;
    }
    queue_.emplace(LayoutType::RingsOf(segment_.Base(), lane));
    return AttachError::kNone;
  }

  // Hands the lane back (the consumer dispatches what it published, then
  // frees the lane for the next producer) and unmaps. No publish of this
  // producer may be running.
  void Detach() noexcept {
    // Loans still out give nothing back from now on.
    if (loan_home_) loan_home_->attached.store(false, std::memory_order_relaxed);
    loan_home_.reset();
    // A copy in a child forked after Attach only unmaps: the lane is the
    // parent's.
    if (control_ != nullptr && ::getpid() == attacher_) {
      // SYNC POINT WRITE (U): every publish and count of this lane, before
      // the consumer hands it on.
      control_->state.store(detail::kLaneDetached, std::memory_order_release);
    }
    segment_ = Segment();
    header_ = nullptr;
    control_ = nullptr;
    queue_.reset();
    lane_ = 0;
  }
  bool IsAttached() const noexcept { return header_ != nullptr; }
  // This producer's lane (1..kMaxProducers, MessageHeader::lane of its
  // messages at the consumer), 0 when not attached.
  std::uint16_t Lane() const noexcept { return lane_; }

  // Admits `message` at `priority` if this producer's lane is below that
  // priority's threshold. kClosed when not attached, or when the consumer
  // closed the bus or is no longer running (checked only when a publish is
  // refused).
  template <typename Message>
  PublishResult Publish(Message&& message, std::uint32_t sender_id,
                        MessagePriority priority = MessagePriority::MEDIUM) {
    return PublishFast(std::forward<Message>(message), sender_id,
                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch()),
                       priority);
  }

  // As Publish, with the caller's timestamp (steady_clock nanoseconds, or 0
  // for none): no clock read on the publish path.
  template <typename Message>
  PublishResult PublishFast(Message&& message, std::uint32_t sender_id,
                            std::chrono::nanoseconds timestamp,
                            MessagePriority priority = MessagePriority::MEDIUM) {
    CheckType<Message>();
    if (static_cast<std::size_t>(priority) >= kPriorityCount) {
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    return Admit(message, sender_id, timestamp, priority, /*count_refusal=*/true);
  }

  // As Publish, but while this producer's lane is at the priority's
  // threshold it waits up to `timeout` for the consumer to make room: it
  // polls kPollsBeforePark times, then sleeps on a futex in the segment
  // until a batch that took from this lane wakes it (no lost wake-up: (W)),
  // in slices after which it looks whether the consumer still runs.
  // kTimedOut when the time passed (counted in `dropped` once), kClosed
  // when the consumer closed the bus or is gone. Not lock-free: it waits for
  // the consumer by design. Never from the consumer's own thread (it would
  // wait out its timeout).
  template <typename Message, typename Rep, typename Period>
  PublishResult PublishBlocking(Message&& message, std::uint32_t sender_id,
                                MessagePriority priority,
                                std::chrono::duration<Rep, Period> timeout) {
    CheckType<Message>();
    if (static_cast<std::size_t>(priority) >= kPriorityCount) {
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    PublishResult result;
    // Each try reads the closed state only; whether the consumer still runs
    // (a read of /proc) is looked at once a slice, by consumer_left.
    const auto try_admit = [&] {
      result = Admit(message, sender_id, Now(), priority, /*count_refusal=*/false,
                     /*look_for_consumer=*/false);
      return result.Outcome() != PublishOutcome::kRefusedFull;
    };
    if (try_admit()) return result;
    using Clock = std::chrono::steady_clock;
    const std::chrono::nanoseconds wait = sluice::detail::SaturatingNanos(timeout);
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        wait >= Clock::time_point::max() - start ? Clock::time_point::max() : start + wait;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      const std::chrono::nanoseconds left = deadline - now;
      // SYNC POINT READ (X)/(W): the state, after the announcement's fence.
      const auto consumer_left = [this] { return !IsOpenForPublishing(); };
      switch (sluice::detail::WaitUntil(control_->room, Traits::kPollsBeforePark,
                                        left < sleep_slice_ ? left : sleep_slice_, try_admit,
                                        consumer_left)) {
        case sluice::detail::WaitEnd::kReady:
          return result;
        case sluice::detail::WaitEnd::kStopped:
          return PublishResult(PublishOutcome::kClosed, priority);
        case sluice::detail::WaitEnd::kTimedOut:
          break;
      }
    }
    control_->dropped[static_cast<std::size_t>(priority)].fetch_add(1, std::memory_order_relaxed);
    return PublishResult(PublishOutcome::kTimedOut, priority);
  }

  // A free block of this producer's lane for a T, to write in place and
  // publish with PublishLoan; empty when every block is out (lent, or in a
  // message not yet dispatched) or when not attached. Lock-free; any thread
  // of this process.
  template <typename T>
  ShmLoan<T> Loan() noexcept {
    static_assert(sluice::detail::kIsAlternative<Loaned<T>, Payload>,
                  "Sluice: Loan<T> needs sluice::ipc::Loaned<T> among the payload alternatives");
    if (control_ == nullptr) return ShmLoan<T>();
    std::uint64_t free = control_->loans_free.load(std::memory_order_relaxed);
    while (free != 0) {
      const std::uint64_t bit = free & (~free + 1);
      // SYNC POINT READ (P): the block's last reader, before these writes.
      if (control_->loans_free.compare_exchange_weak(free, free & ~bit, std::memory_order_acquire,
                                                     std::memory_order_relaxed)) {
        const auto block = static_cast<std::uint32_t>(detail::LowestBit(bit));
        if (block >= LayoutType::kLoanBlocks) return ShmLoan<T>();  // a mask written wrong
        void* place = LayoutType::LoanBlock(segment_.Base(), lane_ - 1u, block);
        return ShmLoan<T>(new (place) T, loan_home_, block);
      }
    }
    return ShmLoan<T>();
  }

  // Publishes the loan's block at `priority` as Publish does a message: the
  // consumer reads it in place. Admitted: the loan is empty afterwards (the
  // block is the message's until dispatched). Refused: the caller keeps it.
  // kPoolEmpty for an empty loan, kRejected for one of another producer.
  template <typename T>
  PublishResult PublishLoan(ShmLoan<T>& loan, std::uint32_t sender_id,
                            MessagePriority priority = MessagePriority::MEDIUM) {
    if (static_cast<std::size_t>(priority) >= kPriorityCount) {
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    if (!loan) return PublishResult(PublishOutcome::kPoolEmpty, priority);
    if (control_ == nullptr || loan.home_ != loan_home_) {
      return PublishResult(PublishOutcome::kRejected, priority);
    }
    Loaned<T> message;
    message.block_ = loan.block_;
    const PublishResult result = Admit(message, sender_id, Now(), priority, true);
    if (result) (void)loan.Release();
    return result;
  }

  // Whether the consumer that created the segment has not been seen to
  // exit (one in another PID namespace cannot be seen: alive).
  bool ConsumerAlive() const noexcept { return header_ != nullptr && !header_->consumer.IsGone(); }

 private:
  // The slices a segment may set: 1 ms to an hour.
  static constexpr std::uint64_t kMinSliceNanos = 1'000'000;
  static constexpr std::uint64_t kMaxSliceNanos = 3'600'000'000'000;

  template <typename Message>
  static constexpr void CheckType() noexcept {
    static_assert(sluice::detail::kIsAlternative<std::decay_t<Message>, Payload>,
                  "Sluice: Publish needs a message type that is exactly one alternative of "
                  "the bus payload variant");
    static_assert(!detail::IsLoaned<std::decay_t<Message>>::value,
                  "Sluice: a Loaned<T> is published with PublishLoan, from a Loan<T>()");
  }

  static std::chrono::nanoseconds Now() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch());
  }

  // Whether the consumer has neither closed the bus nor exited.
  bool IsOpenForPublishing() const noexcept {
    // SYNC POINT READ (I): the consumer now (another may have taken over).
    return header_->state.load(std::memory_order_relaxed) == detail::kOpen &&
           !header_->consumer.IsGone();
  }

  // One attempt to admit a copy of `message` (its types are trivially
  // copyable: it is never moved from). A priority in range.
  template <typename Message>
  PublishResult Admit(const Message& message, std::uint32_t sender_id,
                      std::chrono::nanoseconds timestamp, MessagePriority priority,
                      bool count_refusal, bool look_for_consumer = true) {
    const auto p = static_cast<std::size_t>(priority);
    if (!queue_) return PublishResult(PublishOutcome::kClosed, priority);
    typename Queue::Claim claim;
    if (!queue_->TryClaim(limits_[p], priority, &claim)) {
      // (X): a refusal by a closed cursor: the cursor says so.
      const bool open =
          !queue_->IsClosed() &&
          (look_for_consumer ? IsOpenForPublishing()
                             : header_->state.load(std::memory_order_relaxed) == detail::kOpen);
      if (!open) return PublishResult(PublishOutcome::kClosed, priority);
      if (count_refusal) control_->dropped[p].fetch_add(1, std::memory_order_relaxed);
      return PublishResult(PublishOutcome::kRefusedFull, priority);
    }
    MessageHeader header;
    header.msg_id = Queue::MessageId(claim);
    header.timestamp_ns = static_cast<std::uint64_t>(timestamp.count());
    header.sender_id = sender_id;
    header.priority = priority;
    header.counted = true;
    new (queue_->Storage(claim)) Envelope{header, Payload(message)};
    queue_->Publish(claim);
    // SYNC POINT WRITE/READ (W), notifying side: the publish above, then
    // the consumer's waiter count. With the heavy fence the consumer's
    // sleep fences this process, so a compiler fence keeps the order here.
    if (fence_free_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      sluice::detail::FullFence();
    }
    header_->consumer_wake.WakeIfWaiting();
    return PublishResult::MakeAdmitted(priority);
  }

  Segment segment_;
  Header* header_ = nullptr;
  LaneControl* control_ = nullptr;  // this producer's lane
  std::optional<Queue> queue_;      // its rings
  std::uint16_t lane_ = 0;
  bool fence_free_ = false;                      // publishes need only a compiler fence: (W)
  pid_t attacher_ = 0;                           // the process that attached
  std::shared_ptr<detail::LoanHome> loan_home_;  // where this attachment's loans go back
  // How long PublishBlocking sleeps, at most, before it looks whether the
  // consumer still runs (a dead one wakes no one): the consumer's setting.
  std::chrono::nanoseconds sleep_slice_{1000000};
  Position limits_[kPriorityCount] = {};
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
