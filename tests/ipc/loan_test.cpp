// Loans across processes: 4 KB and 64 KB frames written once by a producer
// process into blocks of the segment and read in place by the consumer;
// blocks lent, given back after dispatch, and all made free again when a
// producer killed holding some is handed on; a block number out of range
// counted as corrupt. Deadlines only guard against hangs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bus_view.hpp"
#include "child_process.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace loan_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice::ipc::Loaned;
using sluice_ipc_test::DispatchUntil;
using sluice_ipc_test::DispatchWithUntil;
using sluice_ipc_test::Field;
using sluice_ipc_test::Frame4K;
using sluice_ipc_test::Frame64K;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::kLoanCapacity;
using sluice_ipc_test::LoanPayload;
using sluice_ipc_test::StartPeer;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_test::ChildProcess;
using Bus = sluice::ipc::ShmBus<LoanPayload, kLoanCapacity>;
using Producer = sluice::ipc::ShmProducer<LoanPayload, kLoanCapacity>;
using Layout = sluice::ipc::detail::Layout<LoanPayload, kLoanCapacity, sluice::ipc::ShmBusTraits>;
constexpr std::size_t kBlocks = sluice::ipc::ShmBusTraits::kLoanBlocks;

// Takes every block of `producer`'s lane; how many.
std::size_t TakeAll(Producer& producer, std::vector<sluice::ipc::ShmLoan<Frame4K>>* held) {
  for (auto loan = producer.Loan<Frame4K>(); loan; loan = producer.Loan<Frame4K>()) {
    held->push_back(std::move(loan));
  }
  return held->size();
}

// A producer process loans, fills and publishes 400 frames of 4 KB and
// 64 KB; the consumer checks every byte, in place: a byte written through
// another mapping of the segment at the block's place is what the
// subscriber reads through the message.
TEST(ShmLoanTest, FramesOf4And64KilobytesAreReadInPlace) {
  constexpr std::uint64_t kFrames = 400;
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice_ipc_test::BusView<Layout> view;
  ASSERT_EQ(view.Open(name), AttachError::kNone);
  std::vector<int> times(kFrames, 0);
  std::uint64_t bad = 0;
  std::uint64_t in_place = 0;
  const auto check = [&](const auto& frame, const sluice::MessageHeader& header) {
    if (frame->seq >= kFrames || !sluice_ipc_test::FrameIsIntact(*frame) ||
        ++times[frame->seq] != 1) {
      ++bad;
      return;
    }
    // The same bytes through the other mapping: a write there shows here.
    auto* block = static_cast<unsigned char*>(
        Layout::LoanBlock(view.Base(), header.lane - 1u, frame.Block()));
    const unsigned char* seen = reinterpret_cast<const unsigned char*>(frame.Get());
    const unsigned char before = seen[100];
    block[100] = static_cast<unsigned char>(before + 1);
    in_place += seen[100] == static_cast<unsigned char>(before + 1) ? 1 : 0;
    block[100] = before;
  };
  auto small = bus.Subscribe<Loaned<Frame4K>>(
      [&](const Loaned<Frame4K>& f, const sluice::MessageHeader& h) { check(f, h); });
  auto large = bus.Subscribe<Loaned<Frame64K>>(
      [&](const Loaned<Frame64K>& f, const sluice::MessageHeader& h) { check(f, h); });
  ASSERT_TRUE(small.IsValid() && large.IsValid());
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"loans", name, std::to_string(kFrames)}));
  std::uint64_t dispatched = 0;
  ASSERT_TRUE(sluice_ipc_test::DispatchUntil(bus, [&] {
    dispatched = bus.GetStatistics().processed;
    return dispatched >= kFrames;
  }));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("published=", &line, kGuard)) << line;
  EXPECT_EQ(peer.Wait(kGuard), 0);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(in_place, kFrames);
  for (std::uint64_t seq = 0; seq < kFrames; ++seq) ASSERT_EQ(times[seq], 1) << seq;
  std::printf(
      "[ ipc] %llu frames of 4 KB and 64 KB loaned, read in place; the producer waited "
      "for a block or room %llu times\n",
      static_cast<unsigned long long>(kFrames),
      static_cast<unsigned long long>(Field(line, "waits")));
}

// A lane lends kLoanBlocks blocks: a loan dropped unpublished comes back at
// once, a published one once its message is dispatched.
TEST(ShmLoanTest, BlocksComeBackWhenDroppedOrDispatched) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  std::vector<sluice::ipc::ShmLoan<Frame4K>> held;
  ASSERT_EQ(TakeAll(producer, &held), kBlocks);
  EXPECT_FALSE(producer.Loan<Frame64K>());  // one pool for every loaned type
  held.pop_back();                          // dropped unpublished
  auto large = producer.Loan<Frame64K>();
  ASSERT_TRUE(large);
  large->seq = 7;
  ASSERT_TRUE(producer.PublishLoan(std::move(large), 1, MessagePriority::HIGH));
  EXPECT_FALSE(large);  // the block is the message's now
  EXPECT_FALSE(producer.Loan<Frame4K>());
  std::uint64_t seq = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto& message) {
    using M = std::decay_t<decltype(message)>;
    if constexpr (std::is_same_v<M, Loaned<Frame64K>>) seq = message->seq;
  }),
            1u);
  EXPECT_EQ(seq, 7u);
  EXPECT_TRUE(producer.Loan<Frame4K>());  // given back after dispatch
}

// PublishLoan's other outcomes: an empty loan is kPoolEmpty, a loan of
// another producer kRejected, a refusal for room leaves the loan with the
// caller.
TEST(ShmLoanTest, PublishLoanRefusalsKeepTheLoan) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  Producer other;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  ASSERT_EQ(other.Attach(name), AttachError::kNone);
  sluice::ipc::ShmLoan<Frame4K> empty;
  EXPECT_EQ(producer.PublishLoan(std::move(empty), 1, MessagePriority::MEDIUM).Outcome(),
            PublishOutcome::kPoolEmpty);
  auto foreign = other.Loan<Frame4K>();
  ASSERT_TRUE(foreign);
  EXPECT_EQ(producer.PublishLoan(std::move(foreign), 1, MessagePriority::MEDIUM).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_TRUE(foreign);
  while (producer.PublishWithPriority(Stop{0, 0}, 1, MessagePriority::LOW)) {
  }
  auto loan = producer.Loan<Frame4K>();
  ASSERT_TRUE(loan);
  EXPECT_EQ(producer.PublishLoan(std::move(loan), 1, MessagePriority::LOW).Outcome(),
            PublishOutcome::kRefusedFull);
  EXPECT_TRUE(loan);
  EXPECT_TRUE(producer.PublishLoan(std::move(loan), 1, MessagePriority::HIGH));
}

// An empty loan's refusal is counted as in process: a drop in the bus's
// statistics, under its priority, and not in its producer's own drops
// (which are refusals for room) nor in the backpressure peak (no fill was
// refused); still counted after its lane is handed back.
TEST(ShmLoanTest, AnEmptyLoanIsADropOfTheBusNotOfTheLaneOrThePeak) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = 0ns;  // a batch that takes nothing hands lanes back
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  (void)bus.TakeBackpressurePeak();
  for (int i = 0; i < 2; ++i) {
    sluice::ipc::ShmLoan<Frame4K> empty;
    EXPECT_EQ(producer.PublishLoan(std::move(empty), 1, MessagePriority::HIGH).Outcome(),
              PublishOutcome::kPoolEmpty);
  }
  sluice::ipc::ShmBusStatistics stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_dropped, 2u);
  EXPECT_EQ(stats.high_priority_dropped, 2u);
  EXPECT_EQ(stats.dropped[2], 2u);
  std::uint64_t lane_drops = 99;
  int lanes = 0;
  bus.ForEachProducer([&](const sluice::ProducerStatisticsSnapshot& lane) {
    ++lanes;
    lane_drops =
        lane.high_priority_dropped + lane.medium_priority_dropped + lane.low_priority_dropped;
  });
  EXPECT_EQ(lanes, 1);
  EXPECT_EQ(lane_drops, 0u);
  EXPECT_EQ(bus.TakeBackpressurePeak().fill, 0u);
  producer.Detach();
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.producers_detached, 1u);
  EXPECT_EQ(stats.messages_dropped, 2u);  // in the totals once handed back
}

// A producer process publishes two frames, takes every block left and is
// killed: its frames are dispatched intact, and the next producer on its
// lane finds every block free.
TEST(ShmLoanTest, AProducerKilledHoldingLoansGivesThemAllBack) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = 0ns;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  std::vector<sluice::ipc::ProducerExit> exits;
  bus.OnProducerExit([&](const sluice::ipc::ProducerExit& exit) { exits.push_back(exit); });
  ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"hold-loans", name}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("holding", &line, kGuard)) << line;
  EXPECT_EQ(Field(line, "taken"), kBlocks - 2);
  std::vector<std::uint64_t> intact;
  ASSERT_TRUE(DispatchWithUntil(
      bus,
      [&](const auto& message) {
        using M = std::decay_t<decltype(message)>;
        if constexpr (!std::is_same_v<M, Stop>) {
          if (sluice_ipc_test::FrameIsIntact(*message)) intact.push_back(message->seq);
        }
      },
      [&] { return !exits.empty(); }));
  EXPECT_EQ(intact, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(exits[0].killed);
  Producer next;
  ASSERT_EQ(next.Attach(name), AttachError::kNone);
  EXPECT_EQ(next.Lane(), exits[0].lane);
  std::vector<sluice::ipc::ShmLoan<Frame4K>> held;
  EXPECT_EQ(TakeAll(next, &held), kBlocks);
}

// A producer that stays attached while its consumer is killed again and
// again, each time in the middle of dispatching its loaned frames (blocks
// taken from the ring, dispatched or in hand, not yet given back): each
// consumer that takes the segment over gives the killed one's blocks back,
// so after 50 kills every block is loanable again (before, each kill
// leaked the blocks of the killed consumer's batch, and the stream stopped
// for good once none was left).
TEST(ShmLoanTest, ALiveProducerGetsEveryBlockBackAfterFiftyConsumerKills) {
  constexpr int kKills = 50;
  const std::string name = UniqueName();
  std::mt19937 random(37);
  ChildProcess consumer;
  std::string line;
  ASSERT_TRUE(StartPeer(consumer, {"consume-loans-slowly", name}));
  ASSERT_TRUE(consumer.WaitForLine("ready", &line, kGuard)) << line;
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  std::uint64_t seq = 0;
  std::uint64_t published = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    SCOPED_TRACE(kill);
    // Every block the producer can get, loaned and published.
    for (auto frame = producer.Loan<Frame4K>(); frame; frame = producer.Loan<Frame4K>()) {
      sluice_ipc_test::FillFrame(*frame, seq++);
      ASSERT_TRUE(producer.PublishLoan(std::move(frame), 7, MessagePriority::LOW));
      ++published;
    }
    // Killed after 1 to 3 dispatches have begun: more are taken or queued.
    const int dispatches = std::uniform_int_distribution<int>(1, 3)(random);
    for (int i = 0; i < dispatches; ++i) ASSERT_TRUE(consumer.WaitForLine("got", &line, kGuard));
    consumer.Kill(SIGKILL);
    ASSERT_TRUE(StartPeer(consumer, {"consume-loans-slowly", name}));
    ASSERT_TRUE(consumer.WaitForLine("ready", &line, kGuard)) << line;
    ASSERT_EQ(Field(line, "took_over"), 1u) << line;
  }
  // The last consumer dispatches what is queued and gives its blocks back.
  std::vector<sluice::ipc::ShmLoan<Frame4K>> held;
  const auto deadline = std::chrono::steady_clock::now() + kGuard;
  while (held.size() < kBlocks && std::chrono::steady_clock::now() < deadline) {
    if (auto frame = producer.Loan<Frame4K>()) {
      held.push_back(std::move(frame));
    } else {
      std::this_thread::sleep_for(1ms);
    }
  }
  std::printf(
      "[ ipc] %d consumers killed dispatching loans: %llu frames published, %zu of %zu "
      "blocks loanable after\n",
      kKills, static_cast<unsigned long long>(published), held.size(), kBlocks);
  EXPECT_EQ(held.size(), kBlocks);
  consumer.Kill(SIGKILL);
  Bus::RemoveName(name);
}

// A producer that keeps writing its block after publishing it (it kept the
// pointer): a subscriber reading in place sees the value change under it;
// one that reads through CopyTo checks and uses a copy that does not.
TEST(ShmLoanTest, AProducerCanChangeABlockInPlaceButNotTheSubscribersCopy) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  ChildProcess scribbler;
  std::string line;
  ASSERT_TRUE(StartPeer(scribbler, {"scribble-loan", name}));
  ASSERT_TRUE(scribbler.WaitForLine("scribbling", &line, kGuard)) << line;
  bool changed_in_place = false;
  bool copy_held = false;
  std::uint32_t loans = 0;
  (void)bus.Subscribe<Loaned<Frame4K>>([&](const Loaned<Frame4K>& frame) {
    ++loans;
    // In place: read until the producer's write shows (a guard, not a time
    // asserted: the scribbler writes without pause).
    const auto* seq = reinterpret_cast<const volatile std::uint64_t*>(&frame->seq);
    const std::uint64_t first = *seq;
    const auto deadline = std::chrono::steady_clock::now() + kGuard;
    for (std::uint64_t reads = 0; !changed_in_place; ++reads) {
      changed_in_place = *seq != first;
      if (reads % 1024 == 0) {
        if (std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::yield();
      }
    }
    // The copy: what is checked of it stays true however long it is used.
    auto copy = std::make_unique<Frame4K>();
    frame.CopyTo(copy.get());
    const std::uint64_t checked = copy->seq;
    // Until the block has moved on past what was copied: the copy has not.
    for (std::uint64_t reads = 0; *seq == checked; ++reads) {
      if (reads % 1024 == 0) {
        if (std::chrono::steady_clock::now() > deadline) return;
        std::this_thread::yield();
      }
    }
    copy_held = copy->seq == checked;
  });
  ASSERT_TRUE(DispatchUntil(bus, [&] { return loans == 1; }));
  EXPECT_TRUE(changed_in_place);
  EXPECT_TRUE(copy_held);
  scribbler.Kill(SIGKILL);
}

// A loaned message whose block number is not one of the lane's (a writer
// that does not keep to the protocol) is counted as corrupt, never read.
TEST(ShmLoanTest, ABlockNumberOutOfRangeIsCorrupt) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  auto loan = producer.Loan<Frame4K>();
  ASSERT_TRUE(loan);
  ASSERT_TRUE(producer.PublishLoan(std::move(loan), 1, MessagePriority::HIGH));
  // The message's block number, in the slot: the Loaned<T> starts with it.
  sluice_ipc_test::BusView<Layout> writer;
  ASSERT_EQ(writer.Open(name), AttachError::kNone);
  sluice_ipc_test::LaneRings<Layout> rings(writer.Base(), producer.Lane() - 1u);
  auto& ring = rings.Ring(2);
  auto* envelope = static_cast<sluice::MessageEnvelope<LoanPayload>*>(ring.Storage(0));
  ASSERT_EQ(envelope->payload.index(), 1u);
  const std::uint32_t forged = kBlocks + 5;
  std::memcpy(static_cast<void*>(&std::get<1>(envelope->payload)), &forged, sizeof(forged));
  std::uint64_t seen = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&) { ++seen; }), 1u);
  EXPECT_EQ(seen, 0u);
  EXPECT_EQ(bus.GetStatistics().corrupt, 1u);
}

// A subscriber that looks for producers that left, during the batch that
// dispatched a detached producer's last loaned frame, and attaches a new
// producer: the lane is not handed on while the batch still holds its
// blocks, so no block is ever lent twice.
TEST(ShmLoanTest, ALaneIsNotHandedOnWhileItsBlocksAreInTheBatch) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = 0ns;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Producer first;
  ASSERT_EQ(first.Attach(name), AttachError::kNone);
  auto frame = first.Loan<Frame4K>();
  ASSERT_TRUE(frame);
  ASSERT_TRUE(first.PublishLoan(std::move(frame), 1, MessagePriority::MEDIUM));
  first.Detach();
  Producer second;
  std::vector<sluice::ipc::ShmLoan<Frame4K>> held;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&) {
    bus.CheckProducers();
    ASSERT_EQ(second.Attach(name), AttachError::kNone);
    TakeAll(second, &held);
  }),
            1u);
  // Every block of the second producer's lane is held: none came free when
  // the batch gave the first producer's block back.
  EXPECT_FALSE(second.Loan<Frame4K>());
  EXPECT_EQ(held.size(), kBlocks);
  bus.CheckProducers();
  Producer third;
  ASSERT_EQ(third.Attach(name), AttachError::kNone);
  std::vector<sluice::ipc::ShmLoan<Frame4K>> third_held;
  EXPECT_EQ(TakeAll(third, &third_held), kBlocks);
  EXPECT_NE(third.Lane(), second.Lane());
}

// A loan dropped after its producer detached (or was assigned over) gives
// nothing back: the lane was made anew when it was handed on, perhaps to
// another producer, which would otherwise be lent that block twice.
TEST(ShmLoanTest, ALoanOutlivingItsProducersAttachmentGivesNothingBack) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = 0ns;
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  Producer first;
  ASSERT_EQ(first.Attach(name), AttachError::kNone);
  const std::uint16_t lane = first.Lane();
  auto stale = first.Loan<Frame4K>();
  ASSERT_TRUE(stale);
  first.Detach();
  bus.CheckProducers();
  Producer second;
  ASSERT_EQ(second.Attach(name), AttachError::kNone);
  ASSERT_EQ(second.Lane(), lane);
  std::vector<sluice::ipc::ShmLoan<Frame4K>> held;
  ASSERT_EQ(TakeAll(second, &held), kBlocks);
  stale.Reset();
  EXPECT_FALSE(second.Loan<Frame4K>()) << "a block was lent twice";
  EXPECT_EQ(second.PublishLoan(std::move(stale), 1, MessagePriority::MEDIUM).Outcome(),
            PublishOutcome::kPoolEmpty);
  // Assigned over: the old attachment's loan is inert too.
  auto kept = second.Loan<Frame64K>();  // none free: empty
  EXPECT_FALSE(kept);
  held.pop_back();
  auto loan = second.Loan<Frame4K>();
  ASSERT_TRUE(loan);
  Producer third;
  ASSERT_EQ(third.Attach(name), AttachError::kNone);
  second = std::move(third);
  EXPECT_EQ(second.PublishLoan(std::move(loan), 1, MessagePriority::MEDIUM).Outcome(),
            PublishOutcome::kRejected);
  loan.Reset();  // its producer's attachment is gone: no effect, no crash
}

// Builds whose loan blocks differ (count or size) do not attach to each
// other, even when their segments come out the same size (rounded to
// pages): the fingerprint says kLayout.
struct Small64 {
  unsigned char bytes[64];
};
using SmallLoans = std::variant<Stop, Loaned<Small64>>;
struct NineBlocks : sluice::ipc::ShmBusTraits {
  static constexpr std::size_t kLoanBlocks = 9;
};
TEST(ShmLoanTest, AnotherNumberOfLoanBlocksIsAnotherLayout) {
  using Eight = sluice::ipc::detail::Layout<SmallLoans, kLoanCapacity, sluice::ipc::ShmBusTraits>;
  using Nine = sluice::ipc::detail::Layout<SmallLoans, kLoanCapacity, NineBlocks>;
  static_assert(Eight::kSegmentSize == Nine::kSegmentSize,
                "the test wants two layouts of one segment size");
  const std::string name = UniqueName();
  sluice::ipc::ShmBus<SmallLoans, kLoanCapacity> bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice::ipc::ShmProducer<SmallLoans, kLoanCapacity, NineBlocks> other;
  EXPECT_EQ(other.Attach(name), AttachError::kLayout);
}

}  // namespace
}  // namespace loan_test
