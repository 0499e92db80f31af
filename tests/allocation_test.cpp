// No heap allocation after construction: this binary replaces the global
// allocation functions and counts every call while the bus runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/flight_recorder_observer.hpp"
#include "test_support.hpp"

namespace {
std::atomic<long> allocations{0};
std::atomic<bool> counting{false};
// The thread that frees `watched` (one block a test follows) records itself.
std::atomic<void*> watched{nullptr};
std::atomic<bool> watched_freed{false};
std::thread::id watched_freed_on;

[[noreturn]] void OutOfMemory() {
#if SLUICE_HAS_EXCEPTIONS
  throw std::bad_alloc();
#else
  std::abort();
#endif
}

void* Allocate(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  OutOfMemory();
}

void Free(void* p) noexcept {
  if (p != nullptr && p == watched.load(std::memory_order_relaxed)) {
    watched_freed_on = std::this_thread::get_id();
    // Release: a thread that sees watched_freed (acquire) sees watched_freed_on.
    watched_freed.store(true, std::memory_order_release);
  }
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  const std::size_t a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  OutOfMemory();
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  const std::size_t a = static_cast<std::size_t>(alignment);
  return std::aligned_alloc(a, (size + a - 1) / a * a);
}
void operator delete(void* p) noexcept { Free(p); }
void operator delete[](void* p) noexcept { Free(p); }
void operator delete(void* p, std::size_t) noexcept { Free(p); }
void operator delete[](void* p, std::size_t) noexcept { Free(p); }
void operator delete(void* p, std::align_val_t) noexcept { Free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { Free(p); }

namespace sluice_test {
namespace {

// Counts allocations made inside its scope.
class AllocationScope {
 public:
  AllocationScope() {
    allocations = 0;
    counting = true;
  }
  ~AllocationScope() { counting = false; }
  long count() const { return allocations.load(); }
};

template <typename Bus>
void ExpectNoAllocationWhileRunning() {
  auto bus = std::make_unique<Bus>();  // the one allocation, before the scope
  std::uint64_t sum = 0;
  const auto handle =
      bus->template Subscribe<MotorCmd>([&sum](const MotorCmd& c) { sum += c.speed; });
  ASSERT_TRUE(handle.IsValid());
  AllocationScope scope;
  for (auto mode : {sluice::PerformanceMode::FULL_FEATURED, sluice::PerformanceMode::NO_STATS,
                    sluice::PerformanceMode::BARE_METAL}) {
    bus->SetPerformanceMode(mode);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 1000; ++i) {
        // Refusals are allowed here: only allocations are measured.
        (void)bus->Publish(MotorCmd{i});
        (void)bus->PublishWithPriority(SensorData{1.0f}, 2, sluice::MessagePriority::HIGH);
        (void)bus->PublishFast(Sequenced{1, static_cast<std::uint64_t>(i)}, 3,
                               std::chrono::nanoseconds(42), sluice::MessagePriority::LOW);
      }
      bus->ProcessBatch(1500);
      bus->ProcessBatchWith([&sum](const auto&) { ++sum; });
      (void)bus->GetStatistics();
      (void)bus->GetBackpressureLevel();
      (void)bus->QueueDepth();
    }
    bus->ResetStatistics();
    // Valid thresholds; their result is checked in AdmissionTest.
    (void)bus->SetAdmissionThresholds(50, 70, 95);
  }
  EXPECT_EQ(scope.count(), 0) << "heap allocations while publishing and dispatching";
  EXPECT_GT(sum, 0u);
}

TEST(AllocationTest, CountingWorks) {
  AllocationScope scope;
  auto p = std::make_unique<int>(1);
  EXPECT_EQ(scope.count(), 1) << "the replaced operator new must see allocations";
}

TEST(AllocationTest, MpscRunsWithoutAllocating) {
  ExpectNoAllocationWhileRunning<sluice::MpscBus<BasicPayload, 4096>>();
}

TEST(AllocationTest, SpscRunsWithoutAllocating) {
  ExpectNoAllocationWhileRunning<sluice::SpscBus<BasicPayload, 4096>>();
}

// A flight recorder armed, triggered and freezing windows (by a trigger
// type and by calls) allocates nothing on the bus's threads: only its
// writer, outside the scope here, allocates.
TEST(AllocationTest, AnArmedFlightRecorderAllocatesNothingWhileTheBusRuns) {
  using Recorder = sluice::record::FlightRecorder<BasicPayload>;
  struct Traits : sluice::DefaultBusTraits {
    using Observer = sluice::record::FlightRecorderObserver<Recorder, SensorData>;
  };
  sluice::record::FlightRecorderOptions options;
  options.before = 200;
  options.after = 100;
  options.path_prefix = "/nonexistent-directory-of-sluice/flight";
  Recorder recorder(options);
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 4096, Traits>>();
  bus->GetObserver().Attach(&recorder);
  std::uint64_t sum = 0;
  const auto handle =
      bus->template Subscribe<MotorCmd>([&sum](const MotorCmd& c) { sum += c.speed; });
  ASSERT_TRUE(handle.IsValid());
  std::uint64_t frozen = 0;
  for (int round = 0; round < 20; ++round) {
    {
      AllocationScope scope;
      for (int i = 0; i < 1000; ++i) {
        (void)bus->Publish(MotorCmd{i});
        if (i == 500 && round % 2 == 0) {
          (void)bus->PublishWithPriority(SensorData{1.0f}, 2, sluice::MessagePriority::HIGH);
        }
        if (i % 100 == 0) bus->ProcessBatch(64);
      }
      if (round % 2 == 1) recorder.Trigger();
      while (bus->ProcessBatch(256) != 0) {
      }
      frozen += recorder.DumpPending() ? 1 : 0;
      EXPECT_EQ(scope.count(), 0) << "heap allocations with a flight recorder armed";
    }
    (void)recorder.WriteDumps();  // the writer's: not the bus's
  }
  EXPECT_GE(frozen, 10u);
  EXPECT_GE(recorder.Counts().triggers, 10u);
  EXPECT_GT(sum, 0u);
}

TEST(AllocationTest, SubscribeAndUnsubscribeDoNotAllocate) {
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 64>>();
  AllocationScope scope;
  for (int i = 0; i < 100; ++i) {
    const auto handle = bus->Subscribe<MotorCmd>([i](const MotorCmd&) { (void)i; });
    (void)bus->Unsubscribe(handle);
  }
  EXPECT_EQ(scope.count(), 0);
}

// Payloads that own memory compile on a default bus
// (kRequireTriviallyCopyablePayloads is off). Publishing a copy allocates once,
// for the copy, on the publishing thread; publishing by move and dispatching
// allocate nothing, and the callback sees the very buffer that was moved in.
using VectorPayload = std::variant<std::vector<int>, MotorCmd>;

TEST(AllocationTest, AVectorPayloadAllocatesOnlyForTheCallersCopy) {
  static_assert(!sluice::DefaultBusTraits::kRequireTriviallyCopyablePayloads);
  auto bus = std::make_unique<sluice::MpscBus<VectorPayload, 64>>();
  std::size_t elements = 0;
  const int* last_buffer = nullptr;
  ASSERT_TRUE(bus->Subscribe<std::vector<int>>([&](const std::vector<int>& v) {
                   elements += v.size();
                   last_buffer = v.data();
                 })
                  .IsValid());
  const std::vector<int> original(100, 7);
  std::vector<int> moved(50, 1);
  const int* const moved_buffer = moved.data();
  long copy_allocations = -1;
  long move_allocations = -1;
  long dispatch_allocations = -1;
  bool admitted = true;
  std::size_t dispatched = 0;
  {
    AllocationScope scope;
    admitted = bus->Publish(original) && admitted;
    copy_allocations = scope.count();
    admitted = bus->Publish(std::move(moved)) && admitted;
    move_allocations = scope.count() - copy_allocations;
    dispatched = bus->ProcessBatch();
    dispatch_allocations = scope.count() - copy_allocations - move_allocations;
  }
  EXPECT_TRUE(admitted);
  EXPECT_EQ(copy_allocations, 1) << "the copy's own buffer, and nothing of the bus";
  EXPECT_EQ(move_allocations, 0);
  EXPECT_EQ(dispatch_allocations, 0);
  EXPECT_EQ(dispatched, 2u);
  EXPECT_EQ(elements, 150u);
  EXPECT_EQ(last_buffer, moved_buffer) << "the moved-in buffer reaches the callback";
}

// The payload is destroyed, and its buffer freed, on the consumer thread,
// after its dispatch.
TEST(AllocationTest, TheConsumerFreesAVectorPayloadPublishedOnAnotherThread) {
  auto bus = std::make_unique<sluice::MpscBus<VectorPayload, 64>>();
  watched_freed = false;
  bool admitted = false;
  std::thread producer([&] {
    std::vector<int> samples(100, 3);
    watched = samples.data();
    admitted = bus->Publish(std::move(samples)).IsAdmitted();
  });
  producer.join();
  ASSERT_TRUE(admitted);
  EXPECT_FALSE(watched_freed.load(std::memory_order_acquire)) << "freed before dispatch";
  EXPECT_EQ(bus->ProcessBatch(), 1u);
  EXPECT_TRUE(watched_freed.load(std::memory_order_acquire));
  EXPECT_EQ(watched_freed_on, std::this_thread::get_id());
  watched = nullptr;
}

struct TriviallyCopyableTraits : sluice::DefaultBusTraits {
  static constexpr bool kRequireTriviallyCopyablePayloads = true;
};

// The opt-in check accepts trivially copyable alternatives (misuse.cpp case 41
// shows it refusing a std::vector).
TEST(AllocationTest, ABusThatRequiresTriviallyCopyablePayloadsTakesThem) {
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 64, TriviallyCopyableTraits>>();
  int speed = 0;
  ASSERT_TRUE(bus->Subscribe<MotorCmd>([&speed](const MotorCmd& c) { speed = c.speed; }).IsValid());
  ASSERT_TRUE(bus->Publish(MotorCmd{42}));
  EXPECT_EQ(bus->ProcessBatch(), 1u);
  EXPECT_EQ(speed, 42);
}

}  // namespace
}  // namespace sluice_test
