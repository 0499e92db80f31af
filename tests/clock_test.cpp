#include "sluice/clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

namespace sluice_test {
namespace {

TEST(ClockTest, CounterClockAdvancesWithSteadyClock) {
  // A unit or scale error (ticks, nanoseconds, a wrong frequency) would be off
  // by orders of magnitude; the wide band only absorbs a noisy machine.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::uint64_t counter_start = sluice::CounterClock::NowMicros();
    const std::uint64_t steady_start = sluice::SteadyClock::NowMicros();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double counter = static_cast<double>(sluice::CounterClock::NowMicros() - counter_start);
    const double steady = static_cast<double>(sluice::SteadyClock::NowMicros() - steady_start);
    if (counter > 0.8 * steady && counter < 1.25 * steady) return;
  }
  ADD_FAILURE() << "CounterClock does not advance at steady_clock's rate";
}

TEST(ClockTest, CounterClockStaysOnSteadyClocksTimeLine) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the first calibration
  const auto counter = static_cast<std::int64_t>(sluice::CounterClock::NowMicros());
  const auto steady = static_cast<std::int64_t>(sluice::SteadyClock::NowMicros());
  EXPECT_LT(std::llabs(counter - steady), 50'000) << "timestamps share steady_clock's epoch";
}

#if defined(__x86_64__) || defined(__aarch64__)
TEST(ClockTest, CounterIsUsedOnceCalibrated) {
  if (!sluice::detail::HasConstantRateCounter()) GTEST_SKIP() << "no invariant counter";
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  while (std::chrono::steady_clock::now() < end) (void)sluice::CounterClock::NowMicros();
  EXPECT_TRUE(sluice::CounterClock::UsesCounter());
}
#endif

TEST(ClockTest, CalibrationDoesNotWrapForEarlyReadings) {
  sluice::detail::CounterCalibration calibration;
  calibration.base_ticks = 1000;
  calibration.base_micros = 500;
  calibration.micros_per_tick_q32 = std::uint64_t{1} << 31;  // half a microsecond per tick
  EXPECT_EQ(calibration.MicrosAt(999), 500u);
  EXPECT_EQ(calibration.MicrosAt(1000), 500u);
  EXPECT_EQ(calibration.MicrosAt(1010), 505u);
  EXPECT_EQ(calibration.MicrosAt(1000 + (std::uint64_t{1} << 40)), 500u + (std::uint64_t{1} << 39));
}

}  // namespace
}  // namespace sluice_test
