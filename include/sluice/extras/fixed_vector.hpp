// FixedVector: up to kCapacity elements stored inline, for messages that must
// not allocate. Adding to a full vector is refused and says so (try_push_back
// returns false, try_emplace_back nullptr); nothing is dropped silently.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

template <typename T, std::size_t kCapacity>
class FixedVector {
  static_assert(kCapacity > 0, "Sluice: a FixedVector needs a capacity");
  static_assert(std::is_nothrow_destructible_v<T>,
                "Sluice: elements must not throw on destruction");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  FixedVector() noexcept = default;
  // Delegating to the default constructor makes the object complete before
  // the copies start, so a copy that throws still destroys the earlier ones.
  FixedVector(const FixedVector& other) noexcept(std::is_nothrow_copy_constructible_v<T>)
      : FixedVector() {
    for (const T& item : other) Construct(item);
  }
  // The source is left empty, as std::vector leaves it, not holding
  // moved-from elements.
  FixedVector(FixedVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
      : FixedVector() {
    for (T& item : other) Construct(std::move(item));
    other.clear();
  }
  FixedVector& operator=(const FixedVector& other) noexcept(
      std::is_nothrow_copy_constructible_v<T>) {
    if (this != &other) {
      clear();
      for (const T& item : other) Construct(item);
    }
    return *this;
  }
  FixedVector& operator=(FixedVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      clear();
      for (T& item : other) Construct(std::move(item));
      other.clear();
    }
    return *this;
  }
  ~FixedVector() { clear(); }

  static constexpr std::size_t capacity() noexcept { return kCapacity; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool full() const noexcept { return size_ == kCapacity; }

  T* data() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* data() const noexcept { return std::launder(reinterpret_cast<const T*>(storage_)); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size_; }
  // Unchecked, like std::vector's; index < size().
  T& operator[](std::size_t index) noexcept { return data()[index]; }
  const T& operator[](std::size_t index) const noexcept { return data()[index]; }

  // False, and nothing added, when the vector is full.
  [[nodiscard]] bool try_push_back(const T& item) noexcept(
      std::is_nothrow_copy_constructible_v<T>) {
    return try_emplace_back(item) != nullptr;
  }
  [[nodiscard]] bool try_push_back(T&& item) noexcept(std::is_nothrow_move_constructible_v<T>) {
    return try_emplace_back(std::move(item)) != nullptr;
  }
  // The new element, or nullptr when the vector is full.
  template <typename... Args>
  [[nodiscard]] T* try_emplace_back(Args&&... args) noexcept(
      std::is_nothrow_constructible_v<T, Args&&...>) {
    if (full()) return nullptr;
    return Construct(std::forward<Args>(args)...);
  }

  void pop_back() noexcept {
    if (size_ > 0) data()[--size_].~T();
  }
  void clear() noexcept {
    while (size_ > 0) pop_back();
  }

 private:
  template <typename... Args>
  T* Construct(Args&&... args) {
    T* item = new (storage_ + size_ * sizeof(T)) T(std::forward<Args>(args)...);
    ++size_;
    return item;
  }

  alignas(T) unsigned char storage_[sizeof(T) * kCapacity];
  std::size_t size_ = 0;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
