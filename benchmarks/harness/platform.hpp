// What the benchmark needs from the machine: pinning, a cheap clock, CPU time,
// resident memory, and probes of the machine's own noise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

// CPUs this process may run on, in order.
std::vector<int> AllowedCpus();

// Pins the calling thread to `cpu`; false when the system refuses.
bool PinThisThread(int cpu);

std::string CpuModel();
std::string CompilerDescription();
std::string UtcTimestamp();

// Process CPU time (user + system), seconds.
double ProcessCpuSeconds();
// Resident set size now and at its peak, bytes (0 where unknown).
std::uint64_t ResidentBytes();
std::uint64_t PeakResidentBytes();

// A clock that costs little: the invariant TSC on x86-64 (calibrated against
// steady_clock at start-up over 20 ms, each end of the window a bracketed
// pairing, so a preemption during calibration is measured again, not taken
// for time), steady_clock elsewhere.
class FastClock {
 public:
  static void Calibrate();
  static std::uint64_t Ticks() noexcept;
  static double NanosPerTick() noexcept;
  static double TicksToNanos(std::uint64_t ticks) noexcept {
    return static_cast<double>(ticks) * NanosPerTick();
  }
  static std::string Description();
};

// Median round trip of a cache line bounced between two pinned threads, ns.
// Tells which placement state the two CPUs are in while a table is measured.
// Bounded at 2 s; NaN when no round trip completed in that time (classified
// as far, printed as "nan").
double PlacementProbeNanos(int cpu_a, int cpu_b);

// The placement states a probe tells apart on the 2-vCPU development VMs: the
// two CPUs share a core (a round trip of about 60-80 ns), are near (about
// 150 ns) or far apart (380-550 ns). Every cross-core figure follows the
// state, so figures from different states are reported apart.
enum class Placement { kSharedCore, kNear, kFar };
inline constexpr Placement kPlacements[] = {Placement::kSharedCore, Placement::kNear,
                                            Placement::kFar};
// Below 110 ns: shared core; below 250 ns: near; else far. The boundaries
// lie between the states' ranges, about where their ratios meet: 110 ns
// between 80 and 150, 250 ns between 150 and 380.
inline Placement ClassifyPlacement(double probe_nanos) {
  if (probe_nanos < 110) return Placement::kSharedCore;
  if (probe_nanos < 250) return Placement::kNear;
  return Placement::kFar;
}
inline const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kSharedCore:
      return "shared-core";
    case Placement::kNear:
      return "near";
    case Placement::kFar:
      break;
  }
  return "far";
}

// A pinned thread timing its own gaps: how much time a spinning thread loses.
struct GapProfile {
  double window_ms = 0;
  double lost_percent = 0;  // time in gaps longer than 1 us
  std::uint64_t gaps_over_10us = 0;
  double max_gap_us = 0;
};
GapProfile MeasureGaps(int cpu, double window_ms);

}  // namespace sluice::bench
