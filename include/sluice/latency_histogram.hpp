// End-to-end latency, publish to dispatch, as a histogram per priority.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// Buckets of a LatencyHistogram: bucket 0 counts latencies of at most 128 ns,
// bucket i of at most 2^(7+i) nanoseconds (and more than 2^(6+i)); the last
// bucket counts everything above 2^(kLatencyBucketCount + 5) = 2^33
// nanoseconds (about 8.6 s). Sub-microsecond latencies so fall in buckets 0
// (<= 128 ns), 1 (<= 256 ns), 2 (<= 512 ns) and 3 (<= 1024 ns).
inline constexpr std::size_t kLatencyBucketCount = 28;
// log2 of bucket 0's upper bound in nanoseconds.
inline constexpr unsigned kLatencyFirstBucketBits = 7;

struct LatencyHistogram {
  // UpperBoundNanos() of the last bucket: no upper bound.
  static constexpr std::uint64_t kUnbounded = ~std::uint64_t{0};

  std::uint64_t buckets[kLatencyBucketCount] = {};  // per bucket, not cumulative
  std::uint64_t count = 0;                          // the sum of `buckets`
  std::uint64_t sum_nanos = 0;                      // of the latencies counted

  // The inclusive upper bound of `bucket`, in nanoseconds: 2^(7 + bucket).
  static constexpr std::uint64_t UpperBoundNanos(std::size_t bucket) noexcept {
    return bucket + 1 < kLatencyBucketCount ? std::uint64_t{1} << (kLatencyFirstBucketBits + bucket)
                                            : kUnbounded;
  }

  // The smallest bucket bound that at least `quantile` (0 to 1) of the
  // latencies do not exceed: the q-quantile, rounded up to its bucket's bound
  // (in nanoseconds).
  // `quantile` is taken to the nearest billionth and the rank, ceil(q * count),
  // is computed in integers, so q = k/100 lands on its exact rank. 0 when the
  // histogram is empty; kUnbounded when the quantile lies in the last bucket.
  std::uint64_t PercentileNanos(double quantile) const noexcept {
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
      if (seen >= rank) return UpperBoundNanos(bucket);
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
