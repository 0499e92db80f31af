// The one publish core: every publish of every bus (the in-process bus, a
// registered Producer, a shared-memory producer) is admitted, counted,
// written and published here, through the calls of detail/publish/publish_api.hpp.
// What differs between buses is the source a publish goes to, which the
// core takes as a template argument:
//
//   using Target, Clock              the queue, the stamp's clock
//   kFull, kSlots                    the outcome of a fill refusal; the most one
//                                    claim takes
//   Target& Slots()                  TryClaim, TryClaimRun, Storage, Publish
//   PerformanceMode Mode()           the mode in force (read once a publish)
//   Position Limit(mode, priority)   the fill a claim must stay below
//   bool Enter(), void Leave()       a publish enters and leaves the source
//   bool ClosedAfterRefusal()        whether a refused claim met a closed queue
//   void LeftUnadmitted()            a publish that admitted nothing left
//   void Notify()                    wakes the consumer after a publish
//   std::uint16_t Lane()             MessageHeader::lane of its messages
//   kKeeps, Counters(), NoteRefusedFill(limit), Watcher()
//                                    what observation keeps and who else
//                                    sees it (detail/observe/observation.hpp,
//                                    where every event of a publish goes)
//
// Every function is static: the core keeps no state of its own, so a bus
// and a producer in another process share it without sharing memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// Whether `last - first` compiles: random access (a pointer, std::vector,
// std::array, std::deque), so multi-pass, which PublishBatch's runs need to
// look ahead. Told apart without <iterator>'s categories, which bring
// <string> into the core.
template <typename Iterator, typename = void>
inline constexpr bool kSubtractableIterator = false;
template <typename Iterator>
inline constexpr bool kSubtractableIterator<
    Iterator,
    std::void_t<decltype(std::declval<const Iterator&>() - std::declval<const Iterator&>())>> =
    true;

// A message type that only a loan may publish (a shared-memory bus's
// Loaned<T>, whose block number names memory of the producer's lane): a
// compile error in every other publish call (PublishApi), and bad input
// when it comes inside the payload variant. Specialised next to the type.
template <typename T>
struct PublishedByLoanOnly : std::false_type {};

template <typename Payload>
class PublishCore {
  // Entry i: alternative i is published by loan only.
  template <std::size_t... kIndex>
  static constexpr std::array<bool, sizeof...(kIndex)> LoanOnly(
      std::index_sequence<kIndex...>) noexcept {
    return {PublishedByLoanOnly<std::variant_alternative_t<kIndex, Payload>>::value...};
  }
  static constexpr std::array<bool, std::variant_size_v<Payload>> kLoanOnly =
      LoanOnly(std::make_index_sequence<std::variant_size_v<Payload>>{});
  template <std::size_t... kIndex>
  static constexpr bool AnyLoanOnly(std::index_sequence<kIndex...>) noexcept {
    return (PublishedByLoanOnly<std::variant_alternative_t<kIndex, Payload>>::value || ...);
  }
  static constexpr bool kAnyLoanOnly =
      AnyLoanOnly(std::make_index_sequence<std::variant_size_v<Payload>>{});

 public:
  using Envelope = MessageEnvelope<Payload>;

  // A payload no publish may carry: valueless (a throwing emplace left it
  // naming no type), or holding an alternative only a loan publishes. The
  // second test is compiled only for payloads that have such alternatives.
  static bool IsBadPayload(const Payload& payload) noexcept {
    if constexpr (kAnyLoanOnly) {
      const std::size_t index = payload.index();
      if (index < kLoanOnly.size() && kLoanOnly[index]) return true;
    }
    return payload.valueless_by_exception();
  }

  // Bad input: a variant made valueless by a throwing emplace (it names no
  // type), or an unknown priority.
  template <typename Message>
  static bool IsBadInput(const Message& message, MessagePriority priority) noexcept {
    bool bad = !IsValidPriority(priority);
    if constexpr (std::is_same_v<std::decay_t<Message>, Payload>) {
      bad = bad || IsBadPayload(message);
    }
    return bad;
  }

  template <typename Source>
  static PublishResult Reject(Source& source, MessagePriority priority) noexcept {
    CountRejected(source, priority);
    return PublishResult(PublishOutcome::kRejected, priority);
  }
  // Bad input, counted where its source counts and observed.
  template <typename Source>
  static void CountRejected(Source& source, MessagePriority priority) noexcept {
    ObservePublish::Rejected(source, priority);
  }

  // The refusal rule, for every publish: `count` messages refused with
  // `outcome`, counted where their source counts (closed in every mode, a
  // drop only in FULL_FEATURED).
  template <typename Source>
  static PublishResult Refuse(Source& source, PublishOutcome outcome, PerformanceMode mode,
                              MessagePriority priority, Position count,
                              std::uint32_t admitted = 0) noexcept {
    ObservePublish::Refused(source, outcome, mode, priority, count);
    return PublishResult(outcome, priority, admitted);
  }

  // The one envelope write: the header, filled in place (FillHeader), and
  // the payload `make_payload()` returns (a prvalue: constructed in the
  // slot, no copy or move). MakeHeader gives the observer the same header
  // after the publish, only when there is one (ObservePublish::Admitted),
  // with the stamp in nanoseconds (a deferred one converted: StampNanos).
  // kOneWord: priority, counted and lane are written as one 4-byte word of
  // the header's object representation, the same bytes: one store instead
  // of three where all but `counted` are constants and `counted` is known
  // only at run time (OneWordHeader: a lane that is a constant, a mode set
  // at run time). GCC merges the stores of constants by itself, and a lane
  // known only at run time is cheaper stored on its own.
  template <bool kOneWord = false>
  static void FillHeader(MessageHeader& header, Position id, std::uint64_t timestamp_ns,
                         std::uint32_t sender_id, MessagePriority priority, bool counted,
                         std::uint16_t lane) noexcept {
    header.msg_id = id;
    header.timestamp_ns = timestamp_ns;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if constexpr (kOneWord) {
      static_assert(
          std::is_trivially_copyable_v<MessageHeader> && std::is_standard_layout_v<MessageHeader> &&
              sizeof(MessageHeader) == 24 && offsetof(MessageHeader, sender_id) == 16 &&
              offsetof(MessageHeader, priority) == 20 && offsetof(MessageHeader, counted) == 21 &&
              offsetof(MessageHeader, lane) == 22 && sizeof(MessagePriority) == 1 &&
              sizeof(bool) == 1,
          "FillHeader writes priority, counted and lane as one word");
      header.sender_id = sender_id;
      const std::uint32_t word = std::uint32_t{static_cast<std::uint8_t>(priority)} |
                                 std::uint32_t{counted} << 8 | std::uint32_t{lane} << 16;
      std::memcpy(reinterpret_cast<unsigned char*>(&header) + offsetof(MessageHeader, priority),
                  &word, sizeof word);
      return;
    }
#endif
    header.sender_id = sender_id;
    header.priority = priority;
    header.counted = counted;
    header.lane = lane;
  }
  static MessageHeader MakeHeader(Position id, std::uint64_t timestamp_ns, std::uint32_t sender_id,
                                  MessagePriority priority, bool counted,
                                  std::uint16_t lane) noexcept {
    MessageHeader header;
    FillHeader(header, id, timestamp_ns, sender_id, priority, counted, lane);
    return header;
  }
  // Whether `Source::Lane()` is a constant expression (the shared queue's
  // 0) and the mode is not fixed at compile time (kModeIsFixed false).
  template <typename Source, typename = void>
  struct OneWordHeader : std::false_type {};
  template <typename Source>
  struct OneWordHeader<Source, std::void_t<std::integral_constant<std::uint16_t, Source::Lane()>,
                                           std::integral_constant<bool, Source::kModeIsFixed>>>
      : std::bool_constant<!Source::kModeIsFixed> {};
  template <typename Source, typename MakePayloadFn>
  static Envelope* WriteEnvelope(void* storage, Position id, std::uint64_t timestamp_ns,
                                 std::uint32_t sender_id, MessagePriority priority, bool counted,
                                 std::uint16_t lane, MakePayloadFn& make_payload) noexcept {
    MessageHeader header;
    FillHeader<OneWordHeader<Source>::value>(header, id, timestamp_ns, sender_id, priority, counted,
                                             lane);
    return new (storage) Envelope{header, make_payload()};
  }

  // Every single publish: claims a slot of `source` under admission, counts,
  // writes the envelope and publishes it. `priority` is valid; `make_payload`
  // must not throw (a claimed slot is always filled). kReadClock: stamps the
  // bus clock (not in BARE_METAL), read before the claim to keep the
  // claimed-but-unpublished window (which holds up the consumer) short.
  // kCountRefusal false: a refusal is left uncounted (PublishBlocking counts
  // one per call, not one per attempt). Shared queue: lock-free (MPSC),
  // wait-free (SPSC); a lane: wait-free.
  template <bool kReadClock, bool kCountRefusal = true, typename Source, typename MakePayloadFn>
  static PublishResult Admit(Source& source, std::uint32_t sender_id, MessagePriority priority,
                             std::uint64_t timestamp_ns, MakePayloadFn& make_payload) noexcept {
    const PerformanceMode mode = source.Mode();
    if constexpr (kReadClock) {
      timestamp_ns = mode == PerformanceMode::BARE_METAL ? 0 : ClockStamp<typename Source::Clock>();
    }
    if (!source.Enter()) {
      source.LeftUnadmitted();
      return kCountRefusal ? Refuse(source, PublishOutcome::kClosed, mode, priority, 1)
                           : PublishResult(PublishOutcome::kClosed, priority);
    }
    typename Source::Target::Claim claim;
    const Position limit = source.Limit(mode, priority);
    if (!source.Slots().TryClaim(limit, priority, &claim)) {
      source.Leave();
      source.LeftUnadmitted();
      const PublishOutcome outcome =
          source.ClosedAfterRefusal() ? PublishOutcome::kClosed : Source::kFull;
      if (outcome == Source::kFull) ObservePublish::RefusedForFill(source, limit);
      return kCountRefusal ? Refuse(source, outcome, mode, priority, 1)
                           : PublishResult(outcome, priority);
    }
    // Counted before the message becomes visible (ObservePublish::Claimed).
    const bool counted = ObservePublish::Counts<Source>(mode);
    if (counted) ObservePublish::Claimed(source, priority, 1);
    const Envelope* written = WriteEnvelope<Source>(
        source.Slots().Storage(claim), Source::Target::MessageId(claim), timestamp_ns, sender_id,
        priority, counted, source.Lane(), make_payload);
    const std::size_t type_index = ObservePublish::TypeIndex(source, *written);
    source.Slots().Publish(claim);
    source.Leave();
    // SYNC POINT WRITE (W): after the slot's release store, the fence and
    // the waiter load of the consumer's signal, the bus's own or its
    // WaitSet's (sluice/wait_set.hpp): whichever its consumer sleeps on.
    source.Notify();
    ObservePublish::Admitted(
        source,
        [&] {
          return MakeHeader(Source::Target::MessageId(claim),
                            StampNanos<typename Source::Clock>(timestamp_ns), sender_id, priority,
                            counted, source.Lane());
        },
        type_index);
    return PublishResult::MakeAdmitted(priority);
  }

  // PublishBlocking's rule, for every bus: one try as Admit (stamped when
  // admitted, a refusal not counted), then `wait_for_room(try_admit)`, the
  // bus's wait for room, which calls `try_admit` as room comes and returns
  // kAdmitted once a try admitted, else why it ended (kClosed, kTimedOut,
  // kWouldDeadlock); that refusal is counted once, where the source counts.
  template <typename Source, typename MakePayloadFn, typename WaitForRoom>
  static PublishResult AdmitWaiting(Source& source, std::uint32_t sender_id,
                                    MessagePriority priority, MakePayloadFn& make_payload,
                                    WaitForRoom&& wait_for_room) {
    PublishResult result;
    const auto try_admit = [&] {
      result = Admit<true, false>(source, sender_id, priority, 0, make_payload);
      return static_cast<bool>(result);
    };
    if (try_admit()) return result;
    const PublishOutcome outcome = wait_for_room(try_admit);
    if (outcome == PublishOutcome::kAdmitted) return result;
    return Refuse(source, outcome, source.Mode(), priority, 1);
  }

  // PublishBatch's core: the messages of [first, last) in order, each claim
  // a run of consecutive slots (one CAS with several producers), as many as
  // fit below the priority's threshold, from the front; stops at the first
  // message not admitted and counts it and every one after it as refused
  // with the run's outcome (a valueless variant: that one as rejected, the
  // rest as not attempted). All share one clock reading (none in BARE_METAL).
  template <typename Source, typename Iterator>
  static PublishResult AdmitBatch(Source& source, Iterator first, Iterator last,
                                  std::uint32_t sender_id, MessagePriority priority) noexcept {
    using Value = std::decay_t<decltype(*first)>;
    if constexpr (!kSubtractableIterator<Iterator>) {
      // A range that may be single pass (std::istream_iterator, a
      // generator) cannot be looked ahead into: walked once, one claim per
      // message.
      return AdmitEach(source, first, last, sender_id, priority);
    }
    const PerformanceMode mode = source.Mode();
    const std::uint64_t timestamp_ns =
        mode == PerformanceMode::BARE_METAL ? 0 : ClockStamp<typename Source::Clock>();
    const bool counted = ObservePublish::Counts<Source>(mode);
    std::uint32_t admitted = 0;
    while (first != last) {
      // The next run to claim: at most a ring's worth, ending before a
      // valueless variant (bad input).
      Iterator end = first;
      Position wanted = 0;
      bool valueless = false;
      for (; end != last && wanted < Source::kSlots; ++end, ++wanted) {
        if constexpr (std::is_same_v<Value, Payload>) {
          if (IsBadPayload(*end)) {
            valueless = true;
            break;
          }
        }
      }
      if (wanted != 0) {
        if (!source.Enter()) {
          source.LeftUnadmitted();
          return RefuseRest(source, PublishOutcome::kClosed, mode, priority, first, last, admitted);
        }
        typename Source::Target::Run run{};
        const Position limit = source.Limit(mode, priority);
        const Position claimed = source.Slots().TryClaimRun(limit, priority, wanted, &run);
        // Counted before the messages become visible (see Admit).
        if (counted && claimed != 0) ObservePublish::Claimed(source, priority, claimed);
        for (Position i = 0; i < claimed; ++i, ++first) {
          const typename Source::Target::Claim claim = Source::Target::InRun(run, i);
          auto make_payload = [&] { return MakePayload(*first); };
          const Envelope* written = WriteEnvelope<Source>(
              source.Slots().Storage(claim), Source::Target::MessageId(claim), timestamp_ns,
              sender_id, priority, counted, source.Lane(), make_payload);
          const std::size_t type_index = ObservePublish::TypeIndex(source, *written);
          source.Slots().Publish(claim);
          ObservePublish::Admitted(
              source,
              [&] {
                return MakeHeader(Source::Target::MessageId(claim),
                                  StampNanos<typename Source::Clock>(timestamp_ns), sender_id,
                                  priority, counted, source.Lane());
              },
              type_index);
        }
        source.Leave();
        if (claimed != 0) {
          source.Notify();
        } else {
          source.LeftUnadmitted();
        }
        admitted += static_cast<std::uint32_t>(claimed);
        if (claimed < wanted) {
          // The rest of the batch, this run's and every later one's, did
          // not fit: refused, like single publishes.
          const PublishOutcome outcome =
              source.ClosedAfterRefusal() ? PublishOutcome::kClosed : Source::kFull;
          if (outcome == Source::kFull) ObservePublish::RefusedForFill(source, limit);
          return RefuseRest(source, outcome, mode, priority, first, last, admitted);
        }
      }
      if (valueless) {
        CountRejected(source, priority);
        return PublishResult(PublishOutcome::kRejected, priority, admitted);
      }
    }
    return PublishResult(PublishOutcome::kAdmitted, priority, admitted);
  }

  // PublishBatch of a range that may be single pass: each position is
  // dereferenced once (twice only for a refused one, which a single-pass
  // iterator allows, as it has not moved) and advanced once. Otherwise as
  // AdmitBatch: in order, one clock reading, stops at the first message not
  // admitted, counts it and the rest as refused.
  template <typename Source, typename Iterator>
  static PublishResult AdmitEach(Source& source, Iterator first, Iterator last,
                                 std::uint32_t sender_id, MessagePriority priority) noexcept {
    using Reference = decltype(*first);
    using Value = std::decay_t<Reference>;
    const PerformanceMode mode = source.Mode();
    const std::uint64_t timestamp_ns =
        mode == PerformanceMode::BARE_METAL ? 0 : ClockStamp<typename Source::Clock>();
    std::uint32_t admitted = 0;
    for (; first != last; ++first) {
      Reference element = *first;
      if constexpr (std::is_same_v<Value, Payload>) {
        if (IsBadPayload(element)) {
          CountRejected(source, priority);
          return PublishResult(PublishOutcome::kRejected, priority, admitted);
        }
      }
      // A reference is passed on as it came (a move iterator's moves); an
      // element returned by value (a generator) is this loop's own: moved,
      // as PublishBatch checked that move cannot throw, never copied.
      auto make_payload = [&] {
        if constexpr (std::is_reference_v<Reference>) {
          return MakePayload(static_cast<Reference>(element));
        } else {
          return MakePayload(std::move(element));
        }
      };
      const PublishResult result =
          Admit<false, false>(source, sender_id, priority, timestamp_ns, make_payload);
      if (!result)
        return RefuseRest(source, result.Outcome(), mode, priority, first, last, admitted);
      ++admitted;
    }
    return PublishResult(PublishOutcome::kAdmitted, priority, admitted);
  }

  // A batch refused at `first` (closed, or no room): the messages from
  // `first` up to the first valueless variant are counted as refused with
  // `outcome`, that variant as rejected (bad input, as a single publish of it
  // would be), and those after it are not attempted. Counted without
  // <iterator>, which brings <string> into the core.
  template <typename Source, typename Iterator>
  static PublishResult RefuseRest(Source& source, PublishOutcome outcome, PerformanceMode mode,
                                  MessagePriority priority, Iterator first, Iterator last,
                                  std::uint32_t admitted) noexcept {
    using Value = std::decay_t<decltype(*first)>;
    Position refused = 0;
    bool valueless = false;
    for (; first != last; ++first, ++refused) {
      if constexpr (std::is_same_v<Value, Payload>) {
        if (IsBadPayload(*first)) {
          valueless = true;
          break;
        }
      }
    }
    if (valueless) CountRejected(source, priority);
    if (refused == 0) return PublishResult(outcome, priority, admitted);
    return Refuse(source, outcome, mode, priority, refused, admitted);
  }

  template <typename Message>
  static Payload MakePayload(Message&& message) noexcept {
    using Value = std::decay_t<Message>;
    if constexpr (std::is_same_v<Value, Payload>) {
      return Payload(std::forward<Message>(message));
    } else {
      return Payload(std::in_place_type<Value>, std::forward<Message>(message));
    }
  }
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
