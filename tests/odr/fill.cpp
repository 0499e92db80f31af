// Defines Fill() for a bus type, in a translation unit whose configuration
// the build chooses (see CMakeLists.txt).
#include "odr_bus.hpp"

int Fill(OdrBus& bus, int count) {
  int admitted = 0;
  for (int i = 0; i < count; ++i) admitted += bus.Publish(OdrMessage{i}) ? 1 : 0;
  return admitted;
}
