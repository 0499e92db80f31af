// Tracing under threads: two producers and a consumer record into one
// ring while a drainer empties it. Every admitted message comes out as one
// whole flow, and every refusal and batch as its events; nothing is lost
// in a ring large enough for the whole run, and nothing is made up.
// CI runs it under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace trace_concurrency_test {
namespace {

using sluice::MessagePriority;
using sluice::trace::TraceEvent;
using sluice::trace::TraceEventKind;

// 2 x 10,000 messages: at most 3 events each, one refusal event each
// refused, and a batch's two events at most once per message: under
// 120,000 events, which the ring holds whatever the drainer's pace, so
// that "nothing lost" is a fact to check, not a race. Enough to interleave
// the four threads many thousand times; about a second under
// ThreadSanitizer.
constexpr std::uint32_t kPerProducer = 10000;
using Ring = sluice::trace::TraceRing<1u << 17>;
struct TracedTraits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<Ring>;
};
using Payload = std::variant<std::uint32_t, std::uint64_t>;
using TracedBus = sluice::AsyncBus<Payload, 64, sluice::ProducerModel::kMulti, TracedTraits>;

TEST(TraceConcurrencyTest, EveryAdmittedMessageIsOneWholeFlowWhileTheRingIsDrained) {
  Ring ring;
  TracedBus bus;
  bus.GetObserver().Attach(&ring, 1);
  std::atomic<std::uint32_t> producers_left{2};
  std::atomic<bool> consumer_done{false};
  std::atomic<std::uint64_t> refused{0};
  std::uint64_t batches = 0;
  std::uint64_t taken_by_consumer = 0;
  std::vector<TraceEvent> events;

  std::thread drainer([&] {
    const auto keep = [&events](const TraceEvent& event) { events.push_back(event); };
    // Acquire: pairs with the consumer's release store, after which its
    // and the producers' events are all recorded.
    while (!consumer_done.load(std::memory_order_acquire)) {
      if (ring.Drain(keep) == 0) std::this_thread::yield();
    }
    while (ring.Drain(keep) != 0) {
    }
  });
  std::thread consumer([&] {
    for (;;) {
      // Acquire: pairs with each producer's release decrement.
      const bool last = producers_left.load(std::memory_order_acquire) == 0;
      const std::uint32_t taken = bus.ProcessBatchWith([](const auto&) {});
      if (taken != 0) {
        ++batches;
        taken_by_consumer += taken;
      } else if (last) {
        break;
      } else {
        std::this_thread::yield();
      }
    }
    consumer_done.store(true, std::memory_order_release);
  });
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      for (std::uint32_t i = 0; i < kPerProducer; ++i) {
        const std::uint32_t sender = p * kPerProducer + i;
        const Payload payload = i % 2 == 0 ? Payload(std::uint32_t{i}) : Payload(std::uint64_t{i});
        if (!bus.PublishWithPriority(payload, sender, MessagePriority::HIGH)) {
          refused.fetch_add(1, std::memory_order_relaxed);
        }
        if (i % 2500 == 2499) std::printf("producer %u: %u published\n", p, i + 1);
      }
      producers_left.fetch_sub(1, std::memory_order_release);
    });
  }
  for (std::thread& producer : producers) producer.join();
  consumer.join();
  drainer.join();

  EXPECT_EQ(ring.Lost(), 0u);
  const std::uint64_t admitted = 2ull * kPerProducer - refused.load();
  EXPECT_EQ(taken_by_consumer, admitted);
  // (lane, msg_id) -> the kinds seen, in ring order, and the sender.
  std::map<std::pair<std::uint16_t, std::uint64_t>, std::vector<TraceEvent>> flows;
  std::uint64_t refused_events = 0, begins = 0, ends = 0, ended = 0;
  for (const TraceEvent& event : events) {
    switch (event.kind) {
      case TraceEventKind::kAdmitted:
      case TraceEventKind::kTaken:
      case TraceEventKind::kDispatched:
        flows[{event.lane, event.msg_id}].push_back(event);
        break;
      case TraceEventKind::kRefused:
        refused_events += event.value;
        break;
      case TraceEventKind::kBatchBegin:
        ++begins;
        break;
      case TraceEventKind::kBatchEnd:
        ++ends;
        ended += event.value;
        break;
      default:
        ADD_FAILURE() << "unexpected kind " << static_cast<int>(event.kind);
    }
  }
  EXPECT_EQ(refused_events, refused.load());
  EXPECT_EQ(begins, batches);
  EXPECT_EQ(ends, batches);
  EXPECT_EQ(ended, admitted);
  ASSERT_EQ(flows.size(), admitted);
  std::vector<bool> sender_seen(2 * kPerProducer, false);
  for (const auto& [key, flow] : flows) {
    ASSERT_EQ(flow.size(), 3u) << "msg_id " << key.second;
    // The consumer's two in its order; the producer's admission anywhere
    // (it is recorded after the publish, which the consumer may beat).
    std::vector<TraceEventKind> consumer_kinds;
    for (const TraceEvent& event : flow) {
      if (event.kind != TraceEventKind::kAdmitted) consumer_kinds.push_back(event.kind);
      EXPECT_EQ(event.sender_id, flow[0].sender_id);
      EXPECT_EQ(event.type_index, flow[0].sender_id % kPerProducer % 2);
    }
    ASSERT_EQ(consumer_kinds,
              (std::vector<TraceEventKind>{TraceEventKind::kTaken, TraceEventKind::kDispatched}));
    ASSERT_LT(flow[0].sender_id, sender_seen.size());
    EXPECT_FALSE(sender_seen[flow[0].sender_id]) << "sender " << flow[0].sender_id << " twice";
    sender_seen[flow[0].sender_id] = true;
  }
}

}  // namespace
}  // namespace trace_concurrency_test
