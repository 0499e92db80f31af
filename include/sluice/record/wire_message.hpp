// A recorded message's bytes ("sluice.wire/1"), as the recorder
// (sluice/record/recorder.hpp) and the flight recorder
// (sluice/record/flight_recorder.hpp) write them into MCAP files and the
// replayer (sluice/record/replayer.hpp) reads them: the 24-byte header
// (msg_id u64, timestamp_ns u64, sender_id u32, priority u8, 0 u8, lane
// u16, little-endian), then the codec's bytes (sluice/nats/codec.hpp).
// Hosted; standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

inline constexpr const char* kWireEncoding = "sluice.wire/1";
inline constexpr std::size_t kWireHeaderBytes = 24;

// Writes `header` then `value` encoded by Codec into `bytes` (replacing
// what it held). False when the codec refuses the value.
template <typename Codec, typename T>
bool EncodeWireMessage(const MessageHeader& header, const T& value, std::string& bytes) {
  bytes.assign(kWireHeaderBytes, '\0');
  auto* out = reinterpret_cast<std::uint8_t*>(&bytes[0]);
  detail::PutLittle(out, header.msg_id, 8);
  detail::PutLittle(out + 8, header.timestamp_ns, 8);
  detail::PutLittle(out + 16, header.sender_id, 4);
  out[20] = static_cast<std::uint8_t>(header.priority);
  detail::PutLittle(out + 22, header.lane, 2);
  return Codec::Encode(value, bytes);
}

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
