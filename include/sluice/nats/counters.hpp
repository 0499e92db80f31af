// The NATS bridge's tallies, which every part of the bridge counts into,
// and their copy into the statistics snapshot (sluice/nats/metrics.hpp).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/metrics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

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
  std::array<std::atomic<std::uint64_t>, kPriorityCount> jetstream_gave_up{};
  std::array<std::atomic<std::uint64_t>, kPriorityCount> jetstream_refused{};
  std::atomic<std::uint64_t> jetstream_resent{0};
  std::atomic<std::uint64_t> jetstream_behind_window{0};
  std::atomic<std::uint64_t> permission_violations{0};
  std::atomic<std::uint64_t> unsequenced{0};
  std::atomic<std::uint64_t> reconnect_buffer_overflows{0};
  std::atomic<std::uint64_t> encode_failed{0};
  std::atomic<std::uint64_t> loop_suppressed{0};
  std::atomic<std::uint64_t> frames_received{0};
  std::atomic<std::uint64_t> echo_suppressed{0};
  std::atomic<std::uint64_t> heartbeats_sent{0};
  std::atomic<std::uint64_t> heartbeats_received{0};
  std::array<std::atomic<std::uint64_t>, kFrameErrorCount> rejected{};
  std::atomic<std::uint64_t> on_reject_threw{0};
  std::atomic<std::uint64_t> disconnects{0};
  std::atomic<std::uint64_t> reconnects{0};

  // The tallies into `s` (its other fields untouched). Relaxed loads: each
  // counter is an independent tally; nothing else is published through
  // them.
  void CopyTo(BridgeStatisticsSnapshot& s) const noexcept {
    const auto load = [](const std::atomic<std::uint64_t>& counter) {
      return counter.load(std::memory_order_relaxed);
    };
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      s.frames_sent[p] = load(frames_sent[p]);
      s.send_dropped[p] = load(send_dropped[p]);
      s.delivered[p] = load(delivered[p]);
      s.bus_dropped[p] = load(bus_dropped[p]);
      s.admitted_after_wait[p] = load(admitted_after_wait[p]);
      s.handed_back[p] = load(handed_back[p]);
      s.jetstream_gave_up[p] = load(jetstream_gave_up[p]);
      s.jetstream_refused[p] = load(jetstream_refused[p]);
    }
    s.unsequenced = load(unsequenced);
    s.jetstream_resent = load(jetstream_resent);
    s.jetstream_behind_window = load(jetstream_behind_window);
    s.permission_violations = load(permission_violations);
    s.reconnect_buffer_overflows = load(reconnect_buffer_overflows);
    s.encode_failed = load(encode_failed);
    s.loop_suppressed = load(loop_suppressed);
    s.frames_received = load(frames_received);
    s.echo_suppressed = load(echo_suppressed);
    s.heartbeats_sent = load(heartbeats_sent);
    s.heartbeats_received = load(heartbeats_received);
    for (std::size_t e = 0; e < kFrameErrorCount; ++e) s.rejected[e] = load(rejected[e]);
    s.disconnects = load(disconnects);
    s.reconnects = load(reconnects);
    s.on_reject_threw = load(on_reject_threw);
  }
};

inline void Count(std::atomic<std::uint64_t>& counter) noexcept {
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
