// Bus metrics in the Prometheus text exposition format (version 0.0.4):
// statistics, queue depth, backpressure, mode and latency histograms, one
// `bus` label per bus. Standard library only; writes through any sink, so it
// needs no allocation when the sink needs none.
//
//   std::string text;
//   sluice::WritePrometheus(text, "telemetry", bus);
//   sluice::WritePrometheus([&](std::string_view s) { socket.Send(s); },
//                           {sluice::CaptureMetrics("a", bus_a), sluice::CaptureMetrics("b",
//                           bus_b)});
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/utf8.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// What WritePrometheus reports of one bus, read at one moment.
struct BusMetrics {
  std::string_view name;  // the `bus` label; written as valid UTF-8, escaped
  BusStatisticsSnapshot statistics;
  LatencySnapshot latency;
  bool has_latency = false;    // false: the bus keeps no histograms
  bool has_statistics = true;  // false: it keeps no counts (NoObservation)
  std::uint64_t queue_depth = 0;
  std::uint64_t capacity = 0;
  BackpressureLevel backpressure = BackpressureLevel::NORMAL;
  // Since the previous capture of a non-const bus (TakeBackpressurePeak);
  // of a const bus, the same without starting a new period
  // (PeekBackpressurePeak).
  BackpressurePeak peak;
  PerformanceMode mode = PerformanceMode::FULL_FEATURED;
  // The bus's registered producers (producer lanes), read when the metrics
  // are written, not at capture: `for_each_producer(bus, context, visit)`
  // calls `visit(context, snapshot)` per producer. Null: none.
  using ProducerVisit = void (*)(void* context, const ProducerStatisticsSnapshot& producer);
  const void* bus = nullptr;
  void (*for_each_producer)(const void* bus, void* context, ProducerVisit visit) = nullptr;
};

// Any thread. `name` must outlive the returned value. A non-const `bus`
// also gives its backpressure peak since its previous capture and starts
// the next period (AsyncBus::TakeBackpressurePeak: one scraper per bus); a
// const one gives it without starting one.
template <typename Bus>
BusMetrics CaptureMetrics(std::string_view name, Bus& bus) noexcept {
  BusMetrics metrics;
  metrics.name = name;
  metrics.statistics = bus.GetStatistics();
  metrics.latency = bus.GetLatencyHistograms();
  metrics.has_latency = Bus::kKeepsLatencyHistograms;
  metrics.has_statistics = Bus::kKeepsStatistics;
  metrics.queue_depth = bus.QueueDepth();
  metrics.capacity = Bus::Capacity();
  metrics.backpressure = bus.GetBackpressureLevel();
  if constexpr (std::is_const_v<Bus>) {
    metrics.peak = bus.PeekBackpressurePeak();
  } else {
    metrics.peak = bus.TakeBackpressurePeak();
  }
  // Never below what this capture read a moment before (the peak reads the
  // fill again); with lanes queue_depth also counts them, the peak not.
  if (metrics.peak.level < metrics.backpressure) metrics.peak.level = metrics.backpressure;
  if constexpr (!Bus::kHasProducerLanes) {
    if (metrics.peak.fill < metrics.queue_depth) metrics.peak.fill = metrics.queue_depth;
  }
  metrics.mode = bus.GetPerformanceMode();
  if constexpr (Bus::kHasProducerLanes && Bus::kKeepsStatistics) {
    metrics.bus = &bus;
    metrics.for_each_producer = [](const void* any, void* context,
                                   BusMetrics::ProducerVisit visit) {
      static_cast<const std::remove_const_t<Bus>*>(any)->ForEachProducer(
          [&](const ProducerStatisticsSnapshot& producer) { visit(context, producer); });
    };
  }
  return metrics;
}

namespace detail {

template <typename Sink>
void Emit(Sink& sink, std::string_view text) {
  if constexpr (std::is_same_v<std::decay_t<Sink>, std::string>) {
    sink.append(text.data(), text.size());
  } else {
    sink(text);
  }
}

template <typename Sink>
void EmitNumber(Sink& sink, std::uint64_t value) {
  char digits[24];
  const std::to_chars_result result = std::to_chars(digits, digits + sizeof digits, value);
  Emit(sink, std::string_view(digits, static_cast<std::size_t>(result.ptr - digits)));
}

// Nanoseconds as decimal seconds, exactly (up to 9 decimals, trailing zeros
// left out): 1'500'000 -> "0.0015", 128 -> "0.000000128".
template <typename Sink>
void EmitSeconds(Sink& sink, std::uint64_t nanos) {
  EmitNumber(sink, nanos / 1'000'000'000);
  std::uint64_t fraction = nanos % 1'000'000'000;
  if (fraction == 0) return;
  char digits[10] = {'.', '0', '0', '0', '0', '0', '0', '0', '0', '0'};
  for (int i = 9; i >= 1; --i, fraction /= 10) digits[i] = static_cast<char>('0' + fraction % 10);
  std::size_t length = 10;
  while (digits[length - 1] == '0') --length;
  Emit(sink, std::string_view(digits, length));
}

// A label value, as valid UTF-8 (the text format's readers refuse the whole
// scrape otherwise): each byte that does not start a valid sequence is
// written as '?', as producer names are stored (detail/queue/lane_holder.hpp);
// backslash, double quote and line feed escaped.
template <typename Sink>
void EmitLabelValue(Sink& sink, std::string_view value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(value.data());
  std::size_t start = 0;  // the first byte not yet written
  for (std::size_t i = 0; i < value.size();) {
    const std::size_t sequence = Utf8SequenceLength(bytes + i, value.size() - i);
    const char c = value[i];
    if (sequence != 0 && c != '\\' && c != '"' && c != '\n') {
      i += sequence;
      continue;
    }
    Emit(sink, value.substr(start, i - start));
    Emit(sink, sequence == 0 ? "?" : c == '\\' ? "\\\\" : c == '"' ? "\\\"" : "\\n");
    start = ++i;
  }
  Emit(sink, value.substr(start));
}

template <typename Sink>
void EmitFamily(Sink& sink, std::string_view name, std::string_view type, std::string_view help) {
  Emit(sink, "# HELP ");
  Emit(sink, name);
  Emit(sink, " ");
  Emit(sink, help);
  Emit(sink, "\n# TYPE ");
  Emit(sink, name);
  Emit(sink, " ");
  Emit(sink, type);
  Emit(sink, "\n");
}

struct Label {
  std::string_view name;
  std::string_view value;
};

// name{bus="...",label="value",...} (the closing brace is the caller's)
template <typename Sink>
void EmitSampleStart(Sink& sink, std::string_view name, std::string_view bus,
                     std::initializer_list<Label> labels) {
  Emit(sink, name);
  Emit(sink, "{bus=\"");
  EmitLabelValue(sink, bus);
  Emit(sink, "\"");
  for (const Label& label : labels) {
    Emit(sink, ",");
    Emit(sink, label.name);
    Emit(sink, "=\"");
    EmitLabelValue(sink, label.value);
    Emit(sink, "\"");
  }
}

// name{bus="...",extra_label="extra_value"} value
template <typename Sink>
void EmitSampleStart(Sink& sink, std::string_view name, std::string_view bus,
                     std::string_view extra_label = {}, std::string_view extra_value = {}) {
  if (extra_label.empty()) {
    EmitSampleStart(sink, name, bus, {});
  } else {
    EmitSampleStart(sink, name, bus, {{extra_label, extra_value}});
  }
}

template <typename Sink>
void EmitSample(Sink& sink, std::string_view name, std::string_view bus, std::uint64_t value,
                std::string_view extra_label = {}, std::string_view extra_value = {}) {
  EmitSampleStart(sink, name, bus, extra_label, extra_value);
  Emit(sink, "} ");
  EmitNumber(sink, value);
  Emit(sink, "\n");
}

inline constexpr std::string_view kPriorityLabels[kPriorityCount] = {"low", "medium", "high"};

}  // namespace detail

// Writes the metrics of `count` buses, each family once. `sink` is a
// std::string (appended to) or a callable taking std::string_view.
template <typename Sink>
void WritePrometheus(Sink&& sink, const BusMetrics* buses, std::size_t count) {
  using detail::Emit;
  using detail::EmitFamily;
  using detail::EmitSample;
  using detail::kPriorityLabels;
  const BusMetrics* const end = buses + count;

  // A family with one sample per bus, or one per bus and priority. A bus
  // that keeps no counts has no counter samples (a 0 would read as an idle
  // bus), nor producer or latency ones; its gauges are written.
  const auto per_bus = [&](std::string_view name, std::string_view type, std::string_view help,
                           auto value_of) {
    EmitFamily(sink, name, type, help);
    for (const BusMetrics* bus = buses; bus != end; ++bus) {
      if (type == "counter" && !bus->has_statistics) continue;
      EmitSample(sink, name, bus->name, value_of(*bus));
    }
  };
  const auto per_priority = [&](std::string_view name, std::string_view help, auto values_of) {
    EmitFamily(sink, name, "counter", help);
    for (const BusMetrics* bus = buses; bus != end; ++bus) {
      if (!bus->has_statistics) continue;
      const auto values = values_of(bus->statistics);
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        EmitSample(sink, name, bus->name, values[p], "priority", kPriorityLabels[p]);
      }
    }
  };
  using Values = std::array<std::uint64_t, kPriorityCount>;

  per_priority("sluice_messages_published_total",
               "Messages admitted, by priority (counted in FULL_FEATURED mode).",
               [](const BusStatisticsSnapshot& s) {
                 return Values{s.low_priority_published, s.medium_priority_published,
                               s.high_priority_published};
               });
  per_priority(
      "sluice_messages_dropped_total",
      "Messages refused by admission or capacity, by priority (FULL_FEATURED mode).",
      [](const BusStatisticsSnapshot& s) {
        return Values{s.low_priority_dropped, s.medium_priority_dropped, s.high_priority_dropped};
      });
  per_priority("sluice_messages_processed_total",
               "Messages dispatched by the consumer, by priority (those whose publish was "
               "counted: FULL_FEATURED mode).",
               [](const BusStatisticsSnapshot& s) {
                 return Values{s.low_priority_processed, s.medium_priority_processed,
                               s.high_priority_processed};
               });
  per_bus("sluice_processing_errors_total", "counter",
          "Callbacks and visitors that threw (every mode).",
          [](const BusMetrics& m) { return m.statistics.processing_errors; });
  per_bus("sluice_messages_rejected_total", "counter",
          "Publishes refused as bad input: a valueless payload, an unknown priority (every mode).",
          [](const BusMetrics& m) { return m.statistics.messages_rejected; });
  per_bus("sluice_messages_refused_closed_total", "counter",
          "Publishes refused because the bus was closed (every mode).",
          [](const BusMetrics& m) { return m.statistics.messages_refused_closed; });
  per_bus("sluice_queue_depth", "gauge", "Messages admitted and not yet released.",
          [](const BusMetrics& m) { return m.queue_depth; });
  per_bus("sluice_queue_depth_peak", "gauge",
          "Highest fill of the shared queue since the previous scrape (reset by each scrape "
          "of the bus): at refusals for fill, at batch starts (FULL_FEATURED) and now.",
          [](const BusMetrics& m) { return static_cast<std::uint64_t>(m.peak.fill); });
  per_bus("sluice_backpressure_level_peak", "gauge",
          "sluice_backpressure_level of sluice_queue_depth_peak.",
          [](const BusMetrics& m) { return static_cast<std::uint64_t>(m.peak.level); });
  per_bus("sluice_queue_capacity", "gauge", "Slots in the ring.",
          [](const BusMetrics& m) { return m.capacity; });
  per_bus("sluice_backpressure_level", "gauge",
          "0 NORMAL, 1 WARNING (LOW refused), 2 CRITICAL (MEDIUM refused), 3 FULL; with "
          "BackpressureScale::kFixed traits WARNING from 75 % and CRITICAL from 90 % full.",
          [](const BusMetrics& m) { return static_cast<std::uint64_t>(m.backpressure); });
  // Per registered producer: `lane` (MessageHeader::lane) and `producer`
  // (its name) beside `bus`.
  const auto per_producer = [&](std::string_view name, std::string_view help,
                                std::string_view label, auto samples_of) {
    bool any = false;
    for (const BusMetrics* bus = buses; bus != end; ++bus) any |= bus->for_each_producer != nullptr;
    if (!any) return;
    EmitFamily(sink, name, "counter", help);
    for (const BusMetrics* bus = buses; bus != end; ++bus) {
      if (bus->for_each_producer == nullptr) continue;
      using SinkType = std::remove_reference_t<Sink>;
      using SamplesOf = decltype(samples_of);
      struct Context {
        SinkType& out;
        std::string_view family;
        std::string_view bus_name;
        std::string_view label;
        SamplesOf& samples;
      } context{sink, name, bus->name, label, samples_of};
      bus->for_each_producer(
          bus->bus, &context, [](void* any_context, const ProducerStatisticsSnapshot& producer) {
            Context& c = *static_cast<Context*>(any_context);
            char lane[8];
            const std::to_chars_result digits =
                std::to_chars(lane, lane + sizeof lane, producer.lane);
            const std::string_view lane_text(lane, static_cast<std::size_t>(digits.ptr - lane));
            for (const auto& [label_value, value] : c.samples(producer)) {
              detail::EmitSampleStart(c.out, c.family, c.bus_name,
                                      {{"lane", lane_text},
                                       {"producer", std::string_view(producer.name)},
                                       {c.label, label_value}});
              Emit(c.out, "} ");
              detail::EmitNumber(c.out, value);
              Emit(c.out, "\n");
            }
          });
    }
  };
  using Sample = std::pair<std::string_view, std::uint64_t>;
  per_producer("sluice_producer_messages_published_total",
               "Messages a registered producer published, by priority (FULL_FEATURED mode), "
               "since it registered or the last reset.",
               "priority", [](const ProducerStatisticsSnapshot& p) {
                 return std::array<Sample, kPriorityCount>{
                     Sample{kPriorityLabels[0], p.low_priority_published},
                     Sample{kPriorityLabels[1], p.medium_priority_published},
                     Sample{kPriorityLabels[2], p.high_priority_published}};
               });
  per_producer("sluice_producer_messages_dropped_total",
               "Messages of a registered producer refused at its lane's fill, by priority "
               "(FULL_FEATURED mode), since it registered or the last reset.",
               "priority", [](const ProducerStatisticsSnapshot& p) {
                 return std::array<Sample, kPriorityCount>{
                     Sample{kPriorityLabels[0], p.low_priority_dropped},
                     Sample{kPriorityLabels[1], p.medium_priority_dropped},
                     Sample{kPriorityLabels[2], p.high_priority_dropped}};
               });
  per_producer("sluice_producer_messages_refused_total",
               "Publishes of a registered producer refused because the bus was closed or as bad "
               "input (every mode), since it registered or the last reset.",
               "reason", [](const ProducerStatisticsSnapshot& p) {
                 return std::array<Sample, 2>{Sample{"closed", p.messages_refused_closed},
                                              Sample{"rejected", p.messages_rejected}};
               });
  EmitFamily(sink, "sluice_performance_mode", "gauge", "1 for the mode the bus is in, else 0.");
  for (const BusMetrics* bus = buses; bus != end; ++bus) {
    for (PerformanceMode mode :
         {PerformanceMode::FULL_FEATURED, PerformanceMode::NO_STATS, PerformanceMode::BARE_METAL}) {
      EmitSample(sink, "sluice_performance_mode", bus->name, bus->mode == mode ? 1 : 0, "mode",
                 ToString(mode));
    }
  }
  EmitFamily(sink, "sluice_dispatch_latency_seconds", "histogram",
             "Publish to dispatch, by priority (FULL_FEATURED mode), measured in "
             "nanoseconds: bounds from 128 ns doubling to 8.589934592 s (the bus clock's "
             "resolution; a clock with only NowMicros gives 1 us). With a clock that never "
             "goes back, never above the true latency; below it by at most the time the "
             "consumer spent on the Latency::kClockInterval - 1 (default 15) messages before "
             "it in its batch.");
  for (const BusMetrics* bus = buses; bus != end; ++bus) {
    if (!bus->has_latency) continue;
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const LatencyHistogram& histogram = bus->latency.by_priority[p];
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < kLatencyBucketCount; ++b) {
        cumulative += histogram.buckets[b];
        detail::EmitSampleStart(sink, "sluice_dispatch_latency_seconds_bucket", bus->name,
                                "priority", kPriorityLabels[p]);
        Emit(sink, ",le=\"");
        if (b + 1 < kLatencyBucketCount) {
          detail::EmitSeconds(sink, LatencyHistogram::UpperBoundNanos(b));
        } else {
          Emit(sink, "+Inf");
        }
        Emit(sink, "\"} ");
        detail::EmitNumber(sink, cumulative);
        Emit(sink, "\n");
      }
      detail::EmitSampleStart(sink, "sluice_dispatch_latency_seconds_sum", bus->name, "priority",
                              kPriorityLabels[p]);
      Emit(sink, "} ");
      detail::EmitSeconds(sink, histogram.sum_nanos);
      Emit(sink, "\n");
      EmitSample(sink, "sluice_dispatch_latency_seconds_count", bus->name, cumulative, "priority",
                 kPriorityLabels[p]);
    }
  }
}

template <typename Sink>
void WritePrometheus(Sink&& sink, std::initializer_list<BusMetrics> buses) {
  WritePrometheus(sink, buses.begin(), buses.size());
}

// One bus. Any thread. A non-const `bus` reports and restarts its
// backpressure peak (see CaptureMetrics).
template <typename Sink, typename Bus>
void WritePrometheus(Sink&& sink, std::string_view name, Bus& bus) {
  const BusMetrics metrics = CaptureMetrics(name, bus);
  WritePrometheus(sink, &metrics, 1);
}

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
