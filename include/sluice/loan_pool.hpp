// Large payloads by reference: a fixed pool of blocks allocated at
// construction, and Loan<T>, a small move-only handle to one block. A
// producer acquires a loan, fills the block in place and publishes the loan
// (the variant holds the handle, so every slot stays small); the block goes
// back to the pool when its last owner drops it: after dispatch, or later
// when a subscriber kept a reference with Share().
//
//   sluice::LoanPool<PointCloud, 8> clouds;              // 8 blocks, allocated here
//   using Payload = std::variant<Imu, sluice::Loan<PointCloud>>;
//   sluice::Loan<PointCloud> cloud = clouds.Acquire();  // empty when all 8 are out
//   if (cloud) cloud->count = Scan(cloud->points);
//   (void)bus.PublishLoan(std::move(cloud), kLidarId, sluice::MessagePriority::LOW);
//
// Acquire and the last drop are lock-free (one CAS loop each, no waiting on
// another thread), allocate nothing, and may run on any thread or in an
// interrupt handler.
//
// Synchronisation, each release named with its acquire:
//  (P) block reuse: the last owner destroys the block's T and pushes its
//      index onto the free list with a release CAS of the head; Acquire pops
//      it with an acquire CAS (and acquire loads of the head), so the next
//      owner's writes come after every access of the previous owners. Every
//      write of the head is a CAS (a read-modify-write), so a pop that reads
//      a later head still synchronises with the push: release sequence.
//  (Q) the last owner: each owner's drop decrements the block's reference
//      count with acq_rel; the release orders the owner's reads and writes
//      of the block before its decrement, and the acquire of the one that
//      reaches zero makes all of them happen before it destroys the T and
//      pushes the block (P). Share() increments with relaxed: the caller
//      holds a reference, so the count cannot reach zero meanwhile, and the
//      new owner is handed on by the caller's own synchronisation (a publish
//      is release, a dispatch acquire; a thread's start; a mutex).
//  The producer's writes into the block reach the consumer through the bus:
//  publish is release, dispatch is acquire (docs/api.md, Memory ordering).
//
// The free list is a stack of block indices whose head packs the top index
// with a tag that every push and pop advances. A pop that loaded the head,
// was preempted, and finds the same top index again with the same tag at its
// CAS would install a stale successor (ABA); the tag rules that out unless
// other threads complete exactly a multiple of 2^kTagBits pushes and pops
// during that one preemption. kTagBits is Position's width less the bits of
// an index: with 64-bit positions at least 32 (4,294,967,296 operations
// during one preemption); with 32-bit positions (SLUICE_ATOMIC_BITS=32,
// Cortex-M) and 64 blocks, 25 (33,554,432); the pool refuses more blocks
// than leave 16 tag bits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/queue/slot_storage.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

template <typename T>
class Loan;
template <typename T, std::size_t kBlocks, SlotStorage kStorage>
class LoanPool;

namespace detail {

struct TestAccess;

// For tests: the free list's tag starts at `value` (near its wrap), not at 0.
struct FirstLoanTag {
  Position value = 0;
};

// One block: the T's storage first (at the block's alignment, at least a
// cache line, so blocks never share a line), then its owner count and its
// successor on the free list.
template <typename T>
struct alignas(alignof(T) > kCacheLineSize ? alignof(T) : kCacheLineSize) LoanBlock {
  alignas(T) unsigned char bytes[sizeof(T)];
  std::atomic<std::uint32_t> references{0};
  std::atomic<std::uint32_t> next{0};
};

// What a Loan reaches of its pool, whatever the pool's block count: the
// blocks and the free list.
template <typename T>
class LoanPoolCore {
 public:
  LoanPoolCore(LoanBlock<T>* blocks, std::uint32_t count, unsigned tag_bits,
               Position first_tag) noexcept
      : blocks_(blocks),
        count_(count),
        tag_bits_(tag_bits),
        tag_mask_((Position{1} << tag_bits) - 1) {
    // Block i's successor is i + 1; the last one's is the end (count).
    for (std::uint32_t i = 0; i < count; ++i) {
      blocks_[i].next.store(i + 1, std::memory_order_relaxed);
    }
    head_.store(Pack(0, first_tag & tag_mask_), std::memory_order_relaxed);
  }
  LoanPoolCore(const LoanPoolCore&) = delete;
  LoanPoolCore& operator=(const LoanPoolCore&) = delete;

  // The index of a free block, now taken, or count_ when none is free.
  // Lock-free: a failed CAS means another thread pushed or popped.
  std::uint32_t Pop() noexcept {
    // SYNC POINT READ (P): acquire loads, and the acquire CAS, of the head.
    Position head = head_.load(std::memory_order_acquire);
    for (;;) {
      const std::uint32_t index = IndexOf(head);
      if (index == count_) return count_;
      // The successor that the push of `index` stored before its release
      // CAS; stale if `index` was popped and pushed again meanwhile, and
      // then the tag has moved on and the CAS fails.
      const std::uint32_t next = blocks_[index].next.load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, Pack(next, NextTag(head)), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        return index;
      }
    }
  }

  // Hands block `index` (no owner left) back. Lock-free.
  void Push(std::uint32_t index) noexcept {
    Position head = head_.load(std::memory_order_relaxed);
    for (;;) {
      blocks_[index].next.store(IndexOf(head), std::memory_order_relaxed);
      // SYNC POINT WRITE (P): everything done with the block, its T's
      // destruction included, comes before the next Pop that takes it.
      if (head_.compare_exchange_weak(head, Pack(index, NextTag(head)), std::memory_order_release,
                                      std::memory_order_relaxed)) {
        return;
      }
    }
  }

  // Free blocks: exact while no other thread acquires or releases, an
  // estimate otherwise. At most count_ steps.
  std::size_t CountFree() const noexcept {
    std::uint32_t index = IndexOf(head_.load(std::memory_order_acquire));
    std::size_t free = 0;
    while (index < count_ && free < count_) {
      ++free;
      index = blocks_[index].next.load(std::memory_order_relaxed);
    }
    return free;
  }

  Position Tag() const noexcept { return head_.load(std::memory_order_relaxed) & tag_mask_; }

  T* Object(std::uint32_t index) const noexcept {
    return std::launder(reinterpret_cast<T*>(blocks_[index].bytes));
  }
  std::atomic<std::uint32_t>& References(std::uint32_t index) const noexcept {
    return blocks_[index].references;
  }

  // The last owner is gone (Q): the T is destroyed and the block pushed.
  void Recycle(std::uint32_t index) noexcept {
    Object(index)->~T();
    Push(index);
  }

 private:
  // The tag in the low bits, so that its increment is masked explicitly
  // and can never carry into the index.
  Position Pack(std::uint32_t index, Position tag) const noexcept {
    return (static_cast<Position>(index) << tag_bits_) | tag;
  }
  std::uint32_t IndexOf(Position head) const noexcept {
    return static_cast<std::uint32_t>(head >> tag_bits_);
  }
  Position NextTag(Position head) const noexcept { return (head + 1) & tag_mask_; }

  LoanBlock<T>* const blocks_;
  const std::uint32_t count_;
  const unsigned tag_bits_;
  const Position tag_mask_;
  // Written by every acquire and release: a line of its own.
  alignas(kCacheLineSize) std::atomic<Position> head_{0};
};

// Bits an index of a pool of `blocks` takes (values 0 to blocks, the last
// meaning "none").
constexpr unsigned LoanIndexBits(std::size_t blocks) noexcept {
  unsigned bits = 0;
  for (std::size_t value = blocks; value != 0; value >>= 1) ++bits;
  return bits;
}

}  // namespace detail

// An owner of one pool block holding a T: move-only, two words (pool and
// block index). Empty when default-constructed, moved from, reset, or
// returned by an exhausted pool. The block goes back to its pool when its
// last owner is destroyed or reset. Share() makes another owner: a
// subscriber keeps a block past the batch with it. Owners on different
// threads may read the block at once; writing while another owner reads is
// a data race (fill it before publishing or sharing). Every Loan must be
// gone before its pool is destroyed (the pool's destructor checks).
template <typename T>
class Loan {
 public:
  Loan() noexcept = default;
  Loan(Loan&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), index_(other.index_) {}
  Loan& operator=(Loan&& other) noexcept {
    if (this != &other) {
      Reset();
      pool_ = std::exchange(other.pool_, nullptr);
      index_ = other.index_;
    }
    return *this;
  }
  Loan(const Loan&) = delete;
  Loan& operator=(const Loan&) = delete;
  ~Loan() { Reset(); }

  bool IsValid() const noexcept { return pool_ != nullptr; }
  explicit operator bool() const noexcept { return IsValid(); }

  // The block's T; only on a valid Loan.
  T* Get() noexcept { return pool_->Object(index_); }
  const T* Get() const noexcept { return pool_->Object(index_); }
  T& operator*() noexcept { return *Get(); }
  const T& operator*() const noexcept { return *Get(); }
  T* operator->() noexcept { return Get(); }
  const T* operator->() const noexcept { return Get(); }

  // Another owner of the same block (empty from an empty Loan). Any
  // thread; lock-free (one atomic increment).
  [[nodiscard]] Loan Share() const noexcept {
    if (pool_ == nullptr) return Loan();
    // Relaxed: see (Q) in the file comment.
    pool_->References(index_).fetch_add(1, std::memory_order_relaxed);
    return Loan(pool_, index_);
  }

  // Drops this owner; the last one destroys the T and hands the block back.
  // Lock-free. The Loan is empty afterwards.
  void Reset() noexcept {
    if (pool_ == nullptr) return;
    detail::LoanPoolCore<T>* const pool = std::exchange(pool_, nullptr);
    // SYNC POINT (Q): release this owner's accesses; acquire every other
    // owner's before the T is destroyed.
    if (pool->References(index_).fetch_sub(1, std::memory_order_acq_rel) == 1) {
      pool->Recycle(index_);
    }
  }

  // Owners of the block now (0 for an empty Loan): a snapshot, for tests
  // and diagnostics.
  std::uint32_t UseCount() const noexcept {
    return pool_ == nullptr ? 0 : pool_->References(index_).load(std::memory_order_relaxed);
  }
  // The block's number in its pool (0 for an empty Loan).
  std::uint32_t Block() const noexcept { return pool_ == nullptr ? 0 : index_; }

 private:
  template <typename, std::size_t, SlotStorage>
  friend class LoanPool;
  Loan(detail::LoanPoolCore<T>* pool, std::uint32_t index) noexcept : pool_(pool), index_(index) {}

  detail::LoanPoolCore<T>* pool_ = nullptr;
  std::uint32_t index_ = 0;
};

// A fixed pool of kBlocks blocks, each holding one T while it is loaned.
// The blocks are allocated (kHeap: one heap block; kInline: inside the pool
// object, for static storage or targets without a heap) and written once in
// the constructor, never after. Not copyable or movable (loans point into
// it). Every Loan must be dropped before the pool is destroyed: the
// destructor counts the free blocks and calls std::abort() when some are
// still out, rather than leave loans that point into freed memory. Declare
// the pool before the bus that carries its loans, so the bus (and the loans
// still queued in it) goes first.
template <typename T, std::size_t kBlocks, SlotStorage kStorage = SlotStorage::kHeap>
class LoanPool {
  static constexpr unsigned kIndexBits = detail::LoanIndexBits(kBlocks);

 public:
  static_assert(kBlocks >= 1, "Sluice: a loan pool needs at least one block");
  static_assert(kIndexBits + 16 <= SLUICE_ATOMIC_BITS && kBlocks < 0xFFFFFFFFu,
                "Sluice: too many blocks for a loan pool: its free-list tag needs at least 16 "
                "bits of a position (at most 65,535 blocks with 32-bit positions)");
  static_assert(std::is_nothrow_destructible_v<T>,
                "Sluice: a loaned type must have a destructor that cannot throw");

  // Bits of the free list's tag: its ABA bound is 2^kTagBits operations
  // during one preemption (file comment).
  static constexpr unsigned kTagBits = SLUICE_ATOMIC_BITS - kIndexBits;
  // Memory of one block (the T, its count and successor, rounded up to the
  // block's alignment: at least a cache line) and of all blocks.
  static constexpr std::size_t kBytesPerBlock = sizeof(detail::LoanBlock<T>);
  static constexpr std::size_t kPoolBytes = kBytesPerBlock * kBlocks;

  // kHeap: allocation failure throws std::bad_alloc, or calls std::abort()
  // when exceptions are disabled.
  LoanPool() : LoanPool(detail::FirstLoanTag{}) {}
  // For tests: the free list's tag starts at `first` (near its wrap).
  explicit LoanPool(detail::FirstLoanTag first)
      : core_(&blocks_[0], static_cast<std::uint32_t>(kBlocks), kTagBits, first.value) {}
  LoanPool(const LoanPool&) = delete;
  LoanPool& operator=(const LoanPool&) = delete;
  ~LoanPool() {
    if (core_.CountFree() != kBlocks) std::abort();  // a Loan outlives its pool
  }

  static constexpr std::size_t Capacity() noexcept { return kBlocks; }

  // Takes a free block and constructs its T from `args` (default-initialised
  // without arguments: a trivial T is not written, so acquiring a large
  // block costs nothing per byte). Returns an empty Loan when every block is
  // loaned. Lock-free (a retry means another thread acquired or released),
  // any thread or interrupt handler, no allocation. If T's constructor
  // throws, the block goes back and the exception propagates.
  template <typename... Args>
  [[nodiscard]] Loan<T> Acquire(Args&&... args) {
    static_assert(std::is_constructible_v<T, Args&&...>,
                  "Sluice: LoanPool::Acquire cannot construct the loaned type from these "
                  "arguments");
    const std::uint32_t index = core_.Pop();
    if (index == kBlocks) return Loan<T>();
    // The block is this thread's alone until the Loan is handed on.
    core_.References(index).store(1, std::memory_order_relaxed);
    void* const storage = core_.Object(index);
#if SLUICE_HAS_EXCEPTIONS
    try {
      Construct(storage, std::forward<Args>(args)...);
    } catch (...) {
      core_.Push(index);
      throw;
    }
#else
    Construct(storage, std::forward<Args>(args)...);
#endif
    return Loan<T>(&core_, index);
  }

  // Blocks not loaned: exact while no thread acquires or releases, an
  // estimate otherwise. Walks the free list (at most kBlocks steps).
  std::size_t Available() const noexcept { return core_.CountFree(); }

 private:
  friend struct detail::TestAccess;

  template <typename... Args>
  static void Construct(void* storage, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      new (storage) T;
    } else {
      new (storage) T(std::forward<Args>(args)...);
    }
  }

  // The blocks first: the free list is threaded through them when core_ is
  // constructed.
  detail::SlotArray<detail::LoanBlock<T>, kBlocks, kStorage> blocks_;
  detail::LoanPoolCore<T> core_;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
