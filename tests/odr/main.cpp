// Calls Fill() from a translation unit built with the default configuration.
// Linked with a Fill() built under another SLUICE_CACHE_LINE_SIZE or
// SLUICE_ATOMIC_BITS, it must not link: the bus types differ in layout.
#include <cstdio>

#include "odr_bus.hpp"

int main() {
  OdrBus bus;
  const int admitted = Fill(bus, 5);
  int received = 0;
  if (!bus.Subscribe<OdrMessage>([&](const OdrMessage&) { ++received; }).IsValid()) return 1;
  bus.ProcessBatch();
  std::printf("admitted %d, received %d\n", admitted, received);
  return admitted == 5 && received == 5 ? 0 : 1;
}
