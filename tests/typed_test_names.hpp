// Names typed tests by their index. Naming a generator also keeps Clang's
// -Wpedantic quiet about TYPED_TEST_SUITE's otherwise empty variadic argument.
#pragma once

#include <string>

namespace sluice_test {

struct IndexNames {
  template <typename T>
  static std::string GetName(int index) {
    return std::to_string(index);
  }
};

}  // namespace sluice_test
