// A weak subscription whose owner dies without ever receiving a message is
// retired by the component's next subscription: the component, the bus's
// table and the owner's memory do not fill up with dead owners.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <variant>

#include "sluice/all.hpp"

namespace component_retire_test {
namespace {

struct Reading {
  int value;
};
using Bus = sluice::AsyncBus<std::variant<Reading>, 64>;

// Counts live allocations made through it, so a test sees whether an
// owner's make_shared block (object and control block) was freed.
int g_live_blocks = 0;
template <typename T>
struct CountingAllocator {
  using value_type = T;
  CountingAllocator() = default;
  template <typename U>
  CountingAllocator(const CountingAllocator<U>&) noexcept {}  // NOLINT
  T* allocate(std::size_t n) {
    ++g_live_blocks;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    --g_live_blocks;
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const CountingAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const CountingAllocator<U>&) const noexcept {
    return false;
  }
};

struct Owner {
  int received = 0;
  void On(const Reading&) { ++received; }
};

TEST(ComponentRetireTest, OwnersThatDieWithoutAMessageDoNotFillTheComponent) {
  Bus bus;
  sluice::Component<Bus, 4> component(bus);
  g_live_blocks = 0;
  // Ten times the component's room and more than the bus's table for the
  // type: every owner dies before any message is published.
  for (int i = 0; i < 40; ++i) {
    auto owner = std::allocate_shared<Owner>(CountingAllocator<Owner>());
    ASSERT_TRUE(component.SubscribeWeak<Reading>(std::weak_ptr<Owner>(owner), &Owner::On))
        << "refused at owner " << i;
    EXPECT_EQ(component.SubscriptionCount(), 1u);
    owner.reset();
    // Only the newest dead owner's block may still be held (by its
    // subscription, until the next subscription retires it).
    EXPECT_LE(g_live_blocks, 1) << "after owner " << i;
  }
  EXPECT_EQ(component.RetireExpired(), 1u);
  EXPECT_EQ(g_live_blocks, 0);
  EXPECT_EQ(component.SubscriptionCount(), 0u);
  EXPECT_EQ(bus.SubscriberCount<Reading>(), 0u);
}

TEST(ComponentRetireTest, LiveOwnersAndPlainSubscriptionsAreKept) {
  Bus bus;
  sluice::Component<Bus, 4> component(bus);
  auto alive = std::make_shared<Owner>();
  int plain = 0;
  ASSERT_TRUE(component.SubscribeWeak<Reading>(std::weak_ptr<Owner>(alive), &Owner::On));
  ASSERT_TRUE(component.Subscribe<Reading>([&plain](const Reading&) { ++plain; }));
  {
    auto dead = std::make_shared<Owner>();
    ASSERT_TRUE(component.SubscribeWeak<Reading>(std::weak_ptr<Owner>(dead), &Owner::On));
  }
  EXPECT_EQ(component.RetireExpired(), 1u);
  EXPECT_EQ(component.RetireExpired(), 0u);
  EXPECT_EQ(component.SubscriptionCount(), 2u);
  ASSERT_TRUE(bus.Publish(Reading{1}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(alive->received, 1);
  EXPECT_EQ(plain, 1);
}

TEST(ComponentRetireTest, AnEntryReusedAfterItsOwnerRetiredItselfIsNotRetiredAgain) {
  Bus bus;
  sluice::Component<Bus, 1> component(bus);
  {
    auto dead = std::make_shared<Owner>();
    ASSERT_TRUE(component.SubscribeWeak<Reading>(std::weak_ptr<Owner>(dead), &Owner::On));
  }
  // The message finds the owner dead: the subscription retires itself.
  ASSERT_TRUE(bus.Publish(Reading{1}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  int plain = 0;
  ASSERT_TRUE(component.Subscribe<Reading>([&plain](const Reading&) { ++plain; }));
  EXPECT_EQ(component.RetireExpired(), 0u);
  ASSERT_TRUE(bus.Publish(Reading{2}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(plain, 1);
}

}  // namespace
}  // namespace component_retire_test
