// The flight recorder (sluice/record/flight_recorder.hpp): a dump holds
// exactly the window around its trigger (the last `before` messages the bus
// dispatched and `after` from the trigger on, each producer's contiguous),
// whatever triggered it (a call, a signal handler, a message type), with
// the window's refusals; it never changes what the bus admits; one window
// at a time, and what it could not take is counted. MCAP's own readers read
// every dump, and the replayer replays one.
#include "sluice/record/flight_recorder.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "mcap_check.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/observer_tee.hpp"
#include "sluice/record/flight_recorder_observer.hpp"
#include "sluice/record/mcap_reader.hpp"
#include "sluice/record/replayer.hpp"
#include "sluice/sluice.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

struct Reading {
  std::uint32_t producer;
  std::uint64_t seq;
};
struct EStop {
  std::uint32_t code;
};
template <>
struct sluice::nats::Fields<Reading> {
  static constexpr auto kMembers = std::make_tuple(&Reading::producer, &Reading::seq);
  static constexpr const char* kNames[] = {"producer", "seq"};  // a dump MCAP tools decode
};
template <>
struct sluice::nats::Fields<EStop> {
  static constexpr auto kMembers = std::make_tuple(&EStop::code);
};

namespace flight_recorder_test {
namespace {

using Payload = std::variant<Reading, EStop>;
using Recorder = sluice::record::FlightRecorder<Payload>;
using sluice::record::FlightRecorderOptions;
using sluice::record::FlightTriggerReason;

// A test clock the recorder and the bus share: what a test sets.
std::atomic<std::uint64_t> g_now{1'000'000};
struct TestClock {
  static std::uint64_t NowNanos() noexcept { return g_now.load(std::memory_order_relaxed); }
};
using ClockedRecorder = sluice::record::FlightRecorder<Payload, TestClock>;

template <typename R, typename... Triggers>
struct FlightTraits : sluice::DefaultBusTraits {
  using Observer = sluice::record::FlightRecorderObserver<R, Triggers...>;
  using Clock = TestClock;
};
template <std::size_t kCapacity, typename R, typename... Triggers>
using FlightBus = sluice::AsyncBus<Payload, kCapacity, sluice::ProducerModel::kMulti,
                                   FlightTraits<R, Triggers...>>;

std::string Scratch(const std::string& name) {
  return std::string(SLUICE_RECORD_SCRATCH_DIR) + "/flight_" + name + "_" +
         std::to_string(getpid());
}

// One message as the dump or the bus's dispatch saw it.
struct Item {
  std::size_t type;
  std::uint32_t producer;
  std::uint64_t seq;
  std::uint64_t stamp;
  bool operator==(const Item& other) const {
    return type == other.type && producer == other.producer && seq == other.seq &&
           stamp == other.stamp;
  }
};

struct DumpRead {
  std::vector<Item> items;
  std::map<std::string, std::string> meta;
  sluice::record::McapReadError error = sluice::record::McapReadError::kNone;
};

DumpRead ReadDump(const std::string& path) {
  DumpRead read;
  sluice::record::McapReader reader(path);
  sluice::record::McapMessage message;
  while (reader.Next(&message)) {
    const auto* channel = reader.Channel(message.channel_id);
    const std::uint8_t* body = message.data + sluice::record::kWireHeaderBytes;
    const std::size_t size = message.size - sluice::record::kWireHeaderBytes;
    Item item{};
    item.stamp = message.log_time;
    if (channel->topic == "/readings") {
      const auto value = sluice::nats::DefaultCodec<Reading>::Decode(body, size);
      item = {0, value->producer, value->seq, message.log_time};
    } else {
      const auto value = sluice::nats::DefaultCodec<EStop>::Decode(body, size);
      item = {1, 0, value->code, message.log_time};
    }
    read.items.push_back(item);
  }
  read.error = reader.Error();
  const auto found = reader.Metadata().find("sluice.flight");
  if (found != reader.Metadata().end()) read.meta = found->second;
  return read;
}

template <typename Bus>
void Log(Bus& bus, std::vector<Item>& log, std::vector<sluice::SubscriptionHandle>& handles) {
  handles.push_back(
      bus.template Subscribe<Reading>([&log](const Reading& r, const sluice::MessageHeader& h) {
        log.push_back({0, r.producer, r.seq, h.timestamp_ns});
      }));
  handles.push_back(
      bus.template Subscribe<EStop>([&log](const EStop& e, const sluice::MessageHeader& h) {
        log.push_back({1, 0, e.code, h.timestamp_ns});
      }));
}

FlightRecorderOptions Options(const std::string& name, std::uint32_t before, std::uint32_t after) {
  FlightRecorderOptions options;
  options.before = before;
  options.after = after;
  options.path_prefix = Scratch(name);
  return options;
}

template <typename R>
void KeepBoth(R& recorder) {
  ASSERT_TRUE(recorder.template Keep<Reading>("/readings", "Reading"));
  ASSERT_TRUE(recorder.template Keep<EStop>("/estop", "EStop"));
}

// A recorder with both types kept, attached to a new bus whose dispatch
// is logged: what most tests start from.
template <std::size_t kCapacity, typename R, typename... Triggers>
struct Rig {
  explicit Rig(const FlightRecorderOptions& options)
      : recorder(options), bus(std::make_unique<FlightBus<kCapacity, R, Triggers...>>()) {
    EXPECT_TRUE(recorder.template Keep<Reading>("/readings", "Reading"));
    EXPECT_TRUE(recorder.template Keep<EStop>("/estop", "EStop"));
    bus->GetObserver().Attach(&recorder);
    Log(*bus, log, handles);
  }
  // Dumps never overwrite a file: the test's are removed, once MCAP's own
  // readers read the whole ones (where every dump was written).
  ~Rig() {
    if (recorder.Counts().dumps_failed == 0) {
      (void)sluice_test::ReadEachWithMcapsOwnReader(recorder.Files());
    }
    for (const std::string& file : recorder.Files()) std::remove(file.c_str());
  }
  R recorder;
  std::unique_ptr<FlightBus<kCapacity, R, Triggers...>> bus;
  std::vector<Item> log;
  std::vector<sluice::SubscriptionHandle> handles;
};

// Publishes readings 0..count-1 of `producer`, dispatching in batches of
// `batch` whenever the bus holds that many, and calls `at(taken)` between
// batches.
template <typename Bus, typename At>
void PublishAndDispatch(Bus& bus, std::uint32_t producer, std::uint64_t count, std::uint32_t batch,
                        At&& at) {
  std::uint64_t taken = 0;
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    g_now.fetch_add(10, std::memory_order_relaxed);
    ASSERT_TRUE(bus.Publish(Reading{producer, seq}, producer).IsAdmitted());
    if ((seq + 1) % batch == 0) {
      taken += bus.ProcessBatch(batch);
      at(taken);
    }
  }
  while (std::uint32_t n = bus.ProcessBatch(batch)) {
    taken += n;
    at(taken);
  }
}

TEST(FlightRecorderTest, ACallTriggerDumpsExactlyTheMessagesBeforeAndAfterIt) {
  Rig<1024, Recorder> rig(Options("call", 100, 50));
  PublishAndDispatch(*rig.bus, 7, 1000, 10, [&](std::uint64_t taken) {
    if (taken == 500) rig.recorder.Trigger();
  });
  EXPECT_EQ(rig.recorder.WriteDumps(), 1u);
  EXPECT_EQ(rig.recorder.WriteDumps(), 0u);
  ASSERT_EQ(rig.recorder.Files().size(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(dump.error, sluice::record::McapReadError::kNone);
  // The 100 taken before the trigger, then 50 from it on: 400 to 549.
  ASSERT_EQ(dump.items.size(), 150u);
  const std::vector<Item> expected(rig.log.begin() + 400, rig.log.begin() + 550);
  EXPECT_EQ(dump.items, expected);
  EXPECT_EQ(dump.items.front().seq, 400u);
  EXPECT_EQ(dump.meta.at("reason"), "call");
  EXPECT_EQ(dump.meta.at("messages_before"), "100");
  EXPECT_EQ(dump.meta.at("messages_after"), "50");
  EXPECT_EQ(dump.meta.at("history_short"), "0");
  EXPECT_EQ(dump.meta.at("ended_by_time"), "0");
  const auto counts = rig.recorder.Counts();
  EXPECT_EQ(counts.triggers, 1u);
  EXPECT_EQ(counts.dumps_written, 1u);
  EXPECT_EQ(counts.messages_dumped, 150u);
}

TEST(FlightRecorderTest, AMessageOfATriggerTypeStartsTheWindowAtItself) {
  Rig<1024, Recorder, EStop> rig(Options("type", 30, 20));
  for (std::uint64_t seq = 0; seq < 300; ++seq) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
    if (seq == 150) {
      ASSERT_TRUE(
          rig.bus->PublishWithPriority(EStop{42}, 9, sluice::MessagePriority::HIGH).IsAdmitted());
    }
    if (seq % 64 == 63) rig.bus->ProcessBatch(64);
  }
  while (rig.bus->ProcessBatch(64) != 0) {
  }
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  const auto stop =
      std::find_if(rig.log.begin(), rig.log.end(), [](const Item& i) { return i.type == 1; });
  ASSERT_NE(stop, rig.log.end());
  const std::vector<Item> expected(stop - 30, stop + 20);
  EXPECT_EQ(dump.items, expected);
  EXPECT_EQ(dump.items[30].type, 1u);  // the e-stop: the first message after
  EXPECT_EQ(dump.meta.at("reason"), "message_type");
  EXPECT_EQ(dump.meta.at("trigger_type_index"), "1");
}

// With `after` 0 the window ends before the trigger message: the e-stop is
// not in it, and (copied into the ring before it starts the window) it
// overwrites none of the window's messages, also where `before` alone
// would fill a ring whose size is a power of two (8, 16).
TEST(FlightRecorderTest, ATriggerMessageWithNoAfterWindowIsLeftOut) {
  for (const std::uint32_t before : {8u, 10u, 16u}) {
    Rig<1024, Recorder, EStop> rig(Options("type_no_after", before, 0));
    for (std::uint64_t seq = 0; seq < 40; ++seq) {
      ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
      if (seq == 19) {
        ASSERT_TRUE(rig.bus->Publish(EStop{3}, 9).IsAdmitted());
      }
    }
    while (rig.bus->ProcessBatch(8) != 0) {
    }
    ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
    const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
    const auto stop =
        std::find_if(rig.log.begin(), rig.log.end(), [](const Item& i) { return i.type == 1; });
    EXPECT_EQ(dump.items, std::vector<Item>(stop - before, stop)) << "before " << before;
    EXPECT_EQ(dump.meta.at("messages_after"), "0");
    std::remove(rig.recorder.Files()[0].c_str());
  }
}

// A trigger-type message that is the window's last "after" message is in
// the window: merged into it, not missed.
TEST(FlightRecorderTest, ATriggerMessageThatEndsTheWindowIsMergedNotMissed) {
  Rig<1024, Recorder, EStop> rig(Options("estop_last", 10, 3));
  for (std::uint64_t seq = 0; seq < 40; ++seq) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
    if (seq == 19 || seq == 20) {  // the second is the first's window's third after
      ASSERT_TRUE(rig.bus->Publish(EStop{static_cast<std::uint32_t>(seq)}, 9).IsAdmitted());
    }
  }
  while (rig.bus->ProcessBatch(8) != 0) {
  }
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(dump.items.size(), 13u);
  EXPECT_EQ(dump.items.back().type, 1u);
  EXPECT_EQ(dump.items.back().seq, 20u);
  const auto counts = rig.recorder.Counts();
  EXPECT_EQ(counts.triggers, 1u);
  EXPECT_EQ(counts.triggers_merged, 1u);
  EXPECT_EQ(counts.triggers_missed, 0u);
}

// Planted: a window whose after part is counted from the wrong message, or a
// ring that wraps wrongly, fails the comparisons above; here the same for a
// trigger at every phase of the ring (its capacity is 64: 40 + 23 and one
// more).
TEST(FlightRecorderTest, TheWindowIsExactAtEveryPlaceInTheRing) {
  for (std::uint64_t at = 40; at < 40 + 64 * 3; at += 5) {
    Rig<256, Recorder> rig(Options("phase", 40, 23));
    ASSERT_EQ(rig.recorder.Capacity(), 64u);
    auto& recorder = rig.recorder;
    auto& bus = rig.bus;
    auto& log = rig.log;
    PublishAndDispatch(*bus, 3, 400, 1, [&](std::uint64_t taken) {
      if (taken == at) recorder.Trigger(FlightTriggerReason::kFailedCheck);
    });
    ASSERT_EQ(recorder.WriteDumps(), 1u) << "trigger at " << at;
    const DumpRead dump = ReadDump(recorder.Files()[0]);
    const std::vector<Item> expected(log.begin() + static_cast<std::ptrdiff_t>(at - 40),
                                     log.begin() + static_cast<std::ptrdiff_t>(at + 23));
    ASSERT_EQ(dump.items, expected) << "trigger at " << at;
    EXPECT_EQ(dump.meta.at("reason"), "failed_check");
    std::remove(recorder.Files()[0].c_str());
  }
}

TEST(FlightRecorderTest, AWindowReachesBackOnlyAsFarAsTheRingHoldsAndBeforeNs) {
  // Triggered after 30 messages: only 30 before (history_short).
  {
    Rig<1024, Recorder> rig(Options("short", 100, 10));
    auto& recorder = rig.recorder;
    auto& bus = rig.bus;
    PublishAndDispatch(*bus, 1, 100, 10, [&](std::uint64_t taken) {
      if (taken == 30) recorder.Trigger();
    });
    ASSERT_EQ(recorder.WriteDumps(), 1u);
    const DumpRead dump = ReadDump(recorder.Files()[0]);
    ASSERT_EQ(dump.items.size(), 40u);
    EXPECT_EQ(dump.items.front().seq, 0u);
    EXPECT_EQ(dump.meta.at("history_short"), "1");
    EXPECT_EQ(dump.meta.at("messages_before"), "30");
  }
  // before_ns: messages 10 ns apart; of the 100 before the trigger only
  // those at most 155 ns older than the trigger's clock reading are kept.
  {
    FlightRecorderOptions options = Options("age", 100, 10);
    options.before_ns = 155;
    Rig<1024, ClockedRecorder> rig(options);
    auto& recorder = rig.recorder;
    auto& bus = rig.bus;
    auto& log = rig.log;
    PublishAndDispatch(*bus, 1, 1000, 10, [&](std::uint64_t taken) {
      if (taken == 500) recorder.Trigger();
    });
    ASSERT_EQ(recorder.WriteDumps(), 1u);
    const DumpRead dump = ReadDump(recorder.Files()[0]);
    const std::uint64_t trigger_time = std::stoull(dump.meta.at("trigger_time_ns"));
    const std::size_t before = std::stoul(dump.meta.at("messages_before"));
    ASSERT_GT(before, 0u);
    ASSERT_LT(before, 100u);
    EXPECT_EQ(std::stoul(dump.meta.at("aged_out")), 100u - before);
    for (std::size_t i = 0; i < before; ++i) {
      EXPECT_GE(dump.items[i].stamp + 155, trigger_time) << dump.items[i].seq;
    }
    // The message before the first kept one was too old.
    const std::uint64_t first = dump.items.front().seq;
    ASSERT_GT(first, 0u);
    EXPECT_LT(log[first - 1].stamp + 155, trigger_time);
    const std::vector<Item> expected(
        log.begin() + static_cast<std::ptrdiff_t>(first),
        log.begin() + static_cast<std::ptrdiff_t>(first + before + 10));
    EXPECT_EQ(dump.items, expected);
  }
}

TEST(FlightRecorderTest, TheWindowCountsTheRefusalsOfItsBatchesByPriority) {
  Rig<64, Recorder> rig(Options("refusals", 16, 16));
  // Refusals long before the window: not counted.
  std::uint64_t seq = 0;
  for (int i = 0; i < 200; ++i)
    (void)rig.bus->PublishWithPriority(Reading{1, seq++}, 1, sluice::MessagePriority::LOW);
  while (rig.bus->ProcessBatch(8) != 0) {
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq++}, 1).IsAdmitted());
    rig.bus->ProcessBatch(8);
  }
  const auto before = rig.bus->GetStatistics();
  rig.recorder.Trigger();
  // In the window: fill the bus, so that LOW and MEDIUM are refused.
  std::uint64_t low = 0;
  std::uint64_t medium = 0;
  for (int i = 0; i < 100; ++i) {
    if (!rig.bus->PublishWithPriority(Reading{1, seq++}, 1, sluice::MessagePriority::LOW)
             .IsAdmitted())
      ++low;
    if (!rig.bus->PublishWithPriority(Reading{1, seq++}, 1, sluice::MessagePriority::MEDIUM)
             .IsAdmitted())
      ++medium;
  }
  ASSERT_GT(low, 0u);
  ASSERT_GT(medium, 0u);
  while (rig.bus->ProcessBatch(8) != 0) {
  }
  const auto after = rig.bus->GetStatistics();
  EXPECT_EQ(after.low_priority_dropped - before.low_priority_dropped, low);
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  EXPECT_EQ(dump.meta.at("refused_low"), std::to_string(low));
  EXPECT_EQ(dump.meta.at("refused_medium"), std::to_string(medium));
  EXPECT_EQ(dump.meta.at("refused_high"), "0");
}

// The window's refusals start at the batch that took its first message:
// refusals just before that batch are not the window's.
TEST(FlightRecorderTest, RefusalsBeforeTheWindowsFirstBatchAreNotItsOwn) {
  Rig<64, Recorder> rig(Options("refusal_edge", 16, 4));
  for (std::uint64_t seq = 0; seq < 50; ++seq) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
  }
  for (int i = 0; i < 5; ++i) ASSERT_EQ(rig.bus->ProcessBatch(1), 1u);  // positions 0 to 4
  // 45 queued: LOW (refused from 39 on) is refused three times, after the
  // batch of position 4 and before that of position 5, the window's first.
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(
        rig.bus->PublishWithPriority(Reading{2, 0}, 2, sluice::MessagePriority::LOW).IsAdmitted());
  }
  for (int i = 0; i < 16; ++i) ASSERT_EQ(rig.bus->ProcessBatch(1), 1u);  // 5 to 20
  rig.recorder.Trigger();                                                // at 21
  while (rig.bus->ProcessBatch(1) != 0) {
  }
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(dump.items.size(), 20u);
  EXPECT_EQ(dump.items.front().seq, 5u);
  EXPECT_EQ(dump.meta.at("refused_low"), "0");
}

TEST(FlightRecorderTest, OneWindowAtATimeAndEveryOtherTriggerIsCounted) {
  Rig<256, Recorder> rig(Options("merge", 8, 8));
  std::uint64_t seq = 0;
  const auto publish_and_take = [&](int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(rig.bus->Publish(Reading{1, seq++}, 1).IsAdmitted());
    while (rig.bus->ProcessBatch(4) != 0) {
    }
  };
  publish_and_take(20);
  rig.recorder.Trigger();
  rig.recorder.Trigger();  // seen together with the first: one window
  publish_and_take(4);
  rig.recorder.Trigger();  // while the window is collected: part of it
  publish_and_take(20);
  EXPECT_TRUE(rig.recorder.DumpPending());
  rig.recorder.Trigger();  // while the frozen window waits for the writer
  publish_and_take(4);
  auto counts = rig.recorder.Counts();
  EXPECT_EQ(counts.triggers, 1u);
  EXPECT_EQ(counts.triggers_merged, 2u);
  EXPECT_EQ(counts.triggers_missed, 1u);
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  EXPECT_FALSE(rig.recorder.DumpPending());
  // Written: the next trigger starts a window again, in the second ring,
  // which holds only what came since the first froze.
  rig.recorder.Trigger();
  publish_and_take(20);
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  counts = rig.recorder.Counts();
  EXPECT_EQ(counts.triggers, 2u);
  EXPECT_EQ(counts.dumps_written, 2u);
  const DumpRead first = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(first.items.size(), 16u);
  EXPECT_EQ(first.items.front().seq, 12u);
  const DumpRead second = ReadDump(rig.recorder.Files()[1]);
  ASSERT_EQ(second.items.size(), 16u);
  EXPECT_EQ(second.items.front().seq, 48u - 8u);
}

TEST(FlightRecorderTest, AnIdleBusEndsItsWindowAtTickAfterAfterNs) {
  FlightRecorderOptions options = Options("idle", 10, 100);
  options.after_ns = 1000;
  Rig<256, ClockedRecorder> rig(options);
  for (std::uint64_t seq = 0; seq < 30; ++seq) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
  }
  rig.recorder.Trigger();
  while (rig.bus->ProcessBatch(8) != 0) {
  }
  rig.recorder.Tick();
  EXPECT_FALSE(rig.recorder.DumpPending());  // 1000 ns not yet passed
  g_now.fetch_add(1000);
  rig.recorder.Tick();
  ASSERT_TRUE(rig.recorder.DumpPending());
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  // The trigger was taken at the first batch's start: 0 before, 30 after.
  EXPECT_EQ(dump.items.size(), 30u);
  EXPECT_EQ(dump.meta.at("ended_by_time"), "1");
  EXPECT_EQ(dump.meta.at("messages_after"), "30");
}

TEST(FlightRecorderTest, EndWindowWritesWhatTheWindowHolds) {
  Rig<256, Recorder> rig(Options("end", 10, 1000));
  PublishAndDispatch(*rig.bus, 1, 100, 10, [&](std::uint64_t taken) {
    if (taken == 50) rig.recorder.Trigger();
  });
  EXPECT_FALSE(rig.recorder.DumpPending());
  rig.recorder.EndWindow();
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(dump.items.size(), 60u);
  EXPECT_EQ(dump.items.front().seq, 40u);
  EXPECT_EQ(dump.items.back().seq, 99u);
}

Recorder* g_signal_recorder = nullptr;
extern "C" void OnSignal(int) { g_signal_recorder->Trigger(FlightTriggerReason::kSignal); }

TEST(FlightRecorderTest, ASignalHandlerTriggersAWindow) {
  Rig<256, Recorder> rig(Options("signal", 20, 20));
  g_signal_recorder = &rig.recorder;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  PublishAndDispatch(*rig.bus, 1, 200, 10, [&](std::uint64_t taken) {
    if (taken == 100) std::raise(SIGUSR1);
  });
  sigaction(SIGUSR1, &previous, nullptr);
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  ASSERT_EQ(dump.items.size(), 40u);
  EXPECT_EQ(dump.items.front().seq, 80u);
  EXPECT_EQ(dump.meta.at("reason"), "signal");
}

// The recorder never gates the bus: with the same seeded schedule of
// publishes and batches, what the bus refuses is the same with a recorder
// that dumps (triggered again and again, written between batches) as with
// none attached.
TEST(FlightRecorderTest, RefusalsWithDumpsEqualThoseWithout) {
  const auto run = [](bool record) {
    Recorder recorder(Options("gate", 64, 64));
    KeepBoth(recorder);
    auto bus = std::make_unique<FlightBus<128, Recorder>>();
    if (record) bus->GetObserver().Attach(&recorder);
    std::mt19937 random(12345);
    std::uint64_t seq = 0;
    for (int round = 0; round < 2000; ++round) {
      const int publishes = static_cast<int>(random() % 40);
      for (int i = 0; i < publishes; ++i) {
        const auto priority = static_cast<sluice::MessagePriority>(random() % 3);
        (void)bus->PublishWithPriority(Reading{1, seq++}, 1, priority);
      }
      bus->ProcessBatch(static_cast<std::uint32_t>(random() % 32 + 1));
      if (round % 50 == 0) recorder.Trigger();
      if (round % 7 == 0) (void)recorder.WriteDumps();
    }
    for (const std::string& file : recorder.Files()) std::remove(file.c_str());
    if (record) {
      EXPECT_GT(recorder.Counts().dumps_written, 10u);
    }
    return bus->GetStatistics();
  };
  const auto with = run(true);
  const auto without = run(false);
  EXPECT_GT(with.messages_dropped, 0u);
  EXPECT_EQ(with.messages_dropped, without.messages_dropped);
  EXPECT_EQ(with.low_priority_dropped, without.low_priority_dropped);
  EXPECT_EQ(with.medium_priority_dropped, without.medium_priority_dropped);
  EXPECT_EQ(with.high_priority_dropped, without.high_priority_dropped);
  EXPECT_EQ(with.messages_processed, without.messages_processed);
}

// Three producer threads, the consumer on its own, a trigger from a fourth
// thread and the writer on a fifth: the dump is exactly the slice of the
// consumer's own dispatch log around the trigger, so each producer's
// messages in it are contiguous. 60,000 messages: the ring (4,096) wraps
// many times before the trigger, which comes at the 30,000th; the test
// prints what it saw.
TEST(FlightRecorderTest, AWriterThreadDumpsExactlyTheDispatchedSliceAroundTheTrigger) {
  constexpr std::uint32_t kProducers = 3;
  constexpr std::uint64_t kEach = 20000;
  constexpr std::uint64_t kAll = kProducers * kEach;
  Rig<1024, Recorder> rig(Options("threads", 3000, 1000));
  rig.log.reserve(kAll);
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (std::uint64_t seq = 0; seq < kEach; ++seq) {
        while (!rig.bus->Publish(Reading{p, seq}, p).IsAdmitted()) std::this_thread::yield();
      }
    });
  }
  std::atomic<bool> stop_writer{false};
  std::thread writer([&] {
    while (!stop_writer.load()) {
      if (rig.recorder.WriteDumps() == 0) std::this_thread::yield();
    }
    (void)rig.recorder.WriteDumps();
  });
  std::atomic<std::uint64_t> dispatched{0};
  std::thread trigger([&] {
    while (dispatched.load() < kAll / 2) std::this_thread::yield();
    rig.recorder.Trigger();
  });
  while (dispatched.load() < kAll) dispatched.fetch_add(rig.bus->ProcessBatch(64));
  trigger.join();
  for (auto& thread : producers) thread.join();
  stop_writer.store(true);
  writer.join();
  const auto counts = rig.recorder.Counts();
  std::printf("dispatched %zu, triggers %llu, dumps %llu\n", rig.log.size(),
              static_cast<unsigned long long>(counts.triggers),
              static_cast<unsigned long long>(counts.dumps_written));
  ASSERT_EQ(counts.triggers, 1u);
  ASSERT_EQ(rig.recorder.Files().size(), 1u);
  const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
  EXPECT_EQ(dump.meta.at("messages_before"), "3000");
  EXPECT_EQ(dump.meta.at("messages_after"), "1000");
  ASSERT_EQ(dump.items.size(), 4000u);
  const auto start =
      std::search(rig.log.begin(), rig.log.end(), dump.items.begin(), dump.items.end());
  ASSERT_NE(start, rig.log.end()) << "the dump is not a slice of what the bus dispatched";
  EXPECT_GE(start - rig.log.begin() + 3000, static_cast<std::ptrdiff_t>(kAll / 2));
  // Each producer's messages in the dump: consecutive numbers.
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    std::vector<std::uint64_t> mine;
    for (const Item& item : dump.items) {
      if (item.producer == p) mine.push_back(item.seq);
    }
    for (std::size_t i = 1; i < mine.size(); ++i) {
      ASSERT_EQ(mine[i], mine[i - 1] + 1) << "producer " << p;
    }
  }
}

// A tracer and a flight recorder on one bus (ObserverTee): the dump is the
// exact window, and the trace holds one taken event per message.
TEST(FlightRecorderTest, ATracerBesideTheRecorderSeesEveryMessageAndTheDumpIsExact) {
  using Ring = sluice::trace::TraceRing<8192>;
  struct TeeTraits : sluice::DefaultBusTraits {
    using Observer = sluice::ObserverTee<sluice::trace::TracingObserver<Ring>,
                                         sluice::record::FlightRecorderObserver<Recorder, EStop>>;
  };
  using Bus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti, TeeTraits>;
  auto ring = std::make_unique<Ring>();
  Recorder recorder(Options("tee", 50, 25));
  KeepBoth(recorder);
  auto bus = std::make_unique<Bus>();
  ASSERT_TRUE(bus->GetObserver().First().Attach(ring.get(), 1));
  bus->GetObserver().Second().Attach(&recorder);
  std::vector<Item> log;
  std::vector<sluice::SubscriptionHandle> handles;
  Log(*bus, log, handles);
  std::uint64_t taken_events = 0;
  for (std::uint64_t seq = 0; seq < 500; ++seq) {
    ASSERT_TRUE(bus->Publish(Reading{1, seq}, 1).IsAdmitted());
    if (seq == 300) {
      ASSERT_TRUE(bus->Publish(EStop{5}, 2).IsAdmitted());
    }
    if (seq % 32 == 31) {
      while (bus->ProcessBatch() != 0) {
      }
      (void)ring->Drain([&taken_events](const sluice::trace::TraceEvent& event) {
        if (event.kind == sluice::trace::TraceEventKind::kTaken) ++taken_events;
      });
    }
  }
  while (bus->ProcessBatch() != 0) {
  }
  (void)ring->Drain([&taken_events](const sluice::trace::TraceEvent& event) {
    if (event.kind == sluice::trace::TraceEventKind::kTaken) ++taken_events;
  });
  EXPECT_EQ(taken_events, 501u);
  EXPECT_EQ(ring->Lost(), 0u);
  ASSERT_EQ(recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(recorder.Files()[0]);
  const auto stop = std::find_if(log.begin(), log.end(), [](const Item& i) { return i.type == 1; });
  ASSERT_NE(stop, log.end());
  EXPECT_EQ(dump.items, std::vector<Item>(stop - 50, stop + 25));
}

// Detaching mid-window keeps what was taken while attached; the window is
// then ended by EndWindow (also once the bus is gone), and nothing the bus
// does after the detach reaches the recorder, which may then be destroyed.
TEST(FlightRecorderTest, ADetachKeepsWhatWasTakenAndTheBusRunsOnWithoutTheRecorder) {
  auto recorder = std::make_unique<Recorder>(Options("detach", 20, 30));
  KeepBoth(*recorder);
  auto bus = std::make_unique<FlightBus<1024, Recorder>>();
  bus->GetObserver().Attach(recorder.get());
  std::vector<Item> log;
  std::vector<sluice::SubscriptionHandle> handles;
  Log(*bus, log, handles);
  PublishAndDispatch(*bus, 1, 50, 10, [&](std::uint64_t taken) {
    if (taken == 40) recorder->Trigger();
  });
  bus->GetObserver().Attach(nullptr);  // 10 of the 30 after taken
  EXPECT_FALSE(recorder->DumpPending());
  PublishAndDispatch(*bus, 2, 100, 10, [](std::uint64_t) {});
  bus.reset();  // the bus (and its observer) gone before the window ends
  recorder->EndWindow();
  ASSERT_EQ(recorder->WriteDumps(), 1u);
  const DumpRead dump = ReadDump(recorder->Files()[0]);
  EXPECT_EQ(dump.items, std::vector<Item>(log.begin() + 20, log.begin() + 50));
  EXPECT_EQ(dump.meta.at("messages_after"), "10");
  EXPECT_EQ(dump.meta.at("ended_by_time"), "1");
}

// A recorder destroyed first detaches its observer: the bus runs on.
TEST(FlightRecorderTest, ARecorderDestroyedFirstDetachesItsObserver) {
  auto bus = std::make_unique<FlightBus<1024, Recorder>>();
  {
    Recorder recorder(Options("gone", 20, 30));
    bus->GetObserver().Attach(&recorder);
    PublishAndDispatch(*bus, 1, 50, 10, [](std::uint64_t) {});
  }
  std::uint64_t seen = 0;
  const auto handle = bus->Subscribe<Reading>([&seen](const Reading&) { ++seen; });
  ASSERT_TRUE(handle.IsValid());
  PublishAndDispatch(*bus, 1, 500, 10, [](std::uint64_t) {});
  EXPECT_EQ(seen, 500u);
}

// Attaching again (to the same recorder, or after moving the observer) goes
// on where the cursor was: the dump is the exact slice, nothing skipped.
TEST(FlightRecorderTest, AttachingAgainOrMovingTheObserverLosesNothing) {
  using Observer = sluice::record::FlightRecorderObserver<Recorder>;
  for (const bool move : {false, true}) {
    Rig<1024, Recorder> rig(Options(move ? "moved" : "reattached", 40, 30));
    PublishAndDispatch(*rig.bus, 1, 100, 10, [&](std::uint64_t taken) {
      if (taken == 40) rig.recorder.Trigger();
      if (taken == 60) {
        if (move) {
          Observer moved(std::move(rig.bus->GetObserver()));
          rig.bus->GetObserver() = std::move(moved);
        } else {
          rig.bus->GetObserver().Attach(&rig.recorder);
        }
      }
    });
    ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
    const DumpRead dump = ReadDump(rig.recorder.Files()[0]);
    EXPECT_EQ(dump.items, std::vector<Item>(rig.log.begin(), rig.log.begin() + 70)) << move;
  }
}

// Producers refusing while the recorder is detached and destroyed: a detach
// waits for every producer inside OnRefused, so none reaches a destroyed
// recorder (AddressSanitizer and ThreadSanitizer in CI). 200 attach and
// destroy rounds beside two producers refused all along.
TEST(FlightRecorderTest, ADetachWaitsForProducersCountingARefusal) {
  auto bus = std::make_unique<FlightBus<64, Recorder>>();
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      while (!stop.load()) (void)bus->Publish(Reading{p, 0}, p);  // full: refused
    });
  }
  for (int round = 0; round < 200; ++round) {
    auto recorder = std::make_unique<Recorder>(Options("refusing", 4, 4));
    bus->GetObserver().Attach(recorder.get());
    std::this_thread::yield();
    bus->GetObserver().Attach(nullptr);
    recorder.reset();
  }
  stop.store(true);
  for (auto& thread : producers) thread.join();
  EXPECT_GT(bus->GetStatistics().messages_dropped, 0u);
}

// Several triggers taken together while a window waits for the writer are
// all missed; of several starting one window, the first's reason is kept.
TEST(FlightRecorderTest, TriggersTakenTogetherAreCountedAndTheFirstReasonKept) {
  Rig<256, Recorder> rig(Options("together", 4, 4));
  PublishAndDispatch(*rig.bus, 1, 20, 4, [&](std::uint64_t taken) {
    if (taken == 8) {
      rig.recorder.Trigger(FlightTriggerReason::kFailedCheck);
      rig.recorder.Trigger(FlightTriggerReason::kCall);
    }
    if (taken == 16) {  // the window froze at 12: the writer has not run
      rig.recorder.Trigger();
      rig.recorder.Trigger();
    }
  });
  const auto counts = rig.recorder.Counts();
  EXPECT_EQ(counts.triggers, 1u);
  EXPECT_EQ(counts.triggers_merged, 1u);
  EXPECT_EQ(counts.triggers_missed, 2u);
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  EXPECT_EQ(ReadDump(rig.recorder.Files()[0]).meta.at("reason"), "failed_check");
}

// A clock that steps back (or reads 0) after the trigger has not passed
// `after_ns`: the window is not ended by time.
TEST(FlightRecorderTest, AClockThatStepsBackDoesNotEndTheWindow) {
  FlightRecorderOptions options = Options("clock_back", 4, 100);
  options.after_ns = 1'000'000'000;
  Rig<256, ClockedRecorder> rig(options);
  g_now.store(5'000'000);
  PublishAndDispatch(*rig.bus, 1, 10, 5, [&](std::uint64_t taken) {
    if (taken == 5) rig.recorder.Trigger();
  });
  for (const std::uint64_t back : {4'999'000u, 0u}) {
    g_now.store(back);
    rig.recorder.Tick();
    EXPECT_FALSE(rig.recorder.DumpPending()) << back;
  }
  g_now.store(5'000'000 + 2'000'000'000);  // past the trigger's reading by more than 1 s
  rig.recorder.Tick();
  EXPECT_TRUE(rig.recorder.DumpPending());
  g_now.store(2'000'000'000);
}

// A second recorder (a program restarted) with the same prefix writes next
// to the first's dump, never over it.
TEST(FlightRecorderTest, ARestartedRecorderNeverOverwritesAnEarlierDump) {
  // Two runs' rigs, the first's dump kept until the end (a rig removes its
  // dumps when it goes).
  std::vector<std::unique_ptr<Rig<256, Recorder>>> runs;
  for (std::uint32_t run = 0; run < 2; ++run) {
    runs.push_back(std::make_unique<Rig<256, Recorder>>(Options("restart", 4, 4)));
    Rig<256, Recorder>& rig = *runs.back();
    PublishAndDispatch(*rig.bus, run, 20, 4, [&](std::uint64_t taken) {
      if (taken == 8) rig.recorder.Trigger();
    });
    ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  }
  const std::string first = runs[0]->recorder.Files()[0];
  const std::string second = runs[1]->recorder.Files()[0];
  ASSERT_NE(first, second);
  EXPECT_EQ(ReadDump(first).items.front().producer, 0u);
  EXPECT_EQ(ReadDump(second).items.front().producer, 1u);
}

#if SLUICE_HAS_EXCEPTIONS
struct ThrowingCodec {
  static bool Encode(const Reading& reading, std::string&) {
    if (reading.seq == 13) throw std::runtime_error("codec");
    return true;
  }
};
// A codec that throws fails its dump (counted) and the ring is handed back:
// the next window is written.
TEST(FlightRecorderTest, ACodecThatThrowsFailsTheDumpAndTheNextOneIsWritten) {
  Recorder recorder(Options("throwing", 4, 4));
  ASSERT_TRUE((recorder.Keep<Reading, ThrowingCodec>("/readings", "Reading")));
  auto bus = std::make_unique<FlightBus<256, Recorder>>();
  bus->GetObserver().Attach(&recorder);
  PublishAndDispatch(*bus, 1, 40, 4, [&](std::uint64_t taken) {
    if (taken == 12) recorder.Trigger();  // window 8 to 15: holds 13
  });
  EXPECT_THROW(recorder.WriteDumps(), std::runtime_error);
  EXPECT_FALSE(recorder.DumpPending());
  EXPECT_EQ(recorder.Counts().dumps_failed, 1u);
  PublishAndDispatch(*bus, 1, 40, 4, [&](std::uint64_t taken) {
    if (taken == 32) recorder.Trigger();
  });
  EXPECT_EQ(recorder.WriteDumps(), 1u);
  EXPECT_EQ(recorder.Counts().dumps_written, 1u);
}
#endif

// MCAP's own readers read a dump: its messages, channels, and the
// metadata record through the summary's index as in the data section.
TEST(FlightRecorderTest, McapsOwnReadersReadADumpAndItsMetadata) {
  Rig<1024, Recorder, EStop> rig(Options("reader", 100, 20));
  for (std::uint64_t seq = 0; seq < 300; ++seq) {
    ASSERT_TRUE(rig.bus->Publish(Reading{1, seq}, 1).IsAdmitted());
    if (seq == 200) {
      ASSERT_TRUE(rig.bus->Publish(EStop{7}, 1).IsAdmitted());
    }
    if (seq % 16 == 15) rig.bus->ProcessBatch();
  }
  while (rig.bus->ProcessBatch() != 0) {
  }
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  std::string skip;
  const auto found = sluice_test::ReadWithMcapsOwnReader(rig.recorder.Files()[0], &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(found.at("messages"), 120u);
  EXPECT_EQ(found.at("topic /readings"), 119u);
  EXPECT_EQ(found.at("topic /estop"), 1u);
  EXPECT_EQ(found.at("record Metadata"), 1u);
  EXPECT_EQ(found.at("record MetadataIndex"), 1u);
  EXPECT_EQ(found.at("meta sluice.flight.messages_before"), 100u);
  EXPECT_EQ(found.at("meta sluice.flight.messages_after"), 20u);
  EXPECT_EQ(found.at("meta sluice.flight.trigger_type_index"), 1u);
  // Readings have named fields, decoded by Foxglove's ROS 1 reader where
  // it is installed: readings 101 to 219 (the 100 before the e-stop,
  // which starts the window's 20 after with itself).
  if (found.count("ros1 unchecked") == 0) {
    EXPECT_EQ(found.at("field /readings payload.producer"), 119u);
    EXPECT_EQ(found.at("field /readings payload.seq"), (101u + 219u) * 119u / 2u);
    EXPECT_EQ(found.count("field /estop payload.code"), 0u);  // EStop has no names
  }
}

TEST(FlightRecorderTest, TheReplayerReplaysADumpInItsOrder) {
  Rig<1024, Recorder> rig(Options("replay", 100, 100));
  PublishAndDispatch(*rig.bus, 4, 500, 10, [&](std::uint64_t taken) {
    if (taken == 250) rig.recorder.Trigger();
  });
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  using ReplayBus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti>;
  auto replayed = std::make_unique<ReplayBus>();
  std::vector<Item> seen;
  std::vector<sluice::SubscriptionHandle> replay_handles;
  Log(*replayed, seen, replay_handles);
  sluice::record::Replayer<ReplayBus> replayer(*replayed);
  replayer.Replay<Reading>("/readings");
  replayer.Replay<EStop>("/estop");
  const auto result =
      replayer.Run(rig.recorder.Files(), [&] { return replayed->ProcessBatch() != 0; });
  while (replayed->ProcessBatch() != 0) {
  }
  EXPECT_EQ(result.published, 200u);
  EXPECT_EQ(result.sequence_gaps, 0u);
  const std::vector<Item> expected(rig.log.begin() + 150, rig.log.begin() + 350);
  EXPECT_EQ(seen, expected);
}

// A payload type not kept is in the window but not in the file: counted.
TEST(FlightRecorderTest, TypesNotKeptAreCountedNotWritten) {
  using Bus = FlightBus<1024, Recorder>;
  Recorder recorder(Options("kept", 20, 20));
  ASSERT_TRUE(recorder.Keep<Reading>("/readings", "Reading"));
  EXPECT_FALSE(recorder.Keep<Reading>("/again", "Reading"));
  EXPECT_FALSE(recorder.Keep<EStop>("/readings", "EStop"));  // one type a topic
  auto bus = std::make_unique<Bus>();
  bus->GetObserver().Attach(&recorder);
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    ASSERT_TRUE(bus->Publish(Reading{1, seq}, 1).IsAdmitted());
    ASSERT_TRUE(bus->Publish(EStop{1}, 1).IsAdmitted());
    if (seq == 50) {
      while (bus->ProcessBatch() != 0) {
      }
      recorder.Trigger();
    }
  }
  while (bus->ProcessBatch() != 0) {
  }
  ASSERT_EQ(recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(recorder.Files()[0]);
  EXPECT_EQ(dump.items.size(), 20u);
  EXPECT_EQ(recorder.Counts().messages_skipped, 20u);
  EXPECT_EQ(recorder.Counts().messages_dumped, 20u);
}

TEST(FlightRecorderTest, ADumpThatCannotBeWrittenIsCountedAndTheRingHandedBack) {
  FlightRecorderOptions options = Options("nodir", 10, 10);
  options.path_prefix = "/nonexistent-directory-of-sluice/flight";
  Rig<256, Recorder> rig(options);
  PublishAndDispatch(*rig.bus, 1, 100, 10, [&](std::uint64_t taken) {
    if (taken == 50) rig.recorder.Trigger();
  });
  ASSERT_EQ(rig.recorder.WriteDumps(), 1u);
  EXPECT_EQ(rig.recorder.Counts().dumps_failed, 1u);
  EXPECT_EQ(rig.recorder.Counts().dumps_written, 0u);
  EXPECT_FALSE(rig.recorder.DumpPending());
}

// No window at all (before 0, after 0): a trigger writes a dump with its
// metadata and no message.
TEST(FlightRecorderTest, AnEmptyWindowWritesOnlyItsMetadata) {
  Rig<256, Recorder> rig(Options("zero", 0, 0));
  auto& recorder = rig.recorder;
  auto& bus = rig.bus;
  EXPECT_EQ(recorder.Capacity(), 2u);
  PublishAndDispatch(*bus, 1, 20, 5, [&](std::uint64_t taken) {
    if (taken == 10) recorder.Trigger();
  });
  ASSERT_EQ(recorder.WriteDumps(), 1u);
  const DumpRead dump = ReadDump(recorder.Files()[0]);
  EXPECT_TRUE(dump.items.empty());
  EXPECT_EQ(dump.meta.at("messages_before"), "0");
  EXPECT_EQ(dump.meta.at("messages_after"), "0");
}

}  // namespace
}  // namespace flight_recorder_test
