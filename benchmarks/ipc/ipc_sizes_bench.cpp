// The shared-memory bus against iceoryx (when found), one producer process
// to one consumer process, at 24 bytes, 4 KB and 64 KB, beside the same
// frames between two threads on the in-process bus and between two
// processes through the NATS bridge and a local nats-server (when built
// and found): throughput, and the one-way latency of an answer in a
// ping-pong (its publish timestamp against its arrival: both ends read
// CLOCK_MONOTONIC) with the round trip. Sluice copies 24 bytes through its
// slots and loans the frames (written in place, read in place); iceoryx
// loans every size; the NATS bridge copies every size (its frame is
// encoded, sent and decoded). Every system writes and reads the same bytes
// of a frame: its number at its head and its tail. None drops: Sluice's
// producers retry a refusal, iceoryx waits (WAIT_FOR_CONSUMER and
// BLOCK_PRODUCER), and a NATS row that lost a message did not finish. Each
// round measures every row, interleaved, bracketed by a placement probe
// (MEASURING.md); every loop has a deadline, and a row that did not finish
// says so.
//
//   sluice_ipc_sizes_bench [--rounds N] [--messages N] [--pings N]
//
// iceoryx needs its daemon: the benchmark starts iox-roudi (found by CMake)
// and stops it at the end; nats-server likewise. Without either, its rows
// are skipped and the output says why.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "harness/platform.hpp"
#include "harness/stats.hpp"
#include "ipc/ipc_bench_setup.hpp"
#include "ipc/sizes_common.hpp"
#include "ipc/sizes_in_process.hpp"
#if SLUICE_HAVE_NATS
#include "ipc/sizes_nats.hpp"
#endif

#if SLUICE_HAVE_ICEORYX
#include "iceoryx_hoofs/log/logmanager.hpp"
#include "iceoryx_posh/popo/publisher.hpp"
#include "iceoryx_posh/popo/subscriber.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"
#endif

namespace {

using namespace sluice_ipc_sizes;
using sluice_ipc_bench::Cpus;
constexpr auto P = sluice_ipc_bench::Percentile;

struct Traits : sluice::ipc::ShmBusTraits {
  static constexpr std::size_t kMaxProducers = 2;
  static constexpr std::size_t kLoanBlocks = 64;
};
using Payload = std::variant<Small, sluice::ipc::Loaned<Frame4K>, sluice::ipc::Loaned<Frame64K>>;
using ShmBus = sluice::ipc::ShmBus<Payload, kCapacity, Traits>;
using ShmProducer = sluice::ipc::ShmProducer<Payload, kCapacity, Traits>;

// One attempt to publish frame `seq` of type F (loaned, but for 24 bytes).
template <typename F>
bool SluicePublish(ShmProducer& producer, std::uint64_t seq, std::uint64_t sent_ns) {
  if constexpr (std::is_same_v<F, Small>) {
    Small small;
    Write(small, seq, sent_ns);
    return static_cast<bool>(producer.PublishFast(small, 1, std::chrono::nanoseconds(sent_ns)));
  } else {
    auto loan = producer.Loan<F>();
    if (!loan) return false;
    Write(*loan, seq, sent_ns);
    return static_cast<bool>(
        producer.PublishLoan(std::move(loan), 1, sluice::MessagePriority::MEDIUM));
  }
}

// Calls `on(frame, header)` for each message of the batch; frames by
// reference into the segment.
template <typename F, typename On>
std::uint32_t SluiceTake(ShmBus& bus, On&& on) {
  return bus.ProcessBatchWith([&](const auto& message, const sluice::MessageHeader& header) {
    using M = std::decay_t<decltype(message)>;
    if constexpr (std::is_same_v<M, F>) {
      on(message, header);
    } else if constexpr (!std::is_same_v<M, Small>) {
      if constexpr (std::is_same_v<typename M::Type, F>) on(*message, header);
    }
  });
}

// Messages per second from the first arrival to the last; NaN when the
// deadline passed first (or a frame arrived torn).
template <typename F>
double SluiceThroughput(const Cpus& cpus, std::uint64_t messages, const std::string& name) {
  ShmBus bus;
  if (bus.Create(name) != sluice::ipc::AttachError::kNone) return NAN;
  const pid_t child = ::fork();
  if (child < 0) return NAN;
  if (child == 0) {
    sluice::bench::PinThisThread(cpus.producer);
    ShmProducer producer;
    if (producer.Attach(name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    const auto deadline = Clock::now() + kRowDeadline;
    for (std::uint64_t seq = 0; seq < messages; ++seq) {
      while (!SluicePublish<F>(producer, seq, 0)) {
        if (Clock::now() > deadline) ::_exit(2);
      }
    }
    producer.Detach();
    ::_exit(0);
  }
  sluice::bench::PinThisThread(cpus.consumer);
  std::uint64_t received = 0;
  bool torn = false;
  Clock::time_point first{};
  const auto deadline = Clock::now() + kRowDeadline;
  while (received < messages && Clock::now() < deadline) {
    (void)SluiceTake<F>(bus, [&](const F& frame, const sluice::MessageHeader&) {
      torn |= frame.tail != frame.seq;
      if (received++ == 0) first = Clock::now();
    });
  }
  const Clock::time_point last = Clock::now();
  const bool producer_finished = WaitOrKill(child, last + kChildGrace);
  if (received < messages || torn || !producer_finished) return NAN;
  return static_cast<double>(messages - 1) / std::chrono::duration<double>(last - first).count();
}

// Pings one at a time on one bus, answered on another: the round trip, and
// each answer's way from its publish to its arrival.
template <typename F>
Latency SluicePingPong(const Cpus& cpus, std::uint64_t pings, const std::string& name) {
  const std::string ping_name = name + "-ping";
  const std::string pong_name = name + "-pong";
  Latency latency;
  ShmBus pongs;
  if (pongs.Create(pong_name) != sluice::ipc::AttachError::kNone) return latency;
  const pid_t child = ::fork();
  if (child < 0) return latency;
  if (child == 0) {
    sluice::bench::PinThisThread(cpus.consumer);
    ShmBus ping_bus;
    if (ping_bus.Create(ping_name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    ShmProducer answer;
    if (answer.Attach(pong_name) != sluice::ipc::AttachError::kNone) ::_exit(1);
    std::uint64_t answered = 0;
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    while (answered < pings && Clock::now() < deadline) {
      (void)SluiceTake<F>(ping_bus, [&](const F& ping, const sluice::MessageHeader&) {
        while (!SluicePublish<F>(answer, ping.seq, NowNanos()) && Clock::now() < deadline) {
        }
        ++answered;
      });
    }
    answer.Detach();
    ping_bus.Close();
    ::_exit(0);
  }
  sluice::bench::PinThisThread(cpus.producer);
  ShmProducer ping;
  const auto deadline = Clock::now() + kRowDeadline;
  while (ping.Attach(ping_name) != sluice::ipc::AttachError::kNone && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
    const auto sent = Clock::now();
    while (!SluicePublish<F>(ping, seq, 0) && Clock::now() < deadline) {
    }
    bool answered = false;
    while (!answered && Clock::now() < deadline) {
      (void)SluiceTake<F>(pongs, [&](const F& pong, const sluice::MessageHeader&) {
        const std::uint64_t now = NowNanos();
        latency.one_way.push_back(static_cast<double>(now - pong.sent_ns));
        answered = true;
      });
    }
    if (!answered) break;
    latency.round_trip.push_back(
        std::chrono::duration<double, std::nano>(Clock::now() - sent).count());
  }
  ping.Detach();
  if (!WaitOrKill(child, Clock::now() + kChildGrace)) {
    // The echo made it and was killed before closing it.
    ShmBus::RemoveName(ping_name);
  }
  if (latency.round_trip.size() < pings) return Latency{};
  return latency;
}

// ---- iceoryx ------------------------------------------------------------------

#if SLUICE_HAVE_ICEORYX
constexpr bool kHaveIceoryx = true;

void InitIceoryx(const char* role) {
  // Fatal only: a publisher that finds the 64 KB chunks of RouDi's default
  // pools all out (200, fewer than the queue's 256) logs an error for each
  // loan it then retries, as Sluice's producer retries when its blocks are.
  iox::log::LogManager::GetLogManager().SetDefaultLogLevel(iox::log::LogLevel::kFatal,
                                                           iox::log::LogLevelOutput::kHideLogLevel);
  const std::string name = std::string("sluice-bench-") + role + "-" + std::to_string(::getpid());
  iox::runtime::PoshRuntime::initRuntime(
      iox::RuntimeName_t(iox::cxx::TruncateToCapacity, name.c_str()));
}

iox::popo::PublisherOptions WaitingPublisher() {
  iox::popo::PublisherOptions options;
  options.subscriberTooSlowPolicy = iox::popo::ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER;
  return options;
}
iox::popo::SubscriberOptions BlockingSubscriber() {
  iox::popo::SubscriberOptions options;
  options.queueCapacity = kCapacity;
  options.queueFullPolicy = iox::popo::QueueFullPolicy::BLOCK_PRODUCER;
  return options;
}
iox::capro::ServiceDescription Topic(const std::string& name) {
  return {iox::capro::IdString_t(iox::cxx::TruncateToCapacity, "sluice-bench"),
          iox::capro::IdString_t(iox::cxx::TruncateToCapacity, name.c_str()),
          iox::capro::IdString_t(iox::cxx::TruncateToCapacity, "frames")};
}

// Whether an iox-roudi process runs already (then the benchmark uses it, and
// leaves it running).
bool RoudiRunning() {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    // "pid (comm) state ...": a RouDi that has exited but not been reaped
    // (state Z) is not running.
    const std::string path = std::string("/proc/") + entry->d_name + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) continue;
    char stat[128] = {};
    const ssize_t got = ::read(fd, stat, sizeof(stat) - 1);
    ::close(fd);
    const std::string text(stat, got > 0 ? static_cast<std::size_t>(got) : 0);
    const std::size_t at = text.find("(iox-roudi) ");
    if (at != std::string::npos && at + 12 < text.size() && text[at + 12] != 'Z') found = true;
  }
  ::closedir(proc);
  return found;
}

// RouDi, the daemon iceoryx needs: started here (unless one runs), stopped
// at the end; -1 when one ran already.
pid_t StartRoudi() {
  if (RoudiRunning()) return -1;
  std::fflush(nullptr);
  const pid_t roudi = ::fork();
  if (roudi == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    ::execl(SLUICE_IOX_ROUDI, "iox-roudi", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(500ms);
  return roudi;
}
// The RouDi this benchmark started (-1: one ran already).
pid_t g_roudi = -1;

// Whether RouDi still runs: without it an iceoryx process waits a minute to
// register, then aborts, so an iceoryx row is not tried.
bool RoudiAlive() {
  if (g_roudi > 0) return ::waitpid(g_roudi, nullptr, WNOHANG) == 0;
  return RoudiRunning();
}

// One attempt to loan, write and publish frame `seq`.
template <typename F>
bool IceoryxPublish(iox::popo::Publisher<F>& publisher, std::uint64_t seq, std::uint64_t sent_ns) {
  auto sample = publisher.loan();
  if (sample.has_error()) return false;
  Write(*sample.value(), seq, sent_ns);
  sample.value().publish();
  return true;
}

template <typename F>
double IceoryxThroughput(const Cpus& cpus, std::uint64_t messages, const std::string& name) {
  int fds[2];
  if (!RoudiAlive() || ::pipe(fds) != 0) return NAN;
  const auto started = Clock::now();
  const pid_t consumer = Child(cpus.consumer, fds[1], [&](int out) {
    InitIceoryx("sub");
    iox::popo::Subscriber<F> subscriber(Topic(name), BlockingSubscriber());
    Say(out, "ready\n");
    std::uint64_t received = 0;
    bool torn = false;
    Clock::time_point first{};
    const auto deadline = Clock::now() + kRowDeadline;
    while (received < messages && Clock::now() < deadline) {
      auto sample = subscriber.take();
      if (sample.has_error()) continue;
      torn |= sample.value()->tail != sample.value()->seq;
      if (received++ == 0) first = Clock::now();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - first).count();
    Say(out, received == messages && !torn
                 ? "rate " + std::to_string(static_cast<double>(messages - 1) / seconds) + "\n"
                 : std::string("unfinished\n"));
  });
  const pid_t producer = Child(cpus.producer, fds[1], [&](int) {
    InitIceoryx("pub");
    iox::popo::Publisher<F> publisher(Topic(name), WaitingPublisher());
    const auto deadline = Clock::now() + kRowDeadline;
    while (!publisher.hasSubscribers() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    for (std::uint64_t seq = 0; seq < messages && Clock::now() < deadline; ++seq) {
      while (!IceoryxPublish(publisher, seq, 0) && Clock::now() < deadline) {
      }
    }
  });
  return CollectRate(fds, consumer, producer, started);
}

template <typename F>
Latency IceoryxPingPong(const Cpus& cpus, std::uint64_t pings, const std::string& name) {
  int fds[2];
  if (!RoudiAlive() || ::pipe(fds) != 0) return Latency{};
  const auto started = Clock::now();
  const pid_t echo = Child(cpus.consumer, fds[1], [&](int) {
    InitIceoryx("echo");
    iox::popo::Subscriber<F> in(Topic(name + "-ping"), BlockingSubscriber());
    iox::popo::Publisher<F> out(Topic(name + "-pong"), WaitingPublisher());
    std::uint64_t answered = 0;
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    while (answered < pings && Clock::now() < deadline) {
      auto sample = in.take();
      if (sample.has_error()) continue;
      const std::uint64_t seq = sample.value()->seq;
      while (!IceoryxPublish(out, seq, NowNanos()) && Clock::now() < deadline) {
      }
      ++answered;
    }
  });
  const pid_t pinger = Child(cpus.producer, fds[1], [&](int out_fd) {
    InitIceoryx("ping");
    iox::popo::Publisher<F> out(Topic(name + "-ping"), WaitingPublisher());
    iox::popo::Subscriber<F> in(Topic(name + "-pong"), BlockingSubscriber());
    const auto deadline = Clock::now() + kRowDeadline;
    while (!out.hasSubscribers() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    while (in.getSubscriptionState() != iox::SubscribeState::SUBSCRIBED &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(20ms);  // the echo's publisher seen by our subscriber
    std::string line;
    for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
      const auto sent = Clock::now();
      while (!IceoryxPublish(out, seq, 0) && Clock::now() < deadline) {
      }
      bool answered = false;
      while (!answered && Clock::now() < deadline) {
        auto sample = in.take();
        if (sample.has_error()) continue;
        const std::uint64_t now = NowNanos();
        line += std::to_string(now - sample.value()->sent_ns) + " ";
        answered = true;
      }
      if (!answered) break;
      line += std::to_string(static_cast<std::uint64_t>(
                  std::chrono::duration<double, std::nano>(Clock::now() - sent).count())) +
              "\n";
    }
    Say(out_fd, line);
  });
  return CollectPingPong(fds, pinger, echo, pings, started);
}

#else
constexpr bool kHaveIceoryx = false;
template <typename F>
double IceoryxThroughput(const Cpus&, std::uint64_t, const std::string&) {
  return NAN;
}
template <typename F>
Latency IceoryxPingPong(const Cpus&, std::uint64_t, const std::string&) {
  return Latency{};
}
#endif

// ---- The table -------------------------------------------------------------------

enum System : int { kSluice, kIceoryx, kInProcess, kNatsBuffered, kNatsAsap, kSystems };
const char* SystemName(int system, int size) {
  switch (system) {
    case kSluice:
      return size == 0 ? "Sluice, shared memory (copied)" : "Sluice, shared memory (loaned)";
    case kIceoryx:
      return "iceoryx (loaned)";
    case kInProcess:
      return size == 0 ? "Sluice in process, two threads (copied)"
                       : "Sluice in process, two threads (loaned)";
    case kNatsBuffered:
      return "Sluice NATS bridge, local server (copied)";
    default:
      return "Sluice NATS bridge, local server, send_asap (copied)";
  }
}
const char* ShortName(int system) {
  static const char* const kNames[kSystems] = {"shm", "iceoryx", "in process", "NATS",
                                               "NATS send_asap"};
  return kNames[system];
}

struct Row {
  std::vector<double> mps, one_way_p50, one_way_p99, round_trip_p50;
  // Against the shared-memory bus in the same round: each system's rounds
  // compared where both ran in the same placement (MEASURING.md).
  std::vector<double> mps_ratio, one_way_p50_ratio;
  int unfinished = 0;
};

// One size's measurements of a round; a system not measured is absent.
struct Measured {
  double mps[kSystems] = {NAN, NAN, NAN, NAN, NAN};
  Latency latency[kSystems];
  bool present[kSystems] = {};

  bool Finished(int system) const {
    return !std::isnan(mps[system]) && !latency[system].round_trip.empty();
  }
};

struct Counts {
  std::uint64_t messages, pings;            // shared memory, iceoryx, in process
  std::uint64_t nats_messages, nats_pings;  // the NATS bridge (a thousand times slower)
};

template <typename F>
Measured MeasureSize(const Cpus& cpus, const Counts& counts, const std::string& name,
                     const std::string& nats_url) {
  Measured m;
  m.present[kSluice] = m.present[kInProcess] = true;
  m.mps[kSluice] = SluiceThroughput<F>(cpus, counts.messages, name + "-t");
  m.mps[kInProcess] = LocalThroughput<F>(cpus, counts.messages);
  m.latency[kSluice] = SluicePingPong<F>(cpus, counts.pings, name + "-l");
  m.latency[kInProcess] = LocalPingPong<F>(cpus, counts.pings);
  if (kHaveIceoryx) {
    m.present[kIceoryx] = true;
    m.mps[kIceoryx] = IceoryxThroughput<F>(cpus, counts.messages, name + "t");
    m.latency[kIceoryx] = IceoryxPingPong<F>(cpus, counts.pings, name + "l");
  }
#if SLUICE_HAVE_NATS
  if (!nats_url.empty()) {
    for (const int system : {kNatsBuffered, kNatsAsap}) {
      const bool send_asap = system == kNatsAsap;
      m.present[system] = true;
      m.mps[system] = NatsThroughput<F>(cpus, counts.nats_messages, nats_url, send_asap);
      m.latency[system] = NatsPingPong<F>(cpus, counts.nats_pings, nats_url, send_asap);
    }
  }
#else
  (void)nats_url;
#endif
  return m;
}

// One system's measurements of a round, and (when both finished) their
// ratios to the shared-memory bus's of the same round.
void Add(Row& row, const Measured& m, int system) {
  if (!m.Finished(system)) {
    ++row.unfinished;
    return;
  }
  const double mps = m.mps[system];
  const Latency& latency = m.latency[system];
  row.mps.push_back(mps / 1e6);
  row.one_way_p50.push_back(P(latency.one_way, 0.5));
  row.one_way_p99.push_back(P(latency.one_way, 0.99));
  row.round_trip_p50.push_back(P(latency.round_trip, 0.5));
  if (m.Finished(kSluice)) {
    row.mps_ratio.push_back(mps / m.mps[kSluice]);
    row.one_way_p50_ratio.push_back(P(latency.one_way, 0.5) / P(m.latency[kSluice].one_way, 0.5));
  }
}

// "median (least-most)" of a row's ratios; "-" when it has none.
std::string RatioCell(const std::vector<double>& ratios) {
  if (ratios.empty()) return "-";
  char cell[64];
  const auto [least, most] = std::minmax_element(ratios.begin(), ratios.end());
  std::snprintf(cell, sizeof(cell), "%.3g (%.3g-%.3g)", sluice::bench::Median(ratios), *least,
                *most);
  return cell;
}

// What an interrupted run leaves to be removed: the segments' names, and
// the daemons this benchmark started. Filled before the handler is set;
// the handler only reads them.
struct Leftovers {
  std::vector<std::string> segments;
  pid_t daemons[2] = {-1, -1};  // RouDi, nats-server
};
Leftovers g_leftovers;

extern "C" void OnInterrupt(int signal) {
  for (const std::string& segment : g_leftovers.segments) ::shm_unlink(segment.c_str());
  // RouDi removes its own segments on SIGINT; nats-server ends on SIGTERM.
  if (g_leftovers.daemons[0] > 0) ::kill(g_leftovers.daemons[0], SIGINT);
  if (g_leftovers.daemons[1] > 0) ::kill(g_leftovers.daemons[1], SIGTERM);
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

// On SIGINT, SIGTERM or SIGHUP: remove the segments of this run and stop
// the daemons it started (the children share the terminal's signal, or
// find their peer gone and end by their deadlines).
void CleanUpOnInterrupt(const std::string& name) {
  for (const char* size : {"a", "b", "c"}) {
    for (const char* suffix : {"-t", "-l-ping", "-l-pong"}) {
      // A bus's names: its header's, its wake page's and each lane's (the
      // handler cannot make strings).
      const std::string bus = name + size + suffix;
      g_leftovers.segments.push_back(bus);
      g_leftovers.segments.push_back(bus + ".wake");
      for (std::size_t lane = 0; lane < Traits::kMaxProducers; ++lane) {
        g_leftovers.segments.push_back(bus + ".lane" + std::to_string(lane));
      }
    }
  }
  struct sigaction action = {};
  action.sa_handler = &OnInterrupt;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

// Held while this benchmark runs: two at once would share RouDi (the one
// that started it stops it under the other) and the two CPUs.
bool OnlyInstance() {
  const int fd = ::open("/tmp/sluice_ipc_sizes_bench.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;                     // nowhere to lock: run anyway
  return ::flock(fd, LOCK_EX | LOCK_NB) == 0;  // kept open (and locked) until exit
}

}  // namespace

int main(int argc, char** argv) {
  sluice_ipc_bench::Options options{3, 500'000, 10'000};
  if (!sluice_ipc_bench::ParseOptions(argc, argv, &options)) return 2;
  if (!OnlyInstance()) {
    std::fprintf(stderr,
                 "another sluice_ipc_sizes_bench is running: two at once would measure each "
                 "other (and share RouDi); run one at a time\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is made, even into a file
  const std::string name = "/sluice-sizes-" + std::to_string(::getpid());
  CleanUpOnInterrupt(name);
  const int rounds = options.rounds;
  // NATS moves about a thousandth as many messages a second: a twentieth of
  // the messages and a tenth of the pings keep its rows to seconds.
  const Counts counts{options.messages, options.pings,
                      std::max<std::uint64_t>(options.messages / 20, 2),
                      std::max<std::uint64_t>(options.pings / 10, 1)};
  Cpus cpus;
  if (!sluice_ipc_bench::PickCpus("sluice_ipc_sizes_bench", &cpus)) return 1;
  std::printf(
      "%llu messages a throughput run and %llu pings a latency run (NATS: %llu and %llu), %d "
      "rounds; queues of %zu\n",
      static_cast<unsigned long long>(counts.messages),
      static_cast<unsigned long long>(counts.pings),
      static_cast<unsigned long long>(counts.nats_messages),
      static_cast<unsigned long long>(counts.nats_pings), rounds, kCapacity);
#if SLUICE_HAVE_ICEORYX
  g_roudi = StartRoudi();
  g_leftovers.daemons[0] = g_roudi;
  std::printf("iceoryx %s, its daemon %s (%s)\n", SLUICE_ICEORYX_VERSION,
              g_roudi > 0 ? "started by this benchmark" : "already running", SLUICE_IOX_ROUDI);
#else
  std::printf(
      "iceoryx: not found when this benchmark was built; its rows are skipped "
      "(Debian: apt-get install iceoryx libiceoryx-posh-dev, then configure again)\n");
#endif
  std::string nats_url;
#if SLUICE_HAVE_NATS
  sluice_nats_test::NatsServer nats_server;
  if (sluice_nats_test::NatsServer::Binary().empty()) {
    std::printf("NATS: no nats-server found; its rows are skipped (Debian: nats-server)\n");
  } else if (!nats_server.Start()) {
    std::printf("NATS: nats-server did not start; its rows are skipped\n");
  } else {
    nats_url = nats_server.Url();
    g_leftovers.daemons[1] = nats_server.Pid();
    std::printf("NATS: %s on %s, started by this benchmark\n",
                sluice_nats_test::NatsServer::Binary().c_str(), nats_url.c_str());
  }
#else
  std::printf(
      "NATS: the bridge was not built (no NATS C client: Debian libnats-dev); its rows are "
      "skipped\n");
#endif
  const char* sizes[] = {"24 B", "4 KB", "64 KB"};
  std::map<sluice::bench::Placement, std::map<int, Row[kSystems]>> rows;
  bool present[kSystems] = {};
  int left_out = 0;
  int unfinished = 0;  // rows of every round, those left out included
  for (int round = 0; round < rounds; ++round) {
    const double before = sluice::bench::PlacementProbeNanos(cpus.producer, cpus.consumer);
    Measured measured[3];
    measured[0] = MeasureSize<Small>(cpus, counts, name + "a", nats_url);
    measured[1] = MeasureSize<Frame4K>(cpus, counts, name + "b", nats_url);
    measured[2] = MeasureSize<Frame64K>(cpus, counts, name + "c", nats_url);
    const double after = sluice::bench::PlacementProbeNanos(cpus.producer, cpus.consumer);
    const auto state = sluice::bench::ClassifyPlacement(before);
    const bool kept = sluice::bench::ClassifyPlacement(after) == state;
    std::printf("round %d: probe %.0f / %.0f ns (%s%s)\n", round + 1, before, after,
                sluice::bench::PlacementName(state), kept ? "" : ", changed: left out");
    for (int size = 0; size < 3; ++size) {
      std::printf("  %s:", sizes[size]);
      for (int system = 0; system < kSystems; ++system) {
        const Measured& m = measured[size];
        if (!m.present[system]) continue;
        present[system] = true;
        if (!m.Finished(system)) {
          ++unfinished;
          std::printf(" %s did not finish;", ShortName(system));
          continue;
        }
        std::printf(" %s %.3f M/s %.0f ns;", ShortName(system), m.mps[system] / 1e6,
                    P(m.latency[system].one_way, 0.5));
      }
      std::printf("\n");
    }
    if (!kept) {
      ++left_out;
      continue;
    }
    for (int size = 0; size < 3; ++size) {
      for (int system = 0; system < kSystems; ++system) {
        if (measured[size].present[system]) Add(rows[state][size][system], measured[size], system);
      }
    }
  }
#if SLUICE_HAVE_ICEORYX
  if (g_roudi > 0 && RoudiAlive()) {
    ::kill(g_roudi, SIGINT);
    (void)WaitOrKill(g_roudi, Clock::now() + 10s);  // a stopped RouDi is killed
  } else if (g_roudi > 0) {
    std::printf("iceoryx: the RouDi this benchmark started stopped during the run\n");
  }
#endif
#if SLUICE_HAVE_NATS
  if (!nats_url.empty()) nats_server.Stop();
#endif
  std::printf(
      "\n| state | size | system | rounds | throughput, M msg/s | x shared memory's | one-way "
      "P50, ns | x shared memory's | one-way P99, ns | round trip P50, ns | rows that did not "
      "finish |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (auto& [state, by_size] : rows) {
    for (int size = 0; size < 3; ++size) {
      for (int system = 0; system < kSystems; ++system) {
        if (!present[system]) continue;
        const Row& row = by_size[size][system];
        if (row.mps.empty()) {
          std::printf("| %s | %s | %s | 0 | - | - | - | - | - | - | %d |\n",
                      sluice::bench::PlacementName(state), sizes[size], SystemName(system, size),
                      row.unfinished);
          continue;
        }
        std::printf("| %s | %s | %s | %zu | %.3g | %s | %.0f | %s | %.0f | %.0f | %d |\n",
                    sluice::bench::PlacementName(state), sizes[size], SystemName(system, size),
                    row.mps.size(), sluice::bench::Median(row.mps),
                    RatioCell(row.mps_ratio).c_str(), sluice::bench::Median(row.one_way_p50),
                    RatioCell(row.one_way_p50_ratio).c_str(),
                    sluice::bench::Median(row.one_way_p99),
                    sluice::bench::Median(row.round_trip_p50), row.unfinished);
      }
    }
  }
  std::printf(
      "medians over rounds; \"x shared memory's\": the median (least-most) of each round's "
      "ratio to the shared-memory bus's figure in that round; rounds left out (the placement "
      "changed): %d; rows that did not finish, in all rounds: %d\n",
      left_out, unfinished);
  return unfinished > 0 ? 1 : 0;
}
