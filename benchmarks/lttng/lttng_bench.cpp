// What tracing into LTTng-UST costs (sluice/trace/lttng/lttng_sink.hpp):
// the one-core rounds of table 14 (push 1,024 messages, pop them in
// batches of 256, one thread pinned), each configuration untraced and
// traced into LTTng, in blocks that alternate them. Whether a session
// records sluice:event is the caller's: run_lttng_bench.sh runs this once
// with no session (the tracepoints are compiled in and disabled: what a
// traced binary costs until someone looks) and once inside a session that
// records every event. Prints P50 and P10-P90 ns a message per row and the
// traced rows' ratio to their untraced twins; exits 1 if a round lost a
// message.
//
// Usage: sluice_lttng_bench [--rounds N] [--label TEXT]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness/platform.hpp"
#include "peers/one_core_rows.hpp"
#include "peers/peer_adapters.hpp"
#include "sluice/trace/lttng/lttng_sink.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace sluice::bench {
namespace {

using LttngTracer = trace::TracingObserver<trace::LttngSink>;
struct LttngTraits : DefaultBusTraits {
  using Observer = LttngTracer;
};
// The bus id of this program's events (a session may filter on it).
constexpr std::uint16_t kBusId = 4242;

// A Sluice adapter of table 14 whose bus is traced into LTTng.
template <PerformanceMode kMode, SluicePath kPath, typename Probe>
class LttngSluiceAdapter {
 public:
  explicit LttngSluiceAdapter(Probe& probe) : inner_(probe) {
    (void)inner_.bus().GetObserver().Attach(&sink_, kBusId);
  }
  bool TryPush(const Message& m) { return inner_.TryPush(m); }
  std::size_t PopSome(Probe& probe) { return inner_.PopSome(probe); }

 private:
  trace::LttngSink sink_;
  SluiceAdapter<ProducerModel::kSingle, kMode, SluiceCall::kPublishFast, kPath, Probe, LttngTraits>
      inner_;
};

template <typename P>
using FullCallbacks = SluiceAdapter<ProducerModel::kSingle, PerformanceMode::FULL_FEATURED,
                                    SluiceCall::kPublishFast, SluicePath::kCallbacks, P>;
template <typename P>
using BareVisitor = SluiceAdapter<ProducerModel::kSingle, PerformanceMode::BARE_METAL,
                                  SluiceCall::kPublishFast, SluicePath::kVisitor, P>;
template <typename P>
using FullCallbacksLttng =
    LttngSluiceAdapter<PerformanceMode::FULL_FEATURED, SluicePath::kCallbacks, P>;
template <typename P>
using BareVisitorLttng = LttngSluiceAdapter<PerformanceMode::BARE_METAL, SluicePath::kVisitor, P>;

struct Samples {
  std::vector<double> nanos_per_message;
  std::uint64_t lost = 0;
};

template <template <typename> class Adapter>
void Measure(std::size_t rounds, Samples& out) {
  CountProbe probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe);
  std::uint64_t seq = 0;
  for (std::size_t round = 0; round <= rounds; ++round) {  // round 0: warm-up, not timed
    std::uint64_t pushed = 0;
    const std::uint64_t start = FastClock::Ticks();
    const std::uint64_t popped = OneCoreRound(*queue, probe, seq, pushed);
    const std::uint64_t end = FastClock::Ticks();
    if (popped != pushed || pushed != kOneCoreBurst) ++out.lost;
    if (round != 0) {
      out.nanos_per_message.push_back(FastClock::TicksToNanos(end - start) /
                                      static_cast<double>(kOneCoreBurst));
    }
  }
}

struct Row {
  const char* name;
  void (*measure)(std::size_t, Samples&);
  int twin;  // the untraced row a traced one compares with; -1 for none
};

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
}

}  // namespace
}  // namespace sluice::bench

int main(int argc, char** argv) {
  using namespace sluice::bench;
  std::size_t rounds = 2000;
  std::string label = "LTTng session: not said (see run_lttng_bench.sh)";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--label") == 0) {
      label = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--label TEXT]\n", argv[0]);
      return 2;
    }
  }
  if (rounds < 5) rounds = 5;  // a round a block at least
  FastClock::Calibrate();
  const std::vector<int> cpus = AllowedCpus();
  if (!cpus.empty()) (void)PinThisThread(cpus.front());
  const Row rows[] = {
      {"SPSC FULL_FEATURED PublishFast callbacks", &Measure<FullCallbacks>, -1},
      {"SPSC FULL_FEATURED PublishFast callbacks, traced into LTTng", &Measure<FullCallbacksLttng>,
       0},
      {"SPSC BARE_METAL PublishFast visitor", &Measure<BareVisitor>, -1},
      {"SPSC BARE_METAL PublishFast visitor, traced into LTTng", &Measure<BareVisitorLttng>, 2},
  };
  constexpr std::size_t kRows = sizeof(rows) / sizeof(rows[0]);
  constexpr std::size_t kBlocks = 5;
  Samples samples[kRows];
  for (std::size_t block = 0; block < kBlocks; ++block) {
    for (std::size_t k = 0; k < kRows; ++k) {
      const std::size_t i = (block + k) % kRows;  // each block starts with another row
      // `rounds` in all: the first rounds % kBlocks blocks one more.
      rows[i].measure(rounds / kBlocks + (block < rounds % kBlocks ? 1 : 0), samples[i]);
    }
  }
  std::printf("== LTTng-UST tracing, one core: push 1,024 then pop 1,024, 24-byte payload\n");
  std::printf("   %s | %s | %s | %s\n", CpuModel().c_str(), CompilerDescription().c_str(),
              UtcTimestamp().c_str(), label.c_str());
  std::printf("  %-62s %10s %14s %10s\n", "row", "P50 ns/msg", "P10-P90", "traced/not");
  bool lost = false;
  double p50[kRows];
  for (std::size_t i = 0; i < kRows; ++i) {
    const auto& values = samples[i].nanos_per_message;
    p50[i] = Quantile(values, 0.5);
    char ratio[32] = "";
    if (rows[i].twin >= 0 && p50[rows[i].twin] > 0) {
      std::snprintf(ratio, sizeof ratio, "%.2fx", p50[i] / p50[rows[i].twin]);
    }
    std::printf("  %-62s %10.2f %6.2f-%-7.2f %10s\n", rows[i].name, p50[i], Quantile(values, 0.1),
                Quantile(values, 0.9), ratio);
    if (samples[i].lost != 0) {
      std::printf("  %s: %llu rounds lost messages\n", rows[i].name,
                  static_cast<unsigned long long>(samples[i].lost));
      lost = true;
    }
  }
  std::printf("  %zu rounds a row in %zu blocks, pinned to CPU %d; %s.\n", rounds, kBlocks,
              cpus.empty() ? -1 : cpus.front(), FastClock::Description().c_str());
  return lost ? 1 : 0;
}
