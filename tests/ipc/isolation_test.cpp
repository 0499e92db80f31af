// Producers isolated from each other: each maps its own lane and nothing
// of another's, by the kernel's rules (docs/ipc.md, "Security"). A producer
// of another user than the consumer's cannot open the header or any lane
// by name, maps only its own lane (and the header read-only), and cannot
// pass another lane off as its own; a producer that kept its lane mapped
// after it left reaches nothing of the next owner's; the hand-out gives a
// lane only for a writable open of the bus's wake page.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <sluice/detail/test_access.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bus_view.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace isolation_test {
namespace {

using namespace sluice_ipc_test;
using sluice::MessagePriority;
using sluice::ipc::AttachError;
using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;

std::string OtherUserUnavailable() {
  if (::geteuid() != 0) return "needs root, to run a producer as another user";
  if (::access("/usr/bin/setpriv", X_OK) != 0) return "needs /usr/bin/setpriv (util-linux)";
  return "";
}

// A Unix socket's address at `path`.
sockaddr_un SocketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}
// A socket listening at `path` that never answers; -1 when refused.
int ListenSilently(const std::string& path) {
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const sockaddr_un address = SocketAddress(path);
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener, 4) != 0) {
    return -1;
  }
  return listener;
}
// The wake page's hand-out address, written over as a producer may, and
// put back when this goes.
class RedirectedHandOut {
 public:
  explicit RedirectedHandOut(sluice::ipc::detail::HandoutAddress& address) : address_(address) {
    for (int i = 0; i < 2; ++i) own_[i] = address.token[i].load();
  }
  ~RedirectedHandOut() {
    for (int i = 0; i < 2; ++i) address_.token[i].store(own_[i]);
  }
  RedirectedHandOut(const RedirectedHandOut&) = delete;
  RedirectedHandOut& operator=(const RedirectedHandOut&) = delete;
  // Points it at the address `other` names.
  void To(const sluice::ipc::detail::HandoutAddress& other) {
    for (int i = 0; i < 2; ++i) address_.token[i].store(other.token[i].load());
  }
  // Points it at a fresh address, whose socket path it returns.
  std::string ToFresh() {
    (void)sluice::ipc::detail::DrawHandoutAddress(&address_);
    return sluice::ipc::detail::HandoutSocketPath(address_);
  }

 private:
  sluice::ipc::detail::HandoutAddress& address_;
  std::uint64_t own_[2] = {0, 0};
};

// What was dispatched: each message's lane, sender id and Stop reason.
struct Seen {
  std::uint16_t lane;
  std::uint32_t sender;
  std::uint32_t reason;
};

// A producer of user nobody, attached to a bus that admits everyone (mode
// 0666), beside this process's producer: it opens no part by name (the
// header and the lanes are the consumer's user's alone), maps only its own
// lane and the header read-only, and what it publishes with this
// producer's sender id arrives under its own lane.
TEST(ShmIsolationTest, AProducerOfAnotherUserReachesOnlyItsOwnLane) {
  const std::string why = OtherUserUnavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string name = UniqueName();
  sluice::ipc::ShmBusOptions options;
  options.permissions.mode = 0666;
  Bus bus;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  std::vector<Seen> seen;
  auto handle = bus.Subscribe<Stop>([&seen](const Stop& stop, const sluice::MessageHeader& header) {
    seen.push_back(Seen{header.lane, header.sender_id, stop.reason});
  });
  ASSERT_TRUE(handle.IsValid());
  Producer mine;
  ASSERT_EQ(mine.Attach(name, "mine"), AttachError::kNone);
  for (std::uint64_t seq = 0; seq < 10; ++seq) {
    ASSERT_TRUE(mine.PublishWithPriority(Stop{1, seq}, 1, MessagePriority::HIGH));
  }
  sluice_test::ChildProcess intruder;
  ASSERT_TRUE(intruder.Start({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                              "--clear-groups", SLUICE_IPC_PEER, "probe-isolation", name},
                             /*capture=*/true));
  std::string line;
  ASSERT_TRUE(intruder.WaitForLine("lane=", &line, kGuard)) << line;
  EXPECT_EQ(intruder.Wait(kGuard), 0);
  EXPECT_EQ(Field(line, "opened"), 0u) << "opened a part by name: " << line;
  EXPECT_EQ(Field(line, "other_lanes_mapped"), 0u) << line;
  EXPECT_EQ(Field(line, "own_lane_mapped"), 1u) << line;
  EXPECT_EQ(Field(line, "header_writable"), 0u) << line;
  EXPECT_EQ(Field(line, "published"), 10u) << line;
  const auto intruder_lane = static_cast<std::uint16_t>(Field(line, "lane"));
  ASSERT_NE(intruder_lane, mine.Lane());
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (seen.size() < 20 && std::chrono::steady_clock::now() < deadline) {
    (void)bus.ProcessBatch();
  }
  ASSERT_EQ(seen.size(), 20u);
  int mine_seen = 0;
  for (const Seen& message : seen) {
    EXPECT_EQ(message.sender, 1u);  // a claim the intruder may make
    if (message.lane == mine.Lane()) {
      EXPECT_EQ(message.reason, 1u) << "the intruder's message arrived under this lane";
      ++mine_seen;
    } else {
      EXPECT_EQ(message.lane, intruder_lane);
      EXPECT_EQ(message.reason, 2u);
    }
  }
  EXPECT_EQ(mine_seen, 10);
}

// A producer that detached but kept its lane mapped (as a hostile one can:
// it only has to keep its own mapping) writes over all of it: the next
// owner of that lane number got a new object, and its messages arrive
// intact.
TEST(ShmIsolationTest, AProducerThatKeptItsLaneMappedReachesNothingOfTheNextOwner) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  std::uint64_t intact = 0;
  std::uint64_t count = 0;
  auto handle = bus.Subscribe<Stop>([&](const Stop& stop) {
    ++count;
    if (stop.reason == 3) ++intact;
  });
  ASSERT_TRUE(handle.IsValid());
  Producer first;
  ASSERT_EQ(first.Attach(name), AttachError::kNone);
  const std::size_t lane = first.Lane() - 1u;
  BusView<Layout> kept;  // the lane's object as the first owner had it
  ASSERT_EQ(kept.Open(name), AttachError::kNone);
  first.Detach();
  bus.CheckProducers();  // handed back
  Producer second;
  ASSERT_EQ(second.Attach(name), AttachError::kNone);
  ASSERT_EQ(second.Lane() - 1u, lane) << "the test needs the same lane number";
  BusView<Layout> now;
  ASSERT_EQ(now.Open(name), AttachError::kNone);
  EXPECT_NE(kept.LaneObject(lane).Identity().inode, now.LaneObject(lane).Identity().inode);
  const auto part = kept.PartAt(2 + lane);
  for (std::uint64_t round = 0; round < 3; ++round) {
    std::memset(part.bytes, 0xA5, part.size);
    for (std::uint64_t seq = 0; seq < 5; ++seq) {
      ASSERT_TRUE(second.PublishWithPriority(Stop{3, seq}, 2, MessagePriority::LOW));
    }
    std::memset(part.bytes, 0x5A, part.size);
    EXPECT_EQ(bus.ProcessBatch(), 5u);
  }
  EXPECT_EQ(count, 15u);
  EXPECT_EQ(intact, 15u);
  EXPECT_EQ(bus.GetStatistics().corrupt, 0u);
}

// A bus whose Stop messages are counted, and a producer attached to it:
// for the consumer's checks of what a producer wrote into its own lane.
class ShmRecheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    handle = bus.Subscribe<Stop>([this](const Stop& stop) {
      ++dispatched;
      if (stop.seq > highest) highest = stop.seq;
    });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  }
  const std::string name = UniqueName();
  Bus bus;
  std::uint64_t dispatched = 0;
  std::uint64_t highest = 0;  // the highest seq dispatched
  sluice::SubscriptionHandle handle;
  Producer producer;
};

// The consumer's positions are in its own process, and its released ones in
// the header, which no producer can write: taking a lane's messages writes
// nothing into the lane's rings, and a producer that writes back every byte
// of its lane as it was before they were taken (which would rewind any
// position kept there) gets none of them dispatched again; its next
// message is dispatched once.
TEST_F(ShmRecheckTest, AProducerThatRewindsItsLaneGetsNothingDispatchedAgain) {
  constexpr std::uint64_t kSent = 10;
  for (std::uint64_t seq = 1; seq <= kSent; ++seq) {
    ASSERT_TRUE(producer.PublishWithPriority(Stop{1, seq}, 3, MessagePriority::HIGH));
  }
  BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  const auto lane = view.PartAt(2 + producer.Lane() - 1u);
  const std::vector<unsigned char> before(lane.bytes, lane.bytes + lane.size);
  while (bus.ProcessBatch() != 0) {
  }
  ASSERT_EQ(dispatched, kSent);
  EXPECT_EQ(std::memcmp(before.data() + Layout::kRingsOffset, lane.bytes + Layout::kRingsOffset,
                        Layout::kLoansOffset - Layout::kRingsOffset),
            0)
      << "the consumer wrote into its producer's rings";
  std::memcpy(lane.bytes, before.data(), lane.size);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(dispatched, kSent);
  ASSERT_TRUE(producer.PublishWithPriority(Stop{1, kSent + 1}, 3, MessagePriority::HIGH));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(dispatched, kSent + 1);
  EXPECT_EQ(highest, kSent + 1);
}

// A producer that skips admission (its own code: it claims past the fill
// limit, straight on its LOW ring) gets nothing past LOW's threshold
// dispatched: the consumer counts each message past the threshold in
// `over_limit` and drops it (the ones claimed last, which admission would
// have refused), and dispatches the rest.
TEST_F(ShmRecheckTest, MessagesPastTheirPrioritysThresholdAreCountedAndDropped) {
  const sluice::Position low_limit =
      sluice::FillLimit(sluice::AdmissionThresholds{}.low_percent, kCapacity);
  sluice::Position admitted = 0;
  while (producer.PublishWithPriority(Stop{4, admitted}, 3, MessagePriority::LOW)) ++admitted;
  ASSERT_EQ(admitted, low_limit);
  // Five more, claimed on the LOW ring alone: no fill claim, no limit.
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  auto& low = rings.Ring(0);
  constexpr sluice::Position kPast = 5;
  for (sluice::Position i = 0; i < kPast; ++i) {
    sluice::Position slot = 0;
    ASSERT_TRUE(low.TryClaimExactly(kCapacity, 1, &slot));
    sluice::MessageHeader header;
    header.sender_id = 3;
    header.priority = MessagePriority::LOW;
    new (low.Storage(slot)) sluice::MessageEnvelope<Payload>{header, Stop{4, admitted + i}};
    low.Publish(slot);
  }
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_EQ(bus.GetStatistics().over_limit, kPast);
  EXPECT_EQ(dispatched, low_limit);
  // The ones past the threshold are the five claimed last, not the first.
  EXPECT_EQ(highest, low_limit - 1);
  // A producer that keeps to admission, filled to every threshold in
  // turn, loses nothing.
  Producer honest;
  ASSERT_EQ(honest.Attach(name), AttachError::kNone);
  std::uint64_t published = 0;
  for (const MessagePriority priority :
       {MessagePriority::LOW, MessagePriority::MEDIUM, MessagePriority::HIGH}) {
    while (honest.PublishWithPriority(Stop{5, published}, 4, priority)) ++published;
  }
  ASSERT_GT(published, low_limit);
  const std::uint64_t before = dispatched;
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_EQ(dispatched - before, published);
  EXPECT_EQ(bus.GetStatistics().over_limit, kPast);
}

// The consumer reads a ring's claims again only every kCapacity / 8
// messages it takes there once it has caught up: a producer that skips
// admission in a burst right after such a read (one that found the lane
// empty) gets every message up to the threshold dispatched, and no more
// than kCapacity / 8 - 1 past it; every other message of the burst is
// counted in `over_limit`, the last claimed.
TEST_F(ShmRecheckTest, ABurstPastTheThresholdRightAfterARecheckGetsAtMostAStrideThrough) {
  const sluice::Position low_limit =
      sluice::FillLimit(sluice::AdmissionThresholds{}.low_percent, kCapacity);
  constexpr sluice::Position kStride = kCapacity / 8;
  ASSERT_TRUE(producer.PublishWithPriority(Stop{4, 0}, 3, MessagePriority::LOW));
  ASSERT_EQ(bus.ProcessBatch(), 1u);  // the consumer reads the LOW ring's claims
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  auto& low = rings.Ring(0);
  constexpr sluice::Position kBurst = kCapacity - 4;
  for (sluice::Position i = 1; i <= kBurst; ++i) {
    sluice::Position slot = 0;
    ASSERT_TRUE(low.TryClaimExactly(kCapacity, 1, &slot));
    sluice::MessageHeader header;
    header.sender_id = 3;
    new (low.Storage(slot)) sluice::MessageEnvelope<Payload>{header, Stop{4, i}};
    low.Publish(slot);
  }
  while (bus.ProcessBatch() != 0) {
  }
  const std::uint64_t through = dispatched - 1;
  EXPECT_GE(through, low_limit);
  EXPECT_LE(through, low_limit + kStride - 1);
  EXPECT_EQ(bus.GetStatistics().over_limit, kBurst - through);
  EXPECT_EQ(highest, through);  // the ones dropped are the last claimed
}

// Slots a producer writes and marks past its ring's claims, right after
// the consumer read them: the ones inside the read's window (kCapacity / 8
// past the position it read at) are dispatched, the rest counted in
// `over_limit` and dropped.
TEST_F(ShmRecheckTest, SlotsNeverClaimedGetAtMostAStrideThroughAndTheRestAreCounted) {
  constexpr sluice::Position kStride = kCapacity / 8;
  ASSERT_TRUE(producer.PublishWithPriority(Stop{4, 0}, 3, MessagePriority::LOW));
  ASSERT_EQ(bus.ProcessBatch(), 1u);  // the consumer reads the LOW ring's claims
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  auto& low = rings.Ring(0);
  constexpr sluice::Position kWritten = 10;
  static_assert(kWritten > kStride, "some of them lie past the window");
  for (sluice::Position slot = 1; slot <= kWritten; ++slot) {
    sluice::MessageHeader header;
    new (low.Storage(slot)) sluice::MessageEnvelope<Payload>{header, Stop{4, slot}};
    low.Publish(slot);  // never claimed: the tail stays at 1
  }
  while (bus.ProcessBatch() != 0) {
  }
  const std::uint64_t through = dispatched - 1;
  EXPECT_LE(through, kStride - 1);
  EXPECT_EQ(bus.GetStatistics().over_limit, kWritten - through);
}

// A producer that skips admission on every ring at once (39 LOW, 52 MEDIUM
// and 64 HIGH claimed straight on its rings, in a lane of 64 slots) gets no
// more dispatched than admission lets into an empty lane (HIGH's threshold)
// and a stride per ring; every other message is counted in `over_limit`.
// HIGH is judged before LOW or MEDIUM is taken: the rings below are read
// when HIGH is, not counted from an earlier read.
TEST_F(ShmRecheckTest, ABurstOnEveryRingGetsNoMoreThroughThanAdmissionLetsIntoTheLane) {
  const sluice::Position high_limit =
      sluice::FillLimit(sluice::AdmissionThresholds{}.high_percent, kCapacity);
  constexpr sluice::Position kStride = kCapacity / 8;
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  const sluice::Position burst[3] = {39, 52, kCapacity};
  std::uint64_t seq = 0;
  for (std::size_t ring = 0; ring < 3; ++ring) {
    for (sluice::Position i = 0; i < burst[ring]; ++i) {
      sluice::Position slot = 0;
      ASSERT_TRUE(rings.Ring(ring).TryClaimExactly(kCapacity, 1, &slot));
      sluice::MessageHeader header;
      header.sender_id = 3;
      new (rings.Ring(ring).Storage(slot)) sluice::MessageEnvelope<Payload>{header, Stop{4, ++seq}};
      rings.Ring(ring).Publish(slot);
    }
  }
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_LE(dispatched, high_limit + 3 * (kStride - 1));
  EXPECT_EQ(dispatched + bus.GetStatistics().over_limit, seq);
}

// Sends a request to the bus's hand-out with `proof` (-1: none) and
// returns the answer's error, or -1 when no answer came.
int AskWith(const std::string& path, int proof,
            std::uint64_t magic = sluice::ipc::detail::kHandoutMagic) {
  const sockaddr_un address = SocketAddress(path);
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (socket < 0) return -1;
  sluice::ipc::detail::SetTimeouts(socket, std::chrono::seconds(10));
  int answer = -1;
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
    sluice::ipc::detail::LaneRequest request;
    request.magic = magic;
    request.fingerprint = Layout::Expected();
    if (sluice::ipc::detail::SendWithDescriptors(socket, &request, sizeof(request), proof, -1)) {
      sluice::ipc::detail::LaneReply reply;
      int fds[2];
      const int kept =
          sluice::ipc::detail::ReceiveWithDescriptors(socket, &reply, sizeof(reply), fds, 2);
      for (int i = 0; i < kept; ++i) ::close(fds[i]);
      if (kept >= 0) answer = static_cast<int>(reply.error);
    }
  }
  ::close(socket);
  return answer;
}

// The hand-out gives a lane for a writable open of the bus's own wake page,
// and for nothing else: no descriptor, another file, the wake page opened
// read-only, or bytes that are no request (no answer at all).
TEST(ShmIsolationTest, TheHandOutGivesALaneOnlyForAWritableOpenOfTheWakePage) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  const int writable = ::shm_open((name + ".wake").c_str(), O_RDWR | O_CLOEXEC, 0);
  const int read_only = ::shm_open((name + ".wake").c_str(), O_RDONLY | O_CLOEXEC, 0);
  const int other = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(writable, 0);
  ASSERT_GE(read_only, 0);
  ASSERT_GE(other, 0);
  BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  const std::string path = sluice::ipc::detail::HandoutSocketPath(view.Wake()->handout);
  const int denied = static_cast<int>(AttachError::kPermissionDenied);
  EXPECT_EQ(AskWith(path, -1), denied);
  EXPECT_EQ(AskWith(path, other), denied);
  EXPECT_EQ(AskWith(path, read_only), denied);
  EXPECT_EQ(AskWith(path, writable, 0x1234), -1);
  EXPECT_EQ(AskWith(path, writable), static_cast<int>(AttachError::kNone));
  // That lane's descriptors were closed unread: its producer is gone, and
  // the lane comes back as a killed producer's once the hand-out has closed
  // its own copy too (right after its answer went out).
  std::vector<sluice::ipc::ProducerExit> exits;
  bus.OnProducerExit([&exits](const sluice::ipc::ProducerExit& exit) { exits.push_back(exit); });
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (exits.empty() && std::chrono::steady_clock::now() < deadline) {
    bus.CheckProducers();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].killed);
  EXPECT_EQ(exits[0].lost, 0u);
  ::close(writable);
  ::close(read_only);
  ::close(other);
}

// A bus, a view of it, and its hand-out's address.
class ShmHandOutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    ASSERT_EQ(view.Open(name), AttachError::kNone);
    address = SocketAddress(sluice::ipc::detail::HandoutSocketPath(view.Wake()->handout));
  }
  const std::string name = UniqueName();
  Bus bus;
  BusView<Layout> view;
  sockaddr_un address{};
};

// Clients that connect and send nothing (a hundred, held open) do not keep
// a producer that sends its request from being answered: the hand-out waits
// on every connection at once, drops a silent one after a second, and drops
// the oldest when too many wait.
TEST_F(ShmHandOutTest, SilentClientsDoNotKeepAProducerFromAttaching) {
  std::vector<int> silent;
  for (int i = 0; i < 100; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    silent.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    Producer producer;
    EXPECT_EQ(producer.Attach(name), AttachError::kNone) << "round " << round;
  }
  for (const int fd : silent) ::close(fd);
}

// A connection that sends nothing is dropped by the hand-out (after its
// second): the client sees its end closed, and a producer then attaches.
TEST_F(ShmHandOutTest, AConnectionThatSendsNothingIsDropped) {
  const int silent = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(silent, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  pollfd watched{silent, POLLIN, 0};
  ASSERT_EQ(::poll(&watched, 1, static_cast<int>(kGuard.count() * 1000)), 1)
      << "the hand-out kept a silent connection";
  char byte = 0;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);  // closed by the hand-out, nothing sent
  ::close(silent);
  Producer producer;
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
}

// Two buses of one consumer's user, and a view of each.
class ShmTwoBusesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(bus.Create(name), AttachError::kNone);
    ASSERT_EQ(other.Create(other_name), AttachError::kNone);
    ASSERT_EQ(view.Open(name), AttachError::kNone);
    ASSERT_EQ(other_view.Open(other_name), AttachError::kNone);
  }
  const std::string name = UniqueName();
  const std::string other_name = UniqueName();
  Bus bus;
  Bus other;
  BusView<Layout> view;
  BusView<Layout> other_view;
};

// The wake page names where the hand-out listens, and producers may write
// it: pointed at the hand-out of another bus, that bus refuses the proof (an
// open of another wake page); pointed at a socket of another user, Attach
// refuses who answers. Either way nothing is attached, and the right
// address attaches again.
TEST_F(ShmTwoBusesTest, AttachRefusesAHandOutThatIsNotItsBusesConsumer) {
  Producer producer;
  {
    RedirectedHandOut redirected(view.Wake()->handout);
    redirected.To(other_view.Wake()->handout);
    EXPECT_EQ(producer.Attach(name), AttachError::kPermissionDenied);
    EXPECT_FALSE(producer.IsAttached());
    if (::geteuid() == 0) {
      // A listener of user nobody at an address written into the wake page.
      const std::string path = redirected.ToFresh();
      int ready[2];
      ASSERT_EQ(::pipe(ready), 0);
      const pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0 || ListenSilently(path) < 0) ::_exit(1);
        (void)!::write(ready[1], "r", 1);
        ::pause();
        ::_exit(0);
      }
      char byte = 0;
      ASSERT_EQ(::read(ready[0], &byte, 1), 1);
      EXPECT_EQ(producer.Attach(name), AttachError::kUntrustedSegment);
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      ::unlink(path.c_str());
      ::close(ready[0]);
      ::close(ready[1]);
    }
  }
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
}

// A listener of the consumer's own user at the wake page's address that
// never answers: Attach gives up after its answer timeout, as kNoAnswer,
// and attaches nothing.
TEST(ShmIsolationTest, AHandOutThatNeverAnswersIsNoAnswer) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  Producer producer;
  {
    RedirectedHandOut redirected(view.Wake()->handout);
    const std::string path = redirected.ToFresh();
    const int listener = ListenSilently(path);
    ASSERT_GE(listener, 0);
    // A short limit: the consumer's socket never answers, however long.
    EXPECT_EQ(producer.Attach(name, nullptr, std::chrono::milliseconds(200)),
              AttachError::kNoAnswer);
    // None, or less than none, is a millisecond (the socket's zero would
    // wait for ever).
    EXPECT_EQ(producer.Attach(name, nullptr, std::chrono::milliseconds(0)), AttachError::kNoAnswer);
    EXPECT_EQ(producer.Attach(name, nullptr, std::chrono::milliseconds(-5)),
              AttachError::kNoAnswer);
    // Its queue of connections filled (a stopped consumer, or a flood):
    // the connect itself waits, and gives up as kNoAnswer too.
    std::vector<int> queued;
    for (int i = 0; i < 64; ++i) {
      const int client = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      ASSERT_GE(client, 0);
      const sockaddr_un address = SocketAddress(path);
      const bool in =
          ::connect(client, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
      queued.push_back(client);
      if (!in) break;  // the queue is full
    }
    EXPECT_EQ(producer.Attach(name, nullptr, std::chrono::milliseconds(100)),
              AttachError::kNoAnswer);
    for (const int client : queued) ::close(client);
    EXPECT_FALSE(producer.IsAttached());
    ::close(listener);
    ::unlink(path.c_str());
  }
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
}

// RemoveName takes every name a bus whose consumer was killed has: its
// header's, its wake page's, each lane's, and its hand-out socket; no
// producer attaches by that name after, and the next consumer makes the
// bus anew rather than take it over.
TEST(ShmIsolationTest, RemoveNameTakesEveryNameOfTheBus) {
  const std::string name = UniqueName();
  ASSERT_TRUE(LeaveKilledConsumersSegment(name));
  BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  const std::string socket = sluice::ipc::detail::HandoutSocketPath(view.Wake()->handout);
  const std::string directory = sluice::ipc::kSharedMemoryDirectory;
  std::vector<std::string> names{directory + name, directory + name + ".wake", socket};
  for (std::size_t lane = 0; lane < Layout::kLanes; ++lane) {
    names.push_back(directory + name + ".lane" + std::to_string(lane));
  }
  struct stat status {};
  for (const std::string& path : names) ASSERT_EQ(::lstat(path.c_str(), &status), 0) << path;
  Bus::RemoveName(name);
  for (const std::string& path : names) {
    EXPECT_NE(::lstat(path.c_str(), &status), 0) << path << " is still there";
  }
  Producer producer;
  EXPECT_EQ(producer.Attach(name), AttachError::kNotFound);
  Bus next;
  ASSERT_EQ(next.Create(name), AttachError::kNone);
  EXPECT_FALSE(next.TookOver());
}

// A killed consumer's bus whose wake page was given a wider mode than the
// next consumer asks is left alone, as an untrusted header is
// (kUntrustedSegment; its names stay); one that lost a lane's name cannot
// be taken over: its names are removed and the next Create makes it anew.
TEST(ShmIsolationTest, ABusWithAPartUntrustedOrMissingIsNotTakenOver) {
  const std::string name = UniqueName();
  ASSERT_TRUE(LeaveKilledConsumersSegment(name));
  const std::string directory = sluice::ipc::kSharedMemoryDirectory;
  ASSERT_EQ(::chmod((directory + name + ".wake").c_str(), 0666), 0);
  Bus bus;
  EXPECT_EQ(bus.Create(name), AttachError::kUntrustedSegment);
  struct stat status {};
  EXPECT_EQ(::lstat((directory + name).c_str(), &status), 0) << "an untrusted bus was removed";
  ASSERT_EQ(::chmod((directory + name + ".wake").c_str(), 0600), 0);
  ASSERT_EQ(::unlink((directory + name + ".lane3").c_str()), 0);
  EXPECT_EQ(bus.Create(name), AttachError::kNotReady);
  EXPECT_NE(::lstat((directory + name).c_str(), &status), 0);
  EXPECT_NE(::lstat((directory + name + ".wake").c_str(), &status), 0);
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  EXPECT_FALSE(bus.TookOver());
  Producer producer;
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
}

// A hand-out of the parts' own user at the wake page's address (a process
// of that user, or one a producer pointed the page at) that hands out
// another bus's header and lane: Attach refuses them before it maps them
// (they are not the files its bus's names hold).
TEST_F(ShmTwoBusesTest, AttachRefusesAnotherBusesPartsWhoeverHandsThemOut) {
  Producer producer;
  {
    RedirectedHandOut redirected(view.Wake()->handout);
    const std::string path = redirected.ToFresh();
    const int listener = ListenSilently(path);
    ASSERT_GE(listener, 0);
    std::thread impostor([&] {
      // Bounded: a producer that never connected leaves the test failing,
      // not waiting.
      pollfd incoming{listener, POLLIN, 0};
      if (::poll(&incoming, 1, static_cast<int>(kGuard.count() * 1000)) != 1) return;
      const int peer = ::accept(listener, nullptr, nullptr);
      sluice::ipc::detail::LaneRequest request;
      int proof = -1;
      (void)sluice::ipc::detail::ReceiveWithDescriptors(peer, &request, sizeof(request), &proof, 1);
      if (proof >= 0) ::close(proof);
      const int header = ::shm_open(other_name.c_str(), O_RDONLY | O_CLOEXEC, 0);
      const int lane = ::shm_open((other_name + ".lane0").c_str(), O_RDWR | O_CLOEXEC, 0);
      sluice::ipc::detail::LaneReply reply;
      (void)sluice::ipc::detail::SendWithDescriptors(peer, &reply, sizeof(reply), header, lane);
      ::close(header);
      ::close(lane);
      ::close(peer);
    });
    EXPECT_EQ(producer.Attach(name), AttachError::kUntrustedSegment);
    EXPECT_FALSE(producer.IsAttached());
    impostor.join();
    ::close(listener);
    ::unlink(path.c_str());
  }
  EXPECT_EQ(producer.Attach(name), AttachError::kNone);
}

// A producer that writes its lane's fill cursor far ahead makes its own
// lane read full, no more: the gauges read a fill of at most kCapacity.
TEST_F(ShmRecheckTest, ALanesFillIsReadAsAtMostTheCapacity) {
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  sluice::detail::TestAccess::CursorTail(rings.Fill()).fetch_add(sluice::Position{1} << 40);
  EXPECT_EQ(bus.QueueDepth(), kCapacity);
  EXPECT_DOUBLE_EQ(bus.QueueUtilizationPercent(), 100.0);
  EXPECT_EQ(bus.GetBackpressureLevel(), sluice::BackpressureLevel::FULL);
}

// A message's priority at the consumer is its ring's, whatever its producer
// wrote in its header: a producer that labels the messages of its HIGH ring
// LOW gets them dispatched, and counted, as HIGH.
TEST(ShmIsolationTest, AMessagesPriorityIsItsRings) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  std::vector<MessagePriority> seen;
  auto handle = bus.Subscribe<Stop>([&seen](const Stop&, const sluice::MessageHeader& header) {
    seen.push_back(header.priority);
  });
  ASSERT_TRUE(handle.IsValid());
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  for (std::uint64_t seq = 0; seq < 4; ++seq) {
    ASSERT_TRUE(producer.PublishWithPriority(Stop{6, seq}, 3, MessagePriority::HIGH));
  }
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  auto& high = rings.Ring(2);
  for (sluice::Position slot = 0; slot < 4; ++slot) {
    auto* envelope = static_cast<sluice::MessageEnvelope<Payload>*>(high.Storage(slot));
    envelope->header.priority = MessagePriority::LOW;
  }
  EXPECT_EQ(bus.ProcessBatch(), 4u);
  ASSERT_EQ(seen.size(), 4u);
  for (const MessagePriority priority : seen) EXPECT_EQ(priority, MessagePriority::HIGH);
  EXPECT_EQ(bus.GetStatistics().high_priority_processed, 4u);
}

// A producer that writes and marks a slot its ring never claimed (so that
// no count of claims shows it) gets it counted in `over_limit` and dropped.
TEST_F(ShmRecheckTest, AMessageInASlotNeverClaimedIsDropped) {
  BusView<Layout> lane;
  ASSERT_EQ(lane.Open(name), AttachError::kNone);
  LaneRings<Layout> rings(lane.Base(), producer.Lane() - 1u);
  auto& low = rings.Ring(0);
  ASSERT_EQ(low.ClaimedTail(), 0u);
  sluice::MessageHeader header;
  header.priority = MessagePriority::LOW;
  new (low.Storage(0)) sluice::MessageEnvelope<Payload>{header, Stop{7, 0}};
  low.Publish(0);  // never claimed: the tail stays at 0
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(dispatched, 0u);
  EXPECT_EQ(bus.GetStatistics().over_limit, 1u);
}

}  // namespace
}  // namespace isolation_test
