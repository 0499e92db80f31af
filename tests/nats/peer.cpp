// The other process of the bridge tests: a bus and a bridge of its own,
// driven by the test through its arguments, reporting on standard output
// as key=value lines.
//
//   sluice_nats_peer exchange <url> <count>
//       Receives <count> messages of every type on "t.a2b" and publishes
//       each back, with the priority it came with, on "t.b2a".
//   sluice_nats_peer stream <url>
//       Publishes SensorReading seq 0, 1, 2, ... (MEDIUM) on "t.stream",
//       one a millisecond, and answers each EmergencyStop on "t.ping" on
//       "t.pong", until SIGTERM.
//   sluice_nats_peer flood <url> <low> <high_every>
//       Publishes <low> SensorReadings at LOW and an EmergencyStop at HIGH
//       after every <high_every> of them on "t.flood", as fast as it can.
//   sluice_nats_peer backlog <url> <durable> <dispatch|admission> <ms> [state file]
//       Receives SensorReadings on "js.backlog" from the JetStream stream
//       SLUICE through <durable>, acknowledged after dispatch or on
//       admission, into a 256-slot bus whose one subscriber prints
//       "got=<seq> gaps=<gaps>" and then takes <ms> milliseconds, until SIGTERM; with
//       its stream table in [state file] if given.
//   sluice_nats_peer stateful <url> <state file or ->
//       Receives SensorReadings on "t.state" with its stream table in
//       <state file> ("-": none), printing "got=<seq> gaps=<gaps>" for
//       each, until SIGTERM; then prints its stream counts.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sluice/nats/bridge.hpp>
#include <sluice/nats/dispatch_acks.hpp>
#include <string>
#include <thread>

#include "test_messages.hpp"

namespace {

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

constexpr std::uint32_t kPeerSender = 22;
constexpr std::uint32_t kTestSender = 11;

volatile std::sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

sluice::nats::BridgeOptions Options(const char* url) {
  sluice::nats::BridgeOptions options;
  options.url = url;
  options.connection_name = "sluice-test-peer";
  options.reconnect_wait = std::chrono::milliseconds(50);
  return options;
}

void PrintStatistics(const Bridge& bridge) {
  const sluice::nats::BridgeStatisticsSnapshot s = bridge.GetStatistics();
  std::printf("sent=%llu,%llu,%llu send_dropped=%llu,%llu,%llu overflows=%llu reconnects=%llu\n",
              static_cast<unsigned long long>(s.frames_sent[0]),
              static_cast<unsigned long long>(s.frames_sent[1]),
              static_cast<unsigned long long>(s.frames_sent[2]),
              static_cast<unsigned long long>(s.send_dropped[0]),
              static_cast<unsigned long long>(s.send_dropped[1]),
              static_cast<unsigned long long>(s.send_dropped[2]),
              static_cast<unsigned long long>(s.reconnect_buffer_overflows),
              static_cast<unsigned long long>(s.reconnects));
}

// Publishes until admitted, dispatching between tries (this thread is
// also the consumer).
template <typename T>
void PublishRetrying(Bus& bus, const T& message, sluice::MessagePriority priority) {
  while (!bus.PublishWithPriority(message, kPeerSender, priority)) {
    if (bus.ProcessBatch() == 0) std::this_thread::yield();
  }
}

int Exchange(const char* url, std::uint64_t count) {
  Bus bus;
  Bridge bridge(bus, Options(url));
  bool configured = bridge.Receive<SensorReading>("t.a2b", kSensorType) &&
                    bridge.Receive<EmergencyStop>("t.a2b", kStopType) &&
                    bridge.Receive<Note, NoteCodec>("t.a2b", kNoteType) &&
                    bridge.Forward<SensorReading>("t.b2a", kSensorType) &&
                    bridge.Forward<EmergencyStop>("t.b2a", kStopType) &&
                    bridge.Forward<Note, NoteCodec>("t.b2a", kNoteType);
  if (!configured || bridge.Start() != NATS_OK) return 2;

  std::uint64_t received = 0;
  std::uint64_t wrong = 0;
  std::uint64_t refused = 0;
  // Checks what arrived and sends it back with the priority it came with.
  const auto answer = [&](const auto& message, const sluice::MessageHeader& header) {
    // This peer's own answers pass through its bus too, on their way out.
    if ((header.sender_id & 0x8000'0000u) == 0) return;
    ++received;
    if ((header.sender_id & 0x7FFF'FFFFu) != kTestSender ||
        header.priority != PriorityOf(message.seq)) {
      ++wrong;
    }
    if (!bus.PublishWithPriority(message, kPeerSender, header.priority)) ++refused;
  };
  auto a = bus.Subscribe<SensorReading>(answer);
  auto b = bus.Subscribe<EmergencyStop>(answer);
  auto c = bus.Subscribe<Note>(answer);
  if (!a.IsValid() || !b.IsValid() || !c.IsValid()) return 2;
  std::printf("ready\n");
  std::fflush(stdout);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (received < 3 * count && std::chrono::steady_clock::now() < deadline) {
    if (bus.ProcessBatch() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const sluice::nats::ShutdownResult result =
      bridge.Shutdown(std::chrono::seconds(10), sluice::nats::ShutdownDrain::kDispatchHere);
  std::printf("received=%llu wrong=%llu refused=%llu drained=%d\n",
              static_cast<unsigned long long>(received), static_cast<unsigned long long>(wrong),
              static_cast<unsigned long long>(refused), result.bus_drained ? 1 : 0);
  PrintStatistics(bridge);
  std::fflush(stdout);
  return received == 3 * count && wrong == 0 && refused == 0 ? 0 : 1;
}

int Stream(const char* url) {
  Bus bus;
  sluice::nats::BridgeOptions options = Options(url);
  Bridge bridge(bus, options);
  if (!bridge.Forward<SensorReading>("t.stream", kSensorType) ||
      !bridge.Receive<EmergencyStop>("t.ping", kStopType) ||
      !bridge.Forward<EmergencyStop>("t.pong", kStopType) || bridge.Start() != NATS_OK) {
    return 2;
  }
  auto pong = bus.Subscribe<EmergencyStop>(
      [&bus](const EmergencyStop& ping, const sluice::MessageHeader& header) {
        // Answers pings from NATS, not its own answers on their way out.
        if ((header.sender_id & 0x8000'0000u) == 0) return;
        (void)bus.PublishWithPriority(ping, kPeerSender, sluice::MessagePriority::HIGH);
      });
  if (!pong.IsValid()) return 2;
  std::signal(SIGTERM, OnTerm);
  std::printf("ready\n");
  std::fflush(stdout);
  std::uint64_t seq = 0;
  while (g_stop == 0) {
    PublishRetrying(bus, SensorReading{7, 1.5f, seq++}, sluice::MessagePriority::MEDIUM);
    while (bus.ProcessBatch() > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (void)bridge.Shutdown(std::chrono::seconds(10), sluice::nats::ShutdownDrain::kDispatchHere);
  std::printf("published=%llu\n", static_cast<unsigned long long>(seq));
  PrintStatistics(bridge);
  std::fflush(stdout);
  return 0;
}

int Flood(const char* url, std::uint64_t low, std::uint64_t high_every) {
  Bus bus;
  Bridge bridge(bus, Options(url));
  if (!bridge.Forward<SensorReading>("t.flood", kSensorType) ||
      !bridge.Forward<EmergencyStop>("t.flood", kStopType) || bridge.Start() != NATS_OK) {
    return 2;
  }
  std::uint64_t high = 0;
  for (std::uint64_t i = 0; i < low; ++i) {
    PublishRetrying(bus, SensorReading{1, 0.5f, i}, sluice::MessagePriority::LOW);
    if ((i + 1) % high_every == 0) {
      PublishRetrying(bus, EmergencyStop{9, 1, high++}, sluice::MessagePriority::HIGH);
    }
  }
  (void)bridge.Shutdown(std::chrono::seconds(10), sluice::nats::ShutdownDrain::kDispatchHere);
  std::printf("low=%llu high=%llu\n", static_cast<unsigned long long>(low),
              static_cast<unsigned long long>(high));
  PrintStatistics(bridge);
  std::fflush(stdout);
  return 0;
}

// A receiver whose bus tells the bridge what it dispatched.
struct BacklogTraits : sluice::DefaultBusTraits {
  using Observer = sluice::nats::AckOnDispatch<>;
};
using BacklogBus = sluice::AsyncBus<Payload, 256, sluice::ProducerModel::kMulti, BacklogTraits>;

int Backlog(const char* url, const char* durable, const std::string& ack, long per_message_ms,
            const char* state_path) {
  BacklogBus bus;
  sluice::nats::BridgeOptions options = Options(url);
  if (state_path != nullptr) options.stream_state_path = state_path;
  // The stream redelivers what a killed receiver left unacknowledged this
  // long after it was delivered.
  options.jetstream_ack_wait = std::chrono::milliseconds(1000);
  sluice::nats::Bridge<BacklogBus> bridge(bus, options);
  sluice::nats::ReceiveOptions route;
  route.stream = "SLUICE";
  route.durable = durable;
  route.ack = ack == "dispatch" ? sluice::nats::AckTiming::kOnDispatch
                                : sluice::nats::AckTiming::kOnAdmission;
  // Each reading with the gaps counted so far.
  auto handle =
      bus.Subscribe<SensorReading>([per_message_ms, &bridge](const SensorReading& reading) {
        std::printf("got=%llu gaps=%llu\n", static_cast<unsigned long long>(reading.seq),
                    static_cast<unsigned long long>(bridge.GetStatistics().streams.gaps));
        std::fflush(stdout);
        if (per_message_ms > 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(per_message_ms));
      });
  if (!handle.IsValid() || !bridge.Receive<SensorReading>("js.backlog", kSensorType, route) ||
      bridge.Start() != NATS_OK) {
    return 2;
  }
  std::signal(SIGTERM, OnTerm);
  std::printf("ready\n");
  std::fflush(stdout);
  while (g_stop == 0) {
    if (bus.ProcessBatch() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  (void)bridge.Shutdown(std::chrono::seconds(5), sluice::nats::ShutdownDrain::kDispatchHere);
  const sluice::nats::DispatchAckCounts counts =
      bus.GetObserver().DispatchAcknowledgements().Counts();
  std::printf("acknowledged=%llu withdrawn=%llu pending=%llu\n",
              static_cast<unsigned long long>(counts.acknowledged),
              static_cast<unsigned long long>(counts.withdrawn),
              static_cast<unsigned long long>(counts.pending));
  std::fflush(stdout);
  return 0;
}

int Stateful(const char* url, const char* state_path) {
  Bus bus;
  sluice::nats::BridgeOptions options = Options(url);
  options.stream_state_path = state_path;  // "-": none
  if (options.stream_state_path == "-") options.stream_state_path.clear();
  Bridge bridge(bus, options);
  // Each reading with the gaps counted so far (read before it was taken:
  // a frame is judged before it enters the bus).
  auto handle = bus.Subscribe<SensorReading>([&bridge](const SensorReading& reading) {
    std::printf("got=%llu gaps=%llu\n", static_cast<unsigned long long>(reading.seq),
                static_cast<unsigned long long>(bridge.GetStatistics().streams.gaps));
    std::fflush(stdout);
  });
  if (!handle.IsValid() || !bridge.Receive<SensorReading>("t.state", kSensorType)) return 2;
  const sluice::nats::StartResult started = bridge.Start();
  if (started != NATS_OK) {
    std::printf("start_error=%s\n", started.error.c_str());
    std::fflush(stdout);
    return 2;
  }
  std::signal(SIGTERM, OnTerm);
  std::printf("ready restored=%llu\n",
              static_cast<unsigned long long>(bridge.GetStatistics().streams.streams_restored));
  std::fflush(stdout);
  while (g_stop == 0) {
    if (bus.ProcessBatch() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  (void)bridge.Shutdown(std::chrono::seconds(5), sluice::nats::ShutdownDrain::kDispatchHere);
  const sluice::nats::StreamCounts streams = bridge.GetStatistics().streams;
  std::printf("gaps=%llu duplicates=%llu stale=%llu restored=%llu\n",
              static_cast<unsigned long long>(streams.gaps),
              static_cast<unsigned long long>(streams.duplicates),
              static_cast<unsigned long long>(streams.stale),
              static_cast<unsigned long long>(streams.streams_restored));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  if (mode == "exchange" && argc == 4)
    return Exchange(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (mode == "stream" && argc == 3) return Stream(argv[2]);
  if (mode == "flood" && argc == 5) {
    return Flood(argv[2], std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10));
  }
  if (mode == "stateful" && argc == 4) return Stateful(argv[2], argv[3]);
  if (mode == "backlog" && (argc == 6 || argc == 7)) {
    return Backlog(argv[2], argv[3], argv[4], std::strtol(argv[5], nullptr, 10),
                   argc == 7 ? argv[6] : nullptr);
  }
  return 2;
}
