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
namespace component_concurrency_test {
namespace {

// Weak owners die on the owner thread while the consumer dispatches to them,
// so weak callbacks retire their subscriptions while the owner thread
// subscribes anew into the same places and unsubscribes everything: each
// place is retired or removed exactly once, and nothing is left behind.
// Count: 2,000 rounds of three weak owners dying while the consumer
// dispatches without pause: 6,000 subscriptions a callback may retire while
// the owner thread subscribes into the same four places, and about 670
// UnsubscribeAll calls racing those retirements.
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
    const std::uint64_t rounds = StressCount(2000);
    StressProgress progress("weak owner rounds", rounds);
    for (std::uint64_t round = 0; round < rounds; ++round) {
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
      progress.Step();
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
// Count: 100,000 rounds, each a weak subscription whose owner dies on the
// killer thread while messages find it: every 3rd round a sweep, every 7th
// an UnsubscribeAll and every 23rd a destroyed component (over 4,000) race
// the consumer's retiring callbacks.
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
  const std::uint64_t rounds = StressCount(100000);
  StressProgress progress("dying owner rounds", rounds);
  for (std::uint64_t round = 1; round <= rounds; ++round) {
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
    progress.Step();
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
}  // namespace component_concurrency_test
}  // namespace sluice_test
