// At least once over JetStream, against nats-server -js: a sending bridge
// publishes a stream of readings to a JetStream stream, a receiving bridge
// reads it through durable pull consumers (one per priority), and the
// server is killed (SIGKILL) and restarted on its store three times while
// the readings flow. Nothing may be lost and nothing dispatched twice.
// Deadlines only guard against hangs; the figures are printed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <sluice/nats/bridge.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bridge_test_support.hpp"
#include "nats_server_process.hpp"
#include "test_messages.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::BridgeOptions;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::Eventually;
using sluice_nats_test::kHangGuard;
using sluice_nats_test::kSensorType;
using sluice_nats_test::kTestSender;
using sluice_nats_test::NatsServer;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::ScratchDirectory;
using sluice_nats_test::SensorReading;

// The stream over the routes' subjects, on file storage (it survives the
// kill), with a duplicate window for the Nats-Msg-Id of a publish sent again.
bool MakeStream(const std::string& url) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  if (natsConnection_ConnectTo(&connection, url.c_str()) != NATS_OK) return false;
  bool made = natsConnection_JetStream(&js, connection, nullptr) == NATS_OK;
  if (made) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    const char* subjects[] = {"js.>"};
    config.Name = "SLUICE";
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Duplicates = 120LL * 1000 * 1000 * 1000;  // 2 minutes, in nanoseconds
    jsStreamInfo* info = nullptr;
    jsErrCode error = static_cast<jsErrCode>(0);
    made = js_AddStream(&info, js, &config, nullptr, &error) == NATS_OK;
    if (info != nullptr) jsStreamInfo_Destroy(info);
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(connection);
  return made;
}

TEST(NatsJetStreamTest, ThreeServerKillsLoseNothingAndDispatchNothingTwice) {
  if (NatsServer::Binary().empty()) {
    GTEST_SKIP() << "nats-server is not installed (Debian: nats-server)";
  }
  constexpr std::uint64_t kCount = 3000;
  constexpr int kKills = 3;
  ScratchDirectory store;
  ASSERT_FALSE(store.Path().empty());
  NatsServer server;
  ASSERT_TRUE(server.Start({"-js", "-sd", store.Path()}));
  ASSERT_TRUE(MakeStream(server.Url())) << "the JetStream stream could not be made";

  BridgeOptions options = OptionsFor(server.Url());
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
    server.Kill();
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(server.Restart()) << "the server did not come back";
  }
  producer.join();
  ASSERT_TRUE(Eventually([&] { return distinct.load(std::memory_order_relaxed) >= kCount; }))
      << "received " << distinct.load() << " of " << kCount;
  const sluice::nats::ShutdownResult sent = sender.Shutdown(10s);
  (void)receiver.Shutdown(10s);
  sender_consumer.Stop();
  receiver_consumer.Stop();
  server.Stop();

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

namespace {

// The stream's window full and the server gone: the consumer thread waits
// in the forwarding callback (backpressure), and Shutdown still returns,
// counting what it gave up as send_dropped, never silently.
TEST(NatsJetStreamTest, ShutdownEndsAWaitForTheWindowAndCountsWhatItGaveUp) {
  if (NatsServer::Binary().empty()) {
    GTEST_SKIP() << "nats-server is not installed (Debian: nats-server)";
  }
  ScratchDirectory store;
  ASSERT_FALSE(store.Path().empty());
  NatsServer server;
  ASSERT_TRUE(server.Start({"-js", "-sd", store.Path()}));
  ASSERT_TRUE(MakeStream(server.Url()));
  BridgeOptions options = OptionsFor(server.Url());
  options.jetstream_max_pending = 2;
  Bus bus;
  Bridge bridge(bus, options);
  sluice::nats::ForwardOptions at_least_once;
  at_least_once.jetstream = true;
  ASSERT_TRUE(bridge.Forward<SensorReading>("js.window", kSensorType, at_least_once));
  ASSERT_EQ(bridge.Start(), NATS_OK);
  server.Kill();  // no acknowledgement will come
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

namespace {

// One consumer per priority: a LOW backlog in the stream, which the slow
// receiving bus admits only below LOW's threshold, does not hold up HIGH
// messages stored after it. Every HIGH is dispatched while most of the LOW
// backlog still waits in the stream.
TEST(NatsJetStreamTest, ALowBacklogDoesNotDelayHigh) {
  if (NatsServer::Binary().empty()) {
    GTEST_SKIP() << "nats-server is not installed (Debian: nats-server)";
  }
  constexpr std::uint64_t kLow = 2000;
  constexpr std::uint64_t kHigh = 20;
  ScratchDirectory store;
  ASSERT_FALSE(store.Path().empty());
  NatsServer server;
  ASSERT_TRUE(server.Start({"-js", "-sd", store.Path()}));
  ASSERT_TRUE(MakeStream(server.Url()));
  // The backlog is stored before the receiver starts: LOW first, then HIGH.
  {
    Bus bus;
    Bridge sender(bus, OptionsFor(server.Url()));
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
  sluice::nats::Bridge<SmallBus> receiver(bus, OptionsFor(server.Url()));
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
  server.Stop();
  std::printf("[ jetstream] every HIGH dispatched after %llu of %llu LOW\n",
              static_cast<unsigned long long>(low_when_high_done.load()),
              static_cast<unsigned long long>(kLow));
  EXPECT_LT(low_when_high_done.load(), kLow / 2) << "HIGH waited behind the LOW backlog";
}

}  // namespace
