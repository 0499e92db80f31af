// Signed frames against a real nats-server: a sending bridge signs, a
// receiving route that takes signed frames only refuses, and counts by
// reason, what a hostile publisher on its subject can make (an unsigned
// stop under an allowed origin, one signed with a guessed key, a captured
// frame changed or replayed, another origin's key); a route that does not
// require signatures still refuses a signed frame its key does not verify.
// Deadlines only guard against hangs; no time is asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <sluice/nats/bridge.hpp>
#include <sluice/nats/frame_signature.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bridge_test_support.hpp"
#include "test_messages.hpp"

namespace bridge_signing_test {
namespace {

using namespace std::chrono_literals;
using sluice::MessagePriority;
using sluice::nats::FrameError;
using sluice::nats::FrameKey;
using sluice_nats_test::Bridge;
using sluice_nats_test::Bus;
using sluice_nats_test::Consumer;
using sluice_nats_test::EmergencyStop;
using sluice_nats_test::Eventually;
using sluice_nats_test::Index;
using sluice_nats_test::kStopType;
using sluice_nats_test::NatsBridgeTest;
using sluice_nats_test::OptionsFor;
using sluice_nats_test::PublishRaw;
using sluice_nats_test::Settled;
using sluice_nats_test::StopFrame;
using sluice_nats_test::StopLog;

constexpr std::uint64_t kSender = 0x5E17;
constexpr std::uint64_t kOther = 0x07E4;
constexpr auto kHigh = static_cast<std::size_t>(MessagePriority::HIGH);

FrameKey SenderKey() { return FrameKey{kSender, 1, "the sender's secret, 32 bytes or longer"}; }

// A HIGH EmergencyStop frame of (origin, instance, sequence) carrying
// `seq`, signed with `key` (version 3) for `subject`.
std::string SignedStopFrame(const std::string& subject, std::uint64_t origin,
                            std::uint64_t instance, std::uint64_t sequence, std::uint64_t seq,
                            const FrameKey& key) {
  std::string frame = StopFrame(origin, instance, sequence, seq);
  frame[4] = static_cast<char>(sluice::nats::kFrameVersionSigned);
  EXPECT_TRUE(sluice::nats::detail::AppendSignature(frame, key, subject));
  return frame;
}

class NatsSignedFrameTest : public NatsBridgeTest {
 protected:
  void SetUp() override {
    if (!sluice::nats::kHasFrameSigning) {
      GTEST_SKIP() << "built without OpenSSL's libcrypto: no signed frames";
    }
    NatsBridgeTest::SetUp();
  }
};

TEST_F(NatsSignedFrameTest, ASignedRouteDeliversTheSendersFramesAndRefusesEachForgery) {
  // The receiver: HIGH stops from kSender only, signed with its key.
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.allowed_origins[kHigh] = {kSender};
  options.frame_keys = {SenderKey(), FrameKey{kOther, 1, "another origin's secret, 32 bytes+"}};
  Bridge receiver(bus, options);
  sluice::nats::ReceiveOptions signed_only;
  signed_only.require_signed = true;
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("s.stop", kStopType, signed_only));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);

  // What goes over the wire, as a hostile subscriber would capture it.
  natsConnection* tap = nullptr;
  natsSubscription* captured = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&tap, server_.Url().c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&captured, tap, "s.stop.high"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(tap, 10000), NATS_OK);

  // The sender: a bridge that signs every frame.
  Bus sender_bus;
  sluice::nats::BridgeOptions sender_options = OptionsFor(server_.Url());
  sender_options.origin_id = kSender;
  sender_options.signing_key = SenderKey();
  Bridge sender(sender_bus, sender_options);
  ASSERT_TRUE(sender.Forward<EmergencyStop>("s.stop", kStopType));
  ASSERT_EQ(sender.Start(), NATS_OK);
  Consumer<Bus> sender_consumer(sender_bus);
  for (std::uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(sender_bus.PublishWithPriority(EmergencyStop{1, 2, seq}, 1, MessagePriority::HIGH));
  }
  ASSERT_TRUE(Eventually([&] { return log.count.load(std::memory_order_relaxed) >= 5; }));
  std::vector<std::string> genuine;
  for (int i = 0; i < 5; ++i) {
    natsMsg* message = nullptr;
    ASSERT_EQ(natsSubscription_NextMsg(&message, captured, 10000), NATS_OK);
    genuine.emplace_back(natsMsg_GetData(message),
                         static_cast<std::size_t>(natsMsg_GetDataLength(message)));
    natsMsg_Destroy(message);
  }
  natsSubscription_Destroy(captured);
  natsConnection_Destroy(tap);
  ASSERT_EQ(genuine[0][4], static_cast<char>(sluice::nats::kFrameVersionSigned));

  // The hostile publisher's frames, each a HIGH stop under the allowed origin
  // unless said otherwise.
  std::string payload_changed = genuine[0];
  payload_changed[sluice::nats::kFrameHeaderSize + 2] ^= 1;  // the stop's reason
  std::string header_changed = genuine[1];
  header_changed[40] ^= 1;  // the instance: another stream, so no duplicate
  const FrameKey guessed{kSender, 1, "a guess at the sender's secret, 32 bytes"};
  const FrameKey unknown_id{kSender, 9, "the sender's secret, 32 bytes or longer"};
  const FrameKey others{kOther, 1, "another origin's secret, 32 bytes+"};
  PublishRaw(server_.Url(),
             {
                 {"s.stop.high", StopFrame(kSender, 66, 1, 101)},  // unsigned
                 {"s.stop.high", SignedStopFrame("s.stop.high", kSender, 67, 1, 102, guessed)},
                 {"s.stop.high", payload_changed},
                 {"s.stop.high", header_changed},
                 {"s.stop.high", SignedStopFrame("s.stop.high", kSender, 68, 1, 103, unknown_id)},
                 // Another origin's own key: verified, then its
                 // origin is not allowed at HIGH.
                 {"s.stop.high", SignedStopFrame("s.stop.high", kOther, 69, 1, 104, others)},
                 {"s.stop.high", genuine[2]},  // replayed as captured
             });
  ASSERT_TRUE(Eventually([&] { return Settled(receiver.GetStatistics()) >= 5 + 7; }));
  (void)sender.Shutdown(10s);
  sender_consumer.Stop();
  (void)receiver.Shutdown(10s);
  consumer.Stop();

  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.delivered[kHigh], 5u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kUnsigned)], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kBadSignature)], 4u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kOriginNotAllowed)], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kDuplicate)], 1u);
  EXPECT_EQ(stats.Rejected(), 7u);
  const std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}};
  EXPECT_EQ(log.times, expected);
}

// The subject is signed too: a captured frame published again on another
// subject its route receives (a new stream there) does not verify. And a
// forged frame carrying the receiver's own origin is judged by its
// signature first, counted and reported, not passed off as an echo.
TEST_F(NatsSignedFrameTest, ACapturedFrameOnAnotherSubjectAndAForgedEchoAreRefusedAndCounted) {
  constexpr std::uint64_t kReceiver = 0x2EC;
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.origin_id = kReceiver;
  options.frame_keys = {SenderKey()};
  std::atomic<int> reported{0};
  options.on_reject = [&](FrameError, std::string_view) { reported.fetch_add(1); };
  Bridge receiver(bus, options);
  sluice::nats::ReceiveOptions signed_only;
  signed_only.require_signed = true;
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("fleet.*.stop", kStopType, signed_only));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  const std::string genuine = SignedStopFrame("fleet.r1.stop.high", kSender, 1, 1, 1, SenderKey());
  PublishRaw(server_.Url(), {
                                {"fleet.r1.stop.high", genuine},
                                {"fleet.r2.stop.high", genuine},  // the same bytes elsewhere
                                {"fleet.r3.stop.high", genuine},
                                {"fleet.r1.stop.high", StopFrame(kReceiver, 5, 1, 2)},  // "echo"
                            });
  ASSERT_TRUE(Eventually([&] { return Settled(receiver.GetStatistics()) >= 4; }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.delivered[kHigh], 1u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kBadSignature)], 2u);
  EXPECT_EQ(stats.rejected[Index(FrameError::kUnsigned)], 1u);
  EXPECT_EQ(stats.echo_suppressed, 0u);
  EXPECT_EQ(reported.load(), 3);
  const std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{1, 1}};
  EXPECT_EQ(log.times, expected);
}

// A route that does not require signatures takes unsigned frames and signed
// ones it has no key for (as it would the same frame unsigned), and still
// refuses a signed frame whose key it has and whose MAC that key does not
// give: a signature is never ignored once it can be checked.
TEST_F(NatsSignedFrameTest, ARouteThatDoesNotRequireSignaturesStillRefusesABadOne) {
  Bus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.frame_keys = {SenderKey()};
  Bridge receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<EmergencyStop>("o.stop", kStopType));
  StopLog log;
  auto handle = bus.Subscribe<EmergencyStop>([&](const EmergencyStop& m) { log.Add(m.seq); });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<Bus> consumer(bus);
  const FrameKey guessed{kSender, 1, "a guess at the sender's secret, 32 bytes"};
  const FrameKey unknown{kOther, 4, "a key this receiver does not have....."};
  PublishRaw(
      server_.Url(),
      {
          {"o.stop.high", StopFrame(kSender, 1, 1, 1)},  // unsigned
          {"o.stop.high", SignedStopFrame("o.stop.high", kSender, 1, 2, 2, SenderKey())},
          {"o.stop.high", SignedStopFrame("o.stop.high", kSender, 1, 3, 3, guessed)},  // refused
          {"o.stop.high", SignedStopFrame("o.stop.high", kOther, 1, 1, 4, unknown)},
      });
  ASSERT_TRUE(Eventually([&] { return Settled(receiver.GetStatistics()) >= 4; }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  const auto stats = receiver.GetStatistics();
  EXPECT_EQ(stats.rejected[Index(FrameError::kBadSignature)], 1u);
  EXPECT_EQ(stats.Rejected(), 1u);
  const std::lock_guard<std::mutex> lock(log.mutex);
  const std::map<std::uint64_t, int> expected = {{1, 1}, {2, 1}, {4, 1}};
  EXPECT_EQ(log.times, expected);
}

using RemoteStopBus = sluice::MpscBus<std::variant<sluice::nats::Remote<EmergencyStop>>, 64>;
using RemoteStopBridge = sluice::nats::Bridge<RemoteStopBus>;

// On a route that takes unsigned frames too, a message's provenance says
// whether a key verified it: an application can act on verified stops only.
TEST_F(NatsSignedFrameTest, TheProvenanceSaysWhetherAKeyVerifiedTheFrame) {
  RemoteStopBus bus;
  sluice::nats::BridgeOptions options = OptionsFor(server_.Url());
  options.frame_keys = {SenderKey()};
  RemoteStopBridge receiver(bus, options);
  ASSERT_TRUE(receiver.Receive<sluice::nats::Remote<EmergencyStop>>("v.stop", kStopType));
  std::mutex mutex;
  std::map<std::uint64_t, bool> verified;  // seq -> provenance.verified; guarded by mutex
  auto handle = bus.Subscribe<sluice::nats::Remote<EmergencyStop>>(
      [&](const sluice::nats::Remote<EmergencyStop>& m) {
        const std::lock_guard<std::mutex> lock(mutex);
        verified[m.value.seq] = m.provenance.verified;
      });
  ASSERT_TRUE(handle.IsValid());
  ASSERT_EQ(receiver.Start(), NATS_OK);
  Consumer<RemoteStopBus> consumer(bus);
  const FrameKey unknown{kOther, 4, "a key this receiver does not have....."};
  PublishRaw(server_.Url(),
             {
                 {"v.stop.high", StopFrame(kSender, 1, 1, 1)},  // unsigned
                 {"v.stop.high", SignedStopFrame("v.stop.high", kSender, 1, 2, 2, SenderKey())},
                 {"v.stop.high", SignedStopFrame("v.stop.high", kOther, 1, 1, 3, unknown)},
             });
  ASSERT_TRUE(Eventually([&] {
    const std::lock_guard<std::mutex> lock(mutex);
    return verified.size() == 3;
  }));
  (void)receiver.Shutdown(10s);
  consumer.Stop();
  const std::lock_guard<std::mutex> lock(mutex);
  const std::map<std::uint64_t, bool> expected = {{1, false}, {2, true}, {3, false}};
  EXPECT_EQ(verified, expected);
}

// Keys that cannot sign or verify anything safely are refused before any
// connection is made; a signed-only route needs a key.
TEST(NatsSignedFrameOptionsTest, BadKeysFailStartAndASignedRouteNeedsAKey) {
  Bus bus;
  const auto start = [&bus](const sluice::nats::BridgeOptions& options) {
    Bridge bridge(bus, options);
    return bridge.Start();
  };
  sluice::nats::BridgeOptions base = OptionsFor("nats://127.0.0.1:1");  // never reached
  sluice::nats::BridgeOptions short_secret = base;
  short_secret.frame_keys = {FrameKey{kSender, 1, std::string(31, 's')}};
  EXPECT_EQ(start(short_secret).status, NATS_INVALID_ARG);
  sluice::nats::BridgeOptions origin_zero = base;
  origin_zero.frame_keys = {FrameKey{0, 1, std::string(32, 's')}};
  EXPECT_EQ(start(origin_zero).status, NATS_INVALID_ARG);
  sluice::nats::BridgeOptions twice = base;
  twice.frame_keys = {FrameKey{kSender, 1, std::string(32, 'a')},
                      FrameKey{kSender, 1, std::string(32, 'b')}};
  EXPECT_EQ(start(twice).status, NATS_INVALID_ARG);
  sluice::nats::BridgeOptions drawn_origin = base;  // origin_id 0: drawn at random
  drawn_origin.signing_key = SenderKey();
  EXPECT_EQ(start(drawn_origin).status, NATS_INVALID_ARG);
  sluice::nats::BridgeOptions other_origin = base;
  other_origin.origin_id = kOther;
  other_origin.signing_key = SenderKey();
  EXPECT_EQ(start(other_origin).status, NATS_INVALID_ARG);
  const auto refused = start(other_origin);
  EXPECT_NE(refused.error.find("signing"), std::string::npos) << refused.error;

  sluice::nats::ReceiveOptions signed_only;
  signed_only.require_signed = true;
  Bridge without_keys(bus, base);
  EXPECT_FALSE(without_keys.Receive<EmergencyStop>("k.stop", kStopType, signed_only));
  sluice::nats::BridgeOptions with_key = base;
  with_key.frame_keys = {SenderKey()};
  Bridge with_keys(bus, with_key);
  EXPECT_EQ(with_keys.Receive<EmergencyStop>("k.stop", kStopType, signed_only),
            sluice::nats::kHasFrameSigning);
}

}  // namespace
}  // namespace bridge_signing_test
