// What the bridge tests share: a consumer thread, frames written by hand,
// a raw publisher, the options and a fixture that starts a nats-server on a
// free loopback port (skipping, saying why, when there is none).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sluice/nats/bridge.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nats_server_process.hpp"
#include "test_messages.hpp"

namespace sluice_nats_test {

using namespace std::chrono_literals;

using Bus = sluice::MpscBus<Payload, 4096>;
using Bridge = sluice::nats::Bridge<Bus>;

constexpr std::uint32_t kTestSender = 11;
constexpr std::uint32_t kPeerSender = 22;
constexpr std::uint32_t kRemote = 0x8000'0000u;
constexpr auto kHangGuard = 60s;

// Polls `done` until it holds or the hang guard passes.
inline bool Eventually(const std::function<bool()>& done, std::chrono::seconds guard = kHangGuard) {
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
inline std::vector<std::uint64_t> Field(const std::string& line, const std::string& key) {
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

// A frame as a sender would write it, with `payload` after the header. A
// header without a sequence number gets the next of this process's own.
inline std::string EncodedFrame(sluice::nats::FrameHeader header, const std::string& payload) {
  static std::atomic<std::uint64_t> next_sequence{1};
  if (header.instance_id == 0) header.instance_id = 0x7E57;
  if (header.sequence == 0) header.sequence = next_sequence.fetch_add(1);
  header.payload_size = static_cast<std::uint32_t>(payload.size());
  std::string bytes(sluice::nats::kFrameHeaderSize, '\0');
  sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(bytes.data()));
  return bytes + payload;
}

// A refusal reason's index in the statistics' rejected counts.
inline std::size_t Index(sluice::nats::FrameError error) { return static_cast<std::size_t>(error); }

// Frames whose handling has ended: admitted, dropped or refused. (Waiting
// for frames_received instead would let Shutdown close the bus under a
// frame still on its way in.)
inline std::uint64_t Settled(const sluice::nats::BridgeStatisticsSnapshot& s) {
  std::uint64_t total = s.Rejected();
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p)
    total += s.delivered[p] + s.bus_dropped[p];
  return total;
}

// An EmergencyStop frame of stream (origin, instance) numbered `sequence`,
// carrying `seq` in its payload.
inline std::string StopFrame(std::uint64_t origin, std::uint64_t instance, std::uint64_t sequence,
                             std::uint64_t seq,
                             sluice::MessagePriority priority = sluice::MessagePriority::HIGH) {
  sluice::nats::FrameHeader header;
  header.priority = priority;
  header.type_id = kStopType;
  header.origin_id = origin;
  header.instance_id = instance;
  header.sequence = sequence;
  std::string payload;
  EXPECT_TRUE(sluice::nats::DefaultCodec<EmergencyStop>::Encode(EmergencyStop{1, 2, seq}, payload));
  return EncodedFrame(header, payload);
}

// Every EmergencyStop the bus dispatches, by its seq, on the consumer thread.
struct StopLog {
  std::mutex mutex;
  std::map<std::uint64_t, int> times;  // seq -> how many times dispatched
  std::atomic<std::uint64_t> count{0};

  void Add(std::uint64_t seq) {
    const std::lock_guard<std::mutex> lock(mutex);
    ++times[seq];
    // Relaxed: a progress count the test polls; the map is read under the mutex.
    count.fetch_add(1, std::memory_order_relaxed);
  }
};

// Publishes raw bytes from a connection of its own, then waits until the
// server has them.
inline void PublishRaw(const std::string& url,
                       const std::vector<std::pair<std::string, std::string>>& messages) {
  natsConnection* raw = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&raw, url.c_str()), NATS_OK);
  for (const auto& [subject, data] : messages) {
    ASSERT_EQ(
        natsConnection_Publish(raw, subject.c_str(), data.data(), static_cast<int>(data.size())),
        NATS_OK);
  }
  ASSERT_EQ(natsConnection_FlushTimeout(raw, 10000), NATS_OK);
  natsConnection_Destroy(raw);
}

inline sluice::nats::BridgeOptions OptionsFor(const std::string& url) {
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.connection_name = "sluice-test";
  options.reconnect_wait = 50ms;
  return options;
}

class NatsBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (NatsServer::Binary().empty()) {
      GTEST_SKIP() << "nats-server is not on PATH (Debian: apt install nats-server): the "
                      "bridge tests need a real server";
    }
    ASSERT_TRUE(server_.Start()) << "nats-server did not start on a free loopback port";
  }
  void TearDown() override { server_.Stop(); }

  bool StartPeer(ChildProcess& peer, std::vector<std::string> args) {
    args.insert(args.begin(), SLUICE_NATS_PEER);
    return peer.Start(args, /*capture=*/true);
  }

  NatsServer server_;
};

// A directory of its own under the temporary directory, removed at the end.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/sluice-nats-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDirectory() {
    if (!path_.empty()) (void)std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& Path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  bool Write(const std::string& name, const std::string& text) const {
    std::ofstream file(File(name));
    file << text;
    return static_cast<bool>(file);
  }

 private:
  std::string path_;
};

}  // namespace sluice_nats_test
