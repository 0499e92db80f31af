// The shared-memory bus between two processes beside the in-process bus
// between two threads, same payload (24 bytes), capacity, priority order
// and pinning (producer on the first allowed CPU, consumer on the second),
// interleaved round by round: end-to-end throughput, and round-trip
// latency (a ping on one bus answered on another). Each round is bracketed
// by a placement probe and counts in its state's rows; a round whose state
// changed is left out (MEASURING.md). Every loop has a deadline; a row that
// did not finish says so.
//
//   sluice_ipc_bench [--rounds N] [--messages N] [--pings N]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sluice/ipc/shm_bus.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "harness/platform.hpp"
#include "harness/stats.hpp"
#include "ipc/ipc_bench_setup.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sluice_ipc_bench::Cpus;
constexpr auto P = sluice_ipc_bench::Percentile;

struct Reading {  // 24 bytes
  std::uint64_t seq;
  std::uint64_t a;
  std::uint64_t b;
};
static_assert(sizeof(Reading) == 24);
using Payload = std::variant<Reading>;
constexpr std::size_t kCapacity = 1024;
constexpr std::uint64_t kStop = ~std::uint64_t{0};
constexpr auto kRowDeadline = 20s;

using ShmBus = sluice::ipc::ShmBus<Payload, kCapacity>;
using ShmProducer = sluice::ipc::ShmProducer<Payload, kCapacity>;
// The in-process bus of the same shape: several producers allowed, HIGH
// first, no statistics or clock on the path (as the shared one).
using LocalBus = sluice::AsyncBus<Payload, kCapacity, sluice::ProducerModel::kMulti,
                                  sluice::PriorityOrderTraits>;

// ---- Throughput: one producer, one consumer, `messages` readings ------------

// Messages per second from the first dispatch to the last; NaN if the
// deadline passed first.
double ShmThroughput(const Cpus& cpus, std::uint64_t messages, const std::string& name) {
  ShmBus bus;
  if (bus.Create(name) != sluice::ipc::AttachError::kNone) return NAN;
  const pid_t child = ::fork();
  if (child < 0) return NAN;
  if (child == 0) {
    sluice::bench::PinThisThread(cpus.producer);
    ShmProducer producer;
    if (producer.Attach(name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    const auto deadline = Clock::now() + kRowDeadline;
    for (std::uint64_t seq = 0; seq < messages; ++seq) {
      while (!producer.PublishFast(Reading{seq, 1, 2}, 1, std::chrono::nanoseconds(0))) {
        if ((seq & 1023) == 0 && Clock::now() > deadline) ::_exit(2);
      }
    }
    ::_exit(0);
  }
  sluice::bench::PinThisThread(cpus.consumer);
  std::uint64_t received = 0;
  Clock::time_point first{};
  const auto deadline = Clock::now() + kRowDeadline;
  while (received < messages && Clock::now() < deadline) {
    (void)bus.ProcessBatchWith([&](const Reading&) {
      if (received++ == 0) first = Clock::now();
    });
  }
  const Clock::time_point last = Clock::now();
  int status = 0;
  ::waitpid(child, &status, 0);
  if (received < messages) return NAN;
  return static_cast<double>(messages - 1) / std::chrono::duration<double>(last - first).count();
}

double LocalThroughput(const Cpus& cpus, std::uint64_t messages) {
  auto bus = std::make_unique<LocalBus>();
  bus->SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  std::atomic<bool> gave_up{false};
  std::thread producer([&] {
    sluice::bench::PinThisThread(cpus.producer);
    const auto deadline = Clock::now() + kRowDeadline;
    for (std::uint64_t seq = 0; seq < messages; ++seq) {
      while (!bus->PublishFast(Reading{seq, 1, 2}, 1, std::chrono::nanoseconds(0))) {
        if ((seq & 1023) == 0 && Clock::now() > deadline) {
          gave_up.store(true);
          return;
        }
      }
    }
  });
  sluice::bench::PinThisThread(cpus.consumer);
  std::uint64_t received = 0;
  Clock::time_point first{};
  const auto deadline = Clock::now() + kRowDeadline;
  while (received < messages && Clock::now() < deadline && !gave_up.load()) {
    (void)bus->ProcessBatchWith([&](const Reading&) {
      if (received++ == 0) first = Clock::now();
    });
  }
  const Clock::time_point last = Clock::now();
  producer.join();
  if (received < messages) return NAN;
  return static_cast<double>(messages - 1) / std::chrono::duration<double>(last - first).count();
}

// ---- Round trip: a ping on one bus, its answer on another ---------------------

// Round-trip times in ns of `pings` pings, one at a time; empty if the
// deadline passed first.
std::vector<double> ShmRoundTrips(const Cpus& cpus, std::uint64_t pings, const std::string& name) {
  const std::string ping_name = name + "-ping";
  const std::string pong_name = name + "-pong";
  ShmBus pongs;
  if (pongs.Create(pong_name) != sluice::ipc::AttachError::kNone) return {};
  const pid_t child = ::fork();
  if (child < 0) return {};
  if (child == 0) {
    // The echo: consumer of pings, producer of pongs.
    sluice::bench::PinThisThread(cpus.consumer);
    ShmBus ping_bus;
    if (ping_bus.Create(ping_name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    ShmProducer answer;
    if (answer.Attach(pong_name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    bool stop = false;
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    while (!stop && Clock::now() < deadline) {
      (void)ping_bus.ProcessBatchWith([&](const Reading& ping) {
        if (ping.seq == kStop) stop = true;
        while (!answer.PublishFast(ping, 2, std::chrono::nanoseconds(0)) &&
               answer.ConsumerAlive() && Clock::now() < deadline) {
        }
      });
    }
    ping_bus.Close();  // _exit runs no destructor
    ::_exit(0);
  }
  sluice::bench::PinThisThread(cpus.producer);
  ShmProducer ping;
  const auto deadline = Clock::now() + kRowDeadline;
  while (ping.Attach(ping_name) != sluice::ipc::AttachError::kNone) {
    if (Clock::now() > deadline) {
      ::waitpid(child, nullptr, 0);
      return {};
    }
    std::this_thread::sleep_for(1ms);
  }
  std::vector<double> samples;
  samples.reserve(pings);
  for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
    const auto sent = Clock::now();
    if (!ping.PublishFast(Reading{seq, 0, 0}, 1, std::chrono::nanoseconds(0))) break;
    bool answered = false;
    while (!answered && Clock::now() < deadline) {
      (void)pongs.ProcessBatchWith([&](const Reading&) { answered = true; });
    }
    if (!answered) break;
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - sent).count());
  }
  (void)ping.PublishFast(Reading{kStop, 0, 0}, 1, std::chrono::nanoseconds(0));
  ::waitpid(child, nullptr, 0);
  if (samples.size() < pings) return {};
  return samples;
}

std::vector<double> LocalRoundTrips(const Cpus& cpus, std::uint64_t pings) {
  auto ping_bus = std::make_unique<LocalBus>();
  auto pong_bus = std::make_unique<LocalBus>();
  ping_bus->SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  pong_bus->SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    sluice::bench::PinThisThread(cpus.consumer);
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    while (!stop.load(std::memory_order_relaxed) && Clock::now() < deadline) {
      (void)ping_bus->ProcessBatchWith([&](const Reading& ping) {
        while (!pong_bus->PublishFast(ping, 2, std::chrono::nanoseconds(0)) &&
               Clock::now() < deadline) {
        }
      });
    }
  });
  sluice::bench::PinThisThread(cpus.producer);
  const auto deadline = Clock::now() + kRowDeadline;
  std::vector<double> samples;
  samples.reserve(pings);
  for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
    const auto sent = Clock::now();
    if (!ping_bus->PublishFast(Reading{seq, 0, 0}, 1, std::chrono::nanoseconds(0))) break;
    bool answered = false;
    while (!answered && Clock::now() < deadline) {
      (void)pong_bus->ProcessBatchWith([&](const Reading&) { answered = true; });
    }
    if (!answered) break;
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - sent).count());
  }
  stop.store(true);
  echo.join();
  if (samples.size() < pings) return {};
  return samples;
}

// ---- The table -------------------------------------------------------------------

struct StateRows {
  std::vector<double> shm_mps, local_mps, throughput_ratio;
  std::vector<double> shm_rtt_p50, local_rtt_p50, rtt_ratio;
  std::vector<double> shm_rtt_p99, local_rtt_p99;
  int rounds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  sluice_ipc_bench::Options options{5, 2'000'000, 20'000};
  if (!sluice_ipc_bench::ParseOptions(argc, argv, &options)) return 2;
  const int rounds = options.rounds;
  const std::uint64_t messages = options.messages;
  const std::uint64_t pings = options.pings;
  Cpus cpus;
  if (!sluice_ipc_bench::PickCpus("sluice_ipc_bench", &cpus)) return 1;
  std::printf(
      "24-byte payload, %zu slots, priority order; %llu messages a throughput run, %llu "
      "pings a latency run, %d rounds\n",
      kCapacity, static_cast<unsigned long long>(messages), static_cast<unsigned long long>(pings),
      rounds);
  const std::string name = "/sluice-ipc-bench-" + std::to_string(::getpid());
  std::map<sluice::bench::Placement, StateRows> states;
  int left_out = 0;
  int unfinished = 0;
  for (int round = 0; round < rounds; ++round) {
    const double before = sluice::bench::PlacementProbeNanos(cpus.producer, cpus.consumer);
    const double shm = ShmThroughput(cpus, messages, name);
    const double local = LocalThroughput(cpus, messages);
    std::vector<double> shm_rtt = ShmRoundTrips(cpus, pings, name);
    std::vector<double> local_rtt = LocalRoundTrips(cpus, pings);
    const double after = sluice::bench::PlacementProbeNanos(cpus.producer, cpus.consumer);
    const auto state = sluice::bench::ClassifyPlacement(before);
    std::printf(
        "round %d: probe %.0f / %.0f ns (%s); shm %.1f M/s, local %.1f M/s; round trip "
        "P50 shm %.0f ns, local %.0f ns\n",
        round + 1, before, after, sluice::bench::PlacementName(state), shm / 1e6, local / 1e6,
        P(shm_rtt, 0.5), P(local_rtt, 0.5));
    if (std::isnan(shm) || std::isnan(local) || shm_rtt.empty() || local_rtt.empty()) {
      ++unfinished;
      continue;
    }
    if (sluice::bench::ClassifyPlacement(after) != state) {
      ++left_out;
      continue;
    }
    StateRows& rows = states[state];
    ++rows.rounds;
    rows.shm_mps.push_back(shm / 1e6);
    rows.local_mps.push_back(local / 1e6);
    rows.throughput_ratio.push_back(shm / local);
    rows.shm_rtt_p50.push_back(P(shm_rtt, 0.5));
    rows.local_rtt_p50.push_back(P(local_rtt, 0.5));
    rows.rtt_ratio.push_back(P(shm_rtt, 0.5) / P(local_rtt, 0.5));
    rows.shm_rtt_p99.push_back(P(shm_rtt, 0.99));
    rows.local_rtt_p99.push_back(P(local_rtt, 0.99));
  }
  std::printf(
      "\n| state | rounds | throughput shm / local, M msg/s | shm / local (median of "
      "ratios) | round trip P50 shm / local, ns | shm / local | round trip P99 shm / "
      "local, ns |\n|---|---|---|---|---|---|---|\n");
  for (const auto& [state, rows] : states) {
    std::printf("| %s | %d | %.1f / %.1f | %.2f | %.0f / %.0f | %.2f | %.0f / %.0f |\n",
                sluice::bench::PlacementName(state), rows.rounds,
                sluice::bench::Median(rows.shm_mps), sluice::bench::Median(rows.local_mps),
                sluice::bench::Median(rows.throughput_ratio),
                sluice::bench::Median(rows.shm_rtt_p50), sluice::bench::Median(rows.local_rtt_p50),
                sluice::bench::Median(rows.rtt_ratio), sluice::bench::Median(rows.shm_rtt_p99),
                sluice::bench::Median(rows.local_rtt_p99));
  }
  std::printf("rounds left out (the placement changed): %d; rounds that did not finish: %d\n",
              left_out, unfinished);
  return unfinished == rounds ? 1 : 0;
}
