// An MCAP file writer (https://mcap.dev/spec, version 0): the container that
// robotics tools (Foxglove, the mcap CLI, ROS 2's rosbag2) read. Hosted
// (writes through std::FILE); standard library only; not used by the bus.
//
// What it writes: the magic, a Header, then the data section (Schema,
// Channel, Message and Metadata records in the order they are added), a
// DataEnd, a summary section (every Schema and Channel again, a
// MetadataIndex for each Metadata record, one Statistics record)
// with a SummaryOffset record for each of its groups, the Footer and the
// magic. No chunks, so no chunk or message indexes: read it from the start
// (MCAP's stream readers; an indexed reader's message query finds nothing
// in it, though its summary reads). CRCs are written as 0, which the
// specification reads as "not computed".
//
//   sluice::record::McapWriter mcap;
//   if (!mcap.Open("run.mcap", "sluice-example")) ...;
//   const auto schema = mcap.AddSchema("Pose", "jsonschema", pose_json_schema);
//   const auto channel = mcap.AddChannel(schema, "/robot/pose", "json");
//   mcap.AddMessage(channel, sequence, log_time_ns, publish_time_ns, bytes, size);
//   mcap.Close();   // false if any write failed
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/detail/observe/utf8.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// Whether `text` is valid UTF-8, as MCAP's strings (names, topics,
// encodings) must be.
inline bool IsValidUtf8(std::string_view text) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t sequence = detail::Utf8SequenceLength(bytes + i, text.size() - i);
    if (sequence == 0) return false;
    i += sequence;
  }
  return true;
}

class McapWriter;
bool OpenNextMcapFile(McapWriter& mcap, const std::string& prefix, std::uint64_t& next,
                      std::string* path);

class McapWriter {
 public:
  McapWriter() = default;
  McapWriter(const McapWriter&) = delete;
  McapWriter& operator=(const McapWriter&) = delete;
  // Closes the file if open (see Close).
  ~McapWriter() { (void)Close(); }

  // Creates (or truncates) `path` and writes the magic and the Header
  // record (`profile`: the MCAP profile, "" for none). False, and nothing
  // open, when the file cannot be made or written. `exclusive`: a file
  // that exists already is left alone (false, errno EEXIST).
  bool Open(const std::string& path, std::string_view profile = "", bool exclusive = false) {
    if (file_ != nullptr) return false;
    file_ = std::fopen(path.c_str(), exclusive ? "wbx" : "wb");
    if (file_ == nullptr) return false;
    ok_ = true;
    offset_ = 0;
    schemas_.clear();
    channels_.clear();
    channel_counts_.clear();
    metadata_indexes_.clear();
    message_count_ = 0;
    first_time_ = 0;
    last_time_ = 0;
    WriteBytes(kMagic, sizeof(kMagic));
    std::string header;
    PutString(header, profile);
    PutString(header, "sluice");
    WriteRecord(kOpHeader, header);
    if (!ok_) {
      std::fclose(file_);
      file_ = nullptr;
    }
    return ok_;
  }

  bool IsOpen() const noexcept { return file_ != nullptr; }

  // A schema: its id (1, 2, ...; 0 is MCAP's "no schema"), or 0 when the
  // file is not open, the write failed, or the name or encoding is not
  // valid UTF-8.
  std::uint16_t AddSchema(std::string_view name, std::string_view encoding, std::string_view data) {
    if (file_ == nullptr || schemas_.size() >= 0xFFFF) return 0;  // ids 1 to 65535
    if (!IsValidUtf8(name) || !IsValidUtf8(encoding)) return 0;
    std::string record;
    const auto id = static_cast<std::uint16_t>(schemas_.size() + 1);
    PutLittle(record, id, 2);
    PutString(record, name);
    PutString(record, encoding);
    PutString(record, data);  // bytes: the same u32 length and content
    schemas_.push_back(record);
    WriteRecord(kOpSchema, record);
    return ok_ ? id : 0;
  }

  // A channel on `schema_id` (0: none): its id (0, 1, ...), or -1 when the
  // file is not open, the schema unknown, the write failed, or the topic or
  // encoding is not valid UTF-8.
  int AddChannel(std::uint16_t schema_id, std::string_view topic, std::string_view message_encoding,
                 const std::map<std::string, std::string>& metadata = {}) {
    // Ids 0 to 65535.
    if (file_ == nullptr || schema_id > schemas_.size() || channels_.size() > 0xFFFF) return -1;
    if (!IsValidUtf8(topic) || !IsValidUtf8(message_encoding)) return -1;
    std::string record;
    const auto id = static_cast<std::uint16_t>(channels_.size());
    PutLittle(record, id, 2);
    PutLittle(record, schema_id, 2);
    PutString(record, topic);
    PutString(record, message_encoding);
    std::string map;
    for (const auto& [key, value] : metadata) {
      PutString(map, key);
      PutString(map, value);
    }
    PutString(record, map);  // a map: its byte length, then its entries
    channels_.push_back(record);
    channel_counts_.push_back(0);
    WriteRecord(kOpChannel, record);
    return ok_ ? id : -1;
  }

  // A message on `channel` (from AddChannel). False when the file is not
  // open, the channel unknown, or a write failed. True: taken into the
  // writer's buffer (in the file after FlushFile or Close).
  bool AddMessage(int channel, std::uint32_t sequence, std::uint64_t log_time_ns,
                  std::uint64_t publish_time_ns, const void* data, std::size_t size) {
    if (file_ == nullptr || channel < 0 || static_cast<std::size_t>(channel) >= channels_.size()) {
      return false;
    }
    // The record's opcode, length and fixed fields, without an allocation.
    std::uint8_t head[1 + 8 + 22];
    head[0] = kOpMessage;
    PutLittle(head + 1, 22 + static_cast<std::uint64_t>(size), 8);
    PutLittle(head + 9, static_cast<std::uint16_t>(channel), 2);
    PutLittle(head + 11, sequence, 4);
    PutLittle(head + 15, log_time_ns, 8);
    PutLittle(head + 23, publish_time_ns, 8);
    WriteBytes(head, sizeof(head));
    WriteBytes(data, size);
    if (!ok_) return false;
    if (message_count_ == 0 || log_time_ns < first_time_) first_time_ = log_time_ns;
    if (message_count_ == 0 || log_time_ns > last_time_) last_time_ = log_time_ns;
    ++message_count_;
    ++channel_counts_[static_cast<std::size_t>(channel)];
    return true;
  }

  // A Metadata record: `name` and its key/value pairs, in the data
  // section, indexed in the summary (MetadataIndex). False when the file
  // is not open or the write failed.
  bool AddMetadata(std::string_view name, const std::map<std::string, std::string>& metadata) {
    if (file_ == nullptr) return false;
    std::string record;
    PutString(record, name);
    std::string map;
    for (const auto& [key, value] : metadata) {
      PutString(map, key);
      PutString(map, value);
    }
    PutString(record, map);
    const std::uint64_t start = offset_;
    WriteRecord(kOpMetadata, record);
    if (!ok_) return false;
    std::string index;
    PutLittle(index, start, 8);
    PutLittle(index, offset_ - start, 8);
    PutString(index, name);
    metadata_indexes_.push_back(index);
    return true;
  }

  // Hands what the writer has buffered to the operating system (fflush):
  // a message AddMessage took is in the file once this or Close returns
  // true. False if any write since Open failed.
  bool FlushFile() {
    if (file_ == nullptr) return false;
    if (std::fflush(file_) != 0) ok_ = false;
    return ok_;
  }

  // Messages added so far.
  std::uint64_t MessageCount() const noexcept { return message_count_; }
  // Bytes written so far (for splitting files by size).
  std::uint64_t BytesWritten() const noexcept { return offset_; }

  // Writes the DataEnd, the summary section, its offsets, the Footer and
  // the magic, and closes the file. True when every write since Open
  // succeeded (false, too, when nothing was open).
  bool Close() {
    if (file_ == nullptr) return false;
    std::string data_end;
    PutLittle(data_end, 0, 4);  // the data section's CRC: not computed
    WriteRecord(kOpDataEnd, data_end);
    const std::uint64_t summary_start = offset_;
    std::vector<std::pair<std::uint8_t, std::pair<std::uint64_t, std::uint64_t>>> groups;
    const auto group = [&](std::uint8_t opcode, const std::vector<std::string>& records) {
      if (records.empty()) return;
      const std::uint64_t start = offset_;
      for (const std::string& record : records) WriteRecord(opcode, record);
      groups.push_back({opcode, {start, offset_ - start}});
    };
    group(kOpSchema, schemas_);
    group(kOpChannel, channels_);
    group(kOpMetadataIndex, metadata_indexes_);
    group(kOpStatistics, {Statistics()});
    const std::uint64_t summary_offset_start = offset_;
    for (const auto& [opcode, place] : groups) {
      std::string offset;
      offset.push_back(static_cast<char>(opcode));
      PutLittle(offset, place.first, 8);
      PutLittle(offset, place.second, 8);
      WriteRecord(kOpSummaryOffset, offset);
    }
    std::string footer;
    PutLittle(footer, summary_start, 8);
    PutLittle(footer, summary_offset_start, 8);
    PutLittle(footer, 0, 4);  // the summary's CRC: not computed
    WriteRecord(kOpFooter, footer);
    WriteBytes(kMagic, sizeof(kMagic));
    if (std::fclose(file_) != 0) ok_ = false;
    file_ = nullptr;
    return ok_;
  }

 private:
  static constexpr unsigned char kMagic[8] = {0x89, 'M', 'C', 'A', 'P', 0x30, '\r', '\n'};
  static constexpr std::uint8_t kOpHeader = 0x01;
  static constexpr std::uint8_t kOpFooter = 0x02;
  static constexpr std::uint8_t kOpSchema = 0x03;
  static constexpr std::uint8_t kOpChannel = 0x04;
  static constexpr std::uint8_t kOpMessage = 0x05;
  static constexpr std::uint8_t kOpStatistics = 0x0B;
  static constexpr std::uint8_t kOpMetadata = 0x0C;
  static constexpr std::uint8_t kOpMetadataIndex = 0x0D;
  static constexpr std::uint8_t kOpSummaryOffset = 0x0E;
  static constexpr std::uint8_t kOpDataEnd = 0x0F;

  // Appends the field to a record being built.
  static void PutLittle(std::string& out, std::uint64_t value, std::size_t bytes) {
    std::uint8_t field[8];
    detail::PutLittle(field, value, bytes);
    out.append(reinterpret_cast<const char*>(field), bytes);
  }
  static void PutLittle(std::uint8_t* out, std::uint64_t value, std::size_t bytes) {
    detail::PutLittle(out, value, bytes);
  }
  // A string, bytes or map: a 32-bit length, then the content.
  static void PutString(std::string& out, std::string_view text) {
    PutLittle(out, text.size(), 4);
    out.append(text.data(), text.size());
  }

  std::string Statistics() const {
    std::string record;
    PutLittle(record, message_count_, 8);
    PutLittle(record, schemas_.size(), 2);
    PutLittle(record, channels_.size(), 4);
    PutLittle(record, 0, 4);  // attachments
    PutLittle(record, metadata_indexes_.size(), 4);
    PutLittle(record, 0, 4);  // chunks
    PutLittle(record, first_time_, 8);
    PutLittle(record, last_time_, 8);
    std::string counts;
    for (std::size_t channel = 0; channel < channel_counts_.size(); ++channel) {
      PutLittle(counts, channel, 2);
      PutLittle(counts, channel_counts_[channel], 8);
    }
    PutString(record, counts);
    return record;
  }

  void WriteRecord(std::uint8_t opcode, const std::string& content) {
    std::string head;
    head.push_back(static_cast<char>(opcode));
    PutLittle(head, content.size(), 8);
    WriteBytes(head.data(), head.size());
    WriteBytes(content.data(), content.size());
  }
  void WriteBytes(const void* bytes, std::size_t size) {
    if (!ok_ || size == 0) return;
    if (std::fwrite(bytes, 1, size, file_) != size) {
      ok_ = false;
      return;
    }
    offset_ += size;
  }

  std::FILE* file_ = nullptr;
  bool ok_ = false;
  std::uint64_t offset_ = 0;
  std::vector<std::string> schemas_;   // each Schema record's content
  std::vector<std::string> channels_;  // each Channel record's content
  std::vector<std::uint64_t> channel_counts_;
  std::vector<std::string> metadata_indexes_;  // each MetadataIndex record's content
  std::uint64_t message_count_ = 0;
  std::uint64_t first_time_ = 0;
  std::uint64_t last_time_ = 0;
};

// Opens <prefix>-NNN.mcap for the first NNN from `next` on whose file does
// not exist yet (created exclusively: an existing file is never
// overwritten), advancing `next` past it; `*path` is the name opened, or
// the last tried. False when a file cannot be made for another reason than
// existing (the next call tries that name again).
inline bool OpenNextMcapFile(McapWriter& mcap, const std::string& prefix, std::uint64_t& next,
                             std::string* path) {
  for (int tries = 0; tries < 100000; ++tries) {
    char index[24];
    std::snprintf(index, sizeof(index), "-%03llu.mcap", static_cast<unsigned long long>(next));
    *path = prefix + index;
    errno = 0;
    if (mcap.Open(*path, "", /*exclusive=*/true)) {
      ++next;
      return true;
    }
    if (errno != EEXIST) return false;
    ++next;
  }
  return false;
}

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
