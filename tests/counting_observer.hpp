// A counting observer (sluice/observer.hpp): the whole of an observation
// back end, in this one file. It counts every event by kind (admissions by
// priority, refusals by outcome, batches, messages taken, errors) and keeps
// the last batch's fill and count; safe from any number of producers at
// once and the consumer (relaxed atomics: each count on its own, as the
// bus's statistics are read).
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"

namespace sluice_test {

class CountingObserver {
 public:
  static constexpr std::size_t kOutcomes = 8;  // PublishOutcome's values

  void OnAdmitted(const sluice::MessageHeader& header) noexcept {
    Add(admitted_[static_cast<std::size_t>(header.priority) % 3]);
  }
  void OnRefused(sluice::PublishOutcome outcome, sluice::MessagePriority,
                 std::uint64_t count) noexcept {
    refused_[static_cast<std::size_t>(outcome) % kOutcomes].fetch_add(count,
                                                                      std::memory_order_relaxed);
  }
  void OnBatchBegin(std::uint64_t fill) noexcept {
    Add(batches_);
    last_fill_.store(fill, std::memory_order_relaxed);
  }
  void OnTaken(const sluice::MessageHeader&) noexcept { Add(taken_); }
  void OnBatchEnd(std::uint32_t count) noexcept {
    last_count_.store(count, std::memory_order_relaxed);
  }
  void OnError(const sluice::BusError&) noexcept { Add(errors_); }
  void OnClosed() noexcept { Add(closed_); }

  std::uint64_t Admitted(sluice::MessagePriority priority) const noexcept {
    return Read(admitted_[static_cast<std::size_t>(priority) % 3]);
  }
  std::uint64_t Admitted() const noexcept {
    return Read(admitted_[0]) + Read(admitted_[1]) + Read(admitted_[2]);
  }
  std::uint64_t Refused(sluice::PublishOutcome outcome) const noexcept {
    return Read(refused_[static_cast<std::size_t>(outcome) % kOutcomes]);
  }
  std::uint64_t Batches() const noexcept { return Read(batches_); }
  std::uint64_t Taken() const noexcept { return Read(taken_); }
  std::uint64_t Errors() const noexcept { return Read(errors_); }
  std::uint64_t Closed() const noexcept { return Read(closed_); }
  std::uint64_t LastBatchFill() const noexcept { return Read(last_fill_); }
  std::uint64_t LastBatchCount() const noexcept { return Read(last_count_); }

 private:
  static void Add(std::atomic<std::uint64_t>& counter) noexcept {
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  static std::uint64_t Read(const std::atomic<std::uint64_t>& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  std::atomic<std::uint64_t> admitted_[3] = {};
  std::atomic<std::uint64_t> refused_[kOutcomes] = {};
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::uint64_t> taken_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> closed_{0};
  std::atomic<std::uint64_t> last_fill_{0};
  std::atomic<std::uint64_t> last_count_{0};
};

}  // namespace sluice_test
