// Deadlines for the report's rows: every wait in a row polls its row's
// deadline, so a row that cannot make progress (a queue that refuses for
// ever, a consumer that never sees its last message) ends at the deadline
// instead of hanging; it is reported as not finished, with why, and the
// report goes on. A watchdog ends the process if a row outlives its deadline
// by a wide margin anyway (a wait inside a call that cannot poll, such as a
// peer's blocking pop), so no run of the binary can hang.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace sluice::bench {

// Failed attempts between two readings of the clock in RetryUntil and
// WaitUntil, and pushes between two readings in a producer's own loop: the
// clock costs 10-30 ns, so a retry loop or a loop of successful pushes pays
// well under a hundredth of a nanosecond per iteration for its deadline.
inline constexpr std::uint32_t kDeadlinePollEvery = 1024;

class RowDeadline {
 public:
  // Starts now: the row is given up `seconds` from now. The watchdog
  // watches the newest live deadline.
  RowDeadline(std::string row, double seconds);
  ~RowDeadline();
  RowDeadline(const RowDeadline&) = delete;
  RowDeadline& operator=(const RowDeadline&) = delete;

  // True once the deadline has passed or the row was given up. Latched, so
  // every thread agrees once one has seen it. Reads the clock unless
  // latched: poll it on waits, not per message. Any thread.
  bool Expired() noexcept;
  // True when `iteration` is a multiple of kDeadlinePollEvery and the row
  // has expired: for loops that never wait (every push succeeds) but could
  // still run past their time.
  bool ExpiredAt(std::uint64_t iteration) noexcept {
    return iteration % kDeadlinePollEvery == 0 && Expired();
  }
  // Gives the row up; the first reason is the one reported. Any thread.
  void GiveUp(const std::string& why);
  // Gives the row up with `waiting` (who waited for what) as the reason,
  // if it is not given up already, and returns false: for wait loops.
  bool TimedOut(const char* waiting);

  bool Finished() const noexcept { return !given_up_.load(std::memory_order_acquire); }
  std::string Why() const;
  const std::string& Row() const noexcept { return row_; }
  double Seconds() const noexcept { return seconds_; }
  // "not finished (<why>)": the cell a table prints for the row's figure.
  std::string NotFinishedCell() const;

 private:
  std::string row_;
  double seconds_;
  std::uint64_t end_ticks_;
  std::atomic<bool> expired_{false};
  std::atomic<bool> given_up_{false};
  mutable std::mutex why_mutex_;
  std::string why_;
  RowDeadline* outer_;  // the deadline the watchdog watched before this one
};

// Calls `attempt()` until it returns true (then true), or until `deadline`
// expires (then false, with the row given up as "<waiting> until the
// deadline"). Reads the clock once per kDeadlinePollEvery failed attempts.
template <typename Attempt>
bool RetryUntil(RowDeadline& deadline, const char* waiting, Attempt&& attempt) {
  if (attempt()) return true;
  for (std::uint32_t failed = 1;; ++failed) {
    if (attempt()) return true;
    if (failed % kDeadlinePollEvery == 0 && deadline.Expired()) return deadline.TimedOut(waiting);
  }
}

// Spins until `done()` (then true) or until `deadline` expires (false).
template <typename Done>
bool WaitUntil(RowDeadline& deadline, const char* waiting, Done&& done) {
  return RetryUntil(deadline, waiting, done);
}

// Starts the watchdog thread (once; later calls do nothing). When the
// current row outlives its deadline by its grace (the row's own deadline, at
// least `least_grace_seconds`; a row that polls its deadline ends within
// milliseconds of it, joins and shutdowns included), it prints which row and
// why to stdout and stderr and ends the process with exit status 3.
inline constexpr double kDefaultWatchdogGraceSeconds = 10;
void StartWatchdog(double least_grace_seconds = kDefaultWatchdogGraceSeconds);

}  // namespace sluice::bench
