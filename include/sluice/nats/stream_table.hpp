// Which streams a receiver remembers (StreamTracker's table): each keyed by
// its sender's origin, instance and subject, in one of two parts by the
// origin's trust, each part bounded on its own, so that streams made up in
// a flood fill the unknown part only. A full part takes a new stream only
// in place of its least recently heard one, and only if that one is idle.
// Standard library only; not thread-safe (the tracker's caller locks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_verdicts.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

struct StreamKey {
  std::uint64_t origin_id;
  std::uint64_t instance_id;
  std::string subject;
  bool operator<(const StreamKey& other) const {
    return std::tie(origin_id, instance_id, subject) <
           std::tie(other.origin_id, other.instance_id, other.subject);
  }
};

// A part's streams, least recently heard first (each stream's key; the
// map's nodes do not move).
using StreamOrder = std::list<const StreamKey*>;

// What the table keeps of each stream beside the tracker's own fields:
// a table's Stream type derives from it.
struct StreamPlace {
  std::size_t part = 0;
  StreamOrder::iterator place;      // in its part's order
  std::uint64_t last_heard_ns = 0;  // the caller's clock then
};

template <typename Stream>
class StreamTable {
 public:
  using Streams = std::map<StreamKey, Stream>;
  using iterator = typename Streams::iterator;
  using const_iterator = typename Streams::const_iterator;

  static constexpr std::size_t kKnownPart = 0;
  static constexpr std::size_t kUnknownPart = 1;
  static std::size_t PartOf(OriginTrust trust) noexcept {
    return trust == OriginTrust::kKnown ? kKnownPart : kUnknownPart;
  }
  static OriginTrust TrustOf(const Stream& stream) noexcept {
    return stream.part == kKnownPart ? OriginTrust::kKnown : OriginTrust::kUnknown;
  }

  // Each part's bound (0 reads as 1) and the idle time after which a full
  // part's least recently heard stream may be replaced.
  explicit StreamTable(const StreamTableLimits& limits) noexcept : idle_ns_(limits.idle_ns) {
    parts_[kKnownPart].most = limits.known == 0 ? 1 : limits.known;
    parts_[kUnknownPart].most = limits.unknown == 0 ? 1 : limits.unknown;
  }

  iterator begin() noexcept { return streams_.begin(); }
  iterator end() noexcept { return streams_.end(); }
  const_iterator begin() const noexcept { return streams_.begin(); }
  const_iterator end() const noexcept { return streams_.end(); }
  std::size_t size() const noexcept { return streams_.size(); }
  iterator find(const StreamKey& key) { return streams_.find(key); }
  const_iterator find(const StreamKey& key) const { return streams_.find(key); }

  // The key of a stream of this table.
  static const StreamKey& KeyOf(const Stream& stream) noexcept { return **stream.place; }

  // Whether part `part_index` holds fewer streams than its bound.
  bool HasSpace(std::size_t part_index) const noexcept {
    return parts_[part_index].count < parts_[part_index].most;
  }

  // Whether a new stream fits in part `part_index` at `now_ns`: it has
  // space, or its least recently heard stream is idle (and would go).
  bool HasRoom(std::size_t part_index, std::uint64_t now_ns) const {
    if (HasSpace(part_index) || parts_[part_index].order.empty()) return true;
    return IsIdle(streams_.find(*parts_[part_index].order.front())->second, now_ns);
  }

  // The stream a new one in the full part `part_index` would replace: its
  // least recently heard, if idle at `now_ns`; end() if none may go (or the
  // part has space).
  iterator Replaceable(std::size_t part_index, std::uint64_t now_ns) {
    const Part& part = parts_[part_index];
    if (HasSpace(part_index) || part.order.empty()) return streams_.end();
    const iterator oldest = streams_.find(*part.order.front());
    return IsIdle(oldest->second, now_ns) ? oldest : streams_.end();
  }

  // A new stream `key` in part `part_index` (which has space), last in its
  // order. The order's place first: if the map's insert then throws, the
  // place goes again, and the table is as it was.
  iterator Insert(StreamKey key, std::size_t part_index) {
    Part& part = parts_[part_index];
    const StreamOrder::iterator place = part.order.insert(part.order.end(), nullptr);
    iterator added;
#if SLUICE_HAS_EXCEPTIONS
    try {
#endif
      added = streams_.emplace(std::move(key), Stream{}).first;
#if SLUICE_HAS_EXCEPTIONS
    } catch (...) {
      part.order.erase(place);
      throw;
    }
#endif
    *place = &added->first;
    Stream& stream = added->second;
    stream.part = part_index;
    stream.place = place;
    ++part.count;
    return added;
  }

  iterator Erase(iterator it) {
    Part& part = parts_[it->second.part];
    part.order.erase(it->second.place);
    --part.count;
    return streams_.erase(it);
  }

  // `stream` was heard at `now_ns`: last in its part's order.
  void Heard(Stream& stream, std::uint64_t now_ns) noexcept {
    StreamOrder& order = parts_[stream.part].order;
    order.splice(order.end(), order, stream.place);
    stream.last_heard_ns = now_ns;
  }

 private:
  struct Part {
    std::size_t most = 1;
    std::size_t count = 0;
    StreamOrder order;
  };

  bool IsIdle(const Stream& stream, std::uint64_t now_ns) const noexcept {
    return now_ns >= stream.last_heard_ns && now_ns - stream.last_heard_ns >= idle_ns_;
  }

  std::uint64_t idle_ns_;
  std::array<Part, 2> parts_;
  Streams streams_;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
