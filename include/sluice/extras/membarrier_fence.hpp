// MembarrierHeavyFence: the heavy fence of sluice/heavy_fence.hpp on Linux.
// Close() pays one membarrier system call (it interrupts every running
// thread of the process; microseconds), and lane publishes pay no fence.
#pragma once

#if !defined(__linux__)
#error "Sluice: MembarrierHeavyFence needs Linux; use sluice::NoHeavyFence"
#endif

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

struct MembarrierHeavyFence {
  // Registers the process for expedited private membarrier (once per
  // process); false where the kernel does not offer it, and the bus then
  // fences on every lane publish.
  bool Enable() noexcept {
    static const bool registered =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    return registered;
  }
  bool Run() noexcept {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  }
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
