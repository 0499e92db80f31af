// A producer process's handle on a shared-memory bus (sluice/ipc/shm_bus.hpp):
// it attaches to the segment, takes a lane of its own and publishes into
// it through the publish core every bus shares (detail/publish/publish_core.hpp).
// The segment's layout and protocol: sluice/ipc/shm_layout.hpp.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/utf8.hpp"
#include "sluice/detail/publish/publish_api.hpp"
#include "sluice/detail/publish/publish_core.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/ipc/address_reservation.hpp"
#include "sluice/ipc/consumer_wake.hpp"
#include "sluice/ipc/host_clock.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_lane_source.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {
// A Loaned<T> names a block of its producer's lane: only PublishLoan, from
// a Loan<T>() of that lane, publishes one.
template <typename T>
struct PublishedByLoanOnly<ipc::Loaned<T>> : std::true_type {};
}  // namespace detail

namespace ipc {

// A producer's handle on a bus segment: attaches (checking the
// fingerprint), takes a lane of its own, and publishes into it with
// priority admission. Publish is lock-free and safe from any thread of
// this process. Movable; detaches when destroyed. Not for a forked child
// (attach there anew): the lane belongs to the process that attached.
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmProducer
    : public sluice::detail::PublishApi<ShmProducer<Payload, kCapacity, Traits>, Payload> {
  using Api = sluice::detail::PublishApi<ShmProducer, Payload>;
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using WakePage = typename LayoutType::WakePage;
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
      reservation_ = std::move(other.reservation_);
      segment_ = std::move(other.segment_);
      wake_ = std::move(other.wake_);
      lane_object_ = std::move(other.lane_object_);
      header_ = std::exchange(other.header_, nullptr);
      wake_page_ = std::exchange(other.wake_page_, nullptr);
      control_ = std::exchange(other.control_, nullptr);
      lane_ = std::exchange(other.lane_, 0);
      heavy_fence_choice_ = other.heavy_fence_choice_;
      attacher_ = other.attacher_;
      loan_home_ = std::move(other.loan_home_);
      sleep_slice_ = other.sleep_slice_;
      // A view holds references into the mapping, which did not move.
      if (other.queue_) {
        queue_.emplace(LayoutType::RingsOf(reservation_.Base(), lane_ - 1u),
                       LayoutType::ReleasedOf(reservation_.Base(), lane_ - 1u));
      }
      other.queue_.reset();
      for (std::size_t p = 0; p < kPriorityCount; ++p) limits_[p] = other.limits_[p];
      // The observer goes with the lane where it can move (one of atomic
      // counters cannot: each object then keeps its own).
      if constexpr (std::is_nothrow_move_assignable_v<typename Traits::Observer>) {
        observer_ = std::move(other.observer_);
      }
    }
    return *this;
  }
  ~ShmProducer() { Detach(); }

  // Asks the consumer of the bus `name` for a lane of its own and maps it:
  // opens the bus's wake page for writing (whether its mode admits this
  // process is the kernel's word), sends that open to the consumer's
  // hand-out as proof (sluice/ipc/lane_handout.hpp), and maps what it gets
  // back: the header read-only, its own lane read-write, nothing of any
  // other lane. Then checks that the bus is a ready Sluice bus of this
  // payload, capacity and layout whose consumer runs. On any refusal
  // nothing stays mapped and the error says why: kNotFound (no bus of that
  // name), kPermissionDenied (its permissions do not admit this process),
  // kConsumerGone (no consumer answers), kNoFreeLane, or a layout that
  // differs. `producer_name` (NUL-terminated, or null for none) names the
  // lane in the consumer's per-producer statistics and exports, as
  // RegisterProducer's name does in process: cut to fit
  // kProducerNameCapacity at a UTF-8 boundary, invalid bytes made '?'.
  // `answer_timeout` bounds each of the request's send and the wait for
  // the consumer's answer (less than 1 ms counts as 1 ms): a consumer that
  // does not answer in it gives kNoAnswer. A running consumer answers at
  // once; the default leaves room for a host under heavy load.
  static constexpr std::chrono::milliseconds kDefaultAnswerTimeout{10000};
  [[nodiscard]] AttachError Attach(
      const std::string& name, const char* producer_name = nullptr,
      std::chrono::milliseconds answer_timeout = kDefaultAnswerTimeout) {
    Detach();
    if (!IsSegmentName(name)) return AttachError::kBadName;
    // The clock's offset, read now (sluice/ipc/host_clock.hpp).
    HostMonotonicClock::ReadForThisProcess();
    AddressReservation reservation;
    if (!reservation.Reserve(LayoutType::kSegmentSize)) return AttachError::kSystemError;
    Segment wake;
    AttachError error = Segment::Open(name + ".wake", LayoutType::kWakeBytes, &wake, nullptr,
                                      reservation.At(LayoutType::kWakeOffset));
    if (error == AttachError::kNotFound) return NoWakePage(name);
    if (error != AttachError::kNone) return error;
    Segment::Object wake_file;
    uid_t owner = 0;
    if (!detail::FileOf(wake.Descriptor(), &wake_file, &owner)) return AttachError::kSystemError;
    char bytes[kProducerNameCapacity];
    sluice::detail::CopyName(producer_name, bytes, kProducerNameCapacity);
    detail::HandedLane handed;
    // Only a process of the parts' owner (or root) may answer at the
    // address the wake page names.
    error = detail::RequestLane(
        wake.Descriptor(),
        detail::HandoutSocketPath(LayoutType::WakeOf(reservation.Base())->handout), owner,
        LayoutType::Expected(), bytes, answer_timeout, &handed);
    if (error != AttachError::kNone) return error;
    // What came back must be this bus's header and one of its lanes: the
    // very files the names hold (names of the owner's in a sticky
    // directory, which no one else can replace), not another bus's.
    // Checked before either is mapped.
    const std::size_t lane = handed.lane < kLanes ? handed.lane : 0;
    if (handed.lane >= kLanes || !IsNamedAs(handed.header_fd, name) ||
        !IsNamedAs(handed.lane_fd, name + ".lane" + std::to_string(lane))) {
      ::close(handed.header_fd);
      ::close(handed.lane_fd);
      return AttachError::kUntrustedSegment;
    }
    Segment header_object;
    Segment lane_object;
    error = Segment::Adopt(handed.header_fd, LayoutType::kHeaderBytes, /*writable=*/false, owner,
                           reservation.At(0), &header_object);
    const AttachError adopted =
        Segment::Adopt(handed.lane_fd, LayoutType::kLaneStride, /*writable=*/true, owner,
                       reservation.At(LayoutType::LaneOffset(lane)), &lane_object);
    if (error == AttachError::kNone) error = adopted;
    if (error != AttachError::kNone) return error;
    const Header* header = LayoutType::HeaderOf(reservation.Base());
    // SYNC POINT READ (T): see ConsumerSegment::Create
    // (sluice/ipc/shm_consumer_segment.hpp).
    const std::uint64_t magic = header->magic.load(std::memory_order_acquire);
    if (magic == 0) return AttachError::kNotReady;
    if (magic != detail::kMagic) return AttachError::kNotASegment;
    const AttachError differs = LayoutType::Expected().Compare(header->fingerprint);
    if (differs != AttachError::kNone) return differs;
    if (header->state.load(std::memory_order_relaxed) != detail::kOpen) {
      return AttachError::kConsumerGone;
    }
    const AdmissionThresholds thresholds = header->thresholds;
    if (!thresholds.IsValid()) return AttachError::kNotASegment;
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
    wake_page_ = LayoutType::WakeOf(reservation.Base());
    // Publishes skip their fence only if the consumer's sleep fences this
    // process too: this process registered for the heavy fence, and the
    // consumer uses it (read at each publish: a consumer that takes over
    // decides again).
    heavy_fence_choice_ = SharedFutexParker::RegisterProcess()
                              ? &wake_page_->consumer_wake.AsymmetricByte()
                              : &detail::kNoHeavyFence;
    reservation_ = std::move(reservation);
    segment_ = std::move(header_object);
    wake_ = std::move(wake);
    lane_object_ = std::move(lane_object);
    header_ = LayoutType::HeaderOf(reservation_.Base());
    control_ = LayoutType::ControlOf(reservation_.Base(), lane);
    lane_ = static_cast<std::uint16_t>(lane + 1);
    attacher_ = ::getpid();
    if constexpr (LayoutType::kLoanBlocks != 0) {
      loan_home_ = std::make_shared<detail::LoanHome>();
      loan_home_->words = control_->loans;
    }
    queue_.emplace(LayoutType::RingsOf(reservation_.Base(), lane),
                   LayoutType::ReleasedOf(reservation_.Base(), lane));
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
      // Then the role (closing the descriptor would drop it too): a
      // consumer that finds it dropped reads the state after, so it sees
      // a detach, not a kill. A forked child shares the role's open and
      // must not drop it: it only closes its descriptor, below.
      lane_object_.DropRole(detail::kLaneRole);
    }
    queue_.reset();
    lane_object_ = Segment();
    wake_ = Segment();
    segment_ = Segment();
    reservation_ = AddressReservation();
    header_ = nullptr;
    wake_page_ = nullptr;
    control_ = nullptr;
    lane_ = 0;
  }
  bool IsAttached() const noexcept { return header_ != nullptr; }
  // This producer's lane (1..kMaxProducers, MessageHeader::lane of its
  // messages at the consumer), 0 when not attached.
  std::uint16_t Lane() const noexcept { return lane_; }

  // ---- Publishing ------------------------------------------------------------
  // The calls of the in-process bus's Producer (detail/publish/publish_api.hpp):
  // Publish, PublishWithPriority, PublishAttempt, PublishFast, Emplace,
  // PublishBatch, each returning a PublishResult, through the one publish
  // core; and PublishBlocking and PublishLoan below. Admitted while this
  // producer's lane holds fewer messages than the priority's threshold
  // (fixed for the segment's life, read at Attach); a refusal for room is
  // kRefusedFull, counted in the statistics' `dropped` (PublishAttempt's
  // not). kClosed when not attached, or when the consumer closed the bus or
  // is no longer running (looked at only when a publish is refused). Lock-free,
  // any thread of this process; stamped with HostMonotonicClock
  // nanoseconds (sluice/ipc/host_clock.hpp: the consumer's clock too, the
  // same in every time namespace).
  using Api::Publish;

  // Deprecated: the 0.5 signature. Write PublishWithPriority(message,
  // sender_id, priority), as on the in-process bus.
  template <typename Message>
  [[deprecated("use PublishWithPriority(message, sender_id, priority)")]] PublishResult Publish(
      Message&& message, std::uint32_t sender_id, MessagePriority priority) {
    return this->PublishWithPriority(std::forward<Message>(message), sender_id, priority);
  }

  // As PublishWithPriority, but while this producer's lane is at the
  // priority's threshold it waits up to `timeout` for the consumer to make
  // room: it polls kPollsBeforePark times, then sleeps on a futex in the
  // segment until a batch that took from this lane wakes it (no lost
  // wake-up: (R)), in slices after which it looks whether the consumer
  // still runs. kTimedOut when the time passed (counted in `dropped` once),
  // kClosed when the consumer closed the bus or is gone. Not lock-free: it
  // waits for the consumer by design. Never from the consumer's own thread
  // (it would wait out its timeout).
  template <typename Message, typename Rep, typename Period>
  PublishResult PublishBlocking(Message&& message, std::uint32_t sender_id,
                                MessagePriority priority,
                                std::chrono::duration<Rep, Period> timeout) {
    using Value = std::decay_t<Message>;
    static_assert(sluice::detail::kIsAlternative<Value, Payload> || std::is_same_v<Value, Payload>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    static_assert(!detail::IsLoaned<Value>::value,
                  "Sluice: a Loaned<T> is published with PublishLoan, from a Loan<T>()");
    Source counting = PublishSource();
    if (Publisher::IsBadInput(message, priority)) return Publisher::Reject(counting, priority);
    // Each try reads the closed state only; whether the consumer still
    // runs (its role: two system calls) is looked at once a slice, by
    // consumer_left.
    // The message is copied in on every try (its types are trivially
    // copyable), never moved from.
    Source trying{*this, /*look_for_consumer=*/false};
    const Value& copy = message;
    auto make_payload = [&copy] { return Publisher::MakePayload(copy); };
    return Publisher::AdmitWaiting(trying, sender_id, priority, make_payload, [&](auto& try_admit) {
      if (control_ == nullptr) return PublishOutcome::kClosed;  // not attached
      // SYNC POINT READ (X)/(R): the state, after the announcement's
      // fence; a dead consumer wakes no one, so it is looked for once a
      // slice.
      const auto consumer_left = [this] { return !IsOpenForPublishing(); };
      switch (sluice::detail::WaitUntilInSlices(control_->room, Traits::kPollsBeforePark,
                                                sluice::detail::SaturatingNanos(timeout),
                                                sleep_slice_, try_admit, consumer_left)) {
        case sluice::detail::WaitEnd::kReady:
          return PublishOutcome::kAdmitted;
        case sluice::detail::WaitEnd::kStopped:
          return PublishOutcome::kClosed;
        case sluice::detail::WaitEnd::kTimedOut:
          break;
      }
      return PublishOutcome::kTimedOut;
    });
  }

  // A free block of this producer's lane for a T, to write in place and
  // publish with PublishLoan; empty when every block is out (lent, or in a
  // message not yet dispatched) or when not attached. Lock-free; any thread
  // of this process.
  template <typename T>
  [[nodiscard]] ShmLoan<T> Loan() noexcept {
    static_assert(sluice::detail::kIsAlternative<Loaned<T>, Payload>,
                  "Sluice: Loan<T> needs sluice::ipc::Loaned<T> among the payload alternatives");
    if (control_ == nullptr) return ShmLoan<T>();
    std::uint32_t block = 0;
    if (!detail::TakeFreeBlock(control_->loans, LayoutType::kLoanBlocks, &block)) {
      return ShmLoan<T>();
    }
    void* place = LayoutType::LoanBlock(reservation_.Base(), lane_ - 1u, block);
    return ShmLoan<T>(new (place) T, loan_home_, block);
  }

  // Publishes the loan's block at `priority` as PublishWithPriority does a
  // message: the consumer reads it in place. Admitted: the loan is empty
  // afterwards (the block is the message's until dispatched). Refused: the
  // caller keeps it. kPoolEmpty for an empty loan (Loan found no free
  // block), counted in its lane's `pool_empty` (kClosed once the bus is
  // closed, as for any publish), kRejected for one of another producer or
  // attachment.
  template <typename T>
  PublishResult PublishLoan(ShmLoan<T>&& loan, std::uint32_t sender_id, MessagePriority priority) {
    Source source = PublishSource();
    if (!IsValidPriority(priority)) return Publisher::Reject(source, priority);
    if (!loan) {
      // As in process: a closed bus is the reason, whatever the pool held.
      if (!source.Enter() || source.ClosedAfterRefusal()) {
        return Publisher::Refuse(source, PublishOutcome::kClosed, source.Mode(), priority, 1);
      }
      EmptyLoanSource empty_loan{source};
      return Publisher::Refuse(empty_loan, PublishOutcome::kPoolEmpty, source.Mode(), priority, 1);
    }
    if (control_ == nullptr || loan.home_ != loan_home_) {
      return Publisher::Reject(source, priority);
    }
    Loaned<T> message;
    message.block_ = loan.block_;
    auto make_payload = [&message] { return Publisher::MakePayload(message); };
    const PublishResult result =
        Publisher::template Admit<true>(source, sender_id, priority, 0, make_payload);
    if (result) (void)loan.Release();
    return result;
  }

  // Deprecated: the 0.5 signature. Write PublishLoan(std::move(loan),
  // sender_id, priority), as on the in-process bus.
  template <typename T>
  [[deprecated("use PublishLoan(std::move(loan), sender_id, priority)")]] PublishResult PublishLoan(
      ShmLoan<T>& loan, std::uint32_t sender_id,
      MessagePriority priority = MessagePriority::MEDIUM) {
    return PublishLoan(std::move(loan), sender_id, priority);
  }

  // Whether a consumer holds the segment's consumer role: it runs (in any
  // PID or time namespace, seen in /proc or not), or a child it forked
  // without exec still holds the segment open. Two system calls.
  bool ConsumerAlive() const noexcept {
    return header_ != nullptr &&
           segment_.HolderOf(detail::kConsumerRole) != Segment::RoleHolder::kNone;
  }

  // The traits' observer (ShmBusTraits::Observer): this producer's events.
  typename Traits::Observer& GetObserver() noexcept { return observer_; }
  const typename Traits::Observer& GetObserver() const noexcept { return observer_; }

 private:
  friend Api;
  using Publisher = sluice::detail::PublishCore<Payload>;

  // Whether the file `name` names (looked at, not opened: a producer may
  // not open it) is the one the descriptor `fd` is open on.
  static bool IsNamedAs(int fd, const std::string& name) {
    struct stat named {};
    struct stat opened {};
    const std::string path = std::string(kSharedMemoryDirectory) + name;
    return ::lstat(path.c_str(), &named) == 0 && S_ISREG(named.st_mode) &&
           ::fstat(fd, &opened) == 0 && named.st_dev == opened.st_dev &&
           named.st_ino == opened.st_ino;
  }

  // Why a bus `name` has no wake page: no such name (kNotFound); a header
  // this process may read, being made (magic 0 or Sluice's: its parts are
  // named after it; kNotReady) or another program's (kNotASegment); one it
  // may not read: a bus of another user being made, as far as this
  // process can tell (kNotReady).
  static AttachError NoWakePage(const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return errno == ENOENT ? AttachError::kNotFound : AttachError::kNotReady;
    std::uint64_t magic = 0;
    const ssize_t got = ::pread(fd, &magic, sizeof(magic), 0);
    ::close(fd);
    if (got == 0) return AttachError::kNotReady;  // not sized yet
    if (got != static_cast<ssize_t>(sizeof(magic))) return AttachError::kNotASegment;
    return magic == 0 || magic == detail::kMagic ? AttachError::kNotReady
                                                 : AttachError::kNotASegment;
  }

  // The slices a segment may set: 1 ms to an hour.
  static constexpr std::uint64_t kMinSliceNanos = 1'000'000;
  static constexpr std::uint64_t kMaxSliceNanos = 3'600'000'000'000;

  // This producer's lane as a source of the publish core, and the source an
  // empty loan is refused through (sluice/ipc/shm_lane_source.hpp), with
  // what they read of it beside its parts.
  using Source = detail::ShmLaneSource<ShmProducer>;
  using EmptyLoanSource = detail::ShmEmptyLoanSource<ShmProducer>;
  friend Source;
  friend EmptyLoanSource;
  using Observer = typename Traits::Observer;
  static constexpr Position kSlots = kCapacity;

  // The publish API's hooks: every call is made (a producer not attached
  // refuses as kClosed, in Source::Enter).
  static constexpr bool CanPublish() noexcept { return true; }
  static Publisher PublishCore() noexcept { return Publisher(); }
  Source PublishSource() noexcept { return Source{*this}; }

  // Whether the consumer has neither closed the bus nor exited.
  bool IsOpenForPublishing() const noexcept {
    // The consumer now (another may have taken over): its role.
    return header_->state.load(std::memory_order_relaxed) == detail::kOpen &&
           segment_.HolderOf(detail::kConsumerRole) != Segment::RoleHolder::kNone;
  }
  // The bus's range, of which this producer maps the header (segment_,
  // read-only), the wake page and its own lane; the rest stays
  // inaccessible (sluice/ipc/address_reservation.hpp).
  AddressReservation reservation_;
  Segment segment_;
  Segment wake_;
  Segment lane_object_;  // its open holds this producer's role
  const Header* header_ = nullptr;
  WakePage* wake_page_ = nullptr;
  LaneControl* control_ = nullptr;  // this producer's lane
  std::optional<Queue> queue_;      // its rings
  std::uint16_t lane_ = 0;
  // (W): the consumer's choice of the heavy fence, read at each publish, if
  // this process registered for it (its sleep then fences this process);
  // else a byte that always says no.
  const std::atomic<std::uint8_t>* heavy_fence_choice_ = &detail::kNoHeavyFence;
  pid_t attacher_ = 0;                           // the process that attached
  std::shared_ptr<detail::LoanHome> loan_home_;  // where this attachment's loans go back
  // How long PublishBlocking sleeps, at most, before it looks whether the
  // consumer still runs (a dead one wakes no one): the consumer's setting.
  std::chrono::nanoseconds sleep_slice_{1000000};
  Position limits_[kPriorityCount] = {};
  // The traits' observer: this producer's admissions and refusals. An
  // observer with counters that threads write should keep them on lines of
  // their own.
  typename Traits::Observer observer_;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
