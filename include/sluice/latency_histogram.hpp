// End-to-end latency, publish to dispatch, as a histogram per priority.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Buckets of a LatencyHistogram: bucket i counts latencies of at most 2^i
// microseconds (and more than 2^(i-1)); the last bucket counts everything
// above 2^(kLatencyBucketCount - 2) microseconds (about 8.4 s).
inline constexpr std::size_t kLatencyBucketCount = 25;

struct LatencyHistogram {
  // UpperBoundMicros() of the last bucket: no upper bound.
  static constexpr std::uint64_t kUnbounded = ~std::uint64_t{0};

  std::uint64_t buckets[kLatencyBucketCount] = {};  // per bucket, not cumulative
  std::uint64_t count = 0;                          // the sum of `buckets`
  std::uint64_t sum_micros = 0;

  // The inclusive upper bound of `bucket`, in microseconds.
  static constexpr std::uint64_t UpperBoundMicros(std::size_t bucket) noexcept {
    return bucket + 1 < kLatencyBucketCount ? std::uint64_t{1} << bucket : kUnbounded;
  }

  // The smallest bucket bound that at least `quantile` (0 to 1) of the
  // latencies do not exceed: the q-quantile, rounded up to its bucket's bound.
  // `quantile` is taken to the nearest billionth and the rank, ceil(q * count),
  // is computed in integers, so q = k/100 lands on its exact rank. 0 when the
  // histogram is empty; kUnbounded when the quantile lies in the last bucket.
  std::uint64_t PercentileMicros(double quantile) const noexcept {
    if (count == 0) return 0;
    if (!(quantile > 0.0)) quantile = 0.0;  // NaN too
    if (quantile > 1.0) quantile = 1.0;
    // A double product q * count rounds: 0.07 * 100 is 7.000000000000001,
    // whose ceiling is 8. Billionths of q are exact, and the rank is
    // count * b / 1e9 rounded up, split so no product overflows 64 bits:
    // count = high * 1e9 + low gives high * b + ceil(low * b / 1e9).
    constexpr std::uint64_t kScale = 1'000'000'000;
    const auto billionths =
        static_cast<std::uint64_t>(std::llround(quantile * static_cast<double>(kScale)));
    const std::uint64_t high = count / kScale;
    const std::uint64_t low = count % kScale;
    std::uint64_t rank = high * billionths + (low * billionths + kScale - 1) / kScale;
    if (rank == 0) rank = 1;  // the 0-quantile is the smallest latency
    std::uint64_t seen = 0;
    for (std::size_t bucket = 0; bucket < kLatencyBucketCount; ++bucket) {
      seen += buckets[bucket];
      if (seen >= rank) return UpperBoundMicros(bucket);
    }
    return kUnbounded;
  }
};

// Histograms of every priority, from one bus.
struct LatencySnapshot {
  LatencyHistogram by_priority[kPriorityCount];

  const LatencyHistogram& For(MessagePriority priority) const& noexcept {
    return by_priority[static_cast<std::size_t>(priority)];
  }
  // On a temporary snapshot (bus.GetLatencyHistograms().For(p)) a copy, so
  // that `const auto& h = bus.GetLatencyHistograms().For(p);` cannot dangle.
  LatencyHistogram For(MessagePriority priority) && noexcept {
    return by_priority[static_cast<std::size_t>(priority)];
  }
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
