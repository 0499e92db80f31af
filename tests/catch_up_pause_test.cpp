// The catch-up pause (DefaultBusTraits::CatchUp, sluice/bus_traits.hpp): the
// first empty poll after a poll that took messages pauses; a poll after an
// empty poll never does; a pause that gathered too little doubles the next
// one (up to the knob) and is skipped at the next 1, 5, 21, ... catch-ups;
// one that gathered enough resets the skips. The pause here is a counting
// policy whose hook plays the producer that runs meanwhile.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <variant>
#include <vector>

#include "sluice/extras/condition_variable_parker.hpp"
#include "sluice/sluice.hpp"
#include "sluice/wait_set.hpp"

namespace catch_up_pause_test {
namespace {

struct Reading {
  std::uint32_t seq;
};
using Payload = std::variant<Reading>;

// Records every pause's length and runs `during` in it (the producer).
struct PauseLog {
  static std::vector<std::uint32_t>& Lengths() {
    static std::vector<std::uint32_t> lengths;
    return lengths;
  }
  static std::function<void()>& During() {
    static std::function<void()> during;
    return during;
  }
  static void Reset() {
    Lengths().clear();
    During() = nullptr;
  }
};

template <std::uint32_t kMost>
struct CountingPause {
  static constexpr std::uint32_t kMostPauses = kMost;
  static void Pause(std::uint32_t pauses) noexcept {
    PauseLog::Lengths().push_back(pauses);
    if (PauseLog::During()) PauseLog::During()();
  }
};

template <std::uint32_t kMost>
struct CountingTraits : sluice::DefaultBusTraits {
  using CatchUp = CountingPause<kMost>;
};

template <std::uint32_t kMost = 128, sluice::ProducerModel kModel = sluice::ProducerModel::kSingle>
using Bus = sluice::AsyncBus<Payload, 1024, kModel, CountingTraits<kMost>>;

class CatchUpPauseTest : public ::testing::Test {
 protected:
  void SetUp() override { PauseLog::Reset(); }
  void TearDown() override { PauseLog::Reset(); }
};

template <typename B>
void PublishOne(B& bus, std::uint32_t seq) {
  ASSERT_TRUE(bus.Publish(Reading{seq}, 1).IsAdmitted());
}

TEST_F(CatchUpPauseTest, ANeverFedConsumerNeverPauses) {
  Bus<> bus;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
}

TEST_F(CatchUpPauseTest, AnIdleConsumerPausesOnceAfterItsLastBatchThenPollsWithout) {
  Bus<> bus;
  PublishOne(bus, 1);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(PauseLog::Lengths(), std::vector<std::uint32_t>{8});
}

TEST_F(CatchUpPauseTest, APauseThatGathersMessagesIsTakenAtEveryCatchUp) {
  Bus<> bus;
  std::uint32_t seq = 0;
  // The producer publishes 3 messages during each pause: at 8 pauses, one
  // per 8 pauses plus two is 3, so each pause pays.
  PauseLog::During() = [&] {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(bus.Publish(Reading{++seq}, 1).IsAdmitted());
  };
  PublishOne(bus, ++seq);
  std::uint32_t taken = bus.ProcessBatch();
  for (int cycle = 0; cycle < 100; ++cycle) {
    EXPECT_EQ(bus.ProcessBatch(), 0u);  // caught up: pauses, 3 published meanwhile
    taken += bus.ProcessBatch();
  }
  EXPECT_EQ(taken, seq);
  EXPECT_EQ(PauseLog::Lengths(), std::vector<std::uint32_t>(100, 8));
}

TEST_F(CatchUpPauseTest, AVisitorBatchPausesAsACallbackBatchDoes) {
  Bus<> bus;
  PublishOne(bus, 1);
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 1u);
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 0u);
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 0u);
  EXPECT_EQ(PauseLog::Lengths(), std::vector<std::uint32_t>{8});
}

// A producer that publishes one message and waits for its reply: each pause
// gathers at most that one message. The pauses come at catch-ups 1, 3, 9,
// 31, 117, 459, 1,825 and 7,287 of 10,000 (skips of 1, 5, 21, 85, 341,
// 1,365 and 5,461 between them), doubling from 8 to the knob's 128.
TEST_F(CatchUpPauseTest, AProducerThatWaitsForEachReplyMeetsThePauseEightTimesInTenThousand) {
  for (const bool request_arrives_during_the_pause : {false, true}) {
    SCOPED_TRACE(request_arrives_during_the_pause ? "request during the pause"
                                                  : "request after the pause");
    PauseLog::Reset();
    Bus<> bus;
    std::uint32_t seq = 0;
    std::uint32_t replies = 0;
    ASSERT_TRUE(bus.Subscribe<Reading>([&](const Reading&) { ++replies; }).IsValid());
    std::vector<std::uint32_t> paused_at;
    std::uint32_t catch_up = 0;
    for (std::uint32_t request = 0; request < 10000; ++request) {
      PublishOne(bus, ++seq);
      ASSERT_EQ(bus.ProcessBatch(), 1u);
      ++catch_up;
      const std::size_t pauses_before = PauseLog::Lengths().size();
      if (request_arrives_during_the_pause) {
        PauseLog::During() = [&] {
          ASSERT_TRUE(bus.Publish(Reading{++seq}, 1).IsAdmitted());
          PauseLog::During() = nullptr;
        };
      }
      EXPECT_EQ(bus.ProcessBatch(), 0u);  // the catch-up
      const bool paused = PauseLog::Lengths().size() != pauses_before;
      if (paused) paused_at.push_back(catch_up);
      if (request_arrives_during_the_pause && paused) {
        ASSERT_EQ(bus.ProcessBatch(), 1u);  // the one message the pause gathered
        ++catch_up;
        EXPECT_EQ(bus.ProcessBatch(), 0u);  // a catch-up that the skip covers
      } else {
        PauseLog::During() = nullptr;
        EXPECT_EQ(bus.ProcessBatch(), 0u);  // idle: no pause
      }
    }
    EXPECT_EQ(replies, seq);
    if (!request_arrives_during_the_pause) {
      EXPECT_EQ(paused_at, (std::vector<std::uint32_t>{1, 3, 9, 31, 117, 459, 1825, 7287}));
    } else {
      EXPECT_EQ(paused_at.size(), 8u);
    }
    EXPECT_EQ(PauseLog::Lengths(), (std::vector<std::uint32_t>{8, 16, 32, 64, 128, 128, 128, 128}));
  }
}

TEST_F(CatchUpPauseTest, APauseNeverExceedsTheKnob) {
  Bus<20> bus;
  for (int request = 0; request < 200; ++request) {
    PublishOne(bus, 1);
    ASSERT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(bus.ProcessBatch(), 0u);
    EXPECT_EQ(bus.ProcessBatch(), 0u);
  }
  // Pauses at catch-ups 1, 3, 9, 31 and 117 of 200.
  EXPECT_EQ(PauseLog::Lengths(), (std::vector<std::uint32_t>{8, 16, 20, 20, 20}));
}

TEST_F(CatchUpPauseTest, APauseThatPaysAfterOnesThatDidNotEndsTheSkips) {
  Bus<> bus;
  std::uint32_t seq = 0;
  auto request = [&] {
    PublishOne(bus, ++seq);
    ASSERT_EQ(bus.ProcessBatch(), 1u);
  };
  // Two pauses of no use (8, then 16 after one skipped catch-up).
  request();
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  request();
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // skipped
  request();
  // This one (16 pauses) gathers 4: one per 8 pauses plus two. It pays.
  PauseLog::During() = [&] {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(Reading{++seq}, 1).IsAdmitted());
    PauseLog::During() = nullptr;
  };
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(bus.ProcessBatch(), 4u);
  // No skip after it: the next catch-up pauses at once, at the same length.
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(PauseLog::Lengths(), (std::vector<std::uint32_t>{8, 16, 16}));
}

TEST_F(CatchUpPauseTest, ABatchCalledFromInsideACallbackNeverPauses) {
  Bus<> bus;
  std::uint32_t inner = 99;
  ASSERT_TRUE(
      bus.Subscribe<Reading>([&](const Reading&) { inner = bus.ProcessBatch(); }).IsValid());
  PublishOne(bus, 1);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(inner, 0u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
}

TEST_F(CatchUpPauseTest, APollOfAnotherBusFromInsideACallbackOrVisitorNeverPauses) {
  Bus<> outer;
  Bus<> other;
  PublishOne(other, 7);
  ASSERT_EQ(other.ProcessBatch(), 1u);  // `other` has just caught up
  std::uint32_t inner = 99;
  ASSERT_TRUE(
      outer.Subscribe<Reading>([&](const Reading&) { inner = other.ProcessBatch(); }).IsValid());
  PublishOne(outer, 1);
  EXPECT_EQ(outer.ProcessBatch(), 1u);
  EXPECT_EQ(inner, 0u);
  PublishOne(outer, 2);
  EXPECT_EQ(outer.ProcessBatchWith(
                [&](const Reading&) { inner = other.ProcessBatchWith([](const Reading&) {}); }),
            1u);
  EXPECT_EQ(inner, 0u);
  // Only `outer`'s own catch-up, outside any batch, pauses.
  EXPECT_EQ(outer.ProcessBatch(), 0u);
  EXPECT_EQ(PauseLog::Lengths(), std::vector<std::uint32_t>{8});
}

TEST_F(CatchUpPauseTest, APollFromInsideABatchOfABusWithoutThePauseNeverPausesEither) {
  struct NoPause : sluice::DefaultBusTraits {
    using CatchUp = sluice::NoCatchUpPause;
  };
  sluice::SpscBus<Payload, 64, NoPause> outer;
  Bus<> other;
  PublishOne(other, 7);
  ASSERT_EQ(other.ProcessBatch(), 1u);  // `other` has just caught up
  ASSERT_TRUE(
      outer.Subscribe<Reading>([&](const Reading&) { (void)other.ProcessBatch(); }).IsValid());
  PublishOne(outer, 1);
  EXPECT_EQ(outer.ProcessBatch(), 1u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
}

struct WaitingTraits : CountingTraits<128> {
  using Waiting = sluice::WaitWith<sluice::ConditionVariableParker>;
};

TEST_F(CatchUpPauseTest, AWaitThatTimesOutIsAnEmptyCallAfterWhichNoPollPauses) {
  sluice::SpscBus<Payload, 64, WaitingTraits> bus;
  PublishOne(bus, 1);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(0)), 1u);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(1)), 0u);  // timed out: empty
  EXPECT_EQ(bus.ProcessBatch(), 0u);                                  // after an empty call
  PublishOne(bus, 2);
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 1u);
  EXPECT_EQ(bus.ProcessBatchWithWait([](const Reading&) {}, std::chrono::milliseconds(1)), 0u);
  EXPECT_EQ(bus.ProcessBatchWith([](const Reading&) {}), 0u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
}

struct SetTraits : CountingTraits<128> {
  using Waiting = sluice::WaitInSet<sluice::ConditionVariableParker>;
};
using SetBus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kSingle, SetTraits>;

TEST_F(CatchUpPauseTest, AWaitSetsBatchOverSeveralBusesNeverPauses) {
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  SetBus first(set);
  SetBus second(set);
  ASSERT_TRUE(first.Publish(Reading{1}, 1).IsAdmitted());
  EXPECT_EQ(set.ProcessBatchWait(std::chrono::milliseconds(100), 64, first, second), 1u);
  // `first` has just caught up; `second`'s message must not wait for a
  // pause of `first`.
  ASSERT_TRUE(second.Publish(Reading{2}, 1).IsAdmitted());
  EXPECT_EQ(set.ProcessBatchWait(std::chrono::milliseconds(100), 64, first, second), 1u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
  // A set's wait that times out is an empty call for every bus: `second`,
  // which has just caught up, does not pause at its next poll.
  EXPECT_EQ(set.ProcessBatchWait(std::chrono::milliseconds(1), 64, first, second), 0u);
  EXPECT_EQ(second.ProcessBatch(), 0u);
  EXPECT_TRUE(PauseLog::Lengths().empty());
}

// A producer that fills the queue as far as admission lets it during each
// pause: on a small queue a pause pays when it gathered a quarter of the
// room (not the 2 + 1 per 8 pauses a large queue asks), and such a pause
// is halved, so that pauses never hold the queue near its thresholds.
TEST_F(CatchUpPauseTest, OnASmallQueueAPauseThatGathersAQuarterOfItPaysAndIsHalved) {
  sluice::AsyncBus<Payload, 16, sluice::ProducerModel::kSingle, CountingTraits<128>> bus;
  std::uint32_t seq = 0;
  PauseLog::During() = [&] {
    while (bus.Publish(Reading{++seq}, 1).IsAdmitted()) {
    }
  };
  PublishOne(bus, ++seq);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  for (int cycle = 0; cycle < 8; ++cycle) {
    EXPECT_EQ(bus.ProcessBatch(), 0u);  // caught up: pauses, the producer fills meanwhile
    EXPECT_GE(bus.ProcessBatch(), 4u);  // a quarter of 16, or more
  }
  EXPECT_EQ(PauseLog::Lengths(), (std::vector<std::uint32_t>{8, 4, 2, 1, 1, 1, 1, 1}));
}

TEST_F(CatchUpPauseTest, APauseAfterWhichTheBatchReachedItsLimitPaysAndIsHalved) {
  Bus<> bus;
  std::uint32_t seq = 0;
  PauseLog::During() = [&] {
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(bus.Publish(Reading{++seq}, 1).IsAdmitted());
  };
  PublishOne(bus, ++seq);
  EXPECT_EQ(bus.ProcessBatch(2), 1u);
  for (int cycle = 0; cycle < 5; ++cycle) {
    EXPECT_EQ(bus.ProcessBatch(2), 0u);  // caught up: pauses, 20 published meanwhile
    for (int batch = 0; batch < 10; ++batch) EXPECT_EQ(bus.ProcessBatch(2), 2u);  // the limit
  }
  EXPECT_EQ(PauseLog::Lengths(), (std::vector<std::uint32_t>{8, 4, 2, 1, 1}));
}

TEST_F(CatchUpPauseTest, TheSeveralProducerBusPausesAlike) {
  Bus<128, sluice::ProducerModel::kMulti> bus;
  PublishOne(bus, 1);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
  EXPECT_EQ(PauseLog::Lengths(), std::vector<std::uint32_t>{8});
}

struct PriorityNoPauseTraits : sluice::PriorityOrderTraits {
  using CatchUp = sluice::NoCatchUpPause;
};

TEST_F(CatchUpPauseTest, NoCatchUpPauseIsTheFreestandingDefaultAndHostedIsCatchUpPause) {
  static_assert(sluice::NoCatchUpPause::kMostPauses == 0);
  // The pause's state fits in padding the consumer had: no bus is larger.
  struct NoPauseTraits : sluice::DefaultBusTraits {
    using CatchUp = sluice::NoCatchUpPause;
  };
  static_assert(sizeof(sluice::SpscBus<Payload, 1024>) ==
                sizeof(sluice::SpscBus<Payload, 1024, NoPauseTraits>));
  static_assert(sizeof(sluice::MpscBus<Payload, 1024>) ==
                sizeof(sluice::MpscBus<Payload, 1024, NoPauseTraits>));
  static_assert(sizeof(sluice::MpscBus<Payload, 1024, sluice::PriorityOrderTraits>) ==
                sizeof(sluice::MpscBus<Payload, 1024, PriorityNoPauseTraits>));
  // ... nor one that keeps no latency histograms or no observation.
  struct NoHistograms : sluice::DefaultBusTraits {
    using Latency = sluice::NoLatencyHistograms;
  };
  struct NoHistogramsNoPause : NoHistograms {
    using CatchUp = sluice::NoCatchUpPause;
  };
  struct NothingKept : sluice::DefaultBusTraits {
    using Observation = sluice::NoObservation;
  };
  struct NothingKeptNoPause : NothingKept {
    using CatchUp = sluice::NoCatchUpPause;
  };
  static_assert(sizeof(sluice::SpscBus<Payload, 1024, NoHistograms>) ==
                sizeof(sluice::SpscBus<Payload, 1024, NoHistogramsNoPause>));
  static_assert(sizeof(sluice::MpscBus<Payload, 1024, NothingKept>) ==
                sizeof(sluice::MpscBus<Payload, 1024, NothingKeptNoPause>));
#if SLUICE_FREESTANDING
  static_assert(std::is_same_v<sluice::DefaultBusTraits::CatchUp, sluice::NoCatchUpPause>);
#else
  static_assert(std::is_same_v<sluice::DefaultBusTraits::CatchUp, sluice::CatchUpPause<128>>);
#endif
  SUCCEED();
}

}  // namespace
}  // namespace catch_up_pause_test
