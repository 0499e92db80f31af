// The publish API, written once for the bus, a registered Producer and a
// shared-memory producer (CRTP, as atomic_queue's AtomicQueueCommon): every
// call checks its input, makes a copy that may throw before anything is
// claimed, and hands the message to the one publish core
// (detail/publish/publish_core.hpp: Admit, AdmitBatch; the bus's AdmitWaiting) with
// the caller's source: the shared queue, its lane, or a segment's lane.
//
// Derived provides:
//   bool CanPublish() const      false: an invalid Producer (refuses, counts nothing)
//   PublishCore()                the publish core: the bus's core (a
//                                PublishCore), or a PublishCore itself
//   Source PublishSource()       where a publish goes (publish_core.hpp)
//   static constexpr bool kOffersBlocking (only for the base's PublishBlocking)
#pragma once

#include <chrono>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/detail/publish/publish_core.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/detail/wait/wake_signal.hpp"
#include "sluice/loan_pool.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Derived, typename Payload>
class PublishApi {
 public:
  // ---- Producers -----------------------------------------------------------
  // Each publish takes one payload alternative or the variant itself and
  // returns a PublishResult: true (contextually) if admitted; Outcome() says
  // why not (full for the priority, the lane full, closed, bad input). A
  // refused message is left to the caller (an rvalue argument is not moved
  // from). Shared queue: MPSC lock-free, SPSC wait-free; a Producer's lane:
  // wait-free. No allocation. The result is a value in a register.

  // MEDIUM priority, timestamped with Traits::Clock (not in BARE_METAL).
  template <typename Message>
  PublishResult Publish(Message&& message, std::uint32_t sender_id = 0) {
    return PublishOne<true>(std::forward<Message>(message), sender_id, MessagePriority::MEDIUM, 0);
  }

  // As Publish, with a priority. An out-of-range priority is rejected.
  template <typename Message>
  PublishResult PublishWithPriority(Message&& message, std::uint32_t sender_id,
                                    MessagePriority priority) {
    return PublishOne<true>(std::forward<Message>(message), sender_id, priority, 0);
  }

  // As PublishWithPriority, for a caller that retries a refused message: a
  // refusal for room (or a closed bus) is not counted anywhere, since the
  // message is not lost yet. The caller's last try, the one it gives up
  // after, is a PublishWithPriority, so a message finally lost is counted
  // once, and one finally admitted never counts as a drop. Bad input is
  // counted as PublishWithPriority counts it.
  template <typename Message>
  PublishResult PublishAttempt(Message&& message, std::uint32_t sender_id,
                               MessagePriority priority) {
    return PublishOne<true, false>(std::forward<Message>(message), sender_id, priority, 0);
  }

  // The caller supplies the timestamp: no clock read on the publish path.
  // Nanoseconds on the bus clock's time line (Traits::Clock::NowNanos(), or
  // NowMicros() * 1000 for a clock with only that), or 0 for none; a
  // negative one is stored as 0. A
  // std::chrono::nanoseconds, so an integer (a count of microseconds, as
  // before 0.4) does not compile: write std::chrono::nanoseconds(ns), or
  // pass a std::chrono::microseconds, which converts exactly.
  template <typename Message>
  PublishResult PublishFast(Message&& message, std::uint32_t sender_id,
                            std::chrono::nanoseconds timestamp,
                            MessagePriority priority = MessagePriority::MEDIUM) {
    return PublishOne<false>(std::forward<Message>(message), sender_id, priority,
                             StoredTimestamp(timestamp));
  }

  // Constructs a T from `args` in its slot (no copy or move of the message)
  // when T has a constructor from them that cannot throw. Otherwise the T is
  // built before a slot is claimed and moved in: when that constructor may
  // throw (so a claimed slot is always filled), or when T is an aggregate
  // initialised with braces. Timestamped with Traits::Clock (not in
  // BARE_METAL). As PublishWithPriority otherwise.
  template <typename T, typename... Args>
  PublishResult Emplace(std::uint32_t sender_id, MessagePriority priority, Args&&... args) {
    static_assert(kIsAlternative<T, Payload>,
                  "Sluice: Emplace<T> needs T to be exactly one alternative of the bus payload "
                  "variant");
    static_assert(std::is_constructible_v<T, Args&&...> || kBraceConstructible<T, Args&&...>,
                  "Sluice: Emplace<T> cannot construct T from these arguments");
    RequireNotLoanOnly<T>();
    if (!Self().CanPublish()) return Invalid(priority);
    auto source = Self().PublishSource();
    if (!IsValidPriority(priority)) return Self().PublishCore().Reject(source, priority);
    if constexpr (std::is_nothrow_constructible_v<T, Args&&...>) {
      auto make_payload = [&] {
        return Payload(std::in_place_type<T>, std::forward<Args>(args)...);
      };
      return Self().PublishCore().template Admit<true>(source, sender_id, priority, 0,
                                                       make_payload);
    } else if constexpr (std::is_constructible_v<T, Args&&...>) {
      return PublishOne<true>(T(std::forward<Args>(args)...), sender_id, priority, 0);
    } else {
      return PublishOne<true>(T{std::forward<Args>(args)...}, sender_id, priority, 0);
    }
  }

  // Publishes a loaned block (sluice/loan_pool.hpp; Loan<T> must be an
  // alternative of the payload): as PublishWithPriority, and an empty Loan
  // (the pool was exhausted) is refused like a full queue, kPoolEmpty,
  // counted in the bus's messages_dropped under `priority` (FULL_FEATURED;
  // from a Producer too, whose own dropped counts are its lane's refusals
  // for fill only), or kClosed in messages_refused_closed once the bus is
  // closed. A refused Loan stays with the caller, who drops it to hand the
  // block back.
  template <typename T>
  PublishResult PublishLoan(Loan<T>&& loan, std::uint32_t sender_id, MessagePriority priority) {
    static_assert(kIsAlternative<Loan<T>, Payload>,
                  "Sluice: PublishLoan needs Loan<T> to be exactly one alternative of the bus "
                  "payload variant");
    if (!Self().CanPublish()) return Invalid(priority);
    if (!loan && IsValidPriority(priority)) {
      auto source = Self().PublishSource();
      return Self().PublishCore().RefuseEmptyLoan(source, priority);
    }
    return PublishOne<true>(std::move(loan), sender_id, priority, 0);
  }

  // Publishes the messages of [first, last) in order with one claim per run
  // (one CAS with several producers) when the iterators are random access
  // (`last - first` compiles); any other range, which may be single pass
  // (std::istream_iterator, a generator), is walked once, each message its
  // own claim, with the same results and counts: as many as fit below the priority's
  // threshold, from the front. AdmittedCount() says how many were admitted;
  // the caller keeps the rest, every one of them counted as refused with
  // Outcome() (dropped, or refused as closed). A valueless variant ends the
  // batch: it is rejected and those after it are not attempted. Each has its
  // own msg_id; all share one clock reading (none in BARE_METAL). The
  // elements are copied (moved from with move iterators); their construction
  // must not throw (publish such types one by one). Consecutive in the queue
  // only per producer: other producers' messages may come before or after
  // each run, never inside it.
  template <typename Iterator>
  PublishResult PublishBatch(Iterator first, Iterator last, std::uint32_t sender_id,
                             MessagePriority priority = MessagePriority::MEDIUM) {
    using Reference = decltype(*first);
    using Value = std::decay_t<Reference>;
    static_assert(kPublishable<Value>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    constexpr bool kNothrowElement = [] {
      if constexpr (std::is_same_v<Value, Payload>) {
        return NothrowAlternatives<Payload, std::is_rvalue_reference_v<Reference>>::value;
      } else {
        return std::is_nothrow_constructible_v<Value, Reference>;
      }
    }();
    static_assert(kNothrowElement,
                  "Sluice: PublishBatch needs elements whose copy (or move) cannot throw; "
                  "publish such types one by one");
    RequireNotLoanOnly<Value>();
    if (!Self().CanPublish()) return Invalid(priority);
    auto source = Self().PublishSource();
    if (!IsValidPriority(priority)) return Self().PublishCore().Reject(source, priority);
    return Self().PublishCore().AdmitBatch(source, first, last, sender_id, priority);
  }

  // As PublishWithPriority, but when the queue is too full for `priority` it
  // waits up to `timeout` for room instead of being refused: it polls
  // Traits::Waiting::kPollsBeforePark times, then sleeps on its Parker until the
  // consumer has freed slots below the priority's threshold (the consumer
  // wakes it at the end of such a batch, judged by the mode and thresholds
  // then in force; no polling while asleep) or Close(). Admission is
  // unchanged: a LOW publisher waits until the queue holds fewer messages
  // than LOW's threshold and never takes the room kept for MEDIUM and HIGH.
  // Stamped when admitted. Outcome: kAdmitted, kTimedOut, kClosed, kRejected
  // (bad input) or kWouldDeadlock (inside this bus's own dispatch); the
  // message is moved from only if admitted. Any producer thread, never an
  // interrupt handler (it sleeps); not the consumer thread between batches
  // either, where it could only wait out its timeout. Needs a parker in the
  // traits (a compile error otherwise, and always with SLUICE_FREESTANDING).
  // Not lock-free: it waits for the consumer by design. The bus's call only.
  template <typename Message, typename Rep, typename Period>
  PublishResult PublishBlocking(Message&& message, std::uint32_t sender_id,
                                MessagePriority priority,
                                std::chrono::duration<Rep, Period> timeout) {
#if SLUICE_FREESTANDING
    static_assert(kDependentFalse<Message>,
                  "Sluice: PublishBlocking sleeps, which bare metal and interrupt handlers "
                  "cannot do; use PublishWithPriority and handle the refusal");
    (void)message, (void)sender_id, (void)timeout;
    return PublishResult(PublishOutcome::kRejected, priority);
#else
    using Value = std::decay_t<Message>;
    static_assert(Derived::kOffersBlocking,
                  "Sluice: PublishBlocking is the bus's call, not a Producer's: a lane has no "
                  "room signal (the consumer wakes waiting producers by the shared queue's "
                  "fill); retry the Producer's PublishWithPriority, or use the bus's "
                  "PublishBlocking");
    static_assert(!Derived::kOffersBlocking || Derived::Core::kCanPark,
                  "Sluice: PublishBlocking needs a parker in the bus traits (for example "
                  "sluice::SleepingConsumerTraits)");
    static_assert(kPublishable<Message>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    auto&& core = Self().PublishCore();
    auto source = Self().PublishSource();
    if (core.IsBadInput(message, priority)) return core.Reject(source, priority);
    if constexpr (!Derived::kOffersBlocking || !Derived::Core::kCanPark) {
      // Not reached (an assertion above fails); keeps the compiler from
      // adding errors of its own to the assertion's.
      return PublishResult(PublishOutcome::kRejected, priority);
    } else if constexpr (!std::is_nothrow_constructible_v<Value, Message&&>) {
      // As PublishOne: a copy that may throw is made before any claim.
      Value copy(std::forward<Message>(message));
      return PublishBlocking(std::move(copy), sender_id, priority, timeout);
    } else {
      auto make_payload = [&] { return core.MakePayload(std::forward<Message>(message)); };
      return core.AdmitWaiting(source, sender_id, priority, SaturatingNanos(timeout), make_payload);
    }
#endif
  }

 protected:
  template <typename Message>
  static constexpr bool kPublishable = std::is_same_v<std::decay_t<Message>, Payload> ||
                                       kIsAlternative<std::decay_t<Message>, Payload>;
  template <typename Message>
  static constexpr void RequireNotLoanOnly() noexcept {
    static_assert(!PublishedByLoanOnly<std::decay_t<Message>>::value,
                  "Sluice: a Loaned<T> is published with PublishLoan, from a Loan<T>()");
  }

 private:
  Derived& Self() noexcept { return static_cast<Derived&>(*this); }

  // A caller's timestamp as stored: a negative one as 0 (none). The top bit
  // of a stored timestamp is the bus clock's own (detail::ClockStamp).
  static std::uint64_t StoredTimestamp(std::chrono::nanoseconds timestamp) noexcept {
    const std::int64_t count = timestamp.count();
    return count < 0 ? 0 : static_cast<std::uint64_t>(count);
  }

  // An invalid Producer: refused, counted nowhere (it has no lane).
  static PublishResult Invalid(MessagePriority priority) noexcept {
    return PublishResult(PublishOutcome::kRejected, priority);
  }

  template <bool kReadClock, bool kCountRefusal = true, typename Message>
  PublishResult PublishOne(Message&& message, std::uint32_t sender_id, MessagePriority priority,
                           std::uint64_t timestamp_ns) {
    using Value = std::decay_t<Message>;
    static_assert(kPublishable<Message>,
                  "Sluice: a published message must be exactly one alternative of the "
                  "bus payload variant, or the variant itself");
    RequireNotLoanOnly<Message>();
    if (!Self().CanPublish()) return Invalid(priority);
    auto&& core = Self().PublishCore();
    auto source = Self().PublishSource();
    // Bad input is refused before anything else, a copy included.
    if (core.IsBadInput(message, priority)) return core.Reject(source, priority);
    if constexpr (!std::is_nothrow_constructible_v<Value, Message&&>) {
      // A copy that may throw is made before a slot is claimed, so a claimed
      // slot is always filled; the refusal path then wastes the copy.
      Value copy(std::forward<Message>(message));
      return PublishOne<kReadClock, kCountRefusal>(std::move(copy), sender_id, priority,
                                                   timestamp_ns);
    } else {
      auto make_payload = [&] { return core.MakePayload(std::forward<Message>(message)); };
      return core.template Admit<kReadClock, kCountRefusal>(source, sender_id, priority,
                                                            timestamp_ns, make_payload);
    }
  }
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
