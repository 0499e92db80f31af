// The catch-up pause (DefaultBusTraits::CatchUp, sluice/bus_traits.hpp;
// docs/api.md, "The catch-up pause"), as the consumer core runs it: after
// the first empty poll that follows a batch, spin, so that a producer still
// publishing writes its next messages without the consumer taking its line
// back between them, and the next poll takes them all at one transfer.
//
// The next poll judges the pause. It paid if the messages that gathered
// meanwhile reach the least of: one per kPausesPerMessage pauses plus two
// (the producer publishes faster than a cross-core transfer, about that
// many pauses, would carry them one by one), a quarter of the queue's room,
// and the batch's limit. One that did not pay (nothing came; or a producer
// that waits for the consumer, as a request waits for its reply; or one
// paced slower than the transfer, which lockstep keeps up with) doubles the
// next pause, up to CatchUp::kMostPauses (a pause shorter than the transfer
// cannot gather), and is skipped at the next 1, 5, 21, ... up to
// kMaxSkippedPauses catch-ups, so such a producer pays it rarely (8 times in
// its first 10,000 messages, then once in 16,384 catch-ups). One that paid
// ends the skipping; one after which the batch took a quarter of the room or
// its limit halves the next pause, so that a pause never lets the queue fill
// far (a quarter is below every priority's default admission threshold).
//
// A poll never pauses while a batch of any bus, or a wait over several
// buses (WaitSet::ProcessBatchWait, the shared-memory bus's
// ProcessBatchWait), runs on its thread (CatchUpHold): a callback that polls
// another bus, or a wait that polls every bus in turn, would hold up the
// rest for it.
//
// Consumer-private state, no ordering: it only times the consumer's next
// poll (the hold count is thread-local). With NoCatchUpPause (kMostPauses 0)
// the pacer keeps nothing; hosted, its batches still count themselves.
// On bare metal only NoCatchUpPause is allowed and nothing is counted.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// The traits' CatchUp; NoCatchUpPause for traits that name none (the
// shared-memory bus's consumer traits name theirs).
template <typename Traits, typename = void>
struct CatchUpOf {
  using Type = NoCatchUpPause;
};
template <typename Traits>
struct CatchUpOf<Traits, std::void_t<typename Traits::CatchUp>> {
  using Type = typename Traits::CatchUp;
};

#if !SLUICE_FREESTANDING
// How many batches or multi-bus waits run on this thread now (CatchUpHold).
inline std::uint32_t& CatchUpHolds() noexcept {
  static thread_local std::uint32_t holds = 0;
  return holds;
}
// Around each batch of any bus (a callback's poll of another bus must not
// pause): counted by hand, not by a CatchUpHold, whose destructor cost the
// batch's loop registers.
SLUICE_ALWAYS_INLINE void EnterCatchUpBatch() noexcept { ++CatchUpHolds(); }
SLUICE_ALWAYS_INLINE void LeaveCatchUpBatch() noexcept { --CatchUpHolds(); }
// While one lives, no poll on this thread pauses.
class CatchUpHold {
 public:
  CatchUpHold() noexcept { ++CatchUpHolds(); }
  ~CatchUpHold() { --CatchUpHolds(); }
  CatchUpHold(const CatchUpHold&) = delete;
  CatchUpHold& operator=(const CatchUpHold&) = delete;
};
#else
// Bare metal has no pause (NoCatchUpPause only) and nothing to hold.
class CatchUpHold {};
SLUICE_ALWAYS_INLINE void EnterCatchUpBatch() noexcept {}
SLUICE_ALWAYS_INLINE void LeaveCatchUpBatch() noexcept {}
#endif

// The room a front's batch draws from (its ring's capacity), for the pause's
// limit: Front::kCatchUpRoom, or no limit.
template <typename Front, typename = void>
struct CatchUpRoomOf {
  static constexpr Position kValue = ~Position{0};
};
template <typename Front>
struct CatchUpRoomOf<Front, std::void_t<decltype(Front::kCatchUpRoom)>> {
  static constexpr Position kValue = Front::kCatchUpRoom;
};

template <typename CatchUp, bool = (CatchUp::kMostPauses > 0)>
class CatchUpPacer;

#if SLUICE_FREESTANDING
template <typename CatchUp>
class CatchUpPacer<CatchUp, true> {
  static_assert(sizeof(CatchUp) == 0,
                "Sluice: the catch-up pause keeps thread-local state; on bare metal use "
                "`using CatchUp = sluice::NoCatchUpPause;`");
};
#else
// Packed: its six bytes fit in the consumer core's padding after
// `dispatching_` whatever else the core keeps (consume_core.hpp).
#pragma pack(push, 1)
template <typename CatchUp>
class CatchUpPacer<CatchUp, true> {
  static_assert(CatchUp::kMostPauses <= 65535, "Sluice: CatchUpPause allows at most 65,535 pauses");

 public:
  static constexpr std::uint32_t kPausesPerMessage = 8;
  static constexpr std::uint16_t kFirstPauses = static_cast<std::uint16_t>(
      CatchUp::kMostPauses < kPausesPerMessage ? CatchUp::kMostPauses : kPausesPerMessage);
  static constexpr std::uint16_t kMaxSkippedPauses = 16383;

  // After a batch of `count` messages, at most `max_messages`, from a queue
  // of `room` slots.
  SLUICE_ALWAYS_INLINE void NoteTook(std::uint32_t count, std::uint32_t max_messages,
                                     Position room) noexcept {
    if (state_ == State::kJustPaused) Judge(count, max_messages, room);
    state_ = State::kJustTook;
  }

  // A wait that ended with nothing taken: an empty call, which never
  // pauses and after which the next empty poll does not either.
  void NoteEmptyWait() noexcept {
    if (state_ == State::kJustPaused) PauseDidNotPay();
    state_ = State::kIdle;
  }

  // After a poll that found nothing (not one from inside a callback).
  SLUICE_ALWAYS_INLINE void PauseIfJustCaughtUp() noexcept {
    if (state_ == State::kIdle) return;
    if (state_ == State::kJustPaused) {
      PauseDidNotPay();
      state_ = State::kIdle;
      return;
    }
    // Inside a batch or a multi-bus wait: not a catch-up of this bus's
    // own loop (no pause, no skip used up).
    if (CatchUpHolds() != 0) {
      state_ = State::kIdle;
      return;
    }
    if (skips_left_ > 0) {
      --skips_left_;
      state_ = State::kIdle;
      return;
    }
    CatchUp::Pause(pauses_);
    state_ = State::kJustPaused;
  }

 private:
  enum class State : std::uint8_t { kIdle, kJustTook, kJustPaused };

  void Judge(std::uint32_t count, std::uint32_t max_messages, Position room) noexcept {
    const Position quarter = room / 4 > 0 ? room / 4 : 1;
    const bool full = count >= quarter || count >= max_messages;
    if (full || count >= pauses_ / kPausesPerMessage + 2) {
      skip_level_ = 0;
      if (full && pauses_ > 1) pauses_ = static_cast<std::uint16_t>(pauses_ / 2);
    } else {
      PauseDidNotPay();
    }
  }

  void PauseDidNotPay() noexcept {
    pauses_ = static_cast<std::uint16_t>(pauses_ >= CatchUp::kMostPauses / 2 ? CatchUp::kMostPauses
                                                                             : 2 * pauses_);
    if (skip_level_ < kTopSkipLevel) ++skip_level_;
    skips_left_ = SkipSpan(skip_level_);
  }

  // The catch-ups skipped after the level-th pause in a row that did not
  // pay: 0, 1, 5, 21, ... ((4^level - 1) / 3), at most kMaxSkippedPauses.
  static constexpr std::uint16_t SkipSpan(std::uint8_t level) noexcept {
    const std::uint32_t span = ((std::uint32_t{1} << (2 * level)) - 1) / 3;
    return static_cast<std::uint16_t>(span < kMaxSkippedPauses ? span : kMaxSkippedPauses);
  }
  static constexpr std::uint8_t kTopSkipLevel = 8;  // SkipSpan(8) = 21,845: the cap
  static_assert(SkipSpan(kTopSkipLevel) == kMaxSkippedPauses &&
                SkipSpan(kTopSkipLevel - 1) < kMaxSkippedPauses);

  // Six bytes, so that they fit in the consumer core's padding.
  State state_ = State::kIdle;
  std::uint8_t skip_level_ = 0;
  std::uint16_t pauses_ = kFirstPauses;
  std::uint16_t skips_left_ = 0;
};
#pragma pack(pop)
#endif

// No pause: nothing to keep (its batches still count themselves, in the
// consumer core, so that a bus with the pause polled from their callbacks
// does not pause either).
template <typename CatchUp>
class CatchUpPacer<CatchUp, false> {
 public:
  void NoteEmptyWait() noexcept {}
  SLUICE_ALWAYS_INLINE void NoteTook(std::uint32_t, std::uint32_t, Position) noexcept {}
  SLUICE_ALWAYS_INLINE void PauseIfJustCaughtUp() noexcept {}
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
