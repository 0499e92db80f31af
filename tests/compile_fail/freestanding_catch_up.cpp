// SLUICE_FREESTANDING: the catch-up pause keeps thread-local state, so a bus
// that names CatchUpPause does not compile there; the default
// (NoCatchUpPause) does. With USE_CATCH_UP_PAUSE=0 the same translation unit
// compiles.
#include <variant>

#include "sluice/sluice.hpp"

struct Traits : sluice::DefaultBusTraits {
#if USE_CATCH_UP_PAUSE
  using CatchUp = sluice::CatchUpPause<>;
#endif
};

int main() {
  sluice::MpscBus<std::variant<int>, 8, Traits> bus;
  const bool ok = bus.PublishWithPriority(1, 0, sluice::MessagePriority::HIGH).IsAdmitted();
  return ok && bus.ProcessBatch() == 1 ? 0 : 1;
}
