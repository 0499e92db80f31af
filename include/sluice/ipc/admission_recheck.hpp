// The consumer's second look at admission on one lane of a shared-memory
// bus (sluice/ipc/shm_lanes.hpp): its producer runs the admission check in
// its own process, so the consumer checks again, from its own copy of the
// thresholds, that no priority's backlog in the lane is past its threshold
// (docs/ipc.md, "Security").
#pragma once

#include <cstddef>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// The admission thresholds as fills, read once at Create or takeover, and
// how far past its last read of a ring's claims the consumer may take
// without reading them again (an eighth of the capacity, at least 1).
struct AdmissionLimits {
  Position fill[kPriorityCount] = {};
  Position stride = 1;
  void Set(const AdmissionThresholds& thresholds, Position capacity) noexcept {
    fill[0] = FillLimit(thresholds.low_percent, capacity);
    fill[1] = FillLimit(thresholds.medium_percent, capacity);
    fill[2] = FillLimit(thresholds.high_percent, capacity);
    stride = capacity / 8 > 1 ? capacity / 8 : 1;
  }
};

// One lane's re-check: up to which position the consumer has judged each
// ring's messages, and from which position they are past its threshold.
// The consumer thread only.
class AdmissionRecheck {
 public:
  // A lane whose consumer positions are as `queue` has them now (made
  // anew, or taken over): nothing judged yet, so the first take reads.
  template <typename Queue>
  void Start(const Queue& queue) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      judged_until_[p] = queue.TakenIn(p);
      past_limit_from_[p] = judged_until_[p];
    }
  }

  // Whether the front TryFront just returned from `queue` (the lane's) is
  // past its priority's threshold. The consumer reads a ring's claims, and
  // those of the rings below it, when it takes a position of the ring it
  // has not judged. With `taken` the ring's position then and `room` its
  // priority's limit less the lower rings' backlog (claimed and not
  // taken), the ring's claims past taken + room are past (the last
  // claimed: the ones admission would have refused, as far as the claims
  // read can tell), and the rest are fine. So are the positions up to
  // taken + min(room, stride) claimed after the read, claimed or not: a
  // message claimed there found fewer than room of its ring ahead of it.
  // The next read comes at the first position not judged, so a consumer
  // that keeps pace reads its producer's lines once every `stride`
  // messages of a ring, not every message. The price: a producer that
  // skips admission gets up to stride - 1 messages of a ring more
  // dispatched per read than a read at every catch-up would let through
  // (claimed right after a read, or written into slots it never claimed).
  //
  // A producer that keeps to admission never makes a message past its
  // limit: its lane's backlog at priority p and below never exceeds p's
  // threshold (each message it admits at q <= p found fewer than q's
  // threshold, at most p's, claimed and not taken), claims only grow and
  // the consumer takes nothing while it reads, so the backlog it counts
  // from reads made one after another is at most the backlog at the last
  // of them. Only the producer's own code, skipping the check, can get
  // past it. A front at a position the read judges that its ring never
  // claimed (its producer wrote the slot ahead of its claims) counts as
  // past too.
  template <typename Queue>
  SLUICE_ALWAYS_INLINE bool PastLimit(const Queue& queue, const AdmissionLimits& limits) noexcept {
    const std::size_t ring = queue.FrontRing();
    const Position taken = queue.TakenIn(ring);
    if (taken - judged_until_[ring] < kHalfRange) return Judge(queue, limits, ring, taken);
    return taken - past_limit_from_[ring] < kHalfRange;
  }

 private:
  // A read of ring `ring`'s claims and those below it, at position `taken`
  // (see PastLimit): once a stride, so out of the per-message path.
  template <typename Queue>
  SLUICE_NOINLINE bool Judge(const Queue& queue, const AdmissionLimits& limits, std::size_t ring,
                             Position taken) noexcept {
    const Position claims = queue.ClaimedIn(ring);
    if (claims - taken - 1 >= kHalfRange) {  // never claimed
      judged_until_[ring] = taken;
      past_limit_from_[ring] = taken;
      return true;
    }
    // The rings below, read now too: their backlog counts against this
    // ring's threshold, and HIGH is judged before LOW is taken, so a count
    // from an earlier read would miss what was claimed since.
    Position below = 0;
    for (std::size_t p = 0; p < ring; ++p) {
      const Position backlog = queue.ClaimedIn(p) - queue.TakenIn(p);
      // More than a ring holds only from claims written wrong: room 0.
      below += backlog <= kCapacityBound ? backlog : kCapacityBound;
    }
    const Position limit = limits.fill[ring];
    const Position room = limit > below ? limit - below : 0;
    const Position ahead = room < limits.stride ? room : limits.stride;
    past_limit_from_[ring] = taken + room;
    judged_until_[ring] = claims - taken > ahead ? claims : taken + ahead;
    return taken - past_limit_from_[ring] < kHalfRange;
  }

  // Positions compare within half their range (they wrap).
  static constexpr Position kHalfRange = ~Position{0} / 2;
  // A backlog past any ring's capacity (claims behind the consumer, or far
  // ahead of it) counts as this much: more than any threshold, no wrap.
  static constexpr Position kCapacityBound = kHalfRange / 4;
  Position judged_until_[kPriorityCount] = {};
  Position past_limit_from_[kPriorityCount] = {};
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
