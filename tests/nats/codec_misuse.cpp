// A route for a type the bridge cannot encode must fail to compile with
// Sluice's own diagnostic (tests/nats/CMakeLists.txt checks the message).
#include <sluice/nats/bridge.hpp>
#include <string>
#include <variant>

struct Text {
  std::string value;
};
struct Raw {
  int value;
};
using Payload = std::variant<Text, Raw>;

// Encodes, but cannot decode.
struct HalfCodec {
  static bool Encode(const Text&, std::string&) { return true; }
};
struct TextCodec {
  static bool Encode(const Text& text, std::string& out) {
    out += text.value;
    return true;
  }
  static std::optional<Text> Decode(const std::uint8_t* data, std::size_t size) {
    return Text{std::string(reinterpret_cast<const char*>(data), size)};
  }
};

bool Configure(sluice::nats::Bridge<sluice::MpscBus<Payload, 64>>& bridge) {
#if CASE == 1
  return bridge.Forward<Text>("text", 1);  // no built-in codec for Text
#elif CASE == 2
  return bridge.Receive<Text, HalfCodec>("text", 1);
#else
  return bridge.Forward<Text, TextCodec>("text", 1) && bridge.Receive<Raw>("raw", 2);
#endif
}
