// The NATS bridge's receiver: a frame from NATS, decoded and judged (its
// origin, the priority it came on, its trust, its place in its stream,
// its type), then decoded into its type and published into the bus with
// its priority, waiting for room as the options allow. Core NATS frames
// come on the client's threads (OnMessage); JetStream ones through the
// fetcher (sluice/nats/jetstream_inbound.hpp), which uses Route and Report.
// A frame's place in its stream, and the stream state file, are the
// receiver's streams' (sluice/nats/inbound_streams.hpp).
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/dispatch_acks.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/frame_signature.hpp"
#include "sluice/nats/heartbeat.hpp"
#include "sluice/nats/inbound_streams.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/remote.hpp"
#include "sluice/nats/stream_tracker.hpp"
#include "sluice/nats/subjects.hpp"
#include "sluice/nats/subscriptions.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

template <typename Bus>
class Receiver {
 public:
  using Subscription = InboundSubscription<Receiver>;
  using Subscriptions = SubscriptionSet<Receiver>;

  // Each argument must outlive the receiver.
  Receiver(Bus& bus, const BridgeOptions& options, std::uint64_t origin_id, Counters& counters,
           const Connection& connection, Subscriptions& subscriptions)
      : bus_(bus),
        options_(options),
        origin_id_(origin_id),
        counters_(counters),
        connection_(connection),
        subscriptions_(subscriptions),
        streams_(options, counters),
        verifier_(options.frame_keys) {}

  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // One priority of a received subject, its types given: ready for the
  // core subscription (Subscribe) or the fetcher's pull subscription.
  std::unique_ptr<Subscription> MakeSubscription(const InboundSubject& subject,
                                                 std::vector<InboundType<Receiver>> types,
                                                 MessagePriority priority) {
    auto inbound = std::make_unique<Subscription>();
    inbound->receiver = this;
    inbound->set = &subscriptions_;
    inbound->priority = priority;
    inbound->subject = SubjectFor(subject.subject, priority);
    inbound->route_subject = subject.subject;
    // A member of a queue group, or one of the bridges sharing a durable
    // consumer, sees part of each stream: no gaps counted. A JetStream
    // route read alone counts what the stream lost before it was fetched.
    inbound->count_gaps = subject.queue_group.empty() && !subject.shared_durable;
    inbound->require_signed = subject.require_signed;
    inbound->types = std::move(types);
    if (subject.ack == AckTiming::kOnDispatch) inbound->acks = DispatchAcksOf(bus_);
    return inbound;
  }

  // The core subscription of `inbound` (on `queue_group` unless empty).
  // What the handler reads (the subscription's own types, the options) is
  // complete and never written again: the client starts the
  // subscription's thread inside this call (thread creation orders these
  // writes before everything the thread does).
  natsStatus Subscribe(std::unique_ptr<Subscription> inbound, const std::string& queue_group) {
    natsStatus status =
        queue_group.empty()
            ? natsConnection_Subscribe(&inbound->subscription, connection_.get(),
                                       inbound->subject.c_str(), &OnMessage, inbound.get())
            : natsConnection_QueueSubscribe(&inbound->subscription, connection_.get(),
                                            inbound->subject.c_str(), queue_group.c_str(),
                                            &OnMessage, inbound.get());
    if (status != NATS_OK) return status;
    Subscription* added = subscriptions_.AddCore(std::move(inbound));
    status = subscriptions_.WatchCompletion(added);
    if (status == NATS_OK) {
      status = natsSubscription_SetPendingLimits(
          added->subscription, options_.pending_messages_limit, options_.pending_bytes_limit);
    }
    return status;
  }

  // Never throws: user code it calls (a codec, on_reject) is caught here,
  // since an exception must not leave the client's thread.
  void HandleFrame(const Subscription& inbound, std::string_view subject, const std::uint8_t* data,
                   std::size_t size) noexcept {
    Count(counters_.frames_received);
    FrameView view;
    FrameError error = DecodeFrame(data, size, &view, options_.max_payload);
    // Its signature first: nothing a forged frame claims (its origin
    // included) is looked at before.
    if (error == FrameError::kNone) error = CheckSignature(inbound, subject, view);
    if (error == FrameError::kNone) {
      if (view.header.origin_id == origin_id_) {
        Count(counters_.echo_suppressed);
        return;
      }
      error = Route(inbound, subject, view, nullptr);
    }
    if (error == FrameError::kNone) return;
    Count(counters_.rejected[static_cast<std::size_t>(error)]);
    Report(error, inbound.subject);
  }

  // A decoded frame to its type's Deliver, if the subscription carries it,
  // its origin may send at its priority, and it is new on its stream.
  // `admitted` null: core NATS (the stream is noted before delivery, a
  // refusal by the bus is a counted drop). Not null: a JetStream message
  // (noted only once admitted, a refusal is handed back: *admitted false),
  // which arrived as `arrival` says.
  FrameError Route(const Subscription& inbound, std::string_view subject, const FrameView& view,
                   bool* admitted, const Arrival& arrival = Arrival{}) noexcept {
    // Each priority has its own subscription, queue and thread: a frame on
    // another priority's subject would take the wrong one.
    if (view.header.priority != inbound.priority) return FrameError::kPriorityMismatch;
    // Nor another priority's subject than it came on: a server (or a relay)
    // may deliver a frame on a subject its subscription did not name.
    std::size_t named = 0;
    if (detail::NamesPriority(subject, &named) &&
        named != static_cast<std::size_t>(view.header.priority)) {
      return FrameError::kPriorityMismatch;
    }
    const auto& allowed = options_.allowed_origins[static_cast<std::size_t>(inbound.priority)];
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), view.header.origin_id) == allowed.end()) {
      return FrameError::kOriginNotAllowed;
    }
    const bool at_least_once = admitted != nullptr;
    // A heartbeat comes over core NATS only. On a JetStream route (a
    // stream that stores a core route's subjects) it is refused as an
    // unknown type before its number is looked at: it carries its stream's
    // last number, which is no frame of its own.
    if (view.header.type_id == kHeartbeatTypeId) {
      return at_least_once ? FrameError::kUnknownType : HandleHeartbeat(inbound, subject, view);
    }
    // The frame is judged on its stream before its type and payload: a frame
    // that arrived is never a gap, whatever is refused after this.
    // A JetStream message is judged now and noted only once admitted (or
    // refused for good): one handed back comes again as new. One behind the
    // duplicate check's window is admitted (at least once): it may never
    // have been admitted, having been handed back (here, or by another
    // bridge on the durable) while the stream moved on, and the stream
    // redelivers only what was not acknowledged.
    bool behind_window = false;
    const FrameDelivery delivery = DeliveryOf(inbound, arrival, at_least_once);
    const FrameError sequence_error =
        streams_.CheckSequence(subject, view.header, inbound.count_gaps, /*note=*/!at_least_once,
                               at_least_once ? &behind_window : nullptr, delivery);
    if (sequence_error != FrameError::kNone) return sequence_error;
    const std::uint16_t id = view.header.type_id;
    const auto type =
        std::find_if(inbound.types.begin(), inbound.types.end(),
                     [id](const InboundType<Receiver>& t) { return t.type_id == id; });
    if (type == inbound.types.end()) {
      if (at_least_once && !behind_window) {
        (void)streams_.CheckSequence(subject, view.header, inbound.count_gaps, true, nullptr,
                                     delivery);
      }
      return FrameError::kUnknownType;  // not given for this subject
    }
    bool was_admitted = false;
    FrameError result = FrameError::kNone;
    {
#if SLUICE_HAS_EXCEPTIONS
      try {
        result = type->deliver(*this, view, arrival, at_least_once, &was_admitted);
      } catch (...) {
        result = FrameError::kDecodeThrew;
      }
#else
      result = type->deliver(*this, view, arrival, at_least_once, &was_admitted);
#endif
    }
    if (at_least_once) {
      *admitted = was_admitted;
      // Noted now that it was admitted (its redelivery is then a
      // duplicate) or refused for good; one handed back is not noted.
      if (result != FrameError::kNone || was_admitted) {
        if (!behind_window) {
          (void)streams_.CheckSequence(subject, view.header, inbound.count_gaps, /*note=*/true,
                                       nullptr, delivery);
        } else if (was_admitted) {
          Count(counters_.jetstream_behind_window);
        }
      }
    }
    return result;
  }

  void Report(FrameError error, std::string_view subject) noexcept {
    if (!options_.on_reject) return;
#if SLUICE_HAS_EXCEPTIONS
    try {
      options_.on_reject(error, subject);
    } catch (...) {
      Count(counters_.on_reject_threw);
    }
#else
    options_.on_reject(error, subject);
#endif
  }

  // Deliver<T, Codec>: an InboundType's deliver function.
  template <typename T, typename Codec>
  static FrameError Deliver(Receiver& receiver, const FrameView& view, const Arrival& arrival,
                            bool hand_back, bool* admitted) {
    std::optional<WireType<T>> value = Codec::Decode(view.payload, view.payload_size);
    if (!value) return FrameError::kBadPayload;
    if constexpr (IsRemote<T>::value) {
      const FrameHeader& frame = view.header;
      Provenance provenance;
      provenance.origin_id = frame.origin_id;
      provenance.instance_id = frame.instance_id;
      provenance.sequence = frame.sequence;
      provenance.msg_id = frame.msg_id;
      provenance.timestamp_ns = frame.timestamp_ns;
      provenance.sender_id = frame.sender_id;
      provenance.type_id = frame.type_id;
      provenance.priority = frame.priority;
      provenance.stream_sequence = arrival.stream_sequence;
      provenance.deliveries = arrival.deliveries;
      provenance.verified = view.signature.verified;
      T message{std::move(*value), provenance};
      *admitted = receiver.Admit(message, frame, hand_back);
    } else {
      *admitted = receiver.Admit(*value, view.header, hand_back);
    }
    return FrameError::kNone;
  }

  // The streams of the frames received, their state file and the durables'
  // places in it (sluice/nats/inbound_streams.hpp).
  InboundStreams& Streams() noexcept { return streams_; }
  const InboundStreams& Streams() const noexcept { return streams_; }

  // DispatchAcks::DispatchedSink: a message of `route` (a Subscription) was
  // dispatched; kept in the state file of the route's own receiver (a bus
  // may carry several bridges' routes) before it is acknowledged
  // (InboundStreams::NoteDispatched). On the consumer's thread; the route
  // lives while DispatchAcks holds its message (it withdraws them before
  // the route goes).
  static void NoteDispatched(void* /*unused*/, const void* route,
                             std::uint64_t stream_sequence) noexcept {
    const auto* inbound = static_cast<const Subscription*>(route);
    Receiver* receiver = inbound->receiver;
    receiver->streams_.NoteDispatched(inbound->durable_entry, stream_sequence);
  }

  // A signed frame is checked whatever its route: refused when a key of
  // its origin and key id gives another MAC for it on `subject`. On a route
  // that takes signed frames only, a frame no key verifies is refused too.
  // Before anything else of a decoded frame (its origin's echo check
  // included), by the core handler and the JetStream fetcher.
  // A frame a key verified is marked so (view.signature.verified: what
  // Provenance::verified says).
  FrameError CheckSignature(const Subscription& inbound, std::string_view subject,
                            FrameView& view) const noexcept {
    view.signature.verified = false;
    if (!view.signature.present) {
      return inbound.require_signed ? FrameError::kUnsigned : FrameError::kNone;
    }
    switch (verifier_.Check(view, subject)) {
      case FrameVerifier::Verdict::kVerified:
        view.signature.verified = true;
        return FrameError::kNone;
      case FrameVerifier::Verdict::kNoKey:
        return inbound.require_signed ? FrameError::kBadSignature : FrameError::kNone;
      case FrameVerifier::Verdict::kMismatch:
        break;
    }
    return FrameError::kBadSignature;
  }

 private:
  static void OnMessage(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    auto* inbound = static_cast<Subscription*>(closure);
    const int length = natsMsg_GetDataLength(message);
    const char* subject = natsMsg_GetSubject(message);
    inbound->receiver->HandleFrame(*inbound, subject == nullptr ? std::string_view() : subject,
                                   reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message)),
                                   length < 0 ? 0 : static_cast<std::size_t>(length));
    natsMsg_Destroy(message);
  }

  // A heartbeat (sluice/nats/heartbeat.hpp): the numbers its stream sent
  // and this receiver did not get are counted as gaps; nothing reaches the
  // bus. Its payload is its interval (4 bytes).
  FrameError HandleHeartbeat(const Subscription& inbound, std::string_view subject,
                             const FrameView& view) noexcept {
    if (view.payload_size != kHeartbeatPayloadSize) return FrameError::kBadPayload;
    const FrameHeader& header = view.header;
    if (header.version == kFrameVersion1 || header.sequence == 0) {
      return FrameError::kUnsequenced;
    }
    // 1 to 2^32 - 1 milliseconds: in nanoseconds, far from overflowing.
    const std::uint64_t interval_ms = LoadLittle<std::uint32_t>(view.payload);
    if (interval_ms == 0) return FrameError::kBadPayload;  // no sender sends 0
    const std::uint64_t interval_ns = interval_ms * 1'000'000;
    const HeartbeatVerdict verdict =
        streams_.NoteHeartbeat(header, subject, interval_ns, inbound.count_gaps);
    // A heartbeat stamped no later than its stream's last: a replay.
    if (verdict == HeartbeatVerdict::kReplay) return FrameError::kDuplicate;
    Count(counters_.heartbeats_received);
    return FrameError::kNone;
  }

  // A JetStream message numbered at or below the last one its durable had
  // delivered when this bridge subscribed was delivered to an earlier
  // reader first (StreamFetcher::Subscribe).
  static FrameDelivery DeliveryOf(const Subscription& inbound, const Arrival& arrival,
                                  bool at_least_once) noexcept {
    if (!at_least_once) return FrameDelivery::kCore;
    return arrival.stream_sequence != 0 && arrival.stream_sequence <= inbound.delivered_before
               ? FrameDelivery::kJetStreamEarlier
               : FrameDelivery::kJetStream;
  }

  // Publishes into the bus with the frame's priority. A refusal for room is
  // retried, waiting on the bus's room for the priority, until the
  // priority's admission_wait has passed. The tries before the last are
  // PublishAttempt, which the bus does not count: a message admitted after
  // waiting is not a drop anywhere (it is counted in admitted_after_wait).
  // The last try is a PublishWithPriority: a message lost is counted once
  // by the bus (messages_dropped or refused_closed) and once here
  // (bus_dropped).
  //
  // `hand_back` (a JetStream message): every try is a PublishAttempt, and a
  // message still refused is not a drop: false, and the stream redelivers.
  template <typename T>
  bool Admit(T& message, const FrameHeader& header, bool hand_back) {
    const auto p = static_cast<std::size_t>(header.priority);
    const std::uint32_t sender = header.sender_id | options_.remote_sender_flag;
    const auto wait = options_.admission_wait[p];
    if (wait.count() > 0 || hand_back) {
      if (Attempt(message, sender, header.priority)) {
        Count(counters_.delivered[p]);
        return true;
      }
      // Waits on the bus's own room (WaitForRoom: the consumer's batch that
      // makes room wakes it with a parker), then tries again; another
      // producer may take the room first.
      const sluice::detail::Deadline deadline(sluice::detail::SaturatingNanos(wait));
      for (;;) {
        const std::chrono::nanoseconds left = deadline.Left();
        if (left.count() == 0) break;
        if (!bus_.WaitForRoom(header.priority, left)) break;  // timed out, or closed
        if (Attempt(message, sender, header.priority)) {
          Count(counters_.delivered[p]);
          Count(counters_.admitted_after_wait[p]);
          return true;
        }
      }
    }
    if (hand_back) return false;
    if (bus_.PublishWithPriority(message, sender, header.priority)) {
      Count(counters_.delivered[p]);
      if (wait.count() > 0) Count(counters_.admitted_after_wait[p]);
      return true;
    }
    Count(counters_.bus_dropped[p]);
    return false;
  }

  // One PublishAttempt. A JetStream message acknowledged after dispatch
  // (the fetcher's thread has an Expectation) is published through its
  // DispatchAcks, which files it under the bus message it became.
  template <typename T>
  bool Attempt(T& message, std::uint32_t sender, MessagePriority priority) {
    Expectation* expectation = tls_expectation;
    if (expectation == nullptr) {
      return static_cast<bool>(bus_.PublishAttempt(message, sender, priority));
    }
    return expectation->acks->AttemptPublish(*expectation, [&] {
      return static_cast<bool>(bus_.PublishAttempt(message, sender, priority));
    });
  }

  Bus& bus_;
  const BridgeOptions& options_;
  const std::uint64_t origin_id_;
  Counters& counters_;
  const Connection& connection_;
  Subscriptions& subscriptions_;
  // The inbound streams, shared by the client's threads and the fetchers.
  InboundStreams streams_;
  // The keys of signed frames: made here, read only after.
  const FrameVerifier verifier_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
