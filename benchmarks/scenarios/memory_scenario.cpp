// Memory: what a slot and a ring cost, and what the process holds.
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

template <std::size_t kBytes, std::size_t kCapacity>
void Row(Report& report, Table& table) {
  using Bus = AsyncBus<std::variant<Sample<kBytes>>, kCapacity>;
  table.rows.push_back({std::to_string(kBytes), WithThousands(kCapacity),
                        std::to_string(Bus::kBytesPerSlot),
                        Fixed(static_cast<double>(Bus::kRingBytes) / (1024.0 * 1024.0), 2),
                        WithThousands(sizeof(Bus))});
  const std::string key = std::to_string(kBytes) + "B." + std::to_string(kCapacity);
  report.AddMetric("memory.slot_bytes." + key, static_cast<double>(Bus::kBytesPerSlot), "bytes",
                   Better::kLower);
  report.AddMetric("memory.bus_object_bytes." + key, static_cast<double>(sizeof(Bus)), "bytes",
                   Better::kLower);
}

}  // namespace

void RunMemory(const Options&, Report& report) {
  Table table;
  table.id = "memory";
  table.title = "9. Memory: bytes per slot and per bus";
  table.columns = {"payload bytes", "slots", "bytes/slot", "ring MiB", "bus object bytes"};
  Row<24, 131072>(report, table);
  Row<64, 131072>(report, table);
  Row<128, 131072>(report, table);
  Row<256, 131072>(report, table);
  Row<24, 1024>(report, table);
  const double rss = static_cast<double>(ResidentBytes()) / (1024.0 * 1024.0);
  const double peak = static_cast<double>(PeakResidentBytes()) / (1024.0 * 1024.0);
  table.notes = {
      "A slot is the envelope (24-byte header + std::variant payload) and an 8-byte sequence "
      "number. The ring is allocated once at construction (or lives in the object with "
      "SlotStorage::kInline); the bus object holds cursors, counters and the subscription tables.",
      "Resident memory of this benchmark process: " + Fixed(rss, 1) + " MiB now, " +
          Fixed(peak, 1) +
          " MiB at peak (after every bus of the tables above was built and freed)."};
  report.AddMetric("memory.rss_mib", rss, "MiB", Better::kNeither);
  report.AddMetric("memory.peak_rss_mib", peak, "MiB", Better::kNeither);
  report.tables.push_back(table);
}

}  // namespace sluice::bench
