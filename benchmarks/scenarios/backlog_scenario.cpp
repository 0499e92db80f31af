// A HIGH message behind a backlog: how long an urgent message waits when many
// LOW messages were admitted before it. Today's bus dispatches in admission
// order, so the HIGH waits for the whole backlog; this table is the baseline
// a priority-ordered bus is measured against.
#include <atomic>
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
static_assert(kBacklogMessages < FillLimit(AdmissionThresholds{}.low_percent,
                                           static_cast<Position>(kBacklogCapacity)),
              "the backlog must fit under LOW's default threshold");

// What the consumer saw in one sample, written by it (its callback included)
// while it dispatches and read by the producer only after `done`.
struct ConsumerSample {
  std::uint64_t release_ticks = 0;   // when the consumer saw the release
  std::uint64_t high_sent = 0;       // the HIGH's payload: the producer's reading
  std::uint64_t high_received = 0;   // the clock in the HIGH's callback
  std::uint64_t high_count = 0;      // HIGH messages dispatched
  std::uint64_t low_count = 0;       // LOW messages dispatched
  std::uint64_t last_low_ticks = 0;  // the clock in the last LOW's callback
};

struct BacklogResult {
  Percentiles empty;   // HIGH publish to callback, nothing queued ahead
  Percentiles behind;  // HIGH publish to callback, kBacklogMessages LOW ahead
  Percentiles drain;   // release to the last LOW's callback
  std::uint64_t low_refused = 0;
  std::uint64_t high_refused = 0;
  std::uint64_t high_missing = 0;  // HIGH admitted but not dispatched once
  std::uint64_t low_missing = 0;   // LOW admitted but not dispatched
};

// Writes every slot of the ring once, so no sample takes page faults.
template <typename Bus>
void TouchEverySlot(Bus& bus) {
  for (std::uint64_t i = 0; i < bus.Capacity(); ++i) {
    // Drained every 1,024: HIGH (refused only at 99 % full) is never refused.
    (void)bus.PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, MessagePriority::HIGH);
    if (i % 1024 == 1023) Drain(bus);
  }
  Drain(bus);
}

// `samples` rounds on one bus, each an empty-bus sample and then a
// backlog sample, so both situations see the same machine state.
template <typename Bus>
BacklogResult Measure(const Options& options, Bus& bus, std::size_t samples) {
  TouchEverySlot(bus);
  Isolated<ConsumerSample> seen;
  if (!bus.template Subscribe<Sample<24>>(
              [&seen](const Sample<24>& sample, const MessageHeader& header) {
                ConsumerSample& s = seen.value;
                if (header.priority == MessagePriority::HIGH) {
                  s.high_received = FastClock::Ticks();
                  s.high_sent = sample.seq;
                  ++s.high_count;
                } else {
                  s.last_low_ticks = FastClock::Ticks();
                  ++s.low_count;
                }
              })
           .IsValid()) {
    RecordFailure("backlog: could not subscribe");
    return {};
  }

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

  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    Bus* const source = &bus;
    std::uint64_t generation = 0;
    for (;;) {
      std::uint64_t next = release.value.load(std::memory_order_acquire);
      while (next == generation) {
        if (shared_cpu) std::this_thread::yield();
        next = release.value.load(std::memory_order_acquire);
      }
      if (next == kStop) break;
      generation = next;
      seen.value = ConsumerSample{};
      seen.value.release_ticks = FastClock::Ticks();
      while (source->ProcessBatch() != 0) {
      }
      done.value.store(generation, std::memory_order_release);
    }
  });

  PinThisThread(options.ProducerCpu(0));
  Bus* const target = &bus;
  CrossCoreSamples empty(samples, FastClock::NanosPerTick());
  CrossCoreSamples behind(samples, FastClock::NanosPerTick());
  std::vector<double> drain_ns;
  drain_ns.reserve(samples);
  BacklogResult result;
  std::uint64_t generation = 0;
  // One unrecorded round first: the callback's and the dispatch path's code
  // and data are warm before the first recorded sample.
  for (std::size_t round = 0; round <= samples; ++round) {
    const bool recorded = round != 0;
    for (const std::uint64_t backlog : {std::uint64_t{0}, kBacklogMessages}) {
      std::uint64_t low_refused = 0;
      for (std::uint64_t i = 0; i < backlog; ++i) {
        low_refused +=
            target->PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, MessagePriority::LOW) ? 0 : 1;
      }
      const std::uint64_t sent = FastClock::Ticks();
      const bool high_admitted =
          target->PublishWithPriority(Sample<24>{sent, 0, 0, 0, 0}, 1, MessagePriority::HIGH);
      release.value.store(++generation, std::memory_order_release);
      while (done.value.load(std::memory_order_acquire) != generation) {
        if (shared_cpu) std::this_thread::yield();
      }
      const ConsumerSample s = seen.value;
      result.low_refused += low_refused;
      result.high_refused += high_admitted ? 0 : 1;
      if (s.high_count != (high_admitted ? 1u : 0u)) ++result.high_missing;
      if (s.low_count != backlog - low_refused) ++result.low_missing;
      if (!recorded || s.high_count != 1) continue;
      if (backlog == 0) {
        empty.Add(s.high_sent, s.high_received);
      } else {
        behind.Add(s.high_sent, s.high_received);
        if (s.low_count != 0) {
          drain_ns.push_back(FastClock::TicksToNanos(s.last_low_ticks - s.release_ticks));
        }
      }
    }
  }
  release.value.store(kStop, std::memory_order_release);
  consumer.join();

  result.empty = empty.Summarize();
  result.behind = behind.Summarize();
  result.drain = ComputePercentiles(drain_ns);
  return result;
}

}  // namespace

void RunBacklog(const Options& options, Report& report) {
  Table table;
  table.id = "backlog";
  table.title = "13. HIGH behind a backlog: publish to callback of one HIGH message, MPSC, " +
                WithThousands(kBacklogCapacity) + " slots (ns)";
  table.columns = {"figure", "FIFO bus (today)"};
  const std::size_t samples =
      options.suite == "smoke" ? 5 : (options.suite == "standard" ? 200 : 50);

  const double probe_before =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  Progress("backlog: FIFO bus, " + std::to_string(samples) + " samples per situation");
  auto fifo = std::make_unique<FifoBus>();
  fifo->SetPerformanceMode(PerformanceMode::FULL_FEATURED);
  const BacklogResult r = Measure(options, *fifo, samples);
  const double probe_after =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  const GapProfile gaps = MeasureGaps(options.ConsumerCpu(), 200);

  const std::string behind_label =
      "HIGH publish to callback, " + WithThousands(kBacklogMessages) + " LOW queued ahead, ";
  const double ratio = r.empty.p99 > 0 ? r.behind.p99 / r.empty.p99 : 0;
  table.rows.push_back({"HIGH publish to callback, empty bus, P50 ns", Fixed(r.empty.p50, 0)});
  table.rows.push_back({"HIGH publish to callback, empty bus, P99 ns", Fixed(r.empty.p99, 0)});
  table.rows.push_back({behind_label + "P50 ns", Fixed(r.behind.p50, 0)});
  table.rows.push_back({behind_label + "P99 ns", Fixed(r.behind.p99, 0)});
  table.rows.push_back({"backlog drain time, P50 ns", Fixed(r.drain.p50, 0)});
  table.rows.push_back(
      {"ratio of P99 behind the backlog to P99 on an empty bus", Fixed(ratio, 1) + "x"});

  // Measured once, across cores: no spread to judge a change by.
  report.AddMetric("backlog.fifo.empty_p50_ns", r.empty.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("backlog.fifo.empty_p99_ns", r.empty.p99, "ns", Better::kLower).gated = false;
  report.AddMetric("backlog.fifo.behind_p50_ns", r.behind.p50, "ns", Better::kLower).gated = false;
  report.AddMetric("backlog.fifo.behind_p99_ns", r.behind.p99, "ns", Better::kLower).gated = false;
  report.AddMetric("backlog.fifo.drain_p50_ns", r.drain.p50, "ns", Better::kNeither);
  report.AddMetric("backlog.fifo.drain_p99_ns", r.drain.p99, "ns", Better::kNeither);
  report.AddMetric("backlog.fifo.p99_ratio", ratio, "x", Better::kLower).gated = false;
  report.AddMetric("backlog.fifo.negative",
                   static_cast<double>(r.empty.negative + r.behind.negative), "samples",
                   Better::kNeither);

  if (r.low_refused != 0) {
    RecordFailure("backlog: " + WithThousands(r.low_refused) + " LOW publishes of the backlog " +
                  "were refused");
  }
  if (r.high_refused != 0) {
    RecordFailure("backlog: " + WithThousands(r.high_refused) + " HIGH publishes were refused");
  }
  if (r.high_missing != 0) {
    RecordFailure("backlog: in " + WithThousands(r.high_missing) +
                  " samples the HIGH message was not dispatched exactly once");
  }
  if (r.low_missing != 0) {
    RecordFailure("backlog: in " + WithThousands(r.low_missing) +
                  " samples the admitted LOW messages were not all dispatched");
  }
  if (r.empty.samples == 0 || r.behind.samples == 0 || r.drain.samples == 0) {
    RecordFailure("backlog: a situation has no samples");
  }

  table.notes.push_back(
      "One MPSC bus (FULL_FEATURED, the 24-byte Sample, one subscriber callback, " +
      WithThousands(kBacklogCapacity) +
      " slots) built once and reused; its ring was written through once beforehand. Its "
      "capacity lets the " +
      WithThousands(kBacklogMessages) + " LOW messages fit under LOW's default " +
      std::to_string(AdmissionThresholds{}.low_percent) +
      " % threshold, so the whole backlog is admitted.");
  table.notes.push_back(
      "Each sample: the consumer waits on a start flag; the producer publishes the backlog "
      "(PublishWithPriority, LOW; none for the empty bus), reads the clock, publishes one HIGH "
      "message carrying that reading, then releases the consumer, which dispatches everything "
      "(ProcessBatch until a batch comes back empty). The HIGH's callback reads the clock: the "
      "figure is from the producer's reading to it, and includes the release of the consumer. " +
      WithThousands(samples) +
      " samples per situation, an empty-bus and a backlog "
      "sample in turn, after one unrecorded round.");
  table.notes.push_back(
      "Backlog drain time: on the consumer's clock, from its seeing the release to the last LOW's "
      "callback. The bus dispatches in admission order, so the HIGH behind the backlog is "
      "dispatched only after the last LOW: its figure is about the drain time plus the "
      "empty-bus figure.");
  table.notes.push_back(
      "Admission protects a HIGH message from loss, not from this wait: the bus dispatches in "
      "admission order.");
  table.notes.push_back("Clock: " + FastClock::Description() + ".");
  table.notes.push_back(ClockStepNote());
  table.notes.push_back(
      "negative: " + WithThousands(r.empty.negative + r.behind.negative) +
      " one-way differences below zero (the two cores' counters are skewed by that much), "
      "left out of the percentiles, never wrapped.");
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
