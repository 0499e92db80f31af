// The message types the bridge tests, the test peer and the fuzzer share:
// two with built-in codecs (WireCodec, from their field lists) and one with
// a string (a codec of its own), with their type ids and subjects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sluice/nats/codec.hpp>
#include <sluice/nats/frame.hpp>
#include <string>
#include <tuple>
#include <variant>

namespace sluice_nats_test {

struct SensorReading {
  std::uint32_t sensor;
  float value;
  std::uint64_t seq;
};

}  // namespace sluice_nats_test

// A float inside: WireCodec, from the field list (the same 16 bytes as the
// object's, which has no padding, on a little-endian host).
template <>
struct sluice::nats::Fields<sluice_nats_test::SensorReading> {
  static constexpr auto kMembers = std::make_tuple(&sluice_nats_test::SensorReading::sensor,
                                                   &sluice_nats_test::SensorReading::value,
                                                   &sluice_nats_test::SensorReading::seq);
};

namespace sluice_nats_test {

struct EmergencyStop {
  std::uint32_t source;
  std::uint32_t reason;
  std::uint64_t seq;
};

}  // namespace sluice_nats_test

template <>
struct sluice::nats::Fields<sluice_nats_test::EmergencyStop> {
  static constexpr auto kMembers = std::make_tuple(&sluice_nats_test::EmergencyStop::source,
                                                   &sluice_nats_test::EmergencyStop::reason,
                                                   &sluice_nats_test::EmergencyStop::seq);
};

namespace sluice_nats_test {

struct Note {
  std::uint64_t seq = 0;
  std::string text;
};

// Note on the wire: seq (8 bytes, little-endian), then the text's bytes
// (at most kMaxText).
struct NoteCodec {
  static constexpr std::size_t kMaxText = 256;

  static bool Encode(const Note& note, std::string& out) {
    if (note.text.size() > kMaxText) return false;
    std::uint8_t seq[8];
    sluice::nats::detail::StoreLittle<std::uint64_t>(seq, note.seq);
    out.append(reinterpret_cast<const char*>(seq), sizeof seq);
    out.append(note.text);
    return true;
  }

  static std::optional<Note> Decode(const std::uint8_t* data, std::size_t size) {
    if (size < 8 || size - 8 > kMaxText) return std::nullopt;
    Note note;
    note.seq = sluice::nats::detail::LoadLittle<std::uint64_t>(data);
    note.text.assign(reinterpret_cast<const char*>(data) + 8, size - 8);
    return note;
  }
};
static_assert(sluice::nats::kIsCodecFor<NoteCodec, Note>);

using Payload = std::variant<SensorReading, EmergencyStop, Note>;

inline constexpr std::uint16_t kSensorType = 1;
inline constexpr std::uint16_t kStopType = 2;
inline constexpr std::uint16_t kNoteType = 3;

// The priority the exchange test gives message `seq`: every priority for
// every type.
inline sluice::MessagePriority PriorityOf(std::uint64_t seq) {
  return static_cast<sluice::MessagePriority>(seq % sluice::kPriorityCount);
}

}  // namespace sluice_nats_test
