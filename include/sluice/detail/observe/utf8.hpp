// UTF-8 validity, for text the library writes out for other programs to
// parse: producer names (detail/queue/lane_holder.hpp, a shared-memory
// producer's in sluice/ipc) and the Prometheus labels
// (sluice/extras/prometheus.hpp), whose readers refuse invalid UTF-8.
#pragma once

#include <cstddef>
#include <cstring>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// The length of the UTF-8 sequence at `text` (1 to 4), of which at most
// `available` bytes may be read (at least 1), or 0 when it is not one: a
// stray continuation byte, an overlong form, a surrogate, a code point above
// U+10FFFF, or a sequence cut short (by the end of `available`, or by a NUL,
// so a NUL-terminated string may pass any `available`).
inline std::size_t Utf8SequenceLength(const unsigned char* text, std::size_t available) noexcept {
  const unsigned char lead = text[0];
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (length > available) return 0;
  if (text[1] < low || text[1] > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if ((text[i] & 0xC0u) != 0x80u) return 0;
  }
  return length;
}

// Copies `name` (NUL-terminated, or null for none) into `out` as valid
// UTF-8, so an exported label is valid text: each byte that does not start
// a valid sequence becomes '?', and the copy stops before the first
// character that does not fit whole in `capacity` - 1 bytes. `out` is
// NUL-filled after the copy; returns the copy's length.
inline std::size_t CopyName(const char* name, char* out, std::size_t capacity) noexcept {
  std::size_t length = 0;
  if (name != nullptr) {
    const auto* in = reinterpret_cast<const unsigned char*>(name);
    while (*in != 0) {
      // NUL-terminated: a NUL ends a sequence cut short, so any bound serves.
      std::size_t sequence = Utf8SequenceLength(in, 4);
      const bool valid = sequence != 0;
      if (!valid) sequence = 1;
      if (length + sequence > capacity - 1) break;
      if (valid) {
        std::memcpy(out + length, in, sequence);
      } else {
        out[length] = '?';
      }
      length += sequence;
      in += sequence;
    }
  }
  std::memset(out + length, 0, capacity - length);
  return length;
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
