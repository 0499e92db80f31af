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
//
// Any thread (the counts are read with relaxed loads, each on its own).
// Standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/config.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/recorder.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// Per channel (Record's topic): recorded + refused + failed is every message
// of the channel the bus dispatched to the recorder.
template <typename Sink, typename Bus>
void WriteRecorderPrometheus(Sink&& sink, std::string_view bus_name,
                             const Recorder<Bus>& recorder) {
  constexpr std::string_view kName = "sluice_recorder_messages_total";
  sluice::detail::EmitFamily(sink, kName, "counter",
                             "Messages of a recorded channel, by what became of them.");
  for (std::size_t channel = 0; channel < recorder.ChannelCount(); ++channel) {
    const RecorderCounts counts = recorder.Counts(channel);
    const std::string_view topic = recorder.Topic(channel);
    const auto sample = [&](std::string_view outcome, std::uint64_t value) {
      sluice::detail::EmitSampleStart(sink, kName, bus_name,
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

template <typename Sink, typename Payload, typename Clock>
void WriteFlightRecorderPrometheus(Sink&& sink, std::string_view bus_name,
                                   const FlightRecorder<Payload, Clock>& recorder) {
  const FlightRecorderCounts counts = recorder.Counts();
  constexpr std::string_view kTriggers = "sluice_flight_recorder_triggers_total";
  sluice::detail::EmitFamily(sink, kTriggers, "counter",
                             "Flight recorder triggers: started a window, part of one being "
                             "collected, or missed while one waited to be written.");
  sluice::detail::EmitSample(sink, kTriggers, bus_name, counts.triggers, "outcome", "started");
  sluice::detail::EmitSample(sink, kTriggers, bus_name, counts.triggers_merged, "outcome",
                             "merged");
  sluice::detail::EmitSample(sink, kTriggers, bus_name, counts.triggers_missed, "outcome",
                             "missed");
  constexpr std::string_view kDumps = "sluice_flight_recorder_dumps_total";
  sluice::detail::EmitFamily(sink, kDumps, "counter", "Flight recorder dump files.");
  sluice::detail::EmitSample(sink, kDumps, bus_name, counts.dumps_written, "outcome", "written");
  sluice::detail::EmitSample(sink, kDumps, bus_name, counts.dumps_failed, "outcome", "failed");
  constexpr std::string_view kMessages = "sluice_flight_recorder_messages_total";
  sluice::detail::EmitFamily(sink, kMessages, "counter",
                             "Messages of dumped windows: written, or of a type not kept.");
  sluice::detail::EmitSample(sink, kMessages, bus_name, counts.messages_dumped, "outcome",
                             "dumped");
  sluice::detail::EmitSample(sink, kMessages, bus_name, counts.messages_skipped, "outcome",
                             "skipped");
}

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
