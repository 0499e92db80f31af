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

// True when T names exactly one alternative of Variant.
template <typename T, typename Variant>
inline constexpr bool kIsAlternative = VariantIndex<T, Variant>::kOccurrences == 1;

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
