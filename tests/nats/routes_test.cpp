// The bridge's route table on its own: what Forward, Receive and the Stop
// calls accept, the numbers a subject's routes share, and the type ids a
// subject carries. No server: the sender subscribes to a real bus, the
// receiver is never called.
#include "sluice/nats/routes.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sluice/bus.hpp"

namespace routes_test {
namespace {

using Bus = sluice::MpscBus<std::variant<int, double, float>, 64>;

struct FakeSender {
  Bus* bus = nullptr;
  bool refuse = false;  // as a bus whose subscription table is full
  int subscribed = 0;
};

struct FakeReceiver {};

using Table = sluice::nats::detail::RouteTable<FakeSender, FakeReceiver>;
using Added = Table::Added;

template <typename T>
sluice::SubscriptionHandle SubscribeTo(FakeSender& sender, Table::Outbound&) {
  ++sender.subscribed;
  if (sender.refuse) return {};
  return sender.bus->Subscribe<T>([](const T&, const sluice::MessageHeader&) {});
}

sluice::nats::FrameError DeliverOne(FakeReceiver&, const sluice::nats::FrameView&,
                                    const sluice::nats::Arrival&, bool, bool*) {
  return sluice::nats::FrameError::kNone;
}

sluice::nats::FrameError DeliverTwo(FakeReceiver&, const sluice::nats::FrameView&,
                                    const sluice::nats::Arrival&, bool, bool*) {
  return sluice::nats::FrameError::kNone;
}

constexpr std::size_t kInt = 0;
constexpr std::size_t kDouble = 1;
constexpr std::size_t kFloat = 2;

class RouteTableTest : public ::testing::Test {
 protected:
  bool Forward(std::size_t index, const std::string& subject, std::uint16_t id,
               sluice::SubscriptionHandle (*subscribe)(FakeSender&, Table::Outbound&)) {
    return table_.AddOutbound(sender_, index, subject, id, {}, subscribe);
  }

  Added Receive(const std::string& subject, std::uint16_t id, std::size_t index = kInt,
                Table::DeliverFunction deliver = &DeliverOne,
                sluice::nats::ReceiveOptions route = {}) {
    return table_.AddInbound(subject, id, std::move(route), index, deliver);
  }

  Bus bus_;
  FakeSender sender_{&bus_};
  Table table_;
};

TEST_F(RouteTableTest, ForwardRefusesABadIdASubjectWithWildcardsAndASecondRouteOfAType) {
  EXPECT_FALSE(Forward(kInt, "plant.sensor", 0, &SubscribeTo<int>));
  EXPECT_FALSE(Forward(kInt, "plant.*", 1, &SubscribeTo<int>));
  EXPECT_FALSE(Forward(kInt, "", 1, &SubscribeTo<int>));
  EXPECT_TRUE(Forward(kInt, "plant.sensor", 1, &SubscribeTo<int>));
  EXPECT_FALSE(Forward(kInt, "plant.other", 2, &SubscribeTo<int>));
  ASSERT_EQ(table_.outbound().size(), 1u);
  const auto& route = *table_.outbound().front();
  EXPECT_EQ(route.type_id, 1);
  EXPECT_EQ(route.subjects[0], "plant.sensor.low");
  EXPECT_EQ(route.subjects[1], "plant.sensor.medium");
  EXPECT_EQ(route.subjects[2], "plant.sensor.high");
  table_.set_stopping();
  EXPECT_FALSE(Forward(kDouble, "plant.level", 3, &SubscribeTo<double>));
}

TEST_F(RouteTableTest, ASubjectsRoutesShareItsNumbersAlsoAfterAStop) {
  ASSERT_TRUE(Forward(kInt, "plant.sensor", 1, &SubscribeTo<int>));
  ASSERT_TRUE(Forward(kDouble, "plant.sensor", 2, &SubscribeTo<double>));
  ASSERT_TRUE(Forward(kFloat, "plant.level", 3, &SubscribeTo<float>));
  const auto& routes = table_.outbound();
  EXPECT_EQ(routes[0]->sequence, routes[1]->sequence);
  EXPECT_NE(routes[0]->sequence, routes[2]->sequence);
  (*routes[0]->sequence)[1] = 7;
  // Stopped and forwarded again: the subject's numbers go on.
  ASSERT_TRUE(table_.RetireOutbound(kInt).has_value());
  ASSERT_TRUE(Forward(kInt, "plant.sensor", 1, &SubscribeTo<int>));
  EXPECT_EQ((*table_.outbound().back()->sequence)[1], 7u);
  table_.RestartSequences();
  for (const auto& route : table_.outbound()) {
    for (const std::uint64_t number : route->sequence->given) EXPECT_EQ(number, 0u);
    for (const auto& sent : route->sequence->sent) EXPECT_EQ(sent.load(), 0u);
  }
}

TEST_F(RouteTableTest, RoutesAreSubscribedAtStartOrAtOnceWhenRunning) {
  ASSERT_TRUE(Forward(kInt, "plant.sensor", 1, &SubscribeTo<int>));
  EXPECT_EQ(sender_.subscribed, 0);  // not running: nothing subscribed yet
  EXPECT_TRUE(table_.SubscribeOutbound(sender_));
  EXPECT_EQ(sender_.subscribed, 1);
  EXPECT_TRUE(table_.outbound().front()->handle.IsValid());
  table_.set_started();
  ASSERT_TRUE(Forward(kDouble, "plant.level", 2, &SubscribeTo<double>));
  EXPECT_EQ(sender_.subscribed, 2);
  EXPECT_TRUE(table_.outbound().back()->handle.IsValid());
  // A bus that refuses the subscription: the route is not added.
  sender_.refuse = true;
  EXPECT_FALSE(Forward(kFloat, "plant.flow", 3, &SubscribeTo<float>));
  EXPECT_EQ(table_.outbound().size(), 2u);
  EXPECT_FALSE(table_.SubscribeOutbound(sender_));
}

TEST_F(RouteTableTest, RetireAndTakeHandOutTheBusSubscriptions) {
  EXPECT_FALSE(table_.RetireOutbound(kInt).has_value());  // not forwarded
  ASSERT_TRUE(Forward(kInt, "plant.sensor", 1, &SubscribeTo<int>));
  ASSERT_TRUE(Forward(kDouble, "plant.level", 2, &SubscribeTo<double>));
  ASSERT_TRUE(table_.SubscribeOutbound(sender_));
  const sluice::SubscriptionHandle int_handle = table_.outbound()[0]->handle;
  const std::optional<sluice::SubscriptionHandle> retired = table_.RetireOutbound(kInt);
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(*retired, int_handle);
  EXPECT_EQ(table_.outbound().size(), 1u);
  EXPECT_FALSE(table_.RetireOutbound(kInt).has_value());  // once only
  const std::vector<sluice::SubscriptionHandle> handles = table_.TakeOutboundHandles();
  ASSERT_EQ(handles.size(), 1u);
  EXPECT_TRUE(handles[0].IsValid());
  EXPECT_FALSE(table_.outbound()[0]->handle.IsValid());
}

TEST_F(RouteTableTest, ReceiveRefusesWhatCouldDeliverAFrameTwiceOrWrongly) {
  EXPECT_EQ(Receive("plant.stop", 0), Added::kRefused);  // id 0
  EXPECT_EQ(Receive("plant.>", 1), Added::kRefused);     // not a receive subject
  EXPECT_EQ(Receive("plant.stop", 1), Added::kNewSubject);
  EXPECT_EQ(Receive("plant.stop", 1), Added::kKnown);                      // again: nothing to do
  EXPECT_EQ(Receive("plant.*", 2), Added::kRefused);                       // overlaps plant.stop
  EXPECT_EQ(Receive("yard.stop", 1, kDouble), Added::kRefused);            // id 1 is another type
  EXPECT_EQ(Receive("yard.stop", 1, kInt, &DeliverTwo), Added::kRefused);  // another codec
  EXPECT_EQ(Receive("yard.stop", 1), Added::kNewSubject);  // the same type on a second subject
  sluice::nats::ReceiveOptions grouped;
  grouped.queue_group = "workers";
  EXPECT_EQ(Receive("plant.stop", 3, kFloat, &DeliverOne, grouped), Added::kRefused);
  sluice::nats::ReceiveOptions half_stream;
  half_stream.stream = "PLANT";
  EXPECT_EQ(Receive("dock.stop", 4, kFloat, &DeliverOne, half_stream), Added::kRefused);
  table_.set_stopping();
  EXPECT_EQ(Receive("dock.stop", 4, kFloat), Added::kRefused);
}

TEST_F(RouteTableTest, ASubjectsTypesAreFixedOnceRunning) {
  ASSERT_EQ(Receive("plant.stop", 1, kInt), Added::kNewSubject);
  EXPECT_EQ(Receive("plant.stop", 2, kDouble), Added::kKnown);  // a second type, before Start
  ASSERT_EQ(table_.inbound_subjects().size(), 1u);
  const std::vector<Table::Type> types = table_.TypesOf(table_.inbound_subjects().front());
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].type_id, 1);
  EXPECT_EQ(types[0].variant_index, kInt);
  EXPECT_EQ(types[1].type_id, 2);
  EXPECT_EQ(types[1].variant_index, kDouble);
  table_.set_started();
  EXPECT_EQ(Receive("plant.stop", 3, kFloat), Added::kRefused);
  EXPECT_EQ(Receive("plant.stop", 2, kDouble), Added::kKnown);
}

TEST_F(RouteTableTest, RemovingASubjectFreesTheIdsNoOtherSubjectUses) {
  ASSERT_EQ(Receive("plant.stop", 1, kInt), Added::kNewSubject);
  ASSERT_EQ(Receive("plant.stop", 2, kDouble), Added::kKnown);
  ASSERT_EQ(Receive("yard.stop", 2, kDouble), Added::kNewSubject);
  EXPECT_FALSE(table_.RemoveInbound("dock.stop"));
  EXPECT_TRUE(table_.RemoveInbound("plant.stop"));
  EXPECT_FALSE(table_.RemoveInbound("plant.stop"));
  // Id 1 is free for another type; id 2 is still yard.stop's double.
  EXPECT_EQ(Receive("dock.stop", 1, kFloat), Added::kNewSubject);
  EXPECT_EQ(Receive("dock.stop", 2, kFloat), Added::kRefused);
  // The subject itself may be received again.
  EXPECT_EQ(Receive("plant.stop", 2, kDouble), Added::kNewSubject);
}

}  // namespace
}  // namespace routes_test
