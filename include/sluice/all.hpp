// Everything Sluice offers: the core (sluice/sluice.hpp) and every add-on in
// sluice/extras/. Embedded builds include sluice/sluice.hpp and the add-ons
// they use, one by one.
#pragma once

#include "sluice/extras/component.hpp"
#include "sluice/extras/fixed_string.hpp"
#include "sluice/extras/fixed_vector.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/extras/static_component.hpp"
#include "sluice/sluice.hpp"
