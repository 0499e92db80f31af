// What every benchmark scenario shares: options, payloads, bus types, thread
// placement and the end-to-end runner.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <sluice/sluice.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bench_payload.hpp"
#include "harness/deadline.hpp"
#include "harness/isolated.hpp"
#include "harness/platform.hpp"
#include "report/report.hpp"

namespace sluice::bench {

struct Options {
  std::string suite = "quick";
  int rounds = 5;
  int producers = 1;
  std::uint64_t publish_messages = 100000;  // per round, publish-only tables
  std::uint64_t latency_samples = 10000;
  std::uint64_t dispatch_messages = 100000;
  std::uint64_t end_to_end_messages = 2000000;
  double sustained_seconds = 1.0;
  double load_seconds = 0.5;
  double paced_seconds = 0.5;     // per cell of the sleep table's paced rows
  double consumer_work_ns = 100;  // per message, in the overloaded sustained run
  // Pause instructions a consumer loop spends after an empty poll, for every
  // queue alike: it stops re-reading the line a producer is about to write.
  int idle_pauses = 0;
  // When above 0, no row's deadline is longer (--row-deadline).
  double row_deadline_cap = 0;
  // Placement, filled in by SelectCpus().
  std::vector<int> cpus;
  bool separate_cores = true;

  int ProducerCpu(int producer_index) const;
  int ConsumerCpu() const;
};

// Fills the suite's counts; false for an unknown suite.
bool ApplySuite(const std::string& suite, Options* options);
void SelectCpus(Options* options);
std::string DescribePinning(const Options& options);

template <ProducerModel kModel, typename Payload = std::variant<Sample<24>>>
using BenchBus = AsyncBus<Payload, 131072, kModel>;

inline const char* ModelName(ProducerModel model) {
  return model == ProducerModel::kMulti ? "MPSC" : "SPSC";
}
inline std::string ModelKey(ProducerModel model) {
  return model == ProducerModel::kMulti ? "mpsc" : "spsc";
}
std::string ModeKey(PerformanceMode mode);

// The smallest advance of FastClock seen between two readings, ns (measured
// once): latency figures come in multiples of it.
double ClockStepNanos();
// The note every table with latencies carries about that step.
std::string ClockStepNote();

// Row deadlines (harness/deadline.hpp). A counted row of `messages` gets
// messages / kSlowestRowRate seconds, a timed row of `seconds` three times
// its length, each plus kLeastRowSeconds (start-up, warm-up, a preempted
// thread); Options::row_deadline_cap caps both. A queue slower than
// kSlowestRowRate end to end is reported as not finished, not measured.
inline constexpr double kSlowestRowRate = 100000;  // messages per second
inline constexpr double kLeastRowSeconds = 5;
double CountedRowSeconds(const Options& options, std::uint64_t messages);
double TimedRowSeconds(const Options& options, double seconds);

// Progress for long suites goes to stderr, the report to stdout.
void Progress(const std::string& message);

// The calling thread's CPU time, seconds. Exact to the moment, unlike the
// process total, which lags by up to a scheduler tick per running thread.
double ThreadCpuSeconds();

// Wall time of `body`, in nanoseconds.
double TimeNanos(const std::function<void()>& body);

// Drains a bus without dispatching to subscribers.
template <typename Bus>
void Drain(Bus& bus) {
  while (bus.ProcessBatchWith([](const auto&) {}) > 0) {
  }
}

// Runs `producer(index)` on each producer thread and `consume()` (returning
// how many messages it dispatched) on a consumer thread. The consumer asks
// `finished()` only when a batch comes back empty, then drains once more, so
// the check never touches the producers' cache lines while messages flow.
// Bounded by `deadline`: the consumer also stops once it has expired (polled
// every kDeadlinePollEvery empty batches), and the producers must poll it in
// every wait of theirs (RetryUntil) and return when it has expired.
// `on_start`, when given, runs on the calling thread just before the start
// signal, once every thread is ready (a timer for a timed run starts there).
// Returns seconds from the start signal until the consumer finished; when
// `cpu_seconds` is given, the CPU time its threads spent from the start
// signal to their end (not their start-up, nor their spinning while they
// wait for the signal; the calling thread sleeps in join()). The callers
// follow the rule in harness/isolated.hpp: what the threads write while they
// run lives in Isolated storage.
double RunProducersAndConsumer(const Options& options, RowDeadline& deadline, int producer_count,
                               const std::function<void(int)>& producer,
                               const std::function<std::uint32_t()>& consume,
                               const std::function<bool()>& finished, double* cpu_seconds = nullptr,
                               const std::function<void()>& on_start = nullptr);

// A measurement that failed its own sanity check (a row that measured
// nothing): sluice_bench prints each and exits 3 after writing its outputs.
void RecordFailure(const std::string& what);
const std::vector<std::string>& Failures();

// A row that did not finish by its deadline: a note under the table names
// it and says why. A Sluice row's is also a failure of the run (exit status
// 3, RecordFailure); a peer's is the note alone, which says so.
void ReportNotFinished(const std::string& table_id, const std::string& row, bool is_sluice,
                       const std::string& why, Table* table);

// Tells the compiler that `value` is used, so work feeding it is not removed.
template <typename T>
inline void KeepAlive(const T& value) {
  __asm__ __volatile__("" : : "r,m"(value) : "memory");
}

// Burns about `ticks` of FastClock time: simulated per-message work.
inline void SpinTicks(std::uint64_t ticks) {
  const std::uint64_t start = FastClock::Ticks();
  while (FastClock::Ticks() - start < ticks) {
  }
}

// A scenario appends its table(s) and metrics to the report.
using Scenario = void (*)(const Options&, Report&);
struct NamedScenario {
  const char* id;
  const char* summary;
  Scenario run;
};
const std::vector<NamedScenario>& AllScenarios();

void RunModes(const Options&, Report&);
void RunBatchSizes(const Options&, Report&);
void RunLatency(const Options&, Report&);
void RunDispatch(const Options&, Report&);
void RunBurst(const Options&, Report&);
void RunSustained(const Options&, Report&);
void RunLoad(const Options&, Report&);
void RunPayloadSizes(const Options&, Report&);
void RunMemory(const Options&, Report&);
void RunPeers(const Options&, Report&);
void RunSleep(const Options&, Report&);
void RunPublishBatch(const Options&, Report&);
void RunBacklog(const Options&, Report&);
void RunOneCore(const Options&, Report&);
void RunScaling(const Options&, Report&);
void RunLoans(const Options&, Report&);
void RunSoak(const Options&, Report&);

// Runs only in the soak suite (or when named with --only).
const NamedScenario& SoakScenario();

// Self-tests of the row deadlines, run only when named with --only: a peer
// row and a Sluice row that cannot make progress, and a waiting peer whose
// pop never returns (the watchdog's case).
void RunStuckPeer(const Options&, Report&);
void RunLosingBlockingPeer(const Options&, Report&);
void RunStuckSluice(const Options&, Report&);
const std::vector<NamedScenario>& SelfTestScenarios();

#if SLUICE_BENCH_NATS
// The NATS bridge's table (benchmarks/scenarios/nats_scenario.cpp): built
// with the bridge, run only when named.
const NamedScenario& NatsScenario();
#endif

}  // namespace sluice::bench
