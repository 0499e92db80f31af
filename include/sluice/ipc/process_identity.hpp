// Which process holds a role in a shared segment, as a label for people and
// for the per-producer statistics: its pid, as its own PID namespace numbers
// it. Nothing decides from it whether the process is alive (the kernel does:
// Segment::TakeRole and HolderOf in sluice/ipc/segment.hpp), and any process
// that can write the segment can write it. Linux only.
#pragma once

#include <unistd.h>

#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

struct ProcessIdentity {
  std::int32_t pid = 0;

  // This process.
  static ProcessIdentity Self() noexcept {
    ProcessIdentity self;
    self.pid = static_cast<std::int32_t>(::getpid());
    return self;
  }
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
