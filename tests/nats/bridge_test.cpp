// The bridge against a real nats-server on a free loopback port, with a
// second process (sluice_nats_peer) where a test needs one. No figure of
// time is asserted: deadlines only guard against hangs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sluice/nats/bridge.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bridge_test_support.hpp"
#include "nats_server_process.hpp"
#include "test_messages.hpp"

namespace bridge_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::kNoteType;
using sluice_nats_test::kSensorType;
using sluice_nats_test::kStopType;
using sluice_nats_test::Note;
using sluice_nats_test::NoteCodec;
using sluice_nats_test::Payload;
using sluice_nats_test::PriorityOf;
using sluice_nats_test::SensorReading;

using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::EncodedFrame;
using sluice_nats_test::Eventually;
using sluice_nats_test::Field;
using sluice_nats_test::kHangGuard;
using sluice_nats_test::kPeerSender;
using sluice_nats_test::kRemote;
using sluice_nats_test::kTestSender;
using sluice_nats_test::NatsBridgeTest;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::PublishRaw;

// Two processes: every message type, both directions, every priority.
TEST_F(NatsBridgeTest, TwoProcessesExchangeEveryTypeBothWaysKeepingPriority) {
  constexpr std::uint64_t kCount = 30;  // of each type
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Forward<SensorReading>("t.a2b", kSensorType));
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("t.a2b", kStopType));
  ASSERT_TRUE((bridge.Forward<Note, NoteCodec>("t.a2b", kNoteType)));
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.b2a", kSensorType));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("t.b2a", kStopType));
  ASSERT_TRUE((bridge.Receive<Note, NoteCodec>("t.b2a", kNoteType)));

  // Written on the consumer thread, read after it stops.
  std::map<std::string, std::map<std::uint64_t, MessagePriority>> received;
  std::vector<std::string> problems;
  std::atomic<std::uint64_t> count{0};
  const auto record = [&](const std::string& type, std::uint64_t seq,
                          const sluice::MessageHeader& header) {
    // What this test publishes passes through its bus on its way out.
    if (header.sender_id == kTestSender) return;
    if (header.sender_id != (kPeerSender | kRemote)) problems.push_back(type + ": sender");
    if (!received[type].emplace(seq, header.priority).second) problems.push_back(type + ": twice");
    // Relaxed: a progress count; the maps are read after join().
    count.fetch_add(1, std::memory_order_relaxed);
  };
  auto s = bus.Subscribe<SensorReading>(
      [&](const SensorReading& m, const sluice::MessageHeader& h) { record("sensor", m.seq, h); });
  auto e = bus.Subscribe<EmergencyStop>(
      [&](const EmergencyStop& m, const sluice::MessageHeader& h) { record("stop", m.seq, h); });
  auto n = bus.Subscribe<Note>([&](const Note& m, const sluice::MessageHeader& h) {
    if (m.text != "note " + std::to_string(m.seq)) problems.push_back("note: text");
    record("note", m.seq, h);
  });
  ASSERT_TRUE(s.IsValid() && e.IsValid() && n.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);

  sluice_nats_test::ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"exchange", server_.Url(), std::to_string(kCount)}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("ready", &line, kHangGuard)) << "the peer did not start";

  Consumer<Bus> consumer(bus);
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    const MessagePriority priority = PriorityOf(seq);
    ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0.25f, seq}, kTestSender, priority));
    ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{2, 3, seq}, kTestSender, priority));
    ASSERT_TRUE(
        bus.PublishWithPriority(Note{seq, "note " + std::to_string(seq)}, kTestSender, priority));
  }
  ASSERT_TRUE(Eventually([&] { return count.load(std::memory_order_relaxed) >= 3 * kCount; }))
      << "received " << count.load() << " of " << 3 * kCount;
  ASSERT_TRUE(peer.WaitForLine("received=", &line, kHangGuard));
  EXPECT_EQ(Field(line, "wrong"), std::vector<std::uint64_t>{0}) << line;
  EXPECT_EQ(Field(line, "received"), std::vector<std::uint64_t>{3 * kCount}) << line;
  EXPECT_EQ(peer.Wait(kHangGuard), 0);

  const sluice::nats::ShutdownResult result = bridge.Shutdown(10s);
  consumer.Stop();
  EXPECT_TRUE(result.bus_drained);
  EXPECT_TRUE(result.closed);
  EXPECT_TRUE(problems.empty()) << problems.front();
  for (const char* type : {"sensor", "stop", "note"}) {
    ASSERT_EQ(received[type].size(), kCount) << type;
    for (const auto& [seq, priority] : received[type]) {
      EXPECT_EQ(priority, PriorityOf(seq)) << type << " " << seq;
    }
  }
  const sluice::nats::BridgeStatisticsSnapshot stats = bridge.GetStatistics();
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    EXPECT_EQ(stats.frames_sent[p], 3 * kCount / 3) << p;
    EXPECT_EQ(stats.delivered[p], 3 * kCount / 3) << p;
  }
  // What came in was offered to the outbound subscription and not sent.
  EXPECT_EQ(stats.loop_suppressed, 3 * kCount);
  EXPECT_EQ(stats.Rejected(), 0u);
}

// The server is killed and restarted; neither process restarts.
TEST_F(NatsBridgeTest, RecoversWhenTheServerRestarts) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.stream", kSensorType));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("t.pong", kStopType));
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("t.ping", kStopType));
  std::mutex mutex;
  std::vector<std::uint64_t> seqs;  // guarded by mutex
  std::atomic<std::uint64_t> max_seq{0};
  std::atomic<std::uint64_t> pong{0};
  auto s = bus.Subscribe<SensorReading>([&](const SensorReading& m) {
    std::lock_guard<std::mutex> lock(mutex);
    seqs.push_back(m.seq);
    // Relaxed: progress values polled by the test thread.
    if (m.seq > max_seq.load(std::memory_order_relaxed)) {
      max_seq.store(m.seq, std::memory_order_relaxed);
    }
  });
  auto p =
      bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m, const sluice::MessageHeader& h) {
        // The pings this test sends pass through its bus too.
        if (h.sender_id != kTestSender) pong.store(m.seq, std::memory_order_relaxed);
      });
  ASSERT_TRUE(s.IsValid() && p.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  sluice_nats_test::ChildProcess peer;
  ASSERT_TRUE(StartPeer(peer, {"stream", server_.Url()}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("ready", &line, kHangGuard));
  ASSERT_TRUE(Eventually([&] { return max_seq.load(std::memory_order_relaxed) >= 200; }));

  server_.Kill();
  ASSERT_TRUE(Eventually([&] { return !bridge.GetStatistics().connected; }));
  std::this_thread::sleep_for(300ms);  // an outage while the peer keeps publishing
  ASSERT_TRUE(server_.Restart());
  ASSERT_TRUE(Eventually([&] { return bridge.GetStatistics().reconnects >= 1; }));

  // Published after the restart, both ways: a ping the peer answers. Sent
  // again until answered (the peer may not have resubscribed yet).
  std::uint64_t marker = 1000;
  const auto answered = [&] { return pong.load(std::memory_order_relaxed) == marker; };
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  bool recovered = false;
  while (!recovered && std::chrono::steady_clock::now() < deadline) {
    ++marker;
    ASSERT_TRUE(
        bus.PublishWithPriority(EmergencyStop{5, 0, marker}, kTestSender, MessagePriority::HIGH));
    recovered = Eventually(answered, 1s);
  }
  ASSERT_TRUE(recovered) << "no answer to a ping sent after the restart";
  const std::uint64_t after = max_seq.load(std::memory_order_relaxed);
  ASSERT_TRUE(Eventually([&] { return max_seq.load(std::memory_order_relaxed) >= after + 100; }))
      << "the stream did not continue after the restart";

  peer.Signal(SIGTERM);
  ASSERT_TRUE(peer.WaitForLine("published=", &line, kHangGuard));
  const std::uint64_t published = Field(line, "published").at(0);
  ASSERT_TRUE(peer.WaitForLine("sent=", &line, kHangGuard));
  const std::string peer_statistics = line;
  EXPECT_EQ(peer.Wait(kHangGuard), 0);
  // Every frame the peer sent before it stopped is in flight or here.
  const std::uint64_t peer_sent = Field(peer_statistics, "sent").at(1);
  Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mutex);
        return seqs.size() >= peer_sent;
      },
      5s);
  (void)bridge.Shutdown(10s);
  consumer.Stop();

  std::set<std::uint64_t> unique(seqs.begin(), seqs.end());
  EXPECT_EQ(unique.size(), seqs.size()) << "core NATS delivers at most once";
  const std::uint64_t lost = published - unique.size();
  std::uint64_t out_of_order = 0;
  for (std::size_t i = 1; i < seqs.size(); ++i) out_of_order += seqs[i] < seqs[i - 1] ? 1 : 0;
  std::printf(
      "[ restart  ] peer published %llu, received %zu, lost %llu across the restart "
      "(peer: %s); out of order %llu\n",
      static_cast<unsigned long long>(published), unique.size(),
      static_cast<unsigned long long>(lost), peer_statistics.c_str(),
      static_cast<unsigned long long>(out_of_order));
  const sluice::nats::BridgeStatisticsSnapshot stats = bridge.GetStatistics();
  EXPECT_GE(stats.disconnects, 1u);
  EXPECT_GE(stats.reconnects, 1u);
  // Loss you can see: every reading missing between the first and the last
  // that arrived is a gap in the one stream (the peer's MEDIUM subject)
  // the bridge counted, and nothing arrived twice.
  ASSERT_FALSE(unique.empty());
  const std::uint64_t span = *unique.rbegin() - *unique.begin() + 1;
  EXPECT_EQ(stats.streams.gaps, span - unique.size());
  EXPECT_EQ(stats.streams.duplicates, 0u);
  EXPECT_EQ(stats.streams.streams_opened, 2u);  // t.stream.medium and t.pong.high
  std::printf("[ restart  ] the receiving bridge counted %llu gaps, %llu reordered\n",
              static_cast<unsigned long long>(stats.streams.gaps),
              static_cast<unsigned long long>(stats.streams.reordered));
}

// A LOW flood and HIGH stops into a small bus whose consumer is slow.
TEST_F(NatsBridgeTest, EveryHighArrivesThroughALowFloodAndLowDropsAreCounted) {
  constexpr std::uint64_t kLow = 20000;
  constexpr std::uint64_t kHighEvery = 500;
  using SmallBus = sluice::MpscBus<Payload, 64>;
  SmallBus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  // LOW waits a little for room, so the client's queue for LOW fills too:
  // its drops are counted as well.
  options.admission_wait = {2ms, 0ms, 30s};
  options.pending_messages_limit = 256;
  sluice::nats::Bridge<SmallBus> bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.flood", kSensorType));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("t.flood", kStopType));
  std::atomic<std::uint64_t> low{0};
  std::atomic<std::uint64_t> high{0};
  // Relaxed: counts polled by the test thread.
  auto l = bus.Subscribe<SensorReading>(
      [&](const SensorReading&) { low.fetch_add(1, std::memory_order_relaxed); });
  auto h = bus.Subscribe<EmergencyStop>(
      [&](const EmergencyStop&) { high.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(l.IsValid() && h.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<SmallBus> consumer(bus, 200us);

  sluice_nats_test::ChildProcess peer;
  ASSERT_TRUE(
      StartPeer(peer, {"flood", server_.Url(), std::to_string(kLow), std::to_string(kHighEvery)}));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("sent=", &line, kHangGuard));
  EXPECT_EQ(peer.Wait(kHangGuard), 0);
  const std::vector<std::uint64_t> sent = Field(line, "sent");
  ASSERT_EQ(sent.size(), 3u);
  ASSERT_EQ(sent[0], kLow) << line;
  ASSERT_EQ(sent[2], kLow / kHighEvery) << line;

  // Every LOW frame sent is delivered or counted as dropped.
  const auto accounted = [&] {
    const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
    return s.delivered[0] + s.bus_dropped[0] + s.slow_consumer_dropped[0] == sent[0] &&
           s.delivered[2] == sent[2];
  };
  EXPECT_TRUE(Eventually(accounted)) << "frames neither delivered nor counted";
  ASSERT_TRUE(Eventually([&] { return high.load(std::memory_order_relaxed) == sent[2]; }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();

  const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
  EXPECT_EQ(high.load(), sent[2]) << "a HIGH message was lost";
  EXPECT_EQ(s.Dropped(MessagePriority::HIGH), 0u);
  EXPECT_EQ(low.load(), s.delivered[0]);
  EXPECT_GT(s.Dropped(MessagePriority::LOW), 0u) << "the flood was expected to overflow";
  EXPECT_EQ(bus.GetStatistics().high_priority_dropped, 0u);
  std::printf(
      "[ flood    ] LOW sent %llu: delivered %llu, refused by the bus %llu, dropped by "
      "the client %llu; HIGH %llu of %llu\n",
      static_cast<unsigned long long>(sent[0]), static_cast<unsigned long long>(s.delivered[0]),
      static_cast<unsigned long long>(s.bus_dropped[0]),
      static_cast<unsigned long long>(s.slow_consumer_dropped[0]),
      static_cast<unsigned long long>(high.load()), static_cast<unsigned long long>(sent[2]));
}

// A bridge never gets its own messages back (no-echo), and a frame with its
// origin id that reaches it another way is not published; what came from
// NATS is not forwarded again.
TEST_F(NatsBridgeTest, LoopsAreCutByNoEchoOriginAndSenderFlag) {
  constexpr std::uint64_t kCount = 10;
  Bus bus_a;
  Bridge a(bus_a, OptionsFor(server_.Url()));
  ASSERT_TRUE(a.Forward<SensorReading>("t.loop", kSensorType));
  ASSERT_TRUE(a.Receive<SensorReading>("t.loop", kSensorType));
  Bus bus_b;
  Bridge b(bus_b, OptionsFor(server_.Url()));
  ASSERT_TRUE(b.Receive<SensorReading>("t.loop", kSensorType));
  ASSERT_TRUE(b.Forward<SensorReading>("t.elsewhere", kSensorType));
  Bus bus_c;
  sluice::nats::BridgeOptions same_origin = OptionsFor(server_.Url());
  same_origin.origin_id = a.OriginId();
  Bridge c(bus_c, same_origin);
  ASSERT_TRUE(c.Receive<SensorReading>("t.loop", kSensorType));
  ASSERT_EQ(a.Start(), NATS_OK);
  ASSERT_EQ(b.Start(), NATS_OK);
  ASSERT_EQ(c.Start(), NATS_OK);
  Consumer<Bus> consumer_a(bus_a);
  Consumer<Bus> consumer_b(bus_b);
  Consumer<Bus> consumer_c(bus_c);
  for (std::uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(bus_a.Publish(SensorReading{1, 1.0f, i}, kTestSender));
  }
  ASSERT_TRUE(Eventually([&] {
    return b.GetStatistics().delivered[1] == kCount && c.GetStatistics().frames_received == kCount;
  }));
  (void)b.Shutdown(10s);
  (void)c.Shutdown(10s);
  (void)a.Shutdown(10s);
  const auto sa = a.GetStatistics();
  const auto sb = b.GetStatistics();
  const auto sc = c.GetStatistics();
  EXPECT_EQ(sa.frames_sent[1], kCount);
  EXPECT_EQ(sa.frames_received, 0u) << "the server echoed a's own messages";
  EXPECT_EQ(sc.echo_suppressed, kCount);
  EXPECT_EQ(sc.delivered[1], 0u);
  EXPECT_EQ(sb.loop_suppressed, kCount);
  EXPECT_EQ(sb.frames_sent[1], 0u);
}

// Bad frames from a raw client: refused, counted by reason, reported.
TEST_F(NatsBridgeTest, RejectsCountsAndReportsBadFrames) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  std::mutex mutex;
  std::multiset<FrameError> reported;  // guarded by mutex
  options.on_reject = [&](FrameError error, std::string_view subject) {
    std::lock_guard<std::mutex> lock(mutex);
    if (subject == "t.bad.medium") reported.insert(error);
  };
  Bridge bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.bad", kSensorType));
  ASSERT_TRUE((bridge.Receive<Note, NoteCodec>("t.bad", kNoteType)));
  std::atomic<int> delivered{0};
  auto s = bus.Subscribe<SensorReading>(
      [&](const SensorReading&) { delivered.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(s.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  const auto& frame = EncodedFrame;
  sluice::nats::FrameHeader sensor;
  sensor.type_id = kSensorType;
  const std::string reading(sizeof(SensorReading), '\0');
  std::vector<std::pair<std::string, FrameError>> inputs;
  inputs.emplace_back("abc", FrameError::kTooShort);
  std::string bytes = frame(sensor, reading);
  bytes[1] = 'X';
  inputs.emplace_back(bytes, FrameError::kBadMagic);
  bytes = frame(sensor, reading);
  bytes[4] = 9;
  inputs.emplace_back(bytes, FrameError::kUnknownVersion);
  bytes = frame(sensor, reading);
  bytes[5] = 3;
  inputs.emplace_back(bytes, FrameError::kBadPriority);
  bytes = frame(sensor, reading);
  bytes[14] = 0x7F;  // payload length of megabytes
  inputs.emplace_back(bytes, FrameError::kOversized);
  bytes = frame(sensor, reading);
  bytes.pop_back();
  inputs.emplace_back(bytes, FrameError::kLengthMismatch);
  sluice::nats::FrameHeader unknown = sensor;
  unknown.type_id = 99;
  inputs.emplace_back(frame(unknown, reading), FrameError::kUnknownType);
  inputs.emplace_back(frame(sensor, reading + "x"), FrameError::kBadPayload);
  sluice::nats::FrameHeader note = sensor;
  note.type_id = kNoteType;
  inputs.emplace_back(frame(note, "short"), FrameError::kBadPayload);
  inputs.emplace_back(frame(sensor, reading), FrameError::kNone);

  natsConnection* raw = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&raw, server_.Url().c_str()), NATS_OK);
  for (const auto& [data, expected] : inputs) {
    ASSERT_EQ(
        natsConnection_Publish(raw, "t.bad.medium", data.data(), static_cast<int>(data.size())),
        NATS_OK);
  }
  ASSERT_EQ(natsConnection_FlushTimeout(raw, 10000), NATS_OK);
  natsConnection_Destroy(raw);

  ASSERT_TRUE(Eventually([&] { return bridge.GetStatistics().frames_received == inputs.size(); }));
  ASSERT_TRUE(Eventually([&] { return delivered.load(std::memory_order_relaxed) == 1; }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const sluice::nats::BridgeStatisticsSnapshot stats = bridge.GetStatistics();
  std::multiset<FrameError> expected;
  for (const auto& input : inputs) {
    if (input.second != FrameError::kNone) expected.insert(input.second);
  }
  for (std::size_t e = 0; e < sluice::nats::kFrameErrorCount; ++e) {
    const auto error = static_cast<FrameError>(e);
    EXPECT_EQ(stats.rejected[e], expected.count(error)) << sluice::nats::ToString(error);
  }
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(reported, expected);
  EXPECT_EQ(stats.delivered[1], 1u);
}

// Shutdown sends what the bus still held, then closes.
TEST_F(NatsBridgeTest, ShutdownSendsWhatTheBusHeld) {
  constexpr std::uint64_t kCount = 50;
  Bus receiving_bus;
  Bridge receiver(receiving_bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(receiver.Receive<SensorReading>("t.held", kSensorType));
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(receiving_bus);

  Bus bus;
  Bridge sender(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(sender.Forward<SensorReading>("t.held", kSensorType));
  ASSERT_EQ(sender.Start(), NATS_OK);
  for (std::uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0, i}, kTestSender, PriorityOf(i)));
  }
  // Nothing dispatched yet: Shutdown dispatches on this thread.
  const sluice::nats::ShutdownResult result =
      sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_TRUE(result.bus_drained);
  EXPECT_EQ(result.flush, NATS_OK);
  EXPECT_TRUE(result.closed);
  EXPECT_FALSE(bus.Publish(SensorReading{1, 0, 0}, kTestSender)) << "the bus stays closed";
  ASSERT_TRUE(Eventually([&] {
    const auto s = receiver.GetStatistics();
    return s.delivered[0] + s.delivered[1] + s.delivered[2] == kCount;
  }));
  (void)receiver.Shutdown(10s);
}

// send_asap: each frame leaves as it is published: once the dispatch that
// sent it returns, the client holds none of it (without the option it
// keeps it for its flusher thread, a millisecond or so later). A ping-pong,
// one message in flight at a time: every answer comes back, in order. How
// much sooner is the benchmark's (sluice_ipc_sizes_bench): no test asserts
// a time.
TEST_F(NatsBridgeTest, SendAsapCarriesAPingPongOneMessageAtATime) {
  constexpr std::uint64_t kCount = 40;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.send_asap = true;
  Bus echo_in;
  Bus echo_out;
  Bridge echo_receiver(echo_in, options);
  Bridge echo_sender(echo_out, options);
  ASSERT_TRUE(echo_receiver.Receive<SensorReading>("t.asap.ping", kSensorType));
  ASSERT_TRUE(echo_sender.Forward<SensorReading>("t.asap.pong", kSensorType));
  ASSERT_EQ(echo_receiver.Start(), NATS_OK);
  ASSERT_EQ(echo_sender.Start(), NATS_OK);
  auto echo = echo_in.Subscribe<SensorReading>([&](const SensorReading& ping) {
    EXPECT_TRUE(echo_out.PublishWithPriority(ping, kTestSender, MessagePriority::HIGH));
    EXPECT_EQ(echo_out.ProcessBatch(), 1u);
    EXPECT_EQ(echo_sender.BufferedBytes(), 0) << "the answer waits in the client";
  });
  ASSERT_TRUE(echo.IsValid());

  Bus ping_out;
  Bus pong_in;
  Bridge pinger(ping_out, options);
  Bridge pong_receiver(pong_in, options);
  ASSERT_TRUE(pinger.Forward<SensorReading>("t.asap.ping", kSensorType));
  ASSERT_TRUE(pong_receiver.Receive<SensorReading>("t.asap.pong", kSensorType));
  ASSERT_EQ(pong_receiver.Start(), NATS_OK);
  ASSERT_EQ(pinger.Start(), NATS_OK);
  std::vector<std::uint64_t> answers;
  auto pong = pong_in.Subscribe<SensorReading>(
      [&](const SensorReading& answer) { answers.push_back(answer.seq); });
  ASSERT_TRUE(pong.IsValid());

  EXPECT_EQ(pinger.BufferedBytes(), 0);
  for (std::uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(
        ping_out.PublishWithPriority(SensorReading{1, 0, i}, kTestSender, MessagePriority::HIGH));
    ASSERT_EQ(ping_out.ProcessBatch(), 1u);
    EXPECT_EQ(pinger.BufferedBytes(), 0) << "ping " << i << " waits in the client";
    ASSERT_TRUE(Eventually([&] {
      (void)echo_in.ProcessBatch();
      (void)pong_in.ProcessBatch();
      return answers.size() == i + 1;
    })) << "no answer to ping "
        << i;
    EXPECT_EQ(answers.back(), i);
  }
  for (Bridge* bridge : {&pinger, &pong_receiver, &echo_receiver, &echo_sender}) {
    (void)bridge->Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  EXPECT_EQ(pinger.BufferedBytes(), -1) << "after Shutdown";
}

// Publishes while the server is down go to the client's reconnect buffer;
// what does not fit is counted by priority.
TEST_F(NatsBridgeTest, ReconnectBufferOverflowsAreCountedByPriority) {
  constexpr std::uint64_t kCount = 60;
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_buffer_bytes = 1024;  // room for about 16 frames
  Bridge bridge(bus, options);
  ASSERT_TRUE(bridge.Forward<SensorReading>("t.buffered", kSensorType));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  server_.Kill();
  ASSERT_TRUE(Eventually([&] { return !bridge.GetStatistics().connected; }));
  for (std::uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0, i}, kTestSender, PriorityOf(i)));
  }
  while (bus.ProcessBatch() > 0) {
  }
  const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
  std::uint64_t sent = 0;
  std::uint64_t dropped = 0;
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    sent += s.frames_sent[p];
    dropped += s.send_dropped[p];
    EXPECT_EQ(s.frames_sent[p] + s.send_dropped[p], kCount / 3) << p;
  }
  EXPECT_GT(sent, 0u) << "the reconnect buffer took nothing";
  EXPECT_GT(dropped, 0u) << "the reconnect buffer never overflowed";
  EXPECT_EQ(s.reconnect_buffer_overflows, dropped);
  ASSERT_TRUE(server_.Restart());
  (void)bridge.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
}

TEST_F(NatsBridgeTest, PrometheusTextHasTheBusAndTheBridge) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Forward<SensorReading>("t.metrics", kSensorType));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0, 0}, kTestSender, MessagePriority::HIGH));
  while (bus.ProcessBatch() > 0) {
  }
  std::string text;
  sluice::nats::WritePrometheus(text, "plant", bus, bridge);
  EXPECT_NE(text.find("sluice_messages_published_total{bus=\"plant\",priority=\"high\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_nats_frames_sent_total{bus=\"plant\",priority=\"high\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_nats_messages_dropped_total{bus=\"plant\",priority=\"low\","
                      "reason=\"slow_consumer\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_nats_frames_rejected_total{bus=\"plant\",reason=\"bad_magic\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_nats_connected{bus=\"plant\"} 1\n"), std::string::npos);
  (void)bridge.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
}

// ---- Configuration, without a server ---------------------------------------

// Another codec for SensorReading (the same bytes): a distinct codec type.
struct OtherSensorCodec : sluice::nats::WireCodec<SensorReading> {};

TEST(NatsBridgeConfigTest, RoutesRefuseSubjectsNatsCannotCarryAndWildcards) {
  const std::vector<std::string> refused = {
      "",  "has space", "tab\there", "new\nline", "x..y", ".x",  "x.",
      ".", "tail.>",    "wild.*",    "a.*.b",     ">",    "a*b", "del\x7f"};
  // "*" tokens are patterns a Receive accepts; nothing else in the list.
  const std::vector<std::string> patterns = {"wild.*", "a.*.b"};
  for (const std::string& subject : refused) {
    EXPECT_FALSE(sluice::nats::IsLiteralSubject(subject)) << subject;
    Bus bus;
    Bridge bridge(bus);
    EXPECT_FALSE(bridge.Forward<SensorReading>(subject, kSensorType)) << subject;
    const bool pattern = std::find(patterns.begin(), patterns.end(), subject) != patterns.end();
    EXPECT_EQ(sluice::nats::IsReceiveSubject(subject), pattern) << subject;
    EXPECT_EQ(bridge.Receive<SensorReading>(subject, kSensorType), pattern) << subject;
  }
  for (const std::string subject : {"a", "plant.sensor", "x-1_y.Z9.$sys"}) {
    EXPECT_TRUE(sluice::nats::IsLiteralSubject(subject)) << subject;
    Bus bus;
    Bridge bridge(bus);
    EXPECT_TRUE(bridge.Forward<SensorReading>(subject, kSensorType)) << subject;
    EXPECT_TRUE(bridge.Receive<SensorReading>(subject, kSensorType)) << subject;
  }
}

// Two received subjects that one frame could match are refused: the frame
// would reach two subscriptions.
TEST(NatsBridgeConfigTest, ReceiveRefusesOverlappingSubjectsAndAnotherQueueGroup) {
  using sluice::nats::SubjectsOverlap;
  EXPECT_TRUE(SubjectsOverlap("fleet.*.stop", "fleet.r7.stop"));
  EXPECT_TRUE(SubjectsOverlap("fleet.*.stop", "*.r7.*"));
  EXPECT_TRUE(SubjectsOverlap("a", "a"));
  EXPECT_FALSE(SubjectsOverlap("fleet.*.stop", "fleet.r7.go"));
  EXPECT_FALSE(SubjectsOverlap("fleet.*", "fleet.r7.stop"));
  EXPECT_FALSE(SubjectsOverlap("a.b", "a"));
  Bus bus;
  Bridge bridge(bus);
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("fleet.*.stop", kStopType));
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("fleet.r7.stop", kStopType));
  EXPECT_FALSE(bridge.Receive<SensorReading>("*.r7.stop", kSensorType));
  EXPECT_TRUE(bridge.Receive<SensorReading>("fleet.*.reading", kSensorType));
  EXPECT_TRUE(bridge.Receive<SensorReading>("fleet.*.stop", kSensorType));  // same subject
  sluice::nats::ReceiveOptions shared;
  shared.queue_group = "controllers";
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("fleet.*.stop", kStopType, shared));
  EXPECT_TRUE(bridge.Receive<EmergencyStop>("plant.stop", kStopType, shared));
  // A JetStream route needs both its stream and its durable, and no group.
  sluice::nats::ReceiveOptions durable_only;
  durable_only.durable = "d";
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("js.a", kStopType, durable_only));
  sluice::nats::ReceiveOptions stream_only;
  stream_only.stream = "S";
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("js.b", kStopType, stream_only));
  sluice::nats::ReceiveOptions stream_in_group = shared;
  stream_in_group.stream = "S";
  stream_in_group.durable = "d";
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("js.c", kStopType, stream_in_group));
  EXPECT_TRUE(bridge.StopReceiving("fleet.*.stop"));
  EXPECT_FALSE(bridge.StopReceiving("fleet.*.stop"));
  EXPECT_TRUE(bridge.Receive<EmergencyStop>("fleet.r7.stop", kStopType));  // no overlap now
  EXPECT_FALSE(bridge.StopForwarding<EmergencyStop>());
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("out.stop", kStopType));
  EXPECT_TRUE(bridge.StopForwarding<EmergencyStop>());
  EXPECT_TRUE(bridge.Forward<EmergencyStop>("out.stop", kStopType));  // again, after
}

TEST(NatsBridgeConfigTest, ReceiveRefusesASecondCodecOrTypeForATypeId) {
  Bus bus;
  Bridge bridge(bus);
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.a", kSensorType));
  EXPECT_FALSE((bridge.Receive<SensorReading, OtherSensorCodec>("t.b", kSensorType)));
  EXPECT_FALSE(bridge.Receive<EmergencyStop>("t.b", kSensorType));
  EXPECT_TRUE(bridge.Receive<SensorReading>("t.b", kSensorType));  // same codec: another subject
  EXPECT_TRUE((bridge.Receive<SensorReading, OtherSensorCodec>("t.b", 7)));  // another id
}

// ---- Against a server ---------------------------------------------------------

// The connection closes by itself (its reconnection attempts are spent): the
// slow-consumer count, a Prometheus counter, does not go back down.
TEST_F(NatsBridgeTest, SlowConsumerDropsAreKeptWhenTheConnectionClosesByItself) {
  constexpr std::uint64_t kCount = 300;
  using SmallBus = sluice::MpscBus<Payload, 64>;
  SmallBus bus;  // no consumer: the bridge's LOW thread waits for room
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.pending_messages_limit = 8;
  options.max_reconnect = 1;
  options.reconnect_wait = 20ms;
  options.admission_wait = {20ms, 20ms, 20ms};
  sluice::nats::Bridge<SmallBus> bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.slow", kSensorType));
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("t.probe", kStopType));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  sluice::nats::FrameHeader header;
  header.priority = MessagePriority::LOW;
  header.type_id = kSensorType;
  header.origin_id = 42;
  // Each frame numbered anew (EncodedFrame): a repeated one is a duplicate.
  std::vector<std::pair<std::string, std::string>> frames;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    frames.emplace_back("t.slow.low",
                        EncodedFrame(header, std::string(sizeof(SensorReading), '\0')));
  }
  PublishRaw(server_.Url(), frames);
  ASSERT_TRUE(Eventually([&] {
    const auto s = bridge.GetStatistics();
    return s.delivered[0] + s.bus_dropped[0] + s.slow_consumer_dropped[0] == kCount;
  }));
  const std::uint64_t before = bridge.GetStatistics().slow_consumer_dropped[0];
  ASSERT_GT(before, 0u) << "the client was expected to drop";

  server_.Kill();
  // Once closed, the client refuses a publish (send_dropped) instead of
  // buffering it for a reconnection (frames_sent).
  ASSERT_TRUE(Eventually([&] {
    while (bus.ProcessBatch() > 0) {
    }
    (void)bus.PublishWithPriority(EmergencyStop{1, 0, 0}, kTestSender, MessagePriority::HIGH);
    while (bus.ProcessBatch() > 0) {
    }
    return bridge.GetStatistics().send_dropped[2] > 0;
  })) << "the connection did not close";
  EXPECT_GE(bridge.GetStatistics().slow_consumer_dropped[0], before);
  std::string text;
  sluice::nats::WritePrometheus(text, "x", bus, bridge);
  EXPECT_NE(text.find("sluice_nats_messages_dropped_total{bus=\"x\",priority=\"low\",reason=\"slow_"
                      "consumer\"} " +
                      std::to_string(before) + "\n"),
            std::string::npos)
      << text;
  (void)bridge.Shutdown(1s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_GE(bridge.GetStatistics().slow_consumer_dropped[0], before);
}

// The destructor waits for a user callback running on a client thread, how
// ever long it runs, and frees the bridge only after it has returned.
TEST_F(NatsBridgeTest, TheDestructorWaitsForACallbackStillRunning) {
  Bus bus;
  std::atomic<bool> in_callback{false};
  std::atomic<bool> release{false};
  std::atomic<bool> destroyed{false};
  std::atomic<bool> destroyed_before_return{false};
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  // seq_cst throughout: a handful of flags between three threads.
  options.on_reject = [&](FrameError, std::string_view) {
    in_callback.store(true);
    while (!release.load()) std::this_thread::sleep_for(1ms);
    destroyed_before_return.store(destroyed.load());
  };
  auto bridge = std::make_unique<Bridge>(bus, options);
  ASSERT_TRUE(bridge->Receive<SensorReading>("t.wait", kSensorType));
  ASSERT_EQ(bridge->Start(), NATS_OK);
  PublishRaw(server_.Url(), {{"t.wait.low", "abc"}});
  ASSERT_TRUE(Eventually([&] { return in_callback.load(); }));
  std::thread destroyer([&] {
    bridge.reset();
    destroyed.store(true);
  });
  // Room for a destructor that does not wait to return (not a bound: one
  // that waits passes however long this takes).
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(destroyed.load()) << "the destructor returned while on_reject ran";
  release.store(true);
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_FALSE(destroyed_before_return.load());
}

#if SLUICE_HAS_EXCEPTIONS
// Encode: reason 1 refuses, reason 2 throws. Decode: reason 3 throws.
struct ThrowingStopCodec {
  static bool Encode(const EmergencyStop& stop, std::string& out) {
    if (stop.reason == 1) return false;
    if (stop.reason == 2) throw std::runtime_error("encode throws");
    return sluice::nats::TriviallyCopyableCodec<EmergencyStop>::Encode(stop, out);
  }
  static std::optional<EmergencyStop> Decode(const std::uint8_t* data, std::size_t size) {
    std::optional<EmergencyStop> stop =
        sluice::nats::TriviallyCopyableCodec<EmergencyStop>::Decode(data, size);
    if (stop && stop->reason == 3) throw std::runtime_error("decode throws");
    return stop;
  }
};

// A codec or on_reject that throws does not take the process down (the
// exception would leave the client's thread): counted, and reported.
TEST_F(NatsBridgeTest, ThrowingCodecsAndOnRejectAreCaughtAndCounted) {
  Bus sending_bus;
  Bridge sender(sending_bus, OptionsFor(server_.Url()));
  ASSERT_TRUE((sender.Forward<EmergencyStop, ThrowingStopCodec>("t.throw", kStopType)));
  Bus receiving_bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  std::mutex mutex;
  std::vector<FrameError> reported;  // guarded by mutex
  options.on_reject = [&](FrameError error, std::string_view) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      reported.push_back(error);
    }
    throw std::runtime_error("on_reject throws");
  };
  Bridge receiver(receiving_bus, options);
  ASSERT_TRUE((receiver.Receive<EmergencyStop, ThrowingStopCodec>("t.throw", kStopType)));
  std::atomic<int> delivered{0};
  auto s = receiving_bus.Subscribe<EmergencyStop>(
      [&](const EmergencyStop&) { delivered.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(s.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  ASSERT_EQ(sender.Start(), NATS_OK);

  sluice::nats::FrameHeader header;
  header.type_id = kStopType;
  header.origin_id = 42;
  const EmergencyStop throws_in_decode{1, 3, 0};
  PublishRaw(server_.Url(),
             {{"t.throw.medium",
               EncodedFrame(header, std::string(reinterpret_cast<const char*>(&throws_in_decode),
                                                sizeof throws_in_decode))}});
  for (std::uint32_t reason : {1u, 2u, 0u}) {
    ASSERT_TRUE(sending_bus.Publish(EmergencyStop{1, reason, reason}, kTestSender));
  }
  while (sending_bus.ProcessBatch() > 0) {
  }
  const auto sent = sender.GetStatistics();
  EXPECT_EQ(sent.encode_failed, 2u);
  EXPECT_EQ(sent.frames_sent[1], 1u);
  EXPECT_EQ(sending_bus.GetStatistics().processing_errors, 1u) << "the bus no longer saw it";

  ASSERT_TRUE(Eventually([&] {
    (void)receiving_bus.ProcessBatch();
    // on_reject_threw is the last thing the refused frame's handling
    // counts: waiting for frames_received alone could read it half done.
    return receiver.GetStatistics().frames_received == 2 &&
           receiver.GetStatistics().on_reject_threw == 1 &&
           delivered.load(std::memory_order_relaxed) == 1;
  }));
  const auto received = receiver.GetStatistics();
  EXPECT_EQ(received.rejected[static_cast<std::size_t>(FrameError::kDecodeThrew)], 1u);
  EXPECT_EQ(received.Rejected(), 1u);
  EXPECT_EQ(received.on_reject_threw, 1u);
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(reported, std::vector<FrameError>{FrameError::kDecodeThrew});
  }
  std::string text;
  sluice::nats::WritePrometheus(text, "r", receiving_bus, receiver);
  EXPECT_NE(text.find("sluice_nats_frames_rejected_total{bus=\"r\",reason=\"decode_threw\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_nats_on_reject_exceptions_total{bus=\"r\"} 1\n"), std::string::npos)
      << text;
  (void)sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  (void)receiver.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
}
#endif  // SLUICE_HAS_EXCEPTIONS

// Note's text as the whole payload, of any length.
struct RawNoteCodec {
  static bool Encode(const Note& note, std::string& out) {
    out.append(note.text);
    return true;
  }
  static std::optional<Note> Decode(const std::uint8_t* data, std::size_t size) {
    return Note{0, std::string(reinterpret_cast<const char*>(data), size)};
  }
};

// A frame must fit, header included, in the server's max_payload: one that
// does not is a failed encode ("exceeded the bound"), not a send drop.
TEST_F(NatsBridgeTest, AFrameOverTheServersMaxPayloadIsAnEncodeFailure) {
  natsConnection* raw = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&raw, server_.Url().c_str()), NATS_OK);
  const std::int64_t server_max = natsConnection_GetMaxPayload(raw);
  natsConnection_Destroy(raw);
  ASSERT_GT(server_max, static_cast<std::int64_t>(sluice::nats::kFrameHeaderSize));
  const auto fits = static_cast<std::size_t>(server_max) - sluice::nats::kFrameHeaderSize;

  Bus receiving_bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.max_payload = static_cast<std::uint32_t>(server_max);  // the server's bound decides
  Bridge receiver(receiving_bus, options);
  ASSERT_TRUE((receiver.Receive<Note, RawNoteCodec>("t.large", kNoteType)));
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Bus bus;
  Bridge sender(bus, options);
  ASSERT_TRUE((sender.Forward<Note, RawNoteCodec>("t.large", kNoteType)));
  ASSERT_EQ(sender.Start(), NATS_OK);

  ASSERT_TRUE(bus.Publish(Note{0, std::string(fits + 1, 'x')}, kTestSender));
  ASSERT_TRUE(bus.Publish(Note{0, std::string(fits, 'x')}, kTestSender));
  while (bus.ProcessBatch() > 0) {
  }
  const auto s = sender.GetStatistics();
  EXPECT_EQ(s.encode_failed, 1u);
  EXPECT_EQ(s.send_dropped[1], 0u);
  EXPECT_EQ(s.frames_sent[1], 1u);
  EXPECT_TRUE(Eventually([&] { return receiver.GetStatistics().delivered[1] == 1; }));
  (void)sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  (void)receiver.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
}

// A frame whose priority is not its subject's suffix, or whose type id was
// not given for its subject, is refused and never reaches the bus.
TEST_F(NatsBridgeTest, FramesOffTheirSubjectsPriorityOrTypeAreRejected) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  std::mutex mutex;
  std::multiset<std::pair<FrameError, std::string>> reported;  // guarded by mutex
  options.on_reject = [&](FrameError error, std::string_view subject) {
    std::lock_guard<std::mutex> lock(mutex);
    reported.emplace(error, std::string(subject));
  };
  Bridge bridge(bus, options);
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.p", kSensorType));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("t.q", kStopType));
  std::mutex seen_mutex;
  std::vector<MessagePriority> seen;  // guarded by seen_mutex
  auto r = bus.Subscribe<SensorReading>([&](const SensorReading&, const sluice::MessageHeader& h) {
    std::lock_guard<std::mutex> lock(seen_mutex);
    seen.push_back(h.priority);
  });
  auto e = bus.Subscribe<EmergencyStop>([&](const EmergencyStop&, const sluice::MessageHeader& h) {
    std::lock_guard<std::mutex> lock(seen_mutex);
    seen.push_back(h.priority);
  });
  ASSERT_TRUE(r.IsValid() && e.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  sluice::nats::FrameHeader sensor;
  sensor.type_id = kSensorType;
  sensor.origin_id = 42;
  sluice::nats::FrameHeader stop = sensor;
  stop.type_id = kStopType;
  const std::string reading(sizeof(SensorReading), '\0');
  const std::string stop_bytes(sizeof(EmergencyStop), '\0');
  sluice::nats::FrameHeader high_sensor = sensor;
  high_sensor.priority = MessagePriority::HIGH;
  sluice::nats::FrameHeader high_stop = stop;
  high_stop.priority = MessagePriority::HIGH;
  PublishRaw(server_.Url(), {
                                {"t.p.low", EncodedFrame(high_sensor, reading)},  // says HIGH
                                {"t.p.medium", EncodedFrame(stop, stop_bytes)},   // not t.p's
                                {"t.p.medium", EncodedFrame(sensor, reading)},
                                {"t.q.high", EncodedFrame(high_stop, stop_bytes)},
                            });
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(seen_mutex);
    return bridge.GetStatistics().frames_received == 4 && seen.size() == 2;
  }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
  const auto stats = bridge.GetStatistics();
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(FrameError::kPriorityMismatch)], 1u);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(FrameError::kUnknownType)], 1u);
  EXPECT_EQ(stats.Rejected(), 2u);
  EXPECT_EQ(stats.delivered[0], 0u);
  EXPECT_EQ(stats.delivered[1], 1u);
  EXPECT_EQ(stats.delivered[2], 1u);
  std::lock_guard<std::mutex> lock(mutex);
  const std::multiset<std::pair<FrameError, std::string>> expected = {
      {FrameError::kPriorityMismatch, "t.p.low"}, {FrameError::kUnknownType, "t.p.medium"}};
  EXPECT_EQ(reported, expected);
  std::lock_guard<std::mutex> seen_lock(seen_mutex);
  EXPECT_EQ(seen.size(), 2u);
}

// The bridge's own close is not a disconnect; Shutdown again, or with no
// time to wait, reports the connection closed.
TEST_F(NatsBridgeTest, OwnCloseIsNotADisconnectAndShutdownReportsClosed) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.own", kSensorType));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  const sluice::nats::ShutdownResult first = bridge.Shutdown(10s);
  EXPECT_TRUE(first.closed);
  EXPECT_EQ(first.flush, NATS_OK);
  const sluice::nats::ShutdownResult again = bridge.Shutdown(10s);
  EXPECT_TRUE(again.closed);
  EXPECT_EQ(bridge.GetStatistics().disconnects, 0u);
  EXPECT_FALSE(bridge.GetStatistics().connected);

  Bus other_bus;
  Bridge other(other_bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(other.Receive<SensorReading>("t.own", kSensorType));
  ASSERT_EQ(other.Start(), NATS_OK);
  const sluice::nats::ShutdownResult at_once = other.Shutdown(0ms);
  EXPECT_EQ(at_once.flush, NATS_TIMEOUT);
  EXPECT_EQ(at_once.drain, NATS_TIMEOUT);
  EXPECT_TRUE(at_once.closed);
  EXPECT_EQ(other.GetStatistics().disconnects, 0u);
}

// A Start that failed (no server) leaves the bridge ready for another.
TEST_F(NatsBridgeTest, StartCanBeRetriedAfterItFailed) {
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Receive<SensorReading>("t.retry", kSensorType));
  server_.Kill();
  const sluice::nats::StartResult failed = bridge.Start();
  EXPECT_NE(failed, NATS_OK);
  EXPECT_FALSE(failed.error.empty()) << "Start's result carries the client's text";
  EXPECT_FALSE(bridge.GetStatistics().connected);
  ASSERT_TRUE(server_.Restart());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  const sluice::nats::StartResult again = bridge.Start();
  EXPECT_EQ(again, NATS_ILLEGAL_STATE) << "a started bridge starts once";
  EXPECT_FALSE(again.error.empty());
  Consumer<Bus> consumer(bus);
  sluice::nats::FrameHeader header;
  header.type_id = kSensorType;
  header.origin_id = 42;
  PublishRaw(server_.Url(),
             {{"t.retry.medium", EncodedFrame(header, std::string(sizeof(SensorReading), '\0'))}});
  EXPECT_TRUE(Eventually([&] { return bridge.GetStatistics().delivered[1] == 1; }));
  (void)bridge.Shutdown(10s);
  consumer.Stop();
}

// A server that stops answering (here: stopped with SIGSTOP, as a hung
// host or a route black-holed by a firewall would be) keeps the TCP
// connection open: only the client's pings find it. With a 100 ms ping
// interval and 2 pings out, the bridge counts the disconnect and, once the
// server answers again, reconnects; with nats.c's default (2 minutes) it
// would not see it within the test's guard.
TEST_F(NatsBridgeTest, PingsFindAServerThatStoppedAnswering) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.ping_interval = 100ms;
  options.max_pings_out = 2;
  Bridge bridge(bus, options);
  ASSERT_EQ(bridge.Start(), NATS_OK);
  ASSERT_TRUE(bridge.GetStatistics().connected);
  ASSERT_EQ(kill(server_.Pid(), SIGSTOP), 0);
  const bool seen = Eventually([&] { return bridge.GetStatistics().disconnects >= 1; });
  ASSERT_EQ(kill(server_.Pid(), SIGCONT), 0);
  ASSERT_TRUE(seen) << "the bridge never noticed the silent server";
  EXPECT_TRUE(Eventually([&] { return bridge.GetStatistics().reconnects >= 1; }));
  (void)bridge.Shutdown(5s);
}

// A remote_sender_flag of 0 would mark no received message, and two bridges
// that forward and receive one subject would send one message back and
// forth for ever (each bounce dispatched): Start refuses it before it
// connects; any flag with a bit set starts.
TEST(NatsBridgeOptionsTest, ARemoteSenderFlagOfZeroFailsStart) {
  sluice::nats::BridgeOptions options = OptionsFor("nats://127.0.0.1:1");
  options.remote_sender_flag = 0;
  Bus bus;
  Bridge bridge(bus, options);
  const auto started = bridge.Start();
  EXPECT_EQ(started.status, NATS_INVALID_ARG);
  EXPECT_NE(started.error.find("remote_sender_flag"), std::string::npos) << started.error;
}

// The stream table's bounds: a bound of 0, or a negative idle time, fails
// Start before it connects.
TEST(NatsBridgeOptionsTest, AStreamTableOutOfRangeFailsStart) {
  const auto start_with = [](const sluice::nats::BridgeOptions& options) {
    Bus bus;
    Bridge bridge(bus, options);
    return bridge.Start().status;
  };
  sluice::nats::BridgeOptions options = OptionsFor("nats://127.0.0.1:1");
  options.max_tracked_streams = 0;
  EXPECT_EQ(start_with(options), NATS_INVALID_ARG);
  options = OptionsFor("nats://127.0.0.1:1");
  options.max_tracked_unknown_streams = 0;
  EXPECT_EQ(start_with(options), NATS_INVALID_ARG);
  options = OptionsFor("nats://127.0.0.1:1");
  options.stream_idle = std::chrono::milliseconds(-1);
  EXPECT_EQ(start_with(options), NATS_INVALID_ARG);
  options = OptionsFor("nats://127.0.0.1:1");
  options.stream_idle = std::chrono::milliseconds(0);  // allowed: replaced at once
  EXPECT_EQ(start_with(options), NATS_NO_SERVER);
}

}  // namespace
}  // namespace bridge_test
