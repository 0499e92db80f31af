// Heartbeats without a server: what a stream's heartbeat tells the
// receiver's stream table (a lost tail counted, nothing for an idle stream,
// nothing taken from one far ahead or of an unknown stream), when a stream
// reads as silent, and the heartbeat frame's bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <sluice/nats/frame.hpp>
#include <sluice/nats/frame_signature.hpp>
#include <sluice/nats/heartbeat.hpp>
#include <sluice/nats/stream_tracker.hpp>
#include <string>

namespace {

using sluice::nats::HeartbeatVerdict;
using sluice::nats::StreamTracker;
using sluice::nats::StreamVerdict;

constexpr std::uint64_t kMs = 1'000'000;

TEST(NatsHeartbeats, AHeartbeatCountsTheTailThatNeverCame) {
  StreamTracker tracker;
  for (std::uint64_t s = 1; s <= 3; ++s) (void)tracker.Note(7, 1, "a.high", s);
  // The sender had handed 1 to 5 over: 4 and 5 were lost on the way.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 5, 50 * kMs, 1000), HeartbeatVerdict::kMissing);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  EXPECT_EQ(tracker.Counts().heartbeats_with_gaps, 1u);
  // The sender's next frame follows on, neither a gap nor stale.
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 6), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  // Another stream of the same origin is not touched.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.low", 5, 50 * kMs, 2000), HeartbeatVerdict::kNoStream);
}

TEST(NatsHeartbeats, AnIdleStreamsHeartbeatsAddNothing) {
  StreamTracker tracker;
  for (std::uint64_t s = 1; s <= 3; ++s) (void)tracker.Note(7, 1, "a.high", s);
  for (int beat = 0; beat < 10; ++beat) {
    EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 3, 50 * kMs, 3000 + beat),
              HeartbeatVerdict::kNothingMissing);
  }
  // One behind what arrived (a heartbeat overtaken by a frame) neither.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 2, 50 * kMs, 4000),
            HeartbeatVerdict::kNothingMissing);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Counts().heartbeats_with_gaps, 0u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 4), StreamVerdict::kInOrder);
}

// Without a frame there is no baseline: a heartbeat of a stream never heard
// (a receiver started after its frames) counts nothing and takes no room.
TEST(NatsHeartbeats, AHeartbeatOpensNoStream) {
  StreamTracker tracker;
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 1000, 50 * kMs, 5000),
            HeartbeatVerdict::kNoStream);
  EXPECT_EQ(tracker.Counts().streams_tracked, 0u);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 1001), StreamVerdict::kFirst);
}

// Forged, a heartbeat far ahead would make the sender's next frames stale
// and add 2^32 gaps: one more than a window ahead is not taken.
TEST(NatsHeartbeats, AHeartbeatFarAheadIsNotTaken) {
  StreamTracker tracker;
  for (std::uint64_t s = 1; s <= 3; ++s) (void)tracker.Note(7, 1, "a.high", s);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 3 + StreamTracker::kWindow + 1, 50 * kMs, 6000),
            HeartbeatVerdict::kFarAhead);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", ~std::uint64_t{0}, 50 * kMs, 7000),
            HeartbeatVerdict::kFarAhead);
  EXPECT_EQ(tracker.Counts().heartbeats_far_ahead, 2u);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 4), StreamVerdict::kInOrder);
  // A window ahead exactly is taken.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 4 + StreamTracker::kWindow, 50 * kMs, 8000),
            HeartbeatVerdict::kMissing);
  EXPECT_EQ(tracker.Counts().gaps, StreamTracker::kWindow);
}

// A frame a heartbeat counted missing that still comes is late (its gap
// taken back) and then a duplicate; the heartbeat's own number too.
TEST(NatsHeartbeats, AFrameThatStillComesIsLateAndThenADuplicate) {
  StreamTracker tracker;
  (void)tracker.Note(7, 1, "a.high", 1);
  (void)tracker.Note(7, 1, "a.high", 2);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 4, 50 * kMs, 9000), HeartbeatVerdict::kMissing);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 4), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 3), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 3), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 5), StreamVerdict::kInOrder);
}

// A receiver that sees part of each stream (a queue group member) sees part
// of its heartbeats too: it judges nothing from them, neither gaps nor
// silence (each member would read a live sender as silent in turn).
TEST(NatsHeartbeats, AQueueGroupMemberJudgesNothingFromThem) {
  StreamTracker tracker;
  (void)tracker.Note(7, 1, "a.high", 1, /*count_gaps=*/false, sluice::nats::OriginTrust::kKnown, 0);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 9, 50 * kMs, 10000, /*count_gaps=*/false),
            HeartbeatVerdict::kPartial);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Counts().heartbeats_with_gaps, 0u);
  EXPECT_EQ(tracker.Silent(1000 * kMs), 0u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 10, /*count_gaps=*/false), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
}

// A heartbeat is fresh only when stamped after the stream's last one: a
// captured heartbeat replayed (signed or not) is refused and keeps no dead
// stream alive; nor does a replayed frame, refused as a duplicate.
TEST(NatsHeartbeats, ReplaysOfHeartbeatsOrFramesKeepNoDeadStreamAlive) {
  StreamTracker tracker;
  const auto trust = sluice::nats::OriginTrust::kKnown;
  (void)tracker.Note(7, 1, "a.high", 1, true, trust, 0);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 500, true, 10 * kMs),
            HeartbeatVerdict::kNothingMissing);
  // Silent from 40 ms on; the same heartbeat again at 60 ms, and frame 1.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 500, true, 60 * kMs),
            HeartbeatVerdict::kReplay);
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 499, true, 60 * kMs),
            HeartbeatVerdict::kReplay);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 1, true, trust, 60 * kMs), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Silent(61 * kMs), 1u);
  // A fresh one (a later stamp) is the sender alive again.
  EXPECT_EQ(tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 501, true, 62 * kMs),
            HeartbeatVerdict::kNothingMissing);
  EXPECT_EQ(tracker.Silent(63 * kMs), 0u);
}

// A sender started again is a new instance on the subject: its old stream
// has ended, and does not count as silent.
TEST(NatsHeartbeats, AStreamASendersRestartReplacedIsNotSilent) {
  StreamTracker tracker;
  const auto trust = sluice::nats::OriginTrust::kKnown;
  (void)tracker.Note(7, 1, "a.high", 1, true, trust, 0);
  (void)tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 1, true, 10 * kMs);
  EXPECT_EQ(tracker.Silent(100 * kMs), 1u);
  (void)tracker.Note(7, 2, "a.high", 1, true, trust, 100 * kMs);  // the new instance
  EXPECT_EQ(tracker.Silent(101 * kMs), 0u);
  // Another subject's, or another origin's, is not ended by it.
  (void)tracker.Note(7, 1, "a.low", 1, true, trust, 0);
  (void)tracker.NoteHeartbeat(7, 1, "a.low", 1, 10 * kMs, 2, true, 0);
  (void)tracker.Note(8, 3, "a.low", 1, true, trust, 100 * kMs);
  EXPECT_EQ(tracker.Silent(101 * kMs), 1u);
}

// Silent: a stream that sent heartbeats, heard of by nothing for more than
// three of its intervals. A stream that never sent one is never silent.
TEST(NatsHeartbeats, AStreamIsSilentAfterThreeIntervalsWithoutAWord) {
  StreamTracker tracker;
  (void)tracker.Note(7, 1, "a.high", 1, true, sluice::nats::OriginTrust::kKnown, 0);
  (void)tracker.Note(8, 1, "b.high", 1, true, sluice::nats::OriginTrust::kKnown, 0);
  (void)tracker.NoteHeartbeat(7, 1, "a.high", 1, 10 * kMs, 11000, true, 5 * kMs);
  EXPECT_EQ(tracker.Silent(5 * kMs + 30 * kMs), 0u);
  EXPECT_EQ(tracker.Silent(5 * kMs + 30 * kMs + 1), 1u);
  EXPECT_EQ(tracker.Silent(1000 * kMs), 1u);  // b.high never sent a heartbeat
  // Heard again, by a frame: no longer silent.
  (void)tracker.Note(7, 1, "a.high", 2, true, sluice::nats::OriginTrust::kKnown, 1000 * kMs);
  EXPECT_EQ(tracker.Silent(1001 * kMs), 0u);
}

TEST(NatsHeartbeats, AHeartbeatIsAFrameOfTypeZeroCarryingItsInterval) {
  std::string frame;
  ASSERT_TRUE(sluice::nats::detail::EncodeHeartbeat(0xA, 0xB, sluice::MessagePriority::MEDIUM, 42,
                                                    250, sluice::nats::FrameKey{}, "a.medium",
                                                    frame));
  sluice::nats::FrameView view;
  ASSERT_EQ(sluice::nats::DecodeFrame(reinterpret_cast<const std::uint8_t*>(frame.data()),
                                      frame.size(), &view),
            sluice::nats::FrameError::kNone);
  EXPECT_EQ(view.header.type_id, 0u);
  EXPECT_EQ(view.header.priority, sluice::MessagePriority::MEDIUM);
  EXPECT_EQ(view.header.origin_id, 0xAu);
  EXPECT_EQ(view.header.instance_id, 0xBu);
  EXPECT_EQ(view.header.sequence, 42u);
  ASSERT_EQ(view.payload_size, 4u);
  EXPECT_EQ(view.payload[0], 250);  // the interval in milliseconds, little-endian
  EXPECT_EQ(view.payload[1], 0);
  EXPECT_FALSE(view.signature.present);
  if (sluice::nats::kHasFrameSigning) {
    const sluice::nats::FrameKey key{0xA, 3, std::string(32, 'k')};
    ASSERT_TRUE(sluice::nats::detail::EncodeHeartbeat(0xA, 0xB, sluice::MessagePriority::MEDIUM, 42,
                                                      250, key, "a.medium", frame));
    ASSERT_EQ(sluice::nats::DecodeFrame(reinterpret_cast<const std::uint8_t*>(frame.data()),
                                        frame.size(), &view),
              sluice::nats::FrameError::kNone);
    ASSERT_TRUE(view.signature.present);
    const sluice::nats::detail::FrameVerifier verifier({key});
    EXPECT_EQ(verifier.Check(view, "a.medium"),
              sluice::nats::detail::FrameVerifier::Verdict::kVerified);
  }
}

}  // namespace
