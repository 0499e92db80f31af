// A HIGH message behind a backlog: how long an urgent message waits when many
// LOW messages were admitted before it, on the FIFO bus (admission order: the
// HIGH waits for the whole backlog) and on the priority-ordered bus
// (DeliveryOrder::kPriority: the HIGH goes first), in the same run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "harness/isolated.hpp"
#include "harness/stats.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

// 100,000 LOW fit under LOW's default 60 % threshold of this capacity
// (157,287 messages), so the whole backlog is admitted.
constexpr std::size_t kBacklogCapacity = 262144;
constexpr std::uint64_t kBacklogMessages = 100000;
using FifoBus = AsyncBus<std::variant<Sample<24>>, kBacklogCapacity, ProducerModel::kMulti>;
using OrderedBus = AsyncBus<std::variant<Sample<24>>, kBacklogCapacity, ProducerModel::kMulti,
                            PriorityOrderTraits>;
// Rounds run in blocks, alternating between the buses, so both see the same
// machine states.
constexpr std::size_t kBlocks = 5;
static_assert(kBacklogMessages < FillLimit(AdmissionThresholds{}.low_percent,
                                           static_cast<Position>(kBacklogCapacity)),
              "the backlog must fit under LOW's default threshold");

// What the consumer saw in one sample, written by it (its callback included)
// while it dispatches and read by the producer only after `done`.
struct ConsumerSample {
  std::uint64_t release_ticks = 0;    // when the consumer saw the release
  std::uint64_t high_sent = 0;        // the HIGH's payload: the producer's reading
  std::uint64_t high_received = 0;    // the clock in the HIGH's callback
  std::uint64_t high_count = 0;       // HIGH messages dispatched
  std::uint64_t low_count = 0;        // LOW messages dispatched
  std::uint64_t last_low_ticks = 0;   // the clock in the last LOW's callback
  std::uint64_t low_before_high = 0;  // LOW messages dispatched before the HIGH
};

// What the rounds of one bus measured, accumulated over its blocks.
struct BacklogResult {
  BacklogResult(std::size_t samples, double nanos_per_tick)
      : empty(samples, nanos_per_tick), behind(samples, nanos_per_tick) {}
  CrossCoreSamples empty;                 // HIGH publish to callback, nothing queued ahead
  CrossCoreSamples behind;                // HIGH publish to callback, kBacklogMessages LOW ahead
  std::vector<double> drain_ns;           // release to the last LOW's callback
  std::uint64_t low_before_high_max = 0;  // over the backlog samples
  std::uint64_t low_refused = 0;
  std::uint64_t high_refused = 0;
  std::uint64_t high_missing = 0;  // HIGH admitted but not dispatched once
  std::uint64_t low_missing = 0;   // LOW admitted but not dispatched
  // The bus's own latency histogram for the HIGH message behind the backlog
  // (us, the one sample's sum), and how far it fell below the application's
  // timing of the same message.
  std::vector<double> histogram_behind_us;
  double histogram_short_us_max = 0;
  double histogram_over_us_max = 0;
  std::string not_finished;  // why, when a block did not finish
};

// Writes every slot of every ring once (the priority-ordered bus has one per
// priority), so no sample takes page faults; BARE_METAL admits every priority
// up to the capacity.
template <typename Bus>
void TouchEverySlot(Bus& bus) {
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  for (const MessagePriority priority :
       {MessagePriority::LOW, MessagePriority::MEDIUM, MessagePriority::HIGH}) {
    for (std::uint64_t i = 0; i < bus.Capacity(); ++i) {
      (void)bus.PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, priority);
      if (i % 1024 == 1023) Drain(bus);
    }
    Drain(bus);
  }
  bus.SetPerformanceMode(PerformanceMode::FULL_FEATURED);
}

// One bus with its subscription and what its consumer saw.
template <typename Bus>
struct BacklogRig {
  BacklogRig() {
    TouchEverySlot(*bus);
    ConsumerSample* const s = &seen.value;
    subscribed = bus->template Subscribe<Sample<24>>(
                        [s](const Sample<24>& sample, const MessageHeader& header) {
                          if (header.priority == MessagePriority::HIGH) {
                            s->high_received = FastClock::Ticks();
                            s->high_sent = sample.seq;
                            s->low_before_high = s->low_count;
                            ++s->high_count;
                          } else {
                            s->last_low_ticks = FastClock::Ticks();
                            ++s->low_count;
                          }
                        })
                     .IsValid();
  }
  std::unique_ptr<Bus> bus = std::make_unique<Bus>();
  Isolated<ConsumerSample> seen;
  bool subscribed = false;
};

// `rounds` rounds on one bus, each an empty-bus sample and then a backlog
// sample, so both situations see the same machine state; `warm`: one
// unrecorded round first, so the callback's and the dispatch path's code and
// data are warm before the first recorded sample.
template <typename Bus>
void MeasureBlock(const Options& options, BacklogRig<Bus>& rig, std::size_t rounds, bool warm,
                  BacklogResult& result) {
  // The producer waits for the consumer after each sample; the consumer
  // waits for the producer's release, which a producer that gives up ends
  // with kStop.
  RowDeadline deadline("backlog", CountedRowSeconds(options, (rounds + 1) * 2 * kBacklogMessages));
  // The producer's release and the consumer's acknowledgement, each alone on
  // its line. Release: the producer's release store comes after every publish
  // of the sample, so the consumer's acquire load that sees it also sees
  // every published slot, and dispatching until a batch comes back empty
  // dispatches them all. Done: the consumer's release store comes after its
  // last callback, so the producer's acquire load that sees it reads a
  // complete ConsumerSample.
  constexpr std::uint64_t kStop = ~std::uint64_t{0};
  Isolated<std::atomic<std::uint64_t>> release;
  Isolated<std::atomic<std::uint64_t>> done;
  // One CPU for both threads: a waiting thread must give the CPU away.
  const bool shared_cpu = !options.separate_cores;
  ConsumerSample& seen = rig.seen.value;

  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    Bus* const source = rig.bus.get();
    std::uint64_t generation = 0;
    for (;;) {
      std::uint64_t next = release.value.load(std::memory_order_acquire);
      while (next == generation) {
        if (shared_cpu) std::this_thread::yield();
        next = release.value.load(std::memory_order_acquire);
      }
      if (next == kStop) break;
      generation = next;
      seen = ConsumerSample{};
      seen.release_ticks = FastClock::Ticks();
      while (source->ProcessBatch() != 0) {
      }
      done.value.store(generation, std::memory_order_release);
    }
  });

  PinThisThread(options.ProducerCpu(0));
  Bus* const target = rig.bus.get();
  std::uint64_t generation = 0;
  bool given_up = false;
  for (std::size_t round = warm ? 0 : 1; round <= rounds && !given_up; ++round) {
    const bool recorded = round != 0;
    for (const std::uint64_t backlog : {std::uint64_t{0}, kBacklogMessages}) {
      // The histograms then hold this sample's HIGH alone (the consumer is
      // waiting for the release, so the reset overlaps no batch).
      target->ResetStatistics();
      std::uint64_t low_refused = 0;
      for (std::uint64_t i = 0; i < backlog; ++i) {
        low_refused +=
            target->PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, MessagePriority::LOW) ? 0 : 1;
      }
      const std::uint64_t sent = FastClock::Ticks();
      const bool high_admitted =
          target->PublishWithPriority(Sample<24>{sent, 0, 0, 0, 0}, 1, MessagePriority::HIGH)
              .IsAdmitted();
      release.value.store(++generation, std::memory_order_release);
      for (std::uint32_t polls = 1; done.value.load(std::memory_order_acquire) != generation;
           ++polls) {
        if (shared_cpu) std::this_thread::yield();
        if (polls % kDeadlinePollEvery == 0 && deadline.Expired()) {
          given_up =
              !deadline.TimedOut("the producer waited for the consumer to dispatch a sample");
          break;
        }
      }
      if (given_up) break;
      const ConsumerSample s = seen;
      result.low_refused += low_refused;
      result.high_refused += high_admitted ? 0 : 1;
      if (s.high_count != (high_admitted ? 1u : 0u)) ++result.high_missing;
      if (s.low_count != backlog - low_refused) ++result.low_missing;
      if (!recorded || s.high_count != 1) continue;
      if (backlog == 0) {
        result.empty.Add(s.high_sent, s.high_received);
      } else {
        result.behind.Add(s.high_sent, s.high_received);
        const LatencyHistogram high = target->GetLatencyHistograms().For(MessagePriority::HIGH);
        if (high.count == 1) {
          const double recorded_us = static_cast<double>(high.sum_nanos) / 1000.0;
          const double true_us = FastClock::TicksToNanos(s.high_received - s.high_sent) / 1000.0;
          result.histogram_behind_us.push_back(recorded_us);
          result.histogram_short_us_max =
              std::max(result.histogram_short_us_max, true_us - recorded_us);
          result.histogram_over_us_max =
              std::max(result.histogram_over_us_max, recorded_us - true_us);
        }
        if (s.low_before_high > result.low_before_high_max) {
          result.low_before_high_max = s.low_before_high;
        }
        if (s.low_count != 0) {
          result.drain_ns.push_back(FastClock::TicksToNanos(s.last_low_ticks - s.release_ticks));
        }
      }
    }
  }
  release.value.store(kStop, std::memory_order_release);
  consumer.join();
  if (!deadline.Finished() && result.not_finished.empty()) result.not_finished = deadline.Why();
}

// Adds one bus's rows' cells and metrics; returns its P99 ratio.
struct BacklogFigures {
  Percentiles empty;
  Percentiles behind;
  Percentiles drain;
  double ratio = 0;
};

BacklogFigures Summarize(BacklogResult& r) {
  BacklogFigures f;
  f.empty = r.empty.Summarize();
  f.behind = r.behind.Summarize();
  f.drain = ComputePercentiles(r.drain_ns);
  f.ratio = f.empty.p99 > 0 ? f.behind.p99 / f.empty.p99 : 0;
  return f;
}

void AddMetrics(Report& report, const std::string& bus, const BacklogFigures& f,
                const BacklogResult& r) {
  const std::string prefix = "backlog." + bus + ".";
  // Measured once, across cores: no spread to judge a change by.
  report.AddMetric(prefix + "empty_p50_ns", f.empty.p50, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "empty_p99_ns", f.empty.p99, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "behind_p50_ns", f.behind.p50, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "behind_p99_ns", f.behind.p99, "ns", Better::kLower).gated = false;
  report.AddMetric(prefix + "drain_p50_ns", f.drain.p50, "ns", Better::kNeither);
  report.AddMetric(prefix + "drain_p99_ns", f.drain.p99, "ns", Better::kNeither);
  report.AddMetric(prefix + "p99_ratio", f.ratio, "x", Better::kLower).gated = false;
  report.AddMetric(prefix + "low_before_high_max", static_cast<double>(r.low_before_high_max),
                   "messages", Better::kNeither);
  report.AddMetric(prefix + "negative", static_cast<double>(f.empty.negative + f.behind.negative),
                   "samples", Better::kNeither);
}

void CheckResult(const std::string& bus, const BacklogResult& r) {
  if (r.low_refused != 0) {
    RecordFailure("backlog, " + bus + ": " + WithThousands(r.low_refused) +
                  " LOW publishes of the backlog were refused");
  }
  if (r.high_refused != 0) {
    RecordFailure("backlog, " + bus + ": " + WithThousands(r.high_refused) +
                  " HIGH publishes were refused");
  }
  if (r.high_missing != 0) {
    RecordFailure("backlog, " + bus + ": in " + WithThousands(r.high_missing) +
                  " samples the HIGH message was not dispatched exactly once");
  }
  if (r.low_missing != 0) {
    RecordFailure("backlog, " + bus + ": in " + WithThousands(r.low_missing) +
                  " samples the admitted LOW messages were not all dispatched");
  }
  if (r.empty.size() == 0 || r.behind.size() == 0 || r.drain_ns.empty()) {
    RecordFailure("backlog, " + bus + ": a situation has no samples");
  }
}

}  // namespace

void RunBacklog(const Options& options, Report& report) {
  Table table;
  table.id = "backlog";
  table.title = "13. HIGH behind a backlog: publish to callback of one HIGH message, MPSC, " +
                WithThousands(kBacklogCapacity) + " slots (ns)";
  table.columns = {"figure", "FIFO bus", "priority-ordered bus"};
  const std::size_t samples =
      options.suite == "smoke" ? 5 : (options.suite == "standard" ? 200 : 50);
  const std::size_t per_block = (samples + kBlocks - 1) / kBlocks;

  const double probe_before =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  Progress("backlog: FIFO and priority-ordered buses, " + std::to_string(per_block * kBlocks) +
           " samples per situation each, in " + std::to_string(kBlocks) + " alternating blocks");
  BacklogRig<FifoBus> fifo;
  BacklogRig<OrderedBus> ordered;
  if (!fifo.subscribed || !ordered.subscribed) {
    RecordFailure("backlog: could not subscribe");
    return;
  }
  BacklogResult fifo_result(per_block * kBlocks, FastClock::NanosPerTick());
  BacklogResult ordered_result(per_block * kBlocks, FastClock::NanosPerTick());
  for (std::size_t block = 0; block < kBlocks; ++block) {
    MeasureBlock(options, fifo, per_block, /*warm=*/true, fifo_result);
    MeasureBlock(options, ordered, per_block, /*warm=*/true, ordered_result);
    if (!fifo_result.not_finished.empty() || !ordered_result.not_finished.empty()) break;
  }
  if (!fifo_result.not_finished.empty() || !ordered_result.not_finished.empty()) {
    const std::pair<const char*, const std::string*> buses[] = {
        {"FIFO bus", &fifo_result.not_finished},
        {"priority-ordered bus", &ordered_result.not_finished}};
    for (const auto& [bus, why] : buses) {
      if (!why->empty()) ReportNotFinished("backlog", bus, true, *why, &table);
    }
    table.rows.push_back({"not finished", fifo_result.not_finished.empty() ? "-" : "not finished",
                          ordered_result.not_finished.empty() ? "-" : "not finished"});
    report.tables.push_back(table);
    return;
  }
  const double probe_after =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  const GapProfile gaps = MeasureGaps(options.ConsumerCpu(), 200);
  const BacklogFigures f = Summarize(fifo_result);
  const BacklogFigures o = Summarize(ordered_result);

  const std::string behind_label =
      "HIGH publish to callback, " + WithThousands(kBacklogMessages) + " LOW queued ahead, ";
  const auto row = [&](const std::string& label, double fifo_value, double ordered_value) {
    table.rows.push_back({label, Fixed(fifo_value, 0), Fixed(ordered_value, 0)});
  };
  row("HIGH publish to callback, empty bus, P50 ns", f.empty.p50, o.empty.p50);
  row("HIGH publish to callback, empty bus, P99 ns", f.empty.p99, o.empty.p99);
  row(behind_label + "P50 ns", f.behind.p50, o.behind.p50);
  row(behind_label + "P99 ns", f.behind.p99, o.behind.p99);
  row("backlog drain time, P50 ns", f.drain.p50, o.drain.p50);
  {
    const Percentiles fh = ComputePercentiles(fifo_result.histogram_behind_us);
    const Percentiles oh = ComputePercentiles(ordered_result.histogram_behind_us);
    table.rows.push_back({"the bus's own HIGH latency histogram, behind the backlog, P50 / P99 us",
                          Fixed(fh.p50, 0) + " / " + Fixed(fh.p99, 0),
                          Fixed(oh.p50, 0) + " / " + Fixed(oh.p99, 0)});
    table.rows.push_back({"histogram below the application's timing, most in a sample, us",
                          Fixed(fifo_result.histogram_short_us_max, 1),
                          Fixed(ordered_result.histogram_short_us_max, 1)});
    report
        .AddMetric("backlog.fifo.histogram_short_us_max", fifo_result.histogram_short_us_max, "us",
                   Better::kLower)
        .gated = false;
    report
        .AddMetric("backlog.ordered.histogram_short_us_max", ordered_result.histogram_short_us_max,
                   "us", Better::kLower)
        .gated = false;
  }
  row("LOW messages dispatched before the HIGH, most in a sample",
      static_cast<double>(fifo_result.low_before_high_max),
      static_cast<double>(ordered_result.low_before_high_max));
  table.rows.push_back({"ratio of P99 behind the backlog to P99 on an empty bus",
                        Fixed(f.ratio, 1) + "x", Fixed(o.ratio, 1) + "x"});
  AddMetrics(report, "fifo", f, fifo_result);
  AddMetrics(report, "ordered", o, ordered_result);
  CheckResult("FIFO bus", fifo_result);
  CheckResult("priority-ordered bus", ordered_result);
  if (ordered_result.low_before_high_max != 0) {
    RecordFailure("backlog: the priority-ordered bus dispatched " +
                  WithThousands(ordered_result.low_before_high_max) +
                  " LOW messages before a HIGH that was published before the consumer started");
  }

  table.notes.push_back(
      "Two MPSC buses (FULL_FEATURED, the 24-byte Sample, one subscriber callback, " +
      WithThousands(kBacklogCapacity) +
      " slots), each built once and reused, every slot written through once beforehand: the FIFO "
      "bus (default traits) and the priority-ordered bus (PriorityOrderTraits: "
      "DeliveryOrder::kPriority, a priority check before every message, strict priority; three "
      "rings, so three times the slot memory). The capacity lets the " +
      WithThousands(kBacklogMessages) + " LOW messages fit under LOW's default " +
      std::to_string(AdmissionThresholds{}.low_percent) +
      " % threshold, so the whole backlog is admitted.");
  table.notes.push_back(
      "Each sample: the consumer waits on a start flag; the producer publishes the backlog "
      "(PublishWithPriority, LOW; none for the empty bus), reads the clock, publishes one HIGH "
      "message carrying that reading, then releases the consumer, which dispatches everything "
      "(ProcessBatch until a batch comes back empty). The HIGH's callback reads the clock: the "
      "figure is from the producer's reading to it, and includes the release of the consumer. " +
      WithThousands(per_block * kBlocks) +
      " samples per situation and bus, an empty-bus and a backlog sample in turn, in " +
      std::to_string(kBlocks) +
      " blocks that alternate between the buses, each after one unrecorded round.");
  table.notes.push_back(
      "Backlog drain time: on the consumer's clock, from its seeing the release to the last LOW's "
      "callback. The FIFO bus dispatches in admission order, so its HIGH behind the backlog is "
      "dispatched only after the last LOW: its figure is about the drain time plus the "
      "empty-bus figure. The priority-ordered bus dispatches the HIGH first; the run fails if it "
      "ever dispatched a LOW before it.");
  table.notes.push_back(
      "negative: " + WithThousands(f.empty.negative + f.behind.negative) + " (FIFO) and " +
      WithThousands(o.empty.negative + o.behind.negative) +
      " (priority-ordered) one-way differences below zero (the two cores' counters are skewed "
      "by that much), left out of the percentiles, never wrapped.");
  table.notes.push_back(
      "The bus's own histogram: before each sample the producer resets the statistics, so the "
      "HIGH latency histogram then holds that sample's HIGH alone (its sum is its latency in "
      "whole microseconds, from the publish's bus-clock stamp to the consumer's clock reading "
      "for it, which it re-reads every Latency::kClockInterval = " +
      std::to_string(DefaultBusTraits::Latency::kClockInterval) +
      " messages of a batch). 'Below the application's timing' compares it with this table's "
      "own figure for the same message; the bound (docs/api.md, \"Latency histograms\") is the "
      "time the consumer spent on the messages since its last reading, plus the microsecond "
      "rounding, the two readings' different moments (the producer reads its clock just "
      "before the publish, the bus just inside it) and the two clocks' separate calibrations "
      "(a rate difference of a fraction of a percent shows over milliseconds).");
  table.notes.push_back("Clock: " + FastClock::Description() + ".");
  table.notes.push_back(ClockStepNote());
  if (options.separate_cores) {
    table.notes.push_back("Placement probe (cache-line ping-pong RTT between the two CPUs): " +
                          Fixed(probe_before, 0) + " ns before, " + Fixed(probe_after, 0) +
                          " ns after.");
    report.AddMetric("backlog.placement_probe_before_ns", probe_before, "ns", Better::kNeither);
    report.AddMetric("backlog.placement_probe_after_ns", probe_after, "ns", Better::kNeither);
  }
  table.notes.push_back("Machine noise: a pinned spinning thread lost " +
                        Fixed(gaps.lost_percent, 2) + " % of " + Fixed(gaps.window_ms, 0) +
                        " ms in gaps over 1 us; " + std::to_string(gaps.gaps_over_10us) +
                        " gaps over 10 us; longest " + Fixed(gaps.max_gap_us, 1) +
                        " us. With few samples, P99 is near the largest and measures this as "
                        "much as the bus.");
  report.AddMetric("backlog.noise.lost_percent", gaps.lost_percent, "%", Better::kNeither);
  report.AddMetric("backlog.noise.max_gap_us", gaps.max_gap_us, "us", Better::kNeither);
  report.tables.push_back(table);
}

}  // namespace sluice::bench
