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
namespace {

using sluice::BackpressureLevel;

// Runs `scenario` on its own thread; a scenario that deadlocks fails the test
// instead of hanging CI. The bound only detects a hang: it is minutes above
// any plausible run time.
template <typename Scenario>
void RunWithHangDetector(Scenario scenario) {
  std::packaged_task<void()> task(std::move(scenario));
  auto done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(std::chrono::minutes(2)) != std::future_status::ready) {
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
TEST(ContractConcurrencyTest, SetErrorCallbackInsideACallbackWhileAnotherThreadSetsIt) {
  RunWithHangDetector([] {
    for (int round = 0; round < 50; ++round) {
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
    }
  });
}

// A snapshot taken while another thread resets must never show a counter
// below zero (a value near 2^64 after the subtraction wraps).
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
  for (int i = 0; i < 300000; ++i) {
    const auto s = bus->GetStatistics();
    if (s.messages_published > kSane || s.messages_processed > kSane ||
        s.messages_dropped > kSane || s.medium_priority_published > kSane) {
      ++wrapped;
    }
    if (s.messages_processed > s.messages_published + 1024 * 2) ++wrapped;
  }
  stop.store(true);
  producer.join();
  resetter.join();
  EXPECT_EQ(wrapped, 0u);
}

// One producer and one consumer keep the queue nearly empty; an observer must
// never read it as FULL (SPSC: the tail was stored after the slot, so the
// consumer could release past it).
template <typename Bus>
void ExpectNearlyEmptyNeverReadsFull() {
  auto bus = std::make_unique<Bus>();
  constexpr int kMessages = 100000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int i = 0; i < kMessages; ++i) {
      while (bus->QueueDepth() > 2) std::this_thread::yield();
      while (!bus->Publish(MotorCmd{i})) std::this_thread::yield();
    }
  });
  std::thread consumer([&] {
    int received = 0;
    EXPECT_TRUE(bus->template Subscribe<MotorCmd>([&](const MotorCmd&) { ++received; }).IsValid());
    while (received < kMessages) bus->ProcessBatch();
    done.store(true);
  });
  std::uint64_t full_readings = 0;
  std::uint64_t impossible_depths = 0;
  while (!done.load()) {
    if (bus->GetBackpressureLevel() != BackpressureLevel::NORMAL) ++full_readings;
    if (bus->QueueDepth() > 8) ++impossible_depths;
  }
  producer.join();
  consumer.join();
  EXPECT_EQ(full_readings, 0u) << "at most 3 of 1,024 slots were ever taken";
  EXPECT_EQ(impossible_depths, 0u);
}

TEST(ContractConcurrencyTest, NearlyEmptySpscBusNeverReadsFull) {
  ExpectNearlyEmptyNeverReadsFull<sluice::SpscBus<BasicPayload, 1024>>();
}
TEST(ContractConcurrencyTest, NearlyEmptyMpscBusNeverReadsFull) {
  ExpectNearlyEmptyNeverReadsFull<sluice::MpscBus<BasicPayload, 1024>>();
}

}  // namespace
}  // namespace sluice_test
