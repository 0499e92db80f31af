// The wait loop (detail/wait/waiting.hpp, WaitUntil) with a real wake signal and
// parker, across threads: a waiter parked for ever is woken by a notify
// after the store it waits for (kReady), or by a stop (kStopped). The
// notifier acts only once the waiter has reached its park (the counting
// parker says so), so the wake-up must come through the signal; a lost one
// leaves the waiter parked and the test fails by its CTest timeout. The
// single-threaded cases, each step seen, are in wait_loop_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "counting_parker.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/extras/condition_variable_parker.hpp"
#include "typed_test_names.hpp"

#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#endif

namespace sluice_test {
namespace wait_loop_concurrency_test {
namespace {

using sluice::detail::WaitEnd;

template <typename Parker>
class WaitLoopConcurrencyTest : public ::testing::Test {};

#if defined(__linux__)
using Parkers = ::testing::Types<CountingParker<sluice::ConditionVariableParker>,
                                 CountingParker<sluice::FutexParker>>;
#else
using Parkers = ::testing::Types<CountingParker<sluice::ConditionVariableParker>>;
#endif
TYPED_TEST_SUITE(WaitLoopConcurrencyTest, Parkers, sluice_test::IndexNames);

// Runs a waiter that waits for `ready` or `stop` for ever, waits until it
// has parked, then runs `act` (which makes one of them true and notifies);
// returns the waiter's end.
template <typename Parker, typename Act>
WaitEnd WaitThenAct(sluice::detail::WakeSignal<Parker>& signal, std::atomic<bool>& ready,
                    std::atomic<bool>& stop, Act act) {
  const std::uint64_t parks_before = g_parks.load();
  WaitEnd end = WaitEnd::kTimedOut;
  std::thread waiter([&] {
    end = sluice::detail::WaitUntil(
        signal, 16, std::chrono::nanoseconds::max(),
        [&] { return ready.load(std::memory_order_acquire); },
        [&] { return stop.load(std::memory_order_acquire); });
  });
  // Not a sleep: the waiter counts its park just before it parks.
  while (g_parks.load() == parks_before) std::this_thread::yield();
  act();
  waiter.join();
  return end;
}

TYPED_TEST(WaitLoopConcurrencyTest, AParkedWaiterIsWokenByTheNotifyAfterTheStore) {
  // A few rounds: each a fresh chance for the notify to land around the park.
  for (int round = 0; round < 20; ++round) {
    sluice::detail::WakeSignal<TypeParam> signal;
    std::atomic<bool> ready{false};
    std::atomic<bool> stop{false};
    const WaitEnd end = WaitThenAct(signal, ready, stop, [&] {
      ready.store(true, std::memory_order_release);
      signal.Notify();
    });
    ASSERT_EQ(end, WaitEnd::kReady) << "round " << round;
    EXPECT_EQ(signal.Waiters(), 0u);
  }
}

TYPED_TEST(WaitLoopConcurrencyTest, AParkedWaiterIsStoppedByTheNotifyAfterTheStop) {
  for (int round = 0; round < 20; ++round) {
    sluice::detail::WakeSignal<TypeParam> signal;
    std::atomic<bool> ready{false};
    std::atomic<bool> stop{false};
    const WaitEnd end = WaitThenAct(signal, ready, stop, [&] {
      stop.store(true, std::memory_order_release);
      signal.Notify();
    });
    ASSERT_EQ(end, WaitEnd::kStopped) << "round " << round;
    EXPECT_EQ(signal.Waiters(), 0u);
  }
}

}  // namespace
}  // namespace wait_loop_concurrency_test
}  // namespace sluice_test
