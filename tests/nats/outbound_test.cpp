// The bridge's sender on its own: a forwarded type's bus subscription, its
// frames and their numbers, and what it counts. No server: the connection
// is never opened, so the client refuses every frame handed to it (counted
// as send_dropped), and the frame built last stays in the route's buffer.
#include "sluice/nats/outbound.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "sluice/bus.hpp"
#include "test_messages.hpp"

namespace outbound_test {
namespace {

using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice::nats::FrameView;
using sluice_nats_test::SensorReading;

using Bus = sluice::MpscBus<std::variant<SensorReading>, 64>;
using Sender = sluice::nats::detail::Sender<Bus>;
using Route = Sender::Route;

constexpr std::uint64_t kOrigin = 100;
constexpr std::uint16_t kReadingId = 9;
constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
constexpr auto kHigh = static_cast<std::size_t>(MessagePriority::HIGH);

struct RefusingCodec {
  static bool Encode(const SensorReading&, std::string&) { return false; }
  static std::optional<SensorReading> Decode(const std::uint8_t*, std::size_t) {
    return std::nullopt;
  }
};

struct ThrowingCodec {
  static bool Encode(const SensorReading&, std::string&) { throw std::runtime_error("encode"); }
  static std::optional<SensorReading> Decode(const std::uint8_t*, std::size_t) {
    return std::nullopt;
  }
};

class NatsSenderTest : public ::testing::Test {
 protected:
  // The route of SensorReading on "plant.sensor", subscribed on the bus
  // with `Codec`; made after the test has set its options.
  template <typename Codec = sluice::nats::DefaultCodec<SensorReading>>
  void Forward() {
    route_.type_id = kReadingId;
    for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
      route_.subjects[p] =
          sluice::nats::SubjectFor("plant.sensor", static_cast<MessagePriority>(p));
    }
    route_.sequence = std::make_shared<sluice::nats::detail::SubjectSequence>();
    sender_.NewInstance();
    route_.handle = Sender::Subscribe<SensorReading, Codec>(sender_, route_);
    ASSERT_TRUE(route_.handle.IsValid());
  }

  void Send(std::uint64_t seq, MessagePriority priority, std::uint32_t sender_id = 5) {
    ASSERT_TRUE(
        bus_.PublishWithPriority(SensorReading{3, 1.5F, seq}, sender_id, priority).IsAdmitted());
    while (bus_.ProcessBatch() > 0) {
    }
  }

  // The frame the sender built last.
  FrameView LastFrame() const {
    FrameView view;
    EXPECT_EQ(sluice::nats::DecodeFrame(reinterpret_cast<const std::uint8_t*>(route_.buffer.data()),
                                        route_.buffer.size(), &view, options_.max_payload),
              FrameError::kNone);
    return view;
  }

  sluice::nats::BridgeOptions options_;
  sluice::nats::detail::Counters counters_;
  sluice::nats::detail::Connection connection_{options_, counters_, {}};
  sluice::nats::detail::StreamPublisher publisher_{options_, counters_, connection_};
  Bus bus_;
  Sender sender_{bus_, options_, kOrigin, counters_, connection_, publisher_};
  Route route_;
};

// Every frame handed to the client takes its subject's next number at its
// priority, also one the client then refuses (the receiver sees a gap).
TEST_F(NatsSenderTest, EachMessageIsFramedOnItsStreamWithItsSubjectsNextNumber) {
  Forward();
  Send(41, MessagePriority::HIGH);
  const FrameView first = LastFrame();
  EXPECT_EQ(first.header.type_id, kReadingId);
  EXPECT_EQ(first.header.origin_id, kOrigin);
  EXPECT_NE(first.header.instance_id, 0u);
  EXPECT_EQ(first.header.priority, MessagePriority::HIGH);
  EXPECT_EQ(first.header.sender_id, 5u);
  EXPECT_EQ(first.header.sequence, 1u);
  const std::optional<SensorReading> reading =
      sluice::nats::DefaultCodec<SensorReading>::Decode(first.payload, first.payload_size);
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->seq, 41u);
  Send(42, MessagePriority::HIGH);
  EXPECT_EQ(LastFrame().header.sequence, 2u);
  EXPECT_EQ(LastFrame().header.instance_id, first.header.instance_id);
  Send(43, MessagePriority::LOW);
  EXPECT_EQ(LastFrame().header.sequence, 1u);  // LOW's own numbers
  EXPECT_EQ((*route_.sequence)[kHigh], 2u);
  EXPECT_EQ(counters_.send_dropped[kHigh].load(), 2u);
  EXPECT_EQ(counters_.send_dropped[kLow].load(), 1u);
  EXPECT_EQ(counters_.frames_sent[kHigh].load(), 0u);
}

// The second loop guard: a message published by a receiving bridge (its
// sender id carries the remote flag) is not framed, numbered or sent.
TEST_F(NatsSenderTest, WhatCameFromNatsIsNotSentBack) {
  Forward();
  Send(1, MessagePriority::HIGH, 5 | options_.remote_sender_flag);
  EXPECT_EQ(counters_.loop_suppressed.load(), 1u);
  EXPECT_EQ((*route_.sequence)[kHigh], 0u);
  EXPECT_EQ(counters_.send_dropped[kHigh].load(), 0u);
  EXPECT_TRUE(route_.buffer.empty());
}

// A payload over max_payload is an encode failure: nothing handed to the
// client, no number taken.
TEST_F(NatsSenderTest, AFrameOverMaxPayloadIsAnEncodeFailure) {
  options_.max_payload = 8;  // a reading is 16 bytes on the wire
  Forward();
  Send(1, MessagePriority::HIGH);
  EXPECT_EQ(counters_.encode_failed.load(), 1u);
  EXPECT_EQ((*route_.sequence)[kHigh], 0u);
  EXPECT_EQ(counters_.send_dropped[kHigh].load(), 0u);
}

TEST_F(NatsSenderTest, ACodecThatRefusesIsAnEncodeFailure) {
  Forward<RefusingCodec>();
  Send(1, MessagePriority::LOW);
  EXPECT_EQ(counters_.encode_failed.load(), 1u);
  EXPECT_EQ((*route_.sequence)[kLow], 0u);
  EXPECT_EQ(counters_.send_dropped[kLow].load(), 0u);
}

#if SLUICE_HAS_EXCEPTIONS
// A codec that throws is counted here, and the exception goes on to the
// bus, which counts it as it does for any subscriber that throws.
TEST_F(NatsSenderTest, ACodecThatThrowsIsCountedAndReachesTheBus) {
  Forward<ThrowingCodec>();
  Send(1, MessagePriority::LOW);
  EXPECT_EQ(counters_.encode_failed.load(), 1u);
  EXPECT_EQ(bus_.GetStatistics().processing_errors, 1u);
  EXPECT_EQ((*route_.sequence)[kLow], 0u);
}
#endif

}  // namespace
}  // namespace outbound_test
