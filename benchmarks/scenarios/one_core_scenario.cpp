// Per-message cost on one core: one thread pushes 1,024 messages, then pops
// them, over and over, so the figure is the instructions and cache traffic of
// a publish plus a dispatch with no second core to wait for. Sluice in the
// configurations of the peer table and on the priority-ordered bus, against
// the fastest bare queues, in one run, in blocks that rotate the order. The
// rows and the round live in peers/one_core_rows.hpp, shared with the
// instruction breakdown.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/stats.hpp"
#include "peers/one_core_rows.hpp"
#include "peers/peer_adapters.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

constexpr std::size_t kBlocks = 5;

// What one contender measured: ns per message of each recorded round.
struct OneCoreSamples {
  std::vector<double> nanos_per_message;
  std::uint64_t lost = 0;  // rounds whose pops did not return every push
};

template <template <typename> class Adapter>
void MeasureRounds(std::size_t rounds, OneCoreSamples& out) {
  CountProbe probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe);
  Adapter<CountProbe>* const target = queue.get();
  std::uint64_t seq = 0;
  // One unrecorded round: code and the first slots warm.
  for (std::size_t round = 0; round <= rounds; ++round) {
    std::uint64_t pushed = 0;
    const std::uint64_t start = FastClock::Ticks();
    const std::uint64_t popped = OneCoreRound(*target, probe, seq, pushed);
    const std::uint64_t end = FastClock::Ticks();
    if (popped != pushed || pushed != kOneCoreBurst) ++out.lost;
    if (round != 0) {
      out.nanos_per_message.push_back(FastClock::TicksToNanos(end - start) /
                                      static_cast<double>(kOneCoreBurst));
    }
  }
}

struct OneCoreContender {
  std::string name;
  bool is_sluice;
  void (*measure)(std::size_t, OneCoreSamples&);
};

std::vector<OneCoreContender> OneCoreContenders(std::vector<std::string>* missing) {
  std::vector<OneCoreContender> c;
  ForEachOneCoreRow(
      [&c](const char* name, bool is_sluice, auto tag) {
        using Tag = decltype(tag);
        c.push_back({name, is_sluice, &MeasureRounds<Tag::template Type>});
      },
      missing);
  return c;
}

}  // namespace

void RunOneCore(const Options& options, Report& report) {
  Table table;
  table.id = "onecore";
  table.title = "14. One core: push " + WithThousands(kOneCoreBurst) + " then pop " +
                WithThousands(kOneCoreBurst) + ", 24-byte payload, " +
                WithThousands(kPeerCapacity) + " slots (ns per message, publish + dispatch)";
  table.columns = {"queue", "P50 ns/msg", "P10-P90 ns/msg", "P50 over the fastest peer's"};
  std::vector<std::string> missing;
  const std::vector<OneCoreContender> contenders = OneCoreContenders(&missing);
  const std::size_t rounds_per_block =
      options.suite == "smoke" ? 20 : (options.suite == "standard" ? 4000 : 1000);
  Progress("onecore: " + std::to_string(contenders.size()) + " queues, " +
           std::to_string(rounds_per_block * kBlocks) + " rounds each in " +
           std::to_string(kBlocks) + " blocks");
  PinThisThread(options.ProducerCpu(0));
  std::vector<OneCoreSamples> samples(contenders.size());
  for (std::size_t block = 0; block < kBlocks; ++block) {
    // Each block starts with another contender, so none is always first.
    for (std::size_t k = 0; k < contenders.size(); ++k) {
      const std::size_t i = (block + k) % contenders.size();
      contenders[i].measure(rounds_per_block, samples[i]);
    }
  }
  const GapProfile gaps = MeasureGaps(options.ProducerCpu(0), 200);

  std::vector<Percentiles> summary;
  std::vector<std::pair<double, double>> spread;  // P10, P90
  double fastest_peer = 0;
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    std::vector<double>& values = samples[i].nanos_per_message;
    summary.push_back(ComputePercentiles(values));  // sorts `values`
    spread.emplace_back(values.empty() ? 0 : values[values.size() / 10],
                        values.empty() ? 0 : values[values.size() * 9 / 10]);
    if (!contenders[i].is_sluice && summary.back().samples != 0 &&
        (fastest_peer == 0 || summary.back().p50 < fastest_peer)) {
      fastest_peer = summary.back().p50;
    }
  }
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    const Percentiles& p = summary[i];
    const double ratio = fastest_peer > 0 ? p.p50 / fastest_peer : 0;
    table.rows.push_back({contenders[i].name, Fixed(p.p50, 2),
                          Fixed(spread[i].first, 2) + "-" + Fixed(spread[i].second, 2),
                          fastest_peer > 0 ? Fixed(ratio, 2) + "x" : "no peer"});
    const std::string key = "onecore." + MetricSlug(contenders[i].name);
    report.AddMetric(key + ".p50_ns", p.p50, "ns", Better::kLower).gated = false;
    if (fastest_peer > 0) {
      report.AddMetric(key + ".ratio_to_fastest_peer", ratio, "x", Better::kNeither);
    }
    if (samples[i].lost != 0) {
      RecordFailure("onecore: " + contenders[i].name + " lost messages in " +
                    WithThousands(samples[i].lost) + " rounds");
    }
    if (p.samples == 0) RecordFailure("onecore: " + contenders[i].name + " has no samples");
  }
  table.notes.push_back(
      "One thread, pinned: each round pushes " + WithThousands(kOneCoreBurst) +
      " messages with the calls its name gives (Sluice: Publish or PublishFast, MEDIUM) and "
      "then pops until all are back (Sluice: ProcessBatch or ProcessBatchWith, up to " +
      WithThousands(kPeerBatch) +
      " a call; boost and moodycamel pop in bulk, up to as many a call; atomic_queue's blocking "
      "pop takes one message a call and never waits here, the messages being there). The "
      "figure is the round's time over " +
      WithThousands(kOneCoreBurst) + ", timed with " + FastClock::Description() + ". " +
      WithThousands(rounds_per_block * kBlocks) + " rounds per queue in " +
      std::to_string(kBlocks) +
      " blocks; each block starts with the next queue, and each queue's block starts with "
      "one unrecorded round.");
  table.notes.push_back(
      "PublishFast rows read the bus clock once per " + std::to_string(kStampEvery) +
      " pushes, as a caller with its own timestamp would. The priority-ordered rows "
      "(PriorityOrderTraits) publish MEDIUM, so before each message the consumer also looks "
      "at the HIGH ring.");
  if (!missing.empty()) {
    std::string names;
    for (const std::string& name : missing) names += (names.empty() ? "" : ", ") + name;
    table.notes.push_back("Not installed, so not measured: " + names + ".");
  }
  table.notes.push_back("Machine noise: a pinned spinning thread lost " +
                        Fixed(gaps.lost_percent, 2) + " % of " + Fixed(gaps.window_ms, 0) +
                        " ms in gaps over 1 us; longest " + Fixed(gaps.max_gap_us, 1) + " us.");
  report.tables.push_back(table);
}

}  // namespace sluice::bench
