// Several producer threads, one consumer thread, and no message lost to a
// full queue: a producer that finds the queue full waits for room in
// PublishBlocking (asleep, woken by the consumer), the consumer sleeps in
// ProcessBatchWait while nothing is queued, and Close ends the run cleanly.
// Each producer numbers its messages; the consumer checks that every message
// arrives exactly once and in each producer's order.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sluice/extras/condition_variable_parker.hpp>
#include <sluice/sluice.hpp>
#include <thread>
#include <variant>
#include <vector>

struct Reading {
  std::uint32_t producer;
  std::uint64_t sequence;
};
using Payload = std::variant<Reading>;

int main() {
  constexpr std::uint32_t kProducers = 4;
  constexpr std::uint64_t kPerProducer = 100'000;
  // A small queue, so that producers outrun the consumer and wait.
  sluice::MpscBus<Payload, 256, sluice::SleepingConsumerTraits> bus;

  std::vector<std::uint64_t> next(kProducers, 0);
  std::uint64_t out_of_order = 0;
  const sluice::SubscriptionHandle handle = bus.Subscribe<Reading>([&](const Reading& r) {
    if (r.sequence != next[r.producer]) ++out_of_order;
    next[r.producer] = r.sequence + 1;
  });
  if (!handle.IsValid()) return 1;

  std::vector<sluice::PublishOutcome> failures(kProducers, sluice::PublishOutcome::kAdmitted);
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&bus, &failures, p] {
      for (std::uint64_t i = 0; i < kPerProducer; ++i) {
        // MEDIUM is refused at 80 % fill: wait (up to a second) for room.
        const sluice::PublishResult result = bus.PublishBlocking(
            Reading{p, i}, p, sluice::MessagePriority::MEDIUM, std::chrono::seconds(1));
        if (!result) {
          failures[p] = result.Outcome();  // timed out, or closed
          return;
        }
      }
    });
  }

  std::thread consumer([&] {
    // Sleeps while the queue is empty; after Close, dispatches what is left.
    while (!bus.IsDrained()) (void)bus.ProcessBatchWait(std::chrono::milliseconds(100));
  });
  for (std::thread& producer : producers) producer.join();
  bus.Close();
  consumer.join();

  bool ok = out_of_order == 0;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    std::printf("producer %u: %llu messages received in order (%s)\n", p,
                static_cast<unsigned long long>(next[p]), sluice::ToString(failures[p]));
    ok = ok && next[p] == kPerProducer && failures[p] == sluice::PublishOutcome::kAdmitted;
  }
  const sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  std::printf("published %llu, processed %llu, dropped %llu\n",
              static_cast<unsigned long long>(stats.messages_published),
              static_cast<unsigned long long>(stats.messages_processed),
              static_cast<unsigned long long>(stats.messages_dropped));
  ok = ok && stats.messages_published == kProducers * kPerProducer &&
       stats.messages_processed == stats.messages_published && stats.messages_dropped == 0;
  std::printf("%s: every message delivered once, in per-producer order\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
