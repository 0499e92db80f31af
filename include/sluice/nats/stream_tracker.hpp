// What a receiving bridge knows about each stream of frames it hears: a
// stream is one sending bridge's frames on one subject since one Start
// (origin id, instance id, subject), numbered from 1. From the numbers it
// counts the frames that never came (gaps), the ones that came late
// (reordered) and refuses the ones it has seen (duplicates: a redelivery
// or a replay) or can no longer tell (stale: behind the window).
// Standard library only; not thread-safe (the bridge holds a mutex).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

enum class StreamVerdict : std::uint8_t {
  kFirst,        // the first frame heard of the stream: its baseline, delivered
  kInOrder,      // the next number, delivered
  kAfterGap,     // ahead of the next number; the numbers skipped are counted as gaps
  kLate,         // a number skipped earlier, now here: delivered, one gap fewer
  kDuplicate,    // seen already: refused
  kStale,        // behind the window, so it cannot be told from a duplicate: refused
  kUnsequenced,  // sequence 0 (a version 1 frame): not tracked
  // A new stream of an unknown origin while the unknown origins' streams
  // fill their part of the table and each was heard within the idle time:
  // refused, not noted (known streams are never evicted for it).
  kTableFull,
  // More than a window ahead of the highest: delivered, but not taken as
  // the stream's highest until a later frame less than a window past it
  // confirms it (then kAfterGap), so one forged frame numbered far ahead
  // cannot make the sender's next frames stale, nor add its jump to gaps.
  kHeld
};

struct StreamCounts {
  // Numbers skipped and not (yet) arrived, over every stream: frames lost
  // between the senders' bridges and this one.
  std::uint64_t gaps = 0;
  std::uint64_t reordered = 0;   // arrived after a later number
  std::uint64_t duplicates = 0;  // refused: seen already
  std::uint64_t stale = 0;       // refused: behind the window
  std::uint64_t streams_opened = 0;
  // Forgotten to make room for a new stream of their class (the least
  // recently heard); a duplicate of an evicted stream's frame is no longer
  // recognised.
  std::uint64_t streams_evicted = 0;
  std::uint64_t streams_tracked = 0;  // now, both classes
  // New streams of unknown origins refused: their part of the table was
  // full of streams heard within the idle time.
  std::uint64_t refused_table_full = 0;
  // Frames numbered more than a window ahead of their stream (kHeld), and
  // those of them a later frame confirmed (the jump then taken, its skipped
  // numbers counted as gaps: at most kMaxJumpGaps for one jump).
  std::uint64_t jumps_held = 0;
  std::uint64_t jumps_confirmed = 0;
};

// Which part of the table a stream belongs to. A known origin is one the
// receiver's allow-lists name; its streams are evicted only for another
// known stream. Any other origin is unknown: its streams are evicted only
// when idle, so unknown origins cannot push known streams (or busy unknown
// ones) out of the table.
enum class OriginTrust : std::uint8_t { kKnown, kUnknown };

// The table's bounds: streams of known origins (the least recently heard is
// forgotten for a new one), streams of unknown origins, and how long an
// unknown stream must go unheard before a new unknown stream may take its
// place (nanoseconds of the caller's clock, the `now` given to Note).
struct StreamTableLimits {
  std::size_t known = 1024;
  std::size_t unknown = 1024;
  std::uint64_t unknown_idle_ns = 60'000'000'000;
};

class StreamTracker {
 public:
  // Sequence numbers remembered per stream behind its highest.
  static constexpr std::uint64_t kWindow = 4096;
  // The most gaps one confirmed jump adds (2^32: over an hour of a million
  // frames a second), so that two frames numbered near 2^64 cannot make
  // the gaps read 1.8e19.
  static constexpr std::uint64_t kMaxJumpGaps = std::uint64_t{1} << 32;

  // `max_streams`: both classes' bound (unknown streams never idle out).
  explicit StreamTracker(std::size_t max_streams = 1024) noexcept
      : StreamTracker(StreamTableLimits{max_streams, max_streams, 0}) {}
  explicit StreamTracker(const StreamTableLimits& limits) noexcept
      : max_known_(limits.known == 0 ? 1 : limits.known),
        max_unknown_(limits.unknown == 0 ? 1 : limits.unknown),
        unknown_idle_ns_(limits.unknown_idle_ns) {}

  // Judges one frame and counts it. The first frame of a stream is its
  // baseline: numbers before it were sent before this receiver listened,
  // and are not gaps. `count_gaps` false: a receiver that sees part of each
  // stream by design (a queue group member) counts no gaps and no late
  // frames, and still refuses duplicates and stale frames. `trust` and
  // `now_ns` (the caller's clock): which part of the table a new stream
  // goes to, and when each stream was heard (see StreamTableLimits).
  StreamVerdict Note(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                     std::uint64_t sequence, bool count_gaps = true,
                     OriginTrust trust = OriginTrust::kKnown, std::uint64_t now_ns = 0) {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    ++clock_;
    Key key{origin_id, instance_id, std::string(subject)};
    auto found = streams_.find(key);
    if (found == streams_.end()) {
      if (!MakeRoom(trust, now_ns)) {
        ++counts_.refused_table_full;
        return StreamVerdict::kTableFull;
      }
      Stream& stream = streams_[std::move(key)];
      stream.baseline = sequence;
      stream.highest = sequence;
      stream.Mark(sequence);
      stream.last_heard = clock_;
      stream.last_heard_ns = now_ns;
      stream.trust = trust;
      ++(trust == OriginTrust::kKnown ? known_ : unknown_);
      ++counts_.streams_opened;
      return StreamVerdict::kFirst;
    }
    Stream& stream = found->second;
    stream.last_heard = clock_;
    stream.last_heard_ns = now_ns;
    if (sequence > stream.highest && sequence - stream.highest > kWindow) {
      return FarAhead(stream, sequence, count_gaps);
    }
    if (sequence > stream.highest) {
      const std::uint64_t skipped = sequence - stream.highest - 1;
      // The skipped numbers still inside the window are marked as not
      // arrived; a jump of a window or more leaves nothing of it.
      if (skipped >= kWindow - 1) {
        stream.seen.fill(0);
      } else {
        for (std::uint64_t s = stream.highest + 1; s < sequence; ++s) stream.Unmark(s);
      }
      stream.Mark(sequence);
      stream.highest = sequence;
      if (count_gaps) AddGaps(stream, skipped);
      return skipped == 0 ? StreamVerdict::kInOrder : StreamVerdict::kAfterGap;
    }
    if (stream.highest - sequence >= kWindow) {
      ++counts_.stale;
      return StreamVerdict::kStale;
    }
    if (stream.Marked(sequence)) {
      ++counts_.duplicates;
      return StreamVerdict::kDuplicate;
    }
    stream.Mark(sequence);
    if (count_gaps) {
      ++counts_.reordered;
      // Only a number this stream skipped (after its baseline) was a gap; one
      // from before the baseline was sent before this receiver listened.
      if (sequence > stream.baseline && stream.missing > 0) {
        --stream.missing;
        --counts_.gaps;
      }
    }
    return StreamVerdict::kLate;
  }

  // The verdict Note would give, without noting the frame or counting it.
  StreamVerdict Peek(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                     std::uint64_t sequence, OriginTrust trust = OriginTrust::kKnown,
                     std::uint64_t now_ns = 0) const {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    const auto found = streams_.find(Key{origin_id, instance_id, std::string(subject)});
    if (found == streams_.end()) {
      return HasRoom(trust, now_ns) ? StreamVerdict::kFirst : StreamVerdict::kTableFull;
    }
    const Stream& stream = found->second;
    if (sequence > stream.highest && sequence - stream.highest > kWindow) {
      if (sequence == stream.held) return StreamVerdict::kDuplicate;
      return Confirms(stream, sequence) ? StreamVerdict::kAfterGap : StreamVerdict::kHeld;
    }
    if (sequence > stream.highest) {
      return sequence == stream.highest + 1 ? StreamVerdict::kInOrder : StreamVerdict::kAfterGap;
    }
    if (stream.highest - sequence >= kWindow) return StreamVerdict::kStale;
    return stream.Marked(sequence) ? StreamVerdict::kDuplicate : StreamVerdict::kLate;
  }

  // Forgets every stream whose subject `matches` (a subject no longer
  // received): heard again later, each starts from a new baseline, so what
  // was sent meanwhile is not counted as gaps. Its gaps so far stay.
  template <typename Matches>
  void Forget(Matches matches) {
    for (auto it = streams_.begin(); it != streams_.end();) {
      it = matches(std::string_view(it->first.subject)) ? Erase(it) : std::next(it);
    }
  }

  StreamCounts Counts() const noexcept {
    StreamCounts counts = counts_;
    counts.streams_tracked = streams_.size();
    return counts;
  }

 private:
  struct Key {
    std::uint64_t origin_id;
    std::uint64_t instance_id;
    std::string subject;
    bool operator<(const Key& other) const {
      return std::tie(origin_id, instance_id, subject) <
             std::tie(other.origin_id, other.instance_id, other.subject);
    }
  };

  struct Stream {
    std::uint64_t baseline = 0;  // the first number heard
    std::uint64_t highest = 0;
    std::uint64_t missing = 0;        // this stream's part of counts_.gaps
    std::uint64_t last_heard = 0;     // the tracker's frame count then
    std::uint64_t last_heard_ns = 0;  // the caller's clock then
    OriginTrust trust = OriginTrust::kKnown;
    // A frame more than a window ahead, delivered and not yet confirmed
    // (kHeld); 0: none.
    std::uint64_t held = 0;
    // Bit s % kWindow: whether s arrived, for s in (highest - kWindow, highest].
    std::array<std::uint64_t, kWindow / 64> seen{};

    bool Marked(std::uint64_t s) const noexcept {
      return (seen[(s % kWindow) / 64] >> (s % 64)) & 1u;
    }
    void Mark(std::uint64_t s) noexcept {
      seen[(s % kWindow) / 64] |= std::uint64_t{1} << (s % 64);
    }
    void Unmark(std::uint64_t s) noexcept {
      seen[(s % kWindow) / 64] &= ~(std::uint64_t{1} << (s % 64));
    }
  };

  // Saturating: a hostile number must not wrap a count.
  void AddGaps(Stream& stream, std::uint64_t skipped) noexcept {
    const auto add = [skipped](std::uint64_t& count) {
      count = skipped > ~std::uint64_t{0} - count ? ~std::uint64_t{0} : count + skipped;
    };
    add(stream.missing);
    add(counts_.gaps);
  }

  // Whether `sequence` (more than a window past the highest) confirms the
  // held frame: after it, less than a window past it.
  static bool Confirms(const Stream& stream, std::uint64_t sequence) noexcept {
    return stream.held != 0 && sequence > stream.held && sequence - stream.held < kWindow;
  }

  // A frame more than a window ahead of `stream`'s highest (Note).
  StreamVerdict FarAhead(Stream& stream, std::uint64_t sequence, bool count_gaps) {
    if (sequence == stream.held) {
      ++counts_.duplicates;
      return StreamVerdict::kDuplicate;
    }
    if (!Confirms(stream, sequence)) {
      stream.held = sequence;
      ++counts_.jumps_held;
      return StreamVerdict::kHeld;
    }
    // The jump is real (or two frames forged it): taken. The numbers
    // between the held frame and this one may still come, late.
    const std::uint64_t held = stream.held;
    const std::uint64_t skipped = sequence - stream.highest - 1 - 1;  // but the held one
    stream.held = 0;
    stream.seen.fill(0);
    stream.Mark(held);
    stream.Mark(sequence);
    stream.highest = sequence;
    ++counts_.jumps_confirmed;
    if (count_gaps) AddGaps(stream, skipped < kMaxJumpGaps ? skipped : kMaxJumpGaps);
    return StreamVerdict::kAfterGap;
  }

  using Streams = std::map<Key, Stream>;

  typename Streams::iterator Erase(typename Streams::iterator it) {
    --(it->second.trust == OriginTrust::kKnown ? known_ : unknown_);
    return streams_.erase(it);
  }

  // The least recently heard stream of `trust`'s class; end() if none.
  template <typename Self>
  static auto LeastRecent(Self& self, OriginTrust trust) {
    auto oldest = self.streams_.end();
    for (auto it = self.streams_.begin(); it != self.streams_.end(); ++it) {
      if (it->second.trust != trust) continue;
      if (oldest == self.streams_.end() || it->second.last_heard < oldest->second.last_heard) {
        oldest = it;
      }
    }
    return oldest;
  }

  // Whether a new stream of `trust` fits, evicting nothing (Peek).
  bool HasRoom(OriginTrust trust, std::uint64_t now_ns) const {
    if (trust == OriginTrust::kKnown || unknown_ < max_unknown_) return true;
    const auto oldest = LeastRecent(*this, OriginTrust::kUnknown);
    return oldest != streams_.end() && IsIdle(oldest->second, now_ns);
  }

  // Room for a new stream of `trust`: a known one evicts the least recently
  // heard known stream; an unknown one, the least recently heard unknown
  // stream if it is idle. False: no room (unknown, none idle).
  bool MakeRoom(OriginTrust trust, std::uint64_t now_ns) {
    const bool known = trust == OriginTrust::kKnown;
    if ((known ? known_ : unknown_) < (known ? max_known_ : max_unknown_)) return true;
    const auto oldest = LeastRecent(*this, trust);
    if (oldest == streams_.end()) return true;
    if (!known && !IsIdle(oldest->second, now_ns)) return false;
    (void)Erase(oldest);
    ++counts_.streams_evicted;
    return true;
  }

  bool IsIdle(const Stream& stream, std::uint64_t now_ns) const noexcept {
    return now_ns >= stream.last_heard_ns && now_ns - stream.last_heard_ns >= unknown_idle_ns_;
  }

  std::size_t max_known_;
  std::size_t max_unknown_;
  std::uint64_t unknown_idle_ns_;
  std::size_t known_ = 0;
  std::size_t unknown_ = 0;
  std::uint64_t clock_ = 0;
  std::map<Key, Stream> streams_;
  StreamCounts counts_;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
