// The LTTng-UST back end (sluice/trace/lttng/lttng_sink.hpp) end to end: a
// traced program (lttng_traced_app.cpp) runs inside an LTTng session
// (`lttng`), the session is read back with `babeltrace2`, and every
// message's flow is rebuilt from it: as many admitted events as the bus
// admitted, each with exactly one taken and one dispatched event of the same
// message, as many refused as it refused, and the publish-to-dispatch
// intervals bucketed as the bus's latency histogram buckets them, equal to
// it bucket for bucket. Skips, saying so, where lttng or babeltrace2 is not
// installed.
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>

#include "sluice/latency_histogram.hpp"

namespace {

// Runs `command`; its standard output, and its status in `*status`.
std::string RunCommand(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return output;
  }
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  *status = pclose(pipe);
  return output;
}

std::size_t BucketOf(std::uint64_t nanos) {
  std::size_t bucket = 0;
  while (nanos > sluice::LatencyHistogram::UpperBoundNanos(bucket)) ++bucket;
  return bucket;
}

TEST(LttngTraceTest, EveryFlowIsRebuiltFromTheSession) {
  const std::string lttng = SLUICE_LTTNG;
  const std::string sessiond = SLUICE_LTTNG_SESSIOND;
  const std::string babeltrace = SLUICE_BABELTRACE2;
  if (lttng.empty() || sessiond.empty() || babeltrace.empty()) {
    GTEST_SKIP() << "lttng, lttng-sessiond or babeltrace2 not installed (Debian: lttng-tools, "
                    "babeltrace2)";
  }
  int status = 0;
  // A session daemon: the one running, or one started here (it stays, as
  // `lttng` itself would leave it).
  (void)RunCommand("'" + lttng + "' list >/dev/null 2>&1", &status);
  if (status != 0) {
    (void)RunCommand("'" + sessiond + "' --daemonize >/dev/null 2>&1", &status);
    ASSERT_EQ(status, 0) << "lttng-sessiond did not start";
  }
  const std::string name = "sluice_test_" + std::to_string(getpid());
  // The session keeps this run's bus only (a filter on its id): another
  // traced program, or this test run twice at once, records other ids.
  const std::uint64_t bus_id = 1 + static_cast<std::uint64_t>(getpid()) % 65535;
  const std::string output = std::string(SLUICE_LTTNG_SCRATCH_DIR) + "/" + name;
  const std::string session = " -s " + name;
  const std::string quiet = " >/dev/null 2>&1";
  (void)RunCommand("'" + lttng + "' create " + name + " --output='" + output + "'" + quiet,
                   &status);
  ASSERT_EQ(status, 0) << "lttng create";
  // Buffers large enough for every event (about 50,000 of 100 bytes each):
  // an event LTTng discards would fail the counts below, not pass them.
  (void)RunCommand("'" + lttng + "' enable-channel -u" + session +
                       " --subbuf-size=4M --num-subbuf=4 sluice_channel" + quiet,
                   &status);
  EXPECT_EQ(status, 0) << "lttng enable-channel";
  (void)RunCommand("'" + lttng + "' enable-event -u" + session +
                       " -c sluice_channel 'sluice:event' --filter 'bus_id == " +
                       std::to_string(bus_id) + "'" + quiet,
                   &status);
  EXPECT_EQ(status, 0) << "lttng enable-event";
  (void)RunCommand("'" + lttng + "' start " + name + quiet, &status);
  EXPECT_EQ(status, 0) << "lttng start";
  const std::string counted =
      RunCommand("'" + std::string(SLUICE_LTTNG_APP) + "' " + std::to_string(bus_id), &status);
  EXPECT_EQ(status, 0) << counted;
  (void)RunCommand("'" + lttng + "' stop " + name + quiet, &status);
  EXPECT_EQ(status, 0) << "lttng stop";
  (void)RunCommand("'" + lttng + "' destroy " + name + quiet, &status);
  EXPECT_EQ(status, 0) << "lttng destroy";
  const std::string trace = RunCommand("'" + babeltrace + "' '" + output + "' 2>&1", &status);
  // The trace is read: its files go (a failure below still has the text).
  std::error_code ignored;
  std::filesystem::remove_all(output, ignored);
  ASSERT_EQ(status, 0) << trace.substr(0, 2000);

  // What the program counted.
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  std::map<std::pair<std::size_t, std::size_t>, std::uint64_t> histogram;
  {
    std::istringstream lines(counted);
    std::string word;
    while (lines >> word) {
      if (word == "admitted") lines >> admitted;
      if (word == "refused") lines >> refused;
      if (word == "bucket") {
        std::size_t priority = 0;
        std::size_t bucket = 0;
        std::uint64_t count = 0;
        lines >> priority >> bucket >> count;
        histogram[{priority, bucket}] = count;
      }
    }
  }
  ASSERT_GT(admitted, 10000u);
  ASSERT_GT(refused, 0u);
  ASSERT_GT(histogram.size(), 8u);

  // The trace: every sluice:event, its fields by name.
  struct Flow {
    int admitted = 0;
    int taken = 0;
    int dispatched = 0;
    std::uint64_t stamp = 0;
    std::uint64_t taken_time = 0;
    std::uint64_t priority = 0;
  };
  std::map<std::pair<std::uint64_t, std::uint64_t>, Flow> flows;  // by (lane, msg_id)
  std::uint64_t refused_events = 0;
  std::uint64_t events = 0;
  const std::regex field(R"(([a-z_]+) = ([0-9]+))");
  std::istringstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find("sluice:event:");
    if (at == std::string::npos) continue;
    ++events;
    std::map<std::string, std::uint64_t> fields;
    const std::string rest = line.substr(at);
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), field);
         it != std::sregex_iterator(); ++it) {
      fields[(*it)[1]] = std::stoull((*it)[2]);
    }
    ASSERT_EQ(fields.at("bus_id"), bus_id) << line;
    const std::uint64_t kind = fields.at("kind");
    if (kind == 2) refused_events += fields.at("value");
    if (kind != 1 && kind != 4 && kind != 5) continue;
    Flow& flow = flows[{fields.at("lane"), fields.at("msg_id")}];
    if (kind == 1) {
      ++flow.admitted;
      flow.stamp = fields.at("stamp_ns");
      flow.priority = fields.at("priority");
    } else if (kind == 4) {
      ++flow.taken;
      flow.taken_time = fields.at("time_ns");
      EXPECT_NE(fields.at("stamp_ns"), 0u);
    } else {
      ++flow.dispatched;
    }
  }
  std::printf("%llu events, %zu flows\n", static_cast<unsigned long long>(events), flows.size());
  EXPECT_EQ(flows.size(), admitted);
  EXPECT_EQ(refused_events, refused);
  std::map<std::pair<std::size_t, std::size_t>, std::uint64_t> rebuilt;
  for (const auto& [key, flow] : flows) {
    ASSERT_EQ(flow.admitted, 1) << "message " << key.second;
    ASSERT_EQ(flow.taken, 1) << "message " << key.second;
    ASSERT_EQ(flow.dispatched, 1) << "message " << key.second;
    ASSERT_GE(flow.taken_time, flow.stamp);
    ++rebuilt[{static_cast<std::size_t>(flow.priority), BucketOf(flow.taken_time - flow.stamp)}];
  }
  EXPECT_EQ(rebuilt, histogram);
}

}  // namespace
