// The one-core rows of the instruction breakdown, in a translation unit of
// their own: instantiating every peer and Sluice configuration in the same
// file as the per-feature loops changes GCC's inlining decisions for those
// loops (their counts grew by 9-40 instructions a message when they shared
// one), so each part is compiled apart.
#pragma once

namespace sluice::bench {

// `which`: "list" prints each row's index and name; an index runs that row
// and prints "N messages". Returns the process status.
int RunOneCoreBreakdown(const char* which);

}  // namespace sluice::bench
