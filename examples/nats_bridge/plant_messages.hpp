// What the sensor node and the controller exchange through NATS: both
// processes build the same payload variant and the same routes.
#pragma once

#include <cstdint>
#include <sluice/nats/codec.hpp>
#include <tuple>
#include <variant>

namespace plant {

struct SensorData {
  std::uint32_t sensor_id;
  float temperature;
  std::uint64_t seq;
};

struct EmergencyStop {
  std::uint32_t source;
  std::uint32_t reason;  // 1: over temperature
};

}  // namespace plant

// The bridge sends the fields listed here, little-endian, with nothing
// between them (docs/nats.md, Codecs): 16 and 8 bytes.
template <>
struct sluice::nats::Fields<plant::SensorData> {
  static constexpr auto kMembers = std::make_tuple(
      &plant::SensorData::sensor_id, &plant::SensorData::temperature, &plant::SensorData::seq);
};
template <>
struct sluice::nats::Fields<plant::EmergencyStop> {
  static constexpr auto kMembers =
      std::make_tuple(&plant::EmergencyStop::source, &plant::EmergencyStop::reason);
};

namespace plant {

using Payload = std::variant<SensorData, EmergencyStop>;

// Subjects (the bridge adds .low, .medium or .high) and type ids: the
// frame carries the id, so both sides must agree on it.
inline constexpr const char* kSensorSubject = "plant.sensor";
inline constexpr const char* kStopSubject = "plant.stop";
inline constexpr std::uint16_t kSensorType = 1;
inline constexpr std::uint16_t kStopType = 2;

}  // namespace plant
