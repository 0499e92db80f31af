// The stream table's file without a server: what a restarted receiver
// reads back (the numbers sent meanwhile become gaps, a replay of a frame
// taken before is refused, heartbeat stamps and held frames survive), what
// leaves the file (forgotten and evicted streams), what it cannot keep
// (counted), the files it refuses (another receiver's, another user's
// kind, a symlink, one others may write, one that is not a state file), a
// damaged file (dropped and counted, never read past), and a writer killed
// with SIGKILL at random moments, 200 times: the file then reads as the
// state before or after the frame being noted, never one that takes a
// replay as new.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <sluice/nats/stream_state_file.hpp>
#include <sluice/nats/stream_state_stores.hpp>
#include <sluice/nats/stream_tracker.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using sluice::nats::FrameDelivery;
using sluice::nats::HeartbeatVerdict;
using sluice::nats::OriginTrust;
using sluice::nats::StreamJournal;
using sluice::nats::StreamState;
using sluice::nats::StreamStateFile;
using sluice::nats::StreamTableLimits;
using sluice::nats::StreamTracker;
using sluice::nats::StreamVerdict;

constexpr std::uint64_t kMs = 1'000'000;

class Scratch {
 public:
  Scratch() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/sluice-state-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~Scratch() {
    if (!path_.empty()) (void)std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A file's bytes.
std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A receiver's table and its file, as the bridge makes them.
struct Receiver {
  std::unique_ptr<StreamStateFile> file;
  StreamTracker tracker;
  std::string error;
  std::uint64_t highest_read_back = 0;  // of the last stream read back

  Receiver(const std::string& path, const StreamTableLimits& limits = {},
           std::size_t capacity = 2048)
      : tracker(limits) {
    file = StreamStateFile::Open(path, capacity, &error);
    if (!file) return;
    file->ForEachStream([this](const StreamState& state, std::uint32_t entry) {
      highest_read_back = state.highest;
      return tracker.Restore(state, entry, 0);
    });
    tracker.Attach(file.get());
  }
  ~Receiver() { tracker.Attach(nullptr); }
};

TEST(StreamStateFileTest, ARestartedReceiverCountsWhatWasSentWhileItWasDown) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    for (std::uint64_t s = 1; s <= 100; ++s) {
      ASSERT_NE(before.tracker.Note(7, 1, "a.medium", s), StreamVerdict::kDuplicate);
    }
    EXPECT_EQ(before.tracker.Counts().gaps, 0u);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  EXPECT_EQ(after.tracker.Counts().streams_restored, 1u);
  // 101 to 150 were sent while it was down.
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 151), StreamVerdict::kAfterGap);
  EXPECT_EQ(after.tracker.Counts().gaps, 50u);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 152), StreamVerdict::kInOrder);
  EXPECT_EQ(after.tracker.Counts().gaps, 50u);
}

TEST(StreamStateFileTest, WithoutTheFileARestartedReceiverCountsNothing) {
  // What the file is for: the same restart with a fresh table.
  StreamTracker before;
  for (std::uint64_t s = 1; s <= 100; ++s) (void)before.Note(7, 1, "a.medium", s);
  StreamTracker after;
  EXPECT_EQ(after.Note(7, 1, "a.medium", 151), StreamVerdict::kFirst);
  EXPECT_EQ(after.Counts().gaps, 0u);
}

TEST(StreamStateFileTest, AReplayOfAFrameTakenBeforeTheRestartIsRefused) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    for (std::uint64_t s = 1; s <= 10; ++s) (void)before.tracker.Note(7, 1, "a.high", s);
    // 12 came before 11, and 11 never did.
    (void)before.tracker.Note(7, 1, "a.high", 12);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  for (std::uint64_t s = 1; s <= 10; ++s) {
    EXPECT_EQ(after.tracker.Note(7, 1, "a.high", s), StreamVerdict::kDuplicate) << s;
  }
  EXPECT_EQ(after.tracker.Note(7, 1, "a.high", 12), StreamVerdict::kDuplicate);
  // 11 did not arrive: late, not refused.
  EXPECT_EQ(after.tracker.Note(7, 1, "a.high", 11), StreamVerdict::kLate);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.high", 11), StreamVerdict::kDuplicate);
}

TEST(StreamStateFileTest, HeartbeatStampsAndHeldFramesSurviveARestart) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    for (std::uint64_t s = 1; s <= 5; ++s) (void)before.tracker.Note(7, 1, "a.low", s);
    EXPECT_EQ(before.tracker.NoteHeartbeat(7, 1, "a.low", 5, 50 * kMs, 1000),
              HeartbeatVerdict::kNothingMissing);
    // One frame far ahead: held, not taken as the highest.
    EXPECT_EQ(before.tracker.Note(7, 1, "a.low", 100'000), StreamVerdict::kHeld);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  // A heartbeat stamped before the last one is a replay.
  EXPECT_EQ(after.tracker.NoteHeartbeat(7, 1, "a.low", 5, 50 * kMs, 999),
            HeartbeatVerdict::kReplay);
  // The held frame was delivered: its replay is refused, and the stream
  // goes on from 5.
  EXPECT_EQ(after.tracker.Note(7, 1, "a.low", 100'000), StreamVerdict::kDuplicate);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.low", 6), StreamVerdict::kInOrder);
  EXPECT_EQ(after.tracker.Counts().gaps, 0u);
}

TEST(StreamStateFileTest, ForgottenAndEvictedStreamsLeaveTheFile) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    // One stream per part, replaced at once when another comes.
    Receiver before(path, StreamTableLimits{1, 1, 0});
    ASSERT_TRUE(before.file) << before.error;
    (void)before.tracker.Note(7, 1, "a.high", 1);
    (void)before.tracker.Note(8, 1, "b.high", 1);  // evicts 7's
    (void)before.tracker.Note(9, 1, "c.low", 1, true, OriginTrust::kUnknown);
    before.tracker.Forget([](std::string_view subject) { return subject == "c.low"; });
  }
  Receiver after(path, StreamTableLimits{1, 1, 0});
  ASSERT_TRUE(after.file) << after.error;
  EXPECT_EQ(after.tracker.Counts().streams_restored, 1u);
  EXPECT_EQ(after.tracker.Note(8, 1, "b.high", 3), StreamVerdict::kAfterGap);
  // 7's stream left the file when it was evicted: a new baseline.
  EXPECT_EQ(after.tracker.Note(7, 1, "a.high", 3), StreamVerdict::kFirst);
}

TEST(StreamStateFileTest, StreamsTheFileCannotKeepAreCountedOnce) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  Receiver receiver(path, StreamTableLimits{}, /*capacity=*/1);
  ASSERT_TRUE(receiver.file) << receiver.error;
  (void)receiver.tracker.Note(7, 1, "a.high", 1);
  for (std::uint64_t s = 1; s <= 3; ++s) (void)receiver.tracker.Note(8, 1, "b.high", s);
  const std::string long_subject(StreamStateFile::kMaxSubject + 1, 'x');
  (void)receiver.tracker.Note(9, 1, long_subject, 1);
  EXPECT_EQ(receiver.tracker.Counts().streams_not_saved, 2u);
  // Room again: the next frame of a stream not kept is kept.
  receiver.tracker.Forget([](std::string_view subject) { return subject == "a.high"; });
  (void)receiver.tracker.Note(8, 1, "b.high", 4);
  receiver.tracker.Attach(nullptr);
  receiver.file.reset();
  Receiver after(path, StreamTableLimits{}, 1);
  ASSERT_TRUE(after.file) << after.error;
  EXPECT_EQ(after.tracker.Note(8, 1, "b.high", 4), StreamVerdict::kDuplicate);
}

TEST(StreamStateFileTest, ASecondReceiverCannotOpenAFileInUse) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  std::string error;
  auto first = StreamStateFile::Open(path, 16, &error);
  ASSERT_TRUE(first) << error;
  auto second = StreamStateFile::Open(path, 16, &error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find("in use by another receiver"), std::string::npos) << error;
  first.reset();
  EXPECT_TRUE(StreamStateFile::Open(path, 16, &error)) << error;
}

TEST(StreamStateFileTest, FilesAReceiverMustNotTrustAreRefusedAndLeftAsTheyAre) {
  Scratch scratch;
  std::string error;
  // Others may write it.
  const std::string shared = scratch.File("shared");
  ASSERT_TRUE(StreamStateFile::Open(shared, 16, &error)) << error;
  ASSERT_EQ(::chmod(shared.c_str(), 0666), 0);
  EXPECT_FALSE(StreamStateFile::Open(shared, 16, &error));
  EXPECT_NE(error.find("others may write it"), std::string::npos) << error;
  // A symbolic link (to a file someone else chose).
  const std::string target = scratch.File("target");
  ASSERT_TRUE(std::ofstream(target) << "x");
  const std::string link = scratch.File("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(StreamStateFile::Open(link, 16, &error));
  // A directory.
  EXPECT_FALSE(StreamStateFile::Open(scratch.File(""), 16, &error));
  // Not a state file (a wrong path, say): refused, not overwritten.
  const std::string text = scratch.File("notes.txt");
  const std::string words(200, 'w');
  ASSERT_TRUE(std::ofstream(text) << words);
  ASSERT_EQ(::chmod(text.c_str(), 0600), 0);
  EXPECT_FALSE(StreamStateFile::Open(text, 16, &error));
  EXPECT_NE(error.find("not a Sluice stream state file"), std::string::npos) << error;
  std::ifstream in(text);
  std::string read((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(read, words);
  // Shorter than a header, or a header of zeros (a disk image, say):
  // refused, not overwritten.
  const std::string note = scratch.File("note");
  ASSERT_TRUE(std::ofstream(note) << "my notes");
  ASSERT_EQ(::chmod(note.c_str(), 0600), 0);
  EXPECT_FALSE(StreamStateFile::Open(note, 16, &error));
  EXPECT_NE(error.find("not a Sluice stream state file"), std::string::npos) << error;
  std::ifstream note_in(note);
  EXPECT_EQ(
      std::string((std::istreambuf_iterator<char>(note_in)), std::istreambuf_iterator<char>()),
      "my notes");
  const std::string image = scratch.File("image");
  std::string image_bytes(64, '\0');
  image_bytes += std::string(3000, 'D');
  ASSERT_TRUE(std::ofstream(image, std::ios::binary) << image_bytes);
  ASSERT_EQ(::chmod(image.c_str(), 0600), 0);
  EXPECT_FALSE(StreamStateFile::Open(image, 2, &error));
  std::ifstream image_in(image, std::ios::binary);
  EXPECT_EQ(
      std::string((std::istreambuf_iterator<char>(image_in)), std::istreambuf_iterator<char>()),
      image_bytes);
  // A state file cut short.
  const std::string cut = scratch.File("cut");
  ASSERT_TRUE(StreamStateFile::Open(cut, 16, &error)) << error;
  ASSERT_EQ(
      ::truncate(cut.c_str(), StreamStateFile::kRecordsOffset + 3 * StreamStateFile::kRecordSize),
      0);
  EXPECT_FALSE(StreamStateFile::Open(cut, 16, &error));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  // Of another version: refused, unchanged.
  const std::string old_version = scratch.File("old");
  ASSERT_TRUE(StreamStateFile::Open(old_version, 2, &error)) << error;
  std::vector<char> old_bytes = ReadAll(old_version);
  old_bytes[8] = 9;  // the version, after the 8-byte magic
  WriteAll(old_version, old_bytes);
  EXPECT_FALSE(StreamStateFile::Open(old_version, 2, &error));
  EXPECT_NE(error.find("another version"), std::string::npos) << error;
  EXPECT_EQ(ReadAll(old_version), old_bytes);
  // A device: not opened.
  EXPECT_FALSE(StreamStateFile::Open("/dev/null", 2, &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  // A file made here is the user's alone.
  struct stat made {};
  ASSERT_EQ(::stat(shared.c_str(), &made), 0);  // (chmod'ed above)
  const std::string own = scratch.File("own");
  ::umask(022);
  ASSERT_TRUE(StreamStateFile::Open(own, 2, &error)) << error;
  ASSERT_EQ(::stat(own.c_str(), &made), 0);
  EXPECT_EQ(made.st_mode & 0777, 0600u);
  // Bounds, and the record's size docs/nats.md gives.
  EXPECT_EQ(StreamStateFile::kRecordSize, 936u);
  EXPECT_EQ(StreamStateFile::kRecordsOffset, 64u + 64u * 8496u);
  EXPECT_FALSE(StreamStateFile::Open(scratch.File("zero"), 0, &error));
  EXPECT_FALSE(
      StreamStateFile::Open(scratch.File("huge"), StreamStateFile::kMaxRecords + 1, &error));
}

// A receiver killed after it wrote a new file's header and before it added
// the records: the next one grows it and uses it.
TEST(StreamStateFileTest, AFileKilledBeforeItsRecordsWereAddedIsGrown) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  std::string error;
  ASSERT_TRUE(StreamStateFile::Open(path, 16, &error)) << error;
  ASSERT_EQ(::truncate(path.c_str(), 64), 0);  // the header alone
  Receiver receiver(path, StreamTableLimits{}, 16);
  ASSERT_TRUE(receiver.file) << receiver.error;
  EXPECT_EQ(receiver.file->Capacity(), 16u);
  EXPECT_EQ(receiver.tracker.Note(7, 1, "a.high", 1), StreamVerdict::kFirst);
}

// A stream that sent heartbeats is silent after a restart too, once it
// goes three of its intervals without a frame.
TEST(StreamStateFileTest, AStreamRestoredWithItsHeartbeatsReadsAsSilent) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    (void)before.tracker.Note(7, 1, "a.high", 1);
    (void)before.tracker.NoteHeartbeat(7, 1, "a.high", 1, 50 * kMs, 1000);
  }
  Receiver after(path);  // restored at 0 on the tracker's clock
  ASSERT_TRUE(after.file) << after.error;
  EXPECT_EQ(after.tracker.Silent(100 * kMs), 0u);
  EXPECT_EQ(after.tracker.Silent(200 * kMs), 1u);
}

// A stream a later instance of its sender replaced is never silent, also
// after a restart.
TEST(StreamStateFileTest, AStreamEndedBeforeARestartStaysNeverSilent) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    (void)before.tracker.Note(7, 1, "a.high", 1);
    (void)before.tracker.NoteHeartbeat(7, 1, "a.high", 1, 50 * kMs, 1000);
    // The sender started again: instance 2 ends instance 1.
    (void)before.tracker.Note(7, 2, "a.high", 1, true, OriginTrust::kKnown, 10 * kMs);
    (void)before.tracker.NoteHeartbeat(7, 2, "a.high", 1, 50 * kMs, 2000, true, 10 * kMs);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  ASSERT_EQ(after.tracker.Counts().streams_restored, 2u);
  // Instance 2 goes on; instance 1 is not silent, however long.
  for (std::uint64_t at = 100 * kMs; at <= 10'000 * kMs; at += 100 * kMs) {
    (void)after.tracker.NoteHeartbeat(7, 2, "a.high", 1, 50 * kMs, 3000 + at, true, at);
    ASSERT_EQ(after.tracker.Silent(at), 0u) << at;
  }
}

// A stream kept in the file whose subject now comes over JetStream: the
// kept numbers do not judge it (they would refuse the stream's
// redeliveries), it starts anew, and its record is a JetStream stream's.
TEST(StreamStateFileTest, AKeptStreamHeardOverJetStreamStartsAnewAsAJetStreamStream) {
  constexpr FrameDelivery kJetStream = FrameDelivery::kJetStream;
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver core(path);
    ASSERT_TRUE(core.file) << core.error;
    for (std::uint64_t s = 1; s <= 50; ++s) (void)core.tracker.Note(7, 1, "a.high", s);
  }
  {
    Receiver jetstream(path);
    ASSERT_TRUE(jetstream.file) << jetstream.error;
    ASSERT_EQ(jetstream.tracker.Counts().streams_restored, 1u);
    // A redelivery of 30: new to this route, not a duplicate.
    EXPECT_EQ(jetstream.tracker.Peek(7, 1, "a.high", 30, OriginTrust::kKnown, 0, kJetStream),
              StreamVerdict::kFirst);
    EXPECT_EQ(jetstream.tracker.Note(7, 1, "a.high", 30, true, OriginTrust::kKnown, 0, kJetStream),
              StreamVerdict::kFirst);
    EXPECT_EQ(jetstream.tracker.Note(7, 1, "a.high", 31, true, OriginTrust::kKnown, 0, kJetStream),
              StreamVerdict::kInOrder);
    EXPECT_EQ(jetstream.tracker.Note(7, 1, "a.high", 30, true, OriginTrust::kKnown, 0, kJetStream),
              StreamVerdict::kDuplicate);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  EXPECT_EQ(after.tracker.Counts().streams_restored, 1u);
  // Read back as the JetStream stream: 31 is not refused (the stream
  // delivers again what its reader did not acknowledge), and a core frame
  // does not find it.
  EXPECT_EQ(after.tracker.Peek(7, 1, "a.high", 31, OriginTrust::kKnown, 0, kJetStream),
            StreamVerdict::kLate);
  EXPECT_EQ(after.tracker.Peek(7, 1, "a.high", 31), StreamVerdict::kFirst);
}

// A receiver with its state file at `path` takes frames 1 to 100 of one
// JetStream stream.
void TakeAHundredJetStreamFrames(const std::string& path) {
  Receiver before(path);
  ASSERT_TRUE(before.file) << before.error;
  for (std::uint64_t s = 1; s <= 100; ++s) {
    ASSERT_NE(before.tracker.Note(7, 1, "a.medium", s, true, OriginTrust::kKnown, 0,
                                  FrameDelivery::kJetStream),
              StreamVerdict::kDuplicate);
  }
}

// A JetStream stream read back from the file, its durable read by no one
// since (TakeOver: this receiver was its last reader): the earlier receiver's numbers all read as
// heard and none as arrived. A redelivery of one it took but never acknowledged (its process was
// killed) is admitted, once; no number up to its highest is a gap, whether it comes again or not
// (it was acknowledged); what the stream discarded after it is counted.
TEST(StreamStateFileTest, ARestartedJetStreamReaderAdmitsRedeliveriesAndCountsWhatTheStreamLost) {
  constexpr FrameDelivery kJetStream = FrameDelivery::kJetStream;
  constexpr FrameDelivery kEarlier = FrameDelivery::kJetStreamEarlier;
  Scratch scratch;
  const std::string path = scratch.File("streams");
  ASSERT_NO_FATAL_FAILURE(TakeAHundredJetStreamFrames(path));
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  ASSERT_EQ(after.tracker.Counts().streams_restored, 1u);
  after.tracker.TakeOver([](std::string_view subject) { return subject == "a.medium"; }, true);
  // 61 to 100 were in the killed receiver's bus, unacknowledged: they come
  // again, delivered to it first; 1 to 60 it acknowledged, and never do.
  for (std::uint64_t s = 61; s <= 100; ++s) {
    ASSERT_EQ(after.tracker.Note(7, 1, "a.medium", s, true, OriginTrust::kKnown, 0, kEarlier),
              StreamVerdict::kLate)
        << s;
  }
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 80, true, OriginTrust::kKnown, 0, kEarlier),
            StreamVerdict::kDuplicate);
  EXPECT_EQ(after.tracker.Counts().gaps, 0u);
  // 101 to 130 the stream discarded while no one read it.
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 131, true, OriginTrust::kKnown, 0, kJetStream),
            StreamVerdict::kAfterGap);
  EXPECT_EQ(after.tracker.Counts().gaps, 30u);
}

// The same stream read back, its durable read by another reader since
// (TakeOver: not its last reader): 101 to 150 went there, and are no gaps;
// losses after the first frame delivered here are.
TEST(StreamStateFileTest, AJetStreamStreamAnotherReaderWentOnWithCountsNoGapForWhatItTook) {
  constexpr FrameDelivery kJetStream = FrameDelivery::kJetStream;
  Scratch scratch;
  const std::string path = scratch.File("streams");
  ASSERT_NO_FATAL_FAILURE(TakeAHundredJetStreamFrames(path));
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  after.tracker.TakeOver([](std::string_view subject) { return subject == "a.medium"; }, false);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 151, true, OriginTrust::kKnown, 0, kJetStream),
            StreamVerdict::kAfterGap);
  EXPECT_EQ(after.tracker.Counts().gaps, 0u);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 155, true, OriginTrust::kKnown, 0, kJetStream),
            StreamVerdict::kAfterGap);
  EXPECT_EQ(after.tracker.Counts().gaps, 3u);
}

// A stream inherited (its durable taken over) and left before a frame was
// delivered to this receiver first stays inherited when read back, even if
// this receiver was then the durable's last reader: what the other reader
// took is no gap for the receiver after it either.
TEST(StreamStateFileTest, AnInheritedStreamReadBackStaysInherited) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  ASSERT_NO_FATAL_FAILURE(TakeAHundredJetStreamFrames(path));
  const auto medium = [](std::string_view subject) { return subject == "a.medium"; };
  {
    Receiver idle(path);
    ASSERT_TRUE(idle.file) << idle.error;
    idle.tracker.TakeOver(medium, false);  // another reader went on; nothing came
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  after.tracker.TakeOver(medium, true);
  EXPECT_EQ(after.tracker.Note(7, 1, "a.medium", 151, true, OriginTrust::kKnown, 0,
                               FrameDelivery::kJetStream),
            StreamVerdict::kAfterGap);
  EXPECT_EQ(after.tracker.Counts().gaps, 0u);
}

// A state no tracker writes is not restored: here two held frames alike,
// which would make the jump they confirm count 2^32 gaps.
TEST(StreamStateFileTest, AStateWithAFrameHeldTwiceIsNotRestored) {
  StreamTracker tracker;
  StreamState state;
  state.origin_id = 7;
  state.instance_id = 1;
  state.subject = "a.high";
  state.baseline = 1;
  state.highest = 1;
  state.held = {10'000, 10'000, 10'000, 0};
  state.held_count = 3;
  EXPECT_FALSE(tracker.Restore(state, 0, 0));
  state.held = {10'000, 20'000, 30'000, 0};
  EXPECT_TRUE(tracker.Restore(state, 0, 0));
}

TEST(StreamStateFileTest, AFileMadeForFewerStreamsIsGrownAndKeepsThem) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver small(path, StreamTableLimits{}, 2);
    ASSERT_TRUE(small.file) << small.error;
    (void)small.tracker.Note(7, 1, "a.high", 9);
  }
  Receiver large(path, StreamTableLimits{}, 64);
  ASSERT_TRUE(large.file) << large.error;
  EXPECT_EQ(large.file->Capacity(), 64u);
  EXPECT_EQ(large.tracker.Note(7, 1, "a.high", 9), StreamVerdict::kDuplicate);
}

TEST(StreamStateFileTest, RandomBytesInTheRecordsAreDroppedAndCountedNeverReadPast) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  constexpr std::size_t kRecords = 8;
  {
    Receiver receiver(path, StreamTableLimits{}, kRecords);
    ASSERT_TRUE(receiver.file) << receiver.error;
    for (std::uint64_t origin = 1; origin <= kRecords; ++origin) {
      (void)receiver.tracker.Note(origin, 1, "a.high", 5);
    }
    StreamStateFile::DurablePlace saved;
    bool found = false;
    for (const char* name : {"S/a", "S/b"}) {
      receiver.file->MarkDurable(receiver.file->FindDurable(name, &saved, &found),
                                 StreamStateFile::DurablePlace{1000, 7});
    }
  }
  const std::vector<char> good = ReadAll(path);
  std::mt19937_64 random(2026);
  for (int round = 0; round < 300; ++round) {
    std::vector<char> bytes = good;
    // A few bytes of a few records (a damaged disk), or whole records.
    const int changes = 1 + static_cast<int>(random() % 64);
    for (int c = 0; c < changes; ++c) {
      bytes[64 + random() % (bytes.size() - 64)] = static_cast<char>(random());
    }
    if (round % 10 == 0) {
      for (std::size_t i = 64; i < bytes.size(); ++i) bytes[i] = static_cast<char>(random());
    }
    WriteAll(path, bytes);
    Receiver receiver(path, StreamTableLimits{}, kRecords);
    ASSERT_TRUE(receiver.file) << receiver.error;
    const sluice::nats::StreamCounts counts = receiver.tracker.Counts();
    EXPECT_LE(counts.streams_restored + receiver.file->RecordsDropped(), kRecords);
    // Whatever was read back still judges frames, and durables' places
    // are read and kept.
    for (std::uint64_t origin = 1; origin <= kRecords; ++origin) {
      (void)receiver.tracker.Note(origin, 1, "a.high", 6);
    }
    StreamStateFile::DurablePlace saved;
    bool found = false;
    for (const char* name : {"S/a", "S/b", "S/c"}) {
      receiver.file->MarkDurable(receiver.file->FindDurable(name, &saved, &found),
                                 StreamStateFile::DurablePlace{2000, 8});
    }
  }
}

TEST(StreamStateFileTest, AStreamRecordedTwiceIsReadBackOnce) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver receiver(path, StreamTableLimits{}, 2);
    ASSERT_TRUE(receiver.file) << receiver.error;
    (void)receiver.tracker.Note(1, 1, "a.high", 5);
  }
  // The one record copied into the other place.
  std::vector<char> bytes = ReadAll(path);
  const std::size_t size = StreamStateFile::kRecordSize;
  const std::size_t first = StreamStateFile::kRecordsOffset;
  const std::size_t used = bytes[first] != 0 ? first : first + size;
  const std::size_t other = used == first ? first + size : first;
  std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(used),
            bytes.begin() + static_cast<std::ptrdiff_t>(used + size),
            bytes.begin() + static_cast<std::ptrdiff_t>(other));
  WriteAll(path, bytes);
  Receiver receiver(path, StreamTableLimits{}, 2);
  ASSERT_TRUE(receiver.file) << receiver.error;
  EXPECT_EQ(receiver.tracker.Counts().streams_restored, 1u);
  EXPECT_EQ(receiver.file->RecordsDropped(), 1u);
}

TEST(StreamStateFileTest, ADamagedRecordIsDroppedAndTheOthersKept) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver receiver(path, StreamTableLimits{}, 2);
    ASSERT_TRUE(receiver.file) << receiver.error;
    (void)receiver.tracker.Note(1, 1, "a.high", 5);
    (void)receiver.tracker.Note(2, 1, "a.high", 5);
  }
  std::vector<char> bytes = ReadAll(path);
  // The first record's subject size (at offset 4 of the record) past 256.
  bytes[StreamStateFile::kRecordsOffset + 4] = static_cast<char>(0xFF);
  bytes[StreamStateFile::kRecordsOffset + 5] = static_cast<char>(0xFF);
  WriteAll(path, bytes);
  Receiver receiver(path, StreamTableLimits{}, 2);
  ASSERT_TRUE(receiver.file) << receiver.error;
  EXPECT_EQ(receiver.file->RecordsDropped(), 1u);
  EXPECT_EQ(receiver.tracker.Counts().streams_restored, 1u);
}

// What a writer and the test share across the kill: the writer's report
// when it started, and the number it is noting (stored before each Note).
struct Shared {
  std::atomic<std::uint64_t> started{0};  // 1: the report below is written
  std::atomic<std::uint64_t> read_back{0};
  std::atomic<std::uint64_t> replay_taken{0};
  std::atomic<std::uint64_t> noting{0};
};

// The numbers the writer below takes: every one but the multiples of 3,
// which never arrive (gaps, so that records have arrival bits cleared as
// well as set).
std::uint64_t NextTaken(std::uint64_t s) { return (s + 1) % 3 == 0 ? s + 2 : s + 1; }
std::uint64_t PreviousTaken(std::uint64_t s) {
  if (s <= 1) return 0;
  return (s - 1) % 3 == 0 ? s - 2 : s - 1;
}

// A writer killed at a random moment, 200 times, on one stream: each start
// reads back the stream's highest number, which must be the one the last
// writer was noting or the one it took before (never less, never more),
// every number taken in the window must be refused as a replay, and the
// next number must be taken. The writer tells the number it notes through
// shared memory, not a system call, so that the kills land anywhere in
// its loop, most of which is writing the record. 200 kills, each after
// 0-2 ms of frames.
TEST(StreamStateFileTest, AWriterKilledAtAnyMomentLeavesTheStateBeforeOrAfterItsFrame) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  void* page =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  Shared* shared = new (page) Shared;
  std::mt19937 random(7);
  std::uint64_t last_noting = 0;
  int landed_inside = 0;  // kills that left the frame being noted out
  constexpr int kKills = 200;
  for (int kill = 0; kill < kKills; ++kill) {
    shared->started.store(0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Receiver receiver(path);
      if (!receiver.file) ::_exit(3);
      const std::uint64_t highest =
          receiver.tracker.Counts().streams_restored == 1 ? receiver.highest_read_back : 0;
      // Every number taken (in the window) is a replay now, and the next
      // follows on.
      bool bad = false;
      if (highest != 0) {
        const std::uint64_t window = StreamTracker::kWindow;
        for (std::uint64_t s = highest > window ? highest - window + 1 : 1; s <= highest; ++s) {
          bad = bad || (s % 3 != 0 &&
                        receiver.tracker.Peek(7, 1, "a.high", s) != StreamVerdict::kDuplicate);
        }
        const StreamVerdict next = receiver.tracker.Peek(7, 1, "a.high", NextTaken(highest));
        bad = bad || (next != StreamVerdict::kInOrder && next != StreamVerdict::kAfterGap);
      }
      shared->read_back.store(highest);
      shared->replay_taken.store(bad ? 1 : 0);
      shared->started.store(1);
      for (std::uint64_t s = NextTaken(highest);; s = NextTaken(s)) {
        shared->noting.store(s, std::memory_order_relaxed);
        const StreamVerdict verdict = receiver.tracker.Note(7, 1, "a.high", s);
        if (verdict != StreamVerdict::kInOrder && verdict != StreamVerdict::kAfterGap &&
            verdict != StreamVerdict::kFirst) {
          ::_exit(5);
        }
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (shared->started.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped on its own: " << status;
    ASSERT_EQ(shared->started.load(), 1u) << "the writer did not start";
    EXPECT_EQ(shared->replay_taken.load(), 0u) << "kill " << kill << ": a number taken was new";
    // The state read back: the frame the last writer was noting, or the
    // one before it.
    const std::uint64_t read_back = shared->read_back.load();
    if (kill > 0) {
      EXPECT_TRUE(read_back == last_noting || read_back == PreviousTaken(last_noting))
          << "kill " << kill << ": read back " << read_back << ", was noting " << last_noting;
      if (read_back != last_noting) ++landed_inside;
    }
    last_noting = shared->noting.load();
    if ((kill + 1) % 50 == 0) {
      std::printf("%d of %d kills, noting %llu, %d inside a frame's write\n", kill + 1, kKills,
                  static_cast<unsigned long long>(last_noting), landed_inside);
    }
  }
  ::munmap(page, sizeof(Shared));
}

// The writer killed at each of its stores in turn (the test seam), for a
// frame that follows on and for one that skips 500 numbers (clearing
// arrival bits): the file then reads as the state before the frame or
// after it, every number taken in the window is refused as a replay, and
// the state goes on from there. Steps are tried until the writer gets
// through a frame without reaching the kill.
int g_stores_left = 0;
void KillAtThisStore() {
  if (--g_stores_left == 0) ::raise(SIGKILL);
}

TEST(StreamStateFileTest, AWriterKilledAtEachStoreLeavesTheStateBeforeOrAfterItsFrame) {
  for (const std::uint64_t skip : {std::uint64_t{0}, std::uint64_t{500}}) {
    int steps = 0;
    for (int step = 1;; ++step) {
      Scratch scratch;
      const std::string path = scratch.File("streams");
      std::uint64_t before = 0;
      {
        Receiver writer(path);
        ASSERT_TRUE(writer.file) << writer.error;
        for (std::uint64_t s = 1; s < 5000; s = NextTaken(s)) {
          (void)writer.tracker.Note(7, 1, "a.high", s);
          before = s;
        }
      }
      const std::uint64_t frame = NextTaken(before) + skip;
      const pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        Receiver writer(path);
        if (!writer.file) ::_exit(3);
        g_stores_left = step;
        sluice::nats::detail::state_file_store_seam = &KillAtThisStore;
        (void)writer.tracker.Note(7, 1, "a.high", frame);
        ::_exit(0);
      }
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      Receiver after(path);
      ASSERT_TRUE(after.file) << after.error;
      ASSERT_EQ(after.tracker.Counts().streams_restored, 1u);
      const std::uint64_t read_back = after.highest_read_back;
      EXPECT_TRUE(read_back == before || read_back == frame)
          << "skip " << skip << ", killed at store " << step << ": read back " << read_back;
      for (std::uint64_t s = read_back - StreamTracker::kWindow + 1; s <= read_back; ++s) {
        const bool taken = (s % 3 != 0 && s <= before) || s == frame;
        if (taken) {
          EXPECT_EQ(after.tracker.Peek(7, 1, "a.high", s), StreamVerdict::kDuplicate)
              << "skip " << skip << ", killed at store " << step << ": " << s << " taken as new";
        }
      }
      EXPECT_NE(after.tracker.Note(7, 1, "a.high", NextTaken(read_back)),
                StreamVerdict::kDuplicate);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        steps = step - 1;
        break;
      }
      ASSERT_TRUE(WIFSIGNALED(status)) << status;
      ASSERT_LT(step, 1000) << "the writer never got through";
    }
    std::printf("skip %llu: killed at each of %d stores\n", static_cast<unsigned long long>(skip),
                steps);
    EXPECT_GT(steps, 1);
  }
  // A new stream's first frame: read back, the stream is there whole (its
  // key as noted), or not at all.
  int steps = 0;
  for (int step = 1;; ++step) {
    Scratch scratch;
    const std::string path = scratch.File("streams");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Receiver writer(path);
      if (!writer.file) ::_exit(3);
      g_stores_left = step;
      sluice::nats::detail::state_file_store_seam = &KillAtThisStore;
      (void)writer.tracker.Note(7, 1, "a.high", 40);
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    Receiver after(path);
    ASSERT_TRUE(after.file) << after.error;
    const std::uint64_t restored = after.tracker.Counts().streams_restored;
    EXPECT_EQ(restored + after.file->RecordsDropped(), restored) << "step " << step;
    if (restored == 1) {
      EXPECT_EQ(after.tracker.Peek(7, 1, "a.high", 40), StreamVerdict::kDuplicate)
          << "killed at store " << step << ": the stream read back is not the one noted";
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      steps = step - 1;
      EXPECT_EQ(restored, 1u);
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    ASSERT_LT(step, 1000) << "the writer never got through";
  }
  std::printf("a new stream: killed at each of %d stores\n", steps);
  EXPECT_GE(steps, 1);
}

// A JetStream durable's place: kept by name, read back by the next
// receiver of the file; none for a name never kept, or one too long.
TEST(StreamStateFileTest, ADurablesPlaceIsReadBackByName) {
  using Place = StreamStateFile::DurablePlace;
  Scratch scratch;
  const std::string path = scratch.File("streams");
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    Place saved;
    bool found = true;
    const std::uint32_t a = before.file->FindDurable("S/a_medium", &saved, &found);
    ASSERT_NE(a, StreamJournal::kNoEntry);
    EXPECT_FALSE(found);
    const std::uint32_t b = before.file->FindDurable("S/b_medium", &saved, &found);
    ASSERT_NE(b, a);
    before.file->MarkDurable(a, Place{1000, 7});
    before.file->MarkDurable(a, Place{1000, 8});
    before.file->MarkDurable(b, Place{2000, 3});
    EXPECT_EQ(before.file->FindDurable(std::string(StreamStateFile::kMaxDurableName + 1, 'x'),
                                       &saved, &found),
              StreamJournal::kNoEntry);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  Place saved;
  bool found = false;
  (void)after.file->FindDurable("S/a_medium", &saved, &found);
  EXPECT_TRUE(found);
  EXPECT_TRUE(saved == (Place{1000, 8}));
  (void)after.file->FindDurable("S/b_medium", &saved, &found);
  EXPECT_TRUE(found);
  EXPECT_TRUE(saved == (Place{2000, 3}));
  (void)after.file->FindDurable("S/c_medium", &saved, &found);
  EXPECT_FALSE(found);
}

// Every place taken by durables this receiver reads: a further durable is
// not kept (its restored streams are judged as taken over). A later
// receiver of the file that reads another durable takes the place of one
// it does not read (nor claimed, as it does every durable it is about to
// read, before it subscribes any).
TEST(StreamStateFileTest, ADurableBeyondThePlacesTakesOneThisReceiverDoesNotRead) {
  Scratch scratch;
  const std::string path = scratch.File("streams");
  StreamStateFile::DurablePlace saved;
  bool found = false;
  {
    Receiver receiver(path);
    ASSERT_TRUE(receiver.file) << receiver.error;
    for (std::size_t i = 0; i < StreamStateFile::kMaxDurables; ++i) {
      const std::uint32_t entry =
          receiver.file->FindDurable("S/d" + std::to_string(i), &saved, &found);
      ASSERT_NE(entry, StreamJournal::kNoEntry);
      receiver.file->MarkDurable(entry, StreamStateFile::DurablePlace{1000, i + 1});
    }
    EXPECT_EQ(receiver.file->FindDurable("S/one_more", &saved, &found), StreamJournal::kNoEntry);
    EXPECT_NE(receiver.file->FindDurable("S/d0", &saved, &found), StreamJournal::kNoEntry);
  }
  Receiver later(path);
  ASSERT_TRUE(later.file) << later.error;
  // It reads d0 and d5, d0 subscribed after the new one: claimed first.
  later.file->ClaimDurable("S/d0");
  EXPECT_NE(later.file->FindDurable("S/d5", &saved, &found), StreamJournal::kNoEntry);
  EXPECT_TRUE(found);
  EXPECT_NE(later.file->FindDurable("S/new", &saved, &found), StreamJournal::kNoEntry);
  EXPECT_FALSE(found);
  // Its place was another durable's, not d0's or d5's.
  (void)later.file->FindDurable("S/d0", &saved, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(saved.delivered, 1u);
  (void)later.file->FindDurable("S/d5", &saved, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(saved.delivered, 6u);
}

// The stream sequences of a durable's messages dispatched: the last
// kDispatchedKept are read back by the next receiver of the file, and a
// durable made again forgets them.
TEST(StreamStateFileTest, ADurablesLastDispatchedSequencesAreReadBack) {
  constexpr std::uint64_t kNoted = StreamStateFile::kDispatchedKept + 476;
  Scratch scratch;
  const std::string path = scratch.File("streams");
  StreamStateFile::DurablePlace saved;
  bool found = false;
  {
    Receiver before(path);
    ASSERT_TRUE(before.file) << before.error;
    const std::uint32_t entry = before.file->FindDurable("S/a", &saved, &found);
    for (std::uint64_t s = 1; s <= kNoted; ++s) before.file->NoteDispatched(entry, s);
  }
  Receiver after(path);
  ASSERT_TRUE(after.file) << after.error;
  const std::uint32_t entry = after.file->FindDurable("S/a", &saved, &found);
  std::set<std::uint64_t> kept;
  after.file->ForEachDispatched(entry, [&kept](std::uint64_t s) { kept.insert(s); });
  ASSERT_EQ(kept.size(), StreamStateFile::kDispatchedKept);
  EXPECT_EQ(*kept.begin(), kNoted - StreamStateFile::kDispatchedKept + 1);
  EXPECT_EQ(*kept.rbegin(), kNoted);
  after.file->ForgetDispatched(entry);
  kept.clear();
  after.file->ForEachDispatched(entry, [&kept](std::uint64_t s) { kept.insert(s); });
  EXPECT_TRUE(kept.empty());
}

// A writer killed at each store of a durable's place: read back, the place
// is the one before or the one after, never a mix of the two.
TEST(StreamStateFileTest, ADurablesPlaceKilledAtEachStoreIsBeforeOrAfter) {
  using Place = StreamStateFile::DurablePlace;
  int steps = 0;
  for (int step = 1;; ++step) {
    Scratch scratch;
    const std::string path = scratch.File("streams");
    {
      Receiver writer(path);
      ASSERT_TRUE(writer.file) << writer.error;
      Place saved;
      bool found = false;
      writer.file->MarkDurable(writer.file->FindDurable("S/a", &saved, &found), Place{1000, 7});
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Receiver writer(path);
      if (!writer.file) ::_exit(3);
      Place saved;
      bool found = false;
      const std::uint32_t entry = writer.file->FindDurable("S/a", &saved, &found);
      g_stores_left = step;
      sluice::nats::detail::state_file_store_seam = &KillAtThisStore;
      writer.file->MarkDurable(entry, Place{2000, 9});
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    Receiver after(path);
    ASSERT_TRUE(after.file) << after.error;
    Place saved;
    bool found = false;
    (void)after.file->FindDurable("S/a", &saved, &found);
    EXPECT_TRUE(found);
    EXPECT_TRUE(saved == (Place{1000, 7}) || saved == (Place{2000, 9}))
        << "killed at store " << step << ": " << saved.created << " " << saved.delivered;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      steps = step - 1;
      EXPECT_TRUE(saved == (Place{2000, 9}));
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    ASSERT_LT(step, 100) << "the writer never got through";
  }
  std::printf("a durable's place: killed at each of %d stores\n", steps);
  EXPECT_GT(steps, 1);
}

}  // namespace
