// The bridge's connection without a server: the options it refuses before
// it connects (leaving no connection behind), and its own close. The URL
// names a port nothing listens on, so a connection attempt that should
// not have been made fails differently (NATS_NO_SERVER).
#include "sluice/nats/connection.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace connection_test {
namespace {

using sluice::nats::BridgeOptions;
using sluice::nats::detail::Connection;
using sluice::nats::detail::Counters;

BridgeOptions Unreachable() {
  BridgeOptions options;
  options.url = "nats://127.0.0.1:1";
  options.connect_timeout = std::chrono::milliseconds(500);
  return options;
}

void ExpectNoConnection(const Connection& connection) {
  EXPECT_FALSE(connection.is_open());
  EXPECT_EQ(connection.get(), nullptr);
  EXPECT_FALSE(connection.connected());
  EXPECT_EQ(connection.BufferedBytes(), -1);
  EXPECT_EQ(connection.ServerMaxPayload(), 0);
}

// Half an NKey is a configuration error, not a connection without it.
TEST(NatsConnection, HalfAnNKeyFailsBeforeConnecting) {
  BridgeOptions options = Unreachable();
  options.nkey_public_key = "UABC";
  Counters counters;
  Connection connection(options, counters, {});
  EXPECT_EQ(connection.Connect(), NATS_INVALID_ARG);
  ExpectNoConnection(connection);
  options.nkey_public_key.clear();
  options.nkey_seed_file = "/nonexistent/sluice-user.nk";
  Connection other_half(options, counters, {});
  EXPECT_EQ(other_half.Connect(), NATS_INVALID_ARG);
  ExpectNoConnection(other_half);
}

// A negative reconnect jitter (the client refuses it), a ping interval or
// pings out below 1 (the bridge does) fails before connecting (and each valid value is accepted:
// the unreachable server then gives NATS_NO_SERVER).
TEST(NatsConnection, TimingOptionsOutOfRangeFailBeforeConnecting) {
  Counters counters;
  {
    const BridgeOptions defaults = Unreachable();  // outlives the connection
    Connection valid(defaults, counters, {});
    EXPECT_EQ(valid.Connect(), NATS_NO_SERVER);
  }
  const auto refused = [&counters](const BridgeOptions& options) {
    Connection connection(options, counters, {});
    const natsStatus status = connection.Connect();
    ExpectNoConnection(connection);
    return status;
  };
  BridgeOptions options = Unreachable();
  options.reconnect_jitter = std::chrono::milliseconds(-1);
  EXPECT_EQ(refused(options), NATS_INVALID_ARG);
  options = Unreachable();
  options.reconnect_jitter_tls = std::chrono::milliseconds(-1);
  EXPECT_EQ(refused(options), NATS_INVALID_ARG);
  options = Unreachable();
  options.ping_interval = std::chrono::milliseconds(0);
  EXPECT_EQ(refused(options), NATS_INVALID_ARG);
  options = Unreachable();
  options.max_pings_out = 0;
  EXPECT_EQ(refused(options), NATS_INVALID_ARG);
}

// A CA file that cannot be read fails as the client fails to load it.
TEST(NatsConnection, AnUnreadableCaFileFailsBeforeConnecting) {
  const char* const kMissing = "/nonexistent/sluice-ca.pem";
  natsOptions* probe = nullptr;
  ASSERT_EQ(natsOptions_Create(&probe), NATS_OK);
  const natsStatus expected = natsOptions_LoadCATrustedCertificates(probe, kMissing);
  natsOptions_Destroy(probe);
  ASSERT_NE(expected, NATS_OK);
  ASSERT_NE(expected, NATS_NO_SERVER);
  BridgeOptions options = Unreachable();
  options.tls.ca_file = kMissing;
  Counters counters;
  Connection connection(options, counters, {});
  EXPECT_EQ(connection.Connect(), expected);
  ExpectNoConnection(connection);
}

// Before the bridge closes the connection itself, the other parts read
// what they keep of it (the lost event) and the close is marked as its own;
// Reset makes it ready for another Start.
TEST(NatsConnection, ItsOwnCloseRunsTheLostEventFirst) {
  const BridgeOptions options = Unreachable();
  Counters counters;
  int lost = 0;
  Connection connection(options, counters, {[&lost] { ++lost; }, {}});
  EXPECT_FALSE(connection.closing());
  connection.BeginOwnClose();
  EXPECT_EQ(lost, 1);
  EXPECT_TRUE(connection.closing());
  connection.Reset();
  EXPECT_FALSE(connection.closing());
}

// Shutdown with a timeout of 0 waits for neither the flush nor the drain.
TEST(NatsConnection, AnOrderlyCloseWithATimeoutOf0WaitsForNeither) {
  const BridgeOptions options = Unreachable();
  Counters counters;
  int lost = 0;
  Connection connection(options, counters, {[&lost] { ++lost; }, {}});
  sluice::nats::ShutdownResult result;
  connection.CloseOrderly(std::chrono::milliseconds(0), result);
  EXPECT_EQ(result.flush, NATS_TIMEOUT);
  EXPECT_EQ(result.drain, NATS_TIMEOUT);
  EXPECT_EQ(lost, 1);
  EXPECT_TRUE(connection.closing());
}

}  // namespace
}  // namespace connection_test
