// The clock Publish() stamps messages with. Replace it through BusTraits with
// any type that has `static std::uint64_t NowMicros() noexcept`.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice {

struct SteadyClock {
  static std::uint64_t NowMicros() noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }
};

}  // namespace sluice
