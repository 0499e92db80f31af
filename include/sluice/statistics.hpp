// The statistics a bus reports in FULL_FEATURED mode.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// A point-in-time copy of a bus's counters since construction or the last
// ResetStatistics(). Counters are read one by one, so a snapshot taken while
// producers run is consistent per field, not across fields; but at any time
// messages_processed <= messages_published (and so per priority), and no
// field ever counts below zero. Once the bus is quiescent: attempts ==
// messages_published + messages_dropped, and after a drain
// messages_processed == messages_published (and so per priority).
struct BusStatisticsSnapshot {
  std::uint64_t messages_published = 0;  // admitted
  std::uint64_t messages_dropped = 0;    // refused by admission or capacity
  // Dispatched messages whose publish was counted in messages_published
  // (FULL_FEATURED at publish), whatever the mode at dispatch.
  std::uint64_t messages_processed = 0;
  std::uint64_t processing_errors = 0;  // callbacks or visitors that threw
  // Publishes refused as bad input (a valueless payload, an unknown
  // priority); counted in every mode, never part of MessagesAttempted().
  std::uint64_t messages_rejected = 0;
  // Publishes refused because the bus was closed (Close()); counted in every
  // mode, never part of MessagesAttempted().
  std::uint64_t messages_refused_closed = 0;
  std::uint64_t high_priority_published = 0;
  std::uint64_t medium_priority_published = 0;
  std::uint64_t low_priority_published = 0;
  std::uint64_t high_priority_dropped = 0;
  std::uint64_t medium_priority_dropped = 0;
  std::uint64_t low_priority_dropped = 0;
  // messages_processed by priority (their sum).
  std::uint64_t high_priority_processed = 0;
  std::uint64_t medium_priority_processed = 0;
  std::uint64_t low_priority_processed = 0;

  constexpr std::uint64_t MessagesAttempted() const noexcept {
    return messages_published + messages_dropped;
  }
};

// A registered producer's name: at most this many bytes, the terminating
// NUL included (RegisterProducer cuts a longer name, at a UTF-8 boundary).
inline constexpr std::size_t kProducerNameCapacity = 32;

// The counters of one registered producer (a producer lane's current
// holder: AsyncBus::RegisterProducer), since it registered or since the
// bus's last ResetStatistics(), whichever came later. Read one by one, like
// BusStatisticsSnapshot; a lane's counts also go into the bus's totals.
struct ProducerStatisticsSnapshot {
  std::uint16_t lane = 0;                 // MessageHeader::lane of its messages
  char name[kProducerNameCapacity] = {};  // as registered; NUL-terminated
  std::uint64_t high_priority_published = 0;
  std::uint64_t medium_priority_published = 0;
  std::uint64_t low_priority_published = 0;
  // Refused by admission at the lane's fill (PublishOutcome::kLaneFull).
  std::uint64_t high_priority_dropped = 0;
  std::uint64_t medium_priority_dropped = 0;
  std::uint64_t low_priority_dropped = 0;
  std::uint64_t messages_refused_closed = 0;
  std::uint64_t messages_rejected = 0;  // bad input
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
