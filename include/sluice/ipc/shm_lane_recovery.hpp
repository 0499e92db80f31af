// Producers that left a shared-memory bus's lanes, as its consumer finds
// them and takes their lanes back (sluice/ipc/shm_lanes.hpp, whose
// ConsumerLanes holds one LaneRecovery): looking for a lane whose process
// exited or detached (CheckProducers), and handing each such lane back once
// what its producer published is taken (TendGoneLanes): the claims it never
// published skipped and counted lost, the hand-back told (the observer's
// LaneEvent, the exit handler) and the lane made anew for the next
// producer. The consumer thread only; it reaches each lane's parts as
// ConsumerLanes' friend. The segment's layout and protocol:
// sluice/ipc/shm_layout.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// The lanes it tends (sluice/ipc/shm_lanes.hpp, which includes this header).
template <typename Payload, std::size_t kCapacity, typename Traits>
class ConsumerLanes;

// The lanes of one mapped segment whose owners left, until each is handed
// back. A part of ConsumerLanes, which calls it with itself (`lanes`).
template <typename Payload, std::size_t kCapacity, typename Traits>
class LaneRecovery {
  using LayoutType = Layout<Payload, kCapacity, Traits>;
  using LaneControl = typename LayoutType::LaneControl;
  using Header = typename LayoutType::Header;
  using Lanes = ConsumerLanes<Payload, kCapacity, Traits>;
  static constexpr std::size_t kLanes = LayoutType::kLanes;

 public:
  // Whether a lane whose owner left is still to be handed back.
  bool AnyGone() const noexcept { return gone_ != 0; }
  // Forgets every lane marked gone (the bus unmapped).
  void Clear() noexcept { gone_ = 0; }

  // Called on the consumer thread each time a producer's lane is handed
  // back (after its last message was taken).
  void OnExit(std::function<void(const ProducerExit&)> handler) { on_exit_ = std::move(handler); }

  // Looks now for producers that left: a lane whose process exited without
  // detaching (killed), or that detached, is marked gone; then the gone
  // lanes are tended (TendGoneLanes).
  // `front`: the consumer's counts (Counts()) and its observation of a
  // throwing exit handler (ExitHandlerThrew).
  template <typename Front>
  void CheckProducers(Lanes& lanes, Front& front, bool dispatching) {
    if (lanes.header_ == nullptr) return;
    std::unique_lock<std::mutex> hold(lanes.handout_lock_);
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const std::uint64_t bit = std::uint64_t{1} << lane;
      if ((gone_ & bit) != 0 || !lanes.objects_[lane].IsMapped()) continue;
      const LaneControl& control = lanes.Control(lane);
      // Whether the lane has an owner is the header's word (only this
      // process writes it: the hand-out sets the bit before the lane
      // leaves, the hand-back clears it), and whether that owner runs is
      // the kernel's (its role); the lane's own state word, which its
      // producer can write, decides neither: a producer that wrote "free"
      // or any other value there and was killed is still seen gone, and
      // one that wrote "detached" and runs is still seen running.
      // SYNC POINT READ (U): the lane's bit, before its rings and state.
      const Header& header = *lanes.header_;
      if ((header.lanes_active.load(std::memory_order_acquire) & bit) == 0) {
        if ((header.lanes_free.load(std::memory_order_acquire) & bit) != 0) {
          continue;  // free: no owner to look at
        }
        // In neither set while this consumer runs: its hand-out moves a
        // lane from free to active under the lock this pass holds, and its
        // hand-back, on this thread, from active to free; so something
        // else wrote the header. Whatever holds the lane, the header says
        // it has no owner: handed back now (what it holds is counted
        // corrupt: TendGoneLanes), never left where no batch reads it.
      } else if (lanes.objects_[lane].HolderOf(kLaneRole) != Segment::RoleHolder::kNone) {
        // The hand-out took the owner's role before it set the lane's bit,
        // so a role held by no one means that it exited or detached. Held
        // (or unknown), it runs.
        continue;
      }
      // A killed owner stored nothing with release on its way out; its
      // stores are ordered before this by the kernel: it had exited (every
      // store of its last instructions done) before the kernel dropped its
      // role, which this thread's system call just saw dropped. The fence
      // keeps the compiler from moving the lane's reads above it.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      // SYNC POINT READ (U): a producer detaches by storing kLaneDetached
      // with release and then dropping its role: the state tells a detach
      // from a kill (a label: a producer can only say it of itself).
      lanes.lanes_[lane].killed = control.state.load(std::memory_order_acquire) != kLaneDetached;
      lanes.lanes_[lane].pid = control.owner.pid;
      gone_ |= bit;
      LaneEvent exited;
      exited.kind = LaneEventKind::kExited;
      exited.lane = static_cast<std::uint16_t>(lane + 1);
      exited.pid = lanes.lanes_[lane].pid;
      exited.killed = lanes.lanes_[lane].killed;
      Lanes::TellLaneEvent(front, exited);
    }
    hold.unlock();
    if (gone_ != 0) TendGoneLanes(lanes, front, dispatching);
  }

  // Lanes whose owner left: moves past the claims it never published at
  // each ring's front (what it published is dispatched as usual), and
  // hands each lane with nothing left back, counting it in `front`'s counts.
  // Re-entered from the exit handler (which may call CheckProducers or
  // Close), it does nothing: the outer call reads `gone_` afresh for each
  // lane. Nor from a callback during a batch (`dispatching`): the batch may
  // hold blocks of a lane still to give back (the next batch, or the end of
  // this one, hands the lane on).
  template <typename Front>
  void TendGoneLanes(Lanes& lanes, Front& front, bool dispatching) {
    auto& counts = front.Counts();
    if (tending_ || dispatching) return;
    tending_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{tending_};
    for (std::size_t lane = 0; lane < kLanes && lanes.header_ != nullptr; ++lane) {
      const std::uint64_t bit = std::uint64_t{1} << lane;
      if ((gone_ & bit) == 0) continue;
      typename Lanes::ConsumerLane& consumer = lanes.lanes_[lane];
      consumer.queue->SkipUnpublishedFronts(consumer.skipped);
      // Claims more than a ring holds: rings written wrong, which would never
      // drain. Handed on now, what they held counted corrupt. So is a lane
      // outside the active set that holds messages: batches read only the
      // active lanes, so they would never drain it (and a consumer waiting
      // for work would find it there and never sleep). No producer leaves
      // one: the hand-out sets the lane's bit before the producer gets the
      // lane, and only this thread clears it, when it hands the lane back.
      const bool active = (lanes.header_->lanes_active.load(std::memory_order_acquire) & bit) != 0;
      if (consumer.queue->HasImpossibleClaims() || (!active && !consumer.queue->IsDrained())) {
        ++counts.corrupt;
      } else if (!consumer.queue->IsDrained()) {
        continue;
      }
      // Its owner can claim no more: each ring's claims are exactly its
      // publishes and the claims skipped.
      LaneControl& control = lanes.Control(lane);
      ShmBusStatistics& totals = counts.totals;
      ProducerExit exit;
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        const Position claims = consumer.queue->RingClaims(p);
        const Position skipped = consumer.skipped[p] < claims ? consumer.skipped[p] : claims;
        totals.published[p] += claims - skipped;
        totals.dropped[p] += control.dropped[p].load(std::memory_order_relaxed) +
                             control.pool_empty[p].load(std::memory_order_relaxed);
        exit.lost += skipped;
      }
      totals.lost += exit.lost;
      ++(consumer.killed ? totals.producers_killed : totals.producers_detached);
      exit.lane = static_cast<std::uint16_t>(lane + 1);
      exit.pid = consumer.pid;
      exit.killed = consumer.killed;
      // Told before the lane is free, so before the next owner's kAttached:
      // this event happens before the release fetch_or of lanes_free below
      // (made under handout_lock_), and the hand-out finds the lane free only
      // by its acquire load of lanes_free under the same lock, before it
      // tells kAttached (ShmLaneEventsTest holds this event and the next
      // Attach finds no free lane).
      LaneEvent handed_back;
      handed_back.kind = LaneEventKind::kHandedBack;
      handed_back.lane = exit.lane;
      handed_back.pid = exit.pid;
      handed_back.killed = exit.killed;
      handed_back.lost = exit.lost;
      Lanes::TellLaneEvent(front, handed_back);
      if (lanes.header_ == nullptr) return;  // closed from the observer, against its rules
      // Off the active set before it is free, so that the next owner's bit
      // is not cleared after it was set.
      lanes.header_->lanes_active.fetch_and(~bit, std::memory_order_relaxed);
      gone_ &= ~bit;
      {
        const std::lock_guard<std::mutex> hold(lanes.handout_lock_);
        // A fresh object: whoever mapped the old one (a producer that
        // detached and kept its mapping) reaches nothing of the next owner's.
        if (lanes.ResetLane(lane) &&
            lanes.objects_[lane].LinkReplacing(lanes.LaneName(lane)) == AttachError::kNone) {
          // SYNC POINT WRITE (U), handing back: the lane made, then free.
          lanes.header_->lanes_free.fetch_or(bit, std::memory_order_release);
        }
        // Else the system refused a new object: the lane stays out of use
        // (neither active nor free; a consumer taking over frees it).
      }
      if (on_exit_) {
#if SLUICE_HAS_EXCEPTIONS
        try {
          on_exit_(exit);
        } catch (const std::exception& error) {
          front.ExitHandlerThrew(error.what());
        } catch (...) {
          front.ExitHandlerThrew("non-standard exception");
        }
#else
        on_exit_(exit);
#endif
      }
    }
  }

 private:
  std::uint64_t gone_ = 0;  // bit l: lane l's owner left, its lane not yet handed back
  bool tending_ = false;    // inside TendGoneLanes
  std::function<void(const ProducerExit&)> on_exit_;
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
