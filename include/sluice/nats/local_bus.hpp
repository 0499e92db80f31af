// The local bus as the NATS bridge uses it: what the bridge reads of the
// bus's type (its payload, whether several threads may publish into it),
// and the bus's part of a shutdown (closing and draining it, and the end of
// the forwarded types' bus subscriptions).
#pragma once

#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "sluice/bus.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/producer_model.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// The bus type's payload, and whether the client's threads may publish
// into it (Receive needs several producers).
template <typename Bus>
struct BusInfo;
template <typename Payload, std::size_t kCapacity, ProducerModel kProducers, typename Traits>
struct BusInfo<AsyncBus<Payload, kCapacity, kProducers, Traits>> {
  using PayloadType = Payload;
  static constexpr bool kMultiProducer = kProducers == ProducerModel::kMulti;
};

// Closes `bus` to new publishes, then waits up to `timeout` until what it
// admitted before is dispatched; whether it was. kDispatchHere: the caller
// is the consumer, so it dispatches itself (yielding when a publish still
// in flight leaves nothing to take). kWaitForConsumer: another thread
// dispatches (the bus's Drain).
template <typename Bus>
bool CloseAndDrain(Bus& bus, std::chrono::milliseconds timeout, ShutdownDrain drain) {
  bus.Close();
  if (drain == ShutdownDrain::kDispatchHere) {
    const sluice::detail::Deadline deadline(sluice::detail::SaturatingNanos(timeout));
    while (!bus.IsDrained() && deadline.Left().count() != 0) {
      if (bus.ProcessBatch() == 0) std::this_thread::yield();
    }
    return bus.IsDrained();
  }
  return bus.Drain(timeout);
}

// Ends the forwarded types' bus subscriptions. Each Unsubscribe waits for a
// batch in flight, so no Send runs once this returns; not to be called
// holding a mutex a bus callback may take (the routes').
template <typename Bus>
void Unsubscribe(Bus& bus, const std::vector<SubscriptionHandle>& handles) {
  for (const SubscriptionHandle& handle : handles) {
    if (handle.IsValid()) (void)bus.Unsubscribe(handle);
  }
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
