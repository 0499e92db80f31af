// Components used by their owner thread while the consumer dispatches. Built
// and run under ThreadSanitizer in CI with the other threaded tests.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "sluice/extras/component.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace {

// Weak owners die on the owner thread while the consumer dispatches to them,
// so weak callbacks retire their subscriptions while the owner thread
// subscribes anew into the same places and unsubscribes everything: each
// place is retired or removed exactly once, and nothing is left behind.
TEST(ComponentConcurrencyTest, RetiringRacesWithTheOwnerThread) {
  using Bus = sluice::MpscBus<BasicPayload, 256>;
  struct Owner {
    std::atomic<int> calls{0};
    void OnCommand(const MotorCmd&) { calls.fetch_add(1, std::memory_order_relaxed); }
  };
  Bus bus;
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    while (!stop.load()) {
      // Refused while the queue is full; it only keeps messages flowing.
      (void)bus.Publish(MotorCmd{1});
      bus.ProcessBatch();
    }
  });
  {
    sluice::Component<Bus, 4> component(bus);
    for (int round = 0; round < 2000; ++round) {
      std::shared_ptr<Owner> owners[3];
      for (auto& owner : owners) {
        owner = std::make_shared<Owner>();
        // Refused while dead owners of earlier rounds hold all four places
        // and no message has found them dead yet.
        (void)component.SubscribeWeak<MotorCmd>(std::weak_ptr<Owner>(owner), &Owner::OnCommand);
      }
      for (auto& owner : owners) owner.reset();  // callbacks may now retire them
      if (round % 3 == 0) component.UnsubscribeAll();
      EXPECT_LE(component.SubscriptionCount(), 4u);
      EXPECT_LE(bus.SubscriberCount<MotorCmd>(), 4u);
    }
    component.UnsubscribeAll();
    EXPECT_EQ(component.SubscriptionCount(), 0u);
  }
  stop.store(true);
  consumer.join();
  bus.ProcessBatch();
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

}  // namespace
}  // namespace sluice_test
