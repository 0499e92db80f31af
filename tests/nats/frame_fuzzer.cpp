// libFuzzer target for the bridge's frame decoder and the codecs behind it:
// any bytes are decoded without undefined behaviour (AddressSanitizer and
// UndefinedBehaviorSanitizer watch), a frame that decodes re-encodes to the
// same bytes, and a payload that decodes re-encodes to the same payload.
// Built with libFuzzer under Clang; with other compilers a small main
// replays corpus files (tests/nats/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "test_messages.hpp"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "frame fuzzer: %s\n", what);
    std::abort();
  }
}

template <typename T, typename Codec>
void RoundTripPayload(const sluice::nats::FrameView& view) {
  const std::optional<T> value = Codec::Decode(view.payload, view.payload_size);
  if (!value) return;
  std::string again;
  Check(Codec::Encode(*value, again), "a decoded payload does not encode");
  Check(again.size() == view.payload_size &&
            (again.empty() || std::memcmp(again.data(), view.payload, again.size()) == 0),
        "a decoded payload encodes to other bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The decoder under a small bound as well as the default one.
  for (const std::uint32_t bound : {std::uint32_t{64}, sluice::nats::kDefaultMaxFramePayload}) {
    sluice::nats::FrameView view;
    const sluice::nats::FrameError error = sluice::nats::DecodeFrame(data, size, &view, bound);
    if (error != sluice::nats::FrameError::kNone) continue;
    Check(view.payload_size <= bound, "a payload above the bound was accepted");
    const bool version1 = view.header.version == sluice::nats::kFrameVersion1;
    const std::size_t header_size =
        version1 ? sluice::nats::kFrameHeaderSizeV1 : sluice::nats::kFrameHeaderSize;
    const std::size_t trailer_size = view.signature.present ? sluice::nats::kFrameSignatureSize : 0;
    Check(view.payload_size + header_size + trailer_size == size, "the sizes disagree");
    Check(view.payload == data + header_size, "the payload is not after the header");
    Check(!view.signature.present ||
              (view.signature.mac == data + size - sluice::nats::kFrameMacSize &&
               view.signature.signed_bytes == data &&
               view.signature.signed_size == size - sluice::nats::kFrameMacSize),
          "the signature block is not the frame's last bytes");
    std::uint8_t header[sluice::nats::kFrameHeaderSize];
    sluice::nats::EncodeFrameHeader(view.header, header, view.signature.present);
    if (!version1) {
      Check(std::memcmp(header, data, sizeof header) == 0, "the header re-encodes differently");
    } else {
      // Written again as version 2: every field but the version and the
      // timestamp (microseconds in version 1) in the same place.
      Check(std::memcmp(header, data, 4) == 0 && std::memcmp(header + 5, data + 5, 19) == 0 &&
                std::memcmp(header + 32, data + 32, 8) == 0,
            "a version 1 header re-encodes differently");
      Check(view.header.instance_id == 0 && view.header.sequence == 0,
            "a version 1 frame has stream fields");
      std::uint64_t micros = 0;
      for (int i = 7; i >= 0; --i) micros = (micros << 8) | data[24 + i];
      const std::uint64_t nanos =
          micros > ~std::uint64_t{0} / 1000 ? ~std::uint64_t{0} : micros * 1000;
      Check(view.header.timestamp_ns == nanos, "a version 1 timestamp is not its nanoseconds");
    }
    using namespace sluice_nats_test;
    switch (view.header.type_id) {
      case kSensorType:
        RoundTripPayload<SensorReading, sluice::nats::DefaultCodec<SensorReading>>(view);
        break;
      case kStopType:
        RoundTripPayload<EmergencyStop, sluice::nats::DefaultCodec<EmergencyStop>>(view);
        break;
      case kNoteType:
        RoundTripPayload<Note, NoteCodec>(view);
        break;
      default:
        break;
    }
  }
  return 0;
}

#if !defined(SLUICE_LIBFUZZER)
// Without libFuzzer: replay the files named on the command line.
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                  std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
  }
  std::printf("replayed %d inputs: %d passed, 0 failed\n", replayed, replayed);
  return replayed > 0 ? 0 : 1;
}
#endif
