// A WaitSet that lists a ShmBus beside in-process buses of the set
// (sluice/wait_set.hpp, sluice/ipc/shm_bus.hpp): one consumer thread
// sleeps on the segment's futex and the set's own at once, and a publish
// from a producer process, or one in process, wakes it; a producer killed
// between its publish and its wake-up call costs the set one slice; without
// futex_waitv the set still sees the producer process's message. A lost
// wake-up shows as in sleeping_test.cpp: every wait that only a wake-up can
// end lasts an hour, with the check interval an hour too, and a watchdog
// wakes both words the set parks on by hand after 20 s and records that it
// had to. Nothing asserts
// a time.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <sluice/extras/futex_parker.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <sluice/sluice.hpp>
#include <sluice/wait_set.hpp>
#include <string>
#include <thread>
#include <variant>

#include "bus_view.hpp"
#include "child_process.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"
#include "sleep_watch.hpp"

namespace wait_set_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::WaitSetOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::CheckingEvery;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kForever;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::LastStop;
using sluice_ipc_test::NeededRescueBy;
using sluice_ipc_test::Payload;
using sluice_ipc_test::StartPeer;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_ipc_test::WaitForSleeper;
using sluice_test::ChildProcess;
using ShmBus = sluice::ipc::ShmBus<Payload, kCapacity>;
using ShmProducer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;

// An in-process bus of the set.
struct Command {
  std::uint32_t code;
};
struct SetTraits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitInSet<sluice::FutexParker>;
};
using Set = sluice::WaitSet<sluice::FutexParker>;
using LocalBus =
    sluice::AsyncBus<std::variant<Command>, 64, sluice::ProducerModel::kMulti, SetTraits>;

class ShmWaitSetTest : public ::testing::Test {
 protected:
  void Open(std::chrono::nanoseconds check_interval) {
    name_ = UniqueName();
    ASSERT_EQ(shm_.Create(name_, CheckingEvery(check_interval)), AttachError::kNone);
    ASSERT_EQ(view_.Open(name_), AttachError::kNone);
  }
  Layout::Signal& SegmentWake() { return view_.Wake()->consumer_wake; }

  // Wakes both words the set parks on: the segment's, and its own (by a
  // publish on the in-process bus).
  void Rescue() {
    SegmentWake().Wake();
    (void)local_.Publish(Command{0});
  }
  // The set waits on both buses until a wake-up ends the wait: whether it
  // had to be rescued.
  bool WaitNeedingRescue(sluice::WaitSetResult* result) {
    return NeededRescueBy([this] { Rescue(); },
                          [&] { *result = set_.Wait(kForever, local_, shm_); });
  }

  // The set and the local bus first: the bus must not outlive its set.
  Set set_;
  LocalBus local_{set_};
  ShmBus shm_;
  std::string name_;
  sluice_ipc_test::BusView<Layout> view_;
};

// A producer process publishes once the set sleeps (announced on the
// segment's signal): its wake-up ends the set's wait, and the message is
// the shared bus's (index 1).
TEST_F(ShmWaitSetTest, AProducerProcessWakesASetSleepingOnBothBuses) {
  Open(1h);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"publish-when-asleep", name_}));
  sluice::WaitSetResult result;
  EXPECT_FALSE(WaitNeedingRescue(&result)) << "the producer process's publish did not wake the set";
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 1u);
  std::uint64_t seq = 0;
  EXPECT_EQ(shm_.ProcessBatchWith(LastStop{&seq}), 1u);
  EXPECT_EQ(seq, 1u);
  EXPECT_EQ(set_.Waiters(), 0u);
  EXPECT_EQ(SegmentWake().Waiters(), 0u);
  EXPECT_EQ(peer.Wait(kGuard), 0);
}

// A publish on the in-process bus wakes the same sleep (the set's own word
// is among those it parks on).
TEST_F(ShmWaitSetTest, AnInProcessPublishWakesASetThatAlsoSleepsOnASegment) {
  Open(1h);
  std::thread publisher([&] {
    if (WaitForSleeper(set_)) (void)local_.Publish(Command{7});
  });
  sluice::WaitSetResult result;
  const bool rescued = WaitNeedingRescue(&result);
  publisher.join();
  EXPECT_FALSE(rescued) << "the in-process publish did not wake the set";
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 0u);
  EXPECT_EQ(local_.ProcessBatch(), 1u);
}

// The producer process is killed between its publish and its wake-up
// call: the set's sleep ends at the end of its slice (the shared bus's
// check interval, 20 ms), with the message there.
TEST_F(ShmWaitSetTest, AProducerKilledBeforeItsWakeUpCostsTheSetOneSlice) {
  Open(20ms);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"publish-unwoken", name_}));
  std::uint64_t seq = 0;
  std::uint32_t taken = 0;
  EXPECT_FALSE(NeededRescueBy([this] { Rescue(); },
                              [&] {
                                // A check may fall due first (the interval is short): ready,
                                // nothing taken; the message comes in a later round.
                                const auto deadline = std::chrono::steady_clock::now() + kGuard;
                                while (taken == 0 && std::chrono::steady_clock::now() < deadline) {
                                  if (set_.Wait(kForever, local_, shm_))
                                    taken = shm_.ProcessBatchWith(LastStop{&seq});
                                }
                              }))
      << "the set slept past its slice with a message queued";
  EXPECT_EQ(taken, 1u);
  EXPECT_EQ(seq, 1u);
  const int status = peer.Wait(kGuard);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

// Where the kernel lacks futex_waitv (before Linux 5.16), the set parks on
// its own word in 1 ms slices: the producer process's message is still
// found, with no wake-up by hand.
TEST_F(ShmWaitSetTest, WithoutFutexWaitvTheSetStillSeesAProducerProcess) {
  Open(1h);
  auto& missing = sluice::detail::FutexWaitvMissing();
  const bool was_missing = missing.load();
  missing.store(true);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"publish-when-asleep", name_}));
  sluice::WaitSetResult result;
  EXPECT_FALSE(WaitNeedingRescue(&result));
  missing.store(was_missing);
  EXPECT_EQ(result.outcome, WaitSetOutcome::kReady);
  EXPECT_EQ(result.index, 1u);
  EXPECT_EQ(shm_.ProcessBatch(), 1u);
  EXPECT_EQ(peer.Wait(kGuard), 0);
}

// ProcessBatchWait dispatches a batch from each bus with a message, in
// argument order.
TEST_F(ShmWaitSetTest, ProcessBatchWaitDispatchesFromBothBuses) {
  Open(1h);
  ShmProducer producer;
  ASSERT_EQ(producer.Attach(name_), AttachError::kNone);
  ASSERT_TRUE(producer.PublishWithPriority(Stop{0, 4}, 7, MessagePriority::HIGH));
  ASSERT_TRUE(local_.Publish(Command{1}));
  std::uint64_t seq = 0;
  std::uint32_t commands = 0;
  (void)shm_.Subscribe<Stop>([&](const Stop& stop) { seq = stop.seq; });
  (void)local_.Subscribe<Command>([&](const Command&) { ++commands; });
  // Both are queued: the wait ends at once (kGuard bounds a broken one).
  EXPECT_EQ(set_.ProcessBatchWait(kGuard, 8, local_, shm_), 2u);
  EXPECT_EQ(seq, 4u);
  EXPECT_EQ(commands, 1u);
}

// A closed shared bus is drained (Close drops what was queued): with the
// in-process bus closed and drained too, the wait ends at once; with it
// open, the set waits on it alone, until its timeout.
TEST_F(ShmWaitSetTest, AClosedSharedBusCountsAsDrained) {
  Open(1h);
  shm_.Close();
  EXPECT_EQ(set_.Wait(1ms, local_, shm_).outcome, WaitSetOutcome::kTimedOut);
  local_.Close();
  EXPECT_EQ(set_.Wait(kGuard, local_, shm_).outcome, WaitSetOutcome::kAllDrained);
}

// From a callback of the shared bus the set does not wait (its batch is
// running on this thread).
TEST_F(ShmWaitSetTest, InsideACallbackOfTheSharedBusTheSetDoesNotWait) {
  Open(1h);
  ShmProducer producer;
  ASSERT_EQ(producer.Attach(name_), AttachError::kNone);
  ASSERT_TRUE(producer.PublishWithPriority(Stop{0, 1}, 7, MessagePriority::HIGH));
  WaitSetOutcome inside = WaitSetOutcome::kReady;
  (void)shm_.Subscribe<Stop>(
      [&](const Stop&) { inside = set_.Wait(kGuard, local_, shm_).outcome; });
  EXPECT_EQ(shm_.ProcessBatch(), 1u);
  EXPECT_EQ(inside, WaitSetOutcome::kInsideCallback);
}

// A producer check due makes the shared bus ready, so that the set's
// thread runs it: a producer process killed after its publish is found
// and its lane handed back, though nothing more is published. (Without
// the check the set would sleep through every 1 s wait below: nothing
// wakes it, and a lane is found gone only by a check.)
TEST_F(ShmWaitSetTest, ASetWaitingOnASharedBusLetsItsProducerChecksRun) {
  Open(10ms);
  std::uint32_t exits = 0;
  shm_.OnProducerExit([&](const sluice::ipc::ProducerExit&) { ++exits; });
  std::uint64_t seq = 0;
  (void)shm_.Subscribe<Stop>([&](const Stop& stop) { seq = stop.seq; });
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"publish-unwoken", name_}));
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (exits == 0 && std::chrono::steady_clock::now() < deadline) {
    (void)set_.ProcessBatchWait(1s, 8, local_, shm_);
  }
  EXPECT_EQ(seq, 1u);
  EXPECT_EQ(exits, 1u);
  const int status = peer.Wait(kGuard);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

// A check interval of 0 (a check on every batch that takes nothing) is
// due at most once a slice (1 ms) for the set, as between the bus's own
// sleeps: the set still goes to sleep between checks (it announces itself
// on its signal), rather than finding the bus ready on every look and
// spinning.
TEST_F(ShmWaitSetTest, AZeroCheckIntervalStillLetsTheSetSleep) {
  Open(0ms);
  std::atomic<bool> slept{false};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load() && !slept.load()) {
      if (set_.Waiters() != 0) slept = true;
      std::this_thread::sleep_for(20us);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (!slept.load() && std::chrono::steady_clock::now() < deadline) {
    (void)set_.ProcessBatchWait(100ms, 8, local_, shm_);
  }
  done = true;
  watcher.join();
  EXPECT_TRUE(slept.load()) << "the set never went to sleep: the bus was ready on every look";
}

}  // namespace
}  // namespace wait_set_test
