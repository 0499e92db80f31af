// The bus's own observation is one choice in its traits (sluice/observer.hpp):
// FullObservation keeps the statistics, histograms, peak, producer counts
// and error count; NoObservation keeps none of them, while the bus, its
// gauges, its error callback and the traits' Observer work as before. The
// same sequence of events runs on both, and each test asserts what each
// keeps.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "counting_observer.hpp"
#include "sluice/extras/prometheus.hpp"
#include "sluice/sluice.hpp"
#include "typed_test_names.hpp"

namespace sluice_test {
namespace observation_test {
namespace {

using sluice::MessagePriority;
using sluice::PublishOutcome;

struct Item {
  std::uint32_t seq;
};
using Payload = std::variant<Item>;

// A clock that moves 1 ms at each reading, so that every latency is at
// least that and a histogram that records shows it.
struct SteppingClock {
  static std::uint64_t NowNanos() noexcept {
    static std::uint64_t now = 0;
    now += 1'000'000;
    return now;
  }
};

template <typename ObservationChoice>
struct KeepingTraits : sluice::DefaultBusTraits {
  using Observation = ObservationChoice;
  using Observer = CountingObserver;
  using Clock = SteppingClock;
  using Lanes = sluice::ProducerLanes<2, 8>;
};
using FullBus = sluice::MpscBus<Payload, 16, KeepingTraits<sluice::FullObservation>>;
using EmptyBus = sluice::MpscBus<Payload, 16, KeepingTraits<sluice::NoObservation>>;

static_assert(std::is_same_v<sluice::DefaultBusTraits::Observation, sluice::FullObservation>,
              "the bus keeps its statistics unless told otherwise");
// What NoObservation leaves out is left out of the bus too: the shared
// counters and the histograms.
static_assert(sizeof(EmptyBus) < sizeof(FullBus));

// What one run of events left behind.
struct Kept {
  sluice::BusStatisticsSnapshot statistics;
  std::uint64_t histogram_count = 0;
  std::uint64_t producer_published = 0;
  std::uint64_t producer_dropped = 0;
  std::size_t peak_fill = 0;
  std::size_t fill_after = 0;
  std::uint32_t dispatched = 0;
  std::uint32_t counted_headers = 0;  // MessageHeader::counted, as the callback saw it
  std::uint32_t errors_reported = 0;
  std::uint64_t observer_admitted = 0;
  std::uint64_t observer_refused = 0;
  std::uint64_t observer_taken = 0;
  std::uint64_t observer_errors = 0;
  std::uint64_t observer_batches = 0;
};

// Admits and refuses on the shared queue and on a lane, fills the queue to
// the top and drains it (so a peak was reached and left), dispatches one
// message whose callback throws, rejects bad input and publishes after
// Close.
template <typename Bus>
Kept RunEvents() {
  Bus bus;
  Kept kept;
  auto handle =
      bus.template Subscribe<Item>([&kept](const Item& item, const sluice::MessageHeader& header) {
        ++kept.dispatched;
        kept.counted_headers += header.counted ? 1 : 0;
#if SLUICE_HAS_EXCEPTIONS
        if (item.seq == 7) throw std::runtime_error("seven");
#else
        (void)item;
#endif
      });
  EXPECT_TRUE(handle.IsValid());
  static std::uint32_t* errors = nullptr;
  errors = &kept.errors_reported;
  EXPECT_TRUE(bus.SetErrorCallback([](const sluice::BusError&, void*) { ++*errors; }, nullptr));

  auto producer = bus.RegisterProducer("lane");
  EXPECT_TRUE(producer);
  while (producer.PublishWithPriority(Item{1}, 0, MessagePriority::HIGH)) {
  }
  std::uint32_t seq = 0;
  while (bus.PublishWithPriority(Item{seq}, 0, MessagePriority::HIGH)) ++seq;
  EXPECT_FALSE(bus.PublishWithPriority(Item{0}, 0, static_cast<MessagePriority>(9)));
  while (bus.ProcessBatch() > 0) {
  }
  kept.fill_after = bus.QueueDepth();
  kept.peak_fill = bus.TakeBackpressurePeak().fill;
  kept.statistics = bus.GetStatistics();
  const sluice::LatencySnapshot latencies = bus.GetLatencyHistograms();
  for (const sluice::LatencyHistogram& histogram : latencies.by_priority) {
    kept.histogram_count += histogram.count;
  }
  bus.ForEachProducer([&kept](const sluice::ProducerStatisticsSnapshot& lane) {
    kept.producer_published += lane.high_priority_published;
    kept.producer_dropped += lane.high_priority_dropped;
  });
  EXPECT_EQ(bus.GetObserver().Closed(), 0u);
  bus.Close();
  bus.Close();  // once: the call that closed it tells
  EXPECT_EQ(bus.GetObserver().Closed(), 1u);
  EXPECT_FALSE(bus.Publish(Item{0}));
  kept.statistics.messages_refused_closed = bus.GetStatistics().messages_refused_closed;

  const CountingObserver& seen = bus.GetObserver();
  kept.observer_admitted = seen.Admitted();
  kept.observer_refused =
      seen.Refused(PublishOutcome::kRefusedFull) + seen.Refused(PublishOutcome::kLaneFull) +
      seen.Refused(PublishOutcome::kRejected) + seen.Refused(PublishOutcome::kClosed);
  kept.observer_taken = seen.Taken();
  kept.observer_errors = seen.Errors();
  kept.observer_batches = seen.Batches();
  return kept;
}

TEST(ObservationTest, FullObservationKeepsEveryCount) {
  const Kept kept = RunEvents<FullBus>();
  // 8 through the lane, 16 HIGH into the shared queue (HIGH may fill it).
  EXPECT_EQ(kept.dispatched, 8u + 16u);
  EXPECT_EQ(kept.statistics.messages_published, 24u);
  EXPECT_EQ(kept.statistics.messages_processed, 24u);
  EXPECT_EQ(kept.statistics.messages_dropped, 2u);  // one lane-full, one full
  EXPECT_EQ(kept.statistics.messages_rejected, 1u);
  EXPECT_EQ(kept.statistics.messages_refused_closed, 1u);
  EXPECT_EQ(kept.histogram_count, 24u);
  EXPECT_EQ(kept.producer_published, 8u);
  EXPECT_EQ(kept.producer_dropped, 1u);
  EXPECT_EQ(kept.fill_after, 0u);
  EXPECT_EQ(kept.peak_fill, 16u);
  EXPECT_EQ(kept.counted_headers,
            kept.dispatched);  // the refused claim's fill, or the batch's start
#if SLUICE_HAS_EXCEPTIONS
  EXPECT_EQ(kept.statistics.processing_errors, 1u);
  EXPECT_EQ(kept.errors_reported, 1u);
#endif
}

TEST(ObservationTest, NoObservationKeepsNothingAndTheBusStillWorks) {
  const Kept kept = RunEvents<EmptyBus>();
  // The bus: every message dispatched, the error reported.
  EXPECT_EQ(kept.dispatched, 8u + 16u);
#if SLUICE_HAS_EXCEPTIONS
  EXPECT_EQ(kept.errors_reported, 1u);
#endif
  // Nothing kept.
  const sluice::BusStatisticsSnapshot zero{};
  EXPECT_EQ(kept.statistics.messages_published, zero.messages_published);
  EXPECT_EQ(kept.statistics.messages_processed, 0u);
  EXPECT_EQ(kept.statistics.messages_dropped, 0u);
  EXPECT_EQ(kept.statistics.messages_rejected, 0u);
  EXPECT_EQ(kept.statistics.messages_refused_closed, 0u);
  EXPECT_EQ(kept.statistics.processing_errors, 0u);
  EXPECT_EQ(kept.histogram_count, 0u);
  EXPECT_EQ(kept.counted_headers, 0u);  // no publish was counted, and its header says so
  EXPECT_EQ(kept.producer_published, 0u);
  EXPECT_EQ(kept.producer_dropped, 0u);
  // The peak is the gauges now: the queue was full, and is empty.
  EXPECT_EQ(kept.peak_fill, kept.fill_after);
  EXPECT_EQ(kept.peak_fill, 0u);
}

// The Prometheus export writes a bus that keeps nothing by its gauges only:
// no counter, producer or latency sample, whose 0 would read as an idle
// bus; a bus that keeps everything beside it is written in full.
TEST(ObservationTest, TheExportLeavesOutWhatABusDoesNotKeep) {
  static_assert(FullBus::kKeepsStatistics && FullBus::kKeepsLatencyHistograms);
  static_assert(!EmptyBus::kKeepsStatistics && !EmptyBus::kKeepsLatencyHistograms);
  FullBus full;
  EmptyBus empty;
  auto full_producer = full.RegisterProducer("f");
  auto empty_producer = empty.RegisterProducer("e");
  ASSERT_TRUE(full_producer && empty_producer);
  ASSERT_TRUE(full_producer.Publish(Item{1}));
  ASSERT_TRUE(empty_producer.Publish(Item{1}));
  ASSERT_TRUE(full.Publish(Item{2}));
  ASSERT_TRUE(empty.Publish(Item{2}));
  EXPECT_EQ(full.ProcessBatch(), 2u);
  EXPECT_EQ(empty.ProcessBatch(), 2u);
  ASSERT_TRUE(empty.Publish(Item{3}));  // one left queued
  const sluice::BusMetrics metrics[] = {sluice::CaptureMetrics("full", full),
                                        sluice::CaptureMetrics("empty", empty)};
  std::string text;
  sluice::WritePrometheus(text, metrics, 2);
  const auto has = [&text](const char* needle) { return text.find(needle) != std::string::npos; };
  EXPECT_TRUE(has("sluice_messages_published_total{bus=\"full\""));
  EXPECT_TRUE(has("sluice_messages_rejected_total{bus=\"full\"}"));
  EXPECT_TRUE(has("sluice_producer_messages_published_total{bus=\"full\""));
  EXPECT_TRUE(has("sluice_dispatch_latency_seconds_bucket{bus=\"full\""));
  EXPECT_TRUE(has("sluice_queue_depth{bus=\"empty\"} 1"));
  EXPECT_TRUE(has("sluice_backpressure_level{bus=\"empty\"}"));
  EXPECT_FALSE(has("{bus=\"empty\",priority"));
  EXPECT_FALSE(has("_total{bus=\"empty\""));
  EXPECT_FALSE(has("sluice_dispatch_latency_seconds_bucket{bus=\"empty\""));
}

// The traits' Observer sees the same events whichever observation the bus
// keeps: the two are independent parts.
TEST(ObservationTest, TheTraitsObserverSeesTheSameEventsEitherWay) {
  const Kept full = RunEvents<FullBus>();
  const Kept empty = RunEvents<EmptyBus>();
  EXPECT_EQ(full.observer_admitted, 24u);
  EXPECT_EQ(full.observer_refused, 4u);  // lane full, full, rejected, closed
  EXPECT_EQ(full.observer_taken, 24u);
  EXPECT_EQ(empty.observer_admitted, full.observer_admitted);
  EXPECT_EQ(empty.observer_refused, full.observer_refused);
  EXPECT_EQ(empty.observer_taken, full.observer_taken);
  EXPECT_EQ(empty.observer_batches, full.observer_batches);
  EXPECT_EQ(empty.observer_errors, full.observer_errors);
}

// A bus that keeps nothing and has no observer leaves the publish and
// dispatch paths with no observation at all: a BARE_METAL-only bus of one
// producer works as any other.
TEST(ObservationTest, AFixedModeBusThatKeepsNothingPublishesAndDispatches) {
  struct Traits : sluice::DefaultBusTraits {
    using Observation = sluice::NoObservation;
    using Mode = sluice::FixedMode<sluice::PerformanceMode::BARE_METAL>;
  };
  sluice::SpscBus<Payload, 8, Traits> bus;
  std::uint32_t sum = 0;
  auto handle = bus.Subscribe<Item>([&sum](const Item& item) { sum += item.seq; });
  ASSERT_TRUE(handle.IsValid());
  std::uint32_t admitted = 0;
  while (
      bus.PublishFast(Item{admitted + 1}, 0, std::chrono::nanoseconds(1), MessagePriority::HIGH)) {
    ++admitted;
  }
  EXPECT_EQ(admitted, 8u);
  EXPECT_EQ(bus.ProcessBatch(), 8u);
  EXPECT_EQ(sum, 36u);
  EXPECT_EQ(bus.GetStatistics().messages_published, 0u);
}

}  // namespace
}  // namespace observation_test
}  // namespace sluice_test
