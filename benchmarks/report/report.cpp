#include "report/report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace sluice::bench {
namespace {

const char* BetterName(Better better) {
  switch (better) {
    case Better::kHigher:
      return "higher";
    case Better::kLower:
      return "lower";
    case Better::kNeither:
      break;
  }
  return "neither";
}

Better BetterFromName(const std::string& name) {
  if (name == "higher") return Better::kHigher;
  if (name == "lower") return Better::kLower;
  return Better::kNeither;
}

}  // namespace

Metric& Report::AddMetric(std::string name, double value, std::string unit, Better better) {
  metrics.push_back(
      Metric{std::move(name), value, std::move(unit), better, 0.0, better != Better::kNeither});
  return metrics.back();
}

const Metric* Report::FindMetric(const std::string& name) const {
  for (const Metric& metric : metrics) {
    if (metric.name == name) return &metric;
  }
  return nullptr;
}

std::string TableOfMetric(const std::string& metric_name) {
  const std::string first = metric_name.substr(0, metric_name.find('.'));
  if (first == "noise") return "latency";
  if (first == "subscribers") return "load";
  return first;
}

void KeepTables(const std::vector<std::string>& ids, Report* report) {
  auto kept = [&](const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  auto& tables = report->tables;
  tables.erase(std::remove_if(tables.begin(), tables.end(),
                              [&](const Table& table) { return !kept(table.id); }),
               tables.end());
  auto& metrics = report->metrics;
  metrics.erase(std::remove_if(metrics.begin(), metrics.end(),
                               [&](const Metric& m) { return !kept(TableOfMetric(m.name)); }),
                metrics.end());
}

nlohmann::json ToJson(const Report& report) {
  nlohmann::json json;
  const Context& c = report.context;
  json["format"] = kReportFormat;
  json["context"] = {
      {"cpu_model", c.cpu_model}, {"cores", c.cores},     {"compiler", c.compiler},
      {"flags", c.flags},         {"date", c.date},       {"suite", c.suite},
      {"clock", c.clock},         {"pinning", c.pinning}, {"sluice_version", c.sluice_version}};
  json["tables"] = nlohmann::json::array();
  for (const Table& table : report.tables) {
    json["tables"].push_back({{"id", table.id},
                              {"title", table.title},
                              {"columns", table.columns},
                              {"rows", table.rows},
                              {"notes", table.notes}});
  }
  json["metrics"] = nlohmann::json::array();
  for (const Metric& metric : report.metrics) {
    nlohmann::json entry = {{"name", metric.name},
                            {"value", metric.value},
                            {"unit", metric.unit},
                            {"better", BetterName(metric.better)}};
    if (metric.spread > 0) entry["spread"] = metric.spread;
    if (metric.better != Better::kNeither && !metric.gated) entry["gated"] = false;
    json["metrics"].push_back(std::move(entry));
  }
  return json;
}

Report ReportFromJson(const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("not a JSON object");
  const auto& format = json.at("format");
  if (!format.is_string() || format.get<std::string>() != kReportFormat) {
    throw std::invalid_argument("format is " + format.dump() + ", expected \"" + kReportFormat +
                                "\"");
  }
  for (const char* field : {"tables", "metrics"}) {
    if (!json.at(field).is_array()) {
      throw std::invalid_argument(std::string("\"") + field + "\" must be an array, not " +
                                  json.at(field).type_name());
    }
  }
  Report report;
  const auto& c = json.at("context");
  report.context.cpu_model = c.at("cpu_model").get<std::string>();
  report.context.cores = c.at("cores").get<int>();
  report.context.compiler = c.at("compiler").get<std::string>();
  report.context.flags = c.at("flags").get<std::string>();
  report.context.date = c.at("date").get<std::string>();
  report.context.suite = c.at("suite").get<std::string>();
  report.context.clock = c.value("clock", "");
  report.context.pinning = c.value("pinning", "");
  report.context.sluice_version = c.value("sluice_version", "");
  for (const auto& t : json.at("tables")) {
    Table table;
    table.id = t.at("id").get<std::string>();
    table.title = t.at("title").get<std::string>();
    table.columns = t.at("columns").get<std::vector<std::string>>();
    table.rows = t.at("rows").get<std::vector<std::vector<std::string>>>();
    table.notes = t.value("notes", std::vector<std::string>{});
    report.tables.push_back(std::move(table));
  }
  for (const auto& m : json.at("metrics")) {
    Metric& metric = report.AddMetric(m.at("name").get<std::string>(), m.at("value").get<double>(),
                                      m.at("unit").get<std::string>(),
                                      BetterFromName(m.at("better").get<std::string>()));
    // Reports written before these fields existed: every directed metric gated.
    metric.spread = m.value("spread", 0.0);
    metric.gated = metric.gated && m.value("gated", true);
  }
  return report;
}

std::string RenderContextLine(const Context& c) {
  std::ostringstream out;
  out << c.cpu_model << ", " << c.cores << " cores | " << c.compiler << " | " << c.flags << " | "
      << c.date;
  return out.str();
}

namespace {

// Appends `note` word by word in lines of at most kNoteColumns columns: the
// first after "  ", the rest after "    ". A word longer than a line stays
// whole on a line of its own.
constexpr std::size_t kNoteColumns = 100;
void AppendWrapped(std::ostringstream& out, const std::string& note) {
  std::string line = "  ";
  bool line_has_word = false;
  std::size_t at = 0;
  while (at < note.size()) {
    if (note[at] == ' ') {
      ++at;
      continue;
    }
    std::size_t end = note.find(' ', at);
    if (end == std::string::npos) end = note.size();
    const std::string word = note.substr(at, end - at);
    at = end;
    if (line_has_word && line.size() + 1 + word.size() > kNoteColumns) {
      out << line << "\n";
      line = "    ";
      line_has_word = false;
    }
    if (line_has_word) line += ' ';
    line += word;
    line_has_word = true;
  }
  out << line << "\n";
}

}  // namespace

std::string RenderText(const Table& table, const Context& context) {
  std::vector<std::size_t> widths(table.columns.size(), 0);
  for (std::size_t i = 0; i < table.columns.size(); ++i) widths[i] = table.columns[i].size();
  for (const auto& row : table.rows) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::ostringstream out;
  out << "\n== " << table.title << "\n   " << RenderContextLine(context) << "\n";
  auto print_row = [&](const std::vector<std::string>& cells) {
    out << "  ";
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      // First column left-aligned (labels), the rest right-aligned (figures).
      if (i == 0) {
        out << cell << std::string(widths[i] - cell.size(), ' ');
      } else {
        out << "  " << std::string(widths[i] - cell.size(), ' ') << cell;
      }
    }
    out << "\n";
  };
  print_row(table.columns);
  std::size_t total = 0;
  for (std::size_t w : widths) total += w + 2;
  out << "  " << std::string(total, '-') << "\n";
  for (const auto& row : table.rows) print_row(row);
  for (const auto& note : table.notes) AppendWrapped(out, note);
  return out.str();
}

bool Comparison::HasRegression() const {
  return !missing_gated.empty() ||
         std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& row) {
           return row.verdict == ComparisonRow::Verdict::kRegressed;
         });
}

Comparison Compare(const Report& baseline, const Report& current, double band_percent) {
  Comparison comparison;
  const Context& b = baseline.context;
  const Context& c = current.context;
  auto warn_if_different = [&](const char* what, const std::string& old_value,
                               const std::string& new_value) {
    if (old_value != new_value) {
      comparison.warnings.push_back(std::string("different ") + what + ": baseline '" + old_value +
                                    "', this run '" + new_value + "'");
    }
  };
  warn_if_different("CPU", b.cpu_model, c.cpu_model);
  warn_if_different("core count", std::to_string(b.cores), std::to_string(c.cores));
  warn_if_different("suite", b.suite, c.suite);
  warn_if_different("compiler", b.compiler, c.compiler);
  std::map<std::string, const Metric*> current_by_name;
  for (const Metric& metric : current.metrics) current_by_name[metric.name] = &metric;
  for (const Metric& old_metric : baseline.metrics) {
    const auto found = current_by_name.find(old_metric.name);
    if (found == current_by_name.end()) {
      comparison.only_in_baseline.push_back(old_metric.name);
      if (old_metric.better != Better::kNeither && old_metric.gated) {
        comparison.missing_gated.push_back(old_metric.name);
      }
      continue;
    }
    const Metric& new_metric = *found->second;
    current_by_name.erase(found);
    ComparisonRow row;
    row.name = old_metric.name;
    row.unit = new_metric.unit;
    row.baseline = old_metric.value;
    row.current = new_metric.value;
    if (old_metric.value != 0) {
      row.change_percent =
          100.0 * (new_metric.value - old_metric.value) / std::fabs(old_metric.value);
    } else {
      row.change_percent = new_metric.value == 0 ? 0.0 : 100.0;
    }
    const double spread = std::max(old_metric.spread, new_metric.spread);
    row.band_percent = band_percent;
    if (old_metric.value != 0) {
      row.band_percent =
          std::max(band_percent, 100.0 * kSpreadsInBand * spread / std::fabs(old_metric.value));
    }
    const Better better = new_metric.better;
    if (better == Better::kNeither) {
      row.verdict = ComparisonRow::Verdict::kInformational;
    } else if (!new_metric.gated) {
      row.verdict = ComparisonRow::Verdict::kNotGated;
    } else if (std::fabs(row.change_percent) <= row.band_percent) {
      row.verdict = ComparisonRow::Verdict::kWithinBand;
    } else {
      const bool went_up = row.change_percent > 0;
      const bool good = (better == Better::kHigher) == went_up;
      row.verdict = good ? ComparisonRow::Verdict::kImproved : ComparisonRow::Verdict::kRegressed;
    }
    comparison.rows.push_back(row);
  }
  for (const auto& entry : current_by_name) comparison.only_in_current.push_back(entry.first);
  return comparison;
}

std::string RenderComparison(const Comparison& comparison, double band_percent) {
  Table table;
  table.title = "Comparison with the baseline (band per metric: the larger of +-" +
                Fixed(band_percent, 1) + " % and " + Fixed(kSpreadsInBand, 0) +
                " stddevs over rounds)";
  table.columns = {"metric", "unit", "baseline", "current", "change %", "band +-%", "verdict"};
  std::size_t regressed = 0;
  std::size_t improved = 0;
  std::size_t not_gated = 0;
  for (const ComparisonRow& row : comparison.rows) {
    std::string verdict;
    switch (row.verdict) {
      case ComparisonRow::Verdict::kWithinBand:
        verdict = "ok";
        break;
      case ComparisonRow::Verdict::kImproved:
        verdict = "better";
        ++improved;
        break;
      case ComparisonRow::Verdict::kRegressed:
        verdict = "REGRESSED";
        ++regressed;
        break;
      case ComparisonRow::Verdict::kInformational:
        verdict = "-";
        break;
      case ComparisonRow::Verdict::kNotGated:
        verdict = "not gated";
        ++not_gated;
        break;
    }
    const std::string sign = row.change_percent > 0 ? "+" : "";
    const bool judged = row.verdict != ComparisonRow::Verdict::kInformational &&
                        row.verdict != ComparisonRow::Verdict::kNotGated;
    table.rows.push_back({row.name, row.unit, Fixed(row.baseline, 2), Fixed(row.current, 2),
                          sign + Fixed(row.change_percent, 1),
                          judged ? Fixed(row.band_percent, 1) : "-", verdict});
  }
  table.notes.push_back(std::to_string(comparison.rows.size()) +
                        " metrics compared: " + std::to_string(regressed) + " regressed, " +
                        std::to_string(improved) + " improved beyond their band.");
  if (not_gated != 0) {
    table.notes.push_back(std::to_string(not_gated) +
                          " not gated: measured once or over fewer than 3 rounds (no usable "
                          "spread to judge a change by), or a peer's figure.");
  }
  auto name_all = [&](const std::vector<std::string>& names, const std::string& what) {
    if (names.empty()) return;
    std::string line = std::to_string(names.size()) + " " + what + ":";
    for (const std::string& name : names) line += " " + name;
    table.notes.push_back(line);
  };
  name_all(comparison.missing_gated, "MISSING from this run, with a direction (a regression)");
  name_all(comparison.only_in_baseline, "metrics only in the baseline (not compared)");
  name_all(comparison.only_in_current, "metrics only in this run (not compared)");
  for (const std::string& warning : comparison.warnings) {
    table.notes.push_back("WARNING: " + warning + "; figures may not transfer.");
  }
  Context none;
  std::string text = RenderText(table, none);
  // The comparison has no machine of its own: drop the empty context line.
  const auto first_newline = text.find('\n', 1);
  const auto second_newline = text.find('\n', first_newline + 1);
  return text.substr(0, first_newline + 1) + text.substr(second_newline + 1);
}

std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string MetricSlug(const std::string& name) {
  std::string slug;
  for (const char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!slug.empty() && slug.back() != '_') {
      slug += '_';
    }
  }
  while (!slug.empty() && slug.back() == '_') slug.pop_back();
  return slug;
}

std::string WithThousands(std::uint64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<std::size_t>(i), ",");
  }
  return digits;
}

}  // namespace sluice::bench
