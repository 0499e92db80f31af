// Who holds a producer lane: the name it registered with and the lane's
// counters when it registered, so observers can report its counts under its
// name (AsyncBus::ForEachProducer, the Prometheus `producer` label).
//
// SYNC POINT (N), a sequence lock (detail/seqlock.hpp, whose file comment
// has the general argument) with one writer at a time: the lane's holder
// (registration is serialised by the lane's `taken` CAS, SYNC POINT (J)).
// The version is odd while the lane has no holder: Vacate() (the leaving
// holder, before it hands the lane back) begins the write, making it odd;
// Occupy() (the next holder, after it took the lane) stores the record with
// release stores and ends the write, making the version even with a release
// store; the holder's counts are release stores too
// (StatisticsCounters::kCountOrder). A reader loads the version, the record
// and the counts with acquire, then the version again: equal and even, the
// record and the counts are one holder's. If the reader read any value
// written after the next holder took the lane (a record store, which
// follows the Vacate store through the lane's (J) hand-over, or a count,
// which follows the next holder's even version store), that release store
// synchronises with the reader's acquire load, so the second version load
// sees the change and the read is retried. An odd version is a lane without
// a holder, not a write to wait for: the read fails at once
// (SeqLock::WhileOdd::kFail). No fences: ThreadSanitizer models these, and
// on x86 they are plain moves. Every field is an atomic, so a torn read is
// only retried, never undefined.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sluice/config.hpp"
#include "sluice/detail/observe/counter.hpp"
#include "sluice/detail/observe/utf8.hpp"
#include "sluice/detail/seqlock.hpp"
#include "sluice/statistics.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

// `Counts` is StatisticsCounters::ProducerCounts: the baseline's type.
template <typename Counts>
class LaneHolder {
  // 32-bit words: lock-free on every target.
  static constexpr std::size_t kWords = kProducerNameCapacity / 4;
  static_assert(kProducerNameCapacity % 4 == 0, "the name is stored in whole words");
  static constexpr std::size_t kFields = std::extent_v<decltype(Counts::values)>;

 public:
  // The new holder, after taking the lane: records `name` (cut to fit) and
  // the lane's counters now, and ends the write the leaving holder's Vacate
  // (or the constructor) began. SYNC POINT WRITE (N).
  void Occupy(const char* name, const Counts& baseline) noexcept {
    char bytes[kProducerNameCapacity];
    CopyName(name, bytes, kProducerNameCapacity);
    for (std::size_t w = 0; w < kWords; ++w) {
      std::uint32_t word;
      std::memcpy(&word, bytes + w * 4, 4);
      SeqLock::Store(name_[w], word);
    }
    for (std::size_t i = 0; i < kFields; ++i) SeqLock::Store(baseline_[i], baseline.values[i]);
    lock_.EndWrite();
  }

  // The leaving holder, before it hands the lane back: no holder now.
  // Relaxed (SeqLock::BeginWrite): the next holder's record stores follow it
  // through the lane's (J) hand-over.
  void Vacate() noexcept { lock_.BeginWrite(); }

  // Any thread: the holder's name and baseline, then `read_counts(baseline)`
  // inside the same check, so the counts read there are this holder's; false
  // when the lane has no holder. Lock-free and bounded: a retry means a
  // holder came or left meanwhile, and after SeqLock::kReadAttempts of those
  // the read gives up (false, as if no holder) rather than chase a lane
  // registered over and over. SYNC POINT READ (N).
  template <typename ReadCounts>
  bool Read(char (&name)[kProducerNameCapacity], ReadCounts&& read_counts) const noexcept {
    Counts baseline;
    const bool held = lock_.Read(
        [&] {
          for (std::size_t w = 0; w < kWords; ++w) {
            const std::uint32_t word = SeqLock::Load(name_[w]);
            std::memcpy(name + w * 4, &word, 4);
          }
          for (std::size_t i = 0; i < kFields; ++i) {
            baseline.values[i] = SeqLock::Load(baseline_[i]);
          }
          read_counts(static_cast<const Counts&>(baseline));
        },
        SeqLock::WhileOdd::kFail);
    if (held) name[kProducerNameCapacity - 1] = '\0';
    return held;
  }

 private:
  SeqLock lock_{1};  // odd: no holder
  std::atomic<std::uint32_t> name_[kWords] = {};
  std::atomic<Counter> baseline_[kFields] = {};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
