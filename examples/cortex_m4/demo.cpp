// Sluice on a Cortex-M4, no operating system: the SysTick interrupt publishes
// sensor samples, main() dispatches them, and a PendSV handler unsubscribes a
// callback while a batch is running. Runs under QEMU's MPS2-AN386 board with
// semihosting for its output; prints PASS when every check holds.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <variant>

#include "sluice/sluice.hpp"

extern "C" void initialise_monitor_handles();

namespace {

struct SensorSample {
  std::uint32_t tick;
  std::int32_t value;
};
struct EmergencyStop {
  std::uint8_t source;
};
using Payload = std::variant<SensorSample, EmergencyStop>;

std::atomic<std::uint32_t> g_ticks{0};

// The application's timer, as the bus clock (nanoseconds): SysTick fires
// every millisecond.
struct SysTickClock {
  static std::uint64_t NowNanos() noexcept {
    return std::uint64_t{g_ticks.load(std::memory_order_relaxed)} * 1'000'000;
  }
};

struct BoardTraits : sluice::DefaultBusTraits {
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;  // no heap
  static constexpr std::size_t kMaxSubscribersPerType = 4;
  static constexpr std::size_t kCallbackStorageBytes = 24;  // five captured references
  using Clock = SysTickClock;
};

// Static storage: the ring lives in .bss.
sluice::MpscBus<Payload, 32, BoardTraits> g_bus;

constexpr std::uint32_t kSamples = 200;
std::atomic<std::uint32_t> g_published{0};
std::atomic<std::uint32_t> g_refused{0};

// A callable that counts how many copies of it are alive, to see when the bus
// destroys it.
std::uint32_t g_probe_calls = 0;
int g_probe_alive = 0;
struct Probe {
  Probe() { ++g_probe_alive; }
  Probe(const Probe&) { ++g_probe_alive; }
  ~Probe() { --g_probe_alive; }
  void operator()(const SensorSample&) const { ++g_probe_calls; }
};
sluice::SubscriptionHandle g_probe_handle;
bool g_unsubscribed_in_handler = false;

volatile std::uint32_t& Register(std::uintptr_t address) {
  return *reinterpret_cast<volatile std::uint32_t*>(address);
}

}  // namespace

// Producer in interrupt context.
extern "C" void SysTick_Handler() {
  const std::uint32_t tick = g_ticks.load(std::memory_order_relaxed) + 1;
  g_ticks.store(tick, std::memory_order_relaxed);
  if (g_published.load(std::memory_order_relaxed) >= kSamples) return;
  if (g_bus.PublishWithPriority(SensorSample{tick, static_cast<std::int32_t>(tick * 3)}, 1,
                                sluice::MessagePriority::LOW)) {
    g_published.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_refused.fetch_add(1, std::memory_order_relaxed);
  }
}

// Preempts the consumer inside another callback and unsubscribes the probe:
// on one core it must not wait for the batch; the probe is not the callable
// being dispatched, so it is destroyed at once and never called again.
extern "C" void PendSV_Handler() {
  const sluice::UnsubscribeResult result = g_bus.Unsubscribe(g_probe_handle);
  g_unsubscribed_in_handler = result.Removed() && !result.StillRunning();
}

int main() {
  initialise_monitor_handles();
  bool ok = true;

  std::uint32_t received = 0;
  std::uint32_t last_tick = 0;
  bool in_order = true;
  bool probe_alive_during_batch = false;
  std::uint32_t probe_calls_after_unsubscribe = 0;
  const sluice::SubscriptionHandle consumer =
      g_bus.Subscribe<SensorSample>([&](const SensorSample& sample) {
        in_order =
            in_order && sample.tick > last_tick && sample.value == std::int32_t(sample.tick * 3);
        last_tick = sample.tick;
        if (++received == kSamples / 2) {
          Register(0xE000ED04) = 1u << 28;  // ICSR.PENDSVSET: PendSV preempts now
          __asm__ volatile("dsb\n isb" ::: "memory");
          probe_alive_during_batch = g_probe_alive == 1;
          probe_calls_after_unsubscribe = g_probe_calls;
        }
      });
  g_probe_handle = g_bus.Subscribe<SensorSample>(Probe{});
  std::uint32_t stops = 0;
  const sluice::SubscriptionHandle stop_handler =
      g_bus.Subscribe<EmergencyStop>([&stops](const EmergencyStop&) { ++stops; });
  ok = ok && consumer.IsValid() && g_probe_handle.IsValid() && stop_handler.IsValid();

  // SysTick: 1 ms at the board's 25 MHz, from the processor clock.
  Register(0xE000E014) = 25'000 - 1;  // SYST_RVR
  Register(0xE000E018) = 0;           // SYST_CVR
  Register(0xE000E010) = 0b111;       // SYST_CSR: enable, interrupt, processor clock

  bool stop_sent = false;
  while (received + g_refused.load(std::memory_order_relaxed) < kSamples) {
    g_bus.ProcessBatch();
    if (!stop_sent && received >= kSamples / 4) {
      stop_sent = g_bus.PublishWithPriority(EmergencyStop{7}, 2, sluice::MessagePriority::HIGH)
                      .IsAdmitted();
    }
  }
  Register(0xE000E010) = 0;
  g_bus.ProcessBatch();
  const int probe_alive_after_batch = g_probe_alive;

  const sluice::BusStatisticsSnapshot stats = g_bus.GetStatistics();
  std::printf("sluice %s on Cortex-M4: %u-bit positions, bus of %u slots in %u bytes\n",
              sluice::kVersion, unsigned(sizeof(sluice::Position) * 8), unsigned(g_bus.Capacity()),
              unsigned(sizeof(g_bus)));
  std::printf("samples published from SysTick: %lu, refused: %lu, received: %lu, in order: %s\n",
              static_cast<unsigned long>(g_published.load()),
              static_cast<unsigned long>(g_refused.load()), static_cast<unsigned long>(received),
              in_order ? "yes" : "no");
  ok = ok && in_order && received == g_published.load() && received + g_refused.load() == kSamples;
  std::printf("statistics: published %lu, processed %lu, dropped %lu\n",
              static_cast<unsigned long>(stats.messages_published),
              static_cast<unsigned long>(stats.messages_processed),
              static_cast<unsigned long>(stats.messages_dropped));
  ok = ok && stats.messages_published == received + stops &&
       stats.messages_processed == stats.messages_published &&
       stats.messages_dropped == g_refused.load();
  std::printf("emergency stops received: %lu\n", static_cast<unsigned long>(stops));
  ok = ok && stop_sent && stops == 1;
  const bool removed_at_once = g_unsubscribed_in_handler && !probe_alive_during_batch &&
                               probe_alive_after_batch == 0 &&
                               g_probe_calls == probe_calls_after_unsubscribe;
  std::printf("unsubscribe from a handler that preempted a batch: %s\n",
              removed_at_once ? "destroyed at once, not called again" : "WRONG");
  ok = ok && removed_at_once;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
