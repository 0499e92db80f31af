// Every part of a shared-memory bus mapped by name, at its place in one
// reserved range, as a consumer taking over maps them: for tests, run as the
// consumer's user, that read what the bus holds or write into it as a
// hostile process of that user could. A lane's object is made anew each
// time its lane is handed back: a view sees the objects the names held when
// it opened them (Open again to follow).
#pragma once

#include <cstddef>
#include <sluice/detail/test_access.hpp>
#include <sluice/ipc/address_reservation.hpp>
#include <sluice/ipc/segment.hpp>
#include <sluice/ipc/shm_layout.hpp>
#include <string>

namespace sluice_ipc_test {

template <typename Layout>
class BusView {
 public:
  [[nodiscard]] sluice::ipc::AttachError Open(const std::string& name) {
    using sluice::ipc::AttachError;
    using sluice::ipc::Segment;
    *this = BusView();
    if (!reservation_.Reserve(Layout::kSegmentSize)) return AttachError::kSystemError;
    AttachError error =
        Segment::Open(name, Layout::kHeaderBytes, &header_, nullptr, reservation_.At(0));
    if (error == AttachError::kNone) {
      error = Segment::Open(name + ".wake", Layout::kWakeBytes, &wake_, nullptr,
                            reservation_.At(Layout::kWakeOffset));
    }
    for (std::size_t lane = 0; lane < Layout::kLanes && error == AttachError::kNone; ++lane) {
      error = Segment::Open(name + ".lane" + std::to_string(lane), Layout::kLaneStride,
                            &lanes_[lane], nullptr, reservation_.At(Layout::LaneOffset(lane)));
    }
    return error;
  }
  BusView() = default;
  BusView(BusView&&) noexcept = default;
  BusView& operator=(BusView&& other) noexcept {
    for (auto& lane : lanes_) lane = sluice::ipc::Segment();
    wake_ = sluice::ipc::Segment();
    header_ = sluice::ipc::Segment();
    reservation_ = std::move(other.reservation_);
    header_ = std::move(other.header_);
    wake_ = std::move(other.wake_);
    for (std::size_t lane = 0; lane < Layout::kLanes; ++lane) {
      lanes_[lane] = std::move(other.lanes_[lane]);
    }
    return *this;
  }

  void* Base() const noexcept { return reservation_.Base(); }
  // The parts lie side by side: [Base(), Base() + Size()) is all mapped.
  static constexpr std::size_t Size() noexcept { return Layout::kSegmentSize; }
  typename Layout::Header* Header() const noexcept { return Layout::HeaderOf(Base()); }
  typename Layout::WakePage* Wake() const noexcept { return Layout::WakeOf(Base()); }
  typename Layout::LaneControl& Control(std::size_t lane) const noexcept {
    return *Layout::ControlOf(Base(), lane);
  }
  // Each part's bytes: the header, the wake page, each lane.
  struct Part {
    unsigned char* bytes;
    std::size_t size;
  };
  static constexpr std::size_t kParts = 2 + Layout::kLanes;
  Part PartAt(std::size_t part) const noexcept {
    auto* base = static_cast<unsigned char*>(Base());
    if (part == 0) return {base, Layout::kHeaderBytes};
    if (part == 1) return {base + Layout::kWakeOffset, Layout::kWakeBytes};
    return {base + Layout::LaneOffset(part - 2), Layout::kLaneStride};
  }
  sluice::ipc::Segment& HeaderObject() noexcept { return header_; }
  sluice::ipc::Segment& LaneObject(std::size_t lane) noexcept { return lanes_[lane]; }

 private:
  sluice::ipc::AddressReservation reservation_;
  sluice::ipc::Segment header_;
  sluice::ipc::Segment wake_;
  sluice::ipc::Segment lanes_[Layout::kLanes];
};

// Lane `lane`'s rings as its producer sees them, at `base` (a BusView's or
// a producer's range): views of the lines it writes (the fill's and each
// ring's claims, the slots) and of the released positions it reads, to
// claim, write and publish as a producer does, or to write what a hostile
// one could.
template <typename Layout>
class LaneRings {
 public:
  LaneRings(void* base, std::size_t lane)
      : queue_(Layout::RingsOf(base, lane), Layout::ReleasedOf(base, lane)) {}
  auto& Fill() noexcept { return sluice::detail::TestAccess::QueueFill(queue_); }
  auto& Ring(std::size_t priority) noexcept {
    return sluice::detail::TestAccess::QueueRing(queue_, priority);
  }

 private:
  typename Layout::Queue queue_;
};

}  // namespace sluice_ipc_test
