// How the NATS bridge turns a message into frame payload bytes and back.
// Standard library only.
//
// A codec for T is a type with two static functions:
//
//   struct NoteCodec {
//     // Appends T's bytes to `out`; false when it cannot (the message is
//     // then not sent, and counted).
//     static bool Encode(const Note& value, std::string& out);
//     // T from exactly `size` bytes, or std::nullopt for bytes that are not
//     // a T (the frame is refused as FrameError::kBadPayload). Must accept
//     // any bytes without undefined behaviour: they come from the network.
//     static std::optional<Note> Decode(const std::uint8_t* data, std::size_t size);
//   };
//
// Trivially copyable types get TriviallyCopyableCodec<T> by default: the
// object's bytes, as they are in memory. See its comment for where that fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// The object representation of T: both ends must share T's layout and byte
// order (the same type, compiler and architecture family). Decode accepts
// exactly sizeof(T) bytes. Every byte pattern must be a valid T: integers,
// floating-point numbers and arrays or structs of them. A T holding a bool,
// an enum or a pointer needs a codec of its own that checks the bytes
// before it makes a T of them.
template <typename T>
struct TriviallyCopyableCodec {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "Sluice: TriviallyCopyableCodec<T> needs a trivially copyable, default "
                "constructible T");

  static bool Encode(const T& value, std::string& out) {
    out.append(reinterpret_cast<const char*>(&value), sizeof(T));
    return true;
  }

  static std::optional<T> Decode(const std::uint8_t* data, std::size_t size) noexcept {
    if (size != sizeof(T)) return std::nullopt;
    T value;
    // memcpy from a possibly null pointer is undefined even for 0 bytes.
    if (size != 0) std::memcpy(&value, data, sizeof(T));
    return value;
  }
};

namespace detail {

template <typename Codec, typename T, typename = void>
struct HasEncode : std::false_type {};
template <typename Codec, typename T>
struct HasEncode<
    Codec, T,
    std::void_t<decltype(Codec::Encode(std::declval<const T&>(), std::declval<std::string&>()))>>
    : std::is_convertible<
          decltype(Codec::Encode(std::declval<const T&>(), std::declval<std::string&>())), bool> {};

template <typename Codec, typename T, typename = void>
struct HasDecode : std::false_type {};
template <typename Codec, typename T>
struct HasDecode<Codec, T,
                 std::void_t<decltype(Codec::Decode(std::declval<const std::uint8_t*>(),
                                                    std::declval<std::size_t>()))>>
    : std::is_same<decltype(Codec::Decode(std::declval<const std::uint8_t*>(),
                                          std::declval<std::size_t>())),
                   std::optional<T>> {};

// Selects the default codec; a type that is not trivially copyable has none.
template <typename T, bool = std::is_trivially_copyable_v<T>>
struct DefaultCodecFor {
  using Type = TriviallyCopyableCodec<T>;
};
template <typename T>
struct DefaultCodecFor<T, false> {
  using Type = void;
};

}  // namespace detail

// Whether `Codec` is a codec for T (the two functions above, with those
// result types).
template <typename Codec, typename T>
inline constexpr bool kIsCodecFor =
    detail::HasEncode<Codec, T>::value&& detail::HasDecode<Codec, T>::value;

// What a route uses when it names no codec: TriviallyCopyableCodec<T> for a
// trivially copyable T; void otherwise (a compile error where used).
template <typename T>
using DefaultCodec = typename detail::DefaultCodecFor<T>::Type;

// The compile-time check each route applies to its codec.
template <typename Codec, typename T>
constexpr void CheckCodec() noexcept {
  static_assert(!std::is_void_v<Codec>,
                "Sluice: this message type is not trivially copyable, so it has no built-in "
                "NATS codec; name one as the route's second template argument (docs/nats.md, "
                "Codecs)");
  if constexpr (!std::is_void_v<Codec>) {
    static_assert(kIsCodecFor<Codec, T>,
                  "Sluice: a NATS codec for T needs static bool Encode(const T&, std::string&) "
                  "and static std::optional<T> Decode(const std::uint8_t*, std::size_t)");
  }
}

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
