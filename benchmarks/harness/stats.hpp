// Summaries of repeated measurements. Needs only the standard library: the
// shared-memory benchmarks, built without the report's libraries, use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct MeanStddev {
  double mean = 0;
  double stddev = 0;
};

inline MeanStddev Summarize(const std::vector<double>& values) {
  MeanStddev result;
  if (values.empty()) return result;
  for (double v : values) result.mean += v;
  result.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - result.mean) * (v - result.mean);
    result.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return result;
}

inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

struct Percentiles {
  std::size_t samples = 0;
  std::uint64_t negative = 0;  // differences below zero, left out (CrossCoreSamples)
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;
};

// Sorts `values` in place.
inline Percentiles ComputePercentiles(std::vector<double>& values) {
  Percentiles p;
  p.samples = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const auto index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(index, values.size() - 1)];
  };
  for (double v : values) p.mean += v;
  p.mean /= static_cast<double>(values.size());
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.max = values.back();
  return p;
}

// One-way times between two cores' clock readings. The cores' counters may be
// skewed by a few ticks, so a reading taken later can be smaller: such a
// difference is counted apart, never wrapped into a huge unsigned figure.
// Reserves `capacity` up front, so Add() does not allocate while measuring.
class CrossCoreSamples {
 public:
  CrossCoreSamples(std::size_t capacity, double nanos_per_tick) : nanos_per_tick_(nanos_per_tick) {
    nanos_.reserve(capacity);
  }
  void Add(std::uint64_t sent, std::uint64_t received) {
    if (received < sent) {
      ++negative_;
      return;
    }
    nanos_.push_back(static_cast<double>(received - sent) * nanos_per_tick_);
  }
  // Adds another run's differences and its count of negative ones.
  void Append(const CrossCoreSamples& other) {
    nanos_.insert(nanos_.end(), other.nanos_.begin(), other.nanos_.end());
    negative_ += other.negative_;
  }
  std::uint64_t negative() const { return negative_; }
  std::size_t size() const { return nanos_.size() + negative_; }
  // Percentiles of the non-negative differences; `negative` says how many
  // were left out.
  Percentiles Summarize() {
    Percentiles p = ComputePercentiles(nanos_);
    p.negative = negative_;
    return p;
  }

 private:
  double nanos_per_tick_;
  std::vector<double> nanos_;
  std::uint64_t negative_ = 0;
};

}  // namespace sluice::bench
