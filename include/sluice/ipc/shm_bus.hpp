// The bus across processes on one host: the queue of the in-process bus
// (detail/message_queue.hpp: one ring per priority, HIGH first, one fill
// cursor for admission) placed in a named shared-memory segment. One
// consumer process creates the segment and dispatches (ShmBus); producer
// processes attach and publish (ShmProducer). No daemon. Linux.
//
// Segment layout: a Header (magic, fingerprint, consumer identity, admission
// thresholds, state, counters), then the queue at kQueueOffset. Everything
// in it is fixed-width or a lock-free atomic, and holds offsets, never
// pointers, so each process may map it at another address.
//
// Synchronisation, each release named with its acquire:
//  (S) segment ready, creator -> attacher: Create writes the header and
//      constructs the queue, then stores `magic` with release; Attach loads
//      it with acquire before reading anything else.
//  (A), (B), (H) of the rings and the fill cursor, as in process
//      (detail/ring.hpp, detail/claim_cursor.hpp): a lock-free atomic is
//      address-free, so they hold between processes as between threads.
//  (X) close: the consumer closes the fill cursor (every later claim is
//      refused) and then stores `state` = kClosed; a producer reads `state`
//      only after a refused claim, to say why (relaxed: it carries no data).
//
// The consumer copies each message out of the segment before it looks at
// it: a producer process (or anything else that can write the segment)
// could change it while it is read. The copy's priority and alternative
// index are checked before dispatch; a message that fails is counted as
// corrupt and skipped. Slot indices are masked, so no position read from
// the segment reaches outside it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
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
// subscription table's sizes.
struct ShmBusTraits {
  // Part of the fingerprint: raise it when a payload type changes in a way
  // its name, size and alignment do not show (fields reordered or retyped
  // alike, a field put where padding was), so old and new builds refuse
  // each other.
  static constexpr std::uint64_t kSchemaVersion = 0;
  static constexpr std::size_t kMaxSubscribersPerType = 16;
  static constexpr std::size_t kCallbackStorageBytes = 48;
  static constexpr std::uint32_t kCheckInterval = 1;
  static constexpr std::uint32_t kStarvationLimit = 0;
};

struct ShmBusOptions {
  SegmentPermissions permissions;
  // Fixed for the segment's life; producers read them at Attach.
  AdmissionThresholds thresholds;
};

// What the consumer process counted; the per-priority counts come from the
// segment (every producer's publishes).
struct ShmBusStatistics {
  std::uint64_t published[kPriorityCount] = {};  // admitted, by every producer
  std::uint64_t dropped[kPriorityCount] = {};    // refused for room
  std::uint64_t processed = 0;                   // dispatched by this consumer
  std::uint64_t corrupt = 0;             // skipped: a priority or alternative index out of range
  std::uint64_t callback_errors = 0;     // subscriber or visitor threw (counted, batch went on)
  std::uint64_t producers_attached = 0;  // attaches since the segment was made
};

namespace detail {

inline constexpr std::uint64_t kMagic = 0x534C554943453031ULL;  // "SLUICE01"

constexpr std::size_t RoundUp(std::size_t value, std::size_t alignment) noexcept {
  return (value + alignment - 1) / alignment * alignment;
}

enum SegmentState : std::uint32_t { kOpen = 1, kClosed = 2 };

template <typename Payload, std::size_t kCapacity, typename Traits>
struct Layout {
  static_assert(sluice::detail::IsVariant<Payload>::value,
                "Sluice: the bus payload must be a std::variant of message types");
  static_assert(CrossProcessAlternatives<Payload>::value,
                "Sluice: every payload alternative of a shared-memory bus must be trivially "
                "copyable and not a pointer: it is copied between processes as bytes");
  static_assert(std::atomic<Position>::is_always_lock_free &&
                    std::atomic<std::uint32_t>::is_always_lock_free,
                "Sluice: a shared-memory bus needs lock-free (address-free) atomics");

  using Envelope = MessageEnvelope<Payload>;
  // The consumer's state (which ring, how long a run) lives in each
  // process's queue object; only the rings are in the segment.
  using Queue = sluice::detail::PriorityQueue<Envelope, kCapacity, ProducerModel::kMulti,
                                              SlotStorage::kInline, Traits::kCheckInterval,
                                              Traits::kStarvationLimit, sluice::detail::RingsAt>;
  using Rings = typename Queue::Rings;

  struct alignas(kCacheLineSize) Header {
    std::atomic<std::uint64_t> magic;  // kMagic once ready: (S)
    Fingerprint fingerprint;
    ProcessIdentity consumer;
    AdmissionThresholds thresholds;
    std::atomic<std::uint32_t> state;
    std::atomic<std::uint64_t> producers_attached;
    // Producers count here (relaxed: tallies). Their own line.
    alignas(kCacheLineSize) std::atomic<std::uint64_t> published[kPriorityCount];
    std::atomic<std::uint64_t> dropped[kPriorityCount];
  };

  static constexpr std::size_t kRingsAlign = alignof(Rings) > kCacheLineSize ? alignof(Rings)
                                                                             : kCacheLineSize;
  static constexpr std::size_t kRingsOffset = RoundUp(sizeof(Header), kRingsAlign);
  static constexpr std::size_t kSegmentSize = RoundUp(kRingsOffset + sizeof(Rings), 4096);

  static Fingerprint Expected() {
    return MakeFingerprint<Payload, kCapacity, Envelope, Rings>(kSegmentSize,
                                                                Traits::kSchemaVersion);
  }
  static Header* HeaderOf(void* base) noexcept { return static_cast<Header*>(base); }
  static Rings* RingsOf(void* base) noexcept {
    return std::launder(reinterpret_cast<Rings*>(static_cast<unsigned char*>(base) + kRingsOffset));
  }
};

}  // namespace detail

// The consumer: creates the segment and dispatches what producer processes
// publish, HIGH first. One thread dispatches (ProcessBatch,
// ProcessBatchWith); Subscribe and Unsubscribe are safe from any thread of
// this process. Not movable (subscriptions point into it).
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmBus {
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using Queue = typename LayoutType::Queue;

 public:
  using Envelope = MessageEnvelope<Payload>;
  static constexpr std::size_t kSegmentSize = LayoutType::kSegmentSize;

  ShmBus() noexcept = default;
  ShmBus(const ShmBus&) = delete;
  ShmBus& operator=(const ShmBus&) = delete;
  ~ShmBus() { Close(); }

  // Creates the segment `name` ("/name") and opens the bus. A segment of
  // that name left by a consumer that exited (or was killed) is removed
  // and made again; one whose consumer still runs is kConsumerExists.
  AttachError Create(const std::string& name, const ShmBusOptions& options = {}) {
    if (header_ != nullptr) return AttachError::kConsumerExists;
    if (!options.thresholds.IsValid()) return AttachError::kBadOptions;
    AttachError error = Segment::Create(name, kSegmentSize, options.permissions, &segment_);
    if (error == AttachError::kConsumerExists) {
      Segment old;  // locked, while its name is judged and made again
      error = RemoveIfStale(name, &old);
      if (error != AttachError::kNone) return error;
      error = Segment::Create(name, kSegmentSize, options.permissions, &segment_);
    }
    if (error != AttachError::kNone) return error;
    void* base = segment_.Base();
    header_ = new (base) Header();
    header_->fingerprint = LayoutType::Expected();
    header_->consumer = ProcessIdentity::Self();
    header_->thresholds = options.thresholds;
    header_->state.store(detail::kOpen, std::memory_order_relaxed);
    auto* rings = new (static_cast<unsigned char*>(base) + LayoutType::kRingsOffset)
        typename LayoutType::Rings(0);
    queue_.emplace(rings);
    name_ = name;
    // SYNC POINT WRITE (S): the header and queue above, before any attach.
    header_->magic.store(detail::kMagic, std::memory_order_release);
    return AttachError::kNone;
  }

  // Closes the bus: producers' publishes are refused (kClosed) from now on,
  // the name is removed (the memory goes with the last mapping). What is
  // still queued is not dispatched. Then Create may be called again.
  void Close() noexcept {
    if (header_ == nullptr) return;
    (void)queue_->Close();
    // The name is removed only while it is still this segment's (under the
    // lock a consumer making the name again takes), then producers learn
    // why their claims fail.
    if (segment_.Lock()) {
      if (segment_.IsNamed(name_)) Segment::Unlink(name_);
      segment_.Unlock();
    }
    header_->state.store(detail::kClosed, std::memory_order_relaxed);
    segment_ = Segment();
    header_ = nullptr;
    queue_.reset();
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

  // ---- Observation ---------------------------------------------------------------

  // Messages admitted and not yet taken (0 when closed).
  std::size_t QueueDepth() const noexcept {
    return queue_ ? static_cast<std::size_t>(queue_->Depth()) : 0;
  }

  ShmBusStatistics GetStatistics() const noexcept {
    ShmBusStatistics s;
    s.processed = processed_;
    s.corrupt = corrupt_;
    s.callback_errors = callback_errors_;
    if (header_ != nullptr) {
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        s.published[p] = header_->published[p].load(std::memory_order_relaxed);
        s.dropped[p] = header_->dropped[p].load(std::memory_order_relaxed);
      }
      s.producers_attached = header_->producers_attached.load(std::memory_order_relaxed);
    }
    return s;
  }

 private:
  // A segment of this name exists: removed if its consumer is gone (or it
  // closed); else why not. `old` stays locked until the caller has made the
  // new segment, so that two consumers making the name again take turns:
  // the second finds it named anew and is refused by the first's.
  AttachError RemoveIfStale(const std::string& name, Segment* old) {
    const AttachError opened = Segment::Open(name, sizeof(Header), old);
    if (opened == AttachError::kNotFound) return AttachError::kNone;  // gone meanwhile
    // Too small: not ours, left alone; empty: being made (kNotReady).
    if (opened != AttachError::kNone) return opened;
    if (!old->Lock()) return AttachError::kSystemError;
    if (!old->IsNamed(name)) return AttachError::kNone;  // made anew meanwhile: Create says so
    const Header* header = LayoutType::HeaderOf(old->Base());
    // (S): the identity is read only from a segment whose creator finished.
    const std::uint64_t magic = header->magic.load(std::memory_order_acquire);
    // Being made by another consumer now, or its maker died making it: not
    // told apart, so left alone.
    if (magic == 0) return AttachError::kNotReady;
    if (magic != detail::kMagic) return AttachError::kNotASegment;  // someone else's
    if (header->state.load(std::memory_order_relaxed) != detail::kClosed &&
        !header->consumer.IsGone()) {
      return AttachError::kConsumerExists;
    }
    Segment::Unlink(name);
    return AttachError::kNone;
  }

  template <typename Deliver>
  std::uint32_t Run(std::uint32_t max_messages, Deliver&& deliver) {
    if (!queue_) return 0;
    std::uint32_t taken = 0;
    epoch_.Enter();
    while (taken < max_messages) {
      Envelope* front = queue_->TryFront();
      if (front == nullptr) break;
      // The copy is what gets checked and dispatched: the slot is memory
      // other processes can write. Freed at once for the producers.
      alignas(Envelope) unsigned char bytes[sizeof(Envelope)];
      std::memcpy(bytes, static_cast<const void*>(front), sizeof(Envelope));
      queue_->PopFront();
      ++taken;
      Envelope& envelope = *std::launder(reinterpret_cast<Envelope*>(bytes));
      if (envelope.payload.index() >= std::variant_size_v<Payload> ||
          static_cast<std::size_t>(envelope.header.priority) >= kPriorityCount) {
        ++corrupt_;
        continue;
      }
      // Fields a writer could leave as any byte, set to what they mean
      // here: `counted` is a bool (only 0 and 1 are values), lanes are not
      // shared across processes.
      std::memset(static_cast<void*>(&envelope.header.counted), 1, sizeof(bool));
      envelope.header.lane = 0;
      ++processed_;
      deliver(envelope);
    }
    registry_.ReclaimDeferred();
    epoch_.Exit();
    return taken;
  }

  Segment segment_;
  Header* header_ = nullptr;
  std::optional<Queue> queue_;  // the consumer's view of the segment's rings
  std::string name_;
  sluice::detail::SubscriptionRegistry<Payload, Traits> registry_;
  sluice::detail::DispatchEpoch epoch_;
  // The consumer thread's tallies, plain: GetStatistics reads them, so it is
  // for the consumer thread too (from another thread it would be a data race).
  std::uint64_t processed_ = 0;
  std::uint64_t corrupt_ = 0;
  std::uint64_t callback_errors_ = 0;
};

// A producer process's handle on a bus segment: attaches (checking the
// fingerprint) and publishes with priority admission. Publish is lock-free
// and safe from any thread of this process. Movable.
template <typename Payload, std::size_t kCapacity, typename Traits = ShmBusTraits>
class ShmProducer {
  using LayoutType = detail::Layout<Payload, kCapacity, Traits>;
  using Header = typename LayoutType::Header;
  using Queue = typename LayoutType::Queue;

 public:
  using Envelope = MessageEnvelope<Payload>;

  ShmProducer() noexcept = default;

  // Maps the segment and checks that it is a ready Sluice bus of this
  // payload, capacity and layout whose consumer runs; on any mismatch
  // nothing stays mapped and the error says which part differs.
  AttachError Attach(const std::string& name) {
    Detach();
    Segment segment;
    const AttachError opened = Segment::Open(name, sizeof(Header), &segment);
    if (opened != AttachError::kNone) return opened;
    Header* header = LayoutType::HeaderOf(segment.Base());
    // SYNC POINT READ (S): see ShmBus::Create.
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
    limits_[0] = FillLimit(thresholds.low_percent, kCapacity);
    limits_[1] = FillLimit(thresholds.medium_percent, kCapacity);
    limits_[2] = FillLimit(thresholds.high_percent, kCapacity);
    consumer_ = header->consumer;
    header->producers_attached.fetch_add(1, std::memory_order_relaxed);
    segment_ = std::move(segment);
    header_ = header;
    queue_.emplace(LayoutType::RingsOf(segment_.Base()));
    return AttachError::kNone;
  }

  void Detach() noexcept {
    segment_ = Segment();
    header_ = nullptr;
    queue_.reset();
  }
  bool IsAttached() const noexcept { return header_ != nullptr; }

  // Admits `message` at `priority` if the queue is below that priority's
  // threshold. kClosed when not attached, or when the consumer closed the
  // bus or is no longer running (checked only when a publish is refused).
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
    using T = std::decay_t<Message>;
    static_assert(sluice::detail::kIsAlternative<T, Payload>,
                  "Sluice: Publish needs a message type that is exactly one alternative of "
                  "the bus payload variant");
    const auto p = static_cast<std::size_t>(priority);
    if (p >= kPriorityCount) return PublishResult(PublishOutcome::kRejected, priority);
    if (!queue_) return PublishResult(PublishOutcome::kClosed, priority);
    typename Queue::Claim claim;
    if (!queue_->TryClaim(limits_[p], priority, &claim)) {
      if (header_->state.load(std::memory_order_relaxed) != detail::kOpen || consumer_.IsGone()) {
        return PublishResult(PublishOutcome::kClosed, priority);
      }
      header_->dropped[p].fetch_add(1, std::memory_order_relaxed);
      return PublishResult(PublishOutcome::kRefusedFull, priority);
    }
    MessageHeader header;
    header.msg_id = Queue::MessageId(claim);
    header.timestamp_ns = static_cast<std::uint64_t>(timestamp.count());
    header.sender_id = sender_id;
    header.priority = priority;
    header.counted = true;
    new (queue_->Storage(claim)) Envelope{header, Payload(std::forward<Message>(message))};
    queue_->Publish(claim);
    header_->published[p].fetch_add(1, std::memory_order_relaxed);
    return PublishResult::MakeAdmitted(priority);
  }

  // Whether the consumer that created the segment has not been seen to
  // exit (one in another PID namespace cannot be seen: alive).
  bool ConsumerAlive() const noexcept { return header_ != nullptr && !consumer_.IsGone(); }

 private:
  Segment segment_;
  Header* header_ = nullptr;
  std::optional<Queue> queue_;  // the consumer's view of the segment's rings
  ProcessIdentity consumer_;
  Position limits_[kPriorityCount] = {};
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
