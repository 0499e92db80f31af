#include "scenarios/common.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <iostream>

namespace sluice::bench {

double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

int Options::ProducerCpu(int producer_index) const {
  if (!separate_cores) return cpus.front();
  // Producers share every CPU but the consumer's (cpus[1]), round robin.
  std::vector<int> producer_cpus = cpus;
  producer_cpus.erase(producer_cpus.begin() + 1);
  return producer_cpus[static_cast<std::size_t>(producer_index) % producer_cpus.size()];
}

int Options::ConsumerCpu() const { return separate_cores ? cpus[1] : cpus.front(); }

bool ApplySuite(const std::string& suite, Options* o) {
  o->suite = suite;
  if (suite == "smoke") {
    o->rounds = 2;
    o->publish_messages = 10000;
    o->latency_samples = 2000;
    o->dispatch_messages = 20000;
    o->end_to_end_messages = 100000;
    o->sustained_seconds = 0.1;
    o->load_seconds = 0.05;
    o->paced_seconds = 0.05;
  } else if (suite == "quick") {
    o->rounds = 5;
    o->publish_messages = 100000;
    o->latency_samples = 10000;
    o->dispatch_messages = 100000;
    o->end_to_end_messages = 2000000;
    o->sustained_seconds = 1.0;
    o->load_seconds = 0.5;
    o->paced_seconds = 0.5;
  } else if (suite == "standard") {
    o->rounds = 10;
    o->publish_messages = 100000;
    o->latency_samples = 100000;
    o->dispatch_messages = 100000;
    o->end_to_end_messages = 10000000;
    o->sustained_seconds = 5.0;
    o->load_seconds = 2.0;
    o->paced_seconds = 2.0;
  } else if (suite == "soak") {
    // Exactly-once checking over a long run: --duration sets it.
    o->sustained_seconds = 60;
    o->producers = 0;  // 0: more producers than cores, chosen in SelectCpus
  } else {
    return false;
  }
  return true;
}

void SelectCpus(Options* options) {
  options->cpus = AllowedCpus();
  options->separate_cores = options->cpus.size() >= 2;
  if (options->producers == 0) options->producers = static_cast<int>(options->cpus.size()) + 2;
}

std::string DescribePinning(const Options& options) {
  if (!options.separate_cores) {
    return "one CPU available: producer and consumer share CPU " +
           std::to_string(options.cpus.front()) + " (cross-core figures are not measured)";
  }
  return "producer pinned to CPU " + std::to_string(options.ProducerCpu(0)) + ", consumer to CPU " +
         std::to_string(options.ConsumerCpu());
}

std::string ModeKey(PerformanceMode mode) {
  switch (mode) {
    case PerformanceMode::FULL_FEATURED:
      return "full_featured";
    case PerformanceMode::BARE_METAL:
      return "bare_metal";
    case PerformanceMode::NO_STATS:
      return "no_stats";
  }
  return "unknown";
}

void Progress(const std::string& message) {
  // Seconds since the first progress line: where a long run spends its time.
  static const auto start = std::chrono::steady_clock::now();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "[sluice_bench " << Fixed(seconds, 1) << " s] " << message << std::endl;
}

double TimeNanos(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

double CountedRowSeconds(const Options& options, std::uint64_t messages) {
  const double seconds = kLeastRowSeconds + static_cast<double>(messages) / kSlowestRowRate;
  return options.row_deadline_cap > 0 ? std::min(seconds, options.row_deadline_cap) : seconds;
}

double TimedRowSeconds(const Options& options, double seconds) {
  const double limit = kLeastRowSeconds + 3 * seconds;
  return options.row_deadline_cap > 0 ? std::min(limit, options.row_deadline_cap) : limit;
}

double RunProducersAndConsumer(const Options& options, RowDeadline& deadline, int producer_count,
                               const std::function<void(int)>& producer,
                               const std::function<std::uint32_t()>& consume,
                               const std::function<bool()>& finished, double* cpu_seconds,
                               const std::function<void()>& on_start) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::chrono::steady_clock::time_point start;
  // Written by the threads as they finish, while others may still run.
  Isolated<std::chrono::steady_clock::time_point> finish;
  Isolated<std::atomic<double>> cpu_total;
  Isolated<bool> consumer_timed_out;  // the consumer's, read after the join
  auto add_cpu = [&cpu_total](double seconds) {
    double old = cpu_total.value.load();
    while (!cpu_total.value.compare_exchange_weak(old, old + seconds)) {
    }
  };
  std::thread consumer([&] {
    PinThisThread(options.ConsumerCpu());
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) {
    }
    const double cpu_at_go = ThreadCpuSeconds();
    std::uint64_t empty_polls = 0;
    for (;;) {
      if (consume() != 0) continue;
      for (int i = 0; i < options.idle_pauses; ++i) detail::CpuRelax();
      const bool done = finished();
      if (!done && !deadline.ExpiredAt(++empty_polls)) continue;
      // Given up after the joins, so that a producer's reason (the cause)
      // is the one reported when both saw the deadline.
      consumer_timed_out.value = !done;
      // Whatever is still queued, then out (each batch is bounded, and
      // producers that gave up publish no more).
      for (std::uint32_t batches = 0; consume() != 0 && batches < (1u << 24); ++batches) {
      }
      break;
    }
    finish.value = std::chrono::steady_clock::now();
    add_cpu(ThreadCpuSeconds() - cpu_at_go);
  });
  std::vector<std::thread> producers;
  for (int p = 0; p < producer_count; ++p) {
    producers.emplace_back([&, p] {
      PinThisThread(options.ProducerCpu(p));
      ready.fetch_add(1);
      // Yields: with more producers than CPUs, spinning here slows the
      // spawning of the rest.
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double cpu_at_go = ThreadCpuSeconds();
      producer(p);
      add_cpu(ThreadCpuSeconds() - cpu_at_go);
    });
  }
  // Every thread starts in the end; should the system take past the
  // deadline, the threads find it expired and return at once.
  while (ready.load() < producer_count + 1 && !deadline.Expired()) std::this_thread::yield();
  if (on_start) on_start();
  start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  consumer.join();
  if (consumer_timed_out.value) {
    (void)deadline.TimedOut("the consumer waited for the rest of the messages");
  }
  if (cpu_seconds != nullptr) *cpu_seconds = cpu_total.value.load();
  return std::chrono::duration<double>(finish.value - start).count();
}

namespace {
std::vector<std::string>& MutableFailures() {
  static std::vector<std::string> failures;
  return failures;
}
}  // namespace

double ClockStepNanos() {
  static const double step = [] {
    std::uint64_t smallest = ~std::uint64_t{0};
    std::uint64_t previous = FastClock::Ticks();
    for (int i = 0; i < 200000; ++i) {
      const std::uint64_t now = FastClock::Ticks();
      if (now > previous) smallest = std::min(smallest, now - previous);
      previous = now;
    }
    return FastClock::TicksToNanos(smallest);
  }();
  return step;
}

std::string ClockStepNote() {
  return "Latency figures come in multiples of the clock step: " + Fixed(ClockStepNanos(), 1) +
         " ns here (the smallest advance seen between two readings); a difference within one "
         "step is not resolved, and a P50 that moves by one step has not changed.";
}

void RecordFailure(const std::string& what) { MutableFailures().push_back(what); }

void ReportNotFinished(const std::string& table_id, const std::string& row, bool is_sluice,
                       const std::string& why, Table* table) {
  const std::string note = "Not finished: " + row + ": " + why + ".";
  if (is_sluice) {
    table->notes.push_back(note + " A Sluice row that does not finish fails the run.");
    RecordFailure(table_id + ": " + row + " did not finish: " + why);
  } else {
    table->notes.push_back(note +
                           " A peer's row that does not finish is reported here and does not "
                           "fail the run; the rest of the table is measured as usual.");
  }
  Progress(table_id + ": not finished: " + row + ": " + why);
}
const std::vector<std::string>& Failures() { return MutableFailures(); }

const NamedScenario& SoakScenario() {
  static const NamedScenario soak = {
      "soak", "long run: every admitted message exactly once, in order; drift per interval",
      &RunSoak};
  return soak;
}

const std::vector<NamedScenario>& SelfTestScenarios() {
  static const std::vector<NamedScenario> scenarios = {
      {"selftest-peer",
       "self-test: a peer row that cannot make progress is reported as not finished",
       &RunStuckPeer},
      {"selftest-sluice",
       "self-test: a Sluice row that cannot make progress is not finished and fails the run",
       &RunStuckSluice},
      {"selftest-blocking",
       "self-test: a row stuck in a call that cannot poll its deadline ends the run (watchdog)",
       &RunLosingBlockingPeer},
  };
  return scenarios;
}

const std::vector<NamedScenario>& AllScenarios() {
  static const std::vector<NamedScenario> scenarios = {
      {"modes", "publish throughput per performance mode", &RunModes},
      {"batch", "publish throughput per batch size", &RunBatchSizes},
      {"latency", "end-to-end latency percentiles, callbacks and visitor", &RunLatency},
      {"dispatch", "ProcessBatchWith (visitor) vs ProcessBatch (callbacks)", &RunDispatch},
      {"burst", "backpressure burst: priority admission under overload", &RunBurst},
      {"sustained", "sustained run, producer faster than consumer", &RunSustained},
      {"load", "fixed-rate load scenarios and many subscribers", &RunLoad},
      {"payload", "payload sizes end to end", &RunPayloadSizes},
      {"memory", "bytes per slot and resident memory", &RunMemory},
      {"peers", "Sluice against bare queues, side by side", &RunPeers},
      {"sleep", "the sleeping consumer: publish cost, idle CPU, wake-up latency, paced throughput",
       &RunSleep},
      {"pubbatch", "PublishBatch against single publishes", &RunPublishBatch},
      {"backlog",
       "a HIGH message behind 100,000 queued LOW: publish to callback, FIFO and priority-ordered "
       "buses",
       &RunBacklog},
      {"onecore", "one core: push 1,024 then pop 1,024, Sluice against bare queues", &RunOneCore},
      {"scaling",
       "MPSC scaling: 1, 2, 4, 8 producers, shared queue and lanes against moodycamel with "
       "tokens",
       &RunScaling},
      {"loan", "large payloads (4 KB, 64 KB) end to end: loaned from a LoanPool against copied",
       &RunLoans},
  };
  return scenarios;
}

}  // namespace sluice::bench
