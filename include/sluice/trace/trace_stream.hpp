// A trace as bytes: what a drained TraceRing becomes on a wire or in a file
// (a microcontroller's UART, a host's file), and the reader that turns it
// back into events.
//
// The stream: a 16-byte header ("SLTR", the version as a 16-bit
// little-endian number, the record size likewise, then 8 bytes of 0), then
// records of kTraceRecordBytes (trace_event.hpp). Where events were lost, a
// kLost record with their count, so a reader knows where the trace has
// holes and how large (TraceRing::Record). Freestanding: no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

inline constexpr std::size_t kTraceStreamHeaderBytes = 16;
inline constexpr std::uint16_t kTraceStreamVersion = 1;

// Writes the stream's header: kTraceStreamHeaderBytes bytes at `out`.
inline void EncodeTraceStreamHeader(std::uint8_t* out) noexcept {
  out[0] = 'S';
  out[1] = 'L';
  out[2] = 'T';
  out[3] = 'R';
  sluice::detail::PutLittle(out + 4, kTraceStreamVersion, 2);
  sluice::detail::PutLittle(out + 6, kTraceRecordBytes, 2);
  sluice::detail::PutLittle(out + 8, 0, 8);
}

// Drains `ring` (the drainer's thread) into `sink(const TraceEvent&)`: at
// most `most` events, oldest first (a kLost event among them where a Record
// reported a loss), then kLost events for the losses no Record has reported
// yet: they happened when the ring was full, so after the events drained.
// How many events the sink was given.
template <typename Ring, typename Sink>
std::uint32_t DrainEvents(Ring& ring, Sink&& sink,
                          std::uint32_t most = static_cast<std::uint32_t>(Ring::kEvents)) {
  std::uint32_t given = ring.Drain([&sink](const TraceEvent& event) { sink(event); }, most);
  // Taken after the drain: a loss counted after this read is reported by a
  // later Record or drain, after the events recorded before it.
  std::uint64_t lost = ring.TakeLost();
  TraceEvent event;
  event.kind = TraceEventKind::kLost;
  event.bus_id = ring.Id();
  while (lost != 0) {
    event.value = lost > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(lost);
    sink(static_cast<const TraceEvent&>(event));
    ++given;
    lost -= event.value;
  }
  return given;
}

// DrainEvents into `write(const std::uint8_t* bytes, std::size_t size)`,
// one record per call. How many records were written.
template <typename Ring, typename Write>
std::uint32_t DrainRecords(Ring& ring, Write&& write,
                           std::uint32_t most = static_cast<std::uint32_t>(Ring::kEvents)) {
  std::uint8_t record[kTraceRecordBytes];
  return DrainEvents(
      ring,
      [&](const TraceEvent& event) {
        EncodeTraceEvent(event, record);
        write(static_cast<const std::uint8_t*>(record), kTraceRecordBytes);
      },
      most);
}

// Reads a stream held in memory (`size` bytes at `data`, read in place).
// Every byte string has an outcome: events up to the first bad record,
// then Error() says why and Offset() where; nothing outside the bytes is
// read.
class TraceStreamReader {
 public:
  TraceStreamReader(const std::uint8_t* data, std::size_t size) noexcept
      : data_(data), size_(size) {
    if (size < kTraceStreamHeaderBytes) {
      error_ = TraceReadError::kTruncated;
    } else if (data[0] != 'S' || data[1] != 'L' || data[2] != 'T' || data[3] != 'R') {
      error_ = TraceReadError::kBadMagic;
    } else if (sluice::detail::GetLittle(data + 4, 2) != kTraceStreamVersion) {
      error_ = TraceReadError::kUnknownVersion;
    } else if (sluice::detail::GetLittle(data + 6, 2) != kTraceRecordBytes) {
      error_ = TraceReadError::kBadRecordSize;
    } else if (sluice::detail::GetLittle(data + 8, 8) != 0) {
      error_ = TraceReadError::kNonZeroReserved;
    } else {
      offset_ = kTraceStreamHeaderBytes;
    }
  }

  // The next event: true, with `*event` set; false at the stream's end
  // (Error() kNone) or at a record that is not one (Error() says why; the
  // reader stays there).
  bool Next(TraceEvent* event) noexcept {
    if (error_ != TraceReadError::kNone || offset_ == size_) return false;
    if (size_ - offset_ < kTraceRecordBytes) {
      error_ = TraceReadError::kTruncated;
      return false;
    }
    error_ = DecodeTraceEvent(data_ + offset_, event);
    if (error_ != TraceReadError::kNone) return false;
    offset_ += kTraceRecordBytes;
    return true;
  }

  TraceReadError Error() const noexcept { return error_; }
  // Where the reader is: past the header and the events read (0 when the
  // header was refused).
  std::size_t Offset() const noexcept { return offset_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t offset_ = 0;
  TraceReadError error_ = TraceReadError::kNone;
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
