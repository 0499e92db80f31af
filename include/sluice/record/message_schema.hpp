// What a recorded message's bytes mean, for the MCAP files the recorder
// and the flight recorder write. A message encoded by WireCodec<T>
// (sluice/nats/codec.hpp) whose every struct lists its field names
// (Fields<T>::kNames) is, byte for byte, a ROS 1 message: the 24-byte
// header's fields then the payload's, little-endian, with nothing between
// them. Its channel then says so (message encoding "ros1", schema encoding
// "ros1msg", the definition below), and any MCAP tool shows the message's
// fields by name. Any other codec's bytes stay "sluice.wire/1", which only
// Sluice's replayer reads. Hosted; standard library only.
//
//   struct Pose { std::uint8_t frame; double x, y; };
//   template <>
//   struct sluice::nats::Fields<Pose> {
//     static constexpr auto kMembers = std::make_tuple(&Pose::frame, &Pose::x, &Pose::y);
//     static constexpr const char* kNames[] = {"frame", "x", "y"};
//   };
//
// gives, for a channel of Pose:
//
//   uint64 msg_id
//   uint64 timestamp_ns
//   uint32 sender_id
//   uint8 priority
//   uint8 reserved
//   uint16 lane
//   sluice/Payload payload
//   ====...
//   MSG: sluice/Payload
//   uint8 frame
//   float64 x
//   float64 y
//
// A struct inside is a message type of its own, named after the first path
// of fields that leads to it (sluice/Payload_pose for a field `pose`; _2,
// _3, ... after a name given already), and described once however many
// fields have it. A
// scalar payload is one field (`float64 payload`), an array a fixed-length
// array (`float32[3] payload`). Names are checked at compile time wherever
// the field list is used (sluice/nats/codec.hpp): ROS 1 field names
// ([A-Za-z][A-Za-z0-9_]*), one for each listed member, no name twice.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/wire_message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Scalars: the ROS 1 primitive of the same size and signedness (a scoped
// enum as its underlying integer).
template <typename T>
constexpr const char* Ros1PrimitiveName() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_enum_v<T>) {
    return Ros1PrimitiveName<std::underlying_type_t<T>>();
  } else if constexpr (std::is_floating_point_v<T>) {
    return sizeof(T) == 4 ? "float32" : "float64";
  } else if constexpr (std::is_signed_v<T>) {
    return sizeof(T) == 1 ? "int8" : sizeof(T) == 2 ? "int16" : sizeof(T) == 4 ? "int32" : "int64";
  } else {
    return sizeof(T) == 1   ? "uint8"
           : sizeof(T) == 2 ? "uint16"
           : sizeof(T) == 4 ? "uint32"
                            : "uint64";
  }
}

template <typename T>
inline constexpr bool kIsWireScalar = nats::kHasWireForm<T> &&
                                      (std::is_arithmetic_v<T> || std::is_enum_v<T>);

// A scalar, a struct with named fields, or a one-level array of them (ROS 1
// has no arrays of arrays).
template <typename T>
constexpr bool IsDescribable();

template <typename T>
struct Ros1ArrayElement {
  using Type = void;
};
template <typename E, std::size_t N>
struct Ros1ArrayElement<E[N]> {
  using Type = E;
  static constexpr std::size_t kLength = N;
};
template <typename E, std::size_t N>
struct Ros1ArrayElement<std::array<E, N>> {
  using Type = E;
  static constexpr std::size_t kLength = N;
};

template <typename T, std::size_t... kI>
constexpr bool AllFieldsDescribable(std::index_sequence<kI...>) {
  using List = std::decay_t<decltype(nats::Fields<T>::kMembers)>;
  return (
      IsDescribable<typename nats::detail::MemberOf<T, std::tuple_element_t<kI, List>>::Type>() &&
      ...);
}

template <typename T>
constexpr bool IsDescribable() {
  if constexpr (kIsWireScalar<T>) {
    return true;
  } else if constexpr (!std::is_void_v<typename Ros1ArrayElement<T>::Type>) {
    using E = typename Ros1ArrayElement<T>::Type;
    return std::is_void_v<typename Ros1ArrayElement<E>::Type> && IsDescribable<E>();
  } else if constexpr (nats::kHasWireForm<T> && nats::detail::HasFieldNames<T>::value) {
    // The names are checked where the field list is (nats::detail::Wire).
    using List = std::decay_t<decltype(nats::Fields<T>::kMembers)>;
    return AllFieldsDescribable<T>(std::make_index_sequence<std::tuple_size_v<List>>{});
  } else {
    return false;
  }
}

// One address per type: a struct's identity here without RTTI.
template <typename T>
struct Ros1TypeKey {
  static constexpr char kKey = 0;
};

// The definitions being written: the nested message types' text, the type
// names given so far, and the struct types described, each once. A struct
// type is named after the first path of fields that reaches it
// (sluice/Payload_pose_origin); a name given already (field `a_b`, and
// field `b` of field `a`) takes _2, _3, ... until it is one not given. A
// type reached again is not described again, so the text grows with the
// number of types, not of paths.
struct Ros1Definitions {
  std::string nested;
  std::vector<std::string> names;
  std::vector<std::pair<const void*, std::string>> described;

  const std::string* NameOf(const void* key) const {
    for (const auto& [type, name] : described) {
      if (type == key) return &name;
    }
    return nullptr;
  }
  std::string UniqueName(const std::string& path) {
    std::string name = path;
    for (int suffix = 2; std::find(names.begin(), names.end(), name) != names.end(); ++suffix) {
      name = path + "_" + std::to_string(suffix);
    }
    names.push_back(name);
    return name;
  }
};

// Appends the definitions of the message types T's fields need, and
// returns the type T is written as in its parent (a struct: a type named
// after `path`).
template <typename T>
std::string DescribeType(const std::string& path, Ros1Definitions* definitions);

template <typename T, std::size_t... kI>
void DescribeFields(const std::string& path, std::string* body, Ros1Definitions* definitions,
                    std::index_sequence<kI...>) {
  using List = std::decay_t<decltype(nats::Fields<T>::kMembers)>;
  const auto field = [&](auto member, const char* name) {
    using Field = typename nats::detail::MemberOf<T, decltype(member)>::Type;
    *body += DescribeType<Field>(path + "_" + name, definitions);
    *body += ' ';
    *body += name;
    *body += '\n';
  };
  (field(std::tuple_element_t<kI, List>{}, nats::Fields<T>::kNames[kI]), ...);
}

template <typename T>
std::string DescribeType(const std::string& path, Ros1Definitions* definitions) {
  if constexpr (kIsWireScalar<T>) {
    return Ros1PrimitiveName<T>();
  } else if constexpr (!std::is_void_v<typename Ros1ArrayElement<T>::Type>) {
    return DescribeType<typename Ros1ArrayElement<T>::Type>(path, definitions) + "[" +
           std::to_string(Ros1ArrayElement<T>::kLength) + "]";
  } else {
    using List = std::decay_t<decltype(nats::Fields<T>::kMembers)>;
    const void* const key = &Ros1TypeKey<T>::kKey;
    if (const std::string* known = definitions->NameOf(key)) return *known;
    std::string name = definitions->UniqueName(path);
    definitions->described.emplace_back(key, name);
    // This type's definition goes before those of its fields' types.
    const std::size_t at = definitions->nested.size();
    std::string body;
    DescribeFields<T>(name, &body, definitions,
                      std::make_index_sequence<std::tuple_size_v<List>>{});
    definitions->nested.insert(at, std::string(80, '=') + "\nMSG: " + name + "\n" + body);
    return name;
  }
}

}  // namespace detail

namespace record {

inline constexpr const char* kRos1Encoding = "ros1";
inline constexpr const char* kRos1SchemaEncoding = "ros1msg";

// The header's part of every ROS 1 definition written, which the replayer
// also looks for before it replays a "ros1" channel.
inline constexpr const char* kRos1HeaderDefinition =
    "# sluice.wire/1 as ROS 1 (docs/tracing.md, \"Named fields\")\n"
    "uint64 msg_id\n"
    "uint64 timestamp_ns\n"
    "uint32 sender_id\n"
    "uint8 priority\n"
    "uint8 reserved\n"
    "uint16 lane\n";

// How a channel's messages are described in its MCAP records.
struct MessageSchema {
  std::string message_encoding;  // the Channel record's
  std::string schema_encoding;   // the Schema record's
  std::string definition;        // the Schema record's data
};

// Whether a channel of T encoded by Codec is written as named ROS 1 fields.
template <typename T, typename Codec>
inline constexpr bool kHasNamedFields =
    std::is_same_v<Codec, nats::WireCodec<T>>&& detail::IsDescribable<T>();

// The schema of a channel of T encoded by Codec.
template <typename T, typename Codec>
MessageSchema SchemaOf() {
  if constexpr (kHasNamedFields<T, Codec>) {
    detail::Ros1Definitions definitions;
    const std::string payload = detail::DescribeType<T>("sluice/Payload", &definitions);
    return {kRos1Encoding, kRos1SchemaEncoding,
            std::string(kRos1HeaderDefinition) + payload + " payload\n" + definitions.nested};
  } else {
    return {kWireEncoding, kWireEncoding, "sluice.wire/1: docs/tracing.md"};
  }
}

// Whether the replayer reads a channel: its messages are sluice.wire/1,
// plain or described as ROS 1 by SchemaOf.
inline bool IsReplayable(const std::string& message_encoding, const std::string& schema_encoding,
                         const std::string& definition) {
  if (message_encoding == kWireEncoding) return true;
  return message_encoding == kRos1Encoding && schema_encoding == kRos1SchemaEncoding &&
         definition.compare(0, std::char_traits<char>::length(kRos1HeaderDefinition),
                            kRos1HeaderDefinition) == 0;
}

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
