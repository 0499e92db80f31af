// The NATS bridge's received subjects put to work: a Receive's route added
// to the route table (sluice/nats/routes.hpp) and, while running,
// subscribed at once; Start's subscriptions of every received subject; and
// StopReceiving's removal. Each subject has a subscription per priority:
// core NATS, read by the receiver (sluice/nats/inbound.hpp), or a
// JetStream pull consumer, read by the fetcher
// (sluice/nats/jetstream_inbound.hpp).
#pragma once

#include <nats/nats.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/inbound.hpp"
#include "sluice/nats/jetstream_inbound.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/routes.hpp"
#include "sluice/nats/subscriptions.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

// `Routes`: the bridge's RouteTable, whose inbound side this works on.
// Every call is made holding the table's mutex.
template <typename Bus, typename Routes>
class InboundRoutes {
 public:
  using DeliverFunction = typename Routes::DeliverFunction;

  // Each argument must outlive this.
  InboundRoutes(const BridgeOptions& options, Routes& routes, Connection& connection,
                SubscriptionSet<Receiver<Bus>>& subscriptions, Receiver<Bus>& receiver,
                StreamFetcher<Bus>& fetcher)
      : options_(options),
        routes_(routes),
        connection_(connection),
        subscriptions_(subscriptions),
        receiver_(receiver),
        fetcher_(fetcher) {}

  InboundRoutes(const InboundRoutes&) = delete;
  InboundRoutes& operator=(const InboundRoutes&) = delete;

  // Receive: the route table decides (see Bridge::Receive); a new subject
  // while running is subscribed now, and this returns once the server has
  // its subscriptions. A subscription that fails takes the subject away
  // again: false.
  bool Add(std::string subject, std::uint16_t type_id, ReceiveOptions route,
           std::size_t variant_index, DeliverFunction deliver) {
    switch (
        routes_.AddInbound(std::move(subject), type_id, std::move(route), variant_index, deliver)) {
      case Routes::Added::kRefused:
        return false;
      case Routes::Added::kKnown:
        return true;
      case Routes::Added::kNewSubject:
        break;
    }
    if (!routes_.started()) return true;
    const auto added = std::prev(routes_.inbound_subjects().end());
    if (Subscribe(added, routes_.inbound_subjects().end()) != NATS_OK) {
      const std::string failed = added->subject;
      subscriptions_.Remove(failed);
      (void)routes_.RemoveInbound(failed);
      return false;
    }
    return true;
  }

  // Start: every received subject's subscriptions, once connected.
  natsStatus SubscribeAll() {
    return Subscribe(routes_.inbound_subjects().begin(), routes_.inbound_subjects().end());
  }

  // StopReceiving: the subject leaves the table, its subscriptions (if the
  // connection is open) are removed once none of its frames is being
  // handled, and its streams are forgotten: received again later, they
  // start anew (no gaps for what was sent meanwhile). False for a subject
  // not received.
  bool Remove(const std::string& subject) {
    if (!routes_.RemoveInbound(subject)) return false;
    if (connection_.is_open()) subscriptions_.Remove(subject);
    receiver_.Streams().Forget(subject);
    return true;
  }

 private:
  // The subscriptions of inbound subjects [first, last), one per priority:
  // core NATS, or a JetStream pull consumer; stops at the first failure.
  // The server has them once it answers the flush's PING, and has refused
  // by then any it does not permit.
  template <typename Iterator>
  natsStatus Subscribe(Iterator first, Iterator last) {
    natsStatus status = NATS_OK;
    fetcher_.ClaimPlaces(first, last);
    for (Iterator subject = first; subject != last; ++subject) {
      for (std::size_t p = 0; p < kPriorityCount && status == NATS_OK; ++p) {
        auto inbound = receiver_.MakeSubscription(*subject, routes_.TypesOf(*subject),
                                                  static_cast<MessagePriority>(p));
        status = subject->stream.empty()
                     ? receiver_.Subscribe(std::move(inbound), subject->queue_group)
                     : fetcher_.Subscribe(*subject, std::move(inbound));
      }
    }
    if (status == NATS_OK && first != last) status = connection_.Flush(options_.connect_timeout);
    for (Iterator subject = first; subject != last; ++subject) {
      if (status == NATS_OK && connection_.SubscriptionRefused(subject->subject)) {
        status = NATS_NOT_PERMITTED;
      }
    }
    return status;
  }

  const BridgeOptions& options_;
  Routes& routes_;
  Connection& connection_;
  SubscriptionSet<Receiver<Bus>>& subscriptions_;
  Receiver<Bus>& receiver_;
  StreamFetcher<Bus>& fetcher_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
