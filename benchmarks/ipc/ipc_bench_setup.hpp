// What the two process benchmarks share: their flags, the two CPUs they pin
// the producer and the consumer to, and a percentile of samples.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/platform.hpp"

namespace sluice_ipc_bench {

struct Options {
  int rounds;
  std::uint64_t messages;  // a throughput run
  std::uint64_t pings;     // a latency run
};

struct Cpus {
  int producer = 0;
  int consumer = 1;
};

// --rounds N, --messages N, --pings N over `defaults`.
inline Options ParseOptions(int argc, char** argv, Options defaults) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rounds") defaults.rounds = std::atoi(argv[i + 1]);
    if (flag == "--messages") defaults.messages = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--pings") defaults.pings = std::strtoull(argv[i + 1], nullptr, 10);
  }
  return defaults;
}

// The first two CPUs this process may run on, announced with the machine
// under `title`; false (said why) when there are fewer.
inline bool PickCpus(const char* title, Cpus* cpus) {
  const std::vector<int> allowed = sluice::bench::AllowedCpus();
  if (allowed.size() < 2) {
    std::printf("needs two CPUs; %zu allowed\n", allowed.size());
    return false;
  }
  *cpus = Cpus{allowed[0], allowed[1]};
  std::printf("%s: %s, %s; producer on CPU %d, consumer on CPU %d\n", title,
              sluice::bench::CpuModel().c_str(), sluice::bench::CompilerDescription().c_str(),
              cpus->producer, cpus->consumer);
  return true;
}

// The q-quantile (0..1) of `samples`; NaN when empty.
inline double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return NAN;
  std::sort(samples.begin(), samples.end());
  return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))];
}

}  // namespace sluice_ipc_bench
