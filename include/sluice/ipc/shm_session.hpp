// What ShmBus::Create (sluice/ipc/shm_bus.hpp) decides about a name that
// another segment holds, and the consumer's sleep slice. The protocol of
// making a name ours is ConsumerSegment::Create's
// (sluice/ipc/shm_consumer_segment.hpp, tests/spin/segment_create.pml);
// judging a taken name, under the lock of the segment it names, is here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "sluice/config.hpp"
#include "sluice/ipc/create_steps.hpp"
#include "sluice/ipc/fingerprint.hpp"
#include "sluice/ipc/process_identity.hpp"
#include "sluice/ipc/segment.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// What Create does about a name that another segment holds.
enum class NameVerdict {
  kRefuse,    // *error says why
  kRetry,     // the name came free, or names another segment now: link again
  kReplace,   // stale and removed: link ours (`old` stays locked meanwhile)
  kTakeOver,  // its consumer was killed, same layout: take it (`old` locked)
};
// How many times Create tries to link its segment under the name.
inline constexpr int kCreateAttempts = 8;

// Judges the segment `name` names, under its lock (`old`, locked when the
// verdict is kReplace or kTakeOver; the lock goes with `old`), for a bus
// of layout `LayoutType`.
template <typename LayoutType>
NameVerdict JudgeName(const std::string& name, const SegmentPermissions& permissions, Segment* old,
                      AttachError* error) {
  using Header = typename LayoutType::Header;
  // Looked at before it is opened: another user's file, or one that is
  // no segment, is refused untouched (a non-root consumer could not even
  // open another user's 0600 segment, which would say kPermissionDenied).
  *error = Segment::Inspect(name, permissions);
  if (*error == AttachError::kNone) *error = Segment::Open(name, sizeof(Header), old, &permissions);
  if (*error == AttachError::kNotFound) return NameVerdict::kRetry;  // removed meanwhile
  // Too small or of another user: not ours, left alone; empty: being
  // made by a program that is not Sluice (kNotReady).
  if (*error != AttachError::kNone) return NameVerdict::kRefuse;
  SLUICE_IPC_CREATE_STEP(CreateStep::kOpened);
  *error = AttachError::kSystemError;
  if (!old->Lock()) return NameVerdict::kRefuse;
  SLUICE_IPC_CREATE_STEP(CreateStep::kLocked);
  // Judged or replaced by another consumer before we had the lock.
  if (!old->IsNamed(name)) return NameVerdict::kRetry;
  const Header* header = LayoutType::HeaderOf(old->Base());
  // (T): the identity is read only from a segment whose creator finished.
  const std::uint64_t magic = header->magic.load(std::memory_order_acquire);
  // Sluice names a segment only once it is stamped: one without the
  // stamp is another program's, or half written by one.
  *error = AttachError::kNotReady;
  if (magic == 0) return NameVerdict::kRefuse;
  *error = AttachError::kNotASegment;  // someone else's
  if (magic != kMagic) return NameVerdict::kRefuse;
  // The consumer's role: taken here, it was held by no one, so the
  // consumer that held it has exited (or closed); it stays ours, with
  // `old`, for the takeover. Held, its consumer runs, whatever its pid,
  // namespaces or /proc say.
  const bool gone = old->TakeRole(kConsumerRole);
  // Read after `gone`: only a live owner closes (Close stores the state
  // before it takes this lock), so once it is seen gone the state can
  // change no more. Read before, a consumer killed inside Close between
  // the two reads would have its closed segment taken over, and a third
  // consumer would then replace it under its new owner
  // (tests/spin/segment_create.pml, planted bug 7).
  const bool closed = header->state.load(std::memory_order_relaxed) == kClosed;
  *error = AttachError::kConsumerExists;
  if (!closed && !gone) return NameVerdict::kRefuse;
  *error = AttachError::kNone;
  // A consumer that was killed (not closed), of this very layout: its
  // queue is taken over, not thrown away.
  // One whose parts were never all named had no producer: made anew.
  if (!closed && LayoutType::Expected().Compare(header->fingerprint) == AttachError::kNone &&
      old->Size() >= LayoutType::kHeaderBytes &&
      header->parts_named.load(std::memory_order_acquire) != 0) {
    return NameVerdict::kTakeOver;
  }
  Segment::Unlink(name);
  SLUICE_IPC_CREATE_STEP(CreateStep::kUnlinked);
  return NameVerdict::kReplace;
}

// How long the consumer sleeps at most between two looks for producers
// that left (the producer check interval): 1 ms to an hour.
inline std::chrono::nanoseconds SleepSlice(const ShmBusOptions& options) noexcept {
  if (options.peer_check_interval < std::chrono::milliseconds(1)) {
    return std::chrono::milliseconds(1);
  }
  return options.peer_check_interval > std::chrono::hours(1) ? std::chrono::hours(1)
                                                             : options.peer_check_interval;
}

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
