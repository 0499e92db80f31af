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

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
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
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
