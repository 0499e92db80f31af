// AsyncBus::Producer: a registered producer's handle to its lane
// (detail/queue/producer_lanes.hpp). Its publish calls are the bus's, written once
// (detail/publish/publish_api.hpp); admission applies the bus's thresholds to the
// lane's fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/publish/publish_api.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

template <typename Payload, std::size_t kCapacity, ProducerModel kProducers, typename Traits>
class AsyncBus;

namespace detail {

// A registered producer: publishes into a lane of its own, wait-free and
// with no locked instruction (see AsyncBus::RegisterProducer). Move-only;
// destroying it, or Unregister(), hands the lane back. Its calls are those
// of the bus with the same names and results; admission applies the bus's
// thresholds to the lane's fill (Traits::Lanes::kCapacity), and a fill refusal
// is PublishOutcome::kLaneFull. One thread (or interrupt handler) at a time
// may use a Producer, and it must not outlive its bus. An invalid Producer
// (default-constructed, moved from, unregistered, or returned when every
// lane was taken) refuses every publish (kRejected) and counts nothing.
template <typename CoreType, typename Payload, typename Traits>
class LaneProducer : public PublishApi<LaneProducer<CoreType, Payload, Traits>, Payload> {
  static constexpr bool kHasLanes = CoreType::kHasLanes;

 public:
  LaneProducer() noexcept = default;
  LaneProducer(LaneProducer&& other) noexcept
      : core_(std::exchange(other.core_, nullptr)), lane_(other.lane_) {}
  LaneProducer& operator=(LaneProducer&& other) noexcept {
    if (this != &other) {
      Unregister();
      core_ = std::exchange(other.core_, nullptr);
      lane_ = other.lane_;
    }
    return *this;
  }
  LaneProducer(const LaneProducer&) = delete;
  LaneProducer& operator=(const LaneProducer&) = delete;
  ~LaneProducer() { Unregister(); }

  bool IsValid() const noexcept { return core_ != nullptr; }
  explicit operator bool() const noexcept { return IsValid(); }
  // The lane's number in MessageHeader::lane (1 to Lanes::kMaxProducers); 0
  // when invalid.
  std::uint16_t Lane() const noexcept {
    return core_ == nullptr ? 0 : static_cast<std::uint16_t>(lane_ + 1);
  }

  // Hands the lane back (messages still in it are dispatched as usual);
  // the Producer becomes invalid. Not while a publish of it runs.
  void Unregister() noexcept {
    if constexpr (kHasLanes) {
      if (core_ != nullptr) core_->UnregisterLane(lane_);
    }
    core_ = nullptr;
  }

  // This producer's lane: its counters (the bus's GetStatistics adds every
  // lane's in), its fill and its backpressure level (of Lanes::kCapacity).
  // Counters stay with the lane: a later owner's are added to them.
  BusStatisticsSnapshot GetStatistics() const noexcept {
    RequireLanes();
    if constexpr (kHasLanes) {
      if (core_ != nullptr) return core_->LaneCounts(lane_);
    }
    return BusStatisticsSnapshot{};
  }
  std::size_t QueueDepth() const noexcept {
    RequireLanes();
    if constexpr (kHasLanes) {
      if (core_ != nullptr) return static_cast<std::size_t>(core_->LaneDepth(lane_));
    }
    return 0;
  }
  // How many more messages of `priority` admission would take into this
  // producer's lane now (the lane's limit less its fill); 0 for an invalid
  // Producer, once closed, or for an unknown priority.
  std::size_t RoomFor(MessagePriority priority) const noexcept {
    RequireLanes();
    if constexpr (kHasLanes) {
      if (core_ != nullptr) return static_cast<std::size_t>(core_->LaneRoomFor(lane_, priority));
    }
    return 0;
  }
  BackpressureLevel GetBackpressureLevel() const noexcept {
    if (core_ == nullptr) return BackpressureLevel::NORMAL;
    return core_->LaneLevelOf(static_cast<Position>(QueueDepth()));
  }

 private:
  template <typename, std::size_t, ProducerModel, typename>
  friend class ::sluice::AsyncBus;
  friend class PublishApi<LaneProducer, Payload>;
  using Core = CoreType;
  static constexpr bool kOffersBlocking = false;

  LaneProducer(Core* core, std::uint32_t lane) noexcept : core_(core), lane_(lane) {}

  static constexpr void RequireLanes() noexcept {
    static_assert(kHasLanes,
                  "Sluice: a Producer publishes into a producer lane: `using Lanes = "
                  "sluice::ProducerLanes<kMaxProducers>;` in the bus traits");
  }

  // The publish API's hooks.
  bool CanPublish() const noexcept { return core_ != nullptr; }
  Core& PublishCore() noexcept { return *core_; }
  typename Core::LaneSource PublishSource() noexcept {
    RequireLanes();
    return core_->Lane(lane_);
  }

  Core* core_ = nullptr;
  std::uint32_t lane_ = 0;
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
