// The stores a stream state file (sluice/nats/stream_state_file.hpp) is
// written with, for a later process that reads it after this one was
// killed, and which of two copies a generation committed last. The file's
// stream records and its durables' places
// (sluice/nats/stream_state_durables.hpp) are written through these alone.
// Standard library only, and the __atomic built-ins of GCC and Clang.
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// A record or a durable's place in use: its `live` word, written last
// when one is added (the commit).
inline constexpr std::uint32_t kLive = 0x4C495645;  // "LIVE"

#if defined(SLUICE_NATS_TEST_SEAMS)
// Tests only (SLUICE_NATS_TEST_SEAMS): called before each store a later
// process reads and after each commit, where a test kills the writer.
inline void (*state_file_store_seam)() = nullptr;

inline void StateFileStoreSeam() noexcept {
  if (state_file_store_seam != nullptr) state_file_store_seam();
}
#else
inline void StateFileStoreSeam() noexcept {}
#endif

// The stores a later process reads after this one was killed: single
// stores (never torn), in program order for the compiler too. No other
// thread or process reads the file meanwhile (the lock).
// A 32-bit store commits (a generation, `live`): the fences keep every
// store before it before it, and every store after it after it.
inline void StoreInFile(std::uint32_t& word, std::uint32_t value) noexcept {
  StateFileStoreSeam();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  __atomic_store_n(&word, value, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  StateFileStoreSeam();
}
inline void StoreInFile(std::uint64_t& word, std::uint64_t value) noexcept {
  StateFileStoreSeam();
  __atomic_store_n(&word, value, __ATOMIC_RELAXED);
}

inline std::uint32_t LoadFromFile(const std::uint32_t& word) noexcept {
  return __atomic_load_n(&word, __ATOMIC_RELAXED);
}

// The copy committed last: the higher generation (by serial number
// arithmetic, so a wrap is no step back); 0 is never written.
template <typename Copies>
int NewerCopy(const Copies& copies) noexcept {
  const std::uint32_t a = copies[0].generation;
  const std::uint32_t b = copies[1].generation;
  if (b == 0) return 0;
  if (a == 0) return 1;
  return static_cast<std::int32_t>(b - a) > 0 ? 1 : 0;
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
