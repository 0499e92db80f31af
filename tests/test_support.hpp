// Payload types and helpers shared by the Sluice tests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <variant>

#include "sluice/sluice.hpp"

namespace sluice_test {

struct SensorData {
  float temperature = 0;
};
struct MotorCmd {
  std::int32_t speed = 0;
};
struct Sequenced {
  std::uint32_t producer = 0;
  std::uint64_t sequence = 0;
};

using BasicPayload = std::variant<SensorData, MotorCmd, Sequenced>;

// Counts every construction and destruction so tests can assert the balance.
struct LifetimeCounter {
  static inline std::atomic<int> constructed{0};
  static inline std::atomic<int> destroyed{0};
  static void ResetCounts() {
    constructed = 0;
    destroyed = 0;
  }
  static int Live() { return constructed.load() - destroyed.load(); }

  explicit LifetimeCounter(int v = 0) : value(v) { ++constructed; }
  // A copy that may throw (it allocates), so the bus copies before claiming.
  LifetimeCounter(const LifetimeCounter& other) : value(other.value), text(other.text) {
    ++constructed;
  }
  LifetimeCounter(LifetimeCounter&& other) noexcept
      : value(other.value), text(std::move(other.text)) {
    ++constructed;
  }
  LifetimeCounter& operator=(const LifetimeCounter&) = default;
  LifetimeCounter& operator=(LifetimeCounter&&) noexcept = default;
  ~LifetimeCounter() { ++destroyed; }

  int value = 0;
  std::string text = "a string long enough to defeat the small string optimisation";
};

using OwningPayload = std::variant<LifetimeCounter, std::string, std::unique_ptr<int>, Sequenced>;

// Iteration counts of the threaded stress tests. Each test states why its
// count suffices (what it must exercise, how many chances the race it
// guards gets); the default tier runs that count, so a test takes seconds
// and never depends on how fast the machine is. The long tier
// (docs/reliability.md, "Test tiers") multiplies every count by
// SLUICE_STRESS_SCALE (an integer from 1 to 10,000; anything else is 1).
inline std::uint64_t StressScale() {
  static const std::uint64_t scale = [] {
    const char* text = std::getenv("SLUICE_STRESS_SCALE");
    if (text == nullptr) return std::uint64_t{1};
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 10000) return std::uint64_t{1};
    return static_cast<std::uint64_t>(value);
  }();
  return scale;
}
inline std::uint64_t StressCount(std::uint64_t base) { return base * StressScale(); }

// Prints a stress test's progress to stderr, every tenth of `total` steps,
// so a slow run shows where it is (ctest --output-on-failure and -V show
// it). One thread calls Step() per step.
class StressProgress {
 public:
  StressProgress(const char* what, std::uint64_t total) : what_(what), total_(total) {
    std::fprintf(stderr, "[stress] %s: %llu steps (SLUICE_STRESS_SCALE %llu)\n", what_,
                 static_cast<unsigned long long>(total_),
                 static_cast<unsigned long long>(StressScale()));
  }
  void Step() {
    ++done_;
    if (total_ >= 10 && done_ % (total_ / 10) == 0) {
      std::fprintf(stderr, "[stress] %s: %llu of %llu\n", what_,
                   static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_));
    }
  }

 private:
  const char* what_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
};

// A threaded test's guard against waiting for ever: a producer stuck inside
// a publish can be neither joined nor left running past the bus, so when
// the consumer has made no progress for `patience` the test fails by ending
// the process. Long enough never to fire while the machine is merely slow.
class ProgressWatch {
 public:
  explicit ProgressWatch(std::chrono::seconds patience = std::chrono::seconds(60))
      : patience_(patience) {}
  void Progress() { last_ = Clock::now(); }
  void Check(const char* what) const {
    if (Clock::now() - last_ < patience_) return;
    std::fprintf(stderr, "no progress for %lld s: %s\n", static_cast<long long>(patience_.count()),
                 what);
    std::abort();
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::chrono::seconds patience_;
  Clock::time_point last_ = Clock::now();
};

}  // namespace sluice_test
