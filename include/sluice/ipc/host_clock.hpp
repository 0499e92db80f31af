// The clock the shared-memory bus stamps and reads: CLOCK_MONOTONIC as the
// host's first time namespace reads it. A process in a time namespace of
// its own (unshare --time, CRIU's restore, some container runtimes) reads
// CLOCK_MONOTONIC moved by its namespace's offset, so a producer there and
// a consumer elsewhere would disagree by that offset on every timestamp.
// Each process takes its own offset back off, so every process of the host
// reads the same time. Linux only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

struct HostMonotonicClock {
  static std::uint64_t NowNanos() noexcept { return SteadyClock::NowNanos() - OffsetNanos(); }
  static std::uint64_t NowMicros() noexcept { return NowNanos() / 1000; }

  // This process's monotonic offset (two's complement: a namespace may be
  // behind the host), read once from /proc/self/timens_offsets (Linux 5.6).
  // 0 without that file (an older kernel: no time namespaces; or no /proc
  // mounted, when a namespace cannot be told apart). Read at the first
  // call: a process that changes its time namespace afterwards (only its
  // children can, through unshare or setns) keeps the first offset.
  static std::uint64_t OffsetNanos() noexcept {
    static const std::uint64_t offset = ReadOffsetNanos("/proc/self/timens_offsets");
    return offset;
  }

  // The "monotonic SECONDS NANOSECONDS" line of a timens_offsets file, in
  // nanoseconds; 0 when the file or the line is missing or malformed.
  static std::uint64_t ReadOffsetNanos(const char* path) noexcept {
    std::FILE* file = std::fopen(path, "re");
    if (file == nullptr) return 0;
    char line[128];
    std::uint64_t offset = 0;
    while (std::fgets(line, sizeof(line), file) != nullptr) {
      long long seconds = 0;
      long nanoseconds = 0;
      char name[32];
      if (std::sscanf(line, "%31s %lld %ld", name, &seconds, &nanoseconds) == 3 &&
          std::strcmp(name, "monotonic") == 0 && nanoseconds >= 0 && nanoseconds < 1000000000L) {
        offset = static_cast<std::uint64_t>(seconds) * 1000000000ULL +
                 static_cast<std::uint64_t>(nanoseconds);
        break;
      }
    }
    std::fclose(file);
    return offset;
  }
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
