// The NATS bridge's options and results: the connection (BridgeOptions,
// TlsOptions), what a route may add (ForwardOptions, ReceiveOptions), how
// Shutdown drains and what it reports, and the checks the bridge makes of
// them before it uses them.
#pragma once

#include <nats/nats.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/frame.hpp"

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

// A key of signed frames (docs/nats.md, "Signed frames"): a secret that one
// origin signs its frames with, shared by it and the receivers that check
// them. An HMAC key: whoever holds it can sign as that origin.
struct FrameKey {
  std::uint64_t origin_id = 0;  // the origin whose frames it signs (not 0)
  std::uint32_t key_id = 0;     // which of that origin's keys (to roll keys over)
  std::string secret;           // kMinFrameKeySize bytes or more
};
// The shortest secret a FrameKey may have: 32 bytes, SHA-256's output, as
// RFC 2104 advises for HMAC keys.
inline constexpr std::size_t kMinFrameKeySize = 32;

// The longest heartbeat interval: 2^32 - 1 ms (about 49.7 days).
inline constexpr std::chrono::milliseconds kMaxHeartbeatInterval{0xFFFFFFFFLL};

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
  // A random wait of up to this much added to reconnect_wait (nats.c's
  // defaults: 100 ms, 1 s over TLS), so that a fleet whose server went away
  // does not come back all at once.
  std::chrono::milliseconds reconnect_jitter{100};
  std::chrono::milliseconds reconnect_jitter_tls{1000};
  int reconnect_buffer_bytes = 8 * 1024 * 1024;
  // Keep retrying the first connection instead of failing Start(): Start
  // then blocks until a server answers or max_reconnect attempts are spent
  // (with max_reconnect = -1, until a server answers).
  bool retry_on_failed_connect = false;
  std::chrono::milliseconds connect_timeout{2000};
  // How often the client pings the server, and how many pings may go
  // unanswered before it deems the connection lost and reconnects (nats.c's
  // defaults: 2 minutes and 2). A shorter interval finds a dead server or a
  // silently dropped route sooner, at a ping a period. Each must be 1 or
  // more: Start fails with NATS_INVALID_ARG otherwise.
  std::chrono::milliseconds ping_interval{120'000};
  int max_pings_out = 2;
  // Send each frame as it is published instead of letting the client
  // gather frames into larger writes (nats.c's SendAsap): lower latency for
  // a message on its own, fewer messages a second under load.
  bool send_asap = false;
  // Heartbeats (docs/nats.md, "Heartbeats"): above 0, each forwarded core
  // NATS stream (subject and priority) that has sent a frame and then been
  // idle this long gets a heartbeat frame carrying its last number, and
  // again every interval while it stays idle; a receiver counts the
  // numbers it did not get as gaps, and a stream whose heartbeats stop as
  // silent. 0 (or less): none sent. At most kMaxHeartbeatInterval (it
  // travels in 4 bytes of milliseconds), else Start fails with
  // NATS_INVALID_ARG. Received heartbeats are always read.
  std::chrono::milliseconds heartbeat_interval{0};
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
  // Signed frames (docs/nats.md, "Signed frames"; needs the bridge built
  // with OpenSSL's libcrypto, SLUICE_NATS_HAS_SIGNING). signing_key: with a
  // secret, every frame this bridge sends is signed with it (version 3);
  // its origin_id must be origin_id's, which must then be set, not drawn.
  // frame_keys: the keys a receiver checks signed frames with, any number
  // per origin (one per key id). A signed frame whose origin and key id
  // name a key here and whose MAC that key does not give is refused on
  // every route (kBadSignature); a route with require_signed accepts only
  // frames a key here verifies. Otherwise Start fails with NATS_INVALID_ARG
  // (a secret too short, an origin 0, a key named twice).
  FrameKey signing_key;
  std::vector<FrameKey> frame_keys;
  // Accept version 1 frames, which carry no stream fields: they cannot be
  // checked for gaps or replays (counted as unsequenced). Off: refused
  // (kUnsequenced).
  bool accept_version_1 = false;
  // Streams (origin, instance, subject) the receiver remembers for gaps
  // and duplicates. max_tracked_streams bounds the streams of known origins (those an
  // allow-list above names), max_tracked_unknown_streams those of the
  // others. Past its bound, a new stream takes the place of its part's
  // least recently heard only if that one has been silent for stream_idle;
  // otherwise its frame is refused (kStreamTableFull). So frames from
  // made-up origins, or made-up instances of a known one, cannot push out
  // streams in use. Each bound 1 or more, stream_idle 0 or more (0: the
  // least recently heard is replaced at once); else Start fails with
  // NATS_INVALID_ARG. Each stream keeps a 512-byte window besides its key.
  std::size_t max_tracked_streams = 1024;
  std::size_t max_tracked_unknown_streams = 1024;
  std::chrono::milliseconds stream_idle{60'000};
  // A file that keeps the stream table across the receiver's restarts
  // (empty: none). Each frame taken updates its stream's record there, so a
  // receiver killed and started again with the same path counts the frames
  // sent while it was down as gaps, and refuses replays of the frames it
  // had taken. Created with mode 0600 and locked while the bridge lives;
  // Start fails (NATS_INVALID_ARG, saying why) if it cannot be opened, is
  // not a regular file of this user that only it may write, another
  // receiver holds it, or it is not a stream state file. It holds
  // max_tracked_streams + max_tracked_unknown_streams records of 936
  // bytes (sluice/nats/stream_state_file.hpp); see docs/nats.md,
  // "A restarted receiver".
  std::string stream_state_path;
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
  // JetStream routes received: how many times the stream delivers a message
  // at most (the durable consumers' MaxDeliver); -1 (or 0): no limit. A
  // message refused by the bus on its last delivery is terminated and
  // counted in jetstream_gave_up: the stream would not deliver it again.
  // The server keeps the limit a durable was made with.
  int jetstream_max_deliver = -1;
  // Called on a client thread for each refused frame (after it is counted).
  // An exception it throws is caught and counted (on_reject_threw).
  std::function<void(FrameError, std::string_view subject)> on_reject;
};

// How Shutdown drains the bus.
enum class ShutdownDrain : std::uint8_t {
  kWaitForConsumer,  // another thread dispatches until IsDrained() (bus.Drain)
  kDispatchHere,     // the caller is the consumer: Shutdown calls ProcessBatch
};

// What Start did: NATS_OK, or the status it failed with and, in `error`,
// what the client said of it (its last error text on the failing call,
// such as a TLS certificate's "IP address mismatch"; the status's own text
// when the client said nothing). Converts to the status, so
// `bridge.Start() != NATS_OK` reads as it did when Start returned one.
struct StartResult {
  natsStatus status = NATS_OK;
  std::string error;                                       // empty on NATS_OK
  operator natsStatus() const noexcept { return status; }  // NOLINT(google-explicit-constructor)
};

struct ShutdownResult {
  bool bus_drained = false;  // every message admitted before Close dispatched
  // JetStream routes: every publish acknowledged by its stream in time,
  // none left pending nor waiting to be sent again after an error (a full
  // stream with discard-new); NATS_OK also when there were none. Anything
  // else is lost at close and counted in send_dropped.
  natsStatus stream_acks = NATS_OK;
  natsStatus flush = NATS_OK;
  natsStatus drain = NATS_OK;  // natsConnection_DrainTimeout
  // The connection reported closed in time, or none was open (never
  // started, or closed by an earlier Shutdown).
  bool closed = false;
};

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
// When a JetStream route acknowledges a message to its stream.
enum class AckTiming : std::uint8_t {
  // Once the bus has admitted it (the cheaper choice): what the bus held
  // when the receiver died is lost.
  kOnAdmission,
  // Once the bus's consumer has dispatched it (its subscribers or visitor
  // ran): a receiver that dies with a backlog loses none of it. Needs a bus
  // whose traits' Observer is AckOnDispatch (sluice/nats/dispatch_acks.hpp).
  kOnDispatch,
};

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
  // With `stream`: whether other bridges read the same durable consumers.
  // Each then sees part of every stream, so none counts gaps; alone, the
  // route counts a gap for every frame the stream lost before the bridge
  // fetched it (discard-old, max age, a purge).
  bool shared_durable = false;
  // With `stream`: when each message is acknowledged (AckTiming). Without:
  // must stay kOnAdmission (core NATS acknowledges nothing).
  AckTiming ack = AckTiming::kOnAdmission;
  // Only frames signed with a key of BridgeOptions::frame_keys: one without
  // a signature is refused (kUnsigned), one no key verifies too
  // (kBadSignature). Needs at least one key, and signing built in.
  bool require_signed = false;
};

namespace detail {

// A stream needs a durable name; a queue group shares a core subscription,
// not a stream's consumer.
inline bool IsValidRoute(const ReceiveOptions& route) noexcept {
  return route.stream.empty() == route.durable.empty() &&
         (route.stream.empty() || route.queue_group.empty()) &&
         (route.ack == AckTiming::kOnAdmission || !route.stream.empty()) &&
         (!route.shared_durable || !route.stream.empty());
}

// The stream table's bounds (max_tracked_streams and the rest).
inline bool IsValidStreamTable(const BridgeOptions& options) noexcept {
  return options.max_tracked_streams > 0 && options.max_tracked_unknown_streams > 0 &&
         options.stream_idle.count() >= 0;
}

// The signing keys: each secret long enough, each verifying key of an
// origin, none named twice, and the sending key the bridge's own origin's.
inline bool IsValidSigning(const BridgeOptions& options) noexcept {
  const FrameKey& own = options.signing_key;
  if (!own.secret.empty() && (own.secret.size() < kMinFrameKeySize || options.origin_id == 0 ||
                              own.origin_id != options.origin_id)) {
    return false;
  }
  const std::vector<FrameKey>& keys = options.frame_keys;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].origin_id == 0 || keys[i].secret.size() < kMinFrameKeySize) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (keys[j].origin_id == keys[i].origin_id && keys[j].key_id == keys[i].key_id) return false;
    }
  }
  return true;
}

// Any TLS setting asks for TLS: a CA file or an expected hostname must
// never leave the connection in plain text.
inline bool WantsTls(const TlsOptions& tls) noexcept {
  return tls.enabled || !tls.ca_file.empty() || !tls.certificate_file.empty() ||
         !tls.key_file.empty() || !tls.expected_hostname.empty() || tls.skip_verification;
}

// Both or neither: half an NKey is a configuration error, not a connection
// without it.
inline bool HasHalfAnNKey(const BridgeOptions& options) noexcept {
  return options.nkey_public_key.empty() != options.nkey_seed_file.empty();
}

inline std::uint64_t RandomNonZero() {
  std::random_device device;
  std::uint64_t id = 0;
  while (id == 0) {
    id = (std::uint64_t{device()} << 32) ^ device();
  }
  return id;
}

// The origin id the bridge writes into its frames: the options' own, or a
// random one for 0.
inline std::uint64_t OriginIdFor(const BridgeOptions& options) {
  return options.origin_id != 0 ? options.origin_id : RandomNonZero();
}

}  // namespace detail

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
