// A range of this process's address space held for one bus's parts
// (sluice/ipc/shm_layout.hpp): its header, its wake page and its lanes, each
// a shared-memory object of its own, mapped at fixed offsets so that one
// base and the layout's offsets reach them all. What no part is mapped
// over stays reserved and inaccessible (PROT_NONE): a producer, which maps
// its own lane only, faults on any other lane's place instead of reading
// it. Linux; movable; unmaps the whole range when it goes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

class AddressReservation {
 public:
  AddressReservation() noexcept = default;
  AddressReservation(AddressReservation&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AddressReservation& operator=(AddressReservation&& other) noexcept {
    if (this != &other) {
      Release();
      base_ = std::exchange(other.base_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  AddressReservation(const AddressReservation&) = delete;
  AddressReservation& operator=(const AddressReservation&) = delete;
  ~AddressReservation() { Release(); }

  // `size` bytes (a multiple of the page size) of address space, backed by
  // nothing and inaccessible; false when the system refused.
  [[nodiscard]] bool Reserve(std::size_t size) noexcept {
    Release();
    void* base =
        ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return false;
    base_ = base;
    size_ = size;
    return true;
  }
  // Makes [offset, offset + size) reserved and inaccessible again (a part
  // that went): nothing of the object mapped there stays reachable.
  void Clear(std::size_t offset, std::size_t size) noexcept {
    if (base_ == nullptr) return;
    (void)::mmap(static_cast<unsigned char*>(base_) + offset, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  void* Base() const noexcept { return base_; }
  void* At(std::size_t offset) const noexcept {
    return static_cast<unsigned char*>(base_) + offset;
  }
  bool IsReserved() const noexcept { return base_ != nullptr; }

 private:
  void Release() noexcept {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
  }
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
