// The soak: producers (more than cores, by default) publish a priority mix
// as fast as they can for a long time; the consumer checks that every
// admitted message arrives exactly once and in per-producer order, and each
// interval reports throughput, latency and resident memory, so drift shows.
#include <algorithm>
#include <array>
#include <chrono>

#include "harness/stats.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

// Sample<24>'s fields, reused: seq = the producer's admission count, x = the
// producer index; the send time rides in the header's timestamp.
struct SoakProducer {
  std::uint64_t admitted = 0;
  std::array<std::uint64_t, 3> refused{};  // by MessagePriority
};

struct SoakTotals {
  std::uint64_t received = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;  // arrived after a later message of its producer
  std::uint64_t gaps = 0;       // messages skipped (lost unless they arrive late)
};

}  // namespace

void RunSoak(const Options& options, Report& report) {
  using Bus = BenchBus<ProducerModel::kMulti>;
  auto bus = std::make_unique<Bus>();
  const int producers = options.producers;
  const double seconds = options.sustained_seconds;
  const double interval_seconds =
      seconds >= 600 ? 60 : (seconds >= 60 ? 10 : std::max(0.1, seconds / 5));

  // What each thread writes while it runs, in blocks of their own
  // (harness/isolated.hpp): one producer's state never shares a block with
  // another's, nor with the consumer's.
  std::vector<Isolated<SoakProducer>> producer_state(static_cast<std::size_t>(producers));
  std::vector<Isolated<std::uint64_t>> expected(static_cast<std::size_t>(producers));
  Isolated<SoakTotals> totals;
  Isolated<std::vector<double>> interval_latencies;
  interval_latencies.value.reserve(1 << 20);
  Isolated<std::uint64_t> latency_counter;
  Isolated<std::uint64_t> negative_latencies;
  // A fresh bus has room for this subscription.
  (void)bus->Subscribe<Sample<24>>([&](const Sample<24>& m, const MessageHeader& header) {
    const auto producer = static_cast<std::size_t>(m.x);
    std::uint64_t& next = expected[producer].value;
    SoakTotals& seen = totals.value;
    if (m.seq == next) {
      ++next;
    } else if (m.seq > next) {
      seen.gaps += m.seq - next;
      next = m.seq + 1;
    } else {
      // Behind the producer's newest: either seen before or late (reordered).
      ++seen.reordered;
    }
    ++seen.received;
    std::vector<double>& latencies = interval_latencies.value;
    if ((++latency_counter.value & 63) == 0 && latencies.size() < latencies.capacity()) {
      // The producer's core read the clock: skew can make the difference
      // negative, which is counted, never wrapped.
      const std::uint64_t now = CounterClock::NowNanos();
      if (now < header.timestamp_ns) {
        ++negative_latencies.value;
      } else {
        latencies.push_back(static_cast<double>(now - header.timestamp_ns));
      }
    }
  });

  Table table;
  table.id = "soak";
  table.title = "Soak: " + std::to_string(producers) + " producers, 1 consumer, " +
                Fixed(seconds, 0) + " s, MPSC, FULL_FEATURED, 20 % HIGH / 40 % MEDIUM / 40 % LOW";
  table.columns = {"t s", "processed M/s", "latency P50 us", "P99 us", "queue depth", "RSS MiB"};

  Isolated<std::atomic<bool>> stop;
  Isolated<std::atomic<int>> producers_done;
  Isolated<std::atomic<std::uint64_t>> processed_total;  // read by the progress thread
  std::thread progress([&] {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; !stop.value.load(); ++i) {
      const auto due = start + std::chrono::duration<double>(interval_seconds * i);
      while (std::chrono::steady_clock::now() < due && !stop.value.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      Progress("soak t=" + Fixed(interval_seconds * i, 0) + " s, processed " +
               WithThousands(processed_total.value.load(std::memory_order_relaxed)));
    }
  });

  // The consumer owns the interval rows: it reads its own samples.
  // Set when every producer exists (spawning many can take a while).
  using Seconds = std::chrono::duration<double>;
  std::chrono::time_point<std::chrono::steady_clock, Seconds> start =
      std::chrono::steady_clock::now();
  Isolated<decltype(start)> next_row{start};
  Isolated<std::uint64_t> row_start_received;
  Isolated<std::uint64_t> consume_calls;
  Isolated<std::vector<std::vector<std::string>>> rows;  // the consumer's, copied after
  RowDeadline deadline("soak", TimedRowSeconds(options, seconds));
  const double wall = RunProducersAndConsumer(
      options, deadline, producers,
      [&](int p) {
        auto* const target = bus.get();
        const std::atomic<bool>& stopping = stop.value;
        SoakProducer& mine = producer_state[static_cast<std::size_t>(p)].value;
        std::uint64_t mix = 0, rest = 0;
        while (!stopping.load(std::memory_order_relaxed)) {
          if (deadline.ExpiredAt(mix + 1)) {
            (void)deadline.TimedOut(
                "a producer was still publishing (the consumer did not stop it)");
            break;
          }
          MessagePriority priority = MessagePriority::HIGH;
          if (mix++ % 5 != 0)
            priority = (rest++ % 2 == 0) ? MessagePriority::MEDIUM : MessagePriority::LOW;
          const Sample<24> message{mine.admitted, static_cast<float>(p), 0, 0, 0};
          if (target->PublishWithPriority(message, static_cast<std::uint32_t>(p), priority)) {
            ++mine.admitted;
          } else {
            ++mine.refused[static_cast<std::size_t>(priority)];
          }
        }
        producers_done.value.fetch_add(1);
      },
      [&] {
        const std::uint32_t n = bus->ProcessBatch(4096);
        // The clock is read every 256th call, not on every (often empty) one.
        if ((++consume_calls.value & 255) != 0) return n;
        const std::uint64_t received = totals.value.received;
        processed_total.value.store(received, std::memory_order_relaxed);
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_row.value) {
          const double elapsed = std::chrono::duration<double>(now - start).count();
          const double rate =
              static_cast<double>(received - row_start_received.value) / interval_seconds / 1e6;
          const Percentiles p = ComputePercentiles(interval_latencies.value);
          rows.value.push_back(
              {Fixed(elapsed, 0), Fixed(rate, 2), Fixed(p.p50 / 1000.0, 1),
               Fixed(p.p99 / 1000.0, 1), WithThousands(bus->QueueDepth()),
               Fixed(static_cast<double>(ResidentBytes()) / (1024.0 * 1024.0), 1)});
          interval_latencies.value.clear();
          row_start_received.value = received;
          next_row.value += std::chrono::duration<double>(interval_seconds);
          if (elapsed >= seconds) stop.value.store(true);
        }
        return n;
      },
      [&] { return producers_done.value.load(std::memory_order_acquire) == producers; }, nullptr,
      [&] {
        start = std::chrono::steady_clock::now();
        next_row.value = start + std::chrono::duration<double>(interval_seconds);
      });
  stop.value.store(true);
  progress.join();
  table.rows = std::move(rows.value);

  std::uint64_t admitted = 0;
  std::array<std::uint64_t, 3> refused{};
  for (const Isolated<SoakProducer>& s : producer_state) {
    admitted += s.value.admitted;
    for (std::size_t i = 0; i < 3; ++i) refused[i] += s.value.refused[i];
  }
  // Every admitted message must have been received once: the consumer's
  // expectation per producer must equal that producer's admission count.
  std::uint64_t lost = 0;
  for (int p = 0; p < producers; ++p) {
    const std::uint64_t want = producer_state[static_cast<std::size_t>(p)].value.admitted;
    const std::uint64_t got = expected[static_cast<std::size_t>(p)].value;
    if (got < want) lost += want - got;
  }
  const SoakTotals& totals_seen = totals.value;
  lost += totals_seen.gaps;
  const std::uint64_t duplicated =
      totals_seen.received > admitted ? totals_seen.received - admitted : 0;
  const std::uint64_t attempts = admitted + refused[0] + refused[1] + refused[2];
  const double loss_rate = admitted ? static_cast<double>(lost) / static_cast<double>(admitted) : 0;
  table.notes.push_back(
      "Final: " + WithThousands(attempts) + " messages attempted, " + WithThousands(admitted) +
      " admitted, " + WithThousands(totals_seen.received) + " received; admitted lost " +
      WithThousands(lost) + ", duplicated " + WithThousands(duplicated) + ", reordered " +
      WithThousands(totals_seen.reordered) + "; refused HIGH " + WithThousands(refused[2]) +
      ", MEDIUM " + WithThousands(refused[1]) + ", LOW " + WithThousands(refused[0]) +
      "; loss rate " + Fixed(loss_rate, 12) + " over " + Fixed(wall, 0) + " s.");
  if (!deadline.Finished()) ReportNotFinished("soak", "soak", true, deadline.Why(), &table);
  table.notes.push_back(
      lost == 0 && duplicated == 0 && totals_seen.reordered == 0
          ? "PASS: every admitted message arrived exactly once, in per-producer order."
          : "FAIL: admitted messages were lost, duplicated or reordered.");
  table.notes.push_back(
      "Latency: publish (bus clock, whole microseconds) until the callback, every 64th "
      "message; "
      "producers never pause, so the queue runs full and latency is queueing time; " +
      WithThousands(negative_latencies.value) +
      " samples below zero (counter skew between cores) were counted and left out.");
  report.AddMetric("soak.admitted", static_cast<double>(admitted), "messages", Better::kNeither);
  report.AddMetric("soak.lost", static_cast<double>(lost), "messages", Better::kLower);
  report.AddMetric("soak.duplicated", static_cast<double>(duplicated), "messages", Better::kLower);
  report.AddMetric("soak.reordered", static_cast<double>(totals_seen.reordered), "messages",
                   Better::kLower);
  report
      .AddMetric("soak.processed_mps", static_cast<double>(totals_seen.received) / wall / 1e6,
                 "M msg/s",
                 Better::kHigher)
      .gated = false;  // one long run: no spread to judge a change by
  report.tables.push_back(table);
}

}  // namespace sluice::bench
