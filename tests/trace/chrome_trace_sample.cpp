// Writes a Chrome trace (sluice/trace/chrome_trace.hpp) of a small robot run
// to the file given, for check_chrome_trace.py: a bus of three types and
// three priorities, four senders, refusals, a callback that throws (an
// error event) where exceptions are on, the close, and a shared-memory
// bus's three lane events, told to the tracer as that bus tells them (a
// lane attached, its producer killed, the lane handed back). Prints
// "admitted N", "refused N", "lost N" and "lane_events N" for the checker. With `lossy` (first
// argument), the trace ring holds 64 events and is drained once, at the end: most events are lost,
// and the trace must still nest.
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
#include "sluice/trace/trace_stream.hpp"
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
template <std::size_t kEvents>
using Ring = sluice::trace::TraceRing<kEvents>;
template <std::size_t kEvents>
struct Traits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<Ring<kEvents>>;
};

template <std::size_t kEvents>
int Run(const char* path, bool drain_often) {
  auto ring = std::make_unique<Ring<kEvents>>();
  auto bus = std::make_unique<sluice::MpscBus<Payload, 64, Traits<kEvents>>>();
  if (!bus->GetObserver().Attach(ring.get(), 3)) return 1;
  const auto lidar = bus->template Subscribe<Lidar>([](const Lidar&) {});
  const auto imu = bus->template Subscribe<Imu>([](const Imu& sample) {
#if SLUICE_HAS_EXCEPTIONS
    if (sample.sample == 5) throw std::runtime_error("bad sample");
#else
    (void)sample;
#endif
  });
  const auto stop = bus->template Subscribe<EStop>([](const EStop&) {});
  if (!lidar.IsValid() || !imu.IsValid() || !stop.IsValid()) return 1;
  std::string json;
  sluice::trace::ChromeTraceWriter<std::string> chrome(json);
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  sluice::LaneEvent lane;
  lane.lane = 1;
  lane.pid = 4242;
  bus->GetObserver().OnLaneEvent(lane);  // kAttached
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
      if (drain_often) {
        (void)sluice::trace::DrainEvents(
            *ring, [&chrome](const sluice::trace::TraceEvent& event) { chrome.Write(event); });
      }
    }
  }
  while (bus->ProcessBatch(16) != 0) {
  }
  lane.kind = sluice::LaneEventKind::kExited;
  lane.killed = true;
  bus->GetObserver().OnLaneEvent(lane);
  lane.kind = sluice::LaneEventKind::kHandedBack;
  lane.lost = 1;
  bus->GetObserver().OnLaneEvent(lane);
  bus->Close();
  std::uint64_t lost = 0;
  (void)sluice::trace::DrainEvents(*ring, [&](const sluice::trace::TraceEvent& event) {
    if (event.kind == sluice::trace::TraceEventKind::kLost) lost += event.value;
    chrome.Write(event);
  });
  chrome.Finish();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json;
  if (!out) return 1;
  std::printf("admitted %llu\nrefused %llu\nlost %llu\nlane_events 3\n",
              static_cast<unsigned long long>(admitted), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(lost));
  return 0;
}
}  // namespace

// Usage: sluice_chrome_trace_sample [lossy] OUTPUT
int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "lossy") return Run<64>(argv[2], false);
  if (argc == 2) return Run<16384>(argv[1], true);
  return 2;
}
