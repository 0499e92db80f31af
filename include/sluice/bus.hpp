// AsyncBus: the public facade. Producers publish envelopes into the ring under
// priority admission; one consumer thread dispatches them to subscriptions or
// to a visitor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/admission.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/admission_policy.hpp"
#include "sluice/detail/cpu_relax.hpp"
#include "sluice/detail/dispatch_epoch.hpp"
#include "sluice/detail/error_reporter.hpp"
#include "sluice/detail/latency_recorder.hpp"
#include "sluice/detail/message_queue.hpp"
#include "sluice/detail/producer_lanes.hpp"
#include "sluice/detail/ring.hpp"
#include "sluice/detail/statistics_counters.hpp"
#include "sluice/detail/subscription_registry.hpp"
#include "sluice/detail/variant_index.hpp"
#include "sluice/detail/wake_signal.hpp"
#include "sluice/error.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/loan_pool.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/publish_status.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"

#if !SLUICE_FREESTANDING
#include <thread>
#endif

#include <array>

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

inline constexpr std::size_t kDefaultCapacity = 131072;

// A bounded in-process message bus. `Payload` is a std::variant of message
// types; `kCapacity` slots (a power of two) hold envelopes inline.
//
// Threads: any number of producers (one for ProducerModel::kSingle) may
// publish concurrently; exactly one thread at a time may call ProcessBatch or
// ProcessBatchWith. Every other call is safe from any thread.
//
// Ordering: what a producer wrote before a successful publish happens-before
// the callback or visitor that receives the message (publish is release,
// dispatch is acquire).
template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          ProducerModel kProducers = ProducerModel::kMulti, typename Traits = DefaultBusTraits>
class AsyncBus {
  static_assert(detail::IsVariant<Payload>::value,
                "Sluice: the bus payload must be a std::variant of message types");
  static_assert(std::is_nothrow_move_constructible_v<Payload>,
                "Sluice: every payload alternative must be nothrow move constructible, "
                "so that a claimed slot is always filled");
  static_assert(!Traits::kRequireTriviallyCopyablePayloads ||
                    detail::TriviallyCopyableAlternatives<Payload>::value,
                "Sluice: kRequireTriviallyCopyablePayloads is set, so every payload alternative "
                "must be trivially copyable (no std::vector, std::string or other type that "
                "owns memory)");
  static_assert(kCapacity <= (std::size_t{1} << 31),
                "Sluice: the capacity must be at most 2^31 slots (a batch counts in 32 bits)");

  static_assert(Traits::kDeliveryOrder == DeliveryOrder::kFifo ||
                    Traits::kDeliveryOrder == DeliveryOrder::kPriority,
                "Sluice: kDeliveryOrder must be DeliveryOrder::kFifo or DeliveryOrder::kPriority");
  // The queue of one source: the shared queue (every unregistered producer)
  // or a producer lane.
  template <std::size_t kSlots, ProducerModel kModel>
  using SourceQueue = std::conditional_t<
      Traits::kDeliveryOrder == DeliveryOrder::kPriority,
      detail::PriorityQueue<MessageEnvelope<Payload>, kSlots, kModel, Traits::kSlotStorage,
                            Traits::kPriorityCheckInterval, Traits::kStarvationLimit>,
      detail::FifoQueue<MessageEnvelope<Payload>, kSlots, kModel, Traits::kSlotStorage>>;
  static constexpr bool kHasLanes = Traits::kMaxProducerLanes > 0;
  static_assert(!kHasLanes || (Traits::kLaneCapacity >= 2 &&
                               (Traits::kLaneCapacity & (Traits::kLaneCapacity - 1)) == 0),
                "Sluice: kLaneCapacity must be a power of two and at least 2");
  static_assert(!kHasLanes || Traits::kStarvationLimit == 0,
                "Sluice: producer lanes need strict priority order (kStarvationLimit = 0)");
  using LaneStatistics =
      detail::StatisticsCounters<true, Traits::kDeliveryOrder == DeliveryOrder::kPriority, true>;
  using Queue = std::conditional_t<
      kHasLanes,
      detail::LanedQueue<MessageEnvelope<Payload>, SourceQueue<kCapacity, kProducers>,
                         SourceQueue<Traits::kLaneCapacity, ProducerModel::kSingle>,
                         Traits::kMaxProducerLanes, Traits::kDeliveryOrder, Traits::kLaneBurst,
                         Traits::kPriorityCheckInterval, typename Traits::HeavyFence,
                         LaneStatistics>,
      SourceQueue<kCapacity, kProducers>>;

 public:
  using Envelope = MessageEnvelope<Payload>;
  // Memory of one slot (sequence number + envelope) and of all slots: one
  // ring of kCapacity, or three with DeliveryOrder::kPriority.
  static constexpr std::size_t kBytesPerSlot = Queue::kBytesPerSlot;
  static constexpr std::size_t kRingBytes = kBytesPerSlot * kCapacity * Queue::kRingCount;
  static constexpr DeliveryOrder kDeliveryOrder = Traits::kDeliveryOrder;
  static constexpr ProducerModel kProducerModel = kProducers;
  static constexpr bool kKeepsLatencyHistograms = Traits::kLatencyHistograms;

  AsyncBus() : queue_(0) {}
  // For tests: counting starts at `first` (near the wrap), not at 0.
  explicit AsyncBus(detail::FirstPosition first) : queue_(first.value) {}
  AsyncBus(const AsyncBus&) = delete;
  AsyncBus& operator=(const AsyncBus&) = delete;
  // Destroys queued payloads and subscription callables. No thread may be
  // publishing or dispatching.
  ~AsyncBus() = default;

  static constexpr std::size_t Capacity() noexcept { return kCapacity; }

  // ---- Producers -----------------------------------------------------------
  // Each publish takes one payload alternative or the variant itself, returns
  // true if admitted and false if refused. A refused message is left to the
  // caller (an rvalue argument is not moved from). MPSC: lock-free;
  // SPSC: wait-free. No allocation.

  // MEDIUM priority, timestamped with Traits::Clock (not in BARE_METAL).
  template <typename Message>
  [[nodiscard]] bool Publish(Message&& message, std::uint32_t sender_id = 0) {
    return PublishImpl<true>(std::forward<Message>(message), sender_id, MessagePriority::MEDIUM, 0);
  }

  // As Publish, with a priority. An out-of-range priority returns false.
  template <typename Message>
  [[nodiscard]] bool PublishWithPriority(Message&& message, std::uint32_t sender_id,
                                         MessagePriority priority) {
    return PublishImpl<true>(std::forward<Message>(message), sender_id, priority, 0);
  }

  // The caller supplies the timestamp: no clock read on the publish path.
  template <typename Message>
  [[nodiscard]] bool PublishFast(Message&& message, std::uint32_t sender_id,
                                 std::uint64_t timestamp_us,
                                 MessagePriority priority = MessagePriority::MEDIUM) {
    return PublishImpl<false>(std::forward<Message>(message), sender_id, priority, timestamp_us);
  }

  // Constructs a T from `args` in its slot (no copy or move of the message)
  // when T has a constructor from them that cannot throw. Otherwise the T is
  // built before a slot is claimed and moved in: when that constructor may
  // throw (so a claimed slot is always filled), or when T is an aggregate
  // initialised with braces. Timestamped with Traits::Clock (not in
  // BARE_METAL). As PublishWithPriority otherwise.
  template <typename T, typename... Args>
  [[nodiscard]] bool Emplace(std::uint32_t sender_id, MessagePriority priority, Args&&... args) {
    CheckEmplace<T, Args...>();
    if (!IsValidPriority(priority)) {
      statistics_.CountRejected();
      return false;
    }
    return EmplaceVia<T>(
        [&](auto&& make_payload) { return Admit<true>(sender_id, priority, 0, make_payload); },
        [&](T&& built) { return PublishImpl<true>(std::move(built), sender_id, priority, 0); },
        std::forward<Args>(args)...);
  }

  // Publishes a loaned block (sluice/loan_pool.hpp; Loan<T> must be an
  // alternative of the payload): as PublishWithPriority, and an empty Loan
  // (the pool was exhausted) is a refusal like a full queue's, counted in
  // messages_dropped under `priority` (FULL_FEATURED), or in
  // messages_refused_closed once the bus is closed. A refused Loan stays
  // with the caller, who drops it to hand the block back.
  template <typename T>
  [[nodiscard]] bool PublishLoan(Loan<T>&& loan, std::uint32_t sender_id,
                                 MessagePriority priority) {
    CheckLoan<T>();
    if (RejectBadInput(loan, priority)) return false;
    if (!loan) {
      CountRefusal(policy_.Mode(), priority, 1);
      return false;
    }
    return PublishImpl<true>(std::move(loan), sender_id, priority, 0);
  }

  // Publishes the messages of [first, last) in order with one claim (one CAS
  // with several producers): as many as fit below the priority's threshold,
  // from the front; returns how many were admitted (the caller keeps the
  // rest). Each has its own msg_id; all share one clock reading (none in
  // BARE_METAL). The elements are copied (moved from with move iterators);
  // their construction must not throw (publish such types one by one).
  // Consecutive in the queue only per producer: other producers' messages
  // may come before or after the whole batch, never inside it.
  template <typename Iterator>
  [[nodiscard]] std::size_t PublishBatch(Iterator first, Iterator last, std::uint32_t sender_id,
                                         MessagePriority priority = MessagePriority::MEDIUM) {
    using Reference = decltype(*first);
    using Value = std::decay_t<Reference>;
    static_assert(kPublishable<Value>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    constexpr bool kNothrowElement = [] {
      if constexpr (std::is_same_v<Value, Payload>) {
        return detail::NothrowAlternatives<Payload, std::is_rvalue_reference_v<Reference>>::value;
      } else {
        return std::is_nothrow_constructible_v<Value, Reference>;
      }
    }();
    static_assert(kNothrowElement,
                  "Sluice: PublishBatch needs elements whose copy (or move) cannot throw; "
                  "publish such types one by one");
    if (!IsValidPriority(priority)) {
      statistics_.CountRejected();
      return 0;
    }
    const PerformanceMode mode = policy_.Mode();
    const std::uint64_t timestamp_us =
        mode == PerformanceMode::BARE_METAL ? 0 : Traits::Clock::NowMicros();
    const bool counted = mode == PerformanceMode::FULL_FEATURED;
    std::size_t admitted = 0;
    while (first != last) {
      // The next run to claim: at most a ring's worth, ending before a
      // valueless variant (bad input).
      Iterator end = first;
      Position wanted = 0;
      bool valueless = false;
      for (; end != last && wanted < kCapacity; ++end, ++wanted) {
        if constexpr (std::is_same_v<Value, Payload>) {
          if ((*end).valueless_by_exception()) {
            valueless = true;
            break;
          }
        }
      }
      if (wanted != 0) {
        typename Queue::Run run{};
        const Position claimed =
            queue_.TryClaimRun(policy_.LimitFor(mode, priority), priority, wanted, &run);
        // Counted before the messages become visible (see PublishImpl).
        if (counted && claimed != 0) statistics_.CountPublished(priority, claimed);
        for (Position i = 0; i < claimed; ++i, ++first) {
          const typename Queue::Claim claim = Queue::InRun(run, i);
          MessageHeader header;
          header.msg_id = Queue::MessageId(claim);
          header.timestamp_us = timestamp_us;
          header.sender_id = sender_id;
          header.priority = priority;
          header.counted = counted;
          new (queue_.Storage(claim)) Envelope{header, MakePayload(*first)};
          queue_.Publish(claim);
        }
        if constexpr (kConsumerCanSleep) {
          if (claimed != 0) wake_.Notify();
        }
        admitted += static_cast<std::size_t>(claimed);
        if (claimed < wanted) {
          // The rest of the run did not fit: refused, like single publishes.
          CountRefusal(mode, priority, wanted - claimed);
          return admitted;
        }
      }
      if (valueless) {
        statistics_.CountRejected();
        return admitted;
      }
    }
    return admitted;
  }

  // As PublishWithPriority, but when the queue is too full for `priority` it
  // waits up to `timeout` for room instead of being refused: it polls
  // Traits::kPollsBeforePark times, then sleeps on Traits::Parker until the
  // consumer has freed slots below the priority's threshold (the consumer
  // wakes it at the end of such a batch, judged by the mode and thresholds
  // then in force; no polling while asleep) or Close(). Admission is unchanged: a
  // LOW publisher waits until the queue holds fewer messages than LOW's
  // threshold and never takes the room kept for MEDIUM and HIGH. Stamped
  // when admitted. Returns kAdmitted, kTimedOut, kClosed, kRejected (bad
  // input) or kWouldDeadlock (inside this bus's own dispatch); the message is
  // moved from only if admitted. Any producer thread, never an interrupt
  // handler (it sleeps); not the consumer thread between batches either,
  // where it could only wait out its timeout. Needs a parker in the traits
  // (a compile error otherwise, and always with SLUICE_FREESTANDING). Not
  // lock-free: it waits for the consumer by design.
#if !SLUICE_FREESTANDING
  template <typename Message, typename Rep, typename Period>
  [[nodiscard]] PublishStatus PublishBlocking(Message&& message, std::uint32_t sender_id,
                                              MessagePriority priority,
                                              std::chrono::duration<Rep, Period> timeout) {
    using Value = std::decay_t<Message>;
    static_assert(kConsumerCanSleep,
                  "Sluice: PublishBlocking needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    static_assert(kPublishable<Message>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    if (RejectBadInput(message, priority)) return PublishStatus::kRejected;
    if constexpr (!kConsumerCanSleep) {
      // Not reached (the assertion above fails); keeps the compiler from
      // adding errors of its own to the assertion's.
      return PublishStatus::kRejected;
    } else if constexpr (!std::is_nothrow_constructible_v<Value, Message&&>) {
      // As PublishImpl: a copy that may throw is made before any claim.
      Value copy(std::forward<Message>(message));
      return PublishBlocking(std::move(copy), sender_id, priority, timeout);
    } else {
      return WaitForRoom(sender_id, priority, detail::SaturatingNanos(timeout),
                         [&] { return MakePayload(std::forward<Message>(message)); });
    }
  }
#else
  template <typename Message, typename Rep, typename Period>
  PublishStatus PublishBlocking(Message&&, std::uint32_t, MessagePriority,
                                std::chrono::duration<Rep, Period>) {
    static_assert(detail::kDependentFalse<Message>,
                  "Sluice: PublishBlocking sleeps, which bare metal and interrupt handlers "
                  "cannot do; use PublishWithPriority and handle the refusal");
    return PublishStatus::kRejected;
  }
#endif

  // ---- Producer lanes ----------------------------------------------------------

  // A registered producer: publishes into a lane of its own, wait-free and
  // with no locked instruction (see RegisterProducer). Move-only; destroying
  // it, or Unregister(), hands the lane back. Its calls are those of the bus
  // with the same names and results; admission applies the bus's thresholds
  // to the lane's fill (Traits::kLaneCapacity). One thread (or interrupt
  // handler) at a time may use a Producer, and it must not outlive its bus.
  // An invalid Producer (default-constructed, moved from, unregistered, or
  // returned when every lane was taken) refuses every publish and counts
  // nothing.
  class Producer {
   public:
    Producer() noexcept = default;
    Producer(Producer&& other) noexcept
        : bus_(std::exchange(other.bus_, nullptr)), lane_(other.lane_) {}
    Producer& operator=(Producer&& other) noexcept {
      if (this != &other) {
        Unregister();
        bus_ = std::exchange(other.bus_, nullptr);
        lane_ = other.lane_;
      }
      return *this;
    }
    Producer(const Producer&) = delete;
    Producer& operator=(const Producer&) = delete;
    ~Producer() { Unregister(); }

    bool IsValid() const noexcept { return bus_ != nullptr; }
    explicit operator bool() const noexcept { return IsValid(); }
    // The lane's number in MessageHeader::lane (1 to kMaxProducerLanes); 0
    // when invalid.
    std::uint16_t Lane() const noexcept {
      return bus_ == nullptr ? 0 : static_cast<std::uint16_t>(lane_ + 1);
    }

    // Hands the lane back (messages still in it are dispatched as usual);
    // the Producer becomes invalid. Not while a publish of it runs.
    void Unregister() noexcept {
      if constexpr (kHasLanes) {
        if (bus_ != nullptr) bus_->queue_.Unregister(lane_);
      }
      bus_ = nullptr;
    }

    template <typename Message>
    [[nodiscard]] bool Publish(Message&& message, std::uint32_t sender_id = 0) {
      return PublishImpl<true>(std::forward<Message>(message), sender_id, MessagePriority::MEDIUM,
                               0);
    }
    template <typename Message>
    [[nodiscard]] bool PublishWithPriority(Message&& message, std::uint32_t sender_id,
                                           MessagePriority priority) {
      return PublishImpl<true>(std::forward<Message>(message), sender_id, priority, 0);
    }
    template <typename Message>
    [[nodiscard]] bool PublishFast(Message&& message, std::uint32_t sender_id,
                                   std::uint64_t timestamp_us,
                                   MessagePriority priority = MessagePriority::MEDIUM) {
      return PublishImpl<false>(std::forward<Message>(message), sender_id, priority, timestamp_us);
    }
    template <typename T, typename... Args>
    [[nodiscard]] bool Emplace(std::uint32_t sender_id, MessagePriority priority, Args&&... args) {
      CheckEmplace<T, Args...>();
      static_assert(kHasLanes,
                    "Sluice: a Producer publishes into a producer lane: set kMaxProducerLanes "
                    "in the bus traits");
      if (bus_ == nullptr) return false;
      if (!IsValidPriority(priority)) {
        Statistics().CountRejected();
        return false;
      }
      return EmplaceVia<T>(
          [&](auto&& make_payload) {
            return bus_->template LaneAdmit<true>(lane_, sender_id, priority, 0, make_payload);
          },
          [&](T&& built) { return PublishImpl<true>(std::move(built), sender_id, priority, 0); },
          std::forward<Args>(args)...);
    }

    // As the bus's PublishLoan, into this lane: an empty Loan is counted in
    // the lane's messages_dropped under `priority` (FULL_FEATURED), or in
    // its messages_refused_closed once the bus is closed.
    template <typename T>
    [[nodiscard]] bool PublishLoan(Loan<T>&& loan, std::uint32_t sender_id,
                                   MessagePriority priority) {
      CheckLoan<T>();
      if (bus_ == nullptr) return false;
      if (!loan && IsValidPriority(priority)) {
        if (bus_->IsClosed()) {
          Statistics().CountClosed(1);
        } else if (bus_->policy_.Mode() == PerformanceMode::FULL_FEATURED) {
          Statistics().CountDropped(priority, 1);
        }
        return false;
      }
      return PublishImpl<true>(std::move(loan), sender_id, priority, 0);
    }

    // This producer's lane: its counters (the bus's GetStatistics adds every
    // lane's in), its fill and its backpressure level (of kLaneCapacity).
    // Counters stay with the lane: a later owner's are added to them.
    BusStatisticsSnapshot GetStatistics() const noexcept {
      static_assert(kHasLanes,
                    "Sluice: a Producer publishes into a producer lane: set kMaxProducerLanes "
                    "in the bus traits");
      return bus_ == nullptr ? BusStatisticsSnapshot{} : Statistics().Snapshot();
    }
    std::size_t QueueDepth() const noexcept {
      static_assert(kHasLanes,
                    "Sluice: a Producer publishes into a producer lane: set kMaxProducerLanes "
                    "in the bus traits");
      return bus_ == nullptr ? 0 : static_cast<std::size_t>(LaneRef().queue.Depth());
    }
    BackpressureLevel GetBackpressureLevel() const noexcept {
      if (bus_ == nullptr) return BackpressureLevel::NORMAL;
      if constexpr (Traits::kBackpressureLevels == BackpressureLevels::kFixed) {
        return ClassifyBackpressure(QueueDepth(), Traits::kLaneCapacity);
      } else {
        return bus_->policy_.LaneLevelAt(QueueDepth());
      }
    }

   private:
    friend class AsyncBus;
    Producer(AsyncBus* bus, std::uint32_t lane) noexcept : bus_(bus), lane_(lane) {}

    auto& LaneRef() const noexcept { return bus_->queue_.LaneAt(lane_); }
    LaneStatistics& Statistics() const noexcept { return LaneRef().statistics; }

    template <bool kReadClock, typename Message>
    bool PublishImpl(Message&& message, std::uint32_t sender_id, MessagePriority priority,
                     std::uint64_t timestamp_us) {
      using Value = std::decay_t<Message>;
      static_assert(kPublishable<Message>,
                    "Sluice: a published message must be exactly one alternative of the "
                    "bus payload variant, or the variant itself");
      static_assert(kHasLanes,
                    "Sluice: a Producer publishes into a producer lane: set kMaxProducerLanes "
                    "in the bus traits");
      if (bus_ == nullptr) return false;
      bool bad = !IsValidPriority(priority);
      if constexpr (std::is_same_v<Value, Payload>) bad = bad || message.valueless_by_exception();
      if (bad) {
        Statistics().CountRejected();
        return false;
      }
      if constexpr (!std::is_nothrow_constructible_v<Value, Message&&>) {
        Value copy(std::forward<Message>(message));
        return PublishImpl<kReadClock>(std::move(copy), sender_id, priority, timestamp_us);
      } else {
        return bus_->template LaneAdmit<kReadClock>(lane_, sender_id, priority, timestamp_us, [&] {
          return MakePayload(std::forward<Message>(message));
        });
      }
    }

    AsyncBus* bus_ = nullptr;
    std::uint32_t lane_ = 0;
  };

  // Takes a free lane for the calling producer: a valid Producer, or an
  // invalid one when all Traits::kMaxProducerLanes lanes are taken.
  // Lock-free; any thread. A compile error when the traits allow no lanes.
  [[nodiscard]] Producer RegisterProducer() noexcept {
    static_assert(kHasLanes,
                  "Sluice: RegisterProducer needs producer lanes: set kMaxProducerLanes (and "
                  "kLaneCapacity) in the bus traits");
    if constexpr (kHasLanes) {
      const int lane = queue_.Register();
      if (lane >= 0) return Producer(this, static_cast<std::uint32_t>(lane));
    }
    return Producer();
  }

  // How many lanes are taken now (a snapshot).
  std::size_t RegisteredProducers() const noexcept {
    if constexpr (kHasLanes) {
      return queue_.LanesTaken();
    } else {
      return 0;
    }
  }

  // ---- Shutdown ---------------------------------------------------------------

  // Closes the bus for good: every publish that starts after Close returns
  // (or after IsClosed() says true) returns false (Emplace, PublishBatch: 0),
  // counted in messages_refused_closed; one that overlaps Close is either
  // admitted (and then drained) or refused;
  // what was admitted before stays queued for the consumer, and a sleeping
  // consumer is woken. MPSC: any thread, any number of times. SPSC: the
  // producer thread (or while it does not publish): its claims are plain
  // stores. No cost on the publish path: closing moves the ring's tail so
  // far that every later claim is refused as over its limit.
  void Close() noexcept {
    std::uint32_t open = kOpen;
    if (!close_state_.compare_exchange_strong(open, kClosing, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
      // Closed, or being closed by another call: return once it is.
      while (close_state_.load(std::memory_order_acquire) != kClosed) detail::CpuRelax();
      return;
    }
    closed_tail_ = queue_.Close();
    // Publishes closed_tail_ for Drain and IsDrained (acquire).
    close_state_.store(kClosed, std::memory_order_release);
    if constexpr (kConsumerCanSleep) {
      wake_.Notify();
      // Every producer waiting for room re-checks and finds the bus closed.
      NotifyRoomWaiters(/*only_with_room=*/false);
    }
  }

  // Whether the bus is closed: true once a Close has returned; from then on
  // every publish that starts is refused.
  bool IsClosed() const noexcept { return close_state_.load(std::memory_order_acquire) == kClosed; }

  // Whether the bus is closed and every message admitted before Close has
  // been dispatched (and destroyed). Any thread; wait-free.
  bool IsDrained() const noexcept {
    if (close_state_.load(std::memory_order_acquire) != kClosed) return false;
    // Wrap-safe: the consumer never passes the closed tail.
    if (queue_.Released() != closed_tail_) return false;
    if constexpr (kHasLanes) {
      return queue_.LanesDrained();
    } else {
      return true;
    }
  }

#if !SLUICE_FREESTANDING
  // Waits up to `timeout` until IsDrained(); returns it. For a thread other
  // than the consumer (which drains by dispatching until IsDrained()): on the
  // consumer thread it only waits out the timeout. False at once when the
  // bus is not closed. Polls, yielding the processor between looks.
  template <typename Rep, typename Period>
  bool Drain(std::chrono::duration<Rep, Period> timeout) const {
    if (!IsClosed()) return false;
    using Clock = std::chrono::steady_clock;
    const std::chrono::nanoseconds budget = detail::SaturatingNanos(timeout);
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        budget >= Clock::time_point::max() - start ? Clock::time_point::max() : start + budget;
    while (!IsDrained()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
#endif

  // ---- Consumer (one thread at a time) ---------------------------------------

  // Dispatches up to `max_messages` queued messages to their subscriptions and
  // returns how many it took. Messages of a type without subscribers are
  // consumed silently. A throwing callback is counted and reported, and the
  // remaining subscribers and messages are still dispatched. Called from
  // inside a callback, it returns 0. Wait-free apart from the callbacks.
  std::uint32_t ProcessBatch(std::uint32_t max_messages = kCapacity) {
    return RunBatch<BatchKind::kSubscriptions>(max_messages, [this](const Envelope& current) {
      registry_.Dispatch(current, [this, &current](const char* what) {
        ReportError<BatchKind::kSubscriptions>(BusErrorCode::kCallbackThrew, current, what);
      });
    });
  }

  // As ProcessBatch, but when nothing is queued it waits up to `timeout` for
  // a message instead of returning 0 at once: it polls the queue
  // Traits::kPollsBeforePark times, then sleeps on Traits::Parker until a
  // publish wakes it (no lost wake-up: docs/design.md, "The sleeping
  // consumer"). Returns how many it dispatched: 0 when the timeout passed
  // with nothing queued, or when called from inside a callback (which never
  // waits). Needs a parker in the traits, e.g. SleepingConsumerTraits.
  template <typename Rep, typename Period>
  std::uint32_t ProcessBatchWait(std::chrono::duration<Rep, Period> timeout,
                                 std::uint32_t max_messages = kCapacity) {
    static_assert(kConsumerCanSleep,
                  "Sluice: ProcessBatchWait needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    if (dispatching_ || max_messages == 0) return 0;
    if (!WaitForMessage(detail::SaturatingNanos(timeout))) return 0;
    return ProcessBatch(max_messages);
  }

  // As ProcessBatchWith, waiting as ProcessBatchWait does.
  template <typename Visitor, typename Rep, typename Period>
  std::uint32_t ProcessBatchWithWait(Visitor&& visitor, std::chrono::duration<Rep, Period> timeout,
                                     std::uint32_t max_messages = kCapacity) {
    static_assert(kConsumerCanSleep,
                  "Sluice: ProcessBatchWithWait needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    if (dispatching_ || max_messages == 0) return 0;
    if (!WaitForMessage(detail::SaturatingNanos(timeout))) return 0;
    return ProcessBatchWith(std::forward<Visitor>(visitor), max_messages);
  }

  // Dispatches up to `max_messages` messages to `visitor`, bypassing the
  // subscription table. The visitor is called through std::visit with each
  // message if it accepts every alternative, else as visitor(message, header)
  // if it accepts that for every alternative, else as visitor(envelope).
  // A throwing visitor is counted and reported; the batch goes on.
  template <typename Visitor>
  std::uint32_t ProcessBatchWith(Visitor&& visitor, std::uint32_t max_messages = kCapacity) {
    return RunBatch<BatchKind::kVisitor>(max_messages, [&](const Envelope& current) {
      // A valueless payload is refused by Publish; std::visit would throw.
      if (current.payload.valueless_by_exception()) return;
#if SLUICE_HAS_EXCEPTIONS
      try {
        Visit(visitor, current);
      } catch (const std::exception& error) {
        ReportError<BatchKind::kVisitor>(BusErrorCode::kVisitorThrew, current, error.what());
      } catch (...) {
        ReportError<BatchKind::kVisitor>(BusErrorCode::kVisitorThrew, current,
                                         "non-standard exception");
      }
#else
      Visit(visitor, current);
#endif
    });
  }

  // ---- Subscriptions (any thread, also from inside a callback) -------------

  // Registers `callback` for messages of type T, taking (const T&, const
  // MessageHeader&), (const T&) or (const MessageEnvelope<Payload>&). The
  // callable is stored inline. Returns an invalid handle when T already has
  // Traits::kMaxSubscribersPerType subscriptions. Lock-free.
  template <typename T, typename Callback>
  [[nodiscard]] SubscriptionHandle Subscribe(Callback&& callback) {
    return registry_.template Subscribe<T>(std::forward<Callback>(callback));
  }

  // Removes a subscription: true (explicitly convertible) once per live
  // handle of this bus; kNotSubscribed for an invalid, stale, foreign or
  // already used one. From a thread other than the consumer it returns only
  // when the callback is not running and will never run again, so its
  // captured state may be destroyed (it waits for the consumer's current
  // batch). From inside a callback it returns at once: the callback is not
  // called again, and if it is the one running (the caller itself) the
  // result says StillRunning() and the callable is destroyed at the end of
  // the batch. SLUICE_FREESTANDING: the same from an interrupt that preempted
  // the consumer, where StillRunning() means the preempted callback.
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return registry_.Unsubscribe(handle, epoch_);
  }

  // Active subscriptions for payload type T.
  template <typename T>
  std::size_t SubscriberCount() const noexcept {
    static_assert(detail::kIsAlternative<T, Payload>,
                  "Sluice: T must be exactly one alternative of the payload variant");
    return registry_.SubscriberCount(detail::VariantIndex<T, Payload>::kValue);
  }

  // ---- Configuration and observation (any thread) --------------------------

  // Producers waiting in PublishBlocking see a new mode at the consumer's
  // next batch (waking them here would take the parker's lock, which a
  // signal handler must not).
  void SetPerformanceMode(PerformanceMode mode) noexcept { policy_.SetMode(mode); }
  PerformanceMode GetPerformanceMode() const noexcept { return policy_.Mode(); }

  // Percent fill at which LOW, MEDIUM and HIGH are refused. Returns false and
  // keeps the old thresholds unless 0 < low <= medium <= high <= 100.
  [[nodiscard]] bool SetAdmissionThresholds(std::uint8_t low_percent, std::uint8_t medium_percent,
                                            std::uint8_t high_percent) noexcept {
    AdmissionThresholds thresholds;
    thresholds.low_percent = low_percent;
    thresholds.medium_percent = medium_percent;
    thresholds.high_percent = high_percent;
    // Waiting producers see the new limits at the consumer's next batch.
    return policy_.SetThresholds(thresholds);
  }
  AdmissionThresholds GetAdmissionThresholds() const noexcept { return policy_.Thresholds(); }

  // Called on the consumer thread for each error, with `context`. Pass
  // nullptr to remove. Returns true when the previous callback is not running
  // and will not be called again: from a thread other than the consumer it
  // waits for the consumer's batch and always returns true. False only from
  // inside the error callback itself, or (SLUICE_FREESTANDING) from an
  // interrupt that preempted a report: that report may still call the
  // previous callback once; no later one will.
  [[nodiscard]] bool SetErrorCallback(ErrorCallback callback, void* context = nullptr) noexcept {
    return error_reporter_.Set(callback, context, epoch_);
  }

  // Counters since construction or the last reset. Publish, drop and
  // processed counts advance only in FULL_FEATURED; errors are always counted.
  // With producer lanes: every lane's counters added in.
  BusStatisticsSnapshot GetStatistics() const noexcept {
    BusStatisticsSnapshot snapshot = statistics_.Snapshot();
    if constexpr (kHasLanes) {
      for (std::uint32_t i = 0; i < Traits::kMaxProducerLanes; ++i) {
        detail::AddStatistics(&snapshot, queue_.LaneAt(i).statistics.Snapshot());
      }
    }
    return snapshot;
  }

  // Publish-to-dispatch latency per priority since construction or the last
  // reset, kept by the consumer in FULL_FEATURED mode: it reads the bus clock
  // at the start of each batch and again every Traits::kLatencyClockInterval
  // (N) messages, and measures each message from its timestamp_us to the
  // latest reading before the consumer took it up: never more than the true
  // latency to that moment, and short of it by at most the time the consumer
  // spent on the at most N - 1 messages it took before it in the batch
  // (docs/api.md). Messages with timestamp_us 0 are not counted.
  // Empty when Traits::kLatencyHistograms is false.
  LatencySnapshot GetLatencyHistograms() const noexcept { return latency_.Snapshot(); }

  // Resets the counters and the latency histograms.
  void ResetStatistics() noexcept {
    statistics_.Reset();
    if constexpr (kHasLanes) {
      for (std::uint32_t i = 0; i < Traits::kMaxProducerLanes; ++i) {
        queue_.LaneAt(i).statistics.Reset();
      }
    }
    latency_.Reset();
  }

  // Admitted messages not yet released by the consumer (an estimate while
  // the bus runs).
  // With producer lanes: in the shared queue and every lane.
  std::size_t QueueDepth() const noexcept { return static_cast<std::size_t>(queue_.Depth()); }
  // Fill of the shared queue (with lanes, each Producer reports its own).
  double QueueUtilizationPercent() const noexcept {
    return static_cast<double>(SharedDepth()) * 100.0 / static_cast<double>(kCapacity);
  }
  // The level of the shared queue's depth (with producer lanes, each
  // Producer reports its lane's): by default WARNING from the fill at which LOW
  // is refused, CRITICAL from MEDIUM's (following SetAdmissionThresholds);
  // Traits::kBackpressureLevels = BackpressureLevels::kFixed: 75 % and 90 %.
  BackpressureLevel GetBackpressureLevel() const noexcept {
    if constexpr (Traits::kBackpressureLevels == BackpressureLevels::kFixed) {
      return ClassifyBackpressure(SharedDepth(), kCapacity);
    } else {
      return policy_.LevelAt(SharedDepth());
    }
  }

 private:
  using Parker = typename Traits::Parker;
  static constexpr bool kConsumerCanSleep = !std::is_same_v<Parker, NoParker>;
  struct NoWakeSignal {};
  using WakeSignalType =
      std::conditional_t<kConsumerCanSleep, detail::WakeSignal<Parker>, NoWakeSignal>;

  // Consumer: true once the front message is published, false when
  // `timeout` passed first. Polls, then parks (SYNC POINT W: the re-check
  // after PrepareWait is the slot's acquire load in TryFront).
  bool WaitForMessage(std::chrono::nanoseconds timeout) {
    if (queue_.TryFront() != nullptr) return true;
    for (std::uint32_t i = 0; i < Traits::kPollsBeforePark; ++i) {
      detail::CpuRelax();
      if (queue_.TryFront() != nullptr) return true;
    }
#if SLUICE_FREESTANDING
    // No clock of Sluice's own: one park, bounded by the parker.
    std::uint32_t ticket = 0;
    if (!wake_.PrepareWait(&ticket)) return queue_.TryFront() != nullptr;
    if (queue_.TryFront() != nullptr) {
      wake_.CancelWait();
      return true;
    }
    wake_.Wait(ticket, timeout);
    return queue_.TryFront() != nullptr;
#else
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    // Saturates: a timeout of nanoseconds::max() is "for ever", not a wrap.
    const Clock::time_point deadline =
        timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
    for (;;) {
      std::uint32_t ticket = 0;
      if (!wake_.PrepareWait(&ticket)) {
        // Cannot announce a sleep: poll until a message or the deadline.
        if (queue_.TryFront() != nullptr) return true;
        if (Clock::now() >= deadline) return false;
        detail::CpuRelax();
        continue;
      }
      if (queue_.TryFront() != nullptr) {
        wake_.CancelWait();
        return true;
      }
      if (IsDrained()) {
        // Nothing will ever come: do not sleep (a closing consumer loops
        // until IsDrained()).
        wake_.CancelWait();
        return false;
      }
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        wake_.CancelWait();
        return false;
      }
      // Returns on a publish, at the deadline or spuriously: re-checked. At
      // most an hour a park, so a parker never adds a huge timeout to its
      // own clock.
      const std::chrono::nanoseconds left = deadline - now;
      wake_.Wait(ticket, left < std::chrono::hours(1) ? left : std::chrono::hours(1));
      if (queue_.TryFront() != nullptr) return true;
    }
#endif
  }

  template <typename T, typename... Args>
  static constexpr void CheckEmplace() {
    static_assert(detail::kIsAlternative<T, Payload>,
                  "Sluice: Emplace<T> needs T to be exactly one alternative of the bus payload "
                  "variant");
    static_assert(
        std::is_constructible_v<T, Args&&...> || detail::kBraceConstructible<T, Args&&...>,
        "Sluice: Emplace<T> cannot construct T from these arguments");
  }

  template <typename T>
  static constexpr void CheckLoan() {
    static_assert(detail::kIsAlternative<Loan<T>, Payload>,
                  "Sluice: PublishLoan needs Loan<T> to be exactly one alternative of the bus "
                  "payload variant");
  }

  // Emplace's three ways: in the slot, through `admit(make_payload)`, when T
  // has a constructor from `args` that cannot throw; else T is built first
  // (a constructor that may throw, or an aggregate with braces) and handed
  // to `publish`, which moves it in.
  template <typename T, typename AdmitFn, typename PublishFn, typename... Args>
  static bool EmplaceVia(AdmitFn&& admit, PublishFn&& publish, Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args&&...>) {
      return admit([&] { return Payload(std::in_place_type<T>, std::forward<Args>(args)...); });
    } else if constexpr (std::is_constructible_v<T, Args&&...>) {
      return publish(T(std::forward<Args>(args)...));
    } else {
      return publish(T{std::forward<Args>(args)...});
    }
  }

  template <typename Message>
  static constexpr bool kPublishable = std::is_same_v<std::decay_t<Message>, Payload> ||
                                       detail::kIsAlternative<std::decay_t<Message>, Payload>;

  template <typename Message>
  static Payload MakePayload(Message&& message) noexcept {
    using Value = std::decay_t<Message>;
    if constexpr (std::is_same_v<Value, Payload>) {
      return Payload(std::forward<Message>(message));
    } else {
      return Payload(std::in_place_type<Value>, std::forward<Message>(message));
    }
  }

  // Bad input, counted as rejected: a variant made valueless by a throwing
  // emplace (it names no type), or an unknown priority.
  template <typename Message>
  bool RejectBadInput(const Message& message, MessagePriority priority) noexcept {
    bool bad = !IsValidPriority(priority);
    if constexpr (std::is_same_v<std::decay_t<Message>, Payload>) {
      bad = bad || message.valueless_by_exception();
    }
    if (bad) statistics_.CountRejected();
    return bad;
  }

  template <bool kReadClock, typename Message>
  bool PublishImpl(Message&& message, std::uint32_t sender_id, MessagePriority priority,
                   std::uint64_t timestamp_us) {
    using Value = std::decay_t<Message>;
    static_assert(kPublishable<Message>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    // Bad input is refused before anything else, a copy included.
    if (RejectBadInput(message, priority)) return false;
    if constexpr (!std::is_nothrow_constructible_v<Value, Message&&>) {
      // A copy that may throw is made before a slot is claimed, so a claimed
      // slot is always filled; the refusal path then wastes the copy.
      Value copy(std::forward<Message>(message));
      return PublishImpl<kReadClock>(std::move(copy), sender_id, priority, timestamp_us);
    } else {
      return Admit<kReadClock>(sender_id, priority, timestamp_us,
                               [&] { return MakePayload(std::forward<Message>(message)); });
    }
  }

  // A refused claim: closed (every mode), or over the limit (FULL_FEATURED).
  // One that races with Close may be counted either way.
  void CountRefusal(PerformanceMode mode, MessagePriority priority, Position count) noexcept {
    if (close_state_.load(std::memory_order_relaxed) != kOpen) {
      statistics_.CountClosed(count);
    } else if (mode == PerformanceMode::FULL_FEATURED) {
      statistics_.CountDropped(priority, count);
    }
  }

  // Producers: claims a slot under admission, counts, and constructs the
  // envelope with the payload `make_payload()` returns (a prvalue: built in
  // the slot), then publishes it. `priority` is valid; `make_payload` must
  // not throw (a claimed slot is always filled). A refusal is counted.
  template <bool kReadClock, typename MakePayloadFn>
  bool Admit(std::uint32_t sender_id, MessagePriority priority, std::uint64_t timestamp_us,
             MakePayloadFn&& make_payload) {
    const PerformanceMode mode = policy_.Mode();
    if (TryAdmit<kReadClock>(mode, sender_id, priority, timestamp_us, make_payload)) return true;
    CountRefusal(mode, priority, 1);
    return false;
  }

  // As Admit, in `mode`, leaving a refusal uncounted (PublishBlocking counts
  // one per call, not one per attempt).
  template <bool kReadClock, typename MakePayloadFn>
  bool TryAdmit(PerformanceMode mode, std::uint32_t sender_id, MessagePriority priority,
                std::uint64_t timestamp_us, MakePayloadFn& make_payload) {
    if constexpr (kReadClock) {
      // Read before the claim to keep the claimed-but-unpublished window
      // (which holds up the consumer) as short as possible.
      timestamp_us = mode == PerformanceMode::BARE_METAL ? 0 : Traits::Clock::NowMicros();
    }
    typename Queue::Claim claim;
    if (!queue_.TryClaim(policy_.LimitFor(mode, priority), priority, &claim)) return false;
    // Counted before the message becomes visible, so processed never runs
    // ahead of published; and before the envelope is written, because with
    // several producers the count is a locked instruction, which would
    // otherwise wait for the envelope's stores to reach a cache line the
    // consumer may be polling.
    const bool counted = mode == PerformanceMode::FULL_FEATURED;
    if (counted) statistics_.CountPublished(priority);
    MessageHeader header;
    header.msg_id = Queue::MessageId(claim);
    header.timestamp_us = timestamp_us;
    header.sender_id = sender_id;
    header.priority = priority;
    header.counted = counted;
    new (queue_.Storage(claim)) Envelope{header, make_payload()};
    queue_.Publish(claim);
    if constexpr (kConsumerCanSleep) wake_.Notify();
    return true;
  }

  // A lane publish (Producer): as Admit, into lane `lane` under its limit,
  // between Begin/EndLanePublish (SYNC POINT (L), detail/producer_lanes.hpp).
  // Wait-free: no loop, no CAS; the lane's counters are single-writer.
  template <bool kReadClock, typename MakePayloadFn>
  bool LaneAdmit(std::uint32_t lane_index, std::uint32_t sender_id, MessagePriority priority,
                 std::uint64_t timestamp_us, MakePayloadFn&& make_payload) {
    auto& lane = queue_.LaneAt(lane_index);
    const PerformanceMode mode = policy_.Mode();
    if constexpr (kReadClock) {
      timestamp_us = mode == PerformanceMode::BARE_METAL ? 0 : Traits::Clock::NowMicros();
    }
    if (!queue_.BeginLanePublish(lane)) {
      lane.statistics.CountClosed(1);
      return false;
    }
    typename decltype(lane.queue)::Claim claim;
    if (!lane.queue.TryClaim(policy_.LaneLimitFor(mode, priority), priority, &claim)) {
      Queue::EndLanePublish(lane);
      if (mode == PerformanceMode::FULL_FEATURED) lane.statistics.CountDropped(priority, 1);
      return false;
    }
    // Counted before the message becomes visible (see TryAdmit).
    const bool counted = mode == PerformanceMode::FULL_FEATURED;
    if (counted) lane.statistics.CountPublished(priority);
    MessageHeader header;
    header.msg_id = decltype(lane.queue)::MessageId(claim);
    header.timestamp_us = timestamp_us;
    header.sender_id = sender_id;
    header.priority = priority;
    header.counted = counted;
    header.lane = static_cast<std::uint16_t>(lane_index + 1);
    new (lane.queue.Storage(claim)) Envelope{header, make_payload()};
    lane.queue.Publish(claim);
    Queue::EndLanePublish(lane);
    if constexpr (kConsumerCanSleep) wake_.Notify();
    return true;
  }

  Position SharedDepth() const noexcept {
    if constexpr (kHasLanes) {
      return queue_.SharedDepth();
    } else {
      return queue_.Depth();
    }
  }

#if !SLUICE_FREESTANDING
  // PublishBlocking's wait (SYNC POINT R, docs/design.md "Producers that
  // wait for room"): polls, then announces itself on its priority's room
  // signal, re-checks admission (the ring's acquire load of the consumer's
  // released position, in TryClaim) and parks. The consumer's side is
  // NotifyRoomWaiters at the end of each batch.
  template <typename MakePayloadFn>
  PublishStatus WaitForRoom(std::uint32_t sender_id, MessagePriority priority,
                            std::chrono::nanoseconds timeout, MakePayloadFn&& make_payload) {
    const auto try_admit = [&] {
      return TryAdmit<true>(policy_.Mode(), sender_id, priority, 0, make_payload);
    };
    const auto refused = [&](PublishStatus status) {
      if (status == PublishStatus::kClosed) {
        statistics_.CountClosed(1);
      } else if (policy_.Mode() == PerformanceMode::FULL_FEATURED) {
        statistics_.CountDropped(priority, 1);
      }
      return status;
    };
    if (try_admit()) return PublishStatus::kAdmitted;
    if (IsClosed()) return refused(PublishStatus::kClosed);
    // Only this thread ever stores its own id here, so a relaxed load that
    // finds it is this thread's own store: the call is inside a batch.
    if (consumer_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
      return refused(PublishStatus::kWouldDeadlock);
    }
    for (std::uint32_t i = 0; i < Traits::kPollsBeforePark; ++i) {
      detail::CpuRelax();
      if (try_admit()) return PublishStatus::kAdmitted;
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
    detail::WakeSignal<Parker>& room = room_[static_cast<std::size_t>(priority)];
    for (;;) {
      if (IsClosed()) return refused(PublishStatus::kClosed);
      std::uint32_t ticket = 0;
      if (!room.PrepareWait(&ticket)) {
        // Cannot announce a sleep: poll until room or the deadline.
        if (try_admit()) return PublishStatus::kAdmitted;
        if (Clock::now() >= deadline) return refused(PublishStatus::kTimedOut);
        std::this_thread::yield();
        continue;
      }
      // SYNC POINT READ (R): the re-check after the announcement.
      if (try_admit()) {
        room.CancelWait();
        return PublishStatus::kAdmitted;
      }
      if (IsClosed()) {
        room.CancelWait();
        return refused(PublishStatus::kClosed);
      }
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        room.CancelWait();
        return refused(PublishStatus::kTimedOut);
      }
      const std::chrono::nanoseconds left = deadline - now;
      room.Wait(ticket, left < std::chrono::hours(1) ? left : std::chrono::hours(1));
      if (try_admit()) return PublishStatus::kAdmitted;
    }
  }
#endif

  // Wakes producers waiting in PublishBlocking: all of them (Close), or (the
  // consumer, after a batch) those of each priority whose threshold the
  // queue is now below. SYNC POINT WRITE (R), notifying side: the fence
  // orders the consumer's release of slots (PopFront's store), or Close's
  // store, before the loads of the waiter counts; a waiter's count increment, fence and re-check
  // are the other half of the Dekker pair (detail/wake_signal.hpp).
  void NotifyRoomWaiters(bool only_with_room) noexcept {
#if !SLUICE_FREESTANDING
    if (room_[0].Asymmetric() && room_[1].Asymmetric() && room_[2].Asymmetric()) {
      room_[0].NotifierFence();
    } else {
      detail::FullFence();
    }
    const PerformanceMode mode = policy_.Mode();
    Position depth = 0;
    bool have_depth = false;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      if (!room_[p].HasWaiters()) continue;
      if (only_with_room) {
        // Skipping a wake here is safe: the queue holds at least the limit,
        // and the batch that takes it below will look again.
        if (!have_depth) {
          depth = SharedDepth();
          have_depth = true;
        }
        if (depth >= policy_.LimitFor(mode, static_cast<MessagePriority>(p))) continue;
      }
      room_[p].Wake();
    }
#else
    (void)only_with_room;
#endif
  }

  // A visitor that takes every alternative wins, so a generic lambda
  // `[](const auto& message)` gets messages, not envelopes.
  template <typename Visitor>
  static void Visit(Visitor& visitor, const Envelope& envelope) {
    constexpr auto kAlternatives = std::make_index_sequence<std::variant_size_v<Payload>>{};
    if constexpr (AcceptsEveryAlternative<Visitor>(kAlternatives)) {
      std::visit(visitor, envelope.payload);
    } else if constexpr (AcceptsEveryAlternativeWithHeader<Visitor>(kAlternatives)) {
      std::visit([&](const auto& message) { visitor(message, envelope.header); }, envelope.payload);
    } else {
      static_assert(std::is_invocable_v<Visitor&, const Envelope&>,
                    "Sluice: a visitor takes (const T&) or (const T&, const MessageHeader&) "
                    "for every alternative T, or (const MessageEnvelope<Payload>&)");
      visitor(envelope);
    }
  }

  template <typename Visitor, std::size_t... kIndex>
  static constexpr bool AcceptsEveryAlternative(std::index_sequence<kIndex...>) noexcept {
    return (std::is_invocable_v<Visitor&, const std::variant_alternative_t<kIndex, Payload>&> &&
            ...);
  }

  template <typename Visitor, std::size_t... kIndex>
  static constexpr bool AcceptsEveryAlternativeWithHeader(std::index_sequence<kIndex...>) noexcept {
    return (std::is_invocable_v<Visitor&, const std::variant_alternative_t<kIndex, Payload>&,
                                const MessageHeader&> &&
            ...);
  }

  // The consumer protocol, shared by ProcessBatch and ProcessBatchWith; the
  // one difference is whether the batch is inside the dispatch epoch.
  //  - Guard: one batch at a time on the consumer thread; from inside a
  //    callback, visitor or error callback (`dispatching_`) it returns 0.
  //  - Epoch: a subscription batch reads the subscription table, so it enters
  //    the epoch before its first message and leaves after its last. A
  //    visitor batch reads no published state: it stays outside, so that
  //    Unsubscribe and SetErrorCallback on other threads never wait for a
  //    visitor, and enters the epoch only around an error report (the one
  //    read of published state it makes).
  //  - Statistics, latency and slot hand-back: Drain, for both.
  //  - Errors: ReportError, for both; counted, then reported inside the epoch.
  enum class BatchKind { kSubscriptions, kVisitor };

  template <BatchKind kKind, typename DispatchOne>
  std::uint32_t RunBatch(std::uint32_t max_messages, DispatchOne&& dispatch_one) {
    if (dispatching_ || max_messages == 0) return 0;
    Envelope* envelope = queue_.TryFront();
    if (envelope == nullptr) return 0;
    dispatching_ = true;
#if !SLUICE_FREESTANDING
    if constexpr (kConsumerCanSleep) {
      consumer_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    }
#endif
    if constexpr (kKind == BatchKind::kSubscriptions) epoch_.Enter();
    const std::uint32_t count = Drain(envelope, max_messages, dispatch_one);
    if constexpr (kKind == BatchKind::kSubscriptions) LeaveEpoch();
    dispatching_ = false;
    if constexpr (kConsumerCanSleep) {
#if !SLUICE_FREESTANDING
      consumer_thread_.store(std::thread::id(), std::memory_order_relaxed);
#endif
      // The batch released slots: wake producers waiting for that room.
      NotifyRoomWaiters(/*only_with_room=*/true);
    }
    return count;
  }

  // Ends a stretch inside the epoch. Callables unsubscribed on this thread
  // meanwhile (by a callback or the error callback) were deferred to here.
  void LeaveEpoch() noexcept {
    registry_.ReclaimDeferred();
    epoch_.Exit();
  }

  // Consumer: hands each ready envelope from `envelope` on (at most
  // `max_messages`) to `dispatch_one`, destroys it and frees its slot, then
  // counts the batch's processed messages. The loop is instantiated with and
  // without latency recording, so a batch that records nothing tests nothing
  // per message.
  template <typename DispatchOne>
  std::uint32_t Drain(Envelope* envelope, std::uint32_t max_messages, DispatchOne&& dispatch_one) {
    // Counted per priority on the priority-ordered bus (see
    // detail/statistics_counters.hpp), else in counted[0].
    constexpr bool kByPriority = Traits::kDeliveryOrder == DeliveryOrder::kPriority;
    [[maybe_unused]] Counter counted[kByPriority ? kPriorityCount : 1] = {};
    const auto drain = [&](auto& latency) {
      std::uint32_t count = 0;
      do {
        latency.Add(envelope->header);
        if constexpr (kHasLanes) {
          queue_.TallyProcessed(envelope->header);
        } else {
          counted[kByPriority ? static_cast<std::size_t>(envelope->header.priority) : 0] +=
              envelope->header.counted ? 1 : 0;
        }
        dispatch_one(*envelope);
        queue_.PopFront();
        ++count;
      } while (count < max_messages && (envelope = queue_.TryFront()) != nullptr);
      latency.Finish();
      return count;
    };
    std::uint32_t count;
    if (const std::uint64_t now = LatencyClockForBatch(); now != 0) {
      // Re-reads the clock every kLatencyClockInterval messages (see
      // detail::LatencyRecorder::Batch for the bound this gives).
      static_assert(Traits::kLatencyClockInterval >= 1,
                    "Sluice: kLatencyClockInterval must be at least 1");
      auto latency =
          latency_.template BeginBatch<typename Traits::Clock, Traits::kLatencyClockInterval>(now);
      count = drain(latency);
    } else {
      detail::NoLatencyBatch none;
      count = drain(none);
    }
    if constexpr (kHasLanes) {
      queue_.FlushProcessed(statistics_);
    } else if constexpr (kByPriority) {
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        statistics_.CountProcessed(counted[p], static_cast<MessagePriority>(p));
      }
    } else {
      statistics_.CountProcessed(counted[0]);
    }
    return count;
  }

  // The batch's first clock reading for the latency histograms, or 0 when
  // they are off (traits, mode, or a clock that reads 0): then the batch
  // reads no clock at all.
  std::uint64_t LatencyClockForBatch() const noexcept {
    if constexpr (!decltype(latency_)::kRecords) {
      return 0;
    } else {
      if (policy_.Mode() != PerformanceMode::FULL_FEATURED) return 0;
      return Traits::Clock::NowMicros();
    }
  }

  // Counts an error and reports it to the error callback, which the reporter
  // reads inside the epoch: a subscription batch is already in it, a visitor
  // batch enters it for the report alone.
  template <BatchKind kKind>
  void ReportError(BusErrorCode code, const Envelope& envelope, const char* what) noexcept {
    statistics_.CountError();
    BusError error;
    error.code = code;
    error.msg_id = envelope.header.msg_id;
    error.sender_id = envelope.header.sender_id;
    error.type_index = envelope.payload.index();
    error.what = what;
    if constexpr (kKind == BatchKind::kVisitor) epoch_.Enter();
    error_reporter_.Report(error);
    if constexpr (kKind == BatchKind::kVisitor) LeaveEpoch();
  }

  friend struct detail::TestAccess;

  Queue queue_;
  detail::AdmissionPolicy<kCapacity, kHasLanes ? Traits::kLaneCapacity : 0> policy_;
  WakeSignalType wake_;
#if !SLUICE_FREESTANDING
  // PublishBlocking: one room signal per priority (waiters of a priority are
  // woken only when there is room for it), and the thread inside a batch
  // (consumer-written; read by PublishBlocking to refuse waiting for itself).
  struct NoRoomSignals {};
  std::conditional_t<kConsumerCanSleep, std::array<detail::WakeSignal<Parker>, kPriorityCount>,
                     NoRoomSignals>
      room_;
  std::atomic<std::thread::id> consumer_thread_{};
  static_assert(!kConsumerCanSleep || std::atomic<std::thread::id>::is_always_lock_free,
                "Sluice: PublishBlocking needs a lock-free std::atomic<std::thread::id>");
#endif
  static constexpr std::uint32_t kOpen = 0;
  static constexpr std::uint32_t kClosing = 1;
  static constexpr std::uint32_t kClosed = 2;
  std::atomic<std::uint32_t> close_state_{kOpen};
  Position closed_tail_ = 0;  // written once, before close_state_ = kClosed
  detail::StatisticsCounters<kProducers == ProducerModel::kSingle,
                             Traits::kDeliveryOrder == DeliveryOrder::kPriority>
      statistics_;
  alignas(kCacheLineSize) detail::DispatchEpoch epoch_;
  detail::ErrorReporter error_reporter_;
  bool dispatching_ = false;  // consumer-private re-entrancy guard
  detail::LatencyRecorder<Traits::kLatencyHistograms> latency_;
  detail::SubscriptionRegistry<Payload, Traits> registry_;
};

template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          typename Traits = DefaultBusTraits>
using MpscBus = AsyncBus<Payload, kCapacity, ProducerModel::kMulti, Traits>;

template <typename Payload, std::size_t kCapacity = kDefaultCapacity,
          typename Traits = DefaultBusTraits>
using SpscBus = AsyncBus<Payload, kCapacity, ProducerModel::kSingle, Traits>;

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
