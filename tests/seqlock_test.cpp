// The sequence lock on its own (detail/seqlock.hpp), from one thread that
// plays writer and reader in turn, putting the writer's steps exactly where
// a reader is most exposed: inside its read, between its two version loads.
// Asserted: a read that saw no write returns one write's record; a write
// inside a read makes the read go again (even one that stores the same
// values); a writer that died mid-write (version left odd) makes every read
// give up after its bounded attempts and report failure, never return the
// half-written record; the next writer takes the record over; the version
// keeps its parity across the wrap of its 32 bits; the lock is one word, fit
// for shared memory. The threaded check is in seqlock_concurrency_test.cpp.
#include "sluice/detail/seqlock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace sluice_test {
namespace seqlock_test {
namespace {

using sluice::detail::SeqLock;
using sluice::detail::SeqLockedWords;

// The record a future shared-memory user keeps: three 64-bit words (a
// process id, its start time, a namespace id).
using Identity = SeqLockedWords<std::uint64_t, 3>;

static_assert(std::is_standard_layout_v<SeqLock> && sizeof(SeqLock) == 4,
              "one word, no pointers: fit for a shared segment");
static_assert(std::is_standard_layout_v<Identity>);

TEST(SeqLockTest, AFreshLockHoldsAConsistentRecordOfZeros) {
  Identity record;
  EXPECT_EQ(record.Lock().Version(), 0u);
  std::uint64_t out[3] = {7, 7, 7};
  ASSERT_TRUE(record.Read(out));
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 0u);
  EXPECT_EQ(out[2], 0u);
}

TEST(SeqLockTest, AWriteIsReadWholeAndMovesTheVersionByTwo) {
  Identity record;
  for (std::uint64_t i = 1; i <= 5; ++i) {
    const std::uint64_t words[3] = {i, i * 1000, ~i};
    record.Write(words);
    EXPECT_EQ(record.Lock().Version(), 2 * i);
    std::uint64_t out[3] = {};
    ASSERT_TRUE(record.Read(out));
    EXPECT_EQ(out[0], i);
    EXPECT_EQ(out[1], i * 1000);
    EXPECT_EQ(out[2], ~i);
  }
  const std::uint64_t initial[3] = {4, 5, 6};
  Identity constructed(initial);
  std::uint64_t out[3] = {};
  ASSERT_TRUE(constructed.Read(out));
  EXPECT_EQ(out[1], 5u);
}

TEST(SeqLockTest, AWriteBetweenTheReadsTwoVersionLoadsMakesItReadAgain) {
  Identity record;
  const std::uint64_t first[3] = {1, 1, 1};
  const std::uint64_t second[3] = {2, 2, 2};
  record.Write(first);
  std::atomic<std::uint64_t> seen[3];
  int calls = 0;
  const bool read = record.Lock().Read([&] {
    ++calls;
    // Half the record read, then a whole write, then the rest: a torn copy.
    seen[0] = SeqLock::Load(record.WordAt(0));
    if (calls == 1) record.Write(second);
    seen[1] = SeqLock::Load(record.WordAt(1));
    seen[2] = SeqLock::Load(record.WordAt(2));
  });
  ASSERT_TRUE(read);
  EXPECT_EQ(calls, 2) << "the torn first copy is read again";
  EXPECT_EQ(seen[0], 2u);
  EXPECT_EQ(seen[1], 2u);
  EXPECT_EQ(seen[2], 2u);
}

TEST(SeqLockTest, AnIdenticalRewriteInsideAReadStillMakesItReadAgain) {
  // The check is the version, not the values: an A-B-A of the record (here
  // A-A) is still a write the copy may be torn across.
  Identity record;
  const std::uint64_t same[3] = {9, 9, 9};
  record.Write(same);
  int calls = 0;
  std::uint64_t out[3] = {};
  ASSERT_TRUE(record.Lock().Read([&] {
    if (++calls == 1) record.Write(same);
    for (int i = 0; i < 3; ++i) out[i] = SeqLock::Load(record.WordAt(i));
  }));
  EXPECT_EQ(calls, 2);
}

TEST(SeqLockTest, AWriterThatDiesMidWriteMakesReadsFailNotTear) {
  Identity record;
  const std::uint64_t old_words[3] = {1, 1, 1};
  record.Write(old_words);
  // The writer begins, stores one word of three, and is killed.
  record.Lock().BeginWrite();
  SeqLock::Store(record.WordAt(0), std::uint64_t{2});
  EXPECT_EQ(record.Lock().Version() & 1u, 1u);
  int calls = 0;
  const bool read = record.Lock().Read([&] { ++calls; }, SeqLock::WhileOdd::kRetry, 50);
  EXPECT_FALSE(read) << "no consistent record while the write is unfinished";
  EXPECT_EQ(calls, 0) << "the fields are not even read while the version is odd";
  std::uint64_t out[3] = {};
  EXPECT_FALSE(record.Read(out)) << "the default bound gives up too";
  // With WhileOdd::kFail, at once.
  EXPECT_FALSE(record.Lock().Read([&] { ++calls; }, SeqLock::WhileOdd::kFail));
  EXPECT_EQ(calls, 0);
}

TEST(SeqLockTest, AWriterThatDiesDuringAReadMakesThatReadFail) {
  Identity record;
  const std::uint64_t old_words[3] = {1, 1, 1};
  record.Write(old_words);
  int calls = 0;
  std::uint64_t out[3] = {};
  // The reader read the even version; the writer begins, stores a word and
  // dies before the reader's second version load.
  const bool read = record.Lock().Read([&] {
    if (++calls == 1) {
      record.Lock().BeginWrite();
      SeqLock::Store(record.WordAt(1), std::uint64_t{2});
    }
    for (int i = 0; i < 3; ++i) out[i] = SeqLock::Load(record.WordAt(i));
  });
  EXPECT_FALSE(read) << "the copy {1, 2, 1} is torn: the read must not return it";
  EXPECT_EQ(calls, 1) << "every later attempt found the write unfinished";
}

TEST(SeqLockTest, TheNextWriterTakesOverAnUnfinishedWrite) {
  Identity record;
  record.Lock().BeginWrite();  // a writer that died here
  const std::uint32_t odd = record.Lock().Version();
  ASSERT_EQ(odd & 1u, 1u);
  // The next writer's BeginWrite keeps the version odd: readers must not
  // see an even version while it rewrites the record.
  record.Lock().BeginWrite();
  EXPECT_EQ(record.Lock().Version(), odd);
  const std::uint64_t words[3] = {3, 4, 5};
  for (int i = 0; i < 3; ++i) SeqLock::Store(record.WordAt(i), words[i]);
  record.Lock().EndWrite();
  EXPECT_EQ(record.Lock().Version(), odd + 1);
  std::uint64_t out[3] = {};
  ASSERT_TRUE(record.Read(out));
  EXPECT_EQ(out[2], 5u);
  // And Write over it works as ever.
  record.Write(words);
  EXPECT_EQ(record.Lock().Version(), odd + 3);
}

TEST(SeqLockTest, ReadsGiveUpAfterTheirAttemptsWhenWritesKeepComing) {
  Identity record;
  for (std::uint32_t attempts : {0u, 1u, 7u}) {
    int calls = 0;
    const bool read = record.Lock().Read(
        [&] {
          ++calls;
          const std::uint64_t words[3] = {5, 5, 5};
          record.Write(words);  // a write inside every attempt
        },
        SeqLock::WhileOdd::kRetry, attempts);
    EXPECT_FALSE(read) << attempts;
    EXPECT_EQ(calls, static_cast<int>(attempts)) << "one call per attempt, no more";
  }
}

TEST(SeqLockTest, TheVersionKeepsItsParityAcrossTheWrap) {
  // Odd at the top of the range: a write under way; its end wraps to 0.
  SeqLock odd(0xFFFFFFFFu);
  EXPECT_FALSE(odd.Read([] {}, SeqLock::WhileOdd::kRetry, 3));
  odd.EndWrite();
  EXPECT_EQ(odd.Version(), 0u);
  EXPECT_TRUE(odd.Read([] {}));
  // Even just below: a whole write crosses the wrap (through 0xFFFFFFFF).
  SeqLock even(0xFFFFFFFEu);
  std::uint32_t during = 0;
  even.Write([&] { during = even.Version(); });
  EXPECT_EQ(during, 0xFFFFFFFFu);
  EXPECT_EQ(even.Version(), 0u);
  int calls = 0;
  EXPECT_TRUE(even.Read([&] {
    if (++calls == 1) even.Write([] {});  // 0 -> 2, across no wrap: still seen
  }));
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace seqlock_test
}  // namespace sluice_test
