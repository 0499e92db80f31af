// Record and replay (sluice/record/recorder.hpp, replayer.hpp): a bus's
// mixed-priority messages recorded into files split by size and replayed
// into another bus reproduce the dispatch order, senders, priorities,
// timestamps and payloads exactly (one checksum over them all, and every
// message compared), with no sequence gap across the files; MCAP's own
// readers read every file. A recorder that cannot keep up counts what it
// could not keep, and never holds the bus up.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "mcap_check.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/mcap_reader.hpp"
#include "sluice/record/recorder.hpp"
#include "sluice/record/replayer.hpp"
#include "sluice/sluice.hpp"

struct Pose {
  std::uint32_t frame;
  double x, y;
};
struct Range {
  std::uint64_t seq;
  float meters;
};
struct Stop {
  std::uint8_t reason;
};
template <>
struct sluice::nats::Fields<Pose> {
  static constexpr auto kMembers = std::make_tuple(&Pose::frame, &Pose::x, &Pose::y);
};
template <>
struct sluice::nats::Fields<Range> {
  static constexpr auto kMembers = std::make_tuple(&Range::seq, &Range::meters);
};
template <>
struct sluice::nats::Fields<Stop> {
  static constexpr auto kMembers = std::make_tuple(&Stop::reason);
};

namespace replay_test {
namespace {

using Payload = std::variant<Pose, Range, Stop>;
using Bus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti>;

// What a subscriber saw, message by message, in dispatch order.
struct Seen {
  std::size_t type;
  std::uint32_t sender;
  std::uint64_t stamp;
  sluice::MessagePriority priority;
  std::uint64_t a;
  double b;
  bool operator==(const Seen& other) const {
    return type == other.type && sender == other.sender && stamp == other.stamp &&
           priority == other.priority && a == other.a && b == other.b;
  }
};

void Watch(Bus& bus, std::vector<Seen>& seen, std::vector<sluice::SubscriptionHandle>& handles) {
  handles.push_back(bus.Subscribe<Pose>([&seen](const Pose& p, const sluice::MessageHeader& h) {
    seen.push_back({0, h.sender_id, h.timestamp_ns, h.priority, p.frame, p.x + p.y});
  }));
  handles.push_back(bus.Subscribe<Range>([&seen](const Range& r, const sluice::MessageHeader& h) {
    seen.push_back({1, h.sender_id, h.timestamp_ns, h.priority, r.seq, r.meters});
  }));
  handles.push_back(bus.Subscribe<Stop>([&seen](const Stop& s, const sluice::MessageHeader& h) {
    seen.push_back({2, h.sender_id, h.timestamp_ns, h.priority, s.reason, 0});
  }));
}

std::uint64_t Checksum(const std::vector<Seen>& seen) {
  std::uint64_t sum = 1469598103934665603ull;
  const auto mix = [&sum](std::uint64_t value) { sum = (sum ^ value) * 1099511628211ull; };
  for (const Seen& s : seen) {
    mix(s.type);
    mix(s.sender);
    mix(s.stamp);
    mix(static_cast<std::uint64_t>(s.priority));
    mix(s.a);
    mix(static_cast<std::uint64_t>(static_cast<std::int64_t>(s.b * 1024)));  // b may be negative
  }
  return sum;
}

// Recordings never overwrite a file (a name whose file exists is
// skipped): each test removes what it wrote, once MCAP's own readers read
// it (where node and @mcap/core are).
void RemoveFiles(const std::vector<std::string>& files) {
  (void)sluice_test::ReadEachWithMcapsOwnReader(files);
  for (const std::string& file : files) std::remove(file.c_str());
}

std::string Scratch(const std::string& name) {
  return std::string(SLUICE_RECORD_SCRATCH_DIR) + "/" + name;
}

// 1,000,000 messages: about nine files of 8 MB and every interleaving of
// the three types and priorities many times over; about seven seconds under
// AddressSanitizer (unoptimised).
constexpr std::uint32_t kMessages = 1000000;

TEST(ReplayTest, AReplayReproducesTheDispatchOrderTimestampsAndPayloadsAcrossSplitFiles) {
  std::vector<Seen> original;
  std::vector<std::string> files;
  {
    Bus bus;
    std::vector<sluice::SubscriptionHandle> handles;
    Watch(bus, original, handles);
    sluice::record::Recorder<Bus> recorder(bus, {Scratch("replay"), 8u << 20, 1u << 20});
    ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
    ASSERT_TRUE((recorder.Record<Range>("/robot/range", "Range")));
    ASSERT_TRUE((recorder.Record<Stop>("/robot/stop", "Stop")));
    const sluice::MessagePriority priorities[] = {sluice::MessagePriority::LOW,
                                                  sluice::MessagePriority::MEDIUM,
                                                  sluice::MessagePriority::HIGH};
    std::uint64_t refused = 0;
    for (std::uint32_t i = 0; i < kMessages; ++i) {
      const auto stamp = std::chrono::nanoseconds(1000000 + std::uint64_t{i} * 37);
      const sluice::MessagePriority priority = priorities[(i * 7) % 3];
      bool admitted;
      switch (i % 5) {
        case 0:
        case 1:
          admitted =
              bus.PublishFast(Pose{i, i * 0.5, -1.0 * i}, i % 97, stamp, priority).IsAdmitted();
          break;
        case 2:
        case 3:
          admitted =
              bus.PublishFast(Range{i, 0.25f * (i % 1000)}, i % 89, stamp, priority).IsAdmitted();
          break;
        default:
          admitted =
              bus.PublishFast(Stop{static_cast<std::uint8_t>(i)}, 7, stamp, priority).IsAdmitted();
      }
      refused += admitted ? 0 : 1;
      if (i % 512 == 511) {
        while (bus.ProcessBatch() != 0) {
        }
        (void)recorder.Flush();
      }
      if (i % 250000 == 249999) std::printf("recorded %u messages\n", i + 1);
    }
    while (bus.ProcessBatch() != 0) {
    }
    ASSERT_TRUE(recorder.Close());
    EXPECT_EQ(original.size() + refused, kMessages);
    std::uint64_t recorded = 0;
    for (std::size_t channel = 0; channel < 3; ++channel) {
      EXPECT_EQ(recorder.Counts(channel).refused, 0u);
      EXPECT_EQ(recorder.Counts(channel).failed, 0u);
      recorded += recorder.Counts(channel).recorded;
    }
    EXPECT_EQ(recorded, original.size());
    files = recorder.Files();
  }
  ASSERT_GE(files.size(), 3u);

  std::vector<Seen> replayed;
  Bus bus;
  std::vector<sluice::SubscriptionHandle> handles;
  Watch(bus, replayed, handles);
  sluice::record::Replayer<Bus> replayer(bus);
  replayer.Replay<Pose>("/robot/pose");
  replayer.Replay<Range>("/robot/range");
  replayer.Replay<Stop>("/robot/stop");
  const auto result = replayer.Run(files, [&bus] { return bus.ProcessBatch() != 0; });
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_EQ(result.error, sluice::record::McapReadError::kNone) << result.error_file;
  EXPECT_EQ(result.published, original.size());
  EXPECT_EQ(result.sequence_gaps, 0u);
  EXPECT_EQ(result.skipped, 0u);
  EXPECT_EQ(result.undecodable, 0u);
  EXPECT_EQ(result.refused, 0u);
  ASSERT_EQ(replayed.size(), original.size());
  EXPECT_EQ(Checksum(replayed), Checksum(original));
  for (std::size_t i = 0; i < original.size(); ++i) {
    ASSERT_TRUE(replayed[i] == original[i]) << "message " << i << " of the dispatch order";
  }
  // MCAP's own readers read every file too (nothing without them).
  const std::uint64_t read = sluice_test::ReadEachWithMcapsOwnReader(files);
  EXPECT_TRUE(read == 0 || read == original.size()) << read;
  for (const std::string& file : files) std::remove(file.c_str());
}

// Files split by time: a new file once a message is max_file_duration_ns
// or more past the file's first; each file spans less than that, and the
// files together replay with no gap.
TEST(ReplayTest, ARecordingSplitByDurationSpansLessThanItInEachFile) {
  std::vector<Seen> original;
  std::vector<std::string> files;
  {
    Bus bus;
    std::vector<sluice::SubscriptionHandle> handles;
    Watch(bus, original, handles);
    sluice::record::RecorderOptions options;
    options.path_prefix = Scratch("duration");
    options.max_file_bytes = 0;
    options.max_file_duration_ns = 100000;  // 100 messages 1 us apart
    sluice::record::Recorder<Bus> recorder(bus, options);
    ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
    for (std::uint32_t i = 0; i < 1000; ++i) {
      const auto stamp = std::chrono::nanoseconds(5000000 + std::uint64_t{i} * 1000);
      ASSERT_TRUE(bus.PublishFast(Pose{i, 1.0, 2.0}, 1, stamp).IsAdmitted());
      if (i % 64 == 63) {
        while (bus.ProcessBatch() != 0) {
        }
        (void)recorder.Flush();
      }
    }
    while (bus.ProcessBatch() != 0) {
    }
    ASSERT_TRUE(recorder.Close());
    files = recorder.Files();
  }
  ASSERT_EQ(files.size(), 10u);
  for (const std::string& file : files) {
    sluice::record::McapReader reader(file);
    sluice::record::McapMessage message;
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::size_t count = 0;
    while (reader.Next(&message)) {
      if (count++ == 0) first = message.log_time;
      last = message.log_time;
    }
    EXPECT_EQ(count, 100u) << file;
    EXPECT_LT(last - first, 100000u) << file;
  }
  Bus bus;
  std::vector<Seen> replayed;
  std::vector<sluice::SubscriptionHandle> handles;
  Watch(bus, replayed, handles);
  sluice::record::Replayer<Bus> replayer(bus);
  replayer.Replay<Pose>("/robot/pose");
  const auto result = replayer.Run(files, [&bus] { return bus.ProcessBatch() != 0; });
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_EQ(result.sequence_gaps, 0u);
  EXPECT_EQ(replayed, original);
  RemoveFiles(files);
}

// A writer that does not keep up: the bus is never held up (every
// publish is dispatched), and what the buffer could not take is counted,
// per channel: recorded + refused is what was dispatched.
TEST(ReplayTest, ARecorderThatCannotKeepUpCountsWhatItCouldNotKeep) {
  Bus bus;
  std::vector<Seen> seen;
  std::vector<sluice::SubscriptionHandle> handles;
  Watch(bus, seen, handles);
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("small"), 0, 4096});
  ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
  ASSERT_TRUE((recorder.Record<Stop>("/robot/stop", "Stop")));
  std::uint64_t poses = 0, stops = 0;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    if (i % 3 == 0) {
      stops += bus.Publish(Stop{1}) ? 1 : 0;
    } else {
      poses += bus.Publish(Pose{i, 1, 2}) ? 1 : 0;
    }
    while (bus.ProcessBatch() != 0) {
    }
    if (i == 1000) (void)recorder.Flush();  // once, half way
  }
  ASSERT_TRUE(recorder.Close());
  EXPECT_EQ(seen.size(), poses + stops);
  const auto pose = recorder.Counts(0);
  const auto stop = recorder.Counts(1);
  EXPECT_GT(pose.refused, 0u);
  EXPECT_EQ(pose.recorded + pose.refused + pose.failed, poses);
  EXPECT_EQ(stop.recorded + stop.refused + stop.failed, stops);
  // The files hold exactly the recorded ones.
  std::uint64_t in_files = 0;
  for (const std::string& file : recorder.Files()) {
    sluice::record::McapReader reader(file);
    sluice::record::McapMessage message;
    while (reader.Next(&message)) ++in_files;
    EXPECT_EQ(reader.Error(), sluice::record::McapReadError::kNone);
  }
  EXPECT_EQ(in_files, pose.recorded + stop.recorded);
  RemoveFiles(recorder.Files());
}

// The writer on a thread of its own, flushing while the bus's thread
// publishes and dispatches (CI runs this under ThreadSanitizer): every
// dispatched message is recorded or counted refused, and the files hold
// exactly the recorded ones, in dispatch order (their senders count up).
TEST(ReplayTest, AWriterThreadBesideTheBusesThreadsRecordsOrCountsEveryMessage) {
  constexpr std::uint32_t kCount = 50000;  // thousands of flushes interleaved with dispatch
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("threads"), 256u << 10, 8192});
  ASSERT_TRUE((recorder.Record<Range>("/robot/range", "Range")));
  std::atomic<bool> done{false};
  std::thread writer([&] {
    // Acquire: pairs with the release store after the last dispatch.
    while (!done.load(std::memory_order_acquire)) {
      if (recorder.Flush() == 0) std::this_thread::yield();
    }
  });
  std::uint64_t dispatched = 0;
  std::thread bus_thread([&] {
    for (std::uint32_t i = 0; i < kCount; ++i) {
      while (!bus.Publish(Range{i, 1.0f}, i)) dispatched += bus.ProcessBatch();
      if (i % 64 == 63) dispatched += bus.ProcessBatch();
    }
    while (std::uint32_t taken = bus.ProcessBatch()) dispatched += taken;
    done.store(true, std::memory_order_release);
  });
  bus_thread.join();
  writer.join();
  ASSERT_TRUE(recorder.Close());
  EXPECT_EQ(dispatched, kCount);
  const auto counts = recorder.Counts(0);
  EXPECT_EQ(counts.recorded + counts.refused + counts.failed, kCount);
  EXPECT_EQ(counts.failed, 0u);
  std::uint64_t in_files = 0;
  std::int64_t last_sender = -1;
  for (const std::string& file : recorder.Files()) {
    sluice::record::McapReader reader(file);
    sluice::record::McapMessage message;
    while (reader.Next(&message)) {
      ++in_files;
      const auto sender = static_cast<std::int64_t>(message.data[16] | message.data[17] << 8 |
                                                    message.data[18] << 16);
      EXPECT_GT(sender, last_sender);
      last_sender = sender;
    }
    EXPECT_EQ(reader.Error(), sluice::record::McapReadError::kNone);
  }
  EXPECT_EQ(in_files, counts.recorded);
  RemoveFiles(recorder.Files());
}

// MCAP's own readers read every file the replay test wrote.
TEST(ReplayTest, McapsOwnReadersReadTheSplitFiles) {
  const std::string node = SLUICE_NODE_BINARY;
  const std::string modules = SLUICE_NODE_MODULES;
  std::ifstream package(modules + "/@mcap/core/package.json");
  if (node.empty() || modules.empty() || !package) {
    GTEST_SKIP() << "node or the npm package @mcap/core not found "
                    "(tools/install_node_packages.sh)";
  }
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("split"), 64u << 10, 1u << 20});
  ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
  for (std::uint32_t i = 0; i < 10000; ++i) {
    ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
    (void)bus.ProcessBatch();
    if (i % 100 == 99) (void)recorder.Flush();
  }
  ASSERT_TRUE(recorder.Close());
  ASSERT_GE(recorder.Files().size(), 3u);
  for (const std::string& file : recorder.Files()) {
    const std::string command = "NODE_PATH='" + modules + "' '" + node + "' '" +
                                SLUICE_MCAP_CHECK_SCRIPT + "' '" + file + "' >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << file;
  }
  RemoveFiles(recorder.Files());
}

// Messages the recorder could not keep are gaps in the replay, each
// counted; files given twice are repeats; a first file left out is a gap.
TEST(ReplayTest, WhatTheRecordingMissesIsCountedAtReplay) {
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("gaps"), 4096, 600});
  ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
  EXPECT_FALSE((recorder.Record<Stop>("/robot/pose", "Stop")));  // one type a topic
  for (std::uint32_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
    (void)bus.ProcessBatch();
    if (i % 16 == 15) (void)recorder.Flush();  // 16 messages do not fit in 600 bytes
  }
  // A last message that is kept, so that every refusal has a kept one
  // after it (the replay sees a refusal after the last kept one as nothing).
  (void)recorder.Flush();
  ASSERT_TRUE(bus.Publish(Pose{400, 1, 2}));
  (void)bus.ProcessBatch();
  ASSERT_TRUE(recorder.Close());
  const auto counts = recorder.Counts(0);
  ASSERT_GT(counts.refused, 0u);
  ASSERT_EQ(counts.recorded + counts.refused, 401u);
  const std::vector<std::string> files = recorder.Files();
  ASSERT_GE(files.size(), 2u);
  const auto replay = [](const std::vector<std::string>& which) {
    Bus target;
    sluice::record::Replayer<Bus> replayer(target);
    replayer.Replay<Pose>("/robot/pose");
    return replayer.Run(which, [&target] { return target.ProcessBatch() != 0; });
  };
  // MCAP's readers read the files with their gaps (where node and
  // @mcap/core are installed).
  const std::string node = SLUICE_NODE_BINARY;
  const std::string modules = SLUICE_NODE_MODULES;
  if (!node.empty() && !modules.empty() && std::ifstream(modules + "/@mcap/core/package.json")) {
    for (const std::string& file : files) {
      const std::string command = "NODE_PATH='" + modules + "' '" + node + "' '" +
                                  SLUICE_MCAP_CHECK_SCRIPT + "' '" + file + "' >/dev/null 2>&1";
      EXPECT_EQ(std::system(command.c_str()), 0) << file;
    }
  }
  const auto all = replay(files);
  EXPECT_EQ(all.published, counts.recorded);
  EXPECT_EQ(all.sequence_gaps, counts.refused);
  EXPECT_EQ(all.sequence_repeats, 0u);
  std::vector<std::string> twice = files;
  twice.push_back(files.front());
  const auto again = replay(twice);
  EXPECT_EQ(again.sequence_gaps, counts.refused);
  EXPECT_GT(again.sequence_repeats, 0u);
  const auto without_first = replay({files.begin() + 1, files.end()});
  EXPECT_GT(without_first.sequence_gaps, counts.refused);
  EXPECT_EQ(without_first.sequence_repeats, 0u);
  RemoveFiles(files);
}

// A file that cannot be written: nothing counts as recorded, every message
// as failed, Close says so; a name whose file could not be made is not
// listed.
TEST(ReplayTest, WriteFailuresAreCountedAsFailedNotRecorded) {
  {
    // A disk that fills: files of this process limited to 256 bytes (the
    // write then fails with EFBIG, SIGXFSZ ignored), restored after.
    struct FileSizeLimit {
      rlimit before{};
      void (*handler)(int) = SIG_DFL;
      FileSizeLimit() {
        getrlimit(RLIMIT_FSIZE, &before);
        handler = std::signal(SIGXFSZ, SIG_IGN);
        rlimit small = before;
        small.rlim_cur = 256;
        setrlimit(RLIMIT_FSIZE, &small);
      }
      ~FileSizeLimit() {
        setrlimit(RLIMIT_FSIZE, &before);
        std::signal(SIGXFSZ, handler);
      }
    } limit;
    Bus bus;
    sluice::record::Recorder<Bus> recorder(
        bus, {Scratch("full_" + std::to_string(getpid())), 0, 1u << 16});
    ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
    for (std::uint32_t i = 0; i < 20; ++i) {
      ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
      (void)bus.ProcessBatch();
    }
    (void)recorder.Flush();
    EXPECT_FALSE(recorder.Close());
    EXPECT_EQ(recorder.Counts(0).recorded, 0u);
    EXPECT_EQ(recorder.Counts(0).failed, 20u);
    for (const std::string& file : recorder.Files()) std::remove(file.c_str());
  }
  Bus bus;
  sluice::record::Recorder<Bus> nowhere(bus, {Scratch("no/such/dir/run"), 0, 1u << 16});
  ASSERT_TRUE((nowhere.Record<Pose>("/robot/pose", "Pose")));
  for (std::uint32_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
    (void)bus.ProcessBatch();
    (void)nowhere.Flush();
  }
  EXPECT_FALSE(nowhere.Close());
  EXPECT_TRUE(nowhere.Files().empty());
  EXPECT_EQ(nowhere.Counts(0).failed, 5u);
}

// A recording never overwrites a file: a number whose file exists is
// skipped (a restarted program beside its earlier run).
TEST(ReplayTest, ARecordingNeverOverwritesAFile) {
  const std::string prefix = Scratch("keep_" + std::to_string(getpid()));
  {
    std::ofstream earlier(prefix + "-000.mcap", std::ios::binary | std::ios::trunc);
    earlier << "an earlier run's";
  }
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {prefix, 0, 1u << 16});
  ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
  ASSERT_TRUE(bus.Publish(Pose{1, 1, 2}));
  (void)bus.ProcessBatch();
  ASSERT_TRUE(recorder.Close());
  ASSERT_EQ(recorder.Files().size(), 1u);
  EXPECT_EQ(recorder.Files()[0], prefix + "-001.mcap");
  std::ifstream earlier(prefix + "-000.mcap", std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(earlier)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "an earlier run's");
  std::remove((prefix + "-000.mcap").c_str());
  std::remove((prefix + "-001.mcap").c_str());
}

// Topics and type names are MCAP strings: not valid UTF-8, refused.
TEST(ReplayTest, ATopicThatIsNotUtf8IsRefused) {
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("utf8"), 0, 1u << 16});
  EXPECT_FALSE((recorder.Record<Pose>("/robot/\xFF", "Pose")));
  EXPECT_FALSE((recorder.Record<Pose>("/robot/pose", "Po\xC0se")));
  EXPECT_TRUE((recorder.Record<Pose>("/robot/p\xC3\xA9se", "Pose")));
  EXPECT_EQ(recorder.ChannelCount(), 1u);
}

#if SLUICE_HAS_EXCEPTIONS
struct ThrowingPoseCodec {
  static bool Encode(const Pose& pose, std::string& out) {
    if (pose.frame % 3 == 0) throw std::runtime_error("codec");
    return sluice::nats::DefaultCodec<Pose>::Encode(pose, out);
  }
};
// A codec that throws fails the message, counted: recorded + refused +
// failed is still every message dispatched; the bus reports the throw.
TEST(ReplayTest, ACodecThatThrowsIsCountedFailed) {
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("throwing_codec"), 0, 1u << 16});
  ASSERT_TRUE((recorder.Record<Pose, ThrowingPoseCodec>("/robot/pose", "Pose")));
  for (std::uint32_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
    (void)bus.ProcessBatch();
  }
  (void)recorder.Flush();
  const auto counts = recorder.Counts(0);
  EXPECT_EQ(counts.failed, 4u);  // frames 0, 3, 6, 9
  EXPECT_EQ(counts.recorded + counts.refused + counts.failed, 10u);
  EXPECT_EQ(bus.GetStatistics().processing_errors, 4u);
  ASSERT_TRUE(recorder.Close());
  for (const std::string& file : recorder.Files()) std::remove(file.c_str());
}
#endif

// A closed bus stops the replay; make_room is not asked for a refusal
// that is not for room.
TEST(ReplayTest, AClosedBusStopsTheReplayWithoutAskingForRoom) {
  std::vector<std::string> files;
  {
    Bus bus;
    sluice::record::Recorder<Bus> recorder(bus, {Scratch("closed"), 0, 1u << 16});
    ASSERT_TRUE((recorder.Record<Pose>("/robot/pose", "Pose")));
    for (std::uint32_t i = 0; i < 10; ++i) {
      ASSERT_TRUE(bus.Publish(Pose{i, 1, 2}));
      (void)bus.ProcessBatch();
    }
    ASSERT_TRUE(recorder.Close());
    files = recorder.Files();
  }
  Bus target;
  target.Close();
  sluice::record::Replayer<Bus> replayer(target);
  replayer.Replay<Pose>("/robot/pose");
  int asked = 0;
  const auto result = replayer.Run(files, [&asked] { return ++asked < 1000; });
  EXPECT_TRUE(result.closed);
  EXPECT_EQ(result.published, 0u);
  EXPECT_EQ(asked, 0);
  RemoveFiles(files);
}

// A file cut short reads as every whole message before the cut, then
// kTruncated.
TEST(McapReaderTest, AFileCutShortGivesTheMessagesBeforeTheCut) {
  const std::string path = Scratch("cut.mcap");
  {
    sluice::record::McapWriter mcap;
    ASSERT_TRUE(mcap.Open(path));
    const int channel = mcap.AddChannel(0, "/a", "x");
    for (std::uint32_t i = 0; i < 10; ++i)
      ASSERT_TRUE(mcap.AddMessage(channel, i, i, i, "abcd", 4));
    ASSERT_TRUE(mcap.Close());
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Header record, Channel record, then Message records of 9 + 22 + 4 bytes.
  const std::size_t first_message = bytes.find('\x05', 8);
  ASSERT_NE(first_message, std::string::npos);
  const std::size_t cut = first_message + 35 * 6 + 10;  // six whole, the seventh cut
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(cut));
  }
  sluice::record::McapReader reader(path);
  sluice::record::McapMessage message;
  std::uint32_t read = 0;
  while (reader.Next(&message)) EXPECT_EQ(message.sequence, read++);
  EXPECT_EQ(read, 6u);
  EXPECT_EQ(reader.Error(), sluice::record::McapReadError::kTruncated);
}

// A record longer than the reader's bound is refused before anything of
// its size is allocated.
TEST(McapReaderTest, ARecordPastTheBoundIsRefusedWithoutAllocatingIt) {
  const std::string path = Scratch("huge.mcap");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const unsigned char magic[8] = {0x89, 'M', 'C', 'A', 'P', 0x30, '\r', '\n'};
    out.write(reinterpret_cast<const char*>(magic), sizeof(magic));
    unsigned char head[9] = {0x05};
    const std::uint64_t length = std::uint64_t{1} << 40;  // a terabyte
    for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<unsigned char>(length >> (8 * i));
    out.write(reinterpret_cast<const char*>(head), sizeof(head));
  }
  sluice::record::McapReader reader(path);
  sluice::record::McapMessage message;
  EXPECT_FALSE(reader.Next(&message));
  EXPECT_EQ(reader.Error(), sluice::record::McapReadError::kRecordTooLarge);
}

// The writer gives every id MCAP has: schemas 1 to 65535, channels 0 to
// 65535, then refuses.
TEST(McapWriterLimitsTest, EveryIdMcapHasThenARefusal) {
  sluice::record::McapWriter mcap;
  ASSERT_TRUE(mcap.Open(Scratch("ids.mcap")));
  std::uint16_t last_schema = 0;
  for (int i = 0; i < 65535; ++i) last_schema = mcap.AddSchema("s", "", "");
  EXPECT_EQ(last_schema, 65535u);
  EXPECT_EQ(mcap.AddSchema("s", "", ""), 0u);
  int last_channel = -1;
  for (int i = 0; i < 65536; ++i) last_channel = mcap.AddChannel(0, "/c", "x");
  EXPECT_EQ(last_channel, 65535);
  EXPECT_EQ(mcap.AddChannel(0, "/c", "x"), -1);
  EXPECT_TRUE(mcap.Close());
}

// The reader's outcome for files that are not whole.
TEST(McapReaderTest, AFileThatIsNotWholeHasANamedOutcome) {
  EXPECT_EQ(sluice::record::McapReader(Scratch("does-not-exist.mcap")).Error(),
            sluice::record::McapReadError::kCannotOpen);
  {
    std::ofstream out(Scratch("garbage.mcap"), std::ios::binary);
    out << "this is not an mcap file at all";
  }
  EXPECT_EQ(sluice::record::McapReader(Scratch("garbage.mcap")).Error(),
            sluice::record::McapReadError::kBadMagic);
}

}  // namespace
}  // namespace replay_test
