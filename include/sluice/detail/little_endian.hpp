// Fixed-width little-endian fields in byte buffers, the same on every
// target: the trace records (sluice/trace/) and the MCAP files
// (sluice/record/) are read and written through these. Freestanding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// The low `bytes` bytes of `value` at `out`, least significant first.
inline void PutLittle(std::uint8_t* out, std::uint64_t value, std::size_t bytes) noexcept {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

// The `bytes` bytes at `in`, least significant first.
inline std::uint64_t GetLittle(const std::uint8_t* in, std::size_t bytes) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
