// What the tests of sleeping across processes share: how a lost wake-up
// shows without asserting a time (see tests/ipc/sleeping_test.cpp's file
// comment), and a visitor that keeps the last Stop it saw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <sluice/ipc/shm_bus.hpp>
#include <thread>
#include <type_traits>
#include <utility>

#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace sluice_ipc_test {

using namespace std::chrono_literals;

// A wait that only a wake-up ends in time.
inline constexpr auto kForever = std::chrono::hours(1);
inline constexpr auto kHangGuard = 20s;

inline sluice::ipc::ShmBusOptions CheckingEvery(std::chrono::nanoseconds interval) {
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = interval;
  return options;
}

// A visitor that keeps the number of the last Stop it saw.
struct LastStop {
  std::uint64_t* seq;
  template <typename T>
  void operator()(const T& message) const {
    if constexpr (std::is_same_v<T, Stop>) *seq = message.seq;
  }
};

// Waits until some process has announced a sleep on `signal`, then 50 ms
// (see tests/ipc/sleeping_test.cpp); false if the guard passes first.
template <typename Signal>
inline bool WaitForSleeper(const Signal& signal) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (signal.Waiters() == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  std::this_thread::sleep_for(50ms);
  return true;
}

// Runs `wait`, which a wake-up should end. If it has not returned after
// kHangGuard, records the hang and calls `rescue` (every 10 ms) until it
// returns. Whether it had to.
template <typename Rescue, typename Wait>
inline bool NeededRescueBy(Rescue&& rescue, Wait&& wait) {
  std::atomic<bool> done{false};
  std::atomic<bool> rescued{false};
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (!done.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        rescued = true;
        rescue();
        std::this_thread::sleep_for(10ms);
      } else {
        std::this_thread::sleep_for(1ms);
      }
    }
  });
  wait();
  done = true;
  watchdog.join();
  return rescued.load();
}

// As NeededRescueBy, rescuing by a wake-up of `signal`.
template <typename Signal, typename Wait>
inline bool NeededRescue(Signal& signal, Wait&& wait) {
  return NeededRescueBy([&signal] { signal.Wake(); }, std::forward<Wait>(wait));
}

}  // namespace sluice_ipc_test
