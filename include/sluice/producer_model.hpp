// How many threads may publish into a bus at once.
#pragma once

#include <cstdint>

namespace sluice {

enum class ProducerModel : std::uint8_t {
  // Any number of threads publish concurrently; publish is lock-free.
  kMulti,
  // Exactly one thread publishes at a time; publish is wait-free.
  kSingle,
};

}  // namespace sluice
