// Producer lanes: the queue of a bus whose traits allow registered producers
// (BusTraits::Lanes, ProducerLanes<...>). The shared queue (FifoQueue or
// PriorityQueue, every unregistered producer) plus one single-producer queue
// of the same delivery order per lane, preallocated with the bus. A
// registered producer publishes into its own lane: wait-free, no CAS, no
// line written by any other producer. The consumer merges the sources.
//
// Registration, SYNC POINT (J): a lane is taken with one CAS on its `taken`
// word (acquire) and handed back with a release store, so the next owner
// inherits the previous owner's producer state (the lane's cursor and its statistics
// cells). `lanes_in_use_` (only grows, CAS to the maximum with release; the
// consumer loads it with acquire) bounds the lanes the consumer looks at.
//
// Merge. FIFO: round robin over the sources with messages, up to kBurst
// messages from one before the next. Priority: every kCheckInterval
// messages the consumer takes the source whose front has the highest
// priority (ties round robin); the shared queue's holds (a claim of a higher
// priority not yet published there) hold every source below that priority,
// as they hold the shared queue itself. A lane needs no hold: its one
// producer publishes in claim order, so a claim not yet published in a lane
// never hides a publish that has returned.
//
// Close, SYNC POINT (L), an asymmetric Dekker pair. A lane publish stores
// `publishing` = 1, then fences, then loads `closed_`: if set, it refuses.
// Close stores `closed_`, then runs the heavy fence (every running thread
// executes a full barrier before it returns) or a full fence when lane
// publishes fence themselves. IsDrained fences, then loads each lane's
// `publishing` (acquire; a publish ends with a release store of 0) and its
// depth. Either the publish's load sees `closed_` (refused, nothing
// written), or its `publishing` = 1 is visible to every IsDrained after
// Close: so IsDrained never reports a lane empty while an admitted publish
// is still on its way into it. With a heavy fence the publish's own fence is
// a compiler fence (the heavy fence executes the barrier on its core);
// without one, a seq_cst fence on both sides.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/queue/lane_holder.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Whether `Fence` offers Enable() and Run() (sluice/heavy_fence.hpp).
template <typename Fence, typename = void>
struct IsHeavyFence : std::false_type {};
template <typename Fence>
struct IsHeavyFence<Fence, std::void_t<decltype(std::declval<Fence&>().Enable()),
                                       decltype(std::declval<Fence&>().Run())>> : std::true_type {};

template <typename Envelope, typename Shared, typename LaneQueue, std::size_t kLanes,
          DeliveryOrder kOrder, std::uint32_t kBurst, std::uint32_t kCheckInterval,
          typename HeavyFence, typename LaneStatistics>
class LanedQueue {
  static_assert(kLanes >= 1 && kLanes < 65536,
                "Sluice: ProducerLanes' kMaxProducers must be below 65536");
  static_assert(kBurst >= 1, "Sluice: ProducerLanes' burst must be at least 1");
  static constexpr bool kPriority = kOrder == DeliveryOrder::kPriority;

 public:
  using Claim = typename Shared::Claim;
  using Run = typename Shared::Run;
  static constexpr std::size_t kRingCount = Shared::kRingCount;
  static constexpr std::size_t kBytesPerSlot = Shared::kBytesPerSlot;

  struct alignas(kCacheLineSize) Lane {
    // Not explicit: the lane array is initialised from positions.
    Lane(Position first_position) noexcept : queue(first_position) {}  // NOLINT
    std::atomic<std::uint32_t> taken{0};
    // Written by the lane's producer alone: 1 while a publish runs.
    alignas(kCacheLineSize) std::atomic<std::uint32_t> publishing{0};
    LaneQueue queue;
    LaneStatistics statistics;
  };

  explicit LanedQueue(Position first_position) noexcept
      : LanedQueue(first_position, std::make_index_sequence<kLanes>{}) {}
  LanedQueue(const LanedQueue&) = delete;
  LanedQueue& operator=(const LanedQueue&) = delete;

  // ---- The shared queue: producers that did not register --------------------
  bool TryClaim(Position limit, MessagePriority priority, Claim* claim) noexcept {
    return shared_.TryClaim(limit, priority, claim);
  }
  Position TryClaimRun(Position limit, MessagePriority priority, Position wanted,
                       Run* run) noexcept {
    return shared_.TryClaimRun(limit, priority, wanted, run);
  }
  static Claim InRun(const Run& run, Position i) noexcept { return Shared::InRun(run, i); }
  static Position MessageId(const Claim& claim) noexcept { return Shared::MessageId(claim); }
  void* Storage(const Claim& claim) noexcept { return shared_.Storage(claim); }
  void Publish(const Claim& claim) noexcept { shared_.Publish(claim); }

  // ---- Registration (any thread) --------------------------------------------
  // A free lane's index, now taken by the caller under `name` (copied; may
  // be null), or -1 when all are taken. Lock-free: a failed CAS means
  // another thread took that lane.
  int Register(const char* name) noexcept {
    for (std::uint32_t i = 0; i < kLanes; ++i) {
      std::uint32_t free = 0;
      if (lanes_[i].taken.load(std::memory_order_relaxed) != 0) continue;
      // SYNC POINT READ (J): the previous owner's release in Unregister.
      if (!lanes_[i].taken.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                                   std::memory_order_relaxed)) {
        continue;
      }
      holders_[i].Occupy(name, lanes_[i].statistics.ReadProducerCounts());
      std::uint32_t in_use = lanes_in_use_.load(std::memory_order_relaxed);
      // SYNC POINT WRITE (J): pairs with the consumer's acquire in Select(),
      // which then looks at this lane (it finds its messages by the lane
      // ring's own (A): its tail, one producer's index).
      while (in_use < i + 1 &&
             !lanes_in_use_.compare_exchange_weak(in_use, i + 1, std::memory_order_release,
                                                  std::memory_order_relaxed)) {
      }
      return static_cast<int>(i);
    }
    return -1;
  }
  // The lane's producer, between publishes: hands the lane back. Messages
  // still queued in it are dispatched as usual.
  void Unregister(std::uint32_t lane) noexcept {
    holders_[lane].Vacate();
    // SYNC POINT WRITE (J): this owner's producer state, for the next.
    lanes_[lane].taken.store(0, std::memory_order_release);
  }
  // Any thread: the counters of lane `lane`'s holder since it registered (or
  // the last reset), or false when the lane has no holder.
  bool ReadHolder(std::uint32_t lane, ProducerStatisticsSnapshot* out) const noexcept {
    const Lane& l = lanes_[lane];
    // The counters, read after the baseline: (N)'s acquire made the
    // holder's reads of them visible, and each only grows from there.
    const bool held = holders_[lane].Read(
        out->name, [&](const auto& baseline) { l.statistics.ProducerSince(baseline, out); });
    if (!held) return false;
    out->lane = static_cast<std::uint16_t>(lane + 1);
    return true;
  }
  Lane& LaneAt(std::uint32_t lane) noexcept { return lanes_[lane]; }
  const Lane& LaneAt(std::uint32_t lane) const noexcept { return lanes_[lane]; }
  std::uint32_t LanesTaken() const noexcept {
    std::uint32_t taken = 0;
    for (const Lane& lane : lanes_) taken += lane.taken.load(std::memory_order_relaxed);
    return taken;
  }

  // ---- A lane publish --------------------------------------------------------
  // Begins one: false (nothing to end) when the bus is closed. SYNC POINT
  // (L), publishing side: see the file comment.
  bool BeginLanePublish(Lane& lane) noexcept {
    lane.publishing.store(1, std::memory_order_relaxed);
    if (asymmetric_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      FullFence();
    }
    if (closed_.load(std::memory_order_relaxed)) {
      lane.publishing.store(0, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // Ends one. Release: IsDrained's acquire of `publishing` then also sees
  // the lane's claim and slot.
  static void EndLanePublish(Lane& lane) noexcept {
    lane.publishing.store(0, std::memory_order_release);
  }

  // ---- Consumer ---------------------------------------------------------------
  // The message to dispatch next, or nullptr when no source has one to take
  // now. Wait-free: one look at each source at most.
  SLUICE_ALWAYS_INLINE Envelope* TryFront() noexcept {
    if (run_left_ != 0) {
      if (Envelope* envelope = FrontOf(current_)) return envelope;
    }
    return Select();
  }
  SLUICE_ALWAYS_INLINE void PopFront() noexcept {
    if (current_ == 0) {
      shared_.PopFront();
    } else {
      lanes_[current_ - 1].queue.PopFront();
    }
    --run_left_;
  }

  // Consumer: counts a dispatched message's processed statistics against the
  // source it came from (flushed by FlushProcessed at the end of a batch).
  SLUICE_ALWAYS_INLINE void TallyProcessed(const MessageHeader& header) noexcept {
    tally_[header.lane][static_cast<std::size_t>(header.priority)] += header.counted ? 1 : 0;
  }
  template <typename SharedStatistics>
  void FlushProcessed(SharedStatistics& shared) noexcept {
    const std::uint32_t sources = 1 + lanes_in_use_.load(std::memory_order_relaxed);
    for (std::uint32_t s = 0; s < sources; ++s) {
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        if (tally_[s][p] == 0) continue;
        if (s == 0) {
          shared.CountProcessed(tally_[s][p], static_cast<MessagePriority>(p));
        } else {
          lanes_[s - 1].statistics.CountProcessed(tally_[s][p], static_cast<MessagePriority>(p));
        }
        tally_[s][p] = 0;
      }
    }
  }

  // ---- Close and observers ----------------------------------------------------
  // Closes the shared queue (returns its closed tail, see ClaimCursor::Close)
  // and the lanes: SYNC POINT (L), closing side.
  Position Close() noexcept {
    const Position tail = shared_.Close();
    closed_.store(true, std::memory_order_relaxed);
    if constexpr (IsHeavyFence<HeavyFence>::value) {
      if (asymmetric_) {
        while (!fence_.Run()) CpuRelax();
        return tail;
      }
    }
    FullFence();
    return tail;
  }
  Position Released() const noexcept { return shared_.Released(); }
  // Whether no lane holds a message or a publish on its way (after Close:
  // SYNC POINT (L), reading side).
  bool LanesDrained() const noexcept {
    FullFence();
    for (const Lane& lane : lanes_) {
      if (lane.publishing.load(std::memory_order_acquire) != 0) return false;
      if (lane.queue.Depth() != 0) return false;
    }
    return true;
  }
  // The shared queue's fill (its admission's).
  Position SharedDepth() const noexcept { return shared_.Depth(); }
  // Every source's.
  Position Depth() const noexcept {
    Position depth = shared_.Depth();
    for (const Lane& lane : lanes_) depth += lane.queue.Depth();
    return depth;
  }

 private:
  template <std::size_t... kIndex>
  LanedQueue(Position first_position, std::index_sequence<kIndex...>) noexcept
      : shared_(first_position), lanes_{((void)kIndex, first_position)...} {
    if constexpr (IsHeavyFence<HeavyFence>::value) asymmetric_ = fence_.Enable();
  }

  SLUICE_ALWAYS_INLINE Envelope* FrontOf(std::uint32_t source) noexcept {
    return source == 0 ? shared_.TryFront() : lanes_[source - 1].queue.TryFront();
  }

  // The next source to take from, with a new run: FIFO, the next one after
  // the current that has a message (the current one last); priority, the
  // one whose front has the highest priority, unless the shared queue holds
  // a higher one (see the file comment).
  Envelope* Select() noexcept {
    // SYNC POINT READ (J): Register's release of lanes_in_use_.
    const std::uint32_t sources = 1 + lanes_in_use_.load(std::memory_order_acquire);
    run_left_ = 0;
    if constexpr (!kPriority) {
      for (std::uint32_t k = 1; k <= sources; ++k) {
        std::uint32_t source = current_ + k;
        if (source >= sources) source -= sources;
        if (Envelope* envelope = FrontOf(source)) {
          current_ = source;
          run_left_ = kBurst;
          return envelope;
        }
      }
      return nullptr;
    } else {
      int best = -1;
      int hold = -1;
      std::uint32_t best_source = 0;
      for (std::uint32_t k = 1; k <= sources; ++k) {
        std::uint32_t source = current_ + k;
        if (source >= sources) source -= sources;
        int held = -1;
        const int ready = source == 0 ? shared_.ReadyPriority(&held)
                                      : lanes_[source - 1].queue.ReadyPriority(&held);
        if (source == 0) hold = held;
        if (ready > best) {
          best = ready;
          best_source = source;
        }
      }
      if (best < 0 || hold > best) return nullptr;
      // The source's own run may be on a lower ring: it looks above first.
      if (best_source == 0) {
        shared_.EndRun();
      } else {
        lanes_[best_source - 1].queue.EndRun();
      }
      Envelope* envelope = FrontOf(best_source);
      if (envelope != nullptr) {
        current_ = best_source;
        run_left_ = kCheckInterval;
      }
      return envelope;
    }
  }

  Shared shared_;
  Lane lanes_[kLanes];
  // Each lane's holder's name and baseline, for observers (SYNC POINT (N));
  // apart from the lanes, whose lines the publish and dispatch paths use.
  LaneHolder<typename LaneStatistics::ProducerCounts> holders_[kLanes];
  // Read-mostly: every lane publish loads both.
  alignas(kCacheLineSize) std::atomic<bool> closed_{false};
  bool asymmetric_ = false;  // set once, before any producer runs
  std::atomic<std::uint32_t> lanes_in_use_{0};
  std::conditional_t<IsHeavyFence<HeavyFence>::value, HeavyFence, NoHeavyFence> fence_;
  // Consumer-private.
  alignas(kCacheLineSize) std::uint32_t current_ = 0;  // 0: shared, i: lane i - 1
  std::uint32_t run_left_ = 0;
  Counter tally_[kLanes + 1][kPriorityCount] = {};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
