// A bus clock that defers its conversion (Stamp() and StampNanos(), as
// CounterClock does): Publish stores the raw stamp and the consumer turns it
// into nanoseconds before anyone sees the message. Every reader of a header
// (callbacks, visitors, the observer, the latency histograms, a later mode)
// must see nanoseconds, on every kind of bus.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace deferred_stamp_test {
namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::PerformanceMode;

struct Reading {
  std::uint32_t seq;
};
struct Alarm {
  std::uint32_t code;
};
using Payload = std::variant<Reading, Alarm>;

// Ticks of 10 ns. A stamp is the tick count with the top bit set, which
// no nanosecond reading has; StampNanos counts its conversions.
struct TickClock {
  static constexpr std::uint64_t kTagged = std::uint64_t{1} << 63;
  static inline std::uint64_t ticks = 1000;
  static inline std::uint64_t conversions = 0;
  static std::uint64_t NowNanos() noexcept { return ticks * 10; }
  static std::uint64_t Stamp() noexcept { return kTagged | ticks; }
  static std::uint64_t StampNanos(std::uint64_t stamp) noexcept {
    ++conversions;
    return (stamp & ~kTagged) * 10;
  }
  static void Reset() {
    ticks = 1000;
    conversions = 0;
  }
};

// What the publishing side's observer saw.
std::vector<std::uint64_t>* admitted_stamps = nullptr;
struct StampObserver : sluice::NoObserver {
  void OnAdmitted(const MessageHeader& header) noexcept {
    if (admitted_stamps != nullptr) admitted_stamps->push_back(header.timestamp_ns);
  }
};

struct TickTraits : sluice::DefaultBusTraits {
  using Clock = TickClock;
};
struct ObservedTickTraits : TickTraits {
  using Observer = StampObserver;
};
struct OrderedTickTraits : sluice::PriorityOrderTraits {
  using Clock = TickClock;
};
struct LaneTickTraits : TickTraits {
  using Lanes = sluice::ProducerLanes<2, 64>;
};
struct FixedBareTickTraits : TickTraits {
  using Mode = sluice::FixedMode<PerformanceMode::BARE_METAL>;
};

// Each kind of bus, publishing through the bus or through a lane.
template <typename BusType>
struct Kind {
  using Bus = BusType;
  class Publisher {
   public:
    explicit Publisher(Bus& bus) : bus_(bus) {}
    template <typename Message>
    bool Publish(Message&& message) {
      return static_cast<bool>(bus_.Publish(std::forward<Message>(message)));
    }

   private:
    Bus& bus_;
  };
};
template <typename BusType>
struct LaneKind {
  using Bus = BusType;
  class Publisher {
   public:
    explicit Publisher(Bus& bus) : producer_(bus.RegisterProducer("lane")) {}
    template <typename Message>
    bool Publish(Message&& message) {
      return static_cast<bool>(producer_.Publish(std::forward<Message>(message)));
    }

   private:
    typename Bus::Producer producer_;
  };
};

template <typename K>
class DeferredStampTest : public ::testing::Test {
 protected:
  void SetUp() override { TickClock::Reset(); }
};
using Kinds = ::testing::Types<Kind<sluice::MpscBus<Payload, 64, TickTraits>>,
                               Kind<sluice::SpscBus<Payload, 64, TickTraits>>,
                               Kind<sluice::MpscBus<Payload, 64, OrderedTickTraits>>,
                               LaneKind<sluice::MpscBus<Payload, 64, LaneTickTraits>>>;
TYPED_TEST_SUITE(DeferredStampTest, Kinds, sluice_test::IndexNames);

// A run of one type (one subscriber: the consumer core's runs, which look
// ahead), then another type: every message's stamp, in nanoseconds. In
// NO_STATS no histogram reads the clock, so nothing else ends a run.
TYPED_TEST(DeferredStampTest, CallbacksSeeNanosecondsInRunsAndOneAtATime) {
  for (const PerformanceMode mode : {PerformanceMode::FULL_FEATURED, PerformanceMode::NO_STATS}) {
    SCOPED_TRACE(sluice::ToString(mode));
    TickClock::Reset();
    typename TypeParam::Bus bus;
    bus.SetPerformanceMode(mode);
    typename TypeParam::Publisher publisher(bus);
    std::vector<std::uint64_t> seen;
    ASSERT_TRUE(bus.template Subscribe<Reading>([&](const Reading&, const MessageHeader& header) {
                     seen.push_back(header.timestamp_ns);
                   })
                    .IsValid());
    ASSERT_TRUE(bus.template Subscribe<Alarm>([&](const Alarm&, const MessageHeader& header) {
                     seen.push_back(header.timestamp_ns);
                   })
                    .IsValid());
    std::vector<std::uint64_t> expected;
    for (std::uint32_t i = 0; i < 20; ++i) {
      TickClock::ticks = 1000 + i;
      ASSERT_TRUE(publisher.Publish(Reading{i}));
      expected.push_back((1000 + i) * 10);
    }
    TickClock::ticks = 2000;
    ASSERT_TRUE(publisher.Publish(Alarm{1}));
    expected.push_back(20000);
    EXPECT_EQ(bus.ProcessBatch(), 21u);
    EXPECT_EQ(seen, expected);
    EXPECT_EQ(TickClock::conversions, 21u);  // once each
  }
}

TYPED_TEST(DeferredStampTest, AVisitorSeesNanoseconds) {
  typename TypeParam::Bus bus;
  typename TypeParam::Publisher publisher(bus);
  TickClock::ticks = 1234;
  ASSERT_TRUE(publisher.Publish(Reading{1}));
  std::vector<std::uint64_t> seen;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&, const MessageHeader& header) {
    seen.push_back(header.timestamp_ns);
  }),
            1u);
  EXPECT_EQ(seen, std::vector<std::uint64_t>{12340});
}

// Stamped in FULL_FEATURED, dispatched after a switch to BARE_METAL (whose
// own publishes stamp nothing): still converted.
TYPED_TEST(DeferredStampTest, AStampedMessageIsConvertedAfterASwitchToBareMetal) {
  typename TypeParam::Bus bus;
  typename TypeParam::Publisher publisher(bus);
  std::vector<std::uint64_t> seen;
  ASSERT_TRUE(bus.template Subscribe<Reading>([&](const Reading&, const MessageHeader& header) {
                   seen.push_back(header.timestamp_ns);
                 })
                  .IsValid());
  TickClock::ticks = 1500;
  ASSERT_TRUE(publisher.Publish(Reading{1}));
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  ASSERT_TRUE(publisher.Publish(Reading{2}));
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{15000, 0}));
}

// A visitor that takes the header, or the envelope, after a switch to
// BARE_METAL (a batch that records no latency): every stamp still
// converted, over more messages than a run takes and across the slot
// array's end.
TYPED_TEST(DeferredStampTest, AVisitorOfHeadersSeesNanosecondsAfterASwitchToBareMetal) {
  typename TypeParam::Bus bus;
  typename TypeParam::Publisher publisher(bus);
  std::vector<std::uint64_t> expected;
  std::vector<std::uint64_t> seen;
  for (int round = 0; round < 3; ++round) {
    bus.SetPerformanceMode(PerformanceMode::FULL_FEATURED);
    expected.clear();
    seen.clear();
    for (std::uint64_t i = 0; i < 50; ++i) {
      TickClock::ticks = 3000 + 100 * round + i;
      ASSERT_TRUE(publisher.Publish(Reading{static_cast<std::uint32_t>(i)}));
      expected.push_back(TickClock::ticks * 10);
    }
    bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
    if (round == 1) {
      EXPECT_EQ(bus.ProcessBatchWith([&](const sluice::MessageEnvelope<Payload>& envelope) {
        seen.push_back(envelope.header.timestamp_ns);
      }),
                50u);
    } else {
      EXPECT_EQ(bus.ProcessBatchWith([&](const auto&, const MessageHeader& header) {
        seen.push_back(header.timestamp_ns);
      }),
                50u);
    }
    EXPECT_EQ(seen, expected) << "round " << round;
  }
}

// A visitor that takes the payload alone, in a batch that records no
// latency and with no observer: nobody reads the stamps, which are left
// unconverted (what the conversion would cost is not spent).
TYPED_TEST(DeferredStampTest, AStampNobodyReadsIsNotConverted) {
  typename TypeParam::Bus bus;
  typename TypeParam::Publisher publisher(bus);
  for (std::uint32_t i = 0; i < 40; ++i) ASSERT_TRUE(publisher.Publish(Reading{i}));
  bus.SetPerformanceMode(PerformanceMode::BARE_METAL);
  std::uint64_t sum = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto& message) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Reading>) sum += message.seq;
  }),
            40u);
  EXPECT_EQ(sum, 40u * 39u / 2u);
  EXPECT_EQ(TickClock::conversions, 0u);
}

// The histograms measure the converted stamp to the consumer's reading.
TYPED_TEST(DeferredStampTest, LatencyIsMeasuredFromTheConvertedStamp) {
  typename TypeParam::Bus bus;
  typename TypeParam::Publisher publisher(bus);
  ASSERT_TRUE(bus.template Subscribe<Reading>([](const Reading&) {}).IsValid());
  TickClock::ticks = 1000;
  ASSERT_TRUE(publisher.Publish(Reading{1}));
  ASSERT_TRUE(publisher.Publish(Reading{2}));
  TickClock::ticks = 1100;  // 1 us later
  EXPECT_EQ(bus.ProcessBatch(), 2u);
  const sluice::LatencyHistogram histogram =
      bus.GetLatencyHistograms().For(MessagePriority::MEDIUM);
  EXPECT_EQ(histogram.count, 2u);
  EXPECT_EQ(histogram.sum_nanos, 2000u);
}

// A clock with a converter for many stamps (StampConverter, as CounterClock
// has on x86): the consumer converts through the one it keeps, on every
// dispatch path, to what StampNanos gives.
struct ConverterTickClock : TickClock {
  static inline std::uint64_t converter_calls = 0;
  struct StampConverter {
    std::uint64_t Nanos(std::uint64_t stamp) noexcept {
      ++converter_calls;
      return TickClock::StampNanos(stamp);
    }
  };
};
struct ConverterTickTraits : sluice::DefaultBusTraits {
  using Clock = ConverterTickClock;
};
template <typename Bus>
void ExpectTheConsumersConverterUsed() {
  TickClock::Reset();
  ConverterTickClock::converter_calls = 0;
  Bus bus;
  std::vector<std::uint64_t> seen;
  ASSERT_TRUE(bus.template Subscribe<Reading>([&](const Reading&, const MessageHeader& header) {
                   seen.push_back(header.timestamp_ns);
                 })
                  .IsValid());
  for (std::uint32_t i = 0; i < 10; ++i) {
    TickClock::ticks = 3000 + i;
    ASSERT_TRUE(bus.Publish(Reading{i}));
  }
  EXPECT_EQ(bus.ProcessBatch(4), 4u);  // callbacks, in runs
  EXPECT_EQ(
      bus.ProcessBatchWith(  // a visitor
          [&](const auto&, const MessageHeader& header) { seen.push_back(header.timestamp_ns); }),
      6u);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 0; i < 10; ++i) expected.push_back((3000 + i) * 10);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(ConverterTickClock::converter_calls, 10u);
  EXPECT_EQ(TickClock::conversions, 10u);
}
TEST(DeferredStampConverterTest, TheConsumerConvertsThroughTheClocksConverter) {
  ExpectTheConsumersConverterUsed<sluice::SpscBus<Payload, 64, ConverterTickTraits>>();
  ExpectTheConsumersConverterUsed<sluice::MpscBus<Payload, 64, ConverterTickTraits>>();
}

TEST(DeferredStampBatchTest, APublishBatchSharesOneTimestampInNanoseconds) {
  TickClock::Reset();
  sluice::MpscBus<Payload, 64, TickTraits> bus;
  const std::vector<Reading> batch{{1}, {2}, {3}};
  TickClock::ticks = 4321;
  ASSERT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 7).AdmittedCount(), 3u);
  std::vector<std::uint64_t> seen;
  // Taken one message per batch, so each is converted apart.
  for (int i = 0; i < 3; ++i) {
    ++TickClock::ticks;
    EXPECT_EQ(
        bus.ProcessBatchWith(
            [&](const auto&, const MessageHeader& header) { seen.push_back(header.timestamp_ns); },
            1),
        1u);
  }
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{43210, 43210, 43210}));
}

TEST(DeferredStampObserverTest, ThePublishingObserverSeesNanoseconds) {
  TickClock::Reset();
  std::vector<std::uint64_t> stamps;
  admitted_stamps = &stamps;
  sluice::MpscBus<Payload, 64, ObservedTickTraits> bus;
  TickClock::ticks = 777;
  ASSERT_TRUE(bus.Publish(Reading{1}));
  const std::vector<Reading> batch{{2}, {3}};
  ASSERT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 0).AdmittedCount(), 2u);
  admitted_stamps = nullptr;
  EXPECT_EQ(stamps, (std::vector<std::uint64_t>{7770, 7770, 7770}));
}

// The top bit is the clock's: a caller's negative timestamp is stored as 0
// (none), never read as a stamp to convert, and not counted in latency.
TEST(DeferredStampCallerTest, ANegativeCallerTimestampIsStoredAsNone) {
  TickClock::Reset();
  sluice::MpscBus<Payload, 64, TickTraits> bus;
  ASSERT_TRUE(bus.PublishFast(Reading{1}, 0, std::chrono::nanoseconds(-5)));
  ASSERT_TRUE(bus.PublishFast(Reading{2}, 0, std::chrono::nanoseconds(INT64_MIN)));
  ASSERT_TRUE(bus.PublishFast(Reading{3}, 0, std::chrono::nanoseconds(INT64_MAX)));
  std::vector<std::uint64_t> seen;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&, const MessageHeader& header) {
    seen.push_back(header.timestamp_ns);
  }),
            3u);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 0, INT64_MAX}));
  EXPECT_EQ(TickClock::conversions, 0u);
  EXPECT_EQ(bus.GetLatencyHistograms().For(MessagePriority::MEDIUM).count, 1u);
}

// A bus fixed in BARE_METAL stamps nothing, so there is nothing to convert.
TEST(DeferredStampFixedModeTest, AFixedBareMetalBusStampsNothing) {
  TickClock::Reset();
  sluice::MpscBus<Payload, 64, FixedBareTickTraits> bus;
  ASSERT_TRUE(bus.Publish(Reading{1}));
  std::vector<std::uint64_t> seen;
  EXPECT_EQ(bus.ProcessBatchWith([&](const auto&, const MessageHeader& header) {
    seen.push_back(header.timestamp_ns);
  }),
            1u);
  EXPECT_EQ(seen, std::vector<std::uint64_t>{0});
}

// The default clock: once calibrated, Publish stores a counter reading and
// the consumer converts it onto NowNanos()'s time line.
TEST(DeferredStampCounterClockTest, PublishStampsAreNanosecondsOnTheClocksTimeLine) {
  if (!sluice::CounterClock::UsesCounter()) {
    // Readings calibrate it (about 10 ms after the first); bounded wait.
    for (int i = 0; i < 2000 && !sluice::CounterClock::UsesCounter(); ++i) {
      (void)sluice::CounterClock::NowNanos();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (!sluice::CounterClock::UsesCounter()) GTEST_SKIP() << "no calibrated constant-rate counter";
  sluice::MpscBus<Payload, 64> bus;
  const std::uint64_t before = sluice::CounterClock::NowNanos();
  ASSERT_TRUE(bus.Publish(Reading{1}));
  const std::uint64_t after = sluice::CounterClock::NowNanos();
  std::uint64_t stamp = 0;
  EXPECT_EQ(bus.ProcessBatchWith(
                [&](const auto&, const MessageHeader& header) { stamp = header.timestamp_ns; }),
            1u);
  // A calibration between the readings may step the time line by at most
  // its error (under 1 ms: sluice/clock.hpp).
  constexpr std::uint64_t kStep = 1'000'000;
  EXPECT_EQ(stamp >> 63, 0u);
  EXPECT_GE(stamp + kStep, before);
  EXPECT_LE(stamp, after + kStep);
}

}  // namespace
}  // namespace deferred_stamp_test
