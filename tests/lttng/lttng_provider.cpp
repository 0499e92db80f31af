// The probe of sluice:event for the traced program (a file of its own:
// sluice/trace/lttng/provider.hpp says why).
#include "sluice/trace/lttng/provider.hpp"
