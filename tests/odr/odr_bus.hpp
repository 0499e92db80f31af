// A bus type shared by two translation units.
#pragma once

#include <variant>

#include "sluice/sluice.hpp"

struct OdrMessage {
  int value;
};
using OdrBus = sluice::MpscBus<std::variant<OdrMessage>, 64>;

int Fill(OdrBus& bus, int count);
