// Storage of its own for a benchmark's per-thread bookkeeping.
#pragma once

#include <cstddef>

namespace sluice::bench {

// Two cache lines, not one: the adjacent-line prefetcher moves lines in
// pairs, so a neighbour 64 bytes away still costs a transfer.
inline constexpr std::size_t kIsolation = 128;

// A value alone in its 128-byte block. A benchmark must measure the queue,
// not false sharing between the producer's and the consumer's bookkeeping:
// a consumer counter beside a value the producer reads every message turns
// every dispatch into a cache-line transfer on the producer's path.
//
// The rule for every scenario with a producer and a consumer thread:
//  - every variable a producer or the consumer writes during a timed region
//    lives in its own Isolated storage (or on its own thread's stack);
//  - every variable a producer reads per message (the message count, the
//    queue pointer) is copied into a local of the producer lambda before
//    its loop, not read through a reference into the caller's frame.
// Over-aligned types are fine in std::vector and std::make_unique (C++17).
template <typename T>
struct alignas(kIsolation) Isolated {
  T value{};
};

}  // namespace sluice::bench
