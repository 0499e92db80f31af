// What a shared-memory bus's consumer (sluice/ipc/shm_bus.hpp) reads of its
// lanes: the gauges (the fullest lane on the segment's thresholds), the
// backpressure peak (fed by the consumer, since a producer in another
// process cannot write it), the statistics and each producer's figures for
// the exporters. The consumer thread only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "sluice/admission.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/observe/peak_fill.hpp"
#include "sluice/detail/observe/utf8.hpp"
#include "sluice/ipc/shm_lanes.hpp"
#include "sluice/ipc/shm_layout.hpp"
#include "sluice/ipc/shm_options.hpp"
#include "sluice/message.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {
namespace detail {

// The gauges and the peak, over a segment's lanes and thresholds.
template <typename Payload, std::size_t kCapacity, typename Traits>
class ShmGauges {
  using Lanes = ConsumerLanes<Payload, kCapacity, Traits>;
  static constexpr std::size_t kLanes = Lanes::kLanes;

 public:
  // The fullest lane and its level.
  struct Gauge {
    Position fill = 0;
    BackpressureLevel level = BackpressureLevel::NORMAL;
  };

  // The segment's thresholds (fixed for its life; a taken-over one keeps
  // its own), and a new period of the peak. Thresholds written wrong there
  // read as the defaults, for the gauges only.
  void Begin(const AdmissionThresholds& thresholds) noexcept {
    thresholds_ = thresholds;
    if (!thresholds_.IsValid()) thresholds_ = AdmissionThresholds();
    limits_[0] = FillLimit(thresholds_.low_percent, kCapacity);
    limits_[1] = FillLimit(thresholds_.medium_percent, kCapacity);
    limits_[2] = FillLimit(thresholds_.high_percent, kCapacity);
    (void)peak_.Take(0, BackpressureLevel::NORMAL);  // a new period
  }

  BackpressureLevel LevelOf(Position fill) const noexcept {
    return ClassifyBackpressure(fill, kCapacity, thresholds_);
  }

  Gauge Fullest(const Lanes& lanes) const noexcept {
    Gauge gauge;
    if (!lanes.IsOpen()) return gauge;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const Position fill = lanes.Fill(lane);
      if (fill > gauge.fill) gauge.fill = fill;
    }
    gauge.level = LevelOf(gauge.fill);
    return gauge;
  }

  // The fills a batch starts from, for the peak.
  // The refusals are not read here: their counts wait in the segment until
  // a Take or Peek reads them, or a lane's hand-back notes them first, so
  // reading them each batch would add loads of producers' lines to the
  // dispatch path for nothing.
  void NoteBatchStart(Lanes& lanes) noexcept {
    const Gauge start = Fullest(lanes);
    peak_.Note(start.fill, start.level);
  }

  // TakeBackpressurePeak: the refusals and gauges now, then a new period.
  BackpressurePeak TakePeak(Lanes& lanes) noexcept {
    NoteRefusals(lanes);
    const Gauge now = Fullest(lanes);
    return peak_.Take(now.fill, now.level);
  }

  // PeekBackpressurePeak: noting nothing (the refusals not yet noted count
  // in this answer only).
  BackpressurePeak PeekPeak(const Lanes& lanes) const noexcept {
    Gauge now = Fullest(lanes);
    if (lanes.IsOpen()) {
      for (std::size_t lane = 0; lane < kLanes; ++lane) {
        const Position refused = UnnotedRefusalFill(lanes, lane);
        if (refused > now.fill) now = Gauge{refused, LevelOf(refused)};
      }
    }
    return peak_.Peek(now.fill, now.level);
  }

  // Marks every refusal counted so far as noted, without noting it: a
  // taken-over segment's counts are from before this Create.
  void ForgetRefusals(Lanes& lanes) noexcept {
    if (!lanes.IsOpen()) return;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      std::uint64_t* noted = lanes.RefusalsNoted(lane);
      for (std::size_t p = 0; p < kPriorityCount; ++p) {
        noted[p] = lanes.Control(lane).dropped[p].load(std::memory_order_relaxed);
      }
    }
  }

  // Each lane's refusals for room counted since the last look: the lane
  // held at least the highest refused priority's threshold. Also before a
  // lane is handed back (its counts go with it).
  void NoteRefusals(Lanes& lanes) noexcept {
    if (!lanes.IsOpen()) return;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      // The counts the fill was judged on are the ones noted: a refusal
      // counted after this read is noted next time.
      const Position fill = UnnotedRefusalFill(lanes, lane, lanes.RefusalsNoted(lane));
      if (fill != 0) peak_.Note(fill, LevelOf(fill));
    }
  }

 private:
  // The fill lane `lane` held at least, by the refusals counted since the
  // last noting: the highest refused priority's limit (0: none). `read`,
  // when given, gets the counts read.
  Position UnnotedRefusalFill(const Lanes& lanes, std::size_t lane,
                              std::uint64_t* read = nullptr) const noexcept {
    Position fill = 0;
    const std::uint64_t* noted = lanes.RefusalsNoted(lane);
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      const std::uint64_t count = lanes.Control(lane).dropped[p].load(std::memory_order_relaxed);
      if (count != noted[p] && limits_[p] > fill) fill = limits_[p];
      if (read != nullptr) read[p] = count;
    }
    return fill;
  }

  AdmissionThresholds thresholds_;
  Position limits_[kPriorityCount] = {};  // the thresholds' fill limits
  sluice::detail::PeakFill peak_;
};

// The in-process snapshot's fields, from the shared bus's own.
inline ShmBusStatistics WithSnapshot(ShmBusStatistics s, const ConsumerCounts& counts) noexcept {
  s.high_priority_published = s.published[2];
  s.medium_priority_published = s.published[1];
  s.low_priority_published = s.published[0];
  s.messages_published = s.published[0] + s.published[1] + s.published[2];
  s.high_priority_dropped = s.dropped[2];
  s.medium_priority_dropped = s.dropped[1];
  s.low_priority_dropped = s.dropped[0];
  s.messages_dropped = s.dropped[0] + s.dropped[1] + s.dropped[2];
  s.high_priority_processed = counts.processed_by_priority[2];
  s.medium_priority_processed = counts.processed_by_priority[1];
  s.low_priority_processed = counts.processed_by_priority[0];
  s.messages_processed = s.processed;
  s.processing_errors = s.callback_errors;
  return s;
}

// ShmBus::GetStatistics: the lanes handed back and the consumer's counts,
// with every lane taken now (closed: as it was at Close).
template <typename Lanes>
ShmBusStatistics ReadStatistics(const Lanes& lanes, const ConsumerCounts& counts) noexcept {
  ShmBusStatistics s = counts.totals;
  s.processed = counts.processed;
  s.corrupt = counts.corrupt;
  s.over_limit = counts.over_limit;
  s.callback_errors = counts.callback_errors;
  if (!lanes.IsOpen()) return WithSnapshot(s, counts);  // closed: as it was at Close
  s.producers_attached = counts.totals.producers_killed + counts.totals.producers_detached;
  for (std::size_t lane = 0; lane < Lanes::kLanes; ++lane) {
    // The header's active set, not the lane's state word, which its
    // producer can write (one that wrote "free" there would drop out of the
    // counts while it publishes).
    if (!lanes.IsActive(lane)) continue;
    const auto& control = lanes.Control(lane);
    ++s.producers_attached;  // held, or left and not yet handed back
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      // Each admission claimed one slot of its priority's ring; claims
      // skipped after their owner left are lost, not published (as when
      // the lane is handed back, TendGoneLanes).
      s.published[p] += lanes.Published(lane, p);
      s.dropped[p] += control.dropped[p].load(std::memory_order_relaxed) +
                      control.pool_empty[p].load(std::memory_order_relaxed);
    }
  }
  return WithSnapshot(s, counts);
}

// ShmBus::ForEachProducer: `visit(const ProducerStatisticsSnapshot&)` for
// each lane taken, named by its producer's pid.
template <typename Lanes, typename Visit>
void ForEachProducerLane(const Lanes& lanes, Visit& visit) {
  if (!lanes.IsOpen()) return;
  for (std::size_t lane = 0; lane < Lanes::kLanes; ++lane) {
    if (!lanes.IsActive(lane)) continue;  // as ReadStatistics
    const auto& control = lanes.Control(lane);
    ProducerStatisticsSnapshot producer;
    producer.lane = static_cast<std::uint16_t>(lane + 1);
    // The name its producer gave, cleaned again here: a producer can
    // write its lane's bytes, and a label must stay valid text that ends
    // within the field. None: its process id.
    char written[kProducerNameCapacity];
    for (std::size_t w = 0; w < kProducerNameCapacity / 4; ++w) {
      const std::uint32_t word = control.name[w].load(std::memory_order_relaxed);
      std::memcpy(written + w * 4, &word, 4);
    }
    written[kProducerNameCapacity - 1] = '\0';
    if (sluice::detail::CopyName(written, producer.name, kProducerNameCapacity) == 0) {
      const std::string pid = "pid " + std::to_string(control.owner.pid);
      pid.copy(producer.name, sizeof(producer.name) - 1);
    }
    std::uint64_t published[kPriorityCount];
    std::uint64_t dropped[kPriorityCount];
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      published[p] = lanes.Published(lane, p);
      dropped[p] = control.dropped[p].load(std::memory_order_relaxed);
    }
    producer.low_priority_published = published[0];
    producer.medium_priority_published = published[1];
    producer.high_priority_published = published[2];
    producer.low_priority_dropped = dropped[0];
    producer.medium_priority_dropped = dropped[1];
    producer.high_priority_dropped = dropped[2];
    visit(static_cast<const ProducerStatisticsSnapshot&>(producer));
  }
}

}  // namespace detail
}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
