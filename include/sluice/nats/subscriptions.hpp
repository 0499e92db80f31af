// The NATS bridge's inbound subscriptions, one per received subject and
// priority (core NATS, read by the client's threads, or a JetStream pull
// consumer, read by a fetcher thread of the bridge's own): the set that
// owns them, knows when the client has finished with each, removes them,
// and keeps their slow-consumer drops.
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/dispatch_acks.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/nats/routes.hpp"
#include "sluice/nats/stream_journal.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

template <typename Receiver>
class SubscriptionSet;

// One per inbound subject and priority; its address is the client's
// closure for the subscription.
template <typename Receiver>
struct InboundSubscription {
  Receiver* receiver = nullptr;              // handles its frames
  SubscriptionSet<Receiver>* set = nullptr;  // owns it
  MessagePriority priority = MessagePriority::MEDIUM;
  std::string subject;                       // with the priority suffix
  std::string route_subject;                 // as given to Receive
  std::vector<InboundType<Receiver>> types;  // those the subject carries: a copy, never written
  bool count_gaps = true;       // false in a queue group (a member sees part of a stream)
  bool require_signed = false;  // ReceiveOptions::require_signed
  // JetStream, AckTiming::kOnDispatch: the bus's table of messages awaiting
  // dispatch (sluice/nats/dispatch_acks.hpp); null otherwise.
  DispatchAcks* acks = nullptr;
  // JetStream: the durable's MaxDeliver (below 1: no limit), read when
  // subscribed.
  std::int64_t max_deliver = -1;
  // JetStream: the durable's last delivered stream sequence when
  // subscribed (0: none); a message numbered up to it was delivered to an
  // earlier reader first (FrameDelivery::kJetStreamEarlier).
  std::uint64_t delivered_before = 0;
  // JetStream: the durable's place in the state file (StreamJournal::kNoEntry:
  // none) and its creation time; each message fetched marks it there.
  std::uint32_t durable_entry = StreamJournal::kNoEntry;
  std::int64_t durable_created = 0;
  // JetStream: stream sequences of messages receivers of the state file
  // dispatched (kOnDispatch); a redelivery of one is refused. Filled when
  // subscribed, then read by the fetch thread only.
  std::unordered_set<std::uint64_t> dispatched_earlier;
  natsSubscription* subscription = nullptr;
  bool completed = false;  // its last handler call has returned; guarded by the set's mutex
  // JetStream: a pull subscription read by a thread of the bridge's own
  // (no client callback), stopped with `stop` (RequestStop: release; the
  // thread's acquire loads see it) and joined before the subscription is
  // freed. The thread pauses on `stop_changed` (PauseUnlessStopped), which
  // RequestStop notifies; `stop_mutex` orders the store with the pause's
  // look at it, so that the notification is never missed.
  bool pull = false;
  std::atomic<bool> stop{false};
  std::mutex stop_mutex;
  std::condition_variable stop_changed;
  std::thread fetcher;
  // The highest slow-consumer count the client reported for it; guarded
  // by the set's mutex.
  std::uint64_t dropped_seen = 0;
};

// Asks a pull subscription's fetcher to stop, and wakes it if it pauses.
// Release: pairs with the fetch loop's acquire loads.
template <typename Receiver>
void RequestStop(InboundSubscription<Receiver>& inbound) {
  {
    const std::lock_guard<std::mutex> lock(inbound.stop_mutex);
    inbound.stop.store(true, std::memory_order_release);
  }
  inbound.stop_changed.notify_all();
}

// Stops a pull subscription's fetcher and joins it; releases what it
// left awaiting dispatch.
template <typename Receiver>
void StopFetcher(InboundSubscription<Receiver>& inbound) {
  RequestStop(inbound);
  if (inbound.fetcher.joinable()) inbound.fetcher.join();
  // What it filed and the bus has not dispatched goes back to the stream
  // before the subscription its messages belong to is destroyed.
  if (inbound.acks != nullptr) inbound.acks->Withdraw(&inbound);
}

// The fetcher's pause (its bus closed, or after an error): parked until
// `wait` has passed or RequestStop, so a stop is never kept waiting for
// it. True once stopped. Parks an hour at most at a time, so a huge wait
// never adds to the clock.
template <typename Receiver>
bool PauseUnlessStopped(InboundSubscription<Receiver>& inbound, std::chrono::nanoseconds wait) {
  constexpr std::chrono::nanoseconds kLongestPark = std::chrono::hours(1);
  const sluice::detail::Deadline until(wait);
  std::unique_lock<std::mutex> lock(inbound.stop_mutex);
  // Acquire: pairs with RequestStop's release store.
  while (!inbound.stop.load(std::memory_order_acquire)) {
    const std::chrono::nanoseconds left = until.Left();
    if (left.count() == 0) return false;
    (void)inbound.stop_changed.wait_for(lock, left < kLongestPark ? left : kLongestPark);
  }
  return true;
}

template <typename Receiver>
class SubscriptionSet {
 public:
  using Subscription = InboundSubscription<Receiver>;

  // A core subscription the client has made: counted as live until the
  // client reports its last handler call (OnSubscriptionComplete).
  Subscription* AddCore(std::unique_ptr<Subscription> inbound) {
    Subscription* added = inbound.get();
    std::lock_guard<std::mutex> lock(mutex_);
    ++live_subscriptions_;
    inbound_.push_back(std::move(inbound));
    return added;
  }

  // Asks the client to report `added`'s completion. On failure none will
  // be reported: it is no longer counted as live.
  natsStatus WatchCompletion(Subscription* added) {
    const natsStatus status =
        natsSubscription_SetOnCompleteCB(added->subscription, &OnSubscriptionComplete, added);
    if (status != NATS_OK) {
      std::lock_guard<std::mutex> lock(mutex_);
      --live_subscriptions_;
      added->completed = true;
    }
    return status;
  }

  // A pull subscription: no client callback to complete (its fetcher is
  // joined instead).
  Subscription* AddPull(std::unique_ptr<Subscription> inbound) {
    inbound->pull = true;
    inbound->completed = true;
    Subscription* added = inbound.get();
    std::lock_guard<std::mutex> lock(mutex_);
    inbound_.push_back(std::move(inbound));
    return added;
  }

  std::vector<Subscription*> Pulls() const {
    std::vector<Subscription*> pulls;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& inbound : inbound_) {
      if (inbound->pull) pulls.push_back(inbound.get());
    }
    return pulls;
  }

  // Frees a pull subscription whose fetcher has stopped, leaving it in the
  // set. Under the mutex: the statistics read the subscriptions under it.
  void DestroyPull(Subscription& inbound) {
    std::lock_guard<std::mutex> lock(mutex_);
    natsSubscription_Destroy(inbound.subscription);
    inbound.subscription = nullptr;
  }

  // Removes the subscriptions of an inbound subject (StopReceiving, or a
  // Receive that failed while running): unsubscribes them, waits until
  // each has handled its last frame, keeps their slow-consumer drops and
  // frees them.
  void Remove(const std::string& route_subject) {
    std::vector<Subscription*> removed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      (void)ReadSlowConsumerDrops();
      for (const auto& inbound : inbound_) {
        if (inbound->route_subject == route_subject) removed.push_back(inbound.get());
      }
    }
    for (Subscription* inbound : removed) {
      if (inbound->pull) StopFetcher(*inbound);
    }
    for (Subscription* inbound : removed) {
      // A pull consumer stays on the server (its durable state is the
      // route's); a core subscription is unsubscribed. A failure means the
      // connection is closed: the completion comes then.
      if (!inbound->pull) (void)natsSubscription_Unsubscribe(inbound->subscription);
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] {
      return std::all_of(removed.begin(), removed.end(),
                         [](const Subscription* inbound) { return inbound->completed; });
    });
    for (Subscription* inbound : removed) {
      slow_consumer_released_[static_cast<std::size_t>(inbound->priority)] += inbound->dropped_seen;
      natsSubscription_Destroy(inbound->subscription);
    }
    inbound_.erase(std::remove_if(inbound_.begin(), inbound_.end(),
                                  [&](const auto& inbound) {
                                    return std::find(removed.begin(), removed.end(),
                                                     inbound.get()) != removed.end();
                                  }),
                   inbound_.end());
  }

  // Once the connection is closed: waits, without a bound, until every
  // core subscription's handler has returned for the last time, then frees
  // them all.
  void ReleaseAll() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return live_subscriptions_ == 0; });
    for (const auto& inbound : inbound_) {
      slow_consumer_released_[static_cast<std::size_t>(inbound->priority)] += inbound->dropped_seen;
      natsSubscription_Destroy(inbound->subscription);
    }
    inbound_.clear();
  }

  PriorityCounts SlowConsumerDropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ReadSlowConsumerDrops();
  }

  // Reads the counts while the subscriptions are open (before the bridge
  // closes the connection, and when it is lost).
  void KeepSlowConsumerDrops() {
    std::lock_guard<std::mutex> lock(mutex_);
    (void)ReadSlowConsumerDrops();
  }

 private:
  // The client calls it once a subscription's handler has returned for the
  // last time.
  static void OnSubscriptionComplete(void* closure) {
    auto* inbound = static_cast<Subscription*>(closure);
    SubscriptionSet* self = inbound->set;
    std::lock_guard<std::mutex> lock(self->mutex_);
    --self->live_subscriptions_;
    inbound->completed = true;
    self->changed_.notify_all();
  }

  // Holding mutex_. The client answers for open subscriptions only (a
  // closed one is an error), so each subscription keeps the highest count
  // it reported, and released subscriptions leave theirs in
  // slow_consumer_released_: the sum never goes down. Drops after the last
  // read before a close are not counted (no message arrives while the
  // connection is down, and the bridge reads just before closing it).
  PriorityCounts ReadSlowConsumerDrops() const {
    PriorityCounts dropped = slow_consumer_released_;
    for (const auto& inbound : inbound_) {
      std::int64_t count = 0;
      if (natsSubscription_GetDropped(inbound->subscription, &count) == NATS_OK && count > 0) {
        inbound->dropped_seen = std::max(inbound->dropped_seen, static_cast<std::uint64_t>(count));
      }
      dropped[static_cast<std::size_t>(inbound->priority)] += inbound->dropped_seen;
    }
    return dropped;
  }

  // Guards inbound_ (and each one's completed and dropped_seen) against
  // the statistics and the client's completion callbacks, and the fields
  // below.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Subscription>> inbound_;
  PriorityCounts slow_consumer_released_{};
  int live_subscriptions_ = 0;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
