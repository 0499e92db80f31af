// LoanPool and Loan<T> on one thread: acquire until exhausted, release and
// reuse, an exhausted pool as a refusal counted by priority, blocks back
// after dispatch, a subscriber that keeps a shared reference past the batch,
// over-aligned payloads, destruction order of pool and bus, moved-from
// handles and the wrap of the free list's tag. Threads are in
// loan_pool_concurrency_test.cpp.
#include <gtest/gtest.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "sluice/sluice.hpp"

namespace loan_pool_test {
namespace {

using sluice::Loan;
using sluice::LoanPool;
using sluice::MessagePriority;

struct Cloud {
  std::uint32_t count = 0;
  float points[1000][3];
};
struct Imu {
  float acceleration[3] = {0, 0, 0};
};
using Payload = std::variant<Imu, Loan<Cloud>>;
using Bus = sluice::MpscBus<Payload, 64>;

static_assert(std::is_nothrow_move_constructible_v<Loan<Cloud>>);
static_assert(!std::is_copy_constructible_v<Loan<Cloud>>);
static_assert(sizeof(Loan<Cloud>) <= 2 * sizeof(void*), "a loan is a pool pointer and an index");
// The slot holds the handle, not the 12 KB cloud.
static_assert(Bus::kBytesPerSlot < 64 + sizeof(Cloud) / 100);

// Counts constructions and destructions of the loaned type.
struct Counted {
  static inline int constructed = 0;
  static inline int destroyed = 0;
  explicit Counted(int v = 7) : value(v) { ++constructed; }
  ~Counted() { ++destroyed; }
  int value;
};

TEST(LoanPoolTest, AcquiresEveryBlockOnceThenRefuses) {
  LoanPool<Cloud, 4> pool;
  EXPECT_EQ(pool.Capacity(), 4u);
  EXPECT_EQ(pool.Available(), 4u);
  std::vector<Loan<Cloud>> loans;
  std::set<std::uint32_t> blocks;
  std::set<const Cloud*> addresses;
  for (int i = 0; i < 4; ++i) {
    Loan<Cloud> loan = pool.Acquire();
    ASSERT_TRUE(loan.IsValid());
    EXPECT_EQ(loan.UseCount(), 1u);
    blocks.insert(loan.Block());
    addresses.insert(loan.Get());
    loan->count = static_cast<std::uint32_t>(i);
    loans.push_back(std::move(loan));
  }
  EXPECT_EQ(blocks.size(), 4u);
  EXPECT_EQ(addresses.size(), 4u);
  // No two blocks overlap.
  for (const Cloud* a : addresses) {
    for (const Cloud* b : addresses) {
      if (a != b) {
        const auto distance =
            a < b ? reinterpret_cast<const char*>(b) - reinterpret_cast<const char*>(a)
                  : reinterpret_cast<const char*>(a) - reinterpret_cast<const char*>(b);
        EXPECT_GE(static_cast<std::size_t>(distance), sizeof(Cloud));
      }
    }
  }
  EXPECT_EQ(pool.Available(), 0u);
  Loan<Cloud> none = pool.Acquire();
  EXPECT_FALSE(none.IsValid());
  EXPECT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(none.UseCount(), 0u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(loans[static_cast<std::size_t>(i)]->count, static_cast<std::uint32_t>(i));
}

TEST(LoanPoolTest, ReleasedBlockIsReused) {
  LoanPool<Cloud, 2> pool;
  Loan<Cloud> first = pool.Acquire();
  Loan<Cloud> second = pool.Acquire();
  ASSERT_TRUE(first && second);
  const std::uint32_t block = first.Block();
  const Cloud* address = first.Get();
  first.Reset();
  EXPECT_FALSE(first.IsValid());
  EXPECT_EQ(pool.Available(), 1u);
  Loan<Cloud> again = pool.Acquire();
  ASSERT_TRUE(again.IsValid());
  EXPECT_EQ(again.Block(), block);
  EXPECT_EQ(again.Get(), address);
  EXPECT_FALSE(pool.Acquire().IsValid());
  again = Loan<Cloud>();  // move-assigning over a loan releases its block
  second = Loan<Cloud>();
  EXPECT_EQ(pool.Available(), 2u);
}

TEST(LoanPoolTest, ConstructsOnAcquireAndDestroysOnLastRelease) {
  Counted::constructed = 0;
  Counted::destroyed = 0;
  {
    LoanPool<Counted, 2> pool;
    EXPECT_EQ(Counted::constructed, 0);  // blocks are storage until loaned
    Loan<Counted> a = pool.Acquire();
    Loan<Counted> b = pool.Acquire(42);
    EXPECT_EQ(a->value, 7);
    EXPECT_EQ(b->value, 42);
    EXPECT_EQ(Counted::constructed, 2);
    Loan<Counted> shared = b.Share();
    EXPECT_EQ(b.UseCount(), 2u);
    b.Reset();
    EXPECT_EQ(Counted::destroyed, 0);
    EXPECT_EQ(shared->value, 42);
    shared.Reset();
    EXPECT_EQ(Counted::destroyed, 1);
  }
  EXPECT_EQ(Counted::constructed, Counted::destroyed);
}

#if SLUICE_HAS_EXCEPTIONS
struct ThrowsOnConstruction {
  explicit ThrowsOnConstruction(bool fail) {
    if (fail) throw 1;
  }
};

TEST(LoanPoolTest, ThrowingConstructorHandsTheBlockBack) {
  LoanPool<ThrowsOnConstruction, 1> pool;
  EXPECT_THROW((void)pool.Acquire(true), int);
  EXPECT_EQ(pool.Available(), 1u);
  EXPECT_TRUE(pool.Acquire(false).IsValid());
}
#endif

TEST(LoanPoolTest, ExhaustedPoolIsARefusalCountedByPriority) {
  LoanPool<Cloud, 2> pool;
  Bus bus;
  ASSERT_TRUE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::LOW));
  ASSERT_TRUE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::HIGH));
  EXPECT_FALSE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::LOW));
  EXPECT_FALSE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::LOW));
  EXPECT_FALSE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::HIGH));
  sluice::BusStatisticsSnapshot stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 2u);
  EXPECT_EQ(stats.low_priority_dropped, 2u);
  EXPECT_EQ(stats.medium_priority_dropped, 0u);
  EXPECT_EQ(stats.high_priority_dropped, 1u);
  EXPECT_EQ(stats.messages_dropped, 3u);
  EXPECT_EQ(stats.MessagesAttempted(), 5u);
  EXPECT_EQ(bus.QueueDepth(), 2u);

  // An unknown priority is bad input, whatever the loan.
  EXPECT_FALSE(bus.PublishLoan(pool.Acquire(), 1, static_cast<MessagePriority>(3)));
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u);
  // Statistics off: refused, not counted.
  bus.SetPerformanceMode(sluice::PerformanceMode::NO_STATS);
  EXPECT_FALSE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::MEDIUM));
  EXPECT_EQ(bus.GetStatistics().messages_dropped, 3u);
  bus.SetPerformanceMode(sluice::PerformanceMode::FULL_FEATURED);

  // Dispatch hands the blocks back; publishing works again.
  while (bus.ProcessBatch() > 0) {
  }
  EXPECT_EQ(pool.Available(), 2u);
  EXPECT_TRUE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::MEDIUM));

  // Closed: an empty loan counts as refused because closed, like any publish.
  bus.Close();
  Loan<Cloud> refused = pool.Acquire();
  ASSERT_TRUE(refused.IsValid());
  EXPECT_FALSE(bus.PublishLoan(std::move(refused), 1, MessagePriority::LOW));
  EXPECT_TRUE(refused.IsValid());  // a refused loan stays with the caller
  EXPECT_FALSE(bus.PublishLoan(Loan<Cloud>(), 1, MessagePriority::LOW));
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_refused_closed, 2u);
  EXPECT_EQ(stats.messages_dropped, 3u);
}

TEST(LoanPoolTest, QueueFullRefusalLeavesTheLoanWithTheCaller) {
  LoanPool<Cloud, 4> pool;
  sluice::MpscBus<Payload, 2> bus;  // full at two messages
  ASSERT_TRUE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::HIGH));
  ASSERT_TRUE(bus.PublishLoan(pool.Acquire(), 1, MessagePriority::HIGH));
  Loan<Cloud> loan = pool.Acquire();
  ASSERT_TRUE(loan.IsValid());
  EXPECT_FALSE(bus.PublishLoan(std::move(loan), 1, MessagePriority::HIGH));
  EXPECT_TRUE(loan.IsValid());
  EXPECT_EQ(bus.GetStatistics().high_priority_dropped, 1u);
  loan.Reset();
  EXPECT_EQ(pool.Available(), 2u);
}

TEST(LoanPoolTest, BlocksReturnAfterDispatch) {
  LoanPool<Cloud, 8> pool;
  Bus bus;
  std::uint32_t sum = 0;
  sluice::SubscriptionHandle handle =
      bus.Subscribe<Loan<Cloud>>([&](const Loan<Cloud>& cloud) { sum += cloud->count; });
  ASSERT_TRUE(handle.IsValid());
  for (std::uint32_t i = 1; i <= 8; ++i) {
    Loan<Cloud> loan = pool.Acquire();
    ASSERT_TRUE(loan.IsValid());
    loan->count = i;
    ASSERT_TRUE(bus.PublishLoan(std::move(loan), 1, MessagePriority::MEDIUM));
    ASSERT_TRUE(bus.Publish(Imu{}, 2));
  }
  EXPECT_EQ(pool.Available(), 0u);
  EXPECT_EQ(bus.ProcessBatch(4), 4u);  // two clouds dispatched and destroyed
  EXPECT_EQ(pool.Available(), 2u);
  while (bus.ProcessBatch() > 0) {
  }
  EXPECT_EQ(sum, 36u);
  EXPECT_EQ(pool.Available(), 8u);

  // The visitor path too, and a loan published as the variant itself.
  Loan<Cloud> loan = pool.Acquire();
  loan->count = 5;
  ASSERT_TRUE(bus.Publish(Payload(std::move(loan)), 1));
  std::uint32_t visited = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Loan<Cloud>>) {
      visited = message->count;
    }
  }),
            1u);
  EXPECT_EQ(visited, 5u);
  EXPECT_EQ(pool.Available(), 8u);
}

TEST(LoanPoolTest, SubscriberKeepsASharedReferencePastTheBatch) {
  Counted::constructed = 0;
  Counted::destroyed = 0;
  {
    LoanPool<Counted, 2> pool;
    sluice::MpscBus<std::variant<Loan<Counted>>, 16> bus;
    Loan<Counted> latest;
    int seen = 0;
    sluice::SubscriptionHandle handle =
        bus.Subscribe<Loan<Counted>>([&](const Loan<Counted>& loan) {
          ++seen;
          latest = loan.Share();  // drops the previous one, keeps this one
        });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_TRUE(bus.PublishLoan(pool.Acquire(1), 1, MessagePriority::LOW));
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    ASSERT_TRUE(latest.IsValid());
    EXPECT_EQ(latest.UseCount(), 1u);  // the envelope's owner is gone
    EXPECT_EQ(pool.Available(), 1u);
    EXPECT_EQ(Counted::destroyed, 0);

    // The next batch replaces it: the first block comes back then.
    ASSERT_TRUE(bus.PublishLoan(pool.Acquire(2), 1, MessagePriority::LOW));
    EXPECT_EQ(pool.Available(), 0u);
    EXPECT_EQ(latest->value, 1);  // still intact past the batch
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(latest->value, 2);
    EXPECT_EQ(pool.Available(), 1u);
    EXPECT_EQ(Counted::destroyed, 1);

    latest.Reset();
    EXPECT_EQ(pool.Available(), 2u);
    EXPECT_EQ(Counted::destroyed, 2);
    EXPECT_EQ(seen, 2);
  }
  EXPECT_EQ(Counted::constructed, Counted::destroyed);
}

struct alignas(64) Aligned64 {
  unsigned char bytes[100];
};
struct alignas(256) Aligned256 {
  unsigned char bytes[3];
};
struct OddSize {
  unsigned char bytes[3];
};

template <typename T, sluice::SlotStorage kStorage>
void ExpectAlignedBlocks() {
  using Pool = LoanPool<T, 5, kStorage>;
  static_assert(Pool::kBytesPerBlock % alignof(T) == 0);
  static_assert(Pool::kBytesPerBlock >= sizeof(T));
  static_assert(Pool::kPoolBytes == Pool::kBytesPerBlock * 5);
  auto pool = std::make_unique<Pool>();
  std::vector<Loan<T>> loans;
  for (int i = 0; i < 5; ++i) {
    loans.push_back(pool->Acquire());
    ASSERT_TRUE(loans.back().IsValid());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(loans.back().Get()) % alignof(T), 0u);
    // Blocks start on a cache line of their own.
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(loans.back().Get()) % sluice::kCacheLineSize, 0u);
    loans.back()->bytes[0] = static_cast<unsigned char>(i);
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(loans[static_cast<std::size_t>(i)]->bytes[0], i);
}

TEST(LoanPoolTest, OverAlignedAndOddSizedPayloads) {
  ExpectAlignedBlocks<Aligned64, sluice::SlotStorage::kHeap>();
  ExpectAlignedBlocks<Aligned64, sluice::SlotStorage::kInline>();
  ExpectAlignedBlocks<Aligned256, sluice::SlotStorage::kHeap>();
  ExpectAlignedBlocks<Aligned256, sluice::SlotStorage::kInline>();
  ExpectAlignedBlocks<OddSize, sluice::SlotStorage::kHeap>();
  ExpectAlignedBlocks<OddSize, sluice::SlotStorage::kInline>();

  // Through a bus: the over-aligned payload arrives where it was written.
  LoanPool<Aligned64, 2> pool;
  sluice::MpscBus<std::variant<Imu, Loan<Aligned64>>, 16> bus;
  Loan<Aligned64> loan = pool.Acquire();
  loan->bytes[99] = 0x5a;
  const Aligned64* address = loan.Get();
  ASSERT_TRUE(bus.PublishLoan(std::move(loan), 1, MessagePriority::MEDIUM));
  const Aligned64* seen = nullptr;
  (void)bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Loan<Aligned64>>) {
      seen = message.Get();
      EXPECT_EQ(message->bytes[99], 0x5a);
    }
  });
  EXPECT_EQ(seen, address);
}

TEST(LoanPoolTest, InlineStorageLivesInThePoolObject) {
  using Pool = LoanPool<Cloud, 3, sluice::SlotStorage::kInline>;
  static_assert(sizeof(Pool) >= Pool::kPoolBytes);
  auto pool = std::make_unique<Pool>();
  Loan<Cloud> loan = pool->Acquire();
  ASSERT_TRUE(loan.IsValid());
  const auto* begin = reinterpret_cast<const unsigned char*>(pool.get());
  const auto* block = reinterpret_cast<const unsigned char*>(loan.Get());
  EXPECT_GE(block, begin);
  EXPECT_LT(block, begin + sizeof(Pool));
}

TEST(LoanPoolTest, BusDestroyedFirstHandsQueuedBlocksBack) {
  Counted::constructed = 0;
  Counted::destroyed = 0;
  LoanPool<Counted, 4> pool;  // declared first: outlives the bus
  {
    sluice::MpscBus<std::variant<Loan<Counted>>, 16> bus;
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(bus.PublishLoan(pool.Acquire(i), 1, MessagePriority::LOW));
    EXPECT_EQ(pool.Available(), 1u);
  }  // the bus destroys the queued envelopes, so their loans
  EXPECT_EQ(pool.Available(), 4u);
  EXPECT_EQ(Counted::destroyed, 3);
}

#if GTEST_HAS_DEATH_TEST
// The wrong order: the pool goes while the bus still holds one of its loans.
void DestroyPoolBeforeBus() {
  using LoanBus = sluice::MpscBus<std::variant<Loan<Counted>>, 16>;
  auto bus = std::make_unique<LoanBus>();
  auto pool = std::make_unique<LoanPool<Counted, 2>>();
  (void)bus->PublishLoan(pool->Acquire(), 1, MessagePriority::LOW);
  pool.reset();
}

TEST(LoanPoolDeathTest, PoolDestroyedWhileALoanIsOutAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // std::abort(), not a crash on freed memory.
  EXPECT_EXIT(DestroyPoolBeforeBus(), testing::KilledBySignal(SIGABRT), "");
}
#endif

TEST(LoanPoolTest, MovedFromAndEmptyHandles) {
  LoanPool<Cloud, 2> pool;
  Loan<Cloud> a = pool.Acquire();
  a->count = 9;
  Loan<Cloud> b(std::move(a));
  EXPECT_FALSE(a.IsValid());  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(a.UseCount(), 0u);
  EXPECT_FALSE(a.Share().IsValid());
  a.Reset();  // no effect
  EXPECT_EQ(pool.Available(), 1u);
  ASSERT_TRUE(b.IsValid());
  EXPECT_EQ(b->count, 9u);

  // Self-move keeps the block.
  Loan<Cloud>& alias = b;
  b = std::move(alias);
  ASSERT_TRUE(b.IsValid());
  EXPECT_EQ(b->count, 9u);
  EXPECT_EQ(pool.Available(), 1u);

  // Move-assigning an empty loan over a valid one releases the block.
  b = std::move(a);
  EXPECT_FALSE(b.IsValid());
  EXPECT_EQ(pool.Available(), 2u);

  // A shared owner moved away keeps the count.
  Loan<Cloud> c = pool.Acquire();
  Loan<Cloud> d = c.Share();
  Loan<Cloud> e = std::move(d);
  EXPECT_EQ(c.UseCount(), 2u);
  c.Reset();
  EXPECT_EQ(e.UseCount(), 1u);
  EXPECT_EQ(pool.Available(), 1u);
  e.Reset();
  EXPECT_EQ(pool.Available(), 2u);
  EXPECT_FALSE(Loan<Cloud>().IsValid());
}

TEST(LoanPoolTest, FreeListTagWraps) {
  using Pool = LoanPool<Cloud, 3>;
  constexpr sluice::Position kMask = (sluice::Position{1} << Pool::kTagBits) - 1;
  // The wrap lands on each kind of operation (pop or push) and on blocks
  // of each index, depending on where the tag starts.
  for (sluice::Position before_wrap = 0; before_wrap < 12; ++before_wrap) {
    const sluice::Position first = kMask - before_wrap;
    Pool pool(sluice::detail::FirstLoanTag{first});
    EXPECT_EQ(sluice::detail::TestAccess::LoanPoolTag(pool), first);
    for (int round = 0; round < 3; ++round) {
      std::vector<Loan<Cloud>> loans;
      std::set<std::uint32_t> blocks;
      for (int i = 0; i < 3; ++i) {
        loans.push_back(pool.Acquire());
        ASSERT_TRUE(loans.back().IsValid()) << "from " << before_wrap << ", round " << round;
        blocks.insert(loans.back().Block());
      }
      EXPECT_EQ(blocks.size(), 3u) << "from " << before_wrap << ", round " << round;
      EXPECT_FALSE(pool.Acquire().IsValid()) << "from " << before_wrap << ", round " << round;
      // Released in a different order each round.
      if (round == 1) std::swap(loans[0], loans[2]);
      if (round == 2) std::swap(loans[0], loans[1]);
      loans.clear();
      EXPECT_EQ(pool.Available(), 3u) << "from " << before_wrap << ", round " << round;
    }
    // 18 operations (a failed acquire changes nothing): past the wrap, and
    // counting from 0 again.
    EXPECT_EQ(sluice::detail::TestAccess::LoanPoolTag(pool), (first + 18) & kMask);
  }
}

struct LaneTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<2, 16>;
};

// A Producer's empty loan is a drop of the bus (kPoolEmpty), not of its
// lane: the producer's dropped counts (and their Prometheus family) are its
// lane's refusals for fill, which this is not.
TEST(LoanPoolTest, LanePublishLoanCountsAnEmptyLoanOnTheBusNotAsALaneRefusal) {
  LoanPool<Cloud, 1> pool;
  sluice::MpscBus<Payload, 16, LaneTraits> bus;
  auto producer = bus.RegisterProducer();
  ASSERT_TRUE(producer.IsValid());
  ASSERT_TRUE(producer.PublishLoan(pool.Acquire(), 1, MessagePriority::MEDIUM));
  const sluice::PublishResult empty = producer.PublishLoan(pool.Acquire(), 1, MessagePriority::LOW);
  EXPECT_EQ(empty.Outcome(), sluice::PublishOutcome::kPoolEmpty);
  EXPECT_EQ(producer.GetStatistics().low_priority_dropped, 0u)
      << "an empty loan counted as a refusal at the lane's fill";
  EXPECT_EQ(bus.GetStatistics().low_priority_dropped, 1u);
  EXPECT_EQ(bus.GetStatistics().messages_published, 1u);
  while (bus.ProcessBatch() > 0) {
  }
  EXPECT_EQ(pool.Available(), 1u);
  bus.Close();
  EXPECT_FALSE(producer.PublishLoan(Loan<Cloud>(), 1, MessagePriority::LOW));
  EXPECT_EQ(producer.GetStatistics().messages_refused_closed, 1u);
  decltype(producer) invalid;
  EXPECT_FALSE(invalid.PublishLoan(pool.Acquire(), 1, MessagePriority::LOW));
  EXPECT_EQ(pool.Available(), 1u);
}

}  // namespace
}  // namespace loan_pool_test
