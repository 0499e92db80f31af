// A named POSIX shared-memory segment (shm_open + mmap), owned by one
// mapping and its descriptor: CreateUnnamed makes a new one of a given size
// that no name reaches until Link names it (or fails: the name is taken),
// Open maps an existing one whole. Moving transfers both; the
// destructor unmaps and closes (the name stays until Unlink). Lock and
// IsNamed let a process remove a name only while it still names the object
// it judged (another may have made a new one under it meanwhile). Linux; no
// layout: the bus (sluice/ipc/shm_bus.hpp) puts its header and rings inside.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/ipc/fingerprint.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// Who may open a segment: its mode (0600 by default: this user only) and,
// optionally, its owner and group (-1: the creator's).
struct SegmentPermissions {
  mode_t mode = 0600;
  uid_t owner = static_cast<uid_t>(-1);
  gid_t group = static_cast<gid_t>(-1);
};

// Where shm_open keeps its objects on Linux (glibc and musl): segments are
// made here unnamed and then linked under their name (Segment::Link).
inline constexpr const char* kSharedMemoryDirectory = "/dev/shm";

// "/name": one leading '/', no other, 2 to 255 characters in all, and not
// "/." or "/.." (the directory itself and its parent).
inline bool IsSegmentName(std::string_view name) noexcept {
  return name.size() >= 2 && name.size() <= 255 && name[0] == '/' &&
         name.find('/', 1) == std::string_view::npos && name.find('\0') == std::string_view::npos &&
         name != "/." && name != "/..";
}

class Segment {
 public:
  Segment() noexcept = default;
  Segment(Segment&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        fd_(std::exchange(other.fd_, -1)) {}
  Segment& operator=(Segment&& other) noexcept {
    if (this != &other) {
      Unmap();
      base_ = std::exchange(other.base_, nullptr);
      size_ = std::exchange(other.size_, 0);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() { Unmap(); }

  // A new segment of `size` zeroed bytes that no name reaches yet (a file
  // of the shared-memory directory made with O_TMPFILE): its maker writes
  // it whole, then Link names it, so that no other process ever meets a
  // half-made segment under a name, and a maker killed before Link leaves
  // nothing behind (the kernel frees an unnamed file with its last
  // descriptor). Mode and owner as `permissions` ask, whatever the umask.
  [[nodiscard]] static AttachError CreateUnnamed(std::size_t size,
                                                 const SegmentPermissions& permissions,
                                                 Segment* out) {
    const int fd = ::open(kSharedMemoryDirectory, O_TMPFILE | O_RDWR | O_CLOEXEC, permissions.mode);
    if (fd < 0) return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
    // The owner first: fchown clears the set-user-ID and set-group-ID bits.
    bool ok =
        permissions.owner == static_cast<uid_t>(-1) && permissions.group == static_cast<gid_t>(-1);
    if (!ok) ok = ::fchown(fd, permissions.owner, permissions.group) == 0;
    ok = ok && ::fchmod(fd, permissions.mode) == 0;
    ok = ok && ::ftruncate(fd, static_cast<off_t>(size)) == 0;
    void* base = ok ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (base == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      errno = saved;
      return AttachError::kSystemError;
    }
    *out = Segment(base, size, fd);
    return AttachError::kNone;
  }

  // Names this (unnamed) segment `name`, in one step that fails when the
  // name is taken: kConsumerExists (errno EEXIST), and the segment stays
  // unnamed. The name is then checked to reach this very object through
  // shm_open (a C library whose shared-memory directory is not
  // kSharedMemoryDirectory would make a name it cannot open: kSystemError).
  [[nodiscard]] AttachError Link(const std::string& name) {
    if (!IsSegmentName(name)) return AttachError::kBadName;
    if (fd_ < 0) return AttachError::kSystemError;
    const std::string path = std::string(kSharedMemoryDirectory) + name;
    // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on older kernels; the
    // descriptor's /proc link does the same for anyone.
    int linked = ::linkat(fd_, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH);
    if (linked != 0 && errno != EEXIST) {
      char self[64];
      std::snprintf(self, sizeof(self), "/proc/self/fd/%d", fd_);
      linked = ::linkat(AT_FDCWD, self, AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
    }
    if (linked != 0) {
      if (errno == EEXIST) return AttachError::kConsumerExists;
      return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
    }
    if (!IsNamed(name)) {
      (void)::unlink(path.c_str());
      errno = ENOENT;
      return AttachError::kSystemError;
    }
    return AttachError::kNone;
  }

  // What `name` names, looked at without opening it (a FIFO opened for
  // writing would release its reader): kNotFound; kNotASegment unless a
  // regular file (a symbolic link, a FIFO, a directory, a device);
  // kUntrustedSegment unless `trusted` admits its owner, group and mode
  // (as Open). /dev/shm is sticky, so a file found here as this user's
  // cannot be replaced by another user before it is opened.
  [[nodiscard]] static AttachError Inspect(const std::string& name,
                                           const SegmentPermissions& trusted) {
    if (!IsSegmentName(name)) return AttachError::kBadName;
    const std::string path = std::string(kSharedMemoryDirectory) + name;
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0) {
      return errno == ENOENT ? AttachError::kNotFound : AttachError::kSystemError;
    }
    if (!S_ISREG(status.st_mode)) return AttachError::kNotASegment;
    return IsTrusted(status, trusted) ? AttachError::kNone : AttachError::kUntrustedSegment;
  }

  // The existing segment, mapped whole; kNotASegment when it is smaller
  // than `minimum` bytes. With `trusted`, a consumer about to judge (and
  // perhaps take over) the segment: one owned by another user than
  // `trusted` names (its owner, or this process's effective user), of
  // another group when it names one, or whose mode admits anyone `trusted`
  // does not, is refused kUntrustedSegment before it is mapped.
  [[nodiscard]] static AttachError Open(const std::string& name, std::size_t minimum, Segment* out,
                                        const SegmentPermissions* trusted = nullptr) {
    if (!IsSegmentName(name)) return AttachError::kBadName;
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      if (errno == ENOENT) return AttachError::kNotFound;
      return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
    }
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
      ::close(fd);
      return AttachError::kSystemError;
    }
    if (trusted != nullptr && !IsTrusted(status, *trusted)) {
      ::close(fd);
      return AttachError::kUntrustedSegment;
    }
    const auto size = static_cast<std::size_t>(status.st_size);
    if (status.st_size <= 0) {
      // Not sized: Sluice names its segments only once they are made
      // (CreateUnnamed, Link), so another program is making this one.
      ::close(fd);
      return AttachError::kNotReady;
    }
    if (size < minimum) {
      ::close(fd);
      return AttachError::kNotASegment;
    }
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      ::close(fd);
      return AttachError::kSystemError;
    }
    *out = Segment(base, size, fd);
    return AttachError::kNone;
  }

  // An exclusive advisory lock on the object (not the name), held until
  // Unlock or destruction: the processes that judge whether to remove a
  // name take it in turn.
  [[nodiscard]] bool Lock() noexcept { return fd_ >= 0 && ::flock(fd_, LOCK_EX) == 0; }
  // Lock, giving up after about `tries` milliseconds: anyone who can open
  // the segment, even for reading, can hold its lock.
  [[nodiscard]] bool TryLockFor(int tries) noexcept {
    for (int tried = 0; fd_ >= 0; ++tried) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
      if (errno != EWOULDBLOCK || tried >= tries) return false;
      const timespec pause{0, 1000000L};  // a millisecond
      (void)::nanosleep(&pause, nullptr);
    }
    return false;
  }
  void Unlock() noexcept {
    if (fd_ >= 0) (void)::flock(fd_, LOCK_UN);
  }

  // Whether `name` names this object still (not removed, nor made anew).
  bool IsNamed(const std::string& name) const noexcept {
    if (fd_ < 0) return false;
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return false;
    struct stat named {};
    struct stat mine {};
    const bool same = ::fstat(fd, &named) == 0 && ::fstat(fd_, &mine) == 0 &&
                      named.st_dev == mine.st_dev && named.st_ino == mine.st_ino;
    ::close(fd);
    return same;
  }

  static void Unlink(const std::string& name) noexcept { (void)::shm_unlink(name.c_str()); }

  void* Base() const noexcept { return base_; }
  std::size_t Size() const noexcept { return size_; }
  bool IsMapped() const noexcept { return base_ != nullptr; }

 private:
  Segment(void* base, std::size_t size, int fd) noexcept : base_(base), size_(size), fd_(fd) {}
  void Unmap() noexcept {
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    base_ = nullptr;
    size_ = 0;
    fd_ = -1;
  }

  static bool IsTrusted(const struct stat& status, const SegmentPermissions& trusted) noexcept {
    const uid_t owner = trusted.owner != static_cast<uid_t>(-1) ? trusted.owner : ::geteuid();
    if (status.st_uid != owner) return false;
    if (trusted.group != static_cast<gid_t>(-1) && status.st_gid != trusted.group) return false;
    const mode_t granted = status.st_mode & 07777;
    return (granted & ~trusted.mode) == 0;
  }

  void* base_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
