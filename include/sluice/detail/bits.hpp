// Bit tricks used by the subscription table and the latency histograms.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Index of the lowest set bit. `bits` must not be zero.
template <typename Unsigned>
inline unsigned LowestSetBit(Unsigned bits) noexcept {
  static_assert(std::is_unsigned_v<Unsigned>, "LowestSetBit takes an unsigned mask");
#if defined(__GNUC__) || defined(__clang__)
  if constexpr (sizeof(Unsigned) <= sizeof(unsigned)) {
    return static_cast<unsigned>(__builtin_ctz(bits));
  } else {
    return static_cast<unsigned>(__builtin_ctzll(bits));
  }
#else
  unsigned index = 0;
  while ((bits & Unsigned{1}) == 0) {
    bits >>= 1;
    ++index;
  }
  return index;
#endif
}

// Bits needed to represent `value`: 0 for 0, else 1 + the highest set bit.
inline unsigned BitWidth(std::uint64_t value) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return value == 0 ? 0u : 64u - static_cast<unsigned>(__builtin_clzll(value));
#else
  unsigned width = 0;
  for (; value != 0; value >>= 1) ++width;
  return width;
#endif
}

constexpr bool IsPowerOfTwo(std::uint64_t value) noexcept {
  return value != 0 && (value & (value - 1)) == 0;
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
