// A shared-memory producer offers the publish calls of the in-process
// bus's Producer, through the same publish core: PublishWithPriority,
// PublishAttempt, PublishFast, Emplace, PublishBatch (random access and
// single pass) and PublishLoan, each with the in-process results and
// counts; the 0.5 signatures still publish, deprecated. The consumer is in
// this process: these are the calls' own promises (the cross-process ones
// are in shm_bus_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <sluice/admission.hpp>
#include <sluice/clock.hpp>
#include <sluice/extras/prometheus.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bus_view.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace shm_publish_test {
namespace {

using sluice::MessageHeader;
using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::kGuard;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Pose;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using Bus = sluice::ipc::ShmBus<Payload, kCapacity>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, sluice::ipc::ShmBusTraits>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity>;

constexpr std::size_t kLow = static_cast<std::size_t>(MessagePriority::LOW);
constexpr sluice::Position kLowLimit =
    sluice::FillLimit(sluice::AdmissionThresholds{}.low_percent, kCapacity);

struct Seen {
  std::uint64_t seq;
  std::uint32_t sender;
  MessagePriority priority;
  std::uint64_t timestamp_ns;
};

// Dispatches everything queued; what each message was, in order.
std::vector<Seen> TakeAll(Bus& bus) {
  std::vector<Seen> seen;
  const auto note = [&seen](std::uint64_t seq, const MessageHeader& header) {
    seen.push_back({seq, header.sender_id, header.priority, header.timestamp_ns});
  };
  while (bus.ProcessBatchWith([&](const auto& message, const MessageHeader& header) {
    if constexpr (std::is_same_v<std::decay_t<decltype(message)>, Stop> ||
                  std::is_same_v<std::decay_t<decltype(message)>, Pose>) {
      note(message.seq, header);
    } else {
      note(~std::uint64_t{0}, header);
    }
  }) != 0) {
  }
  return seen;
}

class ShmPublishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = UniqueName();
    ASSERT_EQ(bus_.Create(name_), AttachError::kNone);
    ASSERT_EQ(producer_.Attach(name_), AttachError::kNone);
  }
  std::string name_;
  Bus bus_;
  Producer producer_;
};

TEST_F(ShmPublishTest, EveryCallOfAProducerPublishesWithItsSenderAndPriority) {
  ASSERT_TRUE(producer_.Publish(Stop{0, 1}, 11));
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 2}, 12, MessagePriority::LOW));
  ASSERT_TRUE(producer_.PublishAttempt(Stop{0, 3}, 13, MessagePriority::LOW));
  ASSERT_TRUE(producer_.PublishFast(Stop{0, 4}, 14, std::chrono::nanoseconds(123456789),
                                    MessagePriority::LOW));
  ASSERT_TRUE(producer_.Emplace<Pose>(15, MessagePriority::LOW, 1.0, 2.0, 3.0, std::uint64_t{5}));
  const std::vector<Stop> batch{{0, 6}, {0, 7}, {0, 8}};
  const auto result = producer_.PublishBatch(batch.begin(), batch.end(), 16, MessagePriority::LOW);
  ASSERT_TRUE(result);
  EXPECT_EQ(result.AdmittedCount(), 3u);

  const std::vector<Seen> seen = TakeAll(bus_);
  ASSERT_EQ(seen.size(), 8u);
  // MEDIUM first (priority order), then the LOW ones in publish order.
  EXPECT_EQ(seen[0].seq, 1u);
  EXPECT_EQ(seen[0].sender, 11u);
  EXPECT_EQ(seen[0].priority, MessagePriority::MEDIUM);
  const std::uint32_t senders[] = {12, 13, 14, 15, 16, 16, 16};
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].seq, i + 1) << i;
    EXPECT_EQ(seen[i].sender, senders[i - 1]) << i;
    EXPECT_EQ(seen[i].priority, MessagePriority::LOW) << i;
  }
  EXPECT_EQ(seen[3].timestamp_ns, 123456789u);  // the caller's, as given
  EXPECT_NE(seen[0].timestamp_ns, 0u);          // the clock's
  EXPECT_EQ(bus_.GetStatistics().published[kLow], 7u);
}

TEST_F(ShmPublishTest, ABatchFillsToTheThresholdAndCountsTheRestDropped) {
  std::vector<Stop> batch;
  for (std::uint64_t seq = 0; seq < kCapacity; ++seq) batch.push_back(Stop{0, seq});
  const auto result = producer_.PublishBatch(batch.begin(), batch.end(), 7, MessagePriority::LOW);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kRefusedFull);
  EXPECT_EQ(result.AdmittedCount(), kLowLimit);
  const auto statistics = bus_.GetStatistics();
  EXPECT_EQ(statistics.published[kLow], kLowLimit);
  EXPECT_EQ(statistics.dropped[kLow], kCapacity - kLowLimit);
  const std::vector<Seen> seen = TakeAll(bus_);
  ASSERT_EQ(seen.size(), kLowLimit);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].seq, i);
}

// An input iterator that makes each message when dereferenced and cannot
// be subtracted: a generator, walked once.
class StopGenerator {
 public:
  explicit StopGenerator(std::uint64_t seq) : seq_(seq) {}
  Stop operator*() const { return Stop{0, seq_}; }
  StopGenerator& operator++() {
    ++seq_;
    return *this;
  }
  bool operator!=(const StopGenerator& other) const { return seq_ != other.seq_; }
  bool operator==(const StopGenerator& other) const { return seq_ == other.seq_; }

 private:
  std::uint64_t seq_;
};

TEST_F(ShmPublishTest, ASinglePassBatchPublishesEachMessageOnce) {
  const auto result =
      producer_.PublishBatch(StopGenerator(10), StopGenerator(15), 7, MessagePriority::HIGH);
  ASSERT_TRUE(result);
  EXPECT_EQ(result.AdmittedCount(), 5u);
  const std::vector<Seen> seen = TakeAll(bus_);
  ASSERT_EQ(seen.size(), 5u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].seq, 10 + i);
}

TEST_F(ShmPublishTest, AnAttemptRefusedForRoomIsNotCountedAndTheLastTryIs) {
  for (sluice::Position i = 0; i < kLowLimit; ++i) {
    ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, i}, 7, MessagePriority::LOW));
  }
  EXPECT_EQ(producer_.PublishAttempt(Stop{0, 99}, 7, MessagePriority::LOW).Outcome(),
            PublishOutcome::kRefusedFull);
  EXPECT_EQ(bus_.GetStatistics().dropped[kLow], 0u);
  EXPECT_EQ(producer_.PublishWithPriority(Stop{0, 99}, 7, MessagePriority::LOW).Outcome(),
            PublishOutcome::kRefusedFull);
  EXPECT_EQ(bus_.GetStatistics().dropped[kLow], 1u);
  // HIGH still has room: the threshold is LOW's.
  EXPECT_TRUE(producer_.PublishWithPriority(Stop{0, 100}, 7, MessagePriority::HIGH));
}

TEST_F(ShmPublishTest, BadInputIsRejectedByEveryCall) {
  const auto bad = static_cast<MessagePriority>(3);
  EXPECT_EQ(producer_.PublishWithPriority(Stop{0, 1}, 7, bad).Outcome(), PublishOutcome::kRejected);
  EXPECT_EQ(producer_.PublishAttempt(Stop{0, 1}, 7, bad).Outcome(), PublishOutcome::kRejected);
  EXPECT_EQ(producer_.Emplace<Stop>(7, bad, 0u, std::uint64_t{1}).Outcome(),
            PublishOutcome::kRejected);
  const std::vector<Stop> batch{{0, 1}};
  EXPECT_EQ(producer_.PublishBatch(batch.begin(), batch.end(), 7, bad).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(producer_.PublishBlocking(Stop{0, 1}, 7, bad, std::chrono::milliseconds(1)).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(bus_.QueueDepth(), 0u);
}

TEST_F(ShmPublishTest, EveryCallSaysClosedOnceTheConsumerClosedOrWhenNotAttached) {
  bus_.Close();
  const std::vector<Stop> batch{{0, 1}, {0, 2}};
  EXPECT_EQ(producer_.Publish(Stop{0, 1}, 7).Outcome(), PublishOutcome::kClosed);
  EXPECT_EQ(producer_.PublishAttempt(Stop{0, 1}, 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(producer_.Emplace<Stop>(7, MessagePriority::HIGH, 0u, std::uint64_t{1}).Outcome(),
            PublishOutcome::kClosed);
  const auto result = producer_.PublishBatch(batch.begin(), batch.end(), 7, MessagePriority::HIGH);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kClosed);
  EXPECT_EQ(result.AdmittedCount(), 0u);
  // At once, not at the timeout (which bounds a wait that missed the close).
  EXPECT_EQ(producer_.PublishBlocking(Stop{0, 1}, 7, MessagePriority::HIGH, kGuard).Outcome(),
            PublishOutcome::kClosed);
  Producer detached;
  EXPECT_EQ(detached.Publish(Stop{0, 1}, 7).Outcome(), PublishOutcome::kClosed);
  EXPECT_EQ(detached.PublishBatch(batch.begin(), batch.end(), 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(detached.Emplace<Stop>(7, MessagePriority::HIGH, 0u, std::uint64_t{1}).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(detached.PublishBlocking(Stop{0, 1}, 7, MessagePriority::HIGH, kGuard).Outcome(),
            PublishOutcome::kClosed);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_F(ShmPublishTest, TheOldSignaturesStillPublishForOneRelease) {
  ASSERT_TRUE(producer_.Publish(Stop{0, 1}, 7, MessagePriority::HIGH));
  const std::vector<Seen> seen = TakeAll(bus_);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].priority, MessagePriority::HIGH);
}
#pragma GCC diagnostic pop

// The consumer runs in the consumer core every bus shares: the latency
// histograms, from each message's stamp to the consumer's reading of the
// same clock, and the error callback.
TEST_F(ShmPublishTest, TheConsumerKeepsLatencyHistogramsOfStampedMessages) {
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 1}, 7, MessagePriority::HIGH));
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 2}, 7, MessagePriority::HIGH));
  // Stamped 0: not counted.
  ASSERT_TRUE(
      producer_.PublishFast(Stop{0, 3}, 7, std::chrono::nanoseconds(0), MessagePriority::HIGH));
  // Stamped 20 ms ago: at least 20 ms, never less (the reading is later).
  const std::uint64_t now = sluice::SteadyClock::NowNanos();
  ASSERT_TRUE(producer_.PublishFast(Stop{0, 4}, 7, std::chrono::nanoseconds(now - 20'000'000),
                                    MessagePriority::LOW));
  // Stamped an hour ahead (written wrong): counted, as 0.
  ASSERT_TRUE(producer_.PublishFast(
      Stop{0, 5}, 7, std::chrono::nanoseconds(now + 3'600'000'000'000), MessagePriority::MEDIUM));
  EXPECT_EQ(bus_.GetLatencyHistograms().For(MessagePriority::HIGH).count, 0u);
  ASSERT_EQ(TakeAll(bus_).size(), 5u);
  const sluice::LatencySnapshot latency = bus_.GetLatencyHistograms();
  EXPECT_EQ(latency.For(MessagePriority::HIGH).count, 2u);
  ASSERT_EQ(latency.For(MessagePriority::MEDIUM).count, 1u);
  EXPECT_EQ(latency.For(MessagePriority::MEDIUM).sum_nanos, 0u);
  EXPECT_EQ(latency.For(MessagePriority::MEDIUM).buckets[0], 1u);
  ASSERT_EQ(latency.For(MessagePriority::LOW).count, 1u);
  EXPECT_GE(latency.For(MessagePriority::LOW).sum_nanos, 20'000'000u);
  // Made again at the next Create: the histograms start again.
  producer_.Detach();
  bus_.Close();
  ASSERT_EQ(bus_.Create(name_), AttachError::kNone);
  EXPECT_EQ(bus_.GetLatencyHistograms().For(MessagePriority::HIGH).count, 0u);
}

// The gauges read the fullest lane on the segment's thresholds.
TEST_F(ShmPublishTest, TheGaugesReadTheFullestLaneOnTheSegmentsThresholds) {
  EXPECT_EQ(bus_.GetBackpressureLevel(), sluice::BackpressureLevel::NORMAL);
  for (sluice::Position i = 0; i < kLowLimit; ++i) {
    ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, i}, 7, MessagePriority::LOW));
  }
  EXPECT_EQ(bus_.GetBackpressureLevel(), sluice::BackpressureLevel::WARNING);
  EXPECT_DOUBLE_EQ(bus_.QueueUtilizationPercent(), kLowLimit * 100.0 / kCapacity);
  const sluice::Position medium_limit =
      sluice::FillLimit(sluice::AdmissionThresholds{}.medium_percent, kCapacity);
  for (sluice::Position i = kLowLimit; i < medium_limit; ++i) {
    ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, i}, 7, MessagePriority::MEDIUM));
  }
  EXPECT_EQ(bus_.GetBackpressureLevel(), sluice::BackpressureLevel::CRITICAL);
  ASSERT_EQ(TakeAll(bus_).size(), medium_limit);
  EXPECT_EQ(bus_.GetBackpressureLevel(), sluice::BackpressureLevel::NORMAL);
  const sluice::BackpressurePeak peak = bus_.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, medium_limit);  // noted at the batch's start
  EXPECT_EQ(peak.level, sluice::BackpressureLevel::CRITICAL);
  const sluice::BackpressurePeak next = bus_.TakeBackpressurePeak();  // a new period
  EXPECT_EQ(next.fill, 0u);
  EXPECT_EQ(next.level, sluice::BackpressureLevel::NORMAL);
}

// A lane that filled up and emptied within one batch (its producer
// publishing from a callback) shows in the peak through its refusals: a
// producer in another process cannot write the consumer's peak, so the
// consumer reads the refusals they counted.
TEST_F(ShmPublishTest, ARefusalForRoomShowsInThePeakThoughNoBatchStartSawTheFill) {
  ASSERT_TRUE(producer_.PublishWithPriority(Pose{0, 0, 0, 0}, 7, MessagePriority::HIGH));
  std::uint64_t refused = 0;
  auto flood = bus_.Subscribe<Pose>([&](const Pose&) {
    for (std::uint64_t seq = 0;; ++seq) {
      if (!producer_.PublishWithPriority(Stop{0, seq}, 7, MessagePriority::LOW)) {
        ++refused;
        return;
      }
    }
  });
  ASSERT_TRUE(flood.IsValid());
  EXPECT_EQ(bus_.ProcessBatch(), 1u + kLowLimit);  // the flood taken in the same batch
  ASSERT_EQ(refused, 1u);
  EXPECT_EQ(bus_.QueueDepth(), 0u);
  const sluice::BackpressurePeak peak = bus_.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, kLowLimit);
  EXPECT_EQ(peak.level, sluice::BackpressureLevel::WARNING);
}

// The snapshot is the in-process bus's type, and the Prometheus export
// reads a shared bus as it reads an in-process one: totals, per-lane
// producers (named by process), gauges and latency.
TEST_F(ShmPublishTest, TheStatisticsAreTheInProcessSnapshotAndThePrometheusExportReadsThem) {
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 1}, 7, MessagePriority::HIGH));
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 2}, 7, MessagePriority::LOW));
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 3}, 7, MessagePriority::LOW));
  EXPECT_EQ(bus_.ProcessBatch(1), 1u);  // the HIGH one
  const sluice::ipc::ShmBusStatistics statistics = bus_.GetStatistics();
  const sluice::BusStatisticsSnapshot& snapshot = statistics;
  EXPECT_EQ(snapshot.messages_published, 3u);
  EXPECT_EQ(snapshot.high_priority_published, 1u);
  EXPECT_EQ(snapshot.low_priority_published, 2u);
  EXPECT_EQ(snapshot.messages_processed, 1u);
  EXPECT_EQ(snapshot.high_priority_processed, 1u);
  EXPECT_EQ(snapshot.low_priority_processed, 0u);
  EXPECT_EQ(snapshot.messages_dropped, 0u);

  std::string text;
  sluice::WritePrometheus(text, "fusion", bus_);
  const auto contains = [&text](const std::string& line) {
    return text.find(line) != std::string::npos;
  };
  EXPECT_TRUE(contains("sluice_messages_published_total{bus=\"fusion\",priority=\"low\"} 2"));
  EXPECT_TRUE(contains("sluice_messages_processed_total{bus=\"fusion\",priority=\"high\"} 1"));
  EXPECT_TRUE(contains("sluice_queue_depth{bus=\"fusion\"} 2"));
  EXPECT_TRUE(contains("sluice_queue_capacity{bus=\"fusion\"} 64"));
  EXPECT_TRUE(
      contains("sluice_dispatch_latency_seconds_count{bus=\"fusion\",priority=\"high\"} 1"));
  const std::string producer = "lane=\"" + std::to_string(producer_.Lane()) + "\",producer=\"pid " +
                               std::to_string(::getpid()) + "\"";
  EXPECT_TRUE(contains("sluice_producer_messages_published_total{bus=\"fusion\"," + producer +
                       ",priority=\"low\"} 2"))
      << text;
}

// The name of each lane taken, as the consumer reads it.
std::map<std::uint16_t, std::string> ProducerNames(const Bus& bus) {
  std::map<std::uint16_t, std::string> names;
  bus.ForEachProducer([&](const sluice::ProducerStatisticsSnapshot& producer) {
    names[producer.lane] = producer.name;
  });
  return names;
}

// Whether `text` is valid UTF-8 (the reader the exporter's consumers use
// refuses anything else).
bool IsValidUtf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = sluice::detail::Utf8SequenceLength(bytes + i, text.size() - i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

// A producer names its lane at Attach, as RegisterProducer does in
// process: the name is in the per-producer statistics and the export; one
// that gave none is its process id; a name too long is cut at a character
// boundary, and an invalid byte is '?'.
TEST_F(ShmPublishTest, AProducerNamesItsLaneAtAttach) {
  Producer lidar;
  ASSERT_EQ(lidar.Attach(name_, "lidar-front"), AttachError::kNone);
  Producer long_name;
  std::string umlauts;
  for (int i = 0; i < 20; ++i) umlauts += "\xC3\xA4";  // U+00E4, two bytes each
  ASSERT_EQ(long_name.Attach(name_, umlauts.c_str()), AttachError::kNone);
  Producer invalid;
  ASSERT_EQ(invalid.Attach(name_,
                           "cam\xFF"
                           "era"),
            AttachError::kNone);
  ASSERT_TRUE(lidar.PublishWithPriority(Stop{0, 1}, 7, MessagePriority::LOW));

  const std::map<std::uint16_t, std::string> names = ProducerNames(bus_);
  EXPECT_EQ(names.at(producer_.Lane()), "pid " + std::to_string(::getpid()));
  EXPECT_EQ(names.at(lidar.Lane()), "lidar-front");
  EXPECT_EQ(names.at(long_name.Lane()), umlauts.substr(0, 30));  // 15 whole characters
  EXPECT_EQ(names.at(invalid.Lane()), "cam?era");

  std::string text;
  sluice::WritePrometheus(text, "fusion", bus_);
  EXPECT_NE(
      text.find("sluice_producer_messages_published_total{bus=\"fusion\",lane=\"" +
                std::to_string(lidar.Lane()) + "\",producer=\"lidar-front\",priority=\"low\"} 1"),
      std::string::npos)
      << text;

  // A lane handed back and taken again carries its new producer's name.
  lidar.Detach();
  bus_.CheckProducers();
  Producer next;
  ASSERT_EQ(next.Attach(name_, "radar"), AttachError::kNone);
  EXPECT_EQ(ProducerNames(bus_).at(next.Lane()), "radar");
}

// A producer can write its own lane's name bytes (the lane is writable by
// its producer): whatever it writes, the consumer reads a name
// that is valid UTF-8 and ends within the field, so the export stays
// parseable.
TEST_F(ShmPublishTest, WhateverIsWrittenIntoALaneNameTheConsumerReadsValidText) {
  sluice_ipc_test::BusView<Layout> view;
  ASSERT_EQ(view.Open(name_), AttachError::kNone);
  auto& control = view.Control(producer_.Lane() - 1u);
  const std::uint32_t patterns[] = {0xFFFFFFFFu, 0xC3C3C3C3u, 0x80808080u, 0x41414141u,
                                    0x00C3C341u};
  for (const std::uint32_t pattern : patterns) {
    for (auto& word : control.name) word.store(pattern, std::memory_order_relaxed);
    const std::string read = ProducerNames(bus_).at(producer_.Lane());
    EXPECT_LT(read.size(), sluice::kProducerNameCapacity) << std::hex << pattern;
    EXPECT_TRUE(IsValidUtf8(read)) << std::hex << pattern;
    std::string text;
    sluice::WritePrometheus(text, "fusion", bus_);
    EXPECT_TRUE(IsValidUtf8(text)) << std::hex << pattern;
  }
}

// The refusals of a lane handed back (CheckProducers, after its producer
// detached) are noted before its counts go with it.
TEST_F(ShmPublishTest, ARefusalOfALaneHandedBackStillShowsInThePeak) {
  ASSERT_TRUE(producer_.PublishWithPriority(Pose{0, 0, 0, 0}, 7, MessagePriority::HIGH));
  auto flood = bus_.Subscribe<Pose>([&](const Pose&) {
    for (std::uint64_t seq = 0;; ++seq) {
      if (!producer_.PublishWithPriority(Stop{0, seq}, 7, MessagePriority::LOW)) return;
    }
  });
  ASSERT_TRUE(flood.IsValid());
  EXPECT_EQ(bus_.ProcessBatch(), 1u + kLowLimit);
  producer_.Detach();
  bus_.CheckProducers();  // the lane is handed back, its counts reset
  const sluice::BackpressurePeak peak = bus_.TakeBackpressurePeak();
  EXPECT_EQ(peak.fill, kLowLimit);
  EXPECT_EQ(peak.level, sluice::BackpressureLevel::WARNING);
}

// Create from a callback of this bus, even after a Close there, is refused:
// the batch still running would count into the new bus.
TEST_F(ShmPublishTest, CreateFromInsideACallbackIsRefused) {
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 1}, 7, MessagePriority::HIGH));
  sluice::ipc::AttachError inside = AttachError::kNone;
  auto handle = bus_.Subscribe<Stop>([&](const Stop&) {
    bus_.Close();
    inside = bus_.Create(name_);
  });
  ASSERT_TRUE(handle.IsValid());
  EXPECT_EQ(bus_.ProcessBatch(), 1u);
  EXPECT_EQ(inside, AttachError::kConsumerExists);
  EXPECT_FALSE(bus_.IsOpen());
  producer_.Detach();
  ASSERT_EQ(bus_.Create(name_), AttachError::kNone);  // outside the batch: made
  EXPECT_EQ(bus_.GetStatistics().messages_processed, 0u);
}

#if SLUICE_HAS_EXCEPTIONS
struct Reported {
  int calls = 0;
  sluice::BusError last;
  std::string what;  // BusError::what is valid during the callback only
};

TEST_F(ShmPublishTest, AThrowingSubscriberOrVisitorIsReportedToTheErrorCallback) {
  Reported reported;
  ASSERT_TRUE(bus_.SetErrorCallback(
      [](const sluice::BusError& error, void* context) {
        auto* into = static_cast<Reported*>(context);
        ++into->calls;
        into->last = error;
        into->what = error.what != nullptr ? error.what : "";
      },
      &reported));
  auto thrower = bus_.Subscribe<Stop>([](const Stop& stop) {
    if (stop.seq == 2) throw std::runtime_error("subscriber failed");
  });
  ASSERT_TRUE(thrower.IsValid());
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 1}, 31, MessagePriority::HIGH));
  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 2}, 32, MessagePriority::HIGH));
  EXPECT_EQ(bus_.ProcessBatch(), 2u);
  EXPECT_EQ(reported.calls, 1);
  EXPECT_EQ(reported.last.code, sluice::BusErrorCode::kCallbackThrew);
  EXPECT_EQ(reported.last.sender_id, 32u);
  EXPECT_EQ(reported.last.msg_id, 1u);      // the lane's second admission
  EXPECT_EQ(reported.last.type_index, 1u);  // Stop
  EXPECT_EQ(reported.what, "subscriber failed");

  ASSERT_TRUE(producer_.PublishWithPriority(Stop{0, 3}, 33, MessagePriority::HIGH));
  EXPECT_EQ(bus_.ProcessBatchWith([](const auto&) { throw 7; }), 1u);
  EXPECT_EQ(reported.calls, 2);
  EXPECT_EQ(reported.last.code, sluice::BusErrorCode::kVisitorThrew);
  EXPECT_EQ(reported.last.sender_id, 33u);
  EXPECT_EQ(bus_.GetStatistics().callback_errors, 2u);
}
#endif

using LoanBus = sluice::ipc::ShmBus<sluice_ipc_test::LoanPayload, 8>;
using LoanProducer = sluice::ipc::ShmProducer<sluice_ipc_test::LoanPayload, 8>;
using sluice_ipc_test::Frame4K;

TEST(ShmPublishLoanTest, ALoanIsPublishedAsAnRvalueAndARefusedOneStaysWithTheCaller) {
  const std::string name = UniqueName();
  LoanBus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  LoanProducer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  const sluice::Position low_limit =
      sluice::FillLimit(sluice::AdmissionThresholds{}.low_percent, 8);
  for (sluice::Position i = 0; i < low_limit; ++i) {
    ASSERT_TRUE(producer.PublishWithPriority(Stop{0, i}, 7, MessagePriority::LOW));
  }
  auto loan = producer.Loan<Frame4K>();
  ASSERT_TRUE(loan);
  EXPECT_EQ(producer.PublishLoan(std::move(loan), 7, MessagePriority::LOW).Outcome(),
            PublishOutcome::kRefusedFull);
  EXPECT_TRUE(loan);  // refused: still the caller's
  EXPECT_TRUE(producer.PublishLoan(std::move(loan), 7, MessagePriority::HIGH));
  EXPECT_FALSE(loan);  // admitted: the message's
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto old = producer.Loan<Frame4K>();
  ASSERT_TRUE(old);
  EXPECT_TRUE(producer.PublishLoan(old, 7, MessagePriority::HIGH));
  EXPECT_FALSE(old);
#pragma GCC diagnostic pop
  EXPECT_EQ(
      producer.PublishLoan(sluice::ipc::ShmLoan<Frame4K>(), 7, MessagePriority::HIGH).Outcome(),
      PublishOutcome::kPoolEmpty);
}

// A Loaned<T> inside the payload variant is bad input for every call but
// PublishLoan: it would name a block its producer may hold (and the
// consumer would then hand that block out again when the message is done).
TEST(ShmPublishLoanTest, ALoanedTInsideTheVariantIsRejectedByEveryOtherCall) {
  using LoanPayload = sluice_ipc_test::LoanPayload;
  const std::string name = UniqueName();
  LoanBus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  LoanProducer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  auto held = producer.Loan<Frame4K>();
  ASSERT_TRUE(held);
  const LoanPayload forged{sluice::ipc::Loaned<Frame4K>()};
  EXPECT_EQ(producer.PublishWithPriority(forged, 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(producer.PublishAttempt(forged, 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kRejected);
  EXPECT_EQ(
      producer.PublishFast(forged, 7, std::chrono::nanoseconds(1), MessagePriority::HIGH).Outcome(),
      PublishOutcome::kRejected);
  EXPECT_EQ(producer.PublishBlocking(forged, 7, MessagePriority::HIGH, std::chrono::milliseconds(1))
                .Outcome(),
            PublishOutcome::kRejected);
  // In a batch: the messages before it are admitted, it is rejected, those
  // after it are not attempted.
  const std::vector<LoanPayload> batch{LoanPayload{Stop{0, 1}}, forged, LoanPayload{Stop{0, 2}}};
  const auto result = producer.PublishBatch(batch.begin(), batch.end(), 7, MessagePriority::HIGH);
  EXPECT_EQ(result.Outcome(), PublishOutcome::kRejected);
  EXPECT_EQ(result.AdmittedCount(), 1u);
  // The variant of a plain alternative still publishes.
  EXPECT_TRUE(producer.PublishWithPriority(LoanPayload{Stop{0, 3}}, 7, MessagePriority::HIGH));
  EXPECT_EQ(bus.QueueDepth(), 2u);
  while (bus.ProcessBatch() != 0) {
  }
  // No block was handed back for a forged message: the held one is not lent
  // again while it is held.
  std::vector<sluice::ipc::ShmLoan<Frame4K>> rest;
  for (auto loan = producer.Loan<Frame4K>(); loan; loan = producer.Loan<Frame4K>()) {
    EXPECT_NE(loan.Get(), held.Get());
    rest.push_back(std::move(loan));
  }
  EXPECT_EQ(rest.size() + 1, sluice::ipc::ShmBusTraits::kLoanBlocks);
}

// A callback that closes the bus ends the batch after its message, and the
// subscribers still to come for that message read a loaned block in place:
// the segment stays mapped until the batch ends.
TEST(ShmPublishLoanTest, ALoanIsStillReadableByLaterSubscribersAfterACallbackCloses) {
  const std::string name = UniqueName();
  LoanBus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  LoanProducer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  for (std::uint64_t seq = 1; seq <= 2; ++seq) {
    auto loan = producer.Loan<Frame4K>();
    ASSERT_TRUE(loan);
    sluice_ipc_test::FillFrame(*loan, seq);
    ASSERT_TRUE(producer.PublishLoan(std::move(loan), 7, MessagePriority::HIGH));
  }
  std::vector<std::uint64_t> read;
  auto closer = bus.Subscribe<sluice::ipc::Loaned<Frame4K>>(
      [&bus](const sluice::ipc::Loaned<Frame4K>&) { bus.Close(); });
  auto reader = bus.Subscribe<sluice::ipc::Loaned<Frame4K>>(
      [&read](const sluice::ipc::Loaned<Frame4K>& frame) {
        EXPECT_TRUE(sluice_ipc_test::FrameIsIntact(*frame));
        read.push_back(frame->seq);
      });
  ASSERT_TRUE(closer.IsValid() && reader.IsValid());
  EXPECT_EQ(bus.ProcessBatch(), 1u);  // the batch ended after the first message
  EXPECT_FALSE(bus.IsOpen());
  EXPECT_EQ(read, std::vector<std::uint64_t>{1});
  // Made again from no callback: a new segment, nothing queued.
  producer.Detach();
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  EXPECT_EQ(bus.ProcessBatch(), 0u);
}

// The catch-up pause (docs/api.md, "The catch-up pause") runs in the same
// consumer core as in process: the first empty ProcessBatch after a batch
// pauses once; ProcessBatchWait, whose empty look is followed by a wait,
// never does. Counted through a CatchUp policy of the test's own.
std::vector<std::uint32_t> shm_pauses;
struct CountingShmPause {
  static constexpr std::uint32_t kMostPauses = 128;
  static void Pause(std::uint32_t pauses) noexcept { shm_pauses.push_back(pauses); }
};
struct CountingShmTraits : sluice::ipc::ShmBusTraits {
  using CatchUp = CountingShmPause;
};

struct NoPauseShmTraits : sluice::ipc::ShmBusTraits {
  using CatchUp = sluice::NoCatchUpPause;
};
struct NoHistogramsShmTraits : sluice::ipc::ShmBusTraits {
  using Latency = sluice::NoLatencyHistograms;
};
struct NoHistogramsNoPauseShmTraits : NoHistogramsShmTraits {
  using CatchUp = sluice::NoCatchUpPause;
};
// The pause's state fits in padding the consumer had: no bus is larger.
static_assert(sizeof(sluice::ipc::ShmBus<Payload, kCapacity>) ==
              sizeof(sluice::ipc::ShmBus<Payload, kCapacity, NoPauseShmTraits>));
static_assert(sizeof(sluice::ipc::ShmBus<Payload, kCapacity, NoHistogramsShmTraits>) ==
              sizeof(sluice::ipc::ShmBus<Payload, kCapacity, NoHistogramsNoPauseShmTraits>));

TEST(ShmCatchUpPauseTest, TheFirstEmptyPollAfterABatchPausesAndAWaitNever) {
  const std::string name = UniqueName();
  sluice::ipc::ShmBus<Payload, kCapacity, CountingShmTraits> bus;
  sluice::ipc::ShmProducer<Payload, kCapacity, CountingShmTraits> producer;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  shm_pauses.clear();
  ASSERT_TRUE(
      producer.PublishWithPriority(Pose{0, 0, 0, 1}, 7, MessagePriority::MEDIUM).IsAdmitted());
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(100)), 1u);
  EXPECT_EQ(bus.ProcessBatchWait(std::chrono::milliseconds(1)), 0u);  // a wait: no pause
  EXPECT_TRUE(shm_pauses.empty());
  ASSERT_TRUE(
      producer.PublishWithPriority(Pose{0, 0, 0, 2}, 7, MessagePriority::MEDIUM).IsAdmitted());
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // the catch-up: pauses
  EXPECT_EQ(bus.ProcessBatch(), 0u);  // idle: does not
  EXPECT_EQ(shm_pauses, std::vector<std::uint32_t>{8});
}

}  // namespace
}  // namespace shm_publish_test
