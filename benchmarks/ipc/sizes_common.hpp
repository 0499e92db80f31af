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

// Everything until every writer has closed the pipe.
inline std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;) text.append(buffer, got);
  return text;
}

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
// pipe `fds` (whose write end is closed here), once both children have
// ended (a pid of -1: never started). The echo ends once it has answered
// every ping; if the pinger gave up, it would wait out its deadline, so it
// is killed. Empty unless every ping was answered.
inline Latency CollectPingPong(const int fds[2], pid_t pinger, pid_t echo, std::uint64_t pings) {
  ::close(fds[1]);
  const std::string result = ReadAll(fds[0]);
  ::close(fds[0]);
  if (pinger > 0) ::waitpid(pinger, nullptr, 0);
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
  if (latency.round_trip.size() < pings) ::kill(echo, SIGKILL);
  ::waitpid(echo, nullptr, 0);
  if (latency.round_trip.size() < pings) return Latency{};
  return latency;
}

}  // namespace sluice_ipc_sizes
