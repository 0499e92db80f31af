// At least once over JetStream, against nats-server -js: a sending bridge
// publishes a stream of readings to a JetStream stream, a receiving bridge
// reads it through durable pull consumers (one per priority), and the
// server is killed (SIGKILL) and restarted on its store three times while
// the readings flow. Nothing may be lost and nothing dispatched twice.
// Deadlines only guard against hangs; the figures are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sluice/nats/bridge.hpp>
#include <sluice/nats/dispatch_acks.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "bridge_test_support.hpp"
#include "nats_server_process.hpp"
#include "test_messages.hpp"

namespace bridge_jetstream_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::BridgeOptions;
using sluice::nats::DecodeFrame;
using sluice::nats::FrameError;
using sluice::nats::FrameView;
using sluice::nats::StreamStateFile;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::EncodedFrame;
using sluice_nats_test::Eventually;
using sluice_nats_test::kHangGuard;
using sluice_nats_test::kSensorType;
using sluice_nats_test::kTestSender;
using sluice_nats_test::NatsServer;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::PublishRaw;
using sluice_nats_test::ScratchDirectory;
using sluice_nats_test::SensorReading;

// The stream `name` over `subject`, on file storage (it survives the
// kill), with a duplicate window for the Nats-Msg-Id of a publish sent again.
// `max_messages` (> 0): the stream keeps that many, discarding the oldest,
// or with `discard_new` refusing what comes past them.
bool MakeNamedStream(const std::string& url, const char* name, const char* subject,
                     std::int64_t max_messages = 0, bool discard_new = false) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return false;
  bool made = natsConnection_JetStream(&js, connection, nullptr) == NATS_OK;
  if (made) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    const char* subjects[] = {subject};
    config.Name = name;
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Duplicates = 120LL * 1000 * 1000 * 1000;  // 2 minutes, in nanoseconds
    if (max_messages > 0) {
      config.MaxMsgs = max_messages;
      config.Discard = discard_new ? js_DiscardNew : js_DiscardOld;
    }
    jsStreamInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    made = js_AddStream(&info, js, &config, nullptr, &error) == NATS_OK;
    if (info != nullptr) jsStreamInfo_Destroy(info);
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(connection);
  return made;
}

// The stream SLUICE over the routes' subjects ("js.>").
bool MakeStream(const std::string& url, std::int64_t max_messages = 0, bool discard_new = false) {
  return MakeNamedStream(url, "SLUICE", "js.>", max_messages, discard_new);
}

// Purges, or deletes, the stream SLUICE; false if the server refused.
bool ChangeStream(const std::string& url, bool purge) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return false;
  bool done = natsConnection_JetStream(&js, connection, nullptr) == NATS_OK;
  if (done) {
    jsErrCode error = static_cast<jsErrCode>(0);
    done = (purge ? js_PurgeStream(js, "SLUICE", nullptr, &error)
                  : js_DeleteStream(js, "SLUICE", nullptr, &error)) == NATS_OK;
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(connection);
  return done;
}
bool PurgeStream(const std::string& url) { return ChangeStream(url, true); }
bool DeleteStream(const std::string& url) { return ChangeStream(url, false); }

// How many messages the stream SLUICE holds; -1 if it cannot say.
std::int64_t StoredMessages(const std::string& url) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  std::int64_t stored = -1;
  if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return -1;
  if (natsConnection_JetStream(&js, connection, nullptr) == NATS_OK) {
    jsStreamInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    if (js_GetStreamInfo(&info, js, "SLUICE", nullptr, &error) == NATS_OK) {
      stored = static_cast<std::int64_t>(info->State.Msgs);
      jsStreamInfo_Destroy(info);
    }
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(connection);
  return stored;
}

// Each test's own nats-server with JetStream on a scratch store directory
// (skipped, saying so, without nats-server).
class NatsJetStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (NatsServer::Binary().empty()) {
      GTEST_SKIP() << "nats-server is not installed (Debian: nats-server)";
    }
    ASSERT_FALSE(store_.Path().empty());
    ASSERT_TRUE(server_.Start({"-js", "-sd", store_.Path()}));
  }
  void TearDown() override { server_.Stop(); }

  ScratchDirectory store_;
  NatsServer server_;
};

TEST_F(NatsJetStreamTest, ThreeServerKillsLoseNothingAndDispatchNothingTwice) {
  constexpr std::uint64_t kCount = 3000;
  constexpr int kKills = 3;
  ASSERT_TRUE(MakeStream(server_.Url())) << "the JetStream stream could not be made";

  BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_ack_wait = 1s;  // redeliveries after a kill come sooner
  Bus sender_bus;
  Bus receiver_bus;
  Bridge sender(sender_bus, options);
  Bridge receiver(receiver_bus, options);
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(sender.Forward<SensorReading>("js.reading", kSensorType, at_least_once));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "receiver";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.reading", kSensorType, from_stream));

  std::mutex mutex;
  std::map<std::uint64_t, int> times;  // seq -> dispatches; guarded by mutex
  std::atomic<std::uint64_t> distinct{0};
  auto handle = receiver_bus.Subscribe<SensorReading>([&](const SensorReading& m) {
    std::lock_guard<std::mutex> lock(mutex);
    // Relaxed: a progress count the test polls.
    if (++times[m.seq] == 1) distinct.fetch_add(1, std::memory_order_relaxed);
  });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<Bus> sender_consumer(sender_bus);
  Consumer<Bus> receiver_consumer(receiver_bus);

  // One reading about every 500 us, every priority; a refused publish (the
  // bus full while the stream is away) is tried again: the test's own
  // producer must not lose readings either.
  std::atomic<bool> published_all{false};
  std::thread producer([&] {
    for (std::uint64_t seq = 0; seq < kCount; ++seq) {
      const auto priority = static_cast<MessagePriority>(seq % 3);
      while (!sender_bus.PublishAttempt(SensorReading{1, 0.5f, seq}, kTestSender, priority)) {
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(500us);
    }
    published_all.store(true, std::memory_order_release);
  });

  for (int kill = 1; kill <= kKills; ++kill) {
    const std::uint64_t mark = kCount * static_cast<std::uint64_t>(kill) / (kKills + 1);
    ASSERT_TRUE(Eventually([&] { return distinct.load(std::memory_order_relaxed) >= mark; }))
        << "stalled at " << distinct.load() << " before kill " << kill;
    server_.Kill();
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(server_.Restart()) << "the server did not come back";
  }
  producer.join();
  ASSERT_TRUE(Eventually([&] { return distinct.load(std::memory_order_relaxed) >= kCount; }))
      << "received " << distinct.load() << " of " << kCount;
  const sluice::nats::ShutdownResult sent = sender.Shutdown(10s);
  (void)receiver.Shutdown(10s);
  sender_consumer.Stop();
  receiver_consumer.Stop();
  server_.Stop();

  std::uint64_t twice = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(times.size(), kCount) << "readings lost";
    for (const auto& [seq, count] : times) twice += count > 1 ? 1 : 0;
  }
  EXPECT_EQ(twice, 0u) << "readings dispatched more than once";
  EXPECT_EQ(sent.stream_acks, NATS_OK);
  const auto out = sender.GetStatistics();
  const auto in = receiver.GetStatistics();
  EXPECT_EQ(out.send_dropped[0] + out.send_dropped[1] + out.send_dropped[2], 0u);
  EXPECT_EQ(in.bus_dropped[0] + in.bus_dropped[1] + in.bus_dropped[2], 0u);
  std::printf(
      "[ jetstream] %llu readings, %d kills: lost 0, dispatched twice %llu; sender resent "
      "%llu, reconnects %llu; receiver refused %llu redelivered duplicates, handed back "
      "%llu, counted %llu gaps\n",
      static_cast<unsigned long long>(kCount), kKills, static_cast<unsigned long long>(twice),
      static_cast<unsigned long long>(out.jetstream_resent),
      static_cast<unsigned long long>(out.reconnects),
      static_cast<unsigned long long>(in.streams.duplicates),
      static_cast<unsigned long long>(in.handed_back[0] + in.handed_back[1] + in.handed_back[2]),
      static_cast<unsigned long long>(in.streams.gaps));
}

}  // namespace
}  // namespace bridge_jetstream_test

namespace bridge_jetstream_test {
namespace {

// The stream's window full and the server gone: the consumer thread waits
// in the forwarding callback (backpressure), and Shutdown still returns,
// counting what it gave up as send_dropped, never silently.
TEST_F(NatsJetStreamTest, ShutdownEndsAWaitForTheWindowAndCountsWhatItGaveUp) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_max_pending = 2;
  Bus bus;
  Bridge bridge(bus, options);
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(bridge.Forward<SensorReading>("js.window", kSensorType, at_least_once));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  server_.Kill();  // no acknowledgement will come
  for (std::uint64_t seq = 0; seq < 10; ++seq) {
    ASSERT_TRUE(
        bus.PublishWithPriority(SensorReading{1, 1.0f, seq}, kTestSender, MessagePriority::HIGH));
  }
  std::thread consumer([&] {
    while (!bus.IsDrained()) {
      if (bus.ProcessBatch() == 0) std::this_thread::sleep_for(1ms);
    }
  });
  std::this_thread::sleep_for(300ms);  // the consumer is waiting for the window now
  std::atomic<bool> returned{false};
  sluice::nats::ShutdownResult result;
  std::thread stopper([&] {
    result = bridge.Shutdown(1s);
    returned.store(true);
  });
  if (!Eventually([&] { return returned.load(); }, 30s)) {
    ADD_FAILURE() << "Shutdown waited for ever on a forwarding callback stalled at the window";
    std::fflush(stdout);
    std::abort();
  }
  stopper.join();
  consumer.join();
  const auto stats = bridge.GetStatistics();
  // Two handed to the client and never acknowledged (counted lost at
  // close), the one waiting for the window given up; the rest were still in
  // the bus when the drain timed out, which Shutdown reports.
  EXPECT_EQ(stats.frames_sent[2], 2u);
  EXPECT_EQ(stats.send_dropped[2], 3u);
  EXPECT_FALSE(result.bus_drained);
  EXPECT_NE(result.stream_acks, NATS_OK);
}

}  // namespace
}  // namespace bridge_jetstream_test

namespace bridge_jetstream_test {
namespace {

// One consumer per priority: a LOW backlog in the stream, which the slow
// receiving bus admits only below LOW's threshold, does not hold up HIGH
// messages stored after it. Every HIGH is dispatched while most of the LOW
// backlog still waits in the stream.
TEST_F(NatsJetStreamTest, ALowBacklogDoesNotDelayHigh) {
  constexpr std::uint64_t kLow = 2000;
  constexpr std::uint64_t kHigh = 20;
  ASSERT_TRUE(MakeStream(server_.Url()));
  // The backlog is stored before the receiver starts: LOW first, then HIGH.
  {
    Bus bus;
    Bridge sender(bus, OptionsFor(server_.Url()));
    sluice::nats::ForwardOptions at_least_once;
    at_least_once.jetstream = true;
    ASSERT_TRUE(sender.Forward<SensorReading>("js.backlog", kSensorType, at_least_once));
    ASSERT_EQ(sender.Start(), NATS_OK);
    for (std::uint64_t seq = 0; seq < kLow + kHigh; ++seq) {
      const auto priority = seq < kLow ? MessagePriority::LOW : MessagePriority::HIGH;
      ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender, priority));
      if (seq % 512 == 511) (void)bus.ProcessBatch();
    }
    const auto sent = sender.Shutdown(30s, sluice::nats::ShutdownDrain::kDispatchHere);
    ASSERT_EQ(sent.stream_acks, NATS_OK);
  }
  using SmallBus = sluice::MpscBus<sluice_nats_test::Payload, 64>;
  SmallBus bus;
  sluice::nats::Bridge<SmallBus> receiver(bus, OptionsFor(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "backlog";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.backlog", kSensorType, from_stream));
  std::atomic<std::uint64_t> low{0};
  std::atomic<std::uint64_t> high{0};
  std::atomic<std::uint64_t> low_when_high_done{0};
  auto handle = bus.Subscribe<SensorReading>([&](const SensorReading&,
                                                 const sluice::MessageHeader& h) {
    // Relaxed: counts the test polls; the consumer thread writes them all.
    if (h.priority == MessagePriority::HIGH) {
      if (high.fetch_add(1, std::memory_order_relaxed) + 1 == kHigh) {
        low_when_high_done.store(low.load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
    } else {
      low.fetch_add(1, std::memory_order_relaxed);
    }
  });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<SmallBus> consumer(bus, /*per_message=*/200us);
  ASSERT_TRUE(Eventually([&] { return high.load(std::memory_order_relaxed) == kHigh; }))
      << "HIGH dispatched " << high.load() << " of " << kHigh;
  consumer.Stop();
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  server_.Stop();
  std::printf("[ jetstream] every HIGH dispatched after %llu of %llu LOW\n",
              static_cast<unsigned long long>(low_when_high_done.load()),
              static_cast<unsigned long long>(kLow));
  EXPECT_LT(low_when_high_done.load(), kLow / 2) << "HIGH waited behind the LOW backlog";
}

// A reading frame of stream (origin 0xCD, instance 5) numbered `sequence`,
// carrying `seq`, at `priority`.
std::string ReadingFrame(std::uint64_t sequence, std::uint64_t seq, MessagePriority priority) {
  sluice::nats::FrameHeader header;
  header.priority = priority;
  header.type_id = kSensorType;
  header.origin_id = 0xCD;
  header.instance_id = 5;
  header.sequence = sequence;
  std::string payload;
  EXPECT_TRUE(
      sluice::nats::DefaultCodec<SensorReading>::Encode(SensorReading{3, 0.0f, seq}, payload));
  return EncodedFrame(header, payload);
}

// Readings numbered first..last (each its own frame number) on `subject`,
// as PublishRaw takes them.
std::vector<std::pair<std::string, std::string>> ReadingFrames(const std::string& subject,
                                                               std::uint64_t first,
                                                               std::uint64_t last,
                                                               MessagePriority priority) {
  std::vector<std::pair<std::string, std::string>> frames;
  for (std::uint64_t n = first; n <= last; ++n) {
    frames.emplace_back(subject, ReadingFrame(n, n, priority));
  }
  return frames;
}

// Readings dispatched by seq, in dispatch order, on the consumer thread.
struct ReadingLog {
  std::mutex mutex;
  std::vector<std::uint64_t> order;  // guarded by mutex
  std::size_t Size() {
    std::lock_guard<std::mutex> lock(mutex);
    return order.size();
  }
  // Subscribes to `bus`'s readings, logging each one's seq.
  template <typename B>
  sluice::SubscriptionHandle Follow(B& bus) {
    return bus.template Subscribe<SensorReading>([this](const SensorReading& m) {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(m.seq);
    });
  }
};

// A bus that refuses, as a full one would, every reading numbered up to
// `refuse_up_to` while reporting room (so the bridge fetches them): the
// hand-back test's way to have the bus refuse exactly the messages it names.
using SmallBus = sluice::MpscBus<sluice_nats_test::Payload, 64>;
class RefusingBus : public SmallBus {
 public:
  template <typename Message>
  sluice::PublishResult PublishAttempt(Message&& message, std::uint32_t sender,
                                       MessagePriority priority) {
    if constexpr (std::is_same_v<std::decay_t<Message>, SensorReading>) {
      // Relaxed: the test's switch; nothing else is published through it.
      if (message.seq <= refuse_up_to.load(std::memory_order_relaxed)) {
        return sluice::PublishResult(sluice::PublishOutcome::kRefusedFull, priority);
      }
    }
    return SmallBus::PublishAttempt(std::forward<Message>(message), sender, priority);
  }
  std::atomic<std::uint64_t> refuse_up_to{0};
};

}  // namespace
}  // namespace bridge_jetstream_test

template <>
struct sluice::nats::detail::BusInfo<bridge_jetstream_test::RefusingBus>
    : sluice::nats::detail::BusInfo<bridge_jetstream_test::SmallBus> {};

namespace bridge_jetstream_test {
namespace {

// The bus refuses the first readings, so they are handed back, again each
// time the stream redelivers them, until a reading numbered past the
// duplicate check's window is admitted. Each redelivery is then far behind
// its stream's newest number, and must still be admitted once (it never
// was), not refused as stale and lost.
TEST_F(NatsJetStreamTest, AMessageHandedBackIsAdmittedHoweverFarTheStreamMoved) {
  constexpr std::uint64_t kEarly = 10;
  const std::uint64_t kJump = sluice::nats::StreamTracker::kWindow + 100;
  ASSERT_TRUE(MakeStream(server_.Url()));
  RefusingBus bus;
  bus.refuse_up_to.store(kEarly);
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 200ms;  // the pause before the stream redelivers a handed-back message
  sluice::nats::Bridge<RefusingBus> receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "handback";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.handback", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RefusingBus> consumer(bus);
  const auto early = ReadingFrames("js.handback.low", 1, kEarly, MessagePriority::LOW);
  PublishRaw(server_.Url(), early);
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  ASSERT_TRUE(Eventually([&] { return receiver.GetStatistics().handed_back[kLow] >= kEarly; }))
      << "handed back " << receiver.GetStatistics().handed_back[kLow] << " of " << kEarly;
  // Two frames, so the stream's place is confirmed (a stream heard once
  // starts again at a frame far behind its only one).
  PublishRaw(server_.Url(),
             {{"js.handback.low", ReadingFrame(kJump, kJump, MessagePriority::LOW)},
              {"js.handback.low", ReadingFrame(kJump + 1, kJump + 1, MessagePriority::LOW)}});
  ASSERT_TRUE(Eventually([&] { return log.Size() == 2; })) << "the jump was not dispatched";
  bus.refuse_up_to.store(0);  // the redeliveries are admitted from now on
  ASSERT_TRUE(Eventually([&] { return log.Size() >= kEarly + 2; }))
      << "dispatched " << log.Size() << " of " << kEarly + 2;
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  server_.Stop();
  const auto stats = receiver.GetStatistics();
  std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.order.front(), kJump);
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : log.order) ++times[seq];
  EXPECT_EQ(times.size(), kEarly + 2);
  for (std::uint64_t n = 1; n <= kEarly; ++n) EXPECT_EQ(times[n], 1) << "reading " << n;
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kStale)], 0u);
  EXPECT_EQ(stats.streams.stale, 0u);
  EXPECT_EQ(stats.jetstream_behind_window, kEarly);
  std::printf("[ jetstream] %llu hand-backs of %llu readings, each admitted once later\n",
              static_cast<unsigned long long>(stats.handed_back[kLow]),
              static_cast<unsigned long long>(kEarly));
}

// The last delivery is the durable's: a durable made with MaxDeliver 3 by
// an earlier bridge keeps it, and a bridge without jetstream_max_deliver
// still gives up on, and counts, a reading refused on its third delivery.
TEST_F(NatsJetStreamTest, TheLastDeliveryIsTheDurablesWhateverTheOptionsSay) {
  constexpr std::uint64_t kRefused = 2;
  ASSERT_TRUE(MakeStream(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "kept";
  {
    Bus bus;
    BridgeOptions with_limit = OptionsFor(server_.Url());
    with_limit.jetstream_max_deliver = 3;
    Bridge maker(bus, with_limit);
    ASSERT_TRUE(maker.Receive<SensorReading>("js.kept", kSensorType, from_stream));
    ASSERT_EQ(maker.Start(), NATS_OK);
    (void)maker.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  RefusingBus bus;
  bus.refuse_up_to.store(kRefused);
  BridgeOptions options = OptionsFor(server_.Url());  // no jetstream_max_deliver
  options.reconnect_wait = 50ms;
  sluice::nats::Bridge<RefusingBus> receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.kept", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RefusingBus> consumer(bus);
  const auto frames = ReadingFrames("js.kept.low", 1, 4, MessagePriority::LOW);
  PublishRaw(server_.Url(), frames);
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  ASSERT_TRUE(Eventually([&] {
    return receiver.GetStatistics().jetstream_gave_up[kLow] == kRefused;
  })) << "given up "
      << receiver.GetStatistics().jetstream_gave_up[kLow] << ", handed back "
      << receiver.GetStatistics().handed_back[kLow] << ", dispatched " << log.Size();
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  EXPECT_EQ(log.Size(), 4 - kRefused);
  EXPECT_EQ(receiver.GetStatistics().handed_back[kLow], kRefused * 2);
}

// A frame refused for want of room in the stream table (a new stream of an
// unknown origin while a busy one fills that part) is handed back: it may
// fit later. On its last delivery (jetstream_max_deliver) it is given up
// and counted as a drop, not lost unseen.
TEST_F(NatsJetStreamTest, AFrameRefusedForTheTableOnItsLastDeliveryIsCountedAsDropped) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  SmallBus bus;
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 50ms;
  options.max_tracked_unknown_streams = 1;
  options.jetstream_max_deliver = 2;
  sluice::nats::Bridge<SmallBus> receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "table";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.table", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<SmallBus> consumer(bus);
  sluice::nats::FrameHeader header;
  header.priority = MessagePriority::LOW;
  header.type_id = kSensorType;
  header.instance_id = 1;
  header.sequence = 1;
  std::string payload;
  ASSERT_TRUE(
      sluice::nats::DefaultCodec<SensorReading>::Encode(SensorReading{3, 0.0f, 1}, payload));
  header.origin_id = 0x1;
  const std::string first = EncodedFrame(header, payload);
  header.origin_id = 0x2;
  const std::string second = EncodedFrame(header, payload);
  PublishRaw(server_.Url(), {{"js.table.low", first}, {"js.table.low", second}});
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  ASSERT_TRUE(Eventually([&] { return receiver.GetStatistics().jetstream_gave_up[kLow] == 1; }));
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(log.Size(), 1u);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kStreamTableFull)],
            2u);  // each delivery
  EXPECT_EQ(stats.Dropped(MessagePriority::LOW), 1u);
}

// A stream full with discard-new refuses every publish past its limit. The
// refused publishes wait to be sent again, at most jetstream_max_pending of
// them; past that the forwarding callback waits too, so the sender's bus
// fills and refuses (backpressure) instead of a retry queue growing. The
// Shutdown that gives up on them does not report the acknowledgements as
// OK, and counts every one it gave up: what the stream stored is exactly
// what was sent less what was dropped.
TEST_F(NatsJetStreamTest, AFullStreamWithDiscardNewPushesBackAndShutdownCountsWhatItGaveUp) {
  constexpr std::uint64_t kReadings = 300;
  constexpr std::int64_t kKept = 50;
  ASSERT_TRUE(MakeStream(server_.Url(), kKept, /*discard_new=*/true));
  SmallBus bus;  // 64 slots
  BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_max_pending = 16;
  sluice::nats::Bridge<SmallBus> sender(bus, options);
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(sender.Forward<SensorReading>("js.full", kSensorType, at_least_once));
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<SmallBus> consumer(bus);
  // Each reading offered once: what the bus refuses is the backpressure.
  std::uint64_t admitted = 0;
  for (std::uint64_t seq = 1; seq <= kReadings; ++seq) {
    if (bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                MessagePriority::MEDIUM)) {
      ++admitted;
    }
    std::this_thread::sleep_for(1ms);
  }
  // The forwarding callback is waiting for room among the refused
  // publishes: the stream will take none of them.
  const auto result = sender.Shutdown(1s);
  consumer.Stop();
  const auto stats = sender.GetStatistics();
  constexpr auto kMedium = static_cast<std::size_t>(MessagePriority::MEDIUM);
  const std::int64_t stored = StoredMessages(server_.Url());
  std::printf(
      "[ jetstream] discard-new: %llu of %llu admitted by the sender's bus, %llu sent, %llu "
      "refused by the stream (each sent again), %llu dropped at Shutdown, %lld stored\n",
      static_cast<unsigned long long>(admitted), static_cast<unsigned long long>(kReadings),
      static_cast<unsigned long long>(stats.frames_sent[kMedium]),
      static_cast<unsigned long long>(stats.jetstream_refused[kMedium]),
      static_cast<unsigned long long>(stats.send_dropped[kMedium]), static_cast<long long>(stored));
  EXPECT_LT(admitted, kReadings);  // the sender's bus refused: backpressure reached it
  EXPECT_NE(result.stream_acks, NATS_OK);
  EXPECT_EQ(stored, kKept);
  EXPECT_GT(stats.jetstream_refused[kMedium], 0u);
  EXPECT_EQ(stats.frames_sent[kMedium] - stats.send_dropped[kMedium],
            static_cast<std::uint64_t>(kKept));
}

// jetstream_max_deliver: a message the bus refuses on its last delivery is
// terminated and counted as a drop (jetstream_gave_up), not handed back to
// a stream that would never deliver it again.
TEST_F(NatsJetStreamTest, AMessageRefusedOnItsLastDeliveryIsCountedAsDropped) {
  constexpr std::uint64_t kRefused = 2;
  constexpr int kMaxDeliver = 3;
  ASSERT_TRUE(MakeStream(server_.Url()));
  RefusingBus bus;
  bus.refuse_up_to.store(kRefused);
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 50ms;  // the pause before the stream redelivers a handed-back message
  options.jetstream_max_deliver = kMaxDeliver;
  sluice::nats::Bridge<RefusingBus> receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "maxdeliver";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.max", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RefusingBus> consumer(bus);
  const auto frames = ReadingFrames("js.max.low", 1, 5, MessagePriority::LOW);
  PublishRaw(server_.Url(), frames);
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  ASSERT_TRUE(Eventually([&] {
    return receiver.GetStatistics().jetstream_gave_up[kLow] == kRefused;
  })) << receiver.GetStatistics().jetstream_gave_up[kLow];
  ASSERT_TRUE(Eventually([&] { return log.Size() == 5 - kRefused; }));
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  // Each refused reading: handed back on every delivery but its last.
  EXPECT_EQ(stats.handed_back[kLow], kRefused * (kMaxDeliver - 1));
  EXPECT_EQ(stats.jetstream_gave_up[kLow], kRefused);
  EXPECT_EQ(stats.Dropped(MessagePriority::LOW), kRefused);
}

// A stream that keeps 100 messages and discards the oldest loses what its
// one reader had not fetched yet: the route, read by one bridge, counts
// each lost frame as a gap, so dispatched + gaps is every frame sent.
TEST_F(NatsJetStreamTest, FramesTheStreamDiscardedBeforeTheyWereFetchedAreCountedAsGaps) {
  constexpr std::uint64_t kFrames = 300;
  ASSERT_TRUE(MakeStream(server_.Url(), /*max_messages=*/100));
  SmallBus bus;  // 64 slots: the fetcher stops when they are full
  sluice::nats::Bridge<SmallBus> receiver(bus, OptionsFor(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "discard";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.discard", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  // The first frame in the bus: the receiver has heard the stream begin.
  PublishRaw(server_.Url(), {{"js.discard.high", ReadingFrame(1, 1, MessagePriority::HIGH)}});
  ASSERT_TRUE(Eventually([&] { return bus.QueueDepth() == 1; }));
  // No consumer yet: the bus fills (64 at most), and the stream discards
  // the oldest of what stays in it (it keeps 100), so at least 136 are lost.
  const auto frames = ReadingFrames("js.discard.high", 2, kFrames, MessagePriority::HIGH);
  PublishRaw(server_.Url(), frames);
  Consumer<SmallBus> consumer(bus);
  const auto accounted = [&] { return log.Size() + receiver.GetStatistics().streams.gaps; };
  ASSERT_TRUE(Eventually([&] { return accounted() >= kFrames; }))
      << log.Size() << " dispatched, " << receiver.GetStatistics().streams.gaps << " gaps";
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  std::printf("[ jetstream] discard-old: %zu dispatched, %llu counted as gaps, of %llu\n",
              log.Size(), static_cast<unsigned long long>(stats.streams.gaps),
              static_cast<unsigned long long>(kFrames));
  EXPECT_GT(stats.streams.gaps, 0u);
  EXPECT_EQ(log.Size() + stats.streams.gaps, kFrames);
  std::lock_guard<std::mutex> lock(log.mutex);
  EXPECT_EQ(log.order.back(), kFrames);
  EXPECT_TRUE(std::is_sorted(log.order.begin(), log.order.end()));
}

// An earlier reader of the durable `durable`_medium (made as a bridge
// makes it, with `options`): fetches `fetch` messages, acknowledges those
// whose reading `acknowledge` says, hands the rest back at once (a
// negative acknowledgement: due again before anything new), and goes
// away without deleting the durable, as a killed or stopped reader does.
void ReadAsAnEarlierReader(const std::string& url, const std::string& subject,
                           const std::string& durable, const sluice::nats::BridgeOptions& options,
                           int fetch, const std::function<bool(std::uint64_t)>& acknowledge) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* subscription = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&connection, url.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_JetStream(&js, connection, nullptr), NATS_OK);
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = "SLUICE";
  sub_options.Config.Durable = durable.c_str();
  sub_options.Config.AckPolicy = js_AckExplicit;
  sub_options.Config.AckWait = options.jetstream_ack_wait.count() * 1'000'000;
  sub_options.Config.MaxAckPending = options.jetstream_max_ack_pending;
  jsErrCode error = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_PullSubscribe(&subscription, js, subject.c_str(), durable.c_str(), nullptr,
                             &sub_options, &error),
            NATS_OK)
      << error;
  int fetched = 0;
  while (fetched < fetch) {
    natsMsgList list{};
    ASSERT_EQ(natsSubscription_Fetch(&list, subscription, fetch - fetched, 5000, &error), NATS_OK);
    for (int m = 0; m < list.Count; ++m) {
      FrameView view;
      ASSERT_EQ(DecodeFrame(reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(list.Msgs[m])),
                            static_cast<std::size_t>(natsMsg_GetDataLength(list.Msgs[m])), &view),
                FrameError::kNone);
      if (acknowledge(view.header.sequence)) {
        ASSERT_EQ(natsMsg_AckSync(list.Msgs[m], nullptr, &error), NATS_OK);
      } else {
        ASSERT_EQ(natsMsg_Nak(list.Msgs[m], nullptr), NATS_OK);
      }
    }
    fetched += list.Count;
    natsMsgList_Destroy(&list);
  }
  ASSERT_EQ(natsConnection_Flush(connection), NATS_OK);
  natsSubscription_Destroy(subscription);  // not unsubscribed: the durable stays
  jsCtx_Destroy(js);
  natsConnection_Destroy(connection);
}

// A bridge that takes over a durable from an earlier reader is delivered
// again what that reader did not acknowledge, before what follows; the
// numbers it acknowledged never come. Here it acknowledged 1 to 10 and 15
// to 20 and handed back 11 to 14: the bridge dispatches 11 to 14 and 21 to
// 40, once each, and counts no gap (15 to 20 were not lost).
TEST_F(NatsJetStreamTest, ABridgeTakingOverADurableCountsNoGapForWhatItsPredecessorAcknowledged) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  PublishRaw(server_.Url(), ReadingFrames("js.takeover.medium", 1, 40, MessagePriority::MEDIUM));
  ASSERT_TRUE(Eventually([&] { return StoredMessages(server_.Url()) == 40; }));
  const sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  ASSERT_NO_FATAL_FAILURE(
      ReadAsAnEarlierReader(server_.Url(), "js.takeover.medium", "takeover_medium", options, 20,
                            [](std::uint64_t seq) { return seq <= 10 || seq >= 15; }));

  Bus bus;
  Bridge receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "takeover";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.takeover", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  ASSERT_TRUE(Eventually([&] { return log.Size() >= 24; })) << log.Size() << " dispatched";
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  const auto streams = receiver.GetStatistics().streams;
  std::lock_guard<std::mutex> lock(log.mutex);
  std::vector<std::uint64_t> expected{11, 12, 13, 14};
  for (std::uint64_t seq = 21; seq <= 40; ++seq) expected.push_back(seq);
  std::vector<std::uint64_t> dispatched = log.order;
  std::sort(dispatched.begin(), dispatched.end());
  EXPECT_EQ(dispatched, expected);
  EXPECT_EQ(streams.gaps, 0u);
  EXPECT_EQ(streams.duplicates, 0u);
}

// What a receiver with a state file on the durable "restart" dispatched
// and counted in one run: it reads until `count` readings came (and
// `also` holds of it, if given).
struct RestartRun {
  std::vector<std::uint64_t> order;
  sluice::nats::StreamCounts streams;
};
void ReceiveOnce(const std::string& url, const std::string& state, std::uint64_t count,
                 RestartRun* run, const std::function<bool(Bridge&)>& also = nullptr) {
  sluice::nats::BridgeOptions options = OptionsFor(url);
  options.stream_state_path = state;
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "restart";
  Bus bus;
  Bridge receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.restart", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  ASSERT_TRUE(Eventually([&] { return log.Size() >= count && (!also || also(receiver)); }))
      << log.Size() << " dispatched";
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  run->streams = receiver.GetStatistics().streams;
  std::lock_guard<std::mutex> lock(log.mutex);
  run->order = log.order;
}

// Runs `change` (what happens to the stream while the receiver is down)
// between a receiver's run over readings 1 to 50 and its restart, which
// reads `count` readings; the restart's run. Its state file: `state`, or
// one of its own.
void RestartAround(const std::string& url, const std::function<void()>& change, std::uint64_t count,
                   RestartRun* second, std::string state = "") {
  ScratchDirectory scratch;
  if (state.empty()) state = scratch.File("streams");
  PublishRaw(url, ReadingFrames("js.restart.medium", 1, 50, MessagePriority::MEDIUM));
  RestartRun first;
  ASSERT_NO_FATAL_FAILURE(ReceiveOnce(url, state, 50, &first));
  ASSERT_EQ(first.order.size(), 50u);
  change();
  ASSERT_NO_FATAL_FAILURE(ReceiveOnce(url, state, count, second));
}

// A receiver restarted with its stream table in a state file
// (stream_state_path) on a stream that keeps 100 messages: what the stream
// discarded while no one read it is counted as gaps, exactly; a bridge
// without the file cannot know (its table starts at the first frame).
TEST_F(NatsJetStreamTest, ARestartedReceiverCountsWhatTheStreamDiscardedWhileItWasDown) {
  ASSERT_TRUE(MakeStream(server_.Url(), /*max_messages=*/100));
  RestartRun second;
  ASSERT_NO_FATAL_FAILURE(RestartAround(
      server_.Url(),
      [&] {
        // The stream keeps 101 to 200, so 51 to 100 are lost.
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 51, 200, MessagePriority::MEDIUM));
        ASSERT_TRUE(Eventually([&] { return StoredMessages(server_.Url()) == 100; }));
      },
      100, &second));
  std::printf("[ jetstream] restarted: %zu dispatched, %llu counted as gaps\n", second.order.size(),
              static_cast<unsigned long long>(second.streams.gaps));
  EXPECT_EQ(second.streams.streams_restored, 1u);
  EXPECT_EQ(second.streams.gaps, 50u);
  ASSERT_EQ(second.order.size(), 100u);
  EXPECT_EQ(second.order.front(), 101u);
  EXPECT_EQ(second.order.back(), 200u);
}

// Purged while the receiver was down: 51 to 100 sent, the stream purged,
// 101 to 110 sent. The purge moves the durable's stream position, not its
// deliveries: the receiver was still its last reader, and counts the 50.
TEST_F(NatsJetStreamTest, ARestartedReceiverCountsWhatAPurgeRemovedWhileItWasDown) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  RestartRun second;
  ASSERT_NO_FATAL_FAILURE(RestartAround(
      server_.Url(),
      [&] {
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 51, 100, MessagePriority::MEDIUM));
        ASSERT_TRUE(PurgeStream(server_.Url()));
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 101, 110, MessagePriority::MEDIUM));
      },
      10, &second));
  EXPECT_EQ(second.streams.gaps, 50u);
  EXPECT_EQ(second.order.front(), 101u);
}

// The last message the durable delivered before the receiver stopped was
// no frame it took (a heartbeat of its stream, which a JetStream route
// refuses): it is still the durable's last reader, and counts what the
// stream discarded while it was down.
TEST_F(NatsJetStreamTest, ALastMessageNotTakenLeavesTheReceiverTheDurablesLastReader) {
  ASSERT_TRUE(MakeStream(server_.Url(), /*max_messages=*/100));
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  std::string beat;
  ASSERT_TRUE(sluice::nats::detail::EncodeHeartbeat(0xCD, 5, MessagePriority::MEDIUM, 50, 50,
                                                    sluice::nats::FrameKey{}, "", beat));
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 1, 50, MessagePriority::MEDIUM));
  PublishRaw(server_.Url(), {{"js.restart.medium", beat}});
  RestartRun first;
  constexpr auto kUnknownType = static_cast<std::size_t>(FrameError::kUnknownType);
  // Until the heartbeat was delivered too (refused, terminated).
  ASSERT_NO_FATAL_FAILURE(ReceiveOnce(server_.Url(), state, 50, &first, [](Bridge& receiver) {
    return receiver.GetStatistics().rejected[kUnknownType] >= 1;
  }));
  ASSERT_EQ(first.order.size(), 50u);
  // 51 to 200 while down: the stream keeps 101 to 200 (and not the beat).
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 51, 200, MessagePriority::MEDIUM));
  RestartRun second;
  ASSERT_NO_FATAL_FAILURE(ReceiveOnce(server_.Url(), state, 100, &second));
  EXPECT_EQ(second.streams.gaps, 50u);
}

// The stream and its durable deleted and made again while the receiver was
// down, and read by another receiver (without a file) as far as the first
// had read the old one: the durable is another, so the first receiver's
// restored streams are taken over, and no gap is counted for what the
// other took.
TEST_F(NatsJetStreamTest, ADurableMadeAgainIsNotTheOneTheReceiverLeft) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  RestartRun second;
  ASSERT_NO_FATAL_FAILURE(RestartAround(
      server_.Url(),
      [&] {
        ASSERT_TRUE(DeleteStream(server_.Url()));
        ASSERT_TRUE(MakeStream(server_.Url()));
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 51, 100, MessagePriority::MEDIUM));
        RestartRun other;
        ASSERT_NO_FATAL_FAILURE(ReceiveOnce(server_.Url(), "", 50, &other));
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 101, 110, MessagePriority::MEDIUM));
      },
      10, &second));
  EXPECT_EQ(second.streams.gaps, 0u);
  EXPECT_EQ(second.order.front(), 101u);
}

// Another receiver (without a file) takes 51 to 100 while the first is
// down; the first, started again, inherits its stream and stops before any
// frame comes; started once more, it is the durable's last reader, and its
// stream is still inherited: 51 to 100 are no gaps.
TEST_F(NatsJetStreamTest, AStreamInheritedStaysInheritedAcrossARunWithNoFrame) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  RestartRun second;
  ASSERT_NO_FATAL_FAILURE(RestartAround(
      server_.Url(),
      [&] {
        PublishRaw(server_.Url(),
                   ReadingFrames("js.restart.medium", 51, 100, MessagePriority::MEDIUM));
        RestartRun other;
        ASSERT_NO_FATAL_FAILURE(ReceiveOnce(server_.Url(), "", 50, &other));
      },
      0, &second, state));
  RestartRun third;
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 101, 110, MessagePriority::MEDIUM));
  ASSERT_NO_FATAL_FAILURE(ReceiveOnce(server_.Url(), state, 10, &third));
  EXPECT_EQ(third.streams.gaps, 0u);
  EXPECT_EQ(third.order.size(), 10u);
}

// A state file whose durable places are all used (21 routes, 3 durables
// each, and the route read here): a receiver started again with a new route
// subscribed before the one it read gives the new durables the places of
// none it reads, so the purge while it was down is still counted.
TEST_F(NatsJetStreamTest, ANewDurableTakesNoPlaceOfOneTheReceiverReadsWhenTheFileIsFull) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  // Receives the routes `names` ("js.<name>", durable <name>), subscribed in
  // that order, with the file, until `count` readings came; its gaps.
  const auto run = [&](const std::vector<std::string>& names, std::uint64_t count) {
    sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
    options.stream_state_path = state;
    Bus bus;
    Bridge receiver(bus, options);
    for (const std::string& name : names) {
      sluice::nats::ReceiveOptions route;
      route.stream = "SLUICE";
      route.durable = name;
      EXPECT_TRUE(receiver.Receive<SensorReading>("js." + name, kSensorType, route));
    }
    ReadingLog log;
    auto handle = log.Follow(bus);
    EXPECT_TRUE(handle.IsValid());
    EXPECT_EQ(receiver.Start(), NATS_OK);
    Consumer<Bus> consumer(bus);
    EXPECT_TRUE(Eventually([&] { return log.Size() >= count; })) << log.Size() << " dispatched";
    (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
    consumer.Stop();
    return receiver.GetStatistics().streams.gaps;
  };
  // "restart" first: its durables hold the file's first places; 20 more
  // routes leave one place free.
  std::vector<std::string> first{"restart"};
  for (std::size_t i = 0; i < StreamStateFile::kMaxDurables / 3 - 1; ++i) {
    first.push_back("filler" + std::to_string(i));
  }
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 1, 50, MessagePriority::MEDIUM));
  EXPECT_EQ(run(first, 50), 0u);
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 51, 100, MessagePriority::MEDIUM));
  ASSERT_TRUE(PurgeStream(server_.Url()));
  PublishRaw(server_.Url(), ReadingFrames("js.restart.medium", 101, 110, MessagePriority::MEDIUM));
  // The newcomer's three durables, subscribed first: one free place, and
  // two of the fillers'.
  EXPECT_EQ(run({"newcomer", "restart"}, 10), 50u);
}

// Two receivers, each with its own state file, read one durable in turns:
// each takes over from the other, and counts no gap for what the other
// took in between (nothing is lost); a loss after the first frame the
// last one is delivered is counted.
TEST_F(NatsJetStreamTest, ReceiversTakingTurnsWithTheirOwnStateFilesCountOnlyRealLosses) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  ScratchDirectory scratch;
  // Reads until `count` readings came; their gaps.
  const auto turn = [&](const std::string& state, std::uint64_t count) {
    RestartRun run;
    ReceiveOnce(server_.Url(), scratch.File(state), count, &run);
    EXPECT_EQ(run.order.size(), count);
    return run.streams.gaps;
  };
  const auto send = [&](std::uint64_t first, std::uint64_t last) {
    PublishRaw(server_.Url(),
               ReadingFrames("js.restart.medium", first, last, MessagePriority::MEDIUM));
  };
  send(1, 50);
  EXPECT_EQ(turn("a", 50), 0u);
  send(51, 100);
  EXPECT_EQ(turn("b", 50), 0u);
  send(101, 150);
  EXPECT_EQ(turn("a", 50), 0u) << "51 to 100 went to the other receiver";
  send(151, 200);
  EXPECT_EQ(turn("b", 50), 0u) << "101 to 150 went to the other receiver";
  // 221 to 230 never reach the stream: a loss after the first frame
  // delivered to this receiver is a gap.
  send(201, 220);
  send(231, 250);
  EXPECT_EQ(turn("a", 40), 10u);
}

// Publishes the stream answers with an error (here: no stream yet, as
// while a restarted server recovers its streams) are published again by
// the resender until the stream takes them: none is lost, none stored twice.
TEST_F(NatsJetStreamTest, PublishesRefusedForWantOfAStreamAreSentAgainUntilItExists) {
  constexpr std::uint64_t kReadings = 20;
  Bus sender_bus;
  Bridge sender(sender_bus, OptionsFor(server_.Url()));
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(sender.Forward<SensorReading>("js.late", kSensorType, at_least_once));
  ASSERT_EQ(sender.Start(), NATS_OK);
  for (std::uint64_t seq = 1; seq <= kReadings; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                               MessagePriority::MEDIUM));
  }
  while (sender_bus.ProcessBatch() > 0) {
  }
  // Every reading refused and sent again at least once, on average.
  ASSERT_TRUE(Eventually([&] { return sender.GetStatistics().jetstream_resent >= kReadings; }))
      << "sent again " << sender.GetStatistics().jetstream_resent;
  ASSERT_TRUE(MakeStream(server_.Url()));

  Bus bus;
  Bridge receiver(bus, OptionsFor(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "late";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.late", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  ASSERT_TRUE(Eventually([&] { return log.Size() >= kReadings; }))
      << "dispatched " << log.Size() << " of " << kReadings;
  const auto sent = sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_EQ(sent.stream_acks, NATS_OK);
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  server_.Stop();
  const auto stats = sender.GetStatistics();
  EXPECT_EQ(stats.send_dropped[static_cast<std::size_t>(MessagePriority::MEDIUM)], 0u);
  std::lock_guard<std::mutex> lock(log.mutex);
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : log.order) ++times[seq];
  EXPECT_EQ(times.size(), kReadings);
  for (std::uint64_t seq = 1; seq <= kReadings; ++seq) EXPECT_EQ(times[seq], 1) << seq;
}

// A receiver shut down mid-stream leaves its durable consumers on the
// server: a new bridge on the same durable goes on from where the first
// stopped, losing nothing and dispatching nothing the first had (a
// durable deleted at Shutdown would start again from the stream's start).
TEST_F(NatsJetStreamTest, ADurableOutlivesItsReceiverAndANewOneGoesOn) {
  constexpr std::uint64_t kReadings = 200;
  ASSERT_TRUE(MakeStream(server_.Url()));
  {
    Bus bus;
    Bridge sender(bus, OptionsFor(server_.Url()));
    sluice::nats::ForwardOptions at_least_once;
    at_least_once.jetstream = true;
    ASSERT_TRUE(sender.Forward<SensorReading>("js.resume", kSensorType, at_least_once));
    ASSERT_EQ(sender.Start(), NATS_OK);
    for (std::uint64_t seq = 1; seq <= kReadings; ++seq) {
      ASSERT_TRUE(bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                          MessagePriority::MEDIUM));
    }
    const auto sent = sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
    ASSERT_EQ(sent.stream_acks, NATS_OK);
  }
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "resume";
  ReadingLog first_log;
  ReadingLog second_log;
  {
    Bus bus;
    Bridge first(bus, OptionsFor(server_.Url()));
    ASSERT_TRUE(first.Receive<SensorReading>("js.resume", kSensorType, from_stream));
    auto handle = first_log.Follow(bus);
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(first.Start(), NATS_OK);
    Consumer<Bus> consumer(bus);
    ASSERT_TRUE(Eventually([&] { return first_log.Size() >= kReadings / 4; }));
    consumer.Stop();
    (void)first.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  {
    Bus bus;
    Bridge second(bus, OptionsFor(server_.Url()));
    ASSERT_TRUE(second.Receive<SensorReading>("js.resume", kSensorType, from_stream));
    auto handle = second_log.Follow(bus);
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(second.Start(), NATS_OK);
    Consumer<Bus> consumer(bus);
    ASSERT_TRUE(Eventually([&] { return first_log.Size() + second_log.Size() >= kReadings; }))
        << "dispatched " << first_log.Size() << " + " << second_log.Size() << " of " << kReadings;
    consumer.Stop();
    (void)second.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  server_.Stop();
  std::printf("[ jetstream] %zu readings before the restart, %zu after\n", first_log.Size(),
              second_log.Size());
  ASSERT_LT(first_log.Size(), kReadings) << "the first read everything: the test proves nothing";
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : first_log.order) ++times[seq];
  for (const std::uint64_t seq : second_log.order) ++times[seq];
  EXPECT_EQ(times.size(), kReadings);
  for (const auto& [seq, count] : times) EXPECT_EQ(count, 1) << seq;
}

// Two receiving bridges share one durable consumer, so each hears part of
// the stream: neither counts the other's part as gaps.
TEST_F(NatsJetStreamTest, BridgesSharingADurableCountNoGaps) {
  constexpr std::uint64_t kReadings = 300;
  ASSERT_TRUE(MakeStream(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "shared";
  from_stream.shared_durable = true;
  Bus bus_a;
  Bus bus_b;
  Bridge receiver_a(bus_a, OptionsFor(server_.Url()));
  Bridge receiver_b(bus_b, OptionsFor(server_.Url()));
  ASSERT_TRUE(receiver_a.Receive<SensorReading>("js.shared", kSensorType, from_stream));
  ASSERT_TRUE(receiver_b.Receive<SensorReading>("js.shared", kSensorType, from_stream));
  ReadingLog log_a;
  ReadingLog log_b;
  auto handle_a = log_a.Follow(bus_a);
  auto handle_b = log_b.Follow(bus_b);
  ASSERT_TRUE(handle_a.IsValid() && handle_b.IsValid());
  ASSERT_EQ(receiver_a.Start(), NATS_OK);
  ASSERT_EQ(receiver_b.Start(), NATS_OK);
  Consumer<Bus> consumer_a(bus_a);
  Consumer<Bus> consumer_b(bus_b);

  Bus sender_bus;
  Bridge sender(sender_bus, OptionsFor(server_.Url()));
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(sender.Forward<SensorReading>("js.shared", kSensorType, at_least_once));
  ASSERT_EQ(sender.Start(), NATS_OK);
  for (std::uint64_t seq = 1; seq <= kReadings; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                               MessagePriority::MEDIUM));
    if (seq % 64 == 0) (void)sender_bus.ProcessBatch();
  }
  while (sender_bus.ProcessBatch() > 0) {
  }
  ASSERT_TRUE(Eventually([&] { return log_a.Size() + log_b.Size() >= kReadings; }))
      << "dispatched " << log_a.Size() + log_b.Size() << " of " << kReadings;
  (void)sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  (void)receiver_a.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  (void)receiver_b.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer_a.Stop();
  consumer_b.Stop();
  server_.Stop();
  const auto a = receiver_a.GetStatistics();
  const auto b = receiver_b.GetStatistics();
  std::printf("[ jetstream] shared durable: %zu and %zu readings\n", log_a.Size(), log_b.Size());
  // Only meaningful if each heard part of the stream.
  ASSERT_GT(log_a.Size(), 0u);
  ASSERT_GT(log_b.Size(), 0u);
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : log_a.order) ++times[seq];
  for (const std::uint64_t seq : log_b.order) ++times[seq];
  EXPECT_EQ(times.size(), kReadings);
  for (const auto& [seq, count] : times) EXPECT_EQ(count, 1) << seq;
  EXPECT_EQ(a.streams.gaps + b.streams.gaps, 0u);
  EXPECT_EQ(a.streams.reordered + b.streams.reordered, 0u);
}

// A message handed back, then admitted: noted as seen once admitted, so
// that a copy of it coming again (here the same frame stored in the stream
// again, as a redelivery after a lost acknowledgement would) is refused as
// a duplicate, not dispatched again.
TEST_F(NatsJetStreamTest, AMessageAdmittedAfterItsHandBackIsRefusedWhenItComesAgain) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  RefusingBus bus;
  bus.refuse_up_to.store(1);
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 200ms;
  sluice::nats::Bridge<RefusingBus> receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "again";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.again", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RefusingBus> consumer(bus);
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  PublishRaw(server_.Url(), {{"js.again.low", ReadingFrame(1, 1, MessagePriority::LOW)},
                             {"js.again.low", ReadingFrame(2, 2, MessagePriority::LOW)}});
  ASSERT_TRUE(Eventually([&] { return receiver.GetStatistics().handed_back[kLow] >= 1; }))
      << "reading 1 was not handed back: the test proves nothing";
  bus.refuse_up_to.store(0);
  ASSERT_TRUE(Eventually([&] { return log.Size() >= 2; })) << "dispatched " << log.Size();
  // Reading 1 again, then 3, which comes after it on the one fetch thread.
  PublishRaw(server_.Url(), {{"js.again.low", ReadingFrame(1, 1, MessagePriority::LOW)},
                             {"js.again.low", ReadingFrame(3, 3, MessagePriority::LOW)}});
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(log.mutex);
    return std::find(log.order.begin(), log.order.end(), 3u) != log.order.end();
  })) << "reading 3 was not dispatched";
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  std::lock_guard<std::mutex> lock(log.mutex);
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : log.order) ++times[seq];
  EXPECT_EQ(times[1], 1);
  EXPECT_EQ(times[2], 1);
  EXPECT_EQ(times[3], 1);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kDuplicate)], 1u);
}

// A bus of readings with provenance that refuses, as a full one would,
// the first try of each reading numbered up to `refuse_once_up_to`: each
// is handed back once, and admitted when the stream delivers it again.
using RemotePayload = std::variant<sluice::nats::Remote<SensorReading>>;
using RemoteBus = sluice::MpscBus<RemotePayload, 64>;
class RefusingOnceBus : public RemoteBus {
 public:
  template <typename Message>
  sluice::PublishResult PublishAttempt(Message&& message, std::uint32_t sender,
                                       MessagePriority priority) {
    const std::uint64_t seq = message.value.seq;
    // Relaxed: the fetch thread's own record; the test reads it after Shutdown.
    if (seq <= refuse_once_up_to && !refused[seq].exchange(true, std::memory_order_relaxed)) {
      return sluice::PublishResult(sluice::PublishOutcome::kRefusedFull, priority);
    }
    return RemoteBus::PublishAttempt(std::forward<Message>(message), sender, priority);
  }
  static constexpr std::uint64_t refuse_once_up_to = 1;
  std::atomic<bool> refused[refuse_once_up_to + 1] = {};
};

}  // namespace
}  // namespace bridge_jetstream_test

template <>
struct sluice::nats::detail::BusInfo<bridge_jetstream_test::RefusingOnceBus>
    : sluice::nats::detail::BusInfo<bridge_jetstream_test::RemoteBus> {};

namespace bridge_jetstream_test {
namespace {

// Over JetStream a message's provenance carries its sequence in the stream
// and how many times the stream delivered it: reading 1, handed back once,
// arrives on its second delivery; reading 2 on its first.
TEST_F(NatsJetStreamTest, ProvenanceCarriesTheStreamSequenceAndTheDeliveryCount) {
  static_assert(sizeof(sluice::nats::Remote<std::uint8_t>) == 72,
                "docs/nats.md gives Remote<T>'s size");
  ASSERT_TRUE(MakeStream(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "provenance";
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 200ms;  // the pause before a handed-back message comes again
  RefusingOnceBus bus;
  sluice::nats::Bridge<RefusingOnceBus> receiver(bus, options);
  ASSERT_TRUE(
      receiver.Receive<sluice::nats::Remote<SensorReading>>("js.prov", kSensorType, from_stream));
  std::mutex mutex;
  std::map<std::uint64_t, sluice::nats::Provenance> arrived;  // by seq, guarded by mutex
  auto handle = bus.Subscribe<sluice::nats::Remote<SensorReading>>(
      [&](const sluice::nats::Remote<SensorReading>& m) {
        std::lock_guard<std::mutex> lock(mutex);
        arrived[m.value.seq] = m.provenance;
      });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RefusingOnceBus> consumer(bus);
  PublishRaw(server_.Url(), {{"js.prov.low", ReadingFrame(1, 1, MessagePriority::LOW)},
                             {"js.prov.low", ReadingFrame(2, 2, MessagePriority::LOW)}});
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mutex);
    return arrived.size() == 2;
  })) << "both readings dispatched";
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(arrived[1].stream_sequence, 1u);
  EXPECT_EQ(arrived[1].deliveries, 2u) << "handed back once";
  EXPECT_EQ(arrived[2].stream_sequence, 2u);
  EXPECT_EQ(arrived[2].deliveries, 1u);
  EXPECT_EQ(arrived[1].sequence, 1u);  // the frame's own number is kept beside them
  EXPECT_EQ(arrived[1].origin_id, 0xCDu);
  EXPECT_GE(receiver.GetStatistics().handed_back[static_cast<std::size_t>(MessagePriority::LOW)],
            1u);
}

// A message handed back by one bridge, which then stops, comes to the next
// bridge on the durable after that bridge has admitted a number past the
// duplicate check's window: it was never admitted, so it is admitted
// (behind the window, at least once), not refused as stale and lost.
TEST_F(NatsJetStreamTest, AMessageNeverAdmittedIsAdmittedByTheNextBridgeHoweverFarBehind) {
  const std::uint64_t kJump = sluice::nats::StreamTracker::kWindow + 100;
  ASSERT_TRUE(MakeStream(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "next";
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 200ms;
  constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
  {
    RefusingBus bus;
    bus.refuse_up_to.store(1);
    sluice::nats::Bridge<RefusingBus> first(bus, options);
    ASSERT_TRUE(first.Receive<SensorReading>("js.next", kSensorType, from_stream));
    ASSERT_EQ(first.Start(), NATS_OK);
    PublishRaw(server_.Url(), {{"js.next.low", ReadingFrame(1, 1, MessagePriority::LOW)}});
    ASSERT_TRUE(Eventually([&] { return first.GetStatistics().handed_back[kLow] >= 1; }));
    (void)first.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  // kJump + 1 confirms the jump (a frame more than a window ahead is held
  // until a later one confirms it).
  PublishRaw(server_.Url(),
             {{"js.next.low", ReadingFrame(2, 2, MessagePriority::LOW)},
              {"js.next.low", ReadingFrame(kJump, kJump, MessagePriority::LOW)},
              {"js.next.low", ReadingFrame(kJump + 1, kJump + 1, MessagePriority::LOW)}});
  // The next bridge refuses reading 1 until the jump is taken, so that
  // reading 1 is admitted behind the window whichever the stream sends first.
  RefusingBus bus;
  bus.refuse_up_to.store(1);
  sluice::nats::Bridge<RefusingBus> second(bus, options);
  ASSERT_TRUE(second.Receive<SensorReading>("js.next", kSensorType, from_stream));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(second.Start(), NATS_OK);
  Consumer<RefusingBus> consumer(bus);
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(log.mutex);
    return std::find(log.order.begin(), log.order.end(), kJump + 1) != log.order.end();
  })) << "the jump was not dispatched";
  bus.refuse_up_to.store(0);
  ASSERT_TRUE(Eventually([&] { return log.Size() >= 4; }))
      << "dispatched " << log.Size() << " of 4";
  (void)second.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  server_.Stop();
  const auto stats = second.GetStatistics();
  std::lock_guard<std::mutex> lock(log.mutex);
  std::map<std::uint64_t, int> times;
  for (const std::uint64_t seq : log.order) ++times[seq];
  EXPECT_EQ(times.size(), 4u);
  EXPECT_EQ(times[1], 1);
  EXPECT_EQ(times[2], 1);
  EXPECT_EQ(times[kJump], 1);
  EXPECT_EQ(times[kJump + 1], 1);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kStale)], 0u);
  EXPECT_EQ(stats.jetstream_behind_window, 1u);
}

// A fetch error (here: the durable consumers deleted from outside) makes
// the fetch thread pause for reconnect_wait; Shutdown stops it at once
// rather than waiting the pause out (60 s here, against a 200 ms timeout:
// the bound checked is far above Shutdown's own few waits).
TEST_F(NatsJetStreamTest, ShutdownDoesNotWaitOutAFetchThreadsPause) {
  ASSERT_TRUE(MakeStream(server_.Url()));
  Bus bus;
  BridgeOptions options = OptionsFor(server_.Url());
  options.reconnect_wait = 60s;
  Bridge receiver(bus, options);
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "gone";
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.gone", kSensorType, from_stream));
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  {
    natsConnection* connection = nullptr;
    jsCtx* js = nullptr;
    ASSERT_EQ(natsConnection_ConnectTo(&connection, server_.Url().c_str()), NATS_OK);
    ASSERT_EQ(natsConnection_JetStream(&js, connection, nullptr), NATS_OK);
    for (const char* name : {"gone_low", "gone_medium", "gone_high"}) {
      EXPECT_EQ(js_DeleteConsumer(js, "SLUICE", name, nullptr, nullptr), NATS_OK);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(connection);
  }
  std::this_thread::sleep_for(500ms);  // the fetches fail (at most 100 ms each) and pause
  const auto start = std::chrono::steady_clock::now();
  (void)receiver.Shutdown(200ms);
  const auto took = std::chrono::steady_clock::now() - start;
  consumer.Stop();
  server_.Stop();
  EXPECT_LT(took, 30s) << "Shutdown waited out the fetch thread's 60 s pause";
}

}  // namespace
}  // namespace bridge_jetstream_test

namespace bridge_jetstream_test {
namespace {

// At least once through a receiver's crash: a stream of readings is read by
// a receiver process (sluice_nats_peer backlog) whose one subscriber takes
// 2 ms a reading, so its 256-slot bus holds a backlog; it is killed with
// SIGKILL three times, each time with that backlog in its bus, and a fast
// one reads on. By sequence number, every reading is dispatched: none
// lost. What a killed receiver dispatched and the server had not yet seen
// acknowledged (the reading its subscriber was running, and acknowledgements
// still in the client's buffer) is delivered again; acknowledgements go out
// in dispatch order, so those are the last readings it dispatched, never
// one before a reading the stream saw acknowledged. Within one receiver
// nothing is dispatched twice.
// A receiving bus that tells the bridge what it dispatched.
struct AckTraits : sluice::DefaultBusTraits {
  using Observer = sluice::nats::AckOnDispatch<>;
};
using AckBus =
    sluice::AsyncBus<sluice_nats_test::Payload, 256, sluice::ProducerModel::kMulti, AckTraits>;

// A route of the stream SLUICE through `durable`, acknowledged after dispatch.
sluice::nats::ReceiveOptions OnDispatch(const std::string& durable) {
  sluice::nats::ReceiveOptions route;
  route.stream = "SLUICE";
  route.durable = durable;
  route.ack = sluice::nats::AckTiming::kOnDispatch;
  return route;
}

class NatsDispatchAckTest : public NatsJetStreamTest {
 protected:
  static constexpr std::uint64_t kReadings = 600;

  // Stores readings 1..count on `subject` in the stream SLUICE (made here
  // on first use), through a sending bridge.
  void Store(const std::string& subject, std::uint64_t count) {
    ASSERT_TRUE(MakeStream(server_.Url()));
    Bus bus;
    Bridge sender(bus, OptionsFor(server_.Url()));
    sluice::nats::ForwardOptions at_least_once;
    at_least_once.jetstream = true;
    ASSERT_TRUE(sender.Forward<SensorReading>(subject, kSensorType, at_least_once));
    ASSERT_EQ(sender.Start(), NATS_OK);
    for (std::uint64_t seq = 1; seq <= count; ++seq) {
      while (!bus.PublishWithPriority(SensorReading{1, 0.0f, seq}, kTestSender,
                                      MessagePriority::MEDIUM)) {
        (void)bus.ProcessBatch();
      }
    }
    const auto sent = sender.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
    ASSERT_EQ(sent.stream_acks, NATS_OK);
  }
  void SendReadings() { Store("js.backlog", kReadings); }

  // Starts a receiver (its stream table in `state_path`, if not empty);
  // false if it never says it is ready.
  bool StartReceiver(sluice_test::ChildProcess& receiver, const std::string& ack, int ms,
                     const std::string& state_path = "") {
    std::vector<std::string> args{SLUICE_NATS_PEER, "backlog", server_.Url(),
                                  "backlog",        ack,       std::to_string(ms)};
    if (!state_path.empty()) args.push_back(state_path);
    if (!receiver.Start(args, /*capture=*/true)) return false;
    std::string line;
    return receiver.WaitForLine("ready", &line, kHangGuard);
  }

  // Reads "got=<seq> gaps=<gaps>" lines into `order` until `count` more
  // have come, or until `quiet` passes with none; how many came. `gaps`:
  // the most gaps any of them reported.
  static std::uint64_t ReadGot(sluice_test::ChildProcess& receiver,
                               std::vector<std::uint64_t>& order, std::uint64_t count,
                               std::chrono::milliseconds quiet, std::uint64_t* gaps = nullptr) {
    std::uint64_t got = 0;
    std::string line;
    while (got < count && receiver.ReadLine(&line, quiet)) {
      if (line.compare(0, 4, "got=") != 0) continue;
      order.push_back(std::stoull(line.substr(4)));
      const std::size_t at = line.find(" gaps=");
      if (gaps != nullptr && at != std::string::npos) {
        *gaps = std::max(*gaps, static_cast<std::uint64_t>(std::stoull(line.substr(at + 6))));
      }
      ++got;
    }
    return got;
  }

  // Kills `receiver` with SIGKILL, then reads what it printed before it died
  // into `order` (a reading it dispatched after the ones read so far is
  // one no later receiver may dispatch again), then reaps it.
  static void KillAndDrain(sluice_test::ChildProcess& receiver, std::vector<std::uint64_t>& order,
                           std::uint64_t* gaps = nullptr) {
    receiver.Signal(SIGKILL);
    (void)ReadGot(receiver, order, ~std::uint64_t{0}, kHangGuard, gaps);
    receiver.Kill(SIGKILL);
  }

  // Readings of 1..kReadings that no receiver dispatched.
  static std::uint64_t Missing(const std::vector<std::vector<std::uint64_t>>& orders) {
    std::set<std::uint64_t> seen;
    for (const auto& order : orders) seen.insert(order.begin(), order.end());
    std::uint64_t missing = 0;
    for (std::uint64_t seq = 1; seq <= kReadings; ++seq) missing += seen.count(seq) == 0 ? 1 : 0;
    return missing;
  }

  // The stream sequence up to which the durable `name` has seen every
  // message acknowledged; 0 if it cannot say.
  static std::uint64_t AckFloor(const std::string& url, const std::string& name) {
    natsConnection* connection = nullptr;
    jsCtx* js = nullptr;
    std::uint64_t floor = 0;
    if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return 0;
    if (natsConnection_JetStream(&js, connection, nullptr) == NATS_OK) {
      jsConsumerInfo* info = nullptr;
      jsErrCode error = static_cast<jsErrCode>(0);
      if (js_GetConsumerInfo(&info, js, "SLUICE", name.c_str(), nullptr, &error) == NATS_OK) {
        floor = info->AckFloor.Stream;
        jsConsumerInfo_Destroy(info);
      }
      jsCtx_Destroy(js);
    }
    natsConnection_Destroy(connection);
    return floor;
  }
};

TEST_F(NatsDispatchAckTest, AReceiverKilledWithABacklogLosesNothing) {
  constexpr int kKills = 3;
  ASSERT_NO_FATAL_FAILURE(SendReadings());
  // Each receiver's readings, in its dispatch order; the last is the fast one.
  std::vector<std::vector<std::uint64_t>> orders(kKills + 1);
  // Nothing is lost, so no receiver may count a gap, though each takes
  // over the durable from a killed one: the numbers the killed one
  // acknowledged never come again, between the ones it did not.
  std::vector<std::uint64_t> gaps(kKills + 1, 0);
  for (int kill = 0; kill < kKills; ++kill) {
    sluice_test::ChildProcess receiver;
    ASSERT_TRUE(StartReceiver(receiver, "dispatch", 2));
    // 40 readings at 2 ms each: the bus has filled behind them.
    ASSERT_EQ(ReadGot(receiver, orders[kill], 40, kHangGuard, &gaps[kill]), 40u)
        << "kill " << kill + 1;
    KillAndDrain(receiver, orders[kill], &gaps[kill]);
    std::printf("[ jetstream] kill %d after %zu readings, with a backlog in its bus\n", kill + 1,
                orders[kill].size());
    // The second receiver starts at once: it hears new readings before the
    // first one's unacknowledged ones (due again after the ack wait, 1 s),
    // and acknowledges a run of new ones. The third starts once all of the
    // second's are due again: it hears the unacknowledged runs on both
    // sides of that run before anything new.
    if (kill == 1) std::this_thread::sleep_for(1500ms);
  }
  sluice_test::ChildProcess last;
  ASSERT_TRUE(StartReceiver(last, "dispatch", 0));
  // The killed receivers' unacknowledged readings come again once the
  // stream's ack wait (1 s) has passed.
  while (Missing(orders) != 0 && ReadGot(last, orders[kKills], 1, kHangGuard, &gaps[kKills]) == 1) {
  }
  last.Kill(SIGTERM);
  EXPECT_EQ(Missing(orders), 0u);
  for (std::size_t r = 0; r < gaps.size(); ++r) {
    EXPECT_EQ(gaps[r], 0u) << "receiver " << r << " counted gaps, though nothing was lost";
  }
  std::uint64_t again = 0;
  for (std::size_t r = 0; r < orders.size(); ++r) {
    const std::set<std::uint64_t> once(orders[r].begin(), orders[r].end());
    EXPECT_EQ(once.size(), orders[r].size()) << "receiver " << r << " dispatched one twice";
    EXPECT_TRUE(std::all_of(orders[r].begin(), orders[r].end(),
                            [](std::uint64_t seq) { return seq >= 1 && seq <= kReadings; }));
    // Dispatched again by a later receiver: a tail of this one's order.
    std::set<std::uint64_t> later;
    for (std::size_t l = r + 1; l < orders.size(); ++l)
      later.insert(orders[l].begin(), orders[l].end());
    bool in_tail = false;
    for (const std::uint64_t seq : orders[r]) {
      const bool repeated = later.count(seq) != 0;
      EXPECT_FALSE(in_tail && !repeated)
          << "receiver " << r << ": reading " << seq
          << " was not delivered again, though one dispatched before it was";
      in_tail = in_tail || repeated;
      again += repeated ? 1 : 0;
    }
  }
  std::printf("[ jetstream] %llu readings, none lost; %llu dispatched again after a kill\n",
              static_cast<unsigned long long>(kReadings), static_cast<unsigned long long>(again));
}

// The same crash with the receiver's stream table in a state file
// (stream_state_path): a JetStream route's streams stay out of it, so the
// restarted receiver admits the redeliveries of what the killed one never
// acknowledged instead of refusing them as duplicates (which would
// acknowledge them: lost).
TEST_F(NatsDispatchAckTest, AStateFileLosesNothingOfAKilledBacklog) {
  ASSERT_NO_FATAL_FAILURE(SendReadings());
  ScratchDirectory scratch;
  const std::string state = scratch.File("streams");
  std::vector<std::vector<std::uint64_t>> orders(3);
  for (int run = 0; run < 2; ++run) {
    sluice_test::ChildProcess receiver;
    ASSERT_TRUE(StartReceiver(receiver, "dispatch", 2, state));
    ASSERT_EQ(ReadGot(receiver, orders[run], 40, kHangGuard), 40u) << "run " << run;
    KillAndDrain(receiver, orders[run]);
  }
  sluice_test::ChildProcess last;
  ASSERT_TRUE(StartReceiver(last, "dispatch", 0, state));
  while (Missing(orders) != 0 && ReadGot(last, orders[2], 1, kHangGuard) == 1) {
  }
  last.Kill(SIGTERM);
  EXPECT_EQ(Missing(orders), 0u);
  for (std::size_t r = 0; r < orders.size(); ++r) {
    const std::set<std::uint64_t> once(orders[r].begin(), orders[r].end());
    EXPECT_EQ(once.size(), orders[r].size()) << "receiver " << r << " dispatched one twice";
  }
  // Across the kills, only the reading whose callback the kill cut short
  // (its last) comes again: each one dispatched before it is refused by
  // its stream sequence, kept in the file.
  for (std::size_t r = 0; r + 1 < orders.size(); ++r) {
    std::set<std::uint64_t> later;
    for (std::size_t l = r + 1; l < orders.size(); ++l) {
      later.insert(orders[l].begin(), orders[l].end());
    }
    for (std::size_t i = 0; i + 1 < orders[r].size(); ++i) {
      EXPECT_EQ(later.count(orders[r][i]), 0u)
          << "receiver " << r << "'s reading " << orders[r][i] << " was dispatched again";
    }
  }
}

// Two bridges on one bus, each with its own state file, each reading its
// own stream through a durable of the same name, acknowledged after
// dispatch: each message dispatched is kept in its own bridge's file. The
// second bridge's messages, withdrawn undispatched at Shutdown(0), are
// dispatched by the next bridge on that file, none refused.
TEST_F(NatsDispatchAckTest, EachBridgeOnABusKeepsItsOwnDispatchedMessages) {
  constexpr std::uint64_t kEach = 20;
  ASSERT_NO_FATAL_FAILURE(Store("js.first", kEach));
  ASSERT_TRUE(MakeNamedStream(server_.Url(), "OTHER", "other.>"));
  ScratchDirectory scratch;
  const auto options_with = [&](const std::string& file) {
    sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
    options.stream_state_path = scratch.File(file);
    return options;
  };
  sluice::nats::ReceiveOptions other = OnDispatch("same");
  other.stream = "OTHER";
  {
    AckBus bus;
    sluice::nats::Bridge<AckBus> first(bus, options_with("first"));
    sluice::nats::Bridge<AckBus> second(bus, options_with("second"));
    ASSERT_TRUE(first.Receive<SensorReading>("js.first", kSensorType, OnDispatch("same")));
    ASSERT_TRUE(second.Receive<SensorReading>("other.second", kSensorType, other));
    std::vector<std::uint64_t> dispatched;
    auto handle = bus.Subscribe<SensorReading>(
        [&dispatched](const SensorReading& reading) { dispatched.push_back(reading.seq); });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(first.Start(), NATS_OK);
    ASSERT_EQ(second.Start(), NATS_OK);
    // The first's 20 dispatched (and kept in its file); nothing of the
    // second's stream yet.
    ASSERT_TRUE(Eventually([&] {
      (void)bus.ProcessBatch();
      return dispatched.size() >= kEach;
    }));
    // Now the second's 20 reach the bus, and are withdrawn undispatched.
    PublishRaw(server_.Url(),
               ReadingFrames("other.second.medium", 1, kEach, MessagePriority::MEDIUM));
    ASSERT_TRUE(Eventually([&] { return bus.QueueDepth() >= kEach; }));
    (void)second.Shutdown(std::chrono::milliseconds(0));
    (void)first.Shutdown(std::chrono::milliseconds(0));
  }
  AckBus bus;
  sluice::nats::Bridge<AckBus> again(bus, options_with("second"));
  ASSERT_TRUE(again.Receive<SensorReading>("other.second", kSensorType, other));
  ReadingLog log;
  auto handle = log.Follow(bus);
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(again.Start(), NATS_OK);
  Consumer<AckBus> consumer(bus);
  EXPECT_TRUE(Eventually([&] { return log.Size() >= kEach; })) << log.Size() << " dispatched";
  (void)again.Shutdown(5s, sluice::nats::ShutdownDrain::kWaitForConsumer);
  consumer.Stop();
  EXPECT_EQ(log.Size(), kEach);
  EXPECT_EQ(again.GetStatistics().rejected[static_cast<std::size_t>(FrameError::kDuplicate)], 0u);
}

// The cheaper default, on the same crash: what the killed receiver's bus
// held was acknowledged on admission, so the stream never delivers it again
// (what kOnDispatch is for; docs/nats.md says which guarantee needs which).
TEST_F(NatsDispatchAckTest, AcknowledgedOnAdmissionWhatTheKilledBusHeldIsLost) {
  // Killed once the stream has seen kHeld more readings acknowledged than
  // the receiver has begun to dispatch: its bus holds them, whatever the
  // pace of its fetches. At 20 ms a reading, under 10 more are dispatched
  // in the 200 ms the kill could take on a loaded machine.
  constexpr std::uint64_t kHeld = 50;
  ASSERT_NO_FATAL_FAILURE(SendReadings());
  std::vector<std::vector<std::uint64_t>> orders(2);
  {
    sluice_test::ChildProcess receiver;
    ASSERT_TRUE(StartReceiver(receiver, "admission", 20));
    ASSERT_EQ(ReadGot(receiver, orders[0], 10, kHangGuard), 10u);
    ASSERT_TRUE(Eventually([&] {
      (void)ReadGot(receiver, orders[0], kReadings, 1ms);
      return AckFloor(server_.Url(), "backlog_medium") >= orders[0].size() + kHeld;
    })) << orders[0].size()
        << " dispatched, floor " << AckFloor(server_.Url(), "backlog_medium");
    KillAndDrain(receiver, orders[0]);
  }
  sluice_test::ChildProcess last;
  ASSERT_TRUE(StartReceiver(last, "admission", 0));
  // Everything the stream still has comes well within 3 s of quiet (its
  // ack wait is 1 s); what the killed bus held never does.
  (void)ReadGot(last, orders[1], kReadings, 3000ms);
  last.Kill(SIGTERM);
  std::printf("[ jetstream] acknowledged on admission: %llu of %llu readings lost\n",
              static_cast<unsigned long long>(Missing(orders)),
              static_cast<unsigned long long>(kReadings));
  EXPECT_GT(Missing(orders), 0u);
}

// What the server's durable consumer `name` has handed out and not seen
// acknowledged; -1 if it cannot say.
// What a receiving bridge did with the frames it was handed, for a failed
// check to say which of its paths ran.
std::string Accounting(const sluice::nats::BridgeStatisticsSnapshot& stats) {
  std::ostringstream out;
  const auto sum = [](const auto& counts) {
    std::uint64_t total = 0;
    for (const std::uint64_t count : counts) total += count;
    return total;
  };
  out << "received=" << stats.frames_received << " delivered=" << sum(stats.delivered)
      << " handed_back=" << sum(stats.handed_back) << " gave_up=" << sum(stats.jetstream_gave_up)
      << " behind_window=" << stats.jetstream_behind_window << " echo=" << stats.echo_suppressed
      << " disconnects=" << stats.disconnects << " filed=" << stats.dispatch_acks.filed
      << " acknowledged=" << stats.dispatch_acks.acknowledged
      << " withdrawn=" << stats.dispatch_acks.withdrawn;
  for (std::size_t error = 0; error < stats.rejected.size(); ++error) {
    if (stats.rejected[error] == 0) continue;
    out << " rejected[" << sluice::nats::ToString(static_cast<sluice::nats::FrameError>(error))
        << "]=" << stats.rejected[error];
  }
  return out.str();
}

std::int64_t AckPending(const std::string& url, const std::string& name) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  std::int64_t pending = -1;
  if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return -1;
  if (natsConnection_JetStream(&js, connection, nullptr) == NATS_OK) {
    jsConsumerInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    if (js_GetConsumerInfo(&info, js, "SLUICE", name.c_str(), nullptr, &error) == NATS_OK) {
      pending = info->NumAckPending;
      jsConsumerInfo_Destroy(info);
    }
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(connection);
  return pending;
}

// What a client says of the messages of one durable, read off the wire: a
// core subscription to the durable's acknowledgement subjects
// ($JS.ACK.SLUICE.<durable>.>) sees each acknowledgement, progress note,
// negative acknowledgement and termination the bridge sends, whatever the
// server then makes of it.
class AckWireWatch {
 public:
  AckWireWatch(const std::string& url, const std::string& durable) {
    if (natsConnection_ConnectTo(&connection_, url.c_str()) != NATS_OK) return;
    const std::string subject = "$JS.ACK.SLUICE." + durable + ".>";
    if (natsConnection_Subscribe(&subscription_, connection_, subject.c_str(),
                                 &AckWireWatch::OnMessage, this) != NATS_OK) {
      return;
    }
    ready_ = natsConnection_Flush(connection_) == NATS_OK;
  }
  ~AckWireWatch() {
    natsSubscription_Destroy(subscription_);
    natsConnection_Destroy(connection_);
  }
  AckWireWatch(const AckWireWatch&) = delete;
  AckWireWatch& operator=(const AckWireWatch&) = delete;

  bool Ready() const { return ready_; }
  // Acknowledgements (an empty body or "+ACK"), and terminations: what takes
  // a message off the server's pending list for good.
  std::uint64_t Acknowledged() const { return acknowledged_.load(); }
  std::uint64_t Terminated() const { return terminated_.load(); }
  std::uint64_t InProgress() const { return in_progress_.load(); }
  std::uint64_t Answers() const { return answers_.load(); }  // every kind

 private:
  static void OnMessage(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    auto* self = static_cast<AckWireWatch*>(closure);
    self->answers_.fetch_add(1);
    const int length = natsMsg_GetDataLength(message);
    const std::string body(natsMsg_GetData(message) == nullptr ? "" : natsMsg_GetData(message),
                           length < 0 ? 0 : static_cast<std::size_t>(length));
    if (body.empty() || body.rfind("+ACK", 0) == 0) {
      self->acknowledged_.fetch_add(1);
    } else if (body.rfind("+TERM", 0) == 0) {
      self->terminated_.fetch_add(1);
    } else if (body.rfind("+WPI", 0) == 0) {
      self->in_progress_.fetch_add(1);
    }
    natsMsg_Destroy(message);
  }

  natsConnection* connection_ = nullptr;
  natsSubscription* subscription_ = nullptr;
  bool ready_ = false;
  std::atomic<std::uint64_t> acknowledged_{0};
  std::atomic<std::uint64_t> terminated_{0};
  std::atomic<std::uint64_t> in_progress_{0};
  std::atomic<std::uint64_t> answers_{0};
};

// Acknowledged after dispatch, message by message: what the bus holds
// undispatched stays unacknowledged on the server, and each dispatch
// acknowledges exactly its message.
TEST_F(NatsDispatchAckTest, OnlyDispatchedMessagesAreAcknowledged) {
  constexpr std::uint64_t kHeld = 50;
  ASSERT_NO_FATAL_FAILURE(Store("js.held", kHeld));
  AckBus bus;
  sluice::nats::Bridge<AckBus> receiver(bus, OptionsFor(server_.Url()));
  const sluice::nats::ReceiveOptions route = OnDispatch("held");
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.held", kSensorType, route));
  std::vector<std::uint64_t> dispatched;
  auto handle = bus.Subscribe<SensorReading>(
      [&dispatched](const SensorReading& reading) { dispatched.push_back(reading.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  const sluice::nats::DispatchAcks& acks = bus.GetObserver().DispatchAcknowledgements();
  // Nothing dispatched yet: all in the bus, none acknowledged.
  ASSERT_TRUE(Eventually([&] { return acks.Counts().filed == kHeld; }));
  EXPECT_EQ(acks.Counts().acknowledged, 0u);
  EXPECT_EQ(bus.QueueDepth(), kHeld);
  EXPECT_TRUE(Eventually([&] { return AckPending(server_.Url(), "held_medium") == 50; }));
  // Ten dispatched: exactly those ten acknowledged.
  ASSERT_EQ(bus.ProcessBatch(10), 10u);
  EXPECT_EQ(acks.Counts().acknowledged, 10u);
  EXPECT_EQ(acks.Counts().pending, kHeld - 10);
  // The bridge's statistics read the same table.
  EXPECT_EQ(receiver.GetStatistics().dispatch_acks.acknowledged, 10u);
  EXPECT_EQ(receiver.GetStatistics().dispatch_acks.pending, kHeld - 10);
  EXPECT_TRUE(Eventually([&] { return AckPending(server_.Url(), "held_medium") == 40; }))
      << AckPending(server_.Url(), "held_medium");
  // The rest dispatched by the shutdown's drain, and acknowledged.
  const auto result = receiver.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_TRUE(result.bus_drained);
  EXPECT_EQ(dispatched.size(), kHeld);
  EXPECT_EQ(acks.Counts().acknowledged, kHeld);
  EXPECT_EQ(acks.Counts().pending, 0u);
  EXPECT_TRUE(Eventually([&] { return AckPending(server_.Url(), "held_medium") == 0; }));
}

// A bridge shut down without a drain releases what its bus still holds,
// unacknowledged: the next receiver on the durable gets it.
TEST_F(NatsDispatchAckTest, WhatAShutdownLeftUndispatchedGoesToTheNextReceiver) {
  constexpr std::uint64_t kHeld = 30;
  ASSERT_NO_FATAL_FAILURE(Store("js.left", kHeld));
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_ack_wait = 500ms;  // the released messages come again this soon
  const sluice::nats::ReceiveOptions route = OnDispatch("left");
  std::vector<std::uint64_t> first;
  {
    AckBus bus;
    sluice::nats::Bridge<AckBus> receiver(bus, options);
    ASSERT_TRUE(receiver.Receive<SensorReading>("js.left", kSensorType, route));
    auto handle = bus.Subscribe<SensorReading>(
        [&first](const SensorReading& reading) { first.push_back(reading.seq); });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(receiver.Start(), NATS_OK);
    const sluice::nats::DispatchAcks& acks = bus.GetObserver().DispatchAcknowledgements();
    ASSERT_TRUE(Eventually([&] { return acks.Counts().filed == kHeld; }));
    ASSERT_EQ(bus.ProcessBatch(5), 5u);
    (void)receiver.Shutdown(0ms);  // no drain: 25 left in the bus
    EXPECT_EQ(acks.Counts().acknowledged, 5u);
    EXPECT_EQ(acks.Counts().withdrawn, kHeld - 5);
    EXPECT_EQ(acks.Counts().pending, 0u);
  }
  std::vector<std::uint64_t> second;
  {
    AckBus bus;
    sluice::nats::Bridge<AckBus> receiver(bus, options);
    ASSERT_TRUE(receiver.Receive<SensorReading>("js.left", kSensorType, route));
    auto handle = bus.Subscribe<SensorReading>(
        [&second](const SensorReading& reading) { second.push_back(reading.seq); });
    ASSERT_TRUE(handle.IsValid());
    ASSERT_EQ(receiver.Start(), NATS_OK);
    Consumer<AckBus> consumer(bus);
    EXPECT_TRUE(Eventually([&] {
      return bus.GetObserver().DispatchAcknowledgements().Counts().acknowledged == kHeld - 5;
    }));
    consumer.Stop();
    (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  }
  std::vector<std::uint64_t> all = first;
  all.insert(all.end(), second.begin(), second.end());
  std::sort(all.begin(), all.end());
  std::vector<std::uint64_t> expected(kHeld);
  for (std::uint64_t i = 0; i < kHeld; ++i) expected[i] = i + 1;
  EXPECT_EQ(all, expected);  // each once
}

// A message that waits in the bus past the stream's ack wait is delivered
// again; the redelivery is refused as a duplicate, and not acknowledged
// either (the stream is told it is in progress), so until the first
// delivery is dispatched the server still holds it unacknowledged: a crash
// then would not lose it.
TEST_F(NatsDispatchAckTest, ARedeliveryOfAMessageStillInTheBusIsNotAcknowledged) {
  constexpr std::uint64_t kHeld = 20;
  ASSERT_NO_FATAL_FAILURE(Store("js.slow", kHeld));
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_ack_wait = 200ms;
  AckWireWatch wire(server_.Url(), "slow_medium");
  ASSERT_TRUE(wire.Ready());
  AckBus bus;
  sluice::nats::Bridge<AckBus> receiver(bus, options);
  const sluice::nats::ReceiveOptions route = OnDispatch("slow");
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.slow", kSensorType, route));
  std::vector<std::uint64_t> dispatched;
  auto handle = bus.Subscribe<SensorReading>(
      [&dispatched](const SensorReading& reading) { dispatched.push_back(reading.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  const auto duplicates = [&] {
    return receiver.GetStatistics()
        .rejected[static_cast<std::size_t>(sluice::nats::FrameError::kDuplicate)];
  };
  // Every message delivered once (none acknowledged: all pending) ...
  ASSERT_TRUE(Eventually([&] {
    return AckPending(server_.Url(), "slow_medium") == static_cast<std::int64_t>(kHeld);
  }));
  // ... then kHeld more redeliveries while the first deliveries wait in the
  // bus (a redelivery comes first: counting from 0, one message delivered
  // late could be missing while the others came twice). Had one been
  // acknowledged, the server would no longer hold all kHeld.
  const std::uint64_t before = duplicates();
  ASSERT_TRUE(Eventually([&] { return duplicates() >= before + kHeld; })) << duplicates();
  // Nothing was acknowledged or terminated on the wire: each redelivery was
  // answered "in progress". The bridge answers each redelivery when it
  // rejects it, and one connection's messages reach a subscriber in the
  // order sent, so once the watch has seen as many answers as rejections
  // counted it has seen the answer to each of them. Read off the wire:
  // under load nats-server 2.9.10 now and then delivers a redelivery
  // counted 1, as new, which the bridge once acknowledged as a duplicate
  // while its first delivery waited in the bus (one acknowledgement on the
  // wire in about 0.7 % of runs, the server then holding 19 pending; CI
  // step 7 saw it on 2026-12-07). The server's count is still read after
  // the shutdown, where it must reach 0.
  const std::uint64_t rejected = duplicates();
  ASSERT_TRUE(Eventually([&] { return wire.Answers() >= rejected; })) << wire.Answers();
  EXPECT_GE(wire.InProgress(), kHeld);
  EXPECT_EQ(wire.Acknowledged(), 0u) << Accounting(receiver.GetStatistics());
  EXPECT_EQ(wire.Terminated(), 0u) << Accounting(receiver.GetStatistics());
  EXPECT_EQ(bus.GetObserver().DispatchAcknowledgements().Counts().acknowledged, 0u);
  (void)receiver.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  EXPECT_EQ(dispatched.size(), kHeld);  // each once
  EXPECT_EQ(bus.GetObserver().DispatchAcknowledgements().Counts().acknowledged, kHeld);
  EXPECT_TRUE(Eventually([&] { return AckPending(server_.Url(), "slow_medium") == 0; }));
  EXPECT_TRUE(Eventually([&] { return wire.Acknowledged() >= kHeld; })) << wire.Acknowledged();
  EXPECT_EQ(wire.Terminated(), 0u);
}

// A redelivery of a message still in the bus is caught by where it came
// from (its stream sequence), not by its frame number: here frames 1-5 and
// a frame numbered past the duplicate check's window after them wait in the
// bus, so the redeliveries of the five are numbered behind the window, which
// a route admits. They must still be neither admitted again nor
// acknowledged: each reading is dispatched once.
TEST_F(NatsDispatchAckTest, ARedeliveryBehindTheWindowOfAMessageInTheBusIsNotAdmittedAgain) {
  constexpr std::uint64_t kWaiting = 5;
  const std::uint64_t kFar = sluice::nats::StreamTracker::kWindow + 5000;
  ASSERT_TRUE(MakeStream(server_.Url()));
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.jetstream_ack_wait = 200ms;
  AckBus bus;
  sluice::nats::Bridge<AckBus> receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.far", kSensorType, OnDispatch("far")));
  std::vector<std::uint64_t> dispatched;
  auto handle = bus.Subscribe<SensorReading>(
      [&dispatched](const SensorReading& reading) { dispatched.push_back(reading.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  auto frames = ReadingFrames("js.far.medium", 1, kWaiting, MessagePriority::MEDIUM);
  frames.emplace_back("js.far.medium", ReadingFrame(kFar, kFar, MessagePriority::MEDIUM));
  PublishRaw(server_.Url(), frames);
  const sluice::nats::DispatchAcks& acks = bus.GetObserver().DispatchAcknowledgements();
  ASSERT_TRUE(Eventually([&] { return acks.Counts().filed == kWaiting + 1; }));
  // All six wait undispatched; each is delivered again as its ack wait runs
  // out, the first five numbered behind the window noted by the sixth.
  const auto duplicates = [&] {
    return receiver.GetStatistics()
        .rejected[static_cast<std::size_t>(sluice::nats::FrameError::kDuplicate)];
  };
  ASSERT_TRUE(Eventually([&] { return duplicates() >= 2 * (kWaiting + 1); }));
  EXPECT_EQ(bus.QueueDepth(), kWaiting + 1);  // nothing admitted twice
  (void)receiver.Shutdown(10s, sluice::nats::ShutdownDrain::kDispatchHere);
  std::vector<std::uint64_t> expected{1, 2, 3, 4, 5, kFar};
  EXPECT_EQ(dispatched, expected);
  EXPECT_EQ(acks.Counts().acknowledged, kWaiting + 1);
}

// A Shutdown that waits for another consumer thread's drain finds every
// dispatched message acknowledged: the acknowledgement comes before the
// message's slot is released, so before the bus reads as drained. The last
// reading's callback unsubscribes itself and the callable's destruction,
// deferred to the end of the dispatch, takes 300 ms: the bus has released
// the slot by then, and the Shutdown must not release that reading
// unacknowledged meanwhile.
TEST_F(NatsDispatchAckTest, AShutdownWaitingForTheConsumerFindsEveryDispatchedMessageAcknowledged) {
  constexpr std::uint64_t kHeld = 20;
  ASSERT_NO_FATAL_FAILURE(Store("js.drain", kHeld));
  AckBus bus;
  sluice::nats::Bridge<AckBus> receiver(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.drain", kSensorType, OnDispatch("drain")));
  struct SlowToDestroy {
    ~SlowToDestroy() { std::this_thread::sleep_for(300ms); }
  };
  auto slow = std::make_shared<SlowToDestroy>();
  std::atomic<std::uint64_t> dispatched{0};
  sluice::SubscriptionHandle handle;
  handle = bus.Subscribe<SensorReading>([&, slow](const SensorReading& reading) {
    dispatched.fetch_add(1, std::memory_order_relaxed);
    if (reading.seq == kHeld) (void)bus.Unsubscribe(handle);
  });
  slow.reset();  // the subscription holds the last reference
  ASSERT_TRUE(handle.IsValid());
  const sluice::nats::DispatchAcks& acks = bus.GetObserver().DispatchAcknowledgements();
  ASSERT_EQ(receiver.Start(), NATS_OK);
  ASSERT_TRUE(Eventually([&] { return acks.Counts().filed == kHeld; }));
  Consumer<AckBus> consumer(bus);
  const auto result = receiver.Shutdown(5s);  // kWaitForConsumer
  consumer.Stop();
  EXPECT_TRUE(result.bus_drained);
  EXPECT_EQ(dispatched.load(), kHeld);
  EXPECT_EQ(acks.Counts().acknowledged, kHeld);
  EXPECT_EQ(acks.Counts().withdrawn, 0u);
  EXPECT_TRUE(Eventually([&] { return AckPending(server_.Url(), "drain_medium") == 0; }));
}

// An observer composed with AckOnDispatch may read its counts from any
// event, OnAdmitted on the fetcher's thread included.
struct ReadsAckCounts {
  static std::atomic<const sluice::nats::DispatchAcks*> acks;
  void OnAdmitted(const sluice::MessageHeader&) noexcept {
    const sluice::nats::DispatchAcks* table = acks.load();
    if (table != nullptr) (void)table->Counts();
  }
  void OnRefused(sluice::PublishOutcome, MessagePriority, std::uint64_t) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {}
  void OnTaken(const sluice::MessageHeader&) noexcept {}
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const sluice::BusError&) noexcept {}
};
std::atomic<const sluice::nats::DispatchAcks*> ReadsAckCounts::acks{nullptr};
struct ReadsAckCountsTraits : sluice::DefaultBusTraits {
  using Observer = sluice::nats::AckOnDispatch<ReadsAckCounts>;
};

TEST_F(NatsDispatchAckTest, AComposedObserverMayReadTheCountsFromOnAdmitted) {
  constexpr std::uint64_t kHeld = 10;
  ASSERT_NO_FATAL_FAILURE(Store("js.compose", kHeld));
  using ComposedBus = sluice::AsyncBus<sluice_nats_test::Payload, 256,
                                       sluice::ProducerModel::kMulti, ReadsAckCountsTraits>;
  ComposedBus bus;
  const sluice::nats::DispatchAcks& acks = bus.GetObserver().DispatchAcknowledgements();
  ReadsAckCounts::acks.store(&acks);
  sluice::nats::Bridge<ComposedBus> receiver(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(receiver.Receive<SensorReading>("js.compose", kSensorType, OnDispatch("compose")));
  std::atomic<std::uint64_t> dispatched{0};
  auto handle = bus.Subscribe<SensorReading>(
      [&dispatched](const SensorReading&) { dispatched.fetch_add(1, std::memory_order_relaxed); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<ComposedBus> consumer(bus);
  EXPECT_TRUE(Eventually([&] { return acks.Counts().acknowledged == kHeld; }));
  consumer.Stop();
  (void)receiver.Shutdown(5s, sluice::nats::ShutdownDrain::kDispatchHere);
  ReadsAckCounts::acks.store(nullptr);
  EXPECT_EQ(dispatched.load(), kHeld);
}

// kOnDispatch needs a bus that tells the bridge (AckOnDispatch) and a stream.
TEST(NatsDispatchAckOptionsTest, OnDispatchNeedsTheBusObserverAndAStream) {
  const sluice::nats::ReceiveOptions route = OnDispatch("d");
  {
    Bus bus;  // its Observer is NoObserver
    Bridge bridge(bus, OptionsFor("nats://127.0.0.1:1"));
    EXPECT_FALSE(bridge.Receive<SensorReading>("js.x", kSensorType, route));
  }
  {
    // Derived from AckOnDispatch, it could hide the events that acknowledge.
    struct Derived : sluice::nats::AckOnDispatch<> {};
    struct DerivedTraits : sluice::DefaultBusTraits {
      using Observer = Derived;
    };
    using DerivedBus = sluice::AsyncBus<sluice_nats_test::Payload, 64,
                                        sluice::ProducerModel::kMulti, DerivedTraits>;
    DerivedBus bus;
    sluice::nats::Bridge<DerivedBus> bridge(bus, OptionsFor("nats://127.0.0.1:1"));
    EXPECT_FALSE(bridge.Receive<SensorReading>("js.x", kSensorType, route));
  }
  AckBus bus;
  sluice::nats::Bridge<AckBus> bridge(bus, OptionsFor("nats://127.0.0.1:1"));
  EXPECT_TRUE(bridge.Receive<SensorReading>("js.x", kSensorType, route));
  sluice::nats::ReceiveOptions core;
  core.ack = sluice::nats::AckTiming::kOnDispatch;  // core NATS acknowledges nothing
  EXPECT_FALSE(bridge.Receive<SensorReading>("core.x", kSensorType, core));
}

}  // namespace
}  // namespace bridge_jetstream_test

namespace bridge_jetstream_test {
namespace {

// A heartbeat in a JetStream stream (one that stores a core route's
// subjects) is refused as an unknown type before its number is looked at:
// it carries its stream's last number, which is no frame of its own, so it
// is neither a duplicate of that frame nor, forged ahead of a frame still
// to come, a reason to refuse that frame as a duplicate.
TEST_F(NatsJetStreamTest, AHeartbeatInAStreamIsAnUnknownTypeAndTakesNoNumber) {
  ASSERT_TRUE(MakeStream(server_.Url())) << "the JetStream stream could not be made";
  Bus bus;
  Bridge receiver(bus, OptionsFor(server_.Url()));
  sluice::nats::ReceiveOptions from_stream;
  from_stream.stream = "SLUICE";
  from_stream.durable = "beats";
  ASSERT_TRUE(receiver.Receive<sluice_nats_test::EmergencyStop>(
      "js.beat", sluice_nats_test::kStopType, from_stream));
  sluice_nats_test::StopLog log;
  auto handle = bus.Subscribe<sluice_nats_test::EmergencyStop>(
      [&](const sluice_nats_test::EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  const auto beat = [](std::uint64_t last) {
    std::string frame;
    EXPECT_TRUE(sluice::nats::detail::EncodeHeartbeat(0xB, 1, MessagePriority::HIGH, last, 50,
                                                      sluice::nats::FrameKey{}, "", frame));
    return frame;
  };
  using sluice_nats_test::StopFrame;
  PublishRaw(server_.Url(), {
                                {"js.beat.high", StopFrame(0xB, 1, 1, 1)},
                                {"js.beat.high", StopFrame(0xB, 1, 2, 2)},
                                {"js.beat.high", beat(2)},  // the stream's last number
                                {"js.beat.high", beat(3)},  // forged, ahead of frame 3
                                {"js.beat.high", StopFrame(0xB, 1, 3, 3)},
                            });
  ASSERT_TRUE(Eventually([&] {
    const auto s = receiver.GetStatistics();
    return sluice_nats_test::Settled(s) >= 5;
  }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kUnknownType)], 2u);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(sluice::nats::FrameError::kDuplicate)], 0u);
  EXPECT_EQ(stats.heartbeats_received, 0u);
  const std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{1, 1}, {2, 1}, {3, 1}};
  EXPECT_EQ(log.times, expected);
}

}  // namespace
}  // namespace bridge_jetstream_test
