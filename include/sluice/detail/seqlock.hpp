// A sequence lock built only from std::atomic: one writer at a time rewrites
// a small record that any number of readers copy without a lock and without
// ever blocking the writer. Every field of the record is itself an atomic,
// so a reader that races a write reads a mix of old and new words (which it
// then throws away), never undefined behaviour, and ThreadSanitizer sees
// every access. It holds no pointers and no process-local state, so it may
// live in memory mapped by several processes.
//
// Protocol. The version is even while the record is consistent, odd while
// a write is under way (or, for a user that leaves it so on purpose, while
// there is no record: a producer lane without a holder, detail/queue/lane_holder.hpp).
//   writer: BeginWrite()      version odd (relaxed store)
//           Store(field, v)   each field, release
//           EndWrite()        version even (release store)
//   reader: v = version       acquire; odd: a write is under way
//           Load(field)       each field, acquire
//           version == v      relaxed; equal: the copy is one write's
//
// Why a reader that finds the version unchanged read one write's record:
//  - Its first (acquire) load read the even version of some EndWrite k,
//    whose release store follows write k's field stores: every field load
//    after it sees write k's value or a later one.
//  - If any field load read a later write's value, that store is a release
//    store and the load an acquire load, so the store synchronises with it;
//    the later write's BeginWrite (its odd version) happens before that
//    store (sequenced before it in the writer, or, for a writer that takes
//    over another's write, through the hand-over the caller provides), and
//    so before the reader's second version load. That load therefore reads
//    the odd version or a later one (write-read coherence), not v, and the
//    copy is thrown away.
// So the second version load can be relaxed, and neither side needs a
// fence: the orderings travel on the fields' own release/acquire pairs (on
// x86 these are plain moves; on AArch64, ldar/stlr). This is also why a user's
// fields must be stored with Store and loaded with Load (or the same
// orders): a relaxed field store would let a reader see the new value with
// the old, even version.
//
// A reader never waits for the writer: Read gives up after a bounded number
// of attempts and says so, so a reader facing a writer that died mid-write
// (a process killed between BeginWrite and EndWrite: the version stays odd
// for ever) reports failure rather than spinning, or returning a torn copy.
// The next writer takes such a record over: BeginWrite leaves an odd
// version odd, and its EndWrite makes it even again.
//
// Limit: the version wraps after 2^31 writes. A reader preempted between its
// two version loads while exactly a multiple of 2^31 writes complete would
// accept a torn copy; that takes over two thousand million writes during one
// preemption.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"
#include "sluice/detail/wait/cpu_relax.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

class SeqLock {
 public:
  // What Read does when it finds the version odd.
  enum class WhileOdd : std::uint8_t {
    kRetry,  // a write is under way: look again, within the attempts
    kFail,   // the odd version means "no record" (a vacant lane): false at once
  };
  // Read's default bound: each attempt that finds a write under way pauses
  // once, so a reader facing a dead writer gives up within microseconds,
  // while a live writer's few stores finish well within it.
  static constexpr std::uint32_t kReadAttempts = 1024;

  // `version`: odd starts the record as being written (no record yet), even
  // as consistent. All-zero bytes are version 0: a record of zeros, as a
  // fresh shared-memory segment holds.
  constexpr explicit SeqLock(std::uint32_t version = 0) noexcept : version_(version) {}
  SeqLock(const SeqLock&) = delete;
  SeqLock& operator=(const SeqLock&) = delete;

  // ---- Writer (one at a time; the caller serialises writers) ---------------
  // Makes the version odd. An odd version stays as it is: the caller is
  // finishing a write another writer began (a lane's next holder) or left
  // unfinished (a writer that died mid-write).
  void BeginWrite() noexcept {
    const std::uint32_t version = version_.load(std::memory_order_relaxed);
    // Relaxed: readers learn of this store only through a release store of
    // a field after it (see the file comment), never through this one.
    if ((version & 1u) == 0) version_.store(version + 1, std::memory_order_relaxed);
  }
  // After BeginWrite and the fields' stores: makes the version even.
  void EndWrite() noexcept {
    const std::uint32_t version = version_.load(std::memory_order_relaxed);
    // Release: a reader that acquires the even version sees every field
    // stored before it.
    version_.store(version + 1, std::memory_order_release);
  }
  // BeginWrite, `write_fields()` (which stores the fields with Store),
  // EndWrite.
  template <typename WriteFields>
  void Write(WriteFields&& write_fields) noexcept {
    BeginWrite();
    write_fields();
    EndWrite();
  }
  // A field's store inside a write: release (see the file comment).
  template <typename T>
  static void Store(std::atomic<T>& field, T value) noexcept {
    field.store(value, std::memory_order_release);
  }

  // ---- Readers (any thread, any number) --------------------------------------
  // Calls `read_fields()` (which loads the fields with Load and copies them
  // out) until one call's copy is one write's record: true. False when no
  // attempt of `attempts` succeeded (every one met a write, or writes kept
  // coming), or at once on an odd version with WhileOdd::kFail; the copy
  // is then not to be used. Lock-free and bounded: never waits for a writer.
  template <typename ReadFields>
  bool Read(ReadFields&& read_fields, WhileOdd while_odd = WhileOdd::kRetry,
            std::uint32_t attempts = kReadAttempts) const noexcept {
    for (std::uint32_t attempt = 0; attempt < attempts; ++attempt) {
      // Acquire: pairs with EndWrite's release.
      const std::uint32_t before = version_.load(std::memory_order_acquire);
      if ((before & 1u) != 0) {
        if (while_odd == WhileOdd::kFail) return false;
        CpuRelax();
        continue;
      }
      read_fields();
      // Relaxed: a field load that saw a later write already ordered this
      // load after that write's BeginWrite (see the file comment).
      if (version_.load(std::memory_order_relaxed) == before) return true;
    }
    return false;
  }
  // A field's load inside a read: acquire (see the file comment).
  template <typename T>
  static T Load(const std::atomic<T>& field) noexcept {
    return field.load(std::memory_order_acquire);
  }

  // The version as it stands (tests, diagnostics).
  std::uint32_t Version() const noexcept { return version_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint32_t> version_;
};

// A record of kWords words of a trivially copyable `Word` under a sequence
// lock: the simple case, a fixed identity read whole (a process id, its
// start time, a namespace id, each widened to a Word).
template <typename Word, std::size_t kWords>
class SeqLockedWords {
  static_assert(kWords >= 1, "a record has at least one word");

 public:
  SeqLockedWords() noexcept = default;
  // Starts as a consistent record of `words`.
  explicit SeqLockedWords(const Word (&words)[kWords]) noexcept {
    for (std::size_t i = 0; i < kWords; ++i) words_[i].store(words[i], std::memory_order_relaxed);
  }

  // The one writer at a time.
  void Write(const Word (&words)[kWords]) noexcept {
    lock_.Write([&] {
      for (std::size_t i = 0; i < kWords; ++i) SeqLock::Store(words_[i], words[i]);
    });
  }
  // Any thread: true with one write's words in `out`; false (and `out`
  // not to be used) as SeqLock::Read.
  bool Read(Word (&out)[kWords], std::uint32_t attempts = SeqLock::kReadAttempts) const noexcept {
    return lock_.Read(
        [&] {
          for (std::size_t i = 0; i < kWords; ++i) out[i] = SeqLock::Load(words_[i]);
        },
        SeqLock::WhileOdd::kRetry, attempts);
  }

  // The lock itself, for a writer that writes word by word (and tests).
  SeqLock& Lock() noexcept { return lock_; }
  const SeqLock& Lock() const noexcept { return lock_; }
  std::atomic<Word>& WordAt(std::size_t i) noexcept { return words_[i]; }

 private:
  SeqLock lock_;
  std::atomic<Word> words_[kWords] = {};
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
