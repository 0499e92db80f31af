// Tracing into LTTng-UST: a sink for TracingObserver
// (sluice/trace/tracing_observer.hpp) that fires the tracepoint
// sluice:event (sluice/trace/lttng/tracepoints.h) for every event, with
// every field of its TraceEvent. An LTTng session records it with the
// process's other user-space events; babeltrace2 reads it, and Trace Compass
// opens the trace (CTF).
//
//   struct Traits : sluice::DefaultBusTraits {
//     using Observer = sluice::trace::TracingObserver<sluice::trace::LttngSink>;
//   };
//   sluice::trace::LttngSink sink;
//   bus.GetObserver().Attach(&sink, /*bus_id=*/1);
//   // and a .cpp file of its own: #include <sluice/trace/lttng/provider.hpp>
//   // $ lttng create; lttng enable-event -u 'sluice:*'; lttng start; ./program; lttng stop
//
// Where no session enables sluice:event, each event costs LTTng's test of
// the tracepoint's state (Enabled: the observer then reads no clock); where
// one does,
// LTTng's lock-free per-CPU ring buffer takes it (what it cannot keep, it
// counts as discarded: `lttng list` shows it). Hosted (Linux); needs
// LTTng-UST 2.13 or later.
#pragma once

#include "sluice/config.hpp"
#include "sluice/trace/lttng/tracepoints.h"
#include "sluice/trace/trace_event.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace trace {

class LttngSink {
 public:
  // Any thread, an interrupt handler's equivalent (a signal handler):
  // LTTng-UST's tracepoints are lock-free. Always true: what LTTng's
  // buffers cannot keep, LTTng counts.
  bool Record(const TraceEvent& event) noexcept {
    lttng_ust_tracepoint(sluice, event, &event);
    return true;
  }
  // Whether a session records sluice:event now: TracingObserver asks before
  // it reads the clock, so a traced binary that no one traces pays a load
  // and a branch an event. A session that starts or stops between this and
  // Record changes the fate of at most the one event each thread has
  // between the two.
  bool Enabled() const noexcept { return lttng_ust_tracepoint_enabled(sluice, event); }
};

}  // namespace trace
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
