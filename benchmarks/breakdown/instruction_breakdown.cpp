// One configuration per function, each run for kMessages messages on one
// thread, so `valgrind --tool=callgrind --toggle-collect=<function>` counts
// exactly that configuration's instructions; and every row of the one-core
// table (peers/one_core_rows.hpp: the bare queues and Sluice, the same
// adapters and round as sluice_bench's table 14) for kOneCoreRounds rounds in
// OneCoreRounds. run_breakdown.sh drives it.
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
#include "breakdown/one_core_breakdown.hpp"

namespace {

using sluice::bench::Sample;
constexpr std::uint64_t kMessages = 100000;
using Payload = std::variant<Sample<24>>;
using Mpsc = sluice::MpscBus<Payload, 131072>;
using Spsc = sluice::SpscBus<Payload, 131072>;
using MpscPriority = sluice::MpscBus<Payload, 131072, sluice::PriorityOrderTraits>;
using SpscPriority = sluice::SpscBus<Payload, 131072, sluice::PriorityOrderTraits>;
volatile std::uint64_t sink = 0;

template <typename Bus>
std::unique_ptr<Bus> MakeBus(sluice::PerformanceMode mode) {
  auto bus = std::make_unique<Bus>();
  bus->SetPerformanceMode(mode);
  return bus;
}

// Publish only: kMessages publishes into an empty bus.
template <typename Bus, bool kFast>
__attribute__((noinline)) void PublishLoop(Bus& bus) {
  for (std::uint64_t i = 0; i < kMessages; ++i) {
    const Sample<24> sample{i, 1, 2, 3, 4};
    // kMessages fit below every threshold, so none is refused; checking
    // would add to the instructions measured.
    if constexpr (kFast) {
      (void)bus.PublishFast(sample, 1, std::chrono::nanoseconds(i));
    } else {
      (void)bus.Publish(sample, 1);
    }
  }
}

template <typename Bus>
__attribute__((noinline)) void DispatchCallbacks(Bus& bus) {
  while (bus.ProcessBatch() > 0) {
  }
}

// A visitor of its own name, not a lambda inside DispatchVisitor: the
// dispatch loop instantiated for a lambda of DispatchVisitor's has that name
// in its own, so callgrind's --toggle-collect=*DispatchVisitor* would toggle
// counting off where the compiler calls that loop instead of inlining it.
struct AddSequence {
  void operator()(const Sample<24>& s) const { sink = sink + s.seq; }
};

template <typename Bus>
__attribute__((noinline)) void DispatchVisitor(Bus& bus) {
  while (bus.ProcessBatchWith(AddSequence{}) > 0) {
  }
}

template <typename Bus>
void Fill(Bus& bus) {
  PublishLoop<Bus, true>(bus);
}

template <typename Bus>
int RunCase(const char* what, sluice::PerformanceMode mode) {
  auto bus = MakeBus<Bus>(mode);
  if (!bus->template Subscribe<Sample<24>>([](const Sample<24>& s) { sink = sink + s.seq; })
           .IsValid()) {
    return 1;
  }
  if (std::strcmp(what, "publish") == 0) {
    PublishLoop<Bus, false>(*bus);
  } else if (std::strcmp(what, "publish_fast") == 0) {
    PublishLoop<Bus, true>(*bus);
  } else if (std::strcmp(what, "callbacks") == 0) {
    Fill(*bus);
    DispatchCallbacks(*bus);
  } else if (std::strcmp(what, "visitor") == 0) {
    Fill(*bus);
    DispatchVisitor(*bus);
  } else {
    return 2;
  }
  return 0;
}

sluice::PerformanceMode ParseMode(const char* text) {
  if (std::strcmp(text, "bare") == 0) return sluice::PerformanceMode::BARE_METAL;
  if (std::strcmp(text, "no_stats") == 0) return sluice::PerformanceMode::NO_STATS;
  return sluice::PerformanceMode::FULL_FEATURED;
}

}  // namespace

// Usage: sluice_instruction_breakdown mpsc|spsc|mpsc_priority|spsc_priority
//        publish|publish_fast|callbacks|visitor full|no_stats|bare
//    or: sluice_instruction_breakdown onecore list|<row index>
// The _priority buses deliver HIGH first (PriorityOrderTraits); every message
// here is MEDIUM, so each dispatch also looks at the empty HIGH ring.
int main(int argc, char** argv) {
  const bool one_core = argc == 3 && std::strcmp(argv[1], "onecore") == 0;
  if (argc != 4 && !one_core) {
    std::fprintf(stderr,
                 "usage: %s mpsc|spsc|mpsc_priority|spsc_priority "
                 "publish|publish_fast|callbacks|visitor full|no_stats|bare\n"
                 "   or: %s onecore list|<row index>\n",
                 argv[0], argv[0]);
    return 2;
  }
  // The bus clock reads steady_clock until it calibrates, 10 ms after first
  // use: count only the calibrated path.
  (void)sluice::CounterClock::NowNanos();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (void)sluice::CounterClock::NowNanos();
  if (one_core) return sluice::bench::RunOneCoreBreakdown(argv[2]);
  const sluice::PerformanceMode mode = ParseMode(argv[3]);
  int status = 2;
  if (std::strcmp(argv[1], "mpsc") == 0) {
    status = RunCase<Mpsc>(argv[2], mode);
  } else if (std::strcmp(argv[1], "spsc") == 0) {
    status = RunCase<Spsc>(argv[2], mode);
  } else if (std::strcmp(argv[1], "mpsc_priority") == 0) {
    status = RunCase<MpscPriority>(argv[2], mode);
  } else if (std::strcmp(argv[1], "spsc_priority") == 0) {
    status = RunCase<SpscPriority>(argv[2], mode);
  }
  std::printf("%llu messages\n", static_cast<unsigned long long>(kMessages));
  return status;
}
