// sluice_ipc_sizes_bench's in-process rows: the same frames between two
// threads pinned as the two processes are, on the in-process bus of the
// shared one's shape (several producers allowed, HIGH first, BARE_METAL,
// 256 slots): 24 bytes copied through the slot, 4 KB and 64 KB loaned from
// a LoanPool (filled in place, read in place) as the shared bus loans them.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sluice/loan_pool.hpp>
#include <sluice/sluice.hpp>
#include <thread>
#include <type_traits>
#include <variant>

#include "harness/platform.hpp"
#include "ipc/ipc_bench_setup.hpp"
#include "ipc/sizes_common.hpp"

namespace sluice_ipc_sizes {

using LocalPayload = std::variant<Small, sluice::Loan<Frame4K>, sluice::Loan<Frame64K>>;
using LocalBus = sluice::AsyncBus<LocalPayload, kCapacity, sluice::ProducerModel::kMulti,
                                  sluice::PriorityOrderTraits>;
constexpr std::size_t kLocalBlocks = 64;  // as the shared bus's blocks per lane

// The bus and a pool for each loaned size (heap: 64 blocks of 64 KB).
struct LocalRig {
  LocalBus bus;
  sluice::LoanPool<Frame4K, kLocalBlocks> pool4k;
  sluice::LoanPool<Frame64K, kLocalBlocks> pool64k;

  LocalRig() { bus.SetPerformanceMode(sluice::PerformanceMode::BARE_METAL); }

  template <typename F>
  auto& Pool() {
    if constexpr (std::is_same_v<F, Frame4K>) {
      return pool4k;
    } else {
      return pool64k;
    }
  }

  // One attempt to publish frame `seq` of type F (loaned, but for 24 bytes).
  template <typename F>
  bool Publish(std::uint64_t seq, std::uint64_t sent_ns) {
    if constexpr (std::is_same_v<F, Small>) {
      Small small;
      Write(small, seq, sent_ns);
      return static_cast<bool>(bus.PublishFast(small, 1, std::chrono::nanoseconds(0)));
    } else {
      sluice::Loan<F> loan = Pool<F>().Acquire();
      if (!loan) return false;
      Write(*loan, seq, sent_ns);
      // A refused loan stays with the caller and goes back as it drops.
      return static_cast<bool>(bus.PublishLoan(std::move(loan), 1, sluice::MessagePriority::HIGH));
    }
  }

  // Calls `on(frame)` for each F of the batch (read in place when loaned).
  template <typename F, typename On>
  std::uint32_t Take(On&& on) {
    return bus.ProcessBatchWith([&](const auto& message) {
      using M = std::decay_t<decltype(message)>;
      if constexpr (std::is_same_v<M, F>) {
        on(message);
      } else if constexpr (!std::is_same_v<M, Small>) {
        if constexpr (std::is_same_v<std::decay_t<decltype(*message)>, F>) on(*message);
      }
    });
  }
};

// Messages per second from the first arrival to the last; NaN when the
// deadline passed first (or a frame arrived torn).
template <typename F>
double LocalThroughput(const sluice_ipc_bench::Cpus& cpus, std::uint64_t messages) {
  auto rig = std::make_unique<LocalRig>();
  // Relaxed: a flag that ends the consumer's loop; no data rides on it.
  std::atomic<bool> gave_up{false};
  std::thread producer([&] {
    sluice::bench::PinThisThread(cpus.producer);
    const auto deadline = Clock::now() + kRowDeadline;
    for (std::uint64_t seq = 0; seq < messages; ++seq) {
      while (!rig->Publish<F>(seq, 0)) {
        if (Clock::now() > deadline) {
          gave_up.store(true, std::memory_order_relaxed);
          return;
        }
      }
    }
  });
  sluice::bench::PinThisThread(cpus.consumer);
  std::uint64_t received = 0;
  bool torn = false;
  Clock::time_point first{};
  const auto deadline = Clock::now() + kRowDeadline;
  while (received < messages && Clock::now() < deadline &&
         !gave_up.load(std::memory_order_relaxed)) {
    (void)rig->Take<F>([&](const F& frame) {
      torn |= frame.tail != frame.seq;
      if (received++ == 0) first = Clock::now();
    });
  }
  const Clock::time_point last = Clock::now();
  producer.join();
  if (received < messages || torn) return NAN;
  return static_cast<double>(messages - 1) / std::chrono::duration<double>(last - first).count();
}

// Pings one at a time on one bus, answered on another by a thread.
template <typename F>
Latency LocalPingPong(const sluice_ipc_bench::Cpus& cpus, std::uint64_t pings) {
  auto pings_rig = std::make_unique<LocalRig>();
  auto pongs_rig = std::make_unique<LocalRig>();
  Latency latency;
  // Relaxed: ends the echo's loop; no data rides on it.
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    sluice::bench::PinThisThread(cpus.consumer);
    const auto deadline = Clock::now() + kRowDeadline + 5s;
    while (!stop.load(std::memory_order_relaxed) && Clock::now() < deadline) {
      (void)pings_rig->Take<F>([&](const F& ping) {
        while (!pongs_rig->Publish<F>(ping.seq, NowNanos()) && Clock::now() < deadline) {
        }
      });
    }
  });
  sluice::bench::PinThisThread(cpus.producer);
  const auto deadline = Clock::now() + kRowDeadline;
  for (std::uint64_t seq = 0; seq < pings && Clock::now() < deadline; ++seq) {
    const auto sent = Clock::now();
    while (!pings_rig->Publish<F>(seq, 0) && Clock::now() < deadline) {
    }
    bool answered = false;
    while (!answered && Clock::now() < deadline) {
      (void)pongs_rig->Take<F>([&](const F& pong) {
        latency.one_way.push_back(static_cast<double>(NowNanos() - pong.sent_ns));
        answered = true;
      });
    }
    if (!answered) break;
    latency.round_trip.push_back(
        std::chrono::duration<double, std::nano>(Clock::now() - sent).count());
  }
  stop.store(true, std::memory_order_relaxed);
  echo.join();
  if (latency.round_trip.size() < pings) return Latency{};
  return latency;
}

}  // namespace sluice_ipc_sizes
