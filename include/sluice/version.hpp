// The library version, kept in step with the CMake project version.
#pragma once

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0

namespace sluice {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace sluice
