// Sluice: a header-only lock-free MPSC/SPSC in-process message bus with
// priority admission. This header is the core: the bus and the types it
// names and the loan pool for large payloads, nothing else (no <string>, no
// heap use outside the bus's ring and the pool's blocks).
// The add-ons (components, fixed containers, Prometheus export) live in
// sluice/extras/; sluice/all.hpp includes the core and every add-on.
#pragma once

#include "sluice/admission.hpp"
#include "sluice/bus.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/clock.hpp"
#include "sluice/error.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/loan_pool.hpp"
#include "sluice/message.hpp"
#include "sluice/observer.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"
#include "sluice/version.hpp"
#include "sluice/wait_set.hpp"
