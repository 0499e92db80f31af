// The benchmark harness's isolation: a value in Isolated storage shares no
// 128-byte block (two cache lines, a prefetched pair) with anything else, so
// a consumer's bookkeeping cannot slow a producer through false sharing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness/isolated.hpp"
#include "peers/peer_adapters.hpp"

namespace sluice::bench {
namespace {

constexpr std::uintptr_t kBlock = 128;

std::uintptr_t FirstBlock(const void* p) { return reinterpret_cast<std::uintptr_t>(p) / kBlock; }

// The block of an object's last byte.
template <typename T>
std::uintptr_t LastBlock(const T& object) {
  return (reinterpret_cast<std::uintptr_t>(&object) + sizeof(T) - 1) / kBlock;
}

// True when the two objects have a 128-byte block in common.
template <typename A, typename B>
bool ShareABlock(const A& a, const B& b) {
  return FirstBlock(&a) <= LastBlock(b) && FirstBlock(&b) <= LastBlock(a);
}

struct Counters {
  std::uint64_t sent = 0;
  std::uint64_t admitted = 0;
};

TEST(BenchIsolationTest, FillsWholeAlignedBlocks) {
  EXPECT_EQ(kIsolation, kBlock) << "two cache lines: the adjacent-line prefetcher moves pairs";
  EXPECT_GE(alignof(Isolated<char>), kBlock);
  EXPECT_GE(alignof(Isolated<std::uint64_t>), kBlock);
  EXPECT_GE(alignof(Isolated<std::atomic<bool>>), kBlock);
  EXPECT_EQ(sizeof(Isolated<char>) % kBlock, 0u);
  EXPECT_EQ(sizeof(Isolated<std::uint64_t>) % kBlock, 0u);
  EXPECT_EQ(sizeof(Isolated<Counters>) % kBlock, 0u);
  EXPECT_EQ(sizeof(Isolated<char[200]>) % kBlock, 0u);
}

TEST(BenchIsolationTest, StartsZeroed) {
  Isolated<std::uint64_t> count;
  Isolated<std::atomic<bool>> flag;
  EXPECT_EQ(count.value, 0u);
  EXPECT_FALSE(flag.value.load());
}

TEST(BenchIsolationTest, LocalsShareNoBlockWithEachOtherOrTheirNeighbours) {
  std::uint64_t before = 1;
  Isolated<std::uint64_t> consumed;
  Isolated<std::uint64_t> sink;
  std::uint64_t after = 2;
  EXPECT_FALSE(ShareABlock(consumed, sink));
  EXPECT_FALSE(ShareABlock(before, consumed));
  EXPECT_FALSE(ShareABlock(before, sink));
  EXPECT_FALSE(ShareABlock(after, consumed));
  EXPECT_FALSE(ShareABlock(after, sink));
  EXPECT_EQ(FirstBlock(&consumed.value), LastBlock(consumed.value));
}

TEST(BenchIsolationTest, VectorElementsShareNoBlock) {
  // One producer's counters never share a block with another's.
  std::vector<Isolated<std::uint64_t>> counts(4);
  std::vector<Isolated<Counters>> per_producer(4);
  for (std::size_t i = 0; i + 1 < counts.size(); ++i) {
    EXPECT_FALSE(ShareABlock(counts[i].value, counts[i + 1].value)) << i;
    EXPECT_FALSE(ShareABlock(per_producer[i].value, per_producer[i + 1].value)) << i;
    EXPECT_NE(FirstBlock(&counts[i]), FirstBlock(&counts[i + 1])) << i;
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(counts.data()) % kBlock, 0u);
}

TEST(BenchIsolationTest, HeapAndMemberStorageIsAligned) {
  const auto boxed = std::make_unique<Isolated<std::uint64_t>>();
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(boxed.get()) % kBlock, 0u);
  struct Frame {
    std::uint64_t read_by_producer = 0;
    Isolated<std::uint64_t> written_by_consumer;
  };
  const auto frame = std::make_unique<Frame>();
  EXPECT_FALSE(ShareABlock(frame->read_by_producer, frame->written_by_consumer));
}

// The peer adapters keep what one side writes apart from what the other
// reads: they hold Isolated members, so they are block-aligned themselves.
TEST(BenchIsolationTest, PeerAdaptersIsolateEachSidesState) {
  struct Probe {
    void operator()(const Message&) {}
  };
  using PublishFastAdapter = SluiceAdapter<ProducerModel::kSingle, PerformanceMode::FULL_FEATURED,
                                           SluiceCall::kPublishFast, SluicePath::kCallbacks, Probe>;
  EXPECT_GE(alignof(PublishFastAdapter), kBlock);
  EXPECT_GE(alignof(MutexDequeAdapter<Probe>), kBlock);
}

}  // namespace
}  // namespace sluice::bench
