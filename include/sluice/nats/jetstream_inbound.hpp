// The NATS bridge's JetStream fetcher, for the subjects received at least
// once (ReceiveOptions::stream): a durable pull consumer per priority, read
// by a thread of the bridge's own that fetches only what the bus can admit
// at that priority, and acknowledges, hands back or terminates each message
// by what the receiver (sluice/nats/inbound.hpp) made of it: at once, or,
// for a route acknowledged after dispatch, through the bus's DispatchAcks
// (sluice/nats/dispatch_acks.hpp).
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/dispatch_acks.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/inbound.hpp"
#include "sluice/nats/inbound_streams.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/remote.hpp"
#include "sluice/nats/routes.hpp"
#include "sluice/nats/stream_state_file.hpp"
#include "sluice/nats/subjects.hpp"
#include "sluice/nats/subscriptions.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// A JetStream fetcher whose priority has no room waits for it this long at
// a time, then looks at its stop flag again (Shutdown waits for it).
inline constexpr std::chrono::milliseconds kFetchRoomSlice{10};

template <typename Bus>
class StreamFetcher {
 public:
  using Subscription = typename Receiver<Bus>::Subscription;

  // Each argument must outlive the fetcher.
  StreamFetcher(Bus& bus, const BridgeOptions& options, std::uint64_t origin_id, Counters& counters,
                const Connection& connection, typename Receiver<Bus>::Subscriptions& subscriptions,
                Receiver<Bus>& receiver)
      : bus_(bus),
        options_(options),
        origin_id_(origin_id),
        counters_(counters),
        connection_(connection),
        subscriptions_(subscriptions),
        receiver_(receiver) {}

  StreamFetcher(const StreamFetcher&) = delete;
  StreamFetcher& operator=(const StreamFetcher&) = delete;

  // A durable pull consumer for one priority of a JetStream route, read by
  // a thread of its own: it fetches only what the bus can admit at that
  // priority (FetchLoop). No completion callback: the thread is joined.
  natsStatus Subscribe(const InboundSubject& subject, std::unique_ptr<Subscription> inbound) {
    const std::string durable = DurableName(subject, inbound->priority);
    jsSubOptions sub_options;
    jsSubOptions_Init(&sub_options);
    sub_options.Stream = subject.stream.c_str();
    sub_options.Config.Durable = durable.c_str();
    sub_options.Config.AckPolicy = js_AckExplicit;
    sub_options.Config.AckWait = options_.jetstream_ack_wait.count() * 1'000'000;  // ns
    sub_options.Config.MaxAckPending = options_.jetstream_max_ack_pending;
    if (options_.jetstream_max_deliver > 0) {
      sub_options.Config.MaxDeliver = options_.jetstream_max_deliver;
    }
    jsErrCode error = static_cast<jsErrCode>(0);
    natsStatus status =
        js_PullSubscribe(&inbound->subscription, connection_.jetstream(), inbound->subject.c_str(),
                         durable.c_str(), nullptr, &sub_options, &error);
    if (status != NATS_OK) return status;
    // The limit the durable has (made now, or earlier with another one),
    // and where it is: how far it had delivered, to an earlier reader,
    // since this one fetches nothing before its thread starts, below.
    jsConsumerInfo* info = nullptr;
    std::string place_name;  // none: where the durable is is not known
    StreamStateFile::DurablePlace place;
    if (js_GetConsumerInfo(&info, connection_.jetstream(), subject.stream.c_str(), durable.c_str(),
                           nullptr, &error) == NATS_OK &&
        info != nullptr && info->Config != nullptr) {
      inbound->max_deliver = info->Config->MaxDeliver;
      inbound->delivered_before = info->Delivered.Stream;
      place_name = PlaceName(subject, inbound->priority);
      place.created = info->Created;
      place.delivered = info->Delivered.Consumer;
    } else {
      inbound->max_deliver = options_.jetstream_max_deliver;
    }
    if (info != nullptr) jsConsumerInfo_Destroy(info);
    inbound->durable_created = place.created;
    inbound->durable_entry = receiver_.Streams().TakeOver(inbound->subject, place_name, place);
    if (inbound->acks != nullptr) {
      receiver_.Streams().ReadDispatched(inbound->durable_entry, &inbound->dispatched_earlier);
      inbound->acks->SetDispatchedSink(&Receiver<Bus>::NoteDispatched, nullptr);
    }
    Subscription* added = subscriptions_.AddPull(std::move(inbound));
    // The subscription's fields are complete: thread creation orders them
    // before everything the thread does.
    added->fetcher = std::thread([this, added] { FetchLoop(*added); });
    return NATS_OK;
  }

  // The places in the state file of the durables of the JetStream subjects
  // in [first, last) are this receiver's (StreamStateFile::ClaimDurable):
  // before any of them is subscribed, so that a durable new to the file
  // takes the place of none of them.
  template <typename Iterator>
  void ClaimPlaces(Iterator first, Iterator last) {
    for (Iterator subject = first; subject != last; ++subject) {
      if (subject->stream.empty()) continue;
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        receiver_.Streams().ClaimDurable(PlaceName(*subject, static_cast<MessagePriority>(p)));
      }
    }
  }

  // Stops and joins the fetch threads (they use the bus and the
  // subscriptions, which outlive them).
  void StopAll() {
    const std::vector<Subscription*> pulls = subscriptions_.Pulls();
    for (Subscription* inbound : pulls) RequestStop(*inbound);
    for (Subscription* inbound : pulls) {
      StopFetcher(*inbound);  // joined; what awaited dispatch released
      // Destroyed now, not drained with the connection: the client deletes
      // the durable consumer after an explicit unsubscribe or drain, but not
      // on destruction (the durable and what it holds are the route's), and
      // a pull subscription's drain never completes, so the connection's
      // drain would wait out Shutdown's whole timeout.
      subscriptions_.DestroyPull(*inbound);
    }
  }

 private:
  void FetchLoop(Subscription& inbound) {
    const MessagePriority priority = inbound.priority;
    // nats.c before 3.8 writes past its buffer when a batched fetch is
    // answered in parts (nats.c pull request 749): one message a fetch
    // there, whatever jetstream_fetch_batch says.
    const int most =
        nats_GetVersionNumber() >= 0x030800 ? std::max(1, options_.jetstream_fetch_batch) : 1;
    // Woken by a stop, so that StopAll (Shutdown) does not wait out a long
    // reconnect_wait after an error.
    const auto pause = [&inbound](std::chrono::milliseconds wait) {
      (void)PauseUnlessStopped(inbound, sluice::detail::SaturatingNanos(wait));
    };
    // Acquire: pairs with the release store in StopAll (or StopFetcher).
    while (!inbound.stop.load(std::memory_order_acquire)) {
      // A closed bus admits nothing: what the stream holds stays there,
      // for the next consumer of the durable.
      if (bus_.IsClosed()) {
        pause(std::chrono::milliseconds(10));
        continue;
      }
      // As many as admission would take now (the bus's own figure); none:
      // wait for the consumer to make room, in slices so that StopAll is
      // seen.
      const std::size_t room = bus_.RoomFor(priority);
      if (room == 0) {
        (void)bus_.WaitForRoom(priority, kFetchRoomSlice);
        continue;
      }
      const int batch =
          static_cast<int>(std::min<std::size_t>(room, static_cast<std::size_t>(most)));
      natsMsgList list{};
      jsErrCode error = static_cast<jsErrCode>(0);
      const natsStatus status = natsSubscription_Fetch(&list, inbound.subscription, batch,
                                                       /*timeout ms=*/100, &error);
      if (status == NATS_TIMEOUT) continue;  // nothing waiting
      if (status != NATS_OK) {
        pause(std::chrono::milliseconds(
            options_.reconnect_wait.count() > 0 ? options_.reconnect_wait.count() : 10));
        continue;  // disconnected, or the server is not back yet
      }
      for (int i = 0; i < list.Count; ++i) {
        // One the bus's DispatchAcks now holds is no longer the list's.
        if (HandleStreamMessage(inbound, list.Msgs[i])) list.Msgs[i] = nullptr;
      }
      natsMsgList_Destroy(&list);
    }
  }

  // One message of a JetStream consumer: handled as a core frame, then
  // acknowledged when the bus admitted it or had admitted it before (a
  // redelivery), terminated when it can never be admitted (a bad frame:
  // the stream stops redelivering it), and handed back (a negative
  // acknowledgement, redelivered after a pause) when the bus refused it.
  // On a route acknowledged after dispatch (inbound.acks), an admitted
  // message goes to the bus's DispatchAcks instead, which acknowledges it
  // once dispatched: true, and the message is no longer the caller's (the
  // consumer may acknowledge and free it at any moment after its admission,
  // so nothing here reads it after Route).
  bool HandleStreamMessage(Subscription& inbound, natsMsg* message) noexcept {
    Count(counters_.frames_received);
    const int length = natsMsg_GetDataLength(message);
    const char* subject = natsMsg_GetSubject(message);
    FrameView view;
    FrameError error =
        DecodeFrame(reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message)),
                    length < 0 ? 0 : static_cast<std::size_t>(length), &view, options_.max_payload);
    std::uint64_t consumer_sequence = 0;
    const Arrival arrival = ArrivalOf(message, &consumer_sequence);
    // Delivered here: where the durable is now, for the next receiver of
    // the state file (InboundStreams::TakeOver), whatever becomes of it.
    if (consumer_sequence != 0) {
      receiver_.Streams().MarkDurable(
          inbound.durable_entry,
          StreamStateFile::DurablePlace{inbound.durable_created, consumer_sequence});
    }
    bool admitted = false;
    Expectation expectation;
    // Its signature first, as on core NATS (Receiver::CheckSignature).
    if (error == FrameError::kNone) {
      error = receiver_.CheckSignature(inbound, subject == nullptr ? std::string_view() : subject,
                                       view);
    }
    if (error == FrameError::kNone) {
      if (view.header.origin_id == origin_id_) {
        Count(counters_.echo_suppressed);
        (void)natsMsg_Ack(message, nullptr);
        return false;
      }
      // Whatever the server's delivery count says, below: a stream sequence
      // in the bus, or dispatched by an earlier receiver, was delivered
      // before. nats-server 2.9.10 can deliver a message again counted 1,
      // as new, when the pull request its redelivery was meant for expired
      // just before it went out (seen here under load); gated on a count
      // above 1, such a redelivery was acknowledged as a duplicate
      // while its first delivery still waited in the bus
      // (NatsDispatchAckTest.ARedeliveryOfAMessageStillInTheBusIsNotAcknowledged,
      // under load: one acknowledgement on the wire in 0.7 % of runs).
      if (inbound.acks != nullptr && arrival.stream_sequence != 0 &&
          inbound.acks->AwaitsDispatch(&inbound, arrival.stream_sequence)) {
        // A redelivery of a message still in the bus (the stream's ack
        // wait ran out first), whatever its number: neither admitted again
        // nor acknowledged; the first delivery's acknowledgement, after its
        // dispatch, stands for both.
        (void)natsMsg_InProgress(message, nullptr);
        Count(counters_.rejected[static_cast<std::size_t>(FrameError::kDuplicate)]);
        receiver_.Report(FrameError::kDuplicate, inbound.subject);
        return false;
      }
      if (arrival.stream_sequence != 0 &&
          inbound.dispatched_earlier.count(arrival.stream_sequence) != 0) {
        // Dispatched by a receiver of the state file before this one, whose
        // acknowledgement never reached the stream: acknowledged now, not
        // dispatched again.
        (void)natsMsg_Ack(message, nullptr);
        Count(counters_.rejected[static_cast<std::size_t>(FrameError::kDuplicate)]);
        receiver_.Report(FrameError::kDuplicate, inbound.subject);
        return false;
      }
      if (inbound.acks == nullptr) {
        error = receiver_.Route(inbound, subject == nullptr ? std::string_view() : subject, view,
                                &admitted, arrival);
      } else {
        expectation.acks = inbound.acks;
        expectation.message = message;
        expectation.route = &inbound;
        expectation.stream_sequence = arrival.stream_sequence;
        error = RouteAwaitingDispatch(inbound, subject, view, arrival, expectation, &admitted);
      }
    }
    if (error == FrameError::kNone) {
      if (admitted) {
        if (expectation.filed) return true;
        (void)natsMsg_Ack(message, nullptr);
      } else if (IsLastDelivery(inbound, arrival)) {
        // The stream would not deliver it again: a drop, said to the
        // stream as such.
        Count(counters_.jetstream_gave_up[static_cast<std::size_t>(inbound.priority)]);
        (void)natsMsg_Term(message, nullptr);
      } else {
        Count(counters_.handed_back[static_cast<std::size_t>(inbound.priority)]);
        (void)natsMsg_NakWithDelay(
            message, options_.reconnect_wait.count() > 0 ? options_.reconnect_wait.count() : 100,
            nullptr);
      }
      return false;
    }
    Count(counters_.rejected[static_cast<std::size_t>(error)]);
    // Admitted before (a redelivery; one still in the bus was caught
    // above): acknowledged. No room in the stream table, or too far ahead
    // of a stream holding all it may: handed back, it may fit later (on its
    // last delivery: given up, a drop). Anything else refused would be
    // refused again: terminated.
    const bool may_fit_later =
        error == FrameError::kStreamTableFull || error == FrameError::kTooFarAhead;
    if (error == FrameError::kDuplicate) {
      (void)natsMsg_Ack(message, nullptr);
    } else if (may_fit_later && !IsLastDelivery(inbound, arrival)) {
      (void)natsMsg_NakWithDelay(
          message, options_.reconnect_wait.count() > 0 ? options_.reconnect_wait.count() : 100,
          nullptr);
    } else if (may_fit_later) {
      Count(counters_.jetstream_gave_up[static_cast<std::size_t>(inbound.priority)]);
      (void)natsMsg_Term(message, nullptr);
    } else {
      (void)natsMsg_Term(message, nullptr);
    }
    receiver_.Report(error, inbound.subject);
    return false;
  }

  // Route, for a message acknowledged after dispatch: the subject is
  // copied (Route reads it after the publish, when the message may be
  // gone), and the thread's expectation set for the receiver's publish.
  FrameError RouteAwaitingDispatch(Subscription& inbound, const char* subject,
                                   const FrameView& view, const Arrival& arrival,
                                   Expectation& expectation, bool* admitted) noexcept {
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      const std::string subject_copy = subject == nullptr ? std::string() : std::string(subject);
      const AwaitingDispatch awaiting(&expectation);
      return receiver_.Route(inbound, subject_copy, view, admitted, arrival);
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // No memory for the subject's copy: handed back, delivered again.
      *admitted = false;
      return FrameError::kNone;
    }
#endif
  }

  // The durable consumer of `subject`'s priority `priority`, and its name
  // in the state file.
  static std::string DurableName(const InboundSubject& subject, MessagePriority priority) {
    return subject.durable + "_" +
           std::string(kPrioritySubjects[static_cast<std::size_t>(priority)]);
  }
  static std::string PlaceName(const InboundSubject& subject, MessagePriority priority) {
    return subject.stream + "/" + DurableName(subject, priority);
  }

  // Whether the stream would not deliver a message again after this
  // delivery: the durable's own limit, read when it was subscribed (a
  // durable keeps the limit it was made with, whatever
  // jetstream_max_deliver says now).
  static bool IsLastDelivery(const Subscription& inbound, const Arrival& arrival) noexcept {
    return inbound.max_deliver > 0 &&
           arrival.deliveries >= static_cast<std::uint64_t>(inbound.max_deliver);
  }

  // The stream's sequence and delivery count of `message` (its reply
  // subject's metadata), and its consumer sequence; 0 when the client
  // cannot read them.
  static Arrival ArrivalOf(natsMsg* message, std::uint64_t* consumer_sequence) noexcept {
    jsMsgMetaData* meta = nullptr;
    Arrival arrival;
    if (natsMsg_GetMetaData(&meta, message) == NATS_OK && meta != nullptr) {
      arrival.stream_sequence = meta->Sequence.Stream;
      arrival.deliveries = meta->NumDelivered;
      *consumer_sequence = meta->Sequence.Consumer;
    }
    if (meta != nullptr) jsMsgMetaData_Destroy(meta);
    return arrival;
  }

  Bus& bus_;
  const BridgeOptions& options_;
  const std::uint64_t origin_id_;
  Counters& counters_;
  const Connection& connection_;
  typename Receiver<Bus>::Subscriptions& subscriptions_;
  Receiver<Bus>& receiver_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
