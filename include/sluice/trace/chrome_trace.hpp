// Traced events (sluice/trace/trace_event.hpp) as a Chrome trace: the JSON
// Trace Event Format that Chrome's about:tracing, Perfetto's UI
// (ui.perfetto.dev) and Trace Compass open. Hosted; standard library only;
// writes through any sink (a std::string, or a callable taking
// std::string_view).
//
//   std::string json;
//   sluice::trace::ChromeTraceWriter<std::string> chrome(json);
//   sluice::trace::DrainEvents(ring, [&](const sluice::trace::TraceEvent& event) {
//     chrome.Write(event);
//   });
//   chrome.Finish();
//
// What it draws, per bus (a process, `pid` = the bus id): the consumer's
// track (`tid` 0) holds each batch as a slice and, inside it, each message
// from taken to dispatched as a slice named after its payload index; each
// sender has a track of its own (`tid` 1, 2, ... in the order the senders
// first appear, named "sender <id>"), with an instant at each admitted
// message and a flow arrow from it to the message's slice. A flow's id is
// the bus id, the lane and the msg_id's low 32 bits in one 64-bit number,
// written in hexadecimal as a string (Perfetto reads a string id as a
// hexadecimal number): unique while a lane's msg_ids in one trace span less
// than 2^32. Refusals are instants on the track of the refusals (`tid`
// "refusals"; a refusal carries no sender), errors, the close and a
// shared-memory bus's lane events (attached, exited, handed back, with the
// lane, the producer's pid, whether it was killed and its lost claims) on
// the consumer's. A loss (events the ring could not keep) is a global instant
// with its count; the slices open then are ended there (as are those open
// at Finish), and an end whose begin was lost is left out, so that the
// slices always nest. Times (`ts`)
// are the events' time_ns in microseconds, to the nanosecond (a reader
// that holds them as doubles keeps the nanoseconds up to 2^53 ns).
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

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
    if (event.time_ns > last_time_ns_) last_time_ns_ = event.time_ns;
    if (event.kind == TraceEventKind::kLost) {
      // The lost events may be any bus's: every open slice ends here, at
      // the latest time seen (a drain's kLost has no time of its own).
      for (auto& [bus, open] : open_) {
        CloseOpen(bus, open, last_time_ns_);
      }
      Begin("lost", "i", last_time_ns_, event.bus_id, 0);
      Emit(",\"s\":\"g\",\"args\":{\"events\":");
      Number(event.value);
      Emit("}");
      End();
      return;
    }
    NameTracks(event.bus_id);
    OpenSlices& open = open_[event.bus_id];
    switch (event.kind) {
      case TraceEventKind::kAdmitted: {
        const std::uint64_t tid = SenderTrack(event.bus_id, event.sender_id);
        Begin("admitted", "i", event.time_ns, event.bus_id, tid);
        Emit(",\"s\":\"t\"");
        MessageArgs(event);
        End();
        Begin("message", "s", event.time_ns, event.bus_id, tid);
        FlowId(event);
        End();
        break;
      }
      case TraceEventKind::kTaken:
        if (open.dispatch) EndSlice(event.bus_id, open, event.time_ns, false);  // its end lost
        Begin("type ", "B", event.time_ns, event.bus_id, 0, event.type_index);
        MessageArgs(event);
        End();
        open.dispatch = true;
        open.type_index = event.type_index;
        Begin("message", "f", event.time_ns, event.bus_id, 0);
        Emit(",\"bp\":\"e\"");
        FlowId(event);
        End();
        break;
      case TraceEventKind::kDispatched:
        if (open.dispatch) EndSlice(event.bus_id, open, event.time_ns, false);
        break;
      case TraceEventKind::kBatchBegin:
        CloseOpen(event.bus_id, open, event.time_ns);  // a batch whose end was lost
        Begin("batch", "B", event.time_ns, event.bus_id, 0);
        Emit(",\"args\":{\"fill\":");
        Number(event.msg_id);
        Emit("}");
        End();
        open.batch = true;
        break;
      case TraceEventKind::kBatchEnd:
        if (!open.batch) break;  // its begin was lost
        if (open.dispatch) EndSlice(event.bus_id, open, event.time_ns, false);
        Begin("batch", "E", event.time_ns, event.bus_id, 0);
        Emit(",\"args\":{\"messages\":");
        Number(event.value);
        Emit("}");
        End();
        open.batch = false;
        break;
      case TraceEventKind::kRefused:
        Begin("refused", "i", event.time_ns, event.bus_id, kRefusalTrack);
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
      case TraceEventKind::kLaneAttached:
      case TraceEventKind::kLaneExited:
      case TraceEventKind::kLaneHandedBack:
        Begin(event.kind == TraceEventKind::kLaneAttached ? "lane attached"
              : event.kind == TraceEventKind::kLaneExited ? "lane exited"
                                                          : "lane handed back",
              "i", event.time_ns, event.bus_id, 0);
        Emit(",\"s\":\"t\",\"args\":{\"lane\":");
        Number(event.lane);
        Emit(",\"pid\":");
        Number(event.sender_id);
        Emit(",\"killed\":");
        Number(event.detail);
        Emit(",\"lost\":");
        Number(event.value);
        Emit("}");
        End();
        break;
      case TraceEventKind::kLost:
        break;  // above
    }
  }

  // Ends the slices still open (at the latest time seen) and closes the
  // document; later Writes write nothing.
  void Finish() {
    if (finished_) return;
    for (auto& [bus, open] : open_) {
      CloseOpen(bus, open, last_time_ns_);
    }
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
    const std::uint64_t id = std::uint64_t{event.bus_id} << 48 | std::uint64_t{event.lane} << 32 |
                             (event.msg_id & 0xFFFFFFFFu);
    char digits[16];
    const std::to_chars_result result = std::to_chars(digits, digits + sizeof digits, id, 16);
    Emit(",\"id\":\"");
    Emit(std::string_view(digits, static_cast<std::size_t>(result.ptr - digits)));
    Emit("\"");
  }

  // What is open on a bus's consumer track.
  struct OpenSlices {
    bool batch = false;
    bool dispatch = false;
    std::uint32_t type_index = 0;
  };
  void EndSlice(std::uint16_t bus, OpenSlices& open, std::uint64_t time_ns, bool batch) {
    if (batch) {
      Begin("batch", "E", time_ns, bus, 0);
      open.batch = false;
    } else {
      Begin("type ", "E", time_ns, bus, 0, open.type_index);
      open.dispatch = false;
    }
    End();
  }
  void CloseOpen(std::uint16_t bus, OpenSlices& open, std::uint64_t time_ns) {
    if (open.dispatch) EndSlice(bus, open, time_ns, false);
    if (open.batch) EndSlice(bus, open, time_ns, true);
  }
  // A sender's track: 1, 2, ... per bus, named when first used.
  std::uint64_t SenderTrack(std::uint16_t bus, std::uint32_t sender) {
    const std::uint64_t key = std::uint64_t{bus} << 32 | sender;
    const auto found = sender_tracks_.find(key);
    if (found != sender_tracks_.end()) return found->second;
    const std::uint64_t tid = ++senders_of_bus_[bus];
    sender_tracks_.emplace(key, tid);
    Emit(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
    Number(bus);
    Emit(",\"tid\":");
    Number(tid);
    Emit(",\"args\":{\"name\":\"sender ");
    Number(sender);
    Emit("\"}}");
    return tid;
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
    Emit(
        ",\"tid\":0,\"args\":{\"name\":\"consumer\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\","
        "\"pid\":");
    Number(bus_id);
    Emit(",\"tid\":");
    Number(kRefusalTrack);
    Emit(",\"args\":{\"name\":\"refusals\"}}");
  }

  // Above every sender's track (at most 2^32 - 1 of them a bus).
  static constexpr std::uint64_t kRefusalTrack = 0xFFFFFFFF;

  Sink& sink_;
  bool first_ = true;
  bool finished_ = false;
  std::uint64_t named_[1024] = {};  // a bit per bus id seen
  std::map<std::uint16_t, OpenSlices> open_;
  std::uint64_t last_time_ns_ = 0;                                  // the latest event time written
  std::unordered_map<std::uint64_t, std::uint64_t> sender_tracks_;  // (bus, sender) -> tid
  std::unordered_map<std::uint16_t, std::uint64_t> senders_of_bus_;
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
