// The NATS bridge's sender: a forwarded type's bus subscription, whose
// callback (on the bus's consumer thread) keeps received messages from
// going back, encodes the frame, checks it against both bounds and
// publishes it on core NATS, or hands it to the JetStream publisher
// (sluice/nats/jetstream_outbound.hpp) for a route forwarded at least once.
#pragma once

#include <nats/nats.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/frame_signature.hpp"
#include "sluice/nats/heartbeat.hpp"
#include "sluice/nats/jetstream_outbound.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/routes.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

template <typename Bus>
class Sender {
 public:
  using Route = OutboundRoute<Sender>;

  // Each argument must outlive the sender.
  Sender(Bus& bus, const BridgeOptions& options, std::uint64_t origin_id, Counters& counters,
         const Connection& connection, StreamPublisher& publisher)
      : bus_(bus),
        options_(options),
        origin_id_(origin_id),
        counters_(counters),
        connection_(connection),
        publisher_(publisher) {}

  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // The route's bus subscription (RouteTable's subscribe function): its
  // callback sends each message of T.
  template <typename T, typename Codec>
  static SubscriptionHandle Subscribe(Sender& sender, Route& route) {
    Sender* self = &sender;
    Route* target = &route;
    return sender.bus_.template Subscribe<T>(
        [self, target](const T& message, const MessageHeader& header) {
          self->template Send<T, Codec>(*target, message, header);
        });
  }

  // A new stream on every subject: a fresh instance id (Start, before the
  // bus subscriptions whose dispatch reads it: Subscribe's release pairs
  // with the consumer's acquire of the table).
  void NewInstance() { instance_id_ = RandomNonZero(); }
  std::uint64_t InstanceId() const noexcept { return instance_id_; }

 private:
  template <typename T, typename Codec>
  void Send(Route& route, const T& message, const MessageHeader& header) {
    const auto p = static_cast<std::size_t>(header.priority);
    // The second loop guard: what came from NATS does not go back.
    if ((header.sender_id & options_.remote_sender_flag) != 0) {
      Count(counters_.loop_suppressed);
      return;
    }
    std::string& frame = route.buffer;
    frame.assign(kFrameHeaderSize, '\0');
    const bool signing = !options_.signing_key.secret.empty();
    if (!Encode<T, Codec>(message, frame) ||
        !FitsBound(frame.size() - kFrameHeaderSize,
                   frame.size() + (signing ? kFrameSignatureSize : 0))) {
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
    EncodeFrameHeader(frame_header, reinterpret_cast<std::uint8_t*>(frame.data()), signing);
    // The MAC covers the header with its number: a frame whose MAC could
    // not be made (libcrypto out of memory) is a failed encode, and its
    // number a gap to the receivers.
    if (signing && !AppendSignature(frame, options_.signing_key, route.subjects[p])) {
      Count(counters_.encode_failed);
      return;
    }
    if (route.jetstream) {
      publisher_.Publish(route.subjects[p], p, frame, frame_header);
      return;
    }
    const natsStatus status = natsConnection_Publish(connection_.get(), route.subjects[p].c_str(),
                                                     frame.data(), static_cast<int>(frame.size()));
    if (options_.heartbeat_interval.count() > 0) {
      // The number is spent whatever the client said: a heartbeat naming
      // it shows a refused frame as a gap too. Release: pairs with the
      // heartbeat thread's acquire, after this publish returned.
      route.sequence->sent_at_ns[p].store(SteadyNanos(), std::memory_order_relaxed);
      route.sequence->sent[p].store(frame_header.sequence, std::memory_order_release);
    }
    if (status == NATS_OK) {
      Count(counters_.frames_sent[p]);
    } else if (status == NATS_MAX_PAYLOAD) {
      // The server's bound shrank (a reconnection to another server) before
      // the reconnection callback refreshed ours: the frame exceeded the
      // bound.
      Count(counters_.encode_failed);
    } else {
      if (status == NATS_INSUFFICIENT_BUFFER) Count(counters_.reconnect_buffer_overflows);
      Count(counters_.send_dropped[p]);
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
  // (what the receiving decoder checks), and the whole frame (header,
  // payload, signature) against the server's max_payload (what the server
  // accepts; a publish its newer bound refuses is caught in Send).
  bool FitsBound(std::size_t payload_size, std::size_t frame_size) const noexcept {
    if (payload_size > options_.max_payload) return false;
    const std::int64_t server = connection_.ServerMaxPayload();
    return server <= 0 || frame_size <= static_cast<std::uint64_t>(server);
  }

  Bus& bus_;
  const BridgeOptions& options_;
  const std::uint64_t origin_id_;
  Counters& counters_;
  const Connection& connection_;
  StreamPublisher& publisher_;
  // The outbound streams' instance, drawn at Start (consumer thread reads).
  std::uint64_t instance_id_ = 0;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
