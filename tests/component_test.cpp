#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/all.hpp"
#include "test_support.hpp"

namespace sluice_test {
namespace component_test {
namespace {

using Bus = sluice::MpscBus<BasicPayload, 64>;

// An object that keeps its subscriptions in a Component member.
class Thermostat {
 public:
  explicit Thermostat(Bus& bus, std::vector<float>* seen) : seen_(seen), subscriptions_(bus) {
    EXPECT_TRUE(subscriptions_.Subscribe<SensorData>([this](const SensorData& d) { Record(d); }));
  }
  std::size_t Subscriptions() const { return subscriptions_.SubscriptionCount(); }

 private:
  void Record(const SensorData& d) { seen_->push_back(d.temperature); }
  std::vector<float>* seen_;
  sluice::Component<Bus> subscriptions_;
};

TEST(ComponentTest, DestructionRemovesItsSubscriptions) {
  Bus bus;
  std::vector<float> seen;
  {
    Thermostat thermostat(bus, &seen);
    EXPECT_EQ(thermostat.Subscriptions(), 1u);
    EXPECT_EQ(bus.SubscriberCount<SensorData>(), 1u);
    ASSERT_TRUE(bus.Publish(SensorData{21.5f}));
    EXPECT_EQ(bus.ProcessBatch(), 1u);
  }
  EXPECT_EQ(bus.SubscriberCount<SensorData>(), 0u);
  ASSERT_TRUE(bus.Publish(SensorData{30.0f}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(seen, std::vector<float>{21.5f});
}

TEST(ComponentTest, RefusesPastItsCapacityAndUnsubscribesAll) {
  Bus bus;
  sluice::Component<Bus, 2> component(bus);
  int calls = 0;
  EXPECT_TRUE(component.Subscribe<MotorCmd>([&](const MotorCmd&) { ++calls; }));
  EXPECT_TRUE(component.Subscribe<MotorCmd>([&](const MotorCmd&) { ++calls; }));
  EXPECT_FALSE(component.Subscribe<MotorCmd>([&](const MotorCmd&) { ++calls; }));
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 2u);
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  bus.ProcessBatch();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(component.UnsubscribeAll(), 2u);
  EXPECT_EQ(component.SubscriptionCount(), 0u);
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

TEST(ComponentTest, AFullBusTableIsReportedAndNothingIsHeld) {
  Bus bus;
  std::vector<sluice::SubscriptionHandle> others;
  for (std::size_t i = 0; i < sluice::DefaultBusTraits::kMaxSubscribersPerType; ++i) {
    others.push_back(bus.Subscribe<MotorCmd>([](const MotorCmd&) {}));
  }
  sluice::Component<Bus> component(bus);
  EXPECT_FALSE(component.Subscribe<MotorCmd>([](const MotorCmd&) {}));
  EXPECT_EQ(component.SubscriptionCount(), 0u);
}

class SharedDisplay : public std::enable_shared_from_this<SharedDisplay> {
 public:
  void Show(const MotorCmd& c) { shown.push_back(c.speed); }
  void ShowWithHeader(const MotorCmd& c, const sluice::MessageHeader& h) {
    shown.push_back(c.speed * 100 + static_cast<int>(h.sender_id));
  }
  std::vector<int> shown;
};

TEST(ComponentTest, WeakSubscriptionsCallOnlyWhileTheOwnerLives) {
  Bus bus;
  sluice::Component<Bus> component(bus);
  auto display = std::make_shared<SharedDisplay>();
  EXPECT_TRUE(component.SubscribeWeak<MotorCmd>(display->weak_from_this(), &SharedDisplay::Show));
  EXPECT_TRUE(component.SubscribeWeak<MotorCmd>(std::weak_ptr<SharedDisplay>(display),
                                                &SharedDisplay::ShowWithHeader));
  ASSERT_TRUE(bus.Publish(MotorCmd{7}, 3));
  bus.ProcessBatch();
  EXPECT_EQ(display->shown, (std::vector<int>{7, 703}));
  std::weak_ptr<SharedDisplay> watcher = display;
  display.reset();
  EXPECT_TRUE(watcher.expired());
  ASSERT_TRUE(bus.Publish(MotorCmd{8}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);  // dispatched to nobody alive, no crash
  // Found dead, both subscriptions retired themselves.
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
  EXPECT_EQ(component.SubscriptionCount(), 0u);
  EXPECT_EQ(component.UnsubscribeAll(), 0u);
}

// Counts the bytes a std::allocate_shared block holds, to see it released.
template <typename T>
struct CountingAllocator {
  using value_type = T;
  explicit CountingAllocator(int* live) : live(live) {}
  template <typename U>
  CountingAllocator(const CountingAllocator<U>& other) : live(other.live) {}  // NOLINT
  T* allocate(std::size_t n) {
    ++*live;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    --*live;
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const CountingAllocator<U>& other) const {
    return live == other.live;
  }
  template <typename U>
  bool operator!=(const CountingAllocator<U>& other) const {
    return live != other.live;
  }
  int* live;
};

// One long-lived component serving many short-lived owners: each dead
// owner's subscription is retired when a message finds it dead, so neither
// the component nor the bus's table fills, and the owner's memory is freed.
TEST(ComponentTest, WeakSubscriptionsOfDeadOwnersRetire) {
  Bus bus;
  sluice::Component<Bus, 4> component(bus);
  int blocks = 0;
  int calls = 0;
  for (int i = 0; i < 40; ++i) {
    auto display = std::allocate_shared<SharedDisplay>(CountingAllocator<SharedDisplay>(&blocks));
    ASSERT_TRUE(component.SubscribeWeak<MotorCmd>(std::weak_ptr<SharedDisplay>(display),
                                                  [&calls](SharedDisplay& d, const MotorCmd& c) {
                                                    ++calls;
                                                    d.Show(c);
                                                  }))
        << "owner " << i;
    ASSERT_TRUE(bus.Publish(MotorCmd{i}));
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(display->shown, std::vector<int>{i});
    display.reset();
    EXPECT_EQ(blocks, 1) << "the subscription holds the block until it is found dead";
    ASSERT_TRUE(bus.Publish(MotorCmd{-1}));
    EXPECT_EQ(bus.ProcessBatch(), 1u);
    EXPECT_EQ(blocks, 0) << "owner " << i << ": memory kept after its subscription retired";
    EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
    EXPECT_EQ(component.SubscriptionCount(), 0u);
  }
  EXPECT_EQ(calls, 40);
}

// A retired weak subscription's place is reused, and later subscriptions in
// the same component are unaffected by it.
TEST(ComponentTest, RetiredPlacesAreReusedAlongsideLiveOnes) {
  Bus bus;
  sluice::Component<Bus, 2> component(bus);
  int plain_calls = 0;
  ASSERT_TRUE(component.Subscribe<MotorCmd>([&](const MotorCmd&) { ++plain_calls; }));
  auto first = std::make_shared<SharedDisplay>();
  ASSERT_TRUE(
      component.SubscribeWeak<MotorCmd>(std::weak_ptr<SharedDisplay>(first), &SharedDisplay::Show));
  auto second = std::make_shared<SharedDisplay>();
  EXPECT_FALSE(component.SubscribeWeak<MotorCmd>(std::weak_ptr<SharedDisplay>(second),
                                                 &SharedDisplay::Show));  // full
  first.reset();
  ASSERT_TRUE(bus.Publish(MotorCmd{1}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(component.SubscriptionCount(), 1u);
  ASSERT_TRUE(component.SubscribeWeak<MotorCmd>(std::weak_ptr<SharedDisplay>(second),
                                                &SharedDisplay::Show));
  ASSERT_TRUE(bus.Publish(MotorCmd{2}));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(second->shown, std::vector<int>{2});
  EXPECT_EQ(plain_calls, 2);
  EXPECT_EQ(component.SubscriptionCount(), 2u);
  EXPECT_EQ(component.UnsubscribeAll(), 2u);
  EXPECT_EQ(bus.SubscriberCount<MotorCmd>(), 0u);
}

struct Controller : sluice::StaticComponent<Controller, BasicPayload> {
  void Handle(const SensorData& d) { temperatures.push_back(d.temperature); }
  void Handle(const MotorCmd& c, const sluice::MessageHeader& h) {
    speeds.push_back(c.speed);
    senders.push_back(h.sender_id);
  }
  std::vector<float> temperatures;
  std::vector<int> speeds;
  std::vector<std::uint32_t> senders;
};

TEST(StaticComponentTest, HandlersAreFoundAtCompileTimeAndOthersIgnored) {
  static_assert(Controller::Handles<SensorData>());
  static_assert(Controller::Handles<MotorCmd>());
  static_assert(!Controller::Handles<Sequenced>());
  Bus bus;
  Controller controller;
  ASSERT_TRUE(bus.Publish(SensorData{1.5f}, 1));
  ASSERT_TRUE(bus.Publish(Sequenced{0, 9}, 2));  // no handler: ignored
  ASSERT_TRUE(bus.Publish(MotorCmd{40}, 3));
  EXPECT_EQ(bus.ProcessBatchWith(controller.MakeVisitor()), 3u);
  EXPECT_EQ(controller.temperatures, std::vector<float>{1.5f});
  EXPECT_EQ(controller.speeds, std::vector<int>{40});
  EXPECT_EQ(controller.senders, std::vector<std::uint32_t>{3});
  sluice::MessageHeader header;
  EXPECT_TRUE(controller.Dispatch(MotorCmd{1}, header));
  EXPECT_FALSE(controller.Dispatch(Sequenced{}, header));
}

// Handler choice follows a direct call: Handle(message) when that call is
// valid, else Handle(message, header).
struct BaseReading {
  int value = 0;
};
struct DerivedReading : BaseReading {};
struct Unrelated {
  int value = 0;
};
using RoutingPayload = std::variant<DerivedReading, Unrelated>;

struct ExactBeatsBaseWithHeader
    : sluice::StaticComponent<ExactBeatsBaseWithHeader, RoutingPayload> {
  void Handle(const BaseReading&, const sluice::MessageHeader&) { calls.push_back("base+header"); }
  void Handle(const DerivedReading&) { calls.push_back("derived"); }
  std::vector<std::string> calls;
};

struct ExactBeatsTemplateWithHeader
    : sluice::StaticComponent<ExactBeatsTemplateWithHeader, RoutingPayload> {
  template <typename T>
  void Handle(const T&, const sluice::MessageHeader&) {
    calls.push_back("template+header");
  }
  void Handle(const DerivedReading&) { calls.push_back("derived"); }
  std::vector<std::string> calls;
};

// The documented rule, both ways round: a valid one-argument call wins.
struct OneArgumentTemplateWins : sluice::StaticComponent<OneArgumentTemplateWins, RoutingPayload> {
  template <typename T>
  void Handle(const T&) {
    calls.push_back("template");
  }
  void Handle(const DerivedReading&, const sluice::MessageHeader&) {
    calls.push_back("derived+header");
  }
  std::vector<std::string> calls;
};

TEST(StaticComponentTest, OverloadResolutionIsThatOfADirectCall) {
  const sluice::MessageHeader header;
  ExactBeatsBaseWithHeader exact;
  EXPECT_TRUE(exact.Dispatch(DerivedReading{}, header));
  EXPECT_FALSE(exact.Dispatch(Unrelated{}, header));
  EXPECT_EQ(exact.calls, std::vector<std::string>{"derived"});

  ExactBeatsTemplateWithHeader fallback;
  sluice::SpscBus<RoutingPayload, 8> bus;
  ASSERT_TRUE(bus.Publish(DerivedReading{}));
  ASSERT_TRUE(bus.Publish(Unrelated{}));
  EXPECT_EQ(bus.ProcessBatchWith(fallback.MakeVisitor()), 2u);
  EXPECT_EQ(fallback.calls, (std::vector<std::string>{"derived", "template+header"}));

  OneArgumentTemplateWins one;
  EXPECT_TRUE(one.Dispatch(DerivedReading{}, header));
  EXPECT_EQ(one.calls, std::vector<std::string>{"template"});
  static_assert(OneArgumentTemplateWins::Handles<Unrelated>());
}

TEST(FixedStringTest, RefusesWhatDoesNotFitAndTruncatesOnlyWhenAsked) {
  sluice::FixedString<8> name = "motor";
  EXPECT_EQ(name, "motor");
  EXPECT_EQ(name.size(), 5u);
  EXPECT_STREQ(name.c_str(), "motor");
  EXPECT_FALSE(name.try_append("-left"));  // 10 bytes: refused, unchanged
  EXPECT_EQ(name, "motor");
  EXPECT_TRUE(name.try_append("-L1"));
  EXPECT_EQ(name, "motor-L1");
  EXPECT_FALSE(name.try_assign("123456789"));
  EXPECT_EQ(name, "motor-L1");
  EXPECT_EQ(name.assign_truncated("123456789"), 1u);
  EXPECT_EQ(name, "12345678");
  EXPECT_STREQ(name.c_str(), "12345678");
  name.clear();
  EXPECT_TRUE(name.empty());
  EXPECT_EQ(name.append_truncated("abc"), 0u);
  EXPECT_EQ(name.append_truncated("defghij"), 2u);
  EXPECT_EQ(name, "abcdefgh");
  static_assert(sizeof(sluice::FixedString<8>) == 10);
}

TEST(FixedStringTest, TruncationNeverSplitsAUtf8Sequence) {
  sluice::FixedString<4> text;
  // "aé€": a (1 byte), é (2 bytes), € (3 bytes).
  EXPECT_EQ(text.assign_truncated("a\xC3\xA9\xE2\x82\xAC"), 3u);
  EXPECT_EQ(text, "a\xC3\xA9");
  EXPECT_EQ(text.assign_truncated("\xE2\x82\xAC\xE2\x82\xAC"), 3u);
  EXPECT_EQ(text, "\xE2\x82\xAC");
}

// Only a sequence that is well-formed across the cut is kept whole; stray
// continuation bytes and broken sequences are bytes like any other.
TEST(FixedStringTest, TruncationKeepsWhatFitsOfInvalidUtf8) {
  sluice::FixedString<7> reading;
  EXPECT_EQ(reading.assign_truncated("temp 25\xB0"
                                     "C"),
            2u);  // a Latin-1 degree sign
  EXPECT_EQ(reading, "temp 25");
  sluice::FixedString<8> stray;
  const std::string continuations(20, '\x80');
  EXPECT_EQ(stray.assign_truncated(continuations), 12u);
  EXPECT_EQ(stray.view(), continuations.substr(0, 8));
  // A lead byte whose sequence is broken by the next byte: nothing to keep whole.
  EXPECT_EQ(reading.assign_truncated("abcdef\xC3X"), 1u);
  EXPECT_EQ(reading, "abcdef\xC3");
  // A well-formed sequence is still never split, appended or assigned.
  EXPECT_EQ(reading.assign_truncated("abcdef\xC3\xA9"), 2u);
  EXPECT_EQ(reading, "abcdef");
  EXPECT_EQ(reading.append_truncated("\xE2\x82\xAC"), 3u);
  EXPECT_EQ(reading, "abcdef");
  EXPECT_EQ(reading.append_truncated("\x82\xAC"), 1u);  // stray: what fits is kept
  EXPECT_EQ(reading, "abcdef\x82");
}

// Every cut point of well-formed text: the kept part ends on a character
// boundary and is the longest such prefix that fits.
TEST(FixedStringTest, TruncationAtEverySplitPointOfWellFormedText) {
  const std::string_view text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";  // a é € 😀 z
  const std::size_t boundaries[] = {0, 1, 3, 6, 10, 11};
  for (std::size_t used = 0; used <= 11; ++used) {
    sluice::FixedString<11> out;
    ASSERT_TRUE(out.try_assign(std::string(used, '.')));
    const std::size_t room = 11 - used;
    std::size_t expected = 0;
    for (std::size_t boundary : boundaries) {
      if (boundary <= room) expected = boundary;
    }
    EXPECT_EQ(out.append_truncated(text), text.size() - expected) << "room " << room;
    EXPECT_EQ(out.view().substr(used), text.substr(0, expected)) << "room " << room;
  }
}

TEST(FixedStringTest, ALiteralMayStandOnEitherSideOfAComparison) {
  const sluice::FixedString<5> name = "motor";
  EXPECT_TRUE("motor" == name);
  EXPECT_FALSE("motor" != name);
  EXPECT_FALSE("a literal longer than five" == name);  // compiles, and is false
  EXPECT_TRUE("a literal longer than five" != name);
  EXPECT_FALSE(name == "a literal longer than five");
  const sluice::FixedString<16> wider = "motor";
  EXPECT_TRUE(name == wider);
  EXPECT_TRUE(wider == name);
  EXPECT_FALSE(wider != name);
  EXPECT_TRUE(name == std::string("motor"));
  EXPECT_TRUE(std::string_view("motor") == name);
}

// A char array that is not a literal: a buffer holding a shorter text. The
// implicit constructor reads a const array up to its first NUL (a mutable
// buffer does not compile: compile_fail case 20).
TEST(FixedStringTest, AConstCharArrayIsReadUpToItsFirstNul) {
  static const char kBuffer[16] = "hi";
  const sluice::FixedString<15> text = kBuffer;
  EXPECT_EQ(text.size(), 2u);
  EXPECT_EQ(text, "hi");
  constexpr sluice::FixedString<8> at_compile_time = "motor";
  static_assert(at_compile_time.size() == 5);
}

TEST(FixedVectorTest, RefusesWhenFullAndManagesLifetimes) {
  LifetimeCounter::ResetCounts();
  {
    sluice::FixedVector<LifetimeCounter, 3> items;
    EXPECT_TRUE(items.try_push_back(LifetimeCounter(1)));
    EXPECT_NE(items.try_emplace_back(2), nullptr);
    EXPECT_TRUE(items.try_push_back(LifetimeCounter(3)));
    EXPECT_TRUE(items.full());
    EXPECT_FALSE(items.try_push_back(LifetimeCounter(4)));
    EXPECT_EQ(items.try_emplace_back(5), nullptr);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0].value + items[1].value + items[2].value, 6);
    EXPECT_EQ(LifetimeCounter::Live(), 3);

    sluice::FixedVector<LifetimeCounter, 3> copy = items;
    EXPECT_EQ(LifetimeCounter::Live(), 6);
    sluice::FixedVector<LifetimeCounter, 3> moved = std::move(copy);
    EXPECT_EQ(moved[2].value, 3);
    moved.pop_back();
    EXPECT_EQ(moved.size(), 2u);
    items.clear();
    EXPECT_TRUE(items.empty());
  }
  EXPECT_EQ(LifetimeCounter::Live(), 0);
}

TEST(FixedVectorTest, AMovedFromVectorIsEmpty) {
  LifetimeCounter::ResetCounts();
  {
    sluice::FixedVector<LifetimeCounter, 3> source;
    ASSERT_TRUE(source.try_push_back(LifetimeCounter(1)));
    ASSERT_TRUE(source.try_push_back(LifetimeCounter(2)));
    sluice::FixedVector<LifetimeCounter, 3> constructed = std::move(source);
    EXPECT_TRUE(source.empty());  // NOLINT(bugprone-use-after-move): the point of the test
    EXPECT_EQ(constructed.size(), 2u);
    EXPECT_EQ(LifetimeCounter::Live(), 2);

    sluice::FixedVector<LifetimeCounter, 3> assigned;
    ASSERT_TRUE(assigned.try_push_back(LifetimeCounter(9)));
    assigned = std::move(constructed);
    EXPECT_TRUE(constructed.empty());  // NOLINT(bugprone-use-after-move)
    ASSERT_EQ(assigned.size(), 2u);
    EXPECT_EQ(assigned[0].value + assigned[1].value, 3);
    EXPECT_EQ(LifetimeCounter::Live(), 2);
    ASSERT_TRUE(source.try_push_back(LifetimeCounter(4)));  // reusable
    EXPECT_EQ(source.size(), 1u);
  }
  EXPECT_EQ(LifetimeCounter::Live(), 0);
}

TEST(FixedContainersTest, TravelThroughTheBusInsideAPayload) {
  struct Route {
    sluice::FixedString<16> name;
    sluice::FixedVector<int, 4> waypoints;
  };
  sluice::SpscBus<std::variant<Route>, 8> bus;
  Route route;
  route.name = "depot";
  ASSERT_TRUE(route.waypoints.try_push_back(4));
  ASSERT_TRUE(route.waypoints.try_push_back(2));
  ASSERT_TRUE(bus.Publish(route));
  std::string received;
  int sum = 0;
  ASSERT_TRUE(bus.Subscribe<Route>([&](const Route& r) {
                   received = std::string(r.name.view());
                   for (int w : r.waypoints) sum += w;
                 })
                  .IsValid());
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(received, "depot");
  EXPECT_EQ(sum, 6);
}

}  // namespace
}  // namespace component_test
}  // namespace sluice_test
