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
template <>
struct sluice::nats::Fields<Raw> {
  static constexpr auto kMembers = std::make_tuple(&Raw::value);
};
struct Bare {  // a struct of integers without a field list
  int value;
};
struct Padded {  // 3 padding bytes after `kind`
  std::uint8_t kind;
  std::uint32_t value;
};
struct Labelled {
  std::string label;
  int value;
};
template <>
struct sluice::nats::Fields<Labelled> {
  static constexpr auto kMembers = std::make_tuple(&Labelled::label, &Labelled::value);
};
enum Unscoped { kOff, kOn };
union Either {  // a field list does not give a union a wire form
  bool flag;
  std::uint32_t count;
};
template <>
struct sluice::nats::Fields<Either> {
  static constexpr auto kMembers = std::make_tuple(&Either::flag, &Either::count);
};
using Payload = std::variant<Text, Raw, Bare, Padded, Labelled, sluice::nats::Remote<Raw>,
                             const char*, Unscoped, Either>;

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
#elif CASE == 3
  return bridge.Forward<Padded>("padded", 1);  // its padding would go on the wire
#elif CASE == 4
  return bridge.Receive<Padded, sluice::nats::TriviallyCopyableCodec<Padded>>("padded", 1);
#elif CASE == 5
  return bridge.Forward<Labelled>("labelled", 1);  // a std::string field has no wire form
#elif CASE == 6
  return bridge.Forward<sluice::nats::Remote<Raw>>("raw", 1);
#elif CASE == 7
  return bridge.Forward<Bare>("bare", 1);  // a struct of integers still lists its fields
#elif CASE == 8
  return bridge.Forward<const char*, sluice::nats::TriviallyCopyableCodec<const char*>>("p", 1);
#elif CASE == 9
  return bridge.Forward<Unscoped>("mode", 1);
#elif CASE == 10
  return bridge.Forward<Either>("either", 1);
#elif CASE == 11
  return bridge.Forward<Either, sluice::nats::WireCodec<Either>>("either", 1);
#else
  return bridge.Forward<Text, TextCodec>("text", 1) && bridge.Receive<Raw>("raw", 2) &&
         bridge.Receive<sluice::nats::Remote<Raw>>("remote", 3);
#endif
}
