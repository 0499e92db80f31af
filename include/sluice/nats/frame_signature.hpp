// Signed frames: the MAC of a version 3 frame (sluice/nats/frame.hpp), an
// HMAC-SHA256 (RFC 2104) over the subject the frame is published on, then
// the header, the payload and the key id, keyed with a secret of the
// sending origin's (FrameKey). The subject is signed too, so a frame
// captured on one subject does not verify on another (each subject is a
// stream of its own: there it would be new). The sender
// appends it (AppendSignature); a receiver looks the key up by the frame's
// origin and key id and compares in constant time (FrameVerifier). OpenSSL's
// libcrypto computes it: sluice::nats defines SLUICE_NATS_HAS_SIGNING=1 and
// links it when CMake finds it; without, kHasFrameSigning is false and
// Start refuses options that name a key.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/options.hpp"

#ifndef SLUICE_NATS_HAS_SIGNING
#define SLUICE_NATS_HAS_SIGNING 0
#endif
#if SLUICE_NATS_HAS_SIGNING
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

inline constexpr bool kHasFrameSigning = SLUICE_NATS_HAS_SIGNING != 0;

namespace detail {

// Whether the options name any key (and so need signing built in).
inline bool WantsSigning(const BridgeOptions& options) noexcept {
  return !options.signing_key.secret.empty() || !options.frame_keys.empty();
}

// The longest subject a signed frame may travel on (its length is signed
// in two bytes; NATS's own limit on a subject is far below).
inline constexpr std::size_t kMaxSignedSubject = 0xFFFF;

// The MAC of a frame published on `subject`, whose bytes before the MAC
// are `size` bytes at `data`, under `secret`, into mac[0, kFrameMacSize):
// HMAC-SHA256 over the subject's length (2 bytes, little-endian), the
// subject, then those bytes. False when signing is not built in, the
// subject is longer than kMaxSignedSubject, or libcrypto failed (or no
// memory for the bytes' copy).
inline bool ComputeFrameMac(const std::string& secret, std::string_view subject,
                            const std::uint8_t* data, std::size_t size,
                            std::uint8_t* mac) noexcept {
#if SLUICE_NATS_HAS_SIGNING
  if (subject.size() > kMaxSignedSubject) return false;
#if SLUICE_HAS_EXCEPTIONS
  try {
#endif
    // One buffer for the one-shot HMAC (its streaming API is deprecated in
    // OpenSSL 3), reused by each thread.
    thread_local std::vector<std::uint8_t> input;
    input.resize(2 + subject.size() + size);
    StoreLittle<std::uint16_t>(input.data(), static_cast<std::uint16_t>(subject.size()));
    std::copy(subject.begin(), subject.end(), input.begin() + 2);
    if (size > 0) std::copy(data, data + size, input.data() + 2 + subject.size());
    unsigned int written = 0;
    const unsigned char* made = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                     input.data(), input.size(), mac, &written);
    return made != nullptr && written == kFrameMacSize;
#if SLUICE_HAS_EXCEPTIONS
  } catch (...) {
    return false;
  }
#endif
#else
  (void)secret;
  (void)subject;
  (void)data;
  (void)size;
  (void)mac;
  return false;
#endif
}

// Appends the signature block to `frame`, which holds a version 3 header
// (EncodeFrameHeader with signed_frame) and its payload and is to be
// published on `subject`: `key`'s id, then the MAC (ComputeFrameMac).
// False (frame unspecified) when the MAC could not be made.
inline bool AppendSignature(std::string& frame, const FrameKey& key, std::string_view subject) {
  std::uint8_t block[kFrameSignatureSize];
  StoreLittle<std::uint32_t>(block, key.key_id);
  frame.append(reinterpret_cast<const char*>(block), kFrameKeyIdSize);
  std::uint8_t* mac = block + kFrameKeyIdSize;
  if (!ComputeFrameMac(key.secret, subject, reinterpret_cast<const std::uint8_t*>(frame.data()),
                       frame.size(), mac)) {
    return false;
  }
  frame.append(reinterpret_cast<const char*>(mac), kFrameMacSize);
  return true;
}

// A receiver's keys, looked up by (origin, key id). Built once, before any
// frame is checked; read only after, from any thread.
class FrameVerifier {
 public:
  enum class Verdict : std::uint8_t {
    kVerified,  // a key of its origin and id gives its MAC
    kNoKey,     // no key of its origin and id
    kMismatch,  // that key gives another MAC
  };

  FrameVerifier() = default;
  explicit FrameVerifier(std::vector<FrameKey> keys) : keys_(std::move(keys)) {
    std::sort(keys_.begin(), keys_.end(), Before);
  }

  bool Empty() const noexcept { return keys_.empty(); }

  // A signed frame (view.signature.present) that arrived on `subject`.
  Verdict Check(const FrameView& view, std::string_view subject) const noexcept {
    FrameKey wanted;
    wanted.origin_id = view.header.origin_id;
    wanted.key_id = view.signature.key_id;
    const auto key = std::lower_bound(keys_.begin(), keys_.end(), wanted, Before);
    if (key == keys_.end() || key->origin_id != wanted.origin_id || key->key_id != wanted.key_id) {
      return Verdict::kNoKey;
    }
    std::uint8_t mac[kFrameMacSize];
    if (!ComputeFrameMac(key->secret, subject, view.signature.signed_bytes,
                         view.signature.signed_size, mac)) {
      return Verdict::kMismatch;
    }
#if SLUICE_NATS_HAS_SIGNING
    // Constant time: how far a forged MAC matched tells its maker nothing.
    return CRYPTO_memcmp(mac, view.signature.mac, kFrameMacSize) == 0 ? Verdict::kVerified
                                                                      : Verdict::kMismatch;
#else
    return Verdict::kMismatch;
#endif
  }

 private:
  static bool Before(const FrameKey& a, const FrameKey& b) noexcept {
    return std::tie(a.origin_id, a.key_id) < std::tie(b.origin_id, b.key_id);
  }

  std::vector<FrameKey> keys_;
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
