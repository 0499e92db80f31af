// Prints a bus's metrics with its recorder's and its flight recorder's
// (sluice/record/record_metrics.hpp), for check_exposition.py: the Prometheus
// client's own parser reads the text and record_metrics.expected lists the
// samples it must hold. The run is deterministic: a recorder whose buffer
// is too small for every message (refusals), a flight recorder triggered
// once and written once. Usage: sluice_prometheus_record_metrics SCRATCH_DIR
#include "sluice/record/record_metrics.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <variant>

#include "sluice/nats/codec.hpp"
#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/flight_recorder_observer.hpp"
#include "sluice/record/recorder.hpp"
#include "sluice/sluice.hpp"

struct Pose {
  std::uint32_t frame;
};
struct Stop {
  std::uint32_t code;
};
template <>
struct sluice::nats::Fields<Pose> {
  static constexpr auto kMembers = std::make_tuple(&Pose::frame);
};
template <>
struct sluice::nats::Fields<Stop> {
  static constexpr auto kMembers = std::make_tuple(&Stop::code);
};

namespace {
using Payload = std::variant<Pose, Stop>;
using Flight = sluice::record::FlightRecorder<Payload>;
struct Traits : sluice::DefaultBusTraits {
  using Observer = sluice::record::FlightRecorderObserver<Flight>;
};
using Bus = sluice::MpscBus<Payload, 64, Traits>;
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string scratch = argv[1];
  auto bus = std::make_unique<Bus>();
  sluice::record::FlightRecorderOptions options;
  options.before = 20;
  options.after = 10;
  options.path_prefix = scratch + "/metrics_flight";
  Flight flight(options);
  if (!flight.Keep<Pose>("/robot/pose", "Pose")) return 1;  // Stop is not kept
  bus->GetObserver().Attach(&flight);
  // Room for a few records only: most messages between two Flush calls
  // are refused (counted).
  sluice::record::Recorder<Bus> recorder(*bus, {scratch + "/metrics_recording", 0, 256});
  if (!recorder.Record<Pose>("/robot/\"pose\"", "Pose")) return 1;
  if (!recorder.Record<Stop>("/robot/stop", "Stop")) return 1;
  for (std::uint32_t i = 0; i < 110; ++i) {
    const bool admitted =
        i % 11 == 10 ? bus->Publish(Stop{i}).IsAdmitted() : bus->Publish(Pose{i}).IsAdmitted();
    if (!admitted) return 1;
    if (i % 10 == 9) {
      while (bus->ProcessBatch() != 0) {
      }
      (void)recorder.Flush();
    }
    if (i == 59) flight.Trigger();
  }
  while (bus->ProcessBatch() != 0) {
  }
  if (!recorder.Close()) return 1;
  if (flight.WriteDumps() != 1) return 1;
  // A second bus's recorders ("arm"), nothing recorded: in the same text,
  // each family written once.
  auto arm = std::make_unique<Bus>();
  sluice::record::Recorder<Bus> arm_recorder(*arm, {scratch + "/metrics_arm", 0, 256});
  if (!arm_recorder.Record<Pose>("/robot/\"pose\"", "Pose")) return 1;
  if (arm_recorder.Record<Stop>("/robot/\xFF", "Stop")) return 1;  // not UTF-8: refused
  Flight arm_flight(options);
  std::string text;
  sluice::WritePrometheus(text, "robot", *bus);
  sluice::record::WriteRecorderPrometheus(
      text, {sluice::record::CaptureRecorderMetrics("robot", recorder),
             sluice::record::CaptureRecorderMetrics("arm", arm_recorder)});
  sluice::record::WriteFlightRecorderPrometheus(
      text, {sluice::record::CaptureFlightRecorderMetrics("robot", flight),
             sluice::record::CaptureFlightRecorderMetrics("arm", arm_flight)});
  std::fputs(text.c_str(), stdout);
  return 0;
}
