// sluice_bench: the benchmark report. Prints the reference report's tables as
// measured on this machine; optionally writes JSON, Markdown and HTML, and
// compares against a baseline JSON.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "harness/platform.hpp"
#include "report/report.hpp"
#include "scenarios/common.hpp"

#ifndef SLUICE_BENCH_FLAGS
#define SLUICE_BENCH_FLAGS "unknown flags"
#endif

namespace {

using sluice::bench::Report;

// True once every byte reached the file: a full device fails at the flush,
// not at the write into the stream's buffer.
bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  out.close();
  return !out.fail();
}

// Opens each output before any measuring, so a bad path fails in a second,
// not after minutes of work (and not after another output was written).
// Appends nothing: the file is written in full at the end.
bool CheckOutputs(const std::vector<std::pair<const char*, std::string>>& outputs) {
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    std::ofstream out(path, std::ios::app);
    if (!out) {
      std::cerr << option << ": cannot write " << path << "\n";
      return false;
    }
  }
  return true;
}

// A finite number from `low` to `high`. CLI11's numeric checks let NaN
// through, and their error messages print DBL_MAX in full.
CLI::Validator FiniteIn(double low, double high) {
  const std::string range =
      "a finite number from " + CLI::detail::to_string(low) + " to " + CLI::detail::to_string(high);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        std::size_t used = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value) || value < low ||
            value > high) {
          return "must be " + range + ", not '" + text + "'";
        }
        return std::string();
      },
      "in [" + CLI::detail::to_string(low) + ", " + CLI::detail::to_string(high) + "]");
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Reads a saved report; on failure prints why, naming the option, and
// returns false.
bool LoadReport(const std::string& path, const char* option, Report* report) {
  try {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    *report = sluice::bench::ReportFromJson(nlohmann::json::parse(in));
    return true;
  } catch (const std::exception& error) {
    std::cerr << option << ": " << error.what() << "\n";
    return false;
  }
}

// Writes the requested files and prints the comparison. The exit status:
// 0, 1 on a regression against the baseline, 2 when a file cannot be written.
int WriteOutputs(const Report& report, const std::string& json_path, const std::string& html_path,
                 const std::string& markdown_path, const std::string& compare_path,
                 const Report& baseline, double noise_band) {
  namespace bench = sluice::bench;
  const std::pair<const std::string*, std::string> outputs[] = {
      {&json_path, json_path.empty() ? "" : bench::ToJson(report).dump(2) + "\n"},
      {&html_path, html_path.empty() ? "" : bench::RenderHtml(report)},
      {&markdown_path, markdown_path.empty() ? "" : bench::RenderMarkdown(report)},
  };
  for (const auto& [path, text] : outputs) {
    if (!path->empty() && !WriteFile(*path, text)) {
      std::cerr << "cannot write " << *path << "\n";
      return 2;
    }
  }
  if (compare_path.empty()) return 0;
  const bench::Comparison comparison = bench::Compare(baseline, report, noise_band);
  std::cout << bench::RenderComparison(comparison, noise_band);
  for (const std::string& warning : comparison.warnings) {
    std::cerr << "--compare: warning: " << warning << "\n";
  }
  if (!comparison.ComparedAnything()) {
    std::cerr << "--compare: the baseline shares no metric with this run: nothing was compared\n";
    return 2;
  }
  if (!comparison.HasRegression()) return 0;
  std::cout << "REGRESSION: at least one figure is worse than the baseline beyond its band, or "
               "a gated figure is missing\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace bench = sluice::bench;
  CLI::App app{"Sluice benchmark report: the reference report's tables, measured here."};
  std::string suite = "quick";
  std::string only;
  double duration = 0;
  int rounds = 0;
  int producers = 0;  // 0: the suite's default
  double consumer_work_ns = 100;
  int idle_pauses = 0;
  std::string json_path, compare_path, html_path, markdown_path;
  double noise_band = 5.0;
  double row_deadline = 0;
  double watchdog_grace = bench::kDefaultWatchdogGraceSeconds;
  bool list = false;
  std::string from_json;
  app.add_option("--suite", suite,
                 "quick (default, about a minute on 2 cores), standard (the reference's counts), "
                 "smoke, or soak "
                 "(exactly-once check for --duration seconds)")
      ->check(CLI::IsMember({"smoke", "quick", "standard", "soak"}));
  app.add_option("--only", only, "comma-separated tables to run (see --list)");
  // Bounded so the tick counts cannot overflow and a typo cannot start a run of centuries.
  app.add_option("--duration", duration,
                 "seconds per sustained row (each load row runs half of it), or of the soak; "
                 "0.001 to 86400 (one day)")
      ->check(FiniteIn(0.001, 86400));
  app.add_option("--rounds", rounds, "rounds for the repeated tables (1 to 1000)")
      ->check(CLI::Range(1, 1000));
  app.add_option(
         "--producers", producers,
         "producer threads for the MPSC sustained run and the soak (soak default: cores + 2)")
      ->check(CLI::Range(1, 256));
  app.add_option("--consumer-work-ns", consumer_work_ns,
                 "simulated work per message in the overloaded sustained run (0 to 1e6 ns)")
      ->check(FiniteIn(0, 1e6));
  app.add_option("--idle-pause", idle_pauses,
                 "pause instructions every consumer loop spends after an empty poll (default 0)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--row-deadline", row_deadline,
                 "cap every row's deadline at this many seconds (0.1 to 86400; by default a row "
                 "gets 5 s plus 1 s per 100,000 messages, or three times its length): a row that "
                 "does not finish in time is reported as not finished")
      ->check(FiniteIn(0.1, 86400));
  app.add_option("--watchdog-grace", watchdog_grace,
                 "seconds a row may run past its deadline before the watchdog ends the run "
                 "(0.1 to 86400; default 10, or the row's own deadline if longer)")
      ->check(FiniteIn(0.1, 86400));
  app.add_option("--json", json_path, "write every figure to this JSON file");
  app.add_option("--compare", compare_path, "compare with a baseline JSON; exit 1 on a regression");
  app.add_option("--noise-band", noise_band,
                 "least percent change tolerated by --compare (default 5); a metric measured "
                 "over rounds is also allowed 3 stddevs")
      ->check(FiniteIn(0, 1000));
  app.add_option("--html", html_path, "write a self-contained HTML report with charts");
  app.add_option("--markdown", markdown_path, "write the tables as Markdown (docs/benchmark.md)");
  app.add_flag("--list", list, "list the tables and exit");
  app.add_option("--from-json", from_json,
                 "measure nothing: render a saved report (text, --markdown, --html, --compare)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help exits 0; every bad option or value exits 2, like a bad file.
    return app.exit(error) == 0 ? 0 : 2;
  }

  // Every table; the soak runs only when its suite or --only asks for it,
  // the NATS table (when built) only with --only.
  std::vector<bench::NamedScenario> scenarios = bench::AllScenarios();
  scenarios.push_back(bench::SoakScenario());
#if SLUICE_BENCH_NATS
  scenarios.push_back(bench::NatsScenario());
#endif
  for (const auto& s : bench::SelfTestScenarios()) scenarios.push_back(s);
  if (list) {
    for (const auto& s : scenarios) std::cout << s.id << "\t" << s.summary << "\n";
    return 0;
  }

  bench::Options options;
  bench::ApplySuite(suite, &options);
  if (rounds > 0) options.rounds = rounds;
  if (duration > 0) {
    options.sustained_seconds = duration;
    options.load_seconds = duration / 2;
  }
  if (producers > 0) options.producers = producers;
  options.consumer_work_ns = consumer_work_ns;
  options.row_deadline_cap = row_deadline;
  options.idle_pauses = idle_pauses;
  bench::SelectCpus(&options);

  std::set<std::string> selected;
  for (const std::string& name : SplitCommas(only)) {
    bool known = false;
    for (const auto& s : scenarios) known = known || name == s.id;
    if (!known) {
      std::cerr << "unknown table '" << name << "'; --list shows the names\n";
      return 2;
    }
    selected.insert(name);
  }

  if (!CheckOutputs({{"--json", json_path}, {"--html", html_path}, {"--markdown", markdown_path}}))
    return 2;

  // Read the baseline first: a bad file should fail before minutes of work.
  Report baseline;
  if (!compare_path.empty() && !LoadReport(compare_path, "--compare", &baseline)) return 2;
  // With --only, the baseline's other tables are not part of the comparison.
  if (!selected.empty()) {
    bench::KeepTables(std::vector<std::string>(selected.begin(), selected.end()), &baseline);
  }

  Report report;
  if (!from_json.empty()) {
    if (!LoadReport(from_json, "--from-json", &report)) return 2;
    if (!selected.empty()) {  // --only picks the saved tables, and their metrics
      bench::KeepTables(std::vector<std::string>(selected.begin(), selected.end()), &report);
    }
    for (const auto& table : report.tables) std::cout << bench::RenderText(table, report.context);
    return WriteOutputs(report, json_path, html_path, markdown_path, compare_path, baseline,
                        noise_band);
  }

  const auto run_start = std::chrono::steady_clock::now();
  // No run can hang: a row past its deadline by far ends the process.
  bench::StartWatchdog(watchdog_grace);
  // The bus clock calibrates itself about 10 ms after its first reading: take
  // that reading now, so the 20 ms calibration below covers the wait and no
  // table measures the uncalibrated start.
  (void)sluice::CounterClock::NowNanos();
  bench::FastClock::Calibrate();
  (void)sluice::CounterClock::NowNanos();
  report.context.cpu_model = bench::CpuModel();
  report.context.cores = static_cast<int>(std::thread::hardware_concurrency());
  report.context.compiler = bench::CompilerDescription();
  report.context.flags = SLUICE_BENCH_FLAGS;
  report.context.date = bench::UtcTimestamp();
  report.context.suite = suite;
  report.context.clock = bench::FastClock::Description();
  report.context.pinning = bench::DescribePinning(options);
  report.context.sluice_version = sluice::kVersion;

  std::cout << "Sluice " << sluice::kVersion << " benchmark report, suite '" << suite << "'\n"
            << bench::RenderContextLine(report.context) << "\n"
            << report.context.pinning << "\n"
            << std::flush;

  if (selected.empty()) {
    if (suite == "soak") {
      selected.insert("soak");
    } else {
      for (const auto& s : bench::AllScenarios()) selected.insert(s.id);
    }
  }
  int index = 0;
  const int total = static_cast<int>(selected.size());
  for (const auto& scenario : scenarios) {
    if (selected.count(scenario.id) == 0) continue;
    bench::Progress("[" + std::to_string(++index) + "/" + std::to_string(total) + "] " +
                    scenario.id + ": " + scenario.summary);
    const std::size_t first_new = report.tables.size();
    scenario.run(options, report);
    for (std::size_t i = first_new; i < report.tables.size(); ++i) {
      std::cout << bench::RenderText(report.tables[i], report.context) << std::flush;
    }
  }

  // Metric names are keys for --compare: a duplicate is a benchmark bug.
  std::set<std::string> names;
  for (const auto& metric : report.metrics) {
    if (!names.insert(metric.name).second) {
      std::cerr << "internal error: metric " << metric.name << " is reported twice\n";
      return 3;
    }
  }
  const int status =
      WriteOutputs(report, json_path, html_path, markdown_path, compare_path, baseline, noise_band);
  const double run_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  std::cout << "\nRun time: " << bench::Fixed(run_seconds, 1) << " s for " << index
            << (index == 1 ? " table" : " tables") << " (suite '" << suite << "')\n"
            << std::flush;
  for (const std::string& failure : bench::Failures()) {
    std::cerr << "measurement failed: " << failure << "\n";
  }
  return bench::Failures().empty() || status == 2 ? status : 3;
}
