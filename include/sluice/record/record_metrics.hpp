// A recorder's and a flight recorder's counts in the Prometheus text
// exposition format (version 0.0.4), beside the bus's own
// (sluice/extras/prometheus.hpp), with the same `bus` label:
//
//   sluice_recorder_messages_total{bus,channel,outcome}   recorded, refused, failed
//   sluice_flight_recorder_triggers_total{bus,outcome}    started, merged, missed
//   sluice_flight_recorder_dumps_total{bus,outcome}       written, failed
//   sluice_flight_recorder_messages_total{bus,outcome}    dumped, skipped
//
//   std::string text;
//   sluice::WritePrometheus(text, "robot", bus);
//   sluice::record::WriteRecorderPrometheus(text, "robot", recorder);
//   sluice::record::WriteFlightRecorderPrometheus(text, "robot", flight);
//   // several in one text, each family once:
//   sluice::record::WriteRecorderPrometheus(text,
//       {sluice::record::CaptureRecorderMetrics("a", recorder_a),
//        sluice::record::CaptureRecorderMetrics("b", recorder_b)});
//
// Any thread (the counts are read with relaxed loads, each on its own).
// Standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/recorder.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// What WriteRecorderPrometheus reports of one recorder, read at one moment.
struct RecorderMetrics {
  std::string_view bus;  // the `bus` label; must outlive the value
  std::vector<std::pair<std::string, RecorderCounts>> channels;  // topic, counts
};
// Any thread once the bus runs (Record is done by then).
template <typename Bus>
RecorderMetrics CaptureRecorderMetrics(std::string_view bus_name, const Recorder<Bus>& recorder) {
  RecorderMetrics metrics;
  metrics.bus = bus_name;
  for (std::size_t channel = 0; channel < recorder.ChannelCount(); ++channel) {
    metrics.channels.emplace_back(recorder.Topic(channel), recorder.Counts(channel));
  }
  return metrics;
}

// What WriteFlightRecorderPrometheus reports of one flight recorder.
struct FlightRecorderMetrics {
  std::string_view bus;  // the `bus` label; must outlive the value
  FlightRecorderCounts counts;
};
template <typename Payload, typename Clock>
FlightRecorderMetrics CaptureFlightRecorderMetrics(std::string_view bus_name,
                                                   const FlightRecorder<Payload, Clock>& recorder) {
  return {bus_name, recorder.Counts()};
}

// Several recorders in one text: each family written once (the format
// allows one HELP and one TYPE line a name). Per channel (Record's topic,
// valid UTF-8, one type a topic): recorded + refused + failed is every
// message of the channel the bus dispatched to the recorder. Each (bus,
// channel) must appear once: two recorders of one bus that record the same
// topic need different `bus` labels.
template <typename Sink>
void WriteRecorderPrometheus(Sink&& sink, std::initializer_list<RecorderMetrics> recorders) {
  constexpr std::string_view kName = "sluice_recorder_messages_total";
  sluice::detail::EmitFamily(sink, kName, "counter",
                             "Messages of a recorded channel, by what became of them.");
  for (const RecorderMetrics& recorder : recorders) {
    for (const auto& [topic, counts] : recorder.channels) {
      const auto sample = [&, &topic = topic](std::string_view outcome, std::uint64_t value) {
        sluice::detail::EmitSampleStart(sink, kName, recorder.bus,
                                        {{"channel", topic}, {"outcome", outcome}});
        sluice::detail::Emit(sink, "} ");
        sluice::detail::EmitNumber(sink, value);
        sluice::detail::Emit(sink, "\n");
      };
      sample("recorded", counts.recorded);
      sample("refused", counts.refused);
      sample("failed", counts.failed);
    }
  }
}
template <typename Sink, typename Bus>
void WriteRecorderPrometheus(Sink&& sink, std::string_view bus_name,
                             const Recorder<Bus>& recorder) {
  WriteRecorderPrometheus(sink, {CaptureRecorderMetrics(bus_name, recorder)});
}

// Several flight recorders in one text, each family written once; one a
// `bus` label.
template <typename Sink>
void WriteFlightRecorderPrometheus(Sink&& sink,
                                   std::initializer_list<FlightRecorderMetrics> recorders) {
  constexpr std::string_view kTriggers = "sluice_flight_recorder_triggers_total";
  sluice::detail::EmitFamily(sink, kTriggers, "counter",
                             "Flight recorder triggers: started a window, part of one being "
                             "collected, or missed while one waited to be written.");
  for (const FlightRecorderMetrics& recorder : recorders) {
    const FlightRecorderCounts& counts = recorder.counts;
    sluice::detail::EmitSample(sink, kTriggers, recorder.bus, counts.triggers, "outcome",
                               "started");
    sluice::detail::EmitSample(sink, kTriggers, recorder.bus, counts.triggers_merged, "outcome",
                               "merged");
    sluice::detail::EmitSample(sink, kTriggers, recorder.bus, counts.triggers_missed, "outcome",
                               "missed");
  }
  constexpr std::string_view kDumps = "sluice_flight_recorder_dumps_total";
  sluice::detail::EmitFamily(sink, kDumps, "counter", "Flight recorder dump files.");
  for (const FlightRecorderMetrics& recorder : recorders) {
    sluice::detail::EmitSample(sink, kDumps, recorder.bus, recorder.counts.dumps_written, "outcome",
                               "written");
    sluice::detail::EmitSample(sink, kDumps, recorder.bus, recorder.counts.dumps_failed, "outcome",
                               "failed");
  }
  constexpr std::string_view kMessages = "sluice_flight_recorder_messages_total";
  sluice::detail::EmitFamily(sink, kMessages, "counter",
                             "Messages of dumped windows: written, or of a type not kept.");
  for (const FlightRecorderMetrics& recorder : recorders) {
    sluice::detail::EmitSample(sink, kMessages, recorder.bus, recorder.counts.messages_dumped,
                               "outcome", "dumped");
    sluice::detail::EmitSample(sink, kMessages, recorder.bus, recorder.counts.messages_skipped,
                               "outcome", "skipped");
  }
}
template <typename Sink, typename Payload, typename Clock>
void WriteFlightRecorderPrometheus(Sink&& sink, std::string_view bus_name,
                                   const FlightRecorder<Payload, Clock>& recorder) {
  WriteFlightRecorderPrometheus(sink, {CaptureFlightRecorderMetrics(bus_name, recorder)});
}

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
