// The bridge's tallies on their own: Count, and the copy of every tally
// into its field of the statistics snapshot.
#include "sluice/nats/counters.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sluice/message.hpp"

namespace counters_test {
namespace {

using sluice::nats::BridgeStatisticsSnapshot;
using sluice::nats::detail::Counters;

TEST(NatsCounters, CountAddsOne) {
  std::atomic<std::uint64_t> counter{41};
  sluice::nats::detail::Count(counter);
  EXPECT_EQ(counter.load(), 42u);
}

// Each tally holds a value of its own, so one copied into another's field
// (or not at all) shows.
TEST(NatsCounters, EveryTallyReachesItsOwnFieldAndNothingElse) {
  Counters counters;
  std::uint64_t next = 1;
  const auto set = [&next](std::atomic<std::uint64_t>& counter) { counter.store(next++); };
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    set(counters.frames_sent[p]);
    set(counters.send_dropped[p]);
    set(counters.delivered[p]);
    set(counters.bus_dropped[p]);
    set(counters.admitted_after_wait[p]);
    set(counters.handed_back[p]);
  }
  set(counters.jetstream_resent);
  set(counters.jetstream_behind_window);
  set(counters.permission_violations);
  set(counters.unsequenced);
  set(counters.reconnect_buffer_overflows);
  set(counters.encode_failed);
  set(counters.loop_suppressed);
  set(counters.frames_received);
  set(counters.echo_suppressed);
  for (auto& rejected : counters.rejected) set(rejected);
  set(counters.on_reject_threw);
  set(counters.disconnects);
  set(counters.reconnects);

  BridgeStatisticsSnapshot s;
  s.connected = true;
  s.streams.gaps = 99;
  s.slow_consumer_dropped = {7, 8, 9};
  counters.CopyTo(s);

  next = 1;
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    EXPECT_EQ(s.frames_sent[p], next++) << p;
    EXPECT_EQ(s.send_dropped[p], next++) << p;
    EXPECT_EQ(s.delivered[p], next++) << p;
    EXPECT_EQ(s.bus_dropped[p], next++) << p;
    EXPECT_EQ(s.admitted_after_wait[p], next++) << p;
    EXPECT_EQ(s.handed_back[p], next++) << p;
  }
  EXPECT_EQ(s.jetstream_resent, next++);
  EXPECT_EQ(s.jetstream_behind_window, next++);
  EXPECT_EQ(s.permission_violations, next++);
  EXPECT_EQ(s.unsequenced, next++);
  EXPECT_EQ(s.reconnect_buffer_overflows, next++);
  EXPECT_EQ(s.encode_failed, next++);
  EXPECT_EQ(s.loop_suppressed, next++);
  EXPECT_EQ(s.frames_received, next++);
  EXPECT_EQ(s.echo_suppressed, next++);
  for (std::size_t e = 0; e < s.rejected.size(); ++e) EXPECT_EQ(s.rejected[e], next++) << e;
  EXPECT_EQ(s.on_reject_threw, next++);
  EXPECT_EQ(s.disconnects, next++);
  EXPECT_EQ(s.reconnects, next++);
  // The fields other parts keep are left as they were.
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.streams.gaps, 99u);
  EXPECT_EQ(s.slow_consumer_dropped, (sluice::nats::PriorityCounts{7, 8, 9}));
}

}  // namespace
}  // namespace counters_test
