// The reference's benchmark payload: 24 bytes; larger sizes pad it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice::bench {

template <std::size_t kBytes>
struct Sample {
  std::uint64_t seq;
  float x, y, z, w;
  unsigned char padding[kBytes - 24];
};
template <>
struct Sample<24> {
  std::uint64_t seq;
  float x, y, z, w;
};
static_assert(sizeof(Sample<24>) == 24 && sizeof(Sample<256>) == 256);

}  // namespace sluice::bench
