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
