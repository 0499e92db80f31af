// Traits of your own: derive from DefaultBusTraits (here from
// PriorityOrderTraits, which is one) and override the knobs you need. This bus
// takes callbacks that capture up to 128 bytes, keeps no latency histograms,
// holds its ring inside the bus object (static storage: no heap at all),
// dispatches HIGH first and accepts only trivially copyable payloads.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sluice/sluice.hpp>
#include <variant>

struct WheelSpeeds {
  std::array<float, 4> rad_per_s;
};
struct EmergencyStop {
  std::uint32_t source;
};
using Payload = std::variant<WheelSpeeds, EmergencyStop>;

struct RobotTraits : sluice::PriorityOrderTraits {
  // Callables up to 128 bytes (default 48; a larger one does not compile and
  // the error names this knob).
  static constexpr std::size_t kCallbackStorageBytes = 128;
  // No per-priority latency histograms: no memory for them, no clock read.
  using Latency = sluice::NoLatencyHistograms;
  // The ring inside the bus object instead of one allocation at construction.
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
  // A payload alternative that owns memory (std::vector, std::string) is a
  // compile error.
  static constexpr bool kRequireTriviallyCopyablePayloads = true;
};

using RobotBus = sluice::MpscBus<Payload, 256, RobotTraits>;
// Static storage: the three rings (one per priority) are part of this object.
RobotBus bus;

// What the odometry callback captures by value: more than a default bus takes.
struct Odometry {
  std::array<double, 8> wheel_radius_and_offsets;
  double* distance;
};

int main() {
  double distance = 0;
  const Odometry odometry{{0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0}, &distance};
  auto integrate = [odometry](const WheelSpeeds& speeds) {
    for (std::size_t wheel = 0; wheel < 4; ++wheel) {
      *odometry.distance += speeds.rad_per_s[wheel] * odometry.wheel_radius_and_offsets[wheel] / 4;
    }
  };
  static_assert(sizeof(integrate) > sluice::DefaultBusTraits::kCallbackStorageBytes,
                "this callback would not fit a default bus");
  std::printf("odometry callback: %zu bytes (default limit %zu, this bus %zu)\n", sizeof(integrate),
              sluice::DefaultBusTraits::kCallbackStorageBytes, RobotTraits::kCallbackStorageBytes);

  int wheel_messages = 0;
  int wheel_messages_before_stop = -1;
  const sluice::SubscriptionHandle wheels =
      bus.Subscribe<WheelSpeeds>([integrate, &wheel_messages](const WheelSpeeds& speeds) {
        integrate(speeds);
        ++wheel_messages;
      });
  const sluice::SubscriptionHandle stop = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& s) {
    wheel_messages_before_stop = wheel_messages;
    std::printf("EMERGENCY STOP from source %u\n", s.source);
  });
  if (!wheels.IsValid() || !stop.IsValid()) return 1;

  // Ten wheel-speed samples at LOW, then the stop at HIGH.
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    const float speed = 1.0f + static_cast<float>(i);
    if (!bus.PublishWithPriority(WheelSpeeds{{speed, speed, speed, speed}}, 1,
                                 sluice::MessagePriority::LOW)) {
      ++refused;
    }
  }
  if (!bus.PublishWithPriority(EmergencyStop{7}, 2, sluice::MessagePriority::HIGH)) ++refused;
  while (bus.ProcessBatch() > 0) {
  }

  std::printf("wheel-speed messages before the stop: %d of %d\n", wheel_messages_before_stop,
              wheel_messages);
  std::printf("distance %.2f m\n", distance);
  // Histograms off: none kept, even in FULL_FEATURED.
  const std::uint64_t histogram_count =
      bus.GetLatencyHistograms().For(sluice::MessagePriority::HIGH).count;
  std::printf("latency histograms: %s, HIGH count %llu\n",
              RobotBus::kKeepsLatencyHistograms ? "kept" : "off",
              static_cast<unsigned long long>(histogram_count));
  std::printf("ring inside the bus object: %zu bytes (%zu per slot)\n", RobotBus::kRingBytes,
              RobotBus::kBytesPerSlot);

  const bool ok = refused == 0 && wheel_messages_before_stop == 0 && wheel_messages == 10 &&
                  histogram_count == 0 && distance > 5.49 && distance < 5.51;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
