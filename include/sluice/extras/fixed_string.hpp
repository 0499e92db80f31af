// FixedString: text with inline storage, for messages that must not allocate.
// Nothing is ever cut silently: try_assign/try_append refuse what does not fit, and
// the *Truncated variants say how many bytes they dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

template <std::size_t kCapacity>
class FixedString {
  static_assert(kCapacity > 0, "Sluice: a FixedString needs a capacity");

 public:
  using SizeType =
      std::conditional_t<(kCapacity <= 0xFF), std::uint8_t,
                         std::conditional_t<(kCapacity <= 0xFFFF), std::uint16_t, std::uint32_t>>;

  constexpr FixedString() noexcept = default;

  // From a string literal; a literal longer than kCapacity does not compile.
  // C++17 cannot tell a literal from another const char array, so the text
  // ends at the first NUL: a const buffer holding a shorter text gives that
  // text, not the buffer's size with NULs. A mutable char array does not
  // compile (its contents are not known when the code is written); use
  // try_assign or assign_truncated for it.
  template <std::size_t kLength>
  constexpr FixedString(const char (&literal)[kLength]) noexcept {  // NOLINT: implicit on purpose
    static_assert(kLength - 1 <= kCapacity, "Sluice: string literal longer than the FixedString");
    std::size_t length = 0;
    while (length + 1 < kLength && literal[length] != '\0') {
      data_[length] = literal[length];
      ++length;
    }
    size_ = static_cast<SizeType>(length);
  }
  template <std::size_t kLength>
  FixedString(char (&buffer)[kLength]) noexcept {  // NOLINT: implicit, to be chosen and refused
    static_assert(kLength == 0,
                  "Sluice: a FixedString is built implicitly only from a string literal; "
                  "use try_assign or assign_truncated for a char buffer");
    (void)buffer;
  }

  static constexpr std::size_t capacity() noexcept { return kCapacity; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const char* data() const noexcept { return data_; }
  constexpr const char* c_str() const noexcept { return data_; }  // NUL-terminated
  constexpr std::string_view view() const noexcept { return std::string_view(data_, size_); }
  constexpr operator std::string_view() const noexcept { return view(); }  // NOLINT

  constexpr void clear() noexcept { Resize(0); }

  // Replaces the contents with `text` if it fits; otherwise returns false and
  // leaves the string unchanged.
  [[nodiscard]] constexpr bool try_assign(std::string_view text) noexcept {
    if (text.size() > kCapacity) return false;
    CopyAt(0, text);
    return true;
  }

  // Appends `text` if it fits; otherwise returns false and changes nothing.
  [[nodiscard]] constexpr bool try_append(std::string_view text) noexcept {
    if (text.size() > kCapacity - size_) return false;
    CopyAt(size_, text);
    return true;
  }

  // Replaces the contents with as much of `text` as fits, never splitting a
  // UTF-8 sequence; returns the number of bytes left out (0: all of it).
  constexpr std::size_t assign_truncated(std::string_view text) noexcept {
    return CopyTruncatedAt(0, text);
  }
  constexpr std::size_t append_truncated(std::string_view text) noexcept {
    return CopyTruncatedAt(size_, text);
  }

  // Comparisons with text on either side, and with a FixedString of any
  // capacity. A literal on the left compares as text, so one longer than
  // kCapacity is simply unequal, as it is on the right.
  friend constexpr bool operator==(const FixedString& a, std::string_view b) noexcept {
    return a.view() == b;
  }
  friend constexpr bool operator==(std::string_view a, const FixedString& b) noexcept {
    return a == b.view();
  }
  friend constexpr bool operator!=(const FixedString& a, std::string_view b) noexcept {
    return a.view() != b;
  }
  friend constexpr bool operator!=(std::string_view a, const FixedString& b) noexcept {
    return a != b.view();
  }
  template <std::size_t kOther>
  friend constexpr bool operator==(const FixedString& a, const FixedString<kOther>& b) noexcept {
    return a.view() == b.view();
  }
  template <std::size_t kOther>
  friend constexpr bool operator!=(const FixedString& a, const FixedString<kOther>& b) noexcept {
    return a.view() != b.view();
  }

 private:
  constexpr void Resize(std::size_t size) noexcept {
    size_ = static_cast<SizeType>(size);
    data_[size] = '\0';
  }
  constexpr void CopyAt(std::size_t at, std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size(); ++i) data_[at + i] = text[i];
    Resize(at + text.size());
  }
  // Cuts `text` to what fits, stepping back only over a well-formed UTF-8
  // sequence that the cut would split: a lead byte whose continuation bytes
  // run past the cut. Stray continuation bytes and broken sequences are not
  // characters to keep whole, so the bytes that fit are kept.
  constexpr std::size_t CopyTruncatedAt(std::size_t at, std::string_view text) noexcept {
    std::size_t fits = text.size() <= kCapacity - at ? text.size() : kCapacity - at;
    if (fits < text.size()) fits = SequenceStart(text, fits);
    CopyAt(at, text.substr(0, fits));
    return text.size() - fits;
  }
  static constexpr bool IsContinuation(char byte) noexcept {
    return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
  }
  // Bytes in the sequence that `lead` starts: 2 to 4, or 0 if it starts none.
  static constexpr std::size_t SequenceLength(char lead) noexcept {
    const auto byte = static_cast<unsigned char>(lead);
    if (byte >= 0xC0 && byte <= 0xDF) return 2;
    if (byte >= 0xE0 && byte <= 0xEF) return 3;
    if (byte >= 0xF0 && byte <= 0xF7) return 4;
    return 0;
  }
  // `cut` (0 < cut < text.size()), or the start of the well-formed sequence
  // it falls inside.
  static constexpr std::size_t SequenceStart(std::string_view text, std::size_t cut) noexcept {
    std::size_t lead = cut;
    // A sequence is at most 4 bytes: its lead is at most 3 before the cut.
    while (lead > 0 && cut - lead < 3 && IsContinuation(text[lead - 1])) --lead;
    if (lead == 0) return cut;  // only continuation bytes before the cut
    --lead;                     // the byte before them: a lead byte, or no sequence at all
    const std::size_t length = SequenceLength(text[lead]);
    if (length == 0 || lead + length <= cut || lead + length > text.size()) return cut;
    for (std::size_t i = cut; i < lead + length; ++i) {
      if (!IsContinuation(text[i])) return cut;
    }
    return lead;
  }

  char data_[kCapacity + 1] = {};
  SizeType size_ = 0;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
