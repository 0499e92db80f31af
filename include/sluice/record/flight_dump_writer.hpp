// The flight recorder's writing side (sluice/record/flight_recorder.hpp):
// which payload types a dump keeps and how, and a frozen window written as
// one MCAP file. The recorder's writer thread calls Write under the
// recorder's lock; nothing here runs on the bus's threads. Hosted.
//
// A dump file: for each kept type met, a schema and a channel, as the
// recorder writes them (sluice/record/message_schema.hpp: named fields as
// ROS 1, any other codec "sluice.wire/1"); the window's messages of kept
// types in the order the bus dispatched them, each channel's sequence from
// 0; then one Metadata record, "sluice.flight", that describes the window:
// reason, trigger_type_index, trigger_time_ns, messages_before,
// messages_after, aged_out, ended_by_time, history_short, refused_low,
// refused_medium, refused_high (docs/tracing.md, "The flight recorder").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/mcap_writer.hpp"
#include "sluice/record/message_schema.hpp"
#include "sluice/record/wire_message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// Why a window was taken (the dump's metadata "reason").
enum class FlightTriggerReason : std::uint8_t {
  kCall = 0,         // Trigger() from the program
  kSignal = 1,       // Trigger(kSignal) from a signal handler
  kFailedCheck = 2,  // Trigger(kFailedCheck) from a check of the program's
  kMessageType = 3,  // a message of a trigger type was taken
};

inline const char* FlightTriggerReasonName(FlightTriggerReason reason) noexcept {
  switch (reason) {
    case FlightTriggerReason::kCall:
      return "call";
    case FlightTriggerReason::kSignal:
      return "signal";
    case FlightTriggerReason::kFailedCheck:
      return "failed_check";
    case FlightTriggerReason::kMessageType:
      return "message_type";
  }
  return "unknown";
}

// Whether a payload type names memory valid during its callback only (a
// shared-memory loan: sluice/ipc/loan.hpp), which a kept copy cannot read
// later.
template <typename T, typename = void>
struct ValidInCallbackOnly : std::false_type {};
template <typename T>
struct ValidInCallbackOnly<T, std::void_t<decltype(T::kValidInCallbackOnly)>>
    : std::bool_constant<T::kValidInCallbackOnly> {};

// A frozen window: positions in the order the consumer took the messages.
struct FlightWindow {
  std::uint64_t first = 0;    // the window's first message
  std::uint64_t trigger = 0;  // the trigger's position (the first "after")
  std::uint64_t end = 0;      // one past the last
  std::uint64_t trigger_time_ns = 0;
  std::uint64_t aged_out = 0;  // left out for `before_ns`
  std::uint64_t refused[3] = {0, 0, 0};
  std::size_t type_index = 0;
  FlightTriggerReason reason = FlightTriggerReason::kCall;
  bool ended_by_time = false;  // after_ns, Tick or EndWindow: fewer than `after`
  bool history_short = false;  // fewer than `before` messages before the trigger
};

template <typename Payload>
class FlightDumpWriter {
 public:
  explicit FlightDumpWriter(std::string path_prefix) : path_prefix_(std::move(path_prefix)) {}

  // See FlightRecorder::Keep.
  template <typename T, typename Codec = nats::DefaultCodec<T>>
  bool Keep(const std::string& topic, const std::string& type_name) {
    constexpr std::size_t kIndex = detail::VariantIndex<T, Payload>::kValue;
    static_assert(detail::VariantIndex<T, Payload>::kOccurrences == 1,
                  "Sluice: Keep<T> needs T to be exactly one alternative of the payload");
    static_assert(!ValidInCallbackOnly<T>::value,
                  "Sluice: Keep<T> cannot keep a loaned payload: its block goes back to the "
                  "producer after the dispatch, before a dump is written");
    if (kept_[kIndex].encode != nullptr) return false;
    if (!IsValidUtf8(topic) || !IsValidUtf8(type_name)) return false;
    for (const KeptType& kept : kept_) {
      if (kept.encode != nullptr && kept.topic == topic) return false;
    }
    kept_[kIndex].topic = topic;
    kept_[kIndex].type_name = type_name;
    kept_[kIndex].schema = SchemaOf<T, Codec>();
    kept_[kIndex].encode = [](const MessageHeader& header, const Payload& payload,
                              std::string& bytes) {
      return EncodeWireMessage<Codec>(header, *std::get_if<kIndex>(&payload), bytes);
    };
    return true;
  }

  // One dump file, the next that does not exist yet: the messages of
  // `window` (envelope_at(position) for each position in it; a type not
  // kept, or one its codec refuses, is counted in `*skipped`) and its
  // metadata. True when the file was made, written and closed; `*dumped`
  // then grows by the messages in it. A codec that throws leaves the file
  // unfinished and goes on to the caller.
  template <typename EnvelopeAt>
  bool Write(const FlightWindow& window, const EnvelopeAt& envelope_at, std::uint64_t* dumped,
             std::uint64_t* skipped) {
    McapWriter mcap;
    if (!OpenNext(mcap)) return false;
    int channels[std::variant_size_v<Payload>];
    std::uint32_t sequences[std::variant_size_v<Payload>] = {};
    for (int& channel : channels) channel = -1;
    std::string bytes;
    bool ok = true;
    std::uint64_t in_file = 0;
    for (std::uint64_t at = window.first; at < window.end; ++at) {
      const MessageEnvelope<Payload>& envelope = envelope_at(at);
      const std::size_t index = envelope.payload.index();
      if (index >= std::variant_size_v<Payload> || kept_[index].encode == nullptr) {
        ++*skipped;
        continue;
      }
      if (channels[index] < 0) {
        const KeptType& kept = kept_[index];
        const std::uint16_t schema =
            mcap.AddSchema(kept.type_name, kept.schema.schema_encoding, kept.schema.definition);
        channels[index] =
            schema == 0 ? -1 : mcap.AddChannel(schema, kept.topic, kept.schema.message_encoding);
        if (channels[index] < 0) {
          ok = false;
          break;
        }
      }
      if (!kept_[index].encode(envelope.header, envelope.payload, bytes)) {
        ++*skipped;
        continue;
      }
      const std::uint64_t stamp = envelope.header.timestamp_ns;
      if (!mcap.AddMessage(channels[index], sequences[index]++, stamp, stamp, bytes.data(),
                           bytes.size())) {
        ok = false;
        break;
      }
      ++in_file;
    }
    if (ok && !mcap.AddMetadata("sluice.flight", Metadata(window))) ok = false;
    if (!mcap.Close()) ok = false;
    if (ok) *dumped += in_file;
    return ok;
  }

  // The dump files tried so far, in order (a name that could not be made
  // too, for the caller's report).
  const std::vector<std::string>& Files() const noexcept { return files_; }

 private:
  struct KeptType {
    std::string topic;
    std::string type_name;
    MessageSchema schema;
    bool (*encode)(const MessageHeader&, const Payload&, std::string&) = nullptr;
  };

  static std::map<std::string, std::string> Metadata(const FlightWindow& window) {
    std::map<std::string, std::string> metadata;
    metadata["reason"] = FlightTriggerReasonName(window.reason);
    metadata["trigger_type_index"] = std::to_string(window.type_index);
    metadata["trigger_time_ns"] = std::to_string(window.trigger_time_ns);
    metadata["messages_before"] = std::to_string(window.trigger - window.first);
    metadata["messages_after"] = std::to_string(window.end - window.trigger);
    metadata["aged_out"] = std::to_string(window.aged_out);
    metadata["ended_by_time"] = window.ended_by_time ? "1" : "0";
    metadata["history_short"] = window.history_short ? "1" : "0";
    metadata["refused_low"] = std::to_string(window.refused[0]);
    metadata["refused_medium"] = std::to_string(window.refused[1]);
    metadata["refused_high"] = std::to_string(window.refused[2]);
    return metadata;
  }

  bool OpenNext(McapWriter& mcap) {
    std::string path;
    const bool opened = OpenNextMcapFile(mcap, path_prefix_, next_file_, &path);
    files_.push_back(path);
    if (!opened) ++next_file_;  // a dump's failed name is not tried again
    return opened;
  }

  const std::string path_prefix_;
  KeptType kept_[std::variant_size_v<Payload>];
  std::vector<std::string> files_;
  std::uint64_t next_file_ = 0;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
