// The benchmark report's machine-readable paths: JSON, compare, HTML, Markdown.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/platform.hpp"
#include "harness/stats.hpp"
#include "peers/one_core_rows.hpp"
#include "peers/peer_adapters.hpp"
#include "report/report.hpp"
#include "report/spread.hpp"

namespace sluice::bench {
namespace {

Report SampleReport() {
  Report report;
  report.context.cpu_model = "Test CPU";
  report.context.cores = 2;
  report.context.compiler = "g++ 12";
  report.context.flags = "Release: -O3";
  report.context.date = "2026-11-29 12:00 UTC";
  report.context.suite = "quick";
  Table table;
  table.id = "modes";
  table.title = "1. Mode comparison";
  table.columns = {"bus", "mode", "M msg/s"};
  table.rows = {{"MPSC", "FULL_FEATURED", "20.00"}, {"MPSC", "BARE_METAL", "40.00"}};
  table.notes = {"a note with <markup> & ampersand"};
  report.tables.push_back(table);
  report.AddMetric("modes.mpsc.full_featured.throughput_mps", 20.0, "M msg/s", Better::kHigher);
  report.AddMetric("modes.mpsc.bare_metal.throughput_mps", 40.0, "M msg/s", Better::kHigher);
  report.AddMetric("latency.mpsc.callback.p50_ns", 300.0, "ns", Better::kLower);
  report.AddMetric("latency.mpsc.callback.p99_ns", 900.0, "ns", Better::kNeither);
  return report;
}

TEST(BenchReportTest, JsonRoundTripKeepsEveryFigure) {
  const Report original = SampleReport();
  const Report copy = ReportFromJson(nlohmann::json::parse(ToJson(original).dump()));
  EXPECT_EQ(copy.context.cpu_model, "Test CPU");
  EXPECT_EQ(copy.context.cores, 2);
  ASSERT_EQ(copy.tables.size(), 1u);
  EXPECT_EQ(copy.tables[0].rows, original.tables[0].rows);
  EXPECT_EQ(copy.tables[0].notes, original.tables[0].notes);
  ASSERT_EQ(copy.metrics.size(), original.metrics.size());
  for (std::size_t i = 0; i < copy.metrics.size(); ++i) {
    EXPECT_EQ(copy.metrics[i].name, original.metrics[i].name);
    EXPECT_DOUBLE_EQ(copy.metrics[i].value, original.metrics[i].value);
    EXPECT_EQ(copy.metrics[i].better, original.metrics[i].better);
  }
}

TEST(BenchReportTest, MalformedJsonIsRejected) {
  EXPECT_THROW(ReportFromJson(nlohmann::json::parse(R"({"context": {}})")),
               nlohmann::json::exception);
}

TEST(BenchReportTest, CompareFlagsOnlyChangesBeyondTheBandInTheWrongDirection) {
  const Report baseline = SampleReport();
  Report current = SampleReport();
  current.metrics[0].value = 20.0 * 1.04;   // +4 %: within a 5 % band
  current.metrics[1].value = 40.0 * 0.90;   // -10 % throughput: regression
  current.metrics[2].value = 300.0 * 0.80;  // -20 % latency: improvement
  current.metrics[3].value = 9000.0;        // informational: never judged
  current.AddMetric("new.metric", 1.0, "x", Better::kHigher);

  const Comparison comparison = Compare(baseline, current, 5.0);
  ASSERT_EQ(comparison.rows.size(), 4u);
  EXPECT_EQ(comparison.rows[0].verdict, ComparisonRow::Verdict::kWithinBand);
  EXPECT_NEAR(comparison.rows[0].change_percent, 4.0, 1e-9);
  EXPECT_EQ(comparison.rows[1].verdict, ComparisonRow::Verdict::kRegressed);
  EXPECT_EQ(comparison.rows[2].verdict, ComparisonRow::Verdict::kImproved);
  EXPECT_EQ(comparison.rows[3].verdict, ComparisonRow::Verdict::kInformational);
  EXPECT_TRUE(comparison.HasRegression());
  EXPECT_EQ(comparison.only_in_current, (std::vector<std::string>{"new.metric"}));
  EXPECT_NE(RenderComparison(comparison, 5.0).find("REGRESSED"), std::string::npos);

  EXPECT_FALSE(Compare(baseline, current, 15.0).HasRegression()) << "a wider band tolerates -10 %";
  EXPECT_FALSE(Compare(baseline, baseline, 0.0).HasRegression());
}

TEST(BenchReportTest, ReportFromJsonRejectsAnotherFormatOrShape) {
  nlohmann::json json = ToJson(SampleReport());
  json["format"] = "sluice-bench-report/2";
  EXPECT_THROW(ReportFromJson(json), std::invalid_argument);
  json.erase("format");
  EXPECT_THROW(ReportFromJson(json), nlohmann::json::exception);
  json = ToJson(SampleReport());
  json["metrics"] = nlohmann::json::object();
  EXPECT_THROW(ReportFromJson(json), std::invalid_argument) << "metrics: {} is the wrong shape";
  json = ToJson(SampleReport());
  json["tables"] = "none";
  EXPECT_THROW(ReportFromJson(json), std::invalid_argument);
}

TEST(BenchReportTest, CompareWithNoSharedMetricComparedNothing) {
  Report baseline = SampleReport();
  baseline.metrics.clear();
  baseline.AddMetric("no.such.metric", 1.0, "x", Better::kNeither);
  const Comparison comparison = Compare(baseline, SampleReport(), 5.0);
  EXPECT_FALSE(comparison.ComparedAnything());
  baseline.metrics.clear();
  EXPECT_FALSE(Compare(baseline, SampleReport(), 5.0).ComparedAnything());
  EXPECT_TRUE(Compare(SampleReport(), SampleReport(), 5.0).ComparedAnything());
}

TEST(BenchReportTest, CompareNamesEveryMissingMetricAndFailsOnAGatedOne) {
  const Report baseline = SampleReport();
  Report current = SampleReport();
  current.metrics.pop_back();  // latency p99: informational
  Comparison comparison = Compare(baseline, current, 5.0);
  EXPECT_EQ(comparison.only_in_baseline,
            (std::vector<std::string>{"latency.mpsc.callback.p99_ns"}));
  EXPECT_FALSE(comparison.HasRegression()) << "a missing informational figure is named only";
  EXPECT_NE(RenderComparison(comparison, 5.0).find("latency.mpsc.callback.p99_ns"),
            std::string::npos);

  current.metrics.erase(current.metrics.begin());  // MPSC FULL_FEATURED throughput: gated
  comparison = Compare(baseline, current, 5.0);
  EXPECT_EQ(comparison.missing_gated,
            (std::vector<std::string>{"modes.mpsc.full_featured.throughput_mps"}));
  EXPECT_TRUE(comparison.HasRegression());
  const std::string text = RenderComparison(comparison, 5.0);
  EXPECT_NE(text.find("MISSING"), std::string::npos);
  EXPECT_NE(text.find("modes.mpsc.full_featured.throughput_mps"), std::string::npos);
}

TEST(BenchReportTest, EveryMetricBelongsToATable) {
  EXPECT_EQ(TableOfMetric("modes.mpsc.full_featured.throughput_mps"), "modes");
  EXPECT_EQ(TableOfMetric("noise.lost_percent"), "latency");
  EXPECT_EQ(TableOfMetric("subscribers.4.throughput_mps"), "load");
  Report report = SampleReport();
  KeepTables({"latency"}, &report);
  EXPECT_TRUE(report.tables.empty());
  ASSERT_EQ(report.metrics.size(), 2u);
  EXPECT_EQ(report.metrics[0].name, "latency.mpsc.callback.p50_ns");
}

TEST(BenchReportTest, CompareWarnsWhereTheRunsWereMeasuredDifferently) {
  const Report baseline = SampleReport();
  EXPECT_TRUE(Compare(baseline, baseline, 5.0).warnings.empty());
  Report current = SampleReport();
  current.context.cpu_model = "Other CPU";
  current.context.cores = 16;
  current.context.suite = "standard";
  current.context.compiler = "clang 17";
  const Comparison comparison = Compare(baseline, current, 5.0);
  ASSERT_EQ(comparison.warnings.size(), 4u);
  EXPECT_NE(comparison.warnings[0].find("Other CPU"), std::string::npos);
  EXPECT_NE(comparison.warnings[1].find("16"), std::string::npos);
  EXPECT_NE(comparison.warnings[2].find("standard"), std::string::npos);
  EXPECT_NE(comparison.warnings[3].find("clang 17"), std::string::npos);
  EXPECT_NE(RenderComparison(comparison, 5.0).find("WARNING"), std::string::npos);
}

TEST(BenchReportTest, EachMetricsBandFollowsItsMeasuredSpread) {
  Report baseline = SampleReport();
  baseline.metrics[0].spread = 1.0;  // 20 +- 1 M msg/s over rounds: band +-15 %
  Report current = SampleReport();
  current.metrics[0].value = 20.0 * 0.90;  // -10 %: inside three stddevs
  current.metrics[0].spread = 0.5;
  Comparison comparison = Compare(baseline, current, 5.0);
  EXPECT_NEAR(comparison.rows[0].band_percent, 15.0, 1e-9);
  EXPECT_EQ(comparison.rows[0].verdict, ComparisonRow::Verdict::kWithinBand);
  EXPECT_NEAR(comparison.rows[1].band_percent, 5.0, 1e-9) << "no spread: the floor";

  current.metrics[0].value = 20.0 * 0.80;  // -20 %: beyond three stddevs
  EXPECT_EQ(Compare(baseline, current, 5.0).rows[0].verdict, ComparisonRow::Verdict::kRegressed);
}

TEST(BenchReportTest, OnlyGatedMetricsCanRegress) {
  Report baseline = SampleReport();
  baseline.AddMetric("peers.boost_lockfree_queue_mpmc.e2e_mps", 10.0, "M msg/s", Better::kHigher)
      .gated = false;
  Report current = SampleReport();
  current.AddMetric("peers.boost_lockfree_queue_mpmc.e2e_mps", 5.0, "M msg/s", Better::kHigher)
      .gated = false;
  const Comparison comparison = Compare(baseline, current, 5.0);
  ASSERT_EQ(comparison.rows.size(), 5u);
  EXPECT_EQ(comparison.rows[4].verdict, ComparisonRow::Verdict::kNotGated);
  EXPECT_FALSE(comparison.HasRegression()) << "a peer halving is context, not a regression";
  EXPECT_NE(RenderComparison(comparison, 5.0).find("not gated"), std::string::npos);

  current.metrics.pop_back();  // a missing ungated metric is named, not failed
  EXPECT_FALSE(Compare(baseline, current, 5.0).HasRegression());
}

TEST(BenchReportTest, JsonKeepsSpreadAndGate) {
  Report original = SampleReport();
  original.metrics[0].spread = 0.75;
  original.metrics[1].gated = false;
  const Report copy = ReportFromJson(nlohmann::json::parse(ToJson(original).dump()));
  EXPECT_DOUBLE_EQ(copy.metrics[0].spread, 0.75);
  EXPECT_TRUE(copy.metrics[0].gated);
  EXPECT_FALSE(copy.metrics[1].gated);
  EXPECT_FALSE(copy.metrics[3].gated) << "no direction, nothing to gate";
}

TEST(BenchReportTest, HtmlIsSelfContainedWithCharts) {
  const std::string html = RenderHtml(SampleReport());
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Publish throughput by mode"), std::string::npos);
  EXPECT_NE(html.find("End-to-end latency percentiles"), std::string::npos);
  EXPECT_NE(html.find("<td class='text'>FULL_FEATURED</td>"), std::string::npos)
      << "words align left";
  EXPECT_NE(html.find("<td>20.00</td>"), std::string::npos) << "figures align right";
  EXPECT_NE(html.find("&lt;markup&gt; &amp; ampersand"), std::string::npos) << "text is escaped";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos) << "nothing is loaded from elsewhere";
  EXPECT_EQ(html.find("href="), std::string::npos);
}

TEST(BenchReportTest, HtmlAttributesCannotBeBrokenOutOf) {
  Report report = SampleReport();
  report.tables[0].id = "x' onmouseover='alert(1)";
  report.tables[0].title = "title ' \" < >";
  report.context.cpu_model = "cpu' onload='alert(2)";
  const std::string html = RenderHtml(report);
  EXPECT_EQ(html.find("' onmouseover='"), std::string::npos);
  EXPECT_EQ(html.find("' onload='"), std::string::npos);
  EXPECT_NE(html.find("id='x&#39; onmouseover=&#39;alert(1)'"), std::string::npos);
}

TEST(BenchReportTest, MarkdownPutsTheReferenceBesideOurTable) {
  const std::string md = RenderMarkdown(SampleReport());
  EXPECT_NE(md.find("| MPSC | FULL_FEATURED | 20.00 |"), std::string::npos);
  EXPECT_NE(md.find("The reference's published figures"), std::string::npos);
  EXPECT_NE(md.find("26.27"), std::string::npos);
  EXPECT_NE(md.find("Test CPU"), std::string::npos);
}

TEST(BenchReportTest, SkewedCrossCoreDifferencesAreCountedNotWrapped) {
  // The consumer's counter runs 3 ticks behind the producer's: two of the
  // four one-way differences come out negative.
  CrossCoreSamples samples(4, 10.0);
  samples.Add(100, 105);
  samples.Add(200, 198);
  samples.Add(300, 297);
  samples.Add(400, 402);
  EXPECT_EQ(samples.negative(), 2u);
  EXPECT_EQ(samples.size(), 4u);
  const Percentiles p = samples.Summarize();
  EXPECT_EQ(p.negative, 2u);
  EXPECT_EQ(p.samples, 2u) << "negative differences stay out of the percentiles";
  EXPECT_DOUBLE_EQ(p.max, 50.0);
  EXPECT_DOUBLE_EQ(p.mean, 35.0);
}

TEST(BenchReportTest, OneRoundHasNoSpreadToPrint) {
  EXPECT_EQ(MeanPlusMinus({12.5}, 2), "12.50 +- n/a");
  EXPECT_EQ(MeanPlusMinus({1.0, 3.0}, 2), "2.00 +- 1.41");
}

// The peers' PublishFast rows stand for a caller with its own timestamp: the
// bus must see real timestamps, or its latency histograms skip every message.
TEST(BenchReportTest, PeerPublishFastRowsStampRealTimestamps) {
  struct Probe {
    void operator()(const Message&) {}
  } probe;
  SluiceAdapter<ProducerModel::kSingle, PerformanceMode::FULL_FEATURED, SluiceCall::kPublishFast,
                SluicePath::kCallbacks, Probe>
      adapter(probe);
  for (std::uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(adapter.TryPush(Message{i, 0, 0, 0, 0}));
  std::size_t popped = 0;
  while (popped < 1000) popped += adapter.PopSome(probe);
  std::uint64_t recorded = 0;
  const LatencySnapshot latency = adapter.bus().GetLatencyHistograms();
  for (const LatencyHistogram& histogram : latency.by_priority) recorded += histogram.count;
  EXPECT_EQ(recorded, 1000u);
}

// The peers table reports each placement state apart, by the probe's round
// trip: shared core (60-80 ns), near (about 150 ns), far (380-550 ns).
TEST(BenchReportTest, PlacementProbeClassifiesTheThreeStates) {
  EXPECT_EQ(ClassifyPlacement(70), Placement::kSharedCore);
  EXPECT_EQ(ClassifyPlacement(109.9), Placement::kSharedCore);
  EXPECT_EQ(ClassifyPlacement(110), Placement::kNear);
  EXPECT_EQ(ClassifyPlacement(150), Placement::kNear);
  EXPECT_EQ(ClassifyPlacement(249.9), Placement::kNear);
  EXPECT_EQ(ClassifyPlacement(250), Placement::kFar);
  EXPECT_EQ(ClassifyPlacement(431), Placement::kFar);
  EXPECT_STREQ(PlacementName(Placement::kSharedCore), "shared-core");
  EXPECT_STREQ(PlacementName(Placement::kNear), "near");
  EXPECT_STREQ(PlacementName(Placement::kFar), "far");
}

// Rounds of one state pool their latency samples, negative ones counted.
TEST(BenchReportTest, CrossCoreSamplesPoolAcrossRuns) {
  CrossCoreSamples pooled(0, 1.0);
  CrossCoreSamples first(2, 1.0);
  first.Add(100, 110);
  first.Add(100, 90);
  CrossCoreSamples second(2, 1.0);
  second.Add(100, 130);
  second.Add(100, 150);
  pooled.Append(first);
  pooled.Append(second);
  EXPECT_EQ(pooled.size(), 4u);
  const Percentiles p = pooled.Summarize();
  EXPECT_EQ(p.samples, 3u);
  EXPECT_EQ(p.negative, 1u);
  EXPECT_DOUBLE_EQ(p.p50, 30.0);
  EXPECT_DOUBLE_EQ(p.max, 50.0);
}

// A peer of the waiting shape (atomic_queue's blocking push and pop): a
// deque standing in, which records each Pop's count and fails the test on a
// pop of a message that is not there, where the real queue would wait
// forever.
template <typename Probe>
class WaitingQueue {
 public:
  static constexpr bool kBlocking = true;
  explicit WaitingQueue(Probe&) {}
  void Push(const Message& m) { queue_.push_back(m); }
  void Pop(Probe& probe, std::size_t count) {
    counts.push_back(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (queue_.empty()) {
        ADD_FAILURE() << "a waiting pop asked for a message that never comes";
        return;
      }
      probe(queue_.front());
      queue_.pop_front();
    }
  }
  std::vector<std::size_t> counts;

 private:
  std::deque<Message> queue_;
};

TEST(BenchReportTest, WaitingPeersPopOnlyWhatIsStillToCome) {
  static_assert(IsBlocking<WaitingQueue<CountProbe>>::value, "declares kBlocking");
  static_assert(!IsBlocking<MutexDequeAdapter<CountProbe>>::value, "tries, never waits");
  CountProbe probe;
  WaitingQueue<CountProbe> queue(probe);
  for (std::uint64_t i = 0; i < kPeerBatch + 10; ++i) {
    ASSERT_TRUE(PushOne(queue, Message{i, 0, 0, 0, 0}));
  }
  EXPECT_EQ(PopExpected(queue, probe, kPeerBatch + 10), kPeerBatch);
  EXPECT_EQ(PopExpected(queue, probe, 10), 10u);
  EXPECT_EQ(PopExpected(queue, probe, 0), 0u);
  EXPECT_EQ(probe.count, kPeerBatch + 10);
  EXPECT_EQ(queue.counts, (std::vector<std::size_t>{kPeerBatch, 10, 0}));
}

// A one-core round gets back every message it pushed, from a waiting peer
// (which must not be asked for more) and from Sluice alike.
TEST(BenchReportTest, OneCoreRoundReturnsEveryPush) {
  CountProbe probe;
  WaitingQueue<CountProbe> waiting(probe);
  std::uint64_t seq = 0;
  std::uint64_t pushed = 0;
  EXPECT_EQ(OneCoreRound(waiting, probe, seq, pushed), kOneCoreBurst);
  EXPECT_EQ(pushed, kOneCoreBurst);
  EXPECT_EQ(probe.count, kOneCoreBurst);
  CountProbe bus_probe;
  SpscFullFastCallbacks<CountProbe> bus(bus_probe);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(OneCoreRound(bus, bus_probe, seq, pushed), kOneCoreBurst);
    EXPECT_EQ(pushed, kOneCoreBurst);
  }
  EXPECT_EQ(bus_probe.count, 3 * kOneCoreBurst);
  EXPECT_EQ(seq, 4 * kOneCoreBurst);
}

TEST(BenchReportTest, TooFewRoundsForASpreadAreNotGated) {
  Metric two;
  two.gated = true;
  SetSpread({10.0, 10.1}, &two);
  EXPECT_FALSE(two.gated) << "one degree of freedom says little about the spread";
  Metric three;
  three.gated = true;
  SetSpread({9.0, 10.0, 11.0}, &three);
  EXPECT_TRUE(three.gated);
  EXPECT_DOUBLE_EQ(three.spread, 1.0);
}

TEST(BenchReportTest, NumberFormatting) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(131072), "131,072");
  EXPECT_EQ(WithThousands(1000000), "1,000,000");
  EXPECT_EQ(Fixed(2.345, 1), "2.3");
}

// The report's notes wrap at 100 columns, keeping every word and its order;
// a word longer than a line stays whole on a line of its own.
TEST(BenchReportTest, NotesWrapAtOneHundredColumnsKeepingEveryWord) {
  std::string note;
  std::vector<std::string> words;
  for (int i = 0; i < 60; ++i) words.push_back("word" + std::to_string(i));
  words.push_back(std::string(120, 'x'));  // longer than a line
  words.push_back("end");
  for (const std::string& word : words) note += (note.empty() ? "" : " ") + word;
  Table table;
  table.title = "t";
  table.columns = {"a"};
  table.notes = {note, "short note"};
  const std::string text = RenderText(table, Context{});
  std::vector<std::string> note_words;
  std::size_t note_lines = 0;
  bool in_notes = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("  word0", 0) == 0) in_notes = true;
    if (!in_notes) continue;
    ++note_lines;
    std::size_t at = 0;
    std::size_t count = 0;
    while (at < line.size()) {
      if (line[at] == ' ') {
        ++at;
        continue;
      }
      std::size_t word_end = line.find(' ', at);
      if (word_end == std::string::npos) word_end = line.size();
      note_words.push_back(line.substr(at, word_end - at));
      at = word_end;
      ++count;
    }
    EXPECT_TRUE(line.size() <= 100 || count == 1) << line;
  }
  words.push_back("short");
  words.push_back("note");
  EXPECT_EQ(note_words, words);
  EXPECT_GE(note_lines, 6u);  // about 440 characters of words, and the long one apart
}

}  // namespace
}  // namespace sluice::bench
