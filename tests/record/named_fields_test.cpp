// Named fields in recordings (sluice/record/message_schema.hpp): a type
// whose Fields<T> name its members is recorded as ROS 1 messages that
// Foxglove's own ROS 1 readers decode field by field, by name, to the
// values published (check_mcap.cjs sums every field over the file), and
// that the replayer still replays; a type without names stays
// sluice.wire/1.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "mcap_check.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/flight_recorder.hpp"
#include "sluice/record/flight_recorder_observer.hpp"
#include "sluice/record/mcap_reader.hpp"
#include "sluice/record/message_schema.hpp"
#include "sluice/record/recorder.hpp"
#include "sluice/record/replayer.hpp"
#include "sluice/sluice.hpp"

enum class Mode : std::uint16_t { kIdle = 0, kDrive = 7 };
struct Vec3 {
  double x, y, z;
};
struct Sample {
  std::uint8_t frame;
  std::int16_t offset;
  Vec3 position;
  std::array<float, 3> gains;
  bool ok;
  Mode mode;
  std::uint64_t count;
};
struct Unnamed {
  std::uint32_t code;
};
// Field `a_b`, and field `b` of field `a`: two paths that join to the same
// text, each a struct of its own.
struct Inner {
  std::uint8_t k;
};
struct Middle {
  Inner b;
};
struct Pair {
  std::uint32_t u;
  double d;
};
struct Joined {
  Pair a_b;
  Middle a;
};
// One struct type on two fields (and, as a tree, on 2^n paths).
struct Span {
  Vec3 from;
  Vec3 to;
};
enum class Switch : bool { kOff = false, kOn = true };
struct Switched {
  Switch on;
  std::array<Inner, 2> inners;
};
template <>
struct sluice::nats::Fields<Vec3> {
  static constexpr auto kMembers = std::make_tuple(&Vec3::x, &Vec3::y, &Vec3::z);
  static constexpr const char* kNames[] = {"x", "y", "z"};
};
template <>
struct sluice::nats::Fields<Sample> {
  static constexpr auto kMembers =
      std::make_tuple(&Sample::frame, &Sample::offset, &Sample::position, &Sample::gains,
                      &Sample::ok, &Sample::mode, &Sample::count);
  static constexpr const char* kNames[] = {"frame", "offset", "position", "gains",
                                           "ok",    "mode",   "count"};
};
template <>
struct sluice::nats::Fields<Inner> {
  static constexpr auto kMembers = std::make_tuple(&Inner::k);
  static constexpr const char* kNames[] = {"k"};
};
template <>
struct sluice::nats::Fields<Middle> {
  static constexpr auto kMembers = std::make_tuple(&Middle::b);
  static constexpr const char* kNames[] = {"b"};
};
template <>
struct sluice::nats::Fields<Pair> {
  static constexpr auto kMembers = std::make_tuple(&Pair::u, &Pair::d);
  static constexpr const char* kNames[] = {"u", "d"};
};
template <>
struct sluice::nats::Fields<Joined> {
  static constexpr auto kMembers = std::make_tuple(&Joined::a_b, &Joined::a);
  static constexpr const char* kNames[] = {"a_b", "a"};
};
template <>
struct sluice::nats::Fields<Span> {
  static constexpr auto kMembers = std::make_tuple(&Span::from, &Span::to);
  static constexpr const char* kNames[] = {"from", "to"};
};
template <>
struct sluice::nats::Fields<Switched> {
  static constexpr auto kMembers = std::make_tuple(&Switched::on, &Switched::inners);
  static constexpr const char* kNames[] = {"on", "inners"};
};
template <>
struct sluice::nats::Fields<Unnamed> {
  static constexpr auto kMembers = std::make_tuple(&Unnamed::code);
};

namespace named_fields_test {
namespace {

using Payload = std::variant<Sample, Unnamed, Joined, Switched, Span>;
using Bus = sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti>;
using sluice::nats::WireCodec;
using sluice::record::kHasNamedFields;

static_assert(kHasNamedFields<Sample, WireCodec<Sample>>);
static_assert(kHasNamedFields<Vec3, WireCodec<Vec3>>);
static_assert(kHasNamedFields<std::uint32_t, WireCodec<std::uint32_t>>);
static_assert(kHasNamedFields<std::array<double, 4>, WireCodec<std::array<double, 4>>>);
static_assert(!kHasNamedFields<Unnamed, WireCodec<Unnamed>>);  // no kNames
static_assert(!kHasNamedFields<Sample, sluice::nats::TriviallyCopyableCodec<Unnamed>>);
// ROS 1 has no arrays of arrays.
static_assert(!kHasNamedFields<std::array<std::array<float, 2>, 2>,
                               WireCodec<std::array<std::array<float, 2>, 2>>>);

Sample MakeSample(std::uint32_t i) {
  return Sample{static_cast<std::uint8_t>(i % 200),
                static_cast<std::int16_t>(static_cast<int>(i % 7) - 3),
                Vec3{double(i), 2.0 * i, -double(i)},
                {float(i % 4), 2.0f * (i % 4), 3.0f * (i % 4)},
                i % 3 == 0,
                i % 2 == 0 ? Mode::kDrive : Mode::kIdle,
                std::uint64_t{1} << 40 | i};
}

std::string Scratch(const std::string& name) {
  return std::string(SLUICE_RECORD_SCRATCH_DIR) + "/" + name;
}

bool HaveRos1Readers(std::string* why) {
  std::ifstream package(std::string(SLUICE_NODE_MODULES) +
                        "/@foxglove/rosmsg-serialization/package.json");
  if (std::string(SLUICE_NODE_BINARY).empty() || !package) {
    *why =
        "node or the npm packages @mcap/core and @foxglove/rosmsg-serialization not found "
        "(tools/install_node_packages.sh)";
    return false;
  }
  return true;
}

TEST(NamedFieldsTest, TheDefinitionIsTheHeaderThenThePayloadByName) {
  const auto schema = sluice::record::SchemaOf<Vec3, WireCodec<Vec3>>();
  EXPECT_EQ(schema.message_encoding, "ros1");
  EXPECT_EQ(schema.schema_encoding, "ros1msg");
  EXPECT_EQ(schema.definition, std::string(sluice::record::kRos1HeaderDefinition) +
                                   "sluice/Payload payload\n" + std::string(80, '=') +
                                   "\nMSG: sluice/Payload\nfloat64 x\nfloat64 y\nfloat64 z\n");
  const auto scalar = sluice::record::SchemaOf<std::int16_t, WireCodec<std::int16_t>>();
  EXPECT_EQ(scalar.definition,
            std::string(sluice::record::kRos1HeaderDefinition) + "int16 payload\n");
  const auto unnamed = sluice::record::SchemaOf<Unnamed, WireCodec<Unnamed>>();
  EXPECT_EQ(unnamed.message_encoding, sluice::record::kWireEncoding);
  EXPECT_EQ(unnamed.schema_encoding, sluice::record::kWireEncoding);
}

// Every field of every message, decoded by Foxglove's ROS 1 reader, sums
// to what was published; the header's fields too.
TEST(NamedFieldsTest, FoxglovesRos1ReaderDecodesEveryFieldByName) {
  std::string why;
  if (!HaveRos1Readers(&why)) GTEST_SKIP() << why;
  constexpr std::uint32_t kCount = 3000;
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("named"), 0, 1u << 20});
  ASSERT_TRUE((recorder.Record<Sample>("/robot/sample", "robot/Sample")));
  ASSERT_TRUE((recorder.Record<Unnamed>("/robot/unnamed", "robot/Unnamed")));
  std::map<std::string, std::uint64_t> want;
  const auto add = [&want](const std::string& field, std::uint64_t value) {
    want["field /robot/sample " + field] += value;
  };
  std::vector<sluice::MessageHeader> headers;
  const sluice::SubscriptionHandle watch = bus.Subscribe<Sample>(
      [&headers](const Sample&, const sluice::MessageHeader& h) { headers.push_back(h); });
  ASSERT_TRUE(watch.IsValid());
  for (std::uint32_t i = 0; i < kCount; ++i) {
    const Sample s = MakeSample(i);
    const auto priority = static_cast<sluice::MessagePriority>(i % 3);
    ASSERT_TRUE(bus.PublishFast(s, 40 + i % 5, std::chrono::nanoseconds(1000 + i), priority));
    ASSERT_TRUE(bus.Publish(Unnamed{i}));
    (void)bus.ProcessBatch();
    add("payload.frame", s.frame);
    add("payload.offset", static_cast<std::uint64_t>(std::int64_t{s.offset}));
    add("payload.position.x", static_cast<std::uint64_t>(std::int64_t(s.position.x)));
    add("payload.position.y", static_cast<std::uint64_t>(std::int64_t(s.position.y)));
    add("payload.position.z", static_cast<std::uint64_t>(std::int64_t(s.position.z)));
    add("payload.gains", std::uint64_t(s.gains[0] + s.gains[1] + s.gains[2]));
    add("payload.ok", s.ok ? 1 : 0);
    add("payload.mode", static_cast<std::uint64_t>(s.mode));
    add("payload.count", s.count);
  }
  ASSERT_TRUE(recorder.Close());
  ASSERT_EQ(headers.size(), kCount);
  for (const sluice::MessageHeader& h : headers) {
    add("msg_id", h.msg_id);
    add("timestamp_ns", h.timestamp_ns);
    add("sender_id", h.sender_id);
    add("priority", static_cast<std::uint64_t>(h.priority));
    add("reserved", 0);
    add("lane", h.lane);
  }
  ASSERT_EQ(recorder.Files().size(), 1u);
  std::string skip;
  const auto found = sluice_test::ReadWithMcapsOwnReader(recorder.Files()[0], &skip);
  ASSERT_TRUE(skip.empty()) << skip;
  EXPECT_EQ(found.count("ros1 unchecked"), 0u);
  for (const auto& [field, sum] : want) {
    const auto it = found.find(field);
    ASSERT_NE(it, found.end()) << field << " was not decoded";
    EXPECT_EQ(it->second, sum) << field;
  }
  std::size_t decoded_fields = 0;
  for (const auto& [key, value] : found) {
    if (key.rfind("field ", 0) != 0) continue;
    ++decoded_fields;
    EXPECT_EQ(key.find("/robot/unnamed"), std::string::npos)
        << key << ": the type without names is sluice.wire/1, not decoded";
  }
  EXPECT_EQ(decoded_fields, want.size());
  EXPECT_EQ(found.at("topic /robot/sample"), kCount);
  EXPECT_EQ(found.at("topic /robot/unnamed"), kCount);
  std::remove(recorder.Files()[0].c_str());
}

// Two paths that join to the same text name two types apart (the second
// _2), which Foxglove's reader tells apart; a scoped enum over bool is a
// bool; an array of structs is an array of one type.
TEST(NamedFieldsTest, NestedTypesWhosePathsJoinAlikeGetNamesOfTheirOwn) {
  const std::string definition = sluice::record::SchemaOf<Joined, WireCodec<Joined>>().definition;
  EXPECT_NE(definition.find("\nsluice/Payload_a_b a_b\nsluice/Payload_a a\n"), std::string::npos)
      << definition;
  EXPECT_NE(definition.find("\nMSG: sluice/Payload_a_b\nuint32 u\nfloat64 d\n"), std::string::npos)
      << definition;
  EXPECT_NE(definition.find("\nMSG: sluice/Payload_a\nsluice/Payload_a_b_2 b\n"), std::string::npos)
      << definition;
  EXPECT_NE(definition.find("\nMSG: sluice/Payload_a_b_2\nuint8 k\n"), std::string::npos)
      << definition;
  const std::string switched = sluice::record::SchemaOf<Switched, WireCodec<Switched>>().definition;
  EXPECT_NE(switched.find("\nbool on\nsluice/Payload_inners[2] inners\n"), std::string::npos)
      << switched;

  std::string why;
  if (!HaveRos1Readers(&why)) GTEST_SKIP() << why;
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("joined"), 0, 1u << 20});
  ASSERT_TRUE((recorder.Record<Joined>("/joined", "Joined")));
  ASSERT_TRUE((recorder.Record<Switched>("/switched", "Switched")));
  for (std::uint32_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(bus.Publish(Joined{{i, 2.0 * i}, {{static_cast<std::uint8_t>(3 * i)}}}));
    ASSERT_TRUE(bus.Publish(Switched{i % 2 == 0 ? Switch::kOn : Switch::kOff,
                                     {{{static_cast<std::uint8_t>(i)}, {1}}}}));
    (void)bus.ProcessBatch();
  }
  ASSERT_TRUE(recorder.Close());
  std::string skip;
  const auto found = sluice_test::ReadWithMcapsOwnReader(recorder.Files()[0], &skip);
  ASSERT_TRUE(skip.empty()) << skip;
  EXPECT_EQ(found.at("field /joined payload.a_b.u"), 45u);
  EXPECT_EQ(found.at("field /joined payload.a_b.d"), 90u);
  EXPECT_EQ(found.at("field /joined payload.a.b.k"), 135u);
  EXPECT_EQ(found.at("field /switched payload.on"), 5u);
  EXPECT_EQ(found.at("field /switched payload.inners.k"), 45u + 10u);
  std::remove(recorder.Files()[0].c_str());
}

// A struct type reached by several fields is one message type, described
// once: the definition grows with the types, not the paths.
TEST(NamedFieldsTest, AStructTypeOnSeveralFieldsIsDescribedOnce) {
  const std::string definition = sluice::record::SchemaOf<Span, WireCodec<Span>>().definition;
  EXPECT_NE(definition.find("\nsluice/Payload_from from\nsluice/Payload_from to\n"),
            std::string::npos)
      << definition;
  std::size_t types = 0;
  for (std::size_t at = definition.find("MSG: "); at != std::string::npos;
       at = definition.find("MSG: ", at + 1)) {
    ++types;
  }
  EXPECT_EQ(types, 2u) << definition;  // sluice/Payload and sluice/Payload_from

  std::string why;
  if (!HaveRos1Readers(&why)) GTEST_SKIP() << why;
  Bus bus;
  sluice::record::Recorder<Bus> recorder(bus, {Scratch("span"), 0, 1u << 20});
  ASSERT_TRUE((recorder.Record<Span>("/span", "Span")));
  for (std::uint32_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(bus.Publish(Span{{double(i), 0, 0}, {0, 0, 2.0 * i}}));
    (void)bus.ProcessBatch();
  }
  ASSERT_TRUE(recorder.Close());
  std::string skip;
  const auto found = sluice_test::ReadWithMcapsOwnReader(recorder.Files()[0], &skip);
  ASSERT_TRUE(skip.empty()) << skip;
  EXPECT_EQ(found.at("field /span payload.from.x"), 45u);
  EXPECT_EQ(found.at("field /span payload.to.z"), 90u);
  std::remove(recorder.Files()[0].c_str());
}

// The replayer reads the named channel (and the plain one) back into a
// bus: the same samples, in order.
TEST(NamedFieldsTest, ANamedRecordingReplaysExactly) {
  constexpr std::uint32_t kCount = 500;
  std::vector<std::string> files;
  {
    Bus bus;
    sluice::record::Recorder<Bus> recorder(bus, {Scratch("named_replay"), 0, 1u << 20});
    ASSERT_TRUE((recorder.Record<Sample>("/robot/sample", "robot/Sample")));
    ASSERT_TRUE((recorder.Record<Unnamed>("/robot/unnamed", "robot/Unnamed")));
    for (std::uint32_t i = 0; i < kCount; ++i) {
      ASSERT_TRUE(bus.Publish(MakeSample(i)));
      ASSERT_TRUE(bus.Publish(Unnamed{i}));
      (void)bus.ProcessBatch();
    }
    ASSERT_TRUE(recorder.Close());
    files = recorder.Files();
    sluice::record::McapReader reader(files[0]);
    sluice::record::McapMessage message;
    while (reader.Next(&message)) {
    }
    std::map<std::string, std::string> encodings;
    for (std::uint16_t id = 0; id < 2; ++id) {
      const auto* channel = reader.Channel(id);
      ASSERT_NE(channel, nullptr);
      encodings[channel->topic] = channel->message_encoding;
    }
    EXPECT_EQ(encodings["/robot/sample"], "ros1");
    EXPECT_EQ(encodings["/robot/unnamed"], sluice::record::kWireEncoding);
  }
  Bus target;
  std::vector<std::uint64_t> seen;
  const sluice::SubscriptionHandle samples = target.Subscribe<Sample>([&seen](const Sample& s) {
    const Sample want = MakeSample(static_cast<std::uint32_t>(seen.size()));
    const bool same = s.frame == want.frame && s.offset == want.offset &&
                      s.position.x == want.position.x && s.position.z == want.position.z &&
                      s.gains == want.gains && s.ok == want.ok && s.mode == want.mode &&
                      s.count == want.count;
    seen.push_back(same ? 1 : 0);
  });
  std::uint32_t codes = 0;
  const sluice::SubscriptionHandle unnamed = target.Subscribe<Unnamed>([&codes](const Unnamed& u) {
    EXPECT_EQ(u.code, codes);
    ++codes;
  });
  ASSERT_TRUE(samples.IsValid() && unnamed.IsValid());
  sluice::record::Replayer<Bus> replayer(target);
  replayer.Replay<Sample>("/robot/sample");
  replayer.Replay<Unnamed>("/robot/unnamed");
  const auto result = replayer.Run(files, [&target] { return target.ProcessBatch() != 0; });
  while (target.ProcessBatch() != 0) {
  }
  EXPECT_EQ(result.published, 2u * kCount);
  EXPECT_EQ(result.skipped, 0u);
  ASSERT_EQ(seen.size(), kCount);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1u), kCount);
  EXPECT_EQ(codes, kCount);
  for (const std::string& file : files) std::remove(file.c_str());
}

// A ROS 1 channel that is not Sluice's (its definition lacks the header)
// is skipped, not replayed as if it were.
TEST(NamedFieldsTest, AForeignRos1ChannelIsNotReplayed) {
  EXPECT_TRUE(sluice::record::IsReplayable(
      "ros1", "ros1msg", std::string(sluice::record::kRos1HeaderDefinition) + "uint8 payload\n"));
  EXPECT_TRUE(sluice::record::IsReplayable(sluice::record::kWireEncoding, "", ""));
  EXPECT_FALSE(sluice::record::IsReplayable("ros1", "ros1msg", "float64 x\n"));
  EXPECT_FALSE(
      sluice::record::IsReplayable("ros1", "ros2msg", sluice::record::kRos1HeaderDefinition));
  EXPECT_FALSE(
      sluice::record::IsReplayable("cdr", "ros1msg", sluice::record::kRos1HeaderDefinition));
}

}  // namespace
}  // namespace named_fields_test
