// The steps of ShmBus::Create between which another consumer may act, and
// the hook that lets a test stop or kill a consumer at one of them
// (tests/ipc/peer.cpp defines SLUICE_IPC_CREATE_STEP before it includes
// the bus; tests/ipc/create_race_test.cpp forces each interleaving). By
// default the hook is nothing and costs nothing.
#pragma once

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

enum class CreateStep {
  kMade,             // the new segment written whole and stamped, unnamed
  kNameTaken,        // linking it failed: another segment holds the name
  kOpened,           // that segment opened and trusted, not yet locked
  kLocked,           // its lock taken, not yet rechecked and judged
  kUnlinked,         // judged stale and its name removed, ours not yet linked
  kIdentityWritten,  // taking over: our identity written, the lock still held
  kLinked,           // ours named: made
};

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice

#ifndef SLUICE_IPC_CREATE_STEP
#define SLUICE_IPC_CREATE_STEP(step) static_cast<void>(0)
#endif
