// LTTng-UST's view of a traced event (sluice/trace/trace_event.hpp): one
// tracepoint, sluice:event, whose fields are a TraceEvent's, named as there.
// Read by sluice/trace/lttng/lttng_sink.hpp (which fires it) and, in exactly one
// translation unit of a program, by sluice/trace/lttng/provider.hpp (which
// defines the probe). Needs LTTng-UST 2.13 or later (Debian:
// liblttng-ust-dev; link with `pkg-config --libs lttng-ust`).
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER sluice

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "sluice/trace/lttng/tracepoints.h"

#if !defined(SLUICE_TRACE_LTTNG_TRACEPOINTS_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define SLUICE_TRACE_LTTNG_TRACEPOINTS_H

#include <lttng/tracepoint.h>
#include <stdint.h>

#include "sluice/trace/trace_event.hpp"

// kind: TraceEventKind's value (admitted 1, refused 2, batch_begin 3, taken
// 4, dispatched 5, batch_end 6, error 7, lost 8, closed 9, lane_attached
// 10, lane_exited 11, lane_handed_back 12); priority:
// MessagePriority's (LOW 0, MEDIUM 1, HIGH 2).
// LTTng's field list is a sequence of macros, one a line.
// clang-format off
LTTNG_UST_TRACEPOINT_EVENT(
    sluice, event,
    LTTNG_UST_TP_ARGS(const sluice::trace::TraceEvent*, event),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint8_t, kind, static_cast<uint8_t>(event->kind))
        lttng_ust_field_integer(uint16_t, bus_id, event->bus_id)
        lttng_ust_field_integer(uint16_t, lane, event->lane)
        lttng_ust_field_integer(uint8_t, priority, static_cast<uint8_t>(event->priority))
        lttng_ust_field_integer(uint8_t, detail, event->detail)
        lttng_ust_field_integer(uint32_t, sender_id, event->sender_id)
        lttng_ust_field_integer(uint32_t, type_index, event->type_index)
        lttng_ust_field_integer(uint32_t, value, event->value)
        lttng_ust_field_integer(uint64_t, msg_id, event->msg_id)
        lttng_ust_field_integer(uint64_t, stamp_ns, event->stamp_ns)
        lttng_ust_field_integer(uint64_t, time_ns, event->time_ns)))
// clang-format on

#endif  // SLUICE_TRACE_LTTNG_TRACEPOINTS_H

#include <lttng/tracepoint-event.h>
