// The controller: receives the sensor node's readings and its emergency
// stop through NATS into a small bus, handles them on one consumer thread,
// and exits when the stop arrives. Prints the bus and bridge metrics.
//
//   sluice_example_nats_controller [nats://127.0.0.1:4222] [--metrics]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sluice/extras/condition_variable_parker.hpp>
#include <sluice/nats/bridge.hpp>
#include <string>

#include "plant_messages.hpp"

// The consumer sleeps while nothing is queued, and a stop queued behind
// readings is dispatched first.
struct ControllerTraits : sluice::SleepingConsumerTraits {
  using Delivery = sluice::PriorityDelivery<>;
};

int main(int argc, char** argv) {
  const char* url = argc > 1 && argv[1][0] != '-' ? argv[1] : "nats://127.0.0.1:4222";
  const bool metrics = argc > 1 && std::strcmp(argv[argc - 1], "--metrics") == 0;
  sluice::MpscBus<plant::Payload, 256, ControllerTraits> bus;
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.connection_name = "plant-controller";
  sluice::nats::Bridge<decltype(bus)> bridge(bus, options);
  if (!bridge.Receive<plant::SensorData>(plant::kSensorSubject, plant::kSensorType) ||
      !bridge.Receive<plant::EmergencyStop>(plant::kStopSubject, plant::kStopType)) {
    return 1;
  }
  unsigned long long readings = 0;
  float last = 0;
  bool stopped = false;
  auto sensor = bus.Subscribe<plant::SensorData>([&](const plant::SensorData& data) {
    ++readings;
    last = data.temperature;
  });
  auto stop = bus.Subscribe<plant::EmergencyStop>(
      [&](const plant::EmergencyStop& e, const sluice::MessageHeader& header) {
        std::printf(
            "EMERGENCY STOP from sensor %u (reason %u, priority %s) after %llu readings, "
            "last %.1f C\n",
            e.source, e.reason, sluice::ToString(header.priority), readings, last);
        stopped = true;
      });
  if (!sensor.IsValid() || !stop.IsValid()) return 1;
  if (const sluice::nats::StartResult started = bridge.Start(); started != NATS_OK) {
    std::fprintf(stderr, "cannot connect to %s: %s\n", url, started.error.c_str());
    return 1;
  }
  std::printf("controller: waiting on %s\n", url);
  std::fflush(stdout);
  while (!stopped) (void)bus.ProcessBatchWait(std::chrono::milliseconds(100));
  (void)bridge.Shutdown(std::chrono::seconds(5), sluice::nats::ShutdownDrain::kDispatchHere);
  const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
  std::printf("controller: LOW delivered %llu, dropped %llu; HIGH delivered %llu, dropped %llu\n",
              static_cast<unsigned long long>(s.delivered[0]),
              static_cast<unsigned long long>(s.Dropped(sluice::MessagePriority::LOW)),
              static_cast<unsigned long long>(s.delivered[2]),
              static_cast<unsigned long long>(s.Dropped(sluice::MessagePriority::HIGH)));
  if (metrics) {
    std::string text;
    sluice::nats::WritePrometheus(text, "controller", bus, bridge);
    std::fputs(text.c_str(), stdout);
  }
  return 0;
}
