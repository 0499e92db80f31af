// The consumer's side of a lane's hand-out (sluice/ipc/lane_handout.hpp): a
// thread that answers producers' requests on the bus's socket, each only
// once its proof is checked, and the answer it sends (LaneDelivery: a lane
// and its descriptors, or an error). Which lane a proven request gets is
// the bus's to decide. Linux.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "sluice/config.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/lane_handout.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/statistics.hpp"

#ifndef SLUICE_IPC_TEST_SEAMS
#define SLUICE_IPC_TEST_SEAMS 0
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

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
