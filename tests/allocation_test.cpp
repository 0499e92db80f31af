// No heap allocation after construction: this binary replaces the global
// allocation functions and counts every call while the bus runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "test_support.hpp"

namespace {
std::atomic<long> allocations{0};
std::atomic<bool> counting{false};

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
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

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
        (void)bus->PublishFast(Sequenced{1, static_cast<std::uint64_t>(i)}, 3, 42,
                               sluice::MessagePriority::LOW);
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

TEST(AllocationTest, SubscribeAndUnsubscribeDoNotAllocate) {
  auto bus = std::make_unique<sluice::MpscBus<BasicPayload, 64>>();
  AllocationScope scope;
  for (int i = 0; i < 100; ++i) {
    const auto handle = bus->Subscribe<MotorCmd>([i](const MotorCmd&) { (void)i; });
    (void)bus->Unsubscribe(handle);
  }
  EXPECT_EQ(scope.count(), 0);
}

}  // namespace
}  // namespace sluice_test
