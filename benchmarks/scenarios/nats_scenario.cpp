// The NATS bridge across a local nats-server (started here on a free
// loopback port): throughput and one-way latency of bus -> bridge -> server
// -> bridge -> bus, beside the raw C client publishing the same frame bytes
// from one connection to a subscription on another, in the same run. Built
// only with the bridge (cmake/SluiceNats.cmake); runs only when named
// (--only nats), since it needs nats-server.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <sluice/nats/bridge.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "harness/stats.hpp"
#include "nats_server_process.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

// 24 bytes, as the other tables' Sample<24>: a sequence number and the
// sender's steady_clock reading (both ends are in this process).
struct Timed {
  std::uint64_t seq;
  std::uint64_t sent_ns;
  std::uint64_t padding;
};

}  // namespace
}  // namespace sluice::bench

// The bridge sends the listed fields: 24 bytes.
template <>
struct sluice::nats::Fields<sluice::bench::Timed> {
  static constexpr auto kMembers = std::make_tuple(
      &sluice::bench::Timed::seq, &sluice::bench::Timed::sent_ns, &sluice::bench::Timed::padding);
};

namespace sluice::bench {
namespace {

using TimedBus = AsyncBus<std::variant<Timed>, 65536, ProducerModel::kMulti>;
using TimedBridge = nats::Bridge<TimedBus>;

std::uint64_t NowNanos() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// What a receiver saw: written by one receiving thread, read after the run.
struct Received {
  std::atomic<std::uint64_t> count{0};
  std::vector<double> latency_ns;  // when recording
  bool record = false;

  void Add(const Timed& message) {
    if (record) latency_ns.push_back(static_cast<double>(NowNanos() - message.sent_ns));
    // Release: the latency sample written above is visible to the thread
    // that sees the count (acquire) and then reads the vector.
    count.fetch_add(1, std::memory_order_release);
  }
};

struct PathResult {
  double per_second = 0;
  std::uint64_t lost = 0;
  Percentiles latency;
  bool ok = false;
  std::string not_finished;  // why, when the publishing did not finish
};

// The deadline of one path's publishing: counted, plus the pacing.
double PathSeconds(const Options& options, std::uint64_t count, std::chrono::microseconds gap) {
  return CountedRowSeconds(options, count) +
         static_cast<double>(count) * 1e-6 * static_cast<double>(gap.count());
}

// Publishes `count` messages through `publish(message, deadline)` (paced by
// `gap` when not zero; false once the deadline has expired) and waits until
// `received` has them or a 30 s guard passes (core NATS may lose messages:
// they are counted as lost, not waited for).
template <typename Publish>
PathResult RunPath(RowDeadline& deadline, std::uint64_t count, std::chrono::microseconds gap,
                   Received& received, Publish&& publish) {
  PathResult result;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    if (!publish(Timed{seq, NowNanos(), 0}, deadline)) break;
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
  }
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (received.count.load(std::memory_order_acquire) < count &&
         std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t got = received.count.load(std::memory_order_acquire);
  result.lost = count - got;
  result.per_second = static_cast<double>(got) / seconds;
  result.latency = ComputePercentiles(received.latency_ns);
  result.ok = got > 0;
  if (!deadline.Finished()) result.not_finished = deadline.Why();
  return result;
}

// Bus -> bridge -> server -> bridge -> bus, each bus with a consumer thread.
PathResult RunBridged(const Options& bench, const std::string& url, std::uint64_t count,
                      std::chrono::microseconds gap, bool record) {
  TimedBus sending;
  TimedBus receiving;
  nats::BridgeOptions options;
  options.url = url;
  options.pending_messages_limit = 1 << 20;
  options.pending_bytes_limit = 1 << 30;
  options.admission_wait = {std::chrono::milliseconds(1000), std::chrono::milliseconds(1000),
                            std::chrono::milliseconds(1000)};
  TimedBridge sender(sending, options);
  TimedBridge receiver(receiving, options);
  Received received;
  received.record = record;
  if (record) received.latency_ns.reserve(count);
  auto handle = receiving.Subscribe<Timed>([&received](const Timed& m) { received.Add(m); });
  if (!handle.IsValid() || !sender.Forward<Timed>("bench.bridged", 1) ||
      !receiver.Receive<Timed>("bench.bridged", 1) || receiver.Start() != NATS_OK ||
      sender.Start() != NATS_OK) {
    return {};
  }
  std::atomic<bool> stop{false};
  const auto consume = [&stop](TimedBus& bus) {
    // Acquire: pairs with the release store below; nothing rides on it.
    while (!stop.load(std::memory_order_acquire)) {
      if (bus.ProcessBatch() == 0) std::this_thread::yield();
    }
  };
  std::thread send_consumer(consume, std::ref(sending));
  std::thread receive_consumer(consume, std::ref(receiving));
  RowDeadline deadline("nats: bridged", PathSeconds(bench, count, gap));
  PathResult result =
      RunPath(deadline, count, gap, received, [&](const Timed& message, RowDeadline& limit) {
        for (std::uint32_t tries = 1;
             !sending.PublishWithPriority(message, 1, MessagePriority::MEDIUM); ++tries) {
          std::this_thread::yield();
          if (tries % 64 == 0 && limit.Expired()) {
            return limit.TimedOut("the producer retried a full bus");
          }
        }
        return true;
      });
  stop.store(true, std::memory_order_release);
  send_consumer.join();
  receive_consumer.join();
  (void)sender.Shutdown(std::chrono::seconds(5), nats::ShutdownDrain::kDispatchHere);
  (void)receiver.Shutdown(std::chrono::seconds(5), nats::ShutdownDrain::kDispatchHere);
  return result;
}

void OnRawMessage(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
  Timed timed{};
  if (natsMsg_GetDataLength(message) == static_cast<int>(nats::kFrameHeaderSize + sizeof timed)) {
    std::memcpy(&timed, natsMsg_GetData(message) + nats::kFrameHeaderSize, sizeof timed);
    static_cast<Received*>(closure)->Add(timed);
  }
  natsMsg_Destroy(message);
}

// The same frame bytes, published by the C client from one connection and
// received by a subscription on another (whose thread takes the latency).
PathResult RunRaw(const Options& bench, const std::string& url, std::uint64_t count,
                  std::chrono::microseconds gap, bool record) {
  natsConnection* publisher = nullptr;
  natsConnection* subscriber = nullptr;
  natsSubscription* subscription = nullptr;
  Received received;
  received.record = record;
  if (record) received.latency_ns.reserve(count);
  PathResult result;
  if (natsConnection_ConnectTo(&publisher, url.c_str()) == NATS_OK &&
      natsConnection_ConnectTo(&subscriber, url.c_str()) == NATS_OK &&
      natsConnection_Subscribe(&subscription, subscriber, "bench.raw", &OnRawMessage, &received) ==
          NATS_OK &&
      natsSubscription_SetPendingLimits(subscription, 1 << 20, 1 << 30) == NATS_OK &&
      natsConnection_FlushTimeout(subscriber, 5000) == NATS_OK) {
    char frame[nats::kFrameHeaderSize + sizeof(Timed)];
    nats::FrameHeader header;
    header.type_id = 1;
    header.payload_size = sizeof(Timed);
    RowDeadline deadline("nats: raw", PathSeconds(bench, count, gap));
    result = RunPath(deadline, count, gap, received, [&](const Timed& message, RowDeadline& limit) {
      header.msg_id = message.seq;
      nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(frame));
      std::memcpy(frame + nats::kFrameHeaderSize, &message, sizeof message);
      (void)natsConnection_Publish(publisher, "bench.raw", frame, sizeof frame);
      return !limit.ExpiredAt(message.seq + 1) ||
             limit.TimedOut("the publisher was still publishing");
    });
  }
  if (subscription != nullptr) {
    (void)natsSubscription_Unsubscribe(subscription);
    natsSubscription_Destroy(subscription);
  }
  if (subscriber != nullptr) natsConnection_Destroy(subscriber);
  if (publisher != nullptr) natsConnection_Destroy(publisher);
  return result;
}

void RunNats(const Options& options, Report& report) {
  Table table;
  table.id = "nats";
  table.title = "17. NATS bridge: bus to bus across a local nats-server, beside the raw C client";
  table.columns = {"figure", "Sluice bridge", "raw nats.c, same bytes"};
  sluice_nats_test::NatsServer server;
  if (sluice_nats_test::NatsServer::Binary().empty() || !server.Start()) {
    table.notes.push_back("nats-server not found on PATH or did not start: nothing measured.");
    report.tables.push_back(table);
    RecordFailure("nats: no nats-server to measure against");
    return;
  }
  const bool smoke = options.suite == "smoke";
  const std::uint64_t throughput_count =
      smoke ? 2000 : (options.suite == "standard" ? 500000 : 100000);
  const std::uint64_t latency_count = smoke ? 200 : (options.suite == "standard" ? 10000 : 2000);
  const auto gap = std::chrono::microseconds(100);

  Progress("nats: throughput, " + WithThousands(throughput_count) + " messages per path");
  const PathResult bridged = RunBridged(options, server.Url(), throughput_count, {}, false);
  const PathResult raw = RunRaw(options, server.Url(), throughput_count, {}, false);
  Progress("nats: one-way latency, " + WithThousands(latency_count) + " paced messages per path");
  const PathResult bridged_latency = RunBridged(options, server.Url(), latency_count, gap, true);
  const PathResult raw_latency = RunRaw(options, server.Url(), latency_count, gap, true);
  server.Stop();
  const std::pair<const char*, const PathResult*> runs[] = {{"bridged, throughput", &bridged},
                                                            {"raw nats.c, throughput", &raw},
                                                            {"bridged, latency", &bridged_latency},
                                                            {"raw nats.c, latency", &raw_latency}};
  for (const auto& [name, run] : runs) {
    // The bridge carries Sluice's name; the raw client is the peer.
    if (!run->not_finished.empty()) {
      ReportNotFinished("nats", name, std::string(name).rfind("bridged", 0) == 0, run->not_finished,
                        &table);
    }
  }
  if (!bridged.ok || !raw.ok || !bridged_latency.ok || !raw_latency.ok) {
    RecordFailure("nats: a path delivered nothing");
  }

  const auto row = [&](const std::string& label, double a, double b, int decimals) {
    table.rows.push_back({label, Fixed(a, decimals), Fixed(b, decimals)});
  };
  row("throughput, messages/s", bridged.per_second, raw.per_second, 0);
  row("messages lost in the throughput run", static_cast<double>(bridged.lost),
      static_cast<double>(raw.lost), 0);
  row("one-way latency P50, us", bridged_latency.latency.p50 / 1000, raw_latency.latency.p50 / 1000,
      1);
  row("one-way latency P99, us", bridged_latency.latency.p99 / 1000, raw_latency.latency.p99 / 1000,
      1);
  for (const auto& [path, through, latency] :
       {std::tuple<const char*, const PathResult*, const PathResult*>{"bridged", &bridged,
                                                                      &bridged_latency},
        {"raw", &raw, &raw_latency}}) {
    // Measured once per run: reported, not gated by --compare.
    const std::string prefix = std::string("nats.") + path;
    report.AddMetric(prefix + ".messages_per_second", through->per_second, "msg/s", Better::kHigher)
        .gated = false;
    report.AddMetric(prefix + ".latency_p50_us", latency->latency.p50 / 1000, "us", Better::kLower)
        .gated = false;
    report.AddMetric(prefix + ".latency_p99_us", latency->latency.p99 / 1000, "us", Better::kLower)
        .gated = false;
  }
  table.notes.push_back(
      "One process, one nats-server on 127.0.0.1 (a free port), two connections per path. "
      "Bridged: PublishWithPriority (MEDIUM) into an MPSC bus whose consumer thread sends through "
      "a Bridge (Forward), the server, a second Bridge (Receive) publishing into a second bus, "
      "whose consumer thread's callback takes the reading. Raw: natsConnection_Publish of the "
      "same " +
      std::to_string(nats::kFrameHeaderSize + sizeof(Timed)) +
      "-byte frames, read in the subscription's callback. Throughput: " +
      WithThousands(throughput_count) +
      " messages as fast as admitted, from the first publish to the last arrival. Latency: " +
      WithThousands(latency_count) +
      " messages 100 us apart, steady_clock at publish to steady_clock at the callback.");
  report.tables.push_back(table);
}

}  // namespace

const NamedScenario& NatsScenario() {
  static const NamedScenario nats = {
      "nats",
      "NATS bridge across a local nats-server: throughput and one-way latency beside the raw C "
      "client (needs nats-server)",
      &RunNats};
  return nats;
}

}  // namespace sluice::bench
