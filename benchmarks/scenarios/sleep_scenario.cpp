// The sleeping consumer (ProcessBatchWait) beside the busy-polling one: what
// a parker costs a producer while the consumer is awake, what an idle
// consumer costs in CPU, how long a sleeping consumer takes to wake, and
// what the consumer dispatches and spends in CPU at fixed offered rates.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/isolated.hpp"
#include "harness/stats.hpp"
#include "report/spread.hpp"
#include "scenarios/common.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/extras/futex_parker.hpp"

namespace sluice::bench {
namespace {

struct FutexTraits : DefaultBusTraits {
  using Waiting = WaitWith<FutexParker>;
};
struct MembarrierTraits : DefaultBusTraits {
  using Waiting = WaitWith<MembarrierFutexParker>;
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
  auto membarrier = std::make_unique<SleepingBus<kModel, MembarrierTraits>>();
  PinThisThread(options.ProducerCpu(0));
  std::vector<double> plain_ns, condvar_ns, futex_ns, membarrier_ns, condvar_ratio, futex_ratio,
      membarrier_ratio;
  // Interleaved, round by round; the ratios are taken within each round.
  for (int round = 0; round < options.rounds; ++round) {
    plain_ns.push_back(PublishNanos(*plain, options.publish_messages));
    condvar_ns.push_back(PublishNanos(*condvar, options.publish_messages));
    futex_ns.push_back(PublishNanos(*futex, options.publish_messages));
    condvar_ratio.push_back(condvar_ns.back() / plain_ns.back());
    futex_ratio.push_back(futex_ns.back() / plain_ns.back());
    membarrier_ns.push_back(PublishNanos(*membarrier, options.publish_messages));
    membarrier_ratio.push_back(membarrier_ns.back() / plain_ns.back());
  }
  const std::string model = ModelKey(kModel);
  table.rows.push_back(
      {std::string(ModelName(kModel)) + " publish, ns/msg (one thread)", MeanPlusMinus(plain_ns, 2),
       MeanPlusMinus(condvar_ns, 2) + " (" + Fixed(Median(condvar_ratio), 2) + "x)",
       MeanPlusMinus(futex_ns, 2) + " (" + Fixed(Median(futex_ratio), 2) + "x)",
       MeanPlusMinus(membarrier_ns, 2) + " (" + Fixed(Median(membarrier_ratio), 2) + "x)"});
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
  SetSpread(membarrier_ns, &report.AddMetric("sleep." + model + ".publish_ns.membarrier",
                                             Summarize(membarrier_ns).mean, "ns", Better::kLower));
  report
      .AddMetric("sleep." + model + ".publish_ratio.membarrier", Median(membarrier_ratio), "x",
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
Percentiles WakeLatency(const Options& options, Bus& bus, std::size_t samples, Consume consume,
                        std::string* not_finished) {
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
  // Each sample waits 2 ms first; a refused publish is retried.
  RowDeadline deadline("sleep: wake-up latency",
                       CountedRowSeconds(options, samples) + 0.002 * static_cast<double>(samples));
  const auto publish = [&] {
    return RetryUntil(deadline, "the producer retried a refused publish", [&] {
      return bus.Publish(Sample<24>{FastClock::Ticks(), 0, 0, 0, 0}, 1);
    });
  };
  for (std::size_t i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!publish()) break;
  }
  stop.value.store(true);
  // A sleeping consumer needs a message (or its 100 ms timeout) to see the
  // stop: either way it ends.
  (void)publish();
  consumer.join();
  if (!deadline.Finished()) {
    *not_finished = deadline.Why();
    return {};
  }
  return latencies.Summarize();
}

// One cell of the paced rows.
struct PacedResult {
  std::uint64_t attempted = 0;
  std::uint64_t refused = 0;
  std::uint64_t dispatched = 0;
  double offered_per_second = 0;     // attempts over the producer's run time
  double dispatched_per_second = 0;  // from the start signal to the last dispatch
  double consumer_cpu_percent = 0;   // of one core, from the start signal to its exit
  std::string not_finished;          // why, when the run did not finish
};

// Writes every slot of a fresh ring once, so that the timed run takes no
// page faults on the producer's side.
template <typename Bus>
void TouchRing(Bus& bus) {
  for (std::uint64_t i = 0; i < bus.Capacity(); ++i) {
    // Drained every 1,024: HIGH (refused only at 99 % full) is never refused.
    (void)bus.PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, MessagePriority::HIGH);
    if (i % 1024 == 1023) Drain(bus);
  }
  Drain(bus);
}

// One producer offers `per_second` messages a second (0: back to back) for
// options.paced_seconds on a fresh bus of type Bus, while a consumer thread
// calls `consume(bus)` and one callback receives every message. The producer
// paces by spinning on the clock, the same in every column; when its time is
// up it closes the bus, which wakes a sleeping consumer, and the consumer
// drains what is left and exits once the bus is drained.
template <typename Bus, typename Consume>
PacedResult PacedRun(const Options& options, double per_second, Consume consume) {
  auto bus = std::make_unique<Bus>();
  TouchRing(*bus);
  Isolated<std::uint64_t> sink;  // written by the callback for every message
  if (!bus->template Subscribe<Sample<24>>([&sink](const Sample<24>& s) { sink.value += s.seq; })
           .IsValid()) {
    RecordFailure("sleep: could not subscribe");
    return {};
  }
  struct ProducerSide {
    std::uint64_t attempted = 0;
    std::uint64_t refused = 0;
  };
  struct ConsumerSide {
    std::uint64_t dispatched = 0;
    std::uint64_t last_dispatch_ticks = 0;
    double cpu_seconds = 0;
    double seconds = 0;
  };
  // What each thread writes while it runs, in blocks of their own
  // (harness/isolated.hpp); each stores its side once, at its end.
  Isolated<ProducerSide> producer_side;
  Isolated<ConsumerSide> consumer_side;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  // Plain: written before the release store of `go`, read by the threads
  // only after their acquire load of it has seen true.
  std::uint64_t start_ticks = 0;
  const double ticks_per_second = 1e9 / FastClock::NanosPerTick();
  const auto duration_ticks = static_cast<std::uint64_t>(options.paced_seconds * ticks_per_second);
  const double interval_ticks = per_second > 0 ? ticks_per_second / per_second : 0;
  RowDeadline deadline("sleep: paced", TimedRowSeconds(options, options.paced_seconds));

  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    Bus* const source = bus.get();
    const int idle_pauses = options.idle_pauses;
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) {
    }
    const std::uint64_t begin = start_ticks;
    const double cpu_at_go = ThreadCpuSeconds();
    ConsumerSide mine;
    for (std::uint64_t empty = 1;; ++empty) {
      const std::uint32_t n = consume(*source);
      if (n != 0) {
        mine.dispatched += n;
        mine.last_dispatch_ticks = FastClock::Ticks();
        continue;
      }
      for (int i = 0; i < idle_pauses; ++i) detail::CpuRelax();
      // Asked only after an empty batch: the close flag is a line the
      // producer writes once, at its end. Closed and drained: nothing comes.
      if (source->IsDrained()) break;
      if (deadline.ExpiredAt(empty)) {
        (void)deadline.TimedOut("the consumer waited for the bus to be closed and drained");
        break;
      }
    }
    mine.cpu_seconds = ThreadCpuSeconds() - cpu_at_go;
    mine.seconds = FastClock::TicksToNanos(FastClock::Ticks() - begin) * 1e-9;
    consumer_side.value = mine;
  });
  std::thread producer([&] {
    PinThisThread(options.ProducerCpu(0));
    Bus* const target = bus.get();
    const std::uint64_t length = duration_ticks;
    const double interval = interval_ticks;
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) {
    }
    const std::uint64_t begin = start_ticks;
    ProducerSide mine;
    for (std::uint64_t i = 0;; ++i) {
      // Message i is due at begin + i * interval, not an interval after the
      // one before: a late message goes at once and the schedule catches up
      // instead of slipping. The run ends at its length even when late.
      const std::uint64_t due =
          begin + static_cast<std::uint64_t>(static_cast<double>(i) * interval);
      if (due - begin >= length) break;
      if (deadline.ExpiredAt(i)) {
        (void)deadline.TimedOut("the producer was still publishing");
        break;
      }
      std::uint64_t now = FastClock::Ticks();
      // Bounded: `due` is at most one interval (10 us at the slowest) ahead.
      while (now < due) now = FastClock::Ticks();
      if (now - begin >= length) break;
      ++mine.attempted;
      mine.refused += target->Publish(Sample<24>{i, 0, 0, 0, 0}, 1) ? 0 : 1;
    }
    producer_side.value = mine;
    target->Close();  // any thread on an MPSC bus; wakes a sleeping consumer
  });
  while (ready.load() < 2) std::this_thread::yield();
  start_ticks = FastClock::Ticks();
  go.store(true, std::memory_order_release);
  producer.join();
  consumer.join();
  KeepAlive(sink.value);

  // join() orders each thread's stores before these reads.
  const ProducerSide& produced = producer_side.value;
  const ConsumerSide& consumed = consumer_side.value;
  PacedResult result;
  if (!deadline.Finished()) result.not_finished = deadline.Why();
  result.attempted = produced.attempted;
  result.refused = produced.refused;
  result.dispatched = consumed.dispatched;
  result.offered_per_second = static_cast<double>(produced.attempted) / options.paced_seconds;
  const double dispatch_seconds =
      consumed.last_dispatch_ticks > start_ticks
          ? FastClock::TicksToNanos(consumed.last_dispatch_ticks - start_ticks) * 1e-9
          : 0;
  result.dispatched_per_second =
      dispatch_seconds > 0 ? static_cast<double>(consumed.dispatched) / dispatch_seconds : 0;
  result.consumer_cpu_percent =
      consumed.seconds > 0 ? 100.0 * consumed.cpu_seconds / consumed.seconds : 0;
  return result;
}

// The producer must itself have offered what the row claims: below this
// share of the target, the row measured a slower producer, not the rate.
constexpr double kLeastOfferedShare = 0.95;

// Two rows per offered rate: dispatched per second (with the refused share,
// if any) and the consumer's CPU, for busy polling and the two parkers.
void PacedRows(const Options& options, Report& report, Table& table) {
  const std::pair<const char*, double> rates[] = {{"100K/s", 1e5}, {"1M/s", 1e6}, {"unlimited", 0}};
  const char* const consumers[] = {"polling", "condvar", "futex", "membarrier"};
  const auto poll = [](auto& bus) { return bus.ProcessBatch(); };
  const auto wait = [](auto& bus) { return bus.ProcessBatchWait(std::chrono::milliseconds(100)); };
  for (const auto& [name, rate] : rates) {
    Progress(std::string("sleep: paced ") + name);
    const PacedResult cells[] = {
        PacedRun<BenchBus<ProducerModel::kMulti>>(options, rate, poll),
        PacedRun<SleepingBus<ProducerModel::kMulti>>(options, rate, wait),
        PacedRun<SleepingBus<ProducerModel::kMulti, FutexTraits>>(options, rate, wait),
        PacedRun<SleepingBus<ProducerModel::kMulti, MembarrierTraits>>(options, rate, wait)};
    const std::string label = rate > 0 ? std::string(name) + " offered" : std::string(name);
    std::vector<std::string> throughput_row = {label + ", dispatched per second"};
    std::vector<std::string> cpu_row = {label + ", consumer CPU % of one core"};
    for (std::size_t c = 0; c < std::size(cells); ++c) {
      const PacedResult& r = cells[c];
      const std::string where = std::string(name) + ", " + table.columns[c + 1];
      if (!r.not_finished.empty()) {
        throughput_row.push_back("not finished");
        cpu_row.push_back("-");
        ReportNotFinished("sleep", "paced " + where, true, r.not_finished, &table);
        continue;
      }
      std::string cell = WithThousands(static_cast<std::uint64_t>(r.dispatched_per_second));
      if (r.refused != 0) {
        cell +=
            " (" +
            Fixed(100.0 * static_cast<double>(r.refused) / static_cast<double>(r.attempted), 1) +
            " % refused)";
      }
      throughput_row.push_back(cell);
      cpu_row.push_back(Fixed(r.consumer_cpu_percent, 1));

      const std::string prefix = std::string("sleep.paced.") + name + ".";
      const std::string consumer = consumers[c];
      const bool sleeps = c != 0;
      report
          .AddMetric(prefix + "dispatched_per_second." + consumer, r.dispatched_per_second, "msg/s",
                     rate > 0 ? Better::kNeither : Better::kHigher)
          .gated = false;  // measured once
      report.AddMetric(prefix + "offered_per_second." + consumer, r.offered_per_second, "msg/s",
                       Better::kNeither);
      report.AddMetric(prefix + "refused." + consumer, static_cast<double>(r.refused), "messages",
                       Better::kNeither);
      report
          .AddMetric(prefix + "consumer_cpu_percent." + consumer, r.consumer_cpu_percent, "%",
                     sleeps ? Better::kLower : Better::kNeither)
          .gated = false;  // measured once

      if (r.dispatched == 0) RecordFailure("sleep: " + where + ": nothing was dispatched");
      if (r.dispatched != r.attempted - r.refused) {
        RecordFailure("sleep: " + where + ": " + WithThousands(r.dispatched) + " dispatched of " +
                      WithThousands(r.attempted - r.refused) + " admitted");
      }
      if (rate > 0 && r.offered_per_second < kLeastOfferedShare * rate) {
        table.notes.push_back(where + ": the producer offered only " +
                              WithThousands(static_cast<std::uint64_t>(r.offered_per_second)) +
                              " messages per second.");
        RecordFailure("sleep: " + where + ": the producer offered " +
                      WithThousands(static_cast<std::uint64_t>(r.offered_per_second)) +
                      "/s, under " + Fixed(100 * kLeastOfferedShare, 0) + " % of its target");
      }
    }
    table.rows.push_back(throughput_row);
    table.rows.push_back(cpu_row);
  }
}

}  // namespace

void RunSleep(const Options& options, Report& report) {
  Table table;
  table.id = "sleep";
  table.title = "11. The sleeping consumer: ProcessBatchWait against busy polling (ProcessBatch)";
  table.columns = {"figure", "busy polling", "ConditionVariableParker", "FutexParker",
                   "MembarrierFutexParker"};

  Progress("sleep: publish cost");
  PublishCostRows<ProducerModel::kSingle>(options, report, table);
  PublishCostRows<ProducerModel::kMulti>(options, report, table);

  Progress("sleep: idle consumer CPU");
  const double idle_seconds = 1.0;
  {
    auto polling = std::make_unique<BenchBus<ProducerModel::kMulti>>();
    auto condvar = std::make_unique<SleepingBus<ProducerModel::kMulti>>();
    auto futex = std::make_unique<SleepingBus<ProducerModel::kMulti, FutexTraits>>();
    auto membarrier = std::make_unique<SleepingBus<ProducerModel::kMulti, MembarrierTraits>>();
    const double busy =
        IdleCpuPercent(options, idle_seconds, [&] { (void)polling->ProcessBatch(); });
    const double asleep = IdleCpuPercent(options, idle_seconds, [&] {
      (void)condvar->ProcessBatchWait(std::chrono::milliseconds(100));
    });
    const double asleep_futex = IdleCpuPercent(options, idle_seconds, [&] {
      (void)futex->ProcessBatchWait(std::chrono::milliseconds(100));
    });
    const double asleep_membarrier = IdleCpuPercent(options, idle_seconds, [&] {
      (void)membarrier->ProcessBatchWait(std::chrono::milliseconds(100));
    });
    table.rows.push_back({"idle consumer, CPU % of one core over " + Fixed(idle_seconds, 0) + " s",
                          Fixed(busy, 1), Fixed(asleep, 2), Fixed(asleep_futex, 2),
                          Fixed(asleep_membarrier, 2)});
    report.AddMetric("sleep.idle_cpu_percent.polling", busy, "%", Better::kNeither);
    report.AddMetric("sleep.idle_cpu_percent.condvar", asleep, "%", Better::kLower).gated = false;
    report.AddMetric("sleep.idle_cpu_percent.futex", asleep_futex, "%", Better::kLower).gated =
        false;
    report.AddMetric("sleep.idle_cpu_percent.membarrier", asleep_membarrier, "%", Better::kLower)
        .gated = false;
  }

  Progress("sleep: wake-up latency");
  const std::size_t samples = options.suite == "smoke" ? 20 : 500;
  auto polling = std::make_unique<BenchBus<ProducerModel::kMulti>>();
  auto condvar = std::make_unique<SleepingBus<ProducerModel::kMulti>>();
  auto futex = std::make_unique<SleepingBus<ProducerModel::kMulti, FutexTraits>>();
  auto membarrier = std::make_unique<SleepingBus<ProducerModel::kMulti, MembarrierTraits>>();
  const auto wait = [](auto& bus) { return bus.ProcessBatchWait(std::chrono::milliseconds(100)); };
  std::string wake_why[4];
  const Percentiles busy = WakeLatency(
      options, *polling, samples, [](auto& bus) { return bus.ProcessBatch(); }, &wake_why[0]);
  const Percentiles asleep = WakeLatency(options, *condvar, samples, wait, &wake_why[1]);
  const Percentiles asleep_futex = WakeLatency(options, *futex, samples, wait, &wake_why[2]);
  const Percentiles asleep_membarrier =
      WakeLatency(options, *membarrier, samples, wait, &wake_why[3]);
  for (std::size_t c = 0; c < std::size(wake_why); ++c) {
    if (!wake_why[c].empty()) {
      ReportNotFinished("sleep", "wake-up latency, " + table.columns[c + 1], true, wake_why[c],
                        &table);
    }
  }
  table.rows.push_back({"publish to callback, idle consumer, P50 ns", Fixed(busy.p50, 0),
                        Fixed(asleep.p50, 0), Fixed(asleep_futex.p50, 0),
                        Fixed(asleep_membarrier.p50, 0)});
  table.rows.push_back({"publish to callback, idle consumer, P99 ns", Fixed(busy.p99, 0),
                        Fixed(asleep.p99, 0), Fixed(asleep_futex.p99, 0),
                        Fixed(asleep_membarrier.p99, 0)});
  report.AddMetric("sleep.wake_p50_ns.polling", busy.p50, "ns", Better::kNeither);
  report.AddMetric("sleep.wake_p99_ns.polling", busy.p99, "ns", Better::kNeither);
  report.AddMetric("sleep.wake_p50_ns.condvar", asleep.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p99_ns.condvar", asleep.p99, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p50_ns.futex", asleep_futex.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p99_ns.futex", asleep_futex.p99, "ns", Better::kLower).gated = false;
  report.AddMetric("sleep.wake_p50_ns.membarrier", asleep_membarrier.p50, "ns", Better::kLower)
      .gated = false;
  report.AddMetric("sleep.wake_p99_ns.membarrier", asleep_membarrier.p99, "ns", Better::kLower)
      .gated = false;
  if (busy.samples == 0 || asleep.samples == 0 || asleep_futex.samples == 0 ||
      asleep_membarrier.samples == 0) {
    RecordFailure("sleep: no wake-up samples");
  }

  PacedRows(options, report, table);

  // Notes the paced rows added (a producer that fell short) go last.
  std::vector<std::string> shortfalls = std::move(table.notes);
  table.notes = {
      "Publish cost: FULL_FEATURED Publish into an empty bus on one thread, no consumer "
      "running, " +
          WithThousands(options.publish_messages) + " messages, " + std::to_string(options.rounds) +
          " interleaved rounds; in brackets the median of the per-round ratios to busy polling. "
          "With ConditionVariableParker and FutexParker a publish adds a fence and a load; with "
          "MembarrierFutexParker only the load (the consumer pays a membarrier call on its way "
          "into sleep instead).",
      "Idle CPU: the consumer thread's CPU time while nothing is published; a sleeping "
      "consumer waits with a 100 ms timeout, so it wakes ten times a second.",
      "Wake-up latency: " + WithThousands(samples) +
          " messages, one every 2 ms, so a sleeping consumer has parked before each; from the "
          "producer's clock reading before Publish to the callback. The busy-polling consumer "
          "was spinning.",
      ClockStepNote(),
      "Paced rows: one producer thread offers messages on an MPSC bus (FULL_FEATURED Publish, "
      "MEDIUM, 24-byte Sample, one subscriber callback) for " +
          Fixed(options.paced_seconds, 2) +
          " s per cell, each cell on a fresh bus whose ring was written through once "
          "beforehand. The producer paces by spinning on the clock in every column alike: "
          "message i is due at start + i / rate and goes as soon as it is due, a late one at "
          "once (a delay is caught up, not carried); unlimited publishes back to back. A "
          "refused publish is counted, not retried (MEDIUM is refused from 80 % full); the "
          "refused share of the attempts is shown beside the rate when there is one. When its "
          "time is up the producer closes the bus, which wakes a sleeping consumer; the "
          "consumer drains the rest and stops once the bus is drained.",
      "Paced rows, consumers: ProcessBatch in a loop (busy polling), or ProcessBatchWait with "
      "a 100 ms timeout (it polls " +
          std::to_string(SleepingConsumerTraits::Waiting::kPollsBeforePark) +
          " times, then parks until a publish wakes it). Dispatched per second: messages the "
          "callback received, over the time from the start signal to the last dispatch. "
          "Consumer CPU: the consumer thread's CPU time over its run, from the start signal "
          "until it found the bus drained. A producer that offered under " +
          Fixed(100 * kLeastOfferedShare, 0) +
          " % of its target rate fails the run: that row would measure the producer."};
  for (std::string& note : shortfalls) table.notes.push_back(std::move(note));
  report.tables.push_back(table);
}

}  // namespace sluice::bench
