// The bridge's frame and codecs, without a server.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sluice/nats/codec.hpp>
#include <sluice/nats/frame.hpp>
#include <string>
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
  header.timestamp_us = 0xA1A2A3A4A5A6A7A8ull;
  header.origin_id = 0xFFFFFFFF00000001ull;
  return header;
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
  EXPECT_EQ(view.header.timestamp_us, 0xA1A2A3A4A5A6A7A8ull);
  EXPECT_EQ(view.header.origin_id, 0xFFFFFFFF00000001ull);
  ASSERT_EQ(view.payload_size, 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.payload), 3), "abc");
}

// The bus stamps nanoseconds; the wire keeps microseconds at offset 24 (the
// layout and version unchanged): the sender divides by 1000, the receiver's
// TimestampNanos() multiplies, so a timestamp round-trips to the microsecond.
TEST(NatsFrame, TimestampTravelsInMicrosecondsAndRoundTripsToTheMicrosecond) {
  const std::uint64_t timestamp_ns = 1'234'567'890'123'456'789ull;
  FrameHeader header = SampleHeader();
  header.timestamp_us = sluice::nats::FrameTimestampMicros(timestamp_ns);
  const std::vector<std::uint8_t> frame = MakeFrame(header, "");
  std::uint64_t on_wire = 0;
  for (int i = 7; i >= 0; --i) on_wire = (on_wire << 8) | frame[24 + static_cast<std::size_t>(i)];
  EXPECT_EQ(on_wire, 1'234'567'890'123'456u);
  FrameView view;
  ASSERT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kNone);
  EXPECT_EQ(view.header.TimestampNanos(), 1'234'567'890'123'456'000ull);
  EXPECT_EQ(view.header.TimestampNanos(), timestamp_ns / 1000 * 1000);
}

TEST(NatsFrame, LayoutIsLittleEndianWithMagicAndVersionFirst) {
  const std::vector<std::uint8_t> frame = MakeFrame(SampleHeader(), "");
  const std::vector<std::uint8_t> expected_start = {'S', 'L', 'N', 'F', 1, 2, 0xEF, 0xBE,
                                                    4,   3,   2,   1,   0, 0, 0,    0};
  EXPECT_EQ(std::vector<std::uint8_t>(frame.begin(), frame.begin() + 16), expected_start);
  EXPECT_EQ(frame[16], 0x88);  // msg_id, low byte first
  EXPECT_EQ(frame[39], 0xFF);  // origin id, high byte last
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
  frame[4] = 2;
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kUnknownVersion);
  frame[4] = 0;
  EXPECT_EQ(DecodeFrame(frame.data(), frame.size(), &view), FrameError::kUnknownVersion);
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
  EXPECT_EQ(DecodeFrame(good.data(), good.size(), &view), FrameError::kNone);
}

TEST(NatsFrame, EveryErrorHasAName) {
  for (std::size_t e = 0; e < sluice::nats::kFrameErrorCount; ++e) {
    EXPECT_STRNE(sluice::nats::ToString(static_cast<FrameError>(e)), "invalid") << e;
  }
  // The Prometheus reasons of the bridge's own checks.
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kPriorityMismatch), "priority_mismatch");
  EXPECT_STREQ(sluice::nats::ToString(FrameError::kDecodeThrew), "decode_threw");
  EXPECT_STREQ(sluice::nats::ToString(static_cast<FrameError>(sluice::nats::kFrameErrorCount)),
               "invalid");
}

TEST(NatsCodec, TriviallyCopyableRoundTripsAndRefusesOtherSizes) {
  using Codec = sluice::nats::DefaultCodec<sluice_nats_test::SensorReading>;
  static_assert(
      std::is_same_v<Codec, sluice::nats::TriviallyCopyableCodec<sluice_nats_test::SensorReading>>);
  std::string bytes;
  ASSERT_TRUE(Codec::Encode({3, 2.5f, 99}, bytes));
  ASSERT_EQ(bytes.size(), sizeof(sluice_nats_test::SensorReading));
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const auto decoded = Codec::Decode(data, bytes.size());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->sensor, 3u);
  EXPECT_EQ(decoded->value, 2.5f);
  EXPECT_EQ(decoded->seq, 99u);
  EXPECT_FALSE(Codec::Decode(data, bytes.size() - 1).has_value());
  EXPECT_FALSE(Codec::Decode(nullptr, 0).has_value());
}

TEST(NatsCodec, TheConceptAcceptsCodecsAndRefusesOthers) {
  using sluice::nats::kIsCodecFor;
  using sluice_nats_test::Note;
  static_assert(kIsCodecFor<sluice_nats_test::NoteCodec, Note>);
  static_assert(!kIsCodecFor<sluice::nats::TriviallyCopyableCodec<int>, Note>);
  static_assert(std::is_void_v<sluice::nats::DefaultCodec<Note>>);
  struct EncodeOnly {
    static bool Encode(const Note&, std::string&) { return true; }
  };
  static_assert(!kIsCodecFor<EncodeOnly, Note>);
  SUCCEED();
}

}  // namespace
