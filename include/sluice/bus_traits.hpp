// Compile-time knobs of a bus. Derive from DefaultBusTraits and override what
// you need:
//
//   struct StaticTraits : sluice::DefaultBusTraits {
//     static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
//   };
//   static sluice::MpscBus<Payload, 1024, StaticTraits> bus;  // no heap at all
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/admission.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/heavy_fence.hpp"
#include "sluice/parker.hpp"

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
  // publish. Admission, fill, statistics
  // and Depth are still over the whole bus. See kPriorityCheckInterval and
  // kStarvationLimit.
  kPriority,
};

struct DefaultBusTraits {
  // Subscriptions per payload type; Subscribe past it returns an invalid handle.
  static constexpr std::size_t kMaxSubscribersPerType = 16;
  // Bytes of inline storage per subscription callable; larger callables are a
  // compile error.
  static constexpr std::size_t kCallbackStorageBytes = 48;
  static constexpr SlotStorage kSlotStorage = SlotStorage::kHeap;
  // Per-priority publish-to-dispatch latency histograms, kept by the consumer
  // in FULL_FEATURED mode (about 1.3 KiB with 64-bit counters). False: none.
  static constexpr bool kLatencyHistograms = true;
  // Stamps timestamp_us in Publish(): the CPU's counter where it has a
  // constant rate (a few ns a read), steady_clock elsewhere. Use SteadyClock
  // for timestamps exactly on steady_clock's time line. Bare metal: NullClock
  // (timestamps 0) until the application names its timer here.
#if SLUICE_FREESTANDING
  using Clock = NullClock;
#else
  using Clock = CounterClock;
#endif
  // How the consumer sleeps in ProcessBatchWait, and producers in
  // PublishBlocking (sluice/parker.hpp;
  // SleepingConsumerTraits in sluice/extras/condition_variable_parker.hpp
  // picks the condition-variable parker). With
  // NoParker, ProcessBatchWait does not compile and publishing pays nothing
  // for it; with a parker, every publish adds a fence and a load.
  using Parker = NoParker;
  // Polls ProcessBatchWait (of an empty queue) and PublishBlocking (of a
  // full one) make before they park: what changes meanwhile is taken without
  // a sleep and a wake-up.
  static constexpr std::uint32_t kPollsBeforePark = 256;
  static constexpr DeliveryOrder kDeliveryOrder = DeliveryOrder::kFifo;
  // DeliveryOrder::kPriority: the consumer looks for a message of a higher
  // priority at least every this many messages (1: before each one). At
  // least 1.
  static constexpr std::uint32_t kPriorityCheckInterval = 1;
  // DeliveryOrder::kPriority: 0 is strict priority (LOW can wait for ever
  // under endless HIGH). K > 0: a lower priority whose front message the
  // consumer has seen waiting and then passed over for K messages of higher
  // priorities gets the next run (up to kPriorityCheckInterval = N
  // messages), lowest priority first. From its publication, a front message
  // then waits for at most K + 2N - 1 higher messages (MEDIUM), K + 3N - 1
  // (LOW); docs/api.md, "Delivery order".
  static constexpr std::uint32_t kStarvationLimit = 0;
  // Producer lanes (AsyncBus::RegisterProducer; docs/api.md, "Producer
  // lanes"): at most this many registered producers at once, each with a
  // lane of its own, allocated with the bus. 0: no lanes, and
  // RegisterProducer does not compile.
  static constexpr std::size_t kMaxProducerLanes = 0;
  // Slots per lane (a power of two, at least 2; three rings of it per lane
  // with DeliveryOrder::kPriority). Admission applies the thresholds to the
  // lane's own fill.
  static constexpr std::size_t kLaneCapacity = 1024;
  // DeliveryOrder::kFifo with lanes: messages the consumer takes from one
  // source (the shared ring or a lane) before it turns to the next source
  // that has messages. At least 1.
  static constexpr std::uint32_t kLaneBurst = 64;
  // How Close() bounds lane publishes in flight (sluice/heavy_fence.hpp):
  // with NoHeavyFence each lane publish executes a full fence; with
  // MembarrierHeavyFence (Linux) it executes none.
  using HeavyFence = NoHeavyFence;
  // Latency histograms: the consumer re-reads Clock every this many messages
  // of a batch (N, at least 1), so a message is measured to a reading taken
  // before it was taken up and after all but at most N - 1 of the messages
  // before it: never more than its true latency, short by at most the time
  // those N - 1 took (docs/api.md). 16: a read of the default clock costs
  // more than the histogram's whole per-message work (44 instructions against
  // 28, docs/performance.md), so at 16 it adds under 2 instructions a message
  // and the error stays within 15 messages' dispatch; 1 measures each message
  // to its own dispatch at a read per message.
  static constexpr std::uint32_t kLatencyClockInterval = 16;
  // Where GetBackpressureLevel()'s levels start: kFollowAdmission (WARNING
  // where LOW is refused, CRITICAL where MEDIUM is; they move with
  // SetAdmissionThresholds) or kFixed (75 % and 90 %); sluice/admission.hpp.
  static constexpr BackpressureLevels kBackpressureLevels = BackpressureLevels::kFollowAdmission;
  // True: every payload alternative must be trivially copyable (a compile
  // error names the knob otherwise), so no payload allocates when it is
  // copied in or frees when it is destroyed after dispatch. False: any
  // nothrow-movable alternative, std::vector included (docs/api.md,
  // "Payloads that allocate").
  static constexpr bool kRequireTriviallyCopyablePayloads = false;
};

// HIGH first: DeliveryOrder::kPriority with the default check interval and
// strict priority.
struct PriorityOrderTraits : DefaultBusTraits {
  static constexpr DeliveryOrder kDeliveryOrder = DeliveryOrder::kPriority;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
