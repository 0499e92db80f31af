// End-to-end latency: publish until the subscriber callback (or visitor) runs,
// one message in flight at a time, with the machine's own noise beside it.
#include "harness/stats.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

struct LatencyResult {
  Percentiles one_way;
  Percentiles round_trip;
  std::string not_finished;  // why, when the run did not finish
};

template <ProducerModel kModel, bool kVisitor>
LatencyResult Measure(const Options& options) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  const std::size_t samples = options.latency_samples;
  // The consumer's samples in a block of their own; `received` is the
  // acknowledgement the producer waits for, alone on its line so the only
  // transfer is the one measured (harness/isolated.hpp).
  Isolated<CrossCoreSamples> one_way{CrossCoreSamples(samples, FastClock::NanosPerTick())};
  Isolated<std::atomic<std::uint64_t>> received;
  Isolated<std::atomic<bool>> stop;
  std::vector<double> round_trip(samples);
  auto on_message = [&one_way, &received](const Sample<24>& sample) {
    one_way.value.Add(sample.seq, FastClock::Ticks());
    received.value.store(received.value.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
  };
  // A fresh bus has room for this subscription.
  if constexpr (!kVisitor) (void)bus->template Subscribe<Sample<24>>(on_message);

  std::thread consumer([&] {
    // The producer is this function's thread: the consumer reads nothing
    // of its stack while it runs.
    auto* const source = bus.get();
    const std::atomic<bool>& stopping = stop.value;
    [[maybe_unused]] const auto visit = on_message;
    PinThisThread(options.ConsumerCpu());
    while (!stopping.load(std::memory_order_relaxed)) {
      if constexpr (kVisitor) {
        source->ProcessBatchWith(visit);
      } else {
        source->ProcessBatch();
      }
    }
  });
  PinThisThread(options.ProducerCpu(0));
  auto* const target = bus.get();
  std::atomic<std::uint64_t>& acknowledged = received.value;
  RowDeadline deadline("latency", CountedRowSeconds(options, samples));
  for (std::size_t i = 0; i < samples; ++i) {
    const std::uint64_t start = FastClock::Ticks();
    if (!RetryUntil(deadline, "the producer retried a refused publish",
                    [&] {
                      return target->Publish(Sample<24>{start, 0, 0, 0, 0}, 1);
                    }) ||
        !WaitUntil(deadline, "the producer waited for the consumer's acknowledgement",
                   [&] { return acknowledged.load(std::memory_order_acquire) == i + 1; })) {
      break;
    }
    round_trip[i] = FastClock::TicksToNanos(FastClock::Ticks() - start);
  }
  stop.value.store(true);
  consumer.join();
  if (!deadline.Finished()) return {{}, {}, deadline.Why()};
  return {one_way.value.Summarize(), ComputePercentiles(round_trip), {}};
}

template <ProducerModel kModel, bool kVisitor>
void Row(const Options& options, Report& report, Table& table) {
  const LatencyResult r = Measure<kModel, kVisitor>(options);
  const char* path = kVisitor ? "visitor" : "callback";
  if (!r.not_finished.empty()) {
    table.rows.push_back(
        {ModelName(kModel), path, "not finished", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
    ReportNotFinished("latency", std::string(ModelName(kModel)) + " " + path, true, r.not_finished,
                      &table);
    return;
  }
  const Percentiles& p = r.one_way;
  table.rows.push_back({ModelName(kModel), path, WithThousands(p.samples),
                        WithThousands(p.negative), Fixed(p.mean, 0), Fixed(p.p50, 0),
                        Fixed(p.p95, 0), Fixed(p.p99, 0), Fixed(p.p999, 0), Fixed(p.max, 0),
                        Fixed(r.round_trip.p50, 0), Fixed(r.round_trip.p99, 0)});
  const std::string prefix = "latency." + ModelKey(kModel) + "." + path + ".";
  report.AddMetric(prefix + "negative", static_cast<double>(p.negative), "samples",
                   Better::kNeither);
  report.AddMetric(prefix + "mean_ns", p.mean, "ns", Better::kNeither);
  // Measured once, across cores: it follows the VM's placement state, and
  // there is no spread to judge a change by.
  report.AddMetric(prefix + "p50_ns", p.p50, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "p95_ns", p.p95, "ns", Better::kNeither);
  report.AddMetric(prefix + "p99_ns", p.p99, "ns", Better::kNeither);
  report.AddMetric(prefix + "p999_ns", p.p999, "ns", Better::kNeither);
  report.AddMetric(prefix + "max_ns", p.max, "ns", Better::kNeither);
  report.AddMetric(prefix + "rtt_p50_ns", r.round_trip.p50, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "rtt_p99_ns", r.round_trip.p99, "ns", Better::kNeither);
}

}  // namespace

void RunLatency(const Options& options, Report& report) {
  Table table;
  table.id = "latency";
  table.title = "3. End-to-end latency, publish until the callback runs (ns)";
  table.columns = {"bus", "path", "samples", "negative", "mean",    "P50",
                   "P95", "P99",  "P99.9",   "max",      "RTT P50", "RTT P99"};
  const double probe_before =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  Row<ProducerModel::kMulti, false>(options, report, table);
  Row<ProducerModel::kMulti, true>(options, report, table);
  Row<ProducerModel::kSingle, false>(options, report, table);
  Row<ProducerModel::kSingle, true>(options, report, table);
  const double probe_after =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  const GapProfile gaps = MeasureGaps(options.ConsumerCpu(), 200);

  table.notes.push_back(
      "One message in flight: the producer publishes (FULL_FEATURED Publish) a payload stamped "
      "with the clock below, the consumer busy-polls and timestamps the callback; RTT is until the "
      "producer sees the callback's acknowledgement.");
  table.notes.push_back("Clock: " + FastClock::Description() + ".");
  table.notes.push_back(ClockStepNote());
  report.AddMetric("latency.clock_step_ns", ClockStepNanos(), "ns", Better::kNeither);
  table.notes.push_back(
      "negative: one-way differences below zero (the two cores' counters are skewed by that "
      "much); counted there and left out of the percentiles, never wrapped.");
  if (options.separate_cores) {
    table.notes.push_back("Placement probe (cache-line ping-pong RTT between the two CPUs): " +
                          Fixed(probe_before, 0) + " ns before, " + Fixed(probe_after, 0) +
                          " ns after.");
    report.AddMetric("latency.placement_probe_before_ns", probe_before, "ns", Better::kNeither);
    report.AddMetric("latency.placement_probe_after_ns", probe_after, "ns", Better::kNeither);
  }
  table.notes.push_back("Machine noise: a pinned spinning thread lost " +
                        Fixed(gaps.lost_percent, 2) + " % of " + Fixed(gaps.window_ms, 0) +
                        " ms in gaps over 1 us; " + std::to_string(gaps.gaps_over_10us) +
                        " gaps over 10 us; longest " + Fixed(gaps.max_gap_us, 1) +
                        " us. Tails (P99.9, max) above measure this as much as the bus.");
  report.AddMetric("noise.lost_percent", gaps.lost_percent, "%", Better::kNeither);
  report.AddMetric("noise.max_gap_us", gaps.max_gap_us, "us", Better::kNeither);
  report.tables.push_back(table);
}

}  // namespace sluice::bench
