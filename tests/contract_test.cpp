// Documented contracts under adversarial use: each test here failed before
// the fix it guards.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <variant>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace contract_test {
namespace {

using sluice::MessagePriority;
using sluice::PerformanceMode;

TEST(ContractTest, HandleFromAnotherBusIsRefused) {
  sluice::MpscBus<BasicPayload, 8> a;
  sluice::MpscBus<BasicPayload, 8> b;
  const auto from_a = a.Subscribe<MotorCmd>([](const MotorCmd&) {});
  int b_calls = 0;
  const auto from_b = b.Subscribe<MotorCmd>([&](const MotorCmd&) { ++b_calls; });
  ASSERT_TRUE(from_a.IsValid());
  ASSERT_TRUE(from_b.IsValid());
  EXPECT_FALSE(b.Unsubscribe(from_a)) << "a handle from bus a must not unsubscribe from bus b";
  EXPECT_EQ(b.SubscriberCount<MotorCmd>(), 1u);
  ASSERT_TRUE(b.Publish(MotorCmd{1}));
  b.ProcessBatch();
  EXPECT_EQ(b_calls, 1);
  EXPECT_TRUE(a.Unsubscribe(from_a));
  EXPECT_TRUE(b.Unsubscribe(from_b));
}

// A slot whose generation counter is exhausted is retired: a handle from its
// last life never matches a later subscription (the counter never wraps).
TEST(ContractTest, SubscriptionGenerationNeverWraps) {
  using Bus = sluice::MpscBus<BasicPayload, 8>;
  using Access = sluice::detail::TestAccess;
  Bus bus;
  constexpr std::size_t kMotor = 1;
  constexpr auto kLast = Access::LastSubscriptionGeneration<Bus>();
  Access::SetSubscriptionGeneration(bus, kMotor, 0, kLast);
  int old_calls = 0;
  const auto old_handle = bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++old_calls; });
  ASSERT_TRUE(old_handle.IsValid());
  EXPECT_TRUE(bus.Unsubscribe(old_handle));
  int new_calls = 0;
  const auto new_handle = bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++new_calls; });
  ASSERT_TRUE(new_handle.IsValid());
  EXPECT_FALSE(bus.Unsubscribe(old_handle)) << "a stale handle removed a new subscription";
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 1u);
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  bus.ProcessBatch();
  EXPECT_EQ(new_calls, 1);
  EXPECT_EQ(old_calls, 0);
  EXPECT_TRUE(bus.Unsubscribe(new_handle));
  // The retired slot stays out of use; the other 15 still serve.
  for (int i = 0; i < 15; ++i) {
    EXPECT_TRUE(bus.Subscribe<MotorCmd>([](const MotorCmd&) {}).IsValid()) << i;
  }
  EXPECT_FALSE(bus.Subscribe<MotorCmd>([](const MotorCmd&) {}).IsValid());
}

TEST(ContractTest, UnsubscribeSaysWhetherTheCallableIsStillRunning) {
  sluice::MpscBus<BasicPayload, 8> bus;
  sluice::SubscriptionHandle self;
  sluice::SubscriptionHandle other;
  std::vector<sluice::UnsubscribeStatus> results;
  int other_calls = 0;
  self = bus.Subscribe<MotorCmd>([&](const MotorCmd&) {
    results.push_back(bus.Unsubscribe(other).Status());
    results.push_back(bus.Unsubscribe(self).Status());
    results.push_back(bus.Unsubscribe(self).Status());
  });
  other = bus.Subscribe<MotorCmd>([&](const MotorCmd&) { ++other_calls; });
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  ASSERT_TRUE(bus.Publish(MotorCmd{2}));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  using Status = sluice::UnsubscribeStatus;
  EXPECT_EQ(results, (std::vector<Status>{Status::kRemoved, Status::kRemovedWhileRunning,
                                          Status::kNotSubscribed}));
  EXPECT_EQ(other_calls, 0);
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
  const auto idle = bus.Subscribe<MotorCmd>([](const MotorCmd&) {});
  const auto result = bus.Unsubscribe(idle);
  EXPECT_TRUE(result.Removed());
  EXPECT_FALSE(result.StillRunning());
}

struct alignas(128) Aligned128 {
  std::uint64_t value = 0;
};
struct alignas(256) Aligned256 {
  std::uint64_t value = 0;
};
using AlignedPayload = std::variant<Aligned128, Aligned256, int>;

template <typename Bus>
void ExpectAlignedDelivery() {
  auto bus = std::make_unique<Bus>();
  int misaligned = 0;
  int received = 0;
  ASSERT_TRUE(bus->template Subscribe<Aligned128>([&](const Aligned128& m) {
                   ++received;
                   if (reinterpret_cast<std::uintptr_t>(&m) % 128 != 0) ++misaligned;
                 })
                  .IsValid());
  ASSERT_TRUE(bus->template Subscribe<Aligned256>([&](const Aligned256& m) {
                   ++received;
                   if (reinterpret_cast<std::uintptr_t>(&m) % 256 != 0) ++misaligned;
                 })
                  .IsValid());
  for (std::uint64_t i = 0; i < 16; ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(bus->Publish(Aligned128{i}));
    } else {
      ASSERT_TRUE(bus->Publish(Aligned256{i}));
    }
  }
  EXPECT_EQ(bus->ProcessBatch(), 16u);
  EXPECT_EQ(received, 16);
  EXPECT_EQ(misaligned, 0);
}

struct InlineTraits : sluice::DefaultBusTraits {
  static constexpr sluice::SlotStorage kSlotStorage = sluice::SlotStorage::kInline;
};

TEST(ContractTest, OverAlignedPayloadsAreDeliveredAligned) {
  ExpectAlignedDelivery<sluice::MpscBus<AlignedPayload, 32>>();
  ExpectAlignedDelivery<sluice::SpscBus<AlignedPayload, 32>>();
  ExpectAlignedDelivery<sluice::MpscBus<AlignedPayload, 32, InlineTraits>>();
}

TEST(ContractTest, OutOfRangePriorityIsRejectedAndCounted) {
  sluice::MpscBus<BasicPayload, 8> bus;
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  EXPECT_FALSE(bus.PublishWithPriority(MotorCmd{1}, 0, static_cast<MessagePriority>(7)));
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 1u) << "counted in every mode";
  EXPECT_EQ(bus.QueueDepth(), 0u);
}

TEST(ContractTest, ProcessedNeverRunsAheadOfPublishedAcrossModeChanges) {
  sluice::MpscBus<BasicPayload, 64> bus;
  bus.SetPerformanceMode(PerformanceMode::NO_STATS);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.SetPerformanceMode(PerformanceMode::FULL_FEATURED);
  EXPECT_EQ(bus.ProcessBatch(), 10u);
  auto stats = bus.GetStatistics();
  EXPECT_LE(stats.messages_processed, stats.messages_published);
  EXPECT_EQ(stats.messages_processed, 0u) << "none of them was counted as published";

  // Counted at publish, dispatched in another mode: still counted once.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  EXPECT_EQ(bus.ProcessBatch(), 4u);
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 4u);
  EXPECT_EQ(stats.messages_processed, 4u) << "after a drain processed equals published";
}

TEST(ContractTest, ProcessedNeverRunsAheadOfPublishedAfterAResetWithMessagesQueued) {
  sluice::SpscBus<BasicPayload, 64> bus;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  bus.ResetStatistics();
  EXPECT_EQ(bus.ProcessBatch(3), 3u);
  auto stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 0u);
  EXPECT_EQ(stats.messages_processed, 0u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(bus.Publish(MotorCmd{i}));
  EXPECT_EQ(bus.ProcessBatch(), 12u);
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_published, 5u);
  EXPECT_EQ(stats.messages_processed, 5u) << "after a drain processed equals published";
}

// With 820 MEDIUM messages queued in 1,024 slots (MEDIUM's limit), a MEDIUM
// publish made after the consumer destroyed 250 of them must be admitted.
template <typename Bus>
void ExpectNoRefusalWithFreedSlots() {
  auto bus = std::make_unique<Bus>();
  const auto limit = sluice::FillLimit(80, 1024);
  ASSERT_EQ(limit, 820u);
  for (std::uint32_t i = 0; i < limit; ++i) ASSERT_TRUE(bus->Publish(MotorCmd{1}));
  ASSERT_FALSE(bus->Publish(MotorCmd{2})) << "the queue is at MEDIUM's limit";
  int seen = 0;
  bool admitted = false;
  ASSERT_TRUE(bus->template Subscribe<MotorCmd>([&](const MotorCmd& m) {
                   if (m.speed != 1) return;
                   // Messages before this one have been dispatched and destroyed.
                   if (++seen == 251) admitted = bus->Publish(MotorCmd{3}).IsAdmitted();
                 })
                  .IsValid());
  bus->ProcessBatch();
  EXPECT_TRUE(admitted) << "250 of 820 slots were free: the refusal would not be real";
}

TEST(ContractTest, NoRefusalWhileTheConsumerHasFreedSlots) {
  ExpectNoRefusalWithFreedSlots<sluice::MpscBus<BasicPayload, 1024>>();
  ExpectNoRefusalWithFreedSlots<sluice::SpscBus<BasicPayload, 1024>>();
}

#if SLUICE_HAS_EXCEPTIONS
struct ThrowOnConstruct {
  struct Tag {};
  ThrowOnConstruct() = default;
  explicit ThrowOnConstruct(Tag) { throw std::runtime_error("construct"); }
  ThrowOnConstruct(ThrowOnConstruct&&) noexcept = default;
  ThrowOnConstruct(const ThrowOnConstruct&) = default;
};
using FragilePayload = std::variant<int, ThrowOnConstruct>;

FragilePayload MakeValueless() {
  FragilePayload payload = 7;
  try {
    payload.emplace<ThrowOnConstruct>(ThrowOnConstruct::Tag{});
  } catch (const std::runtime_error&) {
  }
  return payload;
}

TEST(ContractTest, ValuelessPayloadIsRefused) {
  sluice::MpscBus<FragilePayload, 8> bus;
  int calls = 0;
  ASSERT_TRUE(bus.Subscribe<int>([&](const int&) { ++calls; }).IsValid());
  FragilePayload valueless = MakeValueless();
  ASSERT_TRUE(valueless.valueless_by_exception());
  EXPECT_FALSE(bus.Publish(valueless));
  EXPECT_FALSE(bus.Publish(std::move(valueless)));
  EXPECT_EQ(bus.QueueDepth(), 0u);
  EXPECT_EQ(bus.GetStatistics().messages_rejected, 2u);
  EXPECT_EQ(bus.GetStatistics().MessagesAttempted(), 0u);
  ASSERT_TRUE(bus.Publish(FragilePayload{3}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(calls, 1);
}
#endif

}  // namespace
}  // namespace contract_test
}  // namespace sluice_test
