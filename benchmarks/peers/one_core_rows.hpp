// The rows of the one-core table (table 14) and the round each measures, in
// one place for the two programs that run them: sluice_bench times the
// rounds, sluice_instruction_breakdown counts their instructions under
// callgrind. A row added here appears in both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peers/peer_adapters.hpp"

namespace sluice::bench {

// Each round pushes this many messages, then pops them all.
inline constexpr std::uint64_t kOneCoreBurst = 1024;

// One round on one thread: kOneCoreBurst pushes (a waiting adapter never
// waits here: the queue is empty and holds far more), then pops until every
// pushed message is back (a waiting adapter pops exactly that many) or a pop
// returns none. Returns how many messages the pops returned; `pushed`, how
// many pushes succeeded. `seq` numbers the messages across rounds.
template <typename Adapter, typename Probe>
inline std::uint64_t OneCoreRound(Adapter& queue, Probe& probe, std::uint64_t& seq,
                                  std::uint64_t& pushed) {
  pushed = 0;
  for (std::uint64_t i = 0; i < kOneCoreBurst; ++i) {
    pushed += PushOne(queue, Message{seq++, 1, 2, 3, 4}) ? 1 : 0;
  }
  std::uint64_t popped = 0;
  while (popped < pushed) {
    const std::size_t got = PopExpected(queue, probe, pushed - popped);
    if (got == 0) break;
    popped += got;
  }
  return popped;
}

// Names an adapter template for ForEachOneCoreRow's visitor.
template <template <typename> class Adapter>
struct AdapterTag {
  template <typename Probe>
  using Type = Adapter<Probe>;
};

// Calls visit(name, is_sluice, AdapterTag<...>{}) for every row of the
// one-core table, in its order; names the peers not built into `missing`.
// Each name says the calls the row measures.
template <typename Visit>
void ForEachOneCoreRow(Visit&& visit, std::vector<std::string>* missing) {
#if SLUICE_PEER_BOOST_LOCKFREE
  visit("boost::lockfree::spsc_queue, push, bulk pop into an array", false,
        AdapterTag<BoostSpscAdapter>{});
#else
  missing->push_back("Boost.Lockfree (libboost-dev)");
#endif
#if SLUICE_PEER_ATOMIC_QUEUE
  visit("atomic_queue AtomicQueueB2 SPSC, blocking push/pop (spin)", false,
        AdapterTag<AtomicQueueSpscBlockingAdapter>{});
  visit("atomic_queue AtomicQueueB2 SPSC, try_push/try_pop", false,
        AdapterTag<AtomicQueueSpscAdapter>{});
#else
  missing->push_back("atomic_queue (libatomic-queue-dev)");
#endif
#if SLUICE_PEER_CONCURRENTQUEUE
  visit("moodycamel ConcurrentQueue, tokens, enqueue, try_dequeue_bulk", false,
        AdapterTag<ConcurrentQueueEnqueueAdapter>{});
#else
  missing->push_back("moodycamel ConcurrentQueue (libconcurrentqueue-dev)");
#endif
  (void)missing;  // used only when a peer is absent
  visit("Sluice SPSC BARE_METAL PublishFast visitor", true, AdapterTag<SpscBareFastVisitor>{});
  visit("Sluice SPSC BARE_METAL PublishFast callbacks", true, AdapterTag<SpscBareFastCallbacks>{});
  visit("Sluice SPSC FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<SpscFullFastCallbacks>{});
  visit("Sluice SPSC FULL_FEATURED Publish callbacks", true, AdapterTag<SpscFullCallbacks>{});
  visit("Sluice SPSC fixed BARE_METAL PublishFast visitor", true,
        AdapterTag<SpscFixedBareFastVisitor>{});
  visit("Sluice SPSC fixed FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<SpscFixedFullFastCallbacks>{});
  visit("Sluice SPSC FULL_FEATURED PublishFast callbacks, traced into a TraceRing", true,
        AdapterTag<SpscFullFastCallbacksTraced>{});
  visit("Sluice SPSC BARE_METAL PublishFast visitor, traced into a TraceRing", true,
        AdapterTag<SpscBareFastVisitorTraced>{});
  visit("Sluice SPSC FULL_FEATURED PublishFast callbacks, flight recorder armed", true,
        AdapterTag<SpscFullFastCallbacksFlight>{});
  visit("Sluice SPSC BARE_METAL PublishFast visitor, flight recorder armed", true,
        AdapterTag<SpscBareFastVisitorFlight>{});
  visit("Sluice SPSC FULL_FEATURED PublishFast callbacks, flight recorder dumping", true,
        AdapterTag<SpscFullFastCallbacksDumping>{});
  visit("Sluice SPSC BARE_METAL PublishFast visitor, flight recorder dumping", true,
        AdapterTag<SpscBareFastVisitorDumping>{});
  visit("Sluice MPSC FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<MpscFullFastCallbacks>{});
  visit("Sluice MPSC BARE_METAL PublishFast visitor", true, AdapterTag<MpscBareFastVisitor>{});
  visit("Sluice MPSC registered producer (lane) FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<LaneFullFastCallbacks>{});
  visit("Sluice MPSC registered producer (lane) BARE_METAL PublishFast visitor", true,
        AdapterTag<LaneBareFastVisitor>{});
  visit("Sluice SPSC priority-ordered FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<SpscOrderedFastCallbacks>{});
  visit("Sluice MPSC priority-ordered FULL_FEATURED PublishFast callbacks", true,
        AdapterTag<MpscOrderedFastCallbacks>{});
  visit("Sluice MPSC priority-ordered BARE_METAL PublishFast visitor", true,
        AdapterTag<MpscOrderedBareFastVisitor>{});
}

}  // namespace sluice::bench
