// Large payloads across processes without a copy: blocks in the segment,
// lent to a producer, written there once, and read in place by the
// consumer.
//
//   struct Frame { std::uint32_t bytes; unsigned char data[65536]; };
//   using Payload = std::variant<Imu, sluice::ipc::Loaned<Frame>>;
//   // producer process
//   sluice::ipc::ShmLoan<Frame> frame = producer.Loan<Frame>();  // empty when none is free
//   if (frame) { frame->bytes = Capture(frame->data); producer.PublishLoan(frame, kCamera); }
//   // consumer process
//   bus.Subscribe<sluice::ipc::Loaned<Frame>>([](const sluice::ipc::Loaned<Frame>& frame) {
//     Use(frame->data, frame->bytes);  // in the segment: valid during the callback only
//   });
//
// Each producer's lane has ShmBusTraits::kLoanBlocks blocks (at most 64),
// each as large as the largest Loaned<T> of the payload; a payload without
// a Loaned<T> has none. A block is, at any instant, free (the producer's
// to take), lent (taken by the producer, not yet published), named by a
// queued message, or held by the consumer (it took the message that names
// it and has not given the block back). Two bits per block say which of
// these it is where the producer cannot tell by itself: free, and held;
// they share one word (LoanWords: 32 blocks a word), so that each move
// between them is one atomic step. A producer takes a free block with a
// CAS that clears its free bit (and gives one back unpublished with a
// fetch_or that sets it); the consumer sets the held bit before it takes
// the message from its ring, and gives the block back after the dispatch
// with a CAS that sets free and clears held. So a consumer killed at any
// instruction leaves each of its blocks held or given back, never lost
// between the two: the consumer that takes its segment over frees every
// held block (ReclaimHeld), except the block of a message it finds still
// queued. A producer killed holding loans loses them with its lane, which
// the consumer makes anew (every block free) when it hands the lane on.
//
// Synchronisation, each release named with its acquire:
//  (P) block reuse, consumer -> producer: the consumer's reads of a block
//      (the subscribers', during dispatch) come before its release CAS that
//      sets the block's free bit; the producer's acquire CAS that clears the
//      bit comes before its writes into the block. A taking-over consumer's
//      ReclaimHeld is a release CAS too, after the killed one's last reads
//      (the kernel's: the killed process had ended before its role was
//      dropped, which the taker saw).
//  The producer's writes into the block reach the consumer through the
//  message that names it: the slot's publish is release, the consumer's
//  look at it acquire ((A) of detail/queue/ring.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

namespace detail {
template <typename Payload, std::size_t kCapacity, typename Traits>
class ShmFront;  // sluice/ipc/shm_front.hpp
}  // namespace detail

// The payload alternative of a loaned message: which block of the sending
// lane holds the T. At the consumer, during dispatch, it also points at
// the block in this process's mapping (the bus checks the block number
// and sets the pointer on its own copy of the message; what a producer
// wrote there is never used). Trivially copyable, so it crosses processes.
template <typename T>
class Loaned {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>,
                "Sluice: a loaned type must be trivially copyable and not a pointer: it is "
                "read as bytes by another process");

 public:
  using Type = T;
  // What a copy of the handle names is valid during the callback only (the
  // block goes back to its producer after the dispatch): a flight recorder
  // refuses to keep it (sluice/record/flight_recorder.hpp).
  static constexpr bool kValidInCallbackOnly = true;
  // The T in place, in the segment: valid during the callback only. Its
  // producer (or anything else that can write the segment) can still write
  // the block while it is read here: two reads of one field may differ,
  // and a check of a field may not hold for the next read of it. From a
  // producer you do not trust, read it once with CopyTo and use the copy.
  const T& operator*() const noexcept { return *data_; }
  const T* operator->() const noexcept { return data_; }
  const T* Get() const noexcept { return data_; }
  std::uint32_t Block() const noexcept { return block_; }

  // Copies the T out of the block into *out (this process's memory, which
  // no other process can write): check and use the copy, and what was
  // checked stays true. The copy is of whatever the block held while it
  // was copied: a producer writing meanwhile can leave it torn (a mix of
  // two values), never changing afterwards. Null `out`: nothing.
  void CopyTo(T* out) const noexcept {
    if (out != nullptr && data_ != nullptr) std::memcpy(static_cast<void*>(out), data_, sizeof(T));
  }

 private:
  template <typename, std::size_t, typename>
  friend class detail::ShmFront;  // binds a taken loan to its block
  template <typename, std::size_t, typename>
  friend class ShmProducer;
  std::uint32_t block_ = 0;
  const T* data_ = nullptr;  // set by the consumer, in its own copy
};

namespace detail {

template <typename T>
struct IsLoaned : std::false_type {};
template <typename T>
struct IsLoaned<Loaned<T>> : std::true_type {};

// The largest loaned type of a payload (0 without one), and its alignment.
template <typename Payload>
struct LoanShape;
template <typename... Ts>
struct LoanShape<std::variant<Ts...>> {
  template <typename T>
  static constexpr std::size_t SizeOf() {
    if constexpr (IsLoaned<T>::value) {
      return sizeof(typename T::Type);
    } else {
      return 0;
    }
  }
  template <typename T>
  static constexpr std::size_t AlignOf() {
    if constexpr (IsLoaned<T>::value) {
      return alignof(typename T::Type);
    } else {
      return 1;
    }
  }
  static constexpr std::size_t Max(std::initializer_list<std::size_t> values) {
    std::size_t most = 0;
    for (const std::size_t value : values) most = value > most ? value : most;
    return most;
  }
  static constexpr bool kAny = (IsLoaned<Ts>::value || ...);
  static constexpr std::size_t kAlign = Max({kCacheLineSize, AlignOf<Ts>()...});
  // Whole lines, so that two blocks never share one.
  static constexpr std::size_t kBlockBytes =
      (Max({SizeOf<Ts>()...}) + kAlign - 1) / kAlign * kAlign;
};

// A lane's loan words: block b's bits are in word b / 32: bit b % 32 set
// while the block is free, bit 32 + b % 32 while the consumer holds it.
inline constexpr std::size_t kBlocksPerLoanWord = 32;
inline constexpr std::size_t kLoanWords = 2;  // 64 blocks at most
inline constexpr std::uint64_t kFreeBits = 0xFFFFFFFFULL;

// Every block of a lane of `blocks` free, none held, in word `word`.
inline constexpr std::uint64_t AllFree(std::size_t blocks, std::size_t word) noexcept {
  const std::size_t first = word * kBlocksPerLoanWord;
  if (blocks <= first) return 0;
  const std::size_t here = blocks - first;
  return here >= kBlocksPerLoanWord ? kFreeBits : (std::uint64_t{1} << here) - 1;
}

// Producer: takes a free block of the lane whose words are `words` (blocks
// below `blocks` only), its number in *block. False when none is free.
inline bool TakeFreeBlock(std::atomic<std::uint64_t>* words, std::size_t blocks,
                          std::uint32_t* block) noexcept {
  for (std::size_t w = 0; w < kLoanWords && w * kBlocksPerLoanWord < blocks; ++w) {
    // Bits past the lane's blocks (set by a writer of the segment) are
    // never taken.
    const std::uint64_t valid = AllFree(blocks, w);
    std::uint64_t word = words[w].load(std::memory_order_relaxed);
    for (std::uint64_t free = word & valid; free != 0; free = word & valid) {
      const std::uint64_t bit = free & (~free + 1);
      // SYNC POINT READ (P): the block's last reader, before the taker's writes.
      if (words[w].compare_exchange_weak(word, word & ~bit, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
        *block = static_cast<std::uint32_t>(w * kBlocksPerLoanWord +
                                            static_cast<std::size_t>(__builtin_ctzll(bit)));
        return true;
      }
    }
  }
  return false;
}

// Producer: gives block `block` (< 64) back unpublished.
inline void GiveBlockBack(std::atomic<std::uint64_t>* words, std::uint32_t block) noexcept {
  // SYNC POINT WRITE (P): this producer's accesses of the block, before the
  // next taker's.
  words[block / kBlocksPerLoanWord].fetch_or(std::uint64_t{1} << (block % kBlocksPerLoanWord),
                                             std::memory_order_release);
}

// Consumer: holds block `block` (< 64), before it takes the message that
// names it from its ring (whose release keeps this store before it).
inline void HoldBlock(std::atomic<std::uint64_t>* words, std::uint32_t block) noexcept {
  words[block / kBlocksPerLoanWord].fetch_or(
      std::uint64_t{1} << (kBlocksPerLoanWord + block % kBlocksPerLoanWord),
      std::memory_order_relaxed);
}

// Consumer: gives the held blocks in `blocks` (bit b: block b) back, each
// word in one step: free set, held cleared.
inline void ReturnHeldBlocks(std::atomic<std::uint64_t>* words, std::uint64_t blocks) noexcept {
  for (std::size_t w = 0; w < kLoanWords; ++w) {
    const std::uint64_t bits = (blocks >> (w * kBlocksPerLoanWord)) & kFreeBits;
    if (bits == 0) continue;
    std::uint64_t word = words[w].load(std::memory_order_relaxed);
    // SYNC POINT WRITE (P): the subscribers' reads of the blocks, before
    // their next taker's writes.
    while (!words[w].compare_exchange_weak(word, (word | bits) & ~(bits << kBlocksPerLoanWord),
                                           std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
}

// A consumer taking over a killed one's segment: every block the killed one
// held is freed, but those in `keep` (bit b: block b), which it had marked
// held for a message it had not yet taken from its ring (still queued:
// the block is that message's until it is dispatched again), and whose
// held bit is only cleared. Blocks below `blocks` only.
inline void ReclaimHeldBlocks(std::atomic<std::uint64_t>* words, std::size_t blocks,
                              std::uint64_t keep) noexcept {
  for (std::size_t w = 0; w < kLoanWords; ++w) {
    const std::uint64_t valid = AllFree(blocks, w);
    const std::uint64_t kept = (keep >> (w * kBlocksPerLoanWord)) & kFreeBits;
    std::uint64_t word = words[w].load(std::memory_order_relaxed);
    // SYNC POINT WRITE (P), for the killed consumer's reads: see above.
    while (!words[w].compare_exchange_weak(
        word, (word & kFreeBits) | ((word >> kBlocksPerLoanWord) & valid & ~kept),
        std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
}

// Where a producer's loans go back: its lane's loan words, while that
// producer is attached to that lane. Shared by the producer and its
// loans, so that a loan dropped after its producer detached (the lane
// handed on, perhaps to another producer, the mapping perhaps gone) gives
// nothing back: the consumer made every block of the lane free when it
// handed the lane on.
struct LoanHome {
  std::atomic<std::uint64_t>* words = nullptr;  // the lane's kLoanWords words
  std::atomic<bool> attached{true};
};

}  // namespace detail

// A producer's hold on one block of its lane: write the T through it, then
// ShmProducer::PublishLoan. Move-only; a loan dropped unpublished goes back
// to the lane's free blocks while its producer stays attached (after a
// Detach, or a move-assignment over the producer, it gives nothing back and
// must not be written: the lane is no longer the producer's). The T is not
// initialised (it holds whatever the block last held): write every field
// the consumer reads.
template <typename T>
class ShmLoan {
 public:
  ShmLoan() noexcept = default;
  ShmLoan(ShmLoan&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        home_(std::move(other.home_)),
        block_(other.block_) {}
  ShmLoan& operator=(ShmLoan&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      home_ = std::move(other.home_);
      block_ = other.block_;
    }
    return *this;
  }
  ShmLoan(const ShmLoan&) = delete;
  ShmLoan& operator=(const ShmLoan&) = delete;
  ~ShmLoan() { Reset(); }

  explicit operator bool() const noexcept { return data_ != nullptr; }
  T& operator*() const noexcept { return *data_; }
  T* operator->() const noexcept { return data_; }
  T* Get() const noexcept { return data_; }

  // Gives the block back unpublished.
  void Reset() noexcept {
    // Whether a block is held, asked of the home (held exactly while the
    // data pointer is): the pointer dereferenced below is then the one
    // tested, so an optimiser that follows a moved-from loan (its home
    // null) into this destructor, as a vector growing does, sees no access
    // through a null home (GCC 12 at -O2 and above warned of one,
    // -Wstringop-overflow).
    if (home_ == nullptr) return;
    if (home_->attached.load(std::memory_order_relaxed)) {
      detail::GiveBlockBack(home_->words, block_);
    }
    data_ = nullptr;
    home_.reset();
  }

 private:
  template <typename, std::size_t, typename>
  friend class ShmProducer;
  ShmLoan(T* data, std::shared_ptr<detail::LoanHome> home, std::uint32_t block) noexcept
      : data_(data), home_(std::move(home)), block_(block) {}
  // Published: the block now belongs to the message.
  std::uint32_t Release() noexcept {
    data_ = nullptr;
    home_.reset();
    return block_;
  }
  T* data_ = nullptr;
  std::shared_ptr<detail::LoanHome> home_;
  std::uint32_t block_ = 0;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
