// Compile-time knobs of a bus. Derive from DefaultBusTraits and override what
// you need:
//
//   struct StaticTraits : sluice::DefaultBusTraits {
//     static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
//   };
//   static sluice::MpscBus<Payload, 1024, StaticTraits> bus;  // no heap at all
//
// Knobs that only matter together are one policy type: Delivery (the order
// and, for priority order, its check interval and starvation limit),
// Waiting (the parker and its polls), Lanes (how many, their size, burst and
// fence) and Latency (the histograms and their clock interval). Each
// default is the feature off, at no cost: FifoDelivery, NoWaiting, NoLanes;
// and LatencyHistograms<> on.
//
//   struct RobotTraits : sluice::DefaultBusTraits {
//     using Delivery = sluice::PriorityDelivery<>;          // HIGH first
//     using Waiting = sluice::WaitWith<sluice::FutexParker>;  // ProcessBatchWait
//     using Lanes = sluice::ProducerLanes<8, 4096>;         // RegisterProducer
//   };
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/admission.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"
#include "sluice/heavy_fence.hpp"
#include "sluice/observer.hpp"
#include "sluice/parker.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class SlotStorage {
  // The ring is allocated once, in the constructor: a bus of any capacity can
  // live on the stack. Nothing allocates after construction.
  kHeap,
  // The ring lives inside the bus object: for static storage or targets
  // without a heap. Mind the stack if you make such a bus a local.
  kInline,
};

// The order in which the consumer takes admitted messages.
enum class DeliveryOrder {
  // Admission order, across priorities: one ring. A HIGH message admitted
  // behind a backlog waits for the whole backlog.
  kFifo,
  // HIGH before MEDIUM before LOW, and within a priority each producer's
  // messages in the order it published them: one ring per priority, each of
  // the full capacity (three times the slot memory), and a second claim per
  // publish. Admission, fill, statistics and Depth are still over the whole
  // bus.
  kPriority,
};

// ---- Delivery: the order, and what only priority order needs ----------------

// Admission order (DeliveryOrder::kFifo): one ring.
struct FifoDelivery {
  static constexpr DeliveryOrder kOrder = DeliveryOrder::kFifo;
  static constexpr std::uint32_t kCheckInterval = 1;
  static constexpr std::uint32_t kStarvationLimit = 0;
};

// HIGH first (DeliveryOrder::kPriority).
// kCheckInterval: the consumer looks for a message of a higher priority at
// least every this many messages (1: before each one). At least 1.
// kStarvationLimit: 0 is strict priority (LOW can wait for ever under
// endless HIGH). K > 0: a lower priority whose front message the consumer
// has seen waiting and then passed over for K messages of higher priorities
// gets the next run (up to kCheckInterval = N messages), lowest priority
// first. From its publication, a front message then waits for at most
// K + 2N - 1 higher messages (MEDIUM), K + 3N - 1 (LOW); docs/api.md,
// "Delivery order". Producer lanes need 0.
template <std::uint32_t kCheckIntervalMessages = 1, std::uint32_t kStarvationLimitMessages = 0>
struct PriorityDelivery {
  static constexpr DeliveryOrder kOrder = DeliveryOrder::kPriority;
  static constexpr std::uint32_t kCheckInterval = kCheckIntervalMessages;
  static constexpr std::uint32_t kStarvationLimit = kStarvationLimitMessages;
  static_assert(kCheckInterval >= 1,
                "Sluice: PriorityDelivery's check interval must be at least 1");
};

// ---- Waiting: how the consumer and blocked producers sleep -------------------

// Nobody sleeps: ProcessBatchWait and PublishBlocking do not compile, and
// publishing pays nothing for them.
struct NoWaiting {
  using Parker = NoParker;
  static constexpr std::uint32_t kPollsBeforePark = 0;
};

// The consumer may sleep in ProcessBatchWait and producers in
// PublishBlocking, on `ParkerType` (sluice/parker.hpp; FutexParker,
// ConditionVariableParker and MembarrierFutexParker in sluice/extras/).
// Every publish then adds a fence and a load. kPolls: polls of an empty
// queue (ProcessBatchWait) or a full one (PublishBlocking) before parking:
// what changes meanwhile is taken without a sleep and a wake-up.
template <typename ParkerType, std::uint32_t kPolls = 256>
struct WaitWith {
  using Parker = ParkerType;
  static constexpr std::uint32_t kPollsBeforePark = kPolls;
};

// As WaitWith, for a bus that one thread waits on together with others
// through a WaitSet<ParkerType> (sluice/wait_set.hpp): the bus is
// constructed only with its set (`Bus bus(set);`) and wakes the set's
// signal, and only such buses may be listed in a set's Wait or
// ProcessBatchWait. So a bus left out of every set cannot be waited on by
// one (a compile error, not a wait that returns at once for ever).
template <typename ParkerType, std::uint32_t kPolls = 256>
struct WaitInSet : WaitWith<ParkerType, kPolls> {
  static constexpr bool kJoinsWaitSet = true;
};

// ---- CatchUp: the consumer that has just emptied the queue -------------------

// After a poll that took messages, the first poll that finds the queue empty
// spins up to kMostPauses pause instructions (x86 `pause`, Arm `yield`)
// before it returns 0. A consumer that has caught up with a producer still
// publishing would otherwise read the producer's line again at once and take
// it from the producer at every message, one cross-core transfer each (the
// lockstep of docs/performance.md, "Run after run"); after the pause the next
// poll takes what gathered meanwhile at one transfer. The pause adapts
// (detail/consume/catch_up_pacer.hpp): it starts at 8 pauses and doubles, up
// to kMostPauses, while it gathers too little (less than one message per 8
// pauses, plus two, and less than a quarter of the queue and the batch's
// limit), and a pause that gathered too little is skipped at the next 1, 5,
// 21, ... up to 16,383 catch-ups; one that paid ends the skipping, and one
// that gathered a quarter of the queue or the batch's limit is halved. So an
// idle consumer never pauses (a poll after an empty poll, or after a wait
// that timed out, does not), nor does
// a poll made inside a batch of any bus (a callback polling another bus) or
// inside a wait over several buses (WaitSet::ProcessBatchWait); and a
// producer that waits for each reply meets the pause 8 times in its first
// 10,000 messages and then once in 16,384 catch-ups, each time for at most
// kMostPauses pauses (128: about 3 us at 25 ns a pause). At most 65,535.
// Hosted builds only (it keeps a thread-local count). Set NoCatchUpPause
// where no message may wait for that.
template <std::uint32_t kMostPausesValue = 128>
struct CatchUpPause {
  static constexpr std::uint32_t kMostPauses = kMostPausesValue;
  static void Pause(std::uint32_t pauses) noexcept {
    for (std::uint32_t i = 0; i < pauses; ++i) detail::CpuRelax();
  }
};

// No catch-up pause and no state for it (hosted, a batch still counts itself
// on its thread, so that a bus with the pause polled from its callbacks does
// not pause).
struct NoCatchUpPause {
  static constexpr std::uint32_t kMostPauses = 0;
  static void Pause(std::uint32_t) noexcept {}
};

// ---- Lanes: registered producers, each with a lane of its own ----------------

// No lanes: RegisterProducer does not compile.
struct NoLanes {
  static constexpr std::size_t kMaxProducers = 0;
  static constexpr std::size_t kCapacity = 0;
  static constexpr std::uint32_t kBurst = 1;
  using HeavyFence = NoHeavyFence;
};

// At most kMaxProducersAtOnce registered producers at once
// (AsyncBus::RegisterProducer; docs/api.md, "Producer lanes"), each with a
// lane of kLaneSlots slots (a power of two, at least 2; three rings of it per
// lane with priority delivery), allocated with the bus; admission applies
// the thresholds to the lane's own fill. kBurstMessages (FIFO delivery):
// messages the consumer takes from one source (the shared ring or a lane)
// before it turns to the next that has messages, at least 1. HeavyFenceType:
// how Close() bounds lane publishes in flight (sluice/heavy_fence.hpp): with
// NoHeavyFence each lane publish executes a full fence; with
// MembarrierHeavyFence (Linux) it executes none.
template <std::size_t kMaxProducersAtOnce, std::size_t kLaneSlots = 1024,
          std::uint32_t kBurstMessages = 64, typename HeavyFenceType = NoHeavyFence>
struct ProducerLanes {
  static constexpr std::size_t kMaxProducers = kMaxProducersAtOnce;
  static constexpr std::size_t kCapacity = kLaneSlots;
  static constexpr std::uint32_t kBurst = kBurstMessages;
  using HeavyFence = HeavyFenceType;
  static_assert(kMaxProducers >= 1,
                "Sluice: ProducerLanes needs at least one lane (NoLanes: none)");
  static_assert(kCapacity >= 2 && (kCapacity & (kCapacity - 1)) == 0,
                "Sluice: a producer lane's capacity must be a power of two and at least 2");
  static_assert(kBurst >= 1, "Sluice: ProducerLanes' burst must be at least 1");
};

// ---- Latency: per-priority publish-to-dispatch histograms ---------------------

// None: no memory, nothing on the consumer's path.
struct NoLatencyHistograms {
  static constexpr bool kEnabled = false;
  static constexpr std::uint32_t kClockInterval = 1;
};

// Kept by the consumer in FULL_FEATURED mode (about 1.4 KiB with 64-bit
// counters). The consumer re-reads the bus clock every kClockInterval (N)
// messages of a batch, so a message is measured to a reading taken before it
// was taken up and after all but at most N - 1 of the messages before it:
// never more than its true latency, short by at most the time those N - 1
// took; a message published after that reading is measured to one more
// reading, taken when the consumer meets it (docs/api.md). 16: a read of the default clock costs
// more than the histogram's whole per-message work (40 instructions against about 28,
// docs/performance.md), so at 16 it adds under 3 instructions a message and the error stays within
// 15 messages' dispatch; 1 measures each message to its own dispatch at a read per message.
template <std::uint32_t kClockIntervalMessages = 16>
struct LatencyHistograms {
  static constexpr bool kEnabled = true;
  static constexpr std::uint32_t kClockInterval = kClockIntervalMessages;
  static_assert(kClockInterval >= 1,
                "Sluice: LatencyHistograms' clock interval must be at least 1");
};

struct DefaultBusTraits {
  // Subscriptions per payload type; Subscribe past it returns an invalid handle.
  static constexpr std::size_t kMaxSubscribersPerType = 16;
  // Bytes of inline storage per subscription callable; larger callables are a
  // compile error.
  static constexpr std::size_t kCallbackStorageBytes = 48;
  static constexpr SlotStorage kSlotStorage = SlotStorage::kHeap;
  // Stamps timestamp_ns in Publish(): the CPU's counter where it has a
  // constant rate (a few ns a read), steady_clock elsewhere. Use SteadyClock
  // for timestamps exactly on steady_clock's time line. Bare metal: NullClock
  // (timestamps 0) until the application names its timer here.
#if SLUICE_FREESTANDING
  using Clock = NullClock;
#else
  using Clock = CounterClock;
#endif
  // RunTimeMode (SetPerformanceMode switches it while the bus runs) or
  // FixedMode<PerformanceMode::...> (one mode, no run-time test of it);
  // sluice/performance_mode.hpp.
  using Mode = RunTimeMode;
  // FifoDelivery or PriorityDelivery<kCheckInterval, kStarvationLimit>.
  using Delivery = FifoDelivery;
  // NoWaiting, WaitWith<Parker, kPollsBeforePark> or WaitInSet<Parker,
  // kPollsBeforePark> (a bus of a WaitSet).
  using Waiting = NoWaiting;
  // NoLanes or ProducerLanes<kMaxProducers, kCapacity, kBurst, HeavyFence>.
  using Lanes = NoLanes;
  // LatencyHistograms<kClockInterval> or NoLatencyHistograms.
  using Latency = LatencyHistograms<>;
  // What the bus keeps of its own events (sluice/observer.hpp):
  // FullObservation (statistics, histograms, peak, producer counts) or
  // NoObservation (none of them, and none of their code).
  using Observation = FullObservation;
  // What else sees each admission, refusal, batch, message taken and error
  // (sluice/observer.hpp): NoObserver, or a type of your own.
  using Observer = NoObserver;
  // Where GetBackpressureLevel()'s levels start: kFollowAdmission (WARNING
  // where LOW is refused, CRITICAL where MEDIUM is; they move with
  // SetAdmissionThresholds) or kFixed (75 % and 90 %); sluice/admission.hpp.
  static constexpr BackpressureScale kBackpressureScale = BackpressureScale::kFollowAdmission;
  // What ProcessBatch and ProcessBatchWith do when they find the queue
  // empty just after taking messages: CatchUpPause<> (spin a little, so that
  // a producer still publishing is not met at every message) or
  // NoCatchUpPause.
#if SLUICE_FREESTANDING
  using CatchUp = NoCatchUpPause;
#else
  using CatchUp = CatchUpPause<>;
#endif
  // True: every payload alternative must be trivially copyable (a compile
  // error names the knob otherwise), so no payload allocates when it is
  // copied in or frees when it is destroyed after dispatch. False: any
  // nothrow-movable alternative, std::vector included (docs/api.md,
  // "Payloads that allocate").
  static constexpr bool kRequireTriviallyCopyablePayloads = false;
};

// HIGH first: PriorityDelivery with the default check interval and strict
// priority.
struct PriorityOrderTraits : DefaultBusTraits {
  using Delivery = PriorityDelivery<>;
};

namespace detail {

// The knobs of 0.2, grouped into policies in 0.3: a traits type that still
// sets one (a static member or an enumerator of that name) is a compile error
// that names its replacement (a silently ignored knob would change
// behaviour).
#define SLUICE_DETAIL_OLD_KNOB(name)      \
  template <typename T, typename = void>  \
  struct Has_##name : std::false_type {}; \
  template <typename T>                   \
  struct Has_##name<T, std::void_t<decltype(T::name)>> : std::true_type {};
SLUICE_DETAIL_OLD_KNOB(kDeliveryOrder)
SLUICE_DETAIL_OLD_KNOB(kPriorityCheckInterval)
SLUICE_DETAIL_OLD_KNOB(kStarvationLimit)
SLUICE_DETAIL_OLD_KNOB(kPollsBeforePark)
SLUICE_DETAIL_OLD_KNOB(kMaxProducerLanes)
SLUICE_DETAIL_OLD_KNOB(kLaneCapacity)
SLUICE_DETAIL_OLD_KNOB(kLaneBurst)
SLUICE_DETAIL_OLD_KNOB(kLatencyHistograms)
SLUICE_DETAIL_OLD_KNOB(kLatencyClockInterval)
SLUICE_DETAIL_OLD_KNOB(kBackpressureLevels)
#undef SLUICE_DETAIL_OLD_KNOB
template <typename T, typename = void>
struct HasOldParker : std::false_type {};
template <typename T>
struct HasOldParker<T, std::void_t<typename T::Parker>> : std::true_type {};
template <typename T, typename = void>
struct HasOldHeavyFence : std::false_type {};
template <typename T>
struct HasOldHeavyFence<T, std::void_t<typename T::HeavyFence>> : std::true_type {};

// Whether a traits' Mode is RunTimeMode or a FixedMode.
template <typename Mode>
struct IsModeChoice : std::false_type {};
template <>
struct IsModeChoice<RunTimeMode> : std::true_type {};
template <PerformanceMode kMode>
struct IsModeChoice<FixedMode<kMode>> : std::true_type {};

// Whether a Waiting policy makes a bus of a WaitSet (WaitInSet).
template <typename Waiting, typename = void>
struct JoinsWaitSet : std::false_type {};
template <typename Waiting>
struct JoinsWaitSet<Waiting, std::void_t<decltype(Waiting::kJoinsWaitSet)>>
    : std::bool_constant<Waiting::kJoinsWaitSet> {};

template <typename Traits>
constexpr bool CheckTraits() {
  static_assert(
      !Has_kDeliveryOrder<Traits>::value,
      "Sluice: the 0.2 knob kDeliveryOrder is now `using Delivery = sluice::PriorityDelivery<>;` "
      "(or FifoDelivery) in the bus traits");
  static_assert(!Has_kPriorityCheckInterval<Traits>::value,
                "Sluice: the 0.2 knob kPriorityCheckInterval is now the first argument of "
                "sluice::PriorityDelivery<kCheckInterval, kStarvationLimit>");
  static_assert(!Has_kStarvationLimit<Traits>::value,
                "Sluice: the 0.2 knob kStarvationLimit is now the second argument of "
                "sluice::PriorityDelivery<kCheckInterval, kStarvationLimit>");
  static_assert(!HasOldParker<Traits>::value && !Has_kPollsBeforePark<Traits>::value,
                "Sluice: the 0.2 knobs Parker and kPollsBeforePark are now `using Waiting = "
                "sluice::WaitWith<Parker, kPollsBeforePark>;` in the bus traits");
  static_assert(
      !Has_kMaxProducerLanes<Traits>::value && !Has_kLaneCapacity<Traits>::value &&
          !Has_kLaneBurst<Traits>::value && !HasOldHeavyFence<Traits>::value,
      "Sluice: the 0.2 knobs kMaxProducerLanes, kLaneCapacity, kLaneBurst and HeavyFence are now "
      "`using Lanes = sluice::ProducerLanes<kMaxProducers, kCapacity, kBurst, "
      "HeavyFence>;` in the bus traits");
  static_assert(
      !Has_kLatencyHistograms<Traits>::value && !Has_kLatencyClockInterval<Traits>::value,
      "Sluice: the 0.2 knobs kLatencyHistograms and kLatencyClockInterval are now `using Latency = "
      "sluice::LatencyHistograms<kClockInterval>;` (or NoLatencyHistograms) in the bus "
      "traits");
  static_assert(
      !Has_kBackpressureLevels<Traits>::value,
      "Sluice: the 0.2 knob kBackpressureLevels is now kBackpressureScale (BackpressureScale)");
  static_assert(Traits::Delivery::kOrder == DeliveryOrder::kFifo ||
                    Traits::Delivery::kOrder == DeliveryOrder::kPriority,
                "Sluice: Delivery must be sluice::FifoDelivery or sluice::PriorityDelivery<...>");
  static_assert(
      IsModeChoice<typename Traits::Mode>::value,
      "Sluice: Mode must be sluice::RunTimeMode or sluice::FixedMode<PerformanceMode::...>");
  static_assert(std::is_same_v<typename Traits::Observation, FullObservation> ||
                    std::is_same_v<typename Traits::Observation, NoObservation>,
                "Sluice: Observation must be sluice::FullObservation or sluice::NoObservation "
                "(a back end of your own goes in `using Observer = ...;`)");
  return true;
}

}  // namespace detail

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
