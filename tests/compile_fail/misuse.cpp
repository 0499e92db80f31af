// Each CASE is a misuse that must not compile; CMake checks the diagnostic.
#include <array>
#include <chrono>
#include <memory>
#include <variant>
#include <vector>

#include "sluice/all.hpp"

struct A {
  int value;
};
struct B {
  int value;
};
using Payload = std::variant<A, B>;

#if CASE == 41
// At namespace scope: a local class may not have static data members.
struct TriviallyCopyableTraits : sluice::DefaultBusTraits {
  static constexpr bool kRequireTriviallyCopyablePayloads = true;
};
#endif

#if CASE == 65
// At namespace scope: a local class may not have static data members.
struct RunsAndDispatched : sluice::NoObserver {
  static constexpr bool kTakesRuns = true;
};
struct RunsAndDispatchedTraits : sluice::DefaultBusTraits {
  using Observer = RunsAndDispatched;  // NoObserver's OnDispatched, inherited
};
#endif
#if CASE == 66
#include <string>

#include "sluice/record/flight_recorder.hpp"
#endif
#if CASE == 68
#include <string>
#include <tuple>

#include "sluice/nats/codec.hpp"
// At namespace scope: specializations. B's names are wrong ("2nd" is not a
// field name); A, which holds a B, names none.
struct Holder {
  B inner;
};
template <>
struct sluice::nats::Fields<B> {
  static constexpr auto kMembers = std::make_tuple(&B::value);
  static constexpr const char* kNames[] = {"2nd"};
};
template <>
struct sluice::nats::Fields<Holder> {
  static constexpr auto kMembers = std::make_tuple(&Holder::inner);
};
#endif
#if CASE == 67
#include <string>
#include <tuple>

#include "sluice/record/recorder.hpp"
// At namespace scope: a specialization. Two members, one name.
template <>
struct sluice::nats::Fields<A> {
  static constexpr auto kMembers = std::make_tuple(&A::value, &A::value);
  static constexpr const char* kNames[] = {"value"};
};
#endif

int main() {
#if CASE == 1  // subscribing to a type that is not in the variant
  sluice::MpscBus<Payload, 16> bus;
  bus.Subscribe<double>([](const double&) {});
#elif CASE == 2   // publishing a type that is not in the variant
  sluice::MpscBus<Payload, 16> bus;
  bus.Publish(3.0);
#elif CASE == 3   // a capacity that is not a power of two
  sluice::MpscBus<Payload, 100> bus;
  bus.Publish(A{1});
#elif CASE == 4   // a callable larger than the inline storage
  sluice::MpscBus<Payload, 16> bus;
  std::array<char, 256> big{};
  bus.Subscribe<A>([big](const A&) { (void)big; });
#elif CASE == 5   // a payload that is not a std::variant
  sluice::MpscBus<int, 16> bus;
#elif CASE == 6   // a callback with none of the accepted shapes
  sluice::MpscBus<Payload, 16> bus;
  bus.Subscribe<A>([](int, int, int) {});
#elif CASE == 7   // a type that appears twice in the variant
  sluice::MpscBus<std::variant<A, A>, 16> bus;
  bus.Publish(A{1});
#elif CASE == 8   // a visitor that handles only some alternatives
  sluice::MpscBus<Payload, 16> bus;
  bus.ProcessBatchWith([](const A&) {});
#elif CASE == 9   // a StaticComponent without a handler for any alternative
  struct Deaf : sluice::StaticComponent<Deaf, Payload> {
    void Handle(const double&) {}
  };
  Deaf deaf;
  (void)deaf.MakeVisitor();
#elif CASE == 10  // a string literal longer than its FixedString
  sluice::FixedString<4> name = "too long";
  (void)name;
#elif CASE == 11  // a weak subscription whose handler cannot take the message
  sluice::MpscBus<Payload, 16> bus;
  sluice::Component<sluice::MpscBus<Payload, 16> > component(bus);
  std::shared_ptr<B> owner = std::make_shared<B>();
  component.SubscribeWeak<A>(std::weak_ptr<B>(owner), [](B&, const B&) {});
#elif CASE == 12  // a capacity whose batch count would not fit in 32 bits
  sluice::MpscBus<Payload, std::size_t{1} << 32> bus;
  bus.ProcessBatch();
#elif CASE == 20  // a mutable char buffer taken for a string literal
  char buffer[16] = "hi";
  sluice::FixedString<16> text = buffer;
  (void)text;
#elif CASE == 21  // a StaticComponent whose Handle call is ambiguous for a type
  struct Left {};
  struct Right {};
  struct Both : Left, Right {};
  struct Torn : sluice::StaticComponent<Torn, std::variant<Both> > {
    void Handle(const Left&) {}
    void Handle(const Right&) {}
  };
  Torn torn;
  sluice::MessageHeader header;
  torn.Dispatch(Both{}, header);
#elif CASE == 22  // a StaticComponent whose best Handle is not public
  class Hidden : public sluice::StaticComponent<Hidden, Payload> {
   public:
    void Handle(const A&) {}

   protected:
    void Handle(const B&) {}
  };
  Hidden hidden;
  (void)hidden.MakeVisitor();
#elif CASE == 23  // a final StaticComponent
  struct Sealed final : sluice::StaticComponent<Sealed, Payload> {
    void Handle(const A&) {}
  };
  Sealed sealed;
  (void)sealed.MakeVisitor();
#elif CASE == 24  // a StaticComponent with a private Handle
  class Secret : public sluice::StaticComponent<Secret, Payload> {
   public:
    void Handle(const A&) {}

   private:
    void Handle(const B&) {}
  };
  Secret secret;
  (void)secret.MakeVisitor();
#elif CASE == 26  // Emplace of a type not in the variant
  sluice::MpscBus<Payload, 8> bus;
  (void)bus.Emplace<double>(0, sluice::MessagePriority::HIGH, 1.0);
#elif CASE == 27  // PublishBatch of elements whose copy may throw
  struct Throwing {
    Throwing() = default;
    Throwing(const Throwing&) {}
    Throwing(Throwing&&) noexcept {}
  };
  sluice::MpscBus<std::variant<Throwing>, 8> bus;
  std::array<Throwing, 2> batch{};
  (void)bus.PublishBatch(batch.begin(), batch.end(), 0);
#elif CASE == 25  // a bus without a parker cannot sleep
  sluice::MpscBus<Payload, 8> bus;
  (void)bus.ProcessBatchWait(std::chrono::milliseconds(1));
#elif CASE == 28  // nor can its producers wait for room
  sluice::MpscBus<Payload, 8> bus;
  (void)bus.PublishBlocking(A{1}, 0, sluice::MessagePriority::HIGH, std::chrono::seconds(1));
#elif CASE == 29  // a bus without lanes has no registered producers
  sluice::MpscBus<Payload, 8> bus;
  auto producer = bus.RegisterProducer();
#elif CASE == 30  // a lane capacity that is not a power of two
  struct Traits : sluice::DefaultBusTraits {
    using Lanes = sluice::ProducerLanes<2, 100>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 31  // lanes with a starvation limit
  struct Traits : sluice::DefaultBusTraits {
    using Delivery = sluice::PriorityDelivery<1, 4>;
    using Lanes = sluice::ProducerLanes<2>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 32  // a lane publish of a type that is not in the variant
  struct Traits : sluice::DefaultBusTraits {
    using Lanes = sluice::ProducerLanes<2>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  auto producer = bus.RegisterProducer();
  (void)producer.Publish(1.0);
#elif CASE == 33  // a Producer of a bus without lanes
  sluice::MpscBus<Payload, 8>::Producer producer;
  (void)producer.Publish(A{1});
#elif CASE == 41  // an allocating payload on a bus that requires trivially copyable ones
  sluice::MpscBus<std::variant<A, std::vector<int> >, 8, TriviallyCopyableTraits> bus;
  (void)bus.Publish(A{1});
#elif CASE == 34  // a loan of a type the variant does not hold as a Loan
  sluice::MpscBus<Payload, 8> bus;
  sluice::LoanPool<B, 2> pool;
  (void)bus.PublishLoan(pool.Acquire(), 0, sluice::MessagePriority::LOW);
#elif CASE == 35  // a 0.2 knob: the delivery order
  struct Traits : sluice::DefaultBusTraits {
    static constexpr sluice::DeliveryOrder kDeliveryOrder = sluice::DeliveryOrder::kPriority;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 36  // a 0.2 knob: the parker
  struct Traits : sluice::DefaultBusTraits {
    using Parker = sluice::NoParker;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 37  // a 0.2 knob: the lanes
  struct Traits : sluice::DefaultBusTraits {
    static constexpr std::size_t kMaxProducerLanes = 2;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 38  // a 0.2 knob: the latency histograms
  struct Traits : sluice::DefaultBusTraits {
    static constexpr bool kLatencyHistograms = false;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 39  // a 0.2 knob: the backpressure scale
  struct Traits : sluice::DefaultBusTraits {
    static constexpr int kBackpressureLevels = 1;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 42  // a 0.2 knob written as an enumerator
  struct Traits : sluice::DefaultBusTraits {
    enum { kLaneCapacity = 64 };
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 43  // PublishBlocking on a Producer: a lane has no room signal
  struct Traits : sluice::DefaultBusTraits {
    using Lanes = sluice::ProducerLanes<2>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  auto producer = bus.RegisterProducer();
  (void)producer.PublishBlocking(A{1}, 0, sluice::MessagePriority::HIGH, std::chrono::seconds(1));
#elif CASE == 44  // a 0.2 knob alone: the check interval
  struct Traits : sluice::PriorityOrderTraits {
    static constexpr std::uint32_t kPriorityCheckInterval = 4;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 45  // a 0.2 knob alone: the polls before parking
  struct Traits : sluice::DefaultBusTraits {
    static constexpr std::uint32_t kPollsBeforePark = 0;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 46  // a 0.2 knob alone: the heavy fence
  struct Traits : sluice::DefaultBusTraits {
    using HeavyFence = sluice::SingleCoreHeavyFence;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 47  // a 0.2 knob alone: the lane burst
  struct Traits : sluice::DefaultBusTraits {
    static constexpr std::uint32_t kLaneBurst = 4;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 48  // a 0.2 knob alone: the latency clock interval
  struct Traits : sluice::DefaultBusTraits {
    static constexpr std::uint32_t kLatencyClockInterval = 1;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 49  // PublishFast with an integer timestamp (microseconds before 0.4)
  sluice::MpscBus<Payload, 8> bus;
  const std::uint64_t timestamp_us = 42;
  (void)bus.PublishFast(A{1}, 0, timestamp_us);
#elif CASE == 50  // a bus clock with neither NowNanos nor NowMicros
  struct Traits : sluice::DefaultBusTraits {
    struct Clock {
      static std::uint64_t Now() noexcept { return 1; }
    };
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.Publish(A{1});
#elif CASE == 51  // the 0.3 header field
  sluice::MessageHeader header;
  (void)header.timestamp_us;
#elif CASE == 52  // a bus without a parker cannot join a WaitSet
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::MpscBus<Payload, 8> bus(set);
  (void)bus.QueueDepth();
#elif CASE == 53  // nor can a bus whose traits name another parker
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitInSet<sluice::FutexParker>;
  };
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::MpscBus<Payload, 8, Traits> bus(set);
  (void)bus.QueueDepth();
#elif CASE == 54  // nor may the set wait on one
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitWith<sluice::FutexParker>;
  };
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)set.Wait(std::chrono::seconds(1), bus);
#elif CASE == 55  // a WaitSet without a parker
  sluice::WaitSet<sluice::NoParker> set;
  (void)set.Waiters();
#elif CASE == 57  // a WaitSet waiting on a bus that is in no set (it would never wake it)
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitWith<sluice::ConditionVariableParker>;
  };
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)set.ProcessBatchWait(std::chrono::seconds(1), 8, bus);
#elif CASE == 58  // a bus of a WaitSet built without its set
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitInSet<sluice::ConditionVariableParker>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 60  // ... nor with the test constructor, which would leave it in no set
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitInSet<sluice::ConditionVariableParker>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus(sluice::detail::FirstPosition{0});
  (void)bus.QueueDepth();
#elif CASE == 59  // a bus with WaitWith joining a set
  struct Traits : sluice::DefaultBusTraits {
    using Waiting = sluice::WaitWith<sluice::ConditionVariableParker>;
  };
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::MpscBus<Payload, 8, Traits> bus(set);
  (void)bus.QueueDepth();
#elif CASE == 56  // storing a publish's result in a bool
  sluice::MpscBus<Payload, 8> bus;
  bool ok = bus.Publish(A{1});
  (void)ok;
#elif CASE == 61  // switching the mode of a bus whose traits fix it
  struct Traits : sluice::DefaultBusTraits {
    using Mode = sluice::FixedMode<sluice::PerformanceMode::BARE_METAL>;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  bus.SetPerformanceMode(sluice::PerformanceMode::FULL_FEATURED);
#elif CASE == 62  // a Mode that is neither RunTimeMode nor a FixedMode
  struct Traits : sluice::DefaultBusTraits {
    using Mode = sluice::PerformanceMode;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 63  // an Observation that is neither FullObservation nor NoObservation
  struct Traits : sluice::DefaultBusTraits {
    using Observation = sluice::NoObserver;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#elif CASE == 64  // a clock's StampConverter whose Nanos may throw
  struct Traits : sluice::DefaultBusTraits {
    struct Clock {
      static std::uint64_t NowNanos() noexcept { return 1; }
      static std::uint64_t Stamp() noexcept { return 1; }
      static std::uint64_t StampNanos(std::uint64_t stamp) noexcept { return stamp; }
      struct StampConverter {
        std::uint64_t Nanos(std::uint64_t stamp) { return stamp; }
      };
    };
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.ProcessBatch();
#elif CASE == 65  // an observer that takes runs and has OnDispatched
  sluice::MpscBus<Payload, 8, RunsAndDispatchedTraits> bus;
  (void)bus.ProcessBatch();
#elif CASE == 66  // a flight recorder of a payload whose copy may allocate
  sluice::record::FlightRecorder<std::variant<A, std::string> > recorder({});
  (void)recorder.Capacity();
#elif CASE == 67  // field names for a recording that do not match the field list
  sluice::MpscBus<Payload, 8> bus;
  sluice::record::Recorder<sluice::MpscBus<Payload, 8> > recorder(bus, {});
  (void)recorder.Record<A>("/a", "A");
#elif CASE == 68  // a wrong field name inside a struct whose own fields have no names
  std::string bytes;
  (void)sluice::nats::WireCodec<Holder>::Encode(Holder{}, bytes);
#elif CASE == 69  // a callback whose parameter the subscribed type only converts to
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  (void)bus.Subscribe<int>([](bool) {});
#elif CASE == 70  // a visitor of one call operator that the other alternative converts to
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  (void)bus.ProcessBatchWith([](const int&) {});
#elif CASE == 71  // a weak handler whose message parameter T only converts to
  struct Owner {
    void OnDouble(const double&) {}
  };
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  sluice::Component<sluice::MpscBus<std::variant<int, double>, 16> > component(bus);
  auto owner = std::make_shared<Owner>();
  (void)component.SubscribeWeak<int>(std::weak_ptr<Owner>(owner), &Owner::OnDouble);
#elif CASE == 72  // the same through a volatile, ref-qualified call operator
  struct OnBool {
    void operator()(bool) const volatile& {}
  };
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  (void)bus.Subscribe<int>(OnBool{});
#elif CASE == 73  // the same through a C-style variadic lambda
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  (void)bus.Subscribe<int>([](bool, ...) {});
#elif CASE == 74  // a variadic visitor of one call operator
  sluice::MpscBus<std::variant<int, double>, 16> bus;
  (void)bus.ProcessBatchWith([](const int&, ...) {});
#elif CASE == 40  // a 0.2 knob: the starvation limit
  struct Traits : sluice::PriorityOrderTraits {
    static constexpr std::uint32_t kStarvationLimit = 4;
  };
  sluice::MpscBus<Payload, 8, Traits> bus;
  (void)bus.QueueDepth();
#endif
  return 0;
}
