// The wait loop on its own (detail/wait/waiting.hpp, WaitUntil): which end it
// reports (ready, stopped, timed out) and what it does with the signal on
// the way: no announcement while polling finds the condition; every
// announcement (PrepareWait) ended by exactly one CancelWait or Wait; the
// re-check after announcing (SYNC POINT (W)'s waiter half) before any park;
// a park with the ticket it was given, never longer than an hour; a
// spurious wake-up going round again. A scripted signal stands in for the
// wake signal, so each step is seen; the threaded cases with a real parker
// are in wait_loop_concurrency_test.cpp. Nothing here sleeps for long: the
// one real timeout is a nanosecond.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>

#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/extras/condition_variable_parker.hpp"

namespace sluice_test {
namespace wait_loop_test {
namespace {

using sluice::detail::WaitEnd;
using sluice::detail::WaitUntil;
using std::chrono::nanoseconds;

// A signal that records every call and runs `on_wait` inside Wait (what a
// notifier does while the waiter is parked).
struct ScriptedSignal {
  bool PrepareWait(std::uint32_t* ticket) noexcept {
    ++prepares;
    *ticket = 40 + prepares;
    return announce;
  }
  void CancelWait() noexcept { ++cancels; }
  void Wait(std::uint32_t ticket, nanoseconds timeout) noexcept {
    ++waits;
    last_ticket = ticket;
    last_timeout = timeout;
    if (on_wait) on_wait();
  }
  // Every announcement ended exactly once.
  bool Balanced() const { return !announce || prepares == cancels + waits; }

  bool announce = true;  // false: as a heavy fence that failed
  int prepares = 0;
  int cancels = 0;
  int waits = 0;
  std::uint32_t last_ticket = 0;
  nanoseconds last_timeout{0};
  std::function<void()> on_wait;
};

// A condition that becomes true on its `ready_at`-th look (0: never).
struct Countdown {
  bool operator()() { return ++looks == ready_at; }
  int ready_at = 0;
  int looks = 0;
};

TEST(WaitLoopTest, AConditionAlreadyTrueIsReadyWithoutAnnouncing) {
  ScriptedSignal signal;
  Countdown ready{1};
  EXPECT_EQ(WaitUntil(signal, 0, nanoseconds::max(), ready, [] { return false; }), WaitEnd::kReady);
  EXPECT_EQ(ready.looks, 1);
  EXPECT_EQ(signal.prepares, 0);
}

TEST(WaitLoopTest, PollingThatFindsTheConditionDoesNotAnnounce) {
  ScriptedSignal signal;
  Countdown ready{4};  // the first look and three polls
  EXPECT_EQ(WaitUntil(signal, 3, nanoseconds::max(), ready, [] { return false; }), WaitEnd::kReady);
  EXPECT_EQ(ready.looks, 4);
  EXPECT_EQ(signal.prepares, 0);
}

TEST(WaitLoopTest, TheRecheckAfterAnnouncingFindsTheConditionAndCancels) {
  ScriptedSignal signal;
  // The polls miss it; the re-check after the announcement sees it (the
  // notifier's store landed before the announcement: no wake-up is coming).
  Countdown ready{3};
  EXPECT_EQ(WaitUntil(signal, 1, nanoseconds::max(), ready, [] { return false; }), WaitEnd::kReady);
  EXPECT_EQ(signal.prepares, 1);
  EXPECT_EQ(signal.cancels, 1);
  EXPECT_EQ(signal.waits, 0) << "no park once the re-check saw it";
}

TEST(WaitLoopTest, AWokenWaitIsReadyAfterOneParkWithItsTicket) {
  ScriptedSignal signal;
  bool flag = false;
  signal.on_wait = [&] { flag = true; };  // a notify while parked
  EXPECT_EQ(WaitUntil(
                signal, 2, nanoseconds::max(), [&] { return flag; }, [] { return false; }),
            WaitEnd::kReady);
  EXPECT_EQ(signal.prepares, 1);
  EXPECT_EQ(signal.waits, 1);
  EXPECT_EQ(signal.cancels, 0);
  EXPECT_EQ(signal.last_ticket, 41u) << "parks with the ticket PrepareWait gave";
  // For ever is parked an hour at a time.
  EXPECT_EQ(signal.last_timeout, std::chrono::hours(1));
  EXPECT_TRUE(signal.Balanced());
}

TEST(WaitLoopTest, ASpuriousWakeUpGoesRoundAgain) {
  ScriptedSignal signal;
  bool flag = false;
  signal.on_wait = [&] { flag = signal.waits == 3; };  // two wake-ups for nothing
  EXPECT_EQ(WaitUntil(
                signal, 0, nanoseconds::max(), [&] { return flag; }, [] { return false; }),
            WaitEnd::kReady);
  EXPECT_EQ(signal.waits, 3);
  EXPECT_EQ(signal.prepares, 3) << "each park announced anew";
  EXPECT_EQ(signal.last_ticket, 43u);
  EXPECT_TRUE(signal.Balanced());
}

TEST(WaitLoopTest, AStopIsReportedBeforeAndAfterAnnouncing) {
  {
    // Stopped before any announcement.
    ScriptedSignal signal;
    EXPECT_EQ(WaitUntil(
                  signal, 2, nanoseconds::max(), [] { return false; }, [] { return true; }),
              WaitEnd::kStopped);
    EXPECT_EQ(signal.prepares, 0);
  }
  {
    // The stop lands between the loop's own look and the re-check: the
    // announcement is cancelled, and no park.
    ScriptedSignal signal;
    int stop_looks = 0;
    EXPECT_EQ(
        WaitUntil(
            signal, 0, nanoseconds::max(), [] { return false; }, [&] { return ++stop_looks == 2; }),
        WaitEnd::kStopped);
    EXPECT_EQ(signal.prepares, 1);
    EXPECT_EQ(signal.cancels, 1);
    EXPECT_EQ(signal.waits, 0);
  }
  {
    // Stopped while parked (Close wakes the sleeper).
    ScriptedSignal signal;
    bool stopped = false;
    signal.on_wait = [&] { stopped = true; };
    EXPECT_EQ(WaitUntil(
                  signal, 0, nanoseconds::max(), [] { return false; }, [&] { return stopped; }),
              WaitEnd::kStopped);
    EXPECT_EQ(signal.waits, 1);
    EXPECT_TRUE(signal.Balanced());
  }
}

TEST(WaitLoopTest, StopIsLookedAtBeforeAnnouncingAndReadyFirstInTheRecheck) {
  ScriptedSignal signal;
  Countdown ready{2};  // missed by the first look, seen by the re-check
  EXPECT_EQ(WaitUntil(signal, 0, nanoseconds::max(), ready, [&] { return ready.looks >= 1; }),
            WaitEnd::kStopped)
      << "the loop looks at stop before announcing";
  ScriptedSignal again;
  Countdown late{2};
  int stop_looks = 0;
  // Stop turns true only after the loop's first stop look: the re-check
  // looks at ready first.
  EXPECT_EQ(WaitUntil(again, 0, nanoseconds::max(), late, [&] { return ++stop_looks >= 2; }),
            WaitEnd::kReady);
  EXPECT_EQ(again.cancels, 1);
}

TEST(WaitLoopTest, AnExpiredTimeoutEndsTheWaitAndCancelsItsAnnouncement) {
  ScriptedSignal signal;
  EXPECT_EQ(WaitUntil(
                signal, 0, nanoseconds(0), [] { return false; }, [] { return false; }),
            WaitEnd::kTimedOut);
  EXPECT_EQ(signal.prepares, 1);
  EXPECT_EQ(signal.cancels, 1);
  EXPECT_EQ(signal.waits, 0);
}

TEST(WaitLoopTest, AShortTimeoutParksForWhatIsLeftThenTimesOut) {
  ScriptedSignal signal;
  const nanoseconds timeout = std::chrono::milliseconds(5);
  // Each park returns at once for nothing; the loop goes round until its
  // deadline has passed.
  const WaitEnd end = WaitUntil(
      signal, 0, timeout, [] { return false; }, [] { return false; });
  EXPECT_EQ(end, WaitEnd::kTimedOut);
  EXPECT_GE(signal.waits, 1);
  EXPECT_LE(signal.last_timeout, timeout) << "never parks past the deadline";
  EXPECT_TRUE(signal.Balanced());
}

TEST(WaitLoopTest, WithoutAnAnnouncementItPollsUntilReadyOrTheDeadline) {
  ScriptedSignal signal;
  signal.announce = false;  // a heavy fence that failed: never park
  Countdown ready{10};
  EXPECT_EQ(WaitUntil(signal, 0, nanoseconds::max(), ready, [] { return false; }), WaitEnd::kReady);
  EXPECT_EQ(signal.waits, 0);
  EXPECT_EQ(signal.cancels, 0);
  EXPECT_EQ(ready.looks, 10);
  sluice::detail::NoSignal none;
  EXPECT_EQ(WaitUntil(
                none, 0, nanoseconds(1), [] { return false; }, [] { return false; }),
            WaitEnd::kTimedOut);
}

TEST(WaitLoopTest, ARealSignalTimesOutAndLeavesNoWaiterCounted) {
  sluice::detail::WakeSignal<sluice::ConditionVariableParker> signal;
  EXPECT_EQ(WaitUntil(
                signal, 4, nanoseconds(1), [] { return false; }, [] { return false; }),
            WaitEnd::kTimedOut);
  EXPECT_EQ(signal.Waiters(), 0u);
  EXPECT_EQ(WaitUntil(
                signal, 4, nanoseconds(1), [] { return true; }, [] { return false; }),
            WaitEnd::kReady);
  EXPECT_EQ(signal.Waiters(), 0u);
}

}  // namespace
}  // namespace wait_loop_test
}  // namespace sluice_test
