// What the shared-memory bus's test files share: unique segment names, the
// peer process (tests/ipc/peer.cpp) and a dispatch loop with a guard.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"

namespace sluice_ipc_test {

using namespace std::chrono_literals;

inline constexpr auto kGuard = 30s;

// A segment name of this test process alone (tests run in parallel).
// A segment name no other test process uses: the pid alone is reused, and a
// test that leaves a segment behind (a killed consumer's, by design) would
// then hand the next process with that pid a name already taken. The
// process's start on the steady clock tells two such processes apart.
inline std::string UniqueName() {
  static std::atomic<int> next{0};
  static const auto started = std::chrono::steady_clock::now().time_since_epoch().count();
  return "/sluice-test-" + std::to_string(::getpid()) + "-" + std::to_string(started) + "-" +
         std::to_string(next.fetch_add(1));
}

inline bool StartPeer(sluice_test::ChildProcess& peer, const std::vector<std::string>& args) {
  std::vector<std::string> argv{SLUICE_IPC_PEER};
  argv.insert(argv.end(), args.begin(), args.end());
  return peer.Start(argv, /*capture=*/true);
}

// Leaves a killed consumer's segment under `name`: a peer creates the bus,
// says it is ready, and is killed (SIGKILL). False if the peer did not get
// that far.
inline bool LeaveKilledConsumersSegment(const std::string& name) {
  sluice_test::ChildProcess holder;
  std::string line;
  if (!StartPeer(holder, {"hold", name}) || !holder.WaitForLine("ready", &line, kGuard)) {
    return false;
  }
  holder.Kill(SIGKILL);
  return true;
}

// The value of `key=` in a peer's line.
inline std::uint64_t Field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find(key + "=");
  return at == std::string::npos ? ~std::uint64_t{0}
                                 : std::stoull(line.substr(at + key.size() + 1));
}

// Dispatches until `done` or the guard passes.
template <typename Bus, typename Done>
bool DispatchUntil(Bus& bus, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (bus.ProcessBatch() == 0) std::this_thread::sleep_for(100us);
  }
  return true;
}

// Dispatches to `visitor` until `done` or the guard passes (every message
// goes to the visitor).
template <typename Bus, typename Visitor, typename Done>
bool DispatchWithUntil(Bus& bus, Visitor&& visitor, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (bus.ProcessBatchWith(visitor) == 0) std::this_thread::sleep_for(100us);
  }
  return true;
}

}  // namespace sluice_ipc_test
