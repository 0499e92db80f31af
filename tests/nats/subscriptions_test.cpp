// The bridge's inbound subscriptions on their own: a pull subscription's
// stop and pause, its removal, the slow-consumer drops kept past it, and a
// core subscription whose completion the client will never report. No
// server: the client's subscriptions are never made (null), which the
// client answers as it does for a closed one.
#include "sluice/nats/subscriptions.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/message.hpp"

namespace subscriptions_test {
namespace {

using sluice::MessagePriority;

struct FakeReceiver {};

using Subscription = sluice::nats::detail::InboundSubscription<FakeReceiver>;
using Set = sluice::nats::detail::SubscriptionSet<FakeReceiver>;

std::unique_ptr<Subscription> Make(const std::string& route_subject, MessagePriority priority) {
  auto inbound = std::make_unique<Subscription>();
  inbound->priority = priority;
  inbound->route_subject = route_subject;
  inbound->subject = sluice::nats::SubjectFor(route_subject, priority);
  return inbound;
}

TEST(NatsSubscriptionSet, APauseEndsAtItsTimeOrAtTheStop) {
  Subscription inbound;
  EXPECT_FALSE(sluice::nats::detail::PauseUnlessStopped(inbound, std::chrono::nanoseconds(0)));
  sluice::nats::detail::RequestStop(inbound);
  EXPECT_TRUE(inbound.stop.load());
  EXPECT_TRUE(sluice::nats::detail::PauseUnlessStopped(inbound, std::chrono::hours(1)));
}

// Removing a JetStream subject stops its fetcher, waking it from a pause
// (a day here: without the wake-up the test hangs), and joins it before the
// subscription is freed. The removal waits until the fetcher is about to
// pause, so it is parked when the stop comes (one that came first would
// end the pause without a wake-up, and the test would pass without one).
TEST(NatsSubscriptionSet, RemovingAPullSubscriptionWakesAndJoinsItsFetcher) {
  Set set;
  Subscription* added = set.AddPull(Make("plant.stop", MessagePriority::HIGH));
  EXPECT_TRUE(added->pull);
  EXPECT_TRUE(added->completed);  // no completion to wait for
  ASSERT_EQ(set.Pulls(), std::vector<Subscription*>{added});
  std::atomic<bool> pausing{false};
  std::atomic<bool> stopped{false};
  added->fetcher = std::thread([added, &pausing, &stopped] {
    pausing.store(true);
    stopped.store(sluice::nats::detail::PauseUnlessStopped(*added, std::chrono::hours(24)));
  });
  while (!pausing.load()) std::this_thread::yield();
  set.Remove("plant.stop");
  EXPECT_TRUE(stopped.load());
  EXPECT_TRUE(set.Pulls().empty());
}

// The drops a subscription saw stay counted once it is removed, and once
// every subscription is released: the sum never goes down.
TEST(NatsSubscriptionSet, ASubscriptionsDropsStayCountedAfterItGoes) {
  Set set;
  set.AddPull(Make("plant.sensor", MessagePriority::LOW))->dropped_seen = 3;
  set.AddPull(Make("plant.stop", MessagePriority::HIGH))->dropped_seen = 5;
  const sluice::nats::PriorityCounts expected{3, 0, 5};
  EXPECT_EQ(set.SlowConsumerDropped(), expected);
  set.Remove("plant.sensor");
  EXPECT_EQ(set.SlowConsumerDropped(), expected);
  set.KeepSlowConsumerDrops();
  set.ReleaseAll();
  EXPECT_EQ(set.SlowConsumerDropped(), expected);
  EXPECT_TRUE(set.Pulls().empty());
}

// A core subscription is live until the client reports its last handler
// call; when the client cannot be asked to report it, none comes, so
// neither its removal nor the release of all waits for it.
TEST(NatsSubscriptionSet, ACompletionThatCannotBeWatchedIsNotWaitedFor) {
  Set set;
  Subscription* first = set.AddCore(Make("plant.sensor", MessagePriority::MEDIUM));
  Subscription* second = set.AddCore(Make("plant.stop", MessagePriority::HIGH));
  EXPECT_FALSE(first->completed);
  EXPECT_EQ(set.WatchCompletion(first), NATS_INVALID_ARG);
  EXPECT_EQ(set.WatchCompletion(second), NATS_INVALID_ARG);
  EXPECT_TRUE(first->completed);
  EXPECT_TRUE(second->completed);
  set.Remove("plant.sensor");
  set.ReleaseAll();
  EXPECT_EQ(set.SlowConsumerDropped(), sluice::nats::PriorityCounts{});
}

}  // namespace
}  // namespace subscriptions_test
