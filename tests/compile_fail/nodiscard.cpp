// Each CASE discards a result that says whether the call worked; built with
// -Werror=unused-result it must not compile. CASE=0 uses every result and
// compiles. CMake checks the diagnostic.
#include <chrono>
#include <memory>
#include <variant>

#include "sluice/all.hpp"

struct A {
  int value;
};
struct B {
  int value;
};
using Payload = std::variant<A, B>;
using Bus = sluice::MpscBus<Payload, 16>;

void OnError(const sluice::BusError&, void*) {}

int main() {
  Bus bus;
  sluice::Component<Bus> component(bus);
  auto owner = std::make_shared<B>();
  (void)owner;
#if CASE == 1
  bus.Publish(A{1});
#elif CASE == 2
  bus.PublishWithPriority(A{1}, 0, sluice::MessagePriority::HIGH);
#elif CASE == 3
  bus.PublishFast(A{1}, 0, std::chrono::nanoseconds(0));
#elif CASE == 4
  bus.Subscribe<A>([](const A&) {});
#elif CASE == 5
  bus.SetAdmissionThresholds(60, 80, 99);
#elif CASE == 6
  bus.SetErrorCallback(&OnError);
#elif CASE == 7
  bus.Unsubscribe(sluice::SubscriptionHandle{});
#elif CASE == 8
  component.Subscribe<A>([](const A&) {});
#elif CASE == 9
  component.SubscribeWeak<A>(std::weak_ptr<B>(owner), [](B&, const A&) {});
#elif CASE == 10
  sluice::FixedVector<int, 2> items;
  items.try_push_back(1);
#elif CASE == 11
  sluice::FixedString<8> text;
  text.try_append("x");
#elif CASE == 12
  sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits> sleeping;
  sleeping.PublishBlocking(A{1}, 0, sluice::MessagePriority::HIGH, std::chrono::seconds(0));
#else
  // The same calls with their results used.
  bool ok = bus.Publish(A{1}).IsAdmitted();
  ok = bus.PublishWithPriority(A{1}, 0, sluice::MessagePriority::HIGH) && ok;
  ok = bus.PublishFast(A{1}, 0, std::chrono::nanoseconds(0)) && ok;
  const sluice::SubscriptionHandle handle = bus.Subscribe<A>([](const A&) {});
  ok = bus.SetAdmissionThresholds(60, 80, 99) && ok;
  ok = bus.SetErrorCallback(&OnError) && ok;
  ok = bus.Unsubscribe(handle) && ok;
  ok = component.Subscribe<A>([](const A&) {}) && ok;
  ok = component.SubscribeWeak<A>(std::weak_ptr<B>(owner), [](B&, const A&) {}) && ok;
  sluice::FixedVector<int, 2> items;
  ok = items.try_push_back(1) && ok;
  sluice::FixedString<8> text;
  ok = text.try_append("x") && ok;
  sluice::MpscBus<Payload, 16, sluice::SleepingConsumerTraits> sleeping;
  ok = sleeping.PublishBlocking(A{1}, 0, sluice::MessagePriority::HIGH, std::chrono::seconds(0)) ==
           sluice::PublishOutcome::kAdmitted &&
       ok;
  return ok ? 0 : 1;
#endif
  return 0;
}
