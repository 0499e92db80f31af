// The NATS bridge's counters and their Prometheus text, beside the bus's own
// (sluice/extras/prometheus.hpp). Standard library only: a snapshot can be
// written without the NATS client's headers.
//
//   std::string text;
//   sluice::nats::WritePrometheus(text, "plant", bus, bridge);  // bus, then bridge
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/config.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/stream_verdicts.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

using PriorityCounts = std::array<std::uint64_t, kPriorityCount>;

// A bridge's counters since it was built, read one by one (consistent per
// field). Indexed by MessagePriority where they are per priority.
// What a bus's DispatchAcks (sluice/nats/dispatch_acks.hpp) has done: the
// JetStream messages acknowledged after their dispatch (AckTiming::kOnDispatch).
struct DispatchAckCounts {
  std::uint64_t filed = 0;         // admitted into the bus, awaiting dispatch
  std::uint64_t acknowledged = 0;  // acknowledged after their dispatch
  // Still undispatched when their route stopped (StopReceiving, Shutdown):
  // released unacknowledged, so the stream delivers them again.
  std::uint64_t withdrawn = 0;
  std::uint64_t pending = 0;  // filed and not yet acknowledged nor withdrawn
};

struct BridgeStatisticsSnapshot {
  // Outbound: local messages of a forwarded type.
  PriorityCounts frames_sent{};  // handed to the NATS client
  // The client refused them: its reconnect buffer was full
  // (reconnect_buffer_overflows), or the connection was closed or failed.
  PriorityCounts send_dropped{};
  std::uint64_t reconnect_buffer_overflows = 0;
  // Not sent: the codec refused or threw, or the frame exceeded the bound
  // (payload above BridgeOptions::max_payload, or header and payload above
  // the server's max_payload).
  std::uint64_t encode_failed = 0;
  std::uint64_t loop_suppressed = 0;  // inbound messages not sent back out
  // Inbound.
  // Every message the bridge's subscriptions handed it (the client's
  // slow-consumer drops never reach it: they are not included).
  std::uint64_t frames_received = 0;
  PriorityCounts delivered{};  // admitted into the local bus
  // Of delivered: admitted only after the bus had refused it for room and
  // the bridge waited (admission_wait). Not a drop, in any counter: the
  // waiting tries are not counted by the bus either.
  PriorityCounts admitted_after_wait{};
  // JetStream routes: messages the bus refused (full after the priority's
  // wait, or closed) and that were handed back to the stream, which
  // redelivers them: not drops.
  PriorityCounts handed_back{};
  // JetStream routes: messages the bus refused on their last delivery
  // (BridgeOptions::jetstream_max_deliver): terminated, never delivered
  // again: drops.
  PriorityCounts jetstream_gave_up{};
  // JetStream routes acknowledged after dispatch: the bus's DispatchAcks
  // (all 0 for a bus without AckOnDispatch).
  DispatchAckCounts dispatch_acks{};
  // JetStream routes forwarded: publishes the stream answered with an error
  // (a full stream with discard-new, no stream yet), each sent again (a
  // publish refused several times counts each time): not drops until
  // Shutdown gives up on them (then send_dropped).
  PriorityCounts jetstream_refused{};
  // JetStream routes: publishes sent again because the stream had not
  // acknowledged them (a reconnection, an error such as no stream yet).
  std::uint64_t jetstream_resent = 0;
  // JetStream routes: messages admitted though their number was behind the
  // duplicate check's window (at least once: a redelivery there cannot be
  // told from a message never admitted, so it is admitted).
  std::uint64_t jetstream_behind_window = 0;
  // Errors the server sent for a publish (or subscription) this connection
  // was not permitted: each refused publish is a frame lost after
  // frames_sent counted it (the server does not say which).
  std::uint64_t permission_violations = 0;
  // Refused by the local bus after the priority's admission_wait:
  // admission (backpressure) or a closed bus. The bus counts each such
  // message once too (messages_dropped, or messages_refused_closed).
  PriorityCounts bus_dropped{};
  // Dropped by the NATS client before the bridge saw them: the
  // subscription's pending limit was reached (a slow consumer). Per
  // priority: each priority has a subscription of its own.
  PriorityCounts slow_consumer_dropped{};
  // The inbound streams (origin, instance, subject): frames that never came
  // (gaps, net of late arrivals), came late (reordered), were refused as
  // duplicates or stale (also in rejected[kDuplicate], rejected[kStale]).
  StreamCounts streams{};
  // Version 1 frames accepted (BridgeOptions::accept_version_1): untracked.
  std::uint64_t unsequenced = 0;
  std::uint64_t echo_suppressed = 0;  // frames this bridge sent itself
  // Heartbeats sent on idle forwarded streams, and received (neither is a
  // frame_sent, a delivery or a rejection).
  std::uint64_t heartbeats_sent = 0;
  std::uint64_t heartbeats_received = 0;
  std::array<std::uint64_t, kFrameErrorCount> rejected{};  // by FrameError
  std::uint64_t on_reject_threw = 0;  // BridgeOptions::on_reject threw (caught)
  // Connection. Disconnects the bridge's own close (Shutdown, destructor)
  // caused are not counted.
  std::uint64_t disconnects = 0;
  std::uint64_t reconnects = 0;
  bool connected = false;

  // Every message of `priority` lost on this bridge's side, whatever the
  // cause: refused by the client, by the bus (also on a JetStream message's
  // last delivery), or dropped as a slow consumer.
  std::uint64_t Dropped(MessagePriority priority) const noexcept {
    const auto p = static_cast<std::size_t>(priority);
    return send_dropped[p] + bus_dropped[p] + slow_consumer_dropped[p] + jetstream_gave_up[p];
  }
  std::uint64_t Rejected() const noexcept {
    std::uint64_t total = 0;
    for (std::uint64_t count : rejected) total += count;
    return total;
  }
};

// What the Prometheus writer reports of one bridge.
struct BridgeMetrics {
  std::string_view name;  // the `bus` label, as for the bus it bridges
  BridgeStatisticsSnapshot statistics;
};

// Any thread. `name` must outlive the result. `Bridge` has GetStatistics().
template <typename Bridge>
BridgeMetrics CaptureBridgeMetrics(std::string_view name, const Bridge& bridge) {
  BridgeMetrics metrics;
  metrics.name = name;
  metrics.statistics = bridge.GetStatistics();
  return metrics;
}

namespace detail {

// name{bus="...",priority="...",reason="..."} value
template <typename Sink>
void EmitDropSample(Sink& sink, std::string_view bus, std::size_t priority, std::string_view reason,
                    std::uint64_t value) {
  sluice::detail::EmitSampleStart(sink, "sluice_nats_messages_dropped_total", bus, "priority",
                                  sluice::detail::kPriorityLabels[priority]);
  sluice::detail::Emit(sink, ",reason=\"");
  sluice::detail::Emit(sink, reason);
  sluice::detail::Emit(sink, "\"} ");
  sluice::detail::EmitNumber(sink, value);
  sluice::detail::Emit(sink, "\n");
}

}  // namespace detail

// Writes the bridges' families (sluice_nats_*), each once. `sink` as for
// sluice::WritePrometheus.
template <typename Sink>
void WriteBridgePrometheus(Sink&& sink, const BridgeMetrics* bridges, std::size_t count) {
  using sluice::detail::EmitFamily;
  using sluice::detail::EmitSample;
  using sluice::detail::kPriorityLabels;
  const BridgeMetrics* const end = bridges + count;
  const auto per_priority = [&](std::string_view name, std::string_view help, auto values_of) {
    EmitFamily(sink, name, "counter", help);
    for (const BridgeMetrics* b = bridges; b != end; ++b) {
      const PriorityCounts values = values_of(b->statistics);
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        EmitSample(sink, name, b->name, values[p], "priority", kPriorityLabels[p]);
      }
    }
  };
  const auto per_bridge = [&](std::string_view name, std::string_view type, std::string_view help,
                              auto value_of) {
    EmitFamily(sink, name, type, help);
    for (const BridgeMetrics* b = bridges; b != end; ++b) {
      EmitSample(sink, name, b->name, value_of(b->statistics));
    }
  };
  using Snapshot = BridgeStatisticsSnapshot;
  per_priority("sluice_nats_frames_sent_total", "Frames handed to the NATS client, by priority.",
               [](const Snapshot& s) { return s.frames_sent; });
  per_priority("sluice_nats_messages_delivered_total",
               "Messages received from NATS and admitted into the local bus, by priority.",
               [](const Snapshot& s) { return s.delivered; });
  EmitFamily(sink, "sluice_nats_messages_dropped_total", "counter",
             "Messages lost at the bridge, by priority and reason: send (the client refused, "
             "reconnect buffer full or connection closed), bus (the local bus refused), "
             "slow_consumer (the client's pending limit), max_deliveries (a JetStream "
             "message the local bus refused on its last delivery).");
  for (const BridgeMetrics* b = bridges; b != end; ++b) {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      detail::EmitDropSample(sink, b->name, p, "send", b->statistics.send_dropped[p]);
      detail::EmitDropSample(sink, b->name, p, "bus", b->statistics.bus_dropped[p]);
      detail::EmitDropSample(sink, b->name, p, "slow_consumer",
                             b->statistics.slow_consumer_dropped[p]);
      detail::EmitDropSample(sink, b->name, p, "max_deliveries",
                             b->statistics.jetstream_gave_up[p]);
    }
  }
  per_bridge("sluice_nats_reconnect_buffer_overflows_total", "counter",
             "Publishes refused because the client's reconnect buffer was full.",
             [](const Snapshot& s) { return s.reconnect_buffer_overflows; });
  per_bridge("sluice_nats_encode_failed_total", "counter",
             "Local messages not sent: the codec refused or threw, or the frame exceeded the "
             "bound (max_payload, or the server's max_payload with the header).",
             [](const Snapshot& s) { return s.encode_failed; });
  per_bridge("sluice_nats_frames_received_total", "counter",
             "Messages received on subscribed subjects.",
             [](const Snapshot& s) { return s.frames_received; });
  EmitFamily(sink, "sluice_nats_frames_rejected_total", "counter",
             "Received frames refused, by reason (bad input, a priority or type the "
             "subject does not carry, a codec that threw, an origin not allowed, a "
             "duplicate or stale sequence number, an unsequenced version 1 frame).");
  for (const BridgeMetrics* b = bridges; b != end; ++b) {
    for (std::size_t e = 1; e < kFrameErrorCount; ++e) {
      EmitSample(sink, "sluice_nats_frames_rejected_total", b->name, b->statistics.rejected[e],
                 "reason", ToString(static_cast<FrameError>(e)));
    }
  }
  per_priority("sluice_nats_messages_admitted_after_wait_total",
               "Messages admitted into the local bus after it had refused them for room and "
               "the bridge waited (delivered, not dropped), by priority.",
               [](const Snapshot& s) { return s.admitted_after_wait; });
  per_priority("sluice_nats_messages_handed_back_total",
               "JetStream messages the local bus refused and the bridge handed back to the "
               "stream for redelivery (not drops), by priority.",
               [](const Snapshot& s) { return s.handed_back; });
  per_priority("sluice_nats_jetstream_refused_total",
               "JetStream publishes the stream answered with an error (full with "
               "discard-new, no stream), each sent again, by priority.",
               [](const Snapshot& s) { return s.jetstream_refused; });
  per_bridge("sluice_nats_jetstream_resent_total", "counter",
             "JetStream publishes sent again because the stream had not acknowledged them.",
             [](const Snapshot& s) { return s.jetstream_resent; });
  per_bridge("sluice_nats_jetstream_behind_window_total", "counter",
             "JetStream messages admitted though behind the duplicate check's window.",
             [](const Snapshot& s) { return s.jetstream_behind_window; });
  per_bridge("sluice_nats_jetstream_acknowledged_after_dispatch_total", "counter",
             "JetStream messages acknowledged once the local bus dispatched them "
             "(AckTiming::kOnDispatch).",
             [](const Snapshot& s) { return s.dispatch_acks.acknowledged; });
  per_bridge("sluice_nats_jetstream_withdrawn_total", "counter",
             "JetStream messages still undispatched when their route stopped, released "
             "unacknowledged for redelivery (AckTiming::kOnDispatch).",
             [](const Snapshot& s) { return s.dispatch_acks.withdrawn; });
  per_bridge("sluice_nats_jetstream_awaiting_dispatch", "gauge",
             "JetStream messages in the local bus, to be acknowledged once dispatched "
             "(AckTiming::kOnDispatch).",
             [](const Snapshot& s) { return s.dispatch_acks.pending; });
  per_bridge("sluice_nats_permission_violations_total", "counter",
             "Publishes or subscriptions the server refused for permissions (each refused "
             "publish is a frame lost).",
             [](const Snapshot& s) { return s.permission_violations; });
  per_bridge("sluice_nats_frames_missing", "gauge",
             "Sequence numbers skipped on the inbound streams and not arrived since: frames "
             "lost between the sending bridges and this one.",
             [](const Snapshot& s) { return s.streams.gaps; });
  per_bridge("sluice_nats_frames_reordered_total", "counter",
             "Frames that arrived after a later frame of their stream.",
             [](const Snapshot& s) { return s.streams.reordered; });
  per_bridge("sluice_nats_streams_tracked", "gauge",
             "Inbound streams (origin, instance, subject) remembered for gaps and duplicates.",
             [](const Snapshot& s) { return s.streams.streams_tracked; });
  per_bridge("sluice_nats_streams_opened_total", "counter",
             "Inbound streams heard for the first time (a sender's Start, or a new subject).",
             [](const Snapshot& s) { return s.streams.streams_opened; });
  per_bridge("sluice_nats_streams_evicted_total", "counter",
             "Inbound streams forgotten to make room (max_tracked_streams, or an idle "
             "stream of an unknown origin).",
             [](const Snapshot& s) { return s.streams.streams_evicted; });
  per_bridge("sluice_nats_stream_jumps_held_total", "counter",
             "Frames numbered more than 4,096 ahead of their stream: delivered, not taken "
             "as its highest until a later frame confirmed them.",
             [](const Snapshot& s) { return s.streams.jumps_held; });
  per_bridge("sluice_nats_stream_jumps_confirmed_total", "counter",
             "Held frames a later frame confirmed: the jump taken, its skipped numbers "
             "counted as missing (at most 2^32 a jump).",
             [](const Snapshot& s) { return s.streams.jumps_confirmed; });
  per_bridge("sluice_nats_heartbeats_sent_total", "counter",
             "Heartbeats sent on idle forwarded streams (heartbeat_interval).",
             [](const Snapshot& s) { return s.heartbeats_sent; });
  per_bridge("sluice_nats_heartbeats_received_total", "counter",
             "Heartbeats received from other bridges' streams.",
             [](const Snapshot& s) { return s.heartbeats_received; });
  per_bridge("sluice_nats_heartbeats_with_gaps_total", "counter",
             "Heartbeats that named frames that had not arrived (a stream's lost tail, "
             "counted in sluice_nats_frames_missing).",
             [](const Snapshot& s) { return s.streams.heartbeats_with_gaps; });
  per_bridge("sluice_nats_heartbeats_far_ahead_total", "counter",
             "Heartbeats more than 4,096 ahead of their stream: not taken.",
             [](const Snapshot& s) { return s.streams.heartbeats_far_ahead; });
  per_bridge("sluice_nats_streams_silent", "gauge",
             "Inbound streams that sent heartbeats and have been heard of by nothing for three "
             "of their intervals (their sender killed, or cut off).",
             [](const Snapshot& s) { return s.streams.streams_silent; });
  per_bridge("sluice_nats_streams_restored_total", "counter",
             "Inbound streams read back from the stream state file when the bridge started.",
             [](const Snapshot& s) { return s.streams.streams_restored; });
  per_bridge("sluice_nats_streams_not_saved_total", "counter",
             "Inbound streams the stream state file could not keep (full, or a subject over "
             "256 bytes): a restart forgets them.",
             [](const Snapshot& s) { return s.streams.streams_not_saved; });
  per_bridge("sluice_nats_stream_state_records_dropped_total", "counter",
             "Records of the stream state file dropped when it was read back (damaged, a "
             "stream twice, or no room in the table).",
             [](const Snapshot& s) { return s.streams.state_records_dropped; });
  per_bridge("sluice_nats_stream_jumps_refused_total", "counter",
             "Frames numbered more than 4,096 ahead of a stream that held as many such "
             "frames as it may, none below them: refused (also counted in "
             "sluice_nats_frames_rejected_total, reason too_far_ahead).",
             [](const Snapshot& s) { return s.streams.jumps_refused; });
  per_bridge("sluice_nats_unsequenced_total", "counter",
             "Version 1 frames accepted without stream fields (not checked for gaps or "
             "duplicates).",
             [](const Snapshot& s) { return s.unsequenced; });
  per_bridge("sluice_nats_on_reject_exceptions_total", "counter",
             "Exceptions thrown by the on_reject callback (caught on the client's thread).",
             [](const Snapshot& s) { return s.on_reject_threw; });
  per_bridge("sluice_nats_echo_suppressed_total", "counter",
             "Frames received that this bridge had sent (not published again).",
             [](const Snapshot& s) { return s.echo_suppressed; });
  per_bridge("sluice_nats_loop_suppressed_total", "counter",
             "Messages received from NATS that were not forwarded back out.",
             [](const Snapshot& s) { return s.loop_suppressed; });
  per_bridge("sluice_nats_disconnects_total", "counter",
             "Connections to the server lost (not counting the bridge's own close).",
             [](const Snapshot& s) { return s.disconnects; });
  per_bridge("sluice_nats_reconnects_total", "counter", "Connections to the server restored.",
             [](const Snapshot& s) { return s.reconnects; });
  per_bridge("sluice_nats_connected", "gauge", "1 while connected to a server, else 0.",
             [](const Snapshot& s) { return std::uint64_t{s.connected ? 1u : 0u}; });
}

// A bus and its bridge under one name: the bus's families, then the
// bridge's. Any thread.
template <typename Sink, typename Bus, typename Bridge>
void WritePrometheus(Sink&& sink, std::string_view name, const Bus& bus, const Bridge& bridge) {
  sluice::WritePrometheus(sink, name, bus);
  const BridgeMetrics metrics = CaptureBridgeMetrics(name, bridge);
  WriteBridgePrometheus(sink, &metrics, 1);
}

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
