// How many threads may publish into a bus at once.
#pragma once

#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class ProducerModel : std::uint8_t {
  // Any number of threads publish concurrently; publish is lock-free.
  kMulti,
  // Exactly one thread publishes at a time; publish is wait-free.
  kSingle,
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
