// How a visitor meets a message (ProcessBatchWith): through std::visit with
// each message if it accepts every alternative, else as visitor(message,
// header) if it accepts that for every alternative, else as
// visitor(envelope). One definition for the in-process bus and the
// shared-memory one.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/config.hpp"
#include "sluice/detail/consume/one_signature.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Payload, typename Visitor, std::size_t... kIndex>
constexpr bool AcceptsEveryAlternative(std::index_sequence<kIndex...>) noexcept {
  return (std::is_invocable_v<Visitor&, const std::variant_alternative_t<kIndex, Payload>&> && ...);
}

template <typename Payload, typename Visitor, std::size_t... kIndex>
constexpr bool AcceptsEveryAlternativeWithHeader(std::index_sequence<kIndex...>) noexcept {
  return (std::is_invocable_v<Visitor&, const std::variant_alternative_t<kIndex, Payload>&,
                              const MessageHeader&> &&
          ...);
}

// A visitor that takes every alternative wins, so a generic lambda
// `[](const auto& message)` gets messages, not envelopes. The payload must
// hold a value (callers check).
template <typename Payload, typename Visitor>
SLUICE_ALWAYS_INLINE void VisitEnvelope(Visitor& visitor,
                                        const MessageEnvelope<Payload>& envelope) {
  static_assert(TakesOneOfAt<Visitor, 0, MessageEnvelope<Payload>>() ||
                    (std::variant_size_v<Payload> == 1 &&
                     TakesOneOfAt<Visitor, 0, std::variant_alternative_t<0, Payload>>()),
                "Sluice: a visitor with one call operator takes (const MessageEnvelope<Payload>&); "
                "one that takes messages needs an operator() for every alternative (or a "
                "generic lambda), not one that the others convert to");
  constexpr auto kAlternatives = std::make_index_sequence<std::variant_size_v<Payload>>{};
  if constexpr (AcceptsEveryAlternative<Payload, Visitor>(kAlternatives)) {
    std::visit(visitor, envelope.payload);
  } else if constexpr (AcceptsEveryAlternativeWithHeader<Payload, Visitor>(kAlternatives)) {
    std::visit([&](const auto& message) { visitor(message, envelope.header); }, envelope.payload);
  } else {
    static_assert(std::is_invocable_v<Visitor&, const MessageEnvelope<Payload>&>,
                  "Sluice: a visitor takes (const T&) or (const T&, const MessageHeader&) "
                  "for every alternative T, or (const MessageEnvelope<Payload>&)");
    visitor(envelope);
  }
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
