// The sleeping consumer (ProcessBatchWait) beside the busy-polling one: what
// a parker costs a producer while the consumer is awake, what an idle
// consumer costs in CPU, and how long a sleeping consumer takes to wake.
#include <map>

#include "harness/isolated.hpp"
#include "harness/stats.hpp"
#include "scenarios/common.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/extras/futex_parker.hpp"

namespace sluice::bench {
namespace {

struct FutexTraits : DefaultBusTraits {
  using Parker = FutexParker;
};
template <ProducerModel kModel, typename Traits = SleepingConsumerTraits>
using SleepingBus = AsyncBus<std::variant<Sample<24>>, 131072, kModel, Traits>;

// ns per message to publish `count` messages into an empty bus, one thread,
// FULL_FEATURED, no consumer (a parker's "awake" cost: nobody sleeps).
template <typename Bus>
double PublishNanos(Bus& bus, std::uint64_t count) {
  Drain(bus);
  std::uint64_t refused = 0;
  const double nanos = TimeNanos([&] {
    for (std::uint64_t i = 0; i < count; ++i) {
      refused += bus.Publish(Sample<24>{i, 1.0f, 2.0f, 3.0f, 4.0f}, 1) ? 0 : 1;
    }
  });
  if (refused != 0) RecordFailure("sleep: publish-only run refused " + std::to_string(refused));
  return nanos / static_cast<double>(count);
}

template <ProducerModel kModel>
void PublishCostRows(const Options& options, Report& report, Table& table) {
  auto plain = std::make_unique<BenchBus<kModel>>();
  auto condvar = std::make_unique<SleepingBus<kModel>>();
  auto futex = std::make_unique<SleepingBus<kModel, FutexTraits>>();
  PinThisThread(options.ProducerCpu(0));
  std::vector<double> plain_ns, condvar_ns, futex_ns, condvar_ratio, futex_ratio;
  // Interleaved, round by round; the ratios are taken within each round.
  for (int round = 0; round < options.rounds; ++round) {
    plain_ns.push_back(PublishNanos(*plain, options.publish_messages));
    condvar_ns.push_back(PublishNanos(*condvar, options.publish_messages));
    futex_ns.push_back(PublishNanos(*futex, options.publish_messages));
    condvar_ratio.push_back(condvar_ns.back() / plain_ns.back());
    futex_ratio.push_back(futex_ns.back() / plain_ns.back());
  }
  const std::string model = ModelKey(kModel);
  table.rows.push_back(
      {std::string(ModelName(kModel)) + " publish, ns/msg (one thread)", MeanPlusMinus(plain_ns, 2),
       MeanPlusMinus(condvar_ns, 2) + " (" + Fixed(Median(condvar_ratio), 2) + "x)",
       MeanPlusMinus(futex_ns, 2) + " (" + Fixed(Median(futex_ratio), 2) + "x)"});
  SetSpread(plain_ns, &report.AddMetric("sleep." + model + ".publish_ns.polling",
                                        Summarize(plain_ns).mean, "ns", Better::kLower));
  SetSpread(condvar_ns, &report.AddMetric("sleep." + model + ".publish_ns.condvar",
                                          Summarize(condvar_ns).mean, "ns", Better::kLower));
  SetSpread(futex_ns, &report.AddMetric("sleep." + model + ".publish_ns.futex",
                                        Summarize(futex_ns).mean, "ns", Better::kLower));
  report
      .AddMetric("sleep." + model + ".publish_ratio.condvar", Median(condvar_ratio), "x",
                 Better::kLower)
      .gated = false;
  report
      .AddMetric("sleep." + model + ".publish_ratio.futex", Median(futex_ratio), "x",
                 Better::kLower)
      .gated = false;
}

// CPU % of one core that a consumer with nothing to do spends in `seconds`.
template <typename Consume>
double IdleCpuPercent(const Options& options, double seconds, Consume consume) {
  Isolated<double> cpu;
  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    const double cpu_start = ThreadCpuSeconds();
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) consume();
    cpu.value = ThreadCpuSeconds() - cpu_start;
  });
  consumer.join();
  return 100.0 * cpu.value / seconds;
}

// Publish-to-callback latency of a message that finds the consumer idle: one
// message every `gap`, long enough for a sleeping consumer to have parked.
template <typename Bus, typename Consume>
Percentiles WakeLatency(const Options& options, Bus& bus, std::size_t samples, Consume consume) {
  CrossCoreSamples latencies(samples, FastClock::NanosPerTick());
  Isolated<std::uint64_t> received;
  Isolated<std::atomic<bool>> stop;
  stop.value.store(false);
  if (!bus.template Subscribe<Sample<24>>([&](const Sample<24>& s) {
            latencies.Add(s.seq, FastClock::Ticks());
            ++received.value;
          })
           .IsValid()) {
    RecordFailure("sleep: could not subscribe");
    return {};
  }
  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    while (!stop.value.load(std::memory_order_relaxed)) consume(bus);
    while (consume(bus) != 0) {
    }
  });
  PinThisThread(options.ProducerCpu(0));
  for (std::size_t i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    while (!bus.Publish(Sample<24>{FastClock::Ticks(), 0, 0, 0, 0}, 1)) {
    }
  }
  stop.value.store(true);
  // A sleeping consumer needs a message (or its timeout) to see the stop.
  while (!bus.Publish(Sample<24>{FastClock::Ticks(), 0, 0, 0, 0}, 1)) {
  }
  consumer.join();
  return latencies.Summarize();
}

}  // namespace

void RunSleep(const Options& options, Report& report) {
  Table table;
  table.id = "sleep";
  table.title = "11. The sleeping consumer: ProcessBatchWait against busy polling (ProcessBatch)";
  table.columns = {"figure", "busy polling", "ConditionVariableParker", "FutexParker"};

  Progress("sleep: publish cost");
  PublishCostRows<ProducerModel::kSingle>(options, report, table);
  PublishCostRows<ProducerModel::kMulti>(options, report, table);

  Progress("sleep: idle consumer CPU");
  const double idle_seconds = 1.0;
  {
    auto polling = std::make_unique<BenchBus<ProducerModel::kMulti>>();
    auto condvar = std::make_unique<SleepingBus<ProducerModel::kMulti>>();
    auto futex = std::make_unique<SleepingBus<ProducerModel::kMulti, FutexTraits>>();
    const double busy =
        IdleCpuPercent(options, idle_seconds, [&] { (void)polling->ProcessBatch(); });
    const double asleep = IdleCpuPercent(options, idle_seconds, [&] {
      (void)condvar->ProcessBatchWait(std::chrono::milliseconds(100));
    });
    const double asleep_futex = IdleCpuPercent(options, idle_seconds, [&] {
      (void)futex->ProcessBatchWait(std::chrono::milliseconds(100));
    });
    table.rows.push_back({"idle consumer, CPU % of one core over " + Fixed(idle_seconds, 0) + " s",
                          Fixed(busy, 1), Fixed(asleep, 2), Fixed(asleep_futex, 2)});
    report.AddMetric("sleep.idle_cpu_percent.polling", busy, "%", Better::kNeither);
    report.AddMetric("sleep.idle_cpu_percent.condvar", asleep, "%", Better::kLower).gated = false;
    report.AddMetric("sleep.idle_cpu_percent.futex", asleep_futex, "%", Better::kLower).gated =
        false;
  }

  Progress("sleep: wake-up latency");
  const std::size_t samples = options.suite == "smoke" ? 20 : 500;
  auto polling = std::make_unique<BenchBus<ProducerModel::kMulti>>();
  auto condvar = std::make_unique<SleepingBus<ProducerModel::kMulti>>();
  auto futex = std::make_unique<SleepingBus<ProducerModel::kMulti, FutexTraits>>();
  const auto wait = [](auto& bus) { return bus.ProcessBatchWait(std::chrono::milliseconds(100)); };
  const Percentiles busy =
      WakeLatency(options, *polling, samples, [](auto& bus) { return bus.ProcessBatch(); });
  const Percentiles asleep = WakeLatency(options, *condvar, samples, wait);
  const Percentiles asleep_futex = WakeLatency(options, *futex, samples, wait);
  table.rows.push_back({"publish to callback, idle consumer, P50 ns", Fixed(busy.p50, 0),
                        Fixed(asleep.p50, 0), Fixed(asleep_futex.p50, 0)});
  table.rows.push_back({"publish to callback, idle consumer, P99 ns", Fixed(busy.p99, 0),
                        Fixed(asleep.p99, 0), Fixed(asleep_futex.p99, 0)});
  report.AddMetric("sleep.wake_p50_ns.polling", busy.p50, "ns", Better::kNeither);
  report.AddMetric("sleep.wake_p99_ns.polling", busy.p99, "ns", Better::kNeither);
  report.AddMetric("sleep.wake_p50_ns.condvar", asleep.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p99_ns.condvar", asleep.p99, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p50_ns.futex", asleep_futex.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p99_ns.futex", asleep_futex.p99, "ns", Better::kLower).gated = false;
  if (busy.samples == 0 || asleep.samples == 0 || asleep_futex.samples == 0) {
    RecordFailure("sleep: no wake-up samples");
  }

  table.notes = {
      "Publish cost: FULL_FEATURED Publish into an empty bus on one thread, no consumer "
      "running, " +
          WithThousands(options.publish_messages) + " messages, " + std::to_string(options.rounds) +
          " interleaved rounds; in brackets the median of the per-round ratios to busy polling. "
          "With ConditionVariableParker a publish adds a fence and a load; with FutexParker "
          "only the load (the consumer pays a membarrier call on its way into sleep instead).",
      "Idle CPU: the consumer thread's CPU time while nothing is published; a sleeping "
      "consumer waits with a 100 ms timeout, so it wakes ten times a second.",
      "Wake-up latency: " + WithThousands(samples) +
          " messages, one every 2 ms, so a sleeping consumer has parked before each; from the "
          "producer's clock reading before Publish to the callback. The busy-polling consumer "
          "was spinning.",
      ClockStepNote(),
      "Not measured here yet: throughput at fixed rates with a sleeping consumer."};
  report.tables.push_back(table);
}

}  // namespace sluice::bench
