// A shared-memory bus's lane events (sluice/observer.hpp, OnLaneEvent)
// through the tracer (sluice/trace/tracing_observer.hpp): each producer's
// lane is attached before any of its messages is taken, left (detached, or
// killed mid-publish in another process), and handed back after its last
// message, with the producer's pid, whether it was killed and the claims
// it never published, in the trace the consumer's observer writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"
#include "sluice/observer_tee.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace lane_events_test {
namespace {

using sluice::MessagePriority;
using sluice::ipc::AttachError;
using sluice::ipc::ProducerExit;
using sluice::trace::TraceEvent;
using sluice::trace::TraceEventKind;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_test::ChildProcess;

using Ring = sluice::trace::TraceRing<4096>;
using Tracer = sluice::trace::TracingObserver<Ring>;

// An observer of lane events alone, beside the tracer (ObserverTee passes
// OnLaneEvent to the one that has it). Locked: kAttached comes on the
// hand-out thread, the others on the consumer's.
// With `hold_hand_back`, a kHandedBack waits (at most the guard) until
// `release`, saying `in_hand_back`: the consumer preempted right there.
struct LaneLog : sluice::NoObserver {
  void OnLaneEvent(const sluice::LaneEvent& event) noexcept {
    {
      const std::lock_guard<std::mutex> hold(lock);
      events.push_back(event);
    }
    if (event.kind == sluice::LaneEventKind::kHandedBack && hold_hand_back.load()) {
      in_hand_back.store(true);
      const auto deadline = std::chrono::steady_clock::now() + kGuard;
      while (!release.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
  }
  std::atomic<bool> hold_hand_back{false};
  std::atomic<bool> in_hand_back{false};
  std::atomic<bool> release{false};
  std::vector<sluice::LaneEvent> Events() const {
    const std::lock_guard<std::mutex> hold(lock);
    return events;
  }
  mutable std::mutex lock;
  std::vector<sluice::LaneEvent> events;
};
struct TracedTraits : sluice::ipc::ShmBusTraits {
  using Observer = sluice::ObserverTee<Tracer, LaneLog>;
};
using Bus = sluice::ipc::ShmBus<Payload, kCapacity, TracedTraits>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity, TracedTraits>;

TEST(ShmLaneEventsTest, EachLaneIsAttachedLeftAndHandedBackInTheTrace) {
  const std::string name = UniqueName();
  Ring ring;
  Bus bus;
  ASSERT_TRUE(bus.GetObserver().First().Attach(&ring, /*bus_id=*/7));
  std::vector<ProducerExit> exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.push_back(exit); });
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = std::chrono::hours(1);  // looked for by CheckProducers only
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);

  // Lane 1: this process, two messages, then a detach.
  Producer mine;
  ASSERT_EQ(mine.Attach(name), AttachError::kNone);
  ASSERT_EQ(mine.Lane(), 1);
  ASSERT_TRUE(mine.PublishWithPriority(Stop{0, 100}, 1, MessagePriority::LOW));
  ASSERT_TRUE(mine.PublishWithPriority(Stop{0, 101}, 1, MessagePriority::HIGH));
  // Lane 2: a peer that publishes, half-writes a HIGH message and is
  // killed (one claim never published).
  ChildProcess peer;
  ASSERT_TRUE(sluice_ipc_test::StartPeer(peer, {"die", name, "half-written"}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("dying", &line, kGuard)) << line;
  ASSERT_EQ(sluice_ipc_test::Field(line, "lane"), 2u) << line;
  const pid_t peer_pid = peer.Pid();
  const int status = peer.Wait(kGuard);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  mine.Detach();

  bus.CheckProducers();
  ASSERT_TRUE(sluice_ipc_test::DispatchUntil(bus, [&] { return exits.size() == 2; }));

  std::vector<TraceEvent> events;
  while (ring.Drain([&events](const TraceEvent& event) { events.push_back(event); }) != 0) {
  }
  ASSERT_EQ(ring.Lost(), 0u);
  // Per lane: where each lane event and each message taken stands in the
  // trace.
  struct Seen {
    std::vector<std::size_t> attached, exited, handed_back, taken;
    std::vector<TraceEvent> lane_events;
  };
  std::map<std::uint16_t, Seen> lanes;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    EXPECT_EQ(e.bus_id, 7);
    Seen& seen = lanes[e.lane];
    switch (e.kind) {
      case TraceEventKind::kLaneAttached:
        seen.attached.push_back(i);
        seen.lane_events.push_back(e);
        break;
      case TraceEventKind::kLaneExited:
        seen.exited.push_back(i);
        seen.lane_events.push_back(e);
        break;
      case TraceEventKind::kLaneHandedBack:
        seen.handed_back.push_back(i);
        seen.lane_events.push_back(e);
        break;
      case TraceEventKind::kTaken:
        seen.taken.push_back(i);
        break;
      default:
        break;
    }
  }
  const struct {
    std::uint16_t lane;
    std::uint32_t pid;
    std::uint8_t killed;
    std::uint32_t lost;
    std::size_t messages;
  } want[] = {{1, static_cast<std::uint32_t>(::getpid()), 0, 0, 2},
              {2, static_cast<std::uint32_t>(peer_pid), 1, 1, 8}};
  for (const auto& lane : want) {
    SCOPED_TRACE("lane " + std::to_string(lane.lane));
    const Seen& seen = lanes[lane.lane];
    ASSERT_EQ(seen.attached.size(), 1u);
    ASSERT_EQ(seen.exited.size(), 1u);
    ASSERT_EQ(seen.handed_back.size(), 1u);
    EXPECT_EQ(seen.taken.size(), lane.messages);
    EXPECT_LT(seen.attached[0], seen.exited[0]);
    EXPECT_LT(seen.exited[0], seen.handed_back[0]);
    for (const std::size_t at : seen.taken) {
      EXPECT_LT(seen.attached[0], at) << "a message taken before its lane was attached";
      EXPECT_LT(at, seen.handed_back[0]) << "a message taken after its lane was handed back";
    }
    for (const TraceEvent& e : seen.lane_events) {
      EXPECT_EQ(e.sender_id, lane.pid);
      EXPECT_EQ(e.detail, e.kind == TraceEventKind::kLaneAttached ? 0 : lane.killed);
      EXPECT_EQ(e.value, e.kind == TraceEventKind::kLaneHandedBack ? lane.lost : 0u);
    }
  }
  // The same events, in the same order, to the second observer; the
  // hand-backs agree with the exit handler's.
  const std::vector<sluice::LaneEvent> log = bus.GetObserver().Second().Events();
  ASSERT_EQ(log.size(), 6u);
  std::size_t next = 0;
  for (const TraceEvent& e : events) {
    if (e.kind < TraceEventKind::kLaneAttached) continue;
    ASSERT_LT(next, log.size());
    EXPECT_EQ(static_cast<int>(log[next].kind) + 9, static_cast<int>(e.kind));
    EXPECT_EQ(log[next].lane, e.lane);
    ++next;
  }
  for (const ProducerExit& exit : exits) {
    const auto& handed = exit.lane == 1 ? lanes[1] : lanes[2];
    EXPECT_EQ(events[handed.handed_back[0]].value, exit.lost);
    EXPECT_EQ(events[handed.handed_back[0]].detail, exit.killed ? 1 : 0);
  }
  bus.Close();
}

// The lane a producer left is free for the next one only after its
// kHandedBack was told: a consumer held inside that event (as a preemption
// there would) leaves the lane taken, so the next Attach finds no free
// lane, and the next owner's kAttached comes after the hand-back.
TEST(ShmLaneEventsTest, ALanesNextOwnerIsAttachedOnlyAfterItsHandBackWasTold) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = std::chrono::hours(1);
  std::atomic<int> exits{0};
  bus.OnProducerExit([&exits](const ProducerExit&) { exits.fetch_add(1); });
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  std::vector<Producer> producers(sluice::ipc::ShmBusTraits::kMaxProducers);
  for (Producer& producer : producers) ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  const std::uint16_t left = producers[3].Lane();
  producers[3].Detach();
  LaneLog& log = bus.GetObserver().Second();
  log.hold_hand_back.store(true);
  std::thread consumer([&] {
    bus.CheckProducers();
    (void)sluice_ipc_test::DispatchUntil(bus, [&] { return exits.load() == 1; });
  });
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (!log.in_hand_back.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(log.in_hand_back.load());
  Producer next;
  EXPECT_EQ(next.Attach(name), AttachError::kNoFreeLane)
      << "the lane was free before its hand-back was told";
  log.release.store(true);
  consumer.join();
  ASSERT_EQ(next.Attach(name), AttachError::kNone);
  EXPECT_EQ(next.Lane(), left);
  std::vector<sluice::LaneEventKind> of_lane;
  for (const sluice::LaneEvent& event : log.Events()) {
    if (event.lane == left) of_lane.push_back(event.kind);
  }
  EXPECT_EQ(of_lane, (std::vector<sluice::LaneEventKind>{
                         sluice::LaneEventKind::kAttached, sluice::LaneEventKind::kExited,
                         sluice::LaneEventKind::kHandedBack, sluice::LaneEventKind::kAttached}));
  bus.Close();
}

// Close ends the lane events: lanes still owned, or left and not yet
// handed back, are told no kExited or kHandedBack after it (the bus is
// gone; its statistics and OnProducerExit say no more either).
TEST(ShmLaneEventsTest, NoLaneEventFollowsClose) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = std::chrono::hours(1);
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Producer kept;
  Producer left;
  ASSERT_EQ(kept.Attach(name), AttachError::kNone);
  ASSERT_EQ(left.Attach(name), AttachError::kNone);
  left.Detach();  // not yet looked for
  bus.Close();
  bus.CheckProducers();
  const std::vector<sluice::LaneEvent> log = bus.GetObserver().Second().Events();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].kind, sluice::LaneEventKind::kAttached);
  EXPECT_EQ(log[1].kind, sluice::LaneEventKind::kAttached);
}

}  // namespace
}  // namespace lane_events_test
