// One stream's numbers as a receiver knows them (the per-stream part of
// StreamTracker, sluice/nats/stream_tracker.hpp): its baseline and highest,
// which numbers in the window behind the highest arrived, the frames held
// far ahead of it and the gaps it counts; and where a frame's number falls
// among them (JudgeNumber, and PeekNumber, which notes nothing). The
// tracker finds, opens, forgets and journals the streams; this is what it
// does with a number once it has the stream.
// Standard library only; not thread-safe (the tracker's caller locks).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_verdicts.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// The most gaps one confirmed jump adds (2^32: over an hour of a million
// frames a second), and one stream in all, so that frames numbered near
// 2^64 cannot make the gaps read 1.8e19.
inline constexpr std::uint64_t kMaxJumpGaps = std::uint64_t{1} << 32;
inline constexpr std::uint64_t kMaxStreamGaps = std::uint64_t{1} << 32;

// What a stream keeps of its numbers; the tracker's Stream derives from it.
struct StreamSequence {
  std::uint64_t baseline = 0;  // the first number heard
  std::uint64_t highest = 0;
  std::uint64_t missing = 0;  // this stream's part of StreamCounts::gaps
  // Whether a frame other than the first was taken in the window: until
  // then a frame more than a window behind starts the stream again.
  bool confirmed = false;
  // Frames more than a window ahead, delivered and not yet confirmed.
  std::array<std::uint64_t, kMaxHeldFrames> held{};
  std::size_t held_count = 0;
  // Bit s % kStreamWindow: whether s arrived, for s in
  // (highest - kStreamWindow, highest].
  std::array<std::uint64_t, kStreamWindow / 64> seen{};

  bool Marked(std::uint64_t s) const noexcept {
    return (seen[(s % kStreamWindow) / 64] >> (s % 64)) & 1u;
  }
  void Mark(std::uint64_t s) noexcept {
    seen[(s % kStreamWindow) / 64] |= std::uint64_t{1} << (s % 64);
  }
  void Unmark(std::uint64_t s) noexcept {
    seen[(s % kStreamWindow) / 64] &= ~(std::uint64_t{1} << (s % 64));
  }
  bool IsHeld(std::uint64_t s) const noexcept {
    return std::find(held.begin(), held.begin() + held_count, s) != held.begin() + held_count;
  }
  // Held numbers in (low, high).
  std::uint64_t HeldIn(std::uint64_t low, std::uint64_t high) const noexcept {
    return static_cast<std::uint64_t>(
        std::count_if(held.begin(), held.begin() + held_count,
                      [low, high](std::uint64_t h) { return h > low && h < high; }));
  }
  bool HasHeldBelow(std::uint64_t s) const noexcept {
    return std::any_of(held.begin(), held.begin() + held_count,
                       [s](std::uint64_t h) { return h < s; });
  }
};

inline void Begin(StreamSequence& stream, std::uint64_t sequence) noexcept {
  stream.baseline = sequence;
  stream.highest = sequence;
  stream.seen.fill(0);
  stream.Mark(sequence);
  stream.confirmed = false;
}

inline StreamVerdict CountDuplicate(StreamCounts& counts) noexcept {
  ++counts.duplicates;
  return StreamVerdict::kDuplicate;
}

// Held frames the highest has reached are no longer ahead: those in the
// window are marked (a replay stays a duplicate), the rest dropped.
inline void AbsorbHeld(StreamSequence& stream) noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < stream.held_count; ++i) {
    const std::uint64_t h = stream.held[i];
    if (h > stream.highest) {
      stream.held[kept++] = h;
    } else if (stream.highest - h < kStreamWindow) {
      stream.Mark(h);
    }
  }
  stream.held_count = kept;
}

// Saturating at the stream's bound: a hostile number must not wrap a
// count, nor make it meaningless.
inline void AddGaps(StreamSequence& stream, std::uint64_t skipped, StreamCounts& counts) noexcept {
  const std::uint64_t room = kMaxStreamGaps - std::min(stream.missing, kMaxStreamGaps);
  const std::uint64_t added = skipped < room ? skipped : room;
  stream.missing += added;
  counts.gaps += added;
}

// An unconfirmed stream's first frame was far ahead of this one: that
// frame becomes a held one (so its replay is a duplicate, and a frame
// after it confirms it as a jump), and the stream starts again here.
// With kMaxHeldFrames held already, the first frame could not be kept:
// this one is refused instead (else a replay of the first would pass).
inline StreamVerdict Rebegin(StreamSequence& stream, std::uint64_t sequence,
                             StreamCounts& counts) noexcept {
  if (stream.held_count == kMaxHeldFrames) {
    ++counts.jumps_refused;
    return StreamVerdict::kHeldFull;
  }
  const std::uint64_t first = stream.highest;
  Begin(stream, sequence);
  stream.held[stream.held_count++] = first;
  ++counts.jumps_held;
  return StreamVerdict::kFirst;
}

// A frame more than a window ahead of `stream`'s highest (JudgeNumber).
inline StreamVerdict FarAhead(StreamSequence& stream, std::uint64_t sequence, bool count_gaps,
                              StreamCounts& counts) {
  if (!stream.HasHeldBelow(sequence)) {
    if (stream.held_count == kMaxHeldFrames) {
      ++counts.jumps_refused;
      return StreamVerdict::kHeldFull;
    }
    stream.held[stream.held_count++] = sequence;
    ++counts.jumps_held;
    return StreamVerdict::kHeld;
  }
  // Above a held frame: the jump is taken (real, or forged by two
  // frames). The held frames below this one were delivered: not gaps,
  // and marked if they are in the new window. A stream not yet confirmed
  // (one frame taken, perhaps a forged one) starts again at its lowest
  // such held frame instead: nothing before it is a gap.
  std::uint64_t delivered = 0;
  std::uint64_t lowest = sequence;
  std::size_t kept = 0;
  stream.seen.fill(0);
  for (std::size_t i = 0; i < stream.held_count; ++i) {
    const std::uint64_t h = stream.held[i];
    if (h < sequence) {
      ++delivered;
      lowest = std::min(lowest, h);
      if (sequence - h < kStreamWindow) stream.Mark(h);
    } else {
      stream.held[kept++] = h;
    }
  }
  stream.held_count = kept;
  std::uint64_t skipped;
  if (stream.confirmed) {
    skipped = sequence - stream.highest - 1 - delivered;
  } else {
    stream.baseline = lowest;
    skipped = sequence - lowest - 1 - (delivered - 1);
  }
  stream.Mark(sequence);
  stream.highest = sequence;
  stream.confirmed = true;
  AbsorbHeld(stream);
  ++counts.jumps_confirmed;
  if (count_gaps) AddGaps(stream, skipped < kMaxJumpGaps ? skipped : kMaxJumpGaps, counts);
  return StreamVerdict::kAfterGap;
}

// Frame `sequence` of `stream`, a stream already heard (StreamTracker::Note
// once it has found it): taken, or refused as a duplicate or stale, and
// counted in `counts`. `count_gaps` false: no gaps and no late frames
// counted (StreamTracker::Note).
inline StreamVerdict JudgeNumber(StreamSequence& stream, std::uint64_t sequence, bool count_gaps,
                                 StreamCounts& counts) {
  if (sequence > stream.highest) {
    if (stream.IsHeld(sequence)) return CountDuplicate(counts);
    if (sequence - stream.highest > kStreamWindow) {
      return FarAhead(stream, sequence, count_gaps, counts);
    }
    // Held frames passed here were delivered: not gaps.
    const std::uint64_t skipped =
        sequence - stream.highest - 1 - stream.HeldIn(stream.highest, sequence);
    // The skipped numbers still inside the window are marked as not
    // arrived; a jump of a whole window leaves nothing of it.
    if (skipped >= kStreamWindow - 1) {
      stream.seen.fill(0);
    } else {
      for (std::uint64_t s = stream.highest + 1; s < sequence; ++s) stream.Unmark(s);
    }
    stream.Mark(sequence);
    stream.highest = sequence;
    stream.confirmed = true;
    AbsorbHeld(stream);
    if (count_gaps) AddGaps(stream, skipped, counts);
    return skipped == 0 ? StreamVerdict::kInOrder : StreamVerdict::kAfterGap;
  }
  if (stream.highest - sequence >= kStreamWindow) {
    // A first frame far ahead of the sender's: held, and the stream
    // starts again here (the sender's frames go on).
    if (!stream.confirmed) return Rebegin(stream, sequence, counts);
    ++counts.stale;
    return StreamVerdict::kStale;
  }
  if (stream.Marked(sequence)) return CountDuplicate(counts);
  stream.Mark(sequence);
  stream.confirmed = true;
  if (count_gaps) {
    ++counts.reordered;
    // Only a number this stream skipped (after its baseline) was a gap; one
    // from before the baseline was sent before this receiver listened.
    if (sequence > stream.baseline && stream.missing > 0) {
      --stream.missing;
      --counts.gaps;
    }
  }
  return StreamVerdict::kLate;
}

// The verdict JudgeNumber would give, without noting the frame or counting
// it.
inline StreamVerdict PeekNumber(const StreamSequence& stream, std::uint64_t sequence) noexcept {
  if (sequence > stream.highest) {
    if (stream.IsHeld(sequence)) return StreamVerdict::kDuplicate;
    if (sequence - stream.highest > kStreamWindow) {
      if (stream.HasHeldBelow(sequence)) return StreamVerdict::kAfterGap;
      return stream.held_count < kMaxHeldFrames ? StreamVerdict::kHeld : StreamVerdict::kHeldFull;
    }
    return sequence == stream.highest + 1 ? StreamVerdict::kInOrder : StreamVerdict::kAfterGap;
  }
  if (stream.highest - sequence >= kStreamWindow) {
    return stream.confirmed ? StreamVerdict::kStale : StreamVerdict::kFirst;
  }
  return stream.Marked(sequence) ? StreamVerdict::kDuplicate : StreamVerdict::kLate;
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
