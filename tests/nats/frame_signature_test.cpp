// Signed frames (version 3), without a server: the layout, the MAC checked
// against OpenSSL's own command-line tool, and a verifier that refuses any
// change to a signed byte, another key, or a key it does not have.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sluice/nats/frame.hpp>
#include <sluice/nats/frame_signature.hpp>
#include <string>
#include <vector>

namespace {

using sluice::nats::DecodeFrame;
using sluice::nats::FrameError;
using sluice::nats::FrameHeader;
using sluice::nats::FrameKey;
using sluice::nats::FrameView;
using sluice::nats::kFrameHeaderSize;
using sluice::nats::kFrameMacSize;
using sluice::nats::kFrameSignatureSize;
using Verdict = sluice::nats::detail::FrameVerifier::Verdict;

constexpr std::uint64_t kOrigin = 0xA11CE;

FrameKey Key(std::uint64_t origin, std::uint32_t id, char fill) {
  return FrameKey{origin, id, std::string(32, fill)};
}

constexpr const char* kSubject = "fleet.r1.stop.high";

// A signed frame of `key` for kSubject: version 3 header, payload, key id,
// MAC.
std::string SignedFrame(const FrameKey& key, const std::string& payload) {
  FrameHeader header;
  header.priority = sluice::MessagePriority::HIGH;
  header.type_id = 7;
  header.origin_id = key.origin_id;
  header.instance_id = 42;
  header.sequence = 1;
  header.payload_size = static_cast<std::uint32_t>(payload.size());
  std::string frame(kFrameHeaderSize, '\0');
  sluice::nats::EncodeFrameHeader(header, reinterpret_cast<std::uint8_t*>(frame.data()),
                                  /*signed_frame=*/true);
  frame += payload;
  EXPECT_TRUE(sluice::nats::detail::AppendSignature(frame, key, kSubject));
  return frame;
}

FrameError Decode(const std::string& frame, FrameView* view) {
  return DecodeFrame(reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size(), view);
}

std::string Hex(const std::uint8_t* bytes, std::size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < size; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 15];
  }
  return hex;
}

class NatsFrameSignature : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sluice::nats::kHasFrameSigning) {
      GTEST_SKIP() << "built without OpenSSL's libcrypto: no signed frames";
    }
  }
};

TEST_F(NatsFrameSignature, ASignedFrameIsVersion3WithTheKeyIdAndTheMacLast) {
  const FrameKey key = Key(kOrigin, 0x01020304, 'k');
  const std::string frame = SignedFrame(key, "payload");
  ASSERT_EQ(frame.size(), kFrameHeaderSize + 7 + kFrameSignatureSize);
  EXPECT_EQ(frame[4], 3);
  // Bytes 12-15: the payload's size alone, not the signature's.
  EXPECT_EQ(frame[12], 7);
  // The key id, little-endian, right after the payload.
  EXPECT_EQ(static_cast<std::uint8_t>(frame[kFrameHeaderSize + 7]), 0x04);
  EXPECT_EQ(static_cast<std::uint8_t>(frame[kFrameHeaderSize + 10]), 0x01);
  FrameView view;
  ASSERT_EQ(Decode(frame, &view), FrameError::kNone);
  EXPECT_EQ(view.header.version, sluice::nats::kFrameVersion);  // version 2's header
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.payload), view.payload_size), "payload");
  ASSERT_TRUE(view.signature.present);
  EXPECT_EQ(view.signature.key_id, 0x01020304u);
  EXPECT_EQ(view.signature.signed_size, frame.size() - kFrameMacSize);
  EXPECT_EQ(view.signature.mac,
            reinterpret_cast<const std::uint8_t*>(frame.data()) + frame.size() - kFrameMacSize);
  // An unsigned frame has none.
  std::string unsigned_frame = frame.substr(0, kFrameHeaderSize + 7);
  unsigned_frame[4] = 2;
  ASSERT_EQ(Decode(unsigned_frame, &view), FrameError::kNone);
  EXPECT_FALSE(view.signature.present);
}

// The MAC is HMAC-SHA256 over the subject's length (2 bytes,
// little-endian), the subject, then every byte of the frame before the MAC,
// as OpenSSL's own tool computes it from the key and those bytes.
TEST_F(NatsFrameSignature, TheMacIsTheHmacSha256ThatOpensslComputes) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl command is not installed (Debian: openssl)";
  }
  const FrameKey key{kOrigin, 9, "a secret of thirty-two bytes or more, for the test"};
  const std::string frame = SignedFrame(key, "some payload bytes");
  char path[] = "/tmp/sluice-signed-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    const std::string subject = kSubject;
    const char length[2] = {static_cast<char>(subject.size()), 0};
    out.write(length, 2);
    out << subject;
    out.write(frame.data(), static_cast<std::streamsize>(frame.size() - kFrameMacSize));
  }
  const std::string command =
      "openssl dgst -sha256 -mac HMAC -macopt hexkey:" +
      Hex(reinterpret_cast<const std::uint8_t*>(key.secret.data()), key.secret.size()) + " -r " +
      path;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line[256] = {};
  const bool read = std::fgets(line, sizeof line, pipe) != nullptr;
  ::pclose(pipe);
  ::unlink(path);
  ASSERT_TRUE(read);
  const std::string expected = std::string(line).substr(0, 2 * kFrameMacSize);
  EXPECT_EQ(Hex(reinterpret_cast<const std::uint8_t*>(frame.data()) + frame.size() - kFrameMacSize,
                kFrameMacSize),
            expected);
}

TEST_F(NatsFrameSignature, AnyChangedByteOrAnotherKeyIsAMismatchAndAnUnknownKeyIsNoKey) {
  const FrameKey key = Key(kOrigin, 1, 'k');
  const sluice::nats::detail::FrameVerifier verifier(
      {Key(kOrigin, 2, 'x'), key, Key(kOrigin + 1, 1, 'y')});
  const std::string frame = SignedFrame(key, "reading");
  FrameView view;
  ASSERT_EQ(Decode(frame, &view), FrameError::kNone);
  EXPECT_EQ(verifier.Check(view, kSubject), Verdict::kVerified);
  // Every bit of every byte, the MAC's included.
  int mismatches = 0;
  int decoded = 0;
  for (std::size_t i = 0; i < frame.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string changed = frame;
      changed[i] = static_cast<char>(changed[i] ^ (1 << bit));
      if (Decode(changed, &view) != FrameError::kNone) continue;  // no longer a frame
      ++decoded;
      const Verdict verdict = verifier.Check(view, kSubject);
      EXPECT_NE(verdict, Verdict::kVerified) << "byte " << i << " bit " << bit;
      mismatches += verdict == Verdict::kMismatch ? 1 : 0;
    }
  }
  EXPECT_GT(decoded, 500);
  EXPECT_GT(mismatches, 0);
  // The same frame signed with another origin's key, or another key of the
  // same origin, under this origin and key id: a mismatch.
  const FrameKey forger = Key(kOrigin, 1, 'f');
  const std::string forged = SignedFrame(forger, "reading");
  ASSERT_EQ(Decode(forged, &view), FrameError::kNone);
  EXPECT_EQ(verifier.Check(view, kSubject), Verdict::kMismatch);
  // The same frame on another subject: a mismatch (a replay there would
  // be a new stream).
  ASSERT_EQ(Decode(frame, &view), FrameError::kNone);
  EXPECT_EQ(verifier.Check(view, "fleet.r2.stop.high"), Verdict::kMismatch);
  EXPECT_EQ(verifier.Check(view, "fleet.r1.stop.low"), Verdict::kMismatch);
  EXPECT_EQ(verifier.Check(view, ""), Verdict::kMismatch);
  // A key id or an origin the verifier has no key for.
  const std::string unknown_id = SignedFrame(Key(kOrigin, 77, 'k'), "reading");
  ASSERT_EQ(Decode(unknown_id, &view), FrameError::kNone);
  EXPECT_EQ(verifier.Check(view, kSubject), Verdict::kNoKey);
  const std::string unknown_origin = SignedFrame(Key(0xBAD, 1, 'k'), "reading");
  ASSERT_EQ(Decode(unknown_origin, &view), FrameError::kNone);
  EXPECT_EQ(verifier.Check(view, kSubject), Verdict::kNoKey);
}

TEST_F(NatsFrameSignature, NoPrefixOfASignedFrameDecodes) {
  const std::string frame = SignedFrame(Key(kOrigin, 1, 'k'), std::string(20, 'z'));
  FrameView view;
  for (std::size_t size = 0; size < frame.size(); ++size) {
    const FrameError error =
        DecodeFrame(reinterpret_cast<const std::uint8_t*>(frame.data()), size, &view);
    EXPECT_EQ(error, size < kFrameHeaderSize + kFrameSignatureSize ? FrameError::kTooShort
                                                                   : FrameError::kLengthMismatch)
        << size;
  }
}

}  // namespace
