// The traits' observer on the shared-memory bus (ShmBusTraits::Observer,
// sluice/observer.hpp): each side's own instance sees the events of its
// process, through the same observation point as the in-process bus's:
// a producer its admissions and refusals, the consumer its batches (with
// the fullest lane's fill), messages taken and errors. Its counts equal
// the bus's statistics. The observer is tests/counting_observer.hpp, the
// same file the in-process bus's test uses.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <sluice/ipc/shm_bus.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../counting_observer.hpp"
#include "bus_view.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

namespace observer_test {
namespace {

using sluice::MessagePriority;
using sluice::PublishOutcome;
using sluice::ipc::AttachError;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Stop;
using sluice_ipc_test::UniqueName;
using sluice_test::CountingObserver;

struct ObservedTraits : sluice::ipc::ShmBusTraits {
  using Observer = CountingObserver;
};
using Bus = sluice::ipc::ShmBus<Payload, kCapacity, ObservedTraits>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity, ObservedTraits>;
using Layout = sluice::ipc::detail::Layout<Payload, kCapacity, ObservedTraits>;

static_assert(std::is_same_v<sluice::ipc::ShmBusTraits::Observer, sluice::NoObserver>,
              "the shared bus observes nothing unless told");

TEST(ShmObserverTest, EachSideSeesTheEventsOfItsOwnProcess) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  std::uint64_t dispatched = 0;
  auto handle = bus.Subscribe<Stop>([&dispatched](const Stop& stop) {
    ++dispatched;
#if SLUICE_HAS_EXCEPTIONS
    if (stop.seq == 1) throw std::runtime_error("one");
#else
    (void)stop;
#endif
  });
  ASSERT_TRUE(handle.IsValid());

  std::uint64_t admitted = 0;
  while (producer.PublishWithPriority(Stop{0, admitted}, 7, MessagePriority::LOW)) ++admitted;
  EXPECT_EQ(producer.PublishWithPriority(Stop{0, 0}, 7, static_cast<MessagePriority>(3)).Outcome(),
            PublishOutcome::kRejected);
  const CountingObserver& produced = producer.GetObserver();
  EXPECT_GT(admitted, 0u);
  EXPECT_EQ(produced.Admitted(MessagePriority::LOW), admitted);
  EXPECT_EQ(produced.Refused(PublishOutcome::kRefusedFull), 1u);
  EXPECT_EQ(produced.Refused(PublishOutcome::kRejected), 1u);

  const CountingObserver& consumed = bus.GetObserver();
  EXPECT_EQ(consumed.Admitted(), 0u);  // the producer's events are its own
  EXPECT_EQ(bus.ProcessBatch(5), 5u);
  EXPECT_EQ(consumed.Batches(), 1u);
  EXPECT_EQ(consumed.LastBatchFill(), admitted);  // the one lane, full to LOW's limit
  EXPECT_EQ(consumed.LastBatchCount(), 5u);
  while (bus.ProcessBatch() != 0) {
  }
  EXPECT_EQ(dispatched, admitted);
  EXPECT_EQ(consumed.Taken(), admitted);
  EXPECT_EQ(produced.Taken(), 0u);

  const sluice::ipc::ShmBusStatistics stats = bus.GetStatistics();
  EXPECT_EQ(produced.Admitted(), stats.messages_published);
  EXPECT_EQ(produced.Refused(PublishOutcome::kRefusedFull), stats.messages_dropped);
  EXPECT_EQ(consumed.Taken(), stats.messages_processed);
#if SLUICE_HAS_EXCEPTIONS
  EXPECT_EQ(consumed.Errors(), 1u);
  EXPECT_EQ(consumed.Errors(), stats.processing_errors);
#endif

  EXPECT_EQ(consumed.Closed(), 0u);
  bus.Close();
  EXPECT_EQ(consumed.Closed(), 1u);  // the consumer's Close, once
  EXPECT_EQ(produced.Closed(), 0u);
  EXPECT_EQ(producer.PublishWithPriority(Stop{0, 0}, 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(produced.Refused(PublishOutcome::kClosed), 1u);
}

#if SLUICE_HAS_EXCEPTIONS
// An exit handler's error is counted and seen, and does not reach the error
// callback (no message failed).
TEST(ShmObserverTest, AThrowingExitHandlerIsSeenAndCounted) {
  const std::string name = UniqueName();
  Bus bus;
  sluice::ipc::ShmBusOptions options;
  options.peer_check_interval = std::chrono::nanoseconds(0);
  ASSERT_EQ(bus.Create(name, options), AttachError::kNone);
  static int reported = 0;
  reported = 0;
  ASSERT_TRUE(bus.SetErrorCallback([](const sluice::BusError&, void*) { ++reported; }));
  bus.OnProducerExit([](const sluice::ipc::ProducerExit&) { throw std::runtime_error("exit"); });
  {
    Producer producer;
    ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  }  // detached
  bus.CheckProducers();
  const sluice::ipc::ShmBusStatistics stats = bus.GetStatistics();
  EXPECT_EQ(stats.producers_detached, 1u);
  EXPECT_EQ(stats.processing_errors, 1u);
  EXPECT_EQ(bus.GetObserver().Errors(), stats.processing_errors);
  EXPECT_EQ(reported, 0);
}
#endif

// Where an envelope keeps its payload's alternative index: the one byte
// that reads k in an envelope of alternative k (each zero-filled first, so
// nothing else differs).
std::size_t AlternativeIndexOffset() {
  using Envelope = sluice::MessageEnvelope<Payload>;
  constexpr std::size_t kAlternatives = std::variant_size_v<Payload>;
  alignas(Envelope) unsigned char bytes[kAlternatives][sizeof(Envelope)];
  const auto make = [&](auto index) {
    std::memset(bytes[index], 0, sizeof(Envelope));
    new (bytes[index]) Envelope{{}, Payload(std::in_place_index<index>)};
  };
  make(std::integral_constant<std::size_t, 0>{});
  make(std::integral_constant<std::size_t, 1>{});
  make(std::integral_constant<std::size_t, 2>{});
  make(std::integral_constant<std::size_t, 3>{});
  static_assert(kAlternatives == 4, "the probe makes four alternatives");
  for (std::size_t at = 0; at < sizeof(Envelope); ++at) {
    bool index = true;
    for (std::size_t k = 0; k < kAlternatives; ++k) index = index && bytes[k][at] == k;
    if (index) return at;
  }
  return sizeof(Envelope);
}

// A message whose bytes were written wrong (its alternative index out of range) is
// counted corrupt and taken, and the observer does not see it: the batch's
// end counts the messages dispatched, and a batch that took only corrupt
// ones is not seen at all. The observer is the caller's: a Create after
// Close starts the statistics again, not it.
TEST(ShmObserverTest, ACorruptMessageIsNotSeen) {
  const std::string name = UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  constexpr std::uint64_t kMarker = 0x0BAD'0000'0000'0000ULL;
  // Where a Stop's seq lies in an envelope.
  sluice::MessageEnvelope<Payload> probe{{}, Stop{0, 0}};
  const auto* base = reinterpret_cast<const unsigned char*>(&probe);
  const auto seq_at = static_cast<std::size_t>(
      reinterpret_cast<const unsigned char*>(&std::get<Stop>(probe.payload).seq) - base);
  const std::size_t index_at = AlternativeIndexOffset();
  ASSERT_LT(index_at, sizeof(probe));
  sluice_ipc_test::BusView<Layout> writer;
  ASSERT_EQ(writer.Open(name), AttachError::kNone);
  // Writes the alternative index of the queued message whose seq is `seq`
  // out of range, in any lane; how many it found.
  const auto corrupt = [&](std::uint64_t seq) {
    int overwritten = 0;
    for (std::size_t part = 2; part < writer.kParts; ++part) {
      unsigned char* bytes = writer.PartAt(part).bytes;
      for (std::size_t at = seq_at; at + sizeof(std::uint64_t) <= writer.PartAt(part).size;
           at += 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes + at, sizeof(word));
        if (word != seq) continue;
        bytes[at - seq_at + index_at] = 0xFF;
        ++overwritten;
      }
    }
    return overwritten;
  };
  for (std::uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(producer.PublishWithPriority(Stop{0, kMarker + i}, 7, MessagePriority::HIGH));
  }
  ASSERT_EQ(corrupt(kMarker + 1), 1);
  EXPECT_EQ(bus.ProcessBatch(), 3u);  // corrupt ones included
  sluice::ipc::ShmBusStatistics stats = bus.GetStatistics();
  EXPECT_EQ(stats.corrupt, 1u);
  const CountingObserver& seen = bus.GetObserver();
  EXPECT_EQ(seen.Taken(), 2u);
  EXPECT_EQ(seen.Taken(), stats.messages_processed);
  EXPECT_EQ(seen.LastBatchCount(), 2u);
  EXPECT_EQ(seen.Batches(), 1u);

  ASSERT_TRUE(producer.PublishWithPriority(Stop{0, kMarker + 3}, 7, MessagePriority::HIGH));
  ASSERT_EQ(corrupt(kMarker + 3), 1);
  EXPECT_EQ(bus.ProcessBatch(), 1u);
  EXPECT_EQ(bus.GetStatistics().corrupt, 2u);
  EXPECT_EQ(seen.Batches(), 1u);  // a batch of corrupt ones only: not seen
  EXPECT_EQ(seen.Taken(), 2u);

  bus.Close();
  ASSERT_EQ(bus.Create(UniqueName()), AttachError::kNone);
  stats = bus.GetStatistics();
  EXPECT_EQ(stats.messages_processed, 0u);
  EXPECT_EQ(seen.Taken(), 2u);  // the observer's counts are its own
}

// An observer that can move goes with its producer; one that cannot (this
// file's CountingObserver, of atomics) stays with each object.
struct MovableCount {
  std::uint64_t admitted = 0;
  void OnAdmitted(const sluice::MessageHeader&) noexcept { ++admitted; }
  void OnRefused(PublishOutcome, MessagePriority, std::uint64_t) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {}
  void OnTaken(const sluice::MessageHeader&) noexcept {}
  void OnBatchEnd(std::uint32_t) noexcept {}
  void OnError(const sluice::BusError&) noexcept {}
};
struct MovableTraits : sluice::ipc::ShmBusTraits {
  using Observer = MovableCount;
};

TEST(ShmObserverTest, AMovableObserverMovesWithItsProducer) {
  const std::string name = UniqueName();
  sluice::ipc::ShmBus<Payload, kCapacity, MovableTraits> bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice::ipc::ShmProducer<Payload, kCapacity, MovableTraits> first;
  ASSERT_EQ(first.Attach(name), AttachError::kNone);
  for (std::uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(first.Publish(Stop{0, i}, 7));
  sluice::ipc::ShmProducer<Payload, kCapacity, MovableTraits> second = std::move(first);
  ASSERT_TRUE(second.Publish(Stop{0, 3}, 7));
  EXPECT_EQ(second.GetObserver().admitted, 4u);
  EXPECT_EQ(second.GetObserver().admitted, bus.GetStatistics().messages_published);
}

// OnDispatched (optional) follows each message's callbacks or visitor on
// the shared bus as in process.
struct DispatchEnds : sluice::NoObserver {
  static inline const std::uint64_t* callbacks = nullptr;
  static inline std::vector<std::uint64_t> seen;  // callbacks run at each OnDispatched
  void OnDispatched(const sluice::MessageHeader&) noexcept { seen.push_back(*callbacks); }
};
struct DispatchEndsTraits : sluice::ipc::ShmBusTraits {
  using Observer = DispatchEnds;
};

TEST(ShmObserverTest, OnDispatchedFollowsEachMessagesCallbacks) {
  const std::string name = UniqueName();
  sluice::ipc::ShmBus<Payload, kCapacity, DispatchEndsTraits> bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  sluice::ipc::ShmProducer<Payload, kCapacity, DispatchEndsTraits> producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  std::uint64_t callbacks = 0;
  DispatchEnds::callbacks = &callbacks;
  DispatchEnds::seen.clear();
  auto handle = bus.Subscribe<Stop>([&callbacks](const Stop&) { ++callbacks; });
  ASSERT_TRUE(handle.IsValid());
  for (std::uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(producer.Publish(Stop{0, i}, 7));
  EXPECT_EQ(bus.ProcessBatch(), 3u);
  EXPECT_EQ(DispatchEnds::seen, (std::vector<std::uint64_t>{1, 2, 3}));
  for (std::uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(producer.Publish(Stop{0, i}, 7));
  EXPECT_EQ(bus.ProcessBatchWith([&callbacks](const auto&) { callbacks += 10; }), 2u);
  EXPECT_EQ(DispatchEnds::seen, (std::vector<std::uint64_t>{1, 2, 3, 13, 23}));
}

}  // namespace
}  // namespace observer_test
