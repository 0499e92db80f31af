// Interoperability: the official NATS client for Node ("nats" on npm)
// decodes the bridge's frames and writes frames into it, from the layout
// docs/nats.md documents (tests/nats/interop/node_peer.cjs, which uses no
// Sluice code). Skips, saying why, without nats-server, Node or the npm
// package (CI installs both: .ci/run).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bridge_test_support.hpp"
#include "nats_server_process.hpp"
#include "test_messages.hpp"

#ifndef SLUICE_NODE_BINARY
#define SLUICE_NODE_BINARY ""
#endif
#ifndef SLUICE_NODE_MODULES
#define SLUICE_NODE_MODULES ""
#endif

namespace interop_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::ChildProcess;
using sluice_nats_test::Consumer;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::Eventually;
using sluice_nats_test::Field;
using sluice_nats_test::kHangGuard;
using sluice_nats_test::kRemote;
using sluice_nats_test::kSensorType;
using sluice_nats_test::kStopType;
using sluice_nats_test::kTestSender;
using sluice_nats_test::NatsBridgeTest;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::SensorReading;

TEST_F(NatsBridgeTest, TheNodeClientReadsAndWritesTheDocumentedFrames) {
  const std::string node = SLUICE_NODE_BINARY;
  const std::string modules = SLUICE_NODE_MODULES;
  if (node.empty() || access(node.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "Node is not installed (Debian: nodejs npm)";
  }
  if (modules.empty() || access((modules + "/nats/package.json").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "the npm package nats is not installed: npm install --prefix <dir> "
                    "nats@2.29.3, then configure with -DSLUICE_NODE_MODULES=<dir>/node_modules";
  }
  constexpr std::uint64_t kCount = 60;  // of each type, every priority
  Bus bus;
  Bridge bridge(bus, OptionsFor(server_.Url()));
  ASSERT_TRUE(bridge.Forward<SensorReading>("interop.b2n", kSensorType));
  ASSERT_TRUE(bridge.Forward<EmergencyStop>("interop.b2n", kStopType));
  ASSERT_TRUE(bridge.Receive<SensorReading>("interop.n2b", kSensorType));
  ASSERT_TRUE(bridge.Receive<EmergencyStop>("interop.n2b", kStopType));
  // What came from Node, on the consumer thread; read after it stops.
  std::mutex mutex;
  std::vector<std::string> problems;
  std::map<std::uint64_t, int> sensors;
  std::map<std::uint64_t, int> stops;
  std::atomic<std::uint64_t> count{0};
  const auto check = [&](bool ok, const std::string& what) {
    if (!ok) problems.push_back(what);
  };
  auto s =
      bus.Subscribe<SensorReading>([&](const SensorReading& m, const sluice::MessageHeader& h) {
        if (h.sender_id == kTestSender) return;  // ours, on the way out
        std::lock_guard<std::mutex> lock(mutex);
        check(m.sensor == 9 && m.value == static_cast<float>(m.seq) * 0.25f, "sensor fields");
        check(h.sender_id == (33 | kRemote), "sensor sender");
        check(h.priority == static_cast<MessagePriority>(m.seq % 3), "sensor priority");
        ++sensors[m.seq];
        // Relaxed: a progress count; the maps are read after the consumer stops.
        count.fetch_add(1, std::memory_order_relaxed);
      });
  auto e =
      bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m, const sluice::MessageHeader& h) {
        if (h.sender_id == kTestSender) return;
        std::lock_guard<std::mutex> lock(mutex);
        check(m.source == 4 && m.reason == m.seq % 7, "stop fields");
        check(h.priority == static_cast<MessagePriority>(m.seq % 3), "stop priority");
        ++stops[m.seq];
        count.fetch_add(1, std::memory_order_relaxed);
      });
  ASSERT_TRUE(s.IsValid() && e.IsValid());
  ASSERT_EQ(bridge.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  ChildProcess peer;
  ASSERT_TRUE(peer.Start({"/usr/bin/env", "NODE_PATH=" + modules, node, SLUICE_NODE_PEER_SCRIPT,
                          server_.Url(), std::to_string(kCount)},
                         /*capture=*/true));
  std::string line;
  ASSERT_TRUE(peer.WaitForLine("ready", &line, kHangGuard)) << "the Node peer did not start";
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    const auto priority = static_cast<MessagePriority>(seq % 3);
    ASSERT_TRUE(bus.PublishWithPriority(SensorReading{7, static_cast<float>(seq) * 0.5f, seq},
                                        kTestSender, priority));
    ASSERT_TRUE(bus.PublishWithPriority(EmergencyStop{3, static_cast<std::uint32_t>(seq % 5), seq},
                                        kTestSender, priority));
  }
  std::string errors;
  while (peer.WaitForLine("", &line, kHangGuard)) {
    if (line.rfind("decoded=", 0) == 0) break;
    errors += line + "\n";  // "error: ..." lines
  }
  ASSERT_EQ(line.rfind("decoded=", 0), 0u) << "the Node peer stopped: " << errors;
  EXPECT_EQ(Field(line, "decoded").at(0), 2 * kCount) << errors;
  EXPECT_EQ(Field(line, "errors").at(0), 0u) << errors;
  ASSERT_TRUE(peer.WaitForLine("published=", &line, kHangGuard));
  EXPECT_EQ(Field(line, "published").at(0), 2 * kCount);
  EXPECT_EQ(peer.Wait(kHangGuard), 0);
  EXPECT_TRUE(Eventually([&] { return count.load(std::memory_order_relaxed) >= 2 * kCount; }))
      << "arrived " << count.load();
  (void)bridge.Shutdown(10s);
  consumer.Stop();

  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(sensors.size(), kCount);
  EXPECT_EQ(stops.size(), kCount);
  const auto stats = bridge.GetStatistics();
  EXPECT_EQ(stats.Rejected(), 0u);
  EXPECT_EQ(stats.streams.gaps, 0u);
  EXPECT_EQ(stats.streams.streams_opened, 3u);  // one per priority subject
}

}  // namespace
}  // namespace interop_test
