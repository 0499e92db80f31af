// A bridge between one Sluice bus and a NATS server, through the NATS C
// client (nats.c, found through pkg-config's libnats; link the CMake target
// sluice::nats, not the client's own cnats::nats: docs/nats.md, Building).
// The core headers do not include this one and stay free of dependencies.
//
//   sluice::MpscBus<Payload, 4096> bus;
//   sluice::nats::Bridge<decltype(bus)> bridge(bus, options);
//   if (!bridge.Forward<SensorData>("plant.sensor", 1)) ...    // local -> NATS
//   if (!bridge.Receive<EmergencyStop>("plant.stop", 2)) ...   // NATS -> local
//   if (bridge.Start() != NATS_OK) ...
//   ... the consumer thread dispatches as usual (ProcessBatch*) ...
//   bridge.Shutdown(std::chrono::seconds(5));                  // before the bus goes
//
// Outbound: the bridge subscribes to each forwarded type on the bus, so the
// bus's consumer thread sends them, framed (sluice/nats/frame.hpp), on
// "<subject>.<low|medium|high>" by the message's priority. Inbound: the
// client's threads (one per subscription) decode frames and publish them
// into the bus with their priority, so admission and backpressure apply.
// docs/nats.md has the design, the frame and the guarantees.
//
// The parts, one concern each (namespace detail), are in the headers
// included below; this facade owns them, orders Start and Shutdown, and
// states the threads and locks of the whole bridge.
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/bus.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/dispatch_acks.hpp"
#include "sluice/nats/frame_signature.hpp"
#include "sluice/nats/heartbeat.hpp"
#include "sluice/nats/inbound.hpp"
#include "sluice/nats/inbound_routes.hpp"
#include "sluice/nats/jetstream_inbound.hpp"
#include "sluice/nats/jetstream_outbound.hpp"
#include "sluice/nats/local_bus.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/outbound.hpp"
#include "sluice/nats/remote.hpp"
#include "sluice/nats/routes.hpp"
#include "sluice/nats/statistics.hpp"
#include "sluice/nats/subjects.hpp"
#include "sluice/nats/subscriptions.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// Threads and locks of the whole bridge.
//
// Threads:
// - user: the calls below (Forward, Receive, the Stop calls, Start,
//   Shutdown, GetStatistics, BufferedBytes) and the destructor;
// - bus consumer: dispatches forwarded types to Sender::Send, which
//   publishes on core NATS or through StreamPublisher::Publish;
// - client: nats.c's threads, one per core subscription
//   (Receiver::OnMessage, which delivers into the bus), and those calling
//   the connection callbacks (Connection::OnDisconnected, OnReconnected,
//   OnClosed, OnAsyncError), subscription completions
//   (SubscriptionSet::OnSubscriptionComplete) and JetStream publish errors
//   (StreamPublisher::OnStreamPublishError);
// - resender: StreamPublisher::ResendLoop, one, from Start to Release;
// - fetchers: StreamFetcher::FetchLoop, one per pull subscription (three
//   per JetStream route), joined by StopAll or SubscriptionSet::Remove.
//
// Mutexes, and who takes them:
// - routes (RouteTable::Lock): user threads only; it also serialises the
//   connection's opening and closing (Start, Shutdown, BufferedBytes). A
//   bus callback that calls Forward or Receive takes it on the consumer
//   thread.
// - streams (InboundStreams::mutex_, the StreamTracker): client and
//   fetcher threads (CheckSequence), user threads (ReadStatistics,
//   InboundRoutes::Remove).
// - subscriptions (SubscriptionSet::mutex_: the inbound subscriptions,
//   their completion and slow-consumer drops): user threads, and client
//   threads (a completion; OnDisconnected keeping the drops).
// - closed (Connection::mutex_): the client's OnClosed, and the user
//   thread waiting for it (WaitClosed).
// - resend (StreamPublisher::resend_mutex_): client threads (a publish
//   error, OnReconnected), the resender (not while it publishes), and user
//   threads (Start, Stop, CountUnacknowledged).
// - stop (InboundSubscription::stop_mutex, one per pull subscription): its
//   fetcher (PauseUnlessStopped) and user threads (RequestStop).
//
// Order: routes, then any one of the other five. Those five are leaves:
// none is held while another bridge mutex is taken, nor while user code
// runs (a codec, on_reject, the bus's admission wait). The client's, the
// resender's and the fetchers' threads never take routes, so the user
// thread may hold it while it joins them or waits for the client's last
// callbacks (Release). The consumer takes no bridge mutex in Send, but a
// bus callback may take routes (Forward, Receive): so routes is not held
// while waiting for the consumer (the bus's Drain, and Unsubscribe of a
// route that may be dispatching: StopForwarding, Shutdown). One wait
// breaks that rule: a Start that fails after subscribing some routes
// unsubscribes them in Release holding routes, so a bus callback calling
// Forward or Receive in that moment would wait for Start as Start waits
// for it. User code on a client thread must not call the route calls:
// Start and Shutdown wait for it holding routes.
template <typename Bus>
class Bridge {
  using Payload = typename detail::BusInfo<Bus>::PayloadType;
  using Sender = detail::Sender<Bus>;
  using Receiver = detail::Receiver<Bus>;
  using Routes = detail::RouteTable<Sender, Receiver>;
  using Inbound = detail::InboundRoutes<Bus, Routes>;

 public:
  // `bus` must outlive the bridge.
  explicit Bridge(Bus& bus, BridgeOptions options = {})
      : bus_(bus),
        options_(std::move(options)),
        origin_id_(detail::OriginIdFor(options_)),
        connection_(options_, counters_,
                    {[this] { subscriptions_.KeepSlowConsumerDrops(); },
                     [this] { publisher_.RequestResend(); }}),
        publisher_(options_, counters_, connection_),
        sender_(bus_, options_, origin_id_, counters_, connection_, publisher_),
        receiver_(bus_, options_, origin_id_, counters_, connection_, subscriptions_),
        fetcher_(bus_, options_, origin_id_, counters_, connection_, subscriptions_, receiver_),
        inbound_(options_, routes_, connection_, subscriptions_, receiver_, fetcher_),
        heartbeats_(options_, origin_id_, counters_, connection_, routes_) {}

  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;
  // Without Shutdown: stops forwarding, closes the connection (what the
  // client still buffers is lost) and waits, without a bound, until the
  // client's callbacks can no longer run: a user callback running on a
  // client thread (on_reject, a codec's Decode, an admission_wait) is
  // waited for until it returns.
  ~Bridge() { Release(); }

  // ---- Configuration (before Start) -----------------------------------------

  // Sends local messages of type T to NATS under `type_id` (not 0). False
  // for type id 0, a subject that is not IsLiteralSubject (empty,
  // wildcards, whitespace, empty tokens), when T is already forwarded, or
  // (after Start) when the bus's subscription table for T is full. Before
  // Start, or while running: forwarding then starts at once. Any thread
  // but a bus callback.
  template <typename T, typename Codec = DefaultCodec<T>>
  [[nodiscard]] bool Forward(const std::string& subject, std::uint16_t type_id,
                             ForwardOptions route = {}) {
    static_assert(sluice::detail::kIsAlternative<T, Payload>,
                  "Sluice: Forward<T> needs T to be exactly one alternative of the bus payload");
    static_assert(!IsRemote<T>::value,
                  "Sluice: Forward<Remote<T>> would send a received message on; forward T");
    CheckCodec<Codec, T>();
    if constexpr (!kIsCodecFor<Codec, T>) {
      return false;  // not reached: the check above fails to compile
    } else {
      const std::unique_lock<std::mutex> routes = routes_.Lock();
      return routes_.AddOutbound(sender_, sluice::detail::VariantIndex<T, Payload>::kValue, subject,
                                 type_id, route, &Sender::template Subscribe<T, Codec>);
    }
  }

  // Publishes frames of `type_id` received on `subject` into the bus as T.
  // Needs a multi-producer bus (the client's threads publish). `subject`
  // may have "*" tokens (IsReceiveSubject: "fleet.*.stop"); each subject a
  // frame comes on is a stream of its own. False for type id 0, a subject
  // that is not IsReceiveSubject, one that overlaps another received
  // subject (SubjectsOverlap: one frame would reach two subscriptions),
  // the same subject with another queue group, when `type_id` is already
  // received as another type or with another codec, or, while running,
  // for a new type on a subject already received (StopReceiving it first)
  // or a failed subscription. Several types may share a subject; a type
  // may come on several. A frame whose type id was not given for the
  // subject it came on is refused (kUnknownType). Before Start, or while
  // running: the subscriptions are then made at once, and the server has
  // them when this returns. Any thread.
  //
  // Receive<Remote<U>>: the frames carry a U (its codec, its type id), and
  // each arrives in the bus as a Remote<U> with the frame's Provenance.
  //
  // route.ack = AckTiming::kOnDispatch (a JetStream route) acknowledges each
  // message once the bus has dispatched it; false when the bus's traits'
  // Observer is not an AckOnDispatch (sluice/nats/dispatch_acks.hpp), which
  // is how the bus tells the bridge, or without route.stream.
  //
  // route.require_signed accepts only frames a key of the options'
  // frame_keys verifies; false without such a key (or without signing
  // built in: kHasFrameSigning).
  template <typename T, typename Codec = DefaultCodec<WireType<T>>>
  [[nodiscard]] bool Receive(std::string subject, std::uint16_t type_id,
                             ReceiveOptions route = {}) {
    static_assert(sluice::detail::kIsAlternative<T, Payload>,
                  "Sluice: Receive<T> needs T to be exactly one alternative of the bus payload");
    static_assert(detail::BusInfo<Bus>::kMultiProducer,
                  "Sluice: Receive needs a multi-producer bus (MpscBus): the NATS client's "
                  "threads publish into it");
    CheckCodec<Codec, WireType<T>>();
    if constexpr (!kIsCodecFor<Codec, WireType<T>>) {
      return false;  // not reached: the check above fails to compile
    } else {
      if (route.ack == AckTiming::kOnDispatch && detail::DispatchAcksOf(bus_) == nullptr) {
        return false;
      }
      // Signed frames only: some key must be able to verify one.
      if (route.require_signed && (!kHasFrameSigning || options_.frame_keys.empty())) {
        return false;
      }
      const std::unique_lock<std::mutex> routes = routes_.Lock();
      return inbound_.Add(std::move(subject), type_id, std::move(route),
                          sluice::detail::VariantIndex<T, Payload>::kValue,
                          &Receiver::template Deliver<T, Codec>);
    }
  }

  // Stops receiving `subject` (as given to Receive): its subscriptions are
  // removed, and once this returns none of its frames is handled any more
  // (a frame being handled is waited for). Its type ids may then be given
  // to other types. False for a subject not received. Any thread but a
  // client callback (on_reject, a codec).
  bool StopReceiving(const std::string& subject) {
    const std::unique_lock<std::mutex> routes = routes_.Lock();
    return inbound_.Remove(subject);
  }

  // Stops forwarding T: no message of T is sent once this returns (from a
  // bus callback: after the callback). False when T is not forwarded. Any
  // thread.
  template <typename T>
  bool StopForwarding() {
    std::unique_lock<std::mutex> routes = routes_.Lock();
    const std::optional<SubscriptionHandle> handle =
        routes_.RetireOutbound(sluice::detail::VariantIndex<T, Payload>::kValue);
    if (!handle) return false;
    // The wait for a batch in flight (no Send runs after it) is made
    // without the routes' mutex: a bus callback in that batch may itself
    // be calling Forward or Receive.
    routes.unlock();
    if (handle->IsValid()) (void)bus_.Unsubscribe(*handle);
    return true;
  }

  // ---- Lifecycle --------------------------------------------------------------

  // Connects, subscribes to the inbound subjects (and waits until the
  // server has them), then starts forwarding. Any thread; once it has
  // succeeded, later calls return NATS_ILLEGAL_STATE. A failed Start leaves
  // no connection behind and may be called again. The result converts to
  // its natsStatus and carries the client's text for a failure.
  [[nodiscard]] StartResult Start() {
    const std::unique_lock<std::mutex> routes = routes_.Lock();
    if (routes_.started()) {
      return StartResult{NATS_ILLEGAL_STATE, "Start: the bridge is started already"};
    }
    if (!detail::IsValidStreamTable(options_)) {
      return StartResult{NATS_INVALID_ARG,
                         "Start: max_tracked_streams and max_tracked_unknown_streams must be 1 "
                         "or more, stream_idle 0 or more"};
    }
    // The third guard against loops (docs/nats.md, "Loops"): with no bit to
    // mark inbound messages, two bridges that forward and receive one
    // subject would send one message back and forth for ever.
    if (options_.remote_sender_flag == 0) {
      return StartResult{NATS_INVALID_ARG,
                         "Start: remote_sender_flag must have a bit set (it marks received "
                         "messages, which are never forwarded)"};
    }
    if (options_.heartbeat_interval > kMaxHeartbeatInterval) {
      return StartResult{NATS_INVALID_ARG, "Start: heartbeat_interval must be at most 2^32 - 1 ms"};
    }
    if (!kHasFrameSigning && detail::WantsSigning(options_)) {
      return StartResult{NATS_INVALID_ARG,
                         "Start: signing_key or frame_keys given, but the bridge was built "
                         "without OpenSSL's libcrypto (SLUICE_NATS_HAS_SIGNING)"};
    }
    if (!detail::IsValidSigning(options_)) {
      return StartResult{NATS_INVALID_ARG,
                         "Start: each signing secret must have 32 bytes or more and an origin "
                         "other than 0, no origin and key id named twice, and signing_key's "
                         "origin must be origin_id's (set, not drawn)"};
    }
    // The stream table read back before any frame can arrive.
    std::string state_error;
    if (!receiver_.Streams().OpenStateFile(&state_error)) {
      return StartResult{NATS_INVALID_ARG, std::move(state_error)};
    }
    natsStatus status = connection_.Connect();
    if (status != NATS_OK) return StartResult{status, connection_.ErrorText(status)};
    status = connection_.OpenJetStream(publisher_.ContextOptions());
    if (status == NATS_OK) publisher_.Start();
    if (status == NATS_OK) status = inbound_.SubscribeAll();
    // A new stream on every subject (a fresh instance id, numbers from 1),
    // before the bus subscriptions below, whose dispatch reads them.
    sender_.NewInstance();
    routes_.RestartSequences();
    // The bus's subscription table for a forwarded type is full.
    std::string error;
    if (status != NATS_OK) error = connection_.ErrorText(status);
    if (status == NATS_OK && !routes_.SubscribeOutbound(sender_)) {
      status = NATS_NO_MEMORY;
      error = "Start: a forwarded type's bus subscription table is full";
    }
    if (status != NATS_OK) {
      Release();
      // Ready for another Start: Release has waited for the closed callback
      // and every subscription's completion, so no client thread writes
      // the connection's state any more.
      connection_.Reset();
      return StartResult{status, std::move(error)};
    }
    heartbeats_.Start(sender_.InstanceId());
    routes_.set_started();
    return StartResult{};
  }

  // The orderly stop: closes the bus to new publishes, drains it (what it
  // holds of forwarded types is sent), stops forwarding, flushes the
  // connection, then drains it (inbound messages the client holds are
  // offered to the closed bus and counted as refused) and waits for it to
  // close. Each of those waits is bounded by `timeout`; a timeout of 0 (or
  // less) waits for none of them: no flush and no drain (both report
  // NATS_TIMEOUT), the connection is closed at once and what the client
  // still buffers is lost. Then, as the destructor, it waits without a
  // bound for user callbacks still running on client threads to return.
  // Not from a bus callback. Again after the first: closed is true.
  ShutdownResult Shutdown(std::chrono::milliseconds timeout,
                          ShutdownDrain drain = ShutdownDrain::kWaitForConsumer) {
    timeout = std::max(timeout, std::chrono::milliseconds(0));
    ShutdownResult result;
    // The waits for the consumer (the drain, the outbound unsubscriptions)
    // are made without the routes' mutex: a bus callback may be calling
    // Forward or Receive, which return false from here on.
    {
      const std::unique_lock<std::mutex> routes = routes_.Lock();
      routes_.set_stopping();
    }
    result.bus_drained = detail::CloseAndDrain(bus_, timeout, drain);
    // A forwarding callback waiting for room in the JetStream window (the
    // server gone) gives up now, counting the frame as send_dropped, so the
    // unsubscriptions below do not wait for it for ever.
    publisher_.GiveUpStreamWaits();
    std::vector<SubscriptionHandle> handles;
    {
      const std::unique_lock<std::mutex> routes = routes_.Lock();
      handles = routes_.TakeOutboundHandles();
    }
    detail::Unsubscribe(bus_, handles);
    const std::unique_lock<std::mutex> routes = routes_.Lock();
    if (!connection_.is_open()) {
      result.closed = true;  // none open: never started, or closed already
      return result;
    }
    fetcher_.StopAll();
    result.stream_acks = publisher_.WaitForAcknowledgements(timeout);
    connection_.CloseOrderly(timeout, result);
    result.closed = connection_.WaitClosed(timeout + std::chrono::seconds(1));
    Release();
    return result;
  }

  // ---- Observation (any thread) -------------------------------------------------

  BridgeStatisticsSnapshot GetStatistics() const {
    BridgeStatisticsSnapshot statistics =
        detail::ReadStatistics(counters_, receiver_, connection_, subscriptions_);
    if (const DispatchAcks* acks = detail::DispatchAcksOf(bus_)) {
      statistics.dispatch_acks = acks->Counts();
    }
    return statistics;
  }

  std::uint64_t OriginId() const noexcept { return origin_id_; }

  // Bytes in the client's write buffer, not yet written to the socket
  // (nats.c's natsConnection_Buffered): with send_asap, 0 once a send has
  // returned while connected. Publishes made while disconnected go to the
  // reconnect buffer instead, which this does not count. -1 before Start,
  // after Shutdown, and once the connection is closed (reconnection given
  // up). Any thread but a bus or client callback; it takes the routes'
  // lock, so it waits while Start (connecting, retrying if configured so)
  // or Shutdown runs.
  int BufferedBytes() const {
    const std::unique_lock<std::mutex> routes = routes_.Lock();
    return connection_.BufferedBytes();
  }

 private:
  // Stops forwarding, closes the connection (at once, or nothing when a
  // drain has closed it already), and frees the client's objects once none
  // of its callbacks can run: the connection has closed (its last
  // callback) and every subscription's handler has returned for the last
  // time. Both waits are unbounded, as the destructor says. Holding the
  // routes' mutex, or from the destructor.
  void Release() {
    if (!connection_.is_open()) return;
    heartbeats_.Stop();  // before the connection it publishes on goes
    publisher_.GiveUpStreamWaits();
    detail::Unsubscribe(bus_, routes_.TakeOutboundHandles());  // no Send runs after this
    fetcher_.StopAll();
    connection_.BeginOwnClose();
    publisher_.Stop();
    connection_.Close();
    connection_.WaitClosed();
    subscriptions_.ReleaseAll();
    publisher_.CountUnacknowledged();
    connection_.Destroy();
  }

  Bus& bus_;
  const BridgeOptions options_;
  const std::uint64_t origin_id_;
  detail::Counters counters_;
  Routes routes_;
  detail::Connection connection_;
  detail::StreamPublisher publisher_;
  Sender sender_;
  detail::SubscriptionSet<Receiver> subscriptions_;
  Receiver receiver_;
  detail::StreamFetcher<Bus> fetcher_;
  Inbound inbound_;
  detail::HeartbeatSender<Routes> heartbeats_;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
