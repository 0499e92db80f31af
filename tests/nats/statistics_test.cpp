// The bridge's statistics snapshot gathered from its parts, without a
// server: the tallies, the receiver's streams, the connection's state and
// the subscriptions' slow-consumer drops, each in its field.
#include "sluice/nats/statistics.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "sluice/bus.hpp"
#include "sluice/nats/inbound.hpp"
#include "test_messages.hpp"

namespace statistics_test {
namespace {

using sluice::MessagePriority;
using sluice_nats_test::SensorReading;

using Bus = sluice::MpscBus<std::variant<SensorReading>, 64>;
using Receiver = sluice::nats::detail::Receiver<Bus>;

TEST(NatsStatistics, EachPartFillsItsOwnFields) {
  sluice::nats::BridgeOptions options;
  sluice::nats::detail::Counters counters;
  sluice::nats::detail::Connection connection(options, counters, {});
  sluice::nats::detail::SubscriptionSet<Receiver> subscriptions;
  Bus bus;
  Receiver receiver(bus, options, 100, counters, connection, subscriptions);

  // A frame of one peer's stream, then the same one again: a stream opened,
  // a duplicate refused.
  sluice::nats::detail::InboundSubject subject;
  subject.subject = "plant.sensor";
  subject.type_ids = {1};
  const auto inbound = receiver.MakeSubscription(
      subject,
      {{1, 0, &Receiver::Deliver<SensorReading, sluice::nats::DefaultCodec<SensorReading>>}},
      MessagePriority::MEDIUM);
  std::string frame(sluice::nats::kFrameHeaderSize, '\0');
  ASSERT_TRUE(sluice::nats::DefaultCodec<SensorReading>::Encode(SensorReading{1, 2.0F, 3}, frame));
  sluice::nats::FrameHeader header;
  header.type_id = 1;
  header.origin_id = 7;
  header.instance_id = 11;
  header.sequence = 1;
  header.payload_size = static_cast<std::uint32_t>(frame.size() - sluice::nats::kFrameHeaderSize);
  sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(frame.data()));
  for (int i = 0; i < 2; ++i) {
    receiver.HandleFrame(*inbound, "plant.sensor.medium",
                         reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  }
  subscriptions.AddPull(receiver.MakeSubscription(subject, {}, MessagePriority::HIGH))
      ->dropped_seen = 4;
  counters.reconnects.store(6);

  const sluice::nats::BridgeStatisticsSnapshot s =
      sluice::nats::detail::ReadStatistics(counters, receiver, connection, subscriptions);
  EXPECT_EQ(s.frames_received, 2u);
  EXPECT_EQ(s.delivered[static_cast<std::size_t>(MessagePriority::MEDIUM)], 1u);
  EXPECT_EQ(s.reconnects, 6u);
  EXPECT_EQ(s.streams.streams_opened, 1u);
  EXPECT_EQ(s.streams.streams_tracked, 1u);
  EXPECT_EQ(s.streams.duplicates, 1u);
  EXPECT_EQ(s.slow_consumer_dropped, (sluice::nats::PriorityCounts{0, 0, 4}));
  EXPECT_FALSE(s.connected);  // never connected
}

}  // namespace
}  // namespace statistics_test
