// Sluice: a header-only lock-free MPSC/SPSC in-process message bus with
// priority admission. Include this one header.
#pragma once

#include "sluice/admission.hpp"
#include "sluice/bus.hpp"
#include "sluice/bus_traits.hpp"
#include "sluice/clock.hpp"
#include "sluice/component.hpp"
#include "sluice/error.hpp"
#include "sluice/fixed_string.hpp"
#include "sluice/fixed_vector.hpp"
#include "sluice/latency_histogram.hpp"
#include "sluice/message.hpp"
#include "sluice/performance_mode.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/static_component.hpp"
#include "sluice/statistics.hpp"
#include "sluice/subscription_handle.hpp"
#include "sluice/version.hpp"
