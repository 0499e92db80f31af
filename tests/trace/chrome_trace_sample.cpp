// Writes a Chrome trace (sluice/trace/chrome_trace.hpp) of a small robot run
// to the file given, for check_chrome_trace.py: a bus of three types and
// three priorities, four senders, refusals, a callback that throws (an
// error event) where exceptions are on. Prints "admitted N", "refused N"
// for the checker.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>

#include "sluice/sluice.hpp"
#include "sluice/trace/chrome_trace.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace {
struct Lidar {
  std::uint32_t scan;
};
struct Imu {
  std::uint32_t sample;
};
struct EStop {
  std::uint32_t code;
};
using Payload = std::variant<Lidar, Imu, EStop>;
using Ring = sluice::trace::TraceRing<16384>;
struct Traits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<Ring>;
};
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto ring = std::make_unique<Ring>();
  auto bus = std::make_unique<sluice::MpscBus<Payload, 64, Traits>>();
  if (!bus->GetObserver().Attach(ring.get(), 3)) return 1;
  const auto lidar = bus->Subscribe<Lidar>([](const Lidar&) {});
  const auto imu = bus->Subscribe<Imu>([](const Imu& sample) {
#if SLUICE_HAS_EXCEPTIONS
    if (sample.sample == 5) throw std::runtime_error("bad sample");
#else
    (void)sample;
#endif
  });
  const auto stop = bus->Subscribe<EStop>([](const EStop&) {});
  if (!lidar.IsValid() || !imu.IsValid() || !stop.IsValid()) return 1;
  std::string json;
  sluice::trace::ChromeTraceWriter<std::string> chrome(json);
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  const auto count = [&](const sluice::PublishResult& result) {
    (result.IsAdmitted() ? admitted : refused) += 1;
  };
  for (std::uint32_t i = 0; i < 300; ++i) {
    count(bus->PublishWithPriority(Lidar{i}, 1, sluice::MessagePriority::LOW));
    count(bus->PublishWithPriority(Imu{i}, 2, sluice::MessagePriority::MEDIUM));
    if (i == 200) count(bus->PublishWithPriority(EStop{1}, 3, sluice::MessagePriority::HIGH));
    if (i % 50 == 49) {  // the bus fills between batches: LOW is refused
      while (bus->ProcessBatch(16) != 0) {
      }
      (void)ring->Drain([&chrome](const sluice::trace::TraceEvent& event) { chrome.Write(event); });
    }
  }
  while (bus->ProcessBatch(16) != 0) {
  }
  (void)ring->Drain([&chrome](const sluice::trace::TraceEvent& event) { chrome.Write(event); });
  chrome.Finish();
  if (ring->Lost() != 0) return 1;
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << json;
  if (!out) return 1;
  std::printf("admitted %llu\nrefused %llu\n", static_cast<unsigned long long>(admitted),
              static_cast<unsigned long long>(refused));
  return 0;
}
