// The token Subscribe returns and Unsubscribe takes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice {

namespace detail {
template <typename Payload, typename Traits>
class SubscriptionRegistry;
}  // namespace detail

// Identifies one subscription of the bus that issued it. Copyable; only the
// first Unsubscribe of a handle succeeds. A default-constructed handle, or
// the one Subscribe returns when the type's table is full, is not valid().
class SubscriptionHandle {
 public:
  constexpr SubscriptionHandle() noexcept = default;

  constexpr bool valid() const noexcept { return type_index_ != kInvalidIndex; }
  // payload.index() of the subscribed type.
  constexpr std::size_t type_index() const noexcept { return type_index_; }

  friend constexpr bool operator==(const SubscriptionHandle& a,
                                   const SubscriptionHandle& b) noexcept {
    return a.type_index_ == b.type_index_ && a.slot_ == b.slot_ && a.generation_ == b.generation_;
  }
  friend constexpr bool operator!=(const SubscriptionHandle& a,
                                   const SubscriptionHandle& b) noexcept {
    return !(a == b);
  }

 private:
  template <typename Payload, typename Traits>
  friend class detail::SubscriptionRegistry;

  static constexpr std::uint16_t kInvalidIndex = 0xFFFF;

  constexpr SubscriptionHandle(std::uint16_t type_index, std::uint16_t slot,
                               std::uint32_t generation) noexcept
      : type_index_(type_index), slot_(slot), generation_(generation) {}

  std::uint16_t type_index_ = kInvalidIndex;
  std::uint16_t slot_ = 0;
  std::uint32_t generation_ = 0;
};

}  // namespace sluice
