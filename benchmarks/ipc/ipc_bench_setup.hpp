// What the two process benchmarks share: their flags, the two CPUs they pin
// the producer and the consumer to, and a percentile of samples.
#pragma once

#include <algorithm>
#include <cerrno>
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

// --rounds N, --messages N, --pings N over `defaults`. Anything else, a
// flag without a value, a value that is not a whole number (or past 2^64),
// fewer than one
// round or ping, or fewer than two messages (a rate needs a first and a
// last) is refused: a usage line on stderr, and false.
inline bool ParseOptions(int argc, char** argv, Options* options) {
  const auto number = [](const char* text, std::uint64_t* value) {
    char* end = nullptr;
    if (text[0] < '0' || text[0] > '9') return false;
    errno = 0;
    *value = std::strtoull(text, &end, 10);
    return *end == '\0' && errno != ERANGE;
  };
  bool ok = true;
  for (int i = 1; i < argc && ok; i += 2) {
    const std::string flag = argv[i];
    std::uint64_t value = 0;
    ok = i + 1 < argc && number(argv[i + 1], &value);
    if (!ok) break;
    if (flag == "--rounds" && value >= 1 && value <= 1'000'000) {
      options->rounds = static_cast<int>(value);
    } else if (flag == "--messages" && value >= 2) {
      options->messages = value;
    } else if (flag == "--pings" && value >= 1) {
      options->pings = value;
    } else {
      ok = false;
    }
  }
  if (!ok) {
    std::fprintf(stderr,
                 "usage: %s [--rounds N (1 or more)] [--messages N (2 or more)] [--pings N (1 or "
                 "more)]\n",
                 argv[0]);
  }
  return ok;
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
