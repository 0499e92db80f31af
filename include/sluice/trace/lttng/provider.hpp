// The LTTng-UST probe of sluice:event (sluice/trace/lttng/tracepoints.h):
// include this header, and nothing else, in one .cpp file of its own in a
// program that traces into LTTng (sluice/trace/lttng/lttng_sink.hpp), and
// link that program with `pkg-config --libs lttng-ust`. (LTTng's probe
// definition expands the tracepoint header again: in a file that also
// includes lttng_sink.hpp it would be defined twice.)
#pragma once

#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "sluice/trace/lttng/tracepoints.h"
