// What of a stream a receiver keeps past its own life: a StreamTracker with
// a journal writes each stream's state to it whenever a frame or a
// heartbeat changes it, and a restarted receiver reads it back
// (StreamTracker::Restore), so that the frames sent while it was down are
// counted as gaps and a replay of frames it had taken is still refused.
// Standard library only: the journal itself (a mapped file:
// sluice/nats/stream_state_file.hpp) is the caller's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// Which part of the table a stream belongs to: known origins (those the
// receiver's allow-lists name) or unknown ones. Each part has its own
// bound, so a flood of made-up origins fills the unknown part only.
enum class OriginTrust : std::uint8_t { kKnown, kUnknown };

// Sequence numbers a stream remembers behind its highest (its window), and
// frames far ahead it holds at most (StreamTracker).
inline constexpr std::uint64_t kStreamWindow = 4096;
inline constexpr std::size_t kMaxHeldFrames = 4;

// One stream as a journal keeps it: its key, and what judging its next
// frame needs.
struct StreamState {
  std::uint64_t origin_id = 0;
  std::uint64_t instance_id = 0;
  std::string_view subject;
  OriginTrust trust = OriginTrust::kKnown;
  std::uint64_t baseline = 0;    // the first number heard
  std::uint64_t highest = 0;     // the highest number taken
  std::uint64_t beat_stamp = 0;  // the sender's stamp on its last heartbeat
  // The sender's heartbeat interval (0: none heard): a stream restored
  // with one reads as silent once that long passes without a frame.
  std::uint64_t heartbeat_ns = 0;
  // Whether a frame other than the first was taken (a frame more than a
  // window behind starts an unconfirmed stream again).
  bool confirmed = false;
  // A later instance of its origin replaced it on its subject: never silent.
  bool ended = false;
  // Its frames come from a JetStream stream, which delivers again what its
  // reader did not acknowledge: restored, every number up to its highest
  // reads as heard and none as arrived (StreamTracker::Restore).
  bool jetstream = false;
  // JetStream: heard so far only through frames an earlier reader of its
  // durable was delivered first (StreamTracker, FrameDelivery): it counts
  // no gaps until a frame delivered to this receiver first comes, also
  // after a restart.
  bool inherited = false;
  std::array<std::uint64_t, kMaxHeldFrames> held{};  // frames far ahead, delivered
  std::size_t held_count = 0;
  // Bit s % kStreamWindow: whether number s arrived, for s in
  // (highest - kStreamWindow, highest].
  std::array<std::uint64_t, kStreamWindow / 64> seen{};
};

// Where a StreamTracker writes its streams. Called with the tracker's
// caller's lock held (the tracker is not thread-safe); never throws.
class StreamJournal {
 public:
  // No entry: a stream the journal does not keep (it is full, or the
  // subject is longer than it holds).
  static constexpr std::uint32_t kNoEntry = 0xFFFF'FFFFu;

  virtual ~StreamJournal() = default;
  // `state` of the stream kept at `entry` (kNoEntry: a stream not kept
  // yet); returns its entry from now on (kNoEntry: not kept).
  virtual std::uint32_t Write(std::uint32_t entry, const StreamState& state) noexcept = 0;
  // The stream at `entry` was forgotten.
  virtual void Remove(std::uint32_t entry) noexcept = 0;

 protected:
  StreamJournal() = default;
  StreamJournal(const StreamJournal&) = default;
  StreamJournal& operator=(const StreamJournal&) = default;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
