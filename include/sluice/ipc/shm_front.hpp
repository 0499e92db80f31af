// The shared-memory bus's front for the consumer core
// (detail/consume/consume_core.hpp): what ShmBus (sluice/ipc/shm_bus.hpp) hands the
// core as the source of each batch. Take copies each message out of the
// segment, checks it and binds its loan; Release returns loan blocks a
// lane at a time. The front owns the consumer's parts a batch reaches
// (the core, the lanes, the batch's state, the counts), so that the core's
// loop reaches all of them through the one reference it is given.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <variant>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/consume/consume_core.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/error.hpp"
#include "sluice/ipc/host_clock.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/shm_lanes.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

template <typename Payload, std::size_t kCapacity, typename Traits>
class ShmFront {
  using LayoutType = Layout<Payload, kCapacity, Traits>;
  // What the consumer core needs of the traits: the producers' clock
  // (the host's CLOCK_MONOTONIC, in any time namespace), the histograms'
  // setting and the subscription table's sizes.
  struct ConsumerTraits {
    using Clock = HostMonotonicClock;
    using Latency = typename Traits::Latency;
    using Observation = FullObservation;
    static constexpr std::size_t kMaxSubscribersPerType = Traits::kMaxSubscribersPerType;
    static constexpr std::size_t kCallbackStorageBytes = Traits::kCallbackStorageBytes;
    using CatchUp = typename Traits::CatchUp;
  };

 public:
  using Envelope = MessageEnvelope<Payload>;
  using ConsumeCore = sluice::detail::ConsumeCore<Payload, ConsumerTraits>;
  using LanesType = ConsumerLanes<Payload, kCapacity, Traits>;

  // The room a batch draws from, for the catch-up pause's limit
  // (detail/consume/catch_up_pacer.hpp): one lane's ring.
  static constexpr Position kCatchUpRoom = kCapacity;

  ShmFront() noexcept = default;
  ShmFront(const ShmFront&) = delete;
  ShmFront& operator=(const ShmFront&) = delete;
  ~ShmFront() = default;

  LanesType& Lanes() noexcept { return lanes_; }
  const LanesType& Lanes() const noexcept { return lanes_; }
  ConsumerCounts& Counts() noexcept { return counts_; }
  const ConsumerCounts& Counts() const noexcept { return counts_; }

  // ---- One batch, as ShmBus runs it ----------------------------------------

  // Before the core's batch: at most `max_messages` to take.
  void BeginRun(std::uint32_t max_messages) noexcept {
    batch_.Begin(max_messages);
    if constexpr (kObserves) start_fill_ = FullestFill();
  }
  // Taken from the rings this batch, corrupt ones included.
  std::uint32_t Taken() const noexcept { return batch_.taken; }
  // A callback closed the bus: the batch takes nothing more.
  void MarkClosed() noexcept { batch_.closed = true; }
  bool ClosedInBatch() const noexcept { return batch_.closed; }

  // After the core's batch (the bus still open): the loans dispatched go
  // back, and the lanes that got room are woken.
  void EndRun() noexcept {
    if constexpr (LayoutType::Loans::kAny) ReturnLoans(batch_.returning_lane, &batch_.returning);
    if (std::uint64_t touched = batch_.touched; touched != 0) {
      // SYNC POINT WRITE/READ (R), notifying side: the releases above, a
      // full fence, then the waiter counts of the lanes that got room.
      sluice::detail::FullFence();
      for (; touched != 0; touched &= touched - 1) {
        lanes_.Control(LowestBit(touched)).room.WakeIfWaiting();
      }
    }
  }

  // ---- The consumer core's front (detail/consume/consume_core.hpp) ----------------

  ConsumeCore& Consumer() noexcept { return consume_; }
  const ConsumeCore& Consumer() const noexcept { return consume_; }
  // First, Next and Take are the dispatch loop's body, one message each:
  // always inlined, as the compiler's own choice changed with code elsewhere
  // in the unit (called out of line, the visitor's dispatch cost 31
  // instructions a message more).
  SLUICE_ALWAYS_INLINE Envelope* First() noexcept { return Take(); }
  SLUICE_ALWAYS_INLINE Envelope* Next() noexcept { return Take(); }
  // The message was dispatched: its slot was freed when it was taken; its
  // loan's block goes back with the rest of its lane's run. Blocks go back
  // a lane at a time: one read-modify-write of the lane's mask (a line its
  // producer writes too) per run of messages of one lane, not per message.
  void Release() noexcept {
    FinishInHand();
    if constexpr (LayoutType::Loans::kAny) {
      if (batch_.loan != 0 && !batch_.closed) {
        if (batch_.lane != batch_.returning_lane) {
          ReturnLoans(batch_.returning_lane, &batch_.returning);
        }
        batch_.returning_lane = batch_.lane;
        batch_.returning |= batch_.loan;
      }
    }
  }
  // The shared bus has no performance mode: latency is always recorded.
  static constexpr PerformanceMode Mode() noexcept { return PerformanceMode::FULL_FEATURED; }
  static constexpr void BeginBatch() noexcept {}
  static constexpr void EndBatch(std::uint32_t) noexcept {}

  // What the observation keeps (detail/observe/observation.hpp): always,
  // in the consumer's counts. (The fills a batch starts from are noted by
  // ShmBus, before it takes any: they are the segment's lanes'.)
  static constexpr bool kKeeps = true;
  static constexpr void NoteBatchFill() noexcept {}
  void CountError() noexcept { ++counts_.callback_errors; }
  // An OnProducerExit handler threw: counted and observed as a callback's
  // error is (not reported to the error callback: no message failed).
  void ExitHandlerThrew(const char* what) noexcept {
    BusError error;
    error.code = BusErrorCode::kExitHandlerThrew;
    error.what = what;
    sluice::detail::ObserveConsume::Failed(*this, error);
  }
  // Processed messages by priority (Take checked it is in range).
  struct Tally {
    std::uint64_t processed[kPriorityCount] = {};
  };
  static void Count(Tally& tally, const MessageHeader& header) noexcept {
    ++tally.processed[static_cast<std::size_t>(header.priority)];
  }
  void Flush(const Tally& tally) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      counts_.processed_by_priority[p] += tally.processed[p];
      counts_.processed += tally.processed[p];
    }
  }
  // The traits' observer (ShmBusTraits::Observer).
  using Observer = typename Traits::Observer;
  static constexpr bool kObserves = !std::is_same_v<Observer, NoObserver>;
  Observer& Watcher() noexcept { return observer_; }
  const Observer& Watcher() const noexcept { return observer_; }
  // The fill a batch starts from, for OnBatchBegin: the fullest lane's,
  // read before the batch took its first message (Take frees its slot).
  Position BatchFill() const noexcept { return start_fill_; }
  Position FullestFill() const noexcept {
    Position fullest = 0;
    if (!lanes_.IsOpen()) return fullest;
    for (std::size_t lane = 0; lane < LanesType::kLanes; ++lane) {
      const Position fill = lanes_.Fill(lane);
      if (fill > fullest) fullest = fill;
    }
    return fullest;
  }

 private:
  // The next message to dispatch: the front of the lane to take from,
  // copied out (what gets checked and dispatched is the copy: the slot is
  // memory other processes can write) and freed at once for its producer;
  // one whose alternative index or priority is out of range is counted
  // corrupt and skipped, as is a loan naming no block of its lane. nullptr
  // when nothing is ready, the batch has taken `max` (corrupt ones count),
  // or a callback closed the bus.
  SLUICE_ALWAYS_INLINE Envelope* Take() noexcept {
    while (!batch_.closed && lanes_.IsOpen() && batch_.taken < batch_.max) {
      // SYNC POINT READ (U): the lanes taken, before their rings are read;
      // for every message, so that a lane taken during the batch has its
      // HIGH taken first too.
      const std::uint64_t active =
          lanes_.SegmentHeader()->lanes_active.load(std::memory_order_acquire) &
          LayoutType::kAllLanes;
      std::size_t lane = 0;
      const Envelope* front = lanes_.ReadyFront(active, &lane);
      if (front == nullptr) return nullptr;
      std::memcpy(batch_.bytes, static_cast<const void*>(front), sizeof(Envelope));
      Envelope& envelope = *std::launder(reinterpret_cast<Envelope*>(batch_.bytes));
      // Its priority is its ring's, which decided its order and admission,
      // whatever its producer wrote.
      envelope.header.priority = static_cast<MessagePriority>(lanes_.FrontRing(lane));
      // The copy is checked before the pop: whether it is whole, and which
      // loan block it names, held before the pop (P).
      const bool whole = envelope.payload.index() < std::variant_size_v<Payload> &&
                         static_cast<std::size_t>(envelope.header.priority) < kPriorityCount;
      std::uint32_t block = kNoBlock;
      if constexpr (LayoutType::Loans::kAny) {
        if (whole) block = BlockOf(envelope);
      }
      const bool holds = block < LayoutType::kLoanBlocks;
      // Before the pop: the count includes this message.
      const bool over_limit = lanes_.OverLimit(lane);
      auto* header = lanes_.SegmentHeader();
      auto& queue = lanes_.QueueOf(lane);
      // SYNC POINT WRITE (I): which message is in hand, and its block,
      // before its pop (whose release stores keep these before them).
      header->in_hand.store(InHandMark(lane, holds ? block : kNoBlock, queue.Released()),
                            std::memory_order_relaxed);
      if (holds) HoldBlock(lanes_.Control(lane).loans, block);
      queue.PopFront();
      batch_.touched |= std::uint64_t{1} << lane;
      ++batch_.taken;
      if (!whole || block == kBadBlock) {
        // A priority or alternative index out of range, or a loan naming no
        // block of its lane.
        ++counts_.corrupt;
        FinishInHand();
        continue;
      }
      if (over_limit) {
        // Past its priority's threshold in its lane: dropped, its loan
        // block (if any) given back as a dispatched one's is.
        ++counts_.over_limit;
        if (holds) ReturnHeldBlocks(lanes_.Control(lane).loans, std::uint64_t{1} << block);
        FinishInHand();
        continue;
      }
      // Fields a writer could leave as any byte, set to what they mean
      // here: `counted` is a bool (only 0 and 1 are values); `lane` says
      // which producer's lane the message came through.
      std::memset(static_cast<void*>(&envelope.header.counted), 1, sizeof(bool));
      envelope.header.lane = static_cast<std::uint16_t>(lane + 1);
      batch_.lane = lane;
      batch_.loan = 0;  // the block a loaned message names, as a bit
      if constexpr (LayoutType::Loans::kAny) {
        if (holds) {
          BindLoan(&envelope, lane, block);
          batch_.loan = std::uint64_t{1} << block;
        }
      }
      return &envelope;
    }
    return nullptr;
  }

  // The loan block a whole message names: kNoBlock when it is not a loan,
  // kBadBlock when the number is none of its lane's blocks.
  static std::uint32_t BlockOf(const Envelope& envelope) noexcept {
    return std::visit(
        [](const auto& message) -> std::uint32_t {
          using Message = std::decay_t<decltype(message)>;
          if constexpr (IsLoaned<Message>::value) {
            return message.block_ < LayoutType::kLoanBlocks ? message.block_ : kBadBlock;
          } else {
            return kNoBlock;
          }
        },
        envelope.payload);
  }

  // A loaned message (block `block`, one of the lane's): points it at its
  // block in this process's mapping.
  void BindLoan(Envelope* envelope, std::size_t lane, std::uint32_t block) noexcept {
    std::visit(
        [&](auto& message) {
          using Message = std::decay_t<decltype(message)>;
          if constexpr (IsLoaned<Message>::value) {
            message.data_ = std::launder(reinterpret_cast<const typename Message::Type*>(
                LayoutType::LoanBlock(lanes_.Base(), lane, block)));
          }
        },
        envelope->payload);
  }

  // SYNC POINT WRITE (I): the message taken is dispatched (or counted
  // corrupt): no longer in hand.
  void FinishInHand() noexcept {
    if (lanes_.IsOpen()) lanes_.SegmentHeader()->in_hand.store(0, std::memory_order_relaxed);
  }

  // Gives the dispatched blocks in *blocks back to lane `lane`'s producer
  // (SYNC POINT WRITE (P), in ReturnHeldBlocks).
  void ReturnLoans(std::size_t lane, std::uint64_t* blocks) noexcept {
    if (*blocks == 0 || !lanes_.IsOpen()) return;
    ReturnHeldBlocks(lanes_.Control(lane).loans, *blocks);
    *blocks = 0;
  }

  // What the front keeps through one batch (consumer thread only).
  struct Batch {
    alignas(Envelope) unsigned char bytes[sizeof(Envelope)];  // the message taken
    std::uint32_t max = 0;      // the most to take, corrupt ones included
    std::uint32_t taken = 0;    // taken from the rings, corrupt ones included
    std::uint64_t touched = 0;  // lanes that got room
    std::size_t lane = 0;       // the lane of the message taken
    std::uint64_t loan = 0;     // its loan's block, as a bit (0: none)
    std::size_t returning_lane = 0;
    std::uint64_t returning = 0;  // loan blocks of returning_lane dispatched
    bool closed = false;          // a callback closed the bus
    // Everything but the message's bytes, which Take writes before use.
    void Begin(std::uint32_t most) noexcept {
      max = most;
      taken = 0;
      touched = 0;
      lane = 0;
      loan = 0;
      returning_lane = 0;
      returning = 0;
      closed = false;
    }
  };

  // Subscriptions, epoch, error reporter, latency histograms, re-entrancy
  // guard: the consumer's parts every bus shares.
  ConsumeCore consume_;
  LanesType lanes_;
  Batch batch_;
  ConsumerCounts counts_;
  Observer observer_;
  Position start_fill_ = 0;  // BatchFill, when observed
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
