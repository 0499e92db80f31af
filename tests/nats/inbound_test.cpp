// The bridge's receiver on its own: frames handed to it as the client's
// thread would, judged and delivered into a real bus. No server: its
// connection is never opened.
#include "sluice/nats/inbound.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/bus.hpp"
#include "test_messages.hpp"

namespace inbound_test {
namespace {

using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice::nats::FrameHeader;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::SensorReading;

using Payload = std::variant<SensorReading, sluice::nats::Remote<EmergencyStop>>;
using Bus = sluice::MpscBus<Payload, 64>;
using Receiver = sluice::nats::detail::Receiver<Bus>;
using Type = sluice::nats::detail::InboundType<Receiver>;

constexpr std::uint64_t kOwnOrigin = 100;
constexpr std::uint64_t kPeer = 7;
constexpr std::uint16_t kReadingId = 1;
constexpr std::uint16_t kStopId = 2;
constexpr auto kMedium = static_cast<std::size_t>(MessagePriority::MEDIUM);

constexpr Type kReading{
    kReadingId, 0, &Receiver::Deliver<SensorReading, sluice::nats::DefaultCodec<SensorReading>>};
constexpr Type kRemoteStop{kStopId, 1,
                           &Receiver::Deliver<sluice::nats::Remote<EmergencyStop>,
                                              sluice::nats::DefaultCodec<EmergencyStop>>};

// A frame as a sending bridge makes it: its header, then the codec's bytes.
template <typename T>
std::string Frame(const T& value, FrameHeader header) {
  std::string frame(sluice::nats::kFrameHeaderSize, '\0');
  EXPECT_TRUE(sluice::nats::DefaultCodec<T>::Encode(value, frame));
  header.payload_size = static_cast<std::uint32_t>(frame.size() - sluice::nats::kFrameHeaderSize);
  sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(frame.data()));
  return frame;
}

FrameHeader Header(std::uint64_t sequence, std::uint16_t type_id = kReadingId) {
  FrameHeader header;
  header.priority = MessagePriority::MEDIUM;
  header.type_id = type_id;
  header.sender_id = 5;
  header.origin_id = kPeer;
  header.instance_id = 11;
  header.sequence = sequence;
  return header;
}

class ReceiverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.on_reject = [this](FrameError error, std::string_view subject) {
      rejections_.emplace_back(error, std::string(subject));
    };
    (void)bus_.Subscribe<SensorReading>(
        [this](const SensorReading& reading, const sluice::MessageHeader& header) {
          readings_.push_back(reading.seq);
          headers_.push_back(header);
        });
    (void)bus_.Subscribe<sluice::nats::Remote<EmergencyStop>>(
        [this](const sluice::nats::Remote<EmergencyStop>& stop, const sluice::MessageHeader&) {
          stops_.push_back(stop);
        });
  }

  // The receiver and one MEDIUM subscription of "plant.sensor" carrying
  // `types`; made after the test has set its options.
  void Open(std::vector<Type> types = {kReading}) {
    receiver_.emplace(bus_, options_, kOwnOrigin, counters_, connection_, subscriptions_);
    sluice::nats::detail::InboundSubject subject;
    subject.subject = "plant.sensor";
    for (const Type& type : types) subject.type_ids.push_back(type.type_id);
    subscription_ = receiver_->MakeSubscription(subject, std::move(types), MessagePriority::MEDIUM);
  }

  void Hand(const std::string& frame) {
    receiver_->HandleFrame(*subscription_, "plant.sensor.medium",
                           reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  }

  std::uint64_t Rejected(FrameError error) const {
    return counters_.rejected[static_cast<std::size_t>(error)].load();
  }

  void Dispatch() {
    while (bus_.ProcessBatch() > 0) {
    }
  }

  sluice::nats::BridgeOptions options_;
  sluice::nats::detail::Counters counters_;
  sluice::nats::detail::Connection connection_{options_, counters_, {}};
  sluice::nats::detail::SubscriptionSet<Receiver> subscriptions_;
  Bus bus_;
  std::optional<Receiver> receiver_;
  std::unique_ptr<Receiver::Subscription> subscription_;
  std::vector<std::uint64_t> readings_;
  std::vector<sluice::MessageHeader> headers_;
  std::vector<sluice::nats::Remote<EmergencyStop>> stops_;
  std::vector<std::pair<FrameError, std::string>> rejections_;
};

TEST_F(ReceiverTest, AFrameArrivesWithItsPriorityMarkedRemote) {
  Open();
  EXPECT_EQ(subscription_->subject, "plant.sensor.medium");
  EXPECT_TRUE(subscription_->count_gaps);
  Hand(Frame(SensorReading{3, 1.5F, 41}, Header(1)));
  Dispatch();
  ASSERT_EQ(readings_.size(), 1u);
  EXPECT_EQ(readings_[0], 41u);
  EXPECT_EQ(headers_[0].priority, MessagePriority::MEDIUM);
  EXPECT_EQ(headers_[0].sender_id, 5u | options_.remote_sender_flag);
  EXPECT_EQ(counters_.frames_received.load(), 1u);
  EXPECT_EQ(counters_.delivered[kMedium].load(), 1u);
  EXPECT_TRUE(rejections_.empty());
}

TEST_F(ReceiverTest, ItsOwnFramesAnotherPrioritysAndAnUntrustedOriginsAreRefused) {
  options_.allowed_origins[kMedium] = {kPeer};
  Open();
  FrameHeader own = Header(1);
  own.origin_id = kOwnOrigin;
  Hand(Frame(SensorReading{3, 1.5F, 1}, own));
  EXPECT_EQ(counters_.echo_suppressed.load(), 1u);
  FrameHeader high = Header(2);
  high.priority = MessagePriority::HIGH;
  Hand(Frame(SensorReading{3, 1.5F, 2}, high));
  FrameHeader stranger = Header(3);
  stranger.origin_id = kPeer + 1;
  Hand(Frame(SensorReading{3, 1.5F, 3}, stranger));
  Dispatch();
  EXPECT_TRUE(readings_.empty());
  EXPECT_EQ(Rejected(FrameError::kPriorityMismatch), 1u);
  EXPECT_EQ(Rejected(FrameError::kOriginNotAllowed), 1u);
  ASSERT_EQ(rejections_.size(), 2u);  // the echo is no refusal
  EXPECT_EQ(rejections_[0].first, FrameError::kPriorityMismatch);
  EXPECT_EQ(rejections_[0].second, "plant.sensor.medium");
  EXPECT_EQ(rejections_[1].first, FrameError::kOriginNotAllowed);
}

// A frame of the subscription's priority delivered on a subject of another
// priority (a server or relay that delivers on a subject the subscription
// did not name) is refused as priority_mismatch: the docs' "the frame's
// priority is not the suffix of the subject it came on". (Before, only the
// subscription's priority was compared, and the frame was dispatched.)
TEST_F(ReceiverTest, AFrameOnASubjectOfAnotherPriorityIsRefused) {
  Open();
  const std::string frame = Frame(SensorReading{3, 1.5F, 7}, Header(1));
  const char* const other_subjects[] = {"plant.sensor.high", "plant.sensor.low"};
  for (const char* other : other_subjects) {
    receiver_->HandleFrame(*subscription_, other,
                           reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
  }
  Dispatch();
  EXPECT_TRUE(readings_.empty());
  EXPECT_EQ(Rejected(FrameError::kPriorityMismatch), 2u);
  Hand(frame);
  Dispatch();
  ASSERT_EQ(readings_.size(), 1u) << "on its own priority's subject it is admitted";
}

TEST_F(ReceiverTest, EachFrameIsJudgedOnItsStream) {
  Open();
  Hand(Frame(SensorReading{3, 1.5F, 1}, Header(1)));
  Hand(Frame(SensorReading{3, 1.5F, 1}, Header(1)));  // a replay
  Hand(Frame(SensorReading{3, 1.5F, 3}, Header(3)));  // 2 missing
  EXPECT_EQ(receiver_->Streams().CountsNow().gaps, 1u);
  Hand(Frame(SensorReading{3, 1.5F, 2}, Header(2)));  // late, not lost
  Dispatch();
  EXPECT_EQ(readings_, (std::vector<std::uint64_t>{1, 3, 2}));
  EXPECT_EQ(Rejected(FrameError::kDuplicate), 1u);
  const sluice::nats::StreamCounts counts = receiver_->Streams().CountsNow();
  EXPECT_EQ(counts.gaps, 0u);
  EXPECT_EQ(counts.reordered, 1u);
  EXPECT_EQ(counts.duplicates, 1u);
  // Forgotten (StopReceiving): the stream starts anew, 1 is new again.
  receiver_->Streams().Forget("plant.sensor");
  Hand(Frame(SensorReading{3, 1.5F, 1}, Header(1)));
  Dispatch();
  EXPECT_EQ(readings_.size(), 4u);
}

TEST_F(ReceiverTest, AnUnknownTypeAndAFrameWithoutANumberAreRefused) {
  Open();
  Hand(Frame(EmergencyStop{1, 2, 3}, Header(1, kStopId)));
  FrameHeader unnumbered = Header(0);
  Hand(Frame(SensorReading{3, 1.5F, 9}, unnumbered));
  Dispatch();
  EXPECT_TRUE(readings_.empty());
  EXPECT_EQ(Rejected(FrameError::kUnknownType), 1u);
  EXPECT_EQ(Rejected(FrameError::kUnsequenced), 1u);
}

TEST_F(ReceiverTest, UnsequencedFramesPassWhenVersion1IsAccepted) {
  options_.accept_version_1 = true;
  Open();
  Hand(Frame(SensorReading{3, 1.5F, 9}, Header(0)));
  Dispatch();
  EXPECT_EQ(readings_, (std::vector<std::uint64_t>{9}));
  EXPECT_EQ(counters_.unsequenced.load(), 1u);
}

TEST_F(ReceiverTest, ARemoteTypeCarriesTheFramesProvenance) {
  Open({kReading, kRemoteStop});
  Hand(Frame(EmergencyStop{4, 8, 15}, Header(6, kStopId)));
  Dispatch();
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].value.reason, 8u);
  EXPECT_EQ(stops_[0].provenance.origin_id, kPeer);
  EXPECT_EQ(stops_[0].provenance.instance_id, 11u);
  EXPECT_EQ(stops_[0].provenance.sequence, 6u);
  EXPECT_EQ(stops_[0].provenance.type_id, kStopId);
  EXPECT_EQ(stops_[0].provenance.sender_id, 5u);
}

// At least once (a JetStream message): one the full bus refuses is handed
// back and not noted, so its redelivery is admitted; once admitted, a
// redelivery is a duplicate.
TEST_F(ReceiverTest, AMessageHandedBackIsNewWhenItComesAgain) {
  Open();
  while (bus_.PublishAttempt(SensorReading{0, 0.0F, 0}, 1, MessagePriority::MEDIUM)) {
  }
  const std::string frame = Frame(SensorReading{3, 1.5F, 77}, Header(1));
  sluice::nats::FrameView view;
  ASSERT_EQ(sluice::nats::DecodeFrame(reinterpret_cast<const std::uint8_t*>(frame.data()),
                                      frame.size(), &view, options_.max_payload),
            FrameError::kNone);
  bool admitted = true;
  EXPECT_EQ(receiver_->Route(*subscription_, "plant.sensor.medium", view, &admitted),
            FrameError::kNone);
  EXPECT_FALSE(admitted);
  EXPECT_EQ(counters_.bus_dropped[kMedium].load(), 0u);  // handed back, not dropped
  Dispatch();
  readings_.clear();
  EXPECT_EQ(receiver_->Route(*subscription_, "plant.sensor.medium", view, &admitted),
            FrameError::kNone);
  EXPECT_TRUE(admitted);
  EXPECT_EQ(receiver_->Route(*subscription_, "plant.sensor.medium", view, &admitted),
            FrameError::kDuplicate);
  Dispatch();
  EXPECT_EQ(readings_, (std::vector<std::uint64_t>{77}));
}

}  // namespace
}  // namespace inbound_test
