// Where the ring's slots live: one heap block made at construction, or an
// array inside the bus object. Either way nothing allocates afterwards.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace detail {

template <typename Slot, std::size_t kCount, SlotStorage kKind>
class SlotArray;

template <typename Slot, std::size_t kCount>
class SlotArray<Slot, kCount, SlotStorage::kHeap> {
 public:
  // Allocation failure throws std::bad_alloc, or calls std::abort() when
  // exceptions are disabled: a bus without its ring cannot honour any call.
  SlotArray() {
    void* memory = ::operator new(sizeof(Slot) * kCount, kAlignment, std::nothrow);
    if (memory == nullptr) {
#if SLUICE_HAS_EXCEPTIONS
      throw std::bad_alloc();
#else
      std::abort();
#endif
    }
    slots_ = static_cast<Slot*>(memory);
    for (std::size_t i = 0; i < kCount; ++i) new (&slots_[i]) Slot();
  }
  ~SlotArray() {
    for (std::size_t i = 0; i < kCount; ++i) slots_[i].~Slot();
    ::operator delete(slots_, kAlignment);
  }
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;

  Slot& operator[](std::size_t index) noexcept { return slots_[index]; }
  const Slot& operator[](std::size_t index) const noexcept { return slots_[index]; }

 private:
  // Slots of over-aligned payloads need more than a cache line.
  static constexpr std::align_val_t kAlignment{alignof(Slot) > kCacheLineSize ? alignof(Slot)
                                                                              : kCacheLineSize};
  Slot* slots_ = nullptr;
};

template <typename Slot, std::size_t kCount>
class SlotArray<Slot, kCount, SlotStorage::kInline> {
 public:
  Slot& operator[](std::size_t index) noexcept { return slots_[index]; }
  const Slot& operator[](std::size_t index) const noexcept { return slots_[index]; }

 private:
  // At least the slot's own alignment (over-aligned payloads).
  alignas(alignof(Slot) > kCacheLineSize ? alignof(Slot) : kCacheLineSize) Slot slots_[kCount];
};

}  // namespace detail
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
