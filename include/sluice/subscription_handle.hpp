// The token Subscribe returns, and what Unsubscribe did with it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

namespace detail {
template <typename Payload, typename Traits>
class SubscriptionRegistry;
}  // namespace detail

// Identifies one subscription of the bus that issued it. Copyable; only the
// first Unsubscribe of a handle succeeds, and only on the bus that issued it.
// A default-constructed handle, or the one Subscribe returns when the type's
// table is full, is not IsValid().
class SubscriptionHandle {
 public:
  constexpr SubscriptionHandle() noexcept = default;

  constexpr bool IsValid() const noexcept { return type_index_ != kInvalidIndex; }
  // payload.index() of the subscribed type.
  constexpr std::size_t TypeIndex() const noexcept { return type_index_; }

  friend constexpr bool operator==(const SubscriptionHandle& a,
                                   const SubscriptionHandle& b) noexcept {
    return a.type_index_ == b.type_index_ && a.slot_ == b.slot_ && a.generation_ == b.generation_ &&
           a.bus_id_ == b.bus_id_;
  }
  friend constexpr bool operator!=(const SubscriptionHandle& a,
                                   const SubscriptionHandle& b) noexcept {
    return !(a == b);
  }

 private:
  template <typename Payload, typename Traits>
  friend class detail::SubscriptionRegistry;

  static constexpr std::uint16_t kInvalidIndex = 0xFFFF;

  constexpr SubscriptionHandle(std::uint16_t type_index, std::uint16_t slot, Position generation,
                               Position bus_id) noexcept
      : type_index_(type_index), slot_(slot), generation_(generation), bus_id_(bus_id) {}

  std::uint16_t type_index_ = kInvalidIndex;
  std::uint16_t slot_ = 0;
  Position generation_ = 0;
  Position bus_id_ = 0;  // which bus issued it; 0 for none
};

// What Unsubscribe did with a handle.
enum class UnsubscribeStatus : std::uint8_t {
  kNotSubscribed,  // invalid, stale, foreign or already used handle: nothing changed
  kRemoved,        // not running and never called again: its state may be freed now
  // Not called by any later dispatch, but the dispatch in progress may be
  // inside it or about to call it once: the caller's own callback, or
  // (SLUICE_FREESTANDING) the one a preempted dispatch was about to call or
  // was running. The callable is destroyed when that batch ends; free what
  // it uses only after that.
  kRemovedWhileRunning,
};

// What Unsubscribe did. True (explicit bool) once per live handle.
class [[nodiscard]] UnsubscribeResult {
 public:
  constexpr explicit UnsubscribeResult(UnsubscribeStatus status) noexcept : status_(status) {}

  constexpr UnsubscribeStatus Status() const noexcept { return status_; }
  constexpr bool Removed() const noexcept { return status_ != UnsubscribeStatus::kNotSubscribed; }
  constexpr bool StillRunning() const noexcept {
    return status_ == UnsubscribeStatus::kRemovedWhileRunning;
  }
  constexpr explicit operator bool() const noexcept { return Removed(); }

 private:
  UnsubscribeStatus status_;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
