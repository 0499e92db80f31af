// Heartbeats against a real nats-server: a sending bridge's idle streams
// get heartbeats carrying their last number; a receiver counts the tail a
// stream lost (frames the sender's client refused while the server was
// down, which no later frame reveals) and sees the stream go silent when
// its sender stops; a heartbeat is judged as any frame first (priority,
// origin, payload). Deadlines only guard against hangs; no time is asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <sluice/nats/bridge.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bridge_test_support.hpp"
#include "test_messages.hpp"

namespace bridge_heartbeat_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::Eventually;
using sluice_nats_test::Index;
using sluice_nats_test::kStopType;
using sluice_nats_test::NatsBridgeTest;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::PublishRaw;
using sluice_nats_test::Settled;
using sluice_nats_test::StopFrame;
using sluice_nats_test::StopLog;

constexpr std::uint64_t kSender = 0x4EA27;
constexpr auto kHigh = static_cast<std::size_t>(MessagePriority::HIGH);

// A heartbeat frame as a sender writes it (unsigned).
std::string Heartbeat(std::uint64_t origin, std::uint64_t instance, std::uint64_t last,
                      std::uint32_t interval_ms, MessagePriority priority = MessagePriority::HIGH) {
  std::string frame;
  EXPECT_TRUE(sluice::nats::detail::EncodeHeartbeat(origin, instance, priority, last, interval_ms,
                                                    sluice::nats::FrameKey{}, "", frame));
  return frame;
}

TEST_F(NatsBridgeTest, AnIdleForwardedStreamGetsHeartbeatsCarryingItsLastNumber) {
  natsConnection* tap = nullptr;
  natsSubscription* captured = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&tap, server_.Url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&captured, tap, "hb.stop.*"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(tap, 10000), NATS_OK);

  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.origin_id = kSender;
  options.heartbeat_interval = 50ms;
  Bridge sender(bus, options);
  ASSERT_TRUE(sender.Forward<EmergencyStop>("hb.stop", kStopType));
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  for (std::uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{1, 2, seq}, 1, MessagePriority::HIGH));
  }
  for (std::uint64_t seq = 4; seq <= 5; ++seq) {
    ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{1, 2, seq}, 1, MessagePriority::LOW));
  }

  // What goes on the wire until both streams have had a heartbeat.
  std::uint64_t instance = 0;
  std::vector<std::pair<std::string, sluice::nats::FrameHeader>> heartbeats;
  std::vector<std::uint32_t> intervals;
  int frames = 0;
  bool high_beat = false;
  bool low_beat = false;
  while (!(high_beat && low_beat)) {
    natsMsg* message = nullptr;
    ASSERT_EQ(natsSubscription_NextMsg(&message, captured, 10000), NATS_OK);
    const std::string subject = natsMsg_GetSubject(message);
    const std::string bytes(natsMsg_GetData(message),
                            static_cast<std::size_t>(natsMsg_GetDataLength(message)));
    natsMsg_Destroy(message);
    sluice::nats::FrameView view;
    ASSERT_EQ(sluice::nats::DecodeFrame(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                        bytes.size(), &view),
              FrameError::kNone);
    if (view.header.type_id != sluice::nats::kHeartbeatTypeId) {
      ++frames;
      instance = view.header.instance_id;
      continue;
    }
    ASSERT_EQ(view.payload_size, sluice::nats::kHeartbeatPayloadSize);
    std::uint32_t interval = 0;
    std::memcpy(&interval, view.payload, 4);  // little-endian host
    intervals.push_back(interval);
    heartbeats.emplace_back(subject, view.header);
    high_beat = high_beat || subject == "hb.stop.high";
    low_beat = low_beat || subject == "hb.stop.low";
  }
  natsSubscription_Destroy(captured);
  natsConnection_Destroy(tap);
  (void)sender.Shutdown(10s);
  consumer.Stop();

  EXPECT_EQ(frames, 5);  // every frame came before any heartbeat of its stream
  for (std::size_t i = 0; i < heartbeats.size(); ++i) {
    const auto& [subject, header] = heartbeats[i];
    EXPECT_EQ(header.origin_id, kSender);
    EXPECT_EQ(header.instance_id, instance);
    EXPECT_EQ(intervals[i], 50u);
    if (subject == "hb.stop.high") {
      EXPECT_EQ(header.sequence, 3u);
      EXPECT_EQ(header.priority, MessagePriority::HIGH);
    } else {
      EXPECT_EQ(subject, "hb.stop.low");  // MEDIUM sent nothing: no heartbeat
      EXPECT_EQ(header.sequence, 2u);
      EXPECT_EQ(header.priority, MessagePriority::LOW);
    }
  }
  EXPECT_GE(sender.GetStatistics().heartbeats_sent, 2u);
}

// The server goes down while the receiver has heard frames 1 to 5; the
// sender's client refuses frames 6 to 8 (its reconnect buffer has no room
// for them, but for the first, which it may keep), then the sender falls
// idle. No later frame ever reveals them; the
// heartbeat after the restart does. When the sender stops, its stream
// reads as silent.
TEST_F(NatsBridgeTest, AHeartbeatRevealsALostTailAndAStoppedSendersStreamGoesSilent) {
  Bus bus;
  Bridge receiver(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("hb.tail", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  Bus sender_bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.origin_id = kSender;
  options.heartbeat_interval = 50ms;
  options.reconnect_buffer_bytes = 16;  // no room for a frame: refused while down
  auto sender = std::make_unique<Bridge>(sender_bus, options);
  ASSERT_TRUE(sender->Forward<EmergencyStop>("hb.tail", kStopType));
  ASSERT_EQ(sender->Start(), NATS_OK);
  Consumer<Bus> sender_consumer(sender_bus);
  for (std::uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(EmergencyStop{1, 2, seq}, 1, MessagePriority::HIGH));
  }
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 5; }));

  server_.Kill();
  ASSERT_TRUE(Eventually(
      [&] { return !sender->GetStatistics().connected && !receiver.GetStatistics().connected; }));
  for (std::uint64_t seq = 6; seq <= 8; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(EmergencyStop{1, 2, seq}, 1, MessagePriority::HIGH));
  }
  // Each refused or buffered (the client keeps the first in a buffer it
  // sizes itself); every refused one is lost, and no frame comes after.
  ASSERT_TRUE(Eventually([&] {
    const auto s = sender->GetStatistics();
    return s.frames_sent[kHigh] + s.send_dropped[kHigh] == 8;
  }));
  const std::uint64_t lost = sender->GetStatistics().send_dropped[kHigh];
  ASSERT_GE(lost, 1u);
  ASSERT_TRUE(server_.Restart());
  // Every number sent either arrived or, named by a heartbeat, is counted
  // missing: the refused ones, and the one the client buffered if it went
  // out before this receiver had its subscription back.
  ASSERT_TRUE(Eventually([&] {
    const auto s = receiver.GetStatistics();
    return s.streams.heartbeats_with_gaps >= 1 && s.streams.gaps + s.delivered[kHigh] == 8;
  }));
  auto stats = receiver.GetStatistics();
  EXPECT_GE(stats.streams.gaps, lost);
  EXPECT_EQ(stats.streams.heartbeats_with_gaps, 1u);
  const std::uint64_t delivered = stats.delivered[kHigh];
  EXPECT_EQ(stats.Rejected(), 0u);

  // The sender stops: no frame, no heartbeat; three intervals later its
  // stream is silent.
  (void)sender->Shutdown(10s);
  sender_consumer.Stop();
  sender.reset();
  ASSERT_TRUE(Eventually([&] { return receiver.GetStatistics().streams.streams_silent == 1; }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  stats = receiver.GetStatistics();
  EXPECT_EQ(stats.streams.gaps + stats.delivered[kHigh], 8u);
  EXPECT_EQ(stats.delivered[kHigh], delivered);
  const std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.times.size(), delivered);
}

// A heartbeat passes the checks any frame does before it is read: its
// priority must be its subject's, its origin on the priority's allow-list,
// its payload four bytes; one stamped no later than its stream's last is a
// replay (a duplicate); one far ahead of its stream is not taken, so a
// forged one can neither silence the sender nor add gaps.
TEST_F(NatsBridgeTest, AHeartbeatIsJudgedAsAnyFrameAndOneFarAheadIsNotTaken) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.allowed_origins[kHigh] = {kSender};
  Bridge receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("hb.judge", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  const std::string fresh = Heartbeat(kSender, 9, 2, 50);
  std::string short_payload = Heartbeat(kSender, 9, 2, 50);
  short_payload.pop_back();
  short_payload[12] = 3;  // the payload length, to match
  PublishRaw(server_.Url(),
             {
                 {"hb.judge.high", StopFrame(kSender, 9, 1, 1)},
                 {"hb.judge.high", StopFrame(kSender, 9, 2, 2)},
                 {"hb.judge.high", fresh},                             // nothing missing
                 {"hb.judge.high", Heartbeat(kSender + 1, 9, 5, 50)},  // origin not allowed
                 {"hb.judge.low", Heartbeat(kSender, 9, 5, 50)},       // priority mismatch
                 {"hb.judge.high", short_payload},                     // bad payload
                 {"hb.judge.high", Heartbeat(kSender, 9, ~std::uint64_t{0}, 50)},  // far ahead
                 {"hb.judge.high", fresh},  // replayed: not fresh, a duplicate
                 {"hb.judge.high", StopFrame(kSender, 9, 3, 3)},  // still in order
             });
  ASSERT_TRUE(Eventually([&] {
    const auto s = receiver.GetStatistics();
    return Settled(s) >= 7 && s.heartbeats_received >= 2;
  }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.heartbeats_received, 2u);
  EXPECT_EQ(stats.streams.heartbeats_far_ahead, 1u);
  EXPECT_EQ(stats.streams.gaps, 0u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kOriginNotAllowed)], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kPriorityMismatch)], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kBadPayload)], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 1u);
  EXPECT_EQ(stats.Rejected(), 4u);
  EXPECT_EQ(stats.delivered[kHigh], 3u);
  const std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.times.size(), 3u);
}

// An interval that does not fit the heartbeat's four bytes of milliseconds
// is refused before any connection is made.
TEST(NatsHeartbeatOptionsTest, AnIntervalAbove32BitsOfMillisecondsFailsStart) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor("nats://127.0.0.1:1");  // never reached
  options.heartbeat_interval = sluice::nats::kMaxHeartbeatInterval + 1ms;
  Bridge bridge(bus, options);
  const sluice::nats::StartResult result = bridge.Start();
  EXPECT_EQ(result.status, NATS_INVALID_ARG);
  EXPECT_NE(result.error.find("heartbeat_interval"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace bridge_heartbeat_test
