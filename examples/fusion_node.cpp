// One thread, several buses: a fusion node takes sensor data (IMU and wheel
// odometry, from two driver threads) from one bus and operator commands
// from another, each bus with its own payload types, capacity and producer
// model, and sleeps on both at once with a WaitSet: a publish on either bus
// wakes it. Commands are listed first, so on every wake-up they are served
// before the sensor batch. Shutdown: each producer side closes its bus when
// done; the node dispatches until the set reports both buses drained.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sluice/extras/condition_variable_parker.hpp>
#include <sluice/sluice.hpp>
#include <sluice/wait_set.hpp>
#include <thread>
#include <variant>

struct ImuSample {
  std::uint32_t seq;
  float yaw_rate;  // rad/s
};
struct WheelOdometry {
  std::uint32_t seq;
  float speed;  // m/s
};
struct VelocityCommand {
  std::uint32_t seq;
  float speed;
};
struct StopCommand {};
using SensorPayload = std::variant<ImuSample, WheelOdometry>;
using CommandPayload = std::variant<VelocityCommand, StopCommand>;

// Every bus of a set says so in its traits, with the set's parker.
struct Traits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitInSet<sluice::ConditionVariableParker>;
};
using SensorBus = sluice::MpscBus<SensorPayload, 256, Traits>;   // two drivers
using CommandBus = sluice::SpscBus<CommandPayload, 64, Traits>;  // one operator

constexpr std::uint32_t kImuSamples = 500;
constexpr std::uint32_t kOdometrySamples = 200;
constexpr std::uint32_t kCommands = 50;

int main() {
  // The set first: it must outlive the buses that joined it.
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  SensorBus sensors(set);
  CommandBus commands(set);

  // The node's state, touched only on its thread (the callbacks).
  std::uint32_t imu = 0;
  std::uint32_t odometry = 0;
  std::uint32_t velocity_commands = 0;
  bool stopped = false;
  bool command_after_stop = false;
  bool in_order = true;
  float target_speed = 0;
  float distance = 0;
  auto imu_handle = sensors.Subscribe<ImuSample>([&](const ImuSample& sample) {
    in_order = in_order && sample.seq == imu;
    ++imu;
  });
  auto odometry_handle = sensors.Subscribe<WheelOdometry>([&](const WheelOdometry& sample) {
    in_order = in_order && sample.seq == odometry;
    ++odometry;
    distance += sample.speed * 0.01f;  // 10 ms per sample
  });
  auto velocity_handle = commands.Subscribe<VelocityCommand>([&](const VelocityCommand& command) {
    command_after_stop = command_after_stop || stopped;
    ++velocity_commands;
    target_speed = command.speed;
  });
  auto stop_handle = commands.Subscribe<StopCommand>([&](const StopCommand&) {
    stopped = true;
    target_speed = 0;
  });
  if (!imu_handle.IsValid() || !odometry_handle.IsValid() || !velocity_handle.IsValid() ||
      !stop_handle.IsValid()) {
    return 1;
  }

  // Producers: two sensor drivers on the MPSC bus (the last one to finish
  // closes it), one operator on the SPSC bus (it closes its own bus).
  std::atomic<int> drivers_left{2};
  const auto driver_done = [&] {
    if (drivers_left.fetch_sub(1) == 1) sensors.Close();
  };
  std::thread imu_driver([&] {
    for (std::uint32_t i = 0; i < kImuSamples; ++i) {
      while (!sensors.Publish(ImuSample{i, 0.1f})) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    driver_done();
  });
  std::thread wheel_driver([&] {
    for (std::uint32_t i = 0; i < kOdometrySamples; ++i) {
      while (!sensors.Publish(WheelOdometry{i, 0.5f})) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    driver_done();
  });
  std::thread operator_console([&] {
    for (std::uint32_t i = 0; i < kCommands; ++i) {
      while (!commands.PublishWithPriority(VelocityCommand{i, 0.5f}, 7,
                                           sluice::MessagePriority::HIGH)) {
        std::this_thread::yield();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    while (!commands.PublishWithPriority(StopCommand{}, 7, sluice::MessagePriority::HIGH)) {
      std::this_thread::yield();
    }
    commands.Close();
  });

  // The node (here, main): sleeps until either bus has a message, then
  // takes up to 32 from each, commands first. A wait that ends with nothing
  // (a timeout, or both buses drained) dispatches 0.
  std::uint32_t wake_ups = 0;
  while (!(sensors.IsDrained() && commands.IsDrained())) {
    if (set.ProcessBatchWait(std::chrono::milliseconds(100), 32, commands, sensors) != 0) {
      ++wake_ups;
    }
  }
  imu_driver.join();
  wheel_driver.join();
  operator_console.join();

  std::printf("imu %u, odometry %u, commands %u + stop %s; %u batches of work\n", imu, odometry,
              velocity_commands, stopped ? "yes" : "no", wake_ups);
  std::printf("distance %.2f m, target speed after stop %.1f\n", static_cast<double>(distance),
              static_cast<double>(target_speed));
  const bool ok = imu == kImuSamples && odometry == kOdometrySamples &&
                  velocity_commands == kCommands && stopped && !command_after_stop && in_order &&
                  target_speed == 0;
  std::printf("%s: one thread slept on both buses, every message arrived once and in order\n",
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
