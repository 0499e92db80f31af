// Two consumers making one stale name again, in every interleaving of the
// steps of ShmBus::Create that another consumer can see, forced rather than
// hoped for: the first is stopped (SIGSTOP) at one step, the second runs
// until it is stopped at one of its own, is blocked on the first's lock,
// or has finished; then the first is continued or killed, then the second.
// Whatever the interleaving, at most one of two running consumers is told
// that it made or took over the name, and once neither runs a third makes
// it (a consumer killed at any step never leaves the name stuck).
// tests/spin/segment_create.pml checks the same protocol exhaustively.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sluice/ipc/shm_bus.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "child_process.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace create_race_test {
namespace {

using namespace std::chrono_literals;
using sluice::ipc::AttachError;
using sluice::ipc::detail::CreateStep;
using sluice_ipc_test::Field;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::Payload;
using sluice_ipc_test::StartPeer;
using sluice_ipc_test::UniqueName;
using sluice_test::ChildProcess;
using Consumer = sluice::ipc::ShmBus<Payload, kCapacity>;
using Header = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>::Header;

constexpr int kNoStop = -1;
constexpr std::uint64_t kKilled = ~std::uint64_t{0};
constexpr auto kNone = static_cast<std::uint64_t>(AttachError::kNone);

// What the stale segment's consumer left: killed (its segment is taken
// over) or closed (its segment is removed and made again).
enum class Stale { kKilled, kClosed };

// One field of /proc/<pid>/stat or /proc/<pid>/syscall, read now.
char StateOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

bool InFlock(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/syscall");
  long number = -1;
  file >> number;
  return number == SYS_flock;
}

// A consumer process under the test's control.
struct Rival {
  ChildProcess process;
  std::uint64_t result = kKilled;  // its AttachError, once it said it
  bool stopped = false;            // stopped at its step
  bool blocked = false;            // waiting for a lock
};

// Reads `rival`'s lines until it stopped at its step (and is seen stopped),
// finished Create, or sits in flock; false at the guard.
bool Settle(Rival& rival) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  rival.blocked = false;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string line;
    if (rival.process.ReadLine(&line, 5ms)) {
      if (line.rfind("create=", 0) == 0) {
        rival.result = Field(line, "create");
        return true;
      }
      if (line.rfind("at=", 0) == 0) {
        while (StateOf(rival.process.Pid()) != 'T') {
          if (std::chrono::steady_clock::now() > deadline) return false;
          std::this_thread::sleep_for(1ms);
        }
        rival.stopped = true;
        return true;
      }
      continue;
    }
    if (InFlock(rival.process.Pid())) {
      rival.blocked = true;
      return true;
    }
  }
  return false;
}

// Continues `rival` whenever it stops, until it has answered; false at the
// guard. A lock it waits for is held by a process that runs (or is gone).
bool Finish(Rival& rival) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (rival.result == kKilled) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (rival.stopped) {
      rival.stopped = false;
      rival.process.Signal(SIGCONT);
    }
    if (!Settle(rival)) return false;
    if (rival.blocked) std::this_thread::sleep_for(1ms);
  }
  return true;
}

void MakeStale(const std::string& name, Stale stale) {
  ASSERT_TRUE(sluice_ipc_test::LeaveKilledConsumersSegment(name));
  if (stale == Stale::kClosed) {
    sluice::ipc::Segment segment;
    ASSERT_EQ(sluice::ipc::Segment::Open(name, sizeof(Header), &segment), AttachError::kNone);
    static_cast<Header*>(segment.Base())->state.store(sluice::ipc::detail::kClosed);
  }
}

// One interleaving: `first` stopped at `first_step`, `second` run to
// `second_step`, then `first` continued (or killed), then `second`.
void Interleave(Stale stale, int first_step, int second_step, bool kill_first) {
  SCOPED_TRACE("first stops at " + std::to_string(first_step) + ", second at " +
               std::to_string(second_step) + (kill_first ? ", first killed" : ""));
  const std::string name = UniqueName();
  ASSERT_NO_FATAL_FAILURE(MakeStale(name, stale));
  Rival first;
  Rival second;
  ASSERT_TRUE(StartPeer(first.process, {"create-stop", name, std::to_string(first_step)}));
  ASSERT_TRUE(Settle(first));
  ASSERT_TRUE(StartPeer(second.process, {"create-stop", name, std::to_string(second_step)}));
  ASSERT_TRUE(Settle(second));
  if (kill_first) {
    first.process.Kill(SIGKILL);
    first.result = kKilled;
  } else if (first.stopped) {
    first.process.Signal(SIGCONT);
    first.stopped = false;
    ASSERT_TRUE(Settle(first));  // finished, or waits for the second's lock
  }
  // The second runs on (it may reach its step only now, once the first's
  // lock is free), then the first, until both have answered.
  ASSERT_TRUE(Finish(second));
  if (!kill_first) {
    ASSERT_TRUE(Finish(first));
  }
  ASSERT_NE(second.result, kKilled) << "the second consumer never answered";
  if (!kill_first) {
    ASSERT_NE(first.result, kKilled) << "the first consumer never answered";
    EXPECT_FALSE(first.result == kNone && second.result == kNone)
        << "both consumers were told they made or took over the name";
    EXPECT_TRUE(first.result == kNone || second.result == kNone)
        << "neither of two consumers of a stale name made it: " << first.result << ", "
        << second.result;
  }
  // Neither runs any more: a third consumer must make or take the name.
  first.process.Kill(SIGKILL);
  second.process.Kill(SIGKILL);
  Consumer third;
  EXPECT_EQ(third.Create(name), AttachError::kNone) << "the name was left stuck";
  third.Close();
  Consumer::RemoveName(name);
}

void EveryInterleaving(Stale stale) {
  for (int first = 0; first <= static_cast<int>(CreateStep::kLinked); ++first) {
    for (const int second :
         {kNoStop, static_cast<int>(CreateStep::kNameTaken), static_cast<int>(CreateStep::kOpened),
          static_cast<int>(CreateStep::kLocked)}) {
      for (const bool kill_first : {false, true}) {
        Interleave(stale, first, second, kill_first);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    std::printf("first consumer stopped at step %d of %d: every interleaving checked\n", first,
                static_cast<int>(CreateStep::kLinked));
    std::fflush(stdout);
  }
}

TEST(CreateRaceTest, EveryInterleavingOverAKilledConsumersSegment) {
  EveryInterleaving(Stale::kKilled);
}

TEST(CreateRaceTest, EveryInterleavingOverAClosedSegment) { EveryInterleaving(Stale::kClosed); }

// A consumer killed at any step of making a new name leaves nothing under
// it, or a whole segment: the name is never half made.
TEST(CreateRaceTest, AConsumerKilledAtAnyStepLeavesNoHalfMadeSegment) {
  for (int step = 0; step <= static_cast<int>(CreateStep::kLinked); ++step) {
    const std::string name = UniqueName();
    Rival maker;
    ASSERT_TRUE(StartPeer(maker.process, {"create-stop", name, std::to_string(step)}));
    ASSERT_TRUE(Settle(maker));
    maker.process.Kill(SIGKILL);
    sluice::ipc::Segment segment;
    const AttachError opened = sluice::ipc::Segment::Open(name, sizeof(Header), &segment);
    if (opened == AttachError::kNone) {
      EXPECT_EQ(static_cast<Header*>(segment.Base())->magic.load(), sluice::ipc::detail::kMagic)
          << "step " << step;
    } else {
      EXPECT_EQ(opened, AttachError::kNotFound) << "step " << step;
    }
    Consumer next;
    EXPECT_EQ(next.Create(name), AttachError::kNone) << "step " << step;
    next.Close();
    Consumer::RemoveName(name);
  }
}

}  // namespace
}  // namespace create_race_test
