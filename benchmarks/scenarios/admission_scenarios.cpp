// Priority admission under overload: the reference's burst with the consumer
// paused, and a sustained run with the producer faster than the consumer.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

constexpr std::array<MessagePriority, 3> kPriorities = {
    MessagePriority::HIGH, MessagePriority::MEDIUM, MessagePriority::LOW};

std::string PriorityKey(MessagePriority priority) {
  std::string key = ToString(priority);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return key;
}

// The reference's mix: every fifth message HIGH, the rest MEDIUM and LOW
// alternating.
class PriorityMix {
 public:
  MessagePriority Next() {
    const std::uint64_t i = count_++;
    if (i % 5 == 0) return MessagePriority::HIGH;
    return (rest_++ % 2 == 0) ? MessagePriority::MEDIUM : MessagePriority::LOW;
  }

 private:
  std::uint64_t count_ = 0;
  std::uint64_t rest_ = 0;
};

struct PerPriority {
  std::array<std::uint64_t, 3> sent{};  // indexed by MessagePriority
  std::array<std::uint64_t, 3> admitted{};
  std::uint64_t Sent() const { return sent[0] + sent[1] + sent[2]; }
  std::uint64_t Admitted() const { return admitted[0] + admitted[1] + admitted[2]; }
};

template <ProducerModel kModel>
bool BurstFor(Report& report, Table& table) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  const std::size_t capacity = bus->Capacity();
  const Position limits[3] = {FillLimit(60, capacity), FillLimit(80, capacity),
                              FillLimit(99, capacity)};
  PerPriority counts;
  std::array<std::size_t, 3> max_fill{};
  std::uint64_t past_threshold = 0;
  PriorityMix mix;
  for (std::uint64_t i = 0; i < 150000; ++i) {
    const MessagePriority priority = mix.Next();
    const auto p = static_cast<std::size_t>(priority);
    const std::size_t depth = bus->QueueDepth();
    ++counts.sent[p];
    if (bus->PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, priority)) {
      ++counts.admitted[p];
      max_fill[p] = std::max(max_fill[p], depth);
      if (depth >= limits[p]) ++past_threshold;
    }
  }
  const BusStatisticsSnapshot stats = bus->GetStatistics();
  const bool stats_agree =
      stats.messages_published == counts.Admitted() && stats.MessagesAttempted() == counts.Sent();
  for (MessagePriority priority : kPriorities) {
    const auto p = static_cast<std::size_t>(priority);
    const std::uint64_t dropped = counts.sent[p] - counts.admitted[p];
    const double rate = 100.0 * static_cast<double>(dropped) / static_cast<double>(counts.sent[p]);
    table.rows.push_back(
        {ModelName(kModel), ToString(priority), WithThousands(counts.sent[p]),
         WithThousands(counts.admitted[p]), WithThousands(dropped), Fixed(rate, 1),
         Fixed(100.0 * static_cast<double>(max_fill[p]) / static_cast<double>(capacity), 3)});
    const std::string prefix = "burst." + ModelKey(kModel) + "." + PriorityKey(priority) + ".";
    report.AddMetric(prefix + "sent", static_cast<double>(counts.sent[p]), "messages",
                     Better::kNeither);
    report.AddMetric(prefix + "admitted", static_cast<double>(counts.admitted[p]), "messages",
                     Better::kNeither);
    report.AddMetric(prefix + "drop_rate_percent", rate, "%", Better::kNeither);
  }
  const bool high_kept = counts.admitted[2] == counts.sent[2];
  if (!stats_agree)
    table.notes.push_back(std::string(ModelName(kModel)) +
                          ": statistics disagree with the producer's own counts");
  if (past_threshold != 0)
    table.notes.push_back(std::string(ModelName(kModel)) + ": " + std::to_string(past_threshold) +
                          " messages admitted past their threshold");
  return high_kept && stats_agree && past_threshold == 0;
}

struct SustainedResult {
  PerPriority counts;
  std::uint64_t processed = 0;
  double seconds = 0;
  // Evidence for any HIGH refusal: the smallest queue depth read right after
  // one, and the consumer's longest pause between two batches.
  std::size_t min_depth_after_high_refusal = 0;
  double longest_consumer_pause_ms = 0;
  std::string not_finished;  // why, when the run did not finish
};

template <ProducerModel kModel>
SustainedResult Sustain(const Options& options, double work_ns) {
  auto bus = std::make_unique<BenchBus<kModel>>();
  const int producers = kModel == ProducerModel::kMulti ? options.producers : 1;
  const auto work_ticks = static_cast<std::uint64_t>(work_ns / FastClock::NanosPerTick());
  // What each thread writes while it runs, in blocks of their own
  // (harness/isolated.hpp): one producer's counters never share a block
  // with another's, nor with the consumer's.
  Isolated<std::uint64_t> processed;
  // A fresh bus has room for this subscription.
  (void)bus->template Subscribe<Sample<24>>([&processed, work_ticks](const Sample<24>&) {
    ++processed.value;
    if (work_ticks != 0) SpinTicks(work_ticks);
  });
  std::vector<Isolated<PerPriority>> per_producer(static_cast<std::size_t>(producers));
  std::vector<Isolated<std::size_t>> min_depth(static_cast<std::size_t>(producers),
                                               Isolated<std::size_t>{SIZE_MAX});
  Isolated<std::uint64_t> longest_pause_ticks;
  Isolated<std::uint64_t> last_batch_ticks;
  Isolated<std::atomic<bool>> stop;
  Isolated<std::atomic<int>> producers_done;
  std::thread timer;
  SustainedResult result;
  RowDeadline deadline("sustained", TimedRowSeconds(options, options.sustained_seconds));
  result.seconds = RunProducersAndConsumer(
      options, deadline, producers,
      [&](int p) {
        auto* const target = bus.get();
        const std::atomic<bool>& stopping = stop.value;
        PerPriority& mine = per_producer[static_cast<std::size_t>(p)].value;
        std::size_t& lowest = min_depth[static_cast<std::size_t>(p)].value;
        PriorityMix mix;
        for (std::uint64_t i = 0; !stopping.load(std::memory_order_relaxed); ++i) {
          if (deadline.ExpiredAt(i)) {
            (void)deadline.TimedOut("a producer was still publishing (the timer did not stop it)");
            break;
          }
          const MessagePriority priority = mix.Next();
          const auto index = static_cast<std::size_t>(priority);
          ++mine.sent[index];
          if (target->PublishWithPriority(Sample<24>{i, 0, 0, 0, 0}, 1, priority)) {
            ++mine.admitted[index];
          } else if (priority == MessagePriority::HIGH) {
            lowest = std::min(lowest, target->QueueDepth());
          }
        }
        producers_done.value.fetch_add(1);
      },
      [&] {
        const std::uint64_t now = FastClock::Ticks();
        if (last_batch_ticks.value != 0) {
          longest_pause_ticks.value =
              std::max(longest_pause_ticks.value, now - last_batch_ticks.value);
        }
        last_batch_ticks.value = now;
        return bus->ProcessBatch();
      },
      [&] { return producers_done.value.load(std::memory_order_acquire) == producers; }, nullptr,
      [&] {
        // Started once every producer exists: with many producers, spawning
        // them can take longer than the run.
        timer = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::duration<double>(options.sustained_seconds));
          stop.value.store(true);
        });
      });
  timer.join();
  if (!deadline.Finished()) result.not_finished = deadline.Why();
  result.min_depth_after_high_refusal = SIZE_MAX;
  for (const Isolated<std::size_t>& lowest : min_depth) {
    result.min_depth_after_high_refusal =
        std::min(result.min_depth_after_high_refusal, lowest.value);
  }
  result.longest_consumer_pause_ms = FastClock::TicksToNanos(longest_pause_ticks.value) / 1e6;
  for (const Isolated<PerPriority>& mine : per_producer) {
    for (std::size_t i = 0; i < 3; ++i) {
      result.counts.sent[i] += mine.value.sent[i];
      result.counts.admitted[i] += mine.value.admitted[i];
    }
  }
  result.processed = processed.value;
  return result;
}

template <ProducerModel kModel>
void SustainedFor(const Options& options, Report& report, Table& table) {
  const std::string model = ModelKey(kModel);
  for (const bool overloaded : {true, false}) {
    const double work_ns = overloaded ? options.consumer_work_ns : 0;
    const SustainedResult r = Sustain<kModel>(options, work_ns);
    const std::string run =
        overloaded ? "consumer +" + Fixed(work_ns, 0) + " ns/msg" : "free-running";
    if (!r.not_finished.empty()) {
      table.rows.push_back({ModelName(kModel), run, "not finished", "-", "-", "-", "-", "-", "-"});
      ReportNotFinished("sustained", std::string(ModelName(kModel)) + ", " + run, true,
                        r.not_finished, &table);
      continue;
    }
    const auto& c = r.counts;
    auto dropped = [&](MessagePriority p) {
      const auto i = static_cast<std::size_t>(p);
      return c.sent[i] - c.admitted[i];
    };
    const double sent_rate = static_cast<double>(c.Sent()) / r.seconds / 1e6;
    const double processed_rate = static_cast<double>(r.processed) / r.seconds / 1e6;
    table.rows.push_back({ModelName(kModel), run, WithThousands(c.Sent()),
                          WithThousands(r.processed), WithThousands(dropped(MessagePriority::HIGH)),
                          WithThousands(dropped(MessagePriority::MEDIUM)),
                          WithThousands(dropped(MessagePriority::LOW)), Fixed(sent_rate, 2),
                          Fixed(processed_rate, 2)});
    const std::string prefix = "sustained." + model + (overloaded ? "" : ".free_running");
    report.AddMetric(prefix + ".processed_mps", processed_rate, "M msg/s", Better::kHigher).gated =
        false;  // measured once
    report.AddMetric(prefix + ".sent_mps", sent_rate, "M msg/s", Better::kNeither);
    if (overloaded) {
      for (MessagePriority p : kPriorities) {
        const auto i = static_cast<std::size_t>(p);
        const double rate =
            c.sent[i] ? 100.0 * static_cast<double>(dropped(p)) / static_cast<double>(c.sent[i])
                      : 0;
        report.AddMetric("sustained." + model + "." + PriorityKey(p) + ".drop_rate_percent", rate,
                         "%", Better::kNeither);
      }
    }
    if (dropped(MessagePriority::HIGH) != 0) {
      // The depth cannot be read at the refusal itself: the producer reads it
      // afterwards, while the consumer keeps draining, so it may be below
      // the 99 % the admission check saw. Say exactly that.
      const double depth_percent =
          100.0 * static_cast<double>(r.min_depth_after_high_refusal) / 131072.0;
      table.notes.push_back(
          std::string(ModelName(kModel)) + ", " + run + ": " +
          WithThousands(dropped(MessagePriority::HIGH)) +
          " HIGH refused. HIGH is refused when the producer finds the queue >= 99 % full; the "
          "depth it read just after each refusal, with the consumer still draining, was at "
          "least " +
          Fixed(depth_percent, 2) + " %. The consumer's longest pause between two batches was " +
          Fixed(r.longest_consumer_pause_ms, 1) + " ms.");
    }
    if (c.Sent() == 0 || r.processed == 0) {
      RecordFailure(std::string("sustained ") + ModelName(kModel) + ", " + run +
                    ": nothing was sent or processed");
    }
    if (r.processed != c.Admitted()) {
      table.notes.push_back(std::string(ModelName(kModel)) + ": processed != admitted (" +
                            std::to_string(r.processed) + " vs " + std::to_string(c.Admitted()) +
                            ")");
    }
  }
}

}  // namespace

void RunBurst(const Options&, Report& report) {
  Table table;
  table.id = "burst";
  table.title =
      "5. Backpressure burst: consumer paused, 150,000 messages (20 % HIGH) into 131,072 slots";
  table.columns = {
      "bus", "priority", "sent", "admitted", "dropped", "drop %", "max fill at admission %"};
  const bool mpsc_ok = BurstFor<ProducerModel::kMulti>(report, table);
  const bool spsc_ok = BurstFor<ProducerModel::kSingle>(report, table);
  table.notes.push_back(
      "Thresholds: LOW refused at >= 60 % fill, MEDIUM at >= 80 %, HIGH at >= 99 %.");
  if (mpsc_ok && spsc_ok) {
    table.notes.push_back(
        "PASS: no HIGH message lost, none admitted past its threshold (MPSC and SPSC).");
  } else {
    table.notes.push_back("FAIL: see the lines above.");
  }
  report.AddMetric("burst.pass", mpsc_ok && spsc_ok ? 1 : 0, "bool", Better::kHigher);
  report.tables.push_back(table);
}

void RunSustained(const Options& options, Report& report) {
  Table table;
  table.id = "sustained";
  table.title = "6. Sustained run, " + Fixed(options.sustained_seconds, 1) +
                " s per row, 20 % HIGH / 40 % MEDIUM / 40 % LOW";
  table.columns = {"bus",         "consumer",     "sent",
                   "processed",   "HIGH dropped", "MEDIUM dropped",
                   "LOW dropped", "sent M/s",     "processed M/s"};
  SustainedFor<ProducerModel::kMulti>(options, report, table);
  SustainedFor<ProducerModel::kSingle>(options, report, table);
  table.notes.push_back(
      "Producers publish (FULL_FEATURED) as fast as they can; MPSC uses " +
      std::to_string(options.producers) +
      " producer(s). The consumer dispatches to one callback; in the first row of "
      "each bus it also burns the stated work per message, so the producer is "
      "faster than the consumer and admission has to refuse; the free-running row "
      "is end-to-end throughput with the consumer dispatching.");
  report.tables.push_back(table);
}

}  // namespace sluice::bench
