#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"

namespace sluice_test {
namespace wraparound_test {
namespace {

constexpr sluice::Position kMax = std::numeric_limits<sluice::Position>::max();

// Starting a few laps before the position type wraps (2^64, or 2^32 with
// SLUICE_ATOMIC_BITS=32), the position, the slot sequence and the
// admission arithmetic all cross the wrap while the bus fills and drains.
template <typename Bus>
void RunAcrossTheWrap() {
  Bus bus(sluice::detail::FirstPosition{kMax - 3 * Bus::Capacity() / 2});
  std::vector<std::uint64_t> ids;
  std::uint64_t expected_value = 0;
  ASSERT_TRUE(
      bus.template Subscribe<Sequenced>([&](const Sequenced& s, const sluice::MessageHeader& h) {
           EXPECT_EQ(s.sequence, expected_value++);
           ids.push_back(h.msg_id);
         })
          .IsValid());
  std::uint64_t next = 0;
  for (int round = 0; round < 12; ++round) {
    // Fill until refused at MEDIUM's threshold, then drain part of it.
    while (bus.Publish(Sequenced{0, next})) ++next;
    EXPECT_EQ(bus.QueueDepth(), sluice::FillLimit(80, Bus::Capacity()));
    bus.ProcessBatch(Bus::Capacity() / 2);
  }
  bus.ProcessBatch();
  EXPECT_EQ(expected_value, next);
  ASSERT_GT(ids.size(), 3 * Bus::Capacity());
  bool wrapped = false;
  for (std::size_t i = 1; i < ids.size(); ++i) {
    // Unsigned: kMax + 1 == 0 (msg_id is the position, widened to 64 bits).
    EXPECT_EQ(ids[i], static_cast<sluice::Position>(ids[i - 1] + 1));
    wrapped = wrapped || ids[i] == 0;
  }
  EXPECT_TRUE(wrapped) << "the test must actually cross the wrap";
}

TEST(WraparoundTest, MpscCrossesThe64BitWrap) {
  RunAcrossTheWrap<sluice::MpscBus<BasicPayload, 16>>();
}
TEST(WraparoundTest, SpscCrossesThe64BitWrap) {
  RunAcrossTheWrap<sluice::SpscBus<BasicPayload, 16>>();
}

}  // namespace
}  // namespace wraparound_test
}  // namespace sluice_test
