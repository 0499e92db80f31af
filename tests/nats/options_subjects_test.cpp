// The bridge's option checks and subject grammar, without a server.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "sluice/message.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/subjects.hpp"

namespace options_subjects_test {
namespace {

using sluice::MessagePriority;
using sluice::nats::BridgeOptions;
using sluice::nats::ReceiveOptions;
using sluice::nats::TlsOptions;

TEST(NatsOptions, AStreamNeedsADurableAndNoQueueGroup) {
  ReceiveOptions route;
  EXPECT_TRUE(sluice::nats::detail::IsValidRoute(route));  // core NATS
  route.queue_group = "workers";
  EXPECT_TRUE(sluice::nats::detail::IsValidRoute(route));
  route = {};
  route.stream = "PLANT";
  EXPECT_FALSE(sluice::nats::detail::IsValidRoute(route));  // no durable
  route.durable = "bridge";
  EXPECT_TRUE(sluice::nats::detail::IsValidRoute(route));
  route.queue_group = "workers";
  EXPECT_FALSE(sluice::nats::detail::IsValidRoute(route));  // a stream's consumer is no group
  route = {};
  route.durable = "bridge";
  EXPECT_FALSE(sluice::nats::detail::IsValidRoute(route));  // a durable without a stream
}

// Acknowledgement after dispatch and a shared durable are a stream's.
TEST(NatsOptions, AckTimingAndASharedDurableNeedAStream) {
  ReceiveOptions route;
  route.ack = sluice::nats::AckTiming::kOnDispatch;
  EXPECT_FALSE(sluice::nats::detail::IsValidRoute(route));
  route.stream = "PLANT";
  route.durable = "bridge";
  EXPECT_TRUE(sluice::nats::detail::IsValidRoute(route));
  route = {};
  route.shared_durable = true;
  EXPECT_FALSE(sluice::nats::detail::IsValidRoute(route));
  route.stream = "PLANT";
  route.durable = "bridge";
  EXPECT_TRUE(sluice::nats::detail::IsValidRoute(route));
}

TEST(NatsOptions, AnyTlsSettingAsksForTls) {
  EXPECT_FALSE(sluice::nats::detail::WantsTls(TlsOptions{}));
  const auto wants = [](void (*set)(TlsOptions&)) {
    TlsOptions tls;
    set(tls);
    return sluice::nats::detail::WantsTls(tls);
  };
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.enabled = true; }));
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.ca_file = "ca.pem"; }));
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.certificate_file = "client.pem"; }));
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.key_file = "client.key"; }));
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.expected_hostname = "nats.plant"; }));
  EXPECT_TRUE(wants([](TlsOptions& tls) { tls.skip_verification = true; }));
}

TEST(NatsOptions, HalfAnNKeyIsAnError) {
  BridgeOptions options;
  EXPECT_FALSE(sluice::nats::detail::HasHalfAnNKey(options));
  options.nkey_public_key = "UABC";
  EXPECT_TRUE(sluice::nats::detail::HasHalfAnNKey(options));
  options.nkey_seed_file = "user.nk";
  EXPECT_FALSE(sluice::nats::detail::HasHalfAnNKey(options));
  options.nkey_public_key.clear();
  EXPECT_TRUE(sluice::nats::detail::HasHalfAnNKey(options));
}

TEST(NatsOptions, OriginIdIsTheOptionsOwnOrARandomNonZeroOne) {
  BridgeOptions options;
  options.origin_id = 42;
  EXPECT_EQ(sluice::nats::detail::OriginIdFor(options), 42u);
  options.origin_id = 0;
  // Two draws of 64 random bits are equal once in 2^64.
  const std::uint64_t first = sluice::nats::detail::OriginIdFor(options);
  const std::uint64_t second = sluice::nats::detail::OriginIdFor(options);
  EXPECT_NE(first, 0u);
  EXPECT_NE(second, 0u);
  EXPECT_NE(first, second);
}

TEST(NatsSubjects, SubjectForAddsThePrioritySuffix) {
  EXPECT_EQ(sluice::nats::SubjectFor("plant.sensor", MessagePriority::LOW), "plant.sensor.low");
  EXPECT_EQ(sluice::nats::SubjectFor("plant.sensor", MessagePriority::MEDIUM),
            "plant.sensor.medium");
  EXPECT_EQ(sluice::nats::SubjectFor("a", MessagePriority::HIGH), "a.high");
}

TEST(NatsSubjects, PriorityIndexOfReadsTheSuffixBack) {
  for (std::size_t p = 0; p < sluice::kPriorityCount; ++p) {
    const std::string subject =
        sluice::nats::SubjectFor("fleet.r7.stop", static_cast<MessagePriority>(p));
    EXPECT_EQ(sluice::nats::detail::PriorityIndexOf(subject), p) << subject;
  }
  const auto medium = static_cast<std::size_t>(MessagePriority::MEDIUM);
  // No suffix, a suffix that is a whole subject, or one not after a '.':
  // MEDIUM.
  EXPECT_EQ(sluice::nats::detail::PriorityIndexOf(""), medium);
  EXPECT_EQ(sluice::nats::detail::PriorityIndexOf("high"), medium);
  EXPECT_EQ(sluice::nats::detail::PriorityIndexOf("plant.sensorhigh"), medium);
  EXPECT_EQ(sluice::nats::detail::PriorityIndexOf("plant.low.sensor"), medium);
  EXPECT_EQ(sluice::nats::detail::PriorityIndexOf(".low"), 0u);
}

TEST(NatsSubjects, LiteralAndReceiveGrammars) {
  EXPECT_TRUE(sluice::nats::IsLiteralSubject("plant.sensor"));
  EXPECT_FALSE(sluice::nats::IsLiteralSubject("plant.*"));
  EXPECT_FALSE(sluice::nats::IsLiteralSubject("plant..sensor"));
  EXPECT_FALSE(sluice::nats::IsLiteralSubject("plant.sensor."));
  EXPECT_FALSE(sluice::nats::IsLiteralSubject("plant sensor"));
  EXPECT_TRUE(sluice::nats::IsReceiveSubject("fleet.*.stop"));
  EXPECT_TRUE(sluice::nats::IsReceiveSubject("*"));
  EXPECT_FALSE(sluice::nats::IsReceiveSubject("fleet.>"));
  EXPECT_FALSE(sluice::nats::IsReceiveSubject("fleet.r*.stop"));  // '*' only as a whole token
}

TEST(NatsSubjects, OverlapIsTokenByToken) {
  EXPECT_TRUE(sluice::nats::SubjectsOverlap("fleet.*.stop", "fleet.r7.stop"));
  EXPECT_TRUE(sluice::nats::SubjectsOverlap("*.*", "a.b"));
  EXPECT_FALSE(sluice::nats::SubjectsOverlap("fleet.*.stop", "fleet.r7.stop.now"));
  EXPECT_FALSE(sluice::nats::SubjectsOverlap("fleet.*.stop", "yard.r7.stop"));
}

}  // namespace
}  // namespace options_subjects_test
