// SLUICE_BARE_METAL, the deprecated name of SLUICE_FREESTANDING, still
// selects the freestanding configuration; the two names may not disagree.
#include "sluice/config.hpp"

static_assert(SLUICE_FREESTANDING == EXPECTED_FREESTANDING,
              "SLUICE_BARE_METAL must still select the freestanding configuration");

int main() { return 0; }
