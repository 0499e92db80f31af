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

// M msg/s end to end for `messages` messages of payload type T.
template <ProducerModel kModel, typename T, typename Payload>
double EndToEnd(const Options& options, AsyncBus<Payload, 131072, kModel>& bus,
                std::uint64_t messages) {
  // The consumer's count, away from what the producer reads (harness/isolated.hpp).
  Isolated<std::uint64_t> consumed;
  const double seconds = RunProducersAndConsumer(
      options, 1,
      [&](int) {
        auto* const target = &bus;
        const std::uint64_t count = messages;
        T value{};
        for (std::uint64_t i = 0; i < count; ++i) {
          value.seq = i;
          while (!target->PublishWithPriority(value, 1, MessagePriority::HIGH)) {
          }
        }
      },
      [&] {
        const std::uint32_t n = bus.ProcessBatch();
        consumed.value += n;
        return n;
      },
      [&] { return consumed.value >= messages; });
  return static_cast<double>(messages) / seconds / 1e6;
}

template <std::size_t kBytes, ProducerModel kModel>
double PayloadRun(const Options& options) {
  using Payload = std::variant<Sample<kBytes>>;
  auto bus = std::make_unique<AsyncBus<Payload, 131072, kModel>>();
  // Written by the callback for every message: a block of its own.
  Isolated<std::uint64_t> sink;
  // A fresh bus has room for this subscription.
  (void)bus->template Subscribe<Sample<kBytes>>(
      [&sink](const Sample<kBytes>& s) { sink.value += s.seq; });
  const double rate = EndToEnd<kModel, Sample<kBytes>>(options, *bus, options.end_to_end_messages);
  KeepAlive(sink.value);
  return rate;
}

template <std::size_t kBytes>
void PayloadRow(const Options& options, Report& report, Table& table) {
  const double mpsc = PayloadRun<kBytes, ProducerModel::kMulti>(options);
  const double spsc = PayloadRun<kBytes, ProducerModel::kSingle>(options);
  using Bus = AsyncBus<std::variant<Sample<kBytes>>, 131072>;
  table.rows.push_back(
      {std::to_string(kBytes), std::to_string(Bus::kBytesPerSlot), Fixed(mpsc, 2), Fixed(spsc, 2)});
  // Measured once: no spread to judge a change by, so not gated.
  report
      .AddMetric("payload.mpsc." + std::to_string(kBytes) + ".throughput_mps", mpsc, "M msg/s",
                 Better::kHigher)
      .gated = false;
  report
      .AddMetric("payload.spsc." + std::to_string(kBytes) + ".throughput_mps", spsc, "M msg/s",
                 Better::kHigher)
      .gated = false;
}

struct LoadResult {
  double attempted_per_second = 0;
  double admitted_per_second = 0;  // a refused publish is not throughput
  double success_percent = 0;
  double cpu_percent = 0;
  Percentiles latency;
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
  const double wall = RunProducersAndConsumer(
      options, 1,
      [&](int) {
        auto* const target = bus.get();
        Counts mine;  // on the producer's stack; stored once at the end
        const double ticks_per_second = 1e9 / FastClock::NanosPerTick();
        const auto duration_ticks = static_cast<std::uint64_t>(seconds * ticks_per_second);
        const double interval = target_per_second > 0 ? ticks_per_second / target_per_second : 0;
        const std::uint64_t start = FastClock::Ticks();
        double next = static_cast<double>(start);
        for (;;) {
          std::uint64_t now = FastClock::Ticks();
          if (now - start >= duration_ticks) break;
          if (interval > 0) {
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
  const double rate = EndToEnd<ProducerModel::kMulti, Sample<24>>(options, *bus, messages);
  table.rows.push_back(
      {"subscribers " + std::to_string(kPerType) + " + " + std::to_string(kPerType) + " idle",
       "unlimited", "-", Fixed(rate * 1e6, 0), "100.0", "-", "-", "-", Fixed(rate, 2),
       Fixed(1000.0 / rate, 1)});
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

}  // namespace sluice::bench
