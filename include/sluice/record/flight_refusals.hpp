// A flight recorder's refusal counts (sluice/record/flight_recorder.hpp):
// the refusals its observer is told of, by priority, counted on the
// producers' threads, and where those counts stood at the start of each of
// the consumer's batches, so that a frozen window holds the refusals from
// the start of the batch that took its first message to its end.
// Refusals happen on producer threads and messages are taken on the
// consumer's, so a window's refusals are counted to the batch, not to the
// message. Hosted (one allocation, at construction).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

class FlightRefusals {
 public:
  // One checkpoint a batch, the last `capacity` kept (a power of two): the
  // recorder's ring's, since each batch took a message and a window is at
  // most that long.
  explicit FlightRefusals(std::size_t capacity)
      : capacity_(capacity),
        mask_(capacity - 1),
        checkpoints_(std::make_unique<Checkpoint[]>(capacity)) {}
  FlightRefusals(const FlightRefusals&) = delete;
  FlightRefusals& operator=(const FlightRefusals&) = delete;

  // A producer (any thread, an interrupt handler): `count` messages of
  // `priority` refused. Bad input with no valid priority is not counted.
  void Count(MessagePriority priority, std::uint64_t count) noexcept {
    const auto index = static_cast<std::size_t>(priority);
    if (index < 3) refused_[index].fetch_add(count, std::memory_order_relaxed);
  }

  // The consumer, before a batch's first message, the batch's first
  // position: where the refusal counts stood.
  void NoteBatchStart(std::uint64_t position) noexcept {
    Checkpoint& checkpoint = checkpoints_[checkpoint_count_ & mask_];
    checkpoint.position = position;
    for (int i = 0; i < 3; ++i) {
      checkpoint.refused[i] = refused_[i].load(std::memory_order_relaxed);
    }
    ++checkpoint_count_;
  }

  // The consumer: the refusals from the start of the batch that took
  // `position` until now, by priority.
  void RefusedSinceBatchOf(std::uint64_t position, std::uint64_t (&refused)[3]) const noexcept {
    const Checkpoint& from = CheckpointAtOrBefore(position);
    for (int i = 0; i < 3; ++i) {
      refused[i] = refused_[i].load(std::memory_order_relaxed) - from.refused[i];
    }
  }

 private:
  struct Checkpoint {
    std::uint64_t position = 0;
    std::uint64_t refused[3] = {0, 0, 0};
  };

  // The newest checkpoint at or before `position`: the start of the batch
  // that took it. The last `capacity_` checkpoints reach that far back
  // (each batch took a message, and the window is at most capacity_ long).
  const Checkpoint& CheckpointAtOrBefore(std::uint64_t position) const noexcept {
    static const Checkpoint kNone{};
    if (checkpoint_count_ == 0) return kNone;
    std::uint64_t low = checkpoint_count_ > capacity_ ? checkpoint_count_ - capacity_ : 0;
    std::uint64_t high = checkpoint_count_;  // [low, high): positions rise
    if (checkpoints_[low & mask_].position > position) return checkpoints_[low & mask_];
    while (high - low > 1) {
      const std::uint64_t middle = low + (high - low) / 2;
      if (checkpoints_[middle & mask_].position <= position) {
        low = middle;
      } else {
        high = middle;
      }
    }
    return checkpoints_[low & mask_];
  }

  // The bus's consumer's.
  const std::size_t capacity_;
  const std::uint64_t mask_;
  std::unique_ptr<Checkpoint[]> checkpoints_;
  std::uint64_t checkpoint_count_ = 0;
  // Producers' (a relaxed add a refusal), on a cache line of their own,
  // apart from the consumer's checkpoints above and from what the
  // recorder keeps beside this object.
  alignas(kCacheLineSize) std::atomic<std::uint64_t> refused_[3] = {};
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
