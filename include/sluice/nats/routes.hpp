// The NATS bridge's route table: the forwarded types (outbound routes, their
// subjects and the numbers each subject's frames carry) and the received
// subjects (inbound, with the type ids given for each), under the mutex
// that serialises every call changing them. It decides what Forward,
// Receive and the Stop calls accept; the parts that send and receive
// (sluice/nats/outbound.hpp, inbound.hpp) act on what it holds.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/remote.hpp"
#include "sluice/nats/subjects.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// A forwarded subject's streams, one per priority, shared by the subject's
// routes: the numbers given, and what the heartbeats (sluice/nats/heartbeat.hpp)
// read of them.
struct SubjectSequence {
  // The subject with each priority's suffix.
  std::array<std::string, kPriorityCount> subjects;
  // The last number given a frame: consumer thread only.
  std::array<std::uint64_t, kPriorityCount> given{};
  // The last number handed to the client over core NATS, and when (the
  // steady clock's nanoseconds): stored by the consumer thread once that
  // publish returned (release), read by the heartbeat thread (acquire),
  // so a heartbeat never names a frame still to be handed over.
  std::array<std::atomic<std::uint64_t>, kPriorityCount> sent{};
  std::array<std::atomic<std::int64_t>, kPriorityCount> sent_at_ns{};

  std::uint64_t& operator[](std::size_t p) noexcept { return given[p]; }
  // Numbers from 1 again (a new instance). Before any frame of it is sent.
  void Restart() noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      given[p] = 0;
      sent[p].store(0, std::memory_order_relaxed);
      sent_at_ns[p].store(0, std::memory_order_relaxed);
    }
  }
};

// One forwarded type; `Sender` is the part whose bus callback sends it.
template <typename Sender>
struct OutboundRoute {
  std::size_t variant_index = 0;
  std::uint16_t type_id = 0;
  std::array<std::string, kPriorityCount> subjects;
  bool jetstream = false;  // ForwardOptions::jetstream
  // The last number sent per priority on the route's subject since Start,
  // shared with the subject's other routes: consumer thread only.
  std::shared_ptr<SubjectSequence> sequence;
  std::string buffer;  // the frame being built: consumer thread only
  SubscriptionHandle handle;
  SubscriptionHandle (*subscribe)(Sender&, OutboundRoute&) = nullptr;
};

// A type id received, the type it arrives as and how; `Receiver` is the
// part that delivers it into the bus.
template <typename Receiver>
struct InboundType {
  using DeliverFunction = FrameError (*)(Receiver&, const FrameView&, const Arrival&, bool, bool*);

  std::uint16_t type_id;
  std::size_t variant_index;
  DeliverFunction deliver;  // Deliver<T, Codec>: one codec per id
};

// An inbound subject (a pattern with "*" tokens allowed), the type ids
// given for it and its queue group.
struct InboundSubject {
  std::string subject;
  std::vector<std::uint16_t> type_ids;
  std::string queue_group;
  std::string stream;  // JetStream: the stream, and the consumers' durable prefix
  std::string durable;
  AckTiming ack = AckTiming::kOnAdmission;  // JetStream: when a message is acknowledged
  bool shared_durable = false;              // JetStream: other bridges read the durables too
  bool require_signed = false;              // only frames a key verifies
};

template <typename Sender, typename Receiver>
class RouteTable {
 public:
  using Outbound = OutboundRoute<Sender>;
  using Type = InboundType<Receiver>;
  using SubscribeFunction = SubscriptionHandle (*)(Sender&, Outbound&);
  using DeliverFunction = typename Type::DeliverFunction;

  // What AddInbound did.
  enum class Added : std::uint8_t {
    kRefused,     // nothing: the call returns false
    kKnown,       // the subject and type id were there, or the id was added to the subject
    kNewSubject,  // a new subject, last in inbound_subjects(): to be subscribed when running
  };

  // Serialises the calls that change routes (Forward, Receive, the Stop
  // calls, Start, Shutdown); the client's threads never take it. Every
  // call below is made holding it.
  std::unique_lock<std::mutex> Lock() const { return std::unique_lock<std::mutex>(mutex_); }

  // Start has succeeded: routes added now are subscribed at once.
  bool started() const noexcept { return started_; }
  void set_started() noexcept { started_ = true; }
  // Shutdown has begun: no route is added any more.
  void set_stopping() noexcept { stopping_ = true; }

  // ---- Outbound -------------------------------------------------------------

  // Forward: false for type id 0, a subject that is not IsLiteralSubject, a
  // type already forwarded, after Shutdown has begun, or (when running)
  // when `subscribe` fails.
  bool AddOutbound(Sender& sender, std::size_t variant_index, const std::string& subject,
                   std::uint16_t type_id, ForwardOptions options, SubscribeFunction subscribe) {
    if (stopping_ || type_id == 0 || !IsLiteralSubject(subject)) return false;
    for (const auto& route : outbound_) {
      if (route->variant_index == variant_index) return false;
    }
    auto route = std::make_unique<Outbound>();
    route->variant_index = variant_index;
    route->type_id = type_id;
    route->jetstream = options.jetstream;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      route->subjects[p] = SubjectFor(subject, static_cast<MessagePriority>(p));
    }
    route->subscribe = subscribe;
    // Routes of one subject share its numbers, also with a route of it
    // stopped earlier: the receiver tracks a stream per subject, whatever
    // types travel on it, and a number used twice would be a duplicate.
    {
      const std::lock_guard<std::mutex> hold(sequences_mutex_);
      auto& sequence = subject_sequences_[subject];
      if (!sequence) {
        sequence = std::make_shared<SubjectSequence>();
        sequence->subjects = route->subjects;
      }
      route->sequence = sequence;
    }
    if (started_) {
      // Running: forwarding starts now. The route is complete before the
      // bus subscription publishes it to the consumer thread.
      route->handle = route->subscribe(sender, *route);
      if (!route->handle.IsValid()) return false;  // the bus's table for T is full
    }
    outbound_.push_back(std::move(route));
    return true;
  }

  // Subscribes every route to the bus (Start), in order; false at the first
  // the bus refuses (its subscription table for the type is full).
  bool SubscribeOutbound(Sender& sender) {
    for (const auto& route : outbound_) {
      route->handle = route->subscribe(sender, *route);
      if (!route->handle.IsValid()) return false;
    }
    return true;
  }

  // StopForwarding: the route's bus subscription, to be unsubscribed
  // without the table's mutex; none when the type is not forwarded. The
  // route is kept until the bridge goes: a callback of it may still be
  // running when this is called from inside the bus's dispatch.
  std::optional<SubscriptionHandle> RetireOutbound(std::size_t variant_index) {
    const auto found = std::find_if(outbound_.begin(), outbound_.end(), [&](const auto& route) {
      return route->variant_index == variant_index;
    });
    if (found == outbound_.end()) return std::nullopt;
    std::unique_ptr<Outbound> route = std::move(*found);
    outbound_.erase(found);
    const SubscriptionHandle handle = route->handle;
    retired_outbound_.push_back(std::move(route));
    return handle;
  }

  // Every route's bus subscription, each route left without one.
  std::vector<SubscriptionHandle> TakeOutboundHandles() {
    std::vector<SubscriptionHandle> handles;
    for (const auto& route : outbound_) {
      handles.push_back(route->handle);
      route->handle = SubscriptionHandle();
    }
    return handles;
  }

  // A new stream on every subject: numbers from 1 again. Before the bus
  // subscriptions whose dispatch reads them (Subscribe's release pairs with
  // the consumer's acquire of the table).
  void RestartSequences() {
    const std::lock_guard<std::mutex> hold(sequences_mutex_);
    for (const auto& entry : subject_sequences_) entry.second->Restart();
  }

  // Every forwarded subject's streams, for the heartbeat thread, which
  // takes only this table's own lock (never the routes' mutex, which
  // Release holds while it stops that thread).
  std::vector<std::shared_ptr<SubjectSequence>> SubjectSequences() const {
    const std::lock_guard<std::mutex> hold(sequences_mutex_);
    std::vector<std::shared_ptr<SubjectSequence>> all;
    all.reserve(subject_sequences_.size());
    for (const auto& entry : subject_sequences_) all.push_back(entry.second);
    return all;
  }

  const std::vector<std::unique_ptr<Outbound>>& outbound() const noexcept { return outbound_; }

  // ---- Inbound --------------------------------------------------------------

  // Receive: see Bridge::Receive for what is refused.
  Added AddInbound(std::string subject, std::uint16_t type_id, ReceiveOptions route,
                   std::size_t variant_index, DeliverFunction deliver) {
    if (stopping_ || type_id == 0 || !IsReceiveSubject(subject) || !IsValidRoute(route)) {
      return Added::kRefused;
    }
    bool known_type = false;
    for (const Type& type : inbound_types_) {
      if (type.type_id != type_id) continue;
      // One type and one codec per id: a second codec would never be used.
      if (type.variant_index != variant_index || type.deliver != deliver) return Added::kRefused;
      known_type = true;
    }
    for (InboundSubject& known : inbound_subjects_) {
      if (known.subject != subject) {
        // Two subjects one frame could match would hand it to two
        // subscriptions: refused.
        if (SubjectsOverlap(known.subject, subject)) return Added::kRefused;
        continue;
      }
      if (known.queue_group != route.queue_group || known.stream != route.stream ||
          known.durable != route.durable || known.ack != route.ack ||
          known.shared_durable != route.shared_durable ||
          known.require_signed != route.require_signed) {
        return Added::kRefused;
      }
      const bool has_type =
          std::find(known.type_ids.begin(), known.type_ids.end(), type_id) != known.type_ids.end();
      if (has_type) return Added::kKnown;
      // A running subscription's types are fixed: StopReceiving, then
      // Receive again with every type.
      if (started_) return Added::kRefused;
      if (!known_type) inbound_types_.push_back({type_id, variant_index, deliver});
      known.type_ids.push_back(type_id);
      return Added::kKnown;
    }
    if (!known_type) inbound_types_.push_back({type_id, variant_index, deliver});
    inbound_subjects_.push_back({std::move(subject),
                                 {type_id},
                                 std::move(route.queue_group),
                                 std::move(route.stream),
                                 std::move(route.durable),
                                 route.ack,
                                 route.shared_durable,
                                 route.require_signed});
    return Added::kNewSubject;
  }

  // StopReceiving, or a Receive whose subscription failed: the subject goes,
  // and the type ids no other subject uses are free again. False for a
  // subject not received.
  bool RemoveInbound(const std::string& subject) {
    const auto found = std::find_if(inbound_subjects_.begin(), inbound_subjects_.end(),
                                    [&](const InboundSubject& s) { return s.subject == subject; });
    if (found == inbound_subjects_.end()) return false;
    inbound_subjects_.erase(found);
    inbound_types_.erase(
        std::remove_if(inbound_types_.begin(), inbound_types_.end(),
                       [&](const Type& type) { return !IsTypeReceived(type.type_id); }),
        inbound_types_.end());
    return true;
  }

  const std::vector<InboundSubject>& inbound_subjects() const noexcept { return inbound_subjects_; }

  // The types `subject` carries, in its type ids' order.
  std::vector<Type> TypesOf(const InboundSubject& subject) const {
    std::vector<Type> types;
    for (const std::uint16_t id : subject.type_ids) {
      for (const Type& type : inbound_types_) {
        if (type.type_id == id) types.push_back(type);
      }
    }
    return types;
  }

 private:
  bool IsTypeReceived(std::uint16_t type_id) const {
    return std::any_of(
        inbound_subjects_.begin(), inbound_subjects_.end(), [&](const InboundSubject& s) {
          return std::find(s.type_ids.begin(), s.type_ids.end(), type_id) != s.type_ids.end();
        });
  }

  mutable std::mutex mutex_;
  bool started_ = false;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Outbound>> outbound_;
  std::vector<std::unique_ptr<Outbound>> retired_outbound_;  // RetireOutbound
  // Each forwarded subject's numbers since Start, kept after its routes
  // stop. Changed under mutex_ and sequences_mutex_ (in that order), read
  // under either.
  mutable std::mutex sequences_mutex_;
  std::map<std::string, std::shared_ptr<SubjectSequence>> subject_sequences_;
  std::vector<Type> inbound_types_;
  std::vector<InboundSubject> inbound_subjects_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
