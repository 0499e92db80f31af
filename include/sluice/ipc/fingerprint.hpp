// What two processes must agree on to share a bus segment: the payload's
// alternatives (each one's name, size and alignment, in order), the
// capacity, the sizes the layout comes from, and the library's ABI tag. The
// creator writes it into the segment; an attaching process compares it
// with its own and is refused, told which part differs, on any mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "sluice/config.hpp"
#include "sluice/version.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace ipc {

// Why an attach (or a create over an existing segment) was refused.
enum class AttachError : std::uint8_t {
  kNone = 0,
  kBadName,           // not "/name": one leading '/', no other, 2 to 247 characters
  kNotFound,          // no segment of that name (no consumer has created it)
  kPermissionDenied,  // the segment's owner, group or mode does not admit this process
  kNotASegment,       // too small, or not written by Sluice (no magic number)
  kNotReady,          // its creator has not finished writing it
  kAbiTag,            // another Sluice version, or other settings (cache line, position bits)
  kPayloadTypes,      // other payload alternatives (names, sizes, alignments, order, schema)
  kCapacity,          // another capacity
  kLayout,            // the same types and capacity, yet another envelope or queue size
  kConsumerGone,      // the consumer that created it has exited (or was killed)
  kConsumerExists,    // Create: a live consumer already owns a segment of that name
  kSystemError,       // shm_open, ftruncate, mmap or fchown failed (see errno)
  kBadOptions,        // Create: invalid admission thresholds or check interval
  kNoFreeLane,        // Attach: every producer lane is taken (ShmBusTraits::kMaxProducers)
  kUntrustedSegment,  // Create: the name's segment belongs to another user or has a wider mode;
                      // Attach: a process of another user answered, or handed out another bus
  kNoAnswer,          // Attach: the consumer's hand-out did not answer in time
};

constexpr const char* ToString(AttachError error) noexcept {
  switch (error) {
    case AttachError::kNone:
      return "attached";
    case AttachError::kBadName:
      return "bad segment name (want \"/name\", at most 247 characters, one '/')";
    case AttachError::kNotFound:
      return "no such segment";
    case AttachError::kPermissionDenied:
      return "permission denied by the segment's owner, group or mode";
    case AttachError::kNotASegment:
      return "not a Sluice bus segment";
    case AttachError::kNotReady:
      return "the segment's creator has not finished writing it";
    case AttachError::kAbiTag:
      return "ABI tag differs (another Sluice version or build settings)";
    case AttachError::kPayloadTypes:
      return "payload types differ (names, sizes, alignments, order or schema version)";
    case AttachError::kCapacity:
      return "capacity differs";
    case AttachError::kLayout:
      return "layout differs (envelope or queue size)";
    case AttachError::kConsumerGone:
      return "the segment's consumer has exited";
    case AttachError::kConsumerExists:
      return "a live consumer already owns this segment";
    case AttachError::kSystemError:
      return "system call failed (errno)";
    case AttachError::kBadOptions:
      return "invalid options (admission thresholds or producer check interval)";
    case AttachError::kNoFreeLane:
      return "every producer lane is taken (raise ShmBusTraits::kMaxProducers)";
    case AttachError::kUntrustedSegment:
      return "a segment of that name belongs to another user or group, or has a wider mode than "
             "asked (left alone: remove it, or choose another name); or, attaching, a process "
             "of another user answered for the bus";
    case AttachError::kNoAnswer:
      return "the consumer's hand-out did not answer in time (busy, or stopped)";
  }
  return "invalid";
}

namespace detail {

// The type's name as the compiler spells it in a function signature,
// between "T = " and the next ';' or ']', in one spelling for GCC and
// Clang: GCC writes "long unsigned int" and "{anonymous}" where Clang writes
// "unsigned long" and "(anonymous namespace)"; GCC's are rewritten.
template <typename T>
constexpr std::string_view SpelledSignature() noexcept {
  return __PRETTY_FUNCTION__;
}
inline void ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}
template <typename T>
std::string TypeName() {
  const std::string_view signature = SpelledSignature<T>();
  const std::size_t start = signature.find("T = ");
  std::string_view name = start == std::string_view::npos ? signature : signature.substr(start + 4);
  const std::size_t end = name.find_first_of(";]");
  std::string spelled(end == std::string_view::npos ? name : name.substr(0, end));
  // Longest first: "long long unsigned int" before "long unsigned int".
  ReplaceAll(spelled, "long long unsigned int", "unsigned long long");
  ReplaceAll(spelled, "long long int", "long long");
  ReplaceAll(spelled, "long unsigned int", "unsigned long");
  ReplaceAll(spelled, "short unsigned int", "unsigned short");
  ReplaceAll(spelled, "long int", "long");
  ReplaceAll(spelled, "short int", "short");
  ReplaceAll(spelled, "{anonymous}", "(anonymous namespace)");
  return spelled;
}

// FNV-1a, 64 bits: a fingerprint, not a defence (a hostile writer can
// forge any header; the consumer bounds what it reads regardless).
class Fnv1a {
 public:
  void Add(const void* data, std::size_t size) noexcept {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash_ ^= bytes[i];
      hash_ *= 0x100000001b3ULL;
    }
  }
  void Add(std::string_view text) noexcept {
    Add(text.data(), text.size());
    const unsigned char separator = 0;
    Add(&separator, 1);
  }
  void Add(std::uint64_t value) noexcept {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
    Add(bytes, sizeof(bytes));
  }
  std::uint64_t Value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

template <typename Payload, std::size_t... kIndex>
std::uint64_t HashAlternatives(std::uint64_t schema_version, std::index_sequence<kIndex...>) {
  Fnv1a hash;
  hash.Add(schema_version);
  ((hash.Add(TypeName<std::variant_alternative_t<kIndex, Payload>>()),
    hash.Add(std::uint64_t{sizeof(std::variant_alternative_t<kIndex, Payload>)}),
    hash.Add(std::uint64_t{alignof(std::variant_alternative_t<kIndex, Payload>)})),
   ...);
  return hash.Value();
}

#define SLUICE_IPC_STRINGIFY_INNER(x) #x
#define SLUICE_IPC_STRINGIFY(x) SLUICE_IPC_STRINGIFY_INNER(x)

}  // namespace detail

// Fixed-width fields only, so that its layout is the same in every process
// that can attach (the ABI tag covers the rest).
struct Fingerprint {
  static constexpr std::size_t kTagBytes = 64;
  char abi_tag[kTagBytes] = {};
  // Hash of the schema version and each alternative's name, size, alignment.
  std::uint64_t payload_types = 0;
  std::uint32_t alternative_count = 0;
  std::uint32_t lanes = 0;  // producer processes the segment has room for
  std::uint64_t capacity = 0;
  std::uint64_t envelope_size = 0;
  std::uint64_t envelope_align = 0;
  std::uint64_t queue_size = 0;  // bytes of the queue object in the segment
  std::uint64_t segment_size = 0;
  std::uint64_t loan_blocks = 0;  // per lane
  std::uint64_t loan_block_bytes = 0;

  // The first part that differs, or kNone.
  [[nodiscard]] AttachError Compare(const Fingerprint& theirs) const noexcept {
    if (std::memcmp(abi_tag, theirs.abi_tag, kTagBytes) != 0) return AttachError::kAbiTag;
    if (payload_types != theirs.payload_types || alternative_count != theirs.alternative_count) {
      return AttachError::kPayloadTypes;
    }
    if (capacity != theirs.capacity) return AttachError::kCapacity;
    if (envelope_size != theirs.envelope_size || envelope_align != theirs.envelope_align ||
        queue_size != theirs.queue_size || segment_size != theirs.segment_size ||
        lanes != theirs.lanes || loan_blocks != theirs.loan_blocks ||
        loan_block_bytes != theirs.loan_block_bytes) {
      return AttachError::kLayout;
    }
    return AttachError::kNone;
  }
};
static_assert(std::is_trivially_copyable_v<Fingerprint>);

// The library's side of the tag: the shared-memory layout version, the
// library version and the inline namespace (cache line, position bits).
inline constexpr const char kAbiTag[] =
    "sluice-ipc-6/" SLUICE_IPC_STRINGIFY(SLUICE_VERSION_MAJOR) "." SLUICE_IPC_STRINGIFY(
        SLUICE_VERSION_MINOR) "/" SLUICE_IPC_STRINGIFY(SLUICE_ABI_NAMESPACE);
static_assert(sizeof(kAbiTag) <= Fingerprint::kTagBytes);

// `schema_version`: the user's own number for the payload's shape (the
// traits' kSchemaVersion), for changes the names, sizes and alignments do
// not show (fields reordered, a field put where padding was).
template <typename Payload, std::size_t kCapacity, typename Envelope, typename Queue>
Fingerprint MakeFingerprint(std::uint64_t segment_size, std::uint64_t schema_version,
                            std::uint32_t lanes, std::uint64_t loan_blocks,
                            std::uint64_t loan_block_bytes) {
  Fingerprint fingerprint;
  std::memcpy(fingerprint.abi_tag, kAbiTag, sizeof(kAbiTag));
  fingerprint.payload_types = detail::HashAlternatives<Payload>(
      schema_version, std::make_index_sequence<std::variant_size_v<Payload>>());
  fingerprint.alternative_count = static_cast<std::uint32_t>(std::variant_size_v<Payload>);
  fingerprint.capacity = kCapacity;
  fingerprint.envelope_size = sizeof(Envelope);
  fingerprint.envelope_align = alignof(Envelope);
  fingerprint.queue_size = sizeof(Queue);
  fingerprint.segment_size = segment_size;
  fingerprint.lanes = lanes;
  fingerprint.loan_blocks = loan_blocks;
  fingerprint.loan_block_bytes = loan_block_bytes;
  return fingerprint;
}

}  // namespace ipc
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
