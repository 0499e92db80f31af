// Component: an object's subscriptions on one bus, removed when the component
// is destroyed. Make it a member of the object whose state the callbacks use;
// no std::shared_ptr is needed.
//
//   class Logger {
//    public:
//     explicit Logger(Bus& bus) : subscriptions_(bus) {
//       subscriptions_.Subscribe<Reading>([this](const Reading& r) { Write(r); });
//     }
//    private:
//     void Write(const Reading& r);
//     sluice::Component<Bus> subscriptions_;  // last member: destroyed first
//   };
//
// Destroying a component on any thread but the consumer returns only once
// none of its callbacks is running or will run again (Unsubscribe's guarantee),
// so the owner's other members may be destroyed after it. Destroyed on the
// consumer thread, inside a callback, its callbacks are not called again.
//
// For objects owned by std::shared_ptr that may die on any thread, use
// SubscribeWeak: each call locks a std::weak_ptr, so a dispatch in flight
// keeps the object alive until its callback returns.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "sluice/message.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {

// `Bus` is any Sluice bus type; `kMaxSubscriptions` handles are kept inline.
// A component is used by one thread at a time (its owner's); the bus it
// subscribes to may be used by any.
template <typename Bus, std::size_t kMaxSubscriptions = 8>
class Component {
  static_assert(kMaxSubscriptions > 0, "Sluice: a Component needs room for a subscription");

 public:
  explicit Component(Bus& bus) noexcept : bus_(&bus) {}
  ~Component() { UnsubscribeAll(); }

  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;

  // Subscribes `callback` for messages of type T (see Bus::Subscribe). False,
  // with nothing subscribed, when this component already holds
  // kMaxSubscriptions or the bus's table for T is full.
  template <typename T, typename Callback>
  bool Subscribe(Callback&& callback) {
    if (count_ == kMaxSubscriptions) return false;
    const SubscriptionHandle handle = bus_->template Subscribe<T>(std::forward<Callback>(callback));
    if (!handle.valid()) return false;
    handles_[count_++] = handle;
    return true;
  }

  // Subscribes `handler` to T for as long as `owner` lives: each message
  // locks `owner` and, if it is still alive, calls
  // std::invoke(handler, *owner, message) (or with the header as a third
  // argument, when the handler takes it). A member function pointer works:
  //   component.SubscribeWeak<Reading>(weak_from_this(), &Logger::Write);
  template <typename T, typename Owner, typename Handler>
  bool SubscribeWeak(std::weak_ptr<Owner> owner, Handler handler) {
    static_assert(std::is_invocable_v<Handler&, Owner&, const T&, const MessageHeader&> ||
                      std::is_invocable_v<Handler&, Owner&, const T&>,
                  "Sluice: SubscribeWeak's handler takes (Owner&, const T&) or "
                  "(Owner&, const T&, const MessageHeader&)");
    return Subscribe<T>(WeakHandler<T, Owner, Handler>{std::move(owner), std::move(handler)});
  }

  // Unsubscribes everything this component holds; returns how many.
  std::size_t UnsubscribeAll() noexcept {
    std::size_t removed = 0;
    while (count_ > 0) removed += bus_->Unsubscribe(handles_[--count_]) ? 1 : 0;
    return removed;
  }

  std::size_t SubscriptionCount() const noexcept { return count_; }
  Bus& bus() const noexcept { return *bus_; }

 private:
  template <typename T, typename Owner, typename Handler>
  struct WeakHandler {
    std::weak_ptr<Owner> owner;
    Handler handler;

    void operator()(const T& message, const MessageHeader& header) {
      // The lock keeps the owner alive for the call, whichever thread drops
      // the last other reference meanwhile.
      if (const std::shared_ptr<Owner> alive = owner.lock()) {
        if constexpr (std::is_invocable_v<Handler&, Owner&, const T&, const MessageHeader&>) {
          std::invoke(handler, *alive, message, header);
        } else {
          std::invoke(handler, *alive, message);
        }
      }
    }
  };

  Bus* bus_;
  SubscriptionHandle handles_[kMaxSubscriptions];
  std::size_t count_ = 0;
};

}  // namespace sluice
