// Payloads and buses shared by the Google Benchmark micro-benchmarks.
#pragma once

#include <cstdint>
#include <sluice/sluice.hpp>
#include <variant>

#include "bench_payload.hpp"

namespace sluice::micro {

template <std::size_t kBytes>
using Payload = bench::Sample<kBytes>;

inline constexpr std::size_t kSlots = 131072;
// Traits = PriorityOrderTraits: the priority-ordered bus (three rings).
template <ProducerModel kModel, std::size_t kBytes = 24, typename Traits = DefaultBusTraits>
using Bus = AsyncBus<std::variant<Payload<kBytes>>, kSlots, kModel, Traits>;

// Empties the bus without dispatching.
template <typename B>
void Drain(B& bus) {
  while (bus.ProcessBatchWith([](const auto&) {}) > 0) {
  }
}

}  // namespace sluice::micro
