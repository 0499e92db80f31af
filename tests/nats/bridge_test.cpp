// The bridge against a real nats-server on a free loopback port, with a
// second process (sluice_nats_peer) where a test needs one. No figure of
// time is asserted: deadlines only guard against hangs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sluice/nats/bridge.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nats_server_process.hpp"
#include "test_messages.hpp"

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

using Bus = sluice::MpscBus<Payload, 4096>;
using Bridge = sluice::nats::Bridge<Bus>;

constexpr std::uint32_t kTestSender = 11;
constexpr std::uint32_t kPeerSender = 22;
constexpr std::uint32_t kRemote = 0x8000'0000u;
constexpr auto kHangGuard = 60s;

// Polls `done` until it holds or the hang guard passes.
bool Eventually(const std::function<bool()>& done, std::chrono::seconds guard = kHangGuard) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// The bus's consumer on a thread of its own until the bus is closed and
// drained (Bridge::Shutdown closes it) or Stop().
template <typename B>
class Consumer {
 public:
  explicit Consumer(B& bus, std::chrono::microseconds per_message = 0us)
      : thread_([this, &bus, per_message] {
          // Acquire: pairs with Stop's release (nothing else rides on it).
          while (!stop_.load(std::memory_order_acquire) && !bus.IsDrained()) {
            const std::uint32_t count = bus.ProcessBatch(per_message.count() > 0 ? 1 : 4096);
            if (count == 0) {
              std::this_thread::sleep_for(100us);
            } else if (per_message.count() > 0) {
              std::this_thread::sleep_for(per_message);
            }
          }
        }) {}
  ~Consumer() { Stop(); }
  void Stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// "key=a,b,c" -> {a, b, c} from a peer's line of key=value words.
std::vector<std::uint64_t> Field(const std::string& line, const std::string& key) {
  std::istringstream words(line);
  std::string word;
  std::vector<std::uint64_t> values;
  while (words >> word) {
    if (word.compare(0, key.size() + 1, key + "=") != 0) continue;
    std::istringstream list(word.substr(key.size() + 1));
    std::string item;
    while (std::getline(list, item, ',')) values.push_back(std::stoull(item));
  }
  return values;
}

sluice::nats::BridgeOptions OptionsFor(const std::string& url) {
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.connection_name = "sluice-test";
  options.reconnect_wait = 50ms;
  return options;
}

class NatsBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sluice_nats_test::NatsServer::Binary().empty()) {
      GTEST_SKIP() << "nats-server is not on PATH (Debian: apt install nats-server): the "
                      "bridge tests need a real server";
    }
    ASSERT_TRUE(server_.Start()) << "nats-server did not start on a free loopback port";
  }
  void TearDown() override { server_.Stop(); }

  bool StartPeer(sluice_nats_test::ChildProcess& peer, std::vector<std::string> args) {
    args.insert(args.begin(), SLUICE_NATS_PEER);
    return peer.Start(args, /*capture=*/true);
  }

  sluice_nats_test::NatsServer server_;
};

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

  const auto frame = [](sluice::nats::FrameHeader header, const std::string& payload) {
    header.payload_size = static_cast<std::uint32_t>(payload.size());
    std::string bytes(sluice::nats::kFrameHeaderSize, '\0');
    sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(bytes.data()));
    return bytes + payload;
  };
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

}  // namespace
