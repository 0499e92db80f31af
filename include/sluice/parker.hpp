// Parkers: how a bus's consumer sleeps while its queue is empty, and how its
// producers sleep in PublishBlocking while it is full. A bus whose traits
// name a parker (BusTraits::Waiting, WaitWith<Parker>) offers ProcessBatchWait and
// PublishBlocking; with NoParker (the default) it offers neither, and its
// producers pay nothing for them.
// Two come with Sluice as add-ons: ConditionVariableParker (standard library,
// sluice/extras/condition_variable_parker.hpp, with SleepingConsumerTraits)
// and FutexParker and MembarrierFutexParker (Linux,
// sluice/extras/futex_parker.hpp).
//
// A parker is a class with two members, used by one bus:
//   void Wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
//             std::chrono::nanoseconds timeout) noexcept;
//     Returns once `word` != `expected`, or at the timeout, or spuriously;
//     it must not sleep through a WakeAll that follows a change of `word`
//     (compare and sleep atomically, as a futex or a mutex does).
//   void WakeAll(std::atomic<std::uint32_t>& word) noexcept;
//     Called by a notifier after it changed `word`: wakes every Wait on it.
//     Every one, not one of them: several producers may wait on the same
//     word in PublishBlocking (a semaphore that releases one thread is not
//     enough there; ProcessBatchWait alone has a single waiter).
// Optionally, a parker may also offer
//   bool EnableHeavyFence() noexcept;  // once, at the bus's construction
//   bool HeavyFence() noexcept;        // a waiter, on its way into sleep
// where HeavyFence makes every running thread of the process execute a full
// memory barrier before it returns (Linux membarrier). If EnableHeavyFence
// returns true, notifiers (producers, and the consumer after a batch) skip
// their own fence (detail/wait/wake_signal.hpp).
// And, for a WaitSet that also waits on signals other processes wake (a
// ShmBus's), a parker may offer
//   static void WaitAny(const ParkWord* words, std::size_t count,
//                       std::chrono::nanoseconds timeout) noexcept;
//     Returns once any `words[i].word` != `words[i].expected`, or at the
//     timeout, or spuriously, comparing and sleeping atomically for all of
//     them (FutexParker: Linux futex_waitv).
// On one core without an operating system (SLUICE_FREESTANDING, where there
// is no PublishBlocking, so the consumer is the only waiter), Wait may loop
// on a wait-for-interrupt instruction until `word` changes or time is up,
// and WakeAll may do nothing (the interrupt that published already woke the
// core); under an RTOS they take and give a semaphore.
// Signal handlers and interrupts: a publish, a batch and Close call WakeAll
// when someone sleeps, so they are as lock-free and signal-safe as WakeAll
// is (ConditionVariableParker takes a mutex; the futex parkers do not).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {

// No sleeping consumer: ProcessBatchWait does not compile, and publishing
// costs nothing extra.
struct NoParker {};

// One word of a wait on several (a parker's WaitAny): the word, the value
// the wait sleeps while it holds, and whether other processes map it (a
// futex then keys it by its page, not by this process's address).
struct ParkWord {
  const std::atomic<std::uint32_t>* word = nullptr;
  std::uint32_t expected = 0;
  bool process_shared = false;
};

}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
