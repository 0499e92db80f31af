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
  kFirst,       // the first frame heard of the stream: its baseline, delivered
  kInOrder,     // the next number, delivered
  kAfterGap,    // ahead of the next number; the numbers skipped are counted as gaps
  kLate,        // a number skipped earlier, now here: delivered, one gap fewer
  kDuplicate,   // seen already: refused
  kStale,       // behind the window, so it cannot be told from a duplicate: refused
  kUnsequenced  // sequence 0 (a version 1 frame): not tracked
};

struct StreamCounts {
  // Numbers skipped and not (yet) arrived, over every stream: frames lost
  // between the senders' bridges and this one.
  std::uint64_t gaps = 0;
  std::uint64_t reordered = 0;   // arrived after a later number
  std::uint64_t duplicates = 0;  // refused: seen already
  std::uint64_t stale = 0;       // refused: behind the window
  std::uint64_t streams_opened = 0;
  // Forgotten to make room for a new stream (the least recently heard); a
  // duplicate of an evicted stream's frame is no longer recognised.
  std::uint64_t streams_evicted = 0;
  std::uint64_t streams_tracked = 0;  // now
};

class StreamTracker {
 public:
  // Sequence numbers remembered per stream behind its highest.
  static constexpr std::uint64_t kWindow = 4096;

  explicit StreamTracker(std::size_t max_streams = 1024) noexcept
      : max_streams_(max_streams == 0 ? 1 : max_streams) {}

  // Judges one frame and counts it. The first frame of a stream is its
  // baseline: numbers before it were sent before this receiver listened,
  // and are not gaps. `count_gaps` false: a receiver that sees part of each
  // stream by design (a queue group member) counts no gaps and no late
  // frames, and still refuses duplicates and stale frames.
  StreamVerdict Note(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                     std::uint64_t sequence, bool count_gaps = true) {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    ++clock_;
    Key key{origin_id, instance_id, std::string(subject)};
    auto found = streams_.find(key);
    if (found == streams_.end()) {
      if (streams_.size() >= max_streams_) EvictLeastRecent();
      Stream& stream = streams_[std::move(key)];
      stream.baseline = sequence;
      stream.highest = sequence;
      stream.Mark(sequence);
      stream.last_heard = clock_;
      ++counts_.streams_opened;
      return StreamVerdict::kFirst;
    }
    Stream& stream = found->second;
    stream.last_heard = clock_;
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
                     std::uint64_t sequence) const {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    const auto found = streams_.find(Key{origin_id, instance_id, std::string(subject)});
    if (found == streams_.end()) return StreamVerdict::kFirst;
    const Stream& stream = found->second;
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
      it = matches(std::string_view(it->first.subject)) ? streams_.erase(it) : std::next(it);
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
    std::uint64_t missing = 0;  // this stream's part of counts_.gaps
    std::uint64_t last_heard = 0;
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

  void EvictLeastRecent() {
    auto oldest = streams_.begin();
    for (auto it = streams_.begin(); it != streams_.end(); ++it) {
      if (it->second.last_heard < oldest->second.last_heard) oldest = it;
    }
    if (oldest != streams_.end()) {
      streams_.erase(oldest);
      ++counts_.streams_evicted;
    }
  }

  std::size_t max_streams_;
  std::uint64_t clock_ = 0;
  std::map<Key, Stream> streams_;
  StreamCounts counts_;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
