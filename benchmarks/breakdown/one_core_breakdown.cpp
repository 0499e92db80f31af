// The one-core rows of the instruction breakdown (see one_core_breakdown.hpp).
#include "breakdown/one_core_breakdown.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "peers/one_core_rows.hpp"

namespace sluice::bench {
namespace {

volatile std::uint64_t sink = 0;

// The one-core rows: each round pushes kOneCoreBurst messages and pops them.
constexpr std::uint64_t kOneCoreRounds = 100;

template <typename Adapter>
__attribute__((noinline)) std::uint64_t OneCoreRounds(Adapter& queue, CountProbe& probe,
                                                      std::uint64_t& seq) {
  std::uint64_t lost = 0;
  for (std::uint64_t round = 0; round < kOneCoreRounds; ++round) {
    std::uint64_t pushed = 0;
    const std::uint64_t popped = OneCoreRound(queue, probe, seq, pushed);
    lost += (popped != pushed || pushed != kOneCoreBurst) ? 1 : 0;
  }
  return lost;
}

template <template <typename> class Adapter>
int RunOneCoreRow() {
  CountProbe probe;
  auto queue = std::make_unique<Adapter<CountProbe>>(probe);
  std::uint64_t seq = 0;
  std::uint64_t pushed = 0;
  // One round outside the count, as sluice_bench leaves one unrecorded.
  (void)OneCoreRound(*queue, probe, seq, pushed);
  const std::uint64_t lost = OneCoreRounds(*queue, probe, seq);
  sink = sink + probe.sum;
  std::printf("%llu messages\n", static_cast<unsigned long long>(kOneCoreRounds * kOneCoreBurst));
  return lost == 0 ? 0 : 1;
}

// The per-row build (SLUICE_BREAKDOWN_ROW names one adapter of
// peers/peer_adapters.hpp) instantiates that row alone, as a program that
// uses one queue would; the one-file build instantiates every row, as
// sluice_bench does. GCC's inlining depends on what else the file holds, so
// the two can differ by tens of instructions a message.
template <typename Tag>
constexpr bool kBuilt =
#ifdef SLUICE_BREAKDOWN_ROW
    std::is_same_v<Tag, AdapterTag<SLUICE_BREAKDOWN_ROW>>;
#else
    true;
#endif

// `which`: "list" prints each built row's index and name; an index runs that
// row.
int RunOneCoreRows(const char* which) {
  const bool list = std::strcmp(which, "list") == 0;
  char* end = nullptr;
  const long wanted = list ? -1 : std::strtol(which, &end, 10);
  if (!list && (end == which || *end != '\0')) return 2;
  std::vector<std::string> missing;
  long index = 0;
  int status = 2;
  ForEachOneCoreRow(
      [&](const char* name, bool, auto tag) {
        using Tag = decltype(tag);
        if constexpr (kBuilt<Tag>) {
          if (list) {
            std::printf("%ld\t%s\n", index, name);
            status = 0;
          } else if (index == wanted) {
            status = RunOneCoreRow<Tag::template Type>();
          }
        }
        ++index;
      },
      &missing);
  for (const std::string& peer : missing) std::fprintf(stderr, "not built: %s\n", peer.c_str());
  return status;
}

}  // namespace

int RunOneCoreBreakdown(const char* which) { return RunOneCoreRows(which); }

}  // namespace sluice::bench
