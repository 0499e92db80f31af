// The bridge's Prometheus text on its own, with no server and no client: a
// snapshot of distinct values is written, and every figure must reach its
// own family and labels, each family once, whatever the bus's name holds.
// (The text is also read by Prometheus's own parser in
// example_metrics_parse, with a server.)
#include "sluice/nats/metrics.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "sluice/message.hpp"
#include "sluice/sluice.hpp"

namespace metrics_test {
namespace {

using sluice::nats::BridgeMetrics;
using sluice::nats::BridgeStatisticsSnapshot;

// What the writer reads of a bridge: GetStatistics(), nothing else.
struct FakeBridge {
  BridgeStatisticsSnapshot snapshot;
  BridgeStatisticsSnapshot GetStatistics() const { return snapshot; }
};

// Every field its own value, from 101 up, so a figure written under
// another's name shows.
BridgeStatisticsSnapshot Distinct() {
  BridgeStatisticsSnapshot s;
  std::uint64_t next = 101;
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    s.frames_sent[p] = next++;
    s.send_dropped[p] = next++;
    s.delivered[p] = next++;
    s.admitted_after_wait[p] = next++;
    s.handed_back[p] = next++;
    s.bus_dropped[p] = next++;
    s.slow_consumer_dropped[p] = next++;
    s.jetstream_gave_up[p] = next++;
    s.jetstream_refused[p] = next++;
  }
  for (std::size_t e = 0; e < sluice::nats::kFrameErrorCount; ++e) s.rejected[e] = next++;
  s.reconnect_buffer_overflows = next++;
  s.encode_failed = next++;
  s.loop_suppressed = next++;
  s.frames_received = next++;
  s.jetstream_resent = next++;
  s.jetstream_behind_window = next++;
  s.permission_violations = next++;
  s.streams.gaps = next++;
  s.streams.reordered = next++;
  s.streams.streams_opened = next++;
  s.streams.streams_evicted = next++;
  s.streams.streams_tracked = next++;
  s.streams.jumps_held = next++;
  s.streams.jumps_confirmed = next++;
  s.streams.jumps_refused = next++;
  s.streams.heartbeats_with_gaps = next++;
  s.streams.heartbeats_far_ahead = next++;
  s.streams.streams_silent = next++;
  s.streams.streams_restored = next++;
  s.streams.streams_not_saved = next++;
  s.streams.state_records_dropped = next++;
  s.heartbeats_sent = next++;
  s.heartbeats_received = next++;
  s.dispatch_acks.acknowledged = next++;
  s.dispatch_acks.withdrawn = next++;
  s.dispatch_acks.pending = next++;
  s.unsequenced = next++;
  s.echo_suppressed = next++;
  s.on_reject_threw = next++;
  s.disconnects = next++;
  s.reconnects = next++;
  s.connected = true;
  return s;
}

std::size_t Occurrences(const std::string& text, std::string_view needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

std::string Line(std::string_view family, std::string_view labels, std::uint64_t value) {
  return std::string(family) + "{bus=\"b\"" + std::string(labels) + "} " + std::to_string(value) +
         "\n";
}

TEST(NatsMetricsTest, EveryFigureReachesItsOwnFamilyAndLabels) {
  FakeBridge bridge{Distinct()};
  const BridgeMetrics metrics = sluice::nats::CaptureBridgeMetrics("b", bridge);
  std::string text;
  sluice::nats::WriteBridgePrometheus(text, &metrics, 1);
  const BridgeStatisticsSnapshot& s = bridge.snapshot;
  const char* const priorities[] = {"low", "medium", "high"};
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    const std::string priority = std::string(",priority=\"") + priorities[p] + "\"";
    EXPECT_EQ(Occurrences(text, Line("sluice_nats_frames_sent_total", priority, s.frames_sent[p])),
              1u);
    EXPECT_EQ(
        Occurrences(text, Line("sluice_nats_messages_delivered_total", priority, s.delivered[p])),
        1u);
    EXPECT_EQ(Occurrences(text, Line("sluice_nats_messages_admitted_after_wait_total", priority,
                                     s.admitted_after_wait[p])),
              1u);
    EXPECT_EQ(Occurrences(
                  text, Line("sluice_nats_messages_handed_back_total", priority, s.handed_back[p])),
              1u);
    EXPECT_EQ(Occurrences(text, Line("sluice_nats_jetstream_refused_total", priority,
                                     s.jetstream_refused[p])),
              1u);
    EXPECT_EQ(Occurrences(text, Line("sluice_nats_messages_dropped_total",
                                     priority + ",reason=\"send\"", s.send_dropped[p])),
              1u);
    EXPECT_EQ(Occurrences(text, Line("sluice_nats_messages_dropped_total",
                                     priority + ",reason=\"bus\"", s.bus_dropped[p])),
              1u);
    EXPECT_EQ(
        Occurrences(text, Line("sluice_nats_messages_dropped_total",
                               priority + ",reason=\"slow_consumer\"", s.slow_consumer_dropped[p])),
        1u);
    EXPECT_EQ(
        Occurrences(text, Line("sluice_nats_messages_dropped_total",
                               priority + ",reason=\"max_deliveries\"", s.jetstream_gave_up[p])),
        1u);
  }
  // Each reason but kNone, by its name.
  for (std::size_t e = 1; e < sluice::nats::kFrameErrorCount; ++e) {
    const auto error = static_cast<sluice::nats::FrameError>(e);
    EXPECT_EQ(
        Occurrences(text, Line("sluice_nats_frames_rejected_total",
                               std::string(",reason=\"") + ToString(error) + "\"", s.rejected[e])),
        1u)
        << ToString(error);
  }
  EXPECT_EQ(Occurrences(text, std::to_string(s.rejected[0])), 0u);  // kNone is no rejection
  const std::pair<std::string_view, std::uint64_t> singles[] = {
      {"sluice_nats_reconnect_buffer_overflows_total", s.reconnect_buffer_overflows},
      {"sluice_nats_encode_failed_total", s.encode_failed},
      {"sluice_nats_frames_received_total", s.frames_received},
      {"sluice_nats_jetstream_resent_total", s.jetstream_resent},
      {"sluice_nats_jetstream_behind_window_total", s.jetstream_behind_window},
      {"sluice_nats_permission_violations_total", s.permission_violations},
      {"sluice_nats_frames_missing", s.streams.gaps},
      {"sluice_nats_frames_reordered_total", s.streams.reordered},
      {"sluice_nats_streams_tracked", s.streams.streams_tracked},
      {"sluice_nats_streams_opened_total", s.streams.streams_opened},
      {"sluice_nats_streams_evicted_total", s.streams.streams_evicted},
      {"sluice_nats_stream_jumps_held_total", s.streams.jumps_held},
      {"sluice_nats_stream_jumps_confirmed_total", s.streams.jumps_confirmed},
      {"sluice_nats_stream_jumps_refused_total", s.streams.jumps_refused},
      {"sluice_nats_heartbeats_sent_total", s.heartbeats_sent},
      {"sluice_nats_heartbeats_received_total", s.heartbeats_received},
      {"sluice_nats_heartbeats_with_gaps_total", s.streams.heartbeats_with_gaps},
      {"sluice_nats_heartbeats_far_ahead_total", s.streams.heartbeats_far_ahead},
      {"sluice_nats_streams_silent", s.streams.streams_silent},
      {"sluice_nats_streams_restored_total", s.streams.streams_restored},
      {"sluice_nats_streams_not_saved_total", s.streams.streams_not_saved},
      {"sluice_nats_stream_state_records_dropped_total", s.streams.state_records_dropped},
      {"sluice_nats_jetstream_acknowledged_after_dispatch_total", s.dispatch_acks.acknowledged},
      {"sluice_nats_jetstream_withdrawn_total", s.dispatch_acks.withdrawn},
      {"sluice_nats_jetstream_awaiting_dispatch", s.dispatch_acks.pending},
      {"sluice_nats_unsequenced_total", s.unsequenced},
      {"sluice_nats_on_reject_exceptions_total", s.on_reject_threw},
      {"sluice_nats_echo_suppressed_total", s.echo_suppressed},
      {"sluice_nats_loop_suppressed_total", s.loop_suppressed},
      {"sluice_nats_disconnects_total", s.disconnects},
      {"sluice_nats_reconnects_total", s.reconnects},
      {"sluice_nats_connected", 1},
  };
  for (const auto& [family, value] : singles) {
    EXPECT_EQ(Occurrences(text, Line(family, "", value)), 1u) << family;
    EXPECT_EQ(Occurrences(text, "# TYPE " + std::string(family) + " "), 1u) << family;
  }
}

// Several bridges: each family's HELP and TYPE once, a sample per bridge.
TEST(NatsMetricsTest, SeveralBridgesShareEachFamilyOnce) {
  FakeBridge first{Distinct()};
  FakeBridge second{};
  const BridgeMetrics metrics[] = {sluice::nats::CaptureBridgeMetrics("one", first),
                                   sluice::nats::CaptureBridgeMetrics("two", second)};
  std::string text;
  sluice::nats::WriteBridgePrometheus(text, metrics, 2);
  EXPECT_EQ(Occurrences(text, "# TYPE sluice_nats_connected gauge\n"), 1u);
  EXPECT_EQ(Occurrences(text, "# HELP sluice_nats_messages_dropped_total "), 1u);
  EXPECT_EQ(Occurrences(text, "sluice_nats_connected{bus=\"one\"} 1\n"), 1u);
  EXPECT_EQ(Occurrences(text, "sluice_nats_connected{bus=\"two\"} 0\n"), 1u);
  // Three priorities, four reasons (send, bus, slow_consumer, max_deliveries).
  EXPECT_EQ(Occurrences(text, "sluice_nats_messages_dropped_total{bus=\"two\""), 12u);
  EXPECT_EQ(Occurrences(text, "reason=\"max_deliveries\"} "), 6u);
}

// The bus's name is the label of both the bus's and the bridge's families,
// written the same way: escaped, and invalid UTF-8 made valid, so one bad
// name cannot make the scrape unreadable.
TEST(NatsMetricsTest, ABadBusNameIsWrittenAsValidEscapedText) {
  using Bus = sluice::MpscBus<std::variant<int>, 8>;
  Bus bus;
  FakeBridge bridge{};
  const std::string name = std::string("a\"b\\c\n") + "\xff" + "d";
  std::string text;
  sluice::nats::WritePrometheus(text, name, bus, bridge);
  EXPECT_EQ(text.find('\xff'), std::string::npos);
  const std::size_t bus_family = text.find("sluice_queue_depth{bus=\"a\\\"b\\\\c\\n");
  const std::size_t bridge_family = text.find("sluice_nats_connected{bus=\"a\\\"b\\\\c\\n");
  EXPECT_NE(bus_family, std::string::npos);
  EXPECT_NE(bridge_family, std::string::npos);
  EXPECT_LT(bus_family, bridge_family);  // the bus's families, then the bridge's
}

}  // namespace
}  // namespace metrics_test
