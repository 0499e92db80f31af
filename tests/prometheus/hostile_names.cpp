// A scrape of a bus whose name, and whose registered producer's name, hold
// bytes that are not UTF-8 (a stray continuation byte, an overlong form, a
// lead byte cut off at the end), among valid characters and characters the
// format escapes. Run under tests/prometheus/check_exposition.py, the
// Prometheus client's own parser must read the whole text (it refuses it at
// one invalid byte) and find hostile_names.expected's samples: each bad byte
// written as '?', everything else as it was.
#include <cstdio>
#include <sluice/extras/prometheus.hpp>
#include <sluice/sluice.hpp>
#include <string>
#include <variant>

struct Reading {
  int value;
};
using Payload = std::variant<Reading>;

struct NamedTraits : sluice::DefaultBusTraits {
  using Lanes = sluice::ProducerLanes<1, 16>;
};

int main() {
  sluice::MpscBus<Payload, 64, NamedTraits> bus;
  auto producer = bus.RegisterProducer("cam\xFF\xC3\xA9ra");
  if (!producer) return 1;
  for (int i = 0; i < 3; ++i) {
    if (!producer.Publish(Reading{i})) return 1;
  }
  if (!bus.Publish(Reading{3})) return 1;
  bus.ProcessBatch();
  std::string text;
  sluice::WritePrometheus(text,
                          {sluice::CaptureMetrics("f\xC3\xBCr \x80\xC0\xAF \"q\" \xE2\x82", bus),
                           sluice::CaptureMetrics("plain", bus)});
  std::fputs(text.c_str(), stdout);
  return 0;
}
