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

// The admission thresholds as fills, read once at Create or takeover.
struct AdmissionLimits {
  Position fill[kPriorityCount] = {};
  void Set(const AdmissionThresholds& thresholds, Position capacity) noexcept {
    fill[0] = FillLimit(thresholds.low_percent, capacity);
    fill[1] = FillLimit(thresholds.medium_percent, capacity);
    fill[2] = FillLimit(thresholds.high_percent, capacity);
  }
};

// One lane's re-check: what the consumer last read of each ring's claims,
// and from which position each ring's messages are past its threshold.
// The consumer thread only.
class AdmissionRecheck {
 public:
  // A lane whose consumer positions are as `queue` has them now (made
  // anew, or taken over): nothing read yet, so the first take reads.
  template <typename Queue>
  void Start(const Queue& queue) noexcept {
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      claims_read_[p] = queue.TakenIn(p);
      past_limit_from_[p] = claims_read_[p];
    }
  }

  // Whether the front TryFront just returned from `queue` (the lane's) is
  // past its priority's threshold, by the claims this consumer last read
  // there. A producer that keeps to admission never makes one: each message
  // it claimed at priority p found fewer than p's threshold claimed and not
  // taken in its lane, those below p included, all of them still held are
  // among the claims read, and claims read earlier are never more than
  // there are; so only the producer's own code, skipping the check, can get
  // past it. The ones past are the last claimed (those admission would have
  // refused). A ring's claims are read again when the consumer has taken
  // every one it knew of, not on every message: the line they live on is
  // its producer's (a consumer that keeps pace still reads it nearly every
  // message; docs/ipc.md, "Measured", gives the cost). A front in a slot
  // its ring never claimed (its producer wrote the slot ahead of its
  // claims) counts as past too.
  template <typename Queue>
  bool PastLimit(const Queue& queue, const AdmissionLimits& limits) noexcept {
    const std::size_t ring = queue.FrontRing();
    const Position taken = queue.TakenIn(ring);
    if (taken - claims_read_[ring] < kHalfRange) {
      const Position claims = queue.ClaimedIn(ring);
      claims_read_[ring] = claims;
      if (claims - taken - 1 >= kHalfRange) return true;  // never claimed
      Position below = 0;
      for (std::size_t p = 0; p < ring; ++p) {
        const Position read = claims_read_[p] - queue.TakenIn(p);
        below += read < kHalfRange ? read : 0;  // read before the last take: none
      }
      const Position limit = limits.fill[ring];
      const Position room = limit > below ? limit - below : 0;
      past_limit_from_[ring] = claims - taken > room ? taken + room : claims;
    }
    return taken - past_limit_from_[ring] < kHalfRange;
  }

 private:
  // Positions compare within half their range (they wrap).
  static constexpr Position kHalfRange = ~Position{0} / 2;
  Position claims_read_[kPriorityCount] = {};
  Position past_limit_from_[kPriorityCount] = {};
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
