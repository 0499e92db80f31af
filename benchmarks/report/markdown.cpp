// The Markdown rendering behind docs/benchmark.md: our tables as measured,
// each followed by the reference system's published figures for that table.
#include <map>
#include <sstream>

#include "report/report.hpp"

namespace sluice::bench {
namespace {

// The reference's own figures (Intel Xeon Cascade Lake, 64 vCPU, GCC 13.3,
// -O3 -march=native), as its report publishes them.
const std::map<std::string, std::string>& ReferenceFigures() {
  static const std::map<std::string, std::string> figures = {
      {"modes",
       "| reference | M msg/s | ns/msg |\n|---|---|---|\n"
       "| MPSC FULL_FEATURED | 26.27 +- 0.49 | 38.08 +- 0.70 |\n"
       "| MPSC BARE_METAL | 33.65 +- 0.81 | 29.73 +- 0.72 |\n"
       "| SPSC FULL_FEATURED | 29.92 | 33 |\n| SPSC BARE_METAL | 38.49 | 26 |\n"
       "| feature overhead | MPSC +8.35 ns/msg | SPSC +7.41 ns/msg |\n"},
      {"batch",
       "| reference (FULL_FEATURED) | M msg/s | ns/msg |\n|---|---|---|\n"
       "| 1K | 23.49 +- 0.93 | 42.64 |\n| 10K | 25.79 +- 0.58 | 38.79 |\n"
       "| 100K | 25.39 +- 1.09 | 39.46 |\n"},
      {"latency",
       "| reference | mean | P50 | P95 | P99 | max |\n|---|---|---|---|---|---|\n"
       "| MPSC | 383 | 372 | 422 | 525 | 49,806 |\n| SPSC | 325 | 317 | 369 | 392 | 7,376 |\n"},
      {"dispatch",
       "| reference (100K messages, ns/msg) | visitor | callbacks |\n|---|---|---|\n"
       "| MPSC | 129 | 160 |\n| SPSC | 93 | 161 |\n"},
      {"burst",
       "| reference | sent | dropped | drop rate |\n|---|---|---|---|\n"
       "| HIGH | 30,000 | 0 | 0 % |\n| MEDIUM | 39,321 | 5,679 | 12.6 % |\n"
       "| LOW | 39,320 | 35,680 | 47.6 % |\n"},
      {"sustained",
       "| reference (5 s) | sent | dropped | M msg/s |\n|---|---|---|---|\n"
       "| MPSC | 35.67 M | 8.69 M | 7.13 |\n| SPSC | 41.07 M | 5.33 M | 8.21 |\n"},
      {"payload",
       "| reference (FULL_FEATURED, end to end) | M msg/s |\n|---|---|\n"
       "| 24 B | 6.82 |\n| 64 B | 5.09 |\n| 128 B | 4.37 |\n| 256 B | 4.09 |\n"},
  };
  return figures;
}

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? '/' : c;
  return out;
}

}  // namespace

std::string RenderMarkdown(const Report& report) {
  std::ostringstream md;
  const Context& c = report.context;
  md << "Measured on " << c.cpu_model << " (" << c.cores << " cores), " << c.compiler << ", `"
     << c.flags << "`, " << c.date << "; suite `" << c.suite << "`; clock: " << c.clock << "; "
     << c.pinning << ".\n";
  for (const Table& table : report.tables) {
    md << "\n### " << table.title << "\n\n|";
    for (const auto& column : table.columns) md << " " << Cell(column) << " |";
    md << "\n|";
    for (std::size_t i = 0; i < table.columns.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& row : table.rows) {
      md << "|";
      for (const auto& cell : row) md << " " << Cell(cell) << " |";
      md << "\n";
    }
    if (!table.notes.empty()) md << "\n";
    for (const auto& note : table.notes) md << "- " << note << "\n";
    const auto reference = ReferenceFigures().find(table.id);
    if (reference != ReferenceFigures().end()) {
      md << "\nThe reference's published figures (its machine, not this one):\n\n"
         << reference->second;
    }
  }
  return md.str();
}

}  // namespace sluice::bench
