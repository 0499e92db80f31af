// Reads an MCAP file (https://mcap.dev/spec) record by record from the
// start: its schemas, channels and messages, for the replayer
// (sluice/record/replayer.hpp). Unchunked files, as McapWriter writes them;
// a chunked file is refused (kChunked), not misread. Hosted; standard
// library only. Every byte string has an outcome: the messages up to the
// first record that is not one, then Error() says why; memory holds one
// record at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

enum class McapReadError : std::uint8_t {
  kNone = 0,
  kCannotOpen,      // the file could not be opened or read
  kBadMagic,        // not an MCAP file
  kTruncated,       // the file ends inside a record, or before its DataEnd
  kBadRecord,       // a field runs past its record
  kUnknownChannel,  // a message on a channel not yet written
  kChunked,         // chunks, which this reader does not read
  kRecordTooLarge,  // a record longer than the reader's bound (kMaxRecordBytes)
};

struct McapChannel {
  std::uint16_t id = 0;
  std::uint16_t schema_id = 0;
  std::string topic;
  std::string message_encoding;
  std::string schema_name;  // "" without a schema
  std::string schema_encoding;
  std::string schema_data;
};

struct McapSchema {
  std::string name;
  std::string encoding;
  std::string data;
};

struct McapMessage {
  std::uint16_t channel_id = 0;
  std::uint32_t sequence = 0;
  std::uint64_t log_time = 0;
  std::uint64_t publish_time = 0;
  const std::uint8_t* data = nullptr;  // valid until the next Next() or the reader's end
  std::size_t size = 0;
};

class McapReader {
 public:
  // The longest record read; a longer one is kRecordTooLarge (no
  // allocation of its size is tried).
  static constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{256} << 20;

  // Opens `path` and checks its leading magic. The file is read one record
  // at a time: memory holds the longest record read, not the file.
  explicit McapReader(const std::string& path) : file_(std::fopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      error_ = McapReadError::kCannotOpen;
      return;
    }
    static const std::uint8_t kMagic[8] = {0x89, 'M', 'C', 'A', 'P', 0x30, '\r', '\n'};
    std::uint8_t magic[8];
    const std::size_t got = std::fread(magic, 1, sizeof(magic), file_);
    if (got != sizeof(magic) || std::memcmp(magic, kMagic, sizeof(magic)) != 0) {
      error_ = std::ferror(file_) != 0 ? McapReadError::kCannotOpen : McapReadError::kBadMagic;
    }
  }
  ~McapReader() {
    if (file_ != nullptr) std::fclose(file_);
  }
  McapReader(const McapReader&) = delete;
  McapReader& operator=(const McapReader&) = delete;

  // The next message: true, with `*message` set; false at the end of the
  // data section (its DataEnd: Error() kNone) or at the first record that
  // is not one (Error() says why: a file cut short is kTruncated, after
  // every whole message before the cut). Schemas and channels met on the
  // way are kept (Channel()).
  bool Next(McapMessage* message) {
    while (error_ == McapReadError::kNone && !done_) {
      std::uint8_t head[9];
      const std::size_t got = std::fread(head, 1, sizeof(head), file_);
      if (got != sizeof(head)) {
        return Fail(std::ferror(file_) != 0 ? McapReadError::kCannotOpen
                                            : McapReadError::kTruncated);
      }
      const std::uint64_t length = detail::GetLittle(head + 1, 8);
      if (length > kMaxRecordBytes) return Fail(McapReadError::kRecordTooLarge);
      record_.resize(static_cast<std::size_t>(length));
      if (length != 0 && std::fread(record_.data(), 1, record_.size(), file_) != record_.size()) {
        return Fail(std::ferror(file_) != 0 ? McapReadError::kCannotOpen
                                            : McapReadError::kTruncated);
      }
      const std::size_t end = record_.size();
      std::size_t field = 0;
      switch (head[0]) {
        case 0x03: {  // Schema
          std::uint16_t id = 0;
          McapSchema schema;
          if (!Take(field, end, 2, &id) || !TakeString(field, end, &schema.name) ||
              !TakeString(field, end, &schema.encoding) || !TakeString(field, end, &schema.data)) {
            return Fail(McapReadError::kBadRecord);
          }
          schemas_[id] = std::move(schema);
          break;
        }
        case 0x04: {  // Channel
          McapChannel channel;
          if (!Take(field, end, 2, &channel.id) || !Take(field, end, 2, &channel.schema_id) ||
              !TakeString(field, end, &channel.topic) ||
              !TakeString(field, end, &channel.message_encoding)) {
            return Fail(McapReadError::kBadRecord);
          }
          const auto schema = schemas_.find(channel.schema_id);
          if (schema != schemas_.end()) {
            channel.schema_name = schema->second.name;
            channel.schema_encoding = schema->second.encoding;
            channel.schema_data = schema->second.data;
          }
          channels_[channel.id] = channel;
          break;
        }
        case 0x05: {  // Message
          McapMessage read;
          if (!Take(field, end, 2, &read.channel_id) || !Take(field, end, 4, &read.sequence) ||
              !Take(field, end, 8, &read.log_time) || !Take(field, end, 8, &read.publish_time)) {
            return Fail(McapReadError::kBadRecord);
          }
          if (channels_.count(read.channel_id) == 0) return Fail(McapReadError::kUnknownChannel);
          read.data = record_.data() + field;
          read.size = end - field;
          *message = read;
          return true;
        }
        case 0x0C: {  // Metadata
          std::string name;
          std::uint32_t map_length = 0;
          if (!TakeString(field, end, &name) || !Take(field, end, 4, &map_length) ||
              end - field < map_length) {
            return Fail(McapReadError::kBadRecord);
          }
          std::map<std::string, std::string>& entries = metadata_[name];
          const std::size_t map_end = field + map_length;
          while (field < map_end) {
            std::string key;
            std::string value;
            if (!TakeString(field, map_end, &key) || !TakeString(field, map_end, &value)) {
              return Fail(McapReadError::kBadRecord);
            }
            entries[key] = value;
          }
          break;
        }
        case 0x06:  // Chunk
          return Fail(McapReadError::kChunked);
        case 0x0F:  // DataEnd: the summary after it repeats what was read
          done_ = true;
          break;
        default:  // Header, and records a reader may skip
          break;
      }
    }
    return false;
  }

  McapReadError Error() const noexcept { return error_; }
  // The Metadata records read so far, by name (a later record of a name
  // adds to and overrides an earlier one's keys).
  const std::map<std::string, std::map<std::string, std::string>>& Metadata() const {
    return metadata_;
  }
  // The channel `id`, once its record was read; null before.
  const McapChannel* Channel(std::uint16_t id) const {
    const auto found = channels_.find(id);
    return found == channels_.end() ? nullptr : &found->second;
  }

 private:
  bool Fail(McapReadError error) {
    error_ = error;
    return false;
  }
  template <typename T>
  bool Take(std::size_t& at, std::size_t end, std::size_t size, T* value) const {
    if (end - at < size) return false;
    *value = static_cast<T>(detail::GetLittle(record_.data() + at, size));
    at += size;
    return true;
  }
  bool TakeString(std::size_t& at, std::size_t end, std::string* text) const {
    std::uint32_t length = 0;
    if (!Take(at, end, 4, &length) || end - at < length) return false;
    text->assign(reinterpret_cast<const char*>(record_.data() + at), length);
    at += length;
    return true;
  }

  std::FILE* file_;
  std::vector<std::uint8_t> record_;
  bool done_ = false;
  McapReadError error_ = McapReadError::kNone;
  std::map<std::uint16_t, McapSchema> schemas_;
  std::map<std::uint16_t, McapChannel> channels_;
  std::map<std::string, std::map<std::string, std::string>> metadata_;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
