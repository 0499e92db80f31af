// What every row of sluice_ipc_sizes_bench shares: the three message sizes
// (the same bytes written and read by every system: a frame's number at its
// head and its tail, and when an answer was sent), the latency samples a
// ping-pong returns, the deadline of one row, and the child processes that
// report through a pipe.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/platform.hpp"

namespace sluice_ipc_sizes {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr auto kRowDeadline = 20s;

// Both processes of a row read CLOCK_MONOTONIC (steady_clock on Linux).
inline std::uint64_t NowNanos() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// A message of kBytes: its number at the head and the tail, and when it was
// sent (answers only). No padding: every byte is the value's.
template <std::size_t kBytes>
struct Frame {
  std::uint64_t seq;
  std::uint64_t sent_ns;
  unsigned char middle[kBytes - 3 * sizeof(std::uint64_t)];
  std::uint64_t tail;
};
struct Small {  // 24 bytes: the same three fields, nothing between
  std::uint64_t seq;
  std::uint64_t sent_ns;
  std::uint64_t tail;
};
using Frame4K = Frame<4096>;
using Frame64K = Frame<65536>;
static_assert(sizeof(Small) == 24 && sizeof(Frame4K) == 4096 && sizeof(Frame64K) == 65536);

template <typename F>
void Write(F& frame, std::uint64_t seq, std::uint64_t sent_ns) {
  frame.seq = seq;
  frame.sent_ns = sent_ns;
  frame.tail = seq;
}

// The queue of every system (slots, or iceoryx's subscriber queue).
constexpr std::size_t kCapacity = 256;

struct Latency {
  std::vector<double> one_way;     // ns, the answers'
  std::vector<double> round_trip;  // ns
};

// Runs `body(write_fd)` in a forked child (pinned to `cpu`, unless it is
// negative: then the body pins itself, after starting threads that should
// not inherit the pin); returns the child's pid.
template <typename Body>
pid_t Child(int cpu, int write_fd, Body&& body) {
  std::fflush(nullptr);  // the child's exit would print the parent's buffered lines again
  const pid_t child = ::fork();
  if (child != 0) return child;
  if (cpu >= 0) sluice::bench::PinThisThread(cpu);
  body(write_fd);
  // exit, not _exit: the iceoryx runtime leaves RouDi as it is destroyed,
  // and a RouDi whose applications all left removes its segments when it
  // stops. The body's own objects are gone already (it returned).
  std::exit(0);
}

inline void Say(int fd, const std::string& line) { (void)!::write(fd, line.data(), line.size()); }

// Everything until every writer has closed the pipe, or until `deadline`
// (a child stopped or stuck keeps its end open).
inline std::string ReadAllUntil(int fd, Clock::time_point deadline) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return text;
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got <= 0) return text;
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

// Waits for `pid` until `deadline`, then kills it (SIGKILL) and reaps it;
// true when it ended by itself with status 0. A pid of -1: never started.
inline bool WaitOrKill(pid_t pid, Clock::time_point deadline) {
  if (pid <= 0) return false;
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (got < 0) return false;
    if (Clock::now() >= deadline) break;
    ::usleep(1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return false;
}

// How long the parent waits for a row's children beyond the row's own
// deadline (their exits, a bridge's shutdown) before it kills them.
constexpr auto kChildGrace = 15s;

// Reads one line (without its newline) until `deadline`; false when none
// came by then (or the pipe closed).
inline bool ReadLine(int fd, Clock::time_point deadline, std::string* line) {
  line->clear();
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    char c = 0;
    if (::read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

// The pinger's lines ("one-way round-trip" in ns, one per ping) from the
// pipe `fds` (whose write end is closed here), read until both children
// have closed it or the row's time is up; then the children are reaped,
// killed if they still run (an echo whose pinger gave up would wait out
// its deadline; a stopped child would hold the row for ever). Empty unless
// every ping was answered. A pid of -1: never started.
inline Latency CollectPingPong(const int fds[2], pid_t pinger, pid_t echo, std::uint64_t pings,
                               Clock::time_point started) {
  ::close(fds[1]);
  const auto deadline = started + kRowDeadline + kChildGrace;
  const std::string result = ReadAllUntil(fds[0], deadline);
  ::close(fds[0]);
  (void)WaitOrKill(pinger, deadline);
  Latency latency;
  const char* at = result.c_str();
  for (char* end = nullptr;; at = end) {
    const double one_way = std::strtod(at, &end);
    if (end == at) break;
    at = end;
    const double round_trip = std::strtod(at, &end);
    if (end == at) break;
    latency.one_way.push_back(one_way);
    latency.round_trip.push_back(round_trip);
  }
  (void)WaitOrKill(echo, latency.round_trip.size() < pings ? Clock::now() : deadline);
  if (latency.round_trip.size() < pings) return Latency{};
  return latency;
}

// The rate a throughput child reported ("rate N"), once both children have
// closed the pipe or the row's time is up (then they are killed); NaN when
// none came.
inline double CollectRate(const int fds[2], pid_t consumer, pid_t producer,
                          Clock::time_point started) {
  ::close(fds[1]);
  const auto deadline = started + kRowDeadline + kChildGrace;
  const std::string result = ReadAllUntil(fds[0], deadline);
  ::close(fds[0]);
  (void)WaitOrKill(consumer, deadline);
  (void)WaitOrKill(producer, deadline);
  const std::size_t at = result.find("rate ");
  return at == std::string::npos ? NAN : std::strtod(result.c_str() + at + 5, nullptr);
}

}  // namespace sluice_ipc_sizes
