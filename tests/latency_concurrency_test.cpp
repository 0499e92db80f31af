// The latency histograms read, reset and recorded at once. Built and run
// under ThreadSanitizer in CI with the other threaded tests.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "sluice/detail/observe/latency_recorder.hpp"
#include "sluice/message.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace latency_concurrency_test {
namespace {

using sluice::kLatencyBucketCount;
using sluice::kPriorityCount;

// A snapshot taken while another thread resets must never report more than
// was ever recorded: a reset's baseline read newer than the snapshot's
// counter would make the difference wrap to nearly 2^64 (2^32 with 32-bit
// counters).
TEST(LatencyConcurrencyTest, SnapshotsDuringResetsNeverExceedWhatWasRecorded) {
  // Each batch adds one latency to every bucket of every priority, so every
  // counter changes all the time; a snapshot preempted between reading a
  // counter and its baseline is then likely to meet a newer reset.
  // Count: 100,000 batches, during which the main thread takes snapshots
  // and the resetter resets without pause: a measured run took 400,000
  // snapshots, each reading every counter while resets land.
  const std::uint64_t kBatches = sluice_test::StressCount(100'000);
  const std::uint64_t kRecorded = kBatches * kPriorityCount * kLatencyBucketCount;
  // The largest sum a batch adds: one latency of 2^(7+b) ns per bucket b, times
  // priorities.
  constexpr std::uint64_t kBatchSum =
      ((std::uint64_t{1} << kLatencyBucketCount) - 1) * 128 * kPriorityCount;
  constexpr std::uint64_t kNow = std::uint64_t{1} << 40;
  sluice::detail::LatencyRecorder<true> recorder;
  std::atomic<bool> done{false};

  std::thread consumer([&] {
    sluice_test::StressProgress progress("latency batches recorded", kBatches);
    for (std::uint64_t i = 0; i < kBatches; ++i) {
      auto batch = recorder.BeginBatch(kNow);
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
          sluice::MessageHeader header;
          header.priority = static_cast<sluice::MessagePriority>(p);
          header.timestamp_ns = kNow - (std::uint64_t{128} << b);  // bucket b
          batch.Add(header);
        }
      }
      batch.Finish();
      progress.Step();
    }
    done.store(true);
  });
  std::thread resetter([&] {
    while (!done.load()) recorder.Reset();
  });

  std::uint64_t snapshots = 0;
  std::uint64_t too_large = 0;
  do {
    const sluice::LatencySnapshot snapshot = recorder.Snapshot();
    ++snapshots;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const sluice::LatencyHistogram& histogram = snapshot.by_priority[p];
      bool bad = histogram.count > kRecorded || histogram.sum_nanos > kBatches * kBatchSum;
      for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
        bad = bad || histogram.buckets[b] > kBatches;
      }
      if (bad) ++too_large;
    }
  } while (!done.load());
  consumer.join();
  resetter.join();
  EXPECT_EQ(too_large, 0u) << "of " << snapshots << " snapshots";
}

}  // namespace
}  // namespace latency_concurrency_test
}  // namespace sluice_test
