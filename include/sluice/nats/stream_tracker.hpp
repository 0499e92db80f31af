// What a receiving bridge knows about each stream of frames it hears: a
// stream is one sending bridge's frames on one subject since one Start
// (origin id, instance id, subject), numbered from 1. From the numbers it
// counts the frames that never came (gaps), the ones that came late
// (reordered) and refuses the ones it has seen (duplicates: a redelivery
// or a replay) or can no longer tell (stale: behind the window). Numbers
// are claims anyone who may publish on the subject can make: a frame far
// ahead is held until a later one confirms it, and the table is split so
// that streams made up in a flood cannot push out the ones in use
// (sluice/nats/stream_table.hpp). What a number does to the stream it
// belongs to is sluice/nats/stream_sequence.hpp's.
// Standard library only; not thread-safe (the bridge holds a mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_sequence.hpp"
#include "sluice/nats/stream_table.hpp"
#include "sluice/nats/stream_verdicts.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// How a frame reached the receiver (StreamTracker::Note).
enum class FrameDelivery : std::uint8_t {
  kCore,       // over core NATS
  kJetStream,  // from a JetStream stream, delivered to this reader first
  // From a JetStream stream, delivered before to an earlier reader of the
  // same durable consumer, which did not acknowledge it (killed, or
  // stopped first); the numbers around it that never come, that reader
  // may have acknowledged: they are not gaps.
  kJetStreamEarlier,
};

class StreamTracker {
 public:
  // Sequence numbers remembered per stream behind its highest.
  static constexpr std::uint64_t kWindow = kStreamWindow;
  // The most gaps one confirmed jump adds, and one stream in all
  // (sluice/nats/stream_sequence.hpp).
  static constexpr std::uint64_t kMaxJumpGaps = detail::kMaxJumpGaps;
  static constexpr std::uint64_t kMaxStreamGaps = detail::kMaxStreamGaps;
  // Frames held per stream at most (kHeld).
  static constexpr std::size_t kMaxHeld = kMaxHeldFrames;

  // `max_streams`: each part's bound; a stream is replaced whenever its
  // part is full (no idle time), the least recently heard first.
  explicit StreamTracker(std::size_t max_streams = 1024) noexcept
      : StreamTracker(StreamTableLimits{max_streams, max_streams, 0}) {}
  explicit StreamTracker(const StreamTableLimits& limits) noexcept : table_(limits) {}
  StreamTracker(const StreamTracker&) = delete;
  StreamTracker& operator=(const StreamTracker&) = delete;

  // Judges one frame and counts it. The first frame of a stream is its
  // baseline: numbers before it were sent before this receiver listened,
  // and are not gaps. `count_gaps` false: a receiver that sees part of each
  // stream by design (a queue group member) counts no gaps and no late
  // frames, and still refuses duplicates and stale frames. `trust` and
  // `now_ns` (the caller's clock): which part of the table a new stream
  // goes to, and when each stream was heard (see StreamTableLimits).
  // `delivery`: how the frame came (FrameDelivery). A stream heard one way
  // and now the other (its subject's route changed) is forgotten first,
  // and starts anew here: numbers a core route kept would refuse a
  // JetStream stream's redeliveries.
  StreamVerdict Note(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                     std::uint64_t sequence, bool count_gaps = true,
                     OriginTrust trust = OriginTrust::kKnown, std::uint64_t now_ns = 0,
                     FrameDelivery delivery = FrameDelivery::kCore) {
    Stream* stream = nullptr;
    const StreamVerdict verdict = Judge(origin_id, instance_id, subject, sequence, count_gaps,
                                        trust, now_ns, delivery, &stream);
    // Alive (Silent) only by a frame taken: a replay refused as a duplicate
    // or stale keeps no dead stream alive. A frame taken is the only kind
    // that changes what the journal keeps.
    if (stream != nullptr && Taken(verdict)) {
      stream->alive_ns = now_ns;
      // The first frame delivered here of a stream heard so far only
      // through an earlier reader's frames: gaps are counted from here on,
      // and nothing up to its highest is one (that reader's, or unknown).
      if (stream->inherited && delivery != FrameDelivery::kJetStreamEarlier) {
        stream->inherited = false;
        stream->baseline = stream->highest;
      }
      Save(*stream);
    }
    return verdict;
  }

  // Writes every stream not kept in `journal` yet (those Restore read back
  // from it are) to it, then each change as it is made. `journal` must
  // outlive the tracker, or be detached with nullptr.
  void Attach(StreamJournal* journal) noexcept {
    journal_ = journal;
    for (auto& entry : table_) {
      if (entry.second.entry == StreamJournal::kNoEntry) Save(entry.second);
    }
  }

  // A stream read back from a journal, kept there at `entry`, heard now
  // (`now_ns`): its next frame is judged as the receiver that wrote it
  // would have, so the numbers sent meanwhile are gaps. Its gaps were that
  // receiver's to count (a late one no longer lowers them). False, and not
  // added: a state no tracker writes (a number 0, a baseline above the
  // highest, a held frame not above it or held twice), a stream already
  // here, or its part of the table full.
  bool Restore(const StreamState& state, std::uint32_t entry, std::uint64_t now_ns) {
    if (state.highest == 0 || state.baseline == 0 || state.baseline > state.highest ||
        state.held_count > kMaxHeld) {
      return false;
    }
    for (std::size_t i = 0; i < state.held_count; ++i) {
      if (state.held[i] <= state.highest) return false;
      for (std::size_t j = 0; j < i; ++j) {
        if (state.held[j] == state.held[i]) return false;  // held once each
      }
    }
    StreamKey key{state.origin_id, state.instance_id, std::string(state.subject)};
    if (table_.find(key) != table_.end()) return false;
    const std::size_t part_index = Table::PartOf(state.trust);
    if (!table_.HasSpace(part_index)) return false;
    Stream& stream = table_.Insert(std::move(key), part_index)->second;
    stream.baseline = state.baseline;
    stream.highest = state.highest;
    stream.beat_stamp = state.beat_stamp;
    stream.heartbeat_ns = state.heartbeat_ns;
    stream.ended = state.ended;
    stream.confirmed = state.confirmed;
    stream.held = state.held;
    stream.held_count = state.held_count;
    stream.seen = state.seen;
    stream.jetstream = state.jetstream;
    stream.inherited = state.inherited;
    if (state.jetstream) {
      // What the earlier receiver took, the stream delivers again unless
      // that receiver acknowledged it: nothing reads as arrived (a
      // redelivery is admitted), and nothing up to the highest is a gap
      // (a number that does not come again was acknowledged). What was
      // sent after it and never comes (the stream discarded it) is.
      stream.baseline = stream.highest;
      stream.seen.fill(0);
      stream.held_count = 0;
    }
    stream.last_heard_ns = now_ns;
    stream.alive_ns = now_ns;
    stream.entry = entry;
    ++counts_.streams_restored;
    return true;
  }

 private:
  struct Stream;

  static bool IsJetStream(FrameDelivery delivery) noexcept {
    return delivery != FrameDelivery::kCore;
  }

  static bool Taken(StreamVerdict verdict) noexcept {
    return verdict == StreamVerdict::kFirst || verdict == StreamVerdict::kInOrder ||
           verdict == StreamVerdict::kAfterGap || verdict == StreamVerdict::kLate ||
           verdict == StreamVerdict::kHeld;
  }

  // Note's judgement; *judged: the stream it looked at (none when refused
  // for the table).
  StreamVerdict Judge(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                      std::uint64_t sequence, bool count_gaps, OriginTrust trust,
                      std::uint64_t now_ns, FrameDelivery delivery, Stream** judged) {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    StreamKey key{origin_id, instance_id, std::string(subject)};
    auto found = table_.find(key);
    if (found != table_.end() && found->second.jetstream != IsJetStream(delivery)) {
      (void)Erase(found);  // and its record in the journal
      found = table_.end();
    }
    if (found == table_.end()) {
      if (!MakeRoom(Table::PartOf(trust), now_ns)) {
        ++counts_.refused_table_full;
        return StreamVerdict::kTableFull;
      }
      const typename Table::iterator added = table_.Insert(std::move(key), Table::PartOf(trust));
      Stream& stream = added->second;
      stream.jetstream = IsJetStream(delivery);
      stream.inherited = delivery == FrameDelivery::kJetStreamEarlier;
      detail::Begin(stream, sequence);
      stream.last_heard_ns = now_ns;
      ++counts_.streams_opened;
      EndEarlierInstances(added->first);
      *judged = &stream;
      return StreamVerdict::kFirst;
    }
    Stream& stream = found->second;
    *judged = &stream;
    table_.Heard(stream, now_ns);
    // An inherited stream's numbers skipped so far may be ones the earlier
    // reader acknowledged: not gaps (nor, coming late, fewer gaps).
    if (stream.inherited) count_gaps = false;
    return detail::JudgeNumber(stream, sequence, count_gaps, counts_);
  }

 public:
  // Heartbeats a stream's sender missed before it reads as silent.
  static constexpr std::uint64_t kSilentBeats = 3;

  // A heartbeat of a stream: its sender had handed every number up to
  // `last` to its client when it sent it, and sends one every
  // `interval_ns` while idle. The numbers after the stream's highest, up to
  // `last`, have not arrived: missing (NATS keeps one connection's order
  // on a subject, so they will not come; one that still does counts as
  // late). A heartbeat opens no stream (without a frame there is no
  // baseline), and one more than a window ahead of its stream is not taken
  // (as a frame that far ahead is held): forged, it would make the
  // sender's next frames stale. Nor does it confirm a stream. A heartbeat
  // must be stamped (`stamp`, the sender's clock) later than the stream's
  // last one: a replay is refused (kReplay) and keeps no dead stream alive.
  // `count_gaps` false (a receiver that sees part of each stream, whose
  // heartbeats are shared too): nothing is judged (kPartial).
  HeartbeatVerdict NoteHeartbeat(std::uint64_t origin_id, std::uint64_t instance_id,
                                 std::string_view subject, std::uint64_t last,
                                 std::uint64_t interval_ns, std::uint64_t stamp,
                                 bool count_gaps = true, std::uint64_t now_ns = 0) {
    const auto found = table_.find(StreamKey{origin_id, instance_id, std::string(subject)});
    if (found == table_.end()) return HeartbeatVerdict::kNoStream;
    if (!count_gaps) return HeartbeatVerdict::kPartial;
    Stream& stream = found->second;
    if (stream.beat_stamp != 0 && stamp <= stream.beat_stamp) return HeartbeatVerdict::kReplay;
    stream.beat_stamp = stamp;
    table_.Heard(stream, now_ns);
    stream.alive_ns = now_ns;
    if (!stream.ended) stream.heartbeat_ns = interval_ns;
    if (last <= stream.highest) {
      Save(stream);  // its stamp: a replay after a restart is still refused
      return HeartbeatVerdict::kNothingMissing;
    }
    if (last - stream.highest > kWindow) {
      Save(stream);
      ++counts_.heartbeats_far_ahead;
      return HeartbeatVerdict::kFarAhead;
    }
    // Held frames at or below `last` were delivered: not gaps.
    const std::uint64_t skipped = last - stream.highest - stream.HeldIn(stream.highest, last + 1);
    for (std::uint64_t s = stream.highest + 1; s <= last; ++s) stream.Unmark(s);
    stream.highest = last;
    detail::AbsorbHeld(stream);
    Save(stream);
    if (skipped == 0) return HeartbeatVerdict::kNothingMissing;
    ++counts_.heartbeats_with_gaps;
    if (count_gaps) detail::AddGaps(stream, skipped, counts_);
    return HeartbeatVerdict::kMissing;
  }

  // Streams that sent heartbeats and have not been heard of for
  // kSilentBeats of their intervals at `now_ns`: a sender killed, or cut
  // off from this receiver.
  // A stream a later instance of its origin replaced on its subject (the
  // sender started again) has ended: never silent.
  std::uint64_t Silent(std::uint64_t now_ns) const noexcept {
    std::uint64_t silent = 0;
    for (const auto& entry : table_) {
      const Stream& stream = entry.second;
      if (stream.heartbeat_ns == 0 || stream.ended || now_ns < stream.alive_ns) continue;
      const std::uint64_t quiet = now_ns - stream.alive_ns;
      const std::uint64_t limit = stream.heartbeat_ns > ~std::uint64_t{0} / kSilentBeats
                                      ? ~std::uint64_t{0}
                                      : stream.heartbeat_ns * kSilentBeats;
      if (quiet > limit) ++silent;
    }
    return silent;
  }

  // The verdict Note would give, without noting the frame or counting it.
  StreamVerdict Peek(std::uint64_t origin_id, std::uint64_t instance_id, std::string_view subject,
                     std::uint64_t sequence, OriginTrust trust = OriginTrust::kKnown,
                     std::uint64_t now_ns = 0,
                     FrameDelivery delivery = FrameDelivery::kCore) const {
    if (sequence == 0) return StreamVerdict::kUnsequenced;
    const auto found = table_.find(StreamKey{origin_id, instance_id, std::string(subject)});
    // A stream heard the other way: forgotten by Note (its place freed), so
    // the frame is a first one.
    if (found != table_.end() && found->second.jetstream != IsJetStream(delivery)) {
      return StreamVerdict::kFirst;
    }
    if (found == table_.end()) {
      return table_.HasRoom(Table::PartOf(trust), now_ns) ? StreamVerdict::kFirst
                                                          : StreamVerdict::kTableFull;
    }
    return detail::PeekNumber(found->second, sequence);
  }

  // A JetStream route's durable consumer was subscribed. The streams of
  // its subjects (`matches`) read back from the journal are judged exactly,
  // as if this receiver had never stopped, only if it was the durable's
  // last reader (`last_reader`: the durable is where this receiver left
  // it). Otherwise another reader took messages after it (or it was killed
  // with messages fetched and not taken, or the durable was made again),
  // and they are inherited, as the streams of an earlier reader are
  // (FrameDelivery::kJetStreamEarlier): the numbers after their highest
  // that never come may have been acknowledged there. Called before the
  // durable's first frame.
  template <typename Matches>
  void TakeOver(Matches matches, bool last_reader) {
    if (last_reader) return;
    for (auto& entry : table_) {
      if (entry.second.jetstream && matches(std::string_view(entry.first.subject)) &&
          !entry.second.inherited) {
        entry.second.inherited = true;
        Save(entry.second);  // before the durable's new place is (Receiver)
      }
    }
  }

  // Forgets every stream whose subject `matches` (a subject no longer
  // received): heard again later, each starts from a new baseline, so what
  // was sent meanwhile is not counted as gaps. Its gaps so far stay.
  template <typename Matches>
  void Forget(Matches matches) {
    for (auto it = table_.begin(); it != table_.end();) {
      it = matches(std::string_view(it->first.subject)) ? Erase(it) : std::next(it);
    }
  }

  StreamCounts Counts() const noexcept {
    StreamCounts counts = counts_;
    counts.streams_tracked = table_.size();
    return counts;
  }

 private:
  struct Stream : StreamPlace, detail::StreamSequence {
    std::uint64_t heartbeat_ns = 0;  // its sender's heartbeat interval (0: none heard)
    std::uint64_t beat_stamp = 0;    // the sender's stamp on its last heartbeat
    std::uint64_t alive_ns = 0;      // last taken frame or fresh heartbeat (Silent)
    bool ended = false;              // a later instance replaced it (Silent)
    std::uint32_t entry = StreamJournal::kNoEntry;  // in the journal
    bool unsaved = false;                           // counted in streams_not_saved
    bool jetstream = false;                         // heard from a JetStream stream
    // Heard so far only through frames an earlier reader of its durable
    // was delivered (FrameDelivery::kJetStreamEarlier): no gaps counted.
    bool inherited = false;
  };
  using Table = StreamTable<Stream>;

  // A new stream `key`: the other instances of its origin on its subject
  // ended (their sender started again): none of them is silent any more.
  // A scan of the table, once per new stream.
  void EndEarlierInstances(const StreamKey& key) noexcept {
    for (auto& entry : table_) {
      if (entry.first.origin_id == key.origin_id && entry.first.instance_id != key.instance_id &&
          entry.first.subject == key.subject && !entry.second.ended) {
        entry.second.ended = true;
        Save(entry.second);
      }
    }
  }

  // `stream`'s state to the journal, if there is one.
  void Save(Stream& stream) noexcept {
    if (journal_ == nullptr) return;
    const StreamKey& key = Table::KeyOf(stream);
    StreamState state;
    state.origin_id = key.origin_id;
    state.instance_id = key.instance_id;
    state.subject = key.subject;
    state.trust = Table::TrustOf(stream);
    state.baseline = stream.baseline;
    state.highest = stream.highest;
    state.beat_stamp = stream.beat_stamp;
    state.heartbeat_ns = stream.heartbeat_ns;
    state.ended = stream.ended;
    state.confirmed = stream.confirmed;
    state.held = stream.held;
    state.held_count = stream.held_count;
    state.seen = stream.seen;
    state.jetstream = stream.jetstream;
    state.inherited = stream.inherited;
    stream.entry = journal_->Write(stream.entry, state);
    if (stream.entry == StreamJournal::kNoEntry && !stream.unsaved) {
      stream.unsaved = true;
      ++counts_.streams_not_saved;
    }
  }

  typename Table::iterator Erase(typename Table::iterator it) {
    if (journal_ != nullptr && it->second.entry != StreamJournal::kNoEntry) {
      journal_->Remove(it->second.entry);
    }
    return table_.Erase(it);
  }

  // Room for a new stream in part `part_index`: its least recently heard
  // stream goes if it is idle. False: full, none idle.
  bool MakeRoom(std::size_t part_index, std::uint64_t now_ns) {
    if (table_.HasSpace(part_index)) return true;
    const auto oldest = table_.Replaceable(part_index, now_ns);
    if (oldest == table_.end()) return false;
    (void)Erase(oldest);
    ++counts_.streams_evicted;
    return true;
  }

  StreamJournal* journal_ = nullptr;
  Table table_;
  StreamCounts counts_;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
