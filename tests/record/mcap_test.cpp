// The MCAP writer (sluice/record/mcap_writer.hpp) and the trace channel
// (sluice/record/trace_mcap.hpp): the file's records walked byte by byte
// here, and every file read by MCAP's own readers (npm @mcap/core, through
// tests/record/check_mcap.cjs), which must find exactly what was written.
// Without node or the package the reader checks skip, saying so.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "mcap_check.hpp"
#include "sluice/record/mcap_writer.hpp"
#include "sluice/record/trace_mcap.hpp"
#include "sluice/sluice.hpp"
#include "sluice/trace/trace_ring.hpp"
#include "sluice/trace/tracing_observer.hpp"

namespace mcap_test {
namespace {

using sluice_test::ReadWithMcapsOwnReader;

using sluice::record::McapWriter;

std::string ScratchFile(const std::string& name) {
  return std::string(SLUICE_RECORD_SCRATCH_DIR) + "/" + name;
}

std::vector<std::uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::uint64_t Little(const std::vector<std::uint8_t>& bytes, std::size_t at, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < size; ++i) value |= std::uint64_t{bytes.at(at + i)} << (8 * i);
  return value;
}

// The file's records: (offset, opcode), between the two magics, which must
// be where they belong; empty (and a failure) otherwise.
std::vector<std::pair<std::size_t, int>> Records(const std::vector<std::uint8_t>& bytes) {
  static const std::uint8_t kMagic[8] = {0x89, 'M', 'C', 'A', 'P', 0x30, '\r', '\n'};
  std::vector<std::pair<std::size_t, int>> records;
  if (bytes.size() < 16 || !std::equal(kMagic, kMagic + 8, bytes.begin()) ||
      !std::equal(kMagic, kMagic + 8, bytes.end() - 8)) {
    ADD_FAILURE() << "the magic is not at both ends";
    return {};
  }
  std::size_t at = 8;
  while (at < bytes.size() - 8) {
    if (bytes.size() - 8 - at < 9) {
      ADD_FAILURE() << "a record header runs past the closing magic at " << at;
      return {};
    }
    const std::uint64_t length = Little(bytes, at + 1, 8);
    if (length > bytes.size() - 8 - at - 9) {
      ADD_FAILURE() << "a record runs past the closing magic at " << at;
      return {};
    }
    records.push_back({at, bytes[at]});
    at += 9 + length;
  }
  return records;
}

// Two schemas, three channels (one without a schema), `each` messages on
// each channel.
void WriteSample(const std::string& path, std::uint32_t each) {
  McapWriter mcap;
  ASSERT_TRUE(mcap.Open(path, "sluice-test"));
  const std::uint16_t pose = mcap.AddSchema("Pose", "jsonschema", R"({"type":"object"})");
  const std::uint16_t raw = mcap.AddSchema("Raw", "", "");
  ASSERT_EQ(pose, 1u);
  ASSERT_EQ(raw, 2u);
  const int a = mcap.AddChannel(pose, "/robot/pose", "json", {{"frame", "map"}});
  const int b = mcap.AddChannel(raw, "/robot/raw", "application/octet-stream");
  const int c = mcap.AddChannel(0, "/robot/none", "application/octet-stream");
  ASSERT_EQ(a, 0);
  ASSERT_EQ(b, 1);
  ASSERT_EQ(c, 2);
  for (std::uint32_t i = 0; i < each; ++i) {
    const std::string json = "{\"x\":" + std::to_string(i) + "}";
    ASSERT_TRUE(mcap.AddMessage(a, i, 1000 + i, 900 + i, json.data(), json.size()));
    const std::uint8_t bytes[3] = {1, 2, static_cast<std::uint8_t>(i)};
    ASSERT_TRUE(mcap.AddMessage(b, i, 2000 + i, 2000 + i, bytes, sizeof(bytes)));
    ASSERT_TRUE(mcap.AddMessage(c, i, 3000 + i, 3000 + i, nullptr, 0));
  }
  EXPECT_EQ(mcap.MessageCount(), 3u * each);
  ASSERT_TRUE(mcap.Close());
}

TEST(McapWriterTest, TheFileIsRecordsFromMagicToMagicWithItsSummaryWhereTheFooterSays) {
  const std::string path = ScratchFile("sample_layout.mcap");
  ASSERT_NO_FATAL_FAILURE(WriteSample(path, 5));
  const std::vector<std::uint8_t> bytes = ReadFile(path);
  const auto records = Records(bytes);
  ASSERT_FALSE(records.empty());
  std::vector<int> opcodes;
  for (const auto& record : records) opcodes.push_back(record.second);
  std::vector<int> expected = {0x01, 0x03, 0x03, 0x04, 0x04, 0x04};
  for (int i = 0; i < 15; ++i) expected.push_back(0x05);
  for (int opcode : {0x0F, 0x03, 0x03, 0x04, 0x04, 0x04, 0x0B, 0x0E, 0x0E, 0x0E, 0x02}) {
    expected.push_back(opcode);
  }
  EXPECT_EQ(opcodes, expected);
  // The footer points at the summary's first record and at its offsets.
  const std::size_t footer = records.back().first;
  const std::uint64_t summary_start = Little(bytes, footer + 9, 8);
  const std::uint64_t offsets_start = Little(bytes, footer + 17, 8);
  EXPECT_EQ(summary_start, records[22].first);  // the summary's first Schema
  EXPECT_EQ(offsets_start, records[28].first);  // the first SummaryOffset
  // Each SummaryOffset names a group that is exactly its records.
  const std::size_t groups[3][3] = {{0x03, 22, 24}, {0x04, 24, 27}, {0x0B, 27, 28}};
  for (std::size_t g = 0; g < 3; ++g) {
    const std::size_t at = records[28 + g].first + 9;
    EXPECT_EQ(bytes[at], groups[g][0]);
    EXPECT_EQ(Little(bytes, at + 1, 8), records[groups[g][1]].first);
    EXPECT_EQ(Little(bytes, at + 9, 8), records[groups[g][2]].first - records[groups[g][1]].first);
  }
  // Statistics: 15 messages, 2 schemas, 3 channels, times 1000 to 3004.
  const std::size_t statistics = records[27].first + 9;
  EXPECT_EQ(Little(bytes, statistics, 8), 15u);
  EXPECT_EQ(Little(bytes, statistics + 8, 2), 2u);
  EXPECT_EQ(Little(bytes, statistics + 10, 4), 3u);
  EXPECT_EQ(Little(bytes, statistics + 26, 8), 1000u);
  EXPECT_EQ(Little(bytes, statistics + 34, 8), 3004u);
}

TEST(McapWriterTest, MisuseIsRefusedAndTheFileStaysWhole) {
  McapWriter mcap;
  EXPECT_EQ(mcap.AddSchema("A", "", ""), 0u);  // not open
  EXPECT_EQ(mcap.AddChannel(0, "/a", "x"), -1);
  EXPECT_FALSE(mcap.AddMessage(0, 0, 0, 0, nullptr, 0));
  EXPECT_FALSE(mcap.Close());
  EXPECT_FALSE(mcap.Open(ScratchFile("no/such/directory/file.mcap")));
  EXPECT_FALSE(mcap.IsOpen());
  const std::string path = ScratchFile("misuse.mcap");
  ASSERT_TRUE(mcap.Open(path));
  EXPECT_FALSE(mcap.Open(path));                 // already open
  EXPECT_EQ(mcap.AddChannel(1, "/a", "x"), -1);  // no schema 1 yet
  const int channel = mcap.AddChannel(0, "/a", "x");
  ASSERT_EQ(channel, 0);
  EXPECT_FALSE(mcap.AddMessage(1, 0, 0, 0, nullptr, 0));  // no channel 1
  EXPECT_FALSE(mcap.AddMessage(-1, 0, 0, 0, nullptr, 0));
  EXPECT_TRUE(mcap.AddMessage(channel, 0, 5, 5, "x", 1));
  EXPECT_TRUE(mcap.Close());
  EXPECT_FALSE(mcap.Close());
  const auto records = Records(ReadFile(path));
  EXPECT_EQ(records.size(), 9u);  // header, channel, message, data end, channel, statistics,
                                  // two offsets, footer
}

TEST(McapReaderCheckTest, McapsOwnReadersFindExactlyWhatWasWritten) {
  const std::string path = ScratchFile("sample_reader.mcap");
  ASSERT_NO_FATAL_FAILURE(WriteSample(path, 100));
  std::string skip;
  const auto found = ReadWithMcapsOwnReader(path, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(found.at("messages"), 300u);
  EXPECT_EQ(found.at("topic /robot/pose"), 100u);
  EXPECT_EQ(found.at("topic /robot/raw"), 100u);
  EXPECT_EQ(found.at("topic /robot/none"), 100u);
  EXPECT_EQ(found.at("record Header"), 1u);
  EXPECT_EQ(found.at("record Schema"), 4u);  // the data section's and the summary's
  EXPECT_EQ(found.at("record Channel"), 6u);
  EXPECT_EQ(found.at("record Statistics"), 1u);
  EXPECT_EQ(found.at("record Footer"), 1u);
}

// A file the readers must refuse: check_mcap.cjs fails on it (so a check
// that passes means something).
TEST(McapReaderCheckTest, McapsOwnReadersRefuseACutFile) {
  const std::string path = ScratchFile("sample_cut.mcap");
  ASSERT_NO_FATAL_FAILURE(WriteSample(path, 10));
  std::vector<std::uint8_t> bytes = ReadFile(path);
  bytes.resize(bytes.size() - 30);  // into the footer
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  const std::string node = SLUICE_NODE_BINARY;
  const std::string modules = SLUICE_NODE_MODULES;
  std::ifstream package(modules + "/@mcap/core/package.json");
  if (node.empty() || modules.empty() || !package) GTEST_SKIP() << "node or @mcap/core missing";
  const std::string command = "NODE_PATH='" + modules + "' '" + node + "' '" +
                              SLUICE_MCAP_CHECK_SCRIPT + "' '" + path + "' >/dev/null 2>&1";
  EXPECT_NE(std::system(command.c_str()), 0);
}

struct Small {
  std::uint32_t value;
};
struct Large {
  std::uint64_t values[4];
};
using Ring = sluice::trace::TraceRing<4096>;
struct TracedTraits : sluice::DefaultBusTraits {
  using Observer = sluice::trace::TracingObserver<Ring>;
};
using TracedBus =
    sluice::AsyncBus<std::variant<Small, Large>, 64, sluice::ProducerModel::kMulti, TracedTraits>;

// A traced run written as MCAP: the readers find one message per event,
// and as many of each kind as the ring held.
TEST(TraceMcapTest, ATracedRunReadsBackEventByEventInMcapsOwnReader) {
  Ring ring;
  TracedBus bus;
  bus.GetObserver().Attach(&ring, 4);
  auto handle = bus.Subscribe<Small>([](const Small&) {});
  ASSERT_TRUE(handle.IsValid());
  for (std::uint32_t i = 0; i < 200; ++i) {
    if (i % 2 == 0) {
      (void)bus.PublishWithPriority(Small{i}, i, sluice::MessagePriority::LOW);
    } else {
      (void)bus.PublishWithPriority(Large{}, i, sluice::MessagePriority::HIGH);
    }
    if (i % 100 == 99) {
      while (bus.ProcessBatch() != 0) {
      }
    }
  }
  const std::string path = ScratchFile("trace.mcap");
  McapWriter mcap;
  ASSERT_TRUE(mcap.Open(path));
  sluice::record::TraceMcapChannel channel(mcap);
  ASSERT_TRUE(channel.Valid());
  std::map<std::string, std::uint64_t> written;
  std::uint64_t events = 0;
  while (ring.Drain([&](const sluice::trace::TraceEvent& event) {
    ASSERT_TRUE(channel.Write(event));
    ++written[std::string("kind ") + sluice::record::TraceKindName(event.kind)];
    ++events;
  }) != 0) {
  }
  ASSERT_TRUE(mcap.Close());
  ASSERT_GT(written["kind refused"], 0u);
  std::string skip;
  const auto found = ReadWithMcapsOwnReader(path, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(found.at("messages"), events);
  EXPECT_EQ(found.at("topic /sluice/trace"), events);
  for (const auto& [kind, count] : written) EXPECT_EQ(found.at(kind), count) << kind;
}

}  // namespace
}  // namespace mcap_test
