// SLUICE_BARE_METAL, SLUICE_FREESTANDING's name before 0.2, must not compile
// (tests/CMakeLists.txt checks the diagnostic): ignored, it would build a
// hosted library for a target that asked for freestanding.
#include "sluice/config.hpp"

int main() { return 0; }
