// The bus across processes on one host: one consumer process creates a
// named shared-memory segment and dispatches (ShmBus, here); producer
// processes attach, each taking a lane, and publish
// (sluice/ipc/shm_producer.hpp). No daemon. Linux. The segment's layout and
// its protocol, each release named with its acquire: sluice/ipc/shm_layout.hpp.
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
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/consume_core.hpp"
#include "sluice/detail/peak_fill.hpp"
#include "sluice/detail/waiting.hpp"
#include "sluice/detail/wake_signal.hpp"
#include "sluice/error.hpp"
#include "sluice/ipc/create_steps.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/loan.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/ipc/shm_producer.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

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
  // What the consumer core needs of the traits: the producers' clock
  // (steady_clock, CLOCK_MONOTONIC), the histograms' setting and the
  // subscription table's sizes.
  struct ConsumerTraits {
    using Clock = SteadyClock;
    using Latency = typename Traits::Latency;
    static constexpr std::size_t kMaxSubscribersPerType = Traits::kMaxSubscribersPerType;
    static constexpr std::size_t kCallbackStorageBytes = Traits::kCallbackStorageBytes;
  };
  using ConsumeCore = sluice::detail::ConsumeCore<Payload, ConsumerTraits>;

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
    if (consume_.Dispatching()) {
      // From a callback: the message being dispatched may be a loan, read
      // in place by the subscribers still to come, so the mapping stays
      // until the batch ends (Run), and the batch takes nothing more.
      retired_ = std::move(segment_);
      batch_.closed = true;
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
    return consume_.Subscriptions().template Subscribe<T>(std::forward<Callback>(callback));
  }
  UnsubscribeResult Unsubscribe(const SubscriptionHandle& handle) noexcept {
    return consume_.Subscriptions().Unsubscribe(handle, consume_.Epoch());
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
  // A callback that throws is counted (callback_errors) and reported to the
  // error callback; the batch goes on.
  std::uint32_t ProcessBatch(std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this](std::uint32_t max) {
      return ConsumeCore::DispatchToSubscriptions(*this, max);
    });
  }

  // As the in-process bus's ProcessBatchWith: the visitor takes (const T&)
  // or (const T&, const MessageHeader&) for every alternative, or the
  // envelope. A visitor that throws is counted and reported; the batch
  // goes on.
  template <typename Visitor>
  std::uint32_t ProcessBatchWith(Visitor&& visitor, std::uint32_t max_messages = kCapacity) {
    return Run(max_messages, [this, &visitor](std::uint32_t max) {
      return ConsumeCore::DispatchToVisitor(*this, visitor, max);
    });
  }

  // As the in-process bus's SetErrorCallback (sluice/bus.hpp): called on
  // the consumer thread for each callback or visitor that threw, with
  // `context`; nullptr removes it.
  [[nodiscard]] bool SetErrorCallback(ErrorCallback callback, void* context = nullptr) noexcept {
    return consume_.Errors().Set(callback, context, consume_.Epoch());
  }

  // Publish-to-dispatch latency per priority since Create, in nanoseconds,
  // as the in-process bus keeps it (sluice/bus.hpp, GetLatencyHistograms):
  // from each message's timestamp_ns (steady_clock in the producer's
  // process, CLOCK_MONOTONIC: one clock for the host) to the consumer's
  // latest reading of the same clock before it took the message up: never
  // above the true latency. A stamp ahead of the consumer's clock (one a
  // producer wrote wrong) is measured to a fresh reading and, still ahead,
  // counted as 0; messages stamped 0 are not counted.
  LatencySnapshot GetLatencyHistograms() const noexcept { return consume_.Latencies().Snapshot(); }

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

  // The gauges, as the in-process bus's (sluice/bus.hpp) with a lane per
  // producer: admission judges each lane on its own fill, so the gauges
  // read the fullest lane. QueueUtilizationPercent: its fill in percent of
  // kCapacity. GetBackpressureLevel: the highest level among the lanes,
  // following the segment's thresholds (WARNING from the fill at which LOW
  // is refused, CRITICAL from MEDIUM's, FULL at kCapacity). NORMAL and 0
  // when closed. The consumer thread.
  double QueueUtilizationPercent() const noexcept {
    return static_cast<double>(Fullest().fill) * 100.0 / static_cast<double>(kCapacity);
  }
  BackpressureLevel GetBackpressureLevel() const noexcept { return Fullest().level; }

  // The highest fill of a lane since the last call (or Create) and the
  // highest level GetBackpressureLevel() would have reported at the fills
  // noted; the next period starts at this call. Noted: the gauges at this
  // call, every lane's fill at the start of each dispatch batch, and every
  // refusal for room a producer counted since (a refusal at priority p
  // means its lane held at least p's threshold: the consumer notes that
  // fill, reading the producers' counts, as a producer in another process
  // cannot write this process's peak). So a period in which a priority was
  // refused reports at least the level at which it is refused, as in
  // process. The consumer thread.
  BackpressurePeak TakeBackpressurePeak() noexcept {
    NoteRefusals();
    const Gauge now = Fullest();
    return peak_.Take(now.fill, now.level);
  }
  // As TakeBackpressurePeak, without starting a new period (nor noting
  // anything: the refusals not yet noted count in this answer only).
  BackpressurePeak PeekBackpressurePeak() const noexcept {
    Gauge now = Fullest();
    if (header_ != nullptr) {
      for (std::size_t lane = 0; lane < kLanes; ++lane) {
        const Position refused = UnnotedRefusalFill(lane);
        if (refused > now.fill) now = Gauge{refused, LevelOf(refused)};
      }
    }
    return peak_.Peek(now.fill, now.level);
  }

  // What the in-process bus's exporters (extras/prometheus.hpp) read of
  // it: every message counted and stamped (no performance mode); each
  // producer's lane as a registered producer, named by its process
  // ("pid 1234", the pid the producer wrote at Attach).
  static constexpr bool kKeepsLatencyHistograms = Traits::Latency::kEnabled;
  static constexpr bool kHasProducerLanes = true;
  static constexpr std::size_t Capacity() noexcept { return kCapacity; }
  static constexpr PerformanceMode GetPerformanceMode() noexcept {
    return PerformanceMode::FULL_FEATURED;
  }
  // Calls `visit(const ProducerStatisticsSnapshot&)` for each lane taken
  // (held, or left and not yet handed back): its admissions (its rings'
  // claims) and refusals for room since its producer took it. The consumer
  // thread.
  template <typename Visit>
  void ForEachProducer(Visit&& visit) const {
    if (header_ == nullptr) return;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const LaneControl& control = header_->lanes[lane];
      if (control.state.load(std::memory_order_relaxed) == detail::kLaneFree) continue;
      ProducerStatisticsSnapshot producer;
      producer.lane = static_cast<std::uint16_t>(lane + 1);
      const std::string name = "pid " + std::to_string(control.owner.pid);
      name.copy(producer.name, sizeof(producer.name) - 1);
      const ConsumerLane& consumer = lanes_[lane];
      std::uint64_t published[kPriorityCount];
      std::uint64_t dropped[kPriorityCount];
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        const Position claims = consumer.queue->RingClaims(p);
        published[p] = claims - (consumer.skipped[p] < claims ? consumer.skipped[p] : claims);
        dropped[p] = control.dropped[p].load(std::memory_order_relaxed);
      }
      producer.low_priority_published = published[0];
      producer.medium_priority_published = published[1];
      producer.high_priority_published = published[2];
      producer.low_priority_dropped = dropped[0];
      producer.medium_priority_dropped = dropped[1];
      producer.high_priority_dropped = dropped[2];
      visit(static_cast<const ProducerStatisticsSnapshot&>(producer));
    }
  }

  ShmBusStatistics GetStatistics() const noexcept {
    ShmBusStatistics s = totals_;
    s.processed = processed_;
    s.corrupt = corrupt_;
    s.callback_errors = callback_errors_;
    if (header_ == nullptr) return WithSnapshot(s);  // closed: as it was at Close
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
    return WithSnapshot(s);
  }

 private:
  // The consumer's side of one lane.
  struct ConsumerLane {
    std::optional<Queue> queue;             // its view of the lane's rings
    Position skipped[kPriorityCount] = {};  // claims skipped since its owner left
    // Its producer's refusals for room the peak has noted (NoteRefusals).
    std::uint64_t refusals_noted[kPriorityCount] = {};
    std::int32_t pid = 0;  // the owner that left
    bool killed = false;
    void Clear() noexcept {
      queue.reset();  // a view holds references: made again, never assigned
      for (Position& count : skipped) count = 0;
      for (std::uint64_t& count : refusals_noted) count = 0;
      pid = 0;
      killed = false;
    }
  };

  // The in-process snapshot's fields, from this bus's own.
  ShmBusStatistics WithSnapshot(ShmBusStatistics s) const noexcept {
    s.high_priority_published = s.published[2];
    s.medium_priority_published = s.published[1];
    s.low_priority_published = s.published[0];
    s.messages_published = s.published[0] + s.published[1] + s.published[2];
    s.high_priority_dropped = s.dropped[2];
    s.medium_priority_dropped = s.dropped[1];
    s.low_priority_dropped = s.dropped[0];
    s.messages_dropped = s.dropped[0] + s.dropped[1] + s.dropped[2];
    s.high_priority_processed = processed_by_priority_[2];
    s.medium_priority_processed = processed_by_priority_[1];
    s.low_priority_processed = processed_by_priority_[0];
    s.messages_processed = s.processed;
    s.processing_errors = s.callback_errors;
    return s;
  }

  // The fullest lane and its level.
  struct Gauge {
    Position fill = 0;
    BackpressureLevel level = BackpressureLevel::NORMAL;
  };
  BackpressureLevel LevelOf(Position fill) const noexcept {
    return ClassifyBackpressure(fill, kCapacity, thresholds_);
  }
  Gauge Fullest() const noexcept {
    Gauge gauge;
    if (header_ == nullptr) return gauge;
    for (const ConsumerLane& lane : lanes_) {
      const Position fill = lane.queue->Depth();
      if (fill > gauge.fill) gauge.fill = fill;
    }
    gauge.level = LevelOf(gauge.fill);
    return gauge;
  }
  // Each lane's refusals for room counted since the last look: the lane
  // held at least the highest refused priority's threshold.
  void NoteRefusals() noexcept {
    if (header_ == nullptr) return;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      // The counts the fill was judged on are the ones noted: a refusal
      // counted after this read is noted next time.
      const Position fill = UnnotedRefusalFill(lane, lanes_[lane].refusals_noted);
      if (fill != 0) peak_.Note(fill, LevelOf(fill));
    }
  }
  // The fill lane `lane` held at least, by the refusals counted since the
  // last noting: the highest refused priority's limit (0: none). `read`,
  // when given, gets the counts read.
  Position UnnotedRefusalFill(std::size_t lane, std::uint64_t* read = nullptr) const noexcept {
    Position fill = 0;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const std::uint64_t count = header_->lanes[lane].dropped[p].load(std::memory_order_relaxed);
      if (count != lanes_[lane].refusals_noted[p] && limits_[p] > fill) fill = limits_[p];
      if (read != nullptr) read[p] = count;
    }
    return fill;
  }

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
    for (std::uint64_t& count : processed_by_priority_) count = 0;
    consume_.Latencies().Reset();
    corrupt_ = 0;
    callback_errors_ = 0;
    took_over_ = false;
    creator_ = ::getpid();
    check_interval_ = options.peer_check_interval;
    sleep_slice_ = SleepSlice(options);
    last_check_ = std::chrono::steady_clock::now();
    name_ = name;
    // The segment's (a taken-over one keeps its own); thresholds written
    // wrong there read as the defaults, for the gauges only.
    thresholds_ = header_->thresholds;
    if (!thresholds_.IsValid()) thresholds_ = AdmissionThresholds();
    limits_[0] = FillLimit(thresholds_.low_percent, kCapacity);
    limits_[1] = FillLimit(thresholds_.medium_percent, kCapacity);
    limits_[2] = FillLimit(thresholds_.high_percent, kCapacity);
    (void)peak_.Take(0, BackpressureLevel::NORMAL);  // a new period
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
    if (tending_ || consume_.Dispatching()) return;
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
  Envelope* ReadyFront(std::uint64_t active, std::size_t* lane) noexcept {
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
    return ReadyFront(header_->lanes_active.load(std::memory_order_acquire) & LayoutType::kAllLanes,
                      &lane) != nullptr;
  }

  template <typename Batch>
  std::uint32_t RunWaiting(std::chrono::nanoseconds timeout, Batch&& batch) {
    const sluice::detail::Deadline deadline(timeout);
    const std::chrono::nanoseconds slice = sleep_slice_;
    for (;;) {
      if (header_ == nullptr || consume_.Dispatching()) return 0;
      if (const std::uint32_t taken = batch()) return taken;
      // A batch between slices: a producer killed between its publish and
      // its wake-up call leaves this one asleep with a message queued.
      const std::chrono::nanoseconds left = deadline.Left();
      if (left.count() == 0) return 0;
      // This thread is the signal's only waiter, and not counted now: a
      // count left by a killed consumer (or written by anyone) is wrong.
      if (header_->consumer_wake.Waiters() != 0) header_->consumer_wake.ForgetWaiters();
      (void)sluice::detail::WaitUntil(
          header_->consumer_wake, Traits::kPollsBeforePark, left < slice ? left : slice,
          [this] { return HasWork(); }, [] { return false; });
    }
  }

  // One batch: lanes left by their owner tended first, then the consumer
  // core's batch (`dispatch`) with this bus as its front, then the loans
  // dispatched go back, the lanes that got room are woken, and now and then
  // producers are looked for.
  template <typename Dispatch>
  std::uint32_t Run(std::uint32_t max_messages, Dispatch&& dispatch) {
    // Inside a callback of this bus: no batch (as in process).
    if (header_ == nullptr || consume_.Dispatching()) return 0;
    if (gone_ != 0) TendGoneLanes();  // (its exit handler may close the bus)
    if (header_ == nullptr) return 0;
    batch_.Begin(max_messages);
    // The fills this batch starts from, and the refusals since, for the peak.
    NoteRefusals();
    const Gauge start = Fullest();
    peak_.Note(start.fill, start.level);
    (void)dispatch(max_messages);
    const std::uint32_t taken = batch_.taken;
    if (batch_.closed) {
      // A callback closed the bus (and may have made it again): the
      // blocks dispatched were the closed segment's, now unmapped.
      retired_ = Segment();
      return taken;
    }
    if constexpr (LayoutType::Loans::kAny) ReturnLoans(batch_.returning_lane, &batch_.returning);
    if (std::uint64_t touched = batch_.touched; touched != 0) {
      // SYNC POINT WRITE/READ (W), notifying side: the releases above, a
      // full fence, then the waiter counts of the lanes that got room.
      sluice::detail::FullFence();
      for (; touched != 0; touched &= touched - 1) {
        header_->lanes[detail::LowestBit(touched)].room.WakeIfWaiting();
      }
    }
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

  // ---- The consumer core's front (detail/consume_core.hpp) ----------------
  friend ConsumeCore;
  ConsumeCore& Consumer() noexcept { return consume_; }

  // The next message to dispatch: the front of the lane to take from,
  // copied out (what gets checked and dispatched is the copy: the slot is
  // memory other processes can write) and freed at once for its producer;
  // one whose alternative index or priority is out of range is counted
  // corrupt and skipped, as is a loan naming no block of its lane. nullptr
  // when nothing is ready, the batch has taken `max` (corrupt ones count),
  // or a callback closed the bus.
  Envelope* Take() noexcept {
    while (!batch_.closed && header_ != nullptr && batch_.taken < batch_.max) {
      // SYNC POINT READ (U): the lanes taken, before their rings are read;
      // for every message, so that a lane taken during the batch has its
      // HIGH taken first too.
      const std::uint64_t active =
          header_->lanes_active.load(std::memory_order_acquire) & LayoutType::kAllLanes;
      std::size_t lane = 0;
      const Envelope* front = ReadyFront(active, &lane);
      if (front == nullptr) return nullptr;
      std::memcpy(batch_.bytes, static_cast<const void*>(front), sizeof(Envelope));
      lanes_[lane].queue->PopFront();
      batch_.touched |= std::uint64_t{1} << lane;
      ++batch_.taken;
      Envelope& envelope = *std::launder(reinterpret_cast<Envelope*>(batch_.bytes));
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
      batch_.lane = lane;
      batch_.loan = 0;  // the block a loaned message names, as a bit
      if constexpr (LayoutType::Loans::kAny) {
        if (!BindLoan(&envelope, lane, &batch_.loan)) {
          ++corrupt_;
          continue;
        }
      }
      return &envelope;
    }
    return nullptr;
  }
  Envelope* First() noexcept { return Take(); }
  Envelope* Next() noexcept { return Take(); }
  // The message was dispatched: its slot was freed when it was taken; its
  // loan's block goes back with the rest of its lane's run. Blocks go back
  // a lane at a time: one read-modify-write of the lane's mask (a line its
  // producer writes too) per run of messages of one lane, not per message.
  void Release() noexcept {
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
  // (The fills a batch starts from are noted in Run, before it takes any.)
  static constexpr void BeginBatch() noexcept {}
  static constexpr void EndBatch(std::uint32_t) noexcept {}
  void CountError() noexcept { ++callback_errors_; }
  // Processed messages by priority (Take checked it is in range).
  struct Tally {
    std::uint64_t processed[kPriorityCount] = {};
  };
  static void Count(Tally& tally, const MessageHeader& header) noexcept {
    ++tally.processed[static_cast<std::size_t>(header.priority)];
  }
  void Flush(const Tally& tally) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      processed_by_priority_[p] += tally.processed[p];
      processed_ += tally.processed[p];
    }
  }
  using Observer = NoObserver;
  static constexpr bool kObserves = false;
  NoObserver& Watcher() noexcept;  // never called: kObserves is false

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

  static constexpr std::uint32_t kBatchesPerCheck = 4096;

  Segment segment_;
  Header* header_ = nullptr;
  ConsumerLane lanes_[kLanes];
  std::uint64_t gone_ = 0;  // bit l: lane l's owner left, its lane not yet handed back
  bool tending_ = false;    // inside TendGoneLanes
  pid_t creator_ = 0;       // the process that called Create
  bool took_over_ = false;  // Create took over a killed consumer's segment
  std::size_t last_lane_ = 0;
  std::string name_;
  // Subscriptions, epoch, error reporter, latency histograms, re-entrancy
  // guard: the consumer's parts every bus shares.
  ConsumeCore consume_;
  Batch batch_;
  // The segment's thresholds (fixed for its life) and their fill limits.
  AdmissionThresholds thresholds_;
  Position limits_[kPriorityCount] = {};
  sluice::detail::PeakFill peak_;
  // The segment a callback closed, mapped until its batch ends.
  Segment retired_;
  std::function<void(const ProducerExit&)> on_exit_;
  std::chrono::nanoseconds check_interval_{0};
  std::chrono::nanoseconds sleep_slice_{0};
  std::chrono::steady_clock::time_point last_check_{};
  std::uint32_t batches_since_check_ = 0;
  // The consumer thread's tallies, plain: GetStatistics reads them, so it is
  // for the consumer thread too (from another thread it would be a data race).
  std::uint64_t processed_ = 0;
  std::uint64_t processed_by_priority_[kPriorityCount] = {};
  std::uint64_t corrupt_ = 0;
  std::uint64_t callback_errors_ = 0;
  ShmBusStatistics totals_;  // of lanes handed back
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
