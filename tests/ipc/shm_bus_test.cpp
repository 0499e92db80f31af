// The shared-memory bus with real processes: a producer or consumer peer
// (tests/ipc/peer.cpp, fork and exec) on the other side of a segment. Every
// payload type both ways, priority admission and HIGH first across
// processes, attach refusals that name what differs, a stale segment
// recreated, a consumer's death seen by producers, and a consumer fed a
// segment of random bytes. Deadlines only guard against hangs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sluice/ipc/shm_bus.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bus_view.hpp"
#include "child_process.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace shm_bus_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::Aligned;
using sluice_ipc_test::Bytes13;
using sluice_ipc_test::DispatchUntil;
using sluice_ipc_test::Field;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Pose;
using sluice_ipc_test::StartPeer;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_test::ChildProcess;
using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;

TEST(ShmBusTest, EveryPayloadTypeCrossesFromAProducerProcess) {
  constexpr std::uint64_t kMessages = 4000;
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  std::vector<int> times(kMessages, 0);
  std::uint64_t bad = 0;
  std::uint64_t received = 0;
  const auto check = [&](const Payload& payload, const sluice::MessageHeader& header) {
    const std::uint64_t seq = sluice_ipc_test::SeqOf(payload);
    if (seq >= kMessages || !sluice_ipc_test::IsIntact(payload) ||
        header.priority != sluice_ipc_test::PriorityOf(seq) || header.sender_id != 7) {
      ++bad;
      return;
    }
    ++times[seq];
    ++received;
  };
  // One typed subscription per alternative.
  auto pose =
      bus.Subscribe<Pose>([&](const Pose& m, const sluice::MessageHeader& h) { check(m, h); });
  auto stop =
      bus.Subscribe<Stop>([&](const Stop& m, const sluice::MessageHeader& h) { check(m, h); });
  auto aligned = bus.Subscribe<Aligned>(
      [&](const Aligned& m, const sluice::MessageHeader& h) { check(m, h); });
  auto bytes = bus.Subscribe<Bytes13>(
      [&](const Bytes13& m, const sluice::MessageHeader& h) { check(m, h); });
  ASSERT_TRUE(pose.IsValid() && stop.IsValid() && aligned.IsValid() && bytes.IsValid());
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"publish", name, std::to_string(kMessages)}));
  ASSERT_TRUE(DispatchUntil(bus, [&] { return received + bad >= kMessages; }))
      << received << " received";
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("published=", &line, kGuard));
  EXPECT_EQ(peer.Wait(kGuard), 0);
  EXPECT_EQ(bad, 0u);
  for (std::uint64_t seq = 0; seq < kMessages; ++seq) ASSERT_EQ(times[seq], 1) << seq;
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.processed, kMessages);
  EXPECT_EQ(stats.corrupt, 0u);
  EXPECT_EQ(stats.producers_attached, 1u);
  EXPECT_EQ(stats.published[0] + stats.published[1] + stats.published[2], kMessages);
  std::printf("[ ipc] %llu messages from a producer process, %llu refusals while full\n",
              static_cast<unsigned long long>(kMessages),
              static_cast<unsigned long long>(Field(line, "refused")));
}

TEST(ShmBusTest, EveryPayloadTypeCrossesToAConsumerProcess) {
  constexpr std::uint64_t kMessages = 4000;
  const std::string name = UniqueName();
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"consume", name, std::to_string(kMessages)}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("ready", &line, kGuard));
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  for (std::uint64_t seq = 0; seq < kMessages; ++seq) {
    for (;;) {
      const auto result = std::visit(
          [&](const auto& m) {
            return producer.PublishWithPriority(m, 7, sluice_ipc_test::PriorityOf(seq));
          },
          sluice_ipc_test::MakeMessage(seq));
      if (result) break;
      ASSERT_EQ(result.Outcome(), PublishOutcome::kRefusedFull);
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::yield();
    }
  }
  ASSERT_TRUE(peer.WaitForLine("received=", &line, kGuard));
  EXPECT_EQ(Field(line, "received"), kMessages) << line;
  EXPECT_EQ(Field(line, "bad"), 0u) << line;
  EXPECT_EQ(Field(line, "corrupt"), 0u) << line;
  EXPECT_EQ(peer.Wait(kGuard), 0);
}

// The producer process fills the queue: LOW is refused at 60 %, MEDIUM at
// 80 %, HIGH at 99 % (of 64: 39, 52 and 64 messages). Then the consumer
// takes every HIGH first, then MEDIUM, then LOW, each in publish order.
TEST(ShmBusTest, PriorityAdmissionAndHighFirstAcrossProcesses) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"fill", name}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("low=", &line, kGuard));
  EXPECT_EQ(peer.Wait(kGuard), 0);
  const auto low = sluice::FillLimit(60, kCapacity);
  const auto medium = sluice::FillLimit(80, kCapacity);
  const auto high = sluice::FillLimit(99, kCapacity);
  EXPECT_EQ(Field(line, "low"), low) << line;
  EXPECT_EQ(Field(line, "medium"), medium - low) << line;
  EXPECT_EQ(Field(line, "high"), high - medium) << line;
  EXPECT_EQ(bus.QueueDepth(), high);
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.dropped[0], 1u);  // each priority's one refused try
  EXPECT_EQ(stats.dropped[1], 1u);
  EXPECT_EQ(stats.dropped[2], 1u);

  std::vector<std::pair<MessagePriority, std::uint64_t>> order;
  (void)bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
    order.emplace_back(envelope.header.priority, sluice_ipc_test::SeqOf(envelope.payload));
  });
  ASSERT_EQ(order.size(), high);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto expected = i < high - medium ? MessagePriority::HIGH
                          : i < high - low  ? MessagePriority::MEDIUM
                                            : MessagePriority::LOW;
    EXPECT_EQ(order[i].first, expected) << i;
    if (i > 0 && order[i].first == order[i - 1].first) {
      EXPECT_GT(order[i].second, order[i - 1].second) << i;
    }
  }
}

TEST(ShmBusTest, AttachIsRefusedSayingWhichPartDiffers) {
  const std::string name = UniqueName();
  Producer early;
  EXPECT_EQ(early.Attach(name), AttachError::kNotFound);
  EXPECT_EQ(early.Attach("no-slash"), AttachError::kBadName);
  EXPECT_EQ(early.Attach("/two/slashes"), AttachError::kBadName);
  Bus bus;
  EXPECT_EQ(bus.Create("bad"), AttachError::kBadName);
  EXPECT_EQ(bus.Create("/."), AttachError::kBadName);   // the directory itself
  EXPECT_EQ(bus.Create("/.."), AttachError::kBadName);  // its parent
  sluice::ipc::ShmBusOptions bad_thresholds;
  bad_thresholds.thresholds.low_percent = 90;  // above MEDIUM's 80
  EXPECT_EQ(bus.Create(name, bad_thresholds), AttachError::kBadOptions);
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  const auto attach = [&](const std::string& variant) {
    ChildProcess peer;
    std::string line;
    if (!StartPeer(peer, {"attach", name, variant}) ||
        !peer.WaitForLine("attach=", &line, kGuard)) {
      return -1;
    }
    return static_cast<int>(Field(line, "attach"));
  };
  EXPECT_EQ(attach("same"), static_cast<int>(AttachError::kNone));
  EXPECT_EQ(attach("other-types"), static_cast<int>(AttachError::kPayloadTypes));
  EXPECT_EQ(attach("other-capacity"), static_cast<int>(AttachError::kCapacity));

  // A segment somebody else made: no magic number.
  const std::string foreign = UniqueName();
  const int fd = ::shm_open(foreign.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(Bus::kSegmentSize)), 0);
  void* base = ::mmap(nullptr, Bus::kSegmentSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  std::memset(base, 0x5A, Bus::kSegmentSize);
  ::munmap(base, Bus::kSegmentSize);
  ::close(fd);
  Producer producer;
  EXPECT_EQ(producer.Attach(foreign), AttachError::kNotASegment);
  ::shm_unlink(foreign.c_str());
}

// 0600 by default: a process of another user is refused (run as root, the
// test drops to user nobody in a forked child).
TEST(ShmBusTest, TheDefaultModeAdmitsOnlyTheOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to attach as another user";
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    Producer producer;
    ::_exit(static_cast<int>(producer.Attach(name)));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), static_cast<int>(AttachError::kPermissionDenied));
}

// The owner, group and mode given at Create: a group member may attach
// (mode 0660, the group of user nobody), which 0600 refused above.
TEST(ShmBusTest, TheGroupGivenMayAttach) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to attach as another user";
  const std::string name = UniqueName();
  sluice::ipc::ShmBusOptions options;
  options.permissions.mode = 0660;
  options.permissions.group = 65534;
  Bus bus;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    Producer producer;
    const AttachError error = producer.Attach(name);
    if (error != AttachError::kNone) ::_exit(static_cast<int>(error));
    ::_exit(producer.Publish(Stop{0, 42}, 9) ? 0 : 101);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::uint64_t seen = 0;
  (void)bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Stop>) seen = message.seq;
  });
  EXPECT_EQ(seen, 42u);
}

// A consumer killed with SIGKILL leaves its segment behind: a new
// consumer's Create recognises it (its consumer is gone) and makes it
// again; while the first consumer ran, Create was refused.
TEST(ShmBusTest, AStaleSegmentIsMadeAgainAndALiveOneRefused) {
  const std::string name = UniqueName();
  ChildProcess holder;
  ASSERT_TRUE(StartPeer(holder, {"hold", name}));
  std::string line;
  ASSERT_TRUE(holder.WaitForLine("ready", &line, kGuard));
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kConsumerExists);
  holder.Kill(SIGKILL);
  Producer late;
  EXPECT_EQ(late.Attach(name), AttachError::kConsumerGone);
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  ASSERT_TRUE(producer.PublishWithPriority(Stop{1, 2}, 7, MessagePriority::HIGH));
  std::uint64_t seen = 0;
  (void)bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Stop>) seen = message.seq;
  });
  EXPECT_EQ(seen, 2u);
}

// A producer process publishes into a consumer that is then killed: once
// the queue has no room, its publishes say kClosed (the consumer is gone),
// not kRefusedFull for ever.
TEST(ShmBusTest, ProducersSeeTheConsumerDie) {
  const std::string name = UniqueName();
  ChildProcess holder;
  ASSERT_TRUE(StartPeer(holder, {"hold", name}));
  std::string line;
  ASSERT_TRUE(holder.WaitForLine("ready", &line, kGuard));
  ChildProcess producer;
  ASSERT_TRUE(StartPeer(producer, {"until-closed", name}));
  ASSERT_TRUE(producer.WaitForLine("attached", &line, kGuard));
  holder.Kill(SIGKILL);
  ASSERT_TRUE(producer.WaitForLine("closed", &line, kGuard)) << line;
  EXPECT_EQ(producer.Wait(kGuard), 0);
  Bus::RemoveName(name);
}

TEST(ShmBusTest, ACloseRefusesPublishesAndRemovesTheName) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  ASSERT_TRUE(producer.Publish(Stop{0, 1}, 7));
  bus.Close();
  EXPECT_EQ(producer.Publish(Stop{0, 2}, 7).Outcome(), PublishOutcome::kClosed);
  Producer late;
  EXPECT_EQ(late.Attach(name), AttachError::kNotFound);
  EXPECT_EQ(bus.Create(name), AttachError::kNone);  // the name is free again
}

// Anything that can write the segment may write anything: the consumer
// never reads or writes outside the segment, and every batch returns
// within its bound, whatever the rings hold. Each round publishes real
// messages, then writes random bytes over the whole segment or over a few
// random words of it (a ring half right is the harder case), then
// dispatches. Run under AddressSanitizer in CI.
TEST(ShmBusTest, AConsumerFedRandomBytesStaysInsideTheSegment) {
  constexpr int kRounds = 300;
  std::mt19937_64 random(20261202);
  std::uint64_t taken = 0;
  std::uint64_t corrupt = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = UniqueName();
    Bus bus;
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    auto handle = bus.Subscribe<Pose>([](const Pose&) {});
    ASSERT_TRUE(handle.IsValid());
    Producer producer;
    ASSERT_EQ(producer.Attach(name), AttachError::kNone);
    for (std::uint64_t seq = 0; seq < 40; ++seq) {
      (void)std::visit(
          [&](const auto& m) {
            return producer.PublishWithPriority(m, 7, sluice_ipc_test::PriorityOf(seq));
          },
          sluice_ipc_test::MakeMessage(seq));
    }
    sluice_ipc_test::BusView<Layout> writer;
    ASSERT_EQ(writer.Open(name), AttachError::kNone);
    auto* bytes = static_cast<unsigned char*>(writer.Base());
    if (round % 3 == 0) {
      for (std::size_t i = 0; i < writer.Size(); ++i)
        bytes[i] = static_cast<unsigned char>(random());
    } else {
      const int words = round % 3 == 1 ? 4 : 64;
      for (int i = 0; i < words; ++i) {
        const std::size_t at = random() % (writer.Size() - 8);
        const std::uint64_t value = random();
        std::memcpy(bytes + at, &value, sizeof(value));
      }
    }
    for (int batch = 0; batch < 4; ++batch) {
      const std::uint32_t n =
          batch % 2 == 0 ? bus.ProcessBatch(256) : bus.ProcessBatchWith([](const auto&) {}, 256);
      ASSERT_LE(n, 256u);
      taken += n;
    }
    // Every other consumer call reads the segment too: under UBSan, none
    // may read a byte as a bool or an enum it cannot hold. The waits end
    // when their time is up (a slice of sleep if nothing is queued).
    bus.CheckProducers();
    taken += bus.ProcessBatchWait(std::chrono::milliseconds(1), 256);
    taken += bus.ProcessBatchWithWait([](const auto&) {}, std::chrono::milliseconds(1), 256);
    (void)bus.QueueDepth();
    (void)bus.QueueUtilizationPercent();
    (void)bus.GetBackpressureLevel();
    (void)bus.PeekBackpressurePeak();
    (void)bus.GetLatencyHistograms();
    bus.ForEachProducer([](const auto&) {});
    // Producers keep to their bounds too.
    for (std::uint64_t seq = 0; seq < 8; ++seq) (void)producer.Publish(Stop{0, seq}, 7);
    corrupt += bus.GetStatistics().corrupt;
  }
  std::printf("[ ipc] %d rounds of random bytes: %llu messages taken, %llu counted corrupt\n",
              kRounds, static_cast<unsigned long long>(taken),
              static_cast<unsigned long long>(corrupt));
  EXPECT_GT(taken, 0u) << "no round reached a message: the test proves nothing";
}

// A writer puts a message into a lane outside the active set and marks the
// lane detached. Batches read only active lanes, so the lane would never
// drain: it is handed back, counted corrupt, and the consumer sleeps again
// when nothing is queued (before, ProcessBatchWait found that message as
// work on every look and never slept).
TEST(ShmBusTest, ALaneOutsideTheActiveSetWithAMessageIsHandedBackAsCorrupt) {
  using Header = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>::Header;
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  const std::size_t lane = producer.Lane() - 1U;
  ASSERT_TRUE(producer.Publish(Stop{0, 1}));
  sluice_ipc_test::BusView<Layout> writer;
  ASSERT_EQ(writer.Open(name), AttachError::kNone);
  auto* header = static_cast<Header*>(writer.Base());
  header->lanes_active.fetch_and(~(std::uint64_t{1} << lane));
  writer.Control(lane).state.store(sluice::ipc::detail::kLaneDetached);
  bus.CheckProducers();
  // Handed back: a fresh object under the lane's name, free.
  EXPECT_NE(header->lanes_free.load() & (std::uint64_t{1} << lane), 0U);
  sluice_ipc_test::BusView<Layout> handed_back;
  ASSERT_EQ(handed_back.Open(name), AttachError::kNone);
  EXPECT_EQ(handed_back.Control(lane).state.load(), sluice::ipc::detail::kLaneFree);
  EXPECT_EQ(bus.GetStatistics().corrupt, 1U);
  EXPECT_EQ(bus.QueueDepth(), 0U);
  // Nothing queued: the wait sleeps (a voluntary context switch), not spins.
  rusage before{};
  ASSERT_EQ(::getrusage(RUSAGE_THREAD, &before), 0);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(50)), 0U);
  rusage after{};
  ASSERT_EQ(::getrusage(RUSAGE_THREAD, &after), 0);
  EXPECT_GT(after.ru_nvcsw, before.ru_nvcsw);
}

// A producer (or anything else that can write the segment) that writes a
// message's bytes wrong: each published message's envelope is overwritten
// with random bytes after its publish, header and all. The consumer
// counts each as corrupt (an alternative out of range) or
// dispatches it as some value of a valid type, never anything else.
TEST(ShmBusTest, MessagesWrittenWrongAreCountedAsCorrupt) {
  constexpr int kRounds = 50;
  constexpr std::uint64_t kMessages = 30;
  constexpr std::uint64_t kMarker = 0x5EED'0000'0000'0000ULL;
  // Where a Pose's seq lies in an envelope, so that the envelope can be
  // found in the segment from it.
  sluice::MessageEnvelope<Payload> probe{{}, Pose{0, 0, 0, 0}};
  const std::size_t seq_offset = static_cast<std::size_t>(
      reinterpret_cast<const unsigned char*>(&std::get<Pose>(probe.payload).seq) -
      reinterpret_cast<const unsigned char*>(&probe));
  const std::size_t pose_seq_offset = offsetof(Pose, seq);
  std::mt19937_64 random(7);
  std::uint64_t corrupt = 0;
  std::uint64_t dispatched = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = UniqueName();
    Bus bus;
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    Producer producer;
    ASSERT_EQ(producer.Attach(name), AttachError::kNone);
    for (std::uint64_t i = 0; i < kMessages; ++i) {
      ASSERT_TRUE(
          producer.PublishWithPriority(Pose{1, 2, 3, kMarker + i}, 7, MessagePriority::HIGH));
    }
    sluice_ipc_test::BusView<Layout> writer;
    ASSERT_EQ(writer.Open(name), AttachError::kNone);
    auto* bytes = static_cast<unsigned char*>(writer.Base());
    std::uint64_t overwritten = 0;
    for (std::size_t at = seq_offset; at + sizeof(std::uint64_t) <= writer.Size(); at += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, bytes + at, sizeof(word));
      if ((word & 0xFFFF'0000'0000'0000ULL) != kMarker) continue;
      unsigned char* envelope = bytes + at - seq_offset;
      if (round % 2 == 0) {
        for (std::size_t i = 0; i < sizeof(probe); ++i) {
          envelope[i] = static_cast<unsigned char>(random());
        }
      } else {
        // The Pose alone (header and alternative index left right): it
        // is dispatched, as some Pose.
        unsigned char* pose = bytes + at - pose_seq_offset;
        for (std::size_t i = 0; i < sizeof(Pose); ++i)
          pose[i] = static_cast<unsigned char>(random());
      }
      ++overwritten;
    }
    ASSERT_EQ(overwritten, kMessages);
    std::uint64_t seen = 0;
    const std::uint32_t taken = bus.ProcessBatchWith([&](const auto&) { ++seen; });
    EXPECT_EQ(taken, kMessages);
    const auto stats = bus.GetStatistics();
    EXPECT_EQ(stats.processed, seen);
    EXPECT_EQ(stats.processed + stats.corrupt, kMessages);
    corrupt += stats.corrupt;
    dispatched += seen;
  }
  std::printf("[ ipc] %llu messages written wrong: %llu counted corrupt, %llu dispatched\n",
              static_cast<unsigned long long>(kRounds * kMessages),
              static_cast<unsigned long long>(corrupt),
              static_cast<unsigned long long>(dispatched));
  EXPECT_GT(corrupt, 0u) << "nothing was corrupt: the test proves nothing";
  EXPECT_GT(dispatched, 0u) << "nothing was dispatched: half the test proves nothing";
}

// A priority out of range is rejected (never admitted); a subscriber that
// throws is counted and the batch goes on to the next message.
TEST(ShmBusTest, BadInputIsRejectedAndAThrowingSubscriberCounted) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  EXPECT_EQ(producer.PublishWithPriority(Stop{0, 1}, 7, static_cast<MessagePriority>(3)).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(bus.QueueDepth(), 0u);
#if SLUICE_HAS_EXCEPTIONS
  std::uint64_t after = 0;
  auto thrower = bus.Subscribe<Stop>([](const Stop& stop) {
    if (stop.seq == 1) throw std::runtime_error("subscriber failed");
  });
  auto counter = bus.Subscribe<Stop>([&](const Stop&) { ++after; });
  ASSERT_TRUE(thrower.IsValid() && counter.IsValid());
  ASSERT_TRUE(producer.Publish(Stop{0, 1}, 7));
  ASSERT_TRUE(producer.Publish(Stop{0, 2}, 7));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  EXPECT_EQ(after, 2u);  // the second subscriber of the first message ran too
  EXPECT_EQ(bus.GetStatistics().callback_errors, 1u);
#endif
}

// A segment whose maker has not written the magic number (being made, or
// its maker died making it) is neither attached to nor removed.
TEST(ShmBusTest, ASegmentNotYetWrittenIsNotReady) {
  const std::string name = UniqueName();
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(Bus::kSegmentSize)), 0);  // zeros
  ::close(fd);
  Producer producer;
  EXPECT_EQ(producer.Attach(name), AttachError::kNotReady);
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kNotReady);
  Bus::RemoveName(name);
  EXPECT_EQ(bus.Create(name), AttachError::kNone);
}

// Publish stamps steady_clock (one clock for every process of the host);
// PublishFast carries the caller's timestamp as given.
TEST(ShmBusTest, TimestampsAreTheBusClockOrTheCallers) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  const auto before = std::chrono::steady_clock::now().time_since_epoch();
  ASSERT_TRUE(producer.Publish(Stop{0, 1}, 7));
  const auto after = std::chrono::steady_clock::now().time_since_epoch();
  ASSERT_TRUE(producer.PublishFast(Stop{0, 2}, 7, std::chrono::nanoseconds(12345)));
  std::vector<std::uint64_t> stamps;
  (void)bus.ProcessBatchWith([&](const auto&, const sluice::MessageHeader& header) {
    stamps.push_back(header.timestamp_ns);
  });
  ASSERT_EQ(stamps.size(), 2u);
  EXPECT_GE(stamps[0], static_cast<std::uint64_t>(
                           std::chrono::duration_cast<std::chrono::nanoseconds>(before).count()));
  EXPECT_LE(stamps[0], static_cast<std::uint64_t>(
                           std::chrono::duration_cast<std::chrono::nanoseconds>(after).count()));
  EXPECT_EQ(stamps[1], 12345u);
}

// Two consumers make a stale name again at the same instant: one wins, the
// other is refused (it would otherwise remove the winner's new segment
// and both would think they own the name).
TEST(ShmBusTest, TwoConsumersMakingAStaleNameAgainTakeTurns) {
  constexpr int kRounds = 30;
  int both = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = UniqueName();
    ASSERT_TRUE(sluice_ipc_test::LeaveKilledConsumersSegment(name));  // the stale segment
    ChildProcess first;
    ChildProcess second;
    ASSERT_TRUE(StartPeer(first, {"create", name}));
    ASSERT_TRUE(StartPeer(second, {"create", name}));
    std::string a;
    std::string b;
    ASSERT_TRUE(first.WaitForLine("create=", &a, kGuard));
    ASSERT_TRUE(second.WaitForLine("create=", &b, kGuard));
    const auto ca = Field(a, "create");
    const auto cb = Field(b, "create");
    const auto none = static_cast<std::uint64_t>(AttachError::kNone);
    if (ca == none && cb == none) ++both;
    EXPECT_TRUE(ca == none || cb == none) << a << " / " << b;
    for (const auto code : {ca, cb}) {
      EXPECT_TRUE(code == none ||
                  code == static_cast<std::uint64_t>(AttachError::kConsumerExists) ||
                  code == static_cast<std::uint64_t>(AttachError::kNotReady))
          << code;
    }
    // Both still run, holding what they were told they made: at most one
    // may have been told so (tests/ipc/create_race_test.cpp forces each
    // interleaving of the two).
    first.Signal(SIGTERM);
    second.Signal(SIGTERM);
    EXPECT_EQ(first.Wait(kGuard), 0);
    EXPECT_EQ(second.Wait(kGuard), 0);
    Bus::RemoveName(name);
  }
  EXPECT_EQ(both, 0) << "both consumers were told they made the name";
}

// A name squatted by a segment any user may write (mode 0666), laid out as
// a killed consumer's: taking it over would keep the squatter's mode, and
// whoever wrote it could read every message. Refused before it is read,
// and left as it was.
TEST(ShmBusTest, ANameWhoseSegmentHasAWiderModeIsRefusedAndLeftAlone) {
  const std::string name = UniqueName();
  ASSERT_TRUE(sluice_ipc_test::LeaveKilledConsumersSegment(name));
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchmod(fd, 0666), 0);
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kUntrustedSegment);
  EXPECT_FALSE(bus.IsOpen());
  struct stat status {};
  ASSERT_EQ(::fstat(fd, &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0666u);
  sluice_ipc_test::BusView<Layout> still;
  ASSERT_EQ(still.Open(name), AttachError::kNone);
  ::close(fd);
  // Asked for that mode, it is the consumer's own stale segment: taken over.
  sluice::ipc::ShmBusOptions wide;
  wide.permissions.mode = 0666;
  EXPECT_EQ(bus.Create(name, wide), AttachError::kNone);
  EXPECT_TRUE(bus.TookOver());
  bus.Close();
}

// A name held by another user's segment (made as root, then given away):
// refused, whatever it holds.
TEST(ShmBusTest, ANameWhoseSegmentBelongsToAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a segment of another user";
  const std::string name = UniqueName();
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(Bus::kSegmentSize)), 0);
  ASSERT_EQ(::fchown(fd, 65534, 65534), 0);  // nobody
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kUntrustedSegment);
  struct stat status {};
  ASSERT_EQ(::fstat(fd, &status), 0);
  EXPECT_EQ(status.st_uid, 65534u);
  ::close(fd);
  Bus::RemoveName(name);
}

// What a test child reports through its exit status: the AttachError of
// its Create (0-99), or 100 + a step that failed.
int ChildCreate(const std::string& name, uid_t uid, bool hide_proc) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (hide_proc) {
      // A /proc of its own, mounted hidepid=2 (systemd's ProtectProc=
      // invisible): other users' processes, and its own user's that are
      // not dumpable, have no entry it can read.
      if (::unshare(CLONE_NEWNS) != 0) ::_exit(101);
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(102);
      if (::mount("proc", "/proc", "proc", 0, "hidepid=2") != 0) ::_exit(103);
    }
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(104);
    Bus bus;
    ::_exit(static_cast<int>(bus.Create(name)));
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 200;
  return WEXITSTATUS(status);
}

constexpr uid_t kNobody = 65534;

// A consumer whose /proc entry the next consumer may not read (hidepid=2,
// and the first made not dumpable, as a process that changed credentials
// is) runs: it is not taken for gone. Before, an unreadable entry read as
// "gone", and the second consumer took over a running consumer's segment.
TEST(ShmBusTest, AConsumerHiddenFromTheNextOneIsNotTakenForGone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run consumers as another user";
  const std::string name = UniqueName();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t first = ::fork();
  if (first == 0) {
    if (::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(1);
    }
    (void)::prctl(PR_SET_DUMPABLE, 0);
    Bus bus;
    const char made = static_cast<char>(bus.Create(name));
    (void)!::write(ready[1], &made, 1);
    ::pause();  // runs until killed
    ::_exit(0);
  }
  ASSERT_GT(first, 0);
  char made = -1;
  ASSERT_EQ(::read(ready[0], &made, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_EQ(made, static_cast<char>(AttachError::kNone));
  const int second = ChildCreate(name, kNobody, /*hide_proc=*/true);
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  Bus::RemoveName(name);
  if (second == 103) GTEST_SKIP() << "this kernel refused a hidepid /proc here";
  EXPECT_EQ(second, static_cast<int>(AttachError::kConsumerExists))
      << "a running consumer's segment was taken over";
}

// A consumer that is not root, facing another user's 0600 segment it
// cannot even open: kUntrustedSegment, from the name's owner (before,
// kPermissionDenied from the open).
TEST(ShmBusTest, AnotherUsersSegmentIsUntrustedForAConsumerThatIsNotRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a consumer as another user";
  const std::string name = UniqueName();
  Bus owner;
  ASSERT_EQ(owner.Create(name), AttachError::kNone);  // root's, 0600
  EXPECT_EQ(ChildCreate(name, kNobody, /*hide_proc=*/false),
            static_cast<int>(AttachError::kUntrustedSegment));
  owner.Close();
}

// Something at the name that is no segment (a FIFO: opening it for
// writing would release a reader blocked on it) is refused without being
// opened.
TEST(ShmBusTest, AFifoAtTheNameIsRefusedUnopened) {
  const std::string name = UniqueName();
  const std::string path = std::string(sluice::ipc::kSharedMemoryDirectory) + name;
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kNotASegment);
  // No writer came: a reader that does not wait is told there is none.
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  char byte = 0;
  EXPECT_EQ(::read(reader, &byte, 1), 0);
  ::close(reader);
  ::unlink(path.c_str());
}

// The mode asked is the mode made, set-user-ID and set-group-ID bits too,
// also when an owner and group are given (fchown clears them).
TEST(ShmBusTest, TheModeAskedIsTheModeMadeWithAnOwnerGiven) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a segment an owner";
  const std::string name = UniqueName();
  sluice::ipc::ShmBusOptions options;
  options.permissions.mode = 06640;
  options.permissions.owner = 0;
  options.permissions.group = 0;
  Bus bus;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  // The permissions are the wake page's, the part producers open; the
  // header and the lanes are the consumer's user's alone.
  const std::string directory = sluice::ipc::kSharedMemoryDirectory;
  struct stat status {};
  ASSERT_EQ(::stat((directory + name + ".wake").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 06640u);
  for (const std::string& part : {name, name + ".lane0"}) {
    ASSERT_EQ(::stat((directory + part).c_str(), &status), 0);
    EXPECT_EQ(status.st_mode & 07777, 0600u) << part;
  }
  bus.Close();
}

// Anyone who can open the segment can hold its lock: Close does not wait
// for it for ever. It leaves the name to its closed segment, which the next
// Create replaces. (Before, Close, and so the destructor, never returned.)
TEST(ShmBusTest, CloseReturnsWhileAnotherProcessHoldsTheSegmentsLock) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice_ipc_test::BusView<Layout> holder;
  ASSERT_EQ(holder.Open(name), AttachError::kNone);
  // Another open file description of the header: flock's own.
  ASSERT_TRUE(holder.HeaderObject().Lock());
  bus.Close();
  EXPECT_TRUE(holder.HeaderObject().IsNamed(name)) << "the name was removed without the lock";
  holder.HeaderObject().Unlock();
  Bus next;
  EXPECT_EQ(next.Create(name), AttachError::kNone);
  EXPECT_FALSE(next.TookOver()) << "a closed segment is made again, not taken over";
  next.Close();
}

// The header's other parts, forged one at a time in a live segment: each
// refusal names its part.
TEST(ShmBusTest, EachForgedHeaderPartIsNamed) {
  using Header = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>::Header;
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice_ipc_test::BusView<Layout> writer;
  ASSERT_EQ(writer.Open(name), AttachError::kNone);
  auto* header = static_cast<Header*>(writer.Base());
  const sluice::ipc::Fingerprint fingerprint = header->fingerprint;
  const auto attach = [&] {
    Producer producer;
    return producer.Attach(name);
  };
  header->fingerprint.abi_tag[0] ^= 1;
  EXPECT_EQ(attach(), AttachError::kAbiTag);
  header->fingerprint = fingerprint;
  header->fingerprint.envelope_size += 8;
  EXPECT_EQ(attach(), AttachError::kLayout);
  header->fingerprint = fingerprint;
  header->fingerprint.segment_size *= 2;
  EXPECT_EQ(attach(), AttachError::kLayout);
  header->fingerprint = fingerprint;
  header->fingerprint.payload_types ^= 1;
  EXPECT_EQ(attach(), AttachError::kPayloadTypes);
  header->fingerprint = fingerprint;
  EXPECT_EQ(attach(), AttachError::kNone);
  header->thresholds.low_percent = 0;
  EXPECT_EQ(attach(), AttachError::kNotASegment);
  header->thresholds = sluice::AdmissionThresholds{};
  header->state.store(sluice::ipc::detail::kClosed);
  EXPECT_EQ(attach(), AttachError::kConsumerGone);
  header->state.store(sluice::ipc::detail::kOpen);
  header->magic.store(0x1234);
  EXPECT_EQ(attach(), AttachError::kNotASegment);
  header->magic.store(0);
  EXPECT_EQ(attach(), AttachError::kNotReady);
  header->magic.store(sluice::ipc::detail::kMagic);
  EXPECT_EQ(attach(), AttachError::kNone);
}

// A payload whose shape changed without its names, sizes or alignments
// showing it is told apart by the traits' schema version.
struct SchemaTwo : sluice::ipc::ShmBusTraits {
  static constexpr std::uint64_t kSchemaVersion = 2;
};
TEST(ShmBusTest, TheSchemaVersionIsPartOfThePayloadTypes) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice::ipc::ShmProducer<Payload, kCapacity, SchemaTwo> other;
  EXPECT_EQ(other.Attach(name), AttachError::kPayloadTypes);
}

struct InAnonymous {};

// GCC and Clang spell some names apart; the fingerprint's spelling is one.
// Run under both compilers in CI, each must give these strings.
TEST(ShmBusTest, TypeNamesAreSpelledAlikeByEveryCompiler) {
  using sluice::ipc::detail::TypeName;
  EXPECT_EQ(TypeName<long>(), "long");
  EXPECT_EQ(TypeName<unsigned long>(), "unsigned long");
  EXPECT_EQ(TypeName<long long>(), "long long");
  EXPECT_EQ(TypeName<unsigned long long>(), "unsigned long long");
  EXPECT_EQ(TypeName<short>(), "short");
  EXPECT_EQ(TypeName<unsigned short>(), "unsigned short");
  EXPECT_EQ(TypeName<unsigned int>(), "unsigned int");
  EXPECT_EQ(TypeName<sluice_ipc_test::Pose>(), "sluice_ipc_test::Pose");
  EXPECT_EQ(TypeName<InAnonymous>(), "shm_bus_test::(anonymous namespace)::InAnonymous");
}

// A process in another PID namespace cannot look the consumer's pid up:
// the consumer counts as alive there (attach works, Create is refused),
// never as gone. Run as root with unshare(1).
TEST(ShmBusTest, AnotherPidNamespaceNeverTakesALiveConsumerForGone) {
  const std::string unshare = "/usr/bin/unshare";
  if (::geteuid() != 0 || ::access(unshare.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "needs root and unshare(1), for a PID namespace";
  }
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  const auto in_namespace = [&](std::vector<std::string> args, const std::string& key) {
    ChildProcess peer;
    std::vector<std::string> argv{unshare, "-p", "-f", "--mount-proc", SLUICE_IPC_PEER};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string line;
    if (!peer.Start(argv, /*capture=*/true) || !peer.WaitForLine(key + "=", &line, kGuard)) {
      return std::uint64_t{999};
    }
    return Field(line, key);
  };
  const std::uint64_t attached = in_namespace({"attach", name, "same"}, "attach");
  if (attached == 999) GTEST_SKIP() << "unshare -p did not run here (no PID namespaces?)";
  EXPECT_EQ(attached, static_cast<std::uint64_t>(AttachError::kNone));
  EXPECT_EQ(in_namespace({"create", name}, "create"),
            static_cast<std::uint64_t>(AttachError::kConsumerExists));
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);  // the segment is still the first's
}

}  // namespace
}  // namespace shm_bus_test

namespace shm_bus_test {
namespace {

// A lane taken during a batch (by a subscriber, here) has its HIGH taken
// next, ahead of the LOW messages the batch was taking.
TEST(ShmBusTest, ALaneTakenDuringABatchHasItsHighTakenFirst) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer low;
  ASSERT_EQ(low.Attach(name), AttachError::kNone);
  for (std::uint64_t seq = 0; seq < 10; ++seq) {
    ASSERT_TRUE(low.PublishWithPriority(Stop{0, seq}, 1, MessagePriority::LOW));
  }
  Producer high;
  std::vector<std::uint64_t> order;
  (void)bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Stop>) {
      order.push_back(message.seq);
      if (order.size() == 1) {
        ASSERT_EQ(high.Attach(name), AttachError::kNone);
        ASSERT_TRUE(high.PublishWithPriority(Stop{0, 99}, 2, MessagePriority::HIGH));
      }
    }
  });
  ASSERT_GE(order.size(), 2u);
  EXPECT_EQ(order[1], 99u);
}

// Publishes racing Close: a refusal on a lane far from full says kClosed,
// never kRefusedFull (and is not counted as a drop).
TEST(ShmBusTest, APublishRefusedByCloseSaysClosed) {
  constexpr int kRounds = 200;
  std::mt19937 random(5);
  int refused_by_close = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = UniqueName();
    Bus bus;
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    Producer producer;
    ASSERT_EQ(producer.Attach(name), AttachError::kNone);
    std::atomic<int> outcome{-1};
    std::thread publisher([&] {
      // At most 30 messages: a lane of 64 is never full at HIGH.
      for (std::uint64_t seq = 0; seq < 30; ++seq) {
        const auto result = producer.PublishWithPriority(Stop{0, seq}, 1, MessagePriority::HIGH);
        if (!result) {
          outcome = static_cast<int>(result.Outcome());
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(10));
      }
    });
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 200)(random)));
    bus.Close();
    publisher.join();
    if (outcome.load() < 0) continue;  // all 30 admitted before the close
    ++refused_by_close;
    EXPECT_EQ(outcome.load(), static_cast<int>(PublishOutcome::kClosed)) << round;
    EXPECT_EQ(bus.GetStatistics().dropped[2], 0u) << round;
  }
  std::printf("[ ipc] %d of %d rounds refused a publish at the close\n", refused_by_close, kRounds);
  EXPECT_GT(refused_by_close, 0) << "no publish met the close: the test proves nothing";
}

// A child forked after Create holds a copy of the consumer: destroying it
// there (or closing it) leaves the parent's bus as it was.
TEST(ShmBusTest, AConsumerCopiedIntoAForkedChildDoesNotCloseTheParentsBus) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    bus.Close();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  ASSERT_TRUE(producer.PublishWithPriority(Stop{0, 1}, 1, MessagePriority::HIGH));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
}

// Callbacks that call back into the bus: a batch inside a batch takes
// nothing; a Close from a callback ends the batch at once.
TEST(ShmBusTest, ACallbackMayCloseTheBusAndNoBatchRunsInsideAnother) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    ASSERT_TRUE(producer.PublishWithPriority(Stop{0, seq}, 1, MessagePriority::HIGH));
  }
  std::vector<std::uint32_t> inner;
  std::uint64_t seen = 0;
  auto handle = bus.Subscribe<Stop>([&](const Stop& stop) {
    ++seen;
    inner.push_back(bus.ProcessBatch());
    inner.push_back(bus.ProcessBatchWait(std::chrono::hours(1)));
    if (stop.seq == 1) bus.Close();
  });
  ASSERT_TRUE(handle.IsValid());
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  EXPECT_EQ(seen, 2u);
  EXPECT_EQ(inner, (std::vector<std::uint32_t>{0, 0, 0, 0}));
  EXPECT_FALSE(bus.IsOpen());
  EXPECT_EQ(bus.GetStatistics().processed, 2u);
  EXPECT_EQ(producer.PublishWithPriority(Stop{0, 9}, 1, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
}

}  // namespace
}  // namespace shm_bus_test
