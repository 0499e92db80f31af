// What a receiver's stream table (StreamTracker) says of each frame and
// heartbeat it judges, what it counts, and its bounds. Standard library
// only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

enum class StreamVerdict : std::uint8_t {
  // The first frame heard of the stream: its baseline, delivered. Also a
  // stream whose only frame so far is followed by one more than a window
  // behind it: that first frame is then taken as the held one (below) and
  // the stream starts again here (one forged first frame numbered far ahead
  // cannot make the sender's frames stale).
  kFirst,
  kInOrder,      // the next number, delivered
  kAfterGap,     // ahead of the next number; the numbers skipped are counted as gaps
  kLate,         // a number skipped earlier, now here: delivered, one gap fewer
  kDuplicate,    // seen already (or held): refused
  kStale,        // behind the window, so it cannot be told from a duplicate: refused
  kUnsequenced,  // sequence 0 (a version 1 frame): not tracked
  // A new stream while its part of the table is full of streams heard
  // within the idle time: refused, not noted.
  kTableFull,
  // More than a window ahead of the highest: delivered and remembered,
  // but not taken as the stream's highest until a later frame above it
  // confirms it (that frame is then kAfterGap): one forged frame numbered
  // far ahead cannot make the sender's next frames stale, nor add to gaps.
  kHeld,
  // As kHeld, while the stream already holds kMaxHeld such frames, none
  // below this one: refused, not delivered (a flood of forged far numbers
  // cannot grow the table).
  kHeldFull,
};

struct StreamCounts {
  // Numbers skipped and not (yet) arrived, over every stream: frames lost
  // between the senders' bridges and this one. One jump adds at most
  // StreamTracker::kMaxJumpGaps, and one stream at most kMaxStreamGaps.
  std::uint64_t gaps = 0;
  std::uint64_t reordered = 0;   // arrived after a later number
  std::uint64_t duplicates = 0;  // refused: seen already
  std::uint64_t stale = 0;       // refused: behind the window
  std::uint64_t streams_opened = 0;
  // Forgotten to make room for a new stream of their part (the least
  // recently heard, once silent for the idle time); a duplicate of an
  // evicted stream's frame is no longer recognised.
  std::uint64_t streams_evicted = 0;
  std::uint64_t streams_tracked = 0;  // now, both parts
  // New streams refused: their part of the table was full of streams
  // heard within the idle time.
  std::uint64_t refused_table_full = 0;
  // Frames numbered more than a window ahead of their stream and held
  // (kHeld); those a later frame confirmed (the jump then taken); those
  // refused while the stream held kMaxHeld (kHeldFull).
  std::uint64_t jumps_held = 0;
  std::uint64_t jumps_confirmed = 0;
  std::uint64_t jumps_refused = 0;
  // Heartbeats (sluice/nats/heartbeat.hpp) that named numbers no frame
  // brought: the stream's tail lost; their numbers are in `gaps`.
  std::uint64_t heartbeats_with_gaps = 0;
  // Heartbeats more than a window ahead of their stream: not taken.
  std::uint64_t heartbeats_far_ahead = 0;
  // Now: streams that sent heartbeats and have been heard of by nothing
  // for kSilentBeats of their intervals (StreamTracker::Silent).
  std::uint64_t streams_silent = 0;
  // With a journal (a state file): streams read back from it when the
  // receiver started; streams it could not keep (full, or a subject longer
  // than it holds), each counted the first time (a later frame tries
  // again: kept once a record is freed; until then a restart forgets it).
  std::uint64_t streams_restored = 0;
  std::uint64_t streams_not_saved = 0;
  // Records the state file held that were dropped when it was read back:
  // not a state a receiver writes (a damaged file), a stream twice, or no
  // room for them in the table now.
  std::uint64_t state_records_dropped = 0;
};

// What a heartbeat told of its stream.
enum class HeartbeatVerdict : std::uint8_t {
  kNoStream,        // no frame of the stream heard: nothing to compare with
  kPartial,         // a receiver that sees part of each stream: nothing judged
  kReplay,          // stamped no later than the stream's last heartbeat: refused
  kNothingMissing,  // every number it names had arrived (or was counted)
  kMissing,         // numbers it names had not arrived: counted as gaps
  kFarAhead,        // more than a window ahead: not taken
};

// The table's bounds: streams of known origins, streams of unknown origins,
// and how long a stream must go unheard before a new stream of its part may
// take its place (nanoseconds of the caller's clock, the `now` given to
// Note). 0: any stream may be replaced, the least recently heard first.
struct StreamTableLimits {
  std::size_t known = 1024;
  std::size_t unknown = 1024;
  std::uint64_t idle_ns = 60'000'000'000;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
