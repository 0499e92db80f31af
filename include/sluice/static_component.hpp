// StaticComponent: handlers found at compile time. Derive with CRTP and give
// the class `Handle(const T&)` (or `Handle(const T&, const MessageHeader&)`)
// members for the message types it cares about; MakeVisitor() returns a
// visitor for ProcessBatchWith that calls them directly (inlinable, no
// subscription table) and ignores the other types.
//
//   struct Controller : sluice::StaticComponent<Controller, Payload> {
//     void Handle(const SensorData& d);
//     void Handle(const MotorCmd& c, const sluice::MessageHeader& h);
//   };
//   Controller controller;
//   bus.ProcessBatchWith(controller.MakeVisitor());
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/detail/variant_index.hpp"
#include "sluice/message.hpp"

namespace sluice {

namespace detail {

template <typename Derived, typename T, typename = void>
struct HandlesWithHeader : std::false_type {};
template <typename Derived, typename T>
struct HandlesWithHeader<Derived, T,
                         std::void_t<decltype(std::declval<Derived&>().Handle(
                             std::declval<const T&>(), std::declval<const MessageHeader&>()))>>
    : std::true_type {};

template <typename Derived, typename T, typename = void>
struct HandlesMessage : std::false_type {};
template <typename Derived, typename T>
struct HandlesMessage<
    Derived, T, std::void_t<decltype(std::declval<Derived&>().Handle(std::declval<const T&>()))>>
    : std::true_type {};

}  // namespace detail

template <typename Derived, typename Payload>
class StaticComponent {
  static_assert(detail::IsVariant<Payload>::value,
                "Sluice: StaticComponent's Payload must be the bus's std::variant");

 public:
  // Whether Derived has a handler for T (called as a direct call would be).
  template <typename T>
  static constexpr bool Handles() noexcept {
    return detail::HandlesWithHeader<Derived, T>::value ||
           detail::HandlesMessage<Derived, T>::value;
  }

  // Calls Derived's handler for `message`, if it has one; returns whether it
  // did.
  template <typename T>
  bool Dispatch(const T& message, const MessageHeader& header) {
    if constexpr (detail::HandlesWithHeader<Derived, T>::value) {
      Self().Handle(message, header);
      return true;
    } else if constexpr (detail::HandlesMessage<Derived, T>::value) {
      Self().Handle(message);
      return true;
    } else {
      (void)message;
      (void)header;
      return false;
    }
  }

  // A visitor for bus.ProcessBatchWith(): refers to this component, which
  // must outlive it.
  class Visitor {
   public:
    template <typename T>
    void operator()(const T& message, const MessageHeader& header) const {
      component_->Dispatch(message, header);
    }

   private:
    friend class StaticComponent;
    explicit Visitor(StaticComponent* component) noexcept : component_(component) {}
    StaticComponent* component_;
  };

  Visitor MakeVisitor() noexcept {
    static_assert(HandlesAny(std::make_index_sequence<std::variant_size_v<Payload>>()),
                  "Sluice: this StaticComponent has no Handle(const T&) for any alternative "
                  "of its payload variant");
    return Visitor(this);
  }

 protected:
  StaticComponent() = default;

 private:
  template <std::size_t... kIndex>
  static constexpr bool HandlesAny(std::index_sequence<kIndex...>) noexcept {
    return (Handles<std::variant_alternative_t<kIndex, Payload>>() || ...);
  }
  Derived& Self() noexcept { return static_cast<Derived&>(*this); }
};

}  // namespace sluice
