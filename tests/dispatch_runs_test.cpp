// A subscription batch on a bus of one ring (MPSC or SPSC, without lanes or
// priority order) hands the messages of one type to a sole subscriber in
// runs (detail/consume/consume_core.hpp, DispatchRuns). These tests hold the
// runs to what one message at a time gives: a callback that unsubscribes
// itself, one that subscribes another, one that throws, types that
// alternate, a batch limit inside a run; and ProcessBatchWith's runs,
// which hand each message to the visitor in turn and release the run's
// slots together (DispatchEachOfRuns).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "typed_test_names.hpp"

namespace sluice_test {
namespace dispatch_runs_test {
namespace {

// More messages than one run holds (32), so that runs follow runs.
constexpr std::int32_t kMessages = 80;

template <typename Bus>
void PublishMotorCommands(Bus& bus, std::int32_t count) {
  for (std::int32_t i = 0; i < count; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}, 1));
}

// `depths[k]`: the queue's depth seen while message k of kMessages was
// dispatched. One message at a time leaves kMessages - k; runs of 32 hold
// at most 31 more (the messages of the run before it), never fewer, and
// the last message of a run of 32 sees that bound.
void ExpectAtMost31MoreHeldAndTheBoundReached(const std::vector<std::size_t>& depths) {
  ASSERT_EQ(depths.size(), static_cast<std::size_t>(kMessages));
  std::size_t most_held = 0;
  for (std::size_t k = 0; k < depths.size(); ++k) {
    const std::size_t one_at_a_time = static_cast<std::size_t>(kMessages) - k;
    ASSERT_GE(depths[k], one_at_a_time) << "message " << k;
    EXPECT_LE(depths[k] - one_at_a_time, 31u) << "message " << k;
    most_held = std::max(most_held, depths[k] - one_at_a_time);
  }
  EXPECT_EQ(most_held, 31u);
}

// A bus of Bus's producer model with `kCapacity` slots.
template <typename Bus, std::size_t kCapacity>
using SmallerBus = std::conditional_t<std::is_same_v<Bus, sluice::SpscBus<BasicPayload, 128>>,
                                      sluice::SpscBus<BasicPayload, kCapacity>,
                                      sluice::MpscBus<BasicPayload, kCapacity>>;

template <typename Bus>
class DispatchRunsTest : public ::testing::Test {};

using Buses =
    ::testing::Types<sluice::MpscBus<BasicPayload, 128>, sluice::SpscBus<BasicPayload, 128>>;
TYPED_TEST_SUITE(DispatchRunsTest, Buses, IndexNames);

TYPED_TEST(DispatchRunsTest, ASubscriberThatUnsubscribesItselfInARunIsNotCalledAgain) {
  for (const std::int32_t last : {0, 4, 31, 32, 33, kMessages - 1}) {
    SCOPED_TRACE("unsubscribes at message " + std::to_string(last));
    TypeParam bus;
    std::vector<std::int32_t> seen;
    sluice::SubscriptionHandle handle;
    sluice::UnsubscribeStatus status = sluice::UnsubscribeStatus::kNotSubscribed;
    handle = bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
      seen.push_back(command.speed);
      if (command.speed == last) status = bus.Unsubscribe(handle).Status();
    });
    ASSERT_TRUE(handle.IsValid());
    PublishMotorCommands(bus, kMessages);
    EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages));
    EXPECT_EQ(status, sluice::UnsubscribeStatus::kRemovedWhileRunning);
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(last) + 1);
    for (std::int32_t i = 0; i <= last; ++i) EXPECT_EQ(seen[i], i);
    EXPECT_EQ(bus.GetStatistics().messages_processed, static_cast<std::uint64_t>(kMessages));
  }
}

TYPED_TEST(DispatchRunsTest, ASubscriberAddedInARunGetsThatMessageAndEveryLaterOneInOrder) {
  TypeParam bus;
  std::vector<std::pair<int, std::int32_t>> calls;  // (subscriber, message)
  constexpr std::int32_t kAddedAt = 5;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
                   calls.emplace_back(1, command.speed);
                   if (command.speed == kAddedAt) {
                     ASSERT_TRUE(bus.template Subscribe<MotorCmd>([&](const MotorCmd& later) {
                                      calls.emplace_back(2, later.speed);
                                    })
                                     .IsValid());
                   }
                 })
                  .IsValid());
  PublishMotorCommands(bus, kMessages);
  EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages));
  // As one message at a time: the new subscriber, in a later slot, is
  // found by the re-read after the call that added it.
  std::vector<std::pair<int, std::int32_t>> expected;
  for (std::int32_t i = 0; i < kMessages; ++i) {
    expected.emplace_back(1, i);
    if (i >= kAddedAt) expected.emplace_back(2, i);
  }
  EXPECT_EQ(calls, expected);
}

TYPED_TEST(DispatchRunsTest, TypesThatAlternateAreDispatchedInPublishOrder) {
  TypeParam bus;
  std::vector<std::string> calls;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
                   calls.push_back("motor " + std::to_string(command.speed));
                 })
                  .IsValid());
  ASSERT_TRUE(bus.template Subscribe<Sequenced>([&](const Sequenced& message) {
                   calls.push_back("sequenced " + std::to_string(message.sequence));
                 })
                  .IsValid());
  std::vector<std::string> expected;
  for (std::int32_t i = 0; i < kMessages; ++i) {
    // Runs of 1, 2, 3, ... of one type, then of the other.
    if ((i / 7) % 2 == 0 || i % 3 == 0) {
      ASSERT_TRUE(bus.Publish(MotorCmd{i}, 1));
      expected.push_back("motor " + std::to_string(i));
    } else {
      ASSERT_TRUE(bus.Publish(Sequenced{1, static_cast<std::uint64_t>(i)}, 1));
      expected.push_back("sequenced " + std::to_string(i));
    }
  }
  // A message of a type nobody subscribed to ends a run and is taken too.
  ASSERT_TRUE(bus.Publish(SensorData{1.0F}, 1));
  ASSERT_TRUE(bus.Publish(MotorCmd{kMessages}, 1));
  expected.push_back("motor " + std::to_string(kMessages));
  EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages) + 2);
  EXPECT_EQ(calls, expected);
}

TYPED_TEST(DispatchRunsTest, ABatchLimitInsideARunLeavesTheRestQueuedInOrder) {
  TypeParam bus;
  std::vector<std::int32_t> seen;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>(
                     [&](const MotorCmd& command) { seen.push_back(command.speed); })
                  .IsValid());
  PublishMotorCommands(bus, kMessages);
  EXPECT_EQ(bus.ProcessBatch(7), 7u);
  EXPECT_EQ(seen.size(), 7u);
  // The slots of the batch are free again: the queue holds the rest only.
  EXPECT_EQ(bus.QueueDepth(), static_cast<std::size_t>(kMessages) - 7);
  EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages) - 7);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kMessages));
  for (std::int32_t i = 0; i < kMessages; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// The one difference runs make, at its documented bound: a callback finds
// at most 31 more slots held than one message at a time would leave (the
// messages of its run before it), never fewer than that would.
TYPED_TEST(DispatchRunsTest, ACallbackFindsAtMost31MoreSlotsHeldThanOneAtATime) {
  TypeParam bus;
  // No histograms recording, so runs are 32 long (16 while they record).
  bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL);
  std::vector<std::size_t> depths;
  ASSERT_TRUE(
      bus.template Subscribe<MotorCmd>([&](const MotorCmd&) { depths.push_back(bus.QueueDepth()); })
          .IsValid());
  PublishMotorCommands(bus, kMessages);
  EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages));
  ExpectAtMost31MoreHeldAndTheBoundReached(depths);
}

// Several subscribers of a type: each message's slot is freed after its
// dispatch, so the last subscriber of message k sees the queue hold the
// messages from k on only, and its publish into a full bus finds room.
TYPED_TEST(DispatchRunsTest, SeveralSubscribersFreeEachMessagesSlotAfterItsDispatch) {
  SmallerBus<TypeParam, 4> bus;
  std::vector<std::size_t> depths;
  std::vector<bool> admitted;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([](const MotorCmd&) {}).IsValid());
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
                   if (command.speed >= 100) return;  // published from here
                   depths.push_back(bus.QueueDepth());
                   admitted.push_back(bus.Publish(MotorCmd{100 + command.speed}, 1).IsAdmitted());
                 })
                  .IsValid());
  PublishMotorCommands(bus, 4);
  EXPECT_EQ(bus.ProcessBatch(4), 4u);
  // Message k's slot and the later ones', plus what the callbacks before
  // it published: the queue is full at the first message only.
  EXPECT_EQ(depths, (std::vector<std::size_t>{4, 3, 3, 3}));
  EXPECT_EQ(admitted, (std::vector<bool>{false, true, true, true}));
}

// ProcessBatchWith on the same buses takes its messages in runs too
// (DispatchEachOfRuns): each message goes to the visitor in turn, and the
// run's slots are released together when it ends.
struct VisitLog {
  std::vector<std::string> calls;
  void operator()(const MotorCmd& command) {
    calls.push_back("motor " + std::to_string(command.speed));
  }
  void operator()(const Sequenced& message) {
    calls.push_back("sequenced " + std::to_string(message.sequence));
  }
  void operator()(const SensorData&) { calls.emplace_back("sensor"); }
};

TYPED_TEST(DispatchRunsTest, AVisitorSeesEveryMessageInPublishOrderAcrossRuns) {
  for (const auto mode :
       {sluice::PerformanceMode::FULL_FEATURED, sluice::PerformanceMode::BARE_METAL}) {
    TypeParam bus;
    bus.SetPerformanceMode(mode);
    std::vector<std::string> expected;
    for (std::int32_t i = 0; i < kMessages; ++i) {
      if (i % 5 == 2) {
        ASSERT_TRUE(bus.Publish(Sequenced{1, static_cast<std::uint64_t>(i)}, 1));
        expected.push_back("sequenced " + std::to_string(i));
      } else {
        ASSERT_TRUE(bus.Publish(MotorCmd{i}, 1));
        expected.push_back("motor " + std::to_string(i));
      }
    }
    VisitLog visit;
    EXPECT_EQ(bus.ProcessBatchWith(visit), static_cast<std::uint32_t>(kMessages));
    EXPECT_EQ(visit.calls, expected);
    EXPECT_EQ(bus.QueueDepth(), 0u);
    EXPECT_EQ(bus.GetStatistics().messages_processed, mode == sluice::PerformanceMode::BARE_METAL
                                                          ? 0u
                                                          : static_cast<std::uint64_t>(kMessages));
  }
}

TYPED_TEST(DispatchRunsTest, AVisitorBatchLimitInsideARunLeavesTheRestQueuedInOrder) {
  TypeParam bus;
  VisitLog visit;
  PublishMotorCommands(bus, kMessages);
  for (const std::uint32_t limit : {7u, 1u, 32u, 33u}) {
    const std::size_t before = visit.calls.size();
    EXPECT_EQ(bus.ProcessBatchWith(visit, limit), limit);
    EXPECT_EQ(visit.calls.size(), before + limit);
    // The slots of the batch are free again: the queue holds the rest only.
    EXPECT_EQ(bus.QueueDepth(), static_cast<std::size_t>(kMessages) - visit.calls.size());
  }
  EXPECT_EQ(bus.ProcessBatchWith(visit), static_cast<std::uint32_t>(kMessages) - 73);
  ASSERT_EQ(visit.calls.size(), static_cast<std::size_t>(kMessages));
  for (std::int32_t i = 0; i < kMessages; ++i) {
    EXPECT_EQ(visit.calls[i], "motor " + std::to_string(i));
  }
}

// The visitor's runs, at the documented bound: the visitor finds at most 31
// more slots held than one message at a time would leave, in every mode
// (the histograms end no visitor run), and the bound is reached.
TYPED_TEST(DispatchRunsTest, AVisitorFindsAtMost31MoreSlotsHeldThanOneAtATime) {
  for (const auto mode :
       {sluice::PerformanceMode::FULL_FEATURED, sluice::PerformanceMode::BARE_METAL}) {
    TypeParam bus;
    bus.SetPerformanceMode(mode);
    std::vector<std::size_t> depths;
    PublishMotorCommands(bus, kMessages);
    EXPECT_EQ(bus.ProcessBatchWith([&](const auto&) { depths.push_back(bus.QueueDepth()); }),
              static_cast<std::uint32_t>(kMessages));
    ExpectAtMost31MoreHeldAndTheBoundReached(depths);
  }
}

// Runs walk the slots one by one and end at the end of the slot array: on a
// ring of 16, batches that start anywhere in it and cross its end hand on
// every message once, in order, through the visitor and through a
// callback.
TYPED_TEST(DispatchRunsTest, RunsThatReachTheEndOfTheSlotArrayGoOnFromItsStart) {
  SmallerBus<TypeParam, 16> bus;
  std::vector<std::int32_t> seen;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>(
                     [&](const MotorCmd& command) { seen.push_back(command.speed); })
                  .IsValid());
  std::int32_t next = 0;
  for (std::int32_t round = 0; round < 40; ++round) {
    // 1 to 12 messages a round (MEDIUM's room: 80 % of 16), so that runs
    // start at every slot.
    const std::int32_t count = 1 + (round * 7) % 12;
    for (std::int32_t i = 0; i < count; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{next++}, 1));
    const std::uint32_t taken = round % 2 == 0 ? bus.ProcessBatchWith([&](const auto& message) {
      if constexpr (std::is_same_v<std::decay_t<decltype(message)>, MotorCmd>) {
        seen.push_back(message.speed);
      }
    })
                                               : bus.ProcessBatch();
    EXPECT_EQ(taken, static_cast<std::uint32_t>(count)) << "round " << round;
    EXPECT_EQ(bus.QueueDepth(), 0u);
  }
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(next));
  for (std::int32_t i = 0; i < next; ++i) EXPECT_EQ(seen[i], i);
}

// A message the visitor publishes into its own bus, past what the run
// knew to be published, is taken later in the same batch, in order.
TYPED_TEST(DispatchRunsTest, AMessageTheVisitorPublishesIsTakenInTheSameBatch) {
  TypeParam bus;
  std::vector<std::int32_t> seen;
  PublishMotorCommands(bus, 3);
  const std::uint32_t taken = bus.ProcessBatchWith(
      [&](const auto& message) {
        if constexpr (std::is_same_v<std::decay_t<decltype(message)>, MotorCmd>) {
          seen.push_back(message.speed);
          if (message.speed < 40) {
            ASSERT_TRUE(bus.Publish(MotorCmd{message.speed + 3}, 1));
          }
        }
      },
      100);
  EXPECT_EQ(taken, 43u);
  ASSERT_EQ(seen.size(), 43u);
  for (std::int32_t i = 0; i < 43; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

// A traits Observer sees each message taken just before its callbacks, as
// one message at a time: a trace pairs every taken with its dispatch.
std::string* trace = nullptr;
struct Tracer : sluice::NoObserver {
  void OnTaken(const sluice::MessageHeader& header) noexcept {
    *trace += "T" + std::to_string(header.msg_id) + " ";
  }
  void OnError(const sluice::BusError& error) noexcept {
    *trace += "E" + std::to_string(error.msg_id) + " ";
  }
};
struct TracedTraits : sluice::DefaultBusTraits {
  using Observer = Tracer;
};

TEST(DispatchRunsObserverTest, AnObserverSeesEachMessageTakenJustBeforeItsCallbacks) {
  std::string log;
  trace = &log;
  sluice::MpscBus<BasicPayload, 64, TracedTraits> bus;
  const auto callback = [&](const MotorCmd& command) {
    log += "C" + std::to_string(command.speed) + " ";
#if SLUICE_HAS_EXCEPTIONS
    if (command.speed == 0) throw std::runtime_error("first");
#endif
  };
  ASSERT_TRUE(bus.Subscribe<MotorCmd>(callback).IsValid());
  PublishMotorCommands(bus, 3);
  EXPECT_EQ(bus.ProcessBatch(), 3u);
#if SLUICE_HAS_EXCEPTIONS
  EXPECT_EQ(log, "T0 C0 E0 T1 C1 T2 C2 ");
#else
  EXPECT_EQ(log, "T0 C0 T1 C1 T2 C2 ");
#endif
  trace = nullptr;
}

#if SLUICE_HAS_EXCEPTIONS
struct ErrorLog {
  std::vector<sluice::BusError> errors;
  std::vector<std::string> texts;  // `what` lives as long as the report only
  static void Record(const sluice::BusError& error, void* context) {
    auto* self = static_cast<ErrorLog*>(context);
    self->errors.push_back(error);
    self->texts.emplace_back(error.what);
  }
};

TYPED_TEST(DispatchRunsTest, AThrowInARunIsReportedForItsMessageAndTheRunGoesOn) {
  TypeParam bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  std::vector<std::int32_t> seen;
  std::vector<std::uint64_t> thrown_ids;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>(
                     [&](const MotorCmd& command, const sluice::MessageHeader& header) {
                       seen.push_back(command.speed);
                       if (command.speed % 10 == 3) {
                         thrown_ids.push_back(header.msg_id);
                         throw std::runtime_error("refused");
                       }
                     })
                  .IsValid());
  PublishMotorCommands(bus, kMessages);
  EXPECT_EQ(bus.ProcessBatch(), static_cast<std::uint32_t>(kMessages));
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kMessages));
  for (std::int32_t i = 0; i < kMessages; ++i) EXPECT_EQ(seen[i], i);
  ASSERT_EQ(log.errors.size(), thrown_ids.size());
  for (std::size_t i = 0; i < thrown_ids.size(); ++i) {
    EXPECT_EQ(log.errors[i].code, sluice::BusErrorCode::kCallbackThrew);
    EXPECT_EQ(log.errors[i].msg_id, thrown_ids[i]) << "error " << i;
    EXPECT_EQ(log.texts[i], "refused");
  }
  EXPECT_EQ(bus.GetStatistics().processing_errors, thrown_ids.size());
  EXPECT_EQ(bus.GetStatistics().messages_processed, static_cast<std::uint64_t>(kMessages));
}

TYPED_TEST(DispatchRunsTest, AThrowThatSubscribesAnotherStillReachesItForThatMessage) {
  TypeParam bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  std::vector<std::pair<int, std::int32_t>> calls;
  constexpr std::int32_t kAt = 9;
  ASSERT_TRUE(bus.template Subscribe<MotorCmd>([&](const MotorCmd& command) {
                   calls.emplace_back(1, command.speed);
                   if (command.speed == kAt) {
                     (void)bus.template Subscribe<MotorCmd>(
                         [&](const MotorCmd& later) { calls.emplace_back(2, later.speed); });
                     throw std::runtime_error("after subscribing");
                   }
                 })
                  .IsValid());
  PublishMotorCommands(bus, 20);
  EXPECT_EQ(bus.ProcessBatch(), 20u);
  std::vector<std::pair<int, std::int32_t>> expected;
  for (std::int32_t i = 0; i < 20; ++i) {
    expected.emplace_back(1, i);
    if (i >= kAt) expected.emplace_back(2, i);
  }
  EXPECT_EQ(calls, expected);
  EXPECT_EQ(log.errors.size(), 1u);
}

TYPED_TEST(DispatchRunsTest, AVisitorThatThrowsInARunIsReportedForItsMessageAndTheRunGoesOn) {
  TypeParam bus;
  ErrorLog log;
  ASSERT_TRUE(bus.SetErrorCallback(&ErrorLog::Record, &log));
  std::vector<std::int32_t> seen;
  std::vector<std::uint64_t> thrown_ids;
  PublishMotorCommands(bus, kMessages);
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto& message, const sluice::MessageHeader& header) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, MotorCmd>) {
      seen.push_back(message.speed);
      if (message.speed % 10 == 3) {
        thrown_ids.push_back(header.msg_id);
        throw std::runtime_error("refused");
      }
    }
  }),
            static_cast<std::uint32_t>(kMessages));
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kMessages));
  for (std::int32_t i = 0; i < kMessages; ++i) EXPECT_EQ(seen[i], i);
  ASSERT_EQ(log.errors.size(), thrown_ids.size());
  for (std::size_t i = 0; i < thrown_ids.size(); ++i) {
    EXPECT_EQ(log.errors[i].code, sluice::BusErrorCode::kVisitorThrew);
    EXPECT_EQ(log.errors[i].msg_id, thrown_ids[i]) << "error " << i;
  }
  EXPECT_EQ(bus.QueueDepth(), 0u);
}
#endif

}  // namespace
}  // namespace dispatch_runs_test
}  // namespace sluice_test
