// What PublishBlocking reports: admitted, or why not.
#pragma once

#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class PublishStatus : std::uint8_t {
  kAdmitted = 0,
  // No room below the priority's threshold before the timeout. Counted in
  // messages_dropped (FULL_FEATURED), once per call.
  kTimedOut = 1,
  // The bus was closed before the call or while it waited. Counted in
  // messages_refused_closed.
  kClosed = 2,
  // Bad input (a valueless variant, an unknown priority); never waited.
  // Counted in messages_rejected.
  kRejected = 3,
  // Called from inside this bus's own dispatch (a callback or visitor) with
  // no room: the room could only come from the batch the call is part of,
  // so it does not wait. Counted in messages_dropped (FULL_FEATURED).
  kWouldDeadlock = 4,
};

constexpr const char* ToString(PublishStatus status) noexcept {
  switch (status) {
    case PublishStatus::kAdmitted:
      return "admitted";
    case PublishStatus::kTimedOut:
      return "timed out";
    case PublishStatus::kClosed:
      return "closed";
    case PublishStatus::kRejected:
      return "rejected";
    case PublishStatus::kWouldDeadlock:
      return "would deadlock";
  }
  return "invalid";
}

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
