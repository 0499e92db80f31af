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
// Built in, so that only a value's bytes reach the wire, never padding or
// other memory, and every byte that arrives is checked:
//  - WireCodec<T>, what DefaultCodec<T> chooses: a scalar (bool, integers,
//    scoped enums, float, double), an array of them, or a struct whose
//    fields are listed in sluice::nats::Fields<T>. Each field in list
//    order, little-endian, with nothing between them (docs/nats.md,
//    "Payload layout").
//  - TriviallyCopyableCodec<T>, only when named: a struct of integers
//    without padding, sent as its object bytes (the same bytes as
//    WireCodec's on the little-endian hosts Sluice supports).
// Any other T (a struct without Fields, a pointer, an unscoped enum, a
// type that is not trivially copyable) is a compile error that says why.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// A struct's wire layout, for WireCodec: specialize it with a tuple of
// pointers to the members to send, in wire order.
//
//   struct Pose { std::uint8_t frame; double x, y; };   // 7 padding bytes
//   template <>
//   struct sluice::nats::Fields<Pose> {
//     static constexpr auto kMembers = std::make_tuple(&Pose::frame, &Pose::x, &Pose::y);
//   };
//
// On the wire: 1 + 8 + 8 = 17 bytes. A member left out is not sent and
// arrives value-initialized; list each member once. Each member is a
// scalar (bool, an integer, a scoped enum, float or double), an array of
// them, or a struct with Fields of its own. Optionally, the members' names
// in the same order, which the bridge does not send and recordings use so
// that MCAP tools show the fields by name (sluice/record/message_schema.hpp):
//     static constexpr const char* kNames[] = {"frame", "x", "y"};
template <typename T>
struct Fields {};

namespace detail {

template <typename T, typename = void>
struct HasFieldList : std::false_type {};
template <typename T>
struct HasFieldList<T, std::void_t<decltype(Fields<T>::kMembers)>> : std::true_type {};

template <typename T>
struct IsStdArray : std::false_type {};
template <typename E, std::size_t N>
struct IsStdArray<std::array<E, N>> : std::true_type {};

template <typename T>
constexpr bool IsLittleEndianHost() noexcept {
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
  return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
#else
  return true;  // MSVC's targets are all little-endian
#endif
}

// How a value of type T goes on the wire (kEncodable false: it does not).
template <typename T, typename = void>
struct Wire {
  static constexpr bool kEncodable = false;
  static constexpr std::size_t kSize = 0;
};

// An unsigned integer of T's size, for integers, enums and floats.
template <std::size_t kBytes>
struct UnsignedOfSize;
template <>
struct UnsignedOfSize<1> {
  using Type = std::uint8_t;
};
template <>
struct UnsignedOfSize<2> {
  using Type = std::uint16_t;
};
template <>
struct UnsignedOfSize<4> {
  using Type = std::uint32_t;
};
template <>
struct UnsignedOfSize<8> {
  using Type = std::uint64_t;
};

template <typename U>
void PutLittle(std::uint8_t* out, U bits) noexcept {
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    out[i] = static_cast<std::uint8_t>(bits >> (8 * i));
  }
}
template <typename U>
U GetLittle(const std::uint8_t* in) noexcept {
  U bits = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    bits = static_cast<U>(bits | static_cast<U>(static_cast<U>(in[i]) << (8 * i)));
  }
  return bits;
}

// bool: one byte, 0 or 1; any other byte is not a bool.
template <>
struct Wire<bool> {
  static constexpr bool kEncodable = true;
  static constexpr std::size_t kSize = 1;
  static void Put(const bool& value, std::uint8_t* out) noexcept { out[0] = value ? 1 : 0; }
  static bool Get(const std::uint8_t* in, bool* value) noexcept {
    if (in[0] > 1) return false;
    *value = in[0] == 1;
    return true;
  }
};

// A scoped enum (enum class): every value of its underlying type is one of
// its values. An unscoped enum may have a narrower range, so a byte from the
// network could make a value it cannot hold: it has no wire form.
template <typename T, bool = std::is_enum_v<T>>
struct IsScopedEnum : std::false_type {};
template <typename T>
struct IsScopedEnum<T, true>
    : std::bool_constant<!std::is_convertible_v<T, std::underlying_type_t<T>>> {};

// A scoped enum over bool has two values: it goes as a bool does.
template <typename T, bool = IsScopedEnum<T>::value>
struct IsBoolEnum : std::false_type {};
template <typename T>
struct IsBoolEnum<T, true> : std::is_same<std::underlying_type_t<T>, bool> {};
template <typename T>
struct Wire<T, std::enable_if_t<IsBoolEnum<T>::value>> {
  static constexpr bool kEncodable = true;
  static constexpr std::size_t kSize = 1;
  static void Put(const T& value, std::uint8_t* out) noexcept {
    out[0] = static_cast<bool>(static_cast<std::underlying_type_t<T>>(value)) ? 1 : 0;
  }
  static bool Get(const std::uint8_t* in, T* value) noexcept {
    if (in[0] > 1) return false;
    *value = static_cast<T>(in[0] == 1);
    return true;
  }
};

// A value sent as its bits, little-endian, in an unsigned integer of its
// size.
template <typename T, typename Bits>
struct WireBits {
  static constexpr std::size_t kSize = sizeof(T);
  static void Put(const T& value, std::uint8_t* out) noexcept {
    Bits bits;
    std::memcpy(&bits, &value, sizeof bits);
    PutLittle(out, bits);
  }
  static bool Get(const std::uint8_t* in, T* value) noexcept {
    const Bits bits = GetLittle<Bits>(in);
    std::memcpy(value, &bits, sizeof bits);
    return true;
  }
};

// Integers (two's complement) and scoped enums (their underlying integer;
// every value of it is accepted; one over bool is a bool, above).
template <typename T>
struct Wire<T, std::enable_if_t<(std::is_integral_v<T> && !std::is_same_v<T, bool>) ||
                                (IsScopedEnum<T>::value && !IsBoolEnum<T>::value)>>
    : WireBits<T, typename UnsignedOfSize<sizeof(T)>::Type> {
  static constexpr bool kEncodable = true;
};

// float and double: their IEEE 754 bits (a NaN's payload included).
template <typename T>
struct Wire<T, std::enable_if_t<std::is_floating_point_v<T>>>
    : WireBits<T, typename UnsignedOfSize<(sizeof(T) == 4 ? 4 : 8)>::Type> {
  static constexpr bool kEncodable =
      std::numeric_limits<T>::is_iec559 && (sizeof(T) == 4 || sizeof(T) == 8);
};

// Arrays: the elements in order.
template <typename E, std::size_t N>
struct WireArray {
  static constexpr bool kEncodable = Wire<E>::kEncodable;
  static constexpr std::size_t kSize = N * Wire<E>::kSize;
  template <typename A>
  static void Put(const A& values, std::uint8_t* out) noexcept {
    for (std::size_t i = 0; i < N; ++i) Wire<E>::Put(values[i], out + i * Wire<E>::kSize);
  }
  template <typename A>
  static bool Get(const std::uint8_t* in, A* values) noexcept {
    for (std::size_t i = 0; i < N; ++i) {
      if (!Wire<E>::Get(in + i * Wire<E>::kSize, &(*values)[i])) return false;
    }
    return true;
  }
};
template <typename E, std::size_t N>
struct Wire<E[N]> : WireArray<E, N> {};
template <typename E, std::size_t N>
struct Wire<std::array<E, N>> : WireArray<E, N> {};

template <typename T, typename Member>
struct MemberOf : std::false_type {};
template <typename T, typename M>
struct MemberOf<T, M T::*> : std::true_type {
  using Type = M;
};

// Field names (Fields<T>::kNames, optional): [A-Za-z][A-Za-z0-9_]*, the
// rule of ROS 1 and of most schema languages.
template <typename T, typename = void>
struct HasFieldNames : std::false_type {};
template <typename T>
struct HasFieldNames<T, std::void_t<decltype(Fields<T>::kNames)>> : std::true_type {};

constexpr bool IsFieldName(const char* name) {
  if (name == nullptr) return false;
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!letter(name[0])) return false;
  for (const char* c = name + 1; *c != '\0'; ++c) {
    if (!letter(*c) && !(*c >= '0' && *c <= '9') && *c != '_') return false;
  }
  return true;
}

constexpr bool SameFieldName(const char* a, const char* b) {
  for (; *a != '\0' && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}

// True without kNames; with them, one valid name a member, none twice.
template <typename T>
constexpr bool FieldNamesAreValid() {
  if constexpr (HasFieldNames<T>::value) {
    constexpr std::size_t kCount = std::size(Fields<T>::kNames);
    if (kCount != std::tuple_size_v<std::decay_t<decltype(Fields<T>::kMembers)>>) return false;
    for (std::size_t i = 0; i < kCount; ++i) {
      if (!IsFieldName(Fields<T>::kNames[i])) return false;
      for (std::size_t j = 0; j < i; ++j) {
        if (SameFieldName(Fields<T>::kNames[i], Fields<T>::kNames[j])) return false;
      }
    }
  }
  return true;
}

// A struct with a field list: each listed member in order.
template <typename T>
struct Wire<T, std::enable_if_t<HasFieldList<T>::value>> {
  static_assert(FieldNamesAreValid<T>(),
                "Sluice: sluice::nats::Fields<T>::kNames needs one name for each member in "
                "kMembers, each a field name ([A-Za-z][A-Za-z0-9_]*), no name twice");
  using List = std::decay_t<decltype(Fields<T>::kMembers)>;

  template <std::size_t... kI>
  static constexpr bool AllMembers(std::index_sequence<kI...>) {
    return (MemberOf<T, std::tuple_element_t<kI, List>>::value && ...);
  }
  template <std::size_t kI>
  using FieldType = typename MemberOf<T, std::tuple_element_t<kI, List>>::Type;
  template <std::size_t... kI>
  static constexpr bool AllEncodable(std::index_sequence<kI...>) {
    return (Wire<FieldType<kI>>::kEncodable && ...);
  }
  template <std::size_t... kI>
  static constexpr std::size_t SumSizes(std::index_sequence<kI...>) {
    return (std::size_t{0} + ... + Wire<FieldType<kI>>::kSize);
  }
  using Indices = std::make_index_sequence<std::tuple_size_v<List>>;

  // Each field's type is asked for only when every entry is a member of T.
  static constexpr bool Encodable() {
    if constexpr (AllMembers(Indices{})) {
      return AllEncodable(Indices{});
    } else {
      return false;
    }
  }
  static constexpr std::size_t Size() {
    if constexpr (Encodable()) {
      return SumSizes(Indices{});
    } else {
      return 0;
    }
  }

  static constexpr bool kListsMembersOfT = AllMembers(Indices{});
  // A union's members share their bytes: decoding one after another would
  // leave a member holding another's bytes (a bool holding 7), so a union
  // has no wire form, with or without a field list.
  static constexpr bool kEncodable = !std::is_union_v<T> && Encodable();
  static constexpr std::size_t kSize = Size();

  template <std::size_t... kI>
  static void PutAll(const T& value, std::uint8_t* out, std::index_sequence<kI...>) noexcept {
    std::size_t offset = 0;
    ((Wire<FieldType<kI>>::Put(value.*std::get<kI>(Fields<T>::kMembers), out + offset),
      offset += Wire<FieldType<kI>>::kSize),
     ...);
  }
  template <std::size_t... kI>
  static bool GetAll(const std::uint8_t* in, T* value, std::index_sequence<kI...>) noexcept {
    std::size_t offset = 0;
    bool ok = true;
    ((ok =
          ok && Wire<FieldType<kI>>::Get(in + offset, &(value->*std::get<kI>(Fields<T>::kMembers))),
      offset += Wire<FieldType<kI>>::kSize),
     ...);
    return ok;
  }
  static void Put(const T& value, std::uint8_t* out) noexcept { PutAll(value, out, Indices{}); }
  static bool Get(const std::uint8_t* in, T* value) noexcept {
    return GetAll(in, value, Indices{});
  }
};

// False only for a Fields<T> whose entries are not all members of T.
template <typename T>
constexpr bool FieldListIsOfT() {
  if constexpr (HasFieldList<T>::value) {
    return Wire<T>::kListsMembersOfT;
  } else {
    return true;
  }
}

}  // namespace detail

// Whether WireCodec<T> can encode T: a scalar, an array of encodable
// elements, or a struct whose Fields list encodable members of it.
template <typename T>
inline constexpr bool kHasWireForm = detail::Wire<T>::kEncodable;

// The bytes WireCodec<T> sends for a T.
template <typename T>
inline constexpr std::size_t kWireSize = detail::Wire<T>::kSize;

// A value's fields, little-endian, in order, and nothing else: see Fields.
// Decode accepts exactly kWireSize<T> bytes; a bool that is not 0 or 1
// refuses them.
template <typename T>
struct WireCodec {
  static_assert(!std::is_union_v<T>,
                "Sluice: a union has no wire form (its members share their bytes); give it a "
                "codec of its own");
  static_assert(detail::FieldListIsOfT<T>(),
                "Sluice: every entry of sluice::nats::Fields<T>::kMembers must be a pointer to "
                "a data member of T");
  static_assert(kHasWireForm<T>,
                "Sluice: a member listed in sluice::nats::Fields<T> has no wire form (bool, "
                "integers, scoped enums, float, double, arrays of them, or structs with Fields "
                "of their own); give the message a codec of its own");
  static_assert(std::is_default_constructible_v<T>,
                "Sluice: WireCodec<T> needs a default constructible T");

  static bool Encode(const T& value, std::string& out) {
    std::array<std::uint8_t, kWireSize<T>> bytes{};
    detail::Wire<T>::Put(value, bytes.data());
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return true;
  }

  static std::optional<T> Decode(const std::uint8_t* data, std::size_t size) {
    if (size != kWireSize<T> || (size != 0 && data == nullptr)) return std::nullopt;
    T value{};
    if (!detail::Wire<T>::Get(data, &value)) return std::nullopt;
    return value;
  }
};

// Opt-in, never chosen by DefaultCodec: the object representation of a T in
// which every byte belongs to the value (std::has_unique_object_
// representations: no padding, no floating point), which for a struct of
// integers on a little-endian host is its fields in order, little-endian,
// as WireCodec writes them. Decode accepts exactly sizeof(T) bytes and
// checks nothing else: name it only for structs of integers. A bool, an
// enum or a pointer inside would take any bytes from the network, which is
// undefined behaviour to read; give such a struct Fields.
template <typename T>
struct TriviallyCopyableCodec {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "Sluice: TriviallyCopyableCodec<T> needs a trivially copyable, default "
                "constructible T");
  static_assert(std::has_unique_object_representations_v<T>,
                "Sluice: TriviallyCopyableCodec<T> would send T's padding bytes (or T has "
                "floating-point members, whose bytes it cannot vouch for); list T's fields in "
                "sluice::nats::Fields<T> for WireCodec, or name a codec (docs/nats.md, Codecs)");
  static_assert(!std::is_pointer_v<T> && !std::is_member_pointer_v<T>,
                "Sluice: TriviallyCopyableCodec<T> would send an address; a pointer has no "
                "meaning in another process");
  static_assert(detail::IsLittleEndianHost<T>(),
                "Sluice: TriviallyCopyableCodec<T> sends host byte order, which is the wire's "
                "little-endian order only on little-endian hosts; use Fields<T> (WireCodec)");

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

// Why a T has no built-in codec (DefaultCodec<T> is then one of these).
struct NoCodecNotTriviallyCopyable {};
struct NoCodecListTheFields {};
struct NoCodecNoWireForm {};

template <typename T>
constexpr auto SelectDefaultCodec() {
  // A union has no wire form, field list or not (Wire's kEncodable).
  if constexpr (!std::is_union_v<T> && (HasFieldList<T>::value || kHasWireForm<T>)) {
    return WireCodec<T>{};
  } else if constexpr (!std::is_trivially_copyable_v<T>) {
    return NoCodecNotTriviallyCopyable{};
  } else if constexpr (std::is_class_v<T>) {  // a union is not a class here
    return NoCodecListTheFields{};
  } else {
    return NoCodecNoWireForm{};
  }
}

}  // namespace detail

// Whether `Codec` is a codec for T (the two functions above, with those
// result types).
template <typename Codec, typename T>
inline constexpr bool kIsCodecFor =
    detail::HasEncode<Codec, T>::value&& detail::HasDecode<Codec, T>::value;

// What a route uses when it names no codec: WireCodec<T> for a T with
// Fields, a scalar (not an unscoped enum) or an array of them; else a type
// that is a compile error where used, saying why. A struct is never sent
// as its bytes unless TriviallyCopyableCodec is named.
template <typename T>
using DefaultCodec = decltype(detail::SelectDefaultCodec<T>());

// Whether T has a built-in codec (DefaultCodec<T> is one).
template <typename T>
inline constexpr bool kHasDefaultCodec = kIsCodecFor<DefaultCodec<T>, T>;

// The compile-time check each route applies to its codec.
template <typename Codec, typename T>
constexpr void CheckCodec() noexcept {
  static_assert(!std::is_same_v<Codec, detail::NoCodecNotTriviallyCopyable>,
                "Sluice: this message type is not trivially copyable, so it has no built-in "
                "NATS codec; name one as the route's second template argument (docs/nats.md, "
                "Codecs)");
  static_assert(!std::is_same_v<Codec, detail::NoCodecListTheFields>,
                "Sluice: list this struct's fields in sluice::nats::Fields<T> to send it over "
                "NATS (docs/nats.md, Codecs): its memory may hold padding, and a bool, an enum "
                "or a pointer in it could not be checked on arrival; or name a codec");
  static_assert(!std::is_same_v<Codec, detail::NoCodecNoWireForm>,
                "Sluice: this message type has no wire form (a pointer, an unscoped enum or a "
                "union); name a codec (docs/nats.md, Codecs)");
  if constexpr (!std::is_same_v<Codec, detail::NoCodecNotTriviallyCopyable> &&
                !std::is_same_v<Codec, detail::NoCodecListTheFields> &&
                !std::is_same_v<Codec, detail::NoCodecNoWireForm>) {
    static_assert(kIsCodecFor<Codec, T>,
                  "Sluice: a NATS codec for T needs static bool Encode(const T&, std::string&) "
                  "and static std::optional<T> Decode(const std::uint8_t*, std::size_t)");
  }
}

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
