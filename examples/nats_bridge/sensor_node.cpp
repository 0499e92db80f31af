// The sensor node: publishes temperature readings at LOW, one a
// millisecond, and an emergency stop at HIGH when a reading is too hot.
// Its bridge forwards both to NATS.
//
//   sluice_example_nats_sensor [nats://127.0.0.1:4222] [readings]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sluice/nats/bridge.hpp>
#include <thread>

#include "plant_messages.hpp"

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "nats://127.0.0.1:4222";
  const long readings = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 2000;
  sluice::MpscBus<plant::Payload, 1024> bus;
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.connection_name = "plant-sensor-node";
  sluice::nats::Bridge<decltype(bus)> bridge(bus, options);
  if (!bridge.Forward<plant::SensorData>(plant::kSensorSubject, plant::kSensorType) ||
      !bridge.Forward<plant::EmergencyStop>(plant::kStopSubject, plant::kStopType)) {
    return 1;
  }
  if (const sluice::nats::StartResult started = bridge.Start(); started != NATS_OK) {
    std::fprintf(stderr, "cannot connect to %s: %s\n", url, started.error.c_str());
    return 1;
  }
  constexpr std::uint32_t kSender = 1;
  long refused = 0;
  for (long i = 0; i < readings; ++i) {
    // Rises to 80 C at the end: the last reading trips the stop.
    const float temperature =
        20.0f + 60.0f * static_cast<float>(i + 1) / static_cast<float>(readings);
    plant::SensorData reading{7, temperature, static_cast<std::uint64_t>(i)};
    if (!bus.PublishWithPriority(reading, kSender, sluice::MessagePriority::LOW)) ++refused;
    if (temperature >= 80.0f && !bus.PublishWithPriority(plant::EmergencyStop{7, 1}, kSender,
                                                         sluice::MessagePriority::HIGH)) {
      ++refused;
    }
    while (bus.ProcessBatch() > 0) {  // this thread is also the bus's consumer
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Close the bus, send what it holds, flush, drain the connection.
  const sluice::nats::ShutdownResult result =
      bridge.Shutdown(std::chrono::seconds(5), sluice::nats::ShutdownDrain::kDispatchHere);
  const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
  std::printf("sensor node: sent LOW %llu, HIGH %llu; refused locally %ld; drained %s\n",
              static_cast<unsigned long long>(s.frames_sent[0]),
              static_cast<unsigned long long>(s.frames_sent[2]), refused,
              result.bus_drained && result.closed ? "yes" : "no");
  return result.bus_drained ? 0 : 1;
}
