// The traits' observer on the shared-memory bus (ShmBusTraits::Observer,
// sluice/observer.hpp): each side's own instance sees the events of its
// process, through the same observation point as the in-process bus's:
// a producer its admissions and refusals, the consumer its batches (with
// the fullest lane's fill), messages taken and errors. Its counts equal
// the bus's statistics. The observer is tests/counting_observer.hpp, the
// same file the in-process bus's test uses.
#include <gtest/gtest.h>

#include <cstdint>
#include <sluice/ipc/shm_bus.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../counting_observer.hpp"
#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"

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

  bus.Close();
  EXPECT_EQ(producer.PublishWithPriority(Stop{0, 0}, 7, MessagePriority::HIGH).Outcome(),
            PublishOutcome::kClosed);
  EXPECT_EQ(produced.Refused(PublishOutcome::kClosed), 1u);
}

}  // namespace
