// One traced event of a bus (sluice/trace/tracing_observer.hpp writes them)
// and its record: 48 bytes, little-endian, the same on every target, so a
// trace drained from a microcontroller is read on a host by the same code
// (sluice/trace/trace_stream.hpp). Freestanding: no allocation, no
// exceptions, no operating system.
//
// One message is one flow: its kAdmitted, kTaken and kDispatched events
// carry the same (bus_id, lane, msg_id), which is unique per bus
// (MessageHeader), and its payload index and priority.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

enum class TraceEventKind : std::uint8_t {
  // A producer, after the message was published (OnAdmitted). `stamp_ns`:
  // the message's timestamp; `time_ns` is read after the publish, so the
  // consumer's kTaken of the same message may come before it in a trace.
  kAdmitted = 1,
  // A producer: `value` messages refused (OnRefused); `detail`: the
  // PublishOutcome. `msg_id`, `lane`, `sender_id` and `type_index`: 0.
  kRefused = 2,
  // The consumer, before a batch's first message; `msg_id`: the queue's
  // fill then.
  kBatchBegin = 3,
  // The consumer, before the message's callbacks or visitor run.
  kTaken = 4,
  // The consumer, once they returned (or threw, after kError).
  kDispatched = 5,
  // The consumer, after a batch's last message; `value`: how many it took.
  kBatchEnd = 6,
  // The consumer: a callback or the visitor threw; `detail`: the
  // BusErrorCode; `msg_id`, `sender_id`, `type_index`: the message's.
  kError = 7,
  // Written by the drain, not by a bus: `value` events were lost since the
  // last such record (the ring was full when they came). `bus_id`: the
  // ring's.
  kLost = 8,
  // The bus was closed (OnClosed), by the thread that closed it.
  kClosed = 9,
  // A shared-memory bus's lane changing hands (OnLaneEvent: LaneEvent),
  // in the consumer's process: `lane` the lane (as its messages' header),
  // `sender_id` the producer's process id as the kernel named it to the
  // consumer, `detail` 1 when it exited without detaching (kLaneExited,
  // kLaneHandedBack), `value` its claims never published (kLaneHandedBack;
  // at most 2^32 - 1). Given the lane (kLaneAttached), on the hand-out
  // thread; left (kLaneExited) and handed back, its last message taken
  // (kLaneHandedBack), on the consumer thread.
  kLaneAttached = 10,
  kLaneExited = 11,
  kLaneHandedBack = 12,
};
inline constexpr std::uint8_t kLastTraceEventKind = 12;

struct TraceEvent {
  std::uint64_t msg_id = 0;
  std::uint64_t stamp_ns = 0;  // the message's timestamp (0: none)
  std::uint64_t time_ns = 0;   // when the event happened, on the tracer's clock (0: no clock)
  std::uint32_t sender_id = 0;
  std::uint32_t type_index = 0;  // the payload's std::variant::index()
  std::uint32_t value = 0;       // a count (kRefused, kBatchEnd, kLost)
  std::uint16_t bus_id = 0;      // the tracer's name for the bus
  std::uint16_t lane = 0;
  TraceEventKind kind = TraceEventKind::kAdmitted;
  MessagePriority priority = MessagePriority::MEDIUM;
  std::uint8_t detail = 0;  // a PublishOutcome (kRefused) or a BusErrorCode (kError)
};

inline bool operator==(const TraceEvent& a, const TraceEvent& b) noexcept {
  return a.msg_id == b.msg_id && a.stamp_ns == b.stamp_ns && a.time_ns == b.time_ns &&
         a.sender_id == b.sender_id && a.type_index == b.type_index && a.value == b.value &&
         a.bus_id == b.bus_id && a.lane == b.lane && a.kind == b.kind && a.priority == b.priority &&
         a.detail == b.detail;
}
inline bool operator!=(const TraceEvent& a, const TraceEvent& b) noexcept { return !(a == b); }

// The record's size. Its fields, little-endian, at byte: msg_id 0,
// stamp_ns 8, time_ns 16, sender_id 24, type_index 28, value 32, bus_id 36,
// lane 38, kind 40, priority 41, detail 42; bytes 43 to 47 are 0 (a later
// version may use them).
inline constexpr std::size_t kTraceRecordBytes = 48;

// Why a record (or a stream: trace_stream.hpp) was not read.
enum class TraceReadError : std::uint8_t {
  kNone = 0,
  kBadMagic,         // the stream does not start with "SLTR"
  kUnknownVersion,   // a stream version this reader does not read
  kBadRecordSize,    // the stream's records are not kTraceRecordBytes long
  kTruncated,        // the stream ends inside a record or its header
  kUnknownKind,      // a record whose kind is none of TraceEventKind's
  kBadPriority,      // a priority that is not LOW, MEDIUM or HIGH
  kBadDetail,        // a detail its kind does not have (an unknown outcome or error code)
  kNonZeroReserved,  // the record's reserved byte is not 0
};

constexpr const char* ToString(TraceReadError error) noexcept {
  switch (error) {
    case TraceReadError::kNone:
      return "none";
    case TraceReadError::kBadMagic:
      return "bad magic";
    case TraceReadError::kUnknownVersion:
      return "unknown version";
    case TraceReadError::kBadRecordSize:
      return "bad record size";
    case TraceReadError::kTruncated:
      return "truncated";
    case TraceReadError::kUnknownKind:
      return "unknown event kind";
    case TraceReadError::kBadPriority:
      return "bad priority";
    case TraceReadError::kBadDetail:
      return "bad detail";
    case TraceReadError::kNonZeroReserved:
      return "reserved byte not zero";
  }
  return "unknown error";
}

// Writes `event` as its record: kTraceRecordBytes bytes at `out`.
inline void EncodeTraceEvent(const TraceEvent& event, std::uint8_t* out) noexcept {
  sluice::detail::PutLittle(out + 0, event.msg_id, 8);
  sluice::detail::PutLittle(out + 8, event.stamp_ns, 8);
  sluice::detail::PutLittle(out + 16, event.time_ns, 8);
  sluice::detail::PutLittle(out + 24, event.sender_id, 4);
  sluice::detail::PutLittle(out + 28, event.type_index, 4);
  sluice::detail::PutLittle(out + 32, event.value, 4);
  sluice::detail::PutLittle(out + 36, event.bus_id, 2);
  sluice::detail::PutLittle(out + 38, event.lane, 2);
  out[40] = static_cast<std::uint8_t>(event.kind);
  out[41] = static_cast<std::uint8_t>(event.priority);
  out[42] = event.detail;
  sluice::detail::PutLittle(out + 43, 0, 5);
}

namespace detail {

// The detail values `kind` has: an outcome other than kAdmitted for a
// refusal, an error code for an error, 0 for every other kind.
inline bool IsDetailOf(TraceEventKind kind, std::uint8_t detail) noexcept {
  switch (kind) {
    case TraceEventKind::kRefused:
      return detail >= static_cast<std::uint8_t>(PublishOutcome::kRefusedFull) &&
             detail <= static_cast<std::uint8_t>(PublishOutcome::kWouldDeadlock);
    case TraceEventKind::kError:
      return detail >= static_cast<std::uint8_t>(BusErrorCode::kCallbackThrew) &&
             detail <= static_cast<std::uint8_t>(BusErrorCode::kExitHandlerThrew);
    case TraceEventKind::kLaneExited:
    case TraceEventKind::kLaneHandedBack:
      return detail <= 1;  // killed
    default:
      return detail == 0;
  }
}

}  // namespace detail

// Reads the record at `in` (kTraceRecordBytes bytes) into `*event`, or
// says why it is not one; `*event` is written only for kNone, so no field
// of an event read holds a value its type does not have.
inline TraceReadError DecodeTraceEvent(const std::uint8_t* in, TraceEvent* event) noexcept {
  const std::uint8_t kind = in[40];
  if (kind == 0 || kind > kLastTraceEventKind) return TraceReadError::kUnknownKind;
  if (in[41] > static_cast<std::uint8_t>(MessagePriority::HIGH)) {
    return TraceReadError::kBadPriority;
  }
  if (!detail::IsDetailOf(static_cast<TraceEventKind>(kind), in[42])) {
    return TraceReadError::kBadDetail;
  }
  if (sluice::detail::GetLittle(in + 43, 5) != 0) return TraceReadError::kNonZeroReserved;
  TraceEvent read;
  read.msg_id = sluice::detail::GetLittle(in + 0, 8);
  read.stamp_ns = sluice::detail::GetLittle(in + 8, 8);
  read.time_ns = sluice::detail::GetLittle(in + 16, 8);
  read.sender_id = static_cast<std::uint32_t>(sluice::detail::GetLittle(in + 24, 4));
  read.type_index = static_cast<std::uint32_t>(sluice::detail::GetLittle(in + 28, 4));
  read.value = static_cast<std::uint32_t>(sluice::detail::GetLittle(in + 32, 4));
  read.bus_id = static_cast<std::uint16_t>(sluice::detail::GetLittle(in + 36, 2));
  read.lane = static_cast<std::uint16_t>(sluice::detail::GetLittle(in + 38, 2));
  read.kind = static_cast<TraceEventKind>(kind);
  read.priority = static_cast<MessagePriority>(in[41]);
  read.detail = in[42];
  *event = read;
  return TraceReadError::kNone;
}

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
