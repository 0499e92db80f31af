// The shared-memory bus's instructions per message, as
// instruction_breakdown.cpp counts the in-process bus's: one consumer and
// one producer in this process (each with its own mapping of the segment,
// as two processes would have), kRounds rounds of kPerRound publishes then
// one dispatch of them all, so `valgrind --tool=callgrind
// --toggle-collect=<function>` counts one side. run_breakdown.sh drives it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <variant>

#include "bench_payload.hpp"

namespace {

using sluice::bench::Sample;
using Payload = std::variant<Sample<24>>;
constexpr std::size_t kCapacity = 1024;
using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;
// HIGH is admitted up to 99 % of a lane's ring: kPerRound fit in an empty one.
constexpr std::uint64_t kPerRound = 1000;
constexpr std::uint64_t kRounds = 100;
volatile std::uint64_t sink = 0;

__attribute__((noinline)) std::uint64_t PublishLoop(Producer& producer, std::uint64_t first) {
  std::uint64_t admitted = 0;
  for (std::uint64_t i = first; i < first + kPerRound; ++i) {
    const Sample<24> sample{i, 1, 2, 3, 4};
    admitted += producer.PublishWithPriority(sample, 1, sluice::MessagePriority::HIGH) ? 1 : 0;
  }
  return admitted;
}

__attribute__((noinline)) std::uint64_t DispatchCallbacks(Bus& bus) {
  return bus.ProcessBatch(static_cast<std::uint32_t>(kPerRound));
}

// A visitor of its own name, not a lambda inside DispatchVisitor: the
// dispatch loop instantiated for a lambda of DispatchVisitor's has that name
// in its own, so callgrind's --toggle-collect=*DispatchVisitor* would toggle
// counting off when the compiler calls that loop instead of inlining it.
struct AddSequence {
  void operator()(const Sample<24>& s) const { sink = sink + s.seq; }
};

__attribute__((noinline)) std::uint64_t DispatchVisitor(Bus& bus) {
  return bus.ProcessBatchWith(AddSequence{}, static_cast<std::uint32_t>(kPerRound));
}

}  // namespace

// Usage: sluice_instruction_shm callbacks|visitor
// Prints "N messages": how many each measured function handled.
int main(int argc, char** argv) {
  const bool visitor = argc == 2 && std::strcmp(argv[1], "visitor") == 0;
  if (argc != 2 || (!visitor && std::strcmp(argv[1], "callbacks") != 0)) {
    std::fprintf(stderr, "usage: %s callbacks|visitor\n", argv[0]);
    return 2;
  }
  const std::string name = "/sluice-instructions-" + std::to_string(::getpid());
  Bus bus;
  if (bus.Create(name) != sluice::ipc::AttachError::kNone) return 1;
  if (!bus.Subscribe<Sample<24>>([](const Sample<24>& s) { sink = sink + s.seq; }).IsValid()) {
    return 1;
  }
  Producer producer;
  if (producer.Attach(name) != sluice::ipc::AttachError::kNone) return 1;
  std::uint64_t published = 0;
  std::uint64_t dispatched = 0;
  for (std::uint64_t round = 0; round < kRounds; ++round) {
    published += PublishLoop(producer, round * kPerRound);
    dispatched += visitor ? DispatchVisitor(bus) : DispatchCallbacks(bus);
  }
  // Every publish admitted and dispatched: a count that lost any fails.
  if (published != kRounds * kPerRound || dispatched != published) return 3;
  std::printf("%llu messages\n", static_cast<unsigned long long>(published));
  return 0;
}
