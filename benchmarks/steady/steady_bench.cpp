// End to end, run after run: how steady is one configuration's throughput
// across consecutive runs? One producer pinned to the first CPU publishes
// `--messages` 24-byte messages, retrying each refused one; one consumer
// pinned to the second CPU loops on ProcessBatch (one callback) or
// ProcessBatchWith (a visitor) until it has them all; 131,072 slots. Each
// round runs every row once, in an order that rotates with the round, between
// two placement probes (the cache-line round trip between the two CPUs,
// harness/platform.hpp); boost's spsc_queue, when found, runs in the same
// round with the same loop (push retried, pop of up to 256). Prints every run
// (M msg/s, refusals per message) and, per row, the slowest, the fastest and
// their ratio. `--idle-pause N`: every consumer loop spins N pause
// instructions after a poll that found nothing.
//
// A run that has not finished after `--run-deadline` seconds is stopped (the
// producer stops publishing, the consumer stops waiting) and reported as not
// finished; the exit status is then 1. No loop here waits for ever.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sluice/sluice.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bench_payload.hpp"
#include "harness/platform.hpp"

#if SLUICE_PEER_BOOST_LOCKFREE
#include <boost/lockfree/spsc_queue.hpp>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_STEADY_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define SLUICE_STEADY_PAUSE() __asm__ __volatile__("yield")
#else
#define SLUICE_STEADY_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace {

using sluice::bench::Sample;
using Message = Sample<24>;
constexpr std::size_t kSlots = 131072;
constexpr std::uint32_t kBatch = 256;

struct Settings {
  int runs = 20;
  std::uint64_t messages = 10'000'000;
  int idle_pause = 0;
  double run_deadline_seconds = 60;
};

struct Run {
  bool finished = false;
  double mps = 0;
  double refusals_per_message = 0;
};

enum class Call { kMedium, kHigh, kFast };
enum class Path { kCallbacks, kVisitor };

struct Row {
  const char* name;
  Run (*run)(const Settings&);
};

void IdlePause(int pauses) {
  for (int i = 0; i < pauses; ++i) SLUICE_STEADY_PAUSE();
}

// Runs `produce(i)` (true when admitted) for i in [0, messages) on CPU 0,
// retrying refusals, and `consume()` (how many it took) on this thread,
// pinned to CPU 1, until every message arrived or the deadline passed.
template <typename Produce, typename Consume>
Run Measure(const Settings& settings, Produce&& produce, Consume&& consume) {
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::uint64_t refused = 0;
  std::thread producer([&] {
    (void)sluice::bench::PinThisThread(0);
    while (!go.load(std::memory_order_acquire)) {
    }
    for (std::uint64_t i = 0; i < settings.messages; ++i) {
      while (!produce(i)) {
        ++refused;
        if (stop.load(std::memory_order_relaxed)) return;
      }
    }
  });
  (void)sluice::bench::PinThisThread(1);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(settings.run_deadline_seconds));
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  std::uint64_t got = 0;
  std::uint32_t polls = 0;
  while (got < settings.messages) {
    const std::uint64_t taken = consume();
    got += taken;
    if (taken == 0) IdlePause(settings.idle_pause);
    if (++polls % 4096 == 0 && std::chrono::steady_clock::now() > deadline) break;
  }
  const auto end = std::chrono::steady_clock::now();
  stop.store(true, std::memory_order_relaxed);
  producer.join();
  Run run;
  run.finished = got == settings.messages;
  run.mps = static_cast<double>(got) / std::chrono::duration<double>(end - start).count() / 1e6;
  run.refusals_per_message = static_cast<double>(refused) / static_cast<double>(settings.messages);
  return run;
}

template <sluice::ProducerModel kModel, sluice::PerformanceMode kMode, Call kCall, Path kPath>
Run RunSluice(const Settings& settings) {
  using Bus = sluice::AsyncBus<std::variant<Message>, kSlots, kModel>;
  auto bus = std::make_unique<Bus>();
  bus->SetPerformanceMode(kMode);
  std::uint64_t sum = 0;
  if constexpr (kPath == Path::kCallbacks) {
    if (!bus->template Subscribe<Message>([&sum](const Message& m) { sum += m.seq; }).IsValid()) {
      return {};
    }
  }
  Run run = Measure(
      settings,
      [&](std::uint64_t i) {
        Message m{};
        m.seq = i;
        if constexpr (kCall == Call::kMedium) {
          return bus->PublishWithPriority(m, 1, sluice::MessagePriority::MEDIUM).IsAdmitted();
        } else if constexpr (kCall == Call::kHigh) {
          return bus->PublishWithPriority(m, 1, sluice::MessagePriority::HIGH).IsAdmitted();
        } else {
          return bus->PublishFast(m, 1, std::chrono::nanoseconds(0)).IsAdmitted();
        }
      },
      [&]() -> std::uint64_t {
        if constexpr (kPath == Path::kCallbacks) {
          return bus->ProcessBatch(kBatch);
        } else {
          return bus->ProcessBatchWith([&sum](const Message& m) { sum += m.seq; }, kBatch);
        }
      });
  // Every message exactly once: the sum of 0 .. messages-1.
  if (run.finished && sum != settings.messages * (settings.messages - 1) / 2) run.finished = false;
  return run;
}

#if SLUICE_PEER_BOOST_LOCKFREE
Run RunBoost(const Settings& settings) {
  auto queue =
      std::make_unique<boost::lockfree::spsc_queue<Message, boost::lockfree::capacity<kSlots>>>();
  std::uint64_t sum = 0;
  std::vector<Message> popped(kBatch);
  Run run = Measure(
      settings,
      [&](std::uint64_t i) {
        Message m{};
        m.seq = i;
        return queue->push(m);
      },
      [&]() -> std::uint64_t {
        const std::size_t n = queue->pop(popped.data(), kBatch);
        for (std::size_t j = 0; j < n; ++j) sum += popped[j].seq;
        return n;
      });
  if (run.finished && sum != settings.messages * (settings.messages - 1) / 2) run.finished = false;
  return run;
}
#endif

constexpr auto kSpsc = sluice::ProducerModel::kSingle;
constexpr auto kMpsc = sluice::ProducerModel::kMulti;
constexpr auto kFull = sluice::PerformanceMode::FULL_FEATURED;
constexpr auto kBare = sluice::PerformanceMode::BARE_METAL;

const Row kRows[] = {
    {"Sluice SPSC FULL_FEATURED PublishWithPriority(MEDIUM) callbacks",
     RunSluice<kSpsc, kFull, Call::kMedium, Path::kCallbacks>},
    {"Sluice SPSC FULL_FEATURED PublishWithPriority(HIGH) callbacks",
     RunSluice<kSpsc, kFull, Call::kHigh, Path::kCallbacks>},
    {"Sluice SPSC BARE_METAL PublishFast callbacks",
     RunSluice<kSpsc, kBare, Call::kFast, Path::kCallbacks>},
    {"Sluice SPSC BARE_METAL PublishFast visitor",
     RunSluice<kSpsc, kBare, Call::kFast, Path::kVisitor>},
    {"Sluice MPSC FULL_FEATURED PublishWithPriority(MEDIUM) callbacks",
     RunSluice<kMpsc, kFull, Call::kMedium, Path::kCallbacks>},
#if SLUICE_PEER_BOOST_LOCKFREE
    {"boost::lockfree::spsc_queue, push retried, pop of up to 256", RunBoost},
#endif
};
constexpr std::size_t kRowCount = sizeof(kRows) / sizeof(kRows[0]);

bool ParseArgs(int argc, char** argv, Settings* settings) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--runs") == 0 && has_value) {
      settings->runs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--messages") == 0 && has_value) {
      settings->messages = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--idle-pause") == 0 && has_value) {
      settings->idle_pause = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--run-deadline") == 0 && has_value) {
      settings->run_deadline_seconds = std::atof(argv[++i]);
    } else {
      return false;
    }
  }
  return settings->runs >= 1 && settings->runs <= 1000 && settings->messages >= 1 &&
         settings->idle_pause >= 0 && settings->idle_pause <= 100000 &&
         settings->run_deadline_seconds > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (!ParseArgs(argc, argv, &settings)) {
    std::fprintf(stderr,
                 "usage: %s [--runs N (1-1000, 20)] [--messages N (10000000)] [--idle-pause N "
                 "(0-100000, 0)] [--run-deadline SECONDS (60)]\n",
                 argv[0]);
    return 2;
  }
  if (sluice::bench::AllowedCpus().size() < 2) {
    std::printf("steady: needs two CPUs to pin the producer and the consumer apart; skipped\n");
    return 0;
  }
  std::printf("steady: %s, %s, %s\n", sluice::bench::CpuModel().c_str(),
              sluice::bench::CompilerDescription().c_str(), sluice::bench::UtcTimestamp().c_str());
  std::printf("%d runs of every row, %llu messages each, 131,072 slots, idle pause %d\n",
              settings.runs, static_cast<unsigned long long>(settings.messages),
              settings.idle_pause);
  std::vector<std::vector<Run>> runs(kRowCount);
  bool all_finished = true;
  for (int round = 0; round < settings.runs; ++round) {
    const double before = sluice::bench::PlacementProbeNanos(0, 1);
    std::printf("round %2d, probe %4.0f ns (%s):\n", round + 1, before,
                sluice::bench::PlacementName(sluice::bench::ClassifyPlacement(before)));
    for (std::size_t k = 0; k < kRowCount; ++k) {
      const std::size_t row = (k + static_cast<std::size_t>(round)) % kRowCount;
      const Run run = kRows[row].run(settings);
      runs[row].push_back(run);
      all_finished = all_finished && run.finished;
      std::printf("  %-66s %s %7.2f M msg/s, %.3f refusals a message\n", kRows[row].name,
                  run.finished ? "   " : "NOT FINISHED", run.mps, run.refusals_per_message);
    }
    const double after = sluice::bench::PlacementProbeNanos(0, 1);
    std::printf("  probe after %4.0f ns (%s)\n", after,
                sluice::bench::PlacementName(sluice::bench::ClassifyPlacement(after)));
    std::fflush(stdout);
  }
  std::printf("\n%-66s %9s %9s %7s\n", "row (finished runs)", "slowest", "fastest", "ratio");
  for (std::size_t row = 0; row < kRowCount; ++row) {
    double slowest = 0;
    double fastest = 0;
    for (const Run& run : runs[row]) {
      if (!run.finished) continue;
      slowest = slowest == 0 || run.mps < slowest ? run.mps : slowest;
      fastest = run.mps > fastest ? run.mps : fastest;
    }
    std::printf("%-66s %9.2f %9.2f %6.2fx\n", kRows[row].name, slowest, fastest,
                slowest > 0 ? fastest / slowest : 0.0);
  }
  std::printf("runs that did not finish: %s\n", all_finished ? "0" : "some (see above)");
  return all_finished ? 0 : 1;
}
