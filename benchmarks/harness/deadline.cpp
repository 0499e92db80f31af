#include "harness/deadline.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness/platform.hpp"

namespace sluice::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The deadlines alive now, newest first (a row inside a row), and the
// steady-clock end of the newest: what the watchdog watches.
std::mutex& WatchMutex() {
  static std::mutex mutex;
  return mutex;
}
RowDeadline* watched = nullptr;
SteadyClock::time_point watched_end;

std::string FormatSeconds(double seconds) {
  std::ostringstream out;
  out.precision(seconds < 10 ? 2 : 3);
  out << seconds << " s";
  return out.str();
}

}  // namespace

RowDeadline::RowDeadline(std::string row, double seconds)
    : row_(std::move(row)),
      seconds_(seconds),
      end_ticks_(FastClock::Ticks() +
                 static_cast<std::uint64_t>(seconds * 1e9 / FastClock::NanosPerTick())) {
  std::lock_guard<std::mutex> lock(WatchMutex());
  outer_ = watched;
  watched = this;
  watched_end = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                         std::chrono::duration<double>(seconds));
}

RowDeadline::~RowDeadline() {
  std::lock_guard<std::mutex> lock(WatchMutex());
  // The outer row keeps its own end; the watchdog checks it from then on.
  watched = outer_;
  if (outer_ != nullptr) {
    const double left =
        outer_->Expired() ? 0
                          : FastClock::TicksToNanos(outer_->end_ticks_ - FastClock::Ticks()) * 1e-9;
    watched_end = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                           std::chrono::duration<double>(left));
  }
}

bool RowDeadline::Expired() noexcept {
  if (expired_.load(std::memory_order_relaxed)) return true;
  // Signed: a reading a few ticks behind on another CPU is not past the end.
  if (static_cast<std::int64_t>(FastClock::Ticks() - end_ticks_) < 0) return false;
  expired_.store(true, std::memory_order_relaxed);
  return true;
}

void RowDeadline::GiveUp(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(why_mutex_);
    if (!given_up_.load(std::memory_order_relaxed)) why_ = why;
    // Release: a thread that sees given_up_ reads the reason under the mutex anyway;
    // the flag is the cheap test for Finished().
    given_up_.store(true, std::memory_order_release);
  }
  expired_.store(true, std::memory_order_relaxed);
}

bool RowDeadline::TimedOut(const char* waiting) {
  GiveUp(std::string(waiting) + " until the " + FormatSeconds(seconds_) + " deadline");
  return false;
}

std::string RowDeadline::Why() const {
  std::lock_guard<std::mutex> lock(why_mutex_);
  return why_;
}

std::string RowDeadline::NotFinishedCell() const { return "not finished (" + Why() + ")"; }

void StartWatchdog(double least_grace_seconds) {
  static std::once_flag started;
  std::call_once(started, [least_grace_seconds] {
    std::thread([least_grace_seconds] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::lock_guard<std::mutex> lock(WatchMutex());
        if (watched == nullptr) continue;
        const double grace = std::max(least_grace_seconds, watched->Seconds());
        const double over = std::chrono::duration<double>(SteadyClock::now() - watched_end).count();
        if (over < grace) continue;
        const std::string message =
            "\n[sluice_bench] watchdog: the row '" + watched->Row() + "' is still running " +
            FormatSeconds(over) + " past its " + FormatSeconds(watched->Seconds()) + " deadline (" +
            (watched->Finished() ? "it never polled it" : watched->Why()) +
            "): a wait inside a call that cannot poll a deadline. The tables above are "
            "complete; the report ends here with exit status 3.\n";
        std::cout << message << std::flush;
        std::cerr << message << std::flush;
        std::fflush(nullptr);
        _exit(3);
      }
    }).detach();
  });
}

}  // namespace sluice::bench
