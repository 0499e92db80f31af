// What a flight recorder (sluice/record/flight_recorder.hpp) is asked to
// keep, and what it makes of that: the options in force (`before` and
// `after` at most 2^30 each) and the envelopes each of its two rings
// holds. Standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

struct FlightRecorderOptions {
  // Messages kept before the trigger, at most.
  std::uint32_t before = 3072;
  // ... and of those only the ones at most this many nanoseconds (bus
  // clock, the header's timestamp_ns) older than the trigger; 0: any age.
  // A message with no timestamp (0) is never too old.
  std::uint64_t before_ns = 0;
  // Messages kept from the trigger on: the window ends once this many
  // more are taken ...
  std::uint32_t after = 1024;
  // ... or, if not 0, once this many nanoseconds of the bus clock passed
  // since the trigger (seen at the end of a batch, or by Tick).
  std::uint64_t after_ns = 0;
  // Dump files: <path_prefix>-000.mcap, -001, ...
  std::string path_prefix = "flight";
};

}  // namespace record

namespace detail {

// The options in force (FlightRecorder::Options): `before` and `after`
// larger than kFlightMostPerSide are cut to it.
inline constexpr std::uint32_t kFlightMostPerSide = std::uint32_t{1} << 30;

inline record::FlightRecorderOptions ClampedFlightOptions(record::FlightRecorderOptions options) {
  if (options.before > kFlightMostPerSide) options.before = kFlightMostPerSide;
  if (options.after > kFlightMostPerSide) options.after = kFlightMostPerSide;
  return options;
}

// One more than the window: a trigger-type message is copied into the
// ring before it starts a window, and with `after` 0 it is not the
// window's, so it must not overwrite the window's oldest message.
inline std::size_t FlightRingCapacity(std::uint32_t before, std::uint32_t after) {
  const std::uint64_t need = std::uint64_t{before} + after + 1;
  std::size_t capacity = 2;
  while (capacity < need) capacity <<= 1;
  return capacity;
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
