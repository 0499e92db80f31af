// What the receiving bridge knows and refuses, against a real nats-server:
// gaps, late frames and duplicates of each stream, replays, the allow-list
// of origins, version 1 frames, a message's provenance, a payload's bytes
// on the wire, a HIGH admitted after waiting that no counter calls a
// drop, and a receiver restarted with its stream table in a file. Deadlines only guard against
// hangs; no time is asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sluice/nats/bridge.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "bridge_test_support.hpp"
#include "test_messages.hpp"

namespace bridge_streams_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice::nats::FrameHeader;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::EncodedFrame;
using sluice_nats_test::Eventually;
using sluice_nats_test::Index;
using sluice_nats_test::kHangGuard;
using sluice_nats_test::kSensorType;
using sluice_nats_test::kStopType;
using sluice_nats_test::kTestSender;
using sluice_nats_test::NatsBridgeTest;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::PublishRaw;
using sluice_nats_test::ScratchDirectory;
using sluice_nats_test::SensorReading;
using sluice_nats_test::Settled;
using sluice_nats_test::StopFrame;
using sluice_nats_test::StopLog;

TEST_F(NatsBridgeTest, GapsLateFramesAndDuplicatesAreCountedAndReplaysRefused) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("s.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  // One stream: 1, 2, then 4 (3 is a gap), 3 late, 3 again and 1 again
  // (duplicates), 5000 (more than a window ahead: held), 5001 (confirms the
  // jump: 4995 more gaps, 5 to 4999), then 2 (stale: behind the window).
  std::vector<std::pair<std::string, std::string>> frames;
  for (const std::uint64_t sequence : {1, 2, 4, 3, 3, 1}) {
    frames.emplace_back("s.stop.high", StopFrame(0xAB, 77, sequence, sequence));
  }
  frames.emplace_back("s.stop.high", StopFrame(0xAB, 77, 5000, 5000));
  frames.emplace_back("s.stop.high", StopFrame(0xAB, 77, 5001, 5001));  // confirms 5000's jump
  frames.emplace_back("s.stop.high", StopFrame(0xAB, 77, 2, 2));
  // The same frames replayed 20 times: every one refused.
  const std::size_t first = frames.size();
  ASSERT_EQ(first, 9u);
  for (int replay = 0; replay < 20; ++replay) {
    for (std::size_t i = 0; i < first; ++i) frames.push_back(frames[i]);
  }
  // The sender restarted (a new instance): its numbers start again.
  frames.emplace_back("s.stop.high", StopFrame(0xAB, 78, 1, 6001));
  PublishRaw(server_.Url(), frames);

  ASSERT_TRUE(Eventually([&] {
    return bridge.GetStatistics().frames_received >= frames.size() &&
           log.count.load(std::memory_order_relaxed) >= 7;
  }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();

  const auto stats = bridge.GetStatistics();
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    const std::map<std::uint64_t, int> once = {{1, 1},    {2, 1},    {3, 1},   {4, 1},
                                               {5000, 1}, {5001, 1}, {6001, 1}};
    EXPECT_EQ(log.times, once) << "every frame dispatched once, no replay dispatched";
  }
  EXPECT_EQ(stats.delivered[2], 7u);
  EXPECT_EQ(stats.streams.jumps_held, 1u);
  EXPECT_EQ(stats.streams.jumps_confirmed, 1u);
  EXPECT_EQ(stats.streams.gaps, 4995u) << "5..4999 never came; 3 came late";
  EXPECT_EQ(stats.streams.reordered, 1u);
  // In each replay, 5000 and 5001 are duplicates and the seven others are
  // behind the window (5001 - 4 >= 4096): stale.
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 2u + 20u * 2u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kStale)], 1u + 20u * 7u);
  EXPECT_EQ(stats.streams.duplicates, stats.rejected[Index(FrameError::kDuplicate)]);
  EXPECT_EQ(stats.streams.stale, stats.rejected[Index(FrameError::kStale)]);
  EXPECT_EQ(stats.streams.streams_opened, 2u);

  std::string text;
  sluice::nats::WritePrometheus(text, "streams", bus, bridge);
  EXPECT_NE(text.find("sluice_nats_frames_missing{bus=\"streams\"} 4995\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_nats_frames_rejected_total{bus=\"streams\",reason=\"duplicate\"} " +
                      std::to_string(stats.rejected[Index(FrameError::kDuplicate)]) + "\n"),
            std::string::npos);
}

// Two bridges, a raw subscriber that records the frames between them, and
// those frames published again: provenance arrives with each message, and
// a replayed stream is never dispatched twice.
// A receiver killed with SIGKILL and started again, three times, with its
// stream table in a file (BridgeOptions::stream_state_path): each new one
// counts as gaps exactly the frames sent while it was down, by sequence
// number: every reading 1..N is dispatched by one receiver or counted as
// a gap by the next, never both, never twice. Each receiver is killed once
// it has dispatched every reading sent to it (its bus is empty: what a
// killed bus holds on core NATS is lost uncounted; docs/nats.md).
class NatsStateFileTest : public NatsBridgeTest {
 protected:
  // Publishes readings first..last on "t.state" through `bus`'s bridge.
  static void SendReadings(Bus& bus, std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t seq = first; seq <= last; ++seq) {
      while (!bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                      MessagePriority::MEDIUM)) {
        (void)bus.ProcessBatch();
      }
      while (bus.ProcessBatch() > 0) {
      }
    }
  }

  bool StartReceiver(sluice_test::ChildProcess& receiver, const std::string& state_path,
                     std::uint64_t* restored) {
    if (!StartPeer(receiver, {"stateful", server_.Url(), state_path})) return false;
    std::string line;
    if (!receiver.WaitForLine("ready", &line, kHangGuard)) return false;
    *restored = std::stoull(line.substr(line.find("restored=") + 9));
    return true;
  }

  // Reads "got=<seq> gaps=<n>" lines until reading `last` came; the
  // readings in order, and the gaps on the last line.
  static bool ReadUntil(sluice_test::ChildProcess& receiver, std::uint64_t last,
                        std::vector<std::uint64_t>* got, std::uint64_t* gaps) {
    std::string line;
    while (receiver.ReadLine(&line, kHangGuard)) {
      if (line.compare(0, 4, "got=") != 0) continue;
      const std::uint64_t seq = std::stoull(line.substr(4));
      got->push_back(seq);
      *gaps = std::stoull(line.substr(line.find("gaps=") + 5));
      if (seq == last) return true;
    }
    return false;
  }
};

TEST_F(NatsStateFileTest, ARestartedReceiverCountsExactlyWhatWasSentWhileItWasDown) {
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  Bus bus;
  Bridge sender(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(sender.Forward<SensorReading>("t.state", kSensorType));
  ASSERT_EQ(sender.Start(), NATS_OK);
  // A tap on the subject: once it has a batch, the server has routed the
  // batch (a receiver started later cannot get it), so the count of frames
  // sent while a receiver was down does not depend on timing.
  natsConnection* tap = nullptr;
  natsSubscription* tapped = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&tap, server_.Url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&tapped, tap, "t.state.*"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(tap, 10000), NATS_OK);
  const auto routed = [&](std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) {
      natsMsg* message = nullptr;
      ASSERT_EQ(natsSubscription_NextMsg(&message, tapped, 10000), NATS_OK);
      natsMsg_Destroy(message);
    }
  };

  constexpr int kRestarts = 3;
  std::uint64_t sent = 0;
  std::vector<std::uint64_t> dispatched;  // by every receiver, in order
  std::uint64_t gaps = 0;                 // counted by every receiver
  for (int restart = 0; restart <= kRestarts; ++restart) {
    sluice_test::ChildProcess receiver;
    std::uint64_t restored = 0;
    ASSERT_TRUE(StartReceiver(receiver, state, &restored)) << "receiver " << restart;
    EXPECT_EQ(restored, restart == 0 ? 0u : 1u) << "receiver " << restart;
    // 200 readings taken; then killed, and 150, 200, 250 sent while down.
    const std::uint64_t first = sent + 1;
    sent += 200;
    SendReadings(bus, first, sent);
    ASSERT_NO_FATAL_FAILURE(routed(200));
    std::vector<std::uint64_t> got;
    std::uint64_t counted = 0;
    ASSERT_TRUE(ReadUntil(receiver, sent, &got, &counted)) << "receiver " << restart;
    dispatched.insert(dispatched.end(), got.begin(), got.end());
    gaps += counted;
    std::printf("[  streams ] receiver %d: %zu readings from %llu, %llu gaps counted\n", restart,
                got.size(), static_cast<unsigned long long>(got.front()),
                static_cast<unsigned long long>(counted));
    if (restart == kRestarts) {
      receiver.Kill(SIGTERM);
      break;
    }
    receiver.Kill(SIGKILL);
    const std::uint64_t down = 100 + 50 * static_cast<std::uint64_t>(restart + 1);
    SendReadings(bus, sent + 1, sent + down);
    ASSERT_NO_FATAL_FAILURE(routed(down));
    sent += down;
  }
  natsSubscription_Destroy(tapped);
  natsConnection_Destroy(tap);
  (void)sender.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  // Every reading dispatched once or counted as a gap, in order.
  std::set<std::uint64_t> once(dispatched.begin(), dispatched.end());
  EXPECT_EQ(once.size(), dispatched.size()) << "a reading was dispatched twice";
  EXPECT_TRUE(std::is_sorted(dispatched.begin(), dispatched.end()));
  EXPECT_EQ(gaps + dispatched.size(), sent);
  EXPECT_EQ(gaps, 150u + 200u + 250u) << "the readings sent while each receiver was down";
}

// The same restart with no file: the new receiver starts a fresh table and
// counts nothing it missed (what the file is for; it also shows the test
// above can fail).
TEST_F(NatsStateFileTest, WithoutTheFileARestartedReceiverCountsNothing) {
  Bus bus;
  Bridge sender(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(sender.Forward<SensorReading>("t.state", kSensorType));
  ASSERT_EQ(sender.Start(), NATS_OK);
  std::uint64_t gaps = 0;
  std::vector<std::uint64_t> got;
  {
    sluice_test::ChildProcess receiver;
    std::uint64_t restored = 0;
    ASSERT_TRUE(StartReceiver(receiver, "-", &restored));
    SendReadings(bus, 1, 100);
    ASSERT_TRUE(ReadUntil(receiver, 100, &got, &gaps));
    receiver.Kill(SIGKILL);
  }
  SendReadings(bus, 101, 200);
  sluice_test::ChildProcess receiver;
  std::uint64_t restored = 0;
  ASSERT_TRUE(StartReceiver(receiver, "-", &restored));
  EXPECT_EQ(restored, 0u);
  SendReadings(bus, 201, 300);
  ASSERT_TRUE(ReadUntil(receiver, 300, &got, &gaps));
  receiver.Kill(SIGTERM);
  (void)sender.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_EQ(gaps, 0u);
  EXPECT_EQ(got.size(), 200u);
}

// A second receiver given the file of a running one is refused at Start,
// saying why.
TEST_F(NatsStateFileTest, TwoReceiversCannotShareAFile) {
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  sluice_test::ChildProcess first;
  std::uint64_t restored = 0;
  ASSERT_TRUE(StartReceiver(first, state, &restored));
  sluice_test::ChildProcess second;
  ASSERT_TRUE(StartPeer(second, {"stateful", server_.Url(), state}));
  std::string line;
  ASSERT_TRUE(second.WaitForLine("start_error=", &line, kHangGuard));
  EXPECT_NE(line.find("in use by another receiver"), std::string::npos) << line;
  first.Kill(SIGTERM);
}

TEST_F(NatsBridgeTest, RemoteCarriesProvenanceAndARecordedStreamReplayedIsRefused) {
  constexpr std::uint64_t kCount = 200;
  using RemotePayload = std::variant<SensorReading, sluice::nats::Remote<SensorReading>>;
  using RemoteBus = sluice::MpscBus<RemotePayload, 1024>;
  RemoteBus sender_bus;
  RemoteBus receiver_bus;
  sluice::nats::Bridge<RemoteBus> sender(sender_bus, OptionsFor(server_.Url()));
  sluice::nats::Bridge<RemoteBus> receiver(receiver_bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(sender.Forward<SensorReading>("p.reading", kSensorType));
  ASSERT_TRUE(receiver.Receive<sluice::nats::Remote<SensorReading>>("p.reading", kSensorType));

  // The sender's headers, by seq (its consumer thread), and what arrived.
  std::mutex mutex;
  std::map<std::uint64_t, sluice::MessageHeader> sent;
  std::vector<sluice::nats::Remote<SensorReading>> arrived;
  auto on_sent = sender_bus.Subscribe<SensorReading>(
      [&](const SensorReading& m, const sluice::MessageHeader& h) {
        std::lock_guard<std::mutex> lock(mutex);
        sent[m.seq] = h;
      });
  auto on_arrived = receiver_bus.Subscribe<sluice::nats::Remote<SensorReading>>(
      [&](const sluice::nats::Remote<SensorReading>& m) {
        std::lock_guard<std::mutex> lock(mutex);
        arrived.push_back(m);
      });
  ASSERT_TRUE(on_sent.IsValid() && on_arrived.IsValid());

  natsConnection* recorder = nullptr;
  natsSubscription* recording = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&recorder, server_.Url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&recording, recorder, "p.reading.*"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(recorder, 10000), NATS_OK);
  ASSERT_EQ(receiver.Start(), NATS_OK);
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<RemoteBus> sender_consumer(sender_bus);
  Consumer<RemoteBus> receiver_consumer(receiver_bus);

  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(SensorReading{4, 0.5f, seq}, kTestSender,
                                               MessagePriority::MEDIUM));
  }
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mutex);
    return arrived.size() >= kCount;
  }));
  std::vector<std::pair<std::string, std::string>> recorded;
  while (recorded.size() < kCount) {
    natsMsg* message = nullptr;
    ASSERT_EQ(natsSubscription_NextMsg(&message, recording, 10000), NATS_OK);
    recorded.emplace_back(natsMsg_GetSubject(message),
                          std::string(natsMsg_GetData(message),
                                      static_cast<std::size_t>(natsMsg_GetDataLength(message))));
    natsMsg_Destroy(message);
  }
  natsSubscription_Destroy(recording);
  natsConnection_Destroy(recorder);

  // The whole recording, three times, into the receiver.
  std::vector<std::pair<std::string, std::string>> replay;
  for (int round = 0; round < 3; ++round)
    replay.insert(replay.end(), recorded.begin(), recorded.end());
  PublishRaw(server_.Url(), replay);
  ASSERT_TRUE(Eventually(
      [&] { return receiver.GetStatistics().frames_received >= kCount + replay.size(); }));
  (void)sender.Shutdown(10s);
  (void)receiver.Shutdown(10s);
  sender_consumer.Stop();
  receiver_consumer.Stop();

  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(arrived.size(), kCount) << "a replayed frame was dispatched";
  for (std::uint64_t i = 0; i < kCount; ++i) {
    const auto& m = arrived[i];
    EXPECT_EQ(m.value.seq, i);
    const sluice::nats::Provenance& from = m.provenance;
    EXPECT_EQ(from.origin_id, sender.OriginId());
    EXPECT_NE(from.instance_id, 0u);
    EXPECT_EQ(from.sequence, i + 1) << "numbered from 1 on the subject";
    EXPECT_EQ(from.msg_id, sent.at(i).msg_id);
    EXPECT_EQ(from.timestamp_ns, sent.at(i).timestamp_ns);
    EXPECT_EQ(from.sender_id, kTestSender);
    EXPECT_EQ(from.type_id, kSensorType);
    EXPECT_EQ(from.priority, MessagePriority::MEDIUM);
    EXPECT_EQ(from.stream_sequence, 0u) << "core NATS: no stream";
    EXPECT_EQ(from.deliveries, 0u);
  }
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], replay.size());
  EXPECT_EQ(stats.streams.gaps, 0u);
}

TEST_F(NatsBridgeTest, TheAllowListRefusesOtherOriginsAtItsPriorityOnly) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.allowed_origins[static_cast<std::size_t>(MessagePriority::HIGH)] = {0xA, 0xC};
  std::atomic<int> reported{0};
  options.on_reject = [&](FrameError error, std::string_view) {
    if (error == FrameError::kOriginNotAllowed) reported.fetch_add(1);
  };
  Bridge bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("a.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  PublishRaw(server_.Url(), {
                                {"a.stop.high", StopFrame(0xA, 1, 1, 1)},  // allowed
                                {"a.stop.high", StopFrame(0xB, 1, 1, 2)},  // forged stop: refused
                                {"a.stop.high", StopFrame(0xC, 1, 1, 3)},  // allowed
                                {"a.stop.low", StopFrame(0xB, 1, 1, 4, MessagePriority::LOW)},
                            });
  ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= 4; }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const auto stats = bridge.GetStatistics();
  std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{1, 1}, {3, 1}, {4, 1}};
  EXPECT_EQ(log.times, expected);
  EXPECT_EQ(stats.rejected[Index(FrameError::kOriginNotAllowed)], 1u);
  EXPECT_EQ(reported.load(), 1);
}

// Frames from made-up origins (here 1,100 LOW ones, each a new stream,
// where no allow-list guards LOW) cannot push the streams the receiver
// knows out of its table, so replays of their captured frames are still
// refused: the made-up streams fill the unknown origins' part (1,024) and
// the rest are refused and counted.
TEST_F(NatsBridgeTest, MadeUpOriginsCannotPushKnownStreamsOutOfTheTable) {
  constexpr std::uint64_t kReal = 0xA;
  constexpr std::uint64_t kMadeUp = 1100;
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.allowed_origins[static_cast<std::size_t>(MessagePriority::HIGH)] = {kReal};
  Bridge bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("t.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  // The real sender's HIGH and LOW streams, and an unknown sender's LOW one.
  const std::vector<std::pair<std::string, std::string>> real = {
      {"t.stop.high", StopFrame(kReal, 1, 1, 1)},
      {"t.stop.low", StopFrame(kReal, 1, 1, 2, MessagePriority::LOW)},
      {"t.stop.low", StopFrame(0xB, 1, 1, 3, MessagePriority::LOW)}};
  PublishRaw(server_.Url(), real);
  ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= 3; }));
  std::vector<std::pair<std::string, std::string>> made_up;
  for (std::uint64_t i = 0; i < kMadeUp; ++i) {
    made_up.emplace_back("t.stop.low", StopFrame(0x1000 + i, 1, 1, 1000 + i, MessagePriority::LOW));
  }
  PublishRaw(server_.Url(), made_up);
  ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= 3 + kMadeUp; }));
  PublishRaw(server_.Url(), real);  // captured frames replayed
  ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= 6 + kMadeUp; }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const auto stats = bridge.GetStatistics();
  // The unknown part: 0xB's stream and 1,023 made-up ones; 77 refused.
  EXPECT_EQ(stats.rejected[Index(FrameError::kStreamTableFull)], kMadeUp - 1023);
  EXPECT_EQ(stats.streams.refused_table_full, kMadeUp - 1023);
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 3u);  // every replay
  EXPECT_EQ(stats.streams.streams_evicted, 0u);
  EXPECT_EQ(log.count.load(), 3u + 1023u);
  std::lock_guard<std::mutex> lock(log.mutex);
  for (const std::uint64_t seq : {1, 2, 3}) EXPECT_EQ(log.times[seq], 1) << seq;
}

// One frame under a real stream's origin and instance, numbered 2^64 - 1,
// is held: the sender's next frames are delivered as before (with the old
// code, all of them were stale), and the gaps do not move.
TEST_F(NatsBridgeTest, OneFrameNumberedFarAheadSilencesNoSender) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("f.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  std::vector<std::pair<std::string, std::string>> frames;
  for (std::uint64_t n = 1; n <= 3; ++n)
    frames.emplace_back("f.stop.high", StopFrame(0xA, 9, n, n));
  frames.emplace_back("f.stop.high", StopFrame(0xA, 9, ~0ull, 666));  // forged
  for (std::uint64_t n = 4; n <= 10; ++n)
    frames.emplace_back("f.stop.high", StopFrame(0xA, 9, n, n));
  frames.emplace_back("f.stop.high", StopFrame(0xA, 9, ~0ull, 666));  // forged again
  PublishRaw(server_.Url(), frames);
  ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= frames.size(); }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const auto stats = bridge.GetStatistics();
  EXPECT_EQ(stats.streams.gaps, 0u);
  EXPECT_EQ(stats.streams.jumps_held, 1u);
  EXPECT_EQ(stats.streams.jumps_confirmed, 0u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kStale)], 0u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 1u);  // the forged frame again
  std::lock_guard<std::mutex> lock(log.mutex);
  for (std::uint64_t n = 1; n <= 10; ++n) EXPECT_EQ(log.times[n], 1) << n;
  EXPECT_EQ(log.times[666], 1);  // delivered once: held, not refused
}

TEST_F(NatsBridgeTest, UnsequencedFramesAreRefusedUnlessVersion1IsAccepted) {
  FrameHeader header;
  header.priority = MessagePriority::HIGH;
  header.type_id = kStopType;
  header.origin_id = 0xD;
  std::string payload;
  ASSERT_TRUE(sluice::nats::DefaultCodec<EmergencyStop>::Encode(EmergencyStop{1, 2, 9}, payload));
  // Version 1, as a 0.4 sender wrote it: 40 header bytes.
  std::string version1 = EncodedFrame(header, payload);
  version1.erase(sluice::nats::kFrameHeaderSizeV1,
                 sluice::nats::kFrameHeaderSize - sluice::nats::kFrameHeaderSizeV1);
  version1[4] = 1;
  // Version 2 numbered 0: not a number of any stream.
  std::string numbered_zero(sluice::nats::kFrameHeaderSize, '\0');
  header.payload_size = static_cast<std::uint32_t>(payload.size());
  header.instance_id = 5;
  header.sequence = 0;
  sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(numbered_zero.data()));
  numbered_zero += payload;

  for (const bool accept : {false, true}) {
    Bus bus;
    sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
    options.accept_version_1 = accept;
    Bridge bridge(bus, options);
    ASSERT_TRUE(bridge.Receive<EmergencyStop>("u.stop", kStopType));
    ASSERT_EQ(bridge.Start(), NATS_OK);
    Consumer<Bus> consumer(bus);
    PublishRaw(server_.Url(), {{"u.stop.high", version1}, {"u.stop.high", numbered_zero}});
    ASSERT_TRUE(Eventually([&] { return Settled(bridge.GetStatistics()) >= 2; }));
    (void)bridge.Shutdown(10s);
    consumer.Stop();
    const auto stats = bridge.GetStatistics();
    EXPECT_EQ(stats.delivered[2], accept ? 2u : 0u) << accept;
    EXPECT_EQ(stats.unsequenced, accept ? 2u : 0u) << accept;
    EXPECT_EQ(stats.rejected[Index(FrameError::kUnsequenced)], accept ? 0u : 2u) << accept;
  }
}

// A padded struct with its fields listed, forwarded from a bus whose slots
// were filled with a pattern first: the frame is the header and the fields.
struct Pose {
  std::uint8_t frame;  // 7 padding bytes after it
  double x;
  std::uint16_t flags;  // 6 padding bytes after it
};

}  // namespace
}  // namespace bridge_streams_test

template <>
struct sluice::nats::Fields<bridge_streams_test::Pose> {
  static constexpr auto kMembers =
      std::make_tuple(&bridge_streams_test::Pose::frame, &bridge_streams_test::Pose::x,
                      &bridge_streams_test::Pose::flags);
};

namespace bridge_streams_test {
namespace {

TEST_F(NatsBridgeTest, AForwardedFrameCarriesTheFieldsAndNoPadding) {
  using PoseBus = sluice::MpscBus<std::variant<Pose, SensorReading>, 16>;
  // The bus's storage, slots included, holds the pattern before it is built.
  alignas(PoseBus) static unsigned char storage[sizeof(PoseBus)];
  std::memset(storage, 0xA5, sizeof storage);
  auto* bus = new (storage) PoseBus;
  {
    sluice::nats::Bridge<PoseBus> bridge(*bus, OptionsFor(server_.Url()));
    ASSERT_TRUE(bridge.Forward<Pose>("pose", 9));
    natsConnection* raw = nullptr;
    natsSubscription* sub = nullptr;
    ASSERT_EQ(natsConnection_ConnectTo(&raw, server_.Url().c_str()), NATS_OK);
    ASSERT_EQ(natsConnection_SubscribeSync(&sub, raw, "pose.high"), NATS_OK);
    ASSERT_EQ(natsConnection_FlushTimeout(raw, 10000), NATS_OK);
    ASSERT_EQ(bridge.Start(), NATS_OK);
    Pose pose;  // default-initialised: its padding is whatever the stack held
    std::memset(static_cast<void*>(&pose), 0xA5, sizeof pose);
    pose.frame = 3;
    pose.x = 1.5;  // 0x3FF8000000000000
    pose.flags = 0x0102;
    ASSERT_TRUE(bus->PublishWithPriority(pose, kTestSender, MessagePriority::HIGH));
    EXPECT_EQ(bus->ProcessBatch(), 1u);
    natsMsg* message = nullptr;
    ASSERT_EQ(natsSubscription_NextMsg(&message, sub, 10000), NATS_OK);
    const std::string frame(natsMsg_GetData(message),
                            static_cast<std::size_t>(natsMsg_GetDataLength(message)));
    natsMsg_Destroy(message);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(raw);
    (void)bridge.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);

    ASSERT_EQ(frame.size(), sluice::nats::kFrameHeaderSize + 11);
    const std::string payload = frame.substr(sluice::nats::kFrameHeaderSize);
    EXPECT_EQ(payload, std::string("\x03\x00\x00\x00\x00\x00\x00\xf8\x3f\x02\x01", 11));
    // The payload only: the header's random origin and instance ids, and
    // its timestamp, may hold the pattern's byte by chance.
    EXPECT_EQ(payload.find('\xA5'), std::string::npos) << "a byte of the pattern was sent";
  }
  bus->~PoseBus();
}

// HIGH frames into a small bus with a slow consumer: the bridge waits for
// room, and a HIGH that was admitted after waiting is a drop in no counter,
// the bus's or the bridge's.
TEST_F(NatsBridgeTest, AHighAdmittedAfterWaitingIsNotADropAnywhere) {
  constexpr std::uint64_t kHigh = 1000;
  using SmallBus = sluice::MpscBus<sluice_nats_test::Payload, 64>;
  SmallBus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.admission_wait = {0ms, 0ms, 60s};
  sluice::nats::Bridge<SmallBus> bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("h.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<SmallBus> consumer(bus, /*per_message=*/100us);
  std::vector<std::pair<std::string, std::string>> frames;
  for (std::uint64_t i = 1; i <= kHigh; ++i) {
    frames.emplace_back("h.stop.high", StopFrame(0xE, 1, i, i));
  }
  PublishRaw(server_.Url(), frames);
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= kHigh; }))
      << "dispatched " << log.count.load();
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const auto stats = bridge.GetStatistics();
  const sluice::BusStatisticsSnapshot bus_stats = bus.GetStatistics();
  EXPECT_EQ(stats.delivered[2], kHigh);
  EXPECT_GT(stats.admitted_after_wait[2], 0u) << "the bus never refused: the test proves nothing";
  EXPECT_EQ(stats.bus_dropped[2], 0u);
  EXPECT_EQ(bus_stats.high_priority_dropped, 0u) << "a waiting try was counted as a drop";
  EXPECT_EQ(bus_stats.messages_dropped, 0u);
  std::string text;
  sluice::nats::WritePrometheus(text, "h", bus, bridge);
  EXPECT_NE(text.find("sluice_messages_dropped_total{bus=\"h\",priority=\"high\"} 0\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace bridge_streams_test

// ---- Routes while running, patterns and queue groups -------------------------------

namespace bridge_streams_test {
namespace {

// A received pattern takes frames from every subject it matches, each its
// own stream; a subject received after Start takes frames at once; one
// stopped takes none after StopReceiving returns; a type forwarded after
// Start is sent, and one stopped is not.
TEST_F(NatsBridgeTest, RoutesComeAndGoWhileRunningAndPatternsMatchEveryRobot) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("fleet.*.stop", kStopType));
  StopLog log;
  auto handle =
      bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m, const sluice::MessageHeader& h) {
        if (h.sender_id != kTestSender) log.Add(m.seq);  // not ours on the way out
      });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  PublishRaw(server_.Url(), {{"fleet.r1.stop.high", StopFrame(0x1, 1, 1, 101)},
                             {"fleet.r2.stop.high", StopFrame(0x2, 1, 1, 201)},
                             {"fleet.r2.stop.high", StopFrame(0x2, 1, 2, 202)}});
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 3; }));
  EXPECT_EQ(bridge.GetStatistics().streams.streams_opened, 2u) << "one stream per robot";

  // A robot joins: its own subject, received from now on.
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("robot.r9.stop", kStopType));
  PublishRaw(server_.Url(),
             {{"robot.r9.stop.medium", StopFrame(0x9, 1, 1, 901, MessagePriority::MEDIUM)}});
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 4; }));

  // The pattern is stopped. A frame on it, then one on the robot's subject,
  // from one connection: the server keeps their order, so when the second
  // has arrived the first would have.
  ASSERT_TRUE(bridge.StopReceiving("fleet.*.stop"));
  PublishRaw(server_.Url(),
             {{"fleet.r1.stop.high", StopFrame(0x1, 1, 2, 102)},
              {"robot.r9.stop.medium", StopFrame(0x9, 1, 2, 902, MessagePriority::MEDIUM)}});
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(log.mutex);
    return log.times.count(902) == 1;
  }));

  // Forwarding added and removed while running, seen by a plain subscriber.
  natsConnection* raw = nullptr;
  natsSubscription* sub = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&raw, server_.Url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, raw, "out.*.high"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(raw, 10000), NATS_OK);
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("out.stop", kStopType));
  ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{1, 1, 1}, kTestSender, MessagePriority::HIGH));
  natsMsg* message = nullptr;
  ASSERT_EQ(natsSubscription_NextMsg(&message, sub, 10000), NATS_OK);
  EXPECT_STREQ(natsMsg_GetSubject(message), "out.stop.high");
  natsMsg_Destroy(message);
  ASSERT_TRUE(bridge.StopForwarding<EmergencyStop>());
  ASSERT_TRUE(bridge.Forward<SensorReading>("out.reading", kSensorType));
  ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{1, 1, 2}, kTestSender, MessagePriority::HIGH));
  ASSERT_TRUE(
      bus.PublishWithPriority(SensorReading{1, 1.0f, 3}, kTestSender, MessagePriority::HIGH));
  // The bus dispatches in order: the reading comes, the stop before it did not.
  ASSERT_EQ(natsSubscription_NextMsg(&message, sub, 10000), NATS_OK);
  EXPECT_STREQ(natsMsg_GetSubject(message), "out.reading.high");
  natsMsg_Destroy(message);
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(raw);

  (void)bridge.Shutdown(10s);
  consumer.Stop();
  std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{101, 1}, {201, 1}, {202, 1}, {901, 1}, {902, 1}};
  EXPECT_EQ(log.times, expected) << "102 came after its subject was stopped";
  EXPECT_EQ(bridge.GetStatistics().Rejected(), 0u);
}

// Two bridges in one queue group share a subject's frames: each frame goes
// to one of them, none to both, and neither counts the other's share as
// gaps.
TEST_F(NatsBridgeTest, AQueueGroupSharesFramesWithoutGapsOrDuplicates) {
  constexpr std::uint64_t kFrames = 400;
  sluice::nats::ReceiveOptions group;
  group.queue_group = "telemetry-servers";
  Bus bus_a;
  Bus bus_b;
  Bridge a(bus_a, OptionsFor(server_.Url()));
  Bridge b(bus_b, OptionsFor(server_.Url()));
  ASSERT_TRUE(a.Receive<EmergencyStop>("q.stop", kStopType, group));
  ASSERT_TRUE(b.Receive<EmergencyStop>("q.stop", kStopType, group));
  StopLog log_a;
  StopLog log_b;
  auto ha = bus_a.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log_a.Add(m.seq); });
  auto hb = bus_b.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log_b.Add(m.seq); });
  ASSERT_TRUE(ha.IsValid() && hb.IsValid());
  ASSERT_EQ(a.Start(), NATS_OK);
  ASSERT_EQ(b.Start(), NATS_OK);
  Consumer<Bus> consumer_a(bus_a);
  Consumer<Bus> consumer_b(bus_b);
  std::vector<std::pair<std::string, std::string>> frames;
  for (std::uint64_t i = 1; i <= kFrames; ++i) {
    frames.emplace_back("q.stop.medium", StopFrame(0x5, 1, i, i, MessagePriority::MEDIUM));
  }
  PublishRaw(server_.Url(), frames);
  ASSERT_TRUE(Eventually([&] {
    return log_a.count.load(std::memory_order_relaxed) +
               log_b.count.load(std::memory_order_relaxed) >=
           kFrames;
  }));
  (void)a.Shutdown(10s);
  (void)b.Shutdown(10s);
  consumer_a.Stop();
  consumer_b.Stop();
  std::lock_guard<std::mutex> lock_a(log_a.mutex);
  std::lock_guard<std::mutex> lock_b(log_b.mutex);
  EXPECT_GT(log_a.times.size(), 0u) << "the group did not share";
  EXPECT_GT(log_b.times.size(), 0u) << "the group did not share";
  EXPECT_EQ(log_a.times.size() + log_b.times.size(), kFrames);
  for (const auto& [seq, times] : log_a.times) {
    EXPECT_EQ(times, 1);
    EXPECT_EQ(log_b.times.count(seq), 0u) << seq << " reached both members";
  }
  EXPECT_EQ(a.GetStatistics().streams.gaps, 0u);
  EXPECT_EQ(b.GetStatistics().streams.gaps, 0u);
}

}  // namespace
}  // namespace bridge_streams_test

namespace bridge_streams_test {
namespace {

// A subject forwarded again after StopForwarding goes on numbering where it
// was: the receiver takes the new frames as new, not as duplicates. A frame
// of a type the receiver does not take is refused, and is not a gap.
TEST_F(NatsBridgeTest, ASubjectForwardedAgainIsNotADuplicateAndAnUnknownTypeIsNotAGap) {
  Bus sender_bus;
  Bus receiver_bus;
  Bridge sender(sender_bus, OptionsFor(server_.Url()));
  Bridge receiver(receiver_bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(sender.Forward<EmergencyStop>("again.stop", kStopType));
  ASSERT_TRUE(sender.Forward<SensorReading>("again.stop", kSensorType));  // not received
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("again.stop", kStopType));
  StopLog log;
  auto handle =
      receiver_bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<Bus> sender_consumer(sender_bus);
  Consumer<Bus> receiver_consumer(receiver_bus);
  for (std::uint64_t seq = 1; seq <= 50; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(EmergencyStop{1, 1, seq}, kTestSender,
                                               MessagePriority::HIGH));
    ASSERT_TRUE(sender_bus.PublishWithPriority(SensorReading{1, 1.0f, seq}, kTestSender,
                                               MessagePriority::HIGH));
  }
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 50; }));
  ASSERT_TRUE(sender.StopForwarding<EmergencyStop>());
  ASSERT_TRUE(sender.Forward<EmergencyStop>("again.stop", kStopType));
  for (std::uint64_t seq = 51; seq <= 100; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(EmergencyStop{1, 1, seq}, kTestSender,
                                               MessagePriority::HIGH));
  }
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 100; }))
      << "received " << log.count.load();
  (void)sender.Shutdown(10s);
  (void)receiver.Shutdown(10s);
  sender_consumer.Stop();
  receiver_consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 0u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kUnknownType)], 50u);
  EXPECT_EQ(stats.streams.gaps, 0u) << "refused readings were counted as missing";
}

// A bus callback that changes routes while another thread stops a route or
// shuts the bridge down: neither waits for the other. A hang fails the test
// (and ends the process: a deadlock cannot be unwound).
TEST_F(NatsBridgeTest, RouteCallsFromABusCallbackDoNotDeadlockWithStopOrShutdown) {
  for (const bool shutdown : {false, true}) {
    Bus bus;
    Bridge bridge(bus, OptionsFor(server_.Url()));
    ASSERT_TRUE(bridge.Forward<EmergencyStop>("dl.stop", kStopType));
    ASSERT_EQ(bridge.Start(), NATS_OK);
    std::atomic<bool> in_callback{false};
    std::atomic<int> results{0};
    auto handle = bus.Subscribe<SensorReading>([&](const SensorReading&) {
      in_callback.store(true);
      std::this_thread::sleep_for(200ms);  // the other thread calls now
      (void)bridge.Receive<SensorReading>("dl.reading", kSensorType);
      (void)bridge.StopReceiving("dl.reading");
      results.fetch_add(1);
    });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_TRUE(bus.Publish(SensorReading{1, 1.0f, 1}));
    std::thread consumer([&] { (void)bus.ProcessBatch(); });
    ASSERT_TRUE(Eventually([&] { return in_callback.load(); }));
    std::atomic<bool> returned{false};
    std::thread stopper([&] {
      if (shutdown) {
        (void)bridge.Shutdown(5s);
      } else {
        (void)bridge.StopForwarding<EmergencyStop>();
      }
      returned.store(true);
    });
    if (!Eventually([&] { return returned.load() && results.load() == 1; }, 30s)) {
      ADD_FAILURE() << (shutdown ? "Shutdown" : "StopForwarding")
                    << " and a route call inside a bus callback deadlocked";
      std::fflush(stdout);
      std::abort();
    }
    stopper.join();
    consumer.join();
    (void)bus.Unsubscribe(handle);
  }
}

}  // namespace
}  // namespace bridge_streams_test
