// Single-threaded tables: publish cost per mode and batch size (no consumer
// running), and dispatch cost per path (no producer running).
#include <chrono>
#include <map>

#include "harness/stats.hpp"
#include "report/spread.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

enum class PublishCall { kPublish, kPublishFast };

// ns per message to publish `count` messages into an empty bus.
template <typename Bus>
double PublishNanosPerMessage(Bus& bus, std::uint64_t count, PerformanceMode mode,
                              PublishCall call) {
  Drain(bus);
  bus.SetPerformanceMode(mode);
  std::uint64_t refused = 0;
  const double nanos = TimeNanos([&] {
    for (std::uint64_t i = 0; i < count; ++i) {
      const Sample<24> sample{i, 1.0f, 2.0f, 3.0f, 4.0f};
      const bool admitted =
          (call == PublishCall::kPublish ? bus.Publish(sample, 1)
                                         : bus.PublishFast(sample, 1, std::chrono::nanoseconds(i)))
              .IsAdmitted();
      refused += admitted ? 0 : 1;
    }
  });
  if (refused != 0) Progress("warning: " + std::to_string(refused) + " publishes refused");
  return nanos / static_cast<double>(count);
}

struct Variant {
  std::string label;
  std::string key;
  PerformanceMode mode;
  PublishCall call;
};

template <ProducerModel kModel>
void ModesFor(const Options& options, Report& report, Table& table) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  const std::vector<Variant> variants = {
      {"FULL_FEATURED", "full_featured", PerformanceMode::FULL_FEATURED, PublishCall::kPublish},
      {"NO_STATS", "no_stats", PerformanceMode::NO_STATS, PublishCall::kPublish},
      {"BARE_METAL", "bare_metal", PerformanceMode::BARE_METAL, PublishCall::kPublish},
      {"FULL_FEATURED, PublishFast", "full_featured_fast", PerformanceMode::FULL_FEATURED,
       PublishCall::kPublishFast},
  };
  std::map<std::string, std::vector<double>> nanos;
  // Interleaved: every round measures each variant once, so drift in the
  // machine's state hits all of them alike.
  for (int round = 0; round < options.rounds; ++round) {
    for (const Variant& v : variants) {
      nanos[v.key].push_back(
          PublishNanosPerMessage(*bus, options.publish_messages, v.mode, v.call));
    }
  }
  const double bare = Summarize(nanos["bare_metal"]).mean;
  const std::string model = ModelKey(kModel);
  for (const Variant& v : variants) {
    std::vector<double> throughput;
    for (double ns : nanos[v.key]) throughput.push_back(1000.0 / ns);
    const MeanStddev t = Summarize(throughput);
    const MeanStddev n = Summarize(nanos[v.key]);
    const double overhead = n.mean - bare;
    table.rows.push_back(
        {ModelName(kModel), v.label, MeanPlusMinus(throughput, 2), MeanPlusMinus(nanos[v.key], 2),
         v.key == "bare_metal" ? "-" : (overhead >= 0 ? "+" : "") + Fixed(overhead, 2)});
    SetSpread(throughput, &report.AddMetric("modes." + model + "." + v.key + ".throughput_mps",
                                            t.mean, "M msg/s", Better::kHigher));
    SetSpread(nanos[v.key], &report.AddMetric("modes." + model + "." + v.key + ".ns_per_msg",
                                              n.mean, "ns", Better::kLower));
  }
  report.AddMetric("modes." + model + ".overhead_ns", Summarize(nanos["full_featured"]).mean - bare,
                   "ns", Better::kNeither);
}

template <ProducerModel kModel>
void BatchesFor(const Options& options, Report& report, Table& table) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  const std::uint64_t sizes[] = {1000, 10000, 100000};
  std::map<std::uint64_t, std::vector<double>> nanos;
  for (int round = 0; round < options.rounds; ++round) {
    for (std::uint64_t size : sizes) {
      nanos[size].push_back(PublishNanosPerMessage(*bus, size, PerformanceMode::FULL_FEATURED,
                                                   PublishCall::kPublish));
    }
  }
  for (std::uint64_t size : sizes) {
    std::vector<double> throughput;
    for (double ns : nanos[size]) throughput.push_back(1000.0 / ns);
    const MeanStddev t = Summarize(throughput);
    const std::string label = std::to_string(size / 1000) + "K";
    table.rows.push_back(
        {ModelName(kModel), label, MeanPlusMinus(throughput, 2), MeanPlusMinus(nanos[size], 2)});
    SetSpread(throughput,
              &report.AddMetric("batch." + ModelKey(kModel) + "." + label + ".throughput_mps",
                                t.mean, "M msg/s", Better::kHigher));
  }
}

struct NoHistogramTraits : DefaultBusTraits {
  using Latency = NoLatencyHistograms;
};

// Queues `count` stamped messages (so the latency histograms record them).
template <typename B>
void FillStamped(B& bus, std::uint64_t count) {
  Drain(bus);
  const std::chrono::nanoseconds stamp(DefaultBusTraits::Clock::NowNanos());
  std::uint64_t refused = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    refused += bus.PublishFast(Sample<24>{i, 0, 0, 0, 0}, 1, stamp, MessagePriority::HIGH) ? 0 : 1;
  }
  // The per-message figures divide by `count`: every message must be queued.
  if (refused != 0)
    RecordFailure("dispatch: the fill was refused " + std::to_string(refused) + " times");
}

template <typename B>
double CallbackNanos(B& bus, double count) {
  return TimeNanos([&] {
           while (bus.ProcessBatch() > 0) {
           }
         }) /
         count;
}

template <ProducerModel kModel>
void DispatchFor(const Options& options, Report& report, Table& table) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  auto plain_bus =
      std::make_unique<AsyncBus<std::variant<Sample<24>>, 131072, kModel, NoHistogramTraits>>();
  std::uint64_t sink = 0;
  // Fresh buses have room for these subscriptions.
  (void)bus->template Subscribe<Sample<24>>([&sink](const Sample<24>& s) { sink += s.seq; });
  (void)plain_bus->template Subscribe<Sample<24>>([&sink](const Sample<24>& s) { sink += s.seq; });
  std::vector<double> callback_nanos, visitor_nanos, plain_nanos;
  const auto count = static_cast<double>(options.dispatch_messages);
  for (int round = 0; round < options.rounds; ++round) {
    FillStamped(*bus, options.dispatch_messages);
    callback_nanos.push_back(CallbackNanos(*bus, count));
    FillStamped(*bus, options.dispatch_messages);
    visitor_nanos.push_back(
        TimeNanos([&] {
          while (bus->ProcessBatchWith([&sink](const Sample<24>& s) { sink += s.seq; }) > 0) {
          }
        }) /
        count);
    FillStamped(*plain_bus, options.dispatch_messages);
    plain_nanos.push_back(CallbackNanos(*plain_bus, count));
  }
  KeepAlive(sink);
  const MeanStddev callback = Summarize(callback_nanos);
  const MeanStddev visitor = Summarize(visitor_nanos);
  const MeanStddev plain = Summarize(plain_nanos);
  table.rows.push_back(
      {ModelName(kModel), MeanPlusMinus(visitor_nanos, 2), MeanPlusMinus(callback_nanos, 2),
       Fixed(callback.mean / visitor.mean, 2) + "x", MeanPlusMinus(plain_nanos, 2)});
  const std::string model = ModelKey(kModel);
  SetSpread(visitor_nanos, &report.AddMetric("dispatch." + model + ".visitor_ns_per_msg",
                                             visitor.mean, "ns", Better::kLower));
  SetSpread(callback_nanos, &report.AddMetric("dispatch." + model + ".callback_ns_per_msg",
                                              callback.mean, "ns", Better::kLower));
  SetSpread(plain_nanos,
            &report.AddMetric("dispatch." + model + ".callback_no_histograms_ns_per_msg",
                              plain.mean, "ns", Better::kLower));
}

}  // namespace

void RunModes(const Options& options, Report& report) {
  PinThisThread(options.ProducerCpu(0));
  Table table;
  table.id = "modes";
  table.title = "1. Mode comparison: publish only, " + WithThousands(options.publish_messages) +
                " messages x " + std::to_string(options.rounds) + " rounds, 131,072 slots";
  table.columns = {"bus", "mode", "M msg/s", "ns/msg", "overhead vs BARE ns/msg"};
  ModesFor<ProducerModel::kMulti>(options, report, table);
  ModesFor<ProducerModel::kSingle>(options, report, table);
  table.notes = {
      "Mean +- stddev over rounds; variants interleaved within each round; one producer, no "
      "consumer running (the queue is drained between rounds, untimed).",
      "Publish() reads the bus clock (CounterClock) for timestamp_ns in FULL_FEATURED and "
      "NO_STATS, not in BARE_METAL; the PublishFast row (caller's timestamp) shows the "
      "features without the clock."};
  report.tables.push_back(table);
}

void RunBatchSizes(const Options& options, Report& report) {
  PinThisThread(options.ProducerCpu(0));
  Table table;
  table.id = "batch";
  table.title =
      "2. Batch sizes: FULL_FEATURED publish, " + std::to_string(options.rounds) + " rounds";
  table.columns = {"bus", "batch", "M msg/s", "ns/msg"};
  BatchesFor<ProducerModel::kMulti>(options, report, table);
  BatchesFor<ProducerModel::kSingle>(options, report, table);
  table.notes = {
      "Publish() of the 24-byte payload into an empty 131,072-slot bus; mean +- stddev."};
  report.tables.push_back(table);
}

void RunDispatch(const Options& options, Report& report) {
  PinThisThread(options.ConsumerCpu());
  Table table;
  table.id = "dispatch";
  table.title = "4. ProcessBatchWith (visitor) vs ProcessBatch (callbacks): " +
                WithThousands(options.dispatch_messages) + " queued messages, single thread";
  table.columns = {"bus", "visitor ns/msg", "callbacks ns/msg", "callbacks / visitor",
                   "callbacks, no histograms ns/msg"};
  DispatchFor<ProducerModel::kMulti>(options, report, table);
  DispatchFor<ProducerModel::kSingle>(options, report, table);
  table.notes = {
      "One subscriber (callbacks) or one visitor summing seq; time to drain the queue "
      "divided by messages; mean +- stddev over " +
          std::to_string(options.rounds) + " rounds.",
      "FULL_FEATURED: messages carry a timestamp, so the latency histograms record each one; "
      "the last column is a bus built with NoLatencyHistograms."};
  report.tables.push_back(table);
}

}  // namespace sluice::bench

namespace sluice::bench {
namespace {

// ns per message to publish `count` messages into an empty bus, one thread:
// one PublishWithPriority each, or PublishBatch in chunks of `chunk`.
template <typename Bus, std::size_t kBytes>
double BatchPublishNanos(Bus& bus, const std::vector<Sample<kBytes>>& messages, std::size_t chunk) {
  Drain(bus);
  std::size_t admitted = 0;
  const double nanos = TimeNanos([&] {
    if (chunk == 1) {
      for (const Sample<kBytes>& message : messages) {
        admitted += bus.PublishWithPriority(message, 1, MessagePriority::HIGH) ? 1 : 0;
      }
    } else {
      for (std::size_t at = 0; at < messages.size(); at += chunk) {
        const auto first = messages.begin() + static_cast<std::ptrdiff_t>(at);
        const auto last =
            messages.begin() + static_cast<std::ptrdiff_t>(std::min(at + chunk, messages.size()));
        admitted += bus.PublishBatch(first, last, 1, MessagePriority::HIGH).AdmittedCount();
      }
    }
  });
  if (admitted != messages.size()) RecordFailure("publish batch: a publish was refused");
  return nanos / static_cast<double>(messages.size());
}

// A message built by a constructor from what the producer has in hand, as
// Emplace builds it in its slot; every byte written, like Sample's copy.
template <std::size_t kBytes>
struct BuiltSample {
  explicit BuiltSample(std::uint64_t sequence) noexcept : seq(sequence) {
    for (std::size_t i = 0; i < sizeof(fill); ++i)
      fill[i] = static_cast<unsigned char>(sequence + i);
  }
  std::uint64_t seq;
  unsigned char fill[kBytes - sizeof(std::uint64_t)];
};

// ns per message to publish `count` BuiltSamples, one thread: Publish of a
// message built first (then copied into its slot), or Emplace (built there).
template <typename Bus, std::size_t kBytes>
double BuiltPublishNanos(Bus& bus, std::size_t count, bool emplace) {
  Drain(bus);
  std::size_t admitted = 0;
  const double nanos = TimeNanos([&] {
    for (std::size_t i = 0; i < count; ++i) {
      const bool ok =
          (emplace ? bus.template Emplace<BuiltSample<kBytes>>(1, MessagePriority::HIGH, i)
                   : bus.PublishWithPriority(BuiltSample<kBytes>(i), 1, MessagePriority::HIGH))
              .IsAdmitted();
      admitted += ok ? 1 : 0;
    }
  });
  if (admitted != count) RecordFailure("publish batch: an emplace or publish was refused");
  return nanos / static_cast<double>(count);
}

template <ProducerModel kModel, std::size_t kBytes>
void PublishBatchRows(const Options& options, Report& report, Table& table) {
  using Bus = AsyncBus<std::variant<Sample<kBytes>>, 4096, kModel>;
  auto bus = std::make_unique<Bus>();
  std::vector<Sample<kBytes>> messages(1024);
  for (std::size_t i = 0; i < messages.size(); ++i) messages[i].seq = i;
  const std::size_t chunks[] = {1, 16, 256};
  std::map<std::size_t, std::vector<double>> nanos;
  for (int round = 0; round < options.rounds; ++round) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      for (std::size_t chunk : chunks) {
        nanos[chunk].push_back(BatchPublishNanos(*bus, messages, chunk));
      }
    }
  }
  const std::string key = "publish_batch." + ModelKey(kModel) + "." + std::to_string(kBytes);
  std::vector<std::string> row = {ModelName(kModel), std::to_string(kBytes)};
  const double single = Median(nanos[1]);
  for (std::size_t chunk : chunks) {
    const double median = Median(nanos[chunk]);
    row.push_back(Fixed(median, 2) + (chunk == 1 ? "" : " (" + Fixed(median / single, 2) + "x)"));
    report
        .AddMetric(key + ".chunk" + std::to_string(chunk) + ".ns_per_msg", median, "ns",
                   Better::kLower)
        .gated = false;
  }
  // Emplace against Publish of the same message built from the same value.
  using BuiltBus = AsyncBus<std::variant<BuiltSample<kBytes>>, 4096, kModel>;
  auto built_bus = std::make_unique<BuiltBus>();
  std::vector<double> built_publish, built_emplace, emplace_ratio;
  for (int round = 0; round < options.rounds; ++round) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      built_publish.push_back(BuiltPublishNanos<BuiltBus, kBytes>(*built_bus, 1024, false));
      built_emplace.push_back(BuiltPublishNanos<BuiltBus, kBytes>(*built_bus, 1024, true));
      emplace_ratio.push_back(built_emplace.back() / built_publish.back());
    }
  }
  row.push_back(Fixed(Median(built_publish), 2));
  row.push_back(Fixed(Median(built_emplace), 2) + " (" + Fixed(Median(emplace_ratio), 2) + "x)");
  report.AddMetric(key + ".built_publish.ns_per_msg", Median(built_publish), "ns", Better::kLower)
      .gated = false;
  report.AddMetric(key + ".emplace.ns_per_msg", Median(built_emplace), "ns", Better::kLower).gated =
      false;
  table.rows.push_back(row);
}

}  // namespace

void RunPublishBatch(const Options& options, Report& report) {
  Table table;
  table.id = "pubbatch";
  table.title = "12. PublishBatch and Emplace against single publishes: ns per message, one thread";
  table.columns = {"bus",
                   "payload bytes",
                   "one at a time",
                   "PublishBatch of 16",
                   "PublishBatch of 256",
                   "Publish(T(value))",
                   "Emplace<T>(value)"};
  PublishBatchRows<ProducerModel::kSingle, 24>(options, report, table);
  PublishBatchRows<ProducerModel::kMulti, 24>(options, report, table);
  PublishBatchRows<ProducerModel::kSingle, 256>(options, report, table);
  PublishBatchRows<ProducerModel::kMulti, 256>(options, report, table);
  table.notes = {
      "1,024 messages published HIGH, FULL_FEATURED, into an empty bus of 4,096 slots on one "
      "thread (no consumer running; the bus is drained between runs, untimed); median of " +
          std::to_string(options.rounds * 20) +
          " runs per column, interleaved; in brackets the ratio to one at a time.",
      "One at a time reads the bus clock per message; a batch reads it once and claims its "
      "slots with one claim (one CAS with several producers).",
      "The last two columns publish a message type with a constructor (every byte written) "
      "built from one value: Publish of a message built first and copied into its slot, "
      "against Emplace, which builds it in the slot; 1,024 messages a run, interleaved, "
      "median; in brackets the median of the per-run ratios."};
  report.tables.push_back(table);
}

}  // namespace sluice::bench
