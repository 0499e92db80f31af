// The library version, kept in step with the CMake project version.
#pragma once

#include "sluice/config.hpp"

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 5
#define SLUICE_VERSION_PATCH 0

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
inline constexpr const char* kVersion = "0.5.0";
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
