// AckOnDispatch<Next> (sluice/nats/dispatch_acks.hpp) forwards every event
// to Next, the payload index included for a Next that takes it: a traced
// bus that acknowledges after dispatch records whole flows.
#include <gtest/gtest.h>

#include <cstdint>
#include <variant>
#include <vector>

#include "sluice/nats/dispatch_acks.hpp"
#include "sluice/sluice.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace dispatch_acks_observer_test {
namespace {

using Ring = sluice::trace::TraceRing<256>;
struct TracedAckTraits : sluice::DefaultBusTraits {
  using Observer = sluice::nats::AckOnDispatch<sluice::trace::TracingObserver<Ring>>;
};
struct First {
  std::uint32_t value;
};
struct Second {
  std::uint64_t value;
};
using Bus = sluice::AsyncBus<std::variant<First, Second>, 64, sluice::ProducerModel::kMulti,
                             TracedAckTraits>;

TEST(DispatchAcksObserverTest, ATracerBehindAckOnDispatchRecordsWholeFlowsWithTheirTypes) {
  Ring ring;
  Bus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 2));
  auto first = bus.Subscribe<First>([](const First&) {});
  auto second = bus.Subscribe<Second>([](const Second&) {});
  ASSERT_TRUE(first.IsValid() && second.IsValid());
  ASSERT_TRUE(bus.Publish(First{1}));
  ASSERT_TRUE(bus.Publish(Second{2}));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  std::vector<std::pair<sluice::trace::TraceEventKind, std::uint32_t>> flows;
  while (ring.Drain([&](const sluice::trace::TraceEvent& event) {
    if (event.kind == sluice::trace::TraceEventKind::kAdmitted ||
        event.kind == sluice::trace::TraceEventKind::kTaken ||
        event.kind == sluice::trace::TraceEventKind::kDispatched) {
      flows.push_back({event.kind, event.type_index});
    }
  }) != 0) {
  }
  using Kind = sluice::trace::TraceEventKind;
  const std::vector<std::pair<Kind, std::uint32_t>> expected = {
      {Kind::kAdmitted, 0},   {Kind::kAdmitted, 1}, {Kind::kTaken, 0},
      {Kind::kDispatched, 0}, {Kind::kTaken, 1},    {Kind::kDispatched, 1}};
  EXPECT_EQ(flows, expected);
  // Nothing was filed (no bridge published): nothing to acknowledge.
  EXPECT_EQ(bus.GetObserver().DispatchAcknowledgements().Counts().filed, 0u);
}

}  // namespace
}  // namespace dispatch_acks_observer_test
