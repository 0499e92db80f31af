// A named POSIX shared-memory segment (shm_open + mmap), owned by one
// mapping and its descriptor: CreateUnnamed makes a new one of a given size
// that no name reaches until Link names it (or fails: the name is taken),
// Open maps an existing one whole. Moving transfers both; the
// destructor unmaps and closes (the name stays until Unlink). Lock and
// IsNamed let a process remove a name only while it still names the object
// it judged (another may have made a new one under it meanwhile). Roles
// (TakeRole, HolderOf) tell who is alive: a role is a lock the kernel
// holds for this descriptor and drops when the process dies. Linux; no
// layout: the bus (sluice/ipc/shm_bus.hpp) makes one per part (its header,
// its wake page, each lane) and puts them side by side in one reservation.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
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

// A bus's parts are named after it ("/name.wake", "/name.lane12"): a bus
// name leaves room for the longest suffix.
inline constexpr std::size_t kPartSuffixCapacity = 8;

// "/name": one leading '/', no other, 2 to 247 characters in all, and not
// "/." or "/.." (the directory itself and its parent).
inline bool IsSegmentName(std::string_view name) noexcept {
  return name.size() >= 2 && name.size() <= 255 - kPartSuffixCapacity && name[0] == '/' &&
         name.find('/', 1) == std::string_view::npos && name.find('\0') == std::string_view::npos &&
         name != "/." && name != "/..";
}

// The name of a bus's part: as a bus name, up to 255 characters.
inline bool IsPartName(std::string_view name) noexcept {
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
        fd_(std::exchange(other.fd_, -1)),
        placed_(std::exchange(other.placed_, false)),
        object_(std::exchange(other.object_, Object{})) {}
  Segment& operator=(Segment&& other) noexcept {
    if (this != &other) {
      Unmap();
      base_ = std::exchange(other.base_, nullptr);
      size_ = std::exchange(other.size_, 0);
      fd_ = std::exchange(other.fd_, -1);
      placed_ = std::exchange(other.placed_, false);
      object_ = std::exchange(other.object_, Object{});
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
  // With `at` (a page of an AddressReservation, sluice/ipc/address_reservation.hpp),
  // the segment is mapped there, over what the reservation held; such a
  // placed segment leaves its pages to the reservation when it goes.
  [[nodiscard]] static AttachError CreateUnnamed(std::size_t size,
                                                 const SegmentPermissions& permissions,
                                                 Segment* out, void* at = nullptr) {
    const int fd = ::open(kSharedMemoryDirectory, O_TMPFILE | O_RDWR | O_CLOEXEC, permissions.mode);
    if (fd < 0) return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
    // The owner first: fchown clears the set-user-ID and set-group-ID bits.
    bool ok =
        permissions.owner == static_cast<uid_t>(-1) && permissions.group == static_cast<gid_t>(-1);
    if (!ok) ok = ::fchown(fd, permissions.owner, permissions.group) == 0;
    ok = ok && ::fchmod(fd, permissions.mode) == 0;
    ok = ok && ::ftruncate(fd, static_cast<off_t>(size)) == 0;
    void* base = ok ? MapAt(fd, size, /*writable=*/true, at) : MAP_FAILED;
    if (base == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      errno = saved;
      return AttachError::kSystemError;
    }
    *out = Segment(base, size, fd, at != nullptr);
    return AttachError::kNone;
  }

  // A segment of a descriptor this process was given (a lane handed over
  // a socket): `size` bytes of it mapped at `at` (or anywhere), writable or
  // read-only. The descriptor is the Segment's from then on, mapped or not.
  // kNotASegment when the file is no regular file of at least `size` bytes
  // or is not owned by `owner`.
  [[nodiscard]] static AttachError Adopt(int fd, std::size_t size, bool writable, uid_t owner,
                                         void* at, Segment* out) {
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_uid != owner ||
        status.st_size < static_cast<off_t>(size)) {
      ::close(fd);
      return AttachError::kNotASegment;
    }
    void* base = MapAt(fd, size, writable, at);
    if (base == MAP_FAILED) {
      ::close(fd);
      return AttachError::kSystemError;
    }
    *out = Segment(base, size, fd, at != nullptr);
    return AttachError::kNone;
  }

  // Names this (unnamed) segment `name`, replacing whatever file of this
  // user had the name (a part of a bus whose header is this process's:
  // the name is this process's to give). Linked under a name of its own
  // first, then renamed over `name` in one step, so `name` never names
  // nothing. kPermissionDenied when `name` is another user's (/dev/shm is
  // sticky), kSystemError when it is a directory.
  [[nodiscard]] AttachError LinkReplacing(const std::string& name) {
    if (!IsPartName(name)) return AttachError::kBadName;
    if (fd_ < 0) return AttachError::kSystemError;
    // A name no one can guess, so no one can take it first.
    std::uint64_t token[2] = {0, 0};
    if (::getrandom(token, sizeof(token), 0) != static_cast<ssize_t>(sizeof(token))) {
      return AttachError::kSystemError;
    }
    char unique[64];
    std::snprintf(unique, sizeof(unique), "/.sluice-part-%016llx%016llx",
                  static_cast<unsigned long long>(token[0]),
                  static_cast<unsigned long long>(token[1]));
    const AttachError linked = Link(unique);
    if (linked != AttachError::kNone) return linked;
    const std::string from = std::string(kSharedMemoryDirectory) + unique;
    const std::string to = std::string(kSharedMemoryDirectory) + name;
    if (::rename(from.c_str(), to.c_str()) != 0) {
      const int saved = errno;
      (void)::unlink(from.c_str());
      return saved == EPERM || saved == EACCES ? AttachError::kPermissionDenied
                                               : AttachError::kSystemError;
    }
    return AttachError::kNone;
  }

  // A new open (a description of its own, with roles of its own) of this
  // very object, through `name`, read-write or read-only: -1 when `name`
  // names another object now or cannot be opened.
  [[nodiscard]] int Reopen(const std::string& name, bool writable) const noexcept {
    if (fd_ < 0 || !IsPartName(name)) return -1;
    const int fd = ::shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct stat status {};
    if (::fstat(fd, &status) != 0 || status.st_dev != object_.device ||
        status.st_ino != object_.inode) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Names this (unnamed) segment `name`, in one step that fails when the
  // name is taken: kConsumerExists (errno EEXIST), and the segment stays
  // unnamed. The name is then checked to reach this very object through
  // shm_open (a C library whose shared-memory directory is not
  // kSharedMemoryDirectory would make a name it cannot open: kSystemError).
  [[nodiscard]] AttachError Link(const std::string& name) {
    if (!IsPartName(name)) return AttachError::kBadName;
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
    if (!IsPartName(name)) return AttachError::kBadName;
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
                                        const SegmentPermissions* trusted = nullptr,
                                        void* at = nullptr) {
    if (!IsPartName(name)) return AttachError::kBadName;
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
    // Placed: the reservation's place holds `minimum` bytes, no more.
    void* base = MapAt(fd, at != nullptr ? minimum : size, /*writable=*/true, at);
    if (base == MAP_FAILED) {
      ::close(fd);
      return AttachError::kSystemError;
    }
    *out = Segment(base, at != nullptr ? minimum : size, fd, at != nullptr);
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

  // Roles: which process is alive in which part of the bus, told by the
  // kernel and by nothing a process can read or write in memory. Role `r`
  // is an open-file-description lock (fcntl F_OFD_SETLK, exclusive) on the
  // byte at offset r of the object. The kernel keeps it for the descriptor
  // that took it and drops it when the last descriptor of that open is
  // closed, which a process's exit does however it ends (kill -9
  // included). So a role held is a process alive; no pid, /proc entry,
  // start time or clock is read, and PID namespaces, time namespaces and a
  // /proc that hides other users' processes change nothing. A child forked
  // without exec shares the open, and so holds its parent's roles until it
  // exits, execs or closes the bus (the descriptor is close-on-exec).
  // Another open of the same object (this process's or another's) holds
  // its own roles. These locks do not interact with Lock()'s flock.
  enum class RoleHolder { kNone, kHeld, kUnknown };

  // Takes role `role` for this open: false when another open holds it (or
  // the system refused). Taking a role this open holds already succeeds.
  [[nodiscard]] bool TakeRole(std::uint32_t role) noexcept {
    if (fd_ < 0) return false;
    struct flock lock = RoleRange(role, F_WRLCK);
    return ::fcntl(fd_, F_OFD_SETLK, &lock) == 0;
  }
  // TakeRole for an open this process holds by its descriptor only (one it
  // is about to hand to another process, role and all).
  [[nodiscard]] static bool TakeRoleAt(int fd, std::uint32_t role) noexcept {
    struct flock lock = RoleRange(role, F_WRLCK);
    return fd >= 0 && ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
  }
  // Maps this open again at `at` (a reservation's place, `size` bytes of
  // it) and drops the mapping it had: the same object, at the place its
  // bus's layout gives it. False (the old mapping kept) when refused.
  [[nodiscard]] bool Place(void* at, std::size_t size) noexcept {
    if (fd_ < 0 || base_ == nullptr || size > size_) return false;
    void* placed = MapAt(fd_, size, /*writable=*/true, at);
    if (placed == MAP_FAILED) return false;
    if (!placed_) ::munmap(base_, size_);
    base_ = placed;
    size_ = size;
    placed_ = true;
    return true;
  }
  // Gives role `role` up (a role not held: nothing happens).
  void DropRole(std::uint32_t role) noexcept {
    if (fd_ < 0) return;
    struct flock lock = RoleRange(role, F_UNLCK);
    (void)::fcntl(fd_, F_OFD_SETLK, &lock);
  }
  // Whether another open holds role `role` now: kNone means no process
  // holds it, so a process that held it has exited or given it up;
  // kUnknown when the system could not say (callers take it for held).
  // Two system calls (HolderAt); no lock is taken.
  RoleHolder HolderOf(std::uint32_t role) const noexcept { return HolderAt(fd_, object_, role); }
  // Which file an open is of: a descriptor number this process closed and
  // reused for another file must not answer for the segment.
  struct Object {
    dev_t device = 0;
    ino_t inode = 0;
  };
  // HolderOf, through the descriptor `fd` of an open of `object`
  // (Descriptor(), Identity()), for a caller that keeps the number, not
  // the Segment. kUnknown when `fd` is no longer an open of `object` (this
  // process closed it, perhaps opening another file under its number):
  // two system calls.
  static RoleHolder HolderAt(int fd, const Object& object, std::uint32_t role) noexcept {
    struct stat status {};
    if (fd < 0 || ::fstat(fd, &status) != 0 || status.st_dev != object.device ||
        status.st_ino != object.inode) {
      return RoleHolder::kUnknown;
    }
    struct flock lock = RoleRange(role, F_WRLCK);
    if (::fcntl(fd, F_OFD_GETLK, &lock) != 0) return RoleHolder::kUnknown;
    return lock.l_type == F_UNLCK ? RoleHolder::kNone : RoleHolder::kHeld;
  }
  // The open's descriptor (-1 when none) and its file: they move with the
  // Segment.
  int Descriptor() const noexcept { return fd_; }
  const Object& Identity() const noexcept { return object_; }

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
  Segment(void* base, std::size_t size, int fd, bool placed = false) noexcept
      : base_(base), size_(size), fd_(fd), placed_(placed) {
    struct stat status {};
    if (::fstat(fd, &status) == 0) object_ = Object{status.st_dev, status.st_ino};
  }
  // A placed segment's pages are its reservation's: they stay mapped (a
  // place another mapping of this process could take is never left open)
  // until the reservation goes or another segment is placed over them.
  void Unmap() noexcept {
    if (base_ != nullptr && !placed_) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    base_ = nullptr;
    size_ = 0;
    fd_ = -1;
    placed_ = false;
    object_ = Object{};
  }
  static void* MapAt(int fd, std::size_t size, bool writable, void* at) noexcept {
    const int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    return ::mmap(at, size, protection, at != nullptr ? MAP_SHARED | MAP_FIXED : MAP_SHARED, fd, 0);
  }

  static struct flock RoleRange(std::uint32_t role, short type) noexcept {
    struct flock lock {};
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = static_cast<off_t>(role);
    lock.l_len = 1;
    lock.l_pid = 0;  // F_OFD_*: must be 0
    return lock;
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
  bool placed_ = false;  // mapped in a reservation (CreateUnnamed, Open, Adopt with `at`)
  Object object_;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
