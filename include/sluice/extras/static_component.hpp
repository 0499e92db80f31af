// StaticComponent: handlers found at compile time. Derive with CRTP and give
// the class public `Handle(const T&)` (or `Handle(const T&, const
// MessageHeader&)`) members for the message types it cares about;
// MakeVisitor() returns a visitor for ProcessBatchWith that calls them
// directly (inlinable, no subscription table) and ignores the other types.
// The handler is chosen as a direct call chooses it: see ResolveHandler.
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

#include "sluice/config.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

namespace detail {

// How a StaticComponent's handler for one message type is chosen. The rule is
// that of a direct call: `Handle(message)` if that call is valid, otherwise
// `Handle(message, header)`, each resolved as the compiler resolves a call.
// A call that finds no viable Handle means "no handler"; one that is
// ambiguous, or whose best match is not public, does not compile (a direct
// call would not either).
//
// Plain detection cannot tell "no viable function" from "ambiguous" (both
// are substitution failures), so the call is also made on HandleProbe: the
// class's own overloads plus a fallback taking `...`, the worst conversion
// there is, which every real handler beats. On the probe "no handler" is
// the fallback's NoHandler, and an ambiguity among real handlers stays an
// error; the plain call on Derived then checks access.
enum class HandlerKind { kNone, kMessage, kMessageAndHeader, kAmbiguous, kNotPublic };

struct NoHandler {};

template <typename Derived>
struct HandleProbe : Derived {
  using Derived::Handle;
  static NoHandler Handle(...);
};

// Whether Derived (or a base of it) declares any member named Handle: the
// name is ambiguous in HandleLookup exactly when it does.
struct HandleNameClash {
  void Handle();
};
template <typename Derived>
struct HandleLookup : Derived, HandleNameClash {};
template <typename Derived, typename = void>
struct HasHandleMember : std::true_type {};
template <typename Derived>
struct HasHandleMember<Derived, std::void_t<decltype(&HandleLookup<Derived>::Handle)>>
    : std::false_type {};

template <typename Object, typename Args, typename = void>
struct HandleCall {
  static constexpr bool kValid = false;
  using Type = void;
};
template <typename Object, typename... Args>
struct HandleCall<Object, void(Args...),
                  std::void_t<decltype(std::declval<Object&>().Handle(std::declval<Args>()...))>> {
  static constexpr bool kValid = true;
  using Type = decltype(std::declval<Object&>().Handle(std::declval<Args>()...));
};

// kNone, kAmbiguous, kNotPublic, or `found` when a handler takes Args.
template <typename Derived, typename Args>
constexpr HandlerKind ClassifyCall(HandlerKind found) noexcept {
  using Probe = HandleCall<HandleProbe<Derived>, Args>;
  if constexpr (!Probe::kValid) {
    return HandlerKind::kAmbiguous;
  } else if constexpr (std::is_same_v<typename Probe::Type, NoHandler>) {
    return HandlerKind::kNone;
  } else if constexpr (!HandleCall<Derived, Args>::kValid) {
    return HandlerKind::kNotPublic;
  } else {
    return found;
  }
}

template <typename Derived, typename T>
constexpr HandlerKind ResolveHandler() noexcept {
  static_assert(!std::is_final_v<Derived>,
                "Sluice: a StaticComponent's class must not be final (its Handle overloads "
                "are resolved through a class derived from it)");
  // std::disjunction stops at a final Derived, before HasHandleMember derives from it.
  if constexpr (std::disjunction_v<std::is_final<Derived>,
                                   std::negation<HasHandleMember<Derived>>>) {
    return HandlerKind::kNone;
  } else {
    constexpr HandlerKind kOne = ClassifyCall<Derived, void(const T&)>(HandlerKind::kMessage);
    if constexpr (kOne != HandlerKind::kNone) {
      return kOne;
    } else {
      return ClassifyCall<Derived, void(const T&, const MessageHeader&)>(
          HandlerKind::kMessageAndHeader);
    }
  }
}

}  // namespace detail

template <typename Derived, typename Payload>
class StaticComponent {
  static_assert(detail::IsVariant<Payload>::value,
                "Sluice: StaticComponent's Payload must be the bus's std::variant");

 public:
  // Whether Derived has a handler for T, chosen as a direct call would choose
  // it. An ambiguous or non-public best match does not compile.
  template <typename T>
  static constexpr bool Handles() noexcept {
    constexpr detail::HandlerKind kKind = detail::ResolveHandler<Derived, T>();
    static_assert(kKind != detail::HandlerKind::kAmbiguous,
                  "Sluice: a StaticComponent's Handle call for this message type is ambiguous");
    static_assert(kKind != detail::HandlerKind::kNotPublic,
                  "Sluice: a StaticComponent's best Handle for this message type is not public");
    return kKind == detail::HandlerKind::kMessage ||
           kKind == detail::HandlerKind::kMessageAndHeader;
  }

  // Calls Derived's handler for `message`, if it has one; returns whether it
  // did.
  template <typename T>
  bool Dispatch(const T& message, const MessageHeader& header) {
    if constexpr (!Handles<T>()) {  // Handles() also rejects unusable handlers
      (void)message;
      (void)header;
      return false;
    } else if constexpr (detail::ResolveHandler<Derived, T>() == detail::HandlerKind::kMessage) {
      (void)header;
      Self().Handle(message);
      return true;
    } else {
      Self().Handle(message, header);
      return true;
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

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
