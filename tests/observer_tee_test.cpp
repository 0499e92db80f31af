// ObserverTee (sluice/observer_tee.hpp): every event reaches both observers,
// each in the form it takes (header only, with the payload index, the
// message itself, OnDispatched only where it has one), and the tee lets the
// consumer take runs only where both observers do.
#include "sluice/observer_tee.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "counting_observer.hpp"
#include "sluice/sluice.hpp"

namespace observer_tee_test {
namespace {

struct Small {
  std::uint32_t value;
};
struct Other {
  std::uint64_t value;
};
using Payload = std::variant<Small, Other>;

// Takes the typed forms, OnDispatched and the message itself.
struct Typed {
  void OnAdmitted(const sluice::MessageHeader&, std::size_t type_index) noexcept {
    admitted_types.push_back(type_index);
  }
  void OnRefused(sluice::PublishOutcome, sluice::MessagePriority, std::uint64_t count) noexcept {
    refused += count;
  }
  void OnBatchBegin(std::uint64_t) noexcept { ++batches; }
  void OnTaken(const sluice::MessageHeader&, std::size_t type_index) noexcept {
    taken_types.push_back(type_index);
  }
  template <typename Envelope>
  void OnTakenMessage(const Envelope& envelope) noexcept {
    if (const Small* small = std::get_if<Small>(&envelope.payload)) values.push_back(small->value);
  }
  void OnDispatched(const sluice::MessageHeader&, std::size_t) noexcept { ++dispatched; }
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const sluice::BusError&) noexcept {}
  std::vector<std::size_t> admitted_types;
  std::vector<std::size_t> taken_types;
  std::vector<std::uint32_t> values;
  std::uint64_t refused = 0;
  std::uint64_t batches = 0;
  std::uint64_t dispatched = 0;
};

struct RunsWithoutDispatched {
  static constexpr bool kTakesRuns = true;
  void OnAdmitted(const sluice::MessageHeader&) noexcept {}
  void OnRefused(sluice::PublishOutcome, sluice::MessagePriority, std::uint64_t) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {}
  void OnTaken(const sluice::MessageHeader&) noexcept { ++taken; }
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const sluice::BusError&) noexcept {}
  std::uint64_t taken = 0;
};

using sluice::detail::HasOnDispatched;
using sluice::detail::HasTypedOnDispatched;
using sluice::detail::ObserverTakesRuns;
using TwoRunners = sluice::ObserverTee<RunsWithoutDispatched, RunsWithoutDispatched>;
using Mixed = sluice::ObserverTee<RunsWithoutDispatched, Typed>;
static_assert(ObserverTakesRuns<TwoRunners>::value, "both take runs: the tee does");
static_assert(!ObserverTakesRuns<Mixed>::value, "one does not: the tee does not");
static_assert(!HasTypedOnDispatched<TwoRunners>::value && !HasOnDispatched<TwoRunners>::value,
              "neither has OnDispatched: the tee has none (it takes runs)");
static_assert(HasTypedOnDispatched<Mixed>::value, "one has OnDispatched: the tee has it");
static_assert(!sluice::detail::HasOnClosed<Mixed>::value, "neither has OnClosed: the tee neither");
static_assert(
    sluice::detail::HasOnClosed<sluice::ObserverTee<sluice_test::CountingObserver, Typed>>::value,
    "one has OnClosed: the tee has it");

TEST(ObserverTeeTest, EveryEventReachesBothObserversInTheFormEachTakes) {
  struct Traits : sluice::DefaultBusTraits {
    using Observer = sluice::ObserverTee<sluice_test::CountingObserver, Typed>;
  };
  auto bus = std::make_unique<sluice::MpscBus<Payload, 16, Traits>>();
  std::uint64_t dispatched = 0;
  const auto small = bus->Subscribe<Small>([&dispatched](const Small&) { ++dispatched; });
  const auto other = bus->Subscribe<Other>([&dispatched](const Other&) { ++dispatched; });
  ASSERT_TRUE(small.IsValid() && other.IsValid());
  std::uint64_t admitted = 0;
  for (std::uint32_t i = 0; i < 20; ++i) {
    const bool ok =
        i % 2 == 0 ? bus->Publish(Small{i}).IsAdmitted() : bus->Publish(Other{i}).IsAdmitted();
    admitted += ok ? 1 : 0;
  }
  ASSERT_LT(admitted, 20u);  // some refused: the bus holds 16
  while (bus->ProcessBatch(4) != 0) {
  }
  const auto& counting = bus->GetObserver().First();
  const Typed& typed = bus->GetObserver().Second();
  EXPECT_EQ(counting.Admitted(), admitted);
  EXPECT_EQ(typed.admitted_types.size(), admitted);
  EXPECT_EQ(counting.Taken(), admitted);
  EXPECT_EQ(typed.taken_types.size(), admitted);
  EXPECT_EQ(typed.dispatched, admitted);
  EXPECT_EQ(counting.Refused(sluice::PublishOutcome::kRefusedFull), 20u - admitted);
  EXPECT_EQ(typed.refused, 20u - admitted);
  EXPECT_EQ(counting.Batches(), typed.batches);
  EXPECT_EQ(dispatched, admitted);
  bus->Close();
  EXPECT_EQ(counting.Closed(), 1u);  // Typed has no OnClosed: the tee tells the one that has
  for (std::size_t i = 0; i < typed.taken_types.size(); ++i) {
    EXPECT_EQ(typed.taken_types[i], i % 2) << i;  // FIFO: Small, Other, ...
    EXPECT_EQ(typed.admitted_types[i], i % 2) << i;
  }
  ASSERT_EQ(typed.values.size(), (admitted + 1) / 2);
  for (std::size_t i = 0; i < typed.values.size(); ++i) EXPECT_EQ(typed.values[i], 2 * i);
}

TEST(ObserverTeeTest, ATeeOfObserversThatTakeRunsSeesEveryMessage) {
  struct Traits : sluice::DefaultBusTraits {
    using Observer = TwoRunners;
  };
  auto bus = std::make_unique<sluice::SpscBus<Payload, 256, Traits>>();
  std::uint64_t dispatched = 0;
  const auto small = bus->Subscribe<Small>([&dispatched](const Small&) { ++dispatched; });
  ASSERT_TRUE(small.IsValid());
  for (std::uint32_t i = 0; i < 200; ++i)
    ASSERT_TRUE(bus->PublishWithPriority(Small{i}, 1, sluice::MessagePriority::HIGH).IsAdmitted());
  while (bus->ProcessBatch() != 0) {
  }
  EXPECT_EQ(dispatched, 200u);
  EXPECT_EQ(bus->GetObserver().First().taken, 200u);
  EXPECT_EQ(bus->GetObserver().Second().taken, 200u);
}

}  // namespace
}  // namespace observer_tee_test
