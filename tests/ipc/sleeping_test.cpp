// Sleeping across processes: the consumer asleep in ProcessBatchWait on a
// futex in the segment, woken by a producer process's publish; a producer
// process asleep in PublishBlocking, woken by the batch that made room in
// its lane, or by Close; both asleep by turns for 2,000 messages; and the
// two deaths a wake-up cannot cover: a producer killed between its publish
// and its wake-up call, a consumer killed while a producer waits for room.
//
// How a lost wake-up shows: the tests that check one wait for an hour and
// set the check interval to an hour, so that only the wake-up can end the
// sleep. A watchdog that sees no progress for 20 s records the hang and
// then wakes the sleeper by hand, so the test fails instead of hanging. It
// only detects a hang: nothing asserts a time. Before the waker acts, the
// test (or peer) waits until the sleeper has announced its sleep, and 50 ms
// more, so that the sleeper is most likely parked and needs the wake-up
// (the test passes either way when the bus is right).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <type_traits>

#include "bus_view.hpp"
#include "child_process.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"
#include "sleep_watch.hpp"

namespace sleeping_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::CheckingEvery;
using sluice_ipc_test::Field;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kForever;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::kHangGuard;
using sluice_ipc_test::LastStop;
using sluice_ipc_test::NeededRescue;
using sluice_ipc_test::Payload;
using sluice_ipc_test::StartPeer;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_ipc_test::WaitForSleeper;
using sluice_test::ChildProcess;
using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;

// A consumer on a segment of its own, and a view of that segment to watch
// its wake signals from the test.
class ShmSleepingTest : public ::testing::Test {
 protected:
  void Open(std::chrono::nanoseconds check_interval) {
    name_ = UniqueName();
    ASSERT_EQ(bus_.Create(name_, CheckingEvery(check_interval)), AttachError::kNone);
    ASSERT_EQ(view_.Open(name_), AttachError::kNone);
  }
  Layout::Header& Header() { return *Layout::HeaderOf(view_.Base()); }
  Layout::RoomSignal& Room() { return view_.Control(0).room; }
  Layout::Signal& ConsumerWake() { return view_.Wake()->consumer_wake; }

  // Starts the peer in `mode` and sleeps in ProcessBatchWithWait until it
  // publishes; whether a wake-up (or a slice) ended the sleep in time, with
  // the one message taken.
  void ExpectWokenBy(const std::string& mode, ChildProcess* peer) {
    ASSERT_TRUE(StartPeer(*peer, {mode, name_}));
    std::uint64_t seq = 0;
    std::uint32_t taken = 0;
    EXPECT_FALSE(NeededRescue(ConsumerWake(), [&] {
      taken = bus_.ProcessBatchWithWait(LastStop{&seq}, kForever);
    })) << "the consumer slept on with a message queued";
    EXPECT_EQ(taken, 1u);
    EXPECT_EQ(seq, 1u);
    std::string line;
    EXPECT_TRUE(peer->WaitForLine(mode == "publish-unwoken" ? "published-unwoken" : "published",
                                  &line, kGuard))
        << line;
  }

  std::string name_;
  Bus bus_;
  sluice_ipc_test::BusView<Layout> view_;
};

TEST_F(ShmSleepingTest, AProducerProcessWakesTheSleepingConsumer) {
  Open(1h);
  ChildProcess peer;
  ExpectWokenBy("publish-when-asleep", &peer);
  EXPECT_EQ(peer.Wait(kGuard), 0);
}

// The producer is killed after its publish, before its wake-up call: the
// consumer's sleep ends at the end of its slice (the check interval, here
// 20 ms), and the message is dispatched.
TEST_F(ShmSleepingTest, AProducerKilledBeforeItsWakeUpCostsTheConsumerOneSlice) {
  Open(20ms);
  ChildProcess peer;
  ExpectWokenBy("publish-unwoken", &peer);
  const int status = peer.Wait(kGuard);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

// A producer process fills its lane, then waits in PublishBlocking; the
// consumer takes one message and the batch's wake-up lets it in.
TEST_F(ShmSleepingTest, ABatchThatMakesRoomWakesAProducerProcessWaitingForIt) {
  Open(1h);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"block", name_}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("full", &line, kGuard)) << line;
  const std::uint64_t full = Field(line, "count");
  EXPECT_EQ(full, sluice::FillLimit(60, kCapacity));
  ASSERT_TRUE(WaitForSleeper(Room()));
  EXPECT_EQ(bus_.ProcessBatch(1), 1u);
  EXPECT_FALSE(NeededRescue(Room(), [&] { ASSERT_TRUE(peer.WaitForLine("blocked", &line, 1h)); }))
      << "the batch did not wake the producer";
  EXPECT_EQ(Field(line, "outcome"), static_cast<std::uint64_t>(PublishOutcome::kAdmitted)) << line;
  EXPECT_EQ(peer.Wait(kGuard), 0);
  std::uint64_t last = 0;
  EXPECT_EQ(bus_.ProcessBatchWith(LastStop{&last}), full);
  EXPECT_EQ(last, 999u);
}

TEST_F(ShmSleepingTest, CloseWakesAProducerWaitingForRoom) {
  Open(1h);
  Producer producer;
  ASSERT_EQ(producer.Attach(name_), AttachError::kNone);
  while (producer.PublishWithPriority(Stop{0, 0}, 7, MessagePriority::LOW)) {
  }
  std::atomic<int> outcome{-1};
  std::thread waiter([&] {
    outcome = static_cast<int>(
        producer.PublishBlocking(Stop{0, 1}, 7, MessagePriority::LOW, kForever).Outcome());
  });
  ASSERT_TRUE(WaitForSleeper(Room()));
  bus_.Close();
  EXPECT_FALSE(NeededRescue(Room(), [&] { waiter.join(); })) << "Close did not wake the producer";
  EXPECT_EQ(outcome.load(), static_cast<int>(PublishOutcome::kClosed));
}

// The consumer process is killed while this producer waits for room: the
// wait ends at the end of its slice (the consumer's check interval) with
// kClosed.
TEST_F(ShmSleepingTest, AProducerWaitingForRoomSeesTheConsumerDie) {
  const std::string name = UniqueName();
  ChildProcess consumer;
  ASSERT_TRUE(StartPeer(consumer, {"hold", name}));
  std::string line;
  ASSERT_TRUE(consumer.WaitForLine("ready", &line, kGuard));
  sluice_ipc_test::BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  while (producer.PublishWithPriority(Stop{0, 0}, 7, MessagePriority::LOW)) {
  }
  Layout::RoomSignal& room = view.Control(0).room;
  std::thread killer([&] {
    if (WaitForSleeper(room)) consumer.Kill(SIGKILL);
  });
  sluice::PublishResult result;
  const bool rescued = NeededRescue(room, [&] {
    result = producer.PublishBlocking(Stop{0, 1}, 7, MessagePriority::LOW, kHangGuard * 2);
  });
  killer.join();
  EXPECT_FALSE(rescued) << "the producer slept past its slice";
  EXPECT_EQ(result.Outcome(), PublishOutcome::kClosed);
  Bus::RemoveName(name);
}

// Both sides asleep by turns: a producer process publishes 2,000 messages
// in bursts of 50 with PublishBlocking (its lane admits 38 at LOW, so each
// burst waits for room), pausing 1 ms between bursts, while the consumer
// takes one message per ProcessBatchWait (so it runs dry and sleeps
// between bursts). Every wait lasts an hour unless woken; a lost wake-up on
// either side stops all progress, which the watchdog records.
TEST_F(ShmSleepingTest, ConsumerAndProducerSleepingByTurnsLoseNoWakeUp) {
  constexpr std::uint64_t kMessages = 2000;
  Open(1h);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"bursts", name_, std::to_string(kMessages), "50"}));
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> done{false};
  std::atomic<bool> hung{false};
  std::thread watchdog([&] {
    std::uint64_t seen = 0;
    auto last_progress = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(10ms);
      if (received.load() != seen) {
        seen = received.load();
        last_progress = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_progress > kHangGuard) {
        hung = true;  // then wake both sides by hand
        ConsumerWake().Wake();
        Room().Wake();
      }
    }
  });
  std::uint64_t next = 0;
  std::uint64_t out_of_order = 0;
  std::uint64_t sleeps = 0;
  while (received.load() < kMessages) {
    std::uint64_t seq = ~std::uint64_t{0};
    if (bus_.QueueDepth() == 0) ++sleeps;  // most likely a sleep: the producer pauses
    if (bus_.ProcessBatchWithWait(LastStop{&seq}, kForever, 1) == 1) {
      out_of_order += seq == next ? 0 : 1;
      next = seq + 1;
      received.fetch_add(1);
    }
  }
  std::string line;
  EXPECT_TRUE(peer.WaitForLine("published=", &line, kGuard)) << line;
  done = true;
  watchdog.join();
  EXPECT_FALSE(hung.load()) << "a wake-up was lost: no progress for 20 s";
  EXPECT_EQ(Field(line, "timeouts"), 0u) << line;
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(peer.Wait(kGuard), 0);
  std::printf("[ ipc] %llu messages, consumer found the queue empty %llu times\n",
              static_cast<unsigned long long>(kMessages), static_cast<unsigned long long>(sleeps));
}

// The state letter of /proc/<pid>/stat ('S': asleep in the kernel).
char ProcessState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* file = std::fopen(path, "r");
  if (file == nullptr) return '?';
  char text[512] = {};
  const std::size_t got = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  const char* end = got > 0 ? std::strrchr(text, ')') : nullptr;
  return end != nullptr && end[1] == ' ' ? end[2] : '?';
}

// A producer process that membarrier fails in (a sandbox) still sleeps
// while it waits for room (on a futex, not in a loop of yields), and the
// batch that makes room wakes it.
TEST_F(ShmSleepingTest, AProducerThatCannotUseMembarrierStillSleepsForRoom) {
  Open(1h);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"block-sandboxed", name_}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("full", &line, kGuard)) << line;
  ASSERT_TRUE(WaitForSleeper(Room()));
  int asleep = 0;
  for (int sample = 0; sample < 20; ++sample) {
    asleep += ProcessState(peer.Pid()) == 'S' ? 1 : 0;
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(asleep, 20) << "the producer was running, not asleep, in " << 20 - asleep
                        << " of 20 looks";
  EXPECT_EQ(bus_.ProcessBatch(1), 1u);
  EXPECT_FALSE(NeededRescue(Room(), [&] { ASSERT_TRUE(peer.WaitForLine("blocked", &line, 1h)); }));
  EXPECT_EQ(Field(line, "outcome"), static_cast<std::uint64_t>(PublishOutcome::kAdmitted)) << line;
}

// A consumer that cannot use membarrier (a sandbox, from before Create)
// sleeps with the full fence; a producer that writes 1 into every byte of
// the wake page's consumer signal it can reach (the byte that says whether
// the heavy fence is in use among them) does not turn its sleep into
// polling: the consumer keeps its own record, taken at Create. Its idle
// 300 ms wait sleeps in slices of the check interval (10 ms), a few tens of
// wake-ups; polling (before: membarrier refused, then 50 us sleeps) is
// thousands, and at least 300 even if each 50 us sleep took a millisecond.
TEST_F(ShmSleepingTest, AProducerWritingTheWakePageCannotMakeASandboxedConsumerPoll) {
  ChildProcess consumer;
  ASSERT_TRUE(StartPeer(consumer, {"wait-sandboxed-scribbled", UniqueName()}));
  std::string line;
  ASSERT_TRUE(consumer.WaitForLine("asymmetric", &line, kGuard)) << line;
  EXPECT_EQ(Field(line, "asymmetric"), 1u) << "the byte was reached";
  EXPECT_LT(Field(line, "switches"), 150u) << line;
}

// The same after a takeover: the killed consumer had membarrier (its byte
// says the heavy fence is in use, and a producer writes 1 there too); the
// sandboxed consumer that takes over decides by its own registration, not
// by the byte it finds, and sleeps. (Before, it took the byte as its
// record and polled.)
TEST_F(ShmSleepingTest, ASandboxedConsumerTakingOverDecidesItsOwnFence) {
  const std::string name = UniqueName();
  ChildProcess first;
  std::string line;
  ASSERT_TRUE(StartPeer(first, {"hold", name}));
  ASSERT_TRUE(first.WaitForLine("ready", &line, kGuard)) << line;
  first.Kill(SIGKILL);
  ChildProcess consumer;
  ASSERT_TRUE(StartPeer(consumer, {"wait-sandboxed-scribbled", name}));
  ASSERT_TRUE(consumer.WaitForLine("asymmetric", &line, kGuard)) << line;
  EXPECT_EQ(Field(line, "took_over"), 1u) << line;
  EXPECT_EQ(Field(line, "asymmetric"), 1u) << "the byte was reached";
  EXPECT_LT(Field(line, "switches"), 150u) << line;
}

// The consumer's waiter count set to any value (here one short of a wrap,
// as a writer could leave it): the consumer counts itself again before
// each sleep, so a publish still wakes it.
TEST_F(ShmSleepingTest, AWaiterCountWrittenWrongDoesNotLoseTheWakeUp) {
  Open(1h);
  const std::uint32_t wrong = 0xFFFFFFFFu;
  static_assert(sizeof(ConsumerWake()) >= sizeof(wrong));
  std::memcpy(static_cast<void*>(&ConsumerWake()), &wrong, sizeof(wrong));
  ASSERT_EQ(ConsumerWake().Waiters(), wrong);  // the count is the signal's first word
  ChildProcess peer;
  ExpectWokenBy("publish-when-asleep", &peer);
  EXPECT_EQ(peer.Wait(kGuard), 0);
}

// PublishBlocking's other ends: admitted at once when there is room, a
// timeout counted once in `dropped`, a priority out of range rejected.
TEST_F(ShmSleepingTest, PublishBlockingAdmitsTimesOutOrRejects) {
  Open(10ms);
  Producer producer;
  ASSERT_EQ(producer.Attach(name_), AttachError::kNone);
  EXPECT_TRUE(producer.PublishBlocking(Stop{0, 0}, 7, MessagePriority::LOW, 0s));
  while (producer.PublishWithPriority(Stop{0, 0}, 7, MessagePriority::LOW)) {
  }
  const auto dropped = bus_.GetStatistics().dropped[0];
  EXPECT_EQ(producer.PublishBlocking(Stop{0, 1}, 7, MessagePriority::LOW, 5ms).Outcome(),
            PublishOutcome::kTimedOut);
  EXPECT_EQ(bus_.GetStatistics().dropped[0], dropped + 1);
  EXPECT_EQ(producer.PublishBlocking(Stop{0, 1}, 7, static_cast<MessagePriority>(7), 5ms).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(bus_.ProcessBatchWait(0s), sluice::FillLimit(60, kCapacity));
  EXPECT_EQ(bus_.ProcessBatchWait(1ms), 0u);  // empty: the timeout passes
}

}  // namespace
}  // namespace sleeping_test
