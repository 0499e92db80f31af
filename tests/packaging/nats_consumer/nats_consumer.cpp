// Builds a bridge against the installed headers and the NATS C client, and
// round-trips one frame through the codec, with no server.
#include <cstdio>
#include <sluice/nats/bridge.hpp>
#include <tuple>
#include <variant>

struct Reading {
  std::uint32_t id;
  float value;
};
template <>
struct sluice::nats::Fields<Reading> {
  static constexpr auto kMembers = std::make_tuple(&Reading::id, &Reading::value);
};
using Payload = std::variant<Reading>;

int main() {
  sluice::MpscBus<Payload, 64> bus;
  sluice::nats::BridgeOptions options;
  options.url = "nats://127.0.0.1:1";  // never connected: Start is not called
  sluice::nats::Bridge<decltype(bus)> bridge(bus, options);
  if (!bridge.Forward<Reading>("consumer.reading", 1)) return 1;
  std::printf("sluice::nats consumer: bridge configured, origin %llu\n",
              static_cast<unsigned long long>(bridge.OriginId()));
  return 0;
}
