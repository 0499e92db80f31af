// Which process holds a role in a shared segment, told apart from a later
// process that reuses its pid: the pid, the process's start time (clock
// ticks since boot, /proc/<pid>/stat field 22) and its PID namespace (a pid
// means another process in another namespace: there it cannot be checked,
// and counts as alive). Linux only.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

struct ProcessIdentity {
  std::int32_t pid = 0;
  std::uint64_t start_time = 0;
  std::uint64_t pid_namespace = 0;  // the inode of /proc/self/ns/pid; 0 unknown

  // This process.
  static ProcessIdentity Self() noexcept {
    ProcessIdentity self;
    self.pid = static_cast<std::int32_t>(::getpid());
    self.start_time = StartTimeOf(self.pid);
    self.pid_namespace = OwnPidNamespace();
    return self;
  }

  // Whether the process is still running, as seen from this process's PID
  // namespace (a zombie counts as gone: it runs no more code; one whose
  // /proc entry this process may not read counts as alive unless the pid
  // is free). False for pid 0. A process whose main thread has exited shows its first thread
  // as a zombie while its other threads run: alive while it has any.
  bool IsAlive() const noexcept {
    if (pid <= 0) return false;
    char state = 0;
    const std::uint64_t now = StartTimeOf(pid, &state);
    if (now == 0) {
      // Unreadable: gone, or hidden from this process (/proc mounted with
      // hidepid, another user's process that is not dumpable). Only the
      // kernel's word that no such pid exists means gone: a process this
      // one cannot see is taken for alive, so that it is never replaced
      // while it runs (a pid reused by a hidden process then keeps a dead
      // one's segment until that process ends).
      return !(::kill(pid, 0) != 0 && errno == ESRCH);
    }
    if (now != start_time) return false;
    if (state != 'Z' && state != 'X') return true;
    return HasOtherThreads(pid);
  }

  // Whether the process is known to have exited: false when it runs, and
  // when it lives in another PID namespace (or one unknown), where its pid
  // cannot be looked up. What removes a segment or reports a consumer gone.
  bool IsGone() const noexcept {
    if (pid_namespace == 0 || pid_namespace != OwnPidNamespace()) return false;
    return !IsAlive();
  }

  static std::uint64_t OwnPidNamespace() noexcept {
    struct stat status {};
    if (::stat("/proc/self/ns/pid", &status) != 0) return 0;
    return static_cast<std::uint64_t>(status.st_ino);
  }

  // Whether the process has threads besides its first: the "Threads:" line
  // of /proc/<pid>/status counts them all, a zombie first thread included
  // (an exited process shows 1).
  static bool HasOtherThreads(std::int32_t pid) noexcept {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/status", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char text[4096];
    const ssize_t length = ::read(fd, text, sizeof(text) - 1);
    ::close(fd);
    if (length <= 0) return false;
    text[length] = '\0';
    const char* field = std::strstr(text, "\nThreads:");
    if (field == nullptr) return false;
    field += std::strlen("\nThreads:");
    while (*field == ' ' || *field == '\t') ++field;
    std::uint64_t threads = 0;
    for (; *field >= '0' && *field <= '9'; ++field) {
      threads = threads * 10 + static_cast<std::uint64_t>(*field - '0');
    }
    return threads > 1;
  }

  // 0 when the process does not exist (or /proc cannot be read).
  static std::uint64_t StartTimeOf(std::int32_t pid, char* state = nullptr) noexcept {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[1024];
    const ssize_t length = ::read(fd, text, sizeof(text) - 1);
    ::close(fd);
    if (length <= 0) return 0;
    text[length] = '\0';
    // The command name (field 2) is in parentheses and may hold spaces or
    // parentheses itself: the fields after it start after the last ')'.
    const char* field = std::strrchr(text, ')');
    if (field == nullptr) return 0;
    ++field;
    // Field 3 is the state; field 22 the start time.
    for (int number = 3; number <= 22; ++number) {
      while (*field == ' ') ++field;
      if (*field == '\0') return 0;
      if (number == 3 && state != nullptr) *state = *field;
      if (number == 22) {
        std::uint64_t value = 0;
        for (; *field >= '0' && *field <= '9'; ++field) {
          value = value * 10 + static_cast<std::uint64_t>(*field - '0');
        }
        return value;
      }
      while (*field != ' ' && *field != '\0') ++field;
    }
    return 0;
  }
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
