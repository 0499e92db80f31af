// The NATS bridge's heartbeats: while a forwarded stream (a subject and a
// priority, over core NATS) is idle, the bridge sends a heartbeat frame on
// it every BridgeOptions::heartbeat_interval, carrying the stream's last
// number. A receiver that missed the stream's last frames (the server or
// the network lost them, or it was not subscribed) counts them as missing
// when the heartbeat comes, although no later frame will; and a stream
// whose heartbeats stop (its sender killed, or cut off) reads as silent.
// A heartbeat is a frame of type id 0 (which no route may use) whose
// payload is the interval in milliseconds (4 bytes, little-endian);
// docs/nats.md, "Heartbeats".
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/frame_signature.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/routes.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// The type id of a heartbeat frame.
inline constexpr std::uint16_t kHeartbeatTypeId = 0;
// A heartbeat's payload: the sender's interval in milliseconds.
inline constexpr std::size_t kHeartbeatPayloadSize = 4;

namespace detail {

// The steady clock's nanoseconds: when a frame was sent, and when a stream
// was last heard.
inline std::int64_t SteadyNanos() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A heartbeat of the stream (origin, instance, priority) whose last number
// is `last`, for `interval_ms`: signed with `key` when it has a secret, for
// `subject` (the stream's, with its priority's suffix). False when the
// signature could not be made.
inline bool EncodeHeartbeat(std::uint64_t origin_id, std::uint64_t instance_id,
                            MessagePriority priority, std::uint64_t last, std::uint32_t interval_ms,
                            const FrameKey& key, std::string_view subject, std::string& frame) {
  FrameHeader header;
  header.priority = priority;
  header.type_id = kHeartbeatTypeId;
  header.payload_size = kHeartbeatPayloadSize;
  header.timestamp_ns = static_cast<std::uint64_t>(SteadyNanos());
  header.origin_id = origin_id;
  header.instance_id = instance_id;
  header.sequence = last;
  const bool signing = !key.secret.empty();
  frame.assign(kFrameHeaderSize + kHeartbeatPayloadSize, '\0');
  auto* bytes = reinterpret_cast<std::uint8_t*>(frame.data());
  EncodeFrameHeader(header, bytes, signing);
  StoreLittle<std::uint32_t>(bytes + kFrameHeaderSize, interval_ms);
  return !signing || AppendSignature(frame, key, subject);
}

// The heartbeat thread of a bridge whose heartbeat_interval is above 0:
// started by Start (after the connection and the instance), stopped by
// Release before the connection goes. It reads the route table's subject
// streams under their own lock only.
template <typename Routes>
class HeartbeatSender {
 public:
  HeartbeatSender(const BridgeOptions& options, std::uint64_t origin_id, Counters& counters,
                  const Connection& connection, const Routes& routes)
      : options_(options),
        origin_id_(origin_id),
        counters_(counters),
        connection_(connection),
        routes_(routes) {}
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;
  ~HeartbeatSender() { Stop(); }

  // Starts the thread for the instance `instance_id` (nothing when
  // heartbeats are off).
  void Start(std::uint64_t instance_id) {
    Stop();
    if (options_.heartbeat_interval.count() <= 0) return;
    instance_id_ = instance_id;
    beaten_.clear();
    {
      const std::lock_guard<std::mutex> hold(mutex_);
      stop_ = false;
    }
    thread_ = std::thread([this] { Run(); });
  }

  // Stops and joins the thread; no heartbeat is sent once it returns.
  void Stop() {
    {
      const std::lock_guard<std::mutex> hold(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    const auto interval = options_.heartbeat_interval;
    // Ticks of half the interval: an idle stream's heartbeat is at most
    // half an interval late.
    const auto tick =
        std::max<std::chrono::milliseconds>(interval / 2, std::chrono::milliseconds(1));
    std::unique_lock<std::mutex> hold(mutex_);
    while (!wake_.wait_for(hold, tick, [this] { return stop_; })) {
      hold.unlock();
      Beat(interval);
      hold.lock();
    }
  }

  // One look at every stream: a heartbeat for each that has sent a frame
  // and has been idle, and had no heartbeat, for an interval.
  void Beat(std::chrono::milliseconds interval) {
    const std::int64_t now = SteadyNanos();
    const std::int64_t interval_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
    // Start refused an interval above kMaxHeartbeatInterval (2^32 - 1 ms):
    // it fits the 4 bytes, and in nanoseconds far inside 64 bits.
    const auto interval_ms = static_cast<std::uint32_t>(interval.count());
    std::string frame;
    for (const std::shared_ptr<SubjectSequence>& streams : routes_.SubjectSequences()) {
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        // Acquire: pairs with the consumer thread's release after the
        // frame numbered `last` was handed to the client, so the heartbeat
        // goes after it.
        const std::uint64_t last = streams->sent[p].load(std::memory_order_acquire);
        if (last == 0) continue;  // nothing sent on it since Start
        const std::int64_t sent_at = streams->sent_at_ns[p].load(std::memory_order_relaxed);
        std::int64_t& beaten = beaten_[std::make_pair(streams.get(), p)];
        if (now - sent_at < interval_ns || now - beaten < interval_ns) continue;
        beaten = now;
        if (!EncodeHeartbeat(origin_id_, instance_id_, static_cast<MessagePriority>(p), last,
                             interval_ms, options_.signing_key, streams->subjects[p], frame)) {
          continue;
        }
        const natsStatus status =
            natsConnection_Publish(connection_.get(), streams->subjects[p].c_str(), frame.data(),
                                   static_cast<int>(frame.size()));
        if (status == NATS_OK) Count(counters_.heartbeats_sent);
      }
    }
  }

  const BridgeOptions& options_;
  const std::uint64_t origin_id_;
  Counters& counters_;
  const Connection& connection_;
  const Routes& routes_;
  std::uint64_t instance_id_ = 0;
  // When each stream's last heartbeat went: the thread's own.
  std::map<std::pair<const SubjectSequence*, std::size_t>, std::int64_t> beaten_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = true;
  std::thread thread_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
