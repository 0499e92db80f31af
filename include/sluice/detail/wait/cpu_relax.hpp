// A pause hint for spin loops: frees pipeline resources for the sibling
// hyper-thread and reduces the memory-order-violation flush on loop exit.
#pragma once

#include "sluice/config.hpp"

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <intrin.h>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

inline void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
  _mm_pause();
#elif defined(__aarch64__) || defined(__ARM_ARCH_7A__) || defined(__ARM_ARCH_7M__) || \
    defined(__ARM_ARCH_7EM__)
  __asm__ __volatile__("yield");
#endif
}

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
