// Traced events (sluice/trace/trace_event.hpp) as a Chrome trace: the JSON
// Trace Event Format that Chrome's about:tracing, Perfetto's UI
// (ui.perfetto.dev) and Trace Compass open. Hosted; standard library only;
// writes through any sink (a std::string, or a callable taking
// std::string_view).
//
//   std::string json;
//   sluice::trace::ChromeTraceWriter<std::string> chrome(json);
//   ring.Drain([&](const sluice::trace::TraceEvent& event) { chrome.Write(event); });
//   chrome.Finish();
//
// What it draws, per bus (a process, `pid` = the bus id): the consumer's
// track (`tid` 0) holds each batch as a slice and, inside it, each message
// from taken to dispatched as a slice named after its payload index; each
// sender's track (`tid` = sender id + 1) holds an instant at each admitted
// message, and a flow arrow from it to the message's slice (flow id
// "bus:lane:msg_id"). Refusals are instants on the track of sender 0 (a
// refusal carries no sender), errors and losses on the consumer's. Times
// (`ts`) are the events' time_ns in microseconds, to the nanosecond.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

template <typename Sink>
class ChromeTraceWriter {
 public:
  // Writes the opening of the document into `sink`, which must outlive
  // the writer.
  explicit ChromeTraceWriter(Sink& sink) : sink_(sink) {
    Emit("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  }
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // One event, as one or two trace events. After Finish: nothing.
  void Write(const TraceEvent& event) {
    if (finished_) return;
    NameTracks(event.bus_id);
    switch (event.kind) {
      case TraceEventKind::kAdmitted:
        Begin("admitted", "i", event.time_ns, event.bus_id, event.sender_id + std::uint64_t{1});
        Emit(",\"s\":\"t\"");
        MessageArgs(event);
        End();
        Begin("message", "s", event.time_ns, event.bus_id, event.sender_id + std::uint64_t{1});
        FlowId(event);
        End();
        break;
      case TraceEventKind::kTaken:
        Begin("type ", "B", event.time_ns, event.bus_id, 0, event.type_index);
        MessageArgs(event);
        End();
        Begin("message", "f", event.time_ns, event.bus_id, 0);
        Emit(",\"bp\":\"e\"");
        FlowId(event);
        End();
        break;
      case TraceEventKind::kDispatched:
        Begin("type ", "E", event.time_ns, event.bus_id, 0, event.type_index);
        End();
        break;
      case TraceEventKind::kBatchBegin:
        Begin("batch", "B", event.time_ns, event.bus_id, 0);
        Emit(",\"args\":{\"fill\":");
        Number(event.msg_id);
        Emit("}");
        End();
        break;
      case TraceEventKind::kBatchEnd:
        Begin("batch", "E", event.time_ns, event.bus_id, 0);
        Emit(",\"args\":{\"messages\":");
        Number(event.value);
        Emit("}");
        End();
        break;
      case TraceEventKind::kRefused:
        Begin("refused", "i", event.time_ns, event.bus_id, 1);
        Emit(",\"s\":\"t\",\"args\":{\"outcome\":");
        Number(event.detail);
        Emit(",\"priority\":");
        Number(static_cast<std::uint8_t>(event.priority));
        Emit(",\"count\":");
        Number(event.value);
        Emit("}");
        End();
        break;
      case TraceEventKind::kError:
        Begin("error", "i", event.time_ns, event.bus_id, 0);
        Emit(",\"s\":\"t\",\"args\":{\"code\":");
        Number(event.detail);
        Emit(",\"msg_id\":");
        Number(event.msg_id);
        Emit("}");
        End();
        break;
      case TraceEventKind::kClosed:
        Begin("closed", "i", event.time_ns, event.bus_id, 0);
        Emit(",\"s\":\"p\"");
        End();
        break;
      case TraceEventKind::kLost:
        Begin("lost", "i", event.time_ns, event.bus_id, 0);
        Emit(",\"s\":\"p\",\"args\":{\"events\":");
        Number(event.value);
        Emit("}");
        End();
        break;
    }
  }

  // Closes the document; later Writes write nothing.
  void Finish() {
    if (finished_) return;
    finished_ = true;
    Emit("]}\n");
  }

 private:
  void Emit(std::string_view text) {
    if constexpr (std::is_same_v<std::decay_t<Sink>, std::string>) {
      sink_.append(text.data(), text.size());
    } else {
      sink_(text);
    }
  }
  void Number(std::uint64_t value) {
    char digits[24];
    const std::to_chars_result result = std::to_chars(digits, digits + sizeof digits, value);
    Emit(std::string_view(digits, static_cast<std::size_t>(result.ptr - digits)));
  }
  // Nanoseconds as microseconds with three decimals, exactly.
  void Micros(std::uint64_t nanos) {
    Number(nanos / 1000);
    const auto fraction = static_cast<unsigned>(nanos % 1000);
    const char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                            static_cast<char>('0' + fraction / 10 % 10),
                            static_cast<char>('0' + fraction % 10)};
    Emit(std::string_view(digits, 4));
  }
  // {"name":"<name>[<index>]","cat":"sluice","ph":"<ph>","ts":..,"pid":..,"tid":..
  void Begin(std::string_view name, std::string_view phase, std::uint64_t time_ns,
             std::uint64_t pid, std::uint64_t tid, std::int64_t index = -1) {
    Emit(first_ ? "\n{\"name\":\"" : ",\n{\"name\":\"");
    first_ = false;
    Emit(name);
    if (index >= 0) Number(static_cast<std::uint64_t>(index));
    Emit("\",\"cat\":\"sluice\",\"ph\":\"");
    Emit(phase);
    Emit("\",\"ts\":");
    Micros(time_ns);
    Emit(",\"pid\":");
    Number(pid);
    Emit(",\"tid\":");
    Number(tid);
  }
  void End() { Emit("}"); }
  void MessageArgs(const TraceEvent& event) {
    Emit(",\"args\":{\"msg_id\":");
    Number(event.msg_id);
    Emit(",\"lane\":");
    Number(event.lane);
    Emit(",\"sender\":");
    Number(event.sender_id);
    Emit(",\"priority\":");
    Number(static_cast<std::uint8_t>(event.priority));
    Emit(",\"type_index\":");
    Number(event.type_index);
    Emit(",\"stamp_ns\":");
    Number(event.stamp_ns);
    Emit("}");
  }
  void FlowId(const TraceEvent& event) {
    Emit(",\"id\":\"");
    Number(event.bus_id);
    Emit(":");
    Number(event.lane);
    Emit(":");
    Number(event.msg_id);
    Emit("\"");
  }
  // The first event of a bus names its process and consumer track.
  void NameTracks(std::uint16_t bus_id) {
    std::uint64_t& word = named_[bus_id / 64];
    const std::uint64_t bit = std::uint64_t{1} << (bus_id % 64);
    if ((word & bit) != 0) return;
    word |= bit;
    Emit(first_ ? "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":"
                : ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
    first_ = false;
    Number(bus_id);
    Emit(",\"tid\":0,\"args\":{\"name\":\"bus ");
    Number(bus_id);
    Emit("\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
    Number(bus_id);
    Emit(",\"tid\":0,\"args\":{\"name\":\"consumer\"}}");
  }

  Sink& sink_;
  bool first_ = true;
  bool finished_ = false;
  std::uint64_t named_[1024] = {};  // a bit per bus id seen
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
