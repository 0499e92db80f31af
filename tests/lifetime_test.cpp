#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test_support.hpp"

namespace sluice_test {
namespace lifetime_test {
namespace {

using Bus = sluice::MpscBus<OwningPayload, 16>;

class LifetimeTest : public ::testing::Test {
 protected:
  void SetUp() override { LifetimeCounter::ResetCounts(); }
};

TEST_F(LifetimeTest, EveryAdmittedPayloadIsDestroyedOnceAfterDispatch) {
  {
    Bus bus;
    int seen = 0;
    ASSERT_TRUE(bus.Subscribe<LifetimeCounter>([&](const LifetimeCounter& c) {
                     EXPECT_EQ(c.value, seen);
                     ++seen;
                   })
                    .IsValid());
    for (int i = 0; i < 10; ++i) {
      LifetimeCounter lvalue(i);
      ASSERT_TRUE(bus.Publish(lvalue));  // copied (its copy may throw)
    }
    EXPECT_EQ(LifetimeCounter::Live(), 10) << "ten copies queued";
    EXPECT_EQ(bus.ProcessBatch(), 10u);
    EXPECT_EQ(seen, 10);
    EXPECT_EQ(LifetimeCounter::Live(), 0);
  }
  EXPECT_EQ(LifetimeCounter::Live(), 0);
}

TEST_F(LifetimeTest, QueuedPayloadsAreDestroyedWithTheBus) {
  {
    Bus bus;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(bus.Publish(LifetimeCounter(i)));
    ASSERT_TRUE(bus.Publish(std::make_unique<int>(3)));
    ASSERT_TRUE(bus.Publish(std::string(100, 'x')));
    bus.ProcessBatch(2);
    EXPECT_EQ(LifetimeCounter::Live(), 3);
  }
  EXPECT_EQ(LifetimeCounter::Live(), 0);
  EXPECT_EQ(LifetimeCounter::constructed.load(), LifetimeCounter::destroyed.load());
}

TEST_F(LifetimeTest, FullQueueOfOwningPayloadsIsReleasedOnDestruction) {
  auto bus = std::make_unique<sluice::SpscBus<OwningPayload, 8>>();
  bus->SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(bus->Publish(LifetimeCounter(i)));
  EXPECT_FALSE(bus->Publish(LifetimeCounter(99)));
  EXPECT_EQ(LifetimeCounter::Live(), 8);
  bus.reset();
  EXPECT_EQ(LifetimeCounter::Live(), 0);
}

TEST_F(LifetimeTest, RefusedRvalueIsLeftToTheCaller) {
  sluice::MpscBus<OwningPayload, 4> bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(std::make_unique<int>(i)));
  auto owned = std::make_unique<int>(42);
  EXPECT_FALSE(bus.Publish(std::move(owned)));
  ASSERT_NE(owned, nullptr) << "a refused unique_ptr must not be moved from";
  EXPECT_EQ(*owned, 42);

  std::string text(64, 'y');
  EXPECT_FALSE(bus.Publish(std::move(text)));
  EXPECT_EQ(text, std::string(64, 'y'));
}

TEST_F(LifetimeTest, MoveOnlyPayloadReachesTheSubscriber) {
  sluice::SpscBus<OwningPayload, 4> bus;
  int received = 0;
  ASSERT_TRUE(
      bus.Subscribe<std::unique_ptr<int>>([&](const std::unique_ptr<int>& p) { received = *p; })
          .IsValid());
  ASSERT_TRUE(bus.Publish(std::make_unique<int>(17)));
  bus.ProcessBatch();
  EXPECT_EQ(received, 17);
}

}  // namespace
}  // namespace lifetime_test
}  // namespace sluice_test
