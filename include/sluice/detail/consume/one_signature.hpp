// The parameters of a callable that has exactly one call signature, so that
// Subscribe and ProcessBatchWith can refuse, at compile time, a callback
// whose message parameter is a type the message only converts to (a `bool`
// callback on Subscribe<int> would get every int as true; a visitor of
// `const int&` alone would get a double cut to an int). std::is_invocable
// cannot tell those apart from the right type. A generic or overloaded
// callable has no one signature: C++'s overload resolution picks its
// parameter per call, as std::visit does, and nothing here looks at it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename... Parameters>
struct ParameterList {
  static constexpr std::size_t kCount = sizeof...(Parameters);
};

// Declared only, for decltype: the parameters of a function pointer or of a
// non-template, non-overloaded member function, whatever its qualifiers
// (const, volatile, & or &&, noexcept) and with or without a C-style
// `...` (whose arguments are not its message). Every form is listed: one
// left out would read as "no one signature" and let a converting
// parameter through.
// QUALIFIERS are qualifiers, which parentheses would not take.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SLUICE_DETAIL_PARAMETERS_OF(QUALIFIERS)                                           \
  template <typename Class, typename Result, typename... Parameters>                      \
  ParameterList<Parameters...> ParametersOf(Result (Class::*)(Parameters...) QUALIFIERS); \
  template <typename Class, typename Result, typename... Parameters>                      \
  ParameterList<Parameters...> ParametersOf(Result (Class::*)(Parameters..., ...) QUALIFIERS);
// NOLINTEND(bugprone-macro-parentheses)
SLUICE_DETAIL_PARAMETERS_OF()
SLUICE_DETAIL_PARAMETERS_OF(&)
SLUICE_DETAIL_PARAMETERS_OF(&&)
SLUICE_DETAIL_PARAMETERS_OF(const)
SLUICE_DETAIL_PARAMETERS_OF(const &)
SLUICE_DETAIL_PARAMETERS_OF(const &&)
SLUICE_DETAIL_PARAMETERS_OF(volatile)
SLUICE_DETAIL_PARAMETERS_OF(volatile &)
SLUICE_DETAIL_PARAMETERS_OF(volatile &&)
SLUICE_DETAIL_PARAMETERS_OF(const volatile)
SLUICE_DETAIL_PARAMETERS_OF(const volatile &)
SLUICE_DETAIL_PARAMETERS_OF(const volatile &&)
SLUICE_DETAIL_PARAMETERS_OF(noexcept)
SLUICE_DETAIL_PARAMETERS_OF(&noexcept)
SLUICE_DETAIL_PARAMETERS_OF(&&noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const &noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const &&noexcept)
SLUICE_DETAIL_PARAMETERS_OF(volatile noexcept)
SLUICE_DETAIL_PARAMETERS_OF(volatile &noexcept)
SLUICE_DETAIL_PARAMETERS_OF(volatile &&noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const volatile noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const volatile &noexcept)
SLUICE_DETAIL_PARAMETERS_OF(const volatile &&noexcept)
#undef SLUICE_DETAIL_PARAMETERS_OF
template <typename Result, typename... Parameters>
ParameterList<Parameters...> ParametersOf(Result (*)(Parameters...));
template <typename Result, typename... Parameters>
ParameterList<Parameters...> ParametersOf(Result (*)(Parameters..., ...));
template <typename Result, typename... Parameters>
ParameterList<Parameters...> ParametersOf(Result (*)(Parameters...) noexcept);
template <typename Result, typename... Parameters>
ParameterList<Parameters...> ParametersOf(Result (*)(Parameters..., ...) noexcept);

// OneSignature<F>::Parameters: a ParameterList, or void when F has no one
// call signature (a generic lambda, an overload set). A member function pointer's list leaves out
// the object. (Deduction looks at no conversion, so a lambda that converts to a function pointer
// matches only the first specialization.)
template <typename F, typename = void>
struct OneSignature {
  using Parameters = void;
};
// (Written as decltype(..., void()), not std::void_t: Clang takes two
// partial specializations through void_t for one, a redefinition.)
template <typename F>
struct OneSignature<F, decltype(ParametersOf(&F::operator()), void())> {
  using Parameters = decltype(ParametersOf(&F::operator()));
};
template <typename F>
struct OneSignature<F, decltype(ParametersOf(std::declval<F>()), void())> {
  using Parameters = decltype(ParametersOf(std::declval<F>()));
};

// The kIndex-th parameter of a ParameterList, without its reference and
// const; void past the end.
template <std::size_t kIndex, typename List>
struct ParameterAt {
  using Type = void;
};
template <typename First, typename... Rest>
struct ParameterAt<0, ParameterList<First, Rest...>> {
  using Type = std::remove_cv_t<std::remove_reference_t<First>>;
};
template <std::size_t kIndex, typename First, typename... Rest>
struct ParameterAt<kIndex, ParameterList<First, Rest...>> {
  using Type = typename ParameterAt<kIndex - 1, ParameterList<Rest...>>::Type;
};

// Whether F, if it has one call signature, takes one of Accepted (by
// value or by reference, const or not) as its kIndex-th parameter; true for
// a callable without one signature.
template <typename F, std::size_t kIndex, typename... Accepted>
constexpr bool TakesOneOfAt() noexcept {
  using Parameters = typename OneSignature<std::remove_cv_t<F>>::Parameters;
  if constexpr (std::is_void_v<Parameters>) {
    return true;
  } else {
    using Parameter = typename ParameterAt<kIndex, Parameters>::Type;
    return (std::is_same_v<Parameter, Accepted> || ...);
  }
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
