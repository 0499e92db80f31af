// Compile-time lookup of a type's index in a std::variant.
#pragma once

#include <cstddef>
#include <type_traits>
#include <variant>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename T>
struct IsVariant : std::false_type {};
template <typename... Alternatives>
struct IsVariant<std::variant<Alternatives...>> : std::true_type {};

template <typename T, typename Variant>
struct VariantIndex;

template <typename T, typename... Alternatives>
struct VariantIndex<T, std::variant<Alternatives...>> {
  // How often T appears; publishing or subscribing needs exactly one match.
  static constexpr std::size_t kOccurrences =
      (std::size_t{0} + ... + std::size_t{std::is_same_v<T, Alternatives>});

  static constexpr std::size_t Find() noexcept {
    constexpr bool kMatches[] = {std::is_same_v<T, Alternatives>..., false};
    for (std::size_t i = 0; i < sizeof...(Alternatives); ++i) {
      if (kMatches[i]) return i;
    }
    return sizeof...(Alternatives);
  }
  static constexpr std::size_t kValue = Find();
};

// True when every alternative of Variant is copied (kMove: moved) without
// throwing: a variant's own copy constructor is never declared noexcept.
template <typename Variant, bool kMove>
struct NothrowAlternatives;
template <typename... Alternatives, bool kMove>
struct NothrowAlternatives<std::variant<Alternatives...>, kMove>
    : std::bool_constant<((kMove ? std::is_nothrow_move_constructible_v<Alternatives>
                                 : std::is_nothrow_copy_constructible_v<Alternatives>)&&...)> {};

// True when every alternative of Variant is trivially copyable (true for a
// type that is not a variant: the bus reports that on its own).
template <typename Variant>
struct TriviallyCopyableAlternatives : std::true_type {};
template <typename... Alternatives>
struct TriviallyCopyableAlternatives<std::variant<Alternatives...>>
    : std::bool_constant<(std::is_trivially_copyable_v<Alternatives> && ...)> {};

// True when `T{args...}` is well-formed (aggregates in C++17).
template <typename T, typename Void, typename... Args>
struct BraceConstructible : std::false_type {};
template <typename T, typename... Args>
struct BraceConstructible<T, std::void_t<decltype(T{std::declval<Args>()...})>, Args...>
    : std::true_type {};
template <typename T, typename... Args>
inline constexpr bool kBraceConstructible = BraceConstructible<T, void, Args...>::value;

// True when T names exactly one alternative of Variant.
template <typename T, typename Variant>
inline constexpr bool kIsAlternative = VariantIndex<T, Variant>::kOccurrences == 1;

// False, but only once T is known: a static_assert on it fires only in a
// template that is instantiated.
template <typename T>
inline constexpr bool kDependentFalse = false;

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
