// sluice/sluice.hpp is the core: it must not pull in the standard library's
// text or locking headers (checked where the library marks them: libstdc++'s
// include guards). It may use <thread> for std::this_thread::yield.
#include "sluice/sluice.hpp"

#if defined(_GLIBCXX_STRING) || defined(_GLIBCXX_MUTEX) || defined(_GLIBCXX_CONDITION_VARIABLE)
#error "sluice/sluice.hpp pulled in <string>, <mutex> or <condition_variable>"
#endif

int main() { return 0; }
