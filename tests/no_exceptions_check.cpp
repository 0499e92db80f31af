// Built with -fno-exceptions -fno-rtti: the core headers must compile and
// behave there. A plain program (GoogleTest is not built that way).
#include <cstdio>
#include <variant>

#include "sluice/sluice.hpp"

namespace {

struct Reading {
  int value;
};
struct Command {
  int code;
};
using Payload = std::variant<Reading, Command>;

int failures = 0;
int checks = 0;

void Check(bool condition, const char* what) {
  ++checks;
  if (!condition) {
    ++failures;
    std::printf("FAILED: %s\n", what);
  }
}

template <typename Bus>
void Exercise() {
  Bus bus;
  int sum = 0;
  const auto handle = bus.template Subscribe<Reading>([&](const Reading& r) { sum += r.value; });
  Check(handle.IsValid(), "subscribe");
  for (int i = 1; i <= 10; ++i) Check(bus.Publish(Reading{i}).IsAdmitted(), "publish");
  Check(bus.PublishWithPriority(Command{1}, 0, sluice::MessagePriority::HIGH).IsAdmitted(),
        "priority");
  Check(bus.ProcessBatch() == 11, "process batch");
  Check(sum == 55, "callback sum");
  Check(bus.Publish(Command{2}).IsAdmitted(), "publish command");
  int commands = 0;
  bus.ProcessBatchWith([&](const auto& m) {
    if constexpr (std::is_same_v<std::decay_t<decltype(m)>, Command>) ++commands;
  });
  Check(commands == 1, "visitor");
  Check(bus.GetStatistics().messages_processed == 12, "statistics");
  Check(bus.Unsubscribe(handle).Removed(), "unsubscribe");
  Check(!bus.Unsubscribe(handle).Removed(), "stale unsubscribe");
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  int admitted = 0;
  while (bus.Publish(Reading{0})) ++admitted;
  Check(admitted == static_cast<int>(Bus::Capacity()), "bare metal fills the ring");
  Check(bus.GetBackpressureLevel() == sluice::BackpressureLevel::FULL, "backpressure");
}

}  // namespace

int main() {
  Exercise<sluice::MpscBus<Payload, 64>>();
  Exercise<sluice::SpscBus<Payload, 64>>();
  std::printf("no-exceptions check: %d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
