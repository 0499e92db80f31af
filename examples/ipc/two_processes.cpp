// Two processes, one bus: the parent is the consumer (a controller), a
// forked child is a producer (a driver) that publishes odometry at LOW and
// an emergency stop at HIGH into a segment of shared memory. The consumer
// dispatches by type, HIGH first; each side sleeps on a futex in the
// segment while it has to wait for the other. Exits non-zero when what
// arrived is wrong.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <variant>

struct Odometry {
  double distance_m;
  std::uint32_t tick;
};
struct EmergencyStop {
  std::uint32_t source;
};
using Payload = std::variant<Odometry, EmergencyStop>;
using Bus = sluice::ipc::ShmBus<Payload, 256>;
using Producer = sluice::ipc::ShmProducer<Payload, 256>;

namespace {

constexpr std::uint32_t kTicks = 100;

// The driver process: 100 odometry readings, then a stop.
int Driver(const std::string& name) {
  Producer producer;
  const sluice::ipc::AttachError error = producer.Attach(name);
  if (error != sluice::ipc::AttachError::kNone) {
    std::printf("driver: attach refused: %s\n", sluice::ipc::ToString(error));
    return 1;
  }
  for (std::uint32_t tick = 1; tick <= kTicks; ++tick) {
    // LOW is refused at 60 % full: wait (asleep) for the controller to
    // catch up, up to a second.
    if (!producer.PublishBlocking(Odometry{tick * 0.01, tick}, /*sender_id=*/2,
                                  sluice::MessagePriority::LOW, std::chrono::seconds(1))) {
      return 1;
    }
  }
  if (!producer.PublishWithPriority(EmergencyStop{2}, 2, sluice::MessagePriority::HIGH)) return 1;
  return 0;
}

}  // namespace

int main() {
  const std::string name = "/sluice-example-" + std::to_string(::getpid());
  Bus bus;
  const sluice::ipc::AttachError error = bus.Create(name);
  if (error != sluice::ipc::AttachError::kNone) {
    std::printf("controller: create refused: %s\n", sluice::ipc::ToString(error));
    return 1;
  }
  std::uint32_t ticks = 0;
  double distance = 0;
  bool stopped = false;
  auto odometry = bus.Subscribe<Odometry>([&](const Odometry& o) {
    ++ticks;
    distance = o.distance_m;
  });
  auto stop =
      bus.Subscribe<EmergencyStop>([&](const EmergencyStop& s, const sluice::MessageHeader& h) {
        std::printf("EMERGENCY STOP from source %u (message %llu of lane %u)\n", s.source,
                    static_cast<unsigned long long>(h.msg_id), static_cast<unsigned>(h.lane));
        stopped = true;
      });
  if (!odometry.IsValid() || !stop.IsValid()) return 1;

  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) ::_exit(Driver(name));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!stopped && std::chrono::steady_clock::now() < deadline) {
    (void)bus.ProcessBatchWait(std::chrono::milliseconds(100));  // asleep while nothing comes
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto stats = bus.GetStatistics();
  std::printf("odometry %u of %u, distance %.2f m, stop %s; published LOW %llu, HIGH %llu\n", ticks,
              kTicks, distance, stopped ? "yes" : "no",
              static_cast<unsigned long long>(stats.published[0]),
              static_cast<unsigned long long>(stats.published[2]));
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && stopped && ticks == kTicks;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
