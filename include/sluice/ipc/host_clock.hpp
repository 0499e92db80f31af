// The clock the shared-memory bus stamps and reads: CLOCK_MONOTONIC as the
// host's first time namespace reads it. A process in a time namespace of
// its own (unshare --time, CRIU's restore, some container runtimes) reads
// CLOCK_MONOTONIC moved by its namespace's offset, so a producer there and
// a consumer elsewhere would disagree by that offset on every timestamp.
// Each process takes its own offset back off, so every process of the host
// reads the same time. Linux only.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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
  // behind the host), from /proc/self/timens_offsets (Linux 5.6). That file
  // gives the offsets of the namespace this process's children get, which
  // is its own until it calls unshare(CLONE_NEWTIME) (or setns to a time
  // namespace): so it is read only while /proc/self/ns/time and
  // /proc/self/ns/time_for_children are the same namespace. Otherwise, and
  // without the file (an older kernel: no time namespaces; no /proc
  // mounted), the offset is taken as 0: right in the host's time
  // namespace, off by the namespace's offset elsewhere.
  // Read at the first call, and again by ReadForThisProcess in a process
  // that did not read it itself: a child forked from one that had read it
  // may be in another time namespace (its parent unshared time for its
  // children), and its Attach or Create reads its own.
  static std::uint64_t OffsetNanos() noexcept {
    return Offset().nanos.load(std::memory_order_relaxed);
  }

  // ShmBus::Create and ShmProducer::Attach: reads the offset if this
  // process has not (the first call, or the first in a forked child).
  // Relaxed: a thread that stamps meanwhile in the same process reads the
  // old value or the new one, both of this process's parent or itself;
  // only a forked child reads anew, before its Attach returns.
  static void ReadForThisProcess() noexcept {
    OffsetCache& cache = Offset();
    const pid_t self = ::getpid();
    if (cache.reader.load(std::memory_order_relaxed) == self) return;
    cache.nanos.store(ReadNow(), std::memory_order_relaxed);
    cache.reader.store(self, std::memory_order_relaxed);
  }

  struct OffsetCache {
    OffsetCache() noexcept : nanos(ReadNow()), reader(::getpid()) {}
    std::atomic<std::uint64_t> nanos;
    std::atomic<pid_t> reader;  // the process that read `nanos`
  };
  static OffsetCache& Offset() noexcept {
    static OffsetCache cache;
    return cache;
  }
  static std::uint64_t ReadNow() noexcept {
    return OwnNamespaceIsChildrens() ? ReadOffsetNanos("/proc/self/timens_offsets") : 0;
  }

  // Whether this process's time namespace is the one its children get.
  static bool OwnNamespaceIsChildrens() noexcept {
    struct stat own {};
    struct stat childrens {};
    // Without time namespaces (before Linux 5.6) neither link exists.
    if (::stat("/proc/self/ns/time", &own) != 0) return true;
    if (::stat("/proc/self/ns/time_for_children", &childrens) != 0) return false;
    return own.st_dev == childrens.st_dev && own.st_ino == childrens.st_ino;
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
