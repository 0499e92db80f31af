// Measures what a minimal bus adds to a Cortex-M4 image: built with
// SLUICE_SIZE_PROBE_WITH_BUS 0 (no bus), 1 (a bus without latency
// histograms), 2 (with them), 3 (as 1, its mode fixed at BARE_METAL) and 4
// (as 3, keeping no statistics: NoObservation; every optional part off),
// and the sizes compared. The bus has one
// payload type, one subscriber and 16 slots, and is used from main(): one
// Publish, one ProcessBatch.
#include <cstdint>

#if SLUICE_SIZE_PROBE_WITH_BUS
#include <variant>

#include "sluice/sluice.hpp"
#endif

volatile std::int32_t g_sink;

#if SLUICE_SIZE_PROBE_WITH_BUS
namespace {
struct Sample {
  std::int32_t value;
};
// A timer the application would provide (a SysTick count, say): histograms
// record only with a clock that reads something.
volatile std::uint32_t g_ticks;
struct TickClock {
  static std::uint64_t NowNanos() noexcept { return std::uint64_t{g_ticks} * 1'000'000; }
};
struct ProbeTraits : sluice::DefaultBusTraits {
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
  static constexpr std::size_t kMaxSubscribersPerType = 4;
  static constexpr std::size_t kCallbackStorageBytes = 8;
  using Latency = std::conditional_t<SLUICE_SIZE_PROBE_WITH_BUS == 2, sluice::LatencyHistograms<>,
                                     sluice::NoLatencyHistograms>;
  using Clock = TickClock;
  using Mode = std::conditional_t<SLUICE_SIZE_PROBE_WITH_BUS >= 3,
                                  sluice::FixedMode<sluice::PerformanceMode::BARE_METAL>,
                                  sluice::RunTimeMode>;
  using Observation = std::conditional_t<SLUICE_SIZE_PROBE_WITH_BUS == 4, sluice::NoObservation,
                                         sluice::FullObservation>;
};
sluice::MpscBus<std::variant<Sample>, 16, ProbeTraits> g_bus;
}  // namespace

int main() {
  // Only the size of these calls is measured: their results are not used.
  (void)g_bus.Subscribe<Sample>([](const Sample& sample) { g_sink = sample.value; });
  (void)g_bus.Publish(Sample{g_sink + 1});
  return static_cast<int>(g_bus.ProcessBatch());
}
#else
int main() {
  g_sink = g_sink + 1;
  return 0;
}
#endif
