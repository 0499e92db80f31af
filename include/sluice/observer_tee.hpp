// Two observers on one bus (the traits name one: sluice/observer.hpp): every
// event goes to the first, then the second, each in the form it takes.
//
//   using Flight = sluice::record::FlightRecorder<Payload>;
//   struct Traits : sluice::DefaultBusTraits {
//     using Observer = sluice::ObserverTee<
//         sluice::trace::TracingObserver<sluice::trace::TraceRing<4096>>,
//         sluice::record::FlightRecorderObserver<Flight, EStop>>;
//   };
//   bus.GetObserver().First().Attach(&ring, 1);
//   bus.GetObserver().Second().Attach(&flight);
//
// The tee takes the payload index with its message events (so the core
// reads it) and gives each observer the form it has; it takes the message
// itself (OnTakenMessage) for the observers that take it; it has
// OnDispatched and OnClosed where either observer has them; and it lets the consumer take
// runs (kTakesRuns) only where both do. Tees nest: ObserverTee<A,
// ObserverTee<B, C>>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/detail/observe/observation.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

template <typename FirstObserver, typename SecondObserver>
class ObserverTee {
  template <typename Observer>
  static constexpr bool kDispatches =
      detail::HasOnDispatched<Observer>::value || detail::HasTypedOnDispatched<Observer>::value;

 public:
  static constexpr bool kTakesRuns = detail::ObserverTakesRuns<FirstObserver>::value &&
                                     detail::ObserverTakesRuns<SecondObserver>::value;

  FirstObserver& First() noexcept { return first_; }
  const FirstObserver& First() const noexcept { return first_; }
  SecondObserver& Second() noexcept { return second_; }
  const SecondObserver& Second() const noexcept { return second_; }

  void OnAdmitted(const MessageHeader& header, std::size_t type_index) noexcept {
    Admitted(first_, header, type_index);
    Admitted(second_, header, type_index);
  }
  void OnRefused(PublishOutcome outcome, MessagePriority priority, std::uint64_t count) noexcept {
    first_.OnRefused(outcome, priority, count);
    second_.OnRefused(outcome, priority, count);
  }
  void OnBatchBegin(std::uint64_t fill) noexcept {
    first_.OnBatchBegin(fill);
    second_.OnBatchBegin(fill);
  }
  void OnTaken(const MessageHeader& header, std::size_t type_index) noexcept {
    Taken(first_, header, type_index);
    Taken(second_, header, type_index);
  }
  template <typename Envelope>
  SLUICE_ALWAYS_INLINE void OnTakenMessage(const Envelope& envelope) noexcept {
    if constexpr (detail::HasOnTakenMessage<FirstObserver, Envelope>::value) {
      first_.OnTakenMessage(envelope);
    }
    if constexpr (detail::HasOnTakenMessage<SecondObserver, Envelope>::value) {
      second_.OnTakenMessage(envelope);
    }
    (void)envelope;
  }
  // Only where one of them has it (an observer that takes runs has none).
  template <typename First = FirstObserver,
            std::enable_if_t<kDispatches<First> || kDispatches<SecondObserver>, int> = 0>
  void OnDispatched(const MessageHeader& header, std::size_t type_index) noexcept {
    Dispatched(first_, header, type_index);
    Dispatched(second_, header, type_index);
  }
  void OnBatchEnd(std::uint32_t count) noexcept {
    first_.OnBatchEnd(count);
    second_.OnBatchEnd(count);
  }
  void OnError(const BusError& error) noexcept {
    first_.OnError(error);
    second_.OnError(error);
  }
  // Only where one of them has it.
  template <
      typename First = FirstObserver,
      std::enable_if_t<
          detail::HasOnClosed<First>::value || detail::HasOnClosed<SecondObserver>::value, int> = 0>
  void OnClosed() noexcept {
    if constexpr (detail::HasOnClosed<FirstObserver>::value) first_.OnClosed();
    if constexpr (detail::HasOnClosed<SecondObserver>::value) second_.OnClosed();
  }
  template <typename First = FirstObserver,
            std::enable_if_t<detail::HasOnLaneEvent<First>::value ||
                                 detail::HasOnLaneEvent<SecondObserver>::value,
                             int> = 0>
  void OnLaneEvent(const LaneEvent& event) noexcept {
    if constexpr (detail::HasOnLaneEvent<FirstObserver>::value) first_.OnLaneEvent(event);
    if constexpr (detail::HasOnLaneEvent<SecondObserver>::value) second_.OnLaneEvent(event);
  }

 private:
  template <typename Observer>
  static void Admitted(Observer& observer, const MessageHeader& header,
                       std::size_t type_index) noexcept {
    if constexpr (detail::HasTypedOnAdmitted<Observer>::value) {
      observer.OnAdmitted(header, type_index);
    } else {
      (void)type_index;
      observer.OnAdmitted(header);
    }
  }
  template <typename Observer>
  static void Taken(Observer& observer, const MessageHeader& header,
                    std::size_t type_index) noexcept {
    if constexpr (detail::HasTypedOnTaken<Observer>::value) {
      observer.OnTaken(header, type_index);
    } else {
      (void)type_index;
      observer.OnTaken(header);
    }
  }
  template <typename Observer>
  static void Dispatched(Observer& observer, const MessageHeader& header,
                         std::size_t type_index) noexcept {
    if constexpr (detail::HasTypedOnDispatched<Observer>::value) {
      observer.OnDispatched(header, type_index);
    } else if constexpr (detail::HasOnDispatched<Observer>::value) {
      (void)type_index;
      observer.OnDispatched(header);
    } else {
      (void)observer;
      (void)header;
      (void)type_index;
    }
  }

  FirstObserver first_;
  SecondObserver second_;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
