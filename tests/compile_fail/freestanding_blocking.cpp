// SLUICE_FREESTANDING: a bus with a parker (a wait-for-interrupt one, say)
// sleeps its consumer, but PublishBlocking does not compile. With
// CALL_PUBLISH_BLOCKING=0 the same translation unit compiles.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <variant>

#include "sluice/sluice.hpp"

struct SpinParker {
  void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
            std::chrono::nanoseconds) noexcept {
    while (word.load(std::memory_order_acquire) == expected) {
    }
  }
  void WakeAll(std::atomic<std::uint32_t>&) noexcept {}
};
struct Traits : sluice::DefaultBusTraits {
  using Waiting = sluice::WaitWith<SpinParker>;
};

int main() {
  sluice::MpscBus<std::variant<int>, 8, Traits> bus;
  bool ok = bus.PublishWithPriority(1, 0, sluice::MessagePriority::HIGH).IsAdmitted();
#if CALL_PUBLISH_BLOCKING
  ok = bus.PublishBlocking(1, 0, sluice::MessagePriority::HIGH, std::chrono::seconds(1)) ==
           sluice::PublishOutcome::kAdmitted &&
       ok;
#endif
  return ok ? 0 : (bus.ProcessBatchWait(std::chrono::seconds(0)) > 0 ? 0 : 1);
}
