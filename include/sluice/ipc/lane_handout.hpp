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
// Linux.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

#ifndef SLUICE_IPC_TEST_SEAMS
#define SLUICE_IPC_TEST_SEAMS 0
#endif

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

// Test seam, compiled only into the tests (SLUICE_IPC_TEST_SEAMS; even an
// unused call through a pointer changes how the compiler lays out the
// consumer's dispatch in the same unit): when set, called on the hand-out
// thread after a lane's descriptors were sent and before this process's
// copies are closed, the moment at which the lane's role is held by two
// opens' descriptors.
#if SLUICE_IPC_TEST_SEAMS
inline std::atomic<void (*)()> lane_sent_seam{nullptr};
#endif

// The consumer's answer to one producer (the connection `peer`): a lane and
// its descriptors (Deliver), or an error (Refuse).
class LaneDelivery {
 public:
  explicit LaneDelivery(int peer) noexcept : peer_(peer) {}

  // Sends lane `lane` (0-based) with the header's and the lane's
  // descriptors, then closes them here. From its return the lane's role is
  // held only by the producer's open, or by none when the producer is gone
  // (a descriptor in flight to a dead process dies with its socket). The
  // bus calls it under the lock its liveness check (CheckProducers) takes:
  // the check never sees the role held by this process's copy after its
  // producer died, and so never reports a dead producer as running.
  void Deliver(std::uint32_t lane, int header_fd, int lane_fd) noexcept {
    LaneReply reply;
    reply.error = static_cast<std::uint32_t>(AttachError::kNone);
    reply.lane = lane;
    // The socket is non-blocking and its buffer empty: this never waits.
    (void)SendWithDescriptors(peer_, &reply, sizeof(reply), header_fd, lane_fd);
#if SLUICE_IPC_TEST_SEAMS
    if (void (*seam)() = lane_sent_seam.load(std::memory_order_acquire)) seam();
#endif
    ::close(header_fd);
    ::close(lane_fd);
    answered_ = true;
  }
  // Sends `error` (not kNone), unless an answer was sent already.
  void Refuse(AttachError error) noexcept {
    if (answered_) return;
    LaneReply reply;
    reply.error = static_cast<std::uint32_t>(error);
    (void)SendWithDescriptors(peer_, &reply, sizeof(reply), -1, -1);
    answered_ = true;
  }
  bool Answered() const noexcept { return answered_; }

 private:
  int peer_;
  bool answered_ = false;
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

// The consumer's side: a thread that answers producers' requests on the
// bus's socket. It waits on every connection at once (up to kPending; a
// new one beyond them drops the oldest), and gives each a second to send
// its request, so no number of silent connections keeps an honest request
// from being answered once its bytes are in. What a request gets is the
// bus's to decide (`hand_out`); this class checks the proof and moves bytes
// and descriptors. Started by Start, stopped (and joined) by Stop or the
// destructor; never copied or moved (the thread holds `this`).
class LaneHandoutService {
 public:
  // The bus's answer to a proven request from process `peer` (its pid, a
  // label): kNone once it has delivered a lane (`delivery.Deliver`), or the
  // error the service sends.
  using HandOut = AttachError (*)(void* bus, const LaneRequest& request, std::int32_t peer,
                                  LaneDelivery& delivery);
  static constexpr std::size_t kPending = 32;

  LaneHandoutService() noexcept = default;
  LaneHandoutService(const LaneHandoutService&) = delete;
  LaneHandoutService& operator=(const LaneHandoutService&) = delete;
  ~LaneHandoutService() { Stop(); }

  // Binds the socket `path` (a fresh name: HandoutAddress) with
  // `permissions`' mode, owner and group, and starts the thread, which
  // accepts only proofs that are writable opens of the wake page `wake`.
  // kNone; kConsumerExists when the name is taken (draw another); else
  // kSystemError (nothing left running).
  [[nodiscard]] AttachError Start(const std::string& path, const Segment::Object& wake,
                                  const SegmentPermissions& permissions, HandOut hand_out,
                                  void* bus) {
    Stop();
    wake_ = wake;
    hand_out_ = hand_out;
    bus_ = bus;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof(address.sun_path)) return AttachError::kSystemError;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener_ < 0) return AttachError::kSystemError;
    if (::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const bool taken = errno == EADDRINUSE;
      Stop();
      return taken ? AttachError::kConsumerExists : AttachError::kSystemError;
    }
    path_ = path;
    owner_ = ::getpid();
    bool ok = true;
    if (permissions.owner != static_cast<uid_t>(-1) ||
        permissions.group != static_cast<gid_t>(-1)) {
      ok = ::chown(path.c_str(), permissions.owner, permissions.group) == 0;
    }
    ok = ok && ::chmod(path.c_str(), permissions.mode & 0777) == 0;
    ok = ok && ::listen(listener_, static_cast<int>(kPending)) == 0;
    ok = ok && ::pipe2(stop_, O_CLOEXEC) == 0;
    if (ok) {
      // The thread takes no signal: the process's handlers run on its own
      // threads, as they did before the bus had one.
      sigset_t all;
      sigset_t previous;
      sigfillset(&all);
      (void)::pthread_sigmask(SIG_SETMASK, &all, &previous);
      ok = ::pthread_create(&thread_, nullptr, &LaneHandoutService::Main, this) == 0;
      (void)::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      running_ = ok;
    }
    if (!ok) {
      Stop();
      return AttachError::kSystemError;
    }
    return AttachError::kNone;
  }

  // Stops the thread (after the request it is answering, if any) and
  // removes the socket. In a child forked from the consumer (the thread is
  // the parent's) it only closes this process's descriptors.
  void Stop() noexcept {
    const bool own = owner_ == ::getpid();
    if (running_ && own) {
      const char stop = 1;
      (void)!::write(stop_[1], &stop, 1);
      (void)::pthread_join(thread_, nullptr);
    }
    running_ = false;
    if (own && !path_.empty()) (void)::unlink(path_.c_str());
    for (int& fd : stop_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
    path_.clear();
    owner_ = 0;
  }

  bool IsRunning() const noexcept { return running_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    int fd = -1;
    Clock::time_point due{};
  };

  static void* Main(void* self) {
    static_cast<LaneHandoutService*>(self)->Serve();
    return nullptr;
  }

  void Serve() {
    Pending pending[kPending];
    std::size_t count = 0;
    for (;;) {
      pollfd watched[2 + kPending];
      watched[0] = {stop_[0], POLLIN, 0};
      watched[1] = {listener_, POLLIN, 0};
      const Clock::time_point now = Clock::now();
      int timeout = -1;
      for (std::size_t i = 0; i < count; ++i) {
        watched[2 + i] = {pending[i].fd, POLLIN, 0};
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(pending[i].due - now).count();
        const int wait = left < 0 ? 0 : static_cast<int>(left) + 1;
        if (timeout < 0 || wait < timeout) timeout = wait;
      }
      if (::poll(watched, static_cast<nfds_t>(2 + count), timeout) < 0 && errno != EINTR) return;
      if (watched[0].revents != 0) break;
      // Requests first (their bytes are in), then the clock, then new ones.
      std::size_t kept = 0;
      const Clock::time_point later = Clock::now();
      for (std::size_t i = 0; i < count; ++i) {
        const bool ready = watched[2 + i].revents != 0;
        if (ready || later >= pending[i].due) {
          if (ready) Answer(pending[i].fd);
          ::close(pending[i].fd);
        } else {
          pending[kept++] = pending[i];
        }
      }
      count = kept;
      if (watched[1].revents != 0) {
        for (;;) {
          const int peer = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (peer < 0) break;
          if (count == kPending) {
            // Full: the oldest goes (an honest producer sends at once).
            ::close(pending[0].fd);
            for (std::size_t i = 1; i < count; ++i) pending[i - 1] = pending[i];
            --count;
          }
          pending[count++] = Pending{peer, Clock::now() + std::chrono::seconds(1)};
        }
      }
    }
    for (std::size_t i = 0; i < count; ++i) ::close(pending[i].fd);
  }

  // One request whose bytes are in: the proof checked, then the bus's
  // answer sent (the socket's buffer is empty: it never blocks).
  void Answer(int peer) {
    LaneRequest request;
    int proof = -1;
    const int kept = ReceiveWithDescriptors(peer, &request, sizeof(request), &proof, 1);
    if (kept < 0 || request.magic != kHandoutMagic) {
      if (proof >= 0) ::close(proof);
      return;  // not a request: dropped without an answer
    }
    AttachError error = CheckProof(proof);
    if (proof >= 0) ::close(proof);
    LaneDelivery delivery(peer);
    if (error == AttachError::kNone) {
      ucred credentials{};
      socklen_t length = sizeof(credentials);
      (void)::getsockopt(peer, SOL_SOCKET, SO_PEERCRED, &credentials, &length);
      request.name[kProducerNameCapacity - 1] = '\0';
      error = hand_out_(bus_, request, credentials.pid, delivery);
    }
    // A lane delivered, or the error. (kNone with nothing delivered would
    // be the bus's mistake: the producer is told the system failed.)
    delivery.Refuse(error != AttachError::kNone ? error : AttachError::kSystemError);
  }

  // The proof: an open, for writing, of this bus's wake page, which the
  // kernel let the producer make only if the page's mode admits it.
  AttachError CheckProof(int proof) const noexcept {
    Segment::Object file;
    if (proof < 0 || !FileOf(proof, &file)) return AttachError::kPermissionDenied;
    if (file.device != wake_.device || file.inode != wake_.inode) {
      return AttachError::kPermissionDenied;
    }
    const int flags = ::fcntl(proof, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) != O_RDWR) return AttachError::kPermissionDenied;
    return AttachError::kNone;
  }

  Segment::Object wake_;
  HandOut hand_out_ = nullptr;
  void* bus_ = nullptr;
  std::string path_;
  int listener_ = -1;
  int stop_[2] = {-1, -1};
  pthread_t thread_{};
  bool running_ = false;
  pid_t owner_ = 0;  // the process that bound the socket and started the thread
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
