// Threaded contract tests: each failed before the fix it guards. Built and
// run under ThreadSanitizer in CI as well.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

#include "test_support.hpp"

namespace sluice_test {
namespace contract_concurrency_test {
namespace {

using sluice::BackpressureLevel;

// Runs `scenario` on its own thread; a scenario that deadlocks fails the test
// instead of hanging CI. The bound only detects a hang: it is minutes above
// any plausible run time (times SLUICE_STRESS_SCALE, which multiplies the
// scenario's rounds).
template <typename Scenario>
void RunWithHangDetector(Scenario scenario) {
  std::packaged_task<void()> task(std::move(scenario));
  auto done = task.get_future();
  std::thread runner(std::move(task));
  const auto patience = std::chrono::minutes(2) * static_cast<std::int64_t>(StressScale());
  if (done.wait_for(patience) != std::future_status::ready) {
    ADD_FAILURE() << "deadlock: the scenario did not finish";
    std::fflush(nullptr);
    std::abort();  // the deadlocked threads cannot be joined
  }
  runner.join();
}

void IgnoreError(const sluice::BusError&, void*) {}
void OtherIgnoreError(const sluice::BusError&, void*) {}

// Thread X replaces the error callback (and so waits for the consumer's
// batch) while a callback in that batch replaces it too.
// Count: 50 rounds, each of which sets up the overlap on purpose (the
// callback holds the batch open until thread X is calling, then 2 ms more),
// so every round exercises it rather than hoping for it; more rounds vary
// only where thread X is inside SetErrorCallback when the callback's call
// comes.
TEST(ContractConcurrencyTest, SetErrorCallbackInsideACallbackWhileAnotherThreadSetsIt) {
  RunWithHangDetector([] {
    const std::uint64_t rounds = StressCount(50);
    StressProgress progress("nested error callback replacement rounds", rounds);
    for (std::uint64_t round = 0; round < rounds; ++round) {
      sluice::MpscBus<BasicPayload, 8> bus;
      std::atomic<bool> in_batch{false};
      std::atomic<bool> other_thread_calling{false};
      ASSERT_TRUE(bus.Subscribe<MotorCmd>([&](const MotorCmd&) {
                       in_batch.store(true);
                       while (!other_thread_calling.load()) std::this_thread::yield();
                       // Let the other thread get into SetErrorCallback and wait there.
                       // (A sleep, not a count of yields: under load each
                       // yield can cost a scheduler quantum, and 50 rounds of
                       // 2,000 of them outran the hang detector.)
                       std::this_thread::sleep_for(std::chrono::milliseconds(2));
                       EXPECT_TRUE(bus.SetErrorCallback(&OtherIgnoreError));
                     })
                      .IsValid());
      ASSERT_TRUE(bus.Publish(MotorCmd{1}));
      std::thread consumer([&] { bus.ProcessBatch(); });
      while (!in_batch.load()) std::this_thread::yield();
      other_thread_calling.store(true);
      EXPECT_TRUE(bus.SetErrorCallback(&IgnoreError));
      consumer.join();
      progress.Step();
    }
  });
}

// A snapshot taken while another thread resets must never show a counter
// below zero (a value near 2^64 after the subtraction wraps).
// Count: 300,000 snapshots while the resetter resets without pause and the
// producer moves the counters: each snapshot is a chance for a reset to
// land between its reads of a counter and of that counter's baseline, and
// a measured run made some 71,000 resets among them.
TEST(ContractConcurrencyTest, StatisticsSnapshotDuringResetNeverUnderflows) {
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 1024>>();
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 64; ++i) (void)bus->Publish(MotorCmd{i});
      bus->ProcessBatch();
    }
  });
  std::thread resetter([&] {
    while (!stop.load(std::memory_order_relaxed)) bus->ResetStatistics();
  });
  std::uint64_t wrapped = 0;
  constexpr std::uint64_t kSane = std::uint64_t{1} << 40;
  const std::uint64_t snapshots = StressCount(300000);
  StressProgress progress("statistics snapshots during resets", snapshots);
  for (std::uint64_t i = 0; i < snapshots; ++i) {
    const auto s = bus->GetStatistics();
    if (s.messages_published > kSane || s.messages_processed > kSane ||
        s.messages_dropped > kSane || s.medium_priority_published > kSane) {
      ++wrapped;
    }
    if (s.messages_processed > s.messages_published + 1024 * 2) ++wrapped;
    progress.Step();
  }
  stop.store(true);
  producer.join();
  resetter.join();
  EXPECT_EQ(wrapped, 0u);
}

// One producer and one consumer keep the queue nearly empty; nobody may ever
// read it as FULL or deeper than it can be (SPSC: the tail was stored after
// the slot, so the consumer could release past it and a reader computed a
// negative depth). Two readers: the consumer right after each batch (it
// has just released slots the producer may be about to account for: the
// reading most likely to catch the race) and an observer thread.
// Count: kMessages handshakes, each one chance for the consumer to release
// a message whose claim the producer has not yet accounted for. With that
// ordering planted back (tail stored after the slot), 20,000 handshakes
// caught it in 13 of 20 runs on the 2-vCPU machine, 50,000 (about 0.2 s) in
// 18 of 20; FreestandingHostTest's
// ConsumerPreemptingAnSpscPublishNeverReadsItFull, which tries a consumer at
// every instruction of a publish, catches it in every run.
template <typename Bus>
void ExpectNearlyEmptyNeverReadsFull() {
  auto bus = std::make_unique<Bus>();
  const std::uint64_t kMessages = StressCount(50000);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> full_readings{0};
  std::atomic<std::uint64_t> impossible_depths{0};
  const auto read = [&] {
    if (bus->GetBackpressureLevel() != BackpressureLevel::NORMAL) ++full_readings;
    if (bus->QueueDepth() > 8) ++impossible_depths;
  };
  std::thread producer([&] {
    StressProgress progress("nearly empty bus, messages published", kMessages);
    for (std::uint64_t i = 0; i < kMessages; ++i) {
      while (bus->QueueDepth() > 2) std::this_thread::yield();
      while (!bus->Publish(MotorCmd{static_cast<std::int32_t>(i)})) std::this_thread::yield();
      progress.Step();
    }
  });
  std::thread consumer([&] {
    std::uint64_t received = 0;
    EXPECT_TRUE(bus->template Subscribe<MotorCmd>([&](const MotorCmd&) { ++received; }).IsValid());
    while (received < kMessages) {
      if (bus->ProcessBatch() == 0) {
        std::this_thread::yield();
      } else {
        read();
      }
    }
    done.store(true);
  });
  for (std::uint64_t reads = 1; !done.load(); ++reads) {
    read();
    if (reads % 64 == 0) std::this_thread::yield();
  }
  producer.join();
  consumer.join();
  EXPECT_EQ(full_readings.load(), 0u) << "at most 3 of 1,024 slots were ever taken";
  EXPECT_EQ(impossible_depths.load(), 0u);
}

TEST(ContractConcurrencyTest, NearlyEmptySpscBusNeverReadsFull) {
  ExpectNearlyEmptyNeverReadsFull<sluice::SpscBus<BasicPayload, 1024>>();
}
TEST(ContractConcurrencyTest, NearlyEmptyMpscBusNeverReadsFull) {
  ExpectNearlyEmptyNeverReadsFull<sluice::MpscBus<BasicPayload, 1024>>();
}

}  // namespace
}  // namespace contract_concurrency_test
}  // namespace sluice_test
