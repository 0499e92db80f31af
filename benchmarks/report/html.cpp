// The self-contained HTML report: inline CSS and SVG, nothing fetched.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "report/report.hpp"

namespace sluice::bench {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':  // attributes here are single-quoted
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Figures align right, words left.
bool LooksNumeric(const std::string& cell) {
  return !cell.empty() &&
         (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '+' || cell[0] == '-');
}

struct ChartSpec {
  std::string title;
  std::string unit;
  std::vector<std::string> groups;
  std::vector<std::string> series;
  std::vector<std::vector<double>> values;  // [group][series], NaN when missing
  bool log_scale = false;
};

bool HasData(const ChartSpec& chart) {
  for (const auto& group : chart.values) {
    for (double v : group) {
      if (!std::isnan(v)) return true;
    }
  }
  return false;
}

// A grouped bar chart with labelled bars.
std::string RenderBars(const ChartSpec& chart) {
  const double width = 760, height = 340, left = 70, right = 20, top = 40, bottom = 70;
  const double plot_width = width - left - right, plot_height = height - top - bottom;
  double max_value = 0, min_positive = std::numeric_limits<double>::max();
  for (const auto& group : chart.values) {
    for (double v : group) {
      if (std::isnan(v)) continue;
      max_value = std::max(max_value, v);
      if (v > 0) min_positive = std::min(min_positive, v);
    }
  }
  if (max_value <= 0) max_value = 1;
  const bool log_scale = chart.log_scale && min_positive < max_value;
  const double log_floor = log_scale ? std::floor(std::log10(min_positive)) : 0;
  const double log_ceiling = log_scale ? std::ceil(std::log10(max_value)) : 0;
  auto scale = [&](double v) {
    if (std::isnan(v) || v <= 0) return 0.0;
    if (log_scale) {
      return plot_height * (std::log10(v) - log_floor) / std::max(1.0, log_ceiling - log_floor);
    }
    return plot_height * v / (max_value * 1.1);
  };

  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' role='img' aria-label='" << Escape(chart.title) << "'>\n";
  svg << "<text x='" << width / 2 << "' y='22' text-anchor='middle' class='title'>"
      << Escape(chart.title) << "</text>\n";
  svg << "<text x='14' y='" << top + plot_height / 2 << "' transform='rotate(-90 14 "
      << top + plot_height / 2 << ")' text-anchor='middle' class='axis'>" << Escape(chart.unit)
      << (log_scale ? " (log scale)" : "") << "</text>\n";
  svg << "<line x1='" << left << "' y1='" << top + plot_height << "' x2='" << left + plot_width
      << "' y2='" << top + plot_height << "' stroke='#444'/>\n";
  // Grid lines with values.
  // Linear axes step by 1, 2 or 5 times a power of ten.
  const double raw_step = max_value * 1.1 / 4;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double step = raw_step / magnitude <= 1   ? magnitude
                      : raw_step / magnitude <= 2 ? 2 * magnitude
                      : raw_step / magnitude <= 5 ? 5 * magnitude
                                                  : 10 * magnitude;
  const int ticks = log_scale ? static_cast<int>(log_ceiling - log_floor)
                              : static_cast<int>(max_value * 1.1 / step);
  for (int i = 0; i <= ticks; ++i) {
    const double value = log_scale ? std::pow(10.0, log_floor + i) : step * i;
    const double y = top + plot_height - scale(value);
    svg << "<line x1='" << left << "' y1='" << y << "' x2='" << left + plot_width << "' y2='" << y
        << "' stroke='#ddd'/><text x='" << left - 6 << "' y='" << y + 4
        << "' text-anchor='end' class='tick'>" << Fixed(value, value < 10 ? 1 : 0) << "</text>\n";
  }
  const double group_width = plot_width / static_cast<double>(chart.groups.size());
  const double bar_width = group_width * 0.8 / static_cast<double>(chart.series.size());
  for (std::size_t g = 0; g < chart.groups.size(); ++g) {
    const double group_x = left + group_width * static_cast<double>(g) + group_width * 0.1;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const double v = chart.values[g][s];
      if (std::isnan(v)) continue;
      const double bar_height = scale(v);
      const double x = group_x + bar_width * static_cast<double>(s);
      const double y = top + plot_height - bar_height;
      svg << "<rect x='" << x << "' y='" << y << "' width='" << bar_width * 0.92 << "' height='"
          << bar_height << "' fill='" << kPalette[s % 5] << "'><title>"
          << Escape(chart.series[s] + ", " + chart.groups[g] + ": " + Fixed(v, 2) + " " +
                    chart.unit)
          << "</title></rect>\n";
      svg << "<text x='" << x + bar_width * 0.46 << "' y='" << y - 3
          << "' text-anchor='middle' class='value'>" << Fixed(v, v < 10 ? 2 : (v < 1000 ? 1 : 0))
          << "</text>\n";
    }
    svg << "<text x='" << group_x + group_width * 0.4 << "' y='" << top + plot_height + 18
        << "' text-anchor='middle' class='axis'>" << Escape(chart.groups[g]) << "</text>\n";
  }
  // Legend.
  double legend_x = left;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    svg << "<rect x='" << legend_x << "' y='" << height - 28 << "' width='12' height='12' fill='"
        << kPalette[s % 5] << "'/><text x='" << legend_x + 16 << "' y='" << height - 18
        << "' class='legend'>" << Escape(chart.series[s]) << "</text>\n";
    legend_x += 30 + 7.5 * static_cast<double>(chart.series[s].size());
  }
  svg << "</svg>\n";
  return svg.str();
}

double MetricOr(const Report& report, const std::string& name) {
  const Metric* metric = report.FindMetric(name);
  return metric ? metric->value : kMissing;
}

std::vector<ChartSpec> Charts(const Report& report) {
  std::vector<ChartSpec> charts;
  const std::vector<std::pair<std::string, std::string>> models = {{"mpsc", "MPSC"},
                                                                   {"spsc", "SPSC"}};
  ChartSpec modes{"Publish throughput by mode",
                  "M msg/s",
                  {},
                  {"FULL_FEATURED", "NO_STATS", "BARE_METAL"},
                  {},
                  false};
  for (const auto& [key, label] : models) {
    modes.groups.push_back(label);
    modes.values.push_back({MetricOr(report, "modes." + key + ".full_featured.throughput_mps"),
                            MetricOr(report, "modes." + key + ".no_stats.throughput_mps"),
                            MetricOr(report, "modes." + key + ".bare_metal.throughput_mps")});
  }
  charts.push_back(modes);

  ChartSpec latency{"End-to-end latency percentiles (publish to callback)",
                    "ns",
                    {"P50", "P95", "P99", "P99.9"},
                    {},
                    {},
                    true};
  const char* percentiles[] = {"p50", "p95", "p99", "p999"};
  for (const auto& [key, label] : models) {
    for (const char* path : {"callback", "visitor"}) latency.series.push_back(label + " " + path);
  }
  for (const char* p : percentiles) {
    std::vector<double> row;
    for (const auto& model : models) {
      for (const char* path : {"callback", "visitor"}) {
        row.push_back(MetricOr(report, "latency." + model.first + "." + path + "." + p + "_ns"));
      }
    }
    latency.values.push_back(row);
  }
  charts.push_back(latency);

  ChartSpec drops{"Drop rate by priority",
                  "% dropped",
                  {"HIGH", "MEDIUM", "LOW"},
                  {"MPSC burst", "SPSC burst", "MPSC sustained", "SPSC sustained"},
                  {},
                  false};
  for (const char* priority : {"high", "medium", "low"}) {
    drops.values.push_back(
        {MetricOr(report, std::string("burst.mpsc.") + priority + ".drop_rate_percent"),
         MetricOr(report, std::string("burst.spsc.") + priority + ".drop_rate_percent"),
         MetricOr(report, std::string("sustained.mpsc.") + priority + ".drop_rate_percent"),
         MetricOr(report, std::string("sustained.spsc.") + priority + ".drop_rate_percent")});
  }
  charts.push_back(drops);
  return charts;
}

}  // namespace

std::string RenderHtml(const Report& report) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
       << "<title>Sluice benchmark report</title>\n<style>\n"
       << "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}\n"
       << "table{border-collapse:collapse;margin:0.5em 0 0.3em}\n"
       << "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\n"
       << "th:first-child,td:first-child,td.text{text-align:left}\nth{background:#f3f3f3}\n"
       << ".note{color:#555;font-size:0.9em;margin:0.1em 0}\n"
       << "svg .title{font-weight:bold;font-size:14px}\nsvg .axis,svg .legend{font-size:12px}\n"
       << "svg .tick,svg .value{font-size:10px;fill:#333}\n</style>\n</head>\n<body>\n";
  const Context& c = report.context;
  html << "<h1>Sluice benchmark report</h1>\n<p>" << Escape(RenderContextLine(c)) << "<br>suite "
       << Escape(c.suite) << "; clock " << Escape(c.clock) << "; " << Escape(c.pinning)
       << "; Sluice " << Escape(c.sluice_version) << "</p>\n";
  html << "<h2>Charts</h2>\n";
  for (const ChartSpec& chart : Charts(report)) {
    if (HasData(chart)) html << "<figure>" << RenderBars(chart) << "</figure>\n";
  }
  html << "<h2>Tables</h2>\n";
  for (const Table& table : report.tables) {
    html << "<h3 id='" << Escape(table.id) << "'>" << Escape(table.title) << "</h3>\n<table>\n<tr>";
    for (const auto& column : table.columns) html << "<th>" << Escape(column) << "</th>";
    html << "</tr>\n";
    for (const auto& row : table.rows) {
      html << "<tr>";
      for (const auto& cell : row) {
        html << (LooksNumeric(cell) ? "<td>" : "<td class='text'>") << Escape(cell) << "</td>";
      }
      html << "</tr>\n";
    }
    html << "</table>\n";
    for (const auto& note : table.notes) html << "<p class='note'>" << Escape(note) << "</p>\n";
  }
  html << "</body>\n</html>\n";
  return html.str();
}

}  // namespace sluice::bench
