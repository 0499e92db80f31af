// Build-wide constants and feature detection shared by every Sluice header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define SLUICE_HAS_EXCEPTIONS 1
#else
#define SLUICE_HAS_EXCEPTIONS 0
#endif

// The unit of false sharing. 64 bytes on x86-64 and most ARM cores; define it
// to 128 before including Sluice on cores that pair adjacent lines.
#ifndef SLUICE_CACHE_LINE_SIZE
#define SLUICE_CACHE_LINE_SIZE 64
#endif

// Freestanding configuration: one core, no operating-system threads
// (a microcontroller, bare metal or under an RTOS with one core). Sluice then
// uses no thread_local, no std::thread and no clock of its own, and a writer
// that finds a dispatch batch in flight never waits for it (on one core it
// can only have preempted the consumer): destruction is deferred to the end
// of that batch instead. On by default for M-profile Arm (Cortex-M). Not to
// be confused with PerformanceMode::BARE_METAL, a run-time mode that only
// skips statistics and timestamps.
//
// SLUICE_BARE_METAL, this setting's name before 0.2, is an error: ignored,
// it would build a hosted library for a target that asked for freestanding.
#ifdef SLUICE_BARE_METAL
#error "Sluice: SLUICE_BARE_METAL was renamed SLUICE_FREESTANDING in 0.2; define that instead"
#endif
#ifndef SLUICE_FREESTANDING
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define SLUICE_FREESTANDING 1
#else
#define SLUICE_FREESTANDING 0
#endif
#endif

// Width of ring positions and counters: 64 bits where 64-bit atomics are
// always lock-free, else 32 (Cortex-M, where they would take a lock in
// libatomic). With 32 bits, message ids and counters wrap at 2^32.
#ifndef SLUICE_ATOMIC_BITS
#if ATOMIC_LLONG_LOCK_FREE == 2
#define SLUICE_ATOMIC_BITS 64
#else
#define SLUICE_ATOMIC_BITS 32
#endif
#endif

// The few steps of the hot path that must be inlined whatever the compiler's
// budget for the translation unit (GCC leaves them out of line in a large
// one), and the cold steps kept out of it.
#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_ALWAYS_INLINE inline __attribute__((always_inline))
#define SLUICE_LAMBDA_ALWAYS_INLINE __attribute__((always_inline))
#define SLUICE_NOINLINE __attribute__((noinline))
#define SLUICE_UNLIKELY(condition) __builtin_expect(!!(condition), 0)
// An invariant the code around it has established (never a check of
// input): lets the compiler drop a test it cannot prove redundant.
#define SLUICE_ASSUME(condition)               \
  do {                                         \
    if (!(condition)) __builtin_unreachable(); \
  } while (0)
#else
#define SLUICE_ALWAYS_INLINE inline
#define SLUICE_LAMBDA_ALWAYS_INLINE
#define SLUICE_NOINLINE
#define SLUICE_UNLIKELY(condition) (condition)
#define SLUICE_ASSUME(condition) ((void)0)
#endif

// Every Sluice name lives in an inline namespace named after the settings
// above that change class layouts, so two translation units built with
// different settings cannot silently share one definition (an ODR
// violation): a function whose signature names a Sluice type fails to
// link. A user type that only contains a bus is not renamed: that case needs
// one setting for the whole program. SLUICE_CACHE_LINE_SIZE must be a plain
// integer literal.
#define SLUICE_ABI_JOIN(line, bits, free) abi_line##line##_pos##bits##_free##free
#define SLUICE_ABI_NAME(line, bits, free) SLUICE_ABI_JOIN(line, bits, free)
#define SLUICE_ABI_NAMESPACE \
  SLUICE_ABI_NAME(SLUICE_CACHE_LINE_SIZE, SLUICE_ATOMIC_BITS, SLUICE_FREESTANDING)

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

inline constexpr std::size_t kCacheLineSize = SLUICE_CACHE_LINE_SIZE;

static_assert(SLUICE_ATOMIC_BITS == 32 || SLUICE_ATOMIC_BITS == 64,
              "Sluice: SLUICE_ATOMIC_BITS must be 32 or 64");

// A monotonically increasing ring position. Unsigned arithmetic makes every
// comparison wrap-safe: only differences of positions are ever compared.
using Position = std::conditional_t<SLUICE_ATOMIC_BITS == 64, std::uint64_t, std::uint32_t>;

// The type of the statistics counters kept inside a bus.
using Counter = Position;

// The lock-freedom guarantees rest on these: refuse to build where they would
// silently take a lock.
static_assert(std::atomic<Position>::is_always_lock_free,
              "Sluice: atomics of this width are not lock-free on this target; "
              "define SLUICE_ATOMIC_BITS=32");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint8_t>::is_always_lock_free &&
                  std::atomic<void*>::is_always_lock_free,
              "Sluice: needs lock-free 8-bit, 32-bit and pointer atomics");

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
