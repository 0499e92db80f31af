// The NATS bridge's connection: the client's natsConnection and JetStream
// context, made from BridgeOptions (servers, credentials, TLS,
// reconnection), the client's connection callbacks, and what the other
// parts read of it (the server's max_payload, whether it is up, whether
// the bridge is closing it).
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/subjects.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// What the other parts do when the client reports the connection lost or
// back; each runs on a client thread.
struct ConnectionEvents {
  // First thing when the connection is lost, or closed, and before the
  // bridge closes it itself (BeginOwnClose).
  std::function<void()> lost;
  // When it is back, once the reconnection is counted.
  std::function<void()> back;
};

class Connection {
 public:
  // `options` and `counters` must outlive the connection.
  Connection(const BridgeOptions& options, Counters& counters, ConnectionEvents events)
      : options_(options), counters_(counters), events_(std::move(events)) {}

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects with the options (retrying first if they say so). A failure
  // leaves no connection behind.
  // Tries of a connection that signs the server's nonce (Connect).
  static constexpr int kSignedConnectTries = 3;

  natsStatus Connect() {
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
    set(natsOptions_SetReconnectJitter(opts, options_.reconnect_jitter.count(),
                                       options_.reconnect_jitter_tls.count()));
    set(natsOptions_SetReconnectBufSize(opts, options_.reconnect_buffer_bytes));
    set(natsOptions_SetTimeout(opts, options_.connect_timeout.count()));
    // The client takes any value; a ping interval or pings out below 1
    // would never ping, or find every connection stale, so both are refused.
    if (options_.ping_interval.count() < 1 || options_.max_pings_out < 1) set(NATS_INVALID_ARG);
    set(natsOptions_SetPingInterval(opts, options_.ping_interval.count()));
    set(natsOptions_SetMaxPingsOut(opts, options_.max_pings_out));
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
    // nats.c 3.4.1 leaves the server nonce's signature out of about one
    // connection in 250 (its CONNECT carries the NKey and no "sig"), which
    // the server refuses as an authorization violation: a connection that
    // signs (an NKey, a .creds file) is tried again, kSignedConnectTries in
    // all. A wrong key is refused every time.
    for (int tries = 1;
         status == NATS_CONNECTION_AUTH_FAILED && SignsNonce() && tries < kSignedConnectTries;
         ++tries) {
      if (connection_ != nullptr) {
        natsConnection_Destroy(connection_);
        connection_ = nullptr;
      }
      status = natsConnection_Connect(&connection_, opts);
    }
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
    // Relaxed: an independent bound; see ServerMaxPayload.
    server_max_payload_.store(natsConnection_GetMaxPayload(connection_), std::memory_order_relaxed);
    return NATS_OK;
  }

  // The JetStream context for the routes that use a stream; making it asks
  // nothing of the server.
  natsStatus OpenJetStream(jsOptions js_options) {
    return natsConnection_JetStream(&js_, connection_, &js_options);
  }

  bool is_open() const noexcept { return connection_ != nullptr; }
  natsConnection* get() const noexcept { return connection_; }
  jsCtx* jetstream() const noexcept { return js_; }

  // Relaxed: a flag for the statistics, ordered with nothing else.
  bool connected() const noexcept { return connected_.load(std::memory_order_relaxed); }

  // The server's max_payload (0: not connected yet). Relaxed: an
  // independent value, read at connection and reconnection; a publish the
  // server's newer bound refuses is caught by the publish itself.
  std::int64_t ServerMaxPayload() const noexcept {
    return server_max_payload_.load(std::memory_order_relaxed);
  }

  int BufferedBytes() const {
    return connection_ == nullptr ? -1 : natsConnection_Buffered(connection_);
  }

  natsStatus Flush(std::chrono::milliseconds timeout) {
    return natsConnection_FlushTimeout(connection_, timeout.count());
  }

  // What the client said of `status`, a failure on this thread: the
  // connection's last error when it is open and has one, else the thread's
  // last error (a failed connect has no connection), else the status's
  // own text.
  std::string ErrorText(natsStatus status) const {
    const char* text = nullptr;
    if (connection_ != nullptr && natsConnection_GetLastError(connection_, &text) != NATS_OK &&
        text != nullptr && *text != '\0') {
      return text;
    }
    natsStatus last = NATS_OK;
    text = nats_GetLastError(&last);
    if (text != nullptr && *text != '\0' && last == status) return text;
    return natsStatus_GetText(status);
  }

  // Whether the server refused one of `route_subject`'s subjects (with
  // priority suffixes) as a subscription: it answers a SUB it does not
  // permit with an error the client keeps as the connection's last, before
  // the flush's PONG.
  bool SubscriptionRefused(std::string_view route_subject) const {
    const char* text = nullptr;
    if (natsConnection_GetLastError(connection_, &text) != NATS_NOT_PERMITTED || text == nullptr) {
      return false;
    }
    const std::string_view error(text);
    if (error.find("ubscription") == std::string_view::npos) return false;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const std::string quoted =
          "\"" + SubjectFor(route_subject, static_cast<MessagePriority>(p)) + "\"";
      if (error.find(quoted) != std::string_view::npos) return true;
    }
    return false;
  }

  // Before the bridge closes or drains the connection itself: the other
  // parts read what they keep of it while it is open (events.lost: the
  // subscriptions' slow-consumer drops), and the disconnection the client
  // then reports is not counted.
  void BeginOwnClose() {
    if (events_.lost) events_.lost();
    closing_.store(true, std::memory_order_release);
  }

  // Acquire: pairs with BeginOwnClose's release.
  bool closing() const noexcept { return closing_.load(std::memory_order_acquire); }

  natsStatus Drain(std::chrono::milliseconds timeout) {
    return natsConnection_DrainTimeout(connection_, timeout.count());
  }

  void Close() { natsConnection_Close(connection_); }

  // Shutdown's close of an open connection: flushes, then drains it (the
  // inbound messages the client holds are handed to their subscriptions),
  // each bounded by `timeout`, and closes it at once if the drain fails.
  // A timeout of 0 waits for neither (both NATS_TIMEOUT; the client
  // refuses a zero timeout for the flush): closed at once, what the
  // client still buffers is lost.
  void CloseOrderly(std::chrono::milliseconds timeout, ShutdownResult& result) {
    if (timeout.count() == 0) {
      result.flush = NATS_TIMEOUT;
      result.drain = NATS_TIMEOUT;
      BeginOwnClose();
      Close();
      return;
    }
    result.flush = Flush(timeout);
    BeginOwnClose();
    result.drain = Drain(timeout);
    if (result.drain != NATS_OK) Close();
  }

  bool WaitClosed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return closed_; });
  }

  // Without a bound: the closed callback is the client's last call for the
  // connection.
  void WaitClosed() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return closed_; });
  }

  // Once closed (WaitClosed) and no callback of the client can run: frees
  // the JetStream context and the connection.
  void Destroy() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    js_ = nullptr;
    natsConnection_Destroy(connection_);
    connection_ = nullptr;
  }

  // Ready for another Connect after Destroy: no client thread writes these
  // any more.
  void Reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = false;
    closing_.store(false, std::memory_order_relaxed);
  }

  // Whether the connection signs the server's nonce: an NKey user, or the
  // NKey of a .creds file.
  bool SignsNonce() const noexcept {
    return !options_.nkey_public_key.empty() || !options_.credentials_file.empty();
  }

 private:
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
      if (HasHalfAnNKey(options_)) set(NATS_INVALID_ARG);
      set(natsOptions_SetNKeyFromSeed(opts, options_.nkey_public_key.c_str(),
                                      options_.nkey_seed_file.c_str()));
    }
    const TlsOptions& tls = options_.tls;
    if (WantsTls(tls)) set(natsOptions_SetSecure(opts, true));
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

  static void OnAsyncError(natsConnection*, natsSubscription*, natsStatus status, void* closure) {
    // Slow-consumer drops are read from the subscriptions (GetStatistics);
    // setting a handler keeps the client from printing them. A permission
    // violation is the server refusing a publish (or a subscription) this
    // connection made: counted, since the frame is lost.
    if (status == NATS_NOT_PERMITTED) {
      Count(static_cast<Connection*>(closure)->counters_.permission_violations);
    }
  }

  // The client calls it when the connection is lost, and also when it is
  // closed (natsConnection_Close and the end of a drain call it too).
  static void OnDisconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Connection*>(closure);
    // A lost connection keeps its subscriptions (the client re-sends them
    // on reconnection), and no message arrives until it is back: their
    // drops are read now (events_.lost), in case the client gives up and
    // closes it (it then no longer answers for them).
    if (self->events_.lost) self->events_.lost();
    // Acquire: pairs with the release in BeginOwnClose, stored before the
    // bridge closes or drains the connection itself (the client also
    // orders the two through its callback queue's lock).
    if (!self->closing_.load(std::memory_order_acquire)) Count(self->counters_.disconnects);
    self->connected_.store(false, std::memory_order_relaxed);
  }

  static void OnReconnected(natsConnection* connection, void* closure) {
    auto* self = static_cast<Connection*>(closure);
    Count(self->counters_.reconnects);
    if (self->events_.back) self->events_.back();
    // Relaxed: an independent bound; see ServerMaxPayload. The server may
    // be another one, with another max_payload.
    self->server_max_payload_.store(natsConnection_GetMaxPayload(connection),
                                    std::memory_order_relaxed);
    self->connected_.store(true, std::memory_order_relaxed);
  }

  // The client's last call for the connection. The mutex orders what the
  // callback did before the waiter goes on to free the bridge.
  static void OnClosed(natsConnection*, void* closure) {
    auto* self = static_cast<Connection*>(closure);
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->connected_.store(false, std::memory_order_relaxed);
    self->closed_ = true;
    self->changed_.notify_all();
  }

  const BridgeOptions& options_;
  Counters& counters_;
  const ConnectionEvents events_;
  // Written by Connect, OpenJetStream and Destroy, which the route table's
  // mutex serialises (or the bridge's destructor); the threads that read
  // them start after (the bus's consumer through Subscribe's release, the
  // client's and the bridge's own through thread creation) and are stopped
  // before Destroy.
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  std::atomic<bool> connected_{false};
  std::atomic<bool> closing_{false};  // the bridge is closing the connection
  std::atomic<std::int64_t> server_max_payload_{0};
  // Guards closed_, which OnClosed sets.
  std::mutex mutex_;
  std::condition_variable changed_;
  bool closed_ = false;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
