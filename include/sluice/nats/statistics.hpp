// The NATS bridge's statistics snapshot, gathered from the parts that keep
// its fields: the tallies (sluice/nats/counters.hpp), the receiver's
// streams, the connection's state and the inbound subscriptions'
// slow-consumer drops.
#pragma once

#include "sluice/config.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/metrics.hpp"
#include "sluice/nats/subscriptions.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// Any thread. Each source is read on its own (the receiver's streams under
// its mutex, then the drops under the subscriptions'), never two mutexes
// at once: consistent per field, as the snapshot promises.
template <typename Receiver>
BridgeStatisticsSnapshot ReadStatistics(const Counters& counters, const Receiver& receiver,
                                        const Connection& connection,
                                        const SubscriptionSet<Receiver>& subscriptions) {
  BridgeStatisticsSnapshot s;
  counters.CopyTo(s);
  s.streams = receiver.Streams().CountsNow();
  s.connected = connection.connected();
  s.slow_consumer_dropped = subscriptions.SlowConsumerDropped();
  return s;
}

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
