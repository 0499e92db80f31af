// A named POSIX shared-memory segment (shm_open + mmap), owned by one
// mapping and its descriptor: Create makes a new one of a given size
// (O_EXCL), Open maps an existing one whole. Moving transfers both; the
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

// "/name": one leading '/', no other, 2 to 255 characters in all.
inline bool IsSegmentName(std::string_view name) noexcept {
  return name.size() >= 2 && name.size() <= 255 && name[0] == '/' &&
         name.find('/', 1) == std::string_view::npos && name.find('\0') == std::string_view::npos;
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

  // A new segment of `size` zeroed bytes; kConsumerExists if the name is
  // taken (the caller decides whether the old one is stale), errno kept.
  static AttachError Create(const std::string& name, std::size_t size,
                            const SegmentPermissions& permissions, Segment* out) {
    if (!IsSegmentName(name)) return AttachError::kBadName;
    const int fd =
        ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, permissions.mode);
    if (fd < 0) {
      if (errno == EEXIST) return AttachError::kConsumerExists;
      return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
    }
    // The umask may have narrowed the mode: set it as asked.
    bool ok = ::fchmod(fd, permissions.mode) == 0;
    if (ok && (permissions.owner != static_cast<uid_t>(-1) ||
               permissions.group != static_cast<gid_t>(-1))) {
      ok = ::fchown(fd, permissions.owner, permissions.group) == 0;
    }
    ok = ok && ::ftruncate(fd, static_cast<off_t>(size)) == 0;
    void* base = ok ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (base == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      ::shm_unlink(name.c_str());
      errno = saved;
      return AttachError::kSystemError;
    }
    *out = Segment(base, size, fd);
    return AttachError::kNone;
  }

  // The existing segment, mapped whole; kNotASegment when it is smaller
  // than `minimum` bytes.
  static AttachError Open(const std::string& name, std::size_t minimum, Segment* out) {
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
    const auto size = static_cast<std::size_t>(status.st_size);
    if (status.st_size <= 0) {
      // Made (O_EXCL) and not yet sized: its maker is between shm_open and
      // ftruncate.
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
  bool Lock() noexcept { return fd_ >= 0 && ::flock(fd_, LOCK_EX) == 0; }
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

  void* base_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
