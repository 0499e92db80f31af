// A bus traced into LTTng-UST (sluice/trace/lttng/lttng_sink.hpp), run by
// tests/lttng/lttng_test.cpp inside an LTTng session. Its clock, shared by
// the bus (timestamps, latency histograms) and the tracer (each event's
// time), is one the program sets: constant while a batch is dispatched, so
// that a message's latency in the bus's histogram is exactly its taken
// event's time less its stamp. Prints what the bus counted, for the test to
// compare with the trace:
//   admitted N
//   refused N
//   bucket PRIORITY BUCKET COUNT     (every non-empty bucket)
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <variant>

#include "sluice/sluice.hpp"
#include "sluice/trace/lttng/lttng_sink.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace {

std::atomic<std::uint64_t> g_now{1'000'000};
struct AppClock {
  static std::uint64_t NowNanos() noexcept { return g_now.load(std::memory_order_relaxed); }
};

struct Reading {
  std::uint64_t seq;
};
struct Command {
  std::uint32_t code;
};
using Payload = std::variant<Reading, Command>;

struct Traits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<sluice::trace::LttngSink, AppClock>;
  using Clock = AppClock;
};

}  // namespace

// Usage: sluice_lttng_traced_app BUS_ID (the test's session records only
// this bus id's events: another program's, or another run's, are not its).
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const auto bus_id = static_cast<std::uint16_t>(std::strtoul(argv[1], nullptr, 10));
  sluice::trace::LttngSink sink;
  auto bus = std::make_unique<sluice::MpscBus<Payload, 1024, Traits>>();
  if (!bus->GetObserver().Attach(&sink, bus_id)) return 1;
  std::uint64_t seen = 0;
  const auto readings = bus->Subscribe<Reading>([&seen](const Reading&) { ++seen; });
  const auto commands = bus->Subscribe<Command>([&seen](const Command&) { ++seen; });
  if (!readings.IsValid() || !commands.IsValid()) return 1;
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  std::uint64_t seq = 0;
  // 20 rounds of 700 messages 20 ns apart, each round dispatched after a
  // delay from 100 ns to 51 us: latencies across a dozen buckets. LOW is
  // refused from 615 queued on (60 % of 1,024): refused events.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 700; ++i) {
      g_now.fetch_add(20, std::memory_order_relaxed);
      const auto priority = static_cast<sluice::MessagePriority>(seq % 3);
      const sluice::PublishResult result =
          seq % 10 == 9
              ? bus->PublishWithPriority(Command{static_cast<std::uint32_t>(seq)}, 2, priority)
              : bus->PublishWithPriority(Reading{seq}, 1, priority);
      ++seq;
      (result.IsAdmitted() ? admitted : refused) += 1;
    }
    g_now.fetch_add(std::uint64_t{100} << (round % 10), std::memory_order_relaxed);
    while (bus->ProcessBatch(64) != 0) {
    }
  }
  std::printf("admitted %llu\n", static_cast<unsigned long long>(admitted));
  std::printf("refused %llu\n", static_cast<unsigned long long>(refused));
  std::printf("dispatched %llu\n", static_cast<unsigned long long>(seen));
  const sluice::LatencySnapshot latencies = bus->GetLatencyHistograms();
  for (std::size_t priority = 0; priority < sluice::kPriorityCount; ++priority) {
    for (std::size_t bucket = 0; bucket < sluice::kLatencyBucketCount; ++bucket) {
      const std::uint64_t count = latencies.by_priority[priority].buckets[bucket];
      if (count != 0) {
        std::printf("bucket %zu %zu %llu\n", priority, bucket,
                    static_cast<unsigned long long>(count));
      }
    }
  }
  return 0;
}
