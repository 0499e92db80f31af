// sluice_ipc_sizes_bench's NATS rows: the same frames from a producer
// process to a consumer process through the NATS bridge and a local
// nats-server (started by the benchmark on a free loopback port): in each
// process a bus (256 slots, several producers allowed) and a Bridge; the
// sender's thread publishes into its bus and dispatches it (Forward sends),
// the receiver's bridge publishes into its bus from the client's thread and
// its main thread dispatches. Each row runs twice: with the client's
// buffering (the default) and with send_asap (each frame sent as published). Frames go as their
// bytes (TriviallyCopyableCodec: integers only, no padding). The client's threads are started
// before the main thread is pinned, so they float, as the server does. Core NATS may drop; a row
// that lost a message did not finish.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sluice/nats/bridge.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <variant>

#include "harness/platform.hpp"
#include "ipc/ipc_bench_setup.hpp"
#include "ipc/sizes_common.hpp"
#include "nats_server_process.hpp"

namespace sluice_ipc_sizes {

template <typename F>
using NatsBus = sluice::AsyncBus<std::variant<F>, kCapacity, sluice::ProducerModel::kMulti>;
template <typename F>
using NatsBridge = sluice::nats::Bridge<NatsBus<F>>;
template <typename F>
using FrameCodec = sluice::nats::TriviallyCopyableCodec<F>;

inline sluice::nats::BridgeOptions NatsOptions(const std::string& url, bool send_asap) {
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.send_asap = send_asap;
  // Room in the client for a whole run of 64 KB frames: a row measures
  // the path, not the client's slow-consumer limit.
  options.pending_messages_limit = 1 << 20;
  options.pending_bytes_limit = 1 << 30;
  options.admission_wait = {1000ms, 1000ms, 1000ms};
  return options;
}

// One bus and the bridge on it, in one process.
template <typename F>
struct NatsEnd {
  NatsEnd(const std::string& url, bool send_asap) : bridge(bus, NatsOptions(url, send_asap)) {}
  ~NatsEnd() { (void)bridge.Shutdown(5000ms, sluice::nats::ShutdownDrain::kDispatchHere); }
  NatsBus<F> bus;
  NatsBridge<F> bridge;
  // Where each frame is written before it is published: made once, as the
  // other systems' producers write theirs in place (up to 64 KB: not on
  // the stack, and not allocated and zeroed for every message).
  std::unique_ptr<F> frame = std::make_unique<F>();

  // Publishes frame `seq` into the bus (dispatching, so sending, while it
  // is full) and sends it on; false when the deadline passed first.
  bool Send(std::uint64_t seq, std::uint64_t sent_ns, Clock::time_point deadline) {
    Write(*frame, seq, sent_ns);
    while (!bus.PublishWithPriority(*frame, 1, sluice::MessagePriority::MEDIUM)) {
      (void)bus.ProcessBatch();
      if (Clock::now() > deadline) return false;
    }
    while (bus.ProcessBatch() > 0) {
    }
    return true;
  }
};

// The subject of a row: the benchmark's pid and the row's number, so that
// neither two runs nor two rows ever cross.
inline std::string NatsSubject(int row, const char* what) {
  return std::string("sluice.sizes.") + std::to_string(::getppid()) + "." + std::to_string(row) +
         "." + what;
}
inline int NextNatsRow() {
  static int rows = 0;
  return ++rows;
}

// Messages per second from the first arrival to the last; NaN when the
// deadline passed first, a message was lost or a frame arrived torn.
template <typename F>
double NatsThroughput(const sluice_ipc_bench::Cpus& cpus, std::uint64_t messages,
                      const std::string& url, bool send_asap) {
  int fds[2];
  if (::pipe(fds) != 0) return NAN;
  const auto started = Clock::now();
  const int row = NextNatsRow();
  const pid_t consumer = Child(-1, fds[1], [&](int out) {
    auto end = std::make_unique<NatsEnd<F>>(url, send_asap);
    std::uint64_t received = 0;
    bool torn = false;
    Clock::time_point first{};
    auto handle = end->bus.template Subscribe<F>([&](const F& frame) {
      torn |= frame.tail != frame.seq;
      if (received++ == 0) first = Clock::now();
    });
    if (!handle.IsValid() ||
        !end->bridge.template Receive<F, FrameCodec<F>>(NatsSubject(row, "throughput"), 1) ||
        end->bridge.Start() != NATS_OK) {
      Say(out, "failed\n");
      return;
    }
    sluice::bench::PinThisThread(cpus.consumer);
    Say(out, "ready\n");
    const auto deadline = Clock::now() + kRowDeadline;
    while (received < messages && Clock::now() < deadline) (void)end->bus.ProcessBatch();
    const double seconds = std::chrono::duration<double>(Clock::now() - first).count();
    Say(out, received == messages && !torn
                 ? "rate " + std::to_string(static_cast<double>(messages - 1) / seconds) + "\n"
                 : "unfinished " + std::to_string(received) + "\n");
  });
  std::string line;
  const bool ready = ReadLine(fds[0], Clock::now() + 10s, &line) && line == "ready";
  pid_t producer = -1;
  if (ready) {
    producer = Child(-1, fds[1], [&](int) {
      auto end = std::make_unique<NatsEnd<F>>(url, send_asap);
      if (!end->bridge.template Forward<F, FrameCodec<F>>(NatsSubject(row, "throughput"), 1) ||
          end->bridge.Start() != NATS_OK) {
        return;
      }
      sluice::bench::PinThisThread(cpus.producer);
      const auto deadline = Clock::now() + kRowDeadline;
      for (std::uint64_t seq = 0; seq < messages && end->Send(seq, 0, deadline); ++seq) {
      }
    });
  }
  if (!ready) ::kill(consumer, SIGKILL);
  return CollectRate(fds, consumer, producer, started);
}

// Pings one at a time, each answered by the other process; the pinger
// writes "one-way round-trip" per ping to the pipe.
template <typename F>
Latency NatsPingPong(const sluice_ipc_bench::Cpus& cpus, std::uint64_t pings,
                     const std::string& url, bool send_asap) {
  int fds[2];
  if (::pipe(fds) != 0) return Latency{};
  const auto started = Clock::now();
  const int row = NextNatsRow();
  // Each process has a bus for what it sends and one for what it receives
  // (a bus that both received and forwarded F would send its pongs on).
  const pid_t echo = Child(-1, fds[1], [&](int out) {
    auto in = std::make_unique<NatsEnd<F>>(url, send_asap);
    auto answer = std::make_unique<NatsEnd<F>>(url, send_asap);
    std::uint64_t answered = 0;
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    auto handle = in->bus.template Subscribe<F>([&](const F& ping) {
      if (answer->Send(ping.seq, NowNanos(), deadline)) ++answered;
    });
    if (!handle.IsValid() ||
        !in->bridge.template Receive<F, FrameCodec<F>>(NatsSubject(row, "ping"), 1) ||
        !answer->bridge.template Forward<F, FrameCodec<F>>(NatsSubject(row, "pong"), 1) ||
        in->bridge.Start() != NATS_OK || answer->bridge.Start() != NATS_OK) {
      Say(out, "failed\n");
      return;
    }
    sluice::bench::PinThisThread(cpus.consumer);
    Say(out, "ready\n");
    while (answered < pings && Clock::now() < deadline) (void)in->bus.ProcessBatch();
  });
  std::string line;
  const bool ready = ReadLine(fds[0], Clock::now() + 10s, &line) && line == "ready";
  pid_t pinger = -1;
  if (ready) {
    pinger = Child(-1, fds[1], [&](int out) {
      auto ping = std::make_unique<NatsEnd<F>>(url, send_asap);
      auto in = std::make_unique<NatsEnd<F>>(url, send_asap);
      bool answered = false;
      std::uint64_t sent_ns = 0;
      std::string lines;
      auto handle = in->bus.template Subscribe<F>([&](const F& pong) {
        const std::uint64_t now = NowNanos();
        lines += std::to_string(now - pong.sent_ns) + " " + std::to_string(now - sent_ns) + "\n";
        answered = true;
      });
      if (!handle.IsValid() ||
          !ping->bridge.template Forward<F, FrameCodec<F>>(NatsSubject(row, "ping"), 1) ||
          !in->bridge.template Receive<F, FrameCodec<F>>(NatsSubject(row, "pong"), 1) ||
          ping->bridge.Start() != NATS_OK || in->bridge.Start() != NATS_OK) {
        return;
      }
      sluice::bench::PinThisThread(cpus.producer);
      const auto deadline = Clock::now() + kRowDeadline;
      for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
        answered = false;
        sent_ns = NowNanos();
        if (!ping->Send(seq, 0, deadline)) break;
        while (!answered && Clock::now() < deadline) (void)in->bus.ProcessBatch();
        if (!answered) break;
      }
      Say(out, lines);
    });
  }
  if (!ready) ::kill(echo, SIGKILL);
  return CollectPingPong(fds, pinger, echo, pings, started);
}

}  // namespace sluice_ipc_sizes
