// Traced events (sluice/trace/) as an MCAP channel: each TraceEvent one
// JSON message on the topic "/sluice/trace", with a JSON Schema that names
// every field, for tools that decode json channels by their jsonschema.
// Hosted; standard library only.
//
//   sluice::record::McapWriter mcap;
//   mcap.Open("trace.mcap");
//   sluice::record::TraceMcapChannel trace(mcap);
//   ring.Drain([&](const sluice::trace::TraceEvent& event) { trace.Write(event); });
//   mcap.Close();
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/record/mcap_writer.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// The name a TraceEventKind has in JSON ("admitted", "refused", ...).
constexpr const char* TraceKindName(trace::TraceEventKind kind) noexcept {
  switch (kind) {
    case trace::TraceEventKind::kAdmitted:
      return "admitted";
    case trace::TraceEventKind::kRefused:
      return "refused";
    case trace::TraceEventKind::kBatchBegin:
      return "batch_begin";
    case trace::TraceEventKind::kTaken:
      return "taken";
    case trace::TraceEventKind::kDispatched:
      return "dispatched";
    case trace::TraceEventKind::kBatchEnd:
      return "batch_end";
    case trace::TraceEventKind::kError:
      return "error";
    case trace::TraceEventKind::kLost:
      return "lost";
    case trace::TraceEventKind::kClosed:
      return "closed";
    case trace::TraceEventKind::kLaneAttached:
      return "lane_attached";
    case trace::TraceEventKind::kLaneExited:
      return "lane_exited";
    case trace::TraceEventKind::kLaneHandedBack:
      return "lane_handed_back";
  }
  return "unknown";
}

// The JSON Schema of the channel's messages.
inline constexpr const char* kTraceEventJsonSchema =
    R"({"title":"sluice.TraceEvent","type":"object","properties":{)"
    R"("kind":{"type":"string","enum":["admitted","refused","batch_begin","taken",)"
    R"("dispatched","batch_end","error","lost","closed","lane_attached","lane_exited",)"
    R"("lane_handed_back"]},)"
    R"("bus_id":{"type":"integer"},"lane":{"type":"integer"},"msg_id":{"type":"integer"},)"
    R"("sender_id":{"type":"integer"},"priority":{"type":"integer","minimum":0,"maximum":2},)"
    R"("type_index":{"type":"integer"},"stamp_ns":{"type":"integer"},)"
    R"("time_ns":{"type":"integer"},"value":{"type":"integer"},"detail":{"type":"integer"}},)"
    R"("required":["kind","bus_id","lane","msg_id","sender_id","priority","type_index",)"
    R"("stamp_ns","time_ns","value","detail"]})";

class TraceMcapChannel {
 public:
  // Adds the schema and the channel to `mcap` (open); Valid() says whether
  // both were written.
  explicit TraceMcapChannel(McapWriter& mcap, const char* topic = "/sluice/trace") : mcap_(mcap) {
    const std::uint16_t schema =
        mcap.AddSchema("sluice.TraceEvent", "jsonschema", kTraceEventJsonSchema);
    channel_ = schema == 0 ? -1 : mcap.AddChannel(schema, topic, "json");
  }

  bool Valid() const noexcept { return channel_ >= 0; }

  // One event, one message: its log time the event's time, its publish
  // time the message's stamp (the event's time where it has none). False
  // when the write failed.
  bool Write(const trace::TraceEvent& event) {
    std::string json;
    json.reserve(256);
    json += R"({"kind":")";
    json += TraceKindName(event.kind);
    json += '"';
    Field(json, "bus_id", event.bus_id);
    Field(json, "lane", event.lane);
    Field(json, "msg_id", event.msg_id);
    Field(json, "sender_id", event.sender_id);
    Field(json, "priority", static_cast<std::uint64_t>(event.priority));
    Field(json, "type_index", event.type_index);
    Field(json, "stamp_ns", event.stamp_ns);
    Field(json, "time_ns", event.time_ns);
    Field(json, "value", event.value);
    Field(json, "detail", event.detail);
    json += '}';
    const std::uint64_t publish_time = event.stamp_ns != 0 ? event.stamp_ns : event.time_ns;
    return mcap_.AddMessage(channel_, sequence_++, event.time_ns, publish_time, json.data(),
                            json.size());
  }

 private:
  static void Field(std::string& json, const char* name, std::uint64_t value) {
    char digits[24];
    std::snprintf(digits, sizeof(digits), "%llu", static_cast<unsigned long long>(value));
    json += ",\"";
    json += name;
    json += "\":";
    json += digits;
  }

  McapWriter& mcap_;
  int channel_ = -1;
  std::uint32_t sequence_ = 0;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
