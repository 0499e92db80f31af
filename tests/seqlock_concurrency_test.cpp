// The sequence lock (detail/seqlock.hpp) with a writer and readers racing:
// the writer rewrites a record whose words are all equal (one write's
// number in each), the readers copy it as fast as they can. A copy a read
// returns must have all its words equal (no torn copy), and one reader's
// copies never go back to an older write. Small and quick, so
// ThreadSanitizer checks the orderings too (every field is an atomic, so
// it reports only a real race on the lock's own protocol).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "sluice/detail/seqlock.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace seqlock_concurrency_test {
namespace {

constexpr std::size_t kWords = 8;
constexpr int kReaders = 2;
// 32-bit words: lock-free on every target the suites run on.
using Record = sluice::detail::SeqLockedWords<std::uint32_t, kWords>;

// Count: 200,000 writes, each a window of eight stores in which a reader
// can tear its copy, and two readers copying back to back: on two cores
// thousands of the readers' copies overlap a write (the reads retried,
// printed below). With the read's second version check planted out, the
// readers returned torn copies in every run.
std::uint64_t Writes() { return StressCount(200000); }

TEST(SeqLockConcurrencyTest, ReadersNeverReturnATornOrOlderRecord) {
  const std::uint64_t writes = Writes();
  StressProgress progress("seqlock writes", writes);
  Record record;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> torn{0};
  std::atomic<std::uint64_t> backwards{0};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> retries{0};

  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      std::uint32_t last = 0;
      std::uint64_t my_reads = 0;
      std::uint64_t my_attempts = 0;
      // At least one read after the writer is done, so every reader reads.
      for (bool finished = false; !finished;) {
        finished = done.load(std::memory_order_acquire);
        std::uint32_t copy[kWords] = {};
        const bool read = record.Lock().Read([&] {
          ++my_attempts;
          // Last word first, against the writer's order: a copy that
          // overlaps a write at all then mixes the two.
          for (std::size_t i = kWords; i-- > 0;) {
            copy[i] = sluice::detail::SeqLock::Load(record.WordAt(i));
          }
        });
        if (!read) continue;  // writes kept coming: allowed, nothing to check
        ++my_reads;
        for (std::size_t i = 1; i < kWords; ++i) {
          if (copy[i] != copy[0]) torn.fetch_add(1, std::memory_order_relaxed);
        }
        if (copy[0] < last) backwards.fetch_add(1, std::memory_order_relaxed);
        last = copy[0];
      }
      reads.fetch_add(my_reads, std::memory_order_relaxed);
      retries.fetch_add(my_attempts - my_reads, std::memory_order_relaxed);
    });
  }

  for (std::uint64_t n = 1; n <= writes; ++n) {
    const auto value = static_cast<std::uint32_t>(n);
    std::uint32_t words[kWords];
    for (std::uint32_t& word : words) word = value;
    record.Write(words);
    progress.Step();
  }
  done.store(true, std::memory_order_release);
  for (std::thread& reader : readers) reader.join();

  EXPECT_EQ(torn.load(), 0u) << "a read returned a record mixed from two writes";
  EXPECT_EQ(backwards.load(), 0u) << "a reader saw an older write after a newer one";
  EXPECT_GE(reads.load(), static_cast<std::uint64_t>(kReaders));
  std::uint32_t last[kWords] = {};
  ASSERT_TRUE(record.Read(last));
  for (std::uint32_t word : last) EXPECT_EQ(word, static_cast<std::uint32_t>(writes));
  std::printf("[ seqlock  ] %llu writes, %llu reads, %llu attempts read again\n",
              static_cast<unsigned long long>(writes),
              static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(retries.load()));
}

}  // namespace
}  // namespace seqlock_concurrency_test
}  // namespace sluice_test
