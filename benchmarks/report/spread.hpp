// Figures of the report that summarise rounds: their text and the spread
// --compare judges them by (the statistics are harness/stats.hpp's).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/stats.hpp"
#include "report/report.hpp"

namespace sluice::bench {

// "mean +- sample stddev" over rounds; one round has no spread: "n/a".
inline std::string MeanPlusMinus(const std::vector<double>& rounds, int decimals) {
  const MeanStddev s = Summarize(rounds);
  return Fixed(s.mean, decimals) + " +- " + (rounds.size() < 2 ? "n/a" : Fixed(s.stddev, decimals));
}

// The fewest rounds whose stddev --compare trusts to set a band: from two
// rounds (one degree of freedom) it is often far too small.
inline constexpr std::size_t kMinRoundsToGate = 3;

// A figure summarising rounds carries their spread; with fewer than
// kMinRoundsToGate rounds there is no usable spread to judge a change by, so
// --compare does not gate it.
inline void SetSpread(const std::vector<double>& rounds, Metric* metric) {
  if (rounds.size() < kMinRoundsToGate) {
    metric->gated = false;
    return;
  }
  metric->spread = Summarize(rounds).stddev;
}

}  // namespace sluice::bench
