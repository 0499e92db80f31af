// The flight recorder on the shared-memory bus: the consumer's observer is
// the same FlightRecorderObserver as the in-process bus's (one consumer
// core), so a dump holds exactly the window of what the shared bus
// dispatched around its trigger.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <sluice/ipc/shm_bus.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "ipc_test_messages.hpp"
#include "ipc_test_peer.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/flight_recorder_observer.hpp"
#include "sluice/record/mcap_reader.hpp"

template <>
struct sluice::nats::Fields<sluice_ipc_test::Stop> {
  static constexpr auto kMembers =
      std::make_tuple(&sluice_ipc_test::Stop::reason, &sluice_ipc_test::Stop::seq);
};
template <>
struct sluice::nats::Fields<sluice_ipc_test::Pose> {
  static constexpr auto kMembers =
      std::make_tuple(&sluice_ipc_test::Pose::x, &sluice_ipc_test::Pose::y,
                      &sluice_ipc_test::Pose::theta, &sluice_ipc_test::Pose::seq);
};

namespace flight_recorder_shm_test {
namespace {

using sluice::ipc::AttachError;
using sluice_ipc_test::kCapacity;
using sluice_ipc_test::Payload;
using sluice_ipc_test::Pose;
using sluice_ipc_test::Stop;
using Recorder = sluice::record::FlightRecorder<Payload>;

struct FlightTraits : sluice::ipc::ShmBusTraits {
  using Observer = sluice::record::FlightRecorderObserver<Recorder>;
};
using Bus = sluice::ipc::ShmBus<Payload, kCapacity, FlightTraits>;
using Producer = sluice::ipc::ShmProducer<Payload, kCapacity, FlightTraits>;

TEST(ShmFlightRecorderTest, ADumpHoldsExactlyTheWindowTheSharedBusDispatched) {
  const std::string name = sluice_ipc_test::UniqueName();
  Bus bus;
  ASSERT_EQ(bus.Create(name), AttachError::kNone);
  Producer producer;
  ASSERT_EQ(producer.Attach(name), AttachError::kNone);
  sluice::record::FlightRecorderOptions options;
  options.before = 40;
  options.after = 20;
  options.path_prefix =
      std::string(SLUICE_IPC_SCRATCH_DIR) + "/shm_flight_" + std::to_string(getpid());
  Recorder recorder(options);
  ASSERT_TRUE(recorder.Keep<Stop>("/stop", "Stop"));
  ASSERT_TRUE(recorder.Keep<Pose>("/pose", "Pose"));
  bus.GetObserver().Attach(&recorder);
  // What the bus dispatched, in order: (type, seq).
  std::vector<std::pair<std::size_t, std::uint64_t>> log;
  std::uint64_t taken = 0;
  for (std::uint64_t seq = 0; seq < 400; ++seq) {
    ASSERT_TRUE(producer.PublishWithPriority(sluice_ipc_test::MakeMessage(seq), 1,
                                             sluice::MessagePriority::HIGH));
    if (seq % 8 == 7) {
      taken += bus.ProcessBatchWith(
          [&log](const auto& value, const sluice::MessageHeader&) {
            const Payload payload = value;
            log.push_back({payload.index(), sluice_ipc_test::SeqOf(payload)});
          },
          8);
      if (taken == 200) recorder.Trigger();
    }
  }
  ASSERT_EQ(recorder.WriteDumps(), 1u);
  ASSERT_EQ(recorder.Files().size(), 1u);
  // The slice [160, 220) of the log, of the kept types (Pose 0, Stop 1).
  std::vector<std::pair<std::size_t, std::uint64_t>> expected;
  for (std::size_t i = 160; i < 220; ++i) {
    if (log[i].first <= 1) expected.push_back(log[i]);
  }
  std::vector<std::pair<std::size_t, std::uint64_t>> dumped;
  sluice::record::McapReader reader(recorder.Files()[0]);
  sluice::record::McapMessage message;
  while (reader.Next(&message)) {
    const std::uint8_t* body = message.data + sluice::record::kWireHeaderBytes;
    const std::size_t size = message.size - sluice::record::kWireHeaderBytes;
    if (reader.Channel(message.channel_id)->topic == "/stop") {
      dumped.push_back({1, sluice::nats::DefaultCodec<Stop>::Decode(body, size)->seq});
    } else {
      dumped.push_back({0, sluice::nats::DefaultCodec<Pose>::Decode(body, size)->seq});
    }
  }
  EXPECT_EQ(reader.Error(), sluice::record::McapReadError::kNone);
  EXPECT_EQ(dumped, expected);
  EXPECT_EQ(recorder.Counts().messages_dumped, expected.size());
  EXPECT_EQ(recorder.Counts().messages_skipped, 60u - expected.size());
  EXPECT_EQ(reader.Metadata().at("sluice.flight").at("messages_before"), "40");
}

}  // namespace
}  // namespace flight_recorder_shm_test
