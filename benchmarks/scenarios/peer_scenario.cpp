// The peer comparison: Sluice in several configurations against the fastest
// bare queues and common baselines, same payload, capacity and pinning, in
// one run, interleaved round by round; each figure also as a ratio to the
// fastest peer of the same round.
#include <algorithm>
#include <cctype>
#include <map>

#include "harness/stats.hpp"
#include "peers/peer_adapters.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

// One message in flight: the consumer timestamps it and acknowledges.
struct LatencyProbe {
  CrossCoreSamples* one_way = nullptr;
  std::atomic<std::uint64_t> acknowledged{0};
  void operator()(const Message& m) {
    one_way->Add(m.seq, FastClock::Ticks());
    // Publishes the sample to the producer, which reads it after the join.
    acknowledged.store(acknowledged.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
};

struct LatencyResult {
  Percentiles one_way;
  Percentiles round_trip;
};

template <template <typename> class Adapter>
double EndToEndMps(const Options& options, std::uint64_t messages) {
  // Written by the consumer for every message: a block of its own, away
  // from the queue pointer the producer reads (harness/isolated.hpp).
  Isolated<CountProbe> probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe.value);
  const double seconds = RunProducersAndConsumer(
      options, 1,
      [&](int) {
        auto* const target = queue.get();
        const std::uint64_t count = messages;
        for (std::uint64_t i = 0; i < count; ++i) {
          const Message m{i, 1, 2, 3, 4};
          while (!target->TryPush(m)) {
          }
        }
      },
      [&] { return static_cast<std::uint32_t>(queue->PopSome(probe.value)); },
      [&] { return probe.value.count >= messages; });
  if (probe.value.count != messages) Progress("warning: a peer lost messages");
  return static_cast<double>(messages) / seconds / 1e6;
}

template <template <typename> class Adapter>
double PublishOnlyMps(const Options& options, std::uint64_t messages) {
  CountProbe probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe);
  PinThisThread(options.ProducerCpu(0));
  std::uint64_t refused = 0;
  const double nanos = TimeNanos([&] {
    for (std::uint64_t i = 0; i < messages; ++i)
      refused += queue->TryPush(Message{i, 1, 2, 3, 4}) ? 0 : 1;
  });
  if (refused != 0) Progress("warning: publish-only refusals");
  return static_cast<double>(messages) / nanos * 1000.0;
}

template <template <typename> class Adapter>
LatencyResult Latency(const Options& options, std::size_t samples) {
  // The consumer's samples in a block of their own; the probe holds the
  // acknowledgement the producer waits for, alone on its line so the only
  // transfer is the one measured (harness/isolated.hpp).
  Isolated<CrossCoreSamples> one_way{CrossCoreSamples(samples, FastClock::NanosPerTick())};
  Isolated<LatencyProbe> probe;
  probe.value.one_way = &one_way.value;
  Isolated<std::atomic<bool>> stop;
  std::vector<double> round_trip(samples);
  auto queue = std::make_unique<Adapter<LatencyProbe>>(probe.value);
  std::thread consumer([&] {
    // The producer is this function's thread: the consumer reads nothing
    // of its stack while it runs.
    auto* const source = queue.get();
    LatencyProbe& acknowledge = probe.value;
    const std::atomic<bool>& stopping = stop.value;
    PinThisThread(options.ConsumerCpu());
    while (!stopping.load(std::memory_order_relaxed)) source->PopSome(acknowledge);
  });
  PinThisThread(options.ProducerCpu(0));
  auto* const target = queue.get();
  const std::atomic<std::uint64_t>& acknowledged = probe.value.acknowledged;
  for (std::size_t i = 0; i < samples; ++i) {
    const std::uint64_t start = FastClock::Ticks();
    while (!target->TryPush(Message{start, 0, 0, 0, 0})) {
    }
    while (acknowledged.load(std::memory_order_acquire) != i + 1) {
    }
    round_trip[i] = FastClock::TicksToNanos(FastClock::Ticks() - start);
  }
  stop.value.store(true);
  consumer.join();
  return {one_way.value.Summarize(), ComputePercentiles(round_trip)};
}

struct Contender {
  std::string name;
  bool is_sluice;
  double (*end_to_end)(const Options&, std::uint64_t);
  double (*publish_only)(const Options&, std::uint64_t);
  LatencyResult (*latency)(const Options&, std::size_t);
};

template <template <typename> class Adapter>
Contender Make(std::string name, bool is_sluice) {
  return {std::move(name), is_sluice, &EndToEndMps<Adapter>, &PublishOnlyMps<Adapter>,
          &Latency<Adapter>};
}

std::vector<Contender> Contenders(std::vector<std::string>* missing) {
  (void)missing;  // used only when a peer is absent
  std::vector<Contender> c = {
      Make<SpscBareFastVisitor>("Sluice SPSC BARE_METAL PublishFast visitor", true),
      Make<SpscFullCallbacks>("Sluice SPSC FULL_FEATURED Publish callbacks", true),
      Make<SpscFullFastCallbacks>("Sluice SPSC FULL_FEATURED PublishFast callbacks", true),
      Make<SpscFullVisitor>("Sluice SPSC FULL_FEATURED Publish visitor", true),
      Make<SpscNoStatsCallbacks>("Sluice SPSC NO_STATS Publish callbacks", true),
      Make<MpscBareFastVisitor>("Sluice MPSC BARE_METAL PublishFast visitor", true),
      Make<MpscFullCallbacks>("Sluice MPSC FULL_FEATURED Publish callbacks", true),
      Make<MpscFullFastCallbacks>("Sluice MPSC FULL_FEATURED PublishFast callbacks", true),
      Make<MpscFullVisitor>("Sluice MPSC FULL_FEATURED Publish visitor", true),
      Make<MpscNoStatsCallbacks>("Sluice MPSC NO_STATS Publish callbacks", true),
      Make<MutexDequeAdapter>("std::mutex + std::deque", false),
  };
#if SLUICE_PEER_ATOMIC_QUEUE
  c.push_back(Make<AtomicQueueSpscAdapter>("atomic_queue AtomicQueueB2 SPSC", false));
  c.push_back(Make<AtomicQueueMpmcAdapter>("atomic_queue AtomicQueueB2 MPMC", false));
#else
  missing->push_back("atomic_queue (libatomic-queue-dev)");
#endif
#if SLUICE_PEER_CONCURRENTQUEUE
  c.push_back(Make<ConcurrentQueueAdapter>("moodycamel ConcurrentQueue, tokens, bulk", false));
#else
  missing->push_back("moodycamel ConcurrentQueue (libconcurrentqueue-dev)");
#endif
#if SLUICE_PEER_BOOST_LOCKFREE
  c.push_back(Make<BoostSpscAdapter>("boost::lockfree::spsc_queue, bulk pop", false));
  c.push_back(Make<BoostQueueAdapter>("boost::lockfree::queue (MPMC)", false));
#else
  missing->push_back("Boost.Lockfree (libboost-dev)");
#endif
#if SLUICE_PEER_ZEROMQ
  c.push_back(Make<ZeroMqAdapter>("ZeroMQ inproc PUSH/PULL", false));
#else
  missing->push_back("ZeroMQ (libzmq3-dev, cppzmq-dev)");
#endif
  return c;
}

}  // namespace

void RunPeers(const Options& options, Report& report) {
  std::vector<std::string> missing;
  const std::vector<Contender> contenders = Contenders(&missing);
  const std::uint64_t messages = std::max<std::uint64_t>(options.end_to_end_messages / 2, 10000);
  const std::uint64_t publish_messages = 50000;  // fits every peer's capacity
  const std::size_t samples = std::max<std::size_t>(options.latency_samples / 2, 1000);

  // Throughput, interleaved: each round runs every contender once.
  std::vector<std::vector<double>> rates(contenders.size());
  std::vector<std::vector<double>> ratios(contenders.size());
  std::vector<double> probes;
  for (int round = 0; round < options.rounds; ++round) {
    Progress("peers: round " + std::to_string(round + 1) + "/" + std::to_string(options.rounds));
    if (options.separate_cores)
      probes.push_back(PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu()));
    std::vector<double> this_round(contenders.size());
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      this_round[i] = contenders[i].end_to_end(options, messages);
      rates[i].push_back(this_round[i]);
    }
    double fastest_peer = 0;
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      if (!contenders[i].is_sluice) fastest_peer = std::max(fastest_peer, this_round[i]);
    }
    for (std::size_t i = 0; i < contenders.size(); ++i)
      ratios[i].push_back(this_round[i] / fastest_peer);
  }

  Progress("peers: publish-only and latency");
  std::vector<double> publish_only(contenders.size());
  std::vector<LatencyResult> latency(contenders.size());
  double best_peer_rtt = 1e300;
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    publish_only[i] = contenders[i].publish_only(options, publish_messages);
    latency[i] = contenders[i].latency(options, samples);
    if (!contenders[i].is_sluice)
      best_peer_rtt = std::min(best_peer_rtt, latency[i].round_trip.p50);
  }
  const GapProfile gaps = MeasureGaps(options.ConsumerCpu(), 200);

  Table table;
  table.id = "peers";
  table.title = "10. Peers: Sluice against bare queues, end to end, 24-byte payload, " +
                WithThousands(kPeerCapacity) + " slots, 1 producer -> 1 consumer";
  table.columns = {"implementation",       "e2e M msg/s", "x fastest peer",
                   "publish-only M msg/s", "P50 ns",      "P99 ns",
                   "RTT P50 ns",           "RTT P99 ns",  "RTT P50 x best peer"};
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    const double rate = Median(rates[i]);
    const double ratio = Median(ratios[i]);
    const LatencyResult& l = latency[i];
    const double rtt_ratio = l.round_trip.p50 / best_peer_rtt;
    table.rows.push_back({contenders[i].name, Fixed(rate, 2), Fixed(ratio, 2),
                          Fixed(publish_only[i], 1), Fixed(l.one_way.p50, 0),
                          Fixed(l.one_way.p99, 0), Fixed(l.round_trip.p50, 0),
                          Fixed(l.round_trip.p99, 0), Fixed(rtt_ratio, 2)});
    const std::string key = "peers." + MetricSlug(contenders[i].name);
    // Only Sluice's own figures are gated, and only the one measured over
    // rounds; the peers' figures are context.
    Metric& e2e = report.AddMetric(key + ".e2e_mps", rate, "M msg/s", Better::kHigher);
    SetSpread(rates[i], &e2e);
    e2e.gated = e2e.gated && contenders[i].is_sluice;
    report.AddMetric(key + ".ratio_to_fastest_peer", ratio, "x", Better::kNeither);
    report.AddMetric(key + ".publish_only_mps", publish_only[i], "M msg/s", Better::kHigher).gated =
        false;
    report.AddMetric(key + ".p50_ns", l.one_way.p50, "ns", Better::kNeither);
    report.AddMetric(key + ".rtt_p50_ns", l.round_trip.p50, "ns", Better::kLower).gated = false;
    report.AddMetric(key + ".rtt_p99_ns", l.round_trip.p99, "ns", Better::kNeither);
  }
  table.notes.push_back(
      "End to end: " + WithThousands(messages) + " messages, first push to last pop, median of " +
      std::to_string(options.rounds) +
      " rounds; every round runs every implementation once, and 'x fastest peer' is the "
      "median over rounds of the ratio to that round's fastest non-Sluice queue.");
  table.notes.push_back(
      "Every consumer pops up to 256 messages a call and busy-polls; producers retry a "
      "full queue. Publish-only: " +
      WithThousands(publish_messages) +
      " pushes into an empty queue, one thread. Latency: " + WithThousands(samples) +
      " messages, one in flight; RTT until the producer sees the consumer's ack.");
  table.notes.push_back(ClockStepNote());
  table.notes.push_back(
      "Sluice PublishFast rows stand for a caller with its own timestamp: a bus-clock reading "
      "taken every " +
      std::to_string(kStampEvery) +
      " pushes, so FULL_FEATURED consumers record every message in the latency histograms.");
  if (!probes.empty()) {
    table.notes.push_back("Placement probe per round (cache-line ping-pong RTT): min " +
                          Fixed(*std::min_element(probes.begin(), probes.end()), 0) + " ns, max " +
                          Fixed(*std::max_element(probes.begin(), probes.end()), 0) + " ns.");
  }
  table.notes.push_back("Machine noise beside the tails: a pinned spinning thread lost " +
                        Fixed(gaps.lost_percent, 2) + " % of " + Fixed(gaps.window_ms, 0) +
                        " ms in gaps over 1 us; longest " + Fixed(gaps.max_gap_us, 1) + " us.");
  std::string skewed;
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    if (latency[i].one_way.negative == 0) continue;
    skewed += (skewed.empty() ? "" : ", ") + contenders[i].name + " " +
              WithThousands(latency[i].one_way.negative);
  }
  table.notes.push_back(
      "One-way differences below zero (the two cores' counters skewed; counted, left out of "
      "P50 and P99, never wrapped): " +
      (skewed.empty() ? std::string("none") : skewed) + ".");
  for (const std::string& peer : missing)
    table.notes.push_back("Not built: " + peer + " was not found by CMake.");
  report.tables.push_back(table);
}

}  // namespace sluice::bench
