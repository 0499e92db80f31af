// FixedString: text with inline storage, for messages that must not allocate.
// Nothing is ever cut silently: Assign/Append refuse what does not fit, and
// the *Truncated variants say how many bytes they dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace sluice {

template <std::size_t kCapacity>
class FixedString {
  static_assert(kCapacity > 0, "Sluice: a FixedString needs a capacity");

 public:
  using SizeType =
      std::conditional_t<(kCapacity <= 0xFF), std::uint8_t,
                         std::conditional_t<(kCapacity <= 0xFFFF), std::uint16_t, std::uint32_t>>;

  constexpr FixedString() noexcept = default;

  // From a string literal; a literal longer than kCapacity does not compile.
  template <std::size_t kLength>
  constexpr FixedString(const char (&literal)[kLength]) noexcept {  // NOLINT: implicit on purpose
    static_assert(kLength - 1 <= kCapacity, "Sluice: string literal longer than the FixedString");
    for (std::size_t i = 0; i + 1 < kLength; ++i) data_[i] = literal[i];
    size_ = static_cast<SizeType>(kLength - 1);
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
  [[nodiscard]] constexpr bool Assign(std::string_view text) noexcept {
    if (text.size() > kCapacity) return false;
    CopyAt(0, text);
    return true;
  }

  // Appends `text` if it fits; otherwise returns false and changes nothing.
  [[nodiscard]] constexpr bool Append(std::string_view text) noexcept {
    if (text.size() > kCapacity - size_) return false;
    CopyAt(size_, text);
    return true;
  }

  // Replaces the contents with as much of `text` as fits, never splitting a
  // UTF-8 sequence; returns the number of bytes left out (0: all of it).
  constexpr std::size_t AssignTruncated(std::string_view text) noexcept {
    return CopyTruncatedAt(0, text);
  }
  constexpr std::size_t AppendTruncated(std::string_view text) noexcept {
    return CopyTruncatedAt(size_, text);
  }

  friend constexpr bool operator==(const FixedString& a, std::string_view b) noexcept {
    return a.view() == b;
  }
  friend constexpr bool operator!=(const FixedString& a, std::string_view b) noexcept {
    return a.view() != b;
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
  constexpr std::size_t CopyTruncatedAt(std::size_t at, std::string_view text) noexcept {
    std::size_t fits = text.size() <= kCapacity - at ? text.size() : kCapacity - at;
    if (fits < text.size()) {
      // Step back over UTF-8 continuation bytes (10xxxxxx) to a boundary.
      while (fits > 0 && (static_cast<unsigned char>(text[fits]) & 0xC0) == 0x80) --fits;
    }
    CopyAt(at, text.substr(0, fits));
    return text.size() - fits;
  }

  char data_[kCapacity + 1] = {};
  SizeType size_ = 0;
};

}  // namespace sluice
