// The bridge's frame and codecs, without a server.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <sluice/nats/codec.hpp>
#include <sluice/nats/frame.hpp>
#include <sluice/nats/stream_tracker.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "test_messages.hpp"

namespace {

using sluice::nats::DecodeFrame;
using sluice::nats::FrameError;
using sluice::nats::FrameHeader;
using sluice::nats::FrameView;
using sluice::nats::kFrameHeaderSize;

std::vector<std::uint8_t> MakeFrame(const FrameHeader& header, const std::string& payload) {
  std::vector<std::uint8_t> frame(kFrameHeaderSize + payload.size());
  FrameHeader written = header;
  written.payload_size = static_cast<std::uint32_t>(payload.size());
  sluice::nats::EncodeFrameHeader(written, frame.data());
  std::memcpy(frame.data() + kFrameHeaderSize, payload.data(), payload.size());
  return frame;
}

FrameHeader SampleHeader() {
  FrameHeader header;
  header.priority = sluice::MessagePriority::HIGH;
  header.type_id = 0xBEEF;
  header.sender_id = 0x01020304;
  header.msg_id = 0x1122334455667788ull;
  header.timestamp_ns = 0xA1A2A3A4A5A6A7A8ull;
  header.origin_id = 0xFFFFFFFF00000001ull;
  header.instance_id = 0x0102030405060708ull;
  header.sequence = 0x8070605040302010ull;
  return header;
}

// A version 1 frame, as a 0.4 bridge writes it: 40 header bytes, the
// timestamp in microseconds.
std::vector<std::uint8_t> MakeVersion1Frame(const FrameHeader& header, std::uint64_t micros,
                                            const std::string& payload) {
  std::vector<std::uint8_t> frame = MakeFrame(header, "");
  frame.resize(sluice::nats::kFrameHeaderSizeV1);
  frame[4] = 1;
  for (std::size_t i = 0; i < 8; ++i) frame[24 + i] = static_cast<std::uint8_t>(micros >> (8 * i));
  const auto size = static_cast<std::uint32_t>(payload.size());
  for (std::size_t i = 0; i < 4; ++i) frame[12 + i] = static_cast<std::uint8_t>(size >> (8 * i));
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

TEST(NatsFrame, RoundTripsEveryField) {
  const std::vector<std::uint8_t> frame = MakeFrame(SampleHeader(), "abc");
  FrameView view;
  ASSERT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kNone);
  EXPECT_EQ(view.header.version, sluice::nats::kFrameVersion);
  EXPECT_EQ(view.header.priority, sluice::MessagePriority::HIGH);
  EXPECT_EQ(view.header.type_id, 0xBEEF);
  EXPECT_EQ(view.header.sender_id, 0x01020304u);
  EXPECT_EQ(view.header.msg_id, 0x1122334455667788ull);
  EXPECT_EQ(view.header.timestamp_ns, 0xA1A2A3A4A5A6A7A8ull);
  EXPECT_EQ(view.header.origin_id, 0xFFFFFFFF00000001ull);
  EXPECT_EQ(view.header.instance_id, 0x0102030405060708ull);
  EXPECT_EQ(view.header.sequence, 0x8070605040302010ull);
  ASSERT_EQ(view.payload_size, 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.payload), 3), "abc");
}

// Version 2 carries the bus's nanoseconds; a version 1 frame (a 0.4 sender)
// still decodes, its microseconds made nanoseconds, without stream fields.
TEST(NatsFrame, Version1FramesDecodeWithNanosecondsAndNoStream) {
  const std::vector<std::uint8_t> frame =
      MakeVersion1Frame(SampleHeader(), 1'234'567'890'123'456ull, "xy");
  FrameView view;
  ASSERT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kNone);
  EXPECT_EQ(view.header.version, sluice::nats::kFrameVersion1);
  EXPECT_EQ(view.header.timestamp_ns, 1'234'567'890'123'456'000ull);
  EXPECT_EQ(view.header.instance_id, 0u);
  EXPECT_EQ(view.header.sequence, 0u);
  EXPECT_EQ(view.header.origin_id, 0xFFFFFFFF00000001ull);
  ASSERT_EQ(view.payload_size, 2u);
  EXPECT_EQ(view.payload, frame.data() + sluice::nats::kFrameHeaderSizeV1);
  // A version 1 timestamp too large for nanoseconds saturates.
  const std::vector<std::uint8_t> huge = MakeVersion1Frame(SampleHeader(), ~0ull, "");
  ASSERT_EQ(DecodeFrame(huge.data(), huge.size(), &view), FrameError::kNone);
  EXPECT_EQ(view.header.timestamp_ns, ~0ull);
}

TEST(NatsFrame, LayoutIsLittleEndianWithMagicAndVersionFirst) {
  const std::vector<std::uint8_t> frame = MakeFrame(SampleHeader(), "");
  const std::vector<std::uint8_t> expected_start = {'S', 'L', 'N', 'F', 2, 2, 0xEF, 0xBE,
                                                    4,   3,   2,   1,   0, 0, 0,    0};
  ASSERT_EQ(frame.size(), 56u);
  EXPECT_EQ(std::vector<std::uint8_t>(frame.begin(), frame.begin() + 16), expected_start);
  EXPECT_EQ(frame[16], 0x88);  // msg_id, low byte first
  EXPECT_EQ(frame[24], 0xA8);  // timestamp_ns, low byte first
  EXPECT_EQ(frame[39], 0xFF);  // origin id, high byte last
  EXPECT_EQ(frame[40], 0x08);  // instance id, low byte first
  EXPECT_EQ(frame[48], 0x10);  // sequence, low byte first
  EXPECT_EQ(frame[55], 0x80);
}

TEST(NatsFrame, RejectsEachKindOfBadFrame) {
  FrameView view;
  const std::vector<std::uint8_t> good = MakeFrame(SampleHeader(), "payload");
  EXPECT_EQ(DecodeFrame(nullptr, 0, &view), FrameError::kTooShort);
  EXPECT_EQ(DecodeFrame(good.data(), kFrameHeaderSize - 1, &view), FrameError::kTooShort);

  std::vector<std::uint8_t> frame = good;
  frame[0] = 'X';
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kBadMagic);
  frame = good;
  frame[4] = 4;  // 1 to 3 are read
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kUnknownVersion);
  frame[4] = 0;
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kUnknownVersion);
  // Long enough for a version 1 header, not for version 2's.
  EXPECT_EQ(DecodeFrame(good.data(), sluice::nats::kFrameHeaderSizeV1, &view),
            FrameError::kTooShort);
  frame = good;
  frame[5] = 3;
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kBadPriority);
  frame = good;
  frame[15] = 0x80;  // payload length ~2 GiB
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kOversized);
  EXPECT_EQ(DecodeFrame(good.data(), good.size(), &view, /*max_payload=*/6),
            FrameError::kOversized);
  EXPECT_EQ(DecodeFrame(good.data(), good.size() - 1, &view), FrameError::kLengthMismatch);
  frame = good;
  frame.push_back(0);
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kLengthMismatch);
}

TEST(NatsFrame, NoPrefixOfAFrameDecodes) {
  const std::vector<std::uint8_t> good = MakeFrame(SampleHeader(), std::string(50, 'z'));
  FrameView view;
  for (std::size_t size = 0; size < good.size(); ++size) {
    const FrameError error = DecodeFrame(good.data(), size, &view);
    EXPECT_EQ(error, size < kFrameHeaderSize ? FrameError::kTooShort : FrameError::kLengthMismatch)
        << size;
  }
  const std::vector<std::uint8_t> old = MakeVersion1Frame(SampleHeader(), 1, std::string(9, 'z'));
  for (std::size_t size = 0; size < old.size(); ++size) {
    const FrameError error = DecodeFrame(old.data(), size, &view);
    EXPECT_EQ(error, size < sluice::nats::kFrameHeaderSizeV1 ? FrameError::kTooShort
                                                             : FrameError::kLengthMismatch)
        << size;
  }
  EXPECT_EQ(DecodeFrame(good.data(), good.size(), &view), FrameError::kNone);
}

TEST(NatsFrame, EveryErrorHasAName) {
  for (std::size_t e = 0; e < sluice::nats::kFrameErrorCount; ++e) {
    EXPECT_STRNE(sluice::nats::ToString(static_cast<FrameError>(e)), "invalid") << e;
  }
  // The Prometheus reasons of the bridge's own checks.
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kPriorityMismatch), "priority_mismatch");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kDecodeThrew), "decode_threw");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kOriginNotAllowed), "origin_not_allowed");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kDuplicate), "duplicate");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kStale), "stale");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kUnsequenced), "unsequenced");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kStreamTableFull), "stream_table_full");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kTooFarAhead), "too_far_ahead");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kUnsigned), "unsigned");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kBadSignature), "bad_signature");
  EXPECT_STREQ(sluice::nats::ToString(static_cast<FrameError>(sluice::nats::kFrameErrorCount)),
               "invalid");
}

TEST(NatsCodec, ASensorReadingTravelsAsItsListedFields) {
  using sluice_nats_test::SensorReading;
  using Codec = sluice::nats::DefaultCodec<SensorReading>;
  static_assert(std::is_same_v<Codec, sluice::nats::WireCodec<SensorReading>>);
  std::string bytes;
  ASSERT_TRUE(Codec::Encode({3, 2.5f, 99}, bytes));
  // sensor (4, LE), value (IEEE 754 bits of 2.5f = 0x40200000, LE), seq (8, LE).
  const std::string expected("\x03\x00\x00\x00\x00\x00\x20\x40\x63\x00\x00\x00\x00\x00\x00\x00",
                             16);
  EXPECT_EQ(bytes, expected);
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const auto decoded = Codec::Decode(data, bytes.size());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->sensor, 3u);
  EXPECT_EQ(decoded->value, 2.5f);
  EXPECT_EQ(decoded->seq, 99u);
  EXPECT_FALSE(Codec::Decode(data, bytes.size() - 1).has_value());
  EXPECT_FALSE(Codec::Decode(nullptr, 0).has_value());
}

// A struct with padding between and after its fields, and a bool, a float
// array, an enum and a nested struct with fields of its own.
enum class Mode : std::uint16_t { kIdle = 1, kDrive = 0x0203 };
struct Inner {
  std::uint8_t tag;
  std::int32_t delta;  // 3 padding bytes before it
};
struct Padded {
  std::uint8_t kind;  // 7 padding bytes after it
  std::uint64_t id;
  bool armed;  // 1 padding byte after it
  Mode mode;
  float gains[2];
  Inner inner;
  std::array<std::int16_t, 2> pair;  // padding after it, to 8
};

}  // namespace

template <>
struct sluice::nats::Fields<Inner> {
  static constexpr auto kMembers = std::make_tuple(&Inner::tag, &Inner::delta);
};
template <>
struct sluice::nats::Fields<Padded> {
  static constexpr auto kMembers =
      std::make_tuple(&Padded::kind, &Padded::id, &Padded::armed, &Padded::mode, &Padded::gains,
                      &Padded::inner, &Padded::pair);
};

namespace {

// Memory filled with a pattern before the struct is made in it: the
// padding keeps the pattern, and not one of its bytes may reach the wire.
TEST(NatsCodec, NoPaddingByteReachesTheFrame) {
  static_assert(!std::has_unique_object_representations_v<Padded>, "the struct has padding");
  static_assert(sizeof(Padded) > sluice::nats::kWireSize<Padded>);
  static_assert(sluice::nats::kWireSize<Padded> == 1 + 8 + 1 + 2 + 8 + 5 + 4);
  alignas(Padded) unsigned char memory[sizeof(Padded)];
  std::memset(memory, 0xA5, sizeof memory);
  auto* value = new (memory) Padded;  // default-initialised: padding untouched
  value->kind = 1;
  value->id = 0x0807060504030201ull;
  value->armed = true;
  value->mode = Mode::kDrive;
  value->gains[0] = 1.0f;   // 0x3F800000
  value->gains[1] = -2.0f;  // 0xC0000000
  value->inner.tag = 9;
  value->inner.delta = -2;
  value->pair = {0x0102, -1};
  ASSERT_NE(std::memchr(memory, 0xA5, sizeof memory), nullptr) << "the padding kept the pattern";

  std::string frame_payload;
  using Codec = sluice::nats::DefaultCodec<Padded>;
  ASSERT_TRUE(Codec::Encode(*value, frame_payload));
  const std::string expected(
      "\x01"                              // kind
      "\x01\x02\x03\x04\x05\x06\x07\x08"  // id
      "\x01"                              // armed
      "\x03\x02"                          // mode
      "\x00\x00\x80\x3f\x00\x00\x00\xc0"  // gains
      "\x09\xfe\xff\xff\xff"              // inner
      "\x02\x01\xff\xff",                 // pair
      29);
  EXPECT_EQ(frame_payload, expected);
  EXPECT_EQ(frame_payload.find('\xA5'), std::string::npos);

  const auto* data = reinterpret_cast<const std::uint8_t*>(frame_payload.data());
  const auto decoded = Codec::Decode(data, frame_payload.size());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->id, value->id);
  EXPECT_EQ(decoded->mode, Mode::kDrive);
  EXPECT_EQ(decoded->gains[1], -2.0f);
  EXPECT_EQ(decoded->inner.delta, -2);
  EXPECT_EQ(decoded->pair[1], -1);
  // A bool byte that is neither 0 nor 1 is not a bool: refused.
  std::string bad = frame_payload;
  bad[9] = 2;
  EXPECT_FALSE(Codec::Decode(reinterpret_cast<const std::uint8_t*>(bad.data()), bad.size()));
  value->~Padded();
}

enum Unscoped { kOff, kOn };  // values 0 and 1 only: no wire form

TEST(NatsCodec, DefaultCodecSendsOnlyValuesItCanCheck) {
  using sluice::nats::DefaultCodec;
  using sluice::nats::kHasDefaultCodec;
  struct Counts {
    std::uint32_t a;
    std::uint32_t b;
  };
  struct Gap {
    std::uint8_t a;
    std::uint32_t b;
  };
  struct Floats {
    float x;
    float y;
  };
  struct Flagged {  // no padding, but a bool whose byte could be 2
    std::uint32_t id;
    bool on;
    std::uint8_t rest[3];
  };
  struct Named {
    std::uint64_t id;
    const char* name;  // an address
  };
  // Scalars, scoped enums and arrays have a wire form of their own.
  static_assert(std::is_same_v<DefaultCodec<double>, sluice::nats::WireCodec<double>>);
  static_assert(std::is_same_v<DefaultCodec<Mode>, sluice::nats::WireCodec<Mode>>);
  static_assert(std::is_same_v<DefaultCodec<std::array<float, 3>>,
                               sluice::nats::WireCodec<std::array<float, 3>>>);
  // A struct only with its fields listed, whatever its bytes.
  static_assert(!kHasDefaultCodec<Counts>);
  static_assert(!kHasDefaultCodec<Gap>);
  static_assert(!kHasDefaultCodec<Floats>);
  static_assert(!kHasDefaultCodec<Flagged>);
  static_assert(!kHasDefaultCodec<Named>);
  static_assert(!kHasDefaultCodec<int*>);
  static_assert(!kHasDefaultCodec<Unscoped>);
  static_assert(!sluice::nats::kHasWireForm<Unscoped>);
  static_assert(!kHasDefaultCodec<sluice_nats_test::Note>);
  static_assert(kHasDefaultCodec<sluice_nats_test::EmergencyStop>);
  // Named, the object bytes of a struct of integers: the wire's, on this host.
  std::string bytes;
  ASSERT_TRUE(sluice::nats::TriviallyCopyableCodec<Counts>::Encode({1, 2}, bytes));
  EXPECT_EQ(bytes, std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8));
}

// A scoped enum over bool is a bool on the wire: one byte, 0 or 1; any
// other byte is refused (taken as the enum, it would be a bool that is
// neither, which is undefined behaviour to read).
TEST(NatsCodec, AScopedEnumOverBoolAcceptsOnlyZeroAndOne) {
  enum class Switch : bool { kOff = false, kOn = true };
  using Codec = sluice::nats::WireCodec<Switch>;
  static_assert(sluice::nats::kWireSize<Switch> == 1);
  std::string bytes;
  ASSERT_TRUE(Codec::Encode(Switch::kOn, bytes));
  ASSERT_TRUE(Codec::Encode(Switch::kOff, bytes));
  EXPECT_EQ(bytes, std::string("\x01\x00", 2));
  const std::uint8_t on = 1;
  const std::uint8_t off = 0;
  EXPECT_EQ(Codec::Decode(&on, 1), Switch::kOn);
  EXPECT_EQ(Codec::Decode(&off, 1), Switch::kOff);
  for (int byte = 2; byte < 256; ++byte) {
    const auto value = static_cast<std::uint8_t>(byte);
    EXPECT_FALSE(Codec::Decode(&value, 1).has_value()) << byte;
  }
}

TEST(NatsCodec, TheConceptAcceptsCodecsAndRefusesOthers) {
  using sluice::nats::kIsCodecFor;
  using sluice_nats_test::Note;
  static_assert(kIsCodecFor<sluice_nats_test::NoteCodec, Note>);
  static_assert(!kIsCodecFor<sluice::nats::TriviallyCopyableCodec<int>, Note>);
  static_assert(!kIsCodecFor<sluice::nats::DefaultCodec<Note>, Note>);
  struct EncodeOnly {
    static bool Encode(const Note&, std::string&) { return true; }
  };
  static_assert(!kIsCodecFor<EncodeOnly, Note>);
  SUCCEED();
}

// ---- The receiver's view of each stream ---------------------------------------

using sluice::nats::FrameDelivery;
using sluice::nats::OriginTrust;
using sluice::nats::StreamTracker;
using sluice::nats::StreamVerdict;

TEST(NatsStreams, CountsGapsLateArrivalsAndRefusesDuplicates) {
  StreamTracker tracker;
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 5), StreamVerdict::kFirst);  // the baseline
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 6), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 9), StreamVerdict::kAfterGap);  // 7, 8 missing
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 8), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 1u);
  EXPECT_EQ(tracker.Counts().reordered, 1u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 8), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 9), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 6), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Counts().duplicates, 3u);
  // Another subject, instance or origin is another stream.
  EXPECT_EQ(tracker.Note(7, 1, "a.low", 9), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(7, 2, "a.high", 9), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(8, 1, "a.high", 9), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Counts().streams_tracked, 4u);
  EXPECT_EQ(tracker.Note(7, 1, "a.high", 0), StreamVerdict::kUnsequenced);
}

// A late frame only cancels a gap its own stream counted: numbers from
// before a stream's baseline were never gaps, of it or of another stream.
TEST(NatsStreams, ALateFrameCancelsOnlyItsOwnStreamsGap) {
  StreamTracker tracker;
  EXPECT_EQ(tracker.Note(1, 1, "a", 1), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(1, 1, "a", 6), StreamVerdict::kAfterGap);  // 2..5 lost
  EXPECT_EQ(tracker.Counts().gaps, 4u);
  EXPECT_EQ(tracker.Note(2, 1, "b", 10), StreamVerdict::kFirst);  // b's baseline
  for (std::uint64_t s = 1; s < 10; ++s) {
    EXPECT_EQ(tracker.Note(2, 1, "b", s), StreamVerdict::kLate) << s;
  }
  EXPECT_EQ(tracker.Counts().gaps, 4u) << "b's early frames cancelled a's gaps";
  EXPECT_EQ(tracker.Note(1, 1, "a", 3), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 3u);
  // A queue member counts no gaps and no late frames, and still refuses
  // duplicates.
  StreamTracker member;
  EXPECT_EQ(member.Note(3, 1, "q", 1, /*count_gaps=*/false), StreamVerdict::kFirst);
  EXPECT_EQ(member.Note(3, 1, "q", 5, false), StreamVerdict::kAfterGap);
  EXPECT_EQ(member.Note(3, 1, "q", 2, false), StreamVerdict::kLate);
  EXPECT_EQ(member.Note(3, 1, "q", 5, false), StreamVerdict::kDuplicate);
  EXPECT_EQ(member.Counts().gaps, 0u);
  EXPECT_EQ(member.Counts().reordered, 0u);
  // Forgotten streams start again from a new baseline.
  tracker.Forget([](std::string_view subject) { return subject == "a"; });
  EXPECT_EQ(tracker.Note(1, 1, "a", 100), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Counts().gaps, 3u) << "the gaps counted before stay";
  EXPECT_EQ(tracker.Peek(1, 1, "a", 100), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Peek(1, 1, "a", 102), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Peek(1, 1, "c", 1), StreamVerdict::kFirst);
}

// Notes frame `s` of one stream, delivered as `delivery` says.
StreamVerdict NoteDelivered(StreamTracker& tracker, std::uint64_t s, FrameDelivery delivery) {
  return tracker.Note(7, 1, "a.medium", s, true, OriginTrust::kKnown, 0, delivery);
}

// A bridge that takes over a durable consumer from an earlier reader (one
// killed, or stopped) is delivered again what that reader did not
// acknowledge, mixed with what follows; the numbers that reader
// acknowledged never come. Here it acknowledged 1 to 10 and 15 to 20 (its
// acknowledgements need not be in order) and left 11 to 14: none of 15 to
// 20 is a gap. From the first frame delivered here on, gaps are counted:
// 24 and 25 the stream discarded.
TEST(NatsStreams, ATakenOverDurableCountsNoGapForWhatTheEarlierReaderAcknowledged) {
  constexpr FrameDelivery kJetStream = FrameDelivery::kJetStream;
  constexpr FrameDelivery kEarlier = FrameDelivery::kJetStreamEarlier;
  StreamTracker tracker;
  const auto note = [&tracker](std::uint64_t s, FrameDelivery delivery) {
    return NoteDelivered(tracker, s, delivery);
  };
  EXPECT_EQ(note(11, kEarlier), StreamVerdict::kFirst);
  for (std::uint64_t s = 12; s <= 14; ++s) EXPECT_EQ(note(s, kEarlier), StreamVerdict::kInOrder);
  EXPECT_EQ(note(21, kJetStream), StreamVerdict::kAfterGap);  // 15 to 20: acknowledged
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(note(22, kJetStream), StreamVerdict::kInOrder);
  EXPECT_EQ(note(23, kJetStream), StreamVerdict::kInOrder);
  EXPECT_EQ(note(26, kJetStream), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  // A redelivery still refused once admitted; one of the earlier reader's
  // coming late now changes no count (it was never a gap).
  EXPECT_EQ(note(13, kEarlier), StreamVerdict::kDuplicate);
  EXPECT_EQ(note(16, kEarlier), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
  // One handed back here and delivered again after later ones: a gap, then
  // late (net 0), as on a durable read by this bridge alone.
  EXPECT_EQ(note(28, kJetStream), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 3u);
  EXPECT_EQ(note(27, kJetStream), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 2u);
}

// The takeover's other order: the new reader starts before the earlier
// reader's unacknowledged frames are due again, so it hears frames
// delivered to it first before them. Those come late, and are no gaps.
TEST(NatsStreams, ATakenOverDurablesRedeliveriesComingLateAreNoGaps) {
  constexpr FrameDelivery kJetStream = FrameDelivery::kJetStream;
  constexpr FrameDelivery kEarlier = FrameDelivery::kJetStreamEarlier;
  StreamTracker tracker;
  const auto note = [&tracker](std::uint64_t s, FrameDelivery delivery) {
    return NoteDelivered(tracker, s, delivery);
  };
  EXPECT_EQ(note(21, kJetStream), StreamVerdict::kFirst);
  EXPECT_EQ(note(23, kJetStream), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 1u);
  for (std::uint64_t s = 11; s <= 14; ++s) EXPECT_EQ(note(s, kEarlier), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Counts().gaps, 1u);  // 22 is still missing
  EXPECT_EQ(note(12, kEarlier), StreamVerdict::kDuplicate);
}

// Peek is the verdict Note would give (the receiver judges a JetStream
// message with it before admission), and it notes and counts nothing.
TEST(NatsStreams, PeekGivesNotesVerdictAndChangesNothing) {
  StreamTracker tracker;
  const auto counts_equal = [](const sluice::nats::StreamCounts& a,
                               const sluice::nats::StreamCounts& b) {
    return a.gaps == b.gaps && a.reordered == b.reordered && a.duplicates == b.duplicates &&
           a.stale == b.stale && a.streams_opened == b.streams_opened &&
           a.streams_evicted == b.streams_evicted && a.streams_tracked == b.streams_tracked;
  };
  // Each number, peeked twice (the same answer: nothing noted), then noted.
  const std::uint64_t stale = 10'000 - StreamTracker::kWindow;
  const std::uint64_t far = 10'004 + StreamTracker::kWindow + 10;
  const std::uint64_t numbers[] = {10'000, 10'001, 10'004, 10'003,  10'004,
                                   stale,  far,    far,    far + 1, 0};
  const StreamVerdict verdicts[] = {StreamVerdict::kFirst,     StreamVerdict::kInOrder,
                                    StreamVerdict::kAfterGap,  StreamVerdict::kLate,
                                    StreamVerdict::kDuplicate, StreamVerdict::kStale,
                                    StreamVerdict::kHeld,      StreamVerdict::kDuplicate,
                                    StreamVerdict::kAfterGap,  StreamVerdict::kUnsequenced};
  for (std::size_t i = 0; i < sizeof numbers / sizeof numbers[0]; ++i) {
    const sluice::nats::StreamCounts before = tracker.Counts();
    EXPECT_EQ(tracker.Peek(4, 2, "p.medium", numbers[i]), verdicts[i]) << numbers[i];
    EXPECT_EQ(tracker.Peek(4, 2, "p.medium", numbers[i]), verdicts[i]) << numbers[i];
    EXPECT_TRUE(counts_equal(tracker.Counts(), before)) << numbers[i];
    EXPECT_EQ(tracker.Note(4, 2, "p.medium", numbers[i]), verdicts[i]) << numbers[i];
  }
}

TEST(NatsStreams, ANumberBehindTheWindowIsStaleAndAJumpLeavesNoOldMarks) {
  StreamTracker tracker;
  const std::uint64_t window = StreamTracker::kWindow;
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kFirst);
  for (std::uint64_t s = 2; s <= window + 1; ++s) {
    ASSERT_EQ(tracker.Note(1, 1, "s", s), StreamVerdict::kInOrder) << s;
  }
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kStale);
  EXPECT_EQ(tracker.Note(1, 1, "s", 2), StreamVerdict::kDuplicate);  // still in the window
  // A jump of more than the window, held until the next frame confirms it:
  // then everything skipped is a gap (but the held frame), and a late
  // number inside the new window is late, not a duplicate of the mark an
  // older number left in its bit.
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window - 2), StreamVerdict::kHeld);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 3 * window - (window + 1) - 2);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window - 2), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window - 1), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 2 * window + 1), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 2 * window), StreamVerdict::kStale);
  // A short jump: the numbers skipped are not marked, whatever their bits
  // held a window ago.
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window + 3), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window + 1), StreamVerdict::kLate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3 * window + 2), StreamVerdict::kLate);
}

TEST(NatsStreams, HostileNumbersNeitherWrapTheCountNorGrowTheTable) {
  StreamTracker tracker(/*max_streams=*/4);
  // One frame near 2^64 is held; a second confirms the jump, whose gaps are
  // bounded (kMaxJumpGaps), so the count reads neither 1.8e19 nor wraps.
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(1, 1, "s", 2), StreamVerdict::kInOrder);  // the stream's place confirmed
  EXPECT_EQ(tracker.Note(1, 1, "s", ~0ull - 1), StreamVerdict::kHeld);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  EXPECT_EQ(tracker.Note(1, 1, "s", ~0ull), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Note(2, 1, "s", 1), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(2, 1, "s", 2), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(2, 1, "s", ~0ull - 1), StreamVerdict::kHeld);
  EXPECT_EQ(tracker.Note(2, 1, "s", ~0ull), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Counts().gaps, 2 * StreamTracker::kMaxJumpGaps);
  EXPECT_EQ(tracker.Note(1, 1, "s", ~0ull), StreamVerdict::kDuplicate);
  for (std::uint64_t origin = 10; origin < 100; ++origin) {
    EXPECT_EQ(tracker.Note(origin, 1, "s", 1), StreamVerdict::kFirst);
  }
  const auto counts = tracker.Counts();
  EXPECT_EQ(counts.streams_tracked, 4u);
  EXPECT_EQ(counts.streams_opened, 92u);   // 2 + 90
  EXPECT_EQ(counts.streams_evicted, 88u);  // all but the 4 that fit
  // The least recently heard went first: 99 is still known, 1 is not.
  EXPECT_EQ(tracker.Note(99, 1, "s", 1), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kFirst);
}

// Two parts of the table: streams of unknown origins never push a known
// stream out, and push an unknown one out only once it has been silent for
// the idle time; otherwise the new stream is refused, and counted.
TEST(NatsStreams, UnknownOriginsCannotPushKnownOrBusyStreamsOut) {
  constexpr auto kKnown = OriginTrust::kKnown;
  constexpr auto kUnknown = OriginTrust::kUnknown;
  StreamTracker tracker(sluice::nats::StreamTableLimits{/*known=*/2, /*unknown=*/2,
                                                        /*idle_ns=*/1000});
  EXPECT_EQ(tracker.Note(1, 1, "s", 1, true, kKnown, 0), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(2, 1, "s", 1, true, kKnown, 0), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(10, 1, "s", 1, true, kUnknown, 0), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(11, 1, "s", 1, true, kUnknown, 500), StreamVerdict::kFirst);
  // Full of unknown streams heard within the idle time: refused, not noted.
  for (std::uint64_t origin = 100; origin < 150; ++origin) {
    EXPECT_EQ(tracker.Peek(origin, 1, "s", 1, kUnknown, 999), StreamVerdict::kTableFull);
    EXPECT_EQ(tracker.Note(origin, 1, "s", 1, true, kUnknown, 999), StreamVerdict::kTableFull);
  }
  auto counts = tracker.Counts();
  EXPECT_EQ(counts.refused_table_full, 50u);
  EXPECT_EQ(counts.streams_evicted, 0u);
  EXPECT_EQ(counts.streams_tracked, 4u);
  // Every stream is still known: replays are duplicates.
  for (const std::uint64_t origin : {1, 2, 10, 11}) {
    EXPECT_EQ(tracker.Note(origin, 1, "s", 1, true, kUnknown, 999), StreamVerdict::kDuplicate)
        << origin;
  }
  // Origins 10 and 11 were heard at 999 just now: at 1,998 neither is idle.
  EXPECT_EQ(tracker.Note(200, 1, "s", 1, true, kUnknown, 1998), StreamVerdict::kTableFull);
  EXPECT_EQ(tracker.Note(10, 1, "s", 2, true, kUnknown, 1998), StreamVerdict::kInOrder);
  // At 2,999, 11 (last heard at 999) is idle and goes; 10 (1,998) stays.
  EXPECT_EQ(tracker.Peek(200, 1, "s", 1, kUnknown, 2999), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(200, 1, "s", 1, true, kUnknown, 2999), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(10, 1, "s", 2, true, kUnknown, 3000), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(11, 1, "s", 1, true, kUnknown, 3000), StreamVerdict::kTableFull);
  // A new known stream evicts the least recently heard known one once it is
  // idle, never an unknown one.
  EXPECT_EQ(tracker.Note(3, 1, "s", 1, true, kKnown, 3000), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(10, 1, "s", 2, true, kUnknown, 3000), StreamVerdict::kDuplicate);
  counts = tracker.Counts();
  EXPECT_EQ(counts.streams_evicted, 2u);  // 11 (idle), then known 1 or 2
  EXPECT_EQ(counts.streams_tracked, 4u);
}

// Made-up instances of a known origin fill the known part only while the
// known streams in use are heard: those are never pushed out.
TEST(NatsStreams, MadeUpInstancesOfAKnownOriginCannotPushKnownStreamsOut) {
  StreamTracker tracker(sluice::nats::StreamTableLimits{/*known=*/2, /*unknown=*/2,
                                                        /*idle_ns=*/1000});
  EXPECT_EQ(tracker.Note(0xA, 1, "s", 1, true, OriginTrust::kKnown, 0), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(0xA, 2, "s", 1, true, OriginTrust::kKnown, 0), StreamVerdict::kFirst);
  for (std::uint64_t instance = 100; instance < 200; ++instance) {
    EXPECT_EQ(tracker.Note(0xA, instance, "s", 1, true, OriginTrust::kKnown, 10),
              StreamVerdict::kTableFull);
  }
  EXPECT_EQ(tracker.Note(0xA, 1, "s", 1, true, OriginTrust::kKnown, 20), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(0xA, 2, "s", 1, true, OriginTrust::kKnown, 20), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Counts().streams_evicted, 0u);
  EXPECT_EQ(tracker.Counts().refused_table_full, 100u);
}

// A held frame stays a duplicate whatever comes after it: another far
// frame, below or above it, or the sender reaching it.
TEST(NatsStreams, AHeldFrameStaysADuplicateWhateverComesAfterIt) {
  StreamTracker tracker;
  for (std::uint64_t s = 1; s <= 3; ++s)
    ASSERT_NE(tracker.Note(1, 1, "s", s), StreamVerdict::kStale);
  EXPECT_EQ(tracker.Note(1, 1, "s", 10'000), StreamVerdict::kHeld);
  EXPECT_EQ(tracker.Note(1, 1, "s", 9'999), StreamVerdict::kHeld);  // below it: held too
  EXPECT_EQ(tracker.Note(1, 1, "s", 10'000), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 9'999), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 50'000), StreamVerdict::kAfterGap);  // above both: taken
  EXPECT_EQ(tracker.Note(1, 1, "s", 10'000), StreamVerdict::kStale);     // far behind now
  EXPECT_EQ(tracker.Counts().gaps, 50'000u - 3u - 1u - 2u);              // but the two held
  // The sender reaching a held number: a duplicate (marked in the window).
  StreamTracker other;
  EXPECT_EQ(other.Note(2, 1, "s", 1), StreamVerdict::kFirst);
  EXPECT_EQ(other.Note(2, 1, "s", 5'000), StreamVerdict::kHeld);
  for (std::uint64_t s = 2; s < 5'000; ++s)
    ASSERT_EQ(other.Note(2, 1, "s", s), StreamVerdict::kInOrder) << s;
  EXPECT_EQ(other.Note(2, 1, "s", 5'000), StreamVerdict::kDuplicate);
  // At most kMaxHeld: a flood of far numbers, each below the others, is
  // refused past them (not delivered, counted).
  StreamTracker flooded;
  EXPECT_EQ(flooded.Note(3, 1, "s", 1), StreamVerdict::kFirst);
  for (std::uint64_t i = 0; i < StreamTracker::kMaxHeld; ++i) {
    EXPECT_EQ(flooded.Note(3, 1, "s", ~0ull - i), StreamVerdict::kHeld);
  }
  EXPECT_EQ(flooded.Note(3, 1, "s", 1'000'000), StreamVerdict::kHeldFull);
  EXPECT_EQ(flooded.Counts().jumps_refused, 1u);
  EXPECT_EQ(flooded.Note(3, 1, "s", 2), StreamVerdict::kInOrder);  // the sender goes on
}

// A stream that loses more than a window between each two frames it hears
// (a JetStream stream discarding what a slow reader had not fetched): each
// frame far ahead is held and the next one confirms it, so the gaps are
// exact, but for the last jump if it is not confirmed.
TEST(NatsStreams, LossesWiderThanTheWindowAreCountedExactly) {
  StreamTracker tracker;
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(1, 1, "s", 2), StreamVerdict::kInOrder);
  std::uint64_t heard = 2;
  for (std::uint64_t s = 5'002; s <= 1'000'002; s += 5'000) {
    const StreamVerdict verdict = tracker.Note(1, 1, "s", s);
    ASSERT_TRUE(verdict == StreamVerdict::kHeld || verdict == StreamVerdict::kAfterGap) << s;
    ++heard;
  }
  // 200 frames after the first two: 100 held, each confirmed by the next.
  EXPECT_EQ(heard, 202u);
  EXPECT_EQ(heard + tracker.Counts().gaps, 1'000'002u);
}

// One first frame numbered far ahead (the first this receiver heard of the
// stream) does not make the sender's frames stale: the stream starts again
// at the sender's frame, and the forged one, held, stays a duplicate.
TEST(NatsStreams, AFirstFrameNumberedFarAheadSilencesNoSender) {
  StreamTracker tracker;
  EXPECT_EQ(tracker.Note(1, 1, "s", ~0ull), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Peek(1, 1, "s", 4), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(1, 1, "s", 4), StreamVerdict::kFirst);
  for (std::uint64_t s = 5; s <= 10; ++s)
    EXPECT_EQ(tracker.Note(1, 1, "s", s), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(1, 1, "s", ~0ull), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 3), StreamVerdict::kLate);  // before the new baseline
  EXPECT_EQ(tracker.Counts().stale, 0u);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
}

// A held frame the sender's numbering passes inside the window was
// delivered: never a gap (reordered frames, no forgery).
TEST(NatsStreams, AHeldFramePassedInsideTheWindowIsNoGap) {
  StreamTracker tracker;
  for (std::uint64_t s = 1; s <= 10; ++s)
    ASSERT_NE(tracker.Note(1, 1, "s", s), StreamVerdict::kStale);
  EXPECT_EQ(tracker.Note(1, 1, "s", 5'000), StreamVerdict::kHeld);
  EXPECT_EQ(tracker.Note(1, 1, "s", 4'000), StreamVerdict::kAfterGap);
  for (std::uint64_t s = 11; s < 4'000; ++s)
    ASSERT_EQ(tracker.Note(1, 1, "s", s), StreamVerdict::kLate);
  for (std::uint64_t s = 4'001; s < 5'000; ++s)
    ASSERT_EQ(tracker.Note(1, 1, "s", s), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(1, 1, "s", 5'001), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(1, 1, "s", 5'000), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
}

// One forged frame far behind a stream heard once, then the sender's next
// frame: the stream goes back to the sender's numbering, and no gap is
// counted for the forged one's distance.
TEST(NatsStreams, OneForgedFrameBehindAStreamHeardOnceAddsNoGaps) {
  constexpr std::uint64_t kReal = std::uint64_t{1} << 40;
  StreamTracker tracker;
  EXPECT_EQ(tracker.Note(1, 1, "s", kReal), StreamVerdict::kFirst);
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kFirst);  // forged: the stream restarts
  EXPECT_EQ(tracker.Note(1, 1, "s", kReal + 1), StreamVerdict::kAfterGap);
  EXPECT_EQ(tracker.Note(1, 1, "s", kReal + 2), StreamVerdict::kInOrder);
  EXPECT_EQ(tracker.Note(1, 1, "s", kReal), StreamVerdict::kDuplicate);
  EXPECT_EQ(tracker.Note(1, 1, "s", 1), StreamVerdict::kStale);
  EXPECT_EQ(tracker.Counts().gaps, 0u);
  // With 4 held already, a frame that would start the stream again is
  // refused: the first frame could not be kept, and its replay must fail.
  StreamTracker full;
  EXPECT_EQ(full.Note(2, 1, "s", 10'000), StreamVerdict::kFirst);
  for (std::uint64_t i = 0; i < StreamTracker::kMaxHeld; ++i) {
    EXPECT_EQ(full.Note(2, 1, "s", ~0ull - i), StreamVerdict::kHeld);
  }
  EXPECT_EQ(full.Note(2, 1, "s", 1), StreamVerdict::kHeldFull);
  EXPECT_EQ(full.Note(2, 1, "s", 10'000), StreamVerdict::kDuplicate);
}

}  // namespace
