// Tracing (sluice/trace/): the record and the stream read back exactly, bad
// bytes have a named outcome, the ring counts what it could not keep, and a
// traced bus gives each admitted message one flow of three events.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <tuple>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/trace/trace_event.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/trace_stream.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace trace_test {
namespace {

using sluice::MessagePriority;
using sluice::trace::DecodeTraceEvent;
using sluice::trace::EncodeTraceEvent;
using sluice::trace::kTraceRecordBytes;
using sluice::trace::kTraceStreamHeaderBytes;
using sluice::trace::TraceEvent;
using sluice::trace::TraceEventKind;
using sluice::trace::TraceReadError;
using sluice::trace::TraceStreamReader;

// A stream: the header, then each of `events`' records.
std::vector<std::uint8_t> StreamOf(const std::vector<TraceEvent>& events) {
  std::vector<std::uint8_t> bytes(kTraceStreamHeaderBytes + events.size() * kTraceRecordBytes);
  sluice::trace::EncodeTraceStreamHeader(bytes.data());
  for (std::size_t i = 0; i < events.size(); ++i) {
    EncodeTraceEvent(events[i], bytes.data() + kTraceStreamHeaderBytes + i * kTraceRecordBytes);
  }
  return bytes;
}

// Every event of a stream, and the reader's error at its end.
std::pair<std::vector<TraceEvent>, TraceReadError> ReadAll(const std::vector<std::uint8_t>& bytes) {
  TraceStreamReader reader(bytes.data(), bytes.size());
  std::vector<TraceEvent> events;
  TraceEvent event;
  while (reader.Next(&event)) events.push_back(event);
  return {events, reader.Error()};
}

// One event of each kind, with each field at an edge of its range.
std::vector<TraceEvent> EveryKind() {
  std::vector<TraceEvent> events;
  TraceEvent admitted;
  admitted.kind = TraceEventKind::kAdmitted;
  admitted.msg_id = UINT64_MAX;
  admitted.stamp_ns = 0x0123456789ABCDEFull;
  admitted.time_ns = UINT64_MAX - 1;
  admitted.sender_id = UINT32_MAX;
  admitted.type_index = 7;
  admitted.bus_id = UINT16_MAX;
  admitted.lane = 255;
  admitted.priority = MessagePriority::HIGH;
  events.push_back(admitted);
  TraceEvent refused;
  refused.kind = TraceEventKind::kRefused;
  refused.priority = MessagePriority::LOW;
  refused.detail = static_cast<std::uint8_t>(sluice::PublishOutcome::kWouldDeadlock);
  refused.value = UINT32_MAX;
  events.push_back(refused);
  TraceEvent begin;
  begin.kind = TraceEventKind::kBatchBegin;
  begin.msg_id = 1u << 20;
  events.push_back(begin);
  TraceEvent taken = admitted;
  taken.kind = TraceEventKind::kTaken;
  taken.lane = UINT16_MAX;
  events.push_back(taken);
  TraceEvent dispatched = admitted;
  dispatched.kind = TraceEventKind::kDispatched;
  dispatched.msg_id = 0;
  events.push_back(dispatched);
  TraceEvent end;
  end.kind = TraceEventKind::kBatchEnd;
  end.value = 1;
  events.push_back(end);
  TraceEvent error;
  error.kind = TraceEventKind::kError;
  error.detail = static_cast<std::uint8_t>(sluice::BusErrorCode::kExitHandlerThrew);
  error.msg_id = 42;
  events.push_back(error);
  TraceEvent lost;
  lost.kind = TraceEventKind::kLost;
  lost.value = 12;
  events.push_back(lost);
  TraceEvent closed;
  closed.kind = TraceEventKind::kClosed;
  closed.bus_id = 3;
  closed.time_ns = 99;
  events.push_back(closed);
  // A shared-memory bus's lane events: the lane, the producer's pid,
  // killed (detail) and its lost claims (value).
  TraceEvent attached;
  attached.kind = TraceEventKind::kLaneAttached;
  attached.lane = 4;
  attached.sender_id = 31337;
  events.push_back(attached);
  TraceEvent exited = attached;
  exited.kind = TraceEventKind::kLaneExited;
  exited.detail = 1;
  events.push_back(exited);
  TraceEvent handed_back = exited;
  handed_back.kind = TraceEventKind::kLaneHandedBack;
  handed_back.value = 1;
  events.push_back(handed_back);
  return events;
}

TEST(TraceEventTest, EveryKindRoundTripsThroughItsRecord) {
  for (const TraceEvent& event : EveryKind()) {
    std::uint8_t record[kTraceRecordBytes];
    EncodeTraceEvent(event, record);
    TraceEvent read;
    ASSERT_EQ(DecodeTraceEvent(record, &read), TraceReadError::kNone);
    EXPECT_EQ(read, event) << "kind " << static_cast<int>(event.kind);
  }
}

// The record is the documented bytes, little-endian on every host.
TEST(TraceEventTest, TheRecordIsLittleEndianAtTheDocumentedOffsets) {
  TraceEvent event;
  event.kind = TraceEventKind::kTaken;
  event.msg_id = 0x0807060504030201ull;
  event.sender_id = 0x44332211u;
  event.bus_id = 0x0201;
  event.lane = 0x0403;
  event.priority = MessagePriority::HIGH;
  std::uint8_t record[kTraceRecordBytes];
  EncodeTraceEvent(event, record);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(record[i], i + 1);
  EXPECT_EQ(record[24], 0x11);
  EXPECT_EQ(record[27], 0x44);
  EXPECT_EQ(record[36], 0x01);
  EXPECT_EQ(record[37], 0x02);
  EXPECT_EQ(record[38], 0x03);
  EXPECT_EQ(record[39], 0x04);
  EXPECT_EQ(record[40], static_cast<std::uint8_t>(TraceEventKind::kTaken));
  EXPECT_EQ(record[41], 2);
  for (std::size_t i = 42; i < kTraceRecordBytes; ++i) EXPECT_EQ(record[i], 0) << i;
}

TEST(TraceEventTest, ARecordThatIsNotOneIsRefusedWithItsReason) {
  TraceEvent good;
  good.kind = TraceEventKind::kRefused;
  good.detail = static_cast<std::uint8_t>(sluice::PublishOutcome::kRefusedFull);
  std::uint8_t base[kTraceRecordBytes];
  EncodeTraceEvent(good, base);
  struct Case {
    std::size_t offset;
    std::uint8_t value;
    TraceReadError expected;
  };
  const Case cases[] = {
      {40, 0, TraceReadError::kUnknownKind},
      {40, sluice::trace::kLastTraceEventKind + 1, TraceReadError::kUnknownKind},
      {40, 0xFF, TraceReadError::kUnknownKind},
      {41, 3, TraceReadError::kBadPriority},
      {42, 0, TraceReadError::kBadDetail},  // a refusal that admitted
      {42, 8, TraceReadError::kBadDetail},  // past kWouldDeadlock
      {43, 1, TraceReadError::kNonZeroReserved},
      {47, 0x80, TraceReadError::kNonZeroReserved},
  };
  for (const Case& c : cases) {
    std::uint8_t record[kTraceRecordBytes];
    std::copy(base, base + kTraceRecordBytes, record);
    record[c.offset] = c.value;
    TraceEvent read;
    read.msg_id = 99;
    EXPECT_EQ(DecodeTraceEvent(record, &read), c.expected) << "byte " << c.offset;
    EXPECT_EQ(read.msg_id, 99u) << "written though refused";
  }
  // Details belong to their kinds: an error's code range, none elsewhere.
  TraceEvent error;
  error.kind = TraceEventKind::kError;
  for (int detail = 0; detail < 256; ++detail) {
    error.detail = static_cast<std::uint8_t>(detail);
    std::uint8_t record[kTraceRecordBytes];
    EncodeTraceEvent(error, record);
    TraceEvent read;
    EXPECT_EQ(DecodeTraceEvent(record, &read) == TraceReadError::kNone, detail >= 1 && detail <= 3)
        << detail;
    TraceEvent taken;
    taken.kind = TraceEventKind::kTaken;
    taken.detail = static_cast<std::uint8_t>(detail);
    EncodeTraceEvent(taken, record);
    EXPECT_EQ(DecodeTraceEvent(record, &read) == TraceReadError::kNone, detail == 0) << detail;
    // A lane that was left: killed (1) or not (0), nothing else.
    for (const TraceEventKind kind :
         {TraceEventKind::kLaneExited, TraceEventKind::kLaneHandedBack}) {
      TraceEvent left;
      left.kind = kind;
      left.detail = static_cast<std::uint8_t>(detail);
      EncodeTraceEvent(left, record);
      EXPECT_EQ(DecodeTraceEvent(record, &read) == TraceReadError::kNone, detail <= 1) << detail;
    }
  }
}

TEST(TraceStreamTest, AStreamReadsBackEveryRecord) {
  const std::vector<TraceEvent> events = EveryKind();
  const auto [read, error] = ReadAll(StreamOf(events));
  EXPECT_EQ(error, TraceReadError::kNone);
  EXPECT_EQ(read, events);
  // An empty trace is a header alone.
  const auto [none, empty_error] = ReadAll(StreamOf({}));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(empty_error, TraceReadError::kNone);
}

TEST(TraceStreamTest, AHeaderThatIsNotOneIsRefusedWithItsReason) {
  const std::vector<std::uint8_t> good = StreamOf(EveryKind());
  const auto refused = [&](std::size_t offset, std::uint8_t value) {
    std::vector<std::uint8_t> bytes = good;
    bytes[offset] = value;
    const auto [events, error] = ReadAll(bytes);
    EXPECT_TRUE(events.empty());
    return error;
  };
  EXPECT_EQ(refused(0, 's'), TraceReadError::kBadMagic);
  EXPECT_EQ(refused(3, 0), TraceReadError::kBadMagic);
  EXPECT_EQ(refused(4, 2), TraceReadError::kUnknownVersion);
  EXPECT_EQ(refused(5, 1), TraceReadError::kUnknownVersion);
  EXPECT_EQ(refused(6, 40), TraceReadError::kBadRecordSize);
  EXPECT_EQ(refused(15, 1), TraceReadError::kNonZeroReserved);
  for (std::size_t size = 0; size < kTraceStreamHeaderBytes; ++size) {
    TraceStreamReader reader(good.data(), size);
    TraceEvent event;
    EXPECT_FALSE(reader.Next(&event));
    EXPECT_EQ(reader.Error(), TraceReadError::kTruncated) << size;
  }
}

// Events up to the first bad record, then the error and where it is.
TEST(TraceStreamTest, ReadingStopsAtTheFirstBadRecordAndSaysWhere) {
  const std::vector<TraceEvent> events = EveryKind();
  std::vector<std::uint8_t> bytes = StreamOf(events);
  bytes[kTraceStreamHeaderBytes + 3 * kTraceRecordBytes + 41] = 9;  // the fourth's priority
  TraceStreamReader reader(bytes.data(), bytes.size());
  TraceEvent event;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(reader.Next(&event));
    EXPECT_EQ(event, events[static_cast<std::size_t>(i)]);
  }
  EXPECT_FALSE(reader.Next(&event));
  EXPECT_EQ(reader.Error(), TraceReadError::kBadPriority);
  EXPECT_EQ(reader.Offset(), kTraceStreamHeaderBytes + 3 * kTraceRecordBytes);
  EXPECT_FALSE(reader.Next(&event));  // it stays there
  // A stream cut inside its last record: the records before it, then
  // kTruncated.
  std::vector<std::uint8_t> cut = StreamOf(events);
  cut.resize(cut.size() - 1);
  const auto [read, error] = ReadAll(cut);
  EXPECT_EQ(read.size(), events.size() - 1);
  EXPECT_EQ(error, TraceReadError::kTruncated);
}

// Random records behind a good header: each is either an event whose
// record is exactly those bytes, or a named error; nothing else happens
// (CI runs this under AddressSanitizer and UndefinedBehaviorSanitizer).
TEST(TraceStreamTest, RandomRecordsAreReadExactlyOrRefused) {
  std::mt19937_64 random(20261207);
  std::size_t read_count = 0;
  std::size_t refused_count = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::uint8_t> bytes(kTraceStreamHeaderBytes + kTraceRecordBytes);
    sluice::trace::EncodeTraceStreamHeader(bytes.data());
    for (std::size_t i = kTraceStreamHeaderBytes; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::uint8_t>(random());
    }
    // Often a plausible kind, priority, detail and reserved tail, so that
    // both outcomes are common.
    if (round % 2 == 0) {
      std::uint8_t* record = bytes.data() + kTraceStreamHeaderBytes;
      record[40] = static_cast<std::uint8_t>(1 + random() % 8);
      record[41] = static_cast<std::uint8_t>(random() % 4);
      record[42] = static_cast<std::uint8_t>(random() % 3);
      for (std::size_t i = 43; i < kTraceRecordBytes; ++i) record[i] = 0;
    }
    TraceStreamReader reader(bytes.data(), bytes.size());
    TraceEvent event;
    if (reader.Next(&event)) {
      std::uint8_t again[kTraceRecordBytes];
      EncodeTraceEvent(event, again);
      ASSERT_TRUE(
          std::equal(again, again + kTraceRecordBytes, bytes.data() + kTraceStreamHeaderBytes))
          << "round " << round;
      ++read_count;
    } else {
      ASSERT_NE(reader.Error(), TraceReadError::kNone) << "round " << round;
      ++refused_count;
    }
  }
  EXPECT_GT(read_count, 1000u);
  EXPECT_GT(refused_count, 1000u);
}

// Drains everything `ring` holds into a stream, read back.
template <typename Ring>
std::vector<TraceEvent> DrainedStream(Ring& ring, std::uint32_t most = 4096) {
  std::vector<std::uint8_t> bytes(kTraceStreamHeaderBytes);
  sluice::trace::EncodeTraceStreamHeader(bytes.data());
  (void)sluice::trace::DrainRecords(
      ring,
      [&bytes](const std::uint8_t* record, std::size_t size) {
        bytes.insert(bytes.end(), record, record + size);
      },
      most);
  auto [events, error] = ReadAll(bytes);
  EXPECT_EQ(error, TraceReadError::kNone);
  return events;
}

TraceEvent Numbered(std::uint32_t i) {
  TraceEvent event;
  event.kind = TraceEventKind::kBatchEnd;
  event.value = i;
  return event;
}

// Events that find the ring full are counted; with no Record after them
// to report it, the drain writes the count after the events it drained
// (the loss came when they filled the ring).
TEST(TraceRingTest, EventsPastTheRingAreCountedLostAndTheDrainSaysHowManyAfterThem) {
  sluice::trace::TraceRing<8> ring(/*ring_id=*/5);
  for (std::uint32_t i = 0; i < 20; ++i) EXPECT_EQ(ring.Record(Numbered(i)), i < 8) << i;
  EXPECT_EQ(ring.Lost(), 12u);
  EXPECT_EQ(ring.Depth(), 8u);
  const std::vector<TraceEvent> events = DrainedStream(ring);
  EXPECT_EQ(ring.Lost(), 0u);
  EXPECT_EQ(ring.Depth(), 0u);
  ASSERT_EQ(events.size(), 9u);
  for (std::uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(events[i].kind, TraceEventKind::kBatchEnd);
    EXPECT_EQ(events[i].value, i);  // oldest first
  }
  EXPECT_EQ(events[8].kind, TraceEventKind::kLost);
  EXPECT_EQ(events[8].value, 12u);
  EXPECT_EQ(events[8].bus_id, 5u);
  EXPECT_TRUE(DrainedStream(ring).empty());  // nothing since
  EXPECT_TRUE(ring.Record(TraceEvent{}));    // room again
}

// The first Record with room after a loss reports it in place: the hole
// is after the events the full ring held and before that Record's event.
TEST(TraceRingTest, ALossIsReportedWhereItIsByTheNextRecordThatFindsRoom) {
  sluice::trace::TraceRing<8> ring(/*ring_id=*/3);
  for (std::uint32_t i = 0; i < 10; ++i) (void)ring.Record(Numbered(i));  // 8 and 9 lost
  std::vector<TraceEvent> events = DrainedStream(ring, /*most=*/3);       // 0, 1, 2
  ASSERT_EQ(events.size(), 4u);  // and the loss, which no Record reported yet
  EXPECT_EQ(events[3].kind, TraceEventKind::kLost);
  for (std::uint32_t i = 10; i < 13; ++i) (void)ring.Record(Numbered(i));  // 3 of 3 room
  (void)ring.Record(Numbered(13));                                         // lost
  (void)ring.Drain([](const TraceEvent&) {}, 2);                           // 3, 4 leave
  EXPECT_TRUE(ring.Record(Numbered(14)));  // reports the loss of 13 first
  events = DrainedStream(ring);
  std::vector<std::uint32_t> values;
  for (const TraceEvent& event : events) {
    values.push_back(event.kind == TraceEventKind::kLost ? 1000 + event.value : event.value);
  }
  const std::vector<std::uint32_t> expected = {5, 6, 7, 10, 11, 12, 1001, 14};
  EXPECT_EQ(values, expected);
  EXPECT_EQ(ring.Lost(), 0u);
}

struct Small {
  std::uint32_t value;
};
struct Medium {
  std::uint64_t value;
  std::uint64_t more;
};
struct Large {
  std::uint8_t bytes[40];
};
using TracedPayload = std::variant<Small, Medium, Large>;
using Ring = sluice::trace::TraceRing<4096>;
struct TracedTraits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<Ring>;
};
using TracedBus = sluice::AsyncBus<TracedPayload, 16, sluice::ProducerModel::kMulti, TracedTraits>;

std::vector<TraceEvent> Drained(Ring& ring) {
  std::vector<TraceEvent> events;
  while (ring.Drain([&events](const TraceEvent& event) { events.push_back(event); }) != 0) {
  }
  return events;
}

// A message's three events, by (lane, msg_id).
struct Flow {
  std::vector<TraceEvent> admitted, taken, dispatched;
  std::size_t taken_at = 0, dispatched_at = 0;
};

TracedPayload PayloadFor(std::uint32_t i) {
  switch (i % 3) {
    case 0:
      return Small{i};
    case 1:
      return Medium{i, i};
    default:
      return Large{};
  }
}

// Every admitted message is one flow: admitted, taken, dispatched, each
// once, with the payload index it was published with, its priority,
// sender and stamp; every refusal is one event with its outcome; each
// batch is a begin and an end that counts its messages.
TEST(TracingObserverTest, EveryAdmittedMessageIsOneFlowAndEveryRefusalIsCounted) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, /*bus_id=*/3));
  std::uint64_t dispatched = 0;
  auto small = bus.Subscribe<Small>([&dispatched](const Small&) { ++dispatched; });
  auto medium = bus.Subscribe<Medium>([&dispatched](const Medium&) { ++dispatched; });
  auto large = bus.Subscribe<Large>([&dispatched](const Large&) { ++dispatched; });
  ASSERT_TRUE(small.IsValid() && medium.IsValid() && large.IsValid());
  const MessagePriority priorities[] = {MessagePriority::LOW, MessagePriority::MEDIUM,
                                        MessagePriority::HIGH};
  std::uint32_t admitted = 0;
  std::uint32_t refused = 0;
  std::uint32_t batches = 0;
  for (std::uint32_t i = 0; i < 200; ++i) {
    // 40 at a time into 16 slots: every priority is refused some of the time.
    if (bus.PublishWithPriority(PayloadFor(i), /*sender_id=*/i, priorities[i % 3])) {
      ++admitted;
    } else {
      ++refused;
    }
    if (i % 40 == 39) {
      while (bus.ProcessBatch() != 0) ++batches;
    }
  }
  ASSERT_GT(refused, 0u);
  ASSERT_EQ(dispatched, admitted);
  ASSERT_EQ(ring.Lost(), 0u);
  const std::vector<TraceEvent> events = Drained(ring);

  std::map<std::pair<std::uint16_t, std::uint64_t>, Flow> flows;
  std::uint64_t refused_events = 0;
  std::uint32_t begins = 0;
  std::uint64_t ended = 0;
  for (std::size_t at = 0; at < events.size(); ++at) {
    const TraceEvent& event = events[at];
    EXPECT_EQ(event.bus_id, 3u);
    EXPECT_NE(event.time_ns, 0u);
    const std::pair<std::uint16_t, std::uint64_t> key{event.lane, event.msg_id};
    switch (event.kind) {
      case TraceEventKind::kAdmitted:
        flows[key].admitted.push_back(event);
        break;
      case TraceEventKind::kTaken:
        flows[key].taken.push_back(event);
        flows[key].taken_at = at;
        break;
      case TraceEventKind::kDispatched:
        flows[key].dispatched.push_back(event);
        flows[key].dispatched_at = at;
        break;
      case TraceEventKind::kRefused:
        EXPECT_EQ(event.detail, static_cast<std::uint8_t>(sluice::PublishOutcome::kRefusedFull));
        refused_events += event.value;
        break;
      case TraceEventKind::kBatchBegin:
        ++begins;
        break;
      case TraceEventKind::kBatchEnd:
        ended += event.value;
        break;
      default:
        ADD_FAILURE() << "unexpected kind " << static_cast<int>(event.kind);
    }
  }
  EXPECT_EQ(refused_events, refused);
  EXPECT_EQ(begins, batches);
  EXPECT_EQ(ended, admitted);
  ASSERT_EQ(flows.size(), admitted);
  for (const auto& [key, flow] : flows) {
    ASSERT_EQ(flow.admitted.size(), 1u) << key.second;
    ASSERT_EQ(flow.taken.size(), 1u) << key.second;
    ASSERT_EQ(flow.dispatched.size(), 1u) << key.second;
    const TraceEvent& published = flow.admitted[0];
    const std::uint32_t i = published.sender_id;
    EXPECT_EQ(published.type_index, i % 3) << i;
    EXPECT_EQ(published.priority, priorities[i % 3]) << i;
    EXPECT_NE(published.stamp_ns, 0u);
    for (const TraceEvent* seen : {&flow.taken[0], &flow.dispatched[0]}) {
      EXPECT_EQ(seen->type_index, published.type_index) << i;
      EXPECT_EQ(seen->priority, published.priority) << i;
      EXPECT_EQ(seen->sender_id, i);
      EXPECT_EQ(seen->stamp_ns, published.stamp_ns) << i;
    }
    EXPECT_LT(flow.taken_at, flow.dispatched_at) << i;
    EXPECT_LE(flow.taken[0].time_ns, flow.dispatched[0].time_ns) << i;
  }
}

// The visitor's path and the batch publish's are traced as the rest.
TEST(TracingObserverTest, AVisitorsDispatchAndABatchPublishAreTracedToo) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 1));
  const std::vector<TracedPayload> batch = {PayloadFor(0), PayloadFor(1), PayloadFor(2)};
  ASSERT_EQ(bus.PublishBatch(batch.begin(), batch.end(), 7, MessagePriority::HIGH).AdmittedCount(),
            3u);
  std::uint32_t visited = 0;
  EXPECT_EQ(bus.ProcessBatchWith([&visited](const auto&) { ++visited; }), 3u);
  std::vector<std::uint32_t> admitted_types, taken_types, dispatched_types;
  for (const TraceEvent& event : Drained(ring)) {
    if (event.kind == TraceEventKind::kAdmitted) admitted_types.push_back(event.type_index);
    if (event.kind == TraceEventKind::kTaken) taken_types.push_back(event.type_index);
    if (event.kind == TraceEventKind::kDispatched) dispatched_types.push_back(event.type_index);
  }
  const std::vector<std::uint32_t> expected = {0, 1, 2};
  EXPECT_EQ(admitted_types, expected);
  EXPECT_EQ(taken_types, expected);
  EXPECT_EQ(dispatched_types, expected);
}

TEST(TracingObserverTest, NothingIsRecordedBeforeAttachOrAfterDetach) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.Publish(Small{1}));
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 2));
  ASSERT_TRUE(bus.Publish(Small{2}));
  bus.GetObserver().Detach();
  ASSERT_TRUE(bus.Publish(Small{3}));
  EXPECT_EQ(bus.ProcessBatchWith([](const auto&) {}), 3u);
  const std::vector<TraceEvent> events = Drained(ring);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, TraceEventKind::kAdmitted);
  EXPECT_EQ(events[0].msg_id, 1u);  // the second message's position
}

// Closing the bus is one kClosed event, however many Close calls follow;
// the refusals after it are kRefused events with kClosed.
TEST(TracingObserverTest, ACloseIsOneClosedEvent) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 4));
  ASSERT_TRUE(bus.Publish(Small{1}));
  bus.Close();
  bus.Close();
  EXPECT_FALSE(bus.Publish(Small{2}));
  const std::vector<TraceEvent> events = Drained(ring);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, TraceEventKind::kAdmitted);
  EXPECT_EQ(events[1].kind, TraceEventKind::kClosed);
  EXPECT_EQ(events[1].bus_id, 4u);
  EXPECT_EQ(events[2].kind, TraceEventKind::kRefused);
  EXPECT_EQ(events[2].detail, static_cast<std::uint8_t>(sluice::PublishOutcome::kClosed));
}

// Bad input with a priority that is none of the three is a kRefused event
// (kRejected) that the stream reads back, recorded as MEDIUM; the trace
// goes on after it.
TEST(TracingObserverTest, ARejectedPublishWithABadPriorityLeavesTheTraceReadable) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 1));
  EXPECT_EQ(bus.PublishWithPriority(Small{1}, 0, static_cast<MessagePriority>(7)).Outcome(),
            sluice::PublishOutcome::kRejected);
  ASSERT_TRUE(bus.Publish(Small{2}));
  const std::vector<TraceEvent> events = DrainedStream(ring);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, TraceEventKind::kRefused);
  EXPECT_EQ(events[0].detail, static_cast<std::uint8_t>(sluice::PublishOutcome::kRejected));
  EXPECT_EQ(events[0].priority, MessagePriority::MEDIUM);
  EXPECT_EQ(events[1].kind, TraceEventKind::kAdmitted);
}

// The bus id is the first Attach's: another id is refused, so no event
// carries an id its bus did not have; the same id may attach again.
TEST(TracingObserverTest, TheBusIdIsTheFirstAttachsAndAnotherIsRefused) {
  Ring first;
  Ring second;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&first, 1));
  EXPECT_FALSE(bus.GetObserver().Attach(&second, 2));
  ASSERT_TRUE(bus.Publish(Small{1}));
  bus.GetObserver().Detach();
  EXPECT_FALSE(bus.GetObserver().Attach(&second, 2));
  ASSERT_TRUE(bus.GetObserver().Attach(&second, 1));
  ASSERT_TRUE(bus.Publish(Small{2}));
  for (Ring* ring : {&first, &second}) {
    const std::vector<TraceEvent> events = Drained(*ring);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].bus_id, 1u);
  }
}

// A refusal of more than 2^32 - 1 messages at once is several events whose
// counts add up to it.
TEST(TracingObserverTest, ARefusalCountPast32BitsIsSplitIntoEventsThatAddUp) {
  Ring ring;
  sluice::trace::TracingObserver<Ring> observer;
  ASSERT_TRUE(observer.Attach(&ring, 1));
  const std::uint64_t count = 2 * std::uint64_t{UINT32_MAX} + 7;
  observer.OnRefused(sluice::PublishOutcome::kClosed, MessagePriority::HIGH, count);
  std::uint64_t total = 0;
  const std::vector<TraceEvent> events = Drained(ring);
  for (const TraceEvent& event : events) total += event.value;
  EXPECT_EQ(events.size(), 3u);
  EXPECT_EQ(total, count);
}

// Moving the observer moves the attachment (a shared-memory producer moves
// its observer); the one moved from records nothing.
TEST(TracingObserverTest, AMovedObserverKeepsRecordingAndTheOneMovedFromStops) {
  Ring ring;
  sluice::trace::TracingObserver<Ring> from;
  ASSERT_TRUE(from.Attach(&ring, 6));
  sluice::trace::TracingObserver<Ring> to(std::move(from));
  to.OnBatchEnd(1);
  from.OnBatchEnd(2);  // NOLINT(bugprone-use-after-move): what the test checks
  const std::vector<TraceEvent> events = Drained(ring);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value, 1u);
  EXPECT_EQ(events[0].bus_id, 6u);
}

#if SLUICE_HAS_EXCEPTIONS
// A callback that throws: an error event naming the message, then its
// dispatch still ends its flow.
TEST(TracingObserverTest, AThrowingCallbackIsAnErrorEventInsideItsFlow) {
  Ring ring;
  TracedBus bus;
  ASSERT_TRUE(bus.GetObserver().Attach(&ring, 1));
  auto handle = bus.Subscribe<Medium>([](const Medium&) { throw std::runtime_error("no"); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_TRUE(bus.Publish(Medium{5, 5}, /*sender_id=*/9));
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  std::vector<TraceEventKind> kinds;
  for (const TraceEvent& event : Drained(ring)) {
    kinds.push_back(event.kind);
    if (event.kind == TraceEventKind::kError) {
      EXPECT_EQ(event.detail, static_cast<std::uint8_t>(sluice::BusErrorCode::kCallbackThrew));
      EXPECT_EQ(event.msg_id, 0u);
      EXPECT_EQ(event.sender_id, 9u);
      EXPECT_EQ(event.type_index, 1u);
    }
  }
  const std::vector<TraceEventKind> expected = {
      TraceEventKind::kAdmitted, TraceEventKind::kBatchBegin, TraceEventKind::kTaken,
      TraceEventKind::kError,    TraceEventKind::kDispatched, TraceEventKind::kBatchEnd};
  EXPECT_EQ(kinds, expected);
}
#endif

}  // namespace
}  // namespace trace_test
