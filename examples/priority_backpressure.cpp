// Priority admission under overload: a LOW-priority log flood and a MEDIUM
// telemetry stream swamp a slow consumer, and an emergency stop published at
// HIGH still gets through. LOW is refused once the queue is 60 % full, MEDIUM
// at 80 %; HIGH keeps the room above. Producers watch the backpressure level:
// it turns WARNING exactly where LOW starts being refused (and CRITICAL where
// MEDIUM is), so a producer that slows down at WARNING does so no later than
// its first refusal.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sluice/sluice.hpp>
#include <thread>
#include <variant>

struct LogLine {
  std::uint32_t number;
};
struct Telemetry {
  float value;
};
struct EmergencyStop {
  std::uint32_t source;
};
using Payload = std::variant<LogLine, Telemetry, EmergencyStop>;

int main() {
  using sluice::MessagePriority;
  sluice::MpscBus<Payload, 1024> bus;

  std::atomic<bool> stopped{false};
  const sluice::SubscriptionHandle slow = bus.Subscribe<LogLine>([](const LogLine&) {
    // A slow consumer: 20 us of work per log line.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  const sluice::SubscriptionHandle stop_handler =
      bus.Subscribe<EmergencyStop>([&](const EmergencyStop& stop, const sluice::MessageHeader& h) {
        std::printf("consumer: EMERGENCY STOP from source %u (msg %llu)\n", stop.source,
                    static_cast<unsigned long long>(h.msg_id));
        stopped.store(true);
      });
  if (!slow.IsValid() || !stop_handler.IsValid()) return 1;

  std::thread consumer([&] {
    while (!stopped.load()) bus.ProcessBatch(64);
  });
  std::atomic<bool> flooding{true};
  std::atomic<bool> log_refused{false};
  std::thread log_flood([&] {
    for (std::uint32_t n = 0; flooding.load(); ++n) {
      // Refusals are the point of the flood; the statistics count them.
      if (!bus.PublishWithPriority(LogLine{n}, 1, MessagePriority::LOW)) log_refused.store(true);
    }
  });
  std::thread telemetry([&] {
    while (flooding.load()) {
      (void)bus.PublishWithPriority(Telemetry{1.0f}, 2, MessagePriority::MEDIUM);  // as above
    }
  });

  // The safety monitor waits until the queue is under pressure (WARNING: LOW
  // is being refused) and the flood has been turned away (on a busy machine
  // the flood thread may start late), then stops.
  while (bus.GetBackpressureLevel() < sluice::BackpressureLevel::WARNING || !log_refused.load()) {
    std::this_thread::yield();
  }
  const sluice::BackpressureLevel level = bus.GetBackpressureLevel();
  const double fill = bus.QueueUtilizationPercent();
  const bool admitted =
      bus.PublishWithPriority(EmergencyStop{7}, 3, MessagePriority::HIGH).IsAdmitted();
  std::printf("monitor: queue %.0f %% full, backpressure %s; emergency stop admitted: %s\n", fill,
              sluice::ToString(level), admitted ? "yes" : "no");
  consumer.join();  // ends when the stop is dispatched
  flooding.store(false);
  log_flood.join();
  telemetry.join();

  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  std::printf("refused: LOW %llu, MEDIUM %llu, HIGH %llu\n",
              static_cast<unsigned long long>(stats.low_priority_dropped),
              static_cast<unsigned long long>(stats.medium_priority_dropped),
              static_cast<unsigned long long>(stats.high_priority_dropped));
  const bool ok = admitted && stopped.load() && stats.high_priority_dropped == 0 &&
                  stats.low_priority_dropped > 0;
  std::printf("%s: the emergency stop survived the flood\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
