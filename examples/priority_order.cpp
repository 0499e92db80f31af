// Priority-ordered delivery: a robot's logger has queued 10,000 LOW log lines
// when the safety monitor publishes an emergency stop at HIGH. On the default
// bus (admission order) the stop waits behind every log line; on a bus with
// PriorityOrderTraits it is the next message the consumer dispatches.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sluice/sluice.hpp>
#include <type_traits>
#include <variant>

struct LogLine {
  std::uint32_t number;
};
struct EmergencyStop {
  std::uint32_t source;
};
using Payload = std::variant<LogLine, EmergencyStop>;

constexpr std::uint32_t kLogLines = 10000;

// Queues the log lines and the stop, then dispatches everything; returns how
// many log lines the consumer handled before the stop (kLogLines + 1 if the
// stop never came).
template <typename Bus>
std::uint32_t LogLinesBeforeTheStop(Bus& bus) {
  for (std::uint32_t n = 0; n < kLogLines; ++n) {
    if (!bus.PublishWithPriority(LogLine{n}, 1, sluice::MessagePriority::LOW)) return 0;
  }
  if (!bus.PublishWithPriority(EmergencyStop{7}, 2, sluice::MessagePriority::HIGH)) return 0;

  std::uint32_t log_lines = 0;
  std::uint32_t before_stop = kLogLines + 1;
  // One consumer thread (here, main) dispatches; a visitor takes every type.
  while (bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, EmergencyStop>) {
      before_stop = log_lines;
    } else {
      ++log_lines;
    }
  }) > 0) {
  }
  return before_stop;
}

int main() {
  // 32,768 slots: the 10,000 LOW fit under LOW's 60 % threshold.
  auto fifo = std::make_unique<sluice::MpscBus<Payload, 32768>>();
  auto ordered = std::make_unique<sluice::MpscBus<Payload, 32768, sluice::PriorityOrderTraits>>();
  const std::uint32_t fifo_before = LogLinesBeforeTheStop(*fifo);
  const std::uint32_t ordered_before = LogLinesBeforeTheStop(*ordered);
  std::printf("admission order: the stop came after %u log lines\n", fifo_before);
  std::printf("priority order: the stop came after %u log lines\n", ordered_before);
  // Admission, fill and statistics are still over the whole bus.
  const sluice::BusStatisticsSnapshot stats = ordered->GetStatistics();
  std::printf("priority order: published %llu, processed %llu\n",
              static_cast<unsigned long long>(stats.messages_published),
              static_cast<unsigned long long>(stats.messages_processed));
  const bool ok =
      fifo_before == kLogLines && ordered_before == 0 && stats.messages_processed == kLogLines + 1;
  std::printf("%s: the emergency stop jumped the queue\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
