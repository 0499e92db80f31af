// The README's quick start: one bus, two message types, a producer thread and
// a consumer loop.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <sluice/sluice.hpp>
#include <thread>
#include <variant>

struct SensorData {
  float temperature;
};
struct MotorCmd {
  std::int32_t speed;
};
using Payload = std::variant<SensorData, MotorCmd>;

int main() {
  sluice::MpscBus<Payload, 1024> bus;

  float last_temperature = 0;
  bus.Subscribe<SensorData>([&](const SensorData& data, const sluice::MessageHeader& header) {
    last_temperature = data.temperature;
    std::printf("sensor %.1f from sender %u (msg %llu)\n", data.temperature, header.sender_id,
                static_cast<unsigned long long>(header.msg_id));
  });
  bus.Subscribe<MotorCmd>([](const MotorCmd& cmd) { std::printf("motor speed %d\n", cmd.speed); });

  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int i = 0; i < 3; ++i) bus.Publish(SensorData{20.0f + static_cast<float>(i)}, 1);
    bus.PublishWithPriority(MotorCmd{0}, 2, sluice::MessagePriority::HIGH);
    done = true;
  });

  // The consumer: only this thread calls ProcessBatch.
  std::uint32_t processed = 0;
  while (!done || bus.QueueDepth() > 0) processed += bus.ProcessBatch();
  producer.join();

  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  std::printf("published %llu, processed %llu, dropped %llu\n",
              static_cast<unsigned long long>(stats.messages_published),
              static_cast<unsigned long long>(stats.messages_processed),
              static_cast<unsigned long long>(stats.messages_dropped));
  return processed == 4 && last_temperature == 22.0f ? 0 : 1;
}
