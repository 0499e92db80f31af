// Exporting metrics: three buses carry traffic, then their statistics, queue
// depth, backpressure (now and its peak since the last scrape), mode, latency
// histograms and each named producer's counters are written in the
// Prometheus text format to standard output (serve that text at /metrics
// with the HTTP server of your choice).
#include <cstdint>
#include <cstdio>
#include <sluice/extras/prometheus.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <variant>

struct Sample {
  std::int32_t value;
};
struct Alarm {
  std::uint8_t code;
};
using Payload = std::variant<Sample, Alarm>;

// Sensors publish through lanes of their own, each under its name.
struct SensorTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<2, 64>;
};

int main() {
  sluice::MpscBus<Payload, 256> telemetry;
  sluice::SpscBus<Payload, 64> control;
  std::int64_t sum = 0;
  if (!telemetry.Subscribe<Sample>([&sum](const Sample& s) { sum += s.value; }).IsValid()) return 1;

  // Telemetry: 100 MEDIUM samples and 2 HIGH alarms, dispatched; then LOW
  // samples until admission refuses them (60 % of 256 slots), left queued:
  // sluice_backpressure_level then reads 1, WARNING, where LOW is refused.
  int refused = 0;  // none expected here: 102 messages fit below every threshold
  for (int i = 0; i < 100; ++i) refused += telemetry.Publish(Sample{i}) ? 0 : 1;
  for (int i = 0; i < 2; ++i) {
    refused += telemetry.PublishWithPriority(Alarm{1}, 9, sluice::MessagePriority::HIGH) ? 0 : 1;
  }
  while (telemetry.ProcessBatch() > 0) {
  }
  int low = 0;
  while (telemetry.PublishWithPriority(Sample{1}, 0, sluice::MessagePriority::LOW)) ++low;
  // Refused again: the second drop.
  const bool second_refusal =
      !telemetry.PublishWithPriority(Sample{1}, 0, sluice::MessagePriority::LOW);

  // Control: a few messages in BARE_METAL mode, which counts nothing.
  control.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  refused += control.Publish(Alarm{2}) ? 0 : 1;
  control.ProcessBatch();

  // Sensors: each producer's counts carry its name in a `producer` label.
  sluice::MpscBus<Payload, 64, SensorTraits> sensors;
  auto lidar = sensors.RegisterProducer("lidar");
  auto imu = sensors.RegisterProducer("imu");
  if (!lidar || !imu) return 1;
  for (int i = 0; i < 10; ++i) refused += lidar.Publish(Sample{i}) ? 0 : 1;
  for (int i = 0; i < 3; ++i) {
    refused += imu.PublishWithPriority(Sample{i}, 0, sluice::MessagePriority::HIGH) ? 0 : 1;
  }
  sensors.ProcessBatch();

  std::string text;
  sluice::WritePrometheus(text, {sluice::CaptureMetrics("telemetry", telemetry),
                                 sluice::CaptureMetrics("control \"main\"", control),
                                 sluice::CaptureMetrics("sensors", sensors)});
  std::fputs(text.c_str(), stdout);
  std::fprintf(stderr, "sum %lld, %d LOW samples queued\n", static_cast<long long>(sum), low);
  return sum == 4950 && low == 154 && refused == 0 && second_refusal ? 0 : 1;
}
