// The NATS bridge receiver's streams (sluice/nats/inbound.hpp): the
// StreamTracker that judges each received frame's place in its stream,
// and the stream state file (BridgeOptions::stream_state_path) the tracker
// writes to and is restored from, which also keeps the places of the
// JetStream durables the receiver reads. One mutex guards both: the
// client's threads and the fetchers judge frames and heartbeats under it,
// the user's threads read the counts, forget a subject's streams, open the
// file and take a durable over under it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/heartbeat.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_state_file.hpp"
#include "sluice/nats/stream_tracker.hpp"
#include "sluice/nats/subjects.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

class InboundStreams {
 public:
  // Each argument must outlive the streams.
  InboundStreams(const BridgeOptions& options, Counters& counters)
      : options_(options),
        counters_(counters),
        tracker_(
            StreamTableLimits{options.max_tracked_streams, options.max_tracked_unknown_streams,
                              static_cast<std::uint64_t>(
                                  sluice::detail::SaturatingNanos(
                                      std::max(options.stream_idle, std::chrono::milliseconds(0)))
                                      .count())}) {}

  InboundStreams(const InboundStreams&) = delete;
  InboundStreams& operator=(const InboundStreams&) = delete;

  // The frame's place in its stream: a duplicate or a stale number is
  // refused (so a redelivery or a replay is never dispatched twice), a gap
  // or a late frame is counted. A version 1 frame has no stream.
  // `note` false: judged, not noted (nor counted) unless refused.
  // `delivery`: how the frame came (StreamTracker::Note).
  // `behind_window` (with `note` false): a number behind the window is
  // not refused but reported there, uncounted.
  FrameError CheckSequence(std::string_view subject, const FrameHeader& header, bool count_gaps,
                           bool note, bool* behind_window = nullptr,
                           FrameDelivery delivery = FrameDelivery::kCore) noexcept {
    // Numbers start at 1: a version 2 frame numbered 0 is as unsequenced as
    // a version 1 frame (else it would pass by the duplicate check).
    if (header.version == kFrameVersion1 || header.sequence == 0) {
      if (!options_.accept_version_1) return FrameError::kUnsequenced;
      if (note) Count(counters_.unsequenced);
      return FrameError::kNone;
    }
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      const OriginTrust trust = TrustOf(header.origin_id);
      const std::uint64_t now = NowNanos();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!note) {
        const StreamVerdict verdict = tracker_.Peek(header.origin_id, header.instance_id, subject,
                                                    header.sequence, trust, now, delivery);
        if (verdict == StreamVerdict::kStale && behind_window != nullptr) {
          *behind_window = true;
          return FrameError::kNone;
        }
        if (verdict != StreamVerdict::kDuplicate && verdict != StreamVerdict::kStale &&
            verdict != StreamVerdict::kTableFull && verdict != StreamVerdict::kHeldFull) {
          return FrameError::kNone;
        }
      }
      switch (tracker_.Note(header.origin_id, header.instance_id, subject, header.sequence,
                            count_gaps, trust, now, delivery)) {
        case StreamVerdict::kDuplicate:
          return FrameError::kDuplicate;
        case StreamVerdict::kStale:
          return FrameError::kStale;
        case StreamVerdict::kTableFull:
          return FrameError::kStreamTableFull;
        case StreamVerdict::kHeldFull:
          return FrameError::kTooFarAhead;
        default:
          return FrameError::kNone;
      }
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // The tracker could not allocate a new stream: deliver untracked
      // rather than lose the frame.
      Count(counters_.unsequenced);
      return FrameError::kNone;
    }
#endif
  }

  // A heartbeat of the stream `header` and `subject` name, its sender idle
  // every `interval_ns` (StreamTracker::NoteHeartbeat).
  HeartbeatVerdict NoteHeartbeat(const FrameHeader& header, std::string_view subject,
                                 std::uint64_t interval_ns, bool count_gaps) noexcept {
    const std::uint64_t now = NowNanos();
    HeartbeatVerdict verdict = HeartbeatVerdict::kNoStream;
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      const std::lock_guard<std::mutex> lock(mutex_);
      verdict =
          tracker_.NoteHeartbeat(header.origin_id, header.instance_id, subject, header.sequence,
                                 interval_ns, header.timestamp_ns, count_gaps, now);
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      // The key's copy could not be made: the heartbeat tells nothing.
    }
#endif
    return verdict;
  }

  // A received subject's streams are forgotten (StopReceiving): received
  // again later, they start anew (no gaps for what was sent meanwhile).
  void Forget(const std::string& route_subject) {
    const std::string pattern = route_subject + ".*";
    std::lock_guard<std::mutex> lock(mutex_);
    tracker_.Forget([&](std::string_view heard) { return SubjectsOverlap(pattern, heard); });
  }

  // A JetStream route's durable `durable` ("<stream>/<durable>") for
  // `subject` was subscribed, at `now` (StreamStateFile::DurablePlace):
  // whether this receiver was its last reader, by the place the state file
  // kept (none kept: not), and the file's entry for its place from now on
  // (StreamJournal::kNoEntry: no file, or not kept), which MarkDurable
  // writes.
  std::uint32_t TakeOver(const std::string& subject, const std::string& durable,
                         const StreamStateFile::DurablePlace& now) {
    std::lock_guard<std::mutex> lock(mutex_);
    bool last_reader = false;
    std::uint32_t entry = StreamJournal::kNoEntry;
    if (state_file_) {
      StreamStateFile::DurablePlace saved;
      bool found = false;
      entry = state_file_->FindDurable(durable, &saved, &found);
      last_reader = found && saved == now;
      // Made again: the sequences its namesake dispatched may name other
      // messages now.
      if (found && saved.created != now.created) state_file_->ForgetDispatched(entry);
    }
    // The streams inherited are kept so before the durable's new place
    // is: a receiver killed in between is not taken for its last reader
    // by the next one, whose streams would then count as gaps what
    // another reader took.
    tracker_.TakeOver(
        [&subject](std::string_view heard) { return SubjectsOverlap(subject, heard); },
        last_reader);
    if (entry != StreamJournal::kNoEntry) state_file_->MarkDurable(entry, now);
    return entry;
  }

  // The stream sequences of the messages of the durable at the state
  // file's `entry` that receivers of the file dispatched (the last
  // StreamStateFile::kDispatchedKept): their redeliveries are refused.
  void ReadDispatched(std::uint32_t entry, std::unordered_set<std::uint64_t>* dispatched) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!state_file_ || entry == StreamJournal::kNoEntry) return;
    state_file_->ForEachDispatched(
        entry, [dispatched](std::uint64_t sequence) { dispatched->insert(sequence); });
  }

  // A message of the durable at the state file's `entry` (TakeOver) was
  // dispatched: kept in the file before it is acknowledged. On the
  // consumer's thread, without the lock (the only writer of those).
  void NoteDispatched(std::uint32_t entry, std::uint64_t stream_sequence) noexcept {
    if (state_file_ && entry != StreamJournal::kNoEntry) {
      state_file_->NoteDispatched(entry, stream_sequence);
    }
  }

  // The durable `durable`'s place in the state file, if it has one, is this
  // receiver's (StreamStateFile::ClaimDurable).
  void ClaimDurable(const std::string& durable) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_file_) state_file_->ClaimDurable(durable);
  }

  // The durable at the state file's `entry` (TakeOver) delivered a
  // message to this receiver: it is at `place` now. On the route's fetch
  // thread only, without the lock (each entry has one writer).
  void MarkDurable(std::uint32_t entry, const StreamStateFile::DurablePlace& place) noexcept {
    if (entry != StreamJournal::kNoEntry) state_file_->MarkDurable(entry, place);
  }

  StreamCounts CountsNow() const {
    std::lock_guard<std::mutex> lock(mutex_);
    StreamCounts counts = tracker_.Counts();
    counts.streams_silent = tracker_.Silent(NowNanos());
    if (state_file_) counts.state_records_dropped = state_file_->RecordsDropped();
    return counts;
  }

  // Opens options.stream_state_path (if given, once): the streams it holds
  // are restored, each in the part of the table its origin's trust names
  // now, and every change is written to it from here on. False: *error
  // says why (StreamStateFile::Open).
  bool OpenStateFile(std::string* error) {
    if (options_.stream_state_path.empty() || state_file_) return true;
    const std::size_t known = options_.max_tracked_streams;
    const std::size_t unknown = options_.max_tracked_unknown_streams;
    constexpr std::size_t kMost = StreamStateFile::kMaxRecords;
    // Past kMost (without overflowing): refused by Open, saying so.
    const std::size_t capacity =
        known > kMost || unknown > kMost - known ? kMost + 1 : known + unknown;
    std::unique_ptr<StreamStateFile> file =
        StreamStateFile::Open(options_.stream_state_path, capacity, error);
    if (!file) return false;
    const std::uint64_t now = NowNanos();
    std::lock_guard<std::mutex> lock(mutex_);
    file->ForEachStream([&](StreamState state, std::uint32_t entry) {
      state.trust = TrustOf(state.origin_id);
      return tracker_.Restore(state, entry, now);
    });
    tracker_.Attach(file.get());
    state_file_ = std::move(file);
    return true;
  }

 private:
  // Known: an allow-list (any priority's) names the origin; its streams
  // keep their own part of the table (StreamTableLimits).
  OriginTrust TrustOf(std::uint64_t origin_id) const noexcept {
    for (const auto& allowed : options_.allowed_origins) {
      if (std::find(allowed.begin(), allowed.end(), origin_id) != allowed.end()) {
        return OriginTrust::kKnown;
      }
    }
    return OriginTrust::kUnknown;
  }

  // The steady clock's nanoseconds (the heartbeats' clock, SteadyNanos).
  static std::uint64_t NowNanos() noexcept { return static_cast<std::uint64_t>(SteadyNanos()); }

  const BridgeOptions& options_;
  Counters& counters_;
  // The inbound streams, shared by the client's threads and the fetchers.
  mutable std::mutex mutex_;
  // The table's file (options.stream_state_path), declared first: it
  // outlives the tracker that writes to it.
  std::unique_ptr<StreamStateFile> state_file_;
  StreamTracker tracker_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
