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

// One lane's re-check: what the consumer last read of each ring's claims,
// up to which position it has judged each ring's messages, and from which
// position they are past its threshold. The consumer thread only.
class AdmissionRecheck {
 public:
  // A lane whose consumer positions are as `queue` has them now (made
  // anew, or taken over): nothing judged yet, so the first take reads.
  template <typename Queue>
  void Start(const Queue& queue) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      claims_read_[p] = queue.TakenIn(p);
      judged_until_[p] = claims_read_[p];
      past_limit_from_[p] = claims_read_[p];
    }
  }

  // Whether the front TryFront just returned from `queue` (the lane's) is
  // past its priority's threshold. The consumer reads a ring's claims when
  // it takes a position it has not judged. With `taken` the ring's
  // position then and `room` its priority's limit less the lower rings'
  // claims it last read and has not taken, the claims read past taken +
  // room are past (the last claimed: the ones admission would have
  // refused; each was claimed when the consumer had taken no more than
  // `taken`, so more than room were ahead of it), and the rest are fine.
  // So are the positions up to taken + min(room, stride) claimed after the
  // read: fewer than room were ahead of each when it was claimed. The next
  // read comes at the first position not judged, so a consumer that keeps
  // pace reads its producer's line once every `stride` messages of a ring,
  // not every message; a producer that skips admission in a burst right
  // after a read gets at most stride - 1 more past the threshold than a
  // read at once would have let through.
  //
  // A producer that keeps to admission never makes a message past its
  // limit: each message it claimed at priority p found fewer than p's
  // threshold claimed and not taken in its lane, those below p included,
  // all of them still held are among the claims read, and claims read
  // earlier are never more than there are; so only the producer's own
  // code, skipping the check, can get past it. A front at a position the
  // consumer judges that its ring never claimed (its producer wrote the
  // slot ahead of its claims) counts as past too.
  template <typename Queue>
  bool PastLimit(const Queue& queue, const AdmissionLimits& limits) noexcept {
    const std::size_t ring = queue.FrontRing();
    const Position taken = queue.TakenIn(ring);
    if (taken - judged_until_[ring] < kHalfRange) {
      const Position claims = queue.ClaimedIn(ring);
      claims_read_[ring] = claims;
      if (claims - taken - 1 >= kHalfRange) {  // never claimed
        judged_until_[ring] = taken;
        past_limit_from_[ring] = taken;
        return true;
      }
      Position below = 0;
      for (std::size_t p = 0; p < ring; ++p) {
        const Position read = claims_read_[p] - queue.TakenIn(p);
        below += read < kHalfRange ? read : 0;  // read before the last take: none
      }
      const Position limit = limits.fill[ring];
      const Position room = limit > below ? limit - below : 0;
      const Position ahead = room < limits.stride ? room : limits.stride;
      past_limit_from_[ring] = taken + room;
      judged_until_[ring] = claims - taken > ahead ? claims : taken + ahead;
    }
    return taken - past_limit_from_[ring] < kHalfRange;
  }

 private:
  // Positions compare within half their range (they wrap).
  static constexpr Position kHalfRange = ~Position{0} / 2;
  Position claims_read_[kPriorityCount] = {};
  Position judged_until_[kPriorityCount] = {};
  Position past_limit_from_[kPriorityCount] = {};
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
