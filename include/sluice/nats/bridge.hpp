// A bridge between one Sluice bus and a NATS server, through the NATS C
// client (nats.c, CMake target cnats::nats; link sluice::nats). The core
// headers do not include this one and stay free of dependencies.
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

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
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
#include "sluice/detail/variant_index.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/metrics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

struct BridgeOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string connection_name = "sluice";
  // Written into every frame sent; frames carrying it are never published
  // into the bus again. 0: a random id, drawn at construction.
  std::uint64_t origin_id = 0;
  // Payload bytes a frame may carry, both ways.
  std::uint32_t max_payload = kDefaultMaxFramePayload;
  // Reconnection: attempts (-1: for ever), the wait between them, and the
  // client's buffer for publishes made while disconnected (the client's
  // default is 8 MiB; a publish that does not fit is dropped and counted).
  int max_reconnect = -1;
  std::chrono::milliseconds reconnect_wait{100};
  int reconnect_buffer_bytes = 8 * 1024 * 1024;
  // Keep retrying the first connection instead of failing Start().
  bool retry_on_failed_connect = false;
  std::chrono::milliseconds connect_timeout{2000};
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
  // Called on a client thread for each refused frame (after it is counted).
  std::function<void(FrameError, std::string_view subject)> on_reject;
};

// How Shutdown drains the bus.
enum class ShutdownDrain : std::uint8_t {
  kWaitForConsumer,  // another thread dispatches until IsDrained() (bus.Drain)
  kDispatchHere,     // the caller is the consumer: Shutdown calls ProcessBatch
};

struct ShutdownResult {
  bool bus_drained = false;  // every message admitted before Close dispatched
  natsStatus flush = NATS_OK;
  natsStatus drain = NATS_OK;  // natsConnection_DrainTimeout
  bool closed = false;         // the connection reported closed in time
};

namespace detail {

template <typename Bus>
struct BusInfo;
template <typename Payload, std::size_t kCapacity, ProducerModel kProducers, typename Traits>
struct BusInfo<AsyncBus<Payload, kCapacity, kProducers, Traits>> {
  using PayloadType = Payload;
  static constexpr bool kMultiProducer = kProducers == ProducerModel::kMulti;
};

inline std::uint64_t RandomOriginId() {
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
  explicit Bridge(Bus& bus, BridgeOptions options = {}) : bus_(bus), options_(std::move(options)) {
    origin_id_ = options_.origin_id != 0 ? options_.origin_id : detail::RandomOriginId();
  }
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;
  // Without Shutdown: stops forwarding, closes the connection (what the
  // client still buffers is lost) and waits for the client's callbacks.
  ~Bridge() { Release(/*orderly=*/false); }

  // ---- Configuration (before Start) -----------------------------------------

  // Sends local messages of type T to NATS under `type_id` (not 0). False
  // after Start, for type id 0, or when T is already forwarded.
  template <typename T, typename Codec = DefaultCodec<T>>
  [[nodiscard]] bool Forward(const std::string& subject, std::uint16_t type_id) {
    static_assert(sluice::detail::kIsAlternative<T, Payload>,
                  "Sluice: Forward<T> needs T to be exactly one alternative of the bus payload");
    CheckCodec<Codec, T>();
    constexpr std::size_t kIndex = sluice::detail::VariantIndex<T, Payload>::kValue;
    if (started_ || type_id == 0 || subject.empty()) return false;
    for (const auto& route : outbound_) {
      if (route->variant_index == kIndex) return false;
    }
    auto route = std::make_unique<OutboundRoute>();
    route->variant_index = kIndex;
    route->type_id = type_id;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      route->subjects[p] = SubjectFor(subject, static_cast<MessagePriority>(p));
    }
    route->subscribe = &SubscribeOutbound<T, Codec>;
    outbound_.push_back(std::move(route));
    return true;
  }

  // Publishes frames of `type_id` received on `subject` into the bus as T.
  // Needs a multi-producer bus (the client's threads publish). False after
  // Start, for type id 0, or when `type_id` is already received as another
  // type. Several types may share a subject; a type may come on several.
  template <typename T, typename Codec = DefaultCodec<T>>
  [[nodiscard]] bool Receive(std::string subject, std::uint16_t type_id) {
    static_assert(sluice::detail::kIsAlternative<T, Payload>,
                  "Sluice: Receive<T> needs T to be exactly one alternative of the bus payload");
    static_assert(detail::BusInfo<Bus>::kMultiProducer,
                  "Sluice: Receive needs a multi-producer bus (MpscBus): the NATS client's "
                  "threads publish into it");
    CheckCodec<Codec, T>();
    constexpr std::size_t kIndex = sluice::detail::VariantIndex<T, Payload>::kValue;
    if (started_ || type_id == 0 || subject.empty()) return false;
    bool known_type = false;
    for (const InboundType& type : inbound_types_) {
      if (type.type_id == type_id && type.variant_index != kIndex) return false;
      known_type = known_type || type.type_id == type_id;
    }
    if (!known_type) inbound_types_.push_back({type_id, kIndex, &Deliver<T, Codec>});
    for (const std::string& known : inbound_subjects_) {
      if (known == subject) return true;
    }
    inbound_subjects_.push_back(std::move(subject));
    return true;
  }

  // ---- Lifecycle --------------------------------------------------------------

  // Connects, subscribes to the inbound subjects (and waits until the
  // server has them), then starts forwarding. Once only; any thread.
  [[nodiscard]] natsStatus Start() {
    if (started_) return NATS_ILLEGAL_STATE;
    started_ = true;
    natsOptions* opts = nullptr;
    natsStatus status = natsOptions_Create(&opts);
    const auto set = [&status](natsStatus next) {
      if (status == NATS_OK) status = next;
    };
    set(natsOptions_SetURL(opts, options_.url.c_str()));
    set(natsOptions_SetName(opts, options_.connection_name.c_str()));
    // The first loop guard: the server never delivers this connection's own
    // publishes back to it.
    set(natsOptions_SetNoEcho(opts, true));
    set(natsOptions_SetAllowReconnect(opts, true));
    set(natsOptions_SetMaxReconnect(opts, options_.max_reconnect));
    set(natsOptions_SetReconnectWait(opts, options_.reconnect_wait.count()));
    set(natsOptions_SetReconnectBufSize(opts, options_.reconnect_buffer_bytes));
    set(natsOptions_SetTimeout(opts, options_.connect_timeout.count()));
    set(natsOptions_SetMaxPendingMsgs(opts, options_.pending_messages_limit));
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
    for (const std::string& subject : inbound_subjects_) {
      for (std::size_t p = 0; p < kPriorityCount && status == NATS_OK; ++p) {
        status = SubscribeInbound(subject, static_cast<MessagePriority>(p));
      }
    }
    // The server has the subscriptions once it answers the flush's PING.
    if (status == NATS_OK && !inbound_subjects_.empty()) {
      status = natsConnection_FlushTimeout(connection_, options_.connect_timeout.count());
    }
    if (status != NATS_OK) {
      Release(/*orderly=*/false);
      return status;
    }
    for (const auto& route : outbound_) {
      route->handle = route->subscribe(*this, *route);
      if (!route->handle.IsValid()) {
        Release(/*orderly=*/false);
        return NATS_NO_MEMORY;  // the bus's subscription table for T is full
      }
    }
    return NATS_OK;
  }

  // The orderly stop: closes the bus to new publishes, drains it (what it
  // holds of forwarded types is sent), stops forwarding, flushes the
  // connection, then drains it (inbound messages the client holds are
  // offered to the closed bus and counted as refused) and waits for it to
  // close. Each wait is bounded by `timeout`. Not from a bus callback.
  ShutdownResult Shutdown(std::chrono::milliseconds timeout,
                          ShutdownDrain drain = ShutdownDrain::kWaitForConsumer) {
    ShutdownResult result;
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
    if (connection_ == nullptr) return result;
    UnsubscribeOutbound();
    result.flush = natsConnection_FlushTimeout(connection_, timeout.count());
    KeepSlowConsumerDrops();
    result.drain = natsConnection_DrainTimeout(connection_, timeout.count());
    if (result.drain != NATS_OK) natsConnection_Close(connection_);
    result.closed = WaitClosed(timeout + std::chrono::seconds(1));
    Release(/*orderly=*/true);
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
    }
    s.reconnect_buffer_overflows = load(counters_.reconnect_buffer_overflows);
    s.encode_failed = load(counters_.encode_failed);
    s.loop_suppressed = load(counters_.loop_suppressed);
    s.frames_received = load(counters_.frames_received);
    s.echo_suppressed = load(counters_.echo_suppressed);
    for (std::size_t e = 0; e < kFrameErrorCount; ++e) s.rejected[e] = load(counters_.rejected[e]);
    s.disconnects = load(counters_.disconnects);
    s.reconnects = load(counters_.reconnects);
    s.connected = connected_.load(std::memory_order_relaxed);
    s.slow_consumer_dropped = SlowConsumerDropped();
    return s;
  }

  std::uint64_t OriginId() const noexcept { return origin_id_; }

 private:
  struct OutboundRoute {
    std::size_t variant_index = 0;
    std::uint16_t type_id = 0;
    std::array<std::string, kPriorityCount> subjects;
    std::string buffer;  // the frame being built: consumer thread only
    SubscriptionHandle handle;
    SubscriptionHandle (*subscribe)(Bridge&, OutboundRoute&) = nullptr;
  };

  struct InboundType {
    std::uint16_t type_id;
    std::size_t variant_index;
    FrameError (*deliver)(Bridge&, const FrameView&);
  };

  // One per inbound subject and priority; its address is the client's
  // closure for the subscription.
  struct InboundSubscription {
    Bridge* bridge = nullptr;
    MessagePriority priority = MessagePriority::MEDIUM;
    std::string subject;  // with the priority suffix
    natsSubscription* subscription = nullptr;
  };

  // Monotonic tallies, written with relaxed fetch_add from the consumer
  // thread and the client's threads and read with relaxed loads: no other
  // data is published through them, so they need atomicity only.
  struct Counters {
    std::array<std::atomic<std::uint64_t>, kPriorityCount> frames_sent{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> send_dropped{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> delivered{};
    std::array<std::atomic<std::uint64_t>, kPriorityCount> bus_dropped{};
    std::atomic<std::uint64_t> reconnect_buffer_overflows{0};
    std::atomic<std::uint64_t> encode_failed{0};
    std::atomic<std::uint64_t> loop_suppressed{0};
    std::atomic<std::uint64_t> frames_received{0};
    std::atomic<std::uint64_t> echo_suppressed{0};
    std::array<std::atomic<std::uint64_t>, kFrameErrorCount> rejected{};
    std::atomic<std::uint64_t> disconnects{0};
    std::atomic<std::uint64_t> reconnects{0};
  };

  static void Count(std::atomic<std::uint64_t>& counter) noexcept {
    counter.fetch_add(1, std::memory_order_relaxed);
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
    if (!Codec::Encode(message, frame) || frame.size() - kFrameHeaderSize > options_.max_payload) {
      Count(counters_.encode_failed);
      return;
    }
    FrameHeader frame_header;
    frame_header.priority = header.priority;
    frame_header.type_id = route.type_id;
    frame_header.sender_id = header.sender_id;
    frame_header.payload_size = static_cast<std::uint32_t>(frame.size() - kFrameHeaderSize);
    frame_header.msg_id = header.msg_id;
    frame_header.timestamp_us = header.timestamp_us;
    frame_header.origin_id = origin_id_;
    EncodeFrameHeader(frame_header, reinterpret_cast<std::uint8_t*>(frame.data()));
    const natsStatus status = natsConnection_Publish(connection_, route.subjects[p].c_str(),
                                                     frame.data(), static_cast<int>(frame.size()));
    if (status == NATS_OK) {
      Count(counters_.frames_sent[p]);
    } else {
      if (status == NATS_INSUFFICIENT_BUFFER) Count(counters_.reconnect_buffer_overflows);
      Count(counters_.send_dropped[p]);
    }
  }

  void UnsubscribeOutbound() noexcept {
    for (const auto& route : outbound_) {
      // Waits for a batch in flight: no Send runs after this.
      if (route->handle.IsValid()) (void)bus_.Unsubscribe(route->handle);
      route->handle = SubscriptionHandle();
    }
  }

  // ---- Inbound (the client's threads) -------------------------------------------

  natsStatus SubscribeInbound(const std::string& subject, MessagePriority priority) {
    auto inbound = std::make_unique<InboundSubscription>();
    inbound->bridge = this;
    inbound->priority = priority;
    inbound->subject = SubjectFor(subject, priority);
    // The tables the handler reads (inbound_types_, options_) are complete:
    // they are not written after Start, and the client starts the
    // subscription's thread inside this call (thread creation orders them
    // before everything the thread does).
    natsStatus status = natsConnection_Subscribe(
        &inbound->subscription, connection_, inbound->subject.c_str(), &OnMessage, inbound.get());
    if (status != NATS_OK) return status;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++live_subscriptions_;
      inbound_.push_back(std::move(inbound));
    }
    InboundSubscription& added = *inbound_.back();
    status = natsSubscription_SetOnCompleteCB(added.subscription, &OnSubscriptionComplete, this);
    if (status != NATS_OK) {
      // No completion will be reported for it: not counted as live.
      std::lock_guard<std::mutex> lock(mutex_);
      --live_subscriptions_;
    } else {
      status = natsSubscription_SetPendingLimits(
          added.subscription, options_.pending_messages_limit, options_.pending_bytes_limit);
    }
    return status;
  }

  static void OnMessage(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    auto* inbound = static_cast<InboundSubscription*>(closure);
    const int length = natsMsg_GetDataLength(message);
    inbound->bridge->HandleFrame(*inbound,
                                 reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message)),
                                 length < 0 ? 0 : static_cast<std::size_t>(length));
    natsMsg_Destroy(message);
  }

  void HandleFrame(const InboundSubscription& inbound, const std::uint8_t* data, std::size_t size) {
    Count(counters_.frames_received);
    FrameView view;
    FrameError error = DecodeFrame(data, size, &view, options_.max_payload);
    if (error == FrameError::kNone) {
      if (view.header.origin_id == origin_id_) {
        Count(counters_.echo_suppressed);
        return;
      }
      error = FrameError::kUnknownType;
      for (const InboundType& type : inbound_types_) {
        if (type.type_id == view.header.type_id) {
          error = type.deliver(*this, view);
          break;
        }
      }
    }
    if (error == FrameError::kNone) return;
    Count(counters_.rejected[static_cast<std::size_t>(error)]);
    if (options_.on_reject) options_.on_reject(error, inbound.subject);
  }

  template <typename T, typename Codec>
  static FrameError Deliver(Bridge& bridge, const FrameView& view) {
    std::optional<T> message = Codec::Decode(view.payload, view.payload_size);
    if (!message) return FrameError::kBadPayload;
    bridge.Admit(*message, view.header);
    return FrameError::kNone;
  }

  // Publishes into the bus with the frame's priority. A refusal for room is
  // retried (polling the depth, so that the bus counts few refusals) until
  // the priority's admission_wait has passed; then it is a counted drop.
  template <typename T>
  void Admit(T& message, const FrameHeader& header) {
    const auto p = static_cast<std::size_t>(header.priority);
    const std::uint32_t sender = header.sender_id | options_.remote_sender_flag;
    if (bus_.PublishWithPriority(message, sender, header.priority)) {
      Count(counters_.delivered[p]);
      return;
    }
    const auto wait = options_.admission_wait[p];
    if (wait.count() > 0) {
      const auto deadline = std::chrono::steady_clock::now() + wait;
      while (!bus_.IsClosed() && std::chrono::steady_clock::now() < deadline) {
        if (bus_.QueueDepth() >= LimitFor(header.priority)) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          continue;
        }
        if (bus_.PublishWithPriority(message, sender, header.priority)) {
          Count(counters_.delivered[p]);
          return;
        }
      }
    }
    Count(counters_.bus_dropped[p]);
  }

  std::size_t LimitFor(MessagePriority priority) const noexcept {
    const AdmissionThresholds thresholds = bus_.GetAdmissionThresholds();
    const std::uint8_t percent = priority == MessagePriority::LOW      ? thresholds.low_percent
                                 : priority == MessagePriority::MEDIUM ? thresholds.medium_percent
                                                                       : thresholds.high_percent;
    return static_cast<std::size_t>(FillLimit(percent, static_cast<Position>(Bus::Capacity())));
  }

  // ---- Client callbacks ------------------------------------------------------------

  static void OnAsyncError(natsConnection*, natsSubscription*, natsStatus, void*) {
    // Slow-consumer drops are read from the subscriptions (GetStatistics);
    // setting a handler keeps the client from printing them.
  }

  static void OnDisconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    Count(self->counters_.disconnects);
    self->connected_.store(false, std::memory_order_relaxed);
  }

  static void OnReconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Bridge*>(closure);
    Count(self->counters_.reconnects);
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
    auto* self = static_cast<Bridge*>(closure);
    std::lock_guard<std::mutex> lock(self->mutex_);
    --self->live_subscriptions_;
    self->changed_.notify_all();
  }

  bool WaitClosed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return closed_; });
  }

  PriorityCounts SlowConsumerDropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return drops_kept_ ? slow_consumer_final_ : ReadSlowConsumerDrops();
  }

  // The client answers for open subscriptions only: the counts are kept
  // before the connection is drained or closed (drops during the drain
  // itself are not counted).
  void KeepSlowConsumerDrops() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (drops_kept_) return;
    slow_consumer_final_ = ReadSlowConsumerDrops();
    drops_kept_ = true;
  }

  // Holding mutex_.
  PriorityCounts ReadSlowConsumerDrops() const {
    PriorityCounts dropped{};
    for (const auto& inbound : inbound_) {
      std::int64_t count = 0;
      if (natsSubscription_GetDropped(inbound->subscription, &count) == NATS_OK && count > 0) {
        dropped[static_cast<std::size_t>(inbound->priority)] += static_cast<std::uint64_t>(count);
      }
    }
    return dropped;
  }

  // Frees the client's objects once none of its callbacks can run: after
  // the connection has closed (its last callback) and every subscription's
  // handler has returned for the last time.
  void Release(bool orderly) {
    if (connection_ == nullptr) return;
    if (!orderly) {
      UnsubscribeOutbound();
      KeepSlowConsumerDrops();
      natsConnection_Close(connection_);
      (void)WaitClosed(std::chrono::seconds(30));
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // A hang guard: the client reports every subscription complete when
      // the connection closes.
      (void)changed_.wait_for(lock, std::chrono::seconds(30),
                              [this] { return live_subscriptions_ == 0; });
      for (const auto& inbound : inbound_) natsSubscription_Destroy(inbound->subscription);
      inbound_.clear();
    }
    natsConnection_Destroy(connection_);
    connection_ = nullptr;
  }

  Bus& bus_;
  BridgeOptions options_;
  std::uint64_t origin_id_ = 0;
  bool started_ = false;
  natsConnection* connection_ = nullptr;
  std::vector<std::unique_ptr<OutboundRoute>> outbound_;
  std::vector<InboundType> inbound_types_;
  std::vector<std::string> inbound_subjects_;
  Counters counters_;
  std::atomic<bool> connected_{false};
  // Guards inbound_ against GetStatistics, and the two fields below.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<InboundSubscription>> inbound_;
  PriorityCounts slow_consumer_final_{};
  bool drops_kept_ = false;
  bool closed_ = false;
  int live_subscriptions_ = 0;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
