// A minimal application of an installed or fetched Sluice.
#include <cstdio>
#include <sluice/sluice.hpp>
#include <variant>

struct Ping {
  int value;
};

int main() {
  sluice::SpscBus<std::variant<Ping>, 8> bus;
  int received = 0;
  (void)bus.Subscribe<Ping>([&](const Ping& ping) { received = ping.value; });
  if (!bus.Publish(Ping{7}) || bus.ProcessBatch() != 1 || received != 7) return 1;
  std::printf("sluice %s consumer: ok\n", sluice::kVersion);
  return 0;
}
