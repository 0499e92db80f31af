// What every publish returns: admitted, or why not. One byte of outcome and
// one of priority (and a count, for PublishBatch), returned in a register:
// it costs what a bool costs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class PublishOutcome : std::uint8_t {
  // In the queue: the consumer will dispatch it.
  kAdmitted = 0,
  // The queue holds its priority's threshold or more (the bus's thresholds
  // on the shared queue's fill): a drop, counted in messages_dropped under
  // that priority (FULL_FEATURED). Priority() names it.
  kRefusedFull = 1,
  // As kRefusedFull, on a registered producer's own lane (the thresholds on
  // the lane's fill): counted in that lane's messages_dropped.
  kLaneFull = 2,
  // PublishLoan of an empty Loan: the loan pool was exhausted. Counted in
  // messages_dropped under Priority() (FULL_FEATURED).
  kPoolEmpty = 3,
  // The bus is closed: nothing will be admitted again. Counted in
  // messages_refused_closed.
  kClosed = 4,
  // Bad input (a valueless variant, an unknown priority, an invalid
  // Producer); never admitted. Counted in messages_rejected (an invalid
  // Producer counts nothing).
  kRejected = 5,
  // PublishBlocking: no room below the priority's threshold before the
  // timeout. Counted in messages_dropped (FULL_FEATURED), once per call.
  kTimedOut = 6,
  // PublishBlocking from inside this bus's own dispatch with no room: the
  // room could only come from the batch the call is part of, so it does not
  // wait. Counted in messages_dropped (FULL_FEATURED).
  kWouldDeadlock = 7,
};

constexpr const char* ToString(PublishOutcome outcome) noexcept {
  switch (outcome) {
    case PublishOutcome::kAdmitted:
      return "admitted";
    case PublishOutcome::kRefusedFull:
      return "refused: queue at its threshold";
    case PublishOutcome::kLaneFull:
      return "refused: lane at its threshold";
    case PublishOutcome::kPoolEmpty:
      return "refused: loan pool empty";
    case PublishOutcome::kClosed:
      return "closed";
    case PublishOutcome::kRejected:
      return "rejected";
    case PublishOutcome::kTimedOut:
      return "timed out";
    case PublishOutcome::kWouldDeadlock:
      return "would deadlock";
  }
  return "invalid";
}

// The result of a publish. Contextually convertible to bool (true: admitted),
// so `if (!bus.Publish(m))` reads as before; Outcome() says why not.
// PublishBatch: AdmittedCount() messages from the front were admitted and
// Outcome() says why the rest was not (kAdmitted when none was left).
class [[nodiscard]] PublishResult {
 public:
  constexpr PublishResult() noexcept = default;
  constexpr PublishResult(PublishOutcome outcome, MessagePriority priority,
                          std::uint32_t admitted = 0) noexcept
      : admitted_(admitted), outcome_(outcome), priority_(priority) {}
  static constexpr PublishResult MakeAdmitted(MessagePriority priority) noexcept {
    return PublishResult(PublishOutcome::kAdmitted, priority, 1);
  }

  // True when the message was admitted (for PublishBatch: every message).
  // Explicit: `if (!bus.Publish(m))` reads as it did when publish returned a
  // bool; `bool ok = bus.Publish(m).IsAdmitted();` where a bool is stored.
  constexpr explicit operator bool() const noexcept { return IsAdmitted(); }
  // `bool ok = bus.Publish(m);` (or passing a result where a bool is
  // expected) picks this conversion, as the explicit one does not apply
  // there, and fails with a hint instead of a bare "cannot convert". A test
  // (`if (result)`, `!result`, `static_cast<bool>(result)`) prefers the
  // explicit operator above, which is not a template.
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, bool>>>
  constexpr operator T() const noexcept {
    static_assert(!std::is_same_v<T, bool>,
                  "Sluice: a PublishResult does not convert to bool implicitly; write `bool ok = "
                  "bus.Publish(m).IsAdmitted();` (or test it: `if (bus.Publish(m))`), and see "
                  "Outcome() for why a message was not admitted");
    return IsAdmitted();
  }
  constexpr bool IsAdmitted() const noexcept { return outcome_ == PublishOutcome::kAdmitted; }
  constexpr PublishOutcome Outcome() const noexcept { return outcome_; }
  // The priority the publish asked for (the one refused, when refused).
  constexpr MessagePriority Priority() const noexcept { return priority_; }
  // How many were admitted: 0 or 1, or PublishBatch's count.
  constexpr std::uint32_t AdmittedCount() const noexcept { return admitted_; }

  // A drop by admission: the queue, the lane or the loan pool was too full
  // for the priority (the statistics count it in messages_dropped).
  constexpr bool Dropped() const noexcept {
    return outcome_ == PublishOutcome::kRefusedFull || outcome_ == PublishOutcome::kLaneFull ||
           outcome_ == PublishOutcome::kPoolEmpty || outcome_ == PublishOutcome::kTimedOut ||
           outcome_ == PublishOutcome::kWouldDeadlock;
  }
  constexpr bool Closed() const noexcept { return outcome_ == PublishOutcome::kClosed; }
  constexpr bool Rejected() const noexcept { return outcome_ == PublishOutcome::kRejected; }

  // Writes ToString(result) to a standard stream, so a test framework
  // prints a result by its outcome. A template on basic_ostream: an
  // operator<< of the user's own for PublishResult (a better or equal
  // match for every stream) is still the one chosen.
  template <typename CharT, typename CharTraits>
  friend std::basic_ostream<CharT, CharTraits>& operator<<(
      std::basic_ostream<CharT, CharTraits>& stream, PublishResult result) {
    return stream << ToString(result.outcome_);
  }

  friend constexpr bool operator==(PublishResult result, PublishOutcome outcome) noexcept {
    return result.outcome_ == outcome;
  }
  friend constexpr bool operator!=(PublishResult result, PublishOutcome outcome) noexcept {
    return result.outcome_ != outcome;
  }
  friend constexpr bool operator==(PublishOutcome outcome, PublishResult result) noexcept {
    return result.outcome_ == outcome;
  }
  friend constexpr bool operator!=(PublishOutcome outcome, PublishResult result) noexcept {
    return result.outcome_ != outcome;
  }

 private:
  std::uint32_t admitted_ = 0;
  PublishOutcome outcome_ = PublishOutcome::kRejected;
  MessagePriority priority_ = MessagePriority::MEDIUM;
};

static_assert(sizeof(PublishResult) <= 8, "a PublishResult travels in one register");

constexpr const char* ToString(PublishResult result) noexcept { return ToString(result.Outcome()); }

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
