// Test seams: reach into a bus to set up states that would take hours to
// reach by its public calls. For tests only; not part of the API.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

struct TestAccess {
 private:
  // A bus's parts (its core), or the object itself for a part tested alone.
  template <typename T>
  static auto Parts(T& object, int) -> decltype((object.core_)) {
    return object.core_;
  }
  template <typename T>
  static T& Parts(T& object, long) {
    return object;
  }

  // A bus's subscription table, or the object's own for a table tested
  // alone.
  template <typename T>
  static auto RegistryOf(T& object, int) -> decltype((object.core_.consume_.Subscriptions())) {
    return object.core_.consume_.Subscriptions();
  }
  template <typename T>
  static auto RegistryOf(T& object, long) -> decltype((object.registry_)) {
    return object.registry_;
  }

  // The claim of the one StartLanePublish in progress, per queue type.
  template <typename QueueRef>
  static auto& PendingClaim() {
    static typename std::remove_reference_t<QueueRef>::Claim claim{};
    return claim;
  }

 public:
  // Makes subscription slot `slot` of payload alternative `type` free with
  // generation `generation`, as if it had been reused that many times.
  template <typename Bus>
  static void SetSubscriptionGeneration(Bus& bus, std::size_t type, std::size_t slot,
                                        Position generation) {
    auto& registry = RegistryOf(bus, 0);
    using Registry = std::remove_reference_t<decltype(registry)>;
    registry.tables_[type].slots[slot].state.store(Registry::Pack(generation, Registry::kFree),
                                                   std::memory_order_relaxed);
  }

  // Reports `error` as the consumer does, inside a dispatch batch, without
  // a throwing callback (whose unwinding is slow to single-step).
  template <typename Bus>
  static void ReportErrorInBatch(Bus& bus, const BusError& error) {
    bus.core_.consume_.Epoch().Enter();
    bus.core_.consume_.Errors().Report(error);
    bus.core_.consume_.Epoch().Exit();
  }

  // How many producers wait in PublishBlocking for room for `priority`
  // (announced, not yet woken).
  template <typename Bus>
  static std::uint32_t RoomWaiters(const Bus& bus, std::size_t priority) {
    return bus.core_.room_.Waiters(priority);
  }

  // Sets lane `lane`'s `publishing` flag, as a publish of its producer
  // preempted between that store and its check of Close leaves it.
  template <typename Bus>
  static void SetLanePublishing(Bus& bus, std::uint32_t lane, bool publishing) {
    bus.core_.queue_.LaneAt(lane).publishing.store(publishing ? 1 : 0, std::memory_order_relaxed);
  }

  // Stores `mode` in the word a run-time mode is read from (what
  // SetPerformanceMode stores), bypassing a FixedMode bus's compile error.
  template <typename Bus>
  static void StoreRunTimeMode(Bus& bus, PerformanceMode mode) {
    bus.core_.policy_.SetMode(mode);
  }

  // How many consumers have announced that they sleep (0 or 1).
  template <typename Bus>
  static std::uint32_t ConsumerWaiters(const Bus& bus) {
    return bus.core_.wake_->Waiters();
  }

  // A publish into producer lane `lane` (index from 0) of a priority-ordered
  // bus, stopped before its last store (the ring's tail: a lane has one
  // producer): the claims are taken, the queue's committed and the
  // envelope built, as for a producer
  // interrupted at that instruction. Returns false when refused.
  // FinishLanePublish makes the store.
  template <typename Bus, typename Message>
  static bool StartLanePublish(Bus& bus, std::uint32_t lane, MessagePriority priority,
                               Message message) {
    auto& queue = bus.core_.queue_.LaneAt(lane).queue;
    auto& claim = PendingClaim<decltype(queue)>();
    const Position limit = bus.core_.policy_.LaneLimitFor(PerformanceMode::BARE_METAL, priority);
    if (!queue.TryClaim(limit, priority, &claim)) return false;
    MessageHeader header;
    header.msg_id = claim.id;
    header.priority = priority;
    header.lane = static_cast<std::uint16_t>(lane + 1);
    new (queue.Storage(claim)) typename Bus::Envelope{header, message};
    queue.fill_.Commit(claim.id);
    return true;
  }
  template <typename Bus>
  static void FinishLanePublish(Bus& bus, std::uint32_t lane) {
    auto& queue = bus.core_.queue_.LaneAt(lane).queue;
    queue.Publish(PendingClaim<decltype(queue)>());
  }

  // A ring's claim tail, to write it as a writer that breaks the protocol
  // would (shared memory).
  template <typename Ring>
  static auto& RingTail(Ring& ring) {
    return ring.cursor_.parts_.Producer().tail;
  }

  // A priority queue's ring p and its fill cursor (in shared memory: views
  // of the producers' lines, to write them as a producer can).
  template <typename Queue>
  static auto& QueueRing(Queue& queue, std::size_t p) {
    return queue.rings_[p];
  }
  template <typename Queue>
  static auto& QueueFill(Queue& queue) {
    return queue.fill_;
  }

  // A claim cursor's tail (a queue's fill), likewise.
  template <typename Cursor>
  static auto& CursorTail(Cursor& cursor) {
    return cursor.parts_.Producer().tail;
  }

  // The free-list tag of a LoanPool (advanced by every acquire and release).
  template <typename Pool>
  static Position LoanPoolTag(const Pool& pool) {
    return pool.core_.Tag();
  }

  template <typename Bus>
  static constexpr Position LastSubscriptionGeneration() {
    using Registry = std::remove_reference_t<decltype(RegistryOf(std::declval<Bus&>(), 0))>;
    return Registry::kLastGeneration;
  }
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
