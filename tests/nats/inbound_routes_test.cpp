// The received subjects put to work, without a server: what Receive and
// StopReceiving do around the route table. The connection is never opened,
// so every subscription the client is asked for fails, as one the server
// could not make would.
#include "sluice/nats/inbound_routes.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "sluice/bus.hpp"
#include "sluice/nats/outbound.hpp"
#include "test_messages.hpp"

namespace inbound_routes_test {
namespace {

using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::SensorReading;

using Bus = sluice::MpscBus<std::variant<SensorReading, EmergencyStop>, 64>;
using Receiver = sluice::nats::detail::Receiver<Bus>;
using Routes = sluice::nats::detail::RouteTable<sluice::nats::detail::Sender<Bus>, Receiver>;
using Inbound = sluice::nats::detail::InboundRoutes<Bus, Routes>;

constexpr std::uint16_t kReadingId = 1;
constexpr std::uint16_t kStopId = 2;
constexpr auto kDeliverReading =
    &Receiver::Deliver<SensorReading, sluice::nats::DefaultCodec<SensorReading>>;
constexpr auto kDeliverStop =
    &Receiver::Deliver<EmergencyStop, sluice::nats::DefaultCodec<EmergencyStop>>;

class NatsInboundRoutesTest : public ::testing::Test {
 protected:
  bool Add(const std::string& subject, std::uint16_t type_id,
           sluice::nats::ReceiveOptions route = {}) {
    return type_id == kReadingId
               ? inbound_.Add(subject, type_id, std::move(route), 0, kDeliverReading)
               : inbound_.Add(subject, type_id, std::move(route), 1, kDeliverStop);
  }

  bool Holds(const std::string& subject) const {
    for (const auto& known : routes_.inbound_subjects()) {
      if (known.subject == subject) return true;
    }
    return false;
  }

  // A reading numbered `sequence` from one peer's stream on
  // "plant.sensor.medium", handed to the receiver as the client would.
  void Hand(std::uint64_t sequence) {
    const sluice::nats::detail::InboundSubject& subject = routes_.inbound_subjects().front();
    const auto subscription =
        receiver_.MakeSubscription(subject, routes_.TypesOf(subject), MessagePriority::MEDIUM);
    std::string frame(sluice::nats::kFrameHeaderSize, '\0');
    ASSERT_TRUE(
        sluice::nats::DefaultCodec<SensorReading>::Encode(SensorReading{1, 2.0F, 3}, frame));
    sluice::nats::FrameHeader header;
    header.priority = MessagePriority::MEDIUM;
    header.type_id = kReadingId;
    header.origin_id = 7;
    header.instance_id = 11;
    header.sequence = sequence;
    header.payload_size = static_cast<std::uint32_t>(frame.size() - sluice::nats::kFrameHeaderSize);
    sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(frame.data()));
    receiver_.HandleFrame(*subscription, "plant.sensor.medium",
                          reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  }

  std::uint64_t Duplicates() const {
    return counters_.rejected[static_cast<std::size_t>(FrameError::kDuplicate)].load();
  }

  sluice::nats::BridgeOptions options_;
  sluice::nats::detail::Counters counters_;
  sluice::nats::detail::Connection connection_{options_, counters_, {}};
  sluice::nats::detail::SubscriptionSet<Receiver> subscriptions_;
  Bus bus_;
  Receiver receiver_{bus_, options_, 100, counters_, connection_, subscriptions_};
  sluice::nats::detail::StreamFetcher<Bus> fetcher_{
      bus_, options_, 100, counters_, connection_, subscriptions_, receiver_};
  Routes routes_;
  Inbound inbound_{options_, routes_, connection_, subscriptions_, receiver_, fetcher_};
};

// Before Start a route is only noted: a subscription attempt would have
// failed here and taken the subject away.
TEST_F(NatsInboundRoutesTest, BeforeStartTheTableDecidesAndNothingIsSubscribed) {
  EXPECT_TRUE(Add("plant.sensor", kReadingId));
  EXPECT_TRUE(Add("plant.sensor", kReadingId));  // known: nothing to do
  EXPECT_FALSE(Add("plant.*", kStopId));         // overlaps plant.sensor: refused
  EXPECT_FALSE(Add("plant.stop", 0));
  EXPECT_TRUE(Holds("plant.sensor"));
  EXPECT_FALSE(Holds("plant.*"));
  EXPECT_TRUE(subscriptions_.Pulls().empty());
}

// Running: a new subject is subscribed at once; when that fails (core NATS
// or a JetStream consumer), the subject leaves the table again, so it may
// be received later.
TEST_F(NatsInboundRoutesTest, WhileRunningAFailedSubscriptionTakesTheSubjectAway) {
  ASSERT_TRUE(Add("plant.sensor", kReadingId));
  routes_.set_started();
  EXPECT_TRUE(Add("plant.sensor", kReadingId));  // known: no subscription asked for
  EXPECT_FALSE(Add("plant.stop", kStopId));
  EXPECT_FALSE(Holds("plant.stop"));
  sluice::nats::ReceiveOptions stream;
  stream.stream = "PLANT";
  stream.durable = "bridge";
  EXPECT_FALSE(Add("yard.stop", kStopId, stream));
  EXPECT_FALSE(Holds("yard.stop"));
  EXPECT_TRUE(subscriptions_.Pulls().empty());
  ASSERT_EQ(routes_.inbound_subjects().size(), 1u);
  EXPECT_TRUE(Holds("plant.sensor"));
}

// Start's subscriptions: none to make asks nothing of the connection (not
// even the flush); the first that fails is Start's answer.
TEST_F(NatsInboundRoutesTest, StartSubscribesEverySubjectOrSaysWhatFailed) {
  EXPECT_EQ(inbound_.SubscribeAll(), NATS_OK);
  ASSERT_TRUE(Add("plant.sensor", kReadingId));
  EXPECT_EQ(inbound_.SubscribeAll(), NATS_INVALID_ARG);  // no connection to subscribe on
}

// StopReceiving forgets the subject's streams: received again, a number
// heard before is new, not a duplicate.
TEST_F(NatsInboundRoutesTest, RemovingASubjectForgetsItsStreams) {
  ASSERT_TRUE(Add("plant.sensor", kReadingId));
  Hand(1);
  Hand(1);
  EXPECT_EQ(Duplicates(), 1u);
  EXPECT_FALSE(inbound_.Remove("plant.stop"));  // not received
  EXPECT_TRUE(inbound_.Remove("plant.sensor"));
  EXPECT_FALSE(Holds("plant.sensor"));
  EXPECT_FALSE(inbound_.Remove("plant.sensor"));
  ASSERT_TRUE(Add("plant.sensor", kReadingId));
  Hand(1);
  EXPECT_EQ(Duplicates(), 1u);
  EXPECT_EQ(counters_.delivered[static_cast<std::size_t>(MessagePriority::MEDIUM)].load(), 2u);
}

}  // namespace
}  // namespace inbound_routes_test
