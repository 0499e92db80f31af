// Everything Sluice offers: the core (sluice/sluice.hpp) and every add-on in
// sluice/extras/ that the target supports (the condition-variable parker
// needs threads, the futex parker and the membarrier fence Linux). Embedded builds include
// sluice/sluice.hpp and the add-ons they use, one by one.
#pragma once

#include "sluice/config.hpp"
#include "sluice/extras/component.hpp"
#include "sluice/extras/fixed_string.hpp"
#include "sluice/extras/fixed_vector.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/extras/static_component.hpp"
#include "sluice/sluice.hpp"

#if !SLUICE_FREESTANDING
#include "sluice/extras/condition_variable_parker.hpp"
#endif
#if defined(__linux__)
#include "sluice/extras/futex_parker.hpp"
#include "sluice/extras/membarrier_fence.hpp"
#endif
