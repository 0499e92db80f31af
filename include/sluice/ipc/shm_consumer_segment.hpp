// The consumer's hold on a shared-memory bus's segment (sluice/ipc/shm_bus.hpp):
// making it, or taking over the one a killed consumer left (Create,
// TakeOver), naming its parts and starting the hand-out of lanes (Begin),
// dropping what could not be finished (Discard), the hand-out's answer to a
// producer (HandOutLane), and the names removed at Close. The protocol of
// making a name ours: tests/spin/segment_create.pml; judging a name another
// segment holds: sluice/ipc/shm_session.hpp. The segment's layout and
// protocol: sluice/ipc/shm_layout.hpp.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/ipc/address_reservation.hpp"
#include "sluice/ipc/consumer_wake.hpp"
#include "sluice/ipc/create_steps.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/lane_handout_service.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_front.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/ipc/shm_session.hpp"
#include "sluice/observer.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// The bus's range and its parts as its consumer holds them: the header
// (segment_, the consumer's role and the name's lock on it), the wake page,
// the hand-out; the lanes are the front's (ShmFront::Lanes). The consumer
// thread, but for HandOutLane (the hand-out thread). Not copyable (the
// hand-out's thread holds `this`).
template <typename Payload, std::size_t kCapacity, typename Traits>
class ConsumerSegment {
  using LayoutType = Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using WakePage = typename LayoutType::WakePage;
  using ConsumerWakeType = detail::ConsumerWake<typename LayoutType::Signal>;
  using Front = ShmFront<Payload, kCapacity, Traits>;
  static constexpr std::size_t kSegmentSize = LayoutType::kSegmentSize;

 public:
  // `front`: the consumer's, whose lanes are this segment's and whose
  // observer is told of each lane handed out; it outlives this object.
  explicit ConsumerSegment(Front& front) noexcept : front_(front) {}
  ConsumerSegment(const ConsumerSegment&) = delete;
  ConsumerSegment& operator=(const ConsumerSegment&) = delete;
  ~ConsumerSegment() = default;

  // Makes the segment `name` and opens it, or takes over the one a killed
  // consumer left, as ShmBus::Create says (`name` and `options` checked
  // there). kNone, or why not, with nothing kept. Taken over (TookOver),
  // `*lost_in_hand` says whether the killed consumer held a message
  // (TakeOver).
  [[nodiscard]] AttachError Create(const std::string& name, const ShmBusOptions& options,
                                   std::uint64_t* lost_in_hand) {
    if (!reservation_.Reserve(kSegmentSize)) return AttachError::kSystemError;
    // The header and the lanes are this user's alone; the wake page opens
    // to whom the permissions name.
    SegmentPermissions own = options.permissions;
    own.mode = 0600;
    AttachError error =
        Segment::CreateUnnamed(LayoutType::kHeaderBytes, own, &segment_, reservation_.At(0));
    if (error != AttachError::kNone) return Discard(error);
    // Held before anyone can find the segment, for as long as this open
    // lives: producers and later consumers read it to know this one runs.
    // The lock keeps a consumer judging the name out until every part is
    // named (Begin).
    if (!segment_.TakeRole(detail::kConsumerRole) || !segment_.Lock()) {
      return Discard(AttachError::kSystemError);
    }
    error = Segment::CreateUnnamed(LayoutType::kWakeBytes, options.permissions, &wake_,
                                   reservation_.At(LayoutType::kWakeOffset));
    if (error != AttachError::kNone) return Discard(error);
    wake_page_ = new (wake_.Base()) WakePage();
    // Its own decision (the signal's constructor registered this
    // process), before any producer can reach the page.
    consumer_wake_ =
        ConsumerWakeType(wake_page_->consumer_wake, wake_page_->consumer_wake.Asymmetric());
    void* base = reservation_.Base();
    header_ = new (base) Header();
    header_->fingerprint = LayoutType::Expected();
    header_->consumer_pid.store(ProcessIdentity::Self().pid, std::memory_order_relaxed);
    header_->thresholds = options.thresholds;
    header_->peer_check_nanoseconds =
        static_cast<std::uint64_t>(detail::SleepSlice(options).count());
    header_->state.store(detail::kOpen, std::memory_order_relaxed);
    // Every lane's object, rings and counters, each lane free.
    if (!front_.Lanes().Make(base, name, own)) return Discard(AttachError::kSystemError);
    // SYNC POINT WRITE (T): the header and rings above, before any attach
    // (the name, below, is what lets a producer find the segment at all).
    header_->magic.store(detail::kMagic, std::memory_order_release);
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kMade);
    // A name that comes free between two looks (its consumer closed) is
    // tried again, a few times: each retry means another consumer moved.
    for (int attempt = 0; attempt < detail::kCreateAttempts; ++attempt) {
      error = segment_.Link(name);
      if (error == AttachError::kNone) {
        SLUICE_IPC_CREATE_STEP(detail::CreateStep::kLinked);
        return Begin(name, options, /*name_parts=*/true);
      }
      if (error != AttachError::kConsumerExists) break;
      SLUICE_IPC_CREATE_STEP(detail::CreateStep::kNameTaken);
      Segment old;  // locked while its name is judged, removed and made again
      const detail::NameVerdict verdict =
          detail::JudgeName<LayoutType>(name, options.permissions, &old, &error);
      if (verdict == detail::NameVerdict::kRetry) continue;
      if (verdict == detail::NameVerdict::kTakeOver) {
        (void)Discard(AttachError::kNone);
        return TakeOver(name, std::move(old), options, lost_in_hand);
      }
      if (verdict == detail::NameVerdict::kReplace) {
        // Still under the old segment's lock: a consumer that judged it
        // too finds the name made anew when it gets the lock.
        error = segment_.Link(name);
        if (error == AttachError::kNone) {
          SLUICE_IPC_CREATE_STEP(detail::CreateStep::kLinked);
          return Begin(name, options, /*name_parts=*/true);
        }
      }
      break;  // kRefuse, or a consumer made the name between unlink and link
    }
    return Discard(error == AttachError::kNone ? AttachError::kNotReady : error);
  }

  // The names of the bus `name` removed (ShmBus::RemoveName).
  static void RemoveName(const std::string& name) {
    if (!IsSegmentName(name)) return;
    detail::RemoveHandoutSocket(WakeName(name));
    Segment::Unlink(name);
    Segment::Unlink(WakeName(name));
    for (std::size_t lane = 0; lane < LayoutType::kLanes; ++lane) {
      Segment::Unlink(name + ".lane" + std::to_string(lane));
    }
  }

  bool IsOpen() const noexcept { return header_ != nullptr; }
  Header* SegmentHeader() const noexcept { return header_; }
  WakePage* Wake() const noexcept { return wake_page_; }
  // The consumer's side of the page's signal, open segments only.
  ConsumerWakeType& ConsumerWakeSignal() noexcept { return consumer_wake_; }
  // Whether Create took over a segment whose consumer had been killed.
  bool TookOver() const noexcept { return took_over_; }
  // Whether this is the process that called Create (not a child forked
  // since, whose copy of the bus only unmaps).
  bool IsCreator() const noexcept { return ::getpid() == creator_; }

  // Stops handing out lanes, once the request being answered is (Close).
  void StopHandout() noexcept { handout_.Stop(); }

  // Removes this bus's names at Close.
  void RemoveOwnNames() noexcept {
    // The names are removed only while they are still this bus's (under
    // the lock a consumer making the name again takes). A lock held for
    // over a second (by a process of this user) leaves them: closed, the
    // bus is the next Create's to replace.
    if (segment_.TryLockFor(1000)) {
      if (segment_.IsNamed(name_)) {
        Segment::Unlink(name_);
        if (wake_.IsNamed(WakeName(name_))) Segment::Unlink(WakeName(name_));
        front_.Lanes().UnlinkLanes();
      }
      segment_.Unlock();
    }
  }

  // The range, kept mapped by a batch that a callback closed the bus from
  // (ShmBus::Close); this object holds none after.
  AddressReservation ReleaseRange() noexcept { return std::move(reservation_); }

  // Forgets the bus in this process (Close): every part unmapped, the
  // lanes' too.
  void Unmap() noexcept {
    segment_ = Segment();
    wake_ = Segment();
    header_ = nullptr;
    wake_page_ = nullptr;
    consumer_wake_ = ConsumerWakeType();
    front_.Lanes().Unmap(/*hand_out_ran=*/::getpid() == creator_);
    reservation_ = AddressReservation();
  }

 private:
  // Drops the parts Create made and did not name (nothing else saw them),
  // or a takeover could not finish; returns `error`.
  AttachError Discard(AttachError error) noexcept {
    handout_.Stop();
    segment_ = Segment();
    wake_ = Segment();
    header_ = nullptr;
    wake_page_ = nullptr;
    consumer_wake_ = ConsumerWakeType();
    front_.Lanes().Unmap();
    reservation_ = AddressReservation();
    return error;
  }

  static std::string WakeName(const std::string& name) { return name + ".wake"; }

  // Takes over the bus `old` (its header, locked) of a consumer that was
  // killed: every lane, queued message and producer as it left them. Its
  // thresholds and permissions stay; `options` gives the check interval.
  // `*lost_in_hand`: 1 if the killed consumer had taken a message and not
  // finished dispatching it, else 0 (ConsumerLanes::TakeOverHand).
  [[nodiscard]] AttachError TakeOver(const std::string& name, Segment old,
                                     const ShmBusOptions& options, std::uint64_t* lost_in_hand) {
    if (!reservation_.Reserve(kSegmentSize)) return AttachError::kSystemError;
    segment_ = std::move(old);
    // The consumer's role and the lock stay with this open of the header,
    // now at its place in the reservation.
    if (!segment_.Place(reservation_.At(0), LayoutType::kHeaderBytes)) {
      segment_.Unlock();
      return Discard(AttachError::kSystemError);
    }
    header_ = LayoutType::HeaderOf(segment_.Base());
    SegmentPermissions own = options.permissions;
    own.mode = 0600;
    // Each part looked at before it is opened, and checked as the header
    // was (a regular file of this user, no wider mode than asked).
    AttachError error = Segment::Inspect(WakeName(name), options.permissions);
    if (error == AttachError::kNone) {
      error = Segment::Open(WakeName(name), LayoutType::kWakeBytes, &wake_, &options.permissions,
                            reservation_.At(LayoutType::kWakeOffset));
    }
    if (error == AttachError::kNone) {
      error = front_.Lanes().TakeOver(reservation_.Base(), name, own);
    }
    if (error != AttachError::kNone) {
      // A part missing: the bus cannot be taken over, and its names are
      // removed (under its lock) for the next Create to make it anew. A
      // part not trusted is left alone, as an untrusted header is.
      if (error == AttachError::kNotFound) RemoveName(name);
      segment_.Unlock();
      return Discard(error == AttachError::kNotFound ? AttachError::kNotReady : error);
    }
    wake_page_ = LayoutType::WakeOf(reservation_.Base());
    // Its own decision, not the byte the killed consumer (or a producer
    // since) left: stored for the producers, which read it at each publish.
    consumer_wake_ =
        ConsumerWakeType(wake_page_->consumer_wake, wake_page_->consumer_wake.DecideHeavyFence());
    header_->consumer_pid.store(ProcessIdentity::Self().pid, std::memory_order_relaxed);
    SLUICE_IPC_CREATE_STEP(detail::CreateStep::kIdentityWritten);
    header_->peer_check_nanoseconds =
        static_cast<std::uint64_t>(detail::SleepSlice(options).count());
    *lost_in_hand = front_.Lanes().TakeOverHand();
    // The killed consumer may have been counted asleep.
    wake_page_->consumer_wake.ForgetWaiters();
    error = Begin(name, options, /*name_parts=*/false);
    if (error != AttachError::kNone) return error;
    took_over_ = true;
    return AttachError::kNone;
  }

  // What Create and TakeOver both set, in this process: the parts named
  // (Create's), the hand-out started and the lock given up.
  AttachError Begin(const std::string& name, const ShmBusOptions& options, bool name_parts) {
    name_ = name;
    // A killed consumer's socket, named in the wake page the name has now
    // (the dead bus's, or this very one taken over).
    detail::RemoveHandoutSocket(WakeName(name));
    if (name_parts) {
      AttachError named = wake_.LinkReplacing(WakeName(name));
      if (named == AttachError::kNone) named = front_.Lanes().NameLanes();
      if (named != AttachError::kNone) {
        RemoveName(name);
        segment_.Unlock();
        return Discard(named);
      }
      // A consumer killed before this store leaves a bus no producer could
      // reach: the next Create replaces it rather than take it over.
      header_->parts_named.store(1, std::memory_order_release);
    }
    // A fresh address for this consumer's hand-out (another of the same
    // name is drawn in the unlikely case that it is taken).
    AttachError started = AttachError::kConsumerExists;
    for (int attempt = 0; attempt < 8 && started == AttachError::kConsumerExists; ++attempt) {
      started =
          detail::DrawHandoutAddress(&wake_page_->handout)
              ? handout_.Start(detail::HandoutSocketPath(wake_page_->handout), wake_.Identity(),
                               options.permissions, &ConsumerSegment::HandOutLane, this)
              : AttachError::kSystemError;
    }
    if (started != AttachError::kNone) {
      if (name_parts) RemoveName(name);
      segment_.Unlock();
      return Discard(AttachError::kSystemError);
    }
    segment_.Unlock();
    took_over_ = false;
    creator_ = ::getpid();
    return AttachError::kNone;
  }

  // The hand-out's answer to a producer that proved it may attach (on the
  // hand-out thread; Close and Discard stop that thread before they change
  // anything it reads here).
  static AttachError HandOutLane(void* self, const detail::LaneRequest& request, std::int32_t peer,
                                 detail::LaneDelivery& delivery) {
    auto* consumer = static_cast<ConsumerSegment*>(self);
    // The header as the producer will read it: refused here, before a lane
    // is taken, for what the producer would refuse after.
    const Header& header = *consumer->header_;
    const std::uint64_t magic = header.magic.load(std::memory_order_acquire);
    if (magic == 0) return AttachError::kNotReady;
    if (magic != detail::kMagic) return AttachError::kNotASegment;
    const AttachError differs = header.fingerprint.Compare(request.fingerprint);
    if (differs != AttachError::kNone) return differs;
    if (!header.thresholds.IsValid()) return AttachError::kNotASegment;
    if (header.state.load(std::memory_order_relaxed) != detail::kOpen) {
      return AttachError::kConsumerGone;
    }
    // The producer's view of the header: read-only.
    const int header_fd = consumer->segment_.Reopen(consumer->name_, /*writable=*/false);
    if (header_fd < 0) return AttachError::kSystemError;
    const AttachError handed =
        consumer->front_.Lanes().HandOut(request.name, peer, [&](std::uint32_t lane, int lane_fd) {
          // Before the producer has the lane, so before any of its messages.
          LaneEvent attached;
          attached.kind = LaneEventKind::kAttached;
          attached.lane = static_cast<std::uint16_t>(lane + 1);
          attached.pid = peer;
          consumer->front_.Lanes().TellLaneEvent(consumer->front_, attached);
          delivery.Deliver(lane, header_fd, lane_fd);
        });
    if (handed != AttachError::kNone) ::close(header_fd);
    return handed;
  }

  // The bus's range and its parts: the header (segment_, the consumer's
  // role and the name's lock on it), the wake page, the lanes (in front_).
  AddressReservation reservation_;
  Segment segment_;
  Segment wake_;
  Header* header_ = nullptr;
  WakePage* wake_page_ = nullptr;
  ConsumerWakeType consumer_wake_;  // on wake_page_'s signal
  // Hands producers their lanes (sluice/ipc/lane_handout_service.hpp).
  LaneHandoutService handout_;
  pid_t creator_ = 0;       // the process that called Create
  bool took_over_ = false;  // Create took over a killed consumer's segment
  std::string name_;
  Front& front_;
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
