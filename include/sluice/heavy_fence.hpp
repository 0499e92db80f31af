// Heavy fences: how Close() bounds the publishes of registered producers
// (producer lanes, AsyncBus::RegisterProducer) without a fence on their
// publish path. A bus's traits name one in ProducerLanes<..., HeavyFence>.
//
// A heavy fence is a class with two members:
//   bool Enable() noexcept;  // once, at the bus's construction
//   bool Run() noexcept;     // Close(), after it marked the bus closed
// where Run makes every thread of the process that is running at the time
// execute a full memory barrier before it returns (Linux membarrier:
// MembarrierHeavyFence in sluice/extras/membarrier_fence.hpp). If Enable
// returns true, a lane publish orders its "publishing" mark before its read
// of the closed flag with a compiler fence alone; otherwise (NoHeavyFence,
// or Enable failed) it executes a full fence (docs/design.md, "Producer
// lanes"). Run must not fail once Enable succeeded; Close retries it until
// it succeeds.
#pragma once

#include <atomic>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// No heavy fence: every lane publish executes a full fence.
struct NoHeavyFence {};

// For a program whose threads (and interrupt handlers) all run on one core,
// as on a single-core microcontroller: program order on that core is all
// the ordering there is, so a compiler fence on each side suffices. Wrong
// on a multi-core machine.
struct SingleCoreHeavyFence {
  bool Enable() noexcept { return true; }
  bool Run() noexcept {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return true;
  }
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
