// The bare-metal (one core, interrupts) contracts, on the build host: this
// binary is built with SLUICE_FREESTANDING=1, and the x86 trap flag stands in
// for an interrupt at every instruction: the call under test is
// single-stepped, and after each of its instructions a SIGTRAP handler runs
// the "interrupt handler" to completion before the next instruction, exactly
// as an interrupt preempts thread mode on a Cortex-M. Every instruction
// boundary is tried, so a window of one instruction cannot hide.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "sluice/detail/test_access.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"
#include "test_support.hpp"

static_assert(SLUICE_FREESTANDING, "this test is built with SLUICE_FREESTANDING=1");

// A sanitizer's instrumentation multiplies the instructions a stepped call and
// its "interrupt" execute (a hundred times the run time under AddressSanitizer)
// and steps through the sanitizer's own code: these tests run in the plain
// builds, where the stepped code is the library's alone.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLUICE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLUICE_TEST_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__linux__) && !defined(SLUICE_TEST_SANITIZED)
#define SLUICE_TEST_SINGLE_STEP 1
#include <signal.h>
#include <ucontext.h>
#endif

namespace sluice_test {
namespace {

#if SLUICE_TEST_SINGLE_STEP

constexpr long long kTrapFlag = 0x100;
std::atomic<bool> g_stepping{false};
std::atomic<std::uint64_t> g_steps{0};
void (*g_on_step)() = nullptr;
// With a nonzero value, the interrupt fires only after that instruction.
std::uint64_t g_fire_at_step = 0;
void (*g_action)() = nullptr;
void FireOnce() {
  if (g_steps.load(std::memory_order_relaxed) == g_fire_at_step) g_action();
}

void TrapHandler(int, siginfo_t*, void* raw_context) {
  auto* context = static_cast<ucontext_t*>(raw_context);
  if (g_stepping.load(std::memory_order_relaxed)) {
    context->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
    g_steps.fetch_add(1, std::memory_order_relaxed);
    g_on_step();
  } else {
    context->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
  }
}

// Runs `body` with `on_step` called after each of its instructions. A
// watchdog fails the test if no instruction completes for a long time: an
// "interrupt handler" that waits for the context it preempted never returns.
template <typename Body>
std::uint64_t RunWithAnInterruptAtEveryInstruction(void (*on_step)(), Body body) {
  struct sigaction action = {};
  struct sigaction previous = {};
  action.sa_sigaction = &TrapHandler;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTRAP, &action, &previous);
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    std::uint64_t last = g_steps.load();
    auto last_change = std::chrono::steady_clock::now();
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const std::uint64_t now = g_steps.load();
      if (now != last) {
        last = now;
        last_change = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_change > std::chrono::minutes(1)) {
        std::fprintf(stderr, "deadlock: the interrupted context made no progress\n");
        std::abort();
      }
    }
  });
  g_on_step = on_step;
  g_steps.store(0);
  g_stepping.store(true);
  __asm__ __volatile__("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
  body();
  g_stepping.store(false);
  __asm__ __volatile__("nop" ::: "memory");  // the next trap clears the flag
  finished.store(true);
  watchdog.join();
  sigaction(SIGTRAP, &previous, nullptr);
  return g_steps.load();
}

// Runs `body` once to count its instructions, then once more for each of
// them with `action` run as an interrupt after exactly that instruction.
// Returns the number of instructions.
template <typename Body>
std::uint64_t RunWithOneInterruptAtEachInstruction(void (*action)(), Body body) {
  g_action = action;
  g_fire_at_step = 0;
  const std::uint64_t count = RunWithAnInterruptAtEveryInstruction(&FireOnce, body);
  for (std::uint64_t step = 1; step <= count; ++step) {
    g_fire_at_step = step;
    RunWithAnInterruptAtEveryInstruction(&FireOnce, body);
  }
  return count;
}

// ---- SetAdmissionThresholds from an interrupt that preempts the same call.

using ThresholdBus = sluice::MpscBus<BasicPayload, 1024>;
ThresholdBus* g_threshold_bus = nullptr;
std::uint64_t g_threshold_interrupts = 0;

void SetThresholdsFromInterrupt() {
  const bool odd = (++g_threshold_interrupts & 1) != 0;
  (void)g_threshold_bus->SetAdmissionThresholds(odd ? 10 : 20, odd ? 30 : 40, odd ? 50 : 60);
}

TEST(FreestandingHostTest, ThresholdsSetFromAnInterruptThatPreemptsTheSameCall) {
  auto bus = std::make_unique<ThresholdBus>();
  g_threshold_bus = bus.get();
  // One run per instruction of the setter, each preempted there by another
  // setter. (An interrupt at every instruction would store new thresholds
  // faster than the preempted setter can rewrite the limits: the setter is
  // lock-free, and retries until such a storm pauses.)
  bool accepted = true;
  const std::uint64_t steps = RunWithOneInterruptAtEachInstruction(
      &SetThresholdsFromInterrupt,
      [&] { accepted = bus->SetAdmissionThresholds(70, 85, 95) && accepted; });
  EXPECT_TRUE(accepted);
  EXPECT_GT(steps, 10u);
  // Whatever the interleaving, the limits a publish uses agree with the
  // percentages the bus reports.
  const auto t = bus->GetAdmissionThresholds();
  std::uint32_t admitted = 0;
  while (bus->PublishWithPriority(MotorCmd{0}, 0, sluice::MessagePriority::LOW)) ++admitted;
  EXPECT_EQ(admitted, sluice::FillLimit(t.low_percent, 1024));
  while (bus->Publish(MotorCmd{0})) ++admitted;
  EXPECT_EQ(admitted, sluice::FillLimit(t.medium_percent, 1024));
  while (bus->PublishWithPriority(MotorCmd{0}, 0, sluice::MessagePriority::HIGH)) ++admitted;
  EXPECT_EQ(admitted, sluice::FillLimit(t.high_percent, 1024));
  g_threshold_bus = nullptr;
}

// ---- Unsubscribe from an interrupt while the main context dispatches.

using DispatchBus = sluice::MpscBus<BasicPayload, 64>;
DispatchBus* g_dispatch_bus = nullptr;
sluice::SubscriptionHandle g_handle;
// Each subscription gets an id; removed_idle[id] is set when Unsubscribe said
// that callable is neither running nor will run, and any later call of it
// counts as a violation. (A callable removed while running may still be
// called once by the dispatch the interrupt preempted.)
constexpr std::size_t kMaxIds = 1 << 20;
std::vector<bool> g_removed_idle_ids(kMaxIds, false);
std::size_t g_next_id = 0;
std::size_t g_handle_id = 0;
std::uint64_t g_calls_after_removal = 0;
std::uint64_t g_removed_idle = 0;
std::uint64_t g_removed_running = 0;

struct Callback {
  std::size_t id;
  void operator()(const MotorCmd&) const {
    if (g_removed_idle_ids[id % kMaxIds]) ++g_calls_after_removal;
  }
};

sluice::SubscriptionHandle SubscribeNext(DispatchBus& bus) {
  g_handle_id = g_next_id++;
  return bus.Subscribe<MotorCmd>(Callback{g_handle_id});
}

void ToggleSubscriptionFromInterrupt() {
  if (g_handle.IsValid()) {
    const auto result = g_dispatch_bus->Unsubscribe(g_handle);
    if (!result) return;
    g_handle = sluice::SubscriptionHandle();
    if (result.StillRunning()) {
      ++g_removed_running;
    } else {
      g_removed_idle_ids[g_handle_id % kMaxIds] = true;
      ++g_removed_idle;
    }
  } else {
    g_handle = SubscribeNext(*g_dispatch_bus);
  }
}

TEST(FreestandingHostTest, NoCallbackRunsAfterAnInterruptsUnsubscribeSaysItIsIdle) {
  auto bus = std::make_unique<DispatchBus>();
  g_dispatch_bus = bus.get();
  // Every other interrupt subscribes anew, so each instruction of the batch
  // meets both an Unsubscribe and a Subscribe over the runs below.
  for (int phase = 0; phase < 2; ++phase) {
    g_handle = SubscribeNext(*bus);
    if (phase == 1) ToggleSubscriptionFromInterrupt();  // start unsubscribed
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(bus->Publish(MotorCmd{i}));
    RunWithAnInterruptAtEveryInstruction(&ToggleSubscriptionFromInterrupt,
                                         [&] { bus->ProcessBatch(); });
    if (g_handle.IsValid()) (void)bus->Unsubscribe(g_handle);
    g_handle = sluice::SubscriptionHandle();
  }
  EXPECT_GT(g_removed_idle, 0u);
  EXPECT_GT(g_removed_running, 0u);
  EXPECT_EQ(g_calls_after_removal, 0u)
      << "a callable ran after Unsubscribe said it was neither running nor would run";
  g_dispatch_bus = nullptr;
}

// ---- The same window in the error reporter.

using ErrorBus = sluice::MpscBus<BasicPayload, 64>;
ErrorBus* g_error_bus = nullptr;
// The error callback the last interrupt replaced while it was idle: it must
// not be called again until it is installed anew.
int g_retired = -1;
int g_installed = 0;
std::uint64_t g_retired_calls = 0;
std::uint64_t g_calls = 0;
std::uint64_t g_idle_replacements = 0;
std::uint64_t g_running_replacements = 0;

template <int kWhich>
void ErrorCallback(const sluice::BusError&, void*) {
  ++g_calls;
  if (g_retired == kWhich) ++g_retired_calls;
}

void ReplaceErrorCallbackFromInterrupt() {
  const int previous = g_installed;
  const int next = 1 - previous;
  g_retired = -1;
  const bool previous_idle =
      g_error_bus->SetErrorCallback(next == 0 ? &ErrorCallback<0> : &ErrorCallback<1>);
  g_installed = next;
  if (previous_idle) {
    g_retired = previous;
    ++g_idle_replacements;
  } else {
    ++g_running_replacements;
  }
}

// One interrupt at each instruction of a report, one run each (an interrupt
// at every instruction would replace the callback faster than the report's
// sequence lock can copy it: a report retries until replacements pause). The
// report itself is stepped, as the consumer makes it inside a batch; a
// throwing callback would add the unwinder's million instructions.
TEST(FreestandingHostTest, ReplacedErrorCallbackIsNotCalledAfterAnInterruptSaysItIsIdle) {
  auto bus = std::make_unique<ErrorBus>();
  g_error_bus = bus.get();
  (void)bus->SetErrorCallback(&ErrorCallback<0>);
  g_installed = 0;
  sluice::BusError error;
  error.what = "stepped";
  const std::uint64_t instructions = RunWithOneInterruptAtEachInstruction(
      &ReplaceErrorCallbackFromInterrupt,
      [&] { sluice::detail::TestAccess::ReportErrorInBatch(*bus, error); });
  EXPECT_EQ(g_calls, instructions + 1) << "one call per report";
  EXPECT_GT(g_idle_replacements, 0u);
  EXPECT_GT(g_running_replacements, 0u);
  EXPECT_EQ(g_retired_calls, 0u);
  g_error_bus = nullptr;
}

// ---- ResetStatistics preempted by a reset or a snapshot.

using StatsBus = sluice::MpscBus<BasicPayload, 64>;
StatsBus* g_stats_bus = nullptr;
std::uint64_t g_bad_snapshots = 0;

void PublishDrainAndResetFromInterrupt() {
  for (int i = 0; i < 5; ++i) (void)g_stats_bus->Publish(MotorCmd{i});
  while (g_stats_bus->ProcessBatch() != 0) {
  }
  g_stats_bus->ResetStatistics();
}

void SnapshotFromInterrupt() {
  const auto s = g_stats_bus->GetStatistics();
  if (s.messages_processed > s.messages_published) ++g_bad_snapshots;
}

// Baselines are stored one field at a time: a reset (or a snapshot) that
// lands between two of them must not leave processed ahead of published.
TEST(FreestandingHostTest, ResetPreemptedByAResetKeepsProcessedEqualToPublishedAfterADrain) {
  auto bus = std::make_unique<StatsBus>();
  g_stats_bus = bus.get();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus->Publish(MotorCmd{i}));
  while (bus->ProcessBatch() != 0) {
  }
  // One run per instruction of this reset, each preempted there by a
  // publish, a drain and a reset; then the bus is drained and checked.
  std::uint64_t unequal = 0;
  for (std::uint64_t step = 1;; ++step) {
    g_fire_at_step = step;
    g_action = &PublishDrainAndResetFromInterrupt;
    const std::uint64_t count =
        RunWithAnInterruptAtEveryInstruction(&FireOnce, [&] { bus->ResetStatistics(); });
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(bus->Publish(MotorCmd{i}));
    while (bus->ProcessBatch() != 0) {
    }
    const auto s = bus->GetStatistics();
    if (s.messages_processed != s.messages_published) ++unequal;
    if (step >= count) break;
  }
  EXPECT_EQ(unequal, 0u) << "processed != published on a quiet, drained bus";
  g_stats_bus = nullptr;
}

TEST(FreestandingHostTest, SnapshotDuringAResetNeverShowsProcessedAbovePublished) {
  auto bus = std::make_unique<StatsBus>();
  g_stats_bus = bus.get();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(bus->Publish(MotorCmd{i}));
  while (bus->ProcessBatch() != 0) {
  }
  g_bad_snapshots = 0;
  RunWithAnInterruptAtEveryInstruction(&SnapshotFromInterrupt, [&] { bus->ResetStatistics(); });
  EXPECT_EQ(g_bad_snapshots, 0u);
  g_stats_bus = nullptr;
}

// ---- Depth read by a consumer that preempts a publish.

// A consumer interrupt after every instruction of a publish dispatches what
// is readable and then reads the depth: it must never read more than the one
// message the publish is adding (the SPSC ring once published the slot
// before accounting for its claim, so a consumer could release past the
// tail and read a negative depth, a full queue). Every instruction boundary
// of the publish is tried, so the window cannot hide as it can from a
// threaded test.
template <typename Bus>
struct DepthCheck {
  static inline Bus* bus = nullptr;
  static inline std::uint64_t bad_depths = 0;
  static inline std::uint64_t bad_levels = 0;
  static void ConsumeAndReadFromInterrupt() {
    (void)bus->ProcessBatch();
    if (bus->QueueDepth() > 1) ++bad_depths;
    if (bus->GetBackpressureLevel() != sluice::BackpressureLevel::NORMAL) ++bad_levels;
  }
  static void Run() {
    auto owned = std::make_unique<Bus>();
    bus = owned.get();
    bad_depths = 0;
    bad_levels = 0;
    std::uint64_t instructions = 0;
    for (int i = 0; i < 3; ++i) {
      instructions += RunWithAnInterruptAtEveryInstruction(
          &ConsumeAndReadFromInterrupt, [] { ASSERT_TRUE(bus->Publish(MotorCmd{1})); });
      (void)bus->ProcessBatch();
    }
    EXPECT_GT(instructions, 0u);
    EXPECT_EQ(bad_depths, 0u) << "a consumer read a depth above the one message in flight";
    EXPECT_EQ(bad_levels, 0u) << "a consumer read a nearly empty queue as full";
    bus = nullptr;
  }
};

TEST(FreestandingHostTest, ConsumerPreemptingAnSpscPublishNeverReadsItFull) {
  DepthCheck<sluice::SpscBus<BasicPayload, 1024>>::Run();
}
TEST(FreestandingHostTest, ConsumerPreemptingAnMpscPublishNeverReadsItFull) {
  DepthCheck<sluice::MpscBus<BasicPayload, 1024>>::Run();
}

// ---- Close from an interrupt that preempts a Close.

// A Close that preempts another one (an interrupt, a signal handler on the
// same thread) must return without waiting for it (the preempted one cannot
// run until the interrupt returns), and once it has returned the bus is
// closed: IsClosed() and every publish refused. Tried at every instruction
// of the preempted Close, each on a fresh bus. Before, the second Close
// waited for the first to finish: a deadlock at any instruction between the
// first one's claim of the close and its publication.
template <typename Bus>
struct NestedClose {
  static inline Bus* bus = nullptr;
  static inline std::uint64_t interrupts = 0;
  static inline std::uint64_t not_closed = 0;
  static inline std::uint64_t admitted_after_close = 0;
  static void CloseFromInterrupt() {
    ++interrupts;
    bus->Close();
    if (!bus->IsClosed()) ++not_closed;
    if (bus->Publish(MotorCmd{1}).Outcome() != sluice::PublishOutcome::kClosed) {
      ++admitted_after_close;
    }
  }
  static void Run() {
    interrupts = not_closed = admitted_after_close = 0;
    auto counting = std::make_unique<Bus>();
    bus = counting.get();
    ASSERT_TRUE(bus->Publish(MotorCmd{0}));
    // One body for the count and every run: two lambdas would be two inlined
    // copies of Close, which the compiler may allocate registers for
    // differently (a constant hoisted out of the stepped code in one of
    // them), so their instruction counts could differ by one.
    const auto close = [] { bus->Close(); };
    const std::uint64_t instructions = RunWithAnInterruptAtEveryInstruction(
        +[] {}, close);
    ASSERT_GT(instructions, 0u);
    g_action = &CloseFromInterrupt;
    for (std::uint64_t step = 1; step <= instructions; ++step) {
      auto fresh = std::make_unique<Bus>();
      bus = fresh.get();
      ASSERT_TRUE(bus->Publish(MotorCmd{0}));
      g_fire_at_step = step;
      RunWithAnInterruptAtEveryInstruction(&FireOnce, close);
      EXPECT_TRUE(bus->IsClosed());
      EXPECT_EQ(bus->Publish(MotorCmd{2}).Outcome(), sluice::PublishOutcome::kClosed);
      // What was admitted before the close is still there, once.
      EXPECT_EQ(bus->ProcessBatchWith([](const auto&) {}), 1u);
      EXPECT_TRUE(bus->IsDrained());
    }
    EXPECT_EQ(interrupts, instructions);
    EXPECT_EQ(not_closed, 0u) << "a Close returned while the bus was not yet closed";
    EXPECT_EQ(admitted_after_close, 0u) << "a publish after a returned Close was admitted";
    bus = nullptr;
  }
};

TEST(FreestandingHostTest, ACloseThatPreemptsACloseReturnsWithTheBusClosedMpsc) {
  NestedClose<sluice::MpscBus<BasicPayload, 64>>::Run();
}
TEST(FreestandingHostTest, ACloseThatPreemptsACloseReturnsWithTheBusClosedSpsc) {
  NestedClose<sluice::SpscBus<BasicPayload, 64>>::Run();
}

// ---- Tracing from an interrupt that preempts a traced publish.

// A bare-metal traced bus: the ring in the object (no heap), no clock.
using TraceRing = sluice::trace::TraceRing<2048, sluice::SlotStorage::kInline>;
struct TracedBareTraits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<TraceRing, sluice::NullClock>;
};
using TracedBareBus =
    sluice::AsyncBus<BasicPayload, 2048, sluice::ProducerModel::kMulti, TracedBareTraits>;
TracedBareBus* g_traced_bus = nullptr;

void PublishTracedFromInterrupt() { (void)g_traced_bus->Publish(MotorCmd{2}, /*sender_id=*/2); }

// The interrupt publishes (and so records) at each instruction of a
// publish that records: each run leaves both messages admitted and both
// admissions in the ring, none lost, none recorded twice.
TEST(FreestandingHostTest, AnInterruptThatTracesAPublishPreemptsATracedPublish) {
  auto ring = std::make_unique<TraceRing>();
  auto bus = std::make_unique<TracedBareBus>();
  bus->GetObserver().Attach(ring.get(), 1);
  g_traced_bus = bus.get();
  std::uint64_t main_admitted = 0;
  const std::uint64_t steps = RunWithOneInterruptAtEachInstruction(
      &PublishTracedFromInterrupt,
      [&] { main_admitted += bus->Publish(MotorCmd{1}, /*sender_id=*/1) ? 1 : 0; });
  g_traced_bus = nullptr;
  ASSERT_GT(steps, 20u);
  ASSERT_LT(steps + 1 + steps, 2048u) << "the runs would overfill the bus or the ring";
  EXPECT_EQ(main_admitted, steps + 1);  // one run without an interrupt, then one per step
  EXPECT_EQ(ring->Lost(), 0u);
  std::uint64_t from_main = 0, from_interrupt = 0;
  std::vector<bool> seen(2048, false);
  while (ring->Drain([&](const sluice::trace::TraceEvent& event) {
    ASSERT_EQ(event.kind, sluice::trace::TraceEventKind::kAdmitted);
    ASSERT_LT(event.msg_id, seen.size());
    EXPECT_FALSE(seen[event.msg_id]) << "msg_id " << event.msg_id << " recorded twice";
    seen[event.msg_id] = true;
    (event.sender_id == 1 ? from_main : from_interrupt) += 1;
    EXPECT_EQ(event.type_index, 1u);
  }) != 0) {
  }
  EXPECT_EQ(from_main, steps + 1);
  EXPECT_EQ(from_interrupt, steps);
  EXPECT_EQ(bus->QueueDepth(), 2 * steps + 1);
}

#else
TEST(FreestandingHostTest, NeedsSingleStepping) {
  GTEST_SKIP() << "single-stepping needs x86-64 Linux and a build without a sanitizer";
}
#endif

}  // namespace
}  // namespace sluice_test
