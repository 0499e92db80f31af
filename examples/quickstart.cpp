// The README's quick start: one bus, two message types, a producer thread and
// a consumer that sleeps while nothing is queued (ProcessBatchWait), and a
// clean shutdown (Close, then dispatch until IsDrained).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sluice/extras/condition_variable_parker.hpp>
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
  // SleepingConsumerTraits: the consumer may sleep in ProcessBatchWait.
  sluice::MpscBus<Payload, 1024, sluice::SleepingConsumerTraits> bus;

  float last_temperature = 0;
  const sluice::SubscriptionHandle sensor =
      bus.Subscribe<SensorData>([&](const SensorData& data, const sluice::MessageHeader& header) {
        last_temperature = data.temperature;
        std::printf("sensor %.1f from sender %u (msg %llu)\n", data.temperature, header.sender_id,
                    static_cast<unsigned long long>(header.msg_id));
      });
  const sluice::SubscriptionHandle motor = bus.Subscribe<MotorCmd>(
      [](const MotorCmd& cmd) { std::printf("motor speed %d\n", cmd.speed); });
  if (!sensor.IsValid() || !motor.IsValid()) return 1;  // the type's table is full

  std::uint32_t refused = 0;  // a refused message stays with the caller: count it
  std::thread producer([&] {
    for (int i = 0; i < 3; ++i) {
      if (!bus.Publish(SensorData{20.0f + static_cast<float>(i)}, 1)) ++refused;
    }
    if (!bus.PublishWithPriority(MotorCmd{0}, 2, sluice::MessagePriority::HIGH)) ++refused;
    bus.Close();  // no more publishes; what was admitted stays for the consumer
  });

  // The consumer: only this thread dispatches. It sleeps while the queue is
  // empty, wakes on the next publish (or on Close), and stops once the
  // closed bus is drained: nothing admitted is lost.
  std::uint32_t processed = 0;
  while (!bus.IsDrained()) processed += bus.ProcessBatchWait(std::chrono::seconds(1));
  producer.join();

  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  std::printf("published %llu, processed %llu, dropped %llu, refused %u\n",
              static_cast<unsigned long long>(stats.messages_published),
              static_cast<unsigned long long>(stats.messages_processed),
              static_cast<unsigned long long>(stats.messages_dropped), refused);
  return refused == 0 && processed == 4 && last_temperature == 22.0f ? 0 : 1;
}
