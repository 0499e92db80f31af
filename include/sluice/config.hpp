// Build-wide constants and feature detection shared by every Sluice header.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define SLUICE_HAS_EXCEPTIONS 1
#else
#define SLUICE_HAS_EXCEPTIONS 0
#endif

// The unit of false sharing. 64 bytes on x86-64 and most ARM cores; define it
// to 128 before including Sluice on cores that pair adjacent lines.
#ifndef SLUICE_CACHE_LINE_SIZE
#define SLUICE_CACHE_LINE_SIZE 64
#endif

namespace sluice {

inline constexpr std::size_t kCacheLineSize = SLUICE_CACHE_LINE_SIZE;

// A monotonically increasing ring position. Unsigned arithmetic makes every
// comparison wrap-safe: only differences of positions are ever compared.
using Position = std::uint64_t;

}  // namespace sluice
