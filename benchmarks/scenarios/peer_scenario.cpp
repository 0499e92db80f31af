// The peer comparison: Sluice in several configurations against the fastest
// bare queues, each in its fastest documented usage, and common baselines,
// same payload, capacity and pinning, in one run, interleaved round by round;
// each figure also as a ratio to the fastest peer of the same round. Every
// round runs between two placement probes and counts in its placement
// state's rows; a round whose state changed between the two is left out.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>

#include "harness/stats.hpp"
#include "peers/peer_adapters.hpp"
#include "report/spread.hpp"
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

// One latency run's samples, kept raw so rounds in one placement state pool.
struct LatencyRun {
  CrossCoreSamples one_way;
  std::vector<double> round_trip;
  std::string not_finished;  // why, when the run did not finish
};

// A waiting adapter's consumer pops whole batches of kPeerBatch that it
// counts on the producer to push. A producer that gives up (at a multiple of
// kDeadlinePollEvery, itself a multiple of kPeerBatch) says where it stopped
// and pushes one more batch of fillers: the consumer waits inside at most
// that batch, and pops nothing at or past `stopped_at` after it.
static_assert(kDeadlinePollEvery % kPeerBatch == 0);

template <template <typename> class Adapter>
double EndToEndMps(const Options& options, std::uint64_t messages, std::string* not_finished) {
  using Queue = Adapter<CountProbe>;
  // Written by the consumer for every message: a block of its own, away
  // from the queue pointer the producer reads (harness/isolated.hpp).
  Isolated<CountProbe> probe;
  auto queue = std::make_unique<Queue>(probe.value);
  RowDeadline deadline("peers: end to end", CountedRowSeconds(options, messages));
  // Written once, by a producer that gives up (waiting adapters only).
  Isolated<std::atomic<std::uint64_t>> stopped_at;
  stopped_at.value.store(messages);
  const double seconds = RunProducersAndConsumer(
      options, deadline, 1,
      [&](int) {
        Queue* const target = queue.get();
        RowDeadline& limit = deadline;
        const std::uint64_t count = messages;
        for (std::uint64_t i = 0; i < count; ++i) {
          if (limit.ExpiredAt(i)) {
            (void)limit.TimedOut("the producer was still publishing");
            if constexpr (IsBlocking<Queue>::value) {
              stopped_at.value.store(i, std::memory_order_release);
              for (std::uint64_t k = 0; k < kPeerBatch && i + k < count; ++k)
                target->Push(Message{i + k, 0, 0, 0, 0});
            }
            return;
          }
          const Message m{i, 1, 2, 3, 4};
          if constexpr (IsBlocking<Queue>::value) {
            target->Push(m);
          } else if (!RetryUntil(limit, "the producer retried a full queue",
                                 [&] { return target->TryPush(m); })) {
            return;
          }
        }
      },
      [&, messages]() -> std::uint32_t {
        if constexpr (IsBlocking<Queue>::value) {
          if (probe.value.count >= stopped_at.value.load(std::memory_order_acquire)) return 0;
        }
        // A waiting adapter pops no more than are still to come.
        return static_cast<std::uint32_t>(
            PopExpected(*queue, probe.value, messages - probe.value.count));
      },
      [&] { return probe.value.count >= messages; });
  if (!deadline.Finished()) {
    *not_finished = deadline.Why();
    return 0;
  }
  if (probe.value.count != messages) {
    *not_finished = "delivered " + WithThousands(probe.value.count) + " of " +
                    WithThousands(messages) + " messages";
    return 0;
  }
  return static_cast<double>(messages) / seconds / 1e6;
}

template <template <typename> class Adapter>
double PublishOnlyMps(const Options& options, std::uint64_t messages) {
  CountProbe probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe);
  PinThisThread(options.ProducerCpu(0));
  std::uint64_t refused = 0;
  // No waits: each push is tried once (a waiting adapter's always fits: the
  // count fits every queue's capacity).
  const double nanos = TimeNanos([&] {
    for (std::uint64_t i = 0; i < messages; ++i)
      refused += PushOne(*queue, Message{i, 1, 2, 3, 4}) ? 0 : 1;
  });
  if (refused != 0) Progress("warning: publish-only refusals");
  return static_cast<double>(messages) / nanos * 1000.0;
}

template <template <typename> class Adapter>
LatencyRun Latency(const Options& options, std::size_t samples) {
  using Queue = Adapter<LatencyProbe>;
  // The consumer's samples in a block of their own; the probe holds the
  // acknowledgement the producer waits for, alone on its line so the only
  // transfer is the one measured (harness/isolated.hpp).
  Isolated<CrossCoreSamples> one_way{CrossCoreSamples(samples, FastClock::NanosPerTick())};
  Isolated<LatencyProbe> probe;
  probe.value.one_way = &one_way.value;
  Isolated<std::atomic<bool>> stop;
  std::vector<double> round_trip(samples);
  auto queue = std::make_unique<Queue>(probe.value);
  RowDeadline deadline("peers: latency", CountedRowSeconds(options, samples));
  std::thread consumer([&] {
    // The producer is this function's thread: the consumer reads nothing
    // of its stack while it runs.
    Queue* const source = queue.get();
    LatencyProbe& acknowledge = probe.value;
    const std::atomic<bool>& stopping = stop.value;
    const std::size_t count = samples;
    PinThisThread(options.ConsumerCpu());
    if constexpr (IsBlocking<Queue>::value) {
      // A waiting pop returns only with a message: pop exactly as many (a
      // producer that gives up pushes fillers for the rest).
      for (std::size_t i = 0; i < count; ++i) source->Pop(acknowledge, 1);
    } else {
      while (!stopping.load(std::memory_order_relaxed)) source->PopSome(acknowledge);
    }
  });
  PinThisThread(options.ProducerCpu(0));
  Queue* const target = queue.get();
  const std::atomic<std::uint64_t>& acknowledged = probe.value.acknowledged;
  std::size_t pushed = 0;
  for (std::size_t i = 0; i < samples; ++i) {
    const std::uint64_t start = FastClock::Ticks();
    if constexpr (IsBlocking<Queue>::value) {
      target->Push(Message{start, 0, 0, 0, 0});
    } else if (!RetryUntil(deadline, "the producer retried a full queue", [&] {
                 return target->TryPush(Message{start, 0, 0, 0, 0});
               })) {
      break;
    }
    ++pushed;
    if (!WaitUntil(deadline, "the producer waited for the consumer's acknowledgement",
                   [&] { return acknowledged.load(std::memory_order_acquire) == i + 1; })) {
      break;
    }
    round_trip[i] = FastClock::TicksToNanos(FastClock::Ticks() - start);
  }
  if constexpr (IsBlocking<Queue>::value) {
    for (; pushed < samples; ++pushed) target->Push(Message{0, 0, 0, 0, 0});
  }
  stop.value.store(true);
  consumer.join();
  if (!deadline.Finished()) return {CrossCoreSamples(0, 1.0), {}, deadline.Why()};
  return {std::move(one_way.value), std::move(round_trip), {}};
}

struct Contender {
  std::string name;
  bool is_sluice;
  double (*end_to_end)(const Options&, std::uint64_t, std::string*);
  double (*publish_only)(const Options&, std::uint64_t);
  LatencyRun (*latency)(const Options&, std::size_t);
};

template <template <typename> class Adapter>
Contender Make(std::string name, bool is_sluice) {
  return {std::move(name), is_sluice, &EndToEndMps<Adapter>, &PublishOnlyMps<Adapter>,
          &Latency<Adapter>};
}

// Each name says the calls the row measures.
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
      Make<MutexDequeAdapter>("std::mutex + std::deque, consumer swaps the deque out", false),
  };
#if SLUICE_PEER_ATOMIC_QUEUE
  c.push_back(Make<AtomicQueueSpscBlockingAdapter>(
      "atomic_queue AtomicQueueB2 SPSC, blocking push/pop (spin)", false));
  c.push_back(
      Make<AtomicQueueSpscAdapter>("atomic_queue AtomicQueueB2 SPSC, try_push/try_pop", false));
  c.push_back(Make<AtomicQueueMpmcBlockingAdapter>(
      "atomic_queue AtomicQueueB2 MPMC, blocking push/pop (spin)", false));
#else
  missing->push_back("atomic_queue (libatomic-queue-dev)");
#endif
#if SLUICE_PEER_CONCURRENTQUEUE
  c.push_back(Make<ConcurrentQueueEnqueueAdapter>(
      "moodycamel ConcurrentQueue, tokens, enqueue, try_dequeue_bulk", false));
  c.push_back(Make<ConcurrentQueueTryEnqueueAdapter>(
      "moodycamel ConcurrentQueue, tokens, try_enqueue, try_dequeue_bulk", false));
#else
  missing->push_back("moodycamel ConcurrentQueue (libconcurrentqueue-dev)");
#endif
#if SLUICE_PEER_BOOST_LOCKFREE
  c.push_back(
      Make<BoostSpscAdapter>("boost::lockfree::spsc_queue, push, bulk pop into an array", false));
  c.push_back(Make<BoostQueueAdapter>("boost::lockfree::queue (MPMC), bounded_push, pop", false));
#else
  missing->push_back("Boost.Lockfree (libboost-dev)");
#endif
#if SLUICE_PEER_ZEROMQ
  c.push_back(Make<ZeroMqAdapter>("ZeroMQ inproc PUSH/PULL, one message per send", false));
#else
  missing->push_back("ZeroMQ (libzmq3-dev, cppzmq-dev)");
#endif
  return c;
}

// What one contender measured in the rounds of one placement state.
struct StateFigures {
  std::vector<double> rates;   // end to end, M msg/s, one per round
  std::vector<double> ratios;  // to the round's fastest peer
  CrossCoreSamples one_way{0, 1.0};
  std::vector<double> round_trip;
};

// The rounds of one placement state (or of a run on one CPU, not probed).
struct StateGroup {
  std::string name;
  int rounds = 0;
  std::vector<double> probes;         // before and after, ns
  std::vector<StateFigures> figures;  // one per contender
};

}  // namespace

void RunPeers(const Options& options, Report& report) {
  std::vector<std::string> missing;
  const std::vector<Contender> contenders = Contenders(&missing);
  const std::uint64_t messages = std::max<std::uint64_t>(options.end_to_end_messages / 2, 10000);
  const std::uint64_t publish_messages = 50000;  // fits every peer's capacity
  const std::size_t rounds = static_cast<std::size_t>(std::max(options.rounds, 1));
  // The latency samples are spread over the rounds, so each state's rounds
  // pool theirs.
  const std::size_t samples_per_round =
      std::max<std::size_t>(options.latency_samples / 2 / rounds, 200);

  // Groups: the three placement states, in order, then "one CPU" for a run
  // whose producer and consumer share a CPU (no probe).
  std::vector<StateGroup> groups(std::size(kPlacements) + 1);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    groups[g].name =
        g < std::size(kPlacements) ? PlacementName(kPlacements[g]) : "one CPU, not probed";
    groups[g].figures.resize(contenders.size());
  }
  const auto probe = [&options] {
    return PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu());
  };
  std::vector<std::string> left_out;
  // The first reason each contender did not finish a run, if one did not:
  // its row then reports that instead of figures.
  std::vector<std::string> not_finished(contenders.size());
  const auto note_unfinished = [&](std::size_t i, const char* part, const std::string& why) {
    if (!why.empty() && not_finished[i].empty()) not_finished[i] = part + why;
  };

  // Each round runs every contender once end to end, then once for latency,
  // between two placement probes.
  for (std::size_t round = 0; round < rounds; ++round) {
    Progress("peers: round " + std::to_string(round + 1) + "/" + std::to_string(rounds));
    const double before = options.separate_cores ? probe() : 0;
    std::vector<double> this_round(contenders.size());
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      std::string why;
      this_round[i] = contenders[i].end_to_end(options, messages, &why);
      note_unfinished(i, "end to end: ", why);
    }
    std::vector<LatencyRun> latency;
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      latency.push_back(contenders[i].latency(options, samples_per_round));
      note_unfinished(i, "latency: ", latency.back().not_finished);
    }
    const double after = options.separate_cores ? probe() : 0;

    std::size_t index = groups.size() - 1;
    if (options.separate_cores) {
      const Placement at_start = ClassifyPlacement(before);
      const Placement at_end = ClassifyPlacement(after);
      if (at_start != at_end) {
        left_out.push_back("round " + std::to_string(round + 1) + " (" + Fixed(before, 0) +
                           " ns, " + PlacementName(at_start) + ", then " + Fixed(after, 0) +
                           " ns, " + PlacementName(at_end) + ")");
        continue;
      }
      index = static_cast<std::size_t>(at_start);
    }
    StateGroup& group = groups[index];
    ++group.rounds;
    if (options.separate_cores) group.probes.insert(group.probes.end(), {before, after});
    double fastest_peer = 0;
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      if (!contenders[i].is_sluice && not_finished[i].empty())
        fastest_peer = std::max(fastest_peer, this_round[i]);
    }
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      if (!not_finished[i].empty()) continue;
      StateFigures& f = group.figures[i];
      f.rates.push_back(this_round[i]);
      f.ratios.push_back(this_round[i] / fastest_peer);
      f.one_way.Append(latency[i].one_way);
      f.round_trip.insert(f.round_trip.end(), latency[i].round_trip.begin(),
                          latency[i].round_trip.end());
    }
  }

  Progress("peers: publish-only");
  std::vector<double> publish_only(contenders.size());
  for (std::size_t i = 0; i < contenders.size(); ++i)
    publish_only[i] = contenders[i].publish_only(options, publish_messages);
  const GapProfile gaps = MeasureGaps(options.ConsumerCpu(), 200);

  Table table;
  table.id = "peers";
  table.title = "10. Peers: Sluice against bare queues, end to end, 24-byte payload, " +
                WithThousands(kPeerCapacity) +
                " slots, 1 producer -> 1 consumer, by placement state";
  table.columns = {
      "placement", "implementation", "e2e M msg/s", "x fastest peer", "publish-only M msg/s",
      "P50 ns",    "P99 ns",         "RTT P50 ns",  "RTT P99 ns",     "RTT P50 x best peer"};
  std::string skewed;
  for (StateGroup& group : groups) {
    if (group.rounds == 0) continue;
    std::vector<Percentiles> one_way(contenders.size());
    std::vector<Percentiles> round_trip(contenders.size());
    double best_peer_rtt = 0;
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      one_way[i] = group.figures[i].one_way.Summarize();
      round_trip[i] = ComputePercentiles(group.figures[i].round_trip);
      if (!contenders[i].is_sluice && round_trip[i].samples != 0 &&
          (best_peer_rtt == 0 || round_trip[i].p50 < best_peer_rtt)) {
        best_peer_rtt = round_trip[i].p50;
      }
    }
    const std::string slug = MetricSlug(group.name);
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      if (!not_finished[i].empty()) {
        table.rows.push_back(
            {group.name, contenders[i].name, "not finished", "-", "-", "-", "-", "-", "-", "-"});
        continue;
      }
      const StateFigures& f = group.figures[i];
      const double rate = Median(f.rates);
      const double ratio = Median(f.ratios);
      const double rtt_ratio = best_peer_rtt > 0 ? round_trip[i].p50 / best_peer_rtt : 0;
      table.rows.push_back({group.name, contenders[i].name, Fixed(rate, 2), Fixed(ratio, 2),
                            Fixed(publish_only[i], 1), Fixed(one_way[i].p50, 0),
                            Fixed(one_way[i].p99, 0), Fixed(round_trip[i].p50, 0),
                            Fixed(round_trip[i].p99, 0), Fixed(rtt_ratio, 2)});
      // Which states a run sees is up to the machine, so none of these is
      // gated: a state missing from one run is no regression.
      const std::string key = "peers." + slug + "." + MetricSlug(contenders[i].name);
      Metric& e2e = report.AddMetric(key + ".e2e_mps", rate, "M msg/s", Better::kHigher);
      SetSpread(f.rates, &e2e);
      e2e.gated = false;
      report.AddMetric(key + ".ratio_to_fastest_peer", ratio, "x", Better::kNeither);
      report.AddMetric(key + ".p50_ns", one_way[i].p50, "ns", Better::kNeither);
      report.AddMetric(key + ".rtt_p50_ns", round_trip[i].p50, "ns", Better::kLower).gated = false;
      report.AddMetric(key + ".rtt_p99_ns", round_trip[i].p99, "ns", Better::kNeither);
      if (one_way[i].negative != 0) {
        skewed += (skewed.empty() ? "" : ", ") + contenders[i].name + " (" + group.name + ") " +
                  WithThousands(one_way[i].negative);
      }
    }
    report.AddMetric("peers." + slug + ".rounds", group.rounds, "rounds", Better::kNeither);
  }
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    if (!not_finished[i].empty()) continue;
    report
        .AddMetric("peers." + MetricSlug(contenders[i].name) + ".publish_only_mps", publish_only[i],
                   "M msg/s", Better::kHigher)
        .gated = false;
  }
  report.AddMetric("peers.rounds_left_out", static_cast<double>(left_out.size()), "rounds",
                   Better::kNeither);

  std::string left_out_list;
  for (const std::string& item : left_out)
    left_out_list += (left_out_list.empty() ? "" : ", ") + item;
  std::string states;
  for (const StateGroup& group : groups) {
    if (group.rounds == 0) continue;
    states += (states.empty() ? "" : "; ") + group.name + ": " + std::to_string(group.rounds) +
              (group.rounds == 1 ? " round" : " rounds");
    if (!group.probes.empty()) {
      states += ", probe " + Fixed(*std::min_element(group.probes.begin(), group.probes.end()), 0) +
                "-" + Fixed(*std::max_element(group.probes.begin(), group.probes.end()), 0) + " ns";
    }
  }
  table.notes.push_back(
      "Placement: each round runs between two placement probes (cache-line ping-pong RTT "
      "between the two CPUs; shared-core below 110 ns, near below 250 ns, far above), and its "
      "figures count in that state's rows. " +
      (states.empty() ? std::string("No round counted.") : "Rounds counted: " + states + ".") +
      " Left out, the probe having changed state between start and end: " +
      (left_out.empty() ? std::string("none")
                        : std::to_string(left_out.size()) + " of " + std::to_string(rounds) + ", " +
                              left_out_list) +
      ".");
  table.notes.push_back(
      "End to end: " + WithThousands(messages) +
      " messages per round, first push to last pop, median over the state's rounds; every round "
      "runs every implementation once, and 'x fastest peer' is the median over those rounds of "
      "the ratio to that round's fastest non-Sluice queue.");
  table.notes.push_back(
      "Each row's name gives its calls. Consumers busy-poll; the ones that pop what is there "
      "take up to " +
      WithThousands(kPeerBatch) +
      " messages a call; atomic_queue's blocking pop waits, spinning, for the next message, and "
      "its blocking push for room; the other producers retry a full queue. moodycamel's "
      "enqueue takes a new block from the heap when the preallocated ones are in use, so that "
      "row's queue is not bounded at " +
      WithThousands(kPeerCapacity) + " and its producer never waits for room.");
  table.notes.push_back(
      "Latency: " + WithThousands(samples_per_round) +
      " messages per implementation per round, one in flight, pooled over the state's rounds; "
      "RTT until the producer sees the consumer's ack. Publish-only: " +
      WithThousands(publish_messages) +
      " pushes into an empty queue, one thread, measured once after the rounds (it involves one "
      "CPU, so it is the same figure in every state's rows).");
  table.notes.push_back(ClockStepNote());
  table.notes.push_back(
      "Sluice PublishFast rows stand for a caller with its own timestamp: a bus-clock reading "
      "taken every " +
      std::to_string(kStampEvery) +
      " pushes, so FULL_FEATURED consumers record every message in the latency histograms.");
  table.notes.push_back("Machine noise beside the tails: a pinned spinning thread lost " +
                        Fixed(gaps.lost_percent, 2) + " % of " + Fixed(gaps.window_ms, 0) +
                        " ms in gaps over 1 us; longest " + Fixed(gaps.max_gap_us, 1) + " us.");
  table.notes.push_back(
      "One-way differences below zero (the two cores' counters skewed; counted, left out of "
      "P50 and P99, never wrapped): " +
      (skewed.empty() ? std::string("none") : skewed) + ".");
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    if (!not_finished[i].empty()) {
      ReportNotFinished("peers", contenders[i].name, contenders[i].is_sluice, not_finished[i],
                        &table);
    }
  }
  for (const std::string& peer : missing)
    table.notes.push_back("Not built: " + peer + " was not found by CMake.");
  report.tables.push_back(table);
}

// Self-tests of the row deadlines (run only when named; tests/CMakeLists.txt
// runs them): a peer that refuses every push, and a waiting peer that loses
// every message, so that its consumer waits inside a pop that never returns.
namespace {

template <typename Probe>
class RefusingAdapter {
 public:
  explicit RefusingAdapter(Probe&) {}
  bool TryPush(const Message&) { return false; }
  std::size_t PopSome(Probe&) { return 0; }
};

template <typename Probe>
class LosingBlockingAdapter {
 public:
  static constexpr bool kBlocking = true;
  explicit LosingBlockingAdapter(Probe&) {}
  void Push(const Message&) {}
  // Waits for a message that never comes: nothing it can poll.
  void Pop(Probe&, std::size_t) {
    while (!never_.load(std::memory_order_acquire)) {
    }
  }

 private:
  std::atomic<bool> never_{false};
};

void RunOneStuckPeer(const Options& options, Report& report, const char* id, const char* name,
                     double (*end_to_end)(const Options&, std::uint64_t, std::string*)) {
  Table table;
  table.id = id;
  table.title = std::string("Self-test: ") + name;
  table.columns = {"implementation", "e2e M msg/s"};
  std::string why;
  const double rate = end_to_end(options, 100000, &why);
  table.rows.push_back({name, why.empty() ? Fixed(rate, 2) : "not finished"});
  if (!why.empty()) ReportNotFinished(id, name, false, why, &table);
  report.tables.push_back(table);
}

}  // namespace

void RunStuckPeer(const Options& options, Report& report) {
  RunOneStuckPeer(options, report, "selftest-peer", "a peer that refuses every push",
                  &EndToEndMps<RefusingAdapter>);
}

void RunLosingBlockingPeer(const Options& options, Report& report) {
  RunOneStuckPeer(options, report, "selftest-blocking",
                  "a waiting peer that loses every message (its pop never returns)",
                  &EndToEndMps<LosingBlockingAdapter>);
}

}  // namespace sluice::bench
