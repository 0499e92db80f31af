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
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/admission.hpp"
#include "sluice/bus.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/variant_index.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/nats/remote.hpp"
#include "sluice/nats/stream_tracker.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// TLS to the server (nats.c built with OpenSSL, as Debian's is).
struct TlsOptions {
  // Use TLS. A "tls://" URL asks for it too, and so does any field below
  // that is set: a CA file never leaves a connection in plain text.
  bool enabled = false;
  // The CAs that may sign the server's certificate (PEM); empty: the
  // system's.
  std::string ca_file;
  // A client certificate and its private key (PEM), for a server that
  // requires them (mutual TLS). Both or neither.
  std::string certificate_file;
  std::string key_file;
  // The name the server's certificate must carry, checked instead of the
  // URL's host (which the client checks when this is empty): for a server
  // reached by an address its certificate does not name.
  std::string expected_hostname;
  // No verification of the server's certificate at all: for a test bench,
  // never a fleet.
  bool skip_verification = false;
};

struct BridgeOptions {
  std::string url = "nats://127.0.0.1:4222";
  // Several servers (a cluster, or one server's addresses): when not empty,
  // used instead of `url`. The client connects to one of them and, when it
  // is lost, reconnects to any of them (in random order unless
  // no_randomize).
  std::vector<std::string> servers;
  bool no_randomize = false;
  std::string connection_name = "sluice";
  // Credentials; each empty one is not used. A URL's own
  // user:password@ or token@ works as well.
  std::string user;
  std::string password;
  std::string token;
  // A .creds file: the user's JWT and NKey seed (a server in operator mode).
  std::string credentials_file;
  // An NKey user: its public key ("U...") and the file holding its seed.
  std::string nkey_public_key;
  std::string nkey_seed_file;
  TlsOptions tls;
  // Written into every frame sent; frames carrying it are never published
  // into the bus again. 0: a random id, drawn at construction.
  std::uint64_t origin_id = 0;
  // Payload bytes a frame may carry, both ways. A frame sent must also fit,
  // with its 56-byte header, in the server's max_payload (1 MiB unless the
  // server is configured otherwise); one that does not is not sent and is
  // counted in encode_failed.
  std::uint32_t max_payload = kDefaultMaxFramePayload;
  // Reconnection: attempts (-1: for ever), the wait between them, and the
  // client's buffer for publishes made while disconnected (the client's
  // default is 8 MiB; a publish that does not fit is dropped and counted).
  int max_reconnect = -1;
  std::chrono::milliseconds reconnect_wait{100};
  int reconnect_buffer_bytes = 8 * 1024 * 1024;
  // Keep retrying the first connection instead of failing Start(): Start
  // then blocks until a server answers or max_reconnect attempts are spent
  // (with max_reconnect = -1, until a server answers).
  bool retry_on_failed_connect = false;
  std::chrono::milliseconds connect_timeout{2000};
  // Send each frame as it is published instead of letting the client
  // gather frames into larger writes (nats.c's SendAsap): lower latency for
  // a message on its own, fewer messages a second under load.
  bool send_asap = false;
  // Messages and bytes the client holds per inbound subscription (one per
  // subject and priority) before it drops (a slow consumer, counted).
  int pending_messages_limit = 65536;
  int pending_bytes_limit = 64 * 1024 * 1024;
  // How long an inbound message the local bus refuses (full for its
  // priority) is retried before it is dropped and counted, per priority
  // (LOW, MEDIUM, HIGH). It waits on that priority's own client thread.
  std::array<std::chrono::milliseconds, kPriorityCount> admission_wait{
      std::chrono::milliseconds(0), std::chrono::milliseconds(0), std::chrono::milliseconds(1000)};
  // Inbound messages are published with the frame's sender id OR this flag,
  // which marks them as remote: a message whose sender id has it is never
  // forwarded. Local publishers of forwarded types use ids without it.
  std::uint32_t remote_sender_flag = 0x8000'0000u;
  // Inbound trust, per priority (LOW, MEDIUM, HIGH): the origin ids whose
  // frames are accepted; empty: any. A frame from another origin is refused
  // (kOriginNotAllowed). An origin id is what the sender claims: make it
  // mean something with the server's permissions (docs/nats.md, Trust).
  std::array<std::vector<std::uint64_t>, kPriorityCount> allowed_origins;
  // Accept version 1 frames, which carry no stream fields: they cannot be
  // checked for gaps or replays (counted as unsequenced). Off: refused
  // (kUnsequenced).
  bool accept_version_1 = false;
  // Streams (origin, instance, subject) the receiver remembers for gaps
  // and duplicates; past it the least recently heard is forgotten.
  std::size_t max_tracked_streams = 1024;
  // JetStream routes (ForwardOptions::jetstream, ReceiveOptions::stream):
  // publishes awaiting the stream's acknowledgement, at most (the consumer
  // thread waits for room past it: backpressure into the bus); messages a
  // JetStream consumer hands out before the bridge acknowledges them, per
  // priority; how long the stream waits for an acknowledgement before it
  // redelivers; and the most messages one fetch asks for (1 with nats.c
  // before 3.8, whose batched fetch can overrun its buffer).
  int jetstream_max_pending = 4096;
  int jetstream_max_ack_pending = 1024;
  std::chrono::milliseconds jetstream_ack_wait{5000};
  int jetstream_fetch_batch = 256;
  // Called on a client thread for each refused frame (after it is counted).
  // An exception it throws is caught and counted (on_reject_threw).
  std::function<void(FrameError, std::string_view subject)> on_reject;
};

// How Shutdown drains the bus.
enum class ShutdownDrain : std::uint8_t {
  kWaitForConsumer,  // another thread dispatches until IsDrained() (bus.Drain)
  kDispatchHere,     // the caller is the consumer: Shutdown calls ProcessBatch
};

struct ShutdownResult {
  bool bus_drained = false;  // every message admitted before Close dispatched
  // JetStream routes: every publish acknowledged by its stream in time
  // (js_PublishAsyncComplete); NATS_OK also when there were none.
  natsStatus stream_acks = NATS_OK;
  natsStatus flush = NATS_OK;
  natsStatus drain = NATS_OK;  // natsConnection_DrainTimeout
  // The connection reported closed in time, or none was open (never
  // started, or closed by an earlier Shutdown).
  bool closed = false;
};

namespace detail {

template <typename Bus>
struct BusInfo;
template <typename Payload, std::size_t kCapacity, ProducerModel kProducers, typename Traits>
struct BusInfo<AsyncBus<Payload, kCapacity, kProducers, Traits>> {
  using PayloadType = Payload;
  static constexpr bool kMultiProducer = kProducers == ProducerModel::kMulti;
};

// A JetStream fetcher whose priority has no room waits for it this long at
// a time, then looks at its stop flag again (Shutdown waits for it).
inline constexpr std::chrono::milliseconds kFetchRoomSlice{10};

inline std::uint64_t RandomNonZero() {
  std::random_device device;
  std::uint64_t id = 0;
  while (id == 0) {
    id = (std::uint64_t{device()} << 32) ^ device();
  }
  return id;
}

}  // namespace detail

// Subject suffixes, by priority.
inline constexpr std::string_view kPrioritySubjects[kPriorityCount] = {"low", "medium", "high"};

// Whether the bridge accepts `subject` for Forward and Receive: a literal
// NATS subject, tokens of one or more characters separated by '.', without
// whitespace, control characters or the wildcard characters '*' and '>'. A
// wildcard could overlap another inbound subject of the same bridge, and the
// client would then hand one frame to two subscriptions: twice into the bus.
inline bool IsLiteralSubject(std::string_view subject) noexcept {
  bool token_empty = true;
  for (const char c : subject) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '.') {
      if (token_empty) return false;
      token_empty = true;
    } else if (byte <= 0x20 || byte == 0x7F || c == '*' || c == '>') {
      return false;
    } else {
      token_empty = false;
    }
  }
  return !token_empty;  // also false for an empty subject
}

// Whether the bridge accepts `subject` for Receive: IsLiteralSubject, or
// tokens of which some are exactly "*" (one token, any value). ">" is never
// accepted: the priority suffix follows the subject.
inline bool IsReceiveSubject(std::string_view subject) noexcept {
  std::string literal(subject);
  std::size_t start = 0;
  while (start <= literal.size()) {
    std::size_t end = literal.find('.', start);
    if (end == std::string::npos) end = literal.size();
    if (end - start == 1 && literal[start] == '*') literal[start] = 'w';
    start = end + 1;
  }
  return IsLiteralSubject(literal);
}

// Whether one subject could match both patterns (IsReceiveSubject): the
// same number of tokens, each pair equal or one of them "*".
inline bool SubjectsOverlap(std::string_view a, std::string_view b) noexcept {
  for (;;) {
    const std::size_t a_end = std::min(a.find('.'), a.size());
    const std::size_t b_end = std::min(b.find('.'), b.size());
    const std::string_view a_token = a.substr(0, a_end);
    const std::string_view b_token = b.substr(0, b_end);
    if (a_token != b_token && a_token != "*" && b_token != "*") return false;
    const bool a_last = a_end == a.size();
    const bool b_last = b_end == b.size();
    if (a_last || b_last) return a_last && b_last;
    a.remove_prefix(a_end + 1);
    b.remove_prefix(b_end + 1);
  }
}

// What an outbound route may add.
struct ForwardOptions {
  // At least once: each frame is published to a JetStream stream (which the
  // operator creates over the route's subjects, with a duplicate window)
  // with a Nats-Msg-Id made of its origin, instance, subject and sequence,
  // and kept until the stream acknowledges it; after a reconnection the
  // unacknowledged ones are published again, and the stream drops those it
  // had already stored. Off: core NATS, at most once.
  bool jetstream = false;
};

// What an inbound route may add.
struct ReceiveOptions {
  // A NATS queue group: the bridges (or other subscribers) of one group share
  // the subject's frames, each frame going to one of them. Empty: none, every
  // subscriber gets every frame. A member sees part of each stream, so its
  // gaps are not counted (duplicates still are).
  std::string queue_group;
  // At least once: read the subject from this JetStream stream through a
  // durable pull consumer per priority, "<durable>_low", "_medium" and
  // "_high" (so a LOW backlog never delays a HIGH redelivery), taking only
  // what the bus can admit at that priority, and acknowledging a message
  // once the bus has admitted it. A redelivered message the bridge has
  // admitted before is acknowledged and not admitted again; one the bus
  // refuses (full after admission_wait, or closed) is handed back to the
  // stream for later redelivery. Empty: core NATS. Not with queue_group.
  std::string stream;
  std::string durable;
};

// "<subject>.<low|medium|high>": where a message of `priority` travels.
inline std::string SubjectFor(std::string_view subject, MessagePriority priority) {
  std::string result(subject);
  result += '.';
  result += kPrioritySubjects[static_cast<std::size_t>(priority)];
  return result;
}

template <typename Bus>
class Bridge {
  using Payload = typename detail::BusInfo<Bus>::PayloadType;

 public:
  // `bus` must outlive the bridge.
  explicit Bridge(Bus& bus, BridgeOptions options = {})
      : bus_(bus), options_(std::move(options)), streams_(options_.max_tracked_streams) {
    origin_id_ = options_.origin_id != 0 ? options_.origin_id : detail::RandomNonZero();
  }

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
      std::lock_guard<std::mutex> routes(routes_mutex_);
      return AddOutbound<T, Codec>(subject, type_id, route);
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
      std::lock_guard<std::mutex> routes(routes_mutex_);
      return AddInbound<T, Codec>(std::move(subject), type_id, std::move(route));
    }
  }

  // Stops receiving `subject` (as given to Receive): its subscriptions are
  // removed, and once this returns none of its frames is handled any more
  // (a frame being handled is waited for). Its type ids may then be given
  // to other types. False for a subject not received. Any thread but a
  // client callback (on_reject, a codec).
  bool StopReceiving(const std::string& subject) {
    std::lock_guard<std::mutex> routes(routes_mutex_);
    const auto found = std::find_if(inbound_subjects_.begin(), inbound_subjects_.end(),
                                    [&](const InboundSubject& s) { return s.subject == subject; });
    if (found == inbound_subjects_.end()) return false;
    inbound_subjects_.erase(found);
    if (connection_ != nullptr) UnsubscribeInbound(subject);
    {
      // Received again later, its streams start anew (no gaps for what was
      // sent meanwhile).
      const std::string pattern = subject + ".*";
      std::lock_guard<std::mutex> lock(streams_mutex_);
      streams_.Forget([&](std::string_view heard) { return SubjectsOverlap(pattern, heard); });
    }
    // Ids no other subject uses are free again.
    inbound_types_.erase(std::remove_if(inbound_types_.begin(), inbound_types_.end(),
                                        [&](const InboundType& type) {
                                          return std::none_of(
                                              inbound_subjects_.begin(), inbound_subjects_.end(),
                                              [&](const InboundSubject& s) {
                                                return std::find(s.type_ids.begin(),
                                                                 s.type_ids.end(),
                                                                 type.type_id) != s.type_ids.end();
                                              });
                                        }),
                         inbound_types_.end());
    return true;
  }

  // Stops forwarding T: no message of T is sent once this returns (from a
  // bus callback: after the callback). False when T is not forwarded. Any
  // thread.
  template <typename T>
  bool StopForwarding() {
    std::unique_lock<std::mutex> routes(routes_mutex_);
    const auto found = std::find_if(outbound_.begin(), outbound_.end(), [](const auto& route) {
      return route->variant_index == sluice::detail::VariantIndex<T, Payload>::kValue;
    });
    if (found == outbound_.end()) return false;
    std::unique_ptr<OutboundRoute> route = std::move(*found);
    outbound_.erase(found);
    const SubscriptionHandle handle = route->handle;
    // Kept until the bridge goes: a callback of this route may still be
    // running when this is called from inside the bus's dispatch.
    retired_outbound_.push_back(std::move(route));
    // The wait for a batch in flight (no Send runs after it) is made
    // without the routes' mutex: a bus callback in that batch may itself
    // be calling Forward or Receive.
    routes.unlock();
    if (handle.IsValid()) (void)bus_.Unsubscribe(handle);
    return true;
  }

  // ---- Lifecycle --------------------------------------------------------------

  // Connects, subscribes to the inbound subjects (and waits until the
  // server has them), then starts forwarding. Any thread; once it has
  // succeeded, later calls return NATS_ILLEGAL_STATE. A failed Start leaves
  // no connection behind and may be called again.
  [[nodiscard]] natsStatus Start() {
    std::lock_guard<std::mutex> routes(routes_mutex_);
    if (started_) return NATS_ILLEGAL_STATE;
    natsOptions* opts = nullptr;
    natsStatus status = natsOptions_Create(&opts);
    const auto set = [&status](natsStatus next) {
      if (status == NATS_OK) status = next;
    };
    set(ApplyConnectionOptions(opts));
    // The first loop guard: the server never delivers this connection's own
    // publishes back to it.
    set(natsOptions_SetNoEcho(opts, true));
    set(natsOptions_SetAllowReconnect(opts, true));
    set(natsOptions_SetMaxReconnect(opts, options_.max_reconnect));
    set(natsOptions_SetReconnectWait(opts, options_.reconnect_wait.count()));
    set(natsOptions_SetReconnectBufSize(opts, options_.reconnect_buffer_bytes));
    set(natsOptions_SetTimeout(opts, options_.connect_timeout.count()));
    set(natsOptions_SetMaxPendingMsgs(opts, options_.pending_messages_limit));
    set(natsOptions_SetSendAsap(opts, options_.send_asap));
    set(natsOptions_SetErrorHandler(opts, &OnAsyncError, this));
    set(natsOptions_SetDisconnectedCB(opts, &OnDisconnected, this));
    set(natsOptions_SetReconnectedCB(opts, &OnReconnected, this));
    set(natsOptions_SetClosedCB(opts, &OnClosed, this));
    if (options_.retry_on_failed_connect) {
      set(natsOptions_SetRetryOnFailedConnect(opts, true, nullptr, nullptr));
    }
    if (status == NATS_OK) status = natsConnection_Connect(&connection_, opts);
    natsOptions_Destroy(opts);
    if (status != NATS_OK) {
      if (connection_ != nullptr) {
        natsConnection_Destroy(connection_);
        connection_ = nullptr;
      }
      return status;
    }
    // Relaxed: a flag for the statistics, ordered with nothing else.
    connected_.store(true, std::memory_order_relaxed);
    // Relaxed: an independent bound; see FitsServer.
    server_max_payload_.store(natsConnection_GetMaxPayload(connection_), std::memory_order_relaxed);
    // The JetStream context serves the routes that use a stream; making it
    // asks nothing of the server.
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.PublishAsync.MaxPending = options_.jetstream_max_pending;
    js_options.PublishAsync.ErrHandler = &OnStreamPublishError;
    js_options.PublishAsync.ErrHandlerClosure = this;
    if (status == NATS_OK) status = natsConnection_JetStream(&js_, connection_, &js_options);
    // Relaxed: no other thread runs yet (the resender starts below, the
    // forwarding callbacks after it).
    published_to_stream_.store(false, std::memory_order_relaxed);
    give_up_stream_waits_.store(false, std::memory_order_relaxed);
    if (status == NATS_OK) {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      resend_stop_ = false;
      resend_requested_ = false;
    }
    if (status == NATS_OK) resender_ = std::thread([this] { ResendLoop(); });
    for (const InboundSubject& inbound : inbound_subjects_) {
      for (std::size_t p = 0; p < kPriorityCount && status == NATS_OK; ++p) {
        status = SubscribeInbound(inbound, static_cast<MessagePriority>(p));
      }
    }
    // The server has the subscriptions once it answers the flush's PING,
    // and has refused by then any it does not permit.
    if (status == NATS_OK && !inbound_subjects_.empty()) {
      status = natsConnection_FlushTimeout(connection_, options_.connect_timeout.count());
      for (const InboundSubject& inbound : inbound_subjects_) {
        if (status == NATS_OK && SubscriptionRefused(inbound)) status = NATS_NOT_PERMITTED;
      }
    }
    // A new stream on every subject: a fresh instance id, numbers from 1.
    // Written before the bus subscriptions below, whose dispatch reads them
    // (Subscribe's release pairs with the consumer's acquire of the table).
    instance_id_ = detail::RandomNonZero();
    for (const auto& entry : subject_sequences_) entry.second->fill(0);
    for (std::size_t r = 0; r < outbound_.size() && status == NATS_OK; ++r) {
      outbound_[r]->handle = outbound_[r]->subscribe(*this, *outbound_[r]);
      // The bus's subscription table for T is full.
      if (!outbound_[r]->handle.IsValid()) status = NATS_NO_MEMORY;
    }
    if (status != NATS_OK) {
      Release();
      // Ready for another Start: Release has waited for the closed callback
      // and every subscription's completion, so no client thread writes
      // these any more.
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = false;
      closing_.store(false, std::memory_order_relaxed);
      return status;
    }
    started_ = true;
    return NATS_OK;
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
      std::lock_guard<std::mutex> routes(routes_mutex_);
      stopping_ = true;
    }
    bus_.Close();
    if (drain == ShutdownDrain::kDispatchHere) {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!bus_.IsDrained() && std::chrono::steady_clock::now() < deadline) {
        if (bus_.ProcessBatch() == 0) std::this_thread::yield();
      }
      result.bus_drained = bus_.IsDrained();
    } else {
      result.bus_drained = bus_.Drain(timeout);
    }
    // A forwarding callback waiting for room in the JetStream window (the
    // server gone) gives up now, counting the frame as send_dropped, so the
    // unsubscriptions below do not wait for it for ever.
    GiveUpStreamWaits();
    std::vector<SubscriptionHandle> handles;
    {
      std::lock_guard<std::mutex> routes(routes_mutex_);
      for (const auto& route : outbound_) {
        handles.push_back(route->handle);
        route->handle = SubscriptionHandle();
      }
    }
    for (const SubscriptionHandle& handle : handles) {
      if (handle.IsValid()) (void)bus_.Unsubscribe(handle);
    }
    std::lock_guard<std::mutex> routes(routes_mutex_);
    if (connection_ == nullptr) {
      result.closed = true;  // none open: never started, or closed already
      return result;
    }
    StopFetching();
    if (js_ != nullptr && timeout.count() > 0) {
      jsPubOptions wait;
      jsPubOptions_Init(&wait);
      wait.MaxWait = timeout.count();
      result.stream_acks = js_PublishAsyncComplete(js_, &wait);
    } else if (js_ != nullptr) {
      result.stream_acks = NATS_TIMEOUT;
    }
    if (timeout.count() == 0) {
      // The client refuses a zero timeout for the flush; closing without
      // either is what "no wait" means.
      result.flush = NATS_TIMEOUT;
      result.drain = NATS_TIMEOUT;
      KeepSlowConsumerDrops();
      BeginOwnClose();
      natsConnection_Close(connection_);
    } else {
      result.flush = natsConnection_FlushTimeout(connection_, timeout.count());
      KeepSlowConsumerDrops();
      BeginOwnClose();
      result.drain = natsConnection_DrainTimeout(connection_, timeout.count());
      if (result.drain != NATS_OK) natsConnection_Close(connection_);
    }
    result.closed = WaitClosed(timeout + std::chrono::seconds(1));
    Release();
    return result;
  }

  // ---- Observation (any thread) -------------------------------------------------

  BridgeStatisticsSnapshot GetStatistics() const {
    BridgeStatisticsSnapshot s;
    // Relaxed loads: each counter is an independent tally; nothing else is
    // published through them (see Counters).
    const auto load = [](const std::atomic<std::uint64_t>& counter) {
      return counter.load(std::memory_order_relaxed);
    };
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      s.frames_sent[p] = load(counters_.frames_sent[p]);
      s.send_dropped[p] = load(counters_.send_dropped[p]);
      s.delivered[p] = load(counters_.delivered[p]);
      s.bus_dropped[p] = load(counters_.bus_dropped[p]);
      s.admitted_after_wait[p] = load(counters_.admitted_after_wait[p]);
      s.handed_back[p] = load(counters_.handed_back[p]);
    }
    s.unsequenced = load(counters_.unsequenced);
    s.jetstream_resent = load(counters_.jetstream_resent);
    s.jetstream_behind_window = load(counters_.jetstream_behind_window);
    s.permission_violations = load(counters_.permission_violations);
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      s.streams = streams_.Counts();
    }
    s.reconnect_buffer_overflows = load(counters_.reconnect_buffer_overflows);
    s.encode_failed = load(counters_.encode_failed);
    s.loop_suppressed = load(counters_.loop_suppressed);
    s.frames_received = load(counters_.frames_received);
    s.echo_suppressed = load(counters_.echo_suppressed);
    for (std::size_t e = 0; e < kFrameErrorCount; ++e) s.rejected[e] = load(counters_.rejected[e]);
    s.disconnects = load(counters_.disconnects);
    s.reconnects = load(counters_.reconnects);
    s.on_reject_threw = load(counters_.on_reject_threw);
    s.connected = connected_.load(std::memory_order_relaxed);
    s.slow_consumer_dropped = SlowConsumerDropped();
    return s;
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
    std::lock_guard<std::mutex> routes(routes_mutex_);
    return connection_ == nullptr ? -1 : natsConnection_Buffered(connection_);
  }

 private:
  using SubjectSequence = std::array<std::uint64_t, kPriorityCount>;

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
    SubscriptionHandle (*subscribe)(Bridge&, OutboundRoute&) = nullptr;
  };

  using DeliverFunction = FrameError (*)(Bridge&, const FrameView&, bool, bool*);

  struct InboundType {
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
  };

  // One per inbound subject and priority; its address is the client's
  // closure for the subscription.
  struct InboundSubscription {
    Bridge* bridge = nullptr;
    MessagePriority priority = MessagePriority::MEDIUM;
    std::string subject;             // with the priority suffix
    std::string route_subject;       // as given to Receive
    std::vector<InboundType> types;  // those the subject carries: a copy, never written
    bool count_gaps = true;          // false in a queue group (a member sees part of a stream)
    natsSubscription* subscription = nullptr;
    bool completed = false;  // its last handler call has returned; guarded by mutex_
    // JetStream: a pull subscription read by a thread of the bridge's own
    // (no client callback), stopped with `stop` (release; the thread's
    // acquire loads see it) and joined before the subscription is freed.
    bool pull = false;
    std::atomic<bool> stop{false};
    std::thread fetcher;
    // The highest slow-consumer count the client reported for it; guarded
    // by mutex_.
    std::uint64_t dropped_seen = 0;
  };

  // Monotonic tallies, written with relaxed fetch_add from the consumer
  // thread and the client's threads and read with relaxed loads: no other
  // data is published through them, so they need atomicity only.
  struct Counters {
    std::array<std::atomic<std::uint64_t>, kPriorityCount> frames_sent{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> send_dropped{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> delivered{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> bus_dropped{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> admitted_after_wait{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> handed_back{};
    std::atomic<std::uint64_t> jetstream_resent{0};
    std::atomic<std::uint64_t> jetstream_behind_window{0};
    std::atomic<std::uint64_t> permission_violations{0};
    std::atomic<std::uint64_t> unsequenced{0};
    std::atomic<std::uint64_t> reconnect_buffer_overflows{0};
    std::atomic<std::uint64_t> encode_failed{0};
    std::atomic<std::uint64_t> loop_suppressed{0};
    std::atomic<std::uint64_t> frames_received{0};
    std::atomic<std::uint64_t> echo_suppressed{0};
    std::array<std::atomic<std::uint64_t>, kFrameErrorCount> rejected{};
    std::atomic<std::uint64_t> on_reject_threw{0};
    std::atomic<std::uint64_t> disconnects{0};
    std::atomic<std::uint64_t> reconnects{0};
  };

  static void Count(std::atomic<std::uint64_t>& counter) noexcept {
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  // The server list, credentials and TLS of BridgeOptions, onto the
  // client's options. The first failure is returned (a file that cannot be
  // read, TLS without OpenSSL in the client).
  natsStatus ApplyConnectionOptions(natsOptions* opts) const {
    natsStatus status = NATS_OK;
    const auto set = [&status](natsStatus next) {
      if (status == NATS_OK) status = next;
    };
    if (options_.servers.empty()) {
      set(natsOptions_SetURL(opts, options_.url.c_str()));
    } else {
      std::vector<const char*> servers;
      servers.reserve(options_.servers.size());
      for (const std::string& server : options_.servers) servers.push_back(server.c_str());
      set(natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size())));
    }
    set(natsOptions_SetNoRandomize(opts, options_.no_randomize));
    set(natsOptions_SetName(opts, options_.connection_name.c_str()));
    if (!options_.user.empty() || !options_.password.empty()) {
      set(natsOptions_SetUserInfo(opts, options_.user.c_str(), options_.password.c_str()));
    }
    if (!options_.token.empty()) set(natsOptions_SetToken(opts, options_.token.c_str()));
    if (!options_.credentials_file.empty()) {
      set(natsOptions_SetUserCredentialsFromFiles(opts, options_.credentials_file.c_str(),
                                                  nullptr));
    }
    if (!options_.nkey_public_key.empty() || !options_.nkey_seed_file.empty()) {
      // Both or neither: half an NKey is a configuration error, not a
      // connection without it.
      if (options_.nkey_public_key.empty() || options_.nkey_seed_file.empty()) {
        set(NATS_INVALID_ARG);
      }
      set(natsOptions_SetNKeyFromSeed(opts, options_.nkey_public_key.c_str(),
                                      options_.nkey_seed_file.c_str()));
    }
    const TlsOptions& tls = options_.tls;
    // Any TLS setting asks for TLS: a CA file or an expected hostname must
    // never leave the connection in plain text.
    const bool any_tls = tls.enabled || !tls.ca_file.empty() || !tls.certificate_file.empty() ||
                         !tls.key_file.empty() || !tls.expected_hostname.empty() ||
                         tls.skip_verification;
    if (any_tls) set(natsOptions_SetSecure(opts, true));
    if (!tls.ca_file.empty()) set(natsOptions_LoadCATrustedCertificates(opts, tls.ca_file.c_str()));
    if (!tls.certificate_file.empty() || !tls.key_file.empty()) {
      set(natsOptions_LoadCertificatesChain(opts, tls.certificate_file.c_str(),
                                            tls.key_file.c_str()));
    }
    if (!tls.expected_hostname.empty()) {
      set(natsOptions_SetExpectedHostname(opts, tls.expected_hostname.c_str()));
    }
    if (tls.skip_verification) set(natsOptions_SkipServerVerification(opts, true));
    return status;
  }

  // ---- Routes (holding routes_mutex_) ----------------------------------------------

  template <typename T, typename Codec>
  bool AddOutbound(const std::string& subject, std::uint16_t type_id, ForwardOptions options) {
    constexpr std::size_t kIndex = sluice::detail::VariantIndex<T, Payload>::kValue;
    if (stopping_ || type_id == 0 || !IsLiteralSubject(subject)) return false;
    for (const auto& route : outbound_) {
      if (route->variant_index == kIndex) return false;
    }
    auto route = std::make_unique<OutboundRoute>();
    route->variant_index = kIndex;
    route->type_id = type_id;
    route->jetstream = options.jetstream;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      route->subjects[p] = SubjectFor(subject, static_cast<MessagePriority>(p));
    }
    route->subscribe = &SubscribeOutbound<T, Codec>;
    // Routes of one subject share its numbers, also with a route of it
    // stopped earlier: the receiver tracks a stream per subject, whatever
    // types travel on it, and a number used twice would be a duplicate.
    auto& sequence = subject_sequences_[subject];
    if (!sequence) sequence = std::make_shared<SubjectSequence>();
    route->sequence = sequence;
    if (started_) {
      // Running: forwarding starts now. The route is complete before the
      // bus subscription publishes it to the consumer thread.
      route->handle = route->subscribe(*this, *route);
      if (!route->handle.IsValid()) return false;  // the bus's table for T is full
    }
    outbound_.push_back(std::move(route));
    return true;
  }

  template <typename T, typename Codec>
  bool AddInbound(std::string subject, std::uint16_t type_id, ReceiveOptions route) {
    constexpr std::size_t kIndex = sluice::detail::VariantIndex<T, Payload>::kValue;
    if (stopping_ || type_id == 0 || !IsReceiveSubject(subject)) return false;
    // A stream needs a durable name; a queue group shares a core
    // subscription, not a stream's consumer.
    if (route.stream.empty() != route.durable.empty() ||
        (!route.stream.empty() && !route.queue_group.empty())) {
      return false;
    }
    const DeliverFunction deliver = &Deliver<T, Codec>;
    bool known_type = false;
    for (const InboundType& type : inbound_types_) {
      if (type.type_id != type_id) continue;
      // One type and one codec per id: a second codec would never be used.
      if (type.variant_index != kIndex || type.deliver != deliver) return false;
      known_type = true;
    }
    for (InboundSubject& known : inbound_subjects_) {
      if (known.subject != subject) {
        // Two subjects one frame could match would hand it to two
        // subscriptions: refused.
        if (SubjectsOverlap(known.subject, subject)) return false;
        continue;
      }
      if (known.queue_group != route.queue_group || known.stream != route.stream ||
          known.durable != route.durable) {
        return false;
      }
      const bool has_type =
          std::find(known.type_ids.begin(), known.type_ids.end(), type_id) != known.type_ids.end();
      if (has_type) return true;
      // A running subscription's types are fixed: StopReceiving, then
      // Receive again with every type.
      if (started_) return false;
      if (!known_type) inbound_types_.push_back({type_id, kIndex, deliver});
      known.type_ids.push_back(type_id);
      return true;
    }
    if (!known_type) inbound_types_.push_back({type_id, kIndex, deliver});
    inbound_subjects_.push_back({std::move(subject),
                                 {type_id},
                                 std::move(route.queue_group),
                                 std::move(route.stream),
                                 std::move(route.durable)});
    if (!started_) return true;
    // Running: subscribe now, and return once the server has the
    // subscriptions.
    const InboundSubject& added = inbound_subjects_.back();
    natsStatus status = NATS_OK;
    for (std::size_t p = 0; p < kPriorityCount && status == NATS_OK; ++p) {
      status = SubscribeInbound(added, static_cast<MessagePriority>(p));
    }
    if (status == NATS_OK) {
      status = natsConnection_FlushTimeout(connection_, options_.connect_timeout.count());
    }
    if (status == NATS_OK && SubscriptionRefused(added)) status = NATS_NOT_PERMITTED;
    if (status != NATS_OK) {
      const std::string failed = added.subject;
      UnsubscribeInbound(failed);
      inbound_subjects_.pop_back();
      if (!known_type) inbound_types_.pop_back();
      return false;
    }
    return true;
  }

  // ---- Outbound (the bus's consumer thread) -----------------------------------

  template <typename T, typename Codec>
  static SubscriptionHandle SubscribeOutbound(Bridge& bridge, OutboundRoute& route) {
    Bridge* self = &bridge;
    OutboundRoute* target = &route;
    return bridge.bus_.template Subscribe<T>(
        [self, target](const T& message, const MessageHeader& header) {
          self->template Send<T, Codec>(*target, message, header);
        });
  }

  template <typename T, typename Codec>
  void Send(OutboundRoute& route, const T& message, const MessageHeader& header) {
    const auto p = static_cast<std::size_t>(header.priority);
    // The second loop guard: what came from NATS does not go back.
    if ((header.sender_id & options_.remote_sender_flag) != 0) {
      Count(counters_.loop_suppressed);
      return;
    }
    std::string& frame = route.buffer;
    frame.assign(kFrameHeaderSize, '\0');
    if (!Encode<T, Codec>(message, frame) || !FitsBound(frame.size())) {
      Count(counters_.encode_failed);
      return;
    }
    FrameHeader frame_header;
    frame_header.priority = header.priority;
    frame_header.type_id = route.type_id;
    frame_header.sender_id = header.sender_id;
    frame_header.payload_size = static_cast<std::uint32_t>(frame.size() - kFrameHeaderSize);
    frame_header.msg_id = header.msg_id;
    frame_header.timestamp_ns = header.timestamp_ns;
    frame_header.origin_id = origin_id_;
    frame_header.instance_id = instance_id_;
    // Every frame handed to the client takes the subject's next number,
    // also one the client then refuses: the receiver sees it as a gap.
    frame_header.sequence = ++(*route.sequence)[p];
    EncodeFrameHeader(frame_header, reinterpret_cast<std::uint8_t*>(frame.data()));
    if (route.jetstream) {
      PublishToStream(route, p, frame, frame_header);
      return;
    }
    const natsStatus status = natsConnection_Publish(connection_, route.subjects[p].c_str(),
                                                     frame.data(), static_cast<int>(frame.size()));
    if (status == NATS_OK) {
      Count(counters_.frames_sent[p]);
    } else if (status == NATS_MAX_PAYLOAD) {
      // The server's bound shrank (a reconnection to another server) before
      // OnReconnected refreshed ours: the frame exceeded the bound.
      Count(counters_.encode_failed);
    } else {
      if (status == NATS_INSUFFICIENT_BUFFER) Count(counters_.reconnect_buffer_overflows);
      Count(counters_.send_dropped[p]);
    }
  }

  // At least once (ForwardOptions::jetstream): the frame goes to the
  // client's asynchronous JetStream publish, which keeps it until the
  // stream acknowledges it, with a Nats-Msg-Id the stream deduplicates by.
  // With jetstream_max_pending unacknowledged, the client stalls the call;
  // the consumer thread tries again until there is room or the bridge
  // closes: backpressure into the bus, never a silent drop.
  void PublishToStream(OutboundRoute& route, std::size_t p, const std::string& frame,
                       const FrameHeader& header) {
    natsMsg* message = nullptr;
    natsStatus status = natsMsg_Create(&message, route.subjects[p].c_str(), nullptr, frame.data(),
                                       static_cast<int>(frame.size()));
    if (status == NATS_OK) {
      const std::string id = StreamMessageId(route.subjects[p], header);
      status = natsMsgHeader_Set(message, "Nats-Msg-Id", id.c_str());
    }
    // Release: pairs with ResendLoop's acquire (set before the first
    // asynchronous publish, which makes the client's pending list).
    if (status == NATS_OK) published_to_stream_.store(true, std::memory_order_release);
    while (status == NATS_OK) {
      status = js_PublishMsgAsync(js_, &message, nullptr);
      // Acquire: pairs with GiveUpStreamWaits's release.
      if (status != NATS_TIMEOUT || give_up_stream_waits_.load(std::memory_order_acquire)) break;
      status = NATS_OK;  // stalled at the window: again
    }
    natsMsg_Destroy(message);  // null once the client has it
    if (status == NATS_OK) {
      Count(counters_.frames_sent[p]);
    } else {
      Count(counters_.send_dropped[p]);
    }
  }

  // Unique per frame: its stream and number.
  static std::string StreamMessageId(const std::string& subject, const FrameHeader& header) {
    char prefix[48];
    std::snprintf(prefix, sizeof prefix, "%016llx-%016llx-",
                  static_cast<unsigned long long>(header.origin_id),
                  static_cast<unsigned long long>(header.instance_id));
    return prefix + subject + "-" + std::to_string(header.sequence);
  }

  // The stream did not acknowledge a publish (no stream yet, as while a
  // restarted server recovers it, or the acknowledgement timed out): it is
  // published again after a pause, unless the bridge is closing (the
  // client then frees it). Runs on a client thread.
  //
  // Nothing is published or waited for here, on the client's thread that
  // handles every acknowledgement: the message is taken (the field cleared,
  // so the client does not free it) and queued for the resender thread.
  static void OnStreamPublishError(jsCtx*, jsPubAckErr* error, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    if (error->Msg == nullptr) return;
    natsMsg* message = error->Msg;
    error->Msg = nullptr;
    {
      std::lock_guard<std::mutex> lock(self->resend_mutex_);
      self->retry_.push_back(message);
    }
    self->resend_changed_.notify_one();
  }

  // The priority a subject's suffix names (SubjectFor), MEDIUM if none.
  static std::size_t PriorityIndexOf(std::string_view subject) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const std::string_view suffix = kPrioritySubjects[p];
      if (subject.size() > suffix.size() && subject[subject.size() - suffix.size() - 1] == '.' &&
          subject.substr(subject.size() - suffix.size()) == suffix) {
        return p;
      }
    }
    return static_cast<std::size_t>(MessagePriority::MEDIUM);
  }

  // A message the client gave back (an error, or unacknowledged at close):
  // counted as send_dropped under its subject's priority, and freed.
  void CountLost(natsMsg* message) noexcept {
    const char* subject = natsMsg_GetSubject(message);
    Count(counters_.send_dropped[PriorityIndexOf(subject == nullptr ? "" : subject)]);
    natsMsg_Destroy(message);
  }

  // After a reconnection, every publish the stream has not acknowledged is
  // published again (the acknowledgements of a server that died never
  // come); the stream drops the ones it had stored, by their
  // Nats-Msg-Id. On the resender thread, woken by OnReconnected.
  void ResendLoop() {
    std::unique_lock<std::mutex> lock(resend_mutex_);
    for (;;) {
      resend_changed_.wait(lock,
                           [this] { return resend_requested_ || resend_stop_ || !retry_.empty(); });
      if (resend_stop_) return;
      // Errors answered by the stream: published again after a pause (a
      // restarted server recovering its streams answers "no stream" for a
      // moment), on this thread.
      std::vector<natsMsg*> retry;
      retry.swap(retry_);
      if (!retry.empty()) {
        resend_changed_.wait_for(lock, options_.reconnect_wait, [this] { return resend_stop_; });
        lock.unlock();
        for (natsMsg*& message : retry) {
          natsStatus status = NATS_TIMEOUT;
          // Acquire: pairs with BeginOwnClose's release.
          while (status == NATS_TIMEOUT && !closing_.load(std::memory_order_acquire)) {
            status = js_PublishMsgAsync(js_, &message, nullptr);
          }
          if (status == NATS_OK) {
            Count(counters_.jetstream_resent);
          } else {
            CountLost(message);
          }
        }
        lock.lock();
        continue;
      }
      resend_requested_ = false;
      lock.unlock();
      natsMsgList pending{};
      // Acquire: pairs with PublishToStream's release. nats.c 3.4 crashes
      // here for a context that has never published asynchronously.
      if (published_to_stream_.load(std::memory_order_acquire) &&
          js_PublishAsyncGetPendingList(&pending, js_) == NATS_OK) {
        for (int i = 0; i < pending.Count; ++i) {
          natsStatus status = NATS_TIMEOUT;
          // Acquire: pairs with BeginOwnClose's release.
          while (status == NATS_TIMEOUT && !closing_.load(std::memory_order_acquire)) {
            status = js_PublishMsgAsync(js_, &pending.Msgs[i], nullptr);
          }
          if (status == NATS_OK) {
            Count(counters_.jetstream_resent);
          } else {
            CountLost(pending.Msgs[i]);
            pending.Msgs[i] = nullptr;
          }
        }
        natsMsgList_Destroy(&pending);
      }
      lock.lock();
    }
  }

  // The codec's Encode. An exception is counted as a failed encode, then
  // rethrown: the bus counts it in processing_errors and reports it as it
  // does for any subscriber that throws.
  template <typename T, typename Codec>
  bool Encode(const T& message, std::string& frame) {
#if SLUICE_HAS_EXCEPTIONS
    try {
      return Codec::Encode(message, frame);
    } catch (...) {
      Count(counters_.encode_failed);
      throw;
    }
#else
    return Codec::Encode(message, frame);
#endif
  }

  // The whole frame against both bounds: its payload against max_payload
  // (what the receiving decoder checks), and header and payload together
  // against the server's max_payload (what the server accepts).
  bool FitsBound(std::size_t frame_size) const noexcept {
    if (frame_size - kFrameHeaderSize > options_.max_payload) return false;
    // Relaxed: an independent value, read at connection and reconnection;
    // a publish the server's newer bound refuses is caught in Send.
    const std::int64_t server = server_max_payload_.load(std::memory_order_relaxed);
    return server <= 0 || frame_size <= static_cast<std::uint64_t>(server);
  }

  void UnsubscribeOutbound() noexcept {
    for (const auto& route : outbound_) {
      // Waits for a batch in flight: no Send runs after this.
      if (route->handle.IsValid()) (void)bus_.Unsubscribe(route->handle);
      route->handle = SubscriptionHandle();
    }
  }

  // ---- Inbound (the client's threads) -------------------------------------------

  natsStatus SubscribeInbound(const InboundSubject& subject, MessagePriority priority) {
    auto inbound = std::make_unique<InboundSubscription>();
    inbound->bridge = this;
    inbound->priority = priority;
    inbound->subject = SubjectFor(subject.subject, priority);
    inbound->route_subject = subject.subject;
    // A member of a queue group, or one of the bridges sharing a durable
    // consumer, sees part of each stream: no gaps counted (a JetStream
    // route loses nothing to count in any case).
    inbound->count_gaps = subject.queue_group.empty() && subject.stream.empty();
    for (const std::uint16_t id : subject.type_ids) {
      for (const InboundType& type : inbound_types_) {
        if (type.type_id == id) inbound->types.push_back(type);
      }
    }
    // What the handler reads (the subscription's own types, options_) is
    // complete and never written again: the client starts the
    // subscription's thread inside this call (thread creation orders these
    // writes before everything the thread does).
    if (!subject.stream.empty()) return SubscribePull(subject, std::move(inbound));
    natsStatus status =
        subject.queue_group.empty()
            ? natsConnection_Subscribe(&inbound->subscription, connection_,
                                       inbound->subject.c_str(), &OnMessage, inbound.get())
            : natsConnection_QueueSubscribe(&inbound->subscription, connection_,
                                            inbound->subject.c_str(), subject.queue_group.c_str(),
                                            &OnMessage, inbound.get());
    if (status != NATS_OK) return status;
    InboundSubscription* added = inbound.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++live_subscriptions_;
      inbound_.push_back(std::move(inbound));
    }
    status = natsSubscription_SetOnCompleteCB(added->subscription, &OnSubscriptionComplete, added);
    if (status != NATS_OK) {
      // No completion will be reported for it: not counted as live.
      std::lock_guard<std::mutex> lock(mutex_);
      --live_subscriptions_;
      added->completed = true;
    } else {
      status = natsSubscription_SetPendingLimits(
          added->subscription, options_.pending_messages_limit, options_.pending_bytes_limit);
    }
    return status;
  }

  // A durable pull consumer for one priority of a JetStream route, read by
  // a thread of its own: it fetches only what the bus can admit at that
  // priority (FetchLoop). No completion callback: the thread is joined.
  natsStatus SubscribePull(const InboundSubject& subject,
                           std::unique_ptr<InboundSubscription> inbound) {
    const std::string durable =
        subject.durable + "_" +
        std::string(kPrioritySubjects[static_cast<std::size_t>(inbound->priority)]);
    jsSubOptions sub_options;
    jsSubOptions_Init(&sub_options);
    sub_options.Stream = subject.stream.c_str();
    sub_options.Config.Durable = durable.c_str();
    sub_options.Config.AckPolicy = js_AckExplicit;
    sub_options.Config.AckWait = options_.jetstream_ack_wait.count() * 1'000'000;  // ns
    sub_options.Config.MaxAckPending = options_.jetstream_max_ack_pending;
    jsErrCode error = static_cast<jsErrCode>(0);
    natsStatus status = js_PullSubscribe(&inbound->subscription, js_, inbound->subject.c_str(),
                                         durable.c_str(), nullptr, &sub_options, &error);
    if (status != NATS_OK) return status;
    inbound->pull = true;
    inbound->completed = true;  // nothing for the client to complete
    InboundSubscription* added = inbound.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      inbound_.push_back(std::move(inbound));
    }
    // The subscription's fields are complete: thread creation orders them
    // before everything the thread does.
    added->fetcher = std::thread([this, added] { FetchLoop(*added); });
    return NATS_OK;
  }

  void FetchLoop(InboundSubscription& inbound) {
    const MessagePriority priority = inbound.priority;
    // nats.c before 3.8 writes past its buffer when a batched fetch is
    // answered in parts (nats.c pull request 749): one message a fetch
    // there, whatever jetstream_fetch_batch says.
    const int most =
        nats_GetVersionNumber() >= 0x030800 ? std::max(1, options_.jetstream_fetch_batch) : 1;
    // In slices, so that StopFetching (Shutdown) does not wait out a long
    // reconnect_wait after an error. Acquire: pairs with StopFetching's
    // release store.
    const auto pause = [&inbound](std::chrono::microseconds wait) {
      const auto until = std::chrono::steady_clock::now() + wait;
      while (!inbound.stop.load(std::memory_order_acquire)) {
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) return;
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(5)));
      }
    };
    // Acquire: pairs with the release store in StopFetching.
    while (!inbound.stop.load(std::memory_order_acquire)) {
      // A closed bus admits nothing: what the stream holds stays there,
      // for the next consumer of the durable.
      if (bus_.IsClosed()) {
        pause(std::chrono::milliseconds(10));
        continue;
      }
      // As many as admission would take now (the bus's own figure); none:
      // wait for the consumer to make room, in slices so that StopFetching
      // is seen.
      const std::size_t room = bus_.RoomFor(priority);
      if (room == 0) {
        (void)bus_.WaitForRoom(priority, detail::kFetchRoomSlice);
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
      for (int i = 0; i < list.Count; ++i) HandleStreamMessage(inbound, list.Msgs[i]);
      natsMsgList_Destroy(&list);
    }
  }

  // One message of a JetStream consumer: handled as a core frame, then
  // acknowledged when the bus admitted it or had admitted it before (a
  // redelivery), terminated when it can never be admitted (a bad frame:
  // the stream stops redelivering it), and handed back (a negative
  // acknowledgement, redelivered after a pause) when the bus refused it.
  void HandleStreamMessage(InboundSubscription& inbound, natsMsg* message) noexcept {
    Count(counters_.frames_received);
    const int length = natsMsg_GetDataLength(message);
    const char* subject = natsMsg_GetSubject(message);
    FrameView view;
    FrameError error =
        DecodeFrame(reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message)),
                    length < 0 ? 0 : static_cast<std::size_t>(length), &view, options_.max_payload);
    bool admitted = false;
    if (error == FrameError::kNone) {
      if (view.header.origin_id == origin_id_) {
        Count(counters_.echo_suppressed);
        (void)natsMsg_Ack(message, nullptr);
        return;
      }
      error = Route(inbound, subject == nullptr ? std::string_view() : subject, view, &admitted);
    }
    if (error == FrameError::kNone) {
      if (admitted) {
        (void)natsMsg_Ack(message, nullptr);
      } else {
        Count(counters_.handed_back[static_cast<std::size_t>(inbound.priority)]);
        (void)natsMsg_NakWithDelay(
            message, options_.reconnect_wait.count() > 0 ? options_.reconnect_wait.count() : 100,
            nullptr);
      }
      return;
    }
    Count(counters_.rejected[static_cast<std::size_t>(error)]);
    // Admitted before (a redelivery): acknowledged. Anything else refused
    // would be refused again: terminated.
    if (error == FrameError::kDuplicate) {
      (void)natsMsg_Ack(message, nullptr);
    } else {
      (void)natsMsg_Term(message, nullptr);
    }
    Report(error, inbound.subject);
  }

  static void OnMessage(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    auto* inbound = static_cast<InboundSubscription*>(closure);
    const int length = natsMsg_GetDataLength(message);
    const char* subject = natsMsg_GetSubject(message);
    inbound->bridge->HandleFrame(*inbound, subject == nullptr ? std::string_view() : subject,
                                 reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message)),
                                 length < 0 ? 0 : static_cast<std::size_t>(length));
    natsMsg_Destroy(message);
  }

  // Never throws: user code it calls (a codec, on_reject) is caught here,
  // since an exception must not leave the client's thread.
  void HandleFrame(const InboundSubscription& inbound, std::string_view subject,
                   const std::uint8_t* data, std::size_t size) noexcept {
    Count(counters_.frames_received);
    FrameView view;
    FrameError error = DecodeFrame(data, size, &view, options_.max_payload);
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
  // (noted only once admitted, a refusal is handed back: *admitted false).
  FrameError Route(const InboundSubscription& inbound, std::string_view subject,
                   const FrameView& view, bool* admitted) noexcept {
    // Each priority has its own subscription, queue and thread: a frame on
    // another priority's subject would take the wrong one.
    if (view.header.priority != inbound.priority) return FrameError::kPriorityMismatch;
    const auto& allowed = options_.allowed_origins[static_cast<std::size_t>(inbound.priority)];
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), view.header.origin_id) == allowed.end()) {
      return FrameError::kOriginNotAllowed;
    }
    // The frame is judged on its stream before its type and payload: a frame
    // that arrived is never a gap, whatever is refused after this.
    const bool at_least_once = admitted != nullptr;
    // A JetStream message is judged now and noted only once admitted (or
    // refused for good): one handed back comes again as new. One behind the
    // duplicate check's window is admitted (at least once): it may never
    // have been admitted, having been handed back (here, or by another
    // bridge on the durable) while the stream moved on, and the stream
    // redelivers only what was not acknowledged.
    bool behind_window = false;
    const FrameError sequence_error =
        CheckSequence(subject, view.header, inbound.count_gaps, /*note=*/!at_least_once,
                      at_least_once ? &behind_window : nullptr);
    if (sequence_error != FrameError::kNone) return sequence_error;
    const std::uint16_t id = view.header.type_id;
    const auto type = std::find_if(inbound.types.begin(), inbound.types.end(),
                                   [id](const InboundType& t) { return t.type_id == id; });
    if (type == inbound.types.end()) {
      if (at_least_once && !behind_window) {
        (void)CheckSequence(subject, view.header, inbound.count_gaps, true);
      }
      return FrameError::kUnknownType;  // not given for this subject
    }
    bool was_admitted = false;
    FrameError result = FrameError::kNone;
    {
#if SLUICE_HAS_EXCEPTIONS
      try {
        result = type->deliver(*this, view, at_least_once, &was_admitted);
      } catch (...) {
        result = FrameError::kDecodeThrew;
      }
#else
      result = type->deliver(*this, view, at_least_once, &was_admitted);
#endif
    }
    if (at_least_once) {
      *admitted = was_admitted;
      // Noted now that it was admitted (its redelivery is then a
      // duplicate) or refused for good; one handed back is not noted.
      if (result != FrameError::kNone || was_admitted) {
        if (!behind_window) {
          (void)CheckSequence(subject, view.header, inbound.count_gaps, /*note=*/true);
        } else if (was_admitted) {
          Count(counters_.jetstream_behind_window);
        }
      }
    }
    return result;
  }

  // The frame's place in its stream: a duplicate or a stale number is
  // refused (so a redelivery or a replay is never dispatched twice), a gap
  // or a late frame is counted. A version 1 frame has no stream.
  // `note` false: judged, not noted (nor counted) unless refused.
  // `behind_window` (with `note` false): a number behind the window is
  // not refused but reported there, uncounted.
  FrameError CheckSequence(std::string_view subject, const FrameHeader& header, bool count_gaps,
                           bool note, bool* behind_window = nullptr) noexcept {
    // Numbers start at 1: a version 2 frame numbered 0 is as unsequenced as
    // a version 1 frame (else it would pass by the duplicate check).
    if (header.version == kFrameVersion1 || header.sequence == 0) {
      if (!options_.accept_version_1) return FrameError::kUnsequenced;
      if (note) Count(counters_.unsequenced);
      return FrameError::kNone;
    }
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      std::lock_guard<std::mutex> lock(streams_mutex_);
      if (!note) {
        const StreamVerdict verdict =
            streams_.Peek(header.origin_id, header.instance_id, subject, header.sequence);
        if (verdict == StreamVerdict::kStale && behind_window != nullptr) {
          *behind_window = true;
          return FrameError::kNone;
        }
        if (verdict != StreamVerdict::kDuplicate && verdict != StreamVerdict::kStale) {
          return FrameError::kNone;
        }
      }
      switch (streams_.Note(header.origin_id, header.instance_id, subject, header.sequence,
                            count_gaps)) {
        case StreamVerdict::kDuplicate:
          return FrameError::kDuplicate;
        case StreamVerdict::kStale:
          return FrameError::kStale;
        default:
          return FrameError::kNone;
      }
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // The tracker could not allocate a new stream: deliver untracked
      // rather than lose the frame.
      Count(counters_.unsequenced);
      return FrameError::kNone;
    }
#endif
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

  template <typename T, typename Codec>
  static FrameError Deliver(Bridge& bridge, const FrameView& view, bool hand_back, bool* admitted) {
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
      T message{std::move(*value), provenance};
      *admitted = bridge.Admit(message, frame, hand_back);
    } else {
      *admitted = bridge.Admit(*value, view.header, hand_back);
    }
    return FrameError::kNone;
  }

  // Publishes into the bus with the frame's priority. A refusal for room is
  // retried, polling the depth against the priority's threshold, until the
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
      if (bus_.PublishAttempt(message, sender, header.priority)) {
        Count(counters_.delivered[p]);
        return true;
      }
      // Waits on the bus's own room (WaitForRoom: the consumer's batch that
      // makes room wakes it with a parker), then tries again; another
      // producer may take the room first.
      const auto deadline = std::chrono::steady_clock::now() + wait;
      for (;;) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) break;
        if (!bus_.WaitForRoom(header.priority, left)) break;  // timed out, or closed
        if (bus_.PublishAttempt(message, sender, header.priority)) {
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

  // ---- Client callbacks ------------------------------------------------------------

  static void OnAsyncError(natsConnection*, natsSubscription*, natsStatus status, void* closure) {
    // Slow-consumer drops are read from the subscriptions (GetStatistics);
    // setting a handler keeps the client from printing them. A permission
    // violation is the server refusing a publish (or a subscription) this
    // connection made: counted, since the frame is lost.
    if (status == NATS_NOT_PERMITTED) {
      Count(static_cast<Bridge*>(closure)->counters_.permission_violations);
    }
  }

  // Whether the server refused one of `subjects` (with priority suffixes)
  // as a subscription: it answers a SUB it does not permit with an error
  // the client keeps as the connection's last, before the flush's PONG.
  bool SubscriptionRefused(const InboundSubject& subject) const {
    const char* text = nullptr;
    if (natsConnection_GetLastError(connection_, &text) != NATS_NOT_PERMITTED || text == nullptr) {
      return false;
    }
    const std::string_view error(text);
    if (error.find("ubscription") == std::string_view::npos) return false;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const std::string quoted =
          "\"" + SubjectFor(subject.subject, static_cast<MessagePriority>(p)) + "\"";
      if (error.find(quoted) != std::string_view::npos) return true;
    }
    return false;
  }

  // The client calls it when the connection is lost, and also when it is
  // closed (natsConnection_Close and the end of a drain call it too).
  static void OnDisconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    // A lost connection keeps its subscriptions (the client re-sends them
    // on reconnection), and no message arrives until it is back: their
    // drops are read now, in case the client gives up and closes it (it
    // then no longer answers for them).
    self->KeepSlowConsumerDrops();
    // Acquire: pairs with the release in BeginOwnClose, stored before the
    // bridge closes or drains the connection itself (the client also
    // orders the two through its callback queue's lock).
    if (!self->closing_.load(std::memory_order_acquire)) Count(self->counters_.disconnects);
    self->connected_.store(false, std::memory_order_relaxed);
  }

  static void OnReconnected(natsConnection* connection, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    Count(self->counters_.reconnects);
    {
      std::lock_guard<std::mutex> lock(self->resend_mutex_);
      self->resend_requested_ = true;
    }
    self->resend_changed_.notify_one();
    // Relaxed: an independent bound; see FitsBound. The server may be
    // another one, with another max_payload.
    self->server_max_payload_.store(natsConnection_GetMaxPayload(connection),
                                    std::memory_order_relaxed);
    self->connected_.store(true, std::memory_order_relaxed);
  }

  // The client's last call for the connection. The mutex orders what the
  // callback did before the waiter goes on to free the bridge.
  static void OnClosed(natsConnection*, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->connected_.store(false, std::memory_order_relaxed);
    self->closed_ = true;
    self->changed_.notify_all();
  }

  // The client calls it once a subscription's handler has returned for the
  // last time.
  static void OnSubscriptionComplete(void* closure) {
    auto* inbound = static_cast<InboundSubscription*>(closure);
    Bridge* self = inbound->bridge;
    std::lock_guard<std::mutex> lock(self->mutex_);
    --self->live_subscriptions_;
    inbound->completed = true;
    self->changed_.notify_all();
  }

  // Removes the subscriptions of an inbound subject (StopReceiving, or a
  // Receive that failed while running): unsubscribes them, waits until
  // each has handled its last frame, keeps their slow-consumer drops and
  // frees them.
  void UnsubscribeInbound(const std::string& route_subject) {
    std::vector<InboundSubscription*> removed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      (void)ReadSlowConsumerDrops();
      for (const auto& inbound : inbound_) {
        if (inbound->route_subject == route_subject) removed.push_back(inbound.get());
      }
    }
    for (InboundSubscription* inbound : removed) {
      if (!inbound->pull) continue;
      // Release: pairs with FetchLoop's acquire load.
      inbound->stop.store(true, std::memory_order_release);
      if (inbound->fetcher.joinable()) inbound->fetcher.join();
    }
    for (InboundSubscription* inbound : removed) {
      // A pull consumer stays on the server (its durable state is the
      // route's); a core subscription is unsubscribed. A failure means the
      // connection is closed: the completion comes then.
      if (!inbound->pull) (void)natsSubscription_Unsubscribe(inbound->subscription);
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] {
      return std::all_of(removed.begin(), removed.end(),
                         [](const InboundSubscription* inbound) { return inbound->completed; });
    });
    for (InboundSubscription* inbound : removed) {
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

  // Before the bridge closes or drains the connection itself: the
  // disconnection the client then reports is not counted.
  void BeginOwnClose() noexcept { closing_.store(true, std::memory_order_release); }

  // Release: pairs with PublishToStream's acquire load.
  void GiveUpStreamWaits() noexcept {
    give_up_stream_waits_.store(true, std::memory_order_release);
  }

  bool WaitClosed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return closed_; });
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

  // Stops forwarding, closes the connection (at once, or nothing when a
  // drain has closed it already), and frees the client's objects once none
  // of its callbacks can run: after the connection has closed (its last
  // callback) and every subscription's handler has returned for the last
  // time. Neither wait has a bound: a user callback on a client thread (a
  // codec's Decode, on_reject, an admission_wait) is waited for, however
  // long it takes, since the bridge it uses is freed after this.
  void Release() {
    if (connection_ == nullptr) return;
    GiveUpStreamWaits();
    UnsubscribeOutbound();
    StopFetching();
    KeepSlowConsumerDrops();
    BeginOwnClose();
    StopResending();
    natsConnection_Close(connection_);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return closed_ && live_subscriptions_ == 0; });
      for (const auto& inbound : inbound_) {
        slow_consumer_released_[static_cast<std::size_t>(inbound->priority)] +=
            inbound->dropped_seen;
        natsSubscription_Destroy(inbound->subscription);
      }
      inbound_.clear();
    }
    CountUnacknowledged();
    if (js_ != nullptr) jsCtx_Destroy(js_);
    js_ = nullptr;
    natsConnection_Destroy(connection_);
    connection_ = nullptr;
  }

  // Stops and joins the JetStream fetch threads (they use the bus and the
  // subscriptions, which outlive them).
  void StopFetching() {
    std::vector<InboundSubscription*> pulls;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& inbound : inbound_) {
        if (inbound->pull) pulls.push_back(inbound.get());
      }
    }
    // Release: pairs with FetchLoop's acquire load.
    for (InboundSubscription* inbound : pulls) inbound->stop.store(true, std::memory_order_release);
    for (InboundSubscription* inbound : pulls) {
      if (inbound->fetcher.joinable()) inbound->fetcher.join();
      // Destroyed now, not drained with the connection: the client deletes
      // the durable consumer after an explicit unsubscribe or drain, but not
      // on destruction (the durable and what it holds are the route's), and
      // a pull subscription's drain never completes, so the connection's
      // drain would wait out Shutdown's whole timeout. Under the mutex:
      // the statistics read the subscriptions under it.
      std::lock_guard<std::mutex> lock(mutex_);
      natsSubscription_Destroy(inbound->subscription);
      inbound->subscription = nullptr;
    }
  }

  // At close: every JetStream publish the stream has not acknowledged, and
  // every one waiting to be published again, is lost: counted as
  // send_dropped (each was counted in frames_sent when handed over).
  void CountUnacknowledged() {
    std::vector<natsMsg*> retry;
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      retry.swap(retry_);
    }
    for (natsMsg* message : retry) CountLost(message);
    natsMsgList pending{};
    // Acquire: pairs with PublishToStream's release (see ResendLoop).
    if (js_ != nullptr && published_to_stream_.load(std::memory_order_acquire) &&
        js_PublishAsyncGetPendingList(&pending, js_) == NATS_OK) {
      for (int i = 0; i < pending.Count; ++i) {
        CountLost(pending.Msgs[i]);
        pending.Msgs[i] = nullptr;
      }
      natsMsgList_Destroy(&pending);
    }
  }

  void StopResending() {
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      resend_stop_ = true;
    }
    resend_changed_.notify_one();
    if (resender_.joinable()) resender_.join();
  }

  Bus& bus_;
  BridgeOptions options_;
  std::uint64_t origin_id_ = 0;
  bool started_ = false;
  bool stopping_ = false;  // Shutdown has begun; guarded by routes_mutex_
  natsConnection* connection_ = nullptr;
  // Serialises the calls that change routes (Forward, Receive, the Stop
  // calls, Start, Shutdown); the client's threads never take it.
  mutable std::mutex routes_mutex_;
  std::vector<std::unique_ptr<OutboundRoute>> outbound_;
  std::vector<std::unique_ptr<OutboundRoute>> retired_outbound_;  // StopForwarding
  // Each forwarded subject's numbers since Start, kept after its routes stop.
  std::map<std::string, std::shared_ptr<SubjectSequence>> subject_sequences_;
  std::vector<InboundType> inbound_types_;
  std::vector<InboundSubject> inbound_subjects_;
  Counters counters_;
  // JetStream: the context (made at Start), and the thread that publishes
  // again what the stream had not acknowledged when the connection was
  // lost (ResendLoop), woken through resend_mutex_ and resend_changed_.
  jsCtx* js_ = nullptr;
  std::thread resender_;
  std::mutex resend_mutex_;
  std::condition_variable resend_changed_;
  bool resend_requested_ = false;  // guarded by resend_mutex_
  bool resend_stop_ = false;       // guarded by resend_mutex_
  std::vector<natsMsg*> retry_;    // answered with an error; guarded by resend_mutex_
  std::atomic<bool> published_to_stream_{false};
  // Set by Shutdown and the destructor: the consumer thread stops waiting
  // for room in the JetStream window.
  std::atomic<bool> give_up_stream_waits_{false};
  // The outbound streams' instance, drawn at Start (consumer thread reads).
  std::uint64_t instance_id_ = 0;
  // The inbound streams, shared by the client's threads.
  mutable std::mutex streams_mutex_;
  StreamTracker streams_;
  std::atomic<bool> connected_{false};
  std::atomic<bool> closing_{false};  // the bridge is closing the connection
  // The server's max_payload (0: not connected yet).
  std::atomic<std::int64_t> server_max_payload_{0};
  // Guards inbound_ (and each one's dropped_seen) against GetStatistics,
  // and the fields below.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<InboundSubscription>> inbound_;
  PriorityCounts slow_consumer_released_{};
  bool closed_ = false;
  int live_subscriptions_ = 0;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
