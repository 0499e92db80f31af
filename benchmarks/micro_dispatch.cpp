// Dispatch cost: callbacks (ProcessBatch) against a visitor (ProcessBatchWith).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "micro_common.hpp"

namespace sluice::micro {
namespace {

constexpr std::uint32_t kBatch = 4096;

// HIGH on the FIFO bus; LOW on the priority-ordered bus, its costliest case:
// before each message the consumer looks at the HIGH and MEDIUM rings.
template <typename B>
void Fill(B& bus) {
  constexpr MessagePriority kPriority =
      B::kDeliveryOrder == DeliveryOrder::kPriority ? MessagePriority::LOW : MessagePriority::HIGH;
  for (std::uint32_t i = 0; i < kBatch; ++i) {
    // kBatch messages into a drained bus of kSlots: never refused.
    (void)bus.PublishFast(Payload<24>{i, 0, 0, 0, 0}, 1, std::chrono::nanoseconds(0), kPriority);
  }
}

template <ProducerModel kModel, typename Traits = DefaultBusTraits>
void BM_Callbacks(benchmark::State& state) {
  auto bus = std::make_unique<Bus<kModel, 24, Traits>>();
  std::uint64_t sink = 0;
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    // The ranges stay within kMaxSubscribersPerType: never refused.
    (void)bus->template Subscribe<Payload<24>>([&sink](const Payload<24>& p) { sink += p.seq; });
  }
  for (auto _ : state) {
    state.PauseTiming();
    Fill(*bus);
    state.ResumeTiming();
    benchmark::DoNotOptimize(bus->ProcessBatch());
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kBatch);
}

template <ProducerModel kModel, typename Traits = DefaultBusTraits>
void BM_Visitor(benchmark::State& state) {
  auto bus = std::make_unique<Bus<kModel, 24, Traits>>();
  std::uint64_t sink = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Fill(*bus);
    state.ResumeTiming();
    benchmark::DoNotOptimize(
        bus->ProcessBatchWith([&sink](const Payload<24>& p) { sink += p.seq; }));
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kBatch);
}

BENCHMARK_TEMPLATE(BM_Callbacks, ProducerModel::kMulti)
    ->Name("ProcessBatch/MPSC/subscribers")
    ->Arg(1)
    ->Arg(4)
    ->Arg(16);
BENCHMARK_TEMPLATE(BM_Callbacks, ProducerModel::kSingle)
    ->Name("ProcessBatch/SPSC/subscribers")
    ->Arg(1);
BENCHMARK_TEMPLATE(BM_Visitor, ProducerModel::kMulti)->Name("ProcessBatchWith/MPSC");
BENCHMARK_TEMPLATE(BM_Visitor, ProducerModel::kSingle)->Name("ProcessBatchWith/SPSC");
// The priority-ordered bus, every message LOW (see Fill).
BENCHMARK_TEMPLATE(BM_Callbacks, ProducerModel::kMulti, PriorityOrderTraits)
    ->Name("ProcessBatch/MPSC/priority-ordered-LOW/subscribers")
    ->Arg(1);
BENCHMARK_TEMPLATE(BM_Visitor, ProducerModel::kMulti, PriorityOrderTraits)
    ->Name("ProcessBatchWith/MPSC/priority-ordered-LOW");

}  // namespace
}  // namespace sluice::micro
