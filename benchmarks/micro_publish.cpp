// Publish cost per mode, producer model and payload size, one thread.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "micro_common.hpp"

namespace sluice::micro {
namespace {

// Publishes until the bus is half full, then drains it outside the timing.
template <ProducerModel kModel, PerformanceMode kMode, std::size_t kBytes, bool kFast,
          typename Traits = DefaultBusTraits>
void BM_Publish(benchmark::State& state) {
  auto bus = std::make_unique<Bus<kModel, kBytes, Traits>>();
  bus->SetPerformanceMode(kMode);
  Payload<kBytes> value{};
  std::uint64_t in_bus = 0;
  for (auto _ : state) {
    value.seq = in_bus;
    bool admitted;
    if constexpr (kFast) {
      admitted = bus->PublishFast(value, 1, std::chrono::nanoseconds(in_bus)).IsAdmitted();
    } else {
      admitted = bus->Publish(value, 1).IsAdmitted();
    }
    benchmark::DoNotOptimize(admitted);
    if (++in_bus == kSlots / 2) {
      state.PauseTiming();
      Drain(*bus);
      in_bus = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

constexpr auto kMpsc = ProducerModel::kMulti;
constexpr auto kSpsc = ProducerModel::kSingle;
constexpr auto kFull = PerformanceMode::FULL_FEATURED;
constexpr auto kNoStats = PerformanceMode::NO_STATS;
constexpr auto kBare = PerformanceMode::BARE_METAL;

BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 24, false)->Name("Publish/MPSC/FULL_FEATURED");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kNoStats, 24, false)->Name("Publish/MPSC/NO_STATS");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kBare, 24, false)->Name("Publish/MPSC/BARE_METAL");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 24, true)->Name("PublishFast/MPSC/FULL_FEATURED");
BENCHMARK_TEMPLATE(BM_Publish, kSpsc, kFull, 24, false)->Name("Publish/SPSC/FULL_FEATURED");
BENCHMARK_TEMPLATE(BM_Publish, kSpsc, kNoStats, 24, false)->Name("Publish/SPSC/NO_STATS");
BENCHMARK_TEMPLATE(BM_Publish, kSpsc, kBare, 24, false)->Name("Publish/SPSC/BARE_METAL");
BENCHMARK_TEMPLATE(BM_Publish, kSpsc, kFull, 24, true)->Name("PublishFast/SPSC/FULL_FEATURED");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 24, true, PriorityOrderTraits)
    ->Name("PublishFast/MPSC/FULL_FEATURED/priority-ordered");
BENCHMARK_TEMPLATE(BM_Publish, kSpsc, kFull, 24, true, PriorityOrderTraits)
    ->Name("PublishFast/SPSC/FULL_FEATURED/priority-ordered");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 64, true)->Name("PublishFast/MPSC/64B");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 128, true)->Name("PublishFast/MPSC/128B");
BENCHMARK_TEMPLATE(BM_Publish, kMpsc, kFull, 256, true)->Name("PublishFast/MPSC/256B");

}  // namespace
}  // namespace sluice::micro
