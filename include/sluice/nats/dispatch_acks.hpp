// Acknowledgement after dispatch, for the JetStream routes received with
// ReceiveOptions::ack = AckTiming::kOnDispatch: a JetStream message is
// acknowledged once the bus's consumer has run its subscribers (or
// visitor), not when it enters the bus, so a receiver that dies with a
// backlog in its bus loses none of it: the stream delivers again what was
// never acknowledged.
//
// The bus tells the bridge through its traits' Observer (sluice/observer.hpp):
//
//   struct ReceiverTraits : sluice::DefaultBusTraits {
//     using Observer = sluice::nats::AckOnDispatch<>;   // or AckOnDispatch<MyObserver>
//   };
//   using Bus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti, ReceiverTraits>;
//
// How it knows which message is which: the fetcher publishes a message
// holding this table's mutex, and the bus's OnAdmitted, on the fetcher's
// own thread inside that publish, files the JetStream message under the
// bus message's (lane, msg_id). The consumer looks each message it takes
// up under the same mutex, so it cannot take a message before it is filed.
// A bus with an Observer calls OnTaken just before each message's dispatch
// (no runs), so OnTaken of the next message, or OnBatchEnd, says that the
// one before it was dispatched: then it is acknowledged, on the consumer's
// thread (a buffered publish of the client's).
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/observer.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

class DispatchAcks;

namespace detail {

// A JetStream message the fetcher is about to publish into the bus, on its
// own thread (AwaitingDispatch below). `filed`: the bus admitted it and
// the table holds it (the table acknowledges it from then on).
struct Expectation {
  DispatchAcks* acks = nullptr;
  natsMsg* message = nullptr;
  const void* route = nullptr;  // the pull subscription it came from
  std::uint64_t stream_sequence = 0;
  bool attempting = false;  // inside DispatchAcks::Attempt, holding its mutex
  bool filed = false;
};

// The fetcher thread's message in hand, if it awaits dispatch; read by the
// receiver's admission (Receiver::Admit) and by OnAdmitted on that thread.
inline thread_local Expectation* tls_expectation = nullptr;

// Sets the thread's expectation for a scope.
class AwaitingDispatch {
 public:
  explicit AwaitingDispatch(Expectation* expectation) noexcept { tls_expectation = expectation; }
  ~AwaitingDispatch() { tls_expectation = nullptr; }
  AwaitingDispatch(const AwaitingDispatch&) = delete;
  AwaitingDispatch& operator=(const AwaitingDispatch&) = delete;
};

}  // namespace detail

class DispatchAcks {
 public:
  DispatchAcks() = default;
  DispatchAcks(const DispatchAcks&) = delete;
  DispatchAcks& operator=(const DispatchAcks&) = delete;
  // The bridge withdraws what it filed before its subscriptions go; what
  // is left here (none, with a bridge that was shut down) is released.
  ~DispatchAcks() {
    for (auto& entry : pending_) natsMsg_Destroy(entry.second.message);
    natsMsg_Destroy(in_hand_.message);
  }

  // ---- The fetcher's side ------------------------------------------------------

  // One publish attempt of `expectation`'s message (`attempt` returns
  // whether the bus admitted it), holding the mutex, so that OnAdmitted
  // files the message before the consumer can look it up. `tracked_` counts
  // it first: a consumer that takes the message has seen the count (the
  // increment is sequenced before the publish's release store, which the
  // consumer's take acquires), so it never skips the lookup. The bus's
  // observer calls on this thread, the Next observer's OnAdmitted among
  // them, run holding the mutex: they must not wait for the consumer.
  template <typename Attempt>
  bool AttemptPublish(detail::Expectation& expectation, Attempt&& attempt) {
    const std::lock_guard<std::mutex> lock(mutex_);
    tracked_.fetch_add(1, std::memory_order_relaxed);
    expectation.attempting = true;
    const bool admitted = attempt();
    expectation.attempting = false;
    if (!expectation.filed) tracked_.fetch_sub(1, std::memory_order_relaxed);
    return admitted;
  }

  // Whether the message `route` delivered as `stream_sequence` is in the bus
  // and not yet acknowledged: a redelivery of it (the stream's ack wait ran
  // out first) is then neither acknowledged nor admitted again.
  bool AwaitsDispatch(const void* route, std::uint64_t stream_sequence) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return in_bus_.count(StreamKey{route, stream_sequence}) != 0;
  }

  // Releases, unacknowledged, every message `route` filed that is not yet
  // acknowledged (its subscription is about to go): the stream delivers
  // them again to the durable's next reader. One dispatched after this is
  // not acknowledged.
  void Withdraw(const void* route) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto entry = pending_.begin(); entry != pending_.end();) {
      if (entry->second.route == route) {
        Release(entry->second);
        entry = pending_.erase(entry);
      } else {
        ++entry;
      }
    }
    if (in_hand_.message != nullptr && in_hand_.route == route) {
      Release(in_hand_);
      in_hand_ = Entry{};
    }
  }

  // Told of each message dispatched, on the consumer's thread, before its
  // acknowledgement is sent: `sink(context, route, stream_sequence)` (the
  // bridge of `route` keeps it in its state file, so that a restarted
  // receiver refuses its redelivery). One for the bus: every bridge on it
  // sets the same one, which finds the route's own bridge. Set before any
  // message is filed.
  using DispatchedSink = void (*)(void* context, const void* route,
                                  std::uint64_t stream_sequence) noexcept;
  void SetDispatchedSink(DispatchedSink sink, void* context) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    sink_ = sink;
    sink_context_ = context;
  }

  // Any thread, any time (an observer's own calls included): relaxed
  // loads of counts kept under the mutex, so each is exact on its own.
  DispatchAckCounts Counts() const noexcept {
    DispatchAckCounts counts;
    counts.filed = filed_.load(std::memory_order_relaxed);
    counts.acknowledged = acknowledged_.load(std::memory_order_relaxed);
    counts.withdrawn = withdrawn_.load(std::memory_order_relaxed);
    const std::uint64_t done = counts.acknowledged + counts.withdrawn;
    counts.pending = counts.filed > done ? counts.filed - done : 0;
    return counts;
  }

  // ---- The bus's side (AckOnDispatch) ---------------------------------------------

  // A producer thread, after a message was published. Only the fetcher's
  // publish inside AttemptPublish (holding the mutex) files anything.
  void Admitted(const MessageHeader& header) noexcept {
    detail::Expectation* expectation = detail::tls_expectation;
    if (expectation == nullptr || !expectation->attempting || expectation->acks != this) return;
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      const Entry entry{expectation->message, expectation->route, expectation->stream_sequence};
      const StreamKey key{entry.route, entry.stream_sequence};
      if (!in_bus_.insert(key).second) return;  // in the bus already: not filed twice
      if (!pending_.emplace(KeyOf(header), entry).second) {
        in_bus_.erase(key);
        return;
      }
      expectation->filed = true;
      filed_.fetch_add(1, std::memory_order_relaxed);
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // No memory for the entry: not filed, so the fetcher acknowledges it
      // now, as kOnAdmission would.
    }
#endif
  }

  // The consumer, just before a message's dispatch: ours (filed) is in hand.
  void Taken(const MessageHeader& header) noexcept {
    // Relaxed: see AttemptPublish. 0: nothing filed nor being filed.
    if (tracked_.load(std::memory_order_relaxed) == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = pending_.find(KeyOf(header));
    if (found == pending_.end()) return;
    in_hand_ = found->second;
    pending_.erase(found);
    holding_ = true;
  }

  // The consumer, once the message's callbacks or visitor returned, before
  // its slot is released (so before the bus can read as drained).
  void Dispatched() noexcept {
    if (!holding_) return;
    holding_ = false;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (in_hand_.message == nullptr) return;  // withdrawn meanwhile
    if (sink_ != nullptr) sink_(sink_context_, in_hand_.route, in_hand_.stream_sequence);
    (void)natsMsg_Ack(in_hand_.message, nullptr);
    Forget(in_hand_);
    in_hand_ = Entry{};
    acknowledged_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  struct Entry {
    natsMsg* message = nullptr;
    const void* route = nullptr;
    std::uint64_t stream_sequence = 0;
  };
  // A message by where it came from: its pull subscription and its
  // sequence in the stream.
  struct StreamKey {
    const void* route;
    std::uint64_t stream_sequence;
    bool operator==(const StreamKey& other) const noexcept {
      return route == other.route && stream_sequence == other.stream_sequence;
    }
  };
  struct StreamKeyHash {
    std::size_t operator()(const StreamKey& key) const noexcept {
      return std::hash<const void*>()(key.route) ^
             std::hash<std::uint64_t>()(key.stream_sequence * 0x9E3779B97F4A7C15ull);
    }
  };

  // (lane, msg_id): unique per bus (MessageHeader).
  static std::uint64_t KeyOf(const MessageHeader& header) noexcept {
    return header.msg_id ^ (static_cast<std::uint64_t>(header.lane) << 48);
  }

  // Holding the mutex: `entry` leaves the table (its message freed).
  void Forget(const Entry& entry) noexcept {
    in_bus_.erase(StreamKey{entry.route, entry.stream_sequence});
    natsMsg_Destroy(entry.message);
    tracked_.fetch_sub(1, std::memory_order_relaxed);
  }
  void Release(const Entry& entry) noexcept {
    Forget(entry);
    withdrawn_.fetch_add(1, std::memory_order_relaxed);
  }

  // Guards everything below but the counts and holding_ (the consumer's).
  mutable std::mutex mutex_;
  // Filed and not yet taken, by KeyOf.
  std::unordered_map<std::uint64_t, Entry> pending_;
  // Taken by the consumer; its dispatch runs now.
  Entry in_hand_;
  // Every filed message not yet acknowledged nor withdrawn (pending_ and
  // in_hand_), by StreamKey.
  std::unordered_set<StreamKey, StreamKeyHash> in_bus_;
  // Publish attempts in flight, plus filed messages not yet acknowledged
  // nor withdrawn; changed under the mutex, read by the consumer without it.
  std::atomic<std::uint64_t> tracked_{0};
  std::atomic<std::uint64_t> filed_{0};
  std::atomic<std::uint64_t> acknowledged_{0};
  std::atomic<std::uint64_t> withdrawn_{0};
  // The consumer's: whether it took a filed message whose dispatch has not
  // ended.
  bool holding_ = false;
  DispatchedSink sink_ = nullptr;  // under the mutex
  void* sink_context_ = nullptr;
};

// The traits' Observer of a bus that receives JetStream routes with
// AckTiming::kOnDispatch; forwards every event to `Next` as well (Next's
// OnDispatched only if it has one). Bridge::Receive accepts kOnDispatch on
// a bus whose Observer is exactly an AckOnDispatch: compose by Next, not
// by deriving from it.
template <typename Next = NoObserver>
class AckOnDispatch : public Next {
 public:
  // The message events with the payload index (sluice/observer.hpp), so
  // that a Next that takes it (a TracingObserver) gets it; one that does
  // not gets the header alone.
  void OnAdmitted(const MessageHeader& header, std::size_t type_index) noexcept {
    acks_.Admitted(header);
    if constexpr (sluice::detail::HasTypedOnAdmitted<Next>::value) {
      Next::OnAdmitted(header, type_index);
    } else {
      Next::OnAdmitted(header);
    }
  }
  void OnTaken(const MessageHeader& header, std::size_t type_index) noexcept {
    acks_.Taken(header);
    if constexpr (sluice::detail::HasTypedOnTaken<Next>::value) {
      Next::OnTaken(header, type_index);
    } else {
      Next::OnTaken(header);
    }
  }
  void OnDispatched(const MessageHeader& header, std::size_t type_index) noexcept {
    acks_.Dispatched();
    if constexpr (sluice::detail::HasTypedOnDispatched<Next>::value) {
      Next::OnDispatched(header, type_index);
    } else if constexpr (sluice::detail::HasOnDispatched<Next>::value) {
      Next::OnDispatched(header);
    }
  }
  DispatchAcks& DispatchAcknowledgements() noexcept { return acks_; }
  const DispatchAcks& DispatchAcknowledgements() const noexcept { return acks_; }

 private:
  DispatchAcks acks_;
};

namespace detail {

template <typename Observer>
struct IsAckOnDispatch : std::false_type {};
template <typename Next>
struct IsAckOnDispatch<AckOnDispatch<Next>> : std::true_type {};

// The bus's DispatchAcks, when its Observer is an AckOnDispatch; else null.
template <typename Bus>
DispatchAcks* DispatchAcksOf(Bus& bus) noexcept {
  using Observer = std::decay_t<decltype(bus.GetObserver())>;
  if constexpr (IsAckOnDispatch<Observer>::value) {
    return &bus.GetObserver().DispatchAcknowledgements();
  } else {
    (void)bus;
    return nullptr;
  }
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
