// The catch-up pause (DefaultBusTraits::CatchUp, sluice/bus_traits.hpp;
// docs/api.md, "The catch-up pause"), as the consumer core runs it: after
// the first empty poll that follows a batch, spin, so that a producer still
// publishing writes its next messages without the consumer taking its line
// back between them, and the next poll takes them all at one transfer.
//
// The next poll judges the pause: it paid if at least one message per
// kPausesPerMessage pauses, and two, gathered meanwhile (the producer
// publishes faster than a cross-core transfer, about that many pauses, would
// carry them one by one). One that did not pay (nothing came; or a producer
// that waits for the consumer, as a request waits for its reply; or one
// paced slower than the transfer, which lockstep keeps up with) doubles the
// next pause, up to CatchUp::kMostPauses (a pause shorter than the transfer
// cannot gather), and is skipped at the next 1, 5, 21, ... up to
// kMaxSkippedPauses catch-ups, so such a producer pays it rarely (8 times in
// its first 10,000 messages, then once in 16,384 catch-ups). One that paid
// ends the skipping.
//
// Consumer-private state, no ordering: it only times the consumer's next
// poll. With NoCatchUpPause (kMostPauses 0) the pacer is empty and its calls
// compile to nothing.
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

template <typename CatchUp, bool = (CatchUp::kMostPauses > 0)>
class CatchUpPacer {
 public:
  static constexpr std::uint32_t kPausesPerMessage = 8;
  static constexpr std::uint32_t kFirstPauses =
      CatchUp::kMostPauses < kPausesPerMessage ? CatchUp::kMostPauses : kPausesPerMessage;
  static constexpr std::uint16_t kMaxSkippedPauses = 16383;

  // After a batch of `count` messages.
  SLUICE_ALWAYS_INLINE void NoteTook(std::uint32_t count) noexcept {
    if (state_ == State::kJustPaused) {
      if (count >= pauses_ / kPausesPerMessage + 2) {
        skip_span_ = 0;
      } else {
        PauseDidNotPay();
      }
    }
    state_ = State::kJustTook;
  }

  // After a poll that found nothing (not one from inside a callback).
  SLUICE_ALWAYS_INLINE void PauseIfJustCaughtUp() noexcept {
    if (state_ == State::kIdle) return;
    if (state_ == State::kJustPaused) {
      PauseDidNotPay();
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

  void PauseDidNotPay() noexcept {
    pauses_ = pauses_ >= CatchUp::kMostPauses / 2 ? CatchUp::kMostPauses : 2 * pauses_;
    skip_span_ = skip_span_ >= kMaxSkippedPauses / 4
                     ? kMaxSkippedPauses
                     : static_cast<std::uint16_t>(4 * skip_span_ + 1);
    skips_left_ = skip_span_;
  }

  State state_ = State::kIdle;
  std::uint16_t skip_span_ = 0;
  std::uint16_t skips_left_ = 0;
  std::uint32_t pauses_ = kFirstPauses;
};

// No pause: nothing to keep, nothing to run.
template <typename CatchUp>
class CatchUpPacer<CatchUp, false> {
 public:
  SLUICE_ALWAYS_INLINE void NoteTook(std::uint32_t) noexcept {}
  SLUICE_ALWAYS_INLINE void PauseIfJustCaughtUp() noexcept {}
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
