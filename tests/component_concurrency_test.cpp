// Components used by their owner thread while the consumer dispatches. Built
// and run under ThreadSanitizer in CI with the other threaded tests.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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

// Owners die on a third thread while messages find them dead on the
// consumer and the owner thread sweeps (RetireExpired), removes everything
// (UnsubscribeAll) and destroys components. A callback that retires an
// entry the owner thread is removing must be waited for: the component (and
// the entry's watch of its owner) must outlive the callback's last touch.
// ThreadSanitizer (CI) and AddressSanitizer see a violation.
TEST(ComponentConcurrencyTest, RetiringCallbacksOutliveNeitherTheComponentNorTheWatch) {
  struct Owner {
    std::atomic<int> hits{0};
    void On(const MotorCmd&) { hits.fetch_add(1, std::memory_order_relaxed); }
  };
  sluice::MpscBus<BasicPayload, 1024> bus;
  std::atomic<bool> stop{false};
  std::mutex doomed_mutex;
  std::vector<std::shared_ptr<Owner>> doomed;
  auto component = std::make_unique<sluice::Component<decltype(bus), 4>>(bus);
  std::thread consumer([&] {
    while (!stop.load()) {
      if (bus.ProcessBatch() == 0) std::this_thread::yield();
    }
  });
  std::thread producer([&] {
    for (int i = 0; !stop.load(); ++i) {
      (void)bus.Publish(MotorCmd{i});  // a full queue refuses: fine here
      if (i % 64 == 0) std::this_thread::yield();
    }
  });
  std::thread killer([&] {
    while (!stop.load()) {
      std::vector<std::shared_ptr<Owner>> dying;
      {
        const std::lock_guard<std::mutex> lock(doomed_mutex);
        dying.swap(doomed);
      }
      dying.clear();
      std::this_thread::yield();
    }
  });
  for (int round = 1; round <= 100000; ++round) {
    auto owner = std::make_shared<Owner>();
    (void)component->SubscribeWeak<MotorCmd>(std::weak_ptr<Owner>(owner), &Owner::On);
    {
      const std::lock_guard<std::mutex> lock(doomed_mutex);
      doomed.push_back(std::move(owner));
    }
    if (round % 3 == 0) (void)component->RetireExpired();
    if (round % 7 == 0) (void)component->UnsubscribeAll();
    if (round % 23 == 0) component = std::make_unique<sluice::Component<decltype(bus), 4>>(bus);
    ASSERT_LE(component->SubscriptionCount(), 4u);
  }
  stop.store(true);
  producer.join();
  killer.join();
  consumer.join();
  component.reset();
  bus.ProcessBatch();
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

}  // namespace
}  // namespace sluice_test
