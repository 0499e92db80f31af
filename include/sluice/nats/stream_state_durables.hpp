// The JetStream durable consumers a receiver read, as its stream state
// file keeps them (sluice/nats/stream_state_file.hpp, between the file's
// header and its stream records): each durable's name, where it was when
// this receiver last took a message of it, and the stream sequences of its
// last messages dispatched here. A receiver started again thereby knows
// whether it was the durable's last reader (InboundStreams::TakeOver),
// and refuses the redelivery of a message it dispatched. Written through
// the file's stores (sluice/nats/stream_state_stores.hpp): a kill at any
// store leaves a place as it was before it or after it.
// Standard library only; the file maps the places and hands them here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sluice/config.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_state_stores.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// The durable places are written by three kinds of thread of one
// receiver, never to the same bytes at once, so they need no atomic read-
// modify-write and no fence between threads:
//  - FindDurable, ClaimDurable and ForgetDispatched run under the
//    receiver's lock, before the durable's route is subscribed; they
//    write a place's `live`, name and copies, or its dispatched count,
//    only for a durable no route of this receiver reads now.
//  - MarkDurable writes a place's copies, on its route's fetch thread only,
//    which starts after the subscription (thread creation orders the
//    writes above before it) and is joined before the route goes.
//  - NoteDispatched writes a place's dispatched sequences, on the bus's
//    consumer thread only, for a message DispatchAcks holds; DispatchAcks'
//    mutex orders the filing (after the subscription) before it, and the
//    route withdraws its messages, under that mutex, before it goes.
// A later process reads them after this one died (the stores' order
// within each writer, StoreInFile, is what it relies on).
// Threaded tests: the NATS bridge suite under ThreadSanitizer (CI step 8),
// NatsDispatchAckTest.EachBridgeOnABusKeepsItsOwnDispatchedMessages among
// them (one bridge subscribes while another's messages are dispatched).
class DurablePlaces {
 public:
  // Where a JetStream durable consumer was: its creation time (the
  // server's, in nanoseconds since the epoch: a durable made again is
  // another) and the consumer sequence of the last message it delivered.
  struct DurablePlace {
    std::int64_t created = 0;
    std::uint64_t delivered = 0;
    bool operator==(const DurablePlace& other) const noexcept {
      return created == other.created && delivered == other.delivered;
    }
  };

  // The JetStream durable consumers a file keeps the place of, and their
  // names' longest ("<stream>/<durable>"): a route's durable beyond them is
  // not kept (its restored streams are judged as taken over).
  static constexpr std::size_t kMaxDurables = 64;
  static constexpr std::size_t kMaxDurableName = 240;
  // The stream sequences of each durable's last messages dispatched here
  // that the file keeps (NoteDispatched).
  static constexpr std::size_t kDispatchedKept = 1024;

 private:
  // One copy of a durable's place; `generation` (written last) commits it.
  struct DurableCopy {
    std::uint32_t generation;
    std::uint32_t unused;
    std::uint64_t created;  // DurablePlace::created, as written
    std::uint64_t delivered;
  };
  // A JetStream durable consumer this receiver read: its name, and where it
  // was when this receiver last took a message of it (DurablePlace).
  struct Durable {
    std::uint32_t live;  // kLive: names a durable (written last when one is added)
    std::uint16_t name_size;
    std::uint16_t unused;
    char name[kMaxDurableName];
    DurableCopy copies[2];
    // Stream sequences dispatched: the last min(dispatched_count,
    // kDispatchedKept), dispatched_count % kDispatchedKept next.
    std::uint64_t dispatched_count;
    std::uint64_t dispatched[kDispatchedKept];
  };

 public:
  static constexpr std::size_t kDurableSize = sizeof(Durable);

  // Where the durable `name` ("<stream>/<durable>") was when this receiver
  // last took a message of it: `*saved` (false: not kept, or never read
  // here), and from now on where its place is kept (kNoEntry: nowhere, the
  // name too long or every place taken). A place that is not one this code
  // writes reads as none. Not thread-safe with another call of it (the
  // receiver's lock), but with MarkDurable on other entries.
  std::uint32_t FindDurable(std::string_view name, DurablePlace* saved, bool* found) noexcept {
    *found = false;
    if (name.empty() || name.size() > kMaxDurableName) return StreamJournal::kNoEntry;
    std::uint32_t free = StreamJournal::kNoEntry;
    std::uint32_t unclaimed = StreamJournal::kNoEntry;  // a place this receiver does not use
    for (std::size_t i = 0; i < kMaxDurables; ++i) {
      Durable& durable = durables_[i];
      const std::uint32_t live = LoadFromFile(durable.live);
      if (live != kLive || durable.name_size == 0 || durable.name_size > kMaxDurableName) {
        if (free == StreamJournal::kNoEntry) free = static_cast<std::uint32_t>(i);
        continue;
      }
      if (std::string_view(durable.name, durable.name_size) != name) {
        if (unclaimed == StreamJournal::kNoEntry && !claimed_[i]) {
          unclaimed = static_cast<std::uint32_t>(i);
        }
        continue;
      }
      claimed_[i] = true;
      if (durable.copies[0].generation != 0 || durable.copies[1].generation != 0) {
        const DurableCopy& copy = durable.copies[NewerCopy(durable.copies)];
        saved->created = static_cast<std::int64_t>(copy.created);
        saved->delivered = copy.delivered;
        *found = true;
      }
      return static_cast<std::uint32_t>(i);
    }
    // Every place taken: the one of a durable this receiver does not read
    // (ClaimDurable) goes (that durable, read again, is judged as taken
    // over).
    if (free == StreamJournal::kNoEntry) free = unclaimed;
    if (free == StreamJournal::kNoEntry) return StreamJournal::kNoEntry;
    claimed_[free] = true;
    Durable& durable = durables_[free];
    StoreInFile(durable.live, 0);
    durable.name_size = static_cast<std::uint16_t>(name.size());
    std::memcpy(durable.name, name.data(), name.size());
    durable.copies[0] = DurableCopy{};
    durable.copies[1] = DurableCopy{};
    durable.dispatched_count = 0;
    StoreInFile(durable.live, kLive);  // the commit: after the name
    return free;
  }

  // The place of the durable `name`, if the file has one, is this
  // receiver's: FindDurable gives it to no other durable. For every durable
  // a receiver is about to read, before it reads any.
  void ClaimDurable(std::string_view name) noexcept {
    for (std::size_t i = 0; i < kMaxDurables; ++i) {
      const Durable& durable = durables_[i];
      if (LoadFromFile(durable.live) == kLive && durable.name_size != 0 &&
          durable.name_size <= kMaxDurableName &&
          std::string_view(durable.name, durable.name_size) == name) {
        claimed_[i] = true;
        return;
      }
    }
  }

  // A message of the durable at `entry` (FindDurable) was dispatched: its
  // stream sequence is kept (the last kDispatchedKept of them). On the
  // consumer's thread, the only one that writes them; a kill at any store
  // leaves it kept or not, and the others as they were.
  void NoteDispatched(std::uint32_t entry, std::uint64_t stream_sequence) noexcept {
    if (entry >= kMaxDurables) return;
    Durable& durable = durables_[entry];
    const std::uint64_t count = durable.dispatched_count;
    StoreInFile(durable.dispatched[count % kDispatchedKept], stream_sequence);
    StoreInFile(durable.dispatched_count, count + 1);
  }

  // The stream sequences kept for the durable at `entry` (NoteDispatched),
  // each to `take(sequence)`.
  template <typename Take>
  void ForEachDispatched(std::uint32_t entry, Take&& take) const {
    if (entry >= kMaxDurables) return;
    const Durable& durable = durables_[entry];
    const std::uint64_t count = durable.dispatched_count;
    const std::uint64_t kept = count < kDispatchedKept ? count : kDispatchedKept;
    for (std::uint64_t i = 0; i < kept; ++i) take(durable.dispatched[i]);
  }

  // Forgets the stream sequences kept for the durable at `entry` (the
  // durable was made again: they may name other messages now).
  void ForgetDispatched(std::uint32_t entry) noexcept {
    if (entry < kMaxDurables) StoreInFile(durables_[entry].dispatched_count, 0);
  }

  // The durable at `entry` (FindDurable) is at `place` now. One thread per
  // entry at a time; a kill at any store leaves the place before or after.
  void MarkDurable(std::uint32_t entry, const DurablePlace& place) noexcept {
    if (entry >= kMaxDurables) return;
    Durable& durable = durables_[entry];
    const int current = NewerCopy(durable.copies);
    DurableCopy& next = durable.copies[1 - current];
    StoreInFile(next.created, static_cast<std::uint64_t>(place.created));
    StoreInFile(next.delivered, place.delivered);
    const std::uint32_t generation = durable.copies[current].generation + 1;
    StoreInFile(next.generation, generation == 0 ? 1 : generation);
  }

 protected:
  DurablePlaces() = default;
  ~DurablePlaces() = default;
  DurablePlaces(const DurablePlaces&) = delete;
  DurablePlaces& operator=(const DurablePlaces&) = delete;

  // The places are the kMaxDurables * kDurableSize bytes mapped at `places`.
  void MapDurables(char* places) noexcept { durables_ = reinterpret_cast<Durable*>(places); }

 private:
  Durable* durables_ = nullptr;
  std::array<bool, kMaxDurables> claimed_{};  // places FindDurable gave this receiver
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
