// The other process of the shared-memory bus's tests. Each mode prints
// what it did as one line of key=value words on standard output, then
// exits 0; every wait has a deadline (exit 3 when it passes).
//
//   attach NAME same|other-types|other-capacity   attach=<AttachError>
//   publish NAME COUNT     messages 0..COUNT-1, each retried until admitted
//   fill NAME              LOW until refused, then MEDIUM, then HIGH
//   until-closed NAME      LOW until a publish says kClosed
//   consume NAME COUNT     creates the bus, "ready", checks COUNT messages
//   hold NAME              creates the bus, "ready", waits to be killed
//   create NAME            "create=<AttachError> took_over=0|1" of a Create,
//                          then keeps the bus until SIGTERM (30 s at most)
//   create-stop NAME STEP  as create, but at Create's step STEP
//                          (detail::CreateStep) says "at=STEP" and stops
//                          itself (SIGSTOP) until continued or killed
//   die NAME PHASE         publishes HIGH 0-2 and LOW 3-4, then at HIGH:
//                          before-claim: nothing; fill-claimed: claims the
//                          fill only; ring-claimed: the fill and a ring slot;
//                          half-written: and writes half the envelope;
//                          published: publishes 5; published-no-wake:
//                          publishes 5 but is killed before it wakes
//                          anyone. Then HIGH 6-7 and LOW 8,
//                          "dying lane=L", and SIGKILL to itself.
//   publish-when-asleep NAME   once the consumer sleeps, publishes Stop 1;
//                          "published"
//   publish-unwoken NAME   once the consumer sleeps, publishes Stop 1 as a
//                          publish does but without the wake-up call, says
//                          "published-unwoken" and SIGKILLs itself (killed
//                          between its publish and its wake-up call)
//   block NAME             LOW until refused ("full count=N"), then a
//                          PublishBlocking of Stop 999 at LOW, 20 s:
//                          "blocked outcome=<PublishOutcome>"
//   bursts NAME COUNT BURST    PublishBlocking (an hour) of Stop 0..COUNT-1
//                          at LOW, 1 ms apart after every BURST:
//                          "published=COUNT timeouts=K"
//   leader-exits NAME COUNT    a thread publishes Stop 0..COUNT-1 at LOW
//                          while the main thread has exited (pthread_exit);
//                          the process ends with that thread, never
//                          detaching
//   loans NAME COUNT       on the loan bus: COUNT frames, 4 KB (even) and
//                          64 KB (odd), loaned, filled and published at LOW,
//                          each retried until a block and room are free
//   consume-loans-slowly NAME  creates (or takes over) the loan bus,
//                          "ready took_over=0|1", then for each message
//                          "got" and a 2 ms pause, until killed
//   scribble-loan NAME     on the loan bus: publishes frame 0 (4 KB),
//                          "scribbling", then writes its seq 1, 2, 3, ...
//                          through the pointer it kept, until killed
//   hold-loans NAME        on the loan bus: publishes frames 0 (4 KB) and 1
//                          (64 KB), takes every block left, "holding
//                          taken=N", SIGKILLs itself
//   consume-slowly NAME    creates the bus, "ready", then for each message
//                          "got seq=N" and a 2 ms pause, until killed
//   block-sandboxed NAME   as block, in a process where membarrier fails
//                          (a seccomp filter: EPERM), as in a sandbox
//   wait-sandboxed-scribbled NAME   in a process where membarrier fails,
//                          creates the bus (or takes a killed consumer's
//                          over), writes 1 into every byte of the
//                          wake page's consumer signal but its two counters
//                          (what a producer can reach), then waits 300 ms
//                          with nothing published: "asymmetric=0|1
//                          switches=N" (the signal's byte as read after the
//                          writes; the thread's voluntary context switches
//                          during the wait) "took_over=0|1"
//   publish-after-unshare-time NAME COUNT   unshare(CLONE_NEWTIME) with
//                          its children's clocks 1,000,000 s ahead (not its
//                          own), then Stop 0..COUNT-1 at LOW; "published"
//   exec-after NAME        publishes Stop 0-2 at LOW, "published lane=L",
//                          then replaces itself with /bin/sleep 30 (exec:
//                          the same process, the segment closed on exec)
//   probe-isolation NAME   attaches (run as another user than the
//                          consumer's), tries to open the header and every
//                          lane by name, reads what it maps of the bus in
//                          /proc/self/maps, publishes Stop 1000..1009 at
//                          HIGH with sender id 1, and says "lane=L
//                          opened=N other_lanes_mapped=N own_lane_mapped=N
//                          header_writable=0|1 published=N"
//   publish-threads NAME THREADS   "publishing lane=L", then each thread
//                          publishes (thread << 40) + i, i = 0, 1, ..., with
//                          PriorityOf(i), until killed
//   fork-after-unshare-time NAME COUNT   attaches (its clock's offset read:
//                          0), then unshare(CLONE_NEWTIME) with its
//                          children's clocks 1,000,000 s ahead, and forks a
//                          child that attaches anew and publishes Stop
//                          0..COUNT-1 at LOW; "published" once the child
//                          exited 0. With a last word "pid1": the process
//                          that attaches first is pid 1 of a PID namespace
//                          of its own, and its child pid 1 of another
//   batch-killed NAME      one PublishBatch of Stop 0..15 at LOW; while it
//                          reads element 5 (0-4 published) says "inside
//                          batch lane=L" and waits to be killed
// Stops this process at one step of ShmBus::Create when asked
// (create-stop): defined before the bus is included (ipc/create_steps.hpp).
namespace peer_hook {
void AtCreateStep(int step);
}  // namespace peer_hook
#define SLUICE_IPC_CREATE_STEP(step) ::peer_hook::AtCreateStep(static_cast<int>(step))

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sluice/ipc/shm_bus.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus_view.hpp"
#include "ipc_test_messages.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Stop;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
using Consumer = sluice::ipc::ShmBus<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;

constexpr auto kDeadline = 30s;

int Fail(const char* what) {
  std::printf("error=%s\n", what);
  std::fflush(stdout);
  return 3;
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int Attach(const std::string& name, const std::string& variant) {
  AttachError error = AttachError::kNone;
  if (variant == "same") {
    Producer producer;
    error = producer.Attach(name);
  } else if (variant == "other-types") {
    sluice::ipc::ShmProducer<sluice_ipc_test::OtherPayload, kCapacity> producer;
    error = producer.Attach(name);
  } else {
    sluice::ipc::ShmProducer<Payload, kCapacity * 2> producer;
    error = producer.Attach(name);
  }
  Say("attach=" + std::to_string(static_cast<int>(error)));
  return 0;
}

int Publish(const std::string& name, std::uint64_t count) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::uint64_t refused = 0;
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    for (;;) {
      const auto result = std::visit(
          [&](const auto& message) {
            return producer.PublishWithPriority(message, 7, sluice_ipc_test::PriorityOf(seq));
          },
          sluice_ipc_test::MakeMessage(seq));
      if (result) break;
      if (result.Outcome() != PublishOutcome::kRefusedFull) return Fail("publish");
      if (std::chrono::steady_clock::now() > deadline) return Fail("deadline");
      ++refused;
      std::this_thread::yield();
    }
  }
  Say("published=" + std::to_string(count) + " refused=" + std::to_string(refused));
  return 0;
}

int Fill(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  std::uint64_t seq = 0;
  std::uint64_t admitted[3] = {0, 0, 0};
  for (int p = 0; p < 3; ++p) {
    const auto priority = static_cast<MessagePriority>(p);
    while (producer.PublishWithPriority(sluice_ipc_test::Stop{static_cast<std::uint32_t>(p), seq},
                                        7, priority)) {
      ++seq;
      ++admitted[p];
    }
  }
  Say("low=" + std::to_string(admitted[0]) + " medium=" + std::to_string(admitted[1]) +
      " high=" + std::to_string(admitted[2]));
  return 0;
}

int UntilClosed(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("attached");
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::uint64_t admitted = 0;
  for (std::uint64_t seq = 0; std::chrono::steady_clock::now() < deadline; ++seq) {
    const auto result =
        producer.PublishWithPriority(sluice_ipc_test::Stop{0, seq}, 7, MessagePriority::LOW);
    if (result.Outcome() == PublishOutcome::kClosed) {
      Say("closed admitted=" + std::to_string(admitted));
      return 0;
    }
    if (result) ++admitted;
    std::this_thread::sleep_for(1ms);
  }
  return Fail("deadline");
}

int Consume(const std::string& name, std::uint64_t count) {
  Consumer bus;
  const AttachError error = bus.Create(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("ready");
  std::vector<int> times(count, 0);
  std::uint64_t received = 0;
  std::uint64_t bad = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (received + bad < count) {
    if (std::chrono::steady_clock::now() > deadline) return Fail("deadline");
    const std::uint32_t taken =
        bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& e) {
          const std::uint64_t seq = sluice_ipc_test::SeqOf(e.payload);
          if (seq >= count || !sluice_ipc_test::IsIntact(e.payload) ||
              e.header.priority != sluice_ipc_test::PriorityOf(seq) || ++times[seq] != 1) {
            ++bad;
          } else {
            ++received;
          }
        });
    if (taken == 0) std::this_thread::sleep_for(100us);
  }
  Say("received=" + std::to_string(received) + " bad=" + std::to_string(bad) +
      " corrupt=" + std::to_string(bus.GetStatistics().corrupt));
  return 0;
}

int ConsumeSlowly(const std::string& name) {
  Consumer bus;
  const AttachError error = bus.Create(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("ready");
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::uint32_t taken = bus.ProcessBatchWith([](const auto& message) {
      Say("got seq=" + std::to_string(sluice_ipc_test::SeqOf(Payload(message))));
      std::this_thread::sleep_for(2ms);
    });
    if (taken == 0) std::this_thread::sleep_for(100us);
  }
  return Fail("deadline");
}

int Hold(const std::string& name) {
  Consumer bus;
  const AttachError error = bus.Create(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("ready");
  std::this_thread::sleep_for(kDeadline);
  return Fail("deadline");
}

int create_stop_step = -1;

int CreateOnce(const std::string& name, int stop_step) {
  // SIGTERM ends the hold below; blocked now, so that it is never lost.
  sigset_t terminate;
  sigemptyset(&terminate);
  sigaddset(&terminate, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &terminate, nullptr) != 0) return Fail("sigmask");
  create_stop_step = stop_step;
  Consumer bus;
  const AttachError error = bus.Create(name);
  Say("create=" + std::to_string(static_cast<int>(error)) +
      " took_over=" + std::to_string(bus.TookOver() ? 1 : 0));
  // Holds the name (if it won) until the test has judged both consumers.
  const timespec hold{std::chrono::duration_cast<std::chrono::seconds>(kDeadline).count(), 0};
  if (sigtimedwait(&terminate, nullptr, &hold) != SIGTERM) return Fail("not told to end");
  return 0;
}

bool PublishSeq(Producer& producer, std::uint64_t seq, MessagePriority priority) {
  return static_cast<bool>(std::visit(
      [&](const auto& message) { return producer.PublishWithPriority(message, 7, priority); },
      sluice_ipc_test::MakeMessage(seq)));
}

// Publishes `payload` at HIGH into `rings` as a publish does, but wakes no
// one: a producer killed right after its publish.
bool PublishBare(sluice_ipc_test::LaneRings<Layout>& rings, const Payload& payload) {
  auto& high = rings.Ring(static_cast<std::size_t>(MessagePriority::HIGH));
  sluice::Position id = 0;
  sluice::Position slot = 0;
  if (!rings.Fill().TryClaim(kCapacity, &id) || !high.TryClaimExactly(kCapacity, 1, &slot)) {
    return false;
  }
  sluice::MessageHeader header;
  header.msg_id = id;
  header.sender_id = 7;
  header.priority = MessagePriority::HIGH;
  new (high.Storage(slot)) sluice::MessageEnvelope<Payload>{header, payload};
  rings.Fill().Commit(id);
  high.Publish(slot);
  return true;
}

int Die(const std::string& name, const std::string& phase) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    if (!PublishSeq(producer, seq, seq < 3 ? MessagePriority::HIGH : MessagePriority::LOW)) {
      return Fail("publish");
    }
  }
  // The lane's rings, through a mapping of this test's own: a claim taken
  // as Publish takes it, step by step, to die between two steps.
  sluice_ipc_test::BusView<Layout> segment;
  if (segment.Open(name) != AttachError::kNone) {
    return Fail("map");
  }
  sluice_ipc_test::LaneRings<Layout> rings(segment.Base(), producer.Lane() - 1u);
  auto& high = rings.Ring(static_cast<std::size_t>(MessagePriority::HIGH));
  sluice::Position id = 0;
  sluice::Position slot = 0;
  if (phase == "published") {
    if (!PublishSeq(producer, 5, MessagePriority::HIGH)) return Fail("publish");
  } else if (phase == "published-no-wake") {
    if (!PublishBare(rings, sluice_ipc_test::MakeMessage(5))) return Fail("claim");
  } else if (phase != "before-claim") {
    if (!rings.Fill().TryClaim(kCapacity, &id)) return Fail("fill claim");
    if (phase != "fill-claimed") {
      if (!high.TryClaimExactly(kCapacity, 1, &slot)) return Fail("ring claim");
      if (phase == "half-written") {
        std::memset(high.Storage(slot), 0xAB, sizeof(sluice::MessageEnvelope<Payload>) / 2);
      } else if (phase != "ring-claimed") {
        return Fail("phase");
      }
    }
  }
  for (std::uint64_t seq = 6; seq < 9; ++seq) {
    if (!PublishSeq(producer, seq, seq < 8 ? MessagePriority::HIGH : MessagePriority::LOW)) {
      return Fail("publish");
    }
  }
  Say("dying lane=" + std::to_string(producer.Lane()));
  ::raise(SIGKILL);
  return Fail("alive");
}

// Waits until the consumer of the segment mapped at `base` sleeps.
bool WaitForSleepingConsumer(void* base) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (Layout::WakeOf(base)->consumer_wake.Waiters() == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

int PublishWhenAsleep(const std::string& name, bool wake) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  sluice_ipc_test::BusView<Layout> segment;
  if (segment.Open(name) != AttachError::kNone) {
    return Fail("map");
  }
  if (!WaitForSleepingConsumer(segment.Base())) return Fail("consumer never slept");
  // Past its re-check, most likely: the test is then sure to need the
  // wake-up (it passes either way when the bus is right).
  std::this_thread::sleep_for(50ms);
  if (wake) {
    if (!producer.PublishWithPriority(sluice_ipc_test::Stop{0, 1}, 7, MessagePriority::HIGH)) {
      return Fail("publish");
    }
    Say("published");
    return 0;
  }
  sluice_ipc_test::LaneRings<Layout> rings(segment.Base(), producer.Lane() - 1u);
  if (!PublishBare(rings, sluice_ipc_test::Stop{0, 1})) return Fail("claim");
  Say("published-unwoken");
  ::raise(SIGKILL);
  return Fail("alive");
}

// Makes membarrier fail with EPERM in this process, as a sandbox's seccomp
// filter would.
bool ForbidMembarrier() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

int WaitSandboxedScribbled(const std::string& name) {
  if (!ForbidMembarrier()) return Fail("seccomp");
  Consumer bus;
  const AttachError error = bus.Create(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  sluice_ipc_test::BusView<Layout> writer;
  if (writer.Open(name) != AttachError::kNone) return Fail("open");
  auto& signal = writer.Wake()->consumer_wake;
  auto* bytes = reinterpret_cast<unsigned char*>(&signal);
  const std::size_t word =
      static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(&signal.Word()) - bytes);
  // The waiter count is the first word (alignas: offset 0).
  for (std::size_t at = 0; at < sizeof(signal); ++at) {
    const bool counter = at < sizeof(std::uint32_t) || (at >= word && at < word + 4);
    if (!counter) bytes[at] = 1;
  }
  rusage before{};
  rusage after{};
  if (::getrusage(RUSAGE_THREAD, &before) != 0) return Fail("getrusage");
  (void)bus.ProcessBatchWait(std::chrono::milliseconds(300));
  if (::getrusage(RUSAGE_THREAD, &after) != 0) return Fail("getrusage");
  Say("asymmetric=" + std::to_string(signal.Asymmetric() ? 1 : 0) +
      " switches=" + std::to_string(after.ru_nvcsw - before.ru_nvcsw) +
      " took_over=" + std::to_string(bus.TookOver() ? 1 : 0));
  return 0;
}

int Block(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  std::uint64_t count = 0;
  while (producer.PublishWithPriority(sluice_ipc_test::Stop{0, count}, 7, MessagePriority::LOW))
    ++count;
  Say("full count=" + std::to_string(count));
  const auto result =
      producer.PublishBlocking(sluice_ipc_test::Stop{0, 999}, 7, MessagePriority::LOW, 1h);
  Say("blocked outcome=" + std::to_string(static_cast<int>(result.Outcome())));
  return 0;
}

int Bursts(const std::string& name, std::uint64_t count, std::uint64_t burst) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  std::uint64_t timeouts = 0;
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    while (!producer.PublishBlocking(sluice_ipc_test::Stop{0, seq}, 7, MessagePriority::LOW, 1h)) {
      ++timeouts;
    }
    if ((seq + 1) % burst == 0) std::this_thread::sleep_for(1ms);
  }
  Say("published=" + std::to_string(count) + " timeouts=" + std::to_string(timeouts));
  return 0;
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

int LeaderExits(const std::string& name, std::uint64_t count) {
  // Never destroyed (nor leaked from the heap): the process ends when its
  // last thread does, attached.
  alignas(Producer) static unsigned char storage[sizeof(Producer)];
  auto* producer = new (storage) Producer;
  const AttachError error = producer->Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  std::thread([producer, count] {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    for (std::uint64_t seq = 0; seq < count && std::chrono::steady_clock::now() < deadline;) {
      if (producer->PublishWithPriority(sluice_ipc_test::Stop{0, seq}, 7, MessagePriority::LOW)) {
        ++seq;
        if (seq % 100 == 0) std::this_thread::sleep_for(200us);
      } else {
        std::this_thread::yield();
      }
    }
    // ThreadSanitizer keeps a thread of its own running, so there the
    // process would outlive its last thread: it ends here instead, as it
    // would when this thread returned.
    if (kUnderThreadSanitizer) ::_exit(0);
  }).detach();
  Say("attached lane=" + std::to_string(producer->Lane()));
  ::pthread_exit(nullptr);
}

using LoanProducer =
    sluice::ipc::ShmProducer<sluice_ipc_test::LoanPayload, sluice_ipc_test::kLoanCapacity>;

// Loans a frame of `kBytes` for `seq`, fills it and publishes it at LOW;
// false while no block or no room is free.
template <std::size_t kBytes>
bool PublishFrame(LoanProducer& producer, std::uint64_t seq) {
  auto frame = producer.Loan<sluice_ipc_test::Frame<kBytes>>();
  if (!frame) return false;
  sluice_ipc_test::FillFrame(*frame, seq);
  return static_cast<bool>(producer.PublishLoan(std::move(frame), 7, MessagePriority::LOW));
}

int Loans(const std::string& name, std::uint64_t count) {
  LoanProducer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::uint64_t waits = 0;
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    while (
        !(seq % 2 == 0 ? PublishFrame<4096>(producer, seq) : PublishFrame<65536>(producer, seq))) {
      if (std::chrono::steady_clock::now() > deadline) return Fail("deadline");
      ++waits;
      std::this_thread::yield();
    }
  }
  Say("published=" + std::to_string(count) + " waits=" + std::to_string(waits));
  return 0;
}

int ConsumeLoansSlowly(const std::string& name) {
  sluice::ipc::ShmBus<sluice_ipc_test::LoanPayload, sluice_ipc_test::kLoanCapacity> bus;
  const AttachError error = bus.Create(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("ready took_over=" + std::to_string(bus.TookOver() ? 1 : 0));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::uint32_t taken = bus.ProcessBatchWith([](const auto&) {
      Say("got");
      std::this_thread::sleep_for(2ms);
    });
    if (taken == 0) std::this_thread::sleep_for(100us);
  }
  return Fail("deadline");
}

// A hostile producer: publishes a loaned frame, then keeps writing its
// block through the pointer it kept (its seq counts up) until killed.
int ScribbleLoan(const std::string& name) {
  LoanProducer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  auto frame = producer.Loan<sluice_ipc_test::Frame4K>();
  if (!frame) return Fail("no block");
  sluice_ipc_test::FillFrame(*frame, 0);
  auto* kept = reinterpret_cast<volatile std::uint64_t*>(&frame->seq);
  if (!producer.PublishLoan(std::move(frame), 7, MessagePriority::LOW)) return Fail("refused");
  Say("scribbling");
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (std::uint64_t n = 1; std::chrono::steady_clock::now() < deadline; ++n) *kept = n;
  return Fail("deadline");
}

int HoldLoans(const std::string& name) {
  LoanProducer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  if (!PublishFrame<4096>(producer, 0) || !PublishFrame<65536>(producer, 1)) {
    return Fail("publish");
  }
  std::vector<sluice::ipc::ShmLoan<sluice_ipc_test::Frame4K>> held;
  for (auto loan = producer.Loan<sluice_ipc_test::Frame4K>(); loan;
       loan = producer.Loan<sluice_ipc_test::Frame4K>()) {
    held.push_back(std::move(loan));
  }
  Say("holding taken=" + std::to_string(held.size()));
  ::raise(SIGKILL);
  return Fail("alive");
}

int PublishThreads(const std::string& name, unsigned threads) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  Say("publishing lane=" + std::to_string(producer.Lane()));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&producer, t, deadline] {
      std::uint64_t i = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        const std::uint64_t seq = (std::uint64_t{t} << 40) + i;
        if (PublishSeq(producer, seq, sluice_ipc_test::PriorityOf(i))) {
          ++i;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  return Fail("deadline");
}

}  // namespace

void peer_hook::AtCreateStep(int step) {
  if (step != create_stop_step) return;
  create_stop_step = -1;  // once: a retry passes the same step again
  Say("at=" + std::to_string(step));
  (void)::raise(SIGSTOP);
}

// Moves its future children into a new time namespace whose clocks are
// 1,000,000 s ahead (this process stays in its own), then publishes Stop
// 0..COUNT-1 at LOW, each retried until admitted; "published".
int PublishAfterUnshareTime(const std::string& name, std::uint64_t count) {
  if (::unshare(CLONE_NEWTIME) != 0) return Fail("unshare");
  std::FILE* offsets = std::fopen("/proc/self/timens_offsets", "w");
  if (offsets == nullptr) return Fail("timens_offsets");
  const bool written = std::fputs("monotonic 1000000 0\n", offsets) >= 0;
  if (std::fclose(offsets) != 0 || !written) return Fail("timens_offsets");
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (std::uint32_t seq = 0; seq < count; ++seq) {
    while (!producer.PublishWithPriority(sluice_ipc_test::Stop{seq, seq}, 0,
                                         sluice::MessagePriority::LOW)) {
      if (std::chrono::steady_clock::now() > deadline) return Fail("deadline");
      std::this_thread::yield();
    }
  }
  Say("published");
  return 0;
}

// fork-after-unshare-time's work: attaches (its offset read), unshares
// time (and `more`) for its children, forks a child that attaches anew and
// publishes; 0 once the child exited 0.
int AttachUnshareFork(const std::string& name, std::uint64_t count, int more) {
  Producer parent;
  const AttachError error = parent.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  if (::unshare(CLONE_NEWTIME | more) != 0) return Fail("unshare");
  std::FILE* offsets = std::fopen("/proc/self/timens_offsets", "w");
  if (offsets == nullptr) return Fail("timens_offsets");
  const bool written = std::fputs("monotonic 1000000 0\n", offsets) >= 0;
  if (std::fclose(offsets) != 0 || !written) return Fail("timens_offsets");
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) return Fail("fork");
  if (child == 0) {
    // In the new time namespace: attaches again, as a forked child must.
    Producer producer;
    if (producer.Attach(name) != AttachError::kNone) ::_exit(4);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    for (std::uint32_t seq = 0; seq < count; ++seq) {
      while (!producer.PublishWithPriority(Stop{seq, seq}, 0, sluice::MessagePriority::LOW)) {
        if (std::chrono::steady_clock::now() > deadline) ::_exit(3);
        std::this_thread::yield();
      }
    }
    producer.Detach();
    ::_exit(0);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail("child");
  }
  return 0;
}

// `as_pid_one`: the process that attaches is pid 1 of a PID namespace of its
// own, and its child pid 1 of another, as in nested containers: one pid for
// both processes.
int ForkAfterUnshareTime(const std::string& name, std::uint64_t count, bool as_pid_one) {
  if (!as_pid_one) {
    if (AttachUnshareFork(name, count, 0) != 0) return 1;
    Say("published");
    return 0;
  }
  if (::unshare(CLONE_NEWPID) != 0) return Fail("unshare");
  std::fflush(stdout);
  const pid_t init = ::fork();
  if (init < 0) return Fail("fork");
  if (init == 0) ::_exit(AttachUnshareFork(name, count, CLONE_NEWPID) == 0 ? 0 : 5);
  int status = 0;
  if (::waitpid(init, &status, 0) != init || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail("pid 1");
  }
  Say("published");
  return 0;
}

// The elements of batch-killed: Stop 0..15, read one at a time, a range
// PublishBatch looks ahead into; reading element 5 says so and waits (30 s
// at most) for the test to kill it.
class StopsUntilKilled {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = Stop;
  using difference_type = std::ptrdiff_t;
  using pointer = const Stop*;
  using reference = Stop;
  StopsUntilKilled() = default;
  StopsUntilKilled(std::uint64_t index, std::uint16_t lane) : index_(index), lane_(lane) {}
  Stop operator*() const {
    if (index_ == 5) {
      Say("inside batch lane=" + std::to_string(lane_));
      std::this_thread::sleep_for(kDeadline);
    }
    return Stop{0, index_};
  }
  StopsUntilKilled& operator++() {
    ++index_;
    return *this;
  }
  StopsUntilKilled operator++(int) {
    StopsUntilKilled before = *this;
    ++index_;
    return before;
  }
  // Random access as PublishBatch tells it (`last - first`): the batch
  // claims its run at once, then writes and publishes one by one.
  difference_type operator-(const StopsUntilKilled& other) const {
    return static_cast<difference_type>(index_) - static_cast<difference_type>(other.index_);
  }
  bool operator==(const StopsUntilKilled& other) const { return index_ == other.index_; }
  bool operator!=(const StopsUntilKilled& other) const { return index_ != other.index_; }

 private:
  std::uint64_t index_ = 0;
  std::uint16_t lane_ = 0;
};

int BatchKilled(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  (void)producer.PublishBatch(StopsUntilKilled(0, producer.Lane()),
                              StopsUntilKilled(16, producer.Lane()), 7,
                              sluice::MessagePriority::LOW);
  return Fail("not killed inside the batch");
}

int ExecAfter(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name);
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  for (std::uint32_t seq = 0; seq < 3; ++seq) {
    if (!producer.PublishWithPriority(sluice_ipc_test::Stop{seq, seq}, 0,
                                      sluice::MessagePriority::LOW)) {
      return Fail("refused");
    }
  }
  Say("published lane=" + std::to_string(producer.Lane()));
  ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
  return Fail("exec");
}

int ProbeIsolation(const std::string& name) {
  Producer producer;
  const AttachError error = producer.Attach(name, "intruder");
  if (error != AttachError::kNone) return Fail(sluice::ipc::ToString(error));
  const std::size_t own = producer.Lane() - 1u;
  int opened = 0;
  std::vector<std::string> parts{name};
  for (std::size_t lane = 0; lane < Layout::kLanes; ++lane) {
    parts.push_back(name + ".lane" + std::to_string(lane));
  }
  for (const std::string& part : parts) {
    for (const int flags : {O_RDONLY, O_RDWR}) {
      const int fd = ::shm_open(part.c_str(), flags | O_CLOEXEC, 0);
      if (fd >= 0) {
        ++opened;
        ::close(fd);
      }
    }
  }
  // Each mapping's permissions and file, as the kernel lists them.
  int other_lanes = 0;
  int own_lane = 0;
  int header_writable = 0;
  const std::string header_path = std::string(sluice::ipc::kSharedMemoryDirectory) + name;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode >> path;
    if (path == header_path && permissions[1] == 'w') header_writable = 1;
    const std::string lane_prefix = header_path + ".lane";
    if (path.compare(0, lane_prefix.size(), lane_prefix) != 0) continue;
    const std::size_t lane = std::stoul(path.substr(lane_prefix.size()));
    ++(lane == own ? own_lane : other_lanes);
  }
  int published = 0;
  for (std::uint64_t seq = 1000; seq < 1010; ++seq) {
    if (producer.PublishWithPriority(sluice_ipc_test::Stop{2, seq}, 1, MessagePriority::HIGH)) {
      ++published;
    }
  }
  Say("lane=" + std::to_string(producer.Lane()) + " opened=" + std::to_string(opened) +
      " other_lanes_mapped=" + std::to_string(other_lanes) + " own_lane_mapped=" +
      std::to_string(own_lane) + " header_writable=" + std::to_string(header_writable) +
      " published=" + std::to_string(published));
  return 0;
}

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "attach") return Attach(args[1], args[2]);
  if (args.size() == 3 && args[0] == "publish") return Publish(args[1], std::stoull(args[2]));
  if (args.size() == 2 && args[0] == "fill") return Fill(args[1]);
  if (args.size() == 2 && args[0] == "until-closed") return UntilClosed(args[1]);
  if (args.size() == 3 && args[0] == "consume") return Consume(args[1], std::stoull(args[2]));
  if (args.size() == 2 && args[0] == "hold") return Hold(args[1]);
  if (args.size() == 2 && args[0] == "consume-slowly") return ConsumeSlowly(args[1]);
  if (args.size() == 2 && args[0] == "create") return CreateOnce(args[1], -1);
  if (args.size() == 3 && args[0] == "create-stop") return CreateOnce(args[1], std::stoi(args[2]));
  if (args.size() == 3 && args[0] == "die") return Die(args[1], args[2]);
  if (args.size() == 2 && args[0] == "publish-when-asleep") return PublishWhenAsleep(args[1], true);
  if (args.size() == 2 && args[0] == "publish-unwoken") return PublishWhenAsleep(args[1], false);
  if (args.size() == 2 && args[0] == "block") return Block(args[1]);
  if (args.size() == 2 && args[0] == "wait-sandboxed-scribbled") {
    return WaitSandboxedScribbled(args[1]);
  }
  if (args.size() == 2 && args[0] == "block-sandboxed") {
    if (!ForbidMembarrier()) return Fail("seccomp");
    return Block(args[1]);
  }
  if (args.size() == 3 && args[0] == "loans") return Loans(args[1], std::stoull(args[2]));
  if (args.size() == 2 && args[0] == "hold-loans") return HoldLoans(args[1]);
  if (args.size() == 2 && args[0] == "consume-loans-slowly") return ConsumeLoansSlowly(args[1]);
  if (args.size() == 2 && args[0] == "scribble-loan") return ScribbleLoan(args[1]);
  if (args.size() == 3 && args[0] == "leader-exits")
    return LeaderExits(args[1], std::stoull(args[2]));
  if (args.size() == 4 && args[0] == "bursts") {
    return Bursts(args[1], std::stoull(args[2]), std::stoull(args[3]));
  }
  if (args.size() == 2 && args[0] == "exec-after") return ExecAfter(args[1]);
  if (args.size() == 2 && args[0] == "batch-killed") return BatchKilled(args[1]);
  if (args.size() == 3 && args[0] == "fork-after-unshare-time") {
    return ForkAfterUnshareTime(args[1], std::stoull(args[2]), false);
  }
  if (args.size() == 4 && args[0] == "fork-after-unshare-time" && args[3] == "pid1") {
    return ForkAfterUnshareTime(args[1], std::stoull(args[2]), true);
  }
  if (args.size() == 3 && args[0] == "publish-after-unshare-time") {
    return PublishAfterUnshareTime(args[1], std::stoull(args[2]));
  }
  if (args.size() == 2 && args[0] == "probe-isolation") return ProbeIsolation(args[1]);
  if (args.size() == 3 && args[0] == "publish-threads") {
    return PublishThreads(args[1], static_cast<unsigned>(std::stoul(args[2])));
  }
  std::fprintf(stderr, "usage: see the comment at the top of peer.cpp\n");
  return 2;
}
