// The probe of sluice:event for the LTTng benchmark (a file of its own:
// sluice/trace/lttng/provider.hpp says why).
#include "sluice/trace/lttng/provider.hpp"
