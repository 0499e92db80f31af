// What the bus reports when a subscriber or visitor fails.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

enum class BusErrorCode : std::uint8_t {
  kCallbackThrew = 1,  // a subscription callback threw; the next one still runs
  kVisitorThrew = 2,   // a ProcessBatchWith visitor threw
  // A shared-memory bus's OnProducerExit handler threw (no message failed:
  // msg_id, sender_id and type_index are 0): counted and observed, not
  // passed to the error callback.
  kExitHandlerThrew = 3,
};

struct BusError {
  BusErrorCode code = BusErrorCode::kCallbackThrew;
  std::uint64_t msg_id = 0;
  std::uint32_t sender_id = 0;
  std::size_t type_index = 0;  // payload.index() of the failed message
  // std::exception::what(), or a fixed text: valid while the error callback
  // (or the observer's OnError) runs only, as the exception is destroyed
  // after it; copy the text to keep it.
  const char* what = "";
};

// Called on the consumer thread, after the error is counted. It must not
// throw; an exception escaping it is swallowed.
using ErrorCallback = void (*)(const BusError& error, void* context);

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
