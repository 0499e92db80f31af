// How a producer gets its lane of a shared-memory bus: from the consumer's
// process, as a descriptor over a Unix socket, never by name. The lanes and
// the header are objects only the consumer's user may open (mode 0600); the
// wake page is the one part the bus's permissions open to producers. So a
// producer proves it may attach by opening the wake page for writing and
// sending that descriptor; the consumer's hand-out thread checks it is an
// open of this bus's wake page, takes the lane's role on a new open of the
// lane (SCM_RIGHTS then moves that open, and the role with it, to the
// producer), and sends it with a read-only open of the header. A producer
// thus maps its own lane and nothing of any other: the kernel, not the
// library, keeps producers of other users apart.
//
// The socket lives beside the bus's objects, named after the wake page's
// file (which every taking-over consumer keeps), so a producer finds it
// from the descriptor it already holds. The protocol of a hand-out, with a
// producer or the consumer killed at any step: tests/spin/lane_handout.pml.
// Here: the messages, the socket's address, descriptor passing and the
// producer's request; the consumer's thread that answers is
// sluice/ipc/lane_handout_service.hpp. Linux.
#pragma once

#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "sluice/config.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

inline constexpr std::uint64_t kHandoutMagic = 0x534C554943454C4EULL;  // "SLUICELN"

// A producer's request: its layout and the name it gives its lane. The
// wake page's descriptor rides with it (SCM_RIGHTS).
struct LaneRequest {
  std::uint64_t magic = kHandoutMagic;
  Fingerprint fingerprint;
  char name[kProducerNameCapacity] = {};
};
// The consumer's answer; on kNone the header's and the lane's descriptors
// ride with it, in that order.
struct LaneReply {
  std::uint64_t magic = kHandoutMagic;
  std::uint32_t error = 0;  // AttachError
  std::uint32_t lane = 0;   // 0-based
};

// Where a bus's hand-out socket is: a name no one can guess before the
// consumer binds it (so no one can take it first), drawn by each consumer
// that starts the bus or takes it over and kept at the start of the wake
// page, where producers read it. A producer that writes another there only
// sends the next producers elsewhere: each checks who answers.
struct HandoutAddress {
  std::atomic<std::uint64_t> token[2];
};

inline std::string HandoutSocketPath(std::uint64_t first, std::uint64_t second) {
  char path[80];
  std::snprintf(path, sizeof(path), "%s/.sluice-%016llx%016llx", kSharedMemoryDirectory,
                static_cast<unsigned long long>(first), static_cast<unsigned long long>(second));
  return path;
}
inline std::string HandoutSocketPath(const HandoutAddress& address) {
  return HandoutSocketPath(address.token[0].load(std::memory_order_relaxed),
                           address.token[1].load(std::memory_order_relaxed));
}

// Draws a new address into `address` from the kernel's random source.
inline bool DrawHandoutAddress(HandoutAddress* address) noexcept {
  std::uint64_t token[2] = {0, 0};
  if (::getrandom(token, sizeof(token), 0) != static_cast<ssize_t>(sizeof(token))) return false;
  address->token[0].store(token[0], std::memory_order_relaxed);
  address->token[1].store(token[1], std::memory_order_relaxed);
  return true;
}

// Removes the hand-out socket named at the start of the wake page
// `wake_name`, if it is this user's socket: a killed consumer's, when its
// bus is made anew or its names removed.
inline void RemoveHandoutSocket(const std::string& wake_name) {
  const int fd = ::shm_open(wake_name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return;
  std::uint64_t token[2] = {0, 0};
  const ssize_t got = ::pread(fd, token, sizeof(token), 0);
  ::close(fd);
  if (got != static_cast<ssize_t>(sizeof(token))) return;
  const std::string path = HandoutSocketPath(token[0], token[1]);
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0 || !S_ISSOCK(status.st_mode) ||
      status.st_uid != ::geteuid()) {
    return;
  }
  // Only a socket no one listens on (a producer may have written another
  // bus's address into the wake page: that one answers, and stays). Not
  // blocking: a listener whose queue is full answers EAGAIN, and stays.
  const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() < sizeof(address.sun_path)) {
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    if (::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 &&
        errno == ECONNREFUSED) {
      (void)::unlink(path.c_str());
    }
  }
  ::close(probe);
}

// A descriptor's file, for comparing with Segment::Identity().
inline bool FileOf(int fd, Segment::Object* object, uid_t* owner = nullptr) noexcept {
  struct stat status {};
  if (::fstat(fd, &status) != 0) return false;
  *object = Segment::Object{status.st_dev, status.st_ino};
  if (owner != nullptr) *owner = status.st_uid;
  return true;
}

inline void SetTimeouts(int fd, std::chrono::milliseconds timeout) noexcept {
  // SO_RCVTIMEO reads zero as "never": the least limit is one millisecond.
  const auto milliseconds = timeout.count() < 1 ? 1 : timeout.count();
  const timeval limit{static_cast<time_t>(milliseconds / 1000),
                      static_cast<suseconds_t>(milliseconds % 1000 * 1000)};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
}

// Sends `bytes` with up to two descriptors (-1: none). True when sent whole.
inline bool SendWithDescriptors(int socket, const void* bytes, std::size_t size, int first,
                                int second) noexcept {
  iovec part{const_cast<void*>(bytes), size};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(2 * sizeof(int))] = {};
  const int count = (first >= 0 ? 1 : 0) + (second >= 0 ? 1 : 0);
  if (count > 0) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(static_cast<std::size_t>(count) * sizeof(int));
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(static_cast<std::size_t>(count) * sizeof(int));
    int fds[2] = {first, second};
    std::memcpy(CMSG_DATA(header), first >= 0 ? fds : fds + 1,
                static_cast<std::size_t>(count) * sizeof(int));
  }
  const ssize_t sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
  return sent == static_cast<ssize_t>(size);
}

// Receives exactly `size` bytes and up to `wanted` descriptors into `fds`
// (the rest -1). Every descriptor received beyond them, and all of them
// when the message is not whole, is closed: a peer cannot leave
// descriptors in this process. Returns how many it kept, or -1.
inline int ReceiveWithDescriptors(int socket, void* bytes, std::size_t size, int* fds,
                                  int wanted) noexcept {
  for (int i = 0; i < wanted; ++i) fds[i] = -1;
  iovec part{bytes, size};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(8 * sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  int kept = 0;
  for (cmsghdr* header = got >= 0 ? CMSG_FIRSTHDR(&message) : nullptr; header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (kept < wanted) {
        fds[kept++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  const bool whole = got == static_cast<ssize_t>(size) && (message.msg_flags & MSG_TRUNC) == 0 &&
                     (message.msg_flags & MSG_CTRUNC) == 0;
  if (!whole) {
    // errno: the system call's, or EPROTO for a message not whole (or none:
    // the peer closed).
    const int saved = got < 0 ? errno : EPROTO;
    for (int i = 0; i < kept; ++i) ::close(fds[i]);
    for (int i = 0; i < wanted; ++i) fds[i] = -1;
    errno = saved;
    return -1;
  }
  return kept;
}

// A lane as the consumer handed it: its number and the two descriptors
// (the producer's from now on).
struct HandedLane {
  std::uint32_t lane = 0;
  int header_fd = -1;
  int lane_fd = -1;
};

// The producer's side: asks the consumer of the bus whose wake page
// `wake_fd` is open (for writing) for a lane, at the socket `path` the
// wake page names. Only a process of `owner` (the bus's parts' owner) or
// root may answer: kUntrustedSegment when another does (someone who wrote
// another address into the wake page, or bound one of its own).
// kConsumerGone when no consumer answers (none runs, or its hand-out has
// stopped); kNoAnswer when it did not answer within `answer_timeout` (each
// of the send and the receive; at least 1 ms); otherwise the consumer's
// answer.
inline AttachError RequestLane(int wake_fd, const std::string& path, uid_t owner,
                               const Fingerprint& fingerprint, const char* name,
                               std::chrono::milliseconds answer_timeout, HandedLane* out) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return AttachError::kSystemError;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (socket < 0) return AttachError::kSystemError;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{socket};
  SetTimeouts(socket, answer_timeout);
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno == ECONNREFUSED || errno == ENOENT) return AttachError::kConsumerGone;
    // A listener whose queue of connections is full (a stopped consumer,
    // or a flood of connections): connect waits up to the send timeout.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT || errno == EINPROGRESS) {
      return AttachError::kNoAnswer;
    }
    return errno == EACCES ? AttachError::kPermissionDenied : AttachError::kSystemError;
  }
  // Who listens: the credentials the kernel took at its listen().
  ucred server{};
  socklen_t length = sizeof(server);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &server, &length) != 0 ||
      (server.uid != owner && server.uid != 0)) {
    return AttachError::kUntrustedSegment;
  }
  LaneRequest request;
  request.fingerprint = fingerprint;
  if (name != nullptr) std::memcpy(request.name, name, sizeof(request.name));
  if (!SendWithDescriptors(socket, &request, sizeof(request), wake_fd, -1)) {
    return AttachError::kConsumerGone;
  }
  LaneReply reply;
  int fds[2];
  const int kept = ReceiveWithDescriptors(socket, &reply, sizeof(reply), fds, 2);
  if (kept < 0) {
    return errno == EAGAIN || errno == EWOULDBLOCK ? AttachError::kNoAnswer
                                                   : AttachError::kConsumerGone;
  }
  if (reply.magic != kHandoutMagic) return AttachError::kConsumerGone;
  const auto error = static_cast<AttachError>(reply.error);
  if (error != AttachError::kNone || kept != 2) {
    for (int i = 0; i < kept; ++i) ::close(fds[i]);
    return error != AttachError::kNone ? error : AttachError::kNotASegment;
  }
  out->lane = reply.lane;
  out->header_fd = fds[0];
  out->lane_fd = fds[1];
  return AttachError::kNone;
}

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
