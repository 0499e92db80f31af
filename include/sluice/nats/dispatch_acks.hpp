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
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
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

// What the table has done, for tests and metrics.
struct DispatchAckCounts {
  std::uint64_t filed = 0;         // admitted into the bus, awaiting dispatch
  std::uint64_t acknowledged = 0;  // acknowledged after their dispatch
  // Still undispatched when their route stopped (StopReceiving, Shutdown):
  // released unacknowledged, so the stream delivers them again.
  std::uint64_t withdrawn = 0;
  std::uint64_t pending = 0;  // filed and not yet acknowledged nor withdrawn
};

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
  // consumer's take acquires), so it never skips the lookup.
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
  // and not yet dispatched: a redelivery of it (the stream's ack wait ran
  // out first) is then neither acknowledged nor dispatched again.
  bool AwaitsDispatch(const void* route, std::uint64_t stream_sequence) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (in_hand_.message != nullptr && in_hand_.route == route &&
        in_hand_.stream_sequence == stream_sequence) {
      return true;
    }
    for (const auto& entry : pending_) {
      if (entry.second.route == route && entry.second.stream_sequence == stream_sequence) {
        return true;
      }
    }
    return false;
  }

  // Releases, unacknowledged, every message `route` filed that is not yet
  // acknowledged (its subscription is about to go): the stream delivers
  // them again to the durable's next reader. One dispatched after this is
  // not acknowledged.
  void Withdraw(const void* route) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto entry = pending_.begin(); entry != pending_.end();) {
      if (entry->second.route == route) {
        natsMsg_Destroy(entry->second.message);
        entry = pending_.erase(entry);
        Forget();
        ++counts_.withdrawn;
      } else {
        ++entry;
      }
    }
    if (in_hand_.message != nullptr && in_hand_.route == route) {
      natsMsg_Destroy(in_hand_.message);
      in_hand_ = Entry{};
      Forget();
      ++counts_.withdrawn;
    }
  }

  DispatchAckCounts Counts() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    DispatchAckCounts counts = counts_;
    counts.pending = pending_.size() + (in_hand_.message != nullptr ? 1 : 0);
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
      pending_.emplace(KeyOf(header), Entry{expectation->message, expectation->route,
                                            expectation->stream_sequence});
      expectation->filed = true;
      ++counts_.filed;
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // No memory for the entry: not filed, so the fetcher acknowledges it
      // now, as kOnAdmission would.
    }
#endif
  }

  // The consumer, just before a message's dispatch: the one it took before
  // (if ours) has been dispatched.
  void Taken(const MessageHeader& header) noexcept {
    // Relaxed: see AttemptPublish. 0 and nothing in hand: not ours.
    if (!holding_ && tracked_.load(std::memory_order_relaxed) == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    AcknowledgeInHand();
    const auto found = pending_.find(KeyOf(header));
    if (found == pending_.end()) return;
    in_hand_ = found->second;
    pending_.erase(found);
    holding_ = true;
  }

  // The consumer, after a batch's last message.
  void BatchEnded() noexcept {
    if (!holding_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    AcknowledgeInHand();
  }

 private:
  struct Entry {
    natsMsg* message = nullptr;
    const void* route = nullptr;
    std::uint64_t stream_sequence = 0;
  };

  // (lane, msg_id): unique per bus (MessageHeader).
  static std::uint64_t KeyOf(const MessageHeader& header) noexcept {
    return header.msg_id ^ (static_cast<std::uint64_t>(header.lane) << 48);
  }

  // Holding the mutex; the consumer's thread.
  void AcknowledgeInHand() noexcept {
    holding_ = false;
    if (in_hand_.message == nullptr) return;  // withdrawn meanwhile
    (void)natsMsg_Ack(in_hand_.message, nullptr);
    natsMsg_Destroy(in_hand_.message);
    in_hand_ = Entry{};
    Forget();
    ++counts_.acknowledged;
  }

  void Forget() noexcept { tracked_.fetch_sub(1, std::memory_order_relaxed); }

  // Guards everything below but holding_ (the consumer's own).
  mutable std::mutex mutex_;
  // Filed and not yet taken, by KeyOf.
  std::unordered_map<std::uint64_t, Entry> pending_;
  // Taken by the consumer; its dispatch runs now.
  Entry in_hand_;
  DispatchAckCounts counts_;
  // Publish attempts in flight, plus filed messages not yet acknowledged
  // nor withdrawn; changed under the mutex, read by the consumer without it.
  std::atomic<std::uint64_t> tracked_{0};
  // The consumer's: whether it may hold a message in hand.
  bool holding_ = false;
};

// The traits' Observer of a bus that receives JetStream routes with
// AckTiming::kOnDispatch; forwards every event to `Next` as well.
template <typename Next = NoObserver>
class AckOnDispatch : public Next {
 public:
  void OnAdmitted(const MessageHeader& header) noexcept {
    acks_.Admitted(header);
    Next::OnAdmitted(header);
  }
  void OnTaken(const MessageHeader& header) noexcept {
    acks_.Taken(header);
    Next::OnTaken(header);
  }
  void OnBatchEnd(std::uint32_t count) noexcept {
    acks_.BatchEnded();
    Next::OnBatchEnd(count);
  }
  DispatchAcks& DispatchAcknowledgements() noexcept { return acks_; }
  const DispatchAcks& DispatchAcknowledgements() const noexcept { return acks_; }

 private:
  DispatchAcks acks_;
};

namespace detail {

// The bus's DispatchAcks, when its Observer is an AckOnDispatch; else null.
template <typename Bus, typename = void>
struct DispatchAcksOf {
  static DispatchAcks* Get(Bus&) noexcept { return nullptr; }
};
template <typename Bus>
struct DispatchAcksOf<
    Bus, std::void_t<decltype(std::declval<Bus&>().GetObserver().DispatchAcknowledgements())>> {
  static DispatchAcks* Get(Bus& bus) noexcept {
    return &bus.GetObserver().DispatchAcknowledgements();
  }
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
