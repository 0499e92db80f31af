// Who is alive on a shared-memory bus is the kernel's word (the roles of
// sluice/ipc/segment.hpp), not anything read from /proc or written in the
// segment: a forged pid changes nothing, and neither do PID namespaces, time
// namespaces or a /proc that hides other users' processes. Each test puts a
// live process where a reader of /proc would misjudge it, checks that it is
// taken for alive, then kills it and checks that it is taken for gone.
//
// The namespace tests need root and util-linux's unshare and setpriv (a
// bare Debian root has both); they are skipped, saying why, without them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sluice/ipc/host_clock.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bus_view.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace liveness_test {
namespace {

using namespace sluice_ipc_test;
using sluice::ipc::AttachError;
using sluice::ipc::ProducerExit;
using sluice::ipc::Segment;
namespace layout = sluice::ipc::detail;

using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;
using Header = Layout::Header;

// Every lane's exits the consumer reported, by lane.
struct Exits {
  std::vector<ProducerExit> seen;
  bool Any() const { return !seen.empty(); }
};

// Polls the consumer (batches and CheckProducers) `rounds` times, a
// millisecond apart; returns how many messages the batches took.
std::uint64_t Poll(Bus& bus, int rounds) {
  std::uint64_t taken = 0;
  for (int round = 0; round < rounds; ++round) {
    taken += bus.ProcessBatch(64);
    bus.CheckProducers();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return taken;
}

// Polls until an exit is reported, for the test's guard at most.
bool PollUntilExit(Bus& bus, const Exits& exits) {
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (!exits.Any() && std::chrono::steady_clock::now() < deadline) Poll(bus, 1);
  return exits.Any();
}

// A segment's header, mapped by this process: to forge what a hostile
// process that can write the segment could write.
Header* MapHeader(const std::string& name, Segment* segment) {
  if (Segment::Open(name, sizeof(Header), segment) != AttachError::kNone) return nullptr;
  return static_cast<Header*>(segment->Base());
}

// Counts the Stop messages dispatched and those whose stamp is more than
// 1,000 s from this process's clock at dispatch (a bound on two processes'
// clocks agreeing, a thousand times below the offsets the tests give their
// namespaces; not a bound on any latency).
struct StampCheck {
  std::uint64_t stamped = 0;
  std::uint64_t off_the_clock = 0;
  void SubscribeTo(Bus& bus) {
    (void)bus.Subscribe<Stop>([this](const Stop&, const sluice::MessageHeader& header) {
      const auto now = static_cast<std::int64_t>(sluice::ipc::HostMonotonicClock::NowNanos());
      const std::int64_t apart = now - static_cast<std::int64_t>(header.timestamp_ns);
      ++stamped;
      if (apart > 1'000'000'000'000LL || apart < -1'000'000'000'000LL) ++off_the_clock;
    });
  }
};

// A pid no process has now (the kernel's pid_max is at most 2^22).
constexpr std::int32_t kFreePid = (1 << 22) + 17;

// The roles are locks of the open, not of the process: another open of
// the same segment sees them held while their holder runs and dropped when
// it is killed.
TEST(ShmLivenessTest, ARoleIsHeldWhileItsProcessRunsAndDroppedWhenItIsKilled) {
  const std::string name = UniqueName();
  sluice_test::ChildProcess holder;
  std::string line;
  ASSERT_TRUE(StartPeer(holder, {"hold", name}));
  ASSERT_TRUE(holder.WaitForLine("ready", &line, kGuard));
  Segment segment;
  ASSERT_NE(MapHeader(name, &segment), nullptr);
  EXPECT_EQ(segment.HolderOf(layout::kConsumerRole), Segment::RoleHolder::kHeld);
  Segment lane;
  ASSERT_EQ(Segment::Open(name + ".lane0", 1, &lane), AttachError::kNone);
  EXPECT_EQ(lane.HolderOf(layout::kLaneRole), Segment::RoleHolder::kNone);
  holder.Kill(SIGKILL);  // and reaped
  EXPECT_EQ(segment.HolderOf(layout::kConsumerRole), Segment::RoleHolder::kNone);
  // Taken by this open, it is held for every other open.
  ASSERT_TRUE(segment.TakeRole(layout::kConsumerRole));
  Segment other;
  ASSERT_NE(MapHeader(name, &other), nullptr);
  EXPECT_EQ(other.HolderOf(layout::kConsumerRole), Segment::RoleHolder::kHeld);
  EXPECT_FALSE(other.TakeRole(layout::kConsumerRole));
  segment.DropRole(layout::kConsumerRole);
  EXPECT_TRUE(other.TakeRole(layout::kConsumerRole));
  Bus::RemoveName(name);
}

// A hostile writer sets the consumer's recorded pid to one no process has:
// producers still attach, and a second consumer is still refused.
TEST(ShmLivenessTest, AForgedConsumerPidDoesNotMakeALiveConsumerGone) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Segment forger;
  Header* header = MapHeader(name, &forger);
  ASSERT_NE(header, nullptr);
  header->consumer_pid.store(kFreePid);
  Producer producer;
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
  EXPECT_TRUE(producer.ConsumerAlive());
  EXPECT_TRUE(producer.Publish(Stop{1, 1}));
  sluice_test::ChildProcess second;
  ASSERT_TRUE(StartPeer(second, {"create", name}));
  std::string line;
  ASSERT_TRUE(second.WaitForLine("create=", &line, kGuard));
  EXPECT_EQ(Field(line, "create"), static_cast<std::uint64_t>(AttachError::kConsumerExists))
      << line;
  second.Kill(SIGKILL);
  EXPECT_EQ(bus.ProcessBatch(8), 1U);
}

// A hostile writer sets a live producer's recorded pid to a free one: its
// lane is not handed back, and its messages keep coming.
TEST(ShmLivenessTest, AForgedProducerPidDoesNotMakeALiveProducerGone) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  BusView<Layout> forger;
  ASSERT_EQ(forger.Open(name), AttachError::kNone);
  forger.Control(producer.Lane() - 1u).owner.pid = kFreePid;
  Poll(bus, 20);
  EXPECT_FALSE(exits.Any());
  EXPECT_TRUE(producer.Publish(Stop{2, 2}));
  EXPECT_EQ(bus.ProcessBatch(8), 1U);
  producer.Detach();
  ASSERT_TRUE(PollUntilExit(bus, exits));
  EXPECT_FALSE(exits.seen.front().killed);  // a detach, told from a kill
}

// A pid reused: a killed consumer's and a killed producer's recorded pids
// are set to a process that runs (this one), as when the kernel hands the
// dead process's pid to another. The killed producer's lane is still handed
// back as killed, and a new consumer still takes the segment over.
TEST(ShmLivenessTest, APidReusedByARunningProcessDoesNotKeepTheDeadAlive) {
  const std::string name = UniqueName();
  sluice_test::ChildProcess consumer;
  std::string line;
  ASSERT_TRUE(StartPeer(consumer, {"hold", name}));
  ASSERT_TRUE(consumer.WaitForLine("ready", &line, kGuard));
  consumer.Kill(SIGKILL);
  Segment forger;
  Header* header = MapHeader(name, &forger);
  ASSERT_NE(header, nullptr);
  header->consumer_pid.store(::getpid());
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  EXPECT_TRUE(bus.TookOver());
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  sluice_test::ChildProcess producer;
  ASSERT_TRUE(StartPeer(producer, {"publish-threads", name, "1"}));
  ASSERT_TRUE(producer.WaitForLine("publishing", &line, kGuard)) << line;
  const std::size_t lane = Field(line, "lane") - 1;
  producer.Kill(SIGKILL);
  BusView<Layout> lanes;
  ASSERT_EQ(lanes.Open(name), AttachError::kNone);
  lanes.Control(lane).owner = sluice::ipc::ProcessIdentity::Self();
  ASSERT_TRUE(PollUntilExit(bus, exits));
  EXPECT_TRUE(exits.seen.front().killed);
}

// A killed producer's lane state word, which it could write while it ran:
// "free", a value no producer writes, or "detached". Its lane is still seen
// gone once it is killed (the role decides, not the word) and handed back,
// so the next producer gets it; the word tells only a kill from a detach.
// (Before, a lane whose killed producer wrote "free" or 7 there was never
// seen gone: no exit reported, the lane kept for ever, across takeovers.)
TEST(ShmLivenessTest, AKilledProducersForgedStateWordDoesNotKeepItsLane) {
  const std::uint32_t forged_states[] = {layout::kLaneFree, 7, layout::kLaneDetached};
  for (const std::uint32_t forged : forged_states) {
    SCOPED_TRACE("state word " + std::to_string(forged));
    const std::string name = UniqueName();
    Bus bus;
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    Exits exits;
    bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
    sluice_test::ChildProcess producer;
    std::string line;
    ASSERT_TRUE(StartPeer(producer, {"publish-threads", name, "1"}));
    ASSERT_TRUE(producer.WaitForLine("publishing", &line, kGuard)) << line;
    const std::size_t lane = Field(line, "lane") - 1;
    producer.Kill(SIGKILL);
    BusView<Layout> forger;
    ASSERT_EQ(forger.Open(name), AttachError::kNone);
    forger.Control(lane).state.store(forged);
    ASSERT_TRUE(PollUntilExit(bus, exits)) << "a killed producer is seen gone";
    EXPECT_EQ(exits.seen.front().lane, lane + 1);
    EXPECT_EQ(exits.seen.front().killed, forged != layout::kLaneDetached);
    // Handed back: a new producer gets that lane (the lowest free one).
    Producer next;
    ASSERT_EQ(next.Attach(name), AttachError::kNone);
    EXPECT_EQ(next.Lane(), lane + 1);
    EXPECT_TRUE(next.Publish(Stop{1, 1}));
    EXPECT_EQ(Poll(bus, 4), 1U);
  }
}

// A running producer writes "detached" into its lane's state word: the
// consumer does not take it for gone while its role is held (before, one
// look handed its lane back under it and its later publishes were never
// dispatched); what it publishes next is dispatched, and its real detach is
// reported as one.
TEST(ShmLivenessTest, ALiveProducerThatWritesDetachedKeepsItsLane) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  BusView<Layout> forger;
  ASSERT_EQ(forger.Open(name), AttachError::kNone);
  forger.Control(producer.Lane() - 1u).state.store(layout::kLaneDetached);
  Poll(bus, 20);
  EXPECT_FALSE(exits.Any());
  EXPECT_TRUE(producer.Publish(Stop{3, 3}));
  EXPECT_EQ(Poll(bus, 4), 1U);
  producer.Detach();
  ASSERT_TRUE(PollUntilExit(bus, exits));
  EXPECT_FALSE(exits.seen.front().killed);
}

// A running producer writes "free" into its lane's state word: it keeps its
// lane, and the statistics still count it and what it published (they read
// the header's active set, as liveness does; before, such a producer dropped
// out of producers_attached, ForEachProducer and `published`).
TEST(ShmLivenessTest, ALiveProducerThatWritesFreeIsStillCounted) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(producer.Publish(Stop{i, i}));
  BusView<Layout> forger;
  ASSERT_EQ(forger.Open(name), AttachError::kNone);
  forger.Control(producer.Lane() - 1u).state.store(layout::kLaneFree);
  EXPECT_EQ(Poll(bus, 4), 3U);
  const auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.producers_attached, 1U);
  EXPECT_EQ(stats.published[0] + stats.published[1] + stats.published[2], 3U);
  int listed = 0;
  bus.ForEachProducer([&listed](const sluice::ProducerStatisticsSnapshot&) { ++listed; });
  EXPECT_EQ(listed, 1);
}

// A consumer killed while it handed a lane back, after the lane left the
// active set and before its new object was free, leaves the lane in
// neither set, with its old object, which the old producer may still map
// and may have written "free" into. The consumer that takes over makes the
// lane anew: the next producer writes a new object, not the old one.
// (Before, a lane in neither set whose object read "free" was freed in
// place, so the next owner shared the old producer's object.)
TEST(ShmLivenessTest, ALaneLeftInNeitherSetIsMadeAnewAtTakeOver) {
  const std::string name = UniqueName();
  sluice_test::ChildProcess consumer;
  std::string line;
  ASSERT_TRUE(StartPeer(consumer, {"hold", name}));
  ASSERT_TRUE(consumer.WaitForLine("ready", &line, kGuard));
  consumer.Kill(SIGKILL);
  // The old objects, as the producer that kept its mapping holds them.
  BusView<Layout> old_owner;
  ASSERT_EQ(old_owner.Open(name), AttachError::kNone);
  Segment forger;
  Header* header = MapHeader(name, &forger);
  ASSERT_NE(header, nullptr);
  header->lanes_free.fetch_and(~std::uint64_t{1});
  header->lanes_active.fetch_and(~std::uint64_t{1});
  old_owner.Control(0).state.store(layout::kLaneFree);
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  ASSERT_TRUE(bus.TookOver());
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  ASSERT_EQ(producer.Lane(), 1U) << "lane 0 is free again";
  EXPECT_EQ(old_owner.Control(0).state.load(), layout::kLaneFree)
      << "the new owner's hand-out wrote the old object";
  EXPECT_TRUE(producer.Publish(Stop{4, 4}));
  EXPECT_EQ(Poll(bus, 4), 1U);
}

// The consumer's process closes the bus's descriptor (a close_range over
// descriptors it does not own) and opens another file under its number:
// the producers' roles are not read through the other file, so a live
// producer is not taken for gone (before, every live producer was reported
// killed and its lane reset under it).
TEST(ShmLivenessTest, ADescriptorClosedAndReusedDoesNotMakeLiveProducersGone) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  sluice_test::ChildProcess producer;
  std::string line;
  ASSERT_TRUE(StartPeer(producer, {"publish-threads", name, "1"}));
  ASSERT_TRUE(producer.WaitForLine("publishing", &line, kGuard)) << line;
  // The bus's descriptor: the one open of the segment in this process.
  struct stat segment {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &segment), 0);
  int bus_fd = -1;
  for (int fd = 3; fd < 1024 && bus_fd < 0; ++fd) {
    struct stat status {};
    if (::fstat(fd, &status) == 0 && status.st_dev == segment.st_dev &&
        status.st_ino == segment.st_ino) {
      bus_fd = fd;
    }
  }
  ASSERT_GE(bus_fd, 0);
  ASSERT_EQ(::close(bus_fd), 0);
  const int reused = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(reused, bus_fd);  // the lowest free number
  EXPECT_GT(Poll(bus, 200), 0U);
  EXPECT_FALSE(exits.Any());
  producer.Kill(SIGKILL);
  ::close(reused);
  // The bus's own descriptor was closed above, so its Close cannot tell the
  // names are still its own and leaves them (as it leaves a name another
  // consumer may hold): the test removes what it made.
  bus.Close();
  for (const std::string& part : {std::string(), std::string(".wake")}) {
    (void)::shm_unlink((name + part).c_str());
  }
  for (std::size_t lane = 0; lane < sluice::ipc::ShmBusTraits::kMaxProducers; ++lane) {
    (void)::shm_unlink((name + ".lane" + std::to_string(lane)).c_str());
  }
}

// A producer that calls exec is the same process, but its segment is closed
// (close-on-exec): its role drops, so its lane is handed back as killed
// while the new program runs, after what it published was dispatched.
TEST(ShmLivenessTest, AProducerThatExecsGivesItsLaneBack) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  std::uint64_t received = 0;
  (void)bus.Subscribe<Stop>([&received](const Stop&) { ++received; });
  sluice_test::ChildProcess producer;
  std::string line;
  ASSERT_TRUE(StartPeer(producer, {"exec-after", name}));
  ASSERT_TRUE(producer.WaitForLine("published", &line, kGuard)) << line;
  ASSERT_TRUE(PollUntilExit(bus, exits));
  EXPECT_EQ(received, 3U);
  EXPECT_TRUE(exits.seen.front().killed);
  EXPECT_EQ(exits.seen.front().lost, 0U);
  EXPECT_EQ(::kill(producer.Pid(), 0), 0);  // /bin/sleep, the same process, still runs
  producer.Kill(SIGKILL);
}

// The hand-out thread, held between sending a lane and closing its own
// copy of the lane's descriptor (lane_sent_seam): it waits for the test to
// say it is about to check, then for the check to return, 2 s at most.
// Until it closes, the role of a lane whose producer died is held by that
// copy; a check that can run then reads the dead producer as running.
std::atomic<bool> about_to_check{false};
std::atomic<bool> checked{false};
void HoldTheSentLaneOpen() {
  const auto guard = std::chrono::steady_clock::now() + kGuard;
  while (!about_to_check.load() && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!checked.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A producer killed right after its lane was sent, while the consumer's
// hand-out still holds its own copy of the lane's descriptor: the one
// CheckProducers the test makes after the producer was reaped reports it
// killed. (The hand-out delivers under the lock the check takes, so the
// check waits for the copy to be closed; were it not, the check would read
// the role held, and the exit would wait for a later check.)
TEST(ShmLivenessTest, OneCheckAfterAProducerDiedFindsItGoneWhileItsLaneIsStillBeingSent) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = std::chrono::hours(1);  // looks only when told
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  about_to_check = false;
  checked = false;
  layout::lane_sent_seam.store(&HoldTheSentLaneOpen);
  struct Unset {
    ~Unset() { layout::lane_sent_seam.store(nullptr); }
  } unset;
  sluice_test::ChildProcess producer;
  std::string line;
  ASSERT_TRUE(StartPeer(producer, {"die", name, "before-claim"}));
  ASSERT_TRUE(producer.WaitForLine("dying", &line, kGuard)) << line;
  const pid_t pid = producer.Pid();
  const int status = producer.Wait(kGuard);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  about_to_check = true;
  bus.CheckProducers();
  checked = true;
  // Only batches from here on: the exit is reported once what the producer
  // published (8 messages) is dispatched.
  std::uint64_t received = 0;
  const auto count = [&received](const sluice::MessageEnvelope<Payload>&) { ++received; };
  ASSERT_TRUE(DispatchWithUntil(bus, count, [&exits] { return exits.Any(); }))
      << "the dead producer was read as running";
  EXPECT_TRUE(exits.seen.front().killed);
  EXPECT_EQ(exits.seen.front().pid, pid);
  EXPECT_EQ(received, 8U);
}

// The offset of a time namespace, as /proc/self/timens_offsets gives it.
TEST(ShmHostClockTest, TheMonotonicOffsetIsReadFromTheOffsetsFile) {
  char path[] = "/tmp/sluice-timens-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "monotonic          -5        250\nboottime   1000000         0\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  EXPECT_EQ(sluice::ipc::HostMonotonicClock::ReadOffsetNanos(path),
            static_cast<std::uint64_t>(-5'000'000'000LL + 250));
  std::FILE* file = std::fopen(path, "w");
  ASSERT_NE(file, nullptr);
  std::fputs("monotonic 7 2000000000\n", file);  // nanoseconds out of range
  std::fclose(file);
  EXPECT_EQ(sluice::ipc::HostMonotonicClock::ReadOffsetNanos(path), 0U);
  ::unlink(path);
  EXPECT_EQ(sluice::ipc::HostMonotonicClock::ReadOffsetNanos("/nonexistent/timens_offsets"), 0U);
}

// ---- Namespaces, another user, a /proc that hides processes --------------

// Whether this process may make the namespaces the tests below need;
// otherwise why not, for the skip message.
std::string NamespacesUnavailable() {
  if (::geteuid() != 0) return "needs root (mount, PID and time namespaces)";
  if (::access("/usr/bin/unshare", X_OK) != 0) return "needs /usr/bin/unshare (util-linux)";
  if (::access("/usr/bin/setpriv", X_OK) != 0) return "needs /usr/bin/setpriv (util-linux)";
  const int status = std::system(
      "/usr/bin/unshare --mount --pid --time --fork --boottime 1000 /bin/sh -c "
      "'mount -t proc -o hidepid=invisible proc /proc' >/dev/null 2>&1");
  if (status != 0) return "unshare --mount --pid --time, or a hidepid /proc mount, was refused";
  return "";
}

// Where the peer runs: which namespaces it gets, and as whom.
struct Confinement {
  bool own_pid_namespace = false;
  bool other_user = false;  // nobody (65534)
};

// Starts the peer with `args` in new mount and time namespaces (its boot
// and monotonic clocks 1,000,000 s ahead: every start time it reads in
// /proc moves), a /proc mounted hidepid=invisible (it sees no process of
// another user), and as `confinement` asks.
bool StartConfinedPeer(sluice_test::ChildProcess& peer, const Confinement& confinement,
                       const std::vector<std::string>& args) {
  std::string command = "mount -t proc -o hidepid=invisible proc /proc && exec ";
  if (confinement.other_user) {
    command += "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  command += SLUICE_IPC_PEER;
  for (const std::string& arg : args) command += " '" + arg + "'";
  std::vector<std::string> argv{"/usr/bin/unshare", "--mount", "--time",      "--fork",
                                "--boottime",       "1000000", "--monotonic", "1000000"};
  if (confinement.own_pid_namespace) argv.emplace_back("--pid");
  argv.insert(argv.end(), {"/bin/sh", "-c", command});
  return peer.Start(argv, /*capture=*/true);
}

// Kills what unshare forked (the peer; with its own PID namespace, that
// namespace's first process, whose death ends every process in it), then
// unshare, which waits for it.
void KillConfined(sluice_test::ChildProcess& peer) {
  const std::string children =
      "/proc/" + std::to_string(peer.Pid()) + "/task/" + std::to_string(peer.Pid()) + "/children";
  std::ifstream list(children);
  pid_t child = 0;
  while (list >> child) (void)::kill(child, SIGKILL);
  peer.Kill(SIGKILL);
}

class ShmLivenessNamespaceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const std::string why = NamespacesUnavailable();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

// A second consumer that reads its /proc through other namespaces (a
// shifted boot clock, perhaps another PID namespace, other users' processes
// hidden) is refused while the first consumer runs, and takes over once it
// is killed.
TEST_P(ShmLivenessNamespaceTest, ASecondConsumerElsewhereNeverTakesOverALiveOne) {
  const Confinement confinement{/*own_pid_namespace=*/GetParam(), /*other_user=*/false};
  const std::string name = UniqueName();
  sluice_test::ChildProcess first;
  std::string line;
  ASSERT_TRUE(StartPeer(first, {"hold", name}));
  ASSERT_TRUE(first.WaitForLine("ready", &line, kGuard));
  {
    sluice_test::ChildProcess second;
    ASSERT_TRUE(StartConfinedPeer(second, confinement, {"create", name}));
    ASSERT_TRUE(second.WaitForLine("create=", &line, kGuard));
    EXPECT_EQ(Field(line, "create"), static_cast<std::uint64_t>(AttachError::kConsumerExists))
        << line;
    KillConfined(second);
  }
  first.Kill(SIGKILL);
  {
    sluice_test::ChildProcess second;
    ASSERT_TRUE(StartConfinedPeer(second, confinement, {"create", name}));
    ASSERT_TRUE(second.WaitForLine("create=", &line, kGuard));
    EXPECT_EQ(Field(line, "create"), static_cast<std::uint64_t>(AttachError::kNone)) << line;
    EXPECT_EQ(Field(line, "took_over"), 1U) << line;
    KillConfined(second);
  }
  Bus::RemoveName(name);
}

// A producer of another user, in other namespaces, sees this consumer
// alive (it publishes; none refused as kConsumerGone), and this consumer
// sees it alive (its lane is not handed back) until it is killed; then its
// lane is handed back as killed. Its stamps are on this process's clock,
// although its own CLOCK_MONOTONIC is 1,000,000 s ahead: each is within
// 1,000 s of this process's reading at dispatch (a bound on the clocks'
// agreement, a thousand times below the offset, not on any latency).
TEST_P(ShmLivenessNamespaceTest, AProducerElsewhereIsAliveUntilKilled) {
  const Confinement confinement{/*own_pid_namespace=*/GetParam(), /*other_user=*/true};
  const std::string name = UniqueName();
  sluice::ipc::ShmBusOptions options;
  options.permissions.mode = 0666;  // the other user's producer opens it
  Bus bus;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Exits exits;
  bus.OnProducerExit([&exits](const ProducerExit& exit) { exits.seen.push_back(exit); });
  StampCheck stamps;
  stamps.SubscribeTo(bus);
  sluice_test::ChildProcess producer;
  std::string line;
  ASSERT_TRUE(StartConfinedPeer(producer, confinement, {"publish-threads", name, "1"}));
  ASSERT_TRUE(producer.WaitForLine("publishing", &line, kGuard)) << line;
  // 200 looks for producers that left, with its messages flowing.
  EXPECT_GT(Poll(bus, 200), 0U);
  EXPECT_FALSE(exits.Any());
  EXPECT_GT(stamps.stamped, 0U);
  EXPECT_EQ(stamps.off_the_clock, 0U) << "of " << stamps.stamped;
  KillConfined(producer);
  ASSERT_TRUE(PollUntilExit(bus, exits));
  EXPECT_TRUE(exits.seen.front().killed);
}

// A producer that moves its future children into a time namespace of
// their own (unshare(CLONE_NEWTIME), offsets 1,000,000 s ahead) stays in its
// own: its stamps are on this process's clock, not moved by its children's
// offset (which /proc/self/timens_offsets shows it), each within 1,000 s of
// this process's reading at dispatch.
TEST(ShmHostClockTest, AProducerThatUnsharesTimeForItsChildrenKeepsItsOwnClock) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (unshare(CLONE_NEWTIME))";
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  StampCheck stamps;
  stamps.SubscribeTo(bus);
  sluice_test::ChildProcess producer;
  std::string line;
  ASSERT_TRUE(StartPeer(producer, {"publish-after-unshare-time", name, "20"}));
  ASSERT_TRUE(producer.WaitForLine("published", &line, kGuard)) << line;
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (stamps.stamped < 20 && std::chrono::steady_clock::now() < deadline) Poll(bus, 1);
  EXPECT_EQ(stamps.stamped, 20U);
  EXPECT_EQ(stamps.off_the_clock, 0U);
}

// A producer that had read its clock's offset (it attached) moves its
// future children into a time namespace 1,000,000 s ahead and forks: the
// child's Attach reads the child's own offset, so its stamps are on this
// process's clock, each within 1,000 s of this process's reading at
// dispatch. (Before, the child kept its parent's offset, read once per
// process: its stamps were 1,000,000 s ahead, and a latency read from them
// was that far off.)
// Run twice: with ordinary pids, and with the parent and the child each pid
// 1 of a PID namespace of its own (nested containers), so that one pid
// names both (before the offset was keyed by the namespaces, a pid-keyed
// read let that child keep its parent's offset).
class ShmHostClockForkTest : public ::testing::TestWithParam<bool> {};

TEST_P(ShmHostClockForkTest, AForkedChildInAnotherTimeNamespaceReadsItsOwnOffset) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (unshare(CLONE_NEWTIME))";
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  StampCheck stamps;
  stamps.SubscribeTo(bus);
  sluice_test::ChildProcess producer;
  std::string line;
  std::vector<std::string> arguments = {"fork-after-unshare-time", name, "20"};
  if (GetParam()) arguments.push_back("pid1");
  ASSERT_TRUE(StartPeer(producer, arguments));
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (stamps.stamped < 20 && std::chrono::steady_clock::now() < deadline) Poll(bus, 1);
  ASSERT_TRUE(producer.WaitForLine("published", &line, kGuard)) << line;
  EXPECT_EQ(stamps.stamped, 20U);
  EXPECT_EQ(stamps.off_the_clock, 0U);
}

INSTANTIATE_TEST_SUITE_P(Pids, ShmHostClockForkTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("EachPidOne")
                                             : std::string("OrdinaryPids");
                         });

INSTANTIATE_TEST_SUITE_P(PidNamespace, ShmLivenessNamespaceTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("OwnPidNamespace")
                                             : std::string("SamePidNamespace");
                         });

}  // namespace
}  // namespace liveness_test
