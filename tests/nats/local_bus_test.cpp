// The local bus as the bridge uses it, without a server: what the bridge
// reads of the bus's type, Shutdown's close and drain of the bus, and the
// end of the forwarded types' bus subscriptions.
#include "sluice/nats/local_bus.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/bus.hpp"

namespace local_bus_test {
namespace {

using sluice::nats::ShutdownDrain;
using sluice::nats::detail::BusInfo;
using sluice::nats::detail::CloseAndDrain;

using Payload = std::variant<int, double>;
using Mpsc = sluice::MpscBus<Payload, 64>;
using Spsc = sluice::SpscBus<Payload, 64>;

// A bus whose int messages land in `seen` when dispatched.
class NatsLocalBusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)bus_.Subscribe<int>(
        [this](const int& value, const sluice::MessageHeader&) { seen_.push_back(value); });
  }

  void PublishInts(int count) {
    for (int i = 1; i <= count; ++i) ASSERT_TRUE(bus_.Publish(i).IsAdmitted());
  }

  Mpsc bus_;
  std::vector<int> seen_;
};

TEST_F(NatsLocalBusTest, TheTypeGivesItsPayloadAndWhetherSeveralThreadsMayPublish) {
  EXPECT_TRUE((std::is_same_v<BusInfo<Mpsc>::PayloadType, Payload>));
  EXPECT_TRUE(BusInfo<Mpsc>::kMultiProducer);
  EXPECT_TRUE((std::is_same_v<BusInfo<Spsc>::PayloadType, Payload>));
  EXPECT_FALSE(BusInfo<Spsc>::kMultiProducer);
}

TEST_F(NatsLocalBusTest, DispatchHereDispatchesWhatWasAdmittedAndClosesTheBus) {
  PublishInts(5);
  EXPECT_TRUE(CloseAndDrain(bus_, std::chrono::minutes(1), ShutdownDrain::kDispatchHere));
  EXPECT_EQ(seen_, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(bus_.IsClosed());
  EXPECT_FALSE(bus_.Publish(6).IsAdmitted());
}

// A timeout of 0 waits for nothing: the caller dispatches nothing, and a
// bus no consumer has drained says so.
TEST_F(NatsLocalBusTest, ATimeoutOf0ClosesAndReportsWhatIsLeft) {
  PublishInts(2);
  EXPECT_FALSE(CloseAndDrain(bus_, std::chrono::milliseconds(0), ShutdownDrain::kDispatchHere));
  EXPECT_TRUE(bus_.IsClosed());
  EXPECT_TRUE(seen_.empty());
  EXPECT_FALSE(CloseAndDrain(bus_, std::chrono::milliseconds(0), ShutdownDrain::kWaitForConsumer));
  while (bus_.ProcessBatch() > 0) {
  }
  EXPECT_EQ(seen_, (std::vector<int>{1, 2}));
  EXPECT_TRUE(CloseAndDrain(bus_, std::chrono::milliseconds(0), ShutdownDrain::kWaitForConsumer));
}

TEST_F(NatsLocalBusTest, UnsubscribeEndsEachValidHandleAndSkipsTheRest) {
  std::vector<double> doubles;
  const sluice::SubscriptionHandle forwarded_int =
      bus_.Subscribe<int>([](const int&, const sluice::MessageHeader&) { FAIL(); });
  const sluice::SubscriptionHandle forwarded_double = bus_.Subscribe<double>(
      [&doubles](const double& value, const sluice::MessageHeader&) { doubles.push_back(value); });
  ASSERT_TRUE(forwarded_int.IsValid());
  ASSERT_TRUE(forwarded_double.IsValid());
  sluice::nats::detail::Unsubscribe(
      bus_, {forwarded_int, sluice::SubscriptionHandle(), forwarded_double});
  ASSERT_TRUE(bus_.Publish(7).IsAdmitted());
  ASSERT_TRUE(bus_.Publish(2.5).IsAdmitted());
  while (bus_.ProcessBatch() > 0) {
  }
  EXPECT_TRUE(doubles.empty());
  EXPECT_EQ(seen_, (std::vector<int>{7}));  // a subscription not handed over stays
}

}  // namespace
}  // namespace local_bus_test
