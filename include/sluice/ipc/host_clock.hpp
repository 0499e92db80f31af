// The clock the shared-memory bus stamps and reads: CLOCK_MONOTONIC as the
// host's first time namespace reads it. A process in a time namespace of
// its own (unshare --time, CRIU's restore, some container runtimes) reads
// CLOCK_MONOTONIC moved by its namespace's offset, so a producer there and
// a consumer elsewhere would disagree by that offset on every timestamp.
// Each process takes its own offset back off, so every process of the host
// reads the same time. Linux only.
#pragma once

#include <sys/stat.h>

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
  // whose time namespaces are not those it was read in: a child forked
  // from one that had read it may be in another (its parent unshared time
  // for its children), whatever its pid (a pid is its PID namespace's: a
  // child can be pid 1 as its parent was), and its Attach or Create reads
  // its own.
  static std::uint64_t OffsetNanos() noexcept {
    return Offset().nanos.load(std::memory_order_relaxed);
  }

  // ShmBus::Create and ShmProducer::Attach: reads the offset again if this
  // process's time namespaces (its own and its children's) are not those
  // it was read in. Two stats of /proc/self/ns. Relaxed: a thread that
  // stamps meanwhile reads the old value or the new one; a process's
  // namespaces change only by its own unshare or setns, or at fork.
  static void ReadForThisProcess() noexcept {
    OffsetCache& cache = Offset();
    const NamespaceKey now = NamespaceKey::OfThisProcess();
    if (cache.key_own.load(std::memory_order_relaxed) == now.own &&
        cache.key_childrens.load(std::memory_order_relaxed) == now.childrens) {
      return;
    }
    cache.nanos.store(ReadNow(now), std::memory_order_relaxed);
    cache.key_own.store(now.own, std::memory_order_relaxed);
    cache.key_childrens.store(now.childrens, std::memory_order_relaxed);
  }

  // Which time namespaces a process is in: its own and its children's,
  // each as the device and inode of its /proc/self/ns link folded into one
  // word (0 without the link: no time namespaces, or no /proc).
  struct NamespaceKey {
    std::uint64_t own = 0;
    std::uint64_t childrens = 0;
    static NamespaceKey OfThisProcess() noexcept {
      return NamespaceKey{Of("/proc/self/ns/time"), Of("/proc/self/ns/time_for_children")};
    }
    static std::uint64_t Of(const char* link) noexcept {
      struct stat status {};
      if (::stat(link, &status) != 0) return 0;
      return (static_cast<std::uint64_t>(status.st_dev) << 32) ^
             static_cast<std::uint64_t>(status.st_ino);
    }
  };

  struct OffsetCache {
    OffsetCache() noexcept {
      const NamespaceKey key = NamespaceKey::OfThisProcess();
      nanos.store(ReadNow(key), std::memory_order_relaxed);
      key_own.store(key.own, std::memory_order_relaxed);
      key_childrens.store(key.childrens, std::memory_order_relaxed);
    }
    std::atomic<std::uint64_t> nanos{0};
    // The namespaces `nanos` was read in.
    std::atomic<std::uint64_t> key_own{0};
    std::atomic<std::uint64_t> key_childrens{0};
  };
  static OffsetCache& Offset() noexcept {
    static OffsetCache cache;
    return cache;
  }
  // The offset, read only while this process's time namespace is the one
  // its children get (`key`: its namespaces now; without time namespaces,
  // before Linux 5.6, neither link exists and both read 0: the file is
  // missing too, and the offset 0). Every namespace link is on one device,
  // so the folded words are equal exactly when the namespaces are.
  static std::uint64_t ReadNow(const NamespaceKey& key) noexcept {
    return key.own == key.childrens ? ReadOffsetNanos("/proc/self/timens_offsets") : 0;
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
