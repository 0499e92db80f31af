// Producer lanes with threads (run under ThreadSanitizer in CI): exactly once
// and per-producer order with lane and shared producers together while lanes
// are registered and handed back; Close while lane producers publish (the
// asymmetric handshake, detail/queue/producer_lanes.hpp SYNC POINT (L)) with and
// without a heavy fence; registration races. HIGH-first across lanes is in
// priority_order_concurrency_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "sluice/extras/membarrier_fence.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"
#include "typed_test_names.hpp"

namespace producer_lane_concurrency_test {
namespace {

using sluice::MessagePriority;

// The counts below are a tenth under ThreadSanitizer, some ten times
// slower; SLUICE_STRESS_SCALE multiplies them all (StressCount).
#if defined(__SANITIZE_THREAD__)
constexpr std::uint32_t kScale = 1;
#else
constexpr std::uint32_t kScale = 10;
#endif

struct Tagged {
  std::uint32_t producer = 0;
  std::uint32_t epoch = 0;  // the producer's registration (lanes) or 0
  std::uint32_t seq = 0;    // per producer and epoch
};
using Payload = std::variant<Tagged>;

struct FifoLanes : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<3, 32, 4>;
};
struct OrderedLanes : FifoLanes {
  using Delivery = sluice::PriorityDelivery<>;
};
struct MembarrierLanes : FifoLanes {
  using Lanes = sluice::ProducerLanes<3, 32, 4, sluice::MembarrierHeavyFence>;
};
struct OrderedMembarrierLanes : OrderedLanes {
  using Lanes = sluice::ProducerLanes<3, 32, 4, sluice::MembarrierHeavyFence>;
};

using sluice_test::ProgressWatch;
using sluice_test::StressCount;
using sluice_test::StressProgress;

template <typename Bus>
class ProducerLaneConcurrencyTest : public ::testing::Test {};
using Buses = ::testing::Types<sluice::MpscBus<Payload, 64, FifoLanes>,
                               sluice::MpscBus<Payload, 64, OrderedLanes>,
                               sluice::MpscBus<Payload, 64, MembarrierLanes>,
                               sluice::SpscBus<Payload, 64, OrderedMembarrierLanes>>;
TYPED_TEST_SUITE(ProducerLaneConcurrencyTest, Buses, sluice_test::IndexNames);

template <typename Bus>
constexpr std::uint32_t kSharedProducers =
    Bus::kProducerModel == sluice::ProducerModel::kMulti ? 2 : 1;

// Lane producers register, publish a stretch, hand the lane back and
// register again (perhaps another lane), while shared producers publish
// beside them. Every admitted message is dispatched exactly once, and each
// producer's messages of one registration (or all of a shared producer's)
// arrive in publish order. Priorities vary, so on the priority-ordered bus
// the order is checked per priority.
// Count: 20,000 messages per producer in stretches of 97: each lane
// producer hands its lane back and registers again some 200 times, with
// shared producers publishing beside them through 64 slots; four producers
// for three lanes, so registrations are refused and retried too (150 to
// 1,300 times in a measured run).
TYPED_TEST(ProducerLaneConcurrencyTest, ExactlyOnceAndInOrderPerProducerWhileLanesChangeHands) {
  using Bus = TypeParam;
  constexpr std::uint32_t kLaneProducers = 4;  // one more than the lanes
  const std::uint32_t shared_producers = kSharedProducers<Bus>;
  const auto per_producer = static_cast<std::uint32_t>(StressCount(2000 * kScale));
  constexpr std::uint32_t kStretch = 97;  // messages per registration
  auto bus = std::make_unique<Bus>();
  const std::uint32_t producers = kLaneProducers + shared_producers;
  std::atomic<std::uint32_t> done{0};
  std::vector<std::thread> threads;
  threads.reserve(producers);
  const auto priority_of = [](std::uint32_t i) { return static_cast<MessagePriority>(i % 3); };
  for (std::uint32_t p = 0; p < kLaneProducers; ++p) {
    threads.emplace_back([&, p] {
      std::uint32_t sent = 0;
      std::uint32_t epoch = 0;
      while (sent < per_producer) {
        typename Bus::Producer lane = bus->RegisterProducer();
        if (!lane) {  // every lane taken: try again
          std::this_thread::yield();
          continue;
        }
        ++epoch;
        std::uint32_t seq[sluice::kPriorityCount] = {0, 0, 0};
        for (std::uint32_t i = 0; i < kStretch && sent < per_producer; ++i, ++sent) {
          const MessagePriority priority = priority_of(sent);
          const auto index = static_cast<std::size_t>(priority);
          while (!lane.PublishWithPriority(Tagged{p, epoch, seq[index]}, p, priority)) {
            std::this_thread::yield();
          }
          ++seq[index];
        }
      }
      done.fetch_add(1, std::memory_order_release);
    });
  }
  for (std::uint32_t s = 0; s < shared_producers; ++s) {
    threads.emplace_back([&, s] {
      const std::uint32_t p = kLaneProducers + s;
      std::uint32_t seq[sluice::kPriorityCount] = {0, 0, 0};
      for (std::uint32_t sent = 0; sent < per_producer; ++sent) {
        const MessagePriority priority = priority_of(sent);
        const auto index = static_cast<std::size_t>(priority);
        while (!bus->PublishWithPriority(Tagged{p, 0, seq[index]}, p, priority)) {
          std::this_thread::yield();
        }
        ++seq[index];
      }
      done.fetch_add(1, std::memory_order_release);
    });
  }
  const std::uint64_t total = std::uint64_t{producers} * per_producer;
  StressProgress progress("lane and shared messages dispatched", total);
  // Messages of one lane producer's two registrations can interleave (the
  // old lane may still hold some when the new one is taken), so order is
  // checked within each registration (epoch) and priority.
  std::uint64_t received = 0;
  std::uint64_t violations = 0;
  std::vector<std::vector<std::array<std::uint32_t, sluice::kPriorityCount>>> next(producers);
  const auto on_message = [&](const Tagged& message, const sluice::MessageHeader& header) {
    auto& epochs = next.at(message.producer);
    if (message.epoch >= epochs.size()) epochs.resize(message.epoch + std::size_t{1}, {0, 0, 0});
    std::uint32_t& expected = epochs[message.epoch][static_cast<std::size_t>(header.priority)];
    if (message.seq != expected) ++violations;
    expected = message.seq + 1;
    // A lane message names its lane; a shared one names none.
    if ((header.lane == 0) != (message.producer >= kLaneProducers)) ++violations;
    ++received;
    progress.Step();
  };
  ProgressWatch watch;
  while (received < total) {
    if (bus->ProcessBatchWith(on_message) != 0) {
      watch.Progress();
      continue;
    }
    // Acquire pairs with each producer's release: their publishes are done.
    if (done.load(std::memory_order_acquire) == producers && bus->QueueDepth() == 0 &&
        bus->ProcessBatchWith(on_message) == 0) {
      break;
    }
    watch.Check("a message never became visible");
    std::this_thread::yield();
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(received, total);
  EXPECT_EQ(violations, 0u);
  EXPECT_EQ(bus->QueueDepth(), 0u);
  const sluice::BusStatisticsSnapshot stats = bus->GetStatistics();
  EXPECT_EQ(stats.messages_published, total);
  EXPECT_EQ(stats.messages_processed, total);
  EXPECT_EQ(bus->RegisteredProducers(), 0u);
}

// Close while lane producers publish as fast as they can. The consumer
// dispatches until IsDrained() says true and then stops; every publish that
// returned true must have been dispatched by then (a lane publish admitted
// after the drained verdict would be lost), and nothing comes after it.
// Repeated, so that Close lands at many points of the publishes.
// Count: 100 rounds (10 under ThreadSanitizer), each one Close racing three
// lane producers mid-publish after 0 to 6 yields of the closer: each round
// one chance for a lane publish to be admitted on one side of the
// handshake and judged on the other.
TYPED_TEST(ProducerLaneConcurrencyTest,
           WhenIsDrainedSaysTrueEveryAdmittedLanePublishWasDispatched) {
  using Bus = TypeParam;
  constexpr std::uint32_t kProducers = 3;
  const std::uint64_t rounds = StressCount(10 * kScale);
  StressProgress progress("lane close rounds", rounds);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    auto bus = std::make_unique<Bus>();
    std::vector<typename Bus::Producer> lanes;
    lanes.reserve(kProducers);
    for (std::uint32_t p = 0; p < kProducers; ++p) lanes.push_back(bus->RegisterProducer());
    std::atomic<std::uint64_t> admitted{0};
    std::atomic<std::uint32_t> started{0};
    std::vector<std::thread> threads;
    threads.reserve(kProducers);
    for (std::uint32_t p = 0; p < kProducers; ++p) {
      threads.emplace_back([&, p] {
        started.fetch_add(1, std::memory_order_relaxed);
        std::uint64_t mine = 0;
        for (std::uint32_t seq = 0;; ++seq) {
          if (lanes[p].Publish(Tagged{p, 0, seq}, p)) {
            ++mine;
          } else if (bus->IsClosed()) {
            break;
          } else {
            std::this_thread::yield();  // the lane is full
          }
        }
        admitted.fetch_add(mine, std::memory_order_relaxed);
      });
    }
    std::uint64_t dispatched = 0;
    // Some publishes first, then Close from another thread mid-stream.
    while (started.load(std::memory_order_relaxed) < kProducers) std::this_thread::yield();
    std::thread closer([&] {
      for (std::uint64_t i = 0; i < round % 7; ++i) std::this_thread::yield();
      bus->Close();
    });
    ProgressWatch watch;
    while (!bus->IsDrained()) {
      if (bus->ProcessBatchWith([&](const Tagged&) { ++dispatched; }) != 0) watch.Progress();
      watch.Check("the bus never drained");
    }
    const std::uint64_t at_verdict = dispatched;
    closer.join();
    for (std::thread& thread : threads) thread.join();
    // Nothing admitted after the verdict: no message left to dispatch.
    EXPECT_EQ(bus->ProcessBatchWith([&](const Tagged&) { ++dispatched; }), 0u) << "round " << round;
    ASSERT_EQ(at_verdict, admitted.load(std::memory_order_relaxed)) << "round " << round;
    EXPECT_EQ(bus->GetStatistics().messages_published, at_verdict);
    progress.Step();
  }
}

// Threads race to register and unregister; a lane is never held by two at
// once (each holder marks it and checks that no one else had), and the
// messages published meanwhile all arrive.
// Count: 3,100 registrations per thread (400 under ThreadSanitizer), five
// threads for three lanes: some 15,500 registrations racing each other and
// the hand-backs, each a chance for one free lane to be given to two.
TYPED_TEST(ProducerLaneConcurrencyTest, ALaneIsNeverHeldByTwoProducers) {
  using Bus = TypeParam;
  constexpr std::uint32_t kThreads = 5;
  const auto per_thread = static_cast<std::uint32_t>(StressCount(3000 * kScale / 10 + 100));
  StressProgress progress("lane registrations, thread 0", per_thread);
  auto bus = std::make_unique<Bus>();
  std::atomic<std::uint32_t> holder[FifoLanes::Lanes::kMaxProducers + 1] = {};
  std::atomic<std::uint64_t> doubles{0};
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint32_t> done{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint32_t i = 0; i < per_thread; ++i) {
        if (t == 0) progress.Step();
        typename Bus::Producer lane = bus->RegisterProducer();
        if (!lane) continue;
        if (holder[lane.Lane()].exchange(t + 1, std::memory_order_relaxed) != 0) {
          doubles.fetch_add(1, std::memory_order_relaxed);
        }
        if (lane.Publish(Tagged{t, 0, i}, t)) sent.fetch_add(1, std::memory_order_relaxed);
        holder[lane.Lane()].store(0, std::memory_order_relaxed);
      }
      done.fetch_add(1, std::memory_order_release);
    });
  }
  std::uint64_t received = 0;
  ProgressWatch watch;
  for (;;) {
    if (bus->ProcessBatchWith([&](const Tagged&) { ++received; }) != 0) {
      watch.Progress();
      continue;
    }
    if (done.load(std::memory_order_acquire) == kThreads && bus->QueueDepth() == 0 &&
        bus->ProcessBatchWith([&](const Tagged&) { ++received; }) == 0) {
      break;
    }
    watch.Check("a message never became visible");
    std::this_thread::yield();
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(doubles.load(), 0u);
  EXPECT_EQ(received, sent.load());
  EXPECT_GT(received, 0u);
  EXPECT_EQ(bus->RegisteredProducers(), 0u);
}

// A reader of ForEachProducer never sees one holder's name with another's
// counts (SYNC POINT (N), detail/queue/lane_holder.hpp): holders named "low"
// publish only LOW and holders named "high" only HIGH, on lanes that change
// hands every round, so a name shown with the other priority's counts, or
// with more than one holder's worth, is a mixed read.
TYPED_TEST(ProducerLaneConcurrencyTest, AProducersNameIsNeverShownWithAnotherHoldersCounts) {
  using Bus = TypeParam;
  auto bus = std::make_unique<Bus>();
  constexpr std::uint32_t kProducers = 2;
  constexpr std::uint32_t kPerRound = 6;
  const std::uint64_t rounds = StressCount(100 * kScale);
  std::atomic<std::uint32_t> running{kProducers};
  StressProgress progress("producer rounds read by name, thread 0", rounds);
  std::vector<std::thread> producers;
  for (std::uint32_t t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      for (std::uint64_t r = 0; r < rounds; ++r) {
        if (t == 0) progress.Step();
        const bool high = (r + t) % 2 == 0;
        auto producer = bus->RegisterProducer(high ? "high" : "low");
        if (!producer) continue;  // every lane taken this instant
        for (std::uint32_t i = 0; i < kPerRound; ++i) {
          (void)producer.PublishWithPriority(Tagged{t, 0, i}, t,
                                             high ? MessagePriority::HIGH : MessagePriority::LOW);
        }
      }
      running.fetch_sub(1, std::memory_order_release);
    });
  }
  std::atomic<bool> reading{true};
  std::uint64_t reads = 0;
  std::uint64_t mixed = 0;
  std::thread reader([&] {
    while (reading.load(std::memory_order_acquire)) {
      bus->ForEachProducer([&](const sluice::ProducerStatisticsSnapshot& p) {
        ++reads;
        const std::string name = p.name;
        const std::uint64_t low = p.low_priority_published + p.low_priority_dropped;
        const std::uint64_t high = p.high_priority_published + p.high_priority_dropped;
        const std::uint64_t medium = p.medium_priority_published + p.medium_priority_dropped;
        const bool ok = (name == "low" && high == 0 && low <= kPerRound) ||
                        (name == "high" && low == 0 && high <= kPerRound);
        if (!ok || medium != 0) ++mixed;
      });
    }
  });
  ProgressWatch watch;
  while (running.load(std::memory_order_acquire) != 0) {
    if (bus->ProcessBatch(64) > 0) watch.Progress();
    watch.Check("producers publishing while lanes change hands");
  }
  for (std::thread& producer : producers) producer.join();
  reading.store(false, std::memory_order_release);
  reader.join();
  while (bus->ProcessBatch() > 0) {
  }
  EXPECT_EQ(mixed, 0u) << "of " << reads << " reads";
  EXPECT_EQ(bus->RegisteredProducers(), 0u);
}

}  // namespace
}  // namespace producer_lane_concurrency_test
