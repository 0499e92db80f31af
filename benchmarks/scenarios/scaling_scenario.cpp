// MPSC scaling: 1, 2, 4 and 8 producers into one consumer, end to end.
// Sluice's shared queue, Sluice with a registered producer lane per
// producer, and moodycamel's ConcurrentQueue with a producer token per
// producer and bulk dequeues, same payload, same run, interleaved round by
// round; each figure also as a ratio to moodycamel in the same round.
#include <algorithm>
#include <chrono>
#include <memory>

#include "harness/stats.hpp"
#include "peers/peer_adapters.hpp"
#include "scenarios/common.hpp"

#if defined(__linux__)
#include <sluice/extras/membarrier_fence.hpp>
#endif

namespace sluice::bench {
namespace {

constexpr int kProducerCounts[] = {1, 2, 4, 8};
constexpr std::size_t kLaneSlots = 16384;

#if defined(__linux__)
using LaneHeavyFence = MembarrierHeavyFence;
#else
using LaneHeavyFence = NoHeavyFence;
#endif
struct LaneTraits : DefaultBusTraits {
  using Lanes = ProducerLanes<8, kLaneSlots, 64, LaneHeavyFence>;
};
struct LaneFenceTraits : LaneTraits {
  using Lanes = ProducerLanes<8, kLaneSlots, 64, NoHeavyFence>;
};

// What each producer thread writes while it runs: a block of its own.
struct ProducerState {
  std::uint64_t pushes = 0;
  std::uint64_t nanos = 0;
};

// What a run of `total` messages returns: million messages per second from
// the start signal until the consumer had them all, or 0 with the reason in
// `not_finished` when it did not finish.
double Finish(const RowDeadline& deadline, std::uint64_t received, std::uint64_t total,
              double seconds, std::string* not_finished) {
  if (!deadline.Finished()) {
    *not_finished = deadline.Why();
    return 0;
  }
  if (received != total) {
    *not_finished =
        "delivered " + WithThousands(received) + " of " + WithThousands(total) + " messages";
    return 0;
  }
  return static_cast<double>(total) / seconds / 1e6;
}

// One run of `producers` threads, each publishing `per_producer` messages.
template <typename Traits, bool kLanes, PerformanceMode kMode = PerformanceMode::FULL_FEATURED>
double SluiceMps(const Options& options, int producers, std::uint64_t per_producer,
                 std::string* not_finished) {
  using Bus = AsyncBus<std::variant<Message>, kPeerCapacity, ProducerModel::kMulti, Traits>;
  auto bus = std::make_unique<Bus>();
  bus->SetPerformanceMode(kMode);
  Isolated<CountProbe> probe;
  std::vector<Isolated<ProducerState>> states(static_cast<std::size_t>(producers));
  const std::uint64_t total = per_producer * static_cast<std::uint64_t>(producers);
  RowDeadline deadline("scaling: Sluice", CountedRowSeconds(options, total));
  const double seconds = RunProducersAndConsumer(
      options, deadline, producers,
      [&](int p) {
        ProducerState& state = states[static_cast<std::size_t>(p)].value;
        const auto publish_all = [&](auto& target) {
          for (std::uint64_t i = 0; i < per_producer; ++i) {
            if (deadline.ExpiredAt(i)) {
              (void)deadline.TimedOut("a producer was still publishing");
              return;
            }
            if (state.pushes++ % kStampEvery == 0)
              state.nanos = DefaultBusTraits::Clock::NowNanos();
            if (!RetryUntil(deadline, "a producer retried a refused publish", [&] {
                  return target.PublishFast(Message{i, 1, 2, 3, 4}, 1,
                                            std::chrono::nanoseconds(state.nanos));
                })) {
              return;
            }
          }
        };
        if constexpr (kLanes) {
          typename Bus::Producer lane = bus->RegisterProducer();
          publish_all(lane);
        } else {
          publish_all(*bus);
        }
      },
      [&] {
        CountProbe& count = probe.value;
        return bus->ProcessBatchWith([&count](const Message& m) { count(m); }, kPeerBatch);
      },
      [&] { return probe.value.count >= total; });
  return Finish(deadline, probe.value.count, total, seconds, not_finished);
}

#if SLUICE_PEER_CONCURRENTQUEUE
// Bounded like the other queues, and per producer: each producer's
// sub-queue holds at most kPeerCapacity / kProducers messages
// (MAX_SUBQUEUE_SIZE), and the pool preallocates blocks for that many
// producers. With one shared pool of kPeerCapacity and no such bound, the
// first producers to fill take every preallocated block (an explicit
// producer never hands its blocks back to the pool), and the others'
// try_enqueue fails for ever: that hung this table on two cores.
template <int kProducers>
struct BoundedSubqueues : moodycamel::ConcurrentQueueDefaultTraits {
  static constexpr std::size_t MAX_SUBQUEUE_SIZE = kPeerCapacity / kProducers;
};

template <int kProducers>
double MoodycamelMps(const Options& options, std::uint64_t per_producer,
                     std::string* not_finished) {
  constexpr int producers = kProducers;
  moodycamel::ConcurrentQueue<Message, BoundedSubqueues<kProducers>> queue(
      kPeerCapacity / kProducers, kProducers, 0);
  Isolated<CountProbe> probe;
  Isolated<std::array<Message, kPeerBatch>> buffer;
  const std::uint64_t total = per_producer * static_cast<std::uint64_t>(producers);
  RowDeadline deadline("scaling: moodycamel", CountedRowSeconds(options, total));
  std::vector<std::unique_ptr<Isolated<moodycamel::ProducerToken>>> tokens;
  for (int p = 0; p < producers; ++p) {
    tokens.push_back(std::make_unique<Isolated<moodycamel::ProducerToken>>(
        Isolated<moodycamel::ProducerToken>{moodycamel::ProducerToken(queue)}));
  }
  Isolated<moodycamel::ConsumerToken> consumer_token{moodycamel::ConsumerToken(queue)};
  const double seconds = RunProducersAndConsumer(
      options, deadline, producers,
      [&](int p) {
        moodycamel::ProducerToken& token = tokens[static_cast<std::size_t>(p)]->value;
        for (std::uint64_t i = 0; i < per_producer; ++i) {
          if (deadline.ExpiredAt(i)) {
            (void)deadline.TimedOut("a producer was still publishing");
            return;
          }
          // Bounded like the other queues: try_enqueue never allocates.
          if (!RetryUntil(deadline, "a producer retried a full queue", [&] {
                return queue.try_enqueue(token, Message{i, 1, 2, 3, 4});
              })) {
            return;
          }
        }
      },
      [&] {
        Message* const out = buffer.value.data();
        const std::size_t count = queue.try_dequeue_bulk(consumer_token.value, out, kPeerBatch);
        for (std::size_t i = 0; i < count; ++i) probe.value(out[i]);
        return static_cast<std::uint32_t>(count);
      },
      [&] { return probe.value.count >= total; });
  return Finish(deadline, probe.value.count, total, seconds, not_finished);
}

// The producer count is a template argument of the bounded queue.
double MoodycamelMpsFor(const Options& options, int producers, std::uint64_t per_producer,
                        std::string* not_finished) {
  switch (producers) {
    case 1:
      return MoodycamelMps<1>(options, per_producer, not_finished);
    case 2:
      return MoodycamelMps<2>(options, per_producer, not_finished);
    case 4:
      return MoodycamelMps<4>(options, per_producer, not_finished);
    default:
      return MoodycamelMps<8>(options, per_producer, not_finished);
  }
}
#endif

struct Contender {
  std::string name;
  double (*run)(const Options&, int, std::uint64_t, std::string*);
  bool is_reference;
};

}  // namespace

void RunScaling(const Options& options, Report& report) {
  std::vector<Contender> contenders = {
      {"Sluice MPSC shared queue, PublishFast, visitor", &SluiceMps<DefaultBusTraits, false>,
       false},
      {"Sluice MPSC registered producers (lanes), PublishFast, visitor",
       &SluiceMps<LaneTraits, true>, false},
      {"Sluice lanes without a heavy fence (a fence per publish)",
       &SluiceMps<LaneFenceTraits, true>, false},
      {"Sluice lanes, BARE_METAL (no statistics, histograms or clock)",
       &SluiceMps<LaneTraits, true, PerformanceMode::BARE_METAL>, false},
  };
#if SLUICE_PEER_CONCURRENTQUEUE
  contenders.push_back(
      {"moodycamel ConcurrentQueue, producer tokens, bulk dequeue", &MoodycamelMpsFor, true});
#endif
  const std::uint64_t total = options.end_to_end_messages;
  const int rounds = std::max(1, options.rounds);
  // results[count][contender]: one figure per round; ratios per round.
  const std::size_t counts = std::size(kProducerCounts);
  std::vector<std::vector<std::vector<double>>> mps(
      counts, std::vector<std::vector<double>>(contenders.size()));
  std::vector<std::vector<std::vector<double>>> ratio(
      counts, std::vector<std::vector<double>>(contenders.size()));
  // Why a contender did not finish a run at a producer count, if it did not.
  std::vector<std::vector<std::string>> not_finished(counts,
                                                     std::vector<std::string>(contenders.size()));
  const double probe_before =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t c = 0; c < counts; ++c) {
      const int producers = kProducerCounts[c];
      const std::uint64_t per_producer = total / static_cast<std::uint64_t>(producers);
      std::vector<double> figures(contenders.size(), 0);
      for (std::size_t k = 0; k < contenders.size(); ++k) {
        // Each round starts with the next contender.
        const std::size_t i = (static_cast<std::size_t>(round) + k) % contenders.size();
        std::string why;
        figures[i] = contenders[i].run(options, producers, per_producer, &why);
        if (why.empty()) {
          mps[c][i].push_back(figures[i]);
        } else if (not_finished[c][i].empty()) {
          not_finished[c][i] = why;
        }
      }
      double reference = 0;
      for (std::size_t i = 0; i < contenders.size(); ++i) {
        if (contenders[i].is_reference) reference = figures[i];
      }
      for (std::size_t i = 0; i < contenders.size(); ++i) {
        if (reference > 0 && figures[i] > 0) ratio[c][i].push_back(figures[i] / reference);
      }
    }
    Progress("scaling: round " + std::to_string(round + 1) + " of " + std::to_string(rounds));
  }
  const double probe_after =
      options.separate_cores ? PlacementProbeNanos(options.ProducerCpu(0), options.ConsumerCpu())
                             : 0;

  Table table;
  table.id = "scaling";
  table.title = "15. MPSC scaling: producers into one consumer, end to end";
  table.columns = {"queue", "producers", "M msg/s (median)", "min-max", "x moodycamel (median)"};
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    for (std::size_t c = 0; c < counts; ++c) {
      if (!not_finished[c][i].empty()) {
        table.rows.push_back(
            {contenders[i].name, std::to_string(kProducerCounts[c]), "not finished", "-", "-"});
        ReportNotFinished(
            "scaling",
            contenders[i].name + ", " + std::to_string(kProducerCounts[c]) + " producers",
            !contenders[i].is_reference, not_finished[c][i], &table);
        continue;
      }
      std::vector<double> values = mps[c][i];
      std::vector<double> ratios = ratio[c][i];
      std::sort(values.begin(), values.end());
      std::sort(ratios.begin(), ratios.end());
      const double median = values.empty() ? 0 : values[values.size() / 2];
      const double median_ratio = ratios.empty() ? 0 : ratios[ratios.size() / 2];
      table.rows.push_back(
          {contenders[i].name, std::to_string(kProducerCounts[c]), Fixed(median, 1),
           values.empty() ? "" : Fixed(values.front(), 1) + "-" + Fixed(values.back(), 1),
           ratios.empty() ? "no moodycamel" : Fixed(median_ratio, 2) + "x"});
      const std::string key = "scaling." + MetricSlug(contenders[i].name) + "." +
                              std::to_string(kProducerCounts[c]) + "p";
      report.AddMetric(key + ".mps", median, "M msg/s", Better::kHigher).gated = false;
      if (!ratios.empty()) {
        report.AddMetric(key + ".ratio_to_moodycamel", median_ratio, "x", Better::kNeither);
      }
    }
  }
  const std::vector<int> cpus = options.cpus;
  const int producer_cpus = std::max(1, static_cast<int>(cpus.size()) - 1);
  table.notes.push_back(
      WithThousands(total) +
      " messages a run, split evenly over the producers; each producer publishes as fast as "
      "it can, retrying when refused (Sluice: PublishFast, MEDIUM, FULL_FEATURED unless the "
      "row says otherwise, the bus clock read once per " +
      std::to_string(kStampEvery) +
      " pushes; moodycamel: try_enqueue with its token, never allocating, each producer's "
      "sub-queue bounded at " +
      WithThousands(kPeerCapacity) +
      " / producers (MAX_SUBQUEUE_SIZE) with blocks preallocated for that many producers), "
      "and one consumer "
      "takes up to " +
      WithThousands(kPeerBatch) +
      " a call (ProcessBatchWith, try_dequeue_bulk with a consumer token). Figure: messages "
      "over the time from the start signal until the consumer has them all. " +
      std::to_string(rounds) +
      " rounds; in each, every producer count, and every queue in turn starting with the "
      "next one.");
  table.notes.push_back(
      "Lanes: capacity " + WithThousands(kLaneSlots) +
      " slots per producer; the shared queue and moodycamel hold " + WithThousands(kPeerCapacity) +
      ". The lane rows use MembarrierHeavyFence on Linux (no fence per publish) and, for "
      "comparison, NoHeavyFence (one full fence per publish).");
  table.notes.push_back(
      "Producers are pinned round robin to the allowed CPUs other than the consumer's (" +
      std::to_string(cpus.size()) + " CPUs allowed here)" +
      (producer_cpus < 8 ? "; " + std::to_string(producer_cpus) +
                               " for the producers, so every row with more producers than "
                               "that is oversubscribed (producers share a CPU and run in turns): "
                               "it measures the scheduler as much as the queues."
                         : std::string(".")));
  if (options.separate_cores) {
    table.notes.push_back(
        "Placement probe (cache-line ping-pong RTT, first producer's CPU to "
        "the consumer's): " +
        Fixed(probe_before, 0) + " ns before, " + Fixed(probe_after, 0) +
        " ns after (docs/benchmark.md, placement states).");
  }
#if !SLUICE_PEER_CONCURRENTQUEUE
  table.notes.push_back(
      "moodycamel ConcurrentQueue (libconcurrentqueue-dev) is not installed: no reference.");
#endif
  report.tables.push_back(table);
}

}  // namespace sluice::bench
