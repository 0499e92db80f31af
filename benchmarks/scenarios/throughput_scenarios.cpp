// End-to-end throughput tables: fixed-rate load, many subscribers, payload
// sizes. The producer retries refused publishes; time runs from the first
// publish until the consumer has dispatched the last message.
#include "harness/stats.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

struct Idle {
  std::uint64_t never_published;
};

// M msg/s end to end for `messages` messages of payload type T; 0, with the
// reason in `not_finished`, for a run that did not finish.
template <ProducerModel kModel, typename T, typename Payload>
double EndToEnd(const Options& options, AsyncBus<Payload, 131072, kModel>& bus,
                std::uint64_t messages, std::string* not_finished) {
  // The consumer's count, away from what the producer reads (harness/isolated.hpp).
  Isolated<std::uint64_t> consumed;
  RowDeadline deadline("end to end", CountedRowSeconds(options, messages));
  const double seconds = RunProducersAndConsumer(
      options, deadline, 1,
      [&](int) {
        auto* const target = &bus;
        const std::uint64_t count = messages;
        T value{};
        for (std::uint64_t i = 0; i < count; ++i) {
          if (deadline.ExpiredAt(i)) {
            (void)deadline.TimedOut("the producer was still publishing");
            return;
          }
          value.seq = i;
          if (!RetryUntil(deadline, "the producer retried a refused publish", [&] {
                return target->PublishWithPriority(value, 1, MessagePriority::HIGH);
              })) {
            return;
          }
        }
      },
      [&] {
        const std::uint32_t n = bus.ProcessBatch();
        consumed.value += n;
        return n;
      },
      [&] { return consumed.value >= messages; });
  if (!deadline.Finished()) {
    *not_finished = deadline.Why();
    return 0;
  }
  return static_cast<double>(messages) / seconds / 1e6;
}

template <std::size_t kBytes, ProducerModel kModel>
double PayloadRun(const Options& options, std::string* not_finished) {
  using Payload = std::variant<Sample<kBytes>>;
  auto bus = std::make_unique<AsyncBus<Payload, 131072, kModel>>();
  // Written by the callback for every message: a block of its own.
  Isolated<std::uint64_t> sink;
  // A fresh bus has room for this subscription.
  (void)bus->template Subscribe<Sample<kBytes>>(
      [&sink](const Sample<kBytes>& s) { sink.value += s.seq; });
  const double rate =
      EndToEnd<kModel, Sample<kBytes>>(options, *bus, options.end_to_end_messages, not_finished);
  KeepAlive(sink.value);
  return rate;
}

template <std::size_t kBytes>
void PayloadRow(const Options& options, Report& report, Table& table) {
  std::string mpsc_why;
  std::string spsc_why;
  const double mpsc = PayloadRun<kBytes, ProducerModel::kMulti>(options, &mpsc_why);
  const double spsc = PayloadRun<kBytes, ProducerModel::kSingle>(options, &spsc_why);
  using Bus = AsyncBus<std::variant<Sample<kBytes>>, 131072>;
  table.rows.push_back({std::to_string(kBytes), std::to_string(Bus::kBytesPerSlot),
                        mpsc_why.empty() ? Fixed(mpsc, 2) : "not finished",
                        spsc_why.empty() ? Fixed(spsc, 2) : "not finished"});
  const std::pair<const char*, const std::string*> runs[] = {{"mpsc", &mpsc_why},
                                                             {"spsc", &spsc_why}};
  for (const auto& [model, why] : runs) {
    if (why->empty()) continue;
    ReportNotFinished("payload", std::to_string(kBytes) + " bytes, " + model, true, *why, &table);
  }
  // Measured once: no spread to judge a change by, so not gated.
  if (mpsc_why.empty()) {
    report
        .AddMetric("payload.mpsc." + std::to_string(kBytes) + ".throughput_mps", mpsc, "M msg/s",
                   Better::kHigher)
        .gated = false;
  }
  if (spsc_why.empty()) {
    report
        .AddMetric("payload.spsc." + std::to_string(kBytes) + ".throughput_mps", spsc, "M msg/s",
                   Better::kHigher)
        .gated = false;
  }
}

struct LoadResult {
  double attempted_per_second = 0;
  double admitted_per_second = 0;  // a refused publish is not throughput
  double success_percent = 0;
  double cpu_percent = 0;
  Percentiles latency;
  std::string not_finished;  // why, when the run did not finish
};

// One producer publishing at `target_per_second` (0: unlimited) for the
// suite's load duration; the consumer timestamps every k-th message.
LoadResult Load(const Options& options, double target_per_second) {
  auto bus = std::make_unique<BenchBus<ProducerModel::kMulti>>();
  const double seconds = options.load_seconds;
  const double expected = target_per_second > 0 ? target_per_second * seconds : 50e6 * seconds;
  const auto sample_every = static_cast<std::uint64_t>(std::max(1.0, expected / 200000.0));
  // What each thread writes while it runs, in blocks of their own.
  Isolated<CrossCoreSamples> latencies{CrossCoreSamples(
      static_cast<std::size_t>(expected / static_cast<double>(sample_every)) + 1024,
      FastClock::NanosPerTick())};
  Isolated<std::uint64_t> seen;
  // A fresh bus has room for this subscription.
  (void)bus->Subscribe<Sample<24>>([&latencies, &seen, sample_every](const Sample<24>& s) {
    if (++seen.value % sample_every == 0) latencies.value.Add(s.seq, FastClock::Ticks());
  });
  struct Counts {
    std::uint64_t attempted = 0;
    std::uint64_t admitted = 0;
  };
  Isolated<Counts> counts;
  Isolated<std::atomic<bool>> producer_done;
  double cpu_seconds = 0;
  RowDeadline deadline("load", TimedRowSeconds(options, seconds));
  const double wall = RunProducersAndConsumer(
      options, deadline, 1,
      [&](int) {
        auto* const target = bus.get();
        Counts mine;  // on the producer's stack; stored once at the end
        const double ticks_per_second = 1e9 / FastClock::NanosPerTick();
        const auto duration_ticks = static_cast<std::uint64_t>(seconds * ticks_per_second);
        const double interval = target_per_second > 0 ? ticks_per_second / target_per_second : 0;
        const std::uint64_t start = FastClock::Ticks();
        double next = static_cast<double>(start);
        for (std::uint64_t i = 0;; ++i) {
          std::uint64_t now = FastClock::Ticks();
          if (now - start >= duration_ticks) break;
          if (deadline.ExpiredAt(i)) {
            (void)deadline.TimedOut("the producer was still publishing");
            break;
          }
          if (interval > 0) {
            // Bounded: `next` is at most one interval (under 10 us) ahead.
            while (static_cast<double>(now) < next) now = FastClock::Ticks();
            next += interval;
          }
          ++mine.attempted;
          mine.admitted += target->Publish(Sample<24>{now, 0, 0, 0, 0}, 1) ? 1 : 0;
        }
        counts.value = mine;
        producer_done.value.store(true, std::memory_order_release);
      },
      [&] { return bus->ProcessBatch(); },
      [&] { return producer_done.value.load(std::memory_order_acquire); }, &cpu_seconds);
  const std::uint64_t attempted = counts.value.attempted;
  const std::uint64_t admitted = counts.value.admitted;
  LoadResult result;
  if (!deadline.Finished()) result.not_finished = deadline.Why();
  result.cpu_percent = 100.0 * cpu_seconds / wall;
  result.attempted_per_second = static_cast<double>(attempted) / seconds;
  result.admitted_per_second = static_cast<double>(admitted) / seconds;
  result.success_percent =
      attempted ? 100.0 * static_cast<double>(admitted) / static_cast<double>(attempted) : 0;
  result.latency = latencies.value.Summarize();
  return result;
}

// End-to-end throughput with `per_type` subscribers on the published type
// and as many on a type that is never published.
template <std::size_t kPerType>
void SubscribersRow(const Options& options, Report& report, Table& table) {
  using Payload = std::variant<Sample<24>, Idle>;
  static_assert(kPerType <= DefaultBusTraits::kMaxSubscribersPerType);
  auto bus = std::make_unique<AsyncBus<Payload, 131072, ProducerModel::kMulti>>();
  Isolated<std::uint64_t> sink;  // written by the callbacks for every message
  for (std::size_t i = 0; i < kPerType; ++i) {
    // kPerType is at most kMaxSubscribersPerType (asserted above): never refused.
    (void)bus->template Subscribe<Sample<24>>(
        [&sink](const Sample<24>& s) { sink.value += s.seq; });
    (void)bus->template Subscribe<Idle>(
        [&sink](const Idle& s) { sink.value += s.never_published; });
  }
  const std::uint64_t messages = options.end_to_end_messages / 2;
  std::string why;
  const double rate = EndToEnd<ProducerModel::kMulti, Sample<24>>(options, *bus, messages, &why);
  const std::string row =
      "subscribers " + std::to_string(kPerType) + " + " + std::to_string(kPerType) + " idle";
  if (!why.empty()) {
    table.rows.push_back({row, "unlimited", "-", "not finished", "-", "-", "-", "-", "-", "-"});
    ReportNotFinished("load", row, true, why, &table);
    return;
  }
  table.rows.push_back({row, "unlimited", "-", Fixed(rate * 1e6, 0), "100.0", "-", "-", "-",
                        Fixed(rate, 2), Fixed(1000.0 / rate, 1)});
  report
      .AddMetric("subscribers." + std::to_string(kPerType) + ".throughput_mps", rate, "M msg/s",
                 Better::kHigher)
      .gated = false;  // measured once
  KeepAlive(sink.value);
}

}  // namespace

void RunLoad(const Options& options, Report& report) {
  Table table;
  table.id = "load";
  table.title = "7. Load scenarios: one producer at a target rate, " +
                Fixed(options.load_seconds, 1) + " s each (MPSC, FULL_FEATURED, callbacks)";
  table.columns = {"scenario", "target/s", "attempted/s", "admitted/s", "success %",
                   "CPU %",    "P50 ns",   "P99 ns",      "M msg/s",    "ns/msg"};
  const std::pair<const char*, double> rates[] = {
      {"100K/s", 1e5}, {"1M/s", 1e6}, {"10M/s", 1e7}, {"unlimited", 0}};
  std::string skewed;
  for (const auto& [name, rate] : rates) {
    Progress(std::string("load ") + name);
    const LoadResult r = Load(options, rate);
    if (!r.not_finished.empty()) {
      table.rows.push_back({name, "-", "-", "not finished", "-", "-", "-", "-", "-", "-"});
      ReportNotFinished("load", name, true, r.not_finished, &table);
      continue;
    }
    if (r.latency.negative != 0) {
      skewed += (skewed.empty() ? "" : ", ") + std::string(name) + " " +
                WithThousands(r.latency.negative);
    }
    table.rows.push_back(
        {name, rate > 0 ? WithThousands(static_cast<std::uint64_t>(rate)) : "unlimited",
         WithThousands(static_cast<std::uint64_t>(r.attempted_per_second)),
         WithThousands(static_cast<std::uint64_t>(r.admitted_per_second)),
         Fixed(r.success_percent, 1), Fixed(r.cpu_percent, 0), Fixed(r.latency.p50, 0),
         Fixed(r.latency.p99, 0), Fixed(r.admitted_per_second / 1e6, 2),
         Fixed(1e9 / r.admitted_per_second, 1)});
    const std::string prefix = std::string("load.") + (rate > 0 ? name : "unlimited");
    // Admitted, not attempted: a bus that refused faster must not look better.
    report
        .AddMetric(prefix + ".admitted_per_second", r.admitted_per_second, "msg/s",
                   rate > 0 ? Better::kNeither : Better::kHigher)
        .gated = false;  // measured once
    report.AddMetric(prefix + ".attempted_per_second", r.attempted_per_second, "msg/s",
                     Better::kNeither);
    report.AddMetric(prefix + ".success_percent", r.success_percent, "%", Better::kNeither);
    report.AddMetric(prefix + ".cpu_percent", r.cpu_percent, "%", Better::kNeither);
    report.AddMetric(prefix + ".p50_ns", r.latency.p50, "ns", Better::kNeither);
    report.AddMetric(prefix + ".p99_ns", r.latency.p99, "ns", Better::kNeither);
  }
  Progress("many subscribers");
  SubscribersRow<1>(options, report, table);
  SubscribersRow<4>(options, report, table);
  SubscribersRow<16>(options, report, table);
  table.notes = {
      "Latency: publish until the callback, every k-th message, in a queue that may hold a "
      "backlog (unlimited rate: the queue fills, so its P50 is queueing time).",
      "Latency samples below zero (the two cores' counters skewed; counted, left out of P50 "
      "and P99, never wrapped): " +
          (skewed.empty() ? std::string("none") : skewed) + ".",
      "attempted/s counts every publish, admitted/s those the bus took; M msg/s and ns/msg "
      "are admitted messages. Subscriber rows retry a refused publish, so only admissions "
      "count.",
      ClockStepNote(),
      "CPU % is the producer's and the consumer's CPU time from the start signal, over the "
      "wall time from it until the consumer finished (the consumer busy-polls: one core is "
      "always busy).",
      "Subscriber rows: " + WithThousands(options.end_to_end_messages / 2) +
          " messages end to end; 'N + N idle' means N callbacks on the published type and N on a "
          "type that is never published."};
  report.tables.push_back(table);
}

void RunPayloadSizes(const Options& options, Report& report) {
  Table table;
  table.id = "payload";
  table.title = "8. Payload sizes end to end: FULL_FEATURED, callbacks, " +
                WithThousands(options.end_to_end_messages) + " messages";
  table.columns = {"payload bytes", "slot bytes", "MPSC M msg/s", "SPSC M msg/s"};
  PayloadRow<24>(options, report, table);
  PayloadRow<64>(options, report, table);
  PayloadRow<128>(options, report, table);
  PayloadRow<256>(options, report, table);
  table.notes = {
      "One producer (PublishWithPriority, HIGH, retried when refused) and one consumer "
      "(ProcessBatch, one subscriber); first publish to last dispatch."};
  report.tables.push_back(table);
}

// Self-test of the row deadlines (run only when named): a Sluice row that
// cannot make progress (its bus is closed, so every publish is refused)
// must be reported as not finished and fail the run.
void RunStuckSluice(const Options& options, Report& report) {
  Table table;
  table.id = "selftest-sluice";
  table.title = "Self-test: a Sluice row whose bus refuses every publish (closed)";
  table.columns = {"bus", "M msg/s"};
  auto bus = std::make_unique<AsyncBus<std::variant<Sample<24>>, 131072, ProducerModel::kMulti>>();
  bus->Close();
  std::string why;
  const double rate = EndToEnd<ProducerModel::kMulti, Sample<24>>(options, *bus, 100000, &why);
  table.rows.push_back({"MPSC, closed", why.empty() ? Fixed(rate, 2) : "not finished"});
  if (!why.empty()) ReportNotFinished("selftest-sluice", "MPSC, closed", true, why, &table);
  report.tables.push_back(table);
}

}  // namespace sluice::bench
