// The consumer's side of the producers' lanes of a shared-memory bus
// (sluice/ipc/shm_bus.hpp): each lane's object made, named, taken over and
// made anew (ResetLane), its view of each lane's rings, the claims it
// skipped for a producer that left, the hand-out of a free lane, the merge
// of the lanes into one HIGH-first order (ReadyFront), and the per-lane
// readings the gauges and statistics need. Looking for producers that left
// and handing their lanes back: sluice/ipc/shm_lane_recovery.hpp. The
// segment's layout and protocol: sluice/ipc/shm_layout.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/detail/observe/utf8.hpp"
#include "sluice/ipc/admission_recheck.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_lane_recovery.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// The consumer thread's tallies, plain: GetStatistics reads them, so it is
// for the consumer thread too (from another thread it would be a data race).
struct ConsumerCounts {
  std::uint64_t processed = 0;
  std::uint64_t processed_by_priority[kPriorityCount] = {};
  std::uint64_t corrupt = 0;
  std::uint64_t over_limit = 0;
  std::uint64_t callback_errors = 0;
  ShmBusStatistics totals;  // of lanes handed back
};

// Every lane of one mapped segment, as its consumer sees them. The consumer
// thread only; not copyable (each lane's view holds references into the
// mapping).
template <typename Payload, std::size_t kCapacity, typename Traits>
class ConsumerLanes {
  using LayoutType = Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using LaneControl = typename LayoutType::LaneControl;
  using Queue = typename LayoutType::Queue;
  using Rings = typename LayoutType::Rings;

 public:
  using Envelope = MessageEnvelope<Payload>;
  static constexpr std::size_t kLanes = LayoutType::kLanes;

  ConsumerLanes() noexcept = default;
  ConsumerLanes(const ConsumerLanes&) = delete;
  ConsumerLanes& operator=(const ConsumerLanes&) = delete;
  ~ConsumerLanes() = default;

  // A bus being made (`base`: its reservation, the header constructed
  // there): every lane's object made, unnamed (NameLanes names them once
  // the header is named), its rings and counters constructed, each lane
  // free. `name`: the bus's; `permissions`: the lanes' owner and group
  // (their mode is 0600). False when the system refused.
  [[nodiscard]] bool Make(void* base, const std::string& name,
                          const SegmentPermissions& permissions) noexcept {
    Map(base, name, permissions);
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      if (!ResetLane(lane)) return false;
    }
    header_->lanes_free.store(LayoutType::kAllLanes, std::memory_order_release);
    return true;
  }
  // Names every lane made by Make (replacing what a dead bus of this name
  // left). kNone, or why not.
  [[nodiscard]] AttachError NameLanes() {
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const AttachError named = objects_[lane].LinkReplacing(LaneName(lane));
      if (named != AttachError::kNone) return named;
    }
    return AttachError::kNone;
  }

  // A killed consumer's bus (`base`: the reservation, its header placed
  // there): every lane's object opened by name and placed, as it left
  // them. A lane in neither set (its hand-out cut short before the lane
  // was active, or its hand-back before it was free) has no owner: it is
  // made anew and freed, whatever its object's state word says (which the
  // last producer of an old object can write: one freed in place would be
  // handed out with that producer still mapping it;
  // tests/spin/lane_handout.pml). kNone, or why not.
  [[nodiscard]] AttachError TakeOver(void* base, const std::string& name,
                                     const SegmentPermissions& permissions) noexcept {
    Map(base, name, permissions);
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      AttachError opened = Segment::Inspect(LaneName(lane), permissions_);
      if (opened == AttachError::kNone) {
        opened = Segment::Open(LaneName(lane), LayoutType::kLaneStride, &objects_[lane],
                               &permissions_, LayoutType::LaneAt(base, lane));
      }
      if (opened != AttachError::kNone) return opened;
      lanes_[lane].Clear();
      lanes_[lane].queue.emplace(LayoutType::RingsOf(base, lane),
                                 LayoutType::ReleasedOf(base, lane));
      // Where the killed consumer's releases got to (it may have been
      // between a ring's release and the fill's).
      lanes_[lane].queue->TakeOverConsumer();
      // Nothing known of its claims yet: read at the first take.
      lanes_[lane].recheck.Start(*lanes_[lane].queue);
      const std::uint64_t bit = std::uint64_t{1} << lane;
      const bool placed = ((header_->lanes_active.load(std::memory_order_relaxed) |
                            header_->lanes_free.load(std::memory_order_relaxed)) &
                           bit) != 0;
      if (!placed) {
        const std::lock_guard<std::mutex> hold(handout_lock_);
        if (ResetLane(lane) && objects_[lane].LinkReplacing(LaneName(lane)) == AttachError::kNone) {
          // SYNC POINT WRITE (U), handing back: the lane made, then free.
          header_->lanes_free.fetch_or(bit, std::memory_order_release);
        }
        // Else the system refused a new object: out of use, as a hand-back
        // that failed leaves it; the next consumer to take over tries again.
      }
    }
    return AttachError::kNone;
  }

  // A killed consumer's segment, taken over (after TakeOver): what it had
  // in hand. Returns 1 if it had taken a message from its ring and not
  // finished dispatching it, else 0; and gives back every loan block it
  // held (ReclaimHeldBlocks), but the block of a message it had marked and
  // not yet taken, which stays that queued message's. SYNC POINT READ (I):
  // the mark names a lane, the block and the position its message had in
  // the lane's fill; taken, the fill has released exactly one more. A mark
  // written wrong names no lane, or a position not the one released last:
  // counted nothing, and every held block is given back. The mark is
  // cleared last: a consumer killed here, before or during the hand-back,
  // leaves it for the next one, which counts and hands back the same (each
  // step is the same for the same mark, and the count lived only in the
  // killed one's memory).
  std::uint64_t TakeOverHand() noexcept {
    const std::uint64_t mark = header_->in_hand.load(std::memory_order_relaxed);
    std::uint64_t lost = 0;
    std::size_t kept_lane = kLanes;
    std::uint64_t kept_block = 0;
    const std::uint64_t lane_plus_one = mark >> 56;
    if (lane_plus_one != 0 && lane_plus_one <= kLanes) {
      const auto lane = static_cast<std::size_t>(lane_plus_one - 1);
      const auto released = static_cast<std::uint64_t>(lanes_[lane].queue->Released());
      const std::uint64_t position = mark & kInHandPositionMask;
      const std::uint64_t block_plus_one = (mark >> 48) & 0xFF;
      if (((released - 1) & kInHandPositionMask) == position) {
        lost = 1;
      } else if ((released & kInHandPositionMask) == position && block_plus_one != 0 &&
                 block_plus_one <= LayoutType::kLoanBlocks) {
        kept_lane = lane;
        kept_block = std::uint64_t{1} << (block_plus_one - 1);
      }
    }
    if constexpr (LayoutType::kLoanBlocks != 0) {
      for (std::size_t lane = 0; lane < kLanes; ++lane) {
        ReclaimHeldBlocks(Control(lane).loans, LayoutType::kLoanBlocks,
                          lane == kept_lane ? kept_block : 0);
      }
    }
    header_->in_hand.store(0, std::memory_order_relaxed);
    return lost;
  }

  // (X): closes every lane's cursors (after the state was stored).
  void CloseQueues() noexcept {
    for (auto& lane : lanes_) {
      if (lane.queue) (void)lane.queue->Close();
    }
  }

  // The admission thresholds (the consumer's copy of the header's, read
  // once at Create or takeover): what OverLimit checks.
  void SetLimits(const AdmissionThresholds& thresholds) noexcept {
    limits_.Set(thresholds, kCapacity);
  }
  // Whether lane `lane`'s front, which TryFront just returned, is past its
  // priority's threshold (sluice/ipc/admission_recheck.hpp).
  bool OverLimit(std::size_t lane) noexcept {
    return lanes_[lane].recheck.PastLimit(*lanes_[lane].queue, limits_);
  }
  // The ring of the front TryFront returned for lane `lane`: its priority,
  // whatever the message's header says.
  std::size_t FrontRing(std::size_t lane) const noexcept { return lanes_[lane].queue->FrontRing(); }

  // Wakes every producer waiting for room (Close, after its fence).
  void WakeEveryRoom() noexcept {
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      if (objects_[lane].IsMapped()) Control(lane).room.WakeIfWaiting();
    }
  }
  // Removes each lane's name that still names this bus's lane (Close).
  void UnlinkLanes() {
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const std::string name = LaneName(lane);
      if (objects_[lane].IsNamed(name)) Segment::Unlink(name);
    }
  }

  // Forgets the bus (closed, or never named): every view, every lane's
  // object, and the lanes marked gone. The pages stay the reservation's
  // (placed segments). `hand_out_ran`:
  // whether this process's hand-out thread may have run (false in a child
  // forked from the consumer, whose copy of the lock may have been taken by
  // a thread the child does not have).
  void Unmap(bool hand_out_ran = true) noexcept {
    std::unique_lock<std::mutex> hold(handout_lock_, std::defer_lock);
    if (hand_out_ran) hold.lock();
    header_ = nullptr;
    base_ = nullptr;
    for (auto& lane : lanes_) lane.Clear();
    for (Segment& object : objects_) object = Segment();
    recovery_.Clear();
  }

  bool IsOpen() const noexcept { return header_ != nullptr; }
  // Whether lane `lane` has an owner (or had one and is not yet handed
  // back): the header's active set, which only this process writes, not the
  // lane's state word, which its producer can. Open buses only.
  bool IsActive(std::size_t lane) const noexcept {
    return (header_->lanes_active.load(std::memory_order_acquire) & (std::uint64_t{1} << lane)) !=
           0;
  }
  Header* SegmentHeader() const noexcept { return header_; }
  void* Base() const noexcept { return base_; }
  Queue& QueueOf(std::size_t lane) noexcept { return *lanes_[lane].queue; }
  LaneControl& Control(std::size_t lane) const noexcept {
    return *LayoutType::ControlOf(base_, lane);
  }

  // The hand-out (sluice/ipc/lane_handout.hpp), on its thread: a free lane
  // for the producer process `peer`, its role taken on a new open of the
  // lane's object, which `deliver(lane, descriptor)` sends to the producer
  // and closes here. Serialised with the consumer thread's looks at the
  // lanes (CheckProducers, hand-backs) by one lock, the delivery included:
  // a lane is free, being handed out, or owned, never seen half way, and
  // an owned lane's role is never seen held by this process's copy of the
  // descriptor (which would make a producer dead since read as running).
  template <typename Deliver>
  AttachError HandOut(const char* producer_name, std::int32_t peer, Deliver&& deliver) {
    const std::lock_guard<std::mutex> hold(handout_lock_);
    if (header_ == nullptr) return AttachError::kConsumerGone;
    for (std::uint64_t free =
             header_->lanes_free.load(std::memory_order_acquire) & LayoutType::kAllLanes;
         free != 0; free &= free - 1) {
      const auto lane = static_cast<std::size_t>(LowestBit(free));
      const std::uint64_t bit = std::uint64_t{1} << lane;
      // SYNC POINT (U), taking: not free from here on (a consumer killed
      // from here to the owned mark leaves it for the next one's TakeOver).
      header_->lanes_free.fetch_and(~bit, std::memory_order_relaxed);
      const int fd = objects_[lane].Reopen(LaneName(lane), /*writable=*/true);
      if (fd < 0 || !Segment::TakeRoleAt(fd, kLaneRole)) {
        if (fd >= 0) ::close(fd);
        header_->lanes_free.fetch_or(bit, std::memory_order_relaxed);
        continue;
      }
      LaneControl& control = Control(lane);
      control.owner.pid = peer;
      char bytes[kProducerNameCapacity];
      sluice::detail::CopyName(producer_name, bytes, kProducerNameCapacity);
      for (std::size_t w = 0; w < LayoutType::kNameWords; ++w) {
        std::uint32_t word;
        std::memcpy(&word, bytes + w * 4, 4);
        control.name[w].store(word, std::memory_order_relaxed);
      }
      // SYNC POINT WRITE (U): the owner and name, then the lane's bit;
      // both before the descriptor (and with it any publish) leaves.
      control.state.store(kLaneOwned, std::memory_order_release);
      header_->lanes_active.fetch_or(bit, std::memory_order_release);
      deliver(static_cast<std::uint32_t>(lane), fd);
      return AttachError::kNone;
    }
    return AttachError::kNoFreeLane;
  }

  // The traits' observer's optional OnLaneEvent (sluice/observer.hpp), on
  // the thread that saw the lane change hands.
  template <typename Front>
  static void TellLaneEvent(Front& front, const LaneEvent& event) noexcept {
    using Observer = std::remove_reference_t<decltype(front.Watcher())>;
    if constexpr (sluice::detail::HasOnLaneEvent<Observer>::value) {
      front.Watcher().OnLaneEvent(event);
    } else {
      (void)front;
      (void)event;
    }
  }

  // ---- Producers that left (sluice/ipc/shm_lane_recovery.hpp) ---------------

  // Whether a lane whose owner left is still to be handed back.
  bool AnyGone() const noexcept { return recovery_.AnyGone(); }
  // Called on the consumer thread each time a producer's lane is handed
  // back (after its last message was taken).
  void OnExit(std::function<void(const ProducerExit&)> handler) {
    recovery_.OnExit(std::move(handler));
  }
  // Looks now for producers that left, then hands back each of their lanes
  // that is drained (LaneRecovery::CheckProducers). `front`: the consumer's
  // counts (Counts()) and its observation of a throwing exit handler
  // (ExitHandlerThrew).
  template <typename Front>
  void CheckProducers(Front& front, bool dispatching) {
    recovery_.CheckProducers(*this, front, dispatching);
  }
  // Hands back each lane whose owner left once it is drained, not from a
  // callback during a batch (LaneRecovery::TendGoneLanes).
  template <typename Front>
  void TendGoneLanes(Front& front, bool dispatching) {
    recovery_.TendGoneLanes(*this, front, dispatching);
  }

  // The front of the lane to take from next: the highest priority published
  // in any lane not held (a claim above it in the same lane not yet
  // published: the in-process rule, per lane, since only one process's
  // threads can order their publishes); ties go round the lanes.
  Envelope* ReadyFront(std::uint64_t active, std::size_t* lane) noexcept {
    if (active == 0) return nullptr;
    if ((active & (active - 1)) == 0) {
      *lane = static_cast<std::size_t>(LowestBit(active));
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

  // Whether a batch would find something to do: a message to take, or a
  // lane whose owner left still to tend. SYNC POINT READ (W) in a waiter's
  // re-check: the slot's acquire load, after the announcement's fence.
  bool HasWork() noexcept {
    if (recovery_.AnyGone()) return true;
    std::size_t lane = 0;
    return ReadyFront(header_->lanes_active.load(std::memory_order_acquire) & LayoutType::kAllLanes,
                      &lane) != nullptr;
  }

  // ---- Readings (the gauges and statistics) --------------------------------

  // Messages admitted and not yet taken in lane `lane`, and in every lane.
  // (A lane whose object the system refused to make anew holds nothing.)
  // Read from positions its producer can write: at most kCapacity.
  Position Fill(std::size_t lane) const noexcept {
    if (!lanes_[lane].queue) return 0;
    const Position depth = lanes_[lane].queue->Depth();
    return depth < kCapacity ? depth : kCapacity;
  }
  std::size_t Depth() const noexcept {
    std::size_t depth = 0;
    for (std::size_t lane = 0; lane < kLanes; ++lane) depth += static_cast<std::size_t>(Fill(lane));
    return depth;
  }

  // Lane `lane`'s admissions at priority `p` since its producer took it:
  // each claimed one slot of the ring; claims skipped after their owner
  // left are lost, not published.
  Position Published(std::size_t lane, std::size_t p) const noexcept {
    const ConsumerLane& consumer = lanes_[lane];
    if (!consumer.queue) return 0;
    const Position claims = consumer.queue->RingClaims(p);
    return claims - (consumer.skipped[p] < claims ? consumer.skipped[p] : claims);
  }

  // Lane `lane`'s producer's refusals for room the peak has noted
  // (ShmGauges::NoteRefusals), one count per priority.
  std::uint64_t* RefusalsNoted(std::size_t lane) noexcept { return lanes_[lane].refusals_noted; }
  const std::uint64_t* RefusalsNoted(std::size_t lane) const noexcept {
    return lanes_[lane].refusals_noted;
  }

 private:
  // Looks at and hands back the lanes, under the hand-out's lock.
  friend class LaneRecovery<Payload, kCapacity, Traits>;

  // The consumer's side of one lane.
  struct ConsumerLane {
    std::optional<Queue> queue;             // its view of the lane's rings
    Position skipped[kPriorityCount] = {};  // claims skipped since its owner left
    AdmissionRecheck recheck;               // what it read of the rings' claims (OverLimit)
    // Its producer's refusals for room the peak has noted (NoteRefusals).
    std::uint64_t refusals_noted[kPriorityCount] = {};
    std::int32_t pid = 0;  // the owner that left
    bool killed = false;
    void Clear() noexcept {
      queue.reset();  // a view holds references: made again, never assigned
      for (Position& count : skipped) count = 0;
      for (std::uint64_t& count : refusals_noted) count = 0;
      recheck = AdmissionRecheck();
      pid = 0;
      killed = false;
    }
  };

  void Map(void* base, const std::string& name, const SegmentPermissions& permissions) {
    const std::lock_guard<std::mutex> hold(handout_lock_);
    base_ = base;
    header_ = LayoutType::HeaderOf(base);
    name_ = name;
    permissions_ = permissions;
    permissions_.mode = 0600;
  }

  std::string LaneName(std::size_t lane) const { return name_ + ".lane" + std::to_string(lane); }

  // Makes lane `lane`'s object anew, unnamed, placed over its old one:
  // its rings and counters constructed, free (its bit is the caller's to
  // set, SYNC POINT WRITE (U)). False when the system refused: the place
  // keeps the old object's mapping, which no producer is handed again.
  bool ResetLane(std::size_t lane) noexcept {
    lanes_[lane].Clear();
    Segment made;
    if (Segment::CreateUnnamed(LayoutType::kLaneStride, permissions_, &made,
                               LayoutType::LaneAt(base_, lane)) != AttachError::kNone) {
      objects_[lane] = Segment();
      return false;
    }
    objects_[lane] = std::move(made);
    LaneControl& control = *new (LayoutType::LaneAt(base_, lane)) LaneControl();
    new (LayoutType::RingsOf(base_, lane)) Rings(0);
    LayoutType::ReleasedOf(base_, lane)->Reset(0);
    for (std::size_t w = 0; w < kLoanWords; ++w) {
      control.loans[w].store(AllFree(LayoutType::kLoanBlocks, w), std::memory_order_relaxed);
    }
    lanes_[lane].queue.emplace(LayoutType::RingsOf(base_, lane),
                               LayoutType::ReleasedOf(base_, lane));
    control.state.store(kLaneFree, std::memory_order_release);
    return true;
  }

  Header* header_ = nullptr;        // the bus's, while it is mapped
  void* base_ = nullptr;            // its reservation
  std::string name_;                // the bus's name: each lane's object is name_ + ".laneN"
  SegmentPermissions permissions_;  // the lanes' (mode 0600)
  // Each lane's object, placed in the reservation: the consumer's open, on
  // which it reads the producer's role.
  Segment objects_[kLanes];
  AdmissionLimits limits_;  // SetLimits
  // The hand-out thread's lock against this thread's looks at the lanes.
  mutable std::mutex handout_lock_;
  ConsumerLane lanes_[kLanes];
  // The lanes whose owners left, until each is handed back.
  LaneRecovery<Payload, kCapacity, Traits> recovery_;
  std::size_t last_lane_ = 0;
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
