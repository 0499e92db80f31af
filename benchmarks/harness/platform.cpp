#include "harness/platform.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "harness/isolated.hpp"
#include "sluice/clock.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define SLUICE_BENCH_HAS_TSC 1
#else
#define SLUICE_BENCH_HAS_TSC 0
#endif

namespace sluice::bench {
namespace {

double nanos_per_tick = 1.0;

std::uint64_t SteadyNanos() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::uint64_t ReadStatusField(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) {
      std::istringstream in(line.substr(std::string(field).size()));
      std::uint64_t kilobytes = 0;
      in >> kilobytes;
      return kilobytes * 1024;
    }
  }
  return 0;
}

}  // namespace

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

bool PinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string CompilerDescription() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("g++ ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

std::string UtcTimestamp() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return buffer;
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::uint64_t ResidentBytes() { return ReadStatusField("VmRSS:"); }
std::uint64_t PeakResidentBytes() { return ReadStatusField("VmHWM:"); }

void FastClock::Calibrate() {
#if SLUICE_BENCH_HAS_TSC
  // Both ends of the 20 ms window pair the TSC with steady_clock through
  // brackets (sluice::detail::PairCounterWithSteady), so a preemption between
  // the reads is rejected instead of measured, and the window is measured
  // again. If no window passes, steady_clock reads cost more than a bracket
  // allows: an earlier calibration stays, else the narrowest-bracketed window.
  constexpr int kWindows = 10;
  constexpr std::uint64_t kWindowNanos = 20'000'000;
  static bool calibrated = false;
  const auto read_tsc = [] { return static_cast<std::uint64_t>(__rdtsc()); };
  double fallback = 0;
  std::uint64_t fallback_bracket = ~std::uint64_t{0};
  for (int window = 0; window < kWindows; ++window) {
    sluice::detail::CounterPairing start;
    sluice::detail::CounterPairing end;
    const bool start_ok = sluice::detail::PairCounterWithSteady(
        read_tsc, SteadyNanos, sluice::detail::kMaxPairingBracketTicks, &start);
    while (SteadyNanos() - start.steady < kWindowNanos) {
    }
    const bool end_ok = sluice::detail::PairCounterWithSteady(
        read_tsc, SteadyNanos, sluice::detail::kMaxPairingBracketTicks, &end);
    if (end.ticks <= start.ticks || end.steady <= start.steady) continue;
    const double estimate = static_cast<double>(end.steady - start.steady) /
                            static_cast<double>(end.ticks - start.ticks);
    if (start_ok && end_ok) {
      nanos_per_tick = estimate;
      calibrated = true;
      return;
    }
    const std::uint64_t bracket = std::max(start.bracket_ticks, end.bracket_ticks);
    if (bracket < fallback_bracket) {
      fallback_bracket = bracket;
      fallback = estimate;
    }
  }
  if (!calibrated && fallback > 0) nanos_per_tick = fallback;
#else
  nanos_per_tick = 1.0;
#endif
}

std::uint64_t FastClock::Ticks() noexcept {
#if SLUICE_BENCH_HAS_TSC
  return __rdtsc();
#else
  return SteadyNanos();
#endif
}

double FastClock::NanosPerTick() noexcept { return nanos_per_tick; }

std::string FastClock::Description() {
#if SLUICE_BENCH_HAS_TSC
  std::ostringstream out;
  out.precision(3);
  out << "rdtsc (" << 1.0 / nanos_per_tick << " GHz, calibrated against steady_clock)";
  return out.str();
#else
  return "std::chrono::steady_clock";
#endif
}

double PlacementProbeNanos(int cpu_a, int cpu_b) {
  constexpr int kRoundTrips = 2000;
  // A probe takes about a millisecond; one whose partner does not answer
  // within this (a CPU taken away) ends with the round trips it has.
  constexpr double kLimitNanos = 2e9;
  // The one line the probe measures; nothing else rides with it.
  Isolated<std::atomic<int>> ball;
  Isolated<std::atomic<bool>> abandon;
  const std::uint64_t limit_ticks = static_cast<std::uint64_t>(kLimitNanos / nanos_per_tick);
  const std::uint64_t begin = FastClock::Ticks();
  const auto too_long = [&] { return FastClock::Ticks() - begin > limit_ticks; };
  std::thread partner([&ball, &abandon, cpu_b] {
    std::atomic<int>& mine = ball.value;
    PinThisThread(cpu_b);
    for (int i = 0; i < kRoundTrips; ++i) {
      while (mine.load(std::memory_order_acquire) != 2 * i + 1) {
        if (abandon.value.load(std::memory_order_relaxed)) return;
      }
      mine.store(2 * i + 2, std::memory_order_release);
    }
  });
  PinThisThread(cpu_a);
  std::vector<double> samples;
  samples.reserve(kRoundTrips);
  for (int i = 0; i < kRoundTrips && !abandon.value.load(std::memory_order_relaxed); ++i) {
    const std::uint64_t start = FastClock::Ticks();
    ball.value.store(2 * i + 1, std::memory_order_release);
    for (std::uint32_t spins = 1; ball.value.load(std::memory_order_acquire) != 2 * i + 2;
         ++spins) {
      if (spins % 1024 == 0 && too_long()) {
        abandon.value.store(true, std::memory_order_relaxed);
        break;
      }
    }
    if (!abandon.value.load(std::memory_order_relaxed)) {
      samples.push_back(FastClock::TicksToNanos(FastClock::Ticks() - start));
    }
  }
  partner.join();
  if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

GapProfile MeasureGaps(int cpu, double window_ms) {
  GapProfile profile;
  profile.window_ms = window_ms;
  std::thread probe([&] {
    PinThisThread(cpu);
    const double nanos_per_tick = FastClock::NanosPerTick();
    const auto window_ticks = static_cast<std::uint64_t>(window_ms * 1e6 / nanos_per_tick);
    const auto gap_ticks = static_cast<std::uint64_t>(1000.0 / nanos_per_tick);
    const auto long_gap_ticks = static_cast<std::uint64_t>(10000.0 / nanos_per_tick);
    const std::uint64_t start = FastClock::Ticks();
    std::uint64_t previous = start;
    std::uint64_t lost = 0;
    std::uint64_t longest = 0;
    while (previous - start < window_ticks) {
      const std::uint64_t now = FastClock::Ticks();
      const std::uint64_t gap = now - previous;
      if (gap > gap_ticks) {
        lost += gap;
        if (gap > long_gap_ticks) ++profile.gaps_over_10us;
        longest = std::max(longest, gap);
      }
      previous = now;
    }
    profile.lost_percent =
        100.0 * static_cast<double>(lost) / static_cast<double>(previous - start);
    profile.max_gap_us = FastClock::TicksToNanos(longest) / 1000.0;
  });
  probe.join();
  return profile;
}

}  // namespace sluice::bench
