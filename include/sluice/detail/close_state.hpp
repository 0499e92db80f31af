// Whether a bus is closed, and the tail it closed at.
//
// Close is idempotent and never waits for another Close: each call closes the
// queue itself (ClaimCursor::Close moves the tail only if no earlier call
// did, and every call gets the same closed tail back), then publishes the
// state. A Close preempted half-way by another (a signal handler or an
// interrupt on the same thread) is finished by the one that preempted it.
//
// SYNC POINT (S): Finish() stores the closed tail, then the state kClosed
// with release; IsClosed() and ClosedTail() readers load the state with
// acquire first, so a reader that sees kClosed reads the closed tail. Every
// Close stores the same tail, so two overlapping ones cannot disagree.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

class CloseState {
 public:
  // Any thread: marks the bus as closing, so that refusals racing with the
  // close may be counted as refused for being closed.
  // True for the one call that moved the state from open.
  bool Begin() noexcept {
    std::uint32_t open = kOpen;
    return state_.compare_exchange_strong(open, kClosing, std::memory_order_relaxed,
                                          std::memory_order_relaxed);
  }
  // After the queue is closed at `tail`: SYNC POINT WRITE (S).
  void Finish(Position tail) noexcept {
    closed_tail_.store(tail, std::memory_order_relaxed);
    state_.store(kClosed, std::memory_order_release);
  }
  // True once a Close has returned. SYNC POINT READ (S).
  bool IsClosed() const noexcept { return state_.load(std::memory_order_acquire) == kClosed; }
  // Relaxed: a publish refused meanwhile asks only whether it may count the
  // refusal as "closed" (a race with Close may be counted either way).
  bool IsOpen() const noexcept { return state_.load(std::memory_order_relaxed) == kOpen; }
  // The tail the queue closed at; read only after IsClosed() returned true.
  Position ClosedTail() const noexcept { return closed_tail_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kOpen = 0;
  static constexpr std::uint32_t kClosing = 1;
  static constexpr std::uint32_t kClosed = 2;
  std::atomic<std::uint32_t> state_{kOpen};
  std::atomic<Position> closed_tail_{0};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
