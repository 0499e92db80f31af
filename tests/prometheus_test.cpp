#include "sluice/extras/prometheus.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>

#include "test_support.hpp"

namespace sluice_test {
namespace prometheus_test {
namespace {

bool Contains(const std::string& text, std::string_view line) {
  return text.find(std::string(line) + "\n") != std::string::npos;
}

TEST(PrometheusTest, WritesEveryFamilyForABus) {
  sluice::MpscBus<BasicPayload, 64> bus;
  ASSERT_TRUE(bus.Subscribe<MotorCmd>([](const MotorCmd&) {}).IsValid());
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, sluice::MessagePriority::HIGH));
  ASSERT_TRUE(bus.Publish(MotorCmd{2}));
  ASSERT_TRUE(bus.Publish(MotorCmd{3}));
  ASSERT_EQ(bus.ProcessBatch(1), 1u);
  // Bad input: refused, counted as rejected (not as dropped), exported.
  ASSERT_FALSE(bus.PublishWithPriority(MotorCmd{4}, 0, static_cast<sluice::MessagePriority>(7)));

  std::string text;
  sluice::WritePrometheus(text, "telemetry", bus);
  EXPECT_TRUE(Contains(text, "# TYPE sluice_messages_published_total counter"));
  EXPECT_TRUE(
      Contains(text, "sluice_messages_published_total{bus=\"telemetry\",priority=\"high\"} 1"));
  EXPECT_TRUE(
      Contains(text, "sluice_messages_published_total{bus=\"telemetry\",priority=\"medium\"} 2"));
  EXPECT_TRUE(
      Contains(text, "sluice_messages_dropped_total{bus=\"telemetry\",priority=\"low\"} 0"));
  // Processed carries `priority` like published and dropped.
  EXPECT_TRUE(
      Contains(text, "sluice_messages_processed_total{bus=\"telemetry\",priority=\"high\"} 1"));
  EXPECT_TRUE(
      Contains(text, "sluice_messages_processed_total{bus=\"telemetry\",priority=\"medium\"} 0"));
  EXPECT_FALSE(Contains(text, "sluice_messages_processed_total{bus=\"telemetry\"}"));
  EXPECT_TRUE(Contains(text, "sluice_processing_errors_total{bus=\"telemetry\"} 0"));
  EXPECT_TRUE(Contains(text, "# TYPE sluice_messages_rejected_total counter"));
  EXPECT_TRUE(Contains(text, "sluice_messages_rejected_total{bus=\"telemetry\"} 1"));
  EXPECT_TRUE(Contains(text, "# TYPE sluice_messages_refused_closed_total counter"));
  EXPECT_TRUE(Contains(text, "sluice_messages_refused_closed_total{bus=\"telemetry\"} 0"));
  EXPECT_TRUE(Contains(text, "sluice_queue_depth{bus=\"telemetry\"} 2"));
  EXPECT_TRUE(Contains(text, "sluice_queue_capacity{bus=\"telemetry\"} 64"));
  EXPECT_TRUE(Contains(text, "sluice_backpressure_level{bus=\"telemetry\"} 0"));
  EXPECT_TRUE(Contains(text, "# TYPE sluice_queue_depth_peak gauge"));
  EXPECT_TRUE(Contains(text, "sluice_queue_depth_peak{bus=\"telemetry\"} 3"));  // a batch start
  EXPECT_TRUE(Contains(text, "sluice_backpressure_level_peak{bus=\"telemetry\"} 0"));
  // No registered producers on a bus without lanes: no producer families.
  EXPECT_FALSE(Contains(text, "sluice_producer_"));
  EXPECT_TRUE(
      Contains(text, "sluice_performance_mode{bus=\"telemetry\",mode=\"FULL_FEATURED\"} 1"));
  EXPECT_TRUE(Contains(text, "sluice_performance_mode{bus=\"telemetry\",mode=\"BARE_METAL\"} 0"));
  EXPECT_TRUE(Contains(text, "# TYPE sluice_dispatch_latency_seconds histogram"));
  EXPECT_TRUE(Contains(text,
                       "sluice_dispatch_latency_seconds_bucket{bus=\"telemetry\",priority=\"high\","
                       "le=\"+Inf\"} 1"));
  EXPECT_TRUE(Contains(
      text, "sluice_dispatch_latency_seconds_count{bus=\"telemetry\",priority=\"high\"} 1"));
  EXPECT_TRUE(Contains(
      text, "sluice_dispatch_latency_seconds_count{bus=\"telemetry\",priority=\"low\"} 0"));
}

sluice::BusMetrics HandMadeMetrics(std::string_view name) {
  sluice::BusMetrics metrics;
  metrics.name = name;
  metrics.has_latency = true;
  metrics.capacity = 8;
  sluice::LatencyHistogram& medium =
      metrics.latency.by_priority[static_cast<int>(sluice::MessagePriority::MEDIUM)];
  medium.buckets[0] = 2;   // <= 128 ns
  medium.buckets[3] = 5;   // <= 1.024 us
  medium.buckets[23] = 1;  // <= 1.073741824 s
  medium.count = 8;
  medium.sum_nanos = 1'500'042'007;
  return metrics;
}

TEST(PrometheusTest, HistogramBucketsAreCumulativeWithBoundsInSeconds) {
  const sluice::BusMetrics metrics = HandMadeMetrics("b");
  std::string text;
  sluice::WritePrometheus(text, &metrics, 1);
  const std::string prefix =
      "sluice_dispatch_latency_seconds_bucket{bus=\"b\",priority=\"medium\",";
  // Bounds exactly, from nanoseconds: 2^(7+i) ns, 9 decimals at most.
  EXPECT_TRUE(Contains(text, prefix + "le=\"0.000000128\"} 2"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"0.000000256\"} 2"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"0.000001024\"} 7"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"0.000002048\"} 7"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"0.536870912\"} 7"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"1.073741824\"} 8"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"8.589934592\"} 8"));
  EXPECT_TRUE(Contains(text, prefix + "le=\"+Inf\"} 8"));
  EXPECT_EQ(text.find(prefix + "le=\"17.179869184\""), std::string::npos);  // the last bound
  std::size_t bounds = 0;
  for (std::size_t at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + 1)) {
    ++bounds;
  }
  EXPECT_EQ(bounds, sluice::kLatencyBucketCount);
  EXPECT_TRUE(Contains(
      text, "sluice_dispatch_latency_seconds_sum{bus=\"b\",priority=\"medium\"} 1.500042007"));
  EXPECT_TRUE(
      Contains(text, "sluice_dispatch_latency_seconds_count{bus=\"b\",priority=\"medium\"} 8"));
}

TEST(PrometheusTest, EscapesTheBusNameAndWritesEachFamilyOnce) {
  const sluice::BusMetrics first = HandMadeMetrics("a \"quoted\" \\ name\nnext");
  const sluice::BusMetrics second = HandMadeMetrics("plain");
  std::string text;
  sluice::WritePrometheus([&text](std::string_view s) { text.append(s); }, {first, second});
  EXPECT_NE(text.find("{bus=\"a \\\"quoted\\\" \\\\ name\\nnext\"}"), std::string::npos);
  EXPECT_NE(text.find("{bus=\"plain\"}"), std::string::npos);
  std::size_t families = 0;
  for (std::size_t at = text.find("# TYPE sluice_queue_depth "); at != std::string::npos;
       at = text.find("# TYPE sluice_queue_depth ", at + 1)) {
    ++families;
  }
  EXPECT_EQ(families, 1u);
}

// Whether `text` is valid UTF-8 (read here independently of the library's
// own check): the rule of RFC 3629, table 3-7 of the Unicode standard.
bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const unsigned char b0 = byte(0);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 <= 0x7F) {
      n = 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 2;
    } else if (b0 == 0xE0) {
      n = 3, lo = 0xA0;
    } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
      n = 3;
    } else if (b0 == 0xED) {
      n = 3, hi = 0x9F;
    } else if (b0 == 0xF0) {
      n = 4, lo = 0x90;
    } else if (b0 >= 0xF1 && b0 <= 0xF3) {
      n = 4;
    } else if (b0 == 0xF4) {
      n = 4, hi = 0x8F;
    } else {
      return false;
    }
    if (i + n > text.size()) return false;
    if (n > 1 && (byte(1) < lo || byte(1) > hi)) return false;
    for (std::size_t k = 2; k < n; ++k) {
      if ((byte(k) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// A bus name with bytes that are not UTF-8 (a stray continuation byte, an
// overlong form, a surrogate, a lead byte cut off at the end): the label is
// written valid, each bad byte as '?', valid characters kept, and the rest
// of the scrape is unchanged. The Prometheus client's parser refuses the
// whole scrape otherwise (tests/prometheus/hostile_names.cpp runs it).
TEST(PrometheusTest, ABusNameThatIsNotUtf8IsWrittenAsValidUtf8) {
  const sluice::BusMetrics bad =
      HandMadeMetrics("f\xC3\xBCr \x80\xC0\xAF \xED\xA0\x80 \\ \xE2\x82");
  const sluice::BusMetrics good = HandMadeMetrics("plain");
  std::string text;
  sluice::WritePrometheus(text, {bad, good});
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_NE(text.find("{bus=\"f\xC3\xBCr ??? ??? \\\\ ??\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("{bus=\"plain\"}"), std::string::npos);
}

// Nanoseconds as seconds: exact, at most 9 decimals, trailing zeros trimmed.
TEST(PrometheusTest, SecondsAreWrittenExactlyFromNanoseconds) {
  const auto seconds = [](std::uint64_t nanos) {
    std::string text;
    sluice::detail::EmitSeconds(text, nanos);
    return text;
  };
  EXPECT_EQ(seconds(0), "0");
  EXPECT_EQ(seconds(1), "0.000000001");
  EXPECT_EQ(seconds(128), "0.000000128");
  EXPECT_EQ(seconds(600), "0.0000006");
  EXPECT_EQ(seconds(1'500'000), "0.0015");
  EXPECT_EQ(seconds(1'000'000'000), "1");
  EXPECT_EQ(seconds(8'589'934'592), "8.589934592");
  EXPECT_EQ(seconds(5'000'000'000'000), "5000");
  const sluice::BusMetrics metrics = HandMadeMetrics("b");
  std::string text;
  sluice::WritePrometheus(text, &metrics, 1);
  EXPECT_NE(text.find("measured in nanoseconds: bounds from 128 ns"), std::string::npos);
}

struct FixedClock {
  static std::uint64_t NowNanos() noexcept { return 100'000'000'000; }
};
struct FixedClockTraits : sluice::DefaultBusTraits {
  using Clock = FixedClock;
};

// 1,000 latencies of 5 s: the exported sum is 5000 s exactly, also with
// SLUICE_ATOMIC_BITS=32 (where a 32-bit sum of nanoseconds would wrap).
TEST(PrometheusTest, LatencySumsPast32BitsOfNanosecondsAreExact) {
  sluice::MpscBus<BasicPayload, 2048, FixedClockTraits> bus;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(bus.PublishFast(MotorCmd{i}, 0, std::chrono::seconds(100 - 5)));
  }
  EXPECT_EQ(bus.ProcessBatch(), 1000u);
  std::string text;
  sluice::WritePrometheus(text, "slow", bus);
  EXPECT_TRUE(
      Contains(text, "sluice_dispatch_latency_seconds_sum{bus=\"slow\",priority=\"medium\"} 5000"));
  EXPECT_TRUE(Contains(
      text, "sluice_dispatch_latency_seconds_count{bus=\"slow\",priority=\"medium\"} 1000"));
}

struct NoHistogramTraits : sluice::DefaultBusTraits {
  using Latency = sluice::NoLatencyHistograms;
};

TEST(PrometheusTest, ABusWithoutHistogramsWritesNoLatencySamples) {
  sluice::SpscBus<BasicPayload, 16, NoHistogramTraits> bus;
  std::string text;
  sluice::WritePrometheus(text, "quiet", bus);
  EXPECT_NE(text.find("# TYPE sluice_dispatch_latency_seconds histogram"), std::string::npos);
  EXPECT_EQ(text.find("sluice_dispatch_latency_seconds_bucket"), std::string::npos);
  EXPECT_TRUE(Contains(text, "sluice_queue_capacity{bus=\"quiet\"} 16"));
}

}  // namespace
TEST(PrometheusTest, ScrapesSeeThePeakBetweenThemAndStartItAgain) {
  sluice::MpscBus<BasicPayload, 16> bus;
  int refused = 0;
  for (int i = 0; i < 16; ++i) {
    refused += bus.PublishWithPriority(MotorCmd{i}, 0, sluice::MessagePriority::LOW) ? 0 : 1;
  }
  ASSERT_GT(refused, 0);  // LOW refused from 60 %: WARNING
  while (bus.ProcessBatch() > 0) {
  }
  std::string first;
  sluice::WritePrometheus(first, "b", bus);
  EXPECT_TRUE(Contains(first, "sluice_backpressure_level{bus=\"b\"} 0"));
  EXPECT_TRUE(Contains(first, "sluice_backpressure_level_peak{bus=\"b\"} 1"));
  std::string second;
  sluice::WritePrometheus(second, "b", bus);
  EXPECT_TRUE(Contains(second, "sluice_backpressure_level_peak{bus=\"b\"} 0"));
  EXPECT_TRUE(Contains(second, "sluice_queue_depth_peak{bus=\"b\"} 0"));
  // A const bus is only looked at: its peak is the fill now, and stays.
  ASSERT_TRUE(bus.PublishWithPriority(MotorCmd{1}, 0, sluice::MessagePriority::HIGH));
  const auto& view = bus;
  std::string looked;
  sluice::WritePrometheus(looked, "b", view);
  EXPECT_TRUE(Contains(looked, "sluice_queue_depth_peak{bus=\"b\"} 1"));
}

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<2, 16>;
};

TEST(PrometheusTest, RegisteredProducersCarryLaneAndProducerLabels) {
  sluice::AsyncBus<BasicPayload, 64, sluice::ProducerModel::kMulti, LaneTraits> bus;
  auto lidar = bus.RegisterProducer("lidar \"front\"");
  auto imu = bus.RegisterProducer("imu");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(lidar.Publish(MotorCmd{i}));
  ASSERT_TRUE(imu.PublishWithPriority(MotorCmd{9}, 0, sluice::MessagePriority::HIGH));
  bus.Close();
  ASSERT_FALSE(imu.Publish(MotorCmd{10}));
  std::string text;
  sluice::WritePrometheus(text, "robot", bus);
  EXPECT_TRUE(Contains(text, "# TYPE sluice_producer_messages_published_total counter"));
  EXPECT_TRUE(Contains(text,
                       "sluice_producer_messages_published_total{bus=\"robot\",lane=\"1\","
                       "producer=\"lidar \\\"front\\\"\",priority=\"medium\"} 3"));
  EXPECT_TRUE(Contains(text,
                       "sluice_producer_messages_published_total{bus=\"robot\",lane=\"2\","
                       "producer=\"imu\",priority=\"high\"} 1"));
  EXPECT_TRUE(Contains(text,
                       "sluice_producer_messages_dropped_total{bus=\"robot\",lane=\"2\","
                       "producer=\"imu\",priority=\"low\"} 0"));
  EXPECT_TRUE(Contains(text,
                       "sluice_producer_messages_refused_total{bus=\"robot\",lane=\"2\","
                       "producer=\"imu\",reason=\"closed\"} 1"));
  EXPECT_TRUE(Contains(text,
                       "sluice_producer_messages_refused_total{bus=\"robot\",lane=\"1\","
                       "producer=\"lidar \\\"front\\\"\",reason=\"rejected\"} 0"));
}

}  // namespace prometheus_test
}  // namespace sluice_test
