// The benchmark report: tables for people, named metrics for machines. The
// same Report renders as text, JSON, Markdown and HTML, and two reports
// compare metric by metric.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice::bench {

// Where and how the figures were measured; printed with every table.
struct Context {
  std::string cpu_model;
  int cores = 0;
  std::string compiler;
  std::string flags;
  std::string date;
  std::string suite;
  std::string clock;
  std::string pinning;
  std::string sluice_version;
};

enum class Better { kHigher, kLower, kNeither };

// One figure. Names are dotted paths: "modes.mpsc.full_featured.throughput_mps".
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
  Better better = Better::kNeither;
  // Sample stddev over the rounds the value summarises, in `unit`; 0 for an
  // exact figure (a size, a count).
  double spread = 0;
  // Whether --compare fails on it. Off for figures with a direction but no
  // measured spread (measured once) and for the peers' own figures.
  bool gated = false;
};

struct Table {
  std::string id;  // the --only name of the table's scenario
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // printed under the table
};

struct Report {
  Context context;
  std::vector<Table> tables;
  std::vector<Metric> metrics;

  // Gated when it has a direction; the caller may set spread or ungate it.
  Metric& AddMetric(std::string name, double value, std::string unit, Better better);
  const Metric* FindMetric(const std::string& name) const;
};

// The --only name of the table that reports a metric: the first part of its
// name ("modes.mpsc..." -> "modes"), except noise.* (the latency table) and
// subscribers.* (the load table).
std::string TableOfMetric(const std::string& metric_name);
// Keeps only the tables named in `ids` and the metrics they report.
void KeepTables(const std::vector<std::string>& ids, Report* report);

inline constexpr const char* kReportFormat = "sluice-bench-report/1";

nlohmann::json ToJson(const Report& report);
// Throws nlohmann::json::exception on a malformed document and
// std::invalid_argument on one of another format or shape (tables and
// metrics must be arrays).
Report ReportFromJson(const nlohmann::json& json);

std::string RenderContextLine(const Context& context);
std::string RenderText(const Table& table, const Context& context);
// A Markdown document of every table, with the reference's published figures
// beside ours where the reference has one.
std::string RenderMarkdown(const Report& report);
// A self-contained HTML page: the tables and inline SVG charts.
std::string RenderHtml(const Report& report);

struct ComparisonRow {
  std::string name;
  std::string unit;
  double baseline = 0;
  double current = 0;
  double change_percent = 0;
  double band_percent = 0;  // this metric's tolerance, percent of the baseline
  enum class Verdict {
    kWithinBand,
    kImproved,
    kRegressed,
    kInformational,  // no direction
    kNotGated        // a direction, but no measured spread, or a peer's figure
  } verdict = Verdict::kWithinBand;
};

struct Comparison {
  std::vector<ComparisonRow> rows;
  std::vector<std::string> only_in_baseline;
  std::vector<std::string> only_in_current;
  // Baseline metrics with a direction that this run lacks: a regression.
  std::vector<std::string> missing_gated;
  // Where the two runs were measured differently (CPU, cores, suite,
  // compiler): figures may not transfer.
  std::vector<std::string> warnings;
  // False when the reports share no metric: nothing was compared.
  bool ComparedAnything() const { return !rows.empty(); }
  bool HasRegression() const;
};

// Each metric present in both reports: its change, flagged when outside its
// band in the direction that matters. A metric's band is the larger of
// +-band_percent and kSpreadsInBand times the larger of its two spreads.
// Names every metric missing from either side and warns where the contexts
// differ.
inline constexpr double kSpreadsInBand = 3.0;
Comparison Compare(const Report& baseline, const Report& current, double band_percent);
std::string RenderComparison(const Comparison& comparison, double band_percent);

// Number formatting shared by the scenarios.
std::string Fixed(double value, int decimals);
std::string WithThousands(std::uint64_t value);
// A metric key part from a display name: lower-case letters and digits, runs
// of anything else as one '_'.
std::string MetricSlug(const std::string& name);

}  // namespace sluice::bench
