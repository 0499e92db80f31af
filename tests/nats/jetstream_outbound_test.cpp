// The bridge's JetStream publisher on its own: the context options it
// asks for, and its error path (a publish the stream did not acknowledge
// is taken from the client and published again by the resender thread, or
// counted lost at close). No server: no JetStream context is ever opened,
// so the client refuses every publish.
#include "sluice/nats/jetstream_outbound.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>

namespace jetstream_outbound_test {
namespace {

using sluice::MessagePriority;

constexpr auto kLow = static_cast<std::size_t>(MessagePriority::LOW);
constexpr auto kHigh = static_cast<std::size_t>(MessagePriority::HIGH);

class NatsStreamPublisherTest : public ::testing::Test {
 protected:
  // The client's library is open in a bridge once it has connected; the
  // messages made here are freed through it (natsMsg_Destroy).
  void SetUp() override { ASSERT_EQ(nats_Open(-1), NATS_OK); }

  // The client's report that the stream did not acknowledge a message on
  // `subject`; true when the publisher took the message (the field
  // cleared, so the client would not free it).
  bool ReportError(const char* subject) {
    natsMsg* message = nullptr;
    EXPECT_EQ(natsMsg_Create(&message, subject, nullptr, "frame", 5), NATS_OK);
    jsPubAckErr error{};
    error.Msg = message;
    error.Err = NATS_TIMEOUT;
    const jsOptions js_options = publisher_.ContextOptions();
    js_options.PublishAsync.ErrHandler(nullptr, &error, js_options.PublishAsync.ErrHandlerClosure);
    if (error.Msg == nullptr) return true;
    natsMsg_Destroy(error.Msg);
    return false;
  }

  sluice::nats::BridgeOptions options_;
  sluice::nats::detail::Counters counters_;
  sluice::nats::detail::Connection connection_{options_, counters_, {}};
  sluice::nats::detail::StreamPublisher publisher_{options_, counters_, connection_};
};

TEST_F(NatsStreamPublisherTest, TheContextHasTheWindowAndThisPublishersErrorPath) {
  options_.jetstream_max_pending = 7;
  const jsOptions js_options = publisher_.ContextOptions();
  EXPECT_EQ(js_options.PublishAsync.MaxPending, 7);
  EXPECT_NE(js_options.PublishAsync.ErrHandler, nullptr);
  EXPECT_EQ(js_options.PublishAsync.ErrHandlerClosure, &publisher_);
}

// Without a context there is nothing to wait for, whatever the timeout.
TEST_F(NatsStreamPublisherTest, WithoutAContextNoAcknowledgementIsAwaited) {
  EXPECT_EQ(publisher_.WaitForAcknowledgements(std::chrono::milliseconds(0)), NATS_OK);
  EXPECT_EQ(publisher_.WaitForAcknowledgements(std::chrono::hours(1)), NATS_OK);
}

TEST_F(NatsStreamPublisherTest, APublishTheClientRefusesIsADropAtItsPriority) {
  sluice::nats::FrameHeader header;
  header.origin_id = 1;
  header.instance_id = 2;
  header.sequence = 3;
  publisher_.Publish("plant.sensor.high", kHigh, std::string(60, 'f'), header);
  EXPECT_EQ(counters_.send_dropped[kHigh].load(), 1u);
  EXPECT_EQ(counters_.frames_sent[kHigh].load(), 0u);
}

// A message the stream did not acknowledge and that is still waiting to be
// published again at close is lost: counted as send_dropped under its
// subject's priority (and freed).
TEST_F(NatsStreamPublisherTest, AnUnacknowledgedMessageIsTakenAndCountedLostAtClose) {
  EXPECT_TRUE(ReportError("plant.sensor.low"));
  EXPECT_EQ(counters_.send_dropped[kLow].load(), 0u);  // not lost yet: waiting
  publisher_.CountUnacknowledged();
  EXPECT_EQ(counters_.send_dropped[kLow].load(), 1u);
  publisher_.CountUnacknowledged();
  EXPECT_EQ(counters_.send_dropped[kLow].load(), 1u);  // once
}

// With the resender running, a message the stream did not acknowledge is
// published again by it, after a pause of reconnect_wait (none here). The
// client refuses it again: lost, counted once, not counted as resent.
TEST_F(NatsStreamPublisherTest, TheResenderPublishesAnUnacknowledgedMessageAgain) {
  options_.reconnect_wait = std::chrono::milliseconds(0);
  publisher_.Start();
  publisher_.RequestResend();  // nothing published yet: nothing to resend
  EXPECT_TRUE(ReportError("plant.sensor.high"));
  // Before Stop, only the resender's try can count it.
  while (counters_.send_dropped[kHigh].load() == 0) std::this_thread::yield();
  publisher_.Stop();
  publisher_.CountUnacknowledged();
  EXPECT_EQ(counters_.send_dropped[kHigh].load(), 1u);
  EXPECT_EQ(counters_.jetstream_resent.load(), 0u);
}

}  // namespace
}  // namespace jetstream_outbound_test
