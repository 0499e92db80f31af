// Reads an MCAP file (https://mcap.dev/spec) record by record from the
// start: its schemas, channels and messages, for the replayer
// (sluice/record/replayer.hpp). Unchunked files, as McapWriter writes them;
// a chunked file is refused (kChunked), not misread. Hosted; standard
// library only. Every byte string has an outcome: records up to the first
// that is not one, then Error() says why; nothing outside the file is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sluice/config.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

enum class McapReadError : std::uint8_t {
  kNone = 0,
  kCannotOpen,      // the file could not be opened or read
  kBadMagic,        // not an MCAP file (or no closing magic)
  kTruncated,       // a record runs past the end, or a field past its record
  kUnknownChannel,  // a message on a channel not yet written
  kChunked,         // chunks, which this reader does not read
};

struct McapChannel {
  std::uint16_t id = 0;
  std::uint16_t schema_id = 0;
  std::string topic;
  std::string message_encoding;
  std::string schema_name;  // "" without a schema
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
  // Reads `path` into memory and checks both magics.
  explicit McapReader(const std::string& path) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
      error_ = McapReadError::kCannotOpen;
      return;
    }
    std::uint8_t buffer[65536];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof(buffer), file)) != 0;) {
      bytes_.insert(bytes_.end(), buffer, buffer + got);
    }
    const bool failed = std::ferror(file) != 0;
    std::fclose(file);
    if (failed) {
      error_ = McapReadError::kCannotOpen;
      return;
    }
    static const std::uint8_t kMagic[8] = {0x89, 'M', 'C', 'A', 'P', 0x30, '\r', '\n'};
    if (bytes_.size() < 16 || !Matches(0, kMagic) || !Matches(bytes_.size() - 8, kMagic)) {
      error_ = McapReadError::kBadMagic;
      return;
    }
    offset_ = 8;
  }

  // The next message: true, with `*message` set; false at the end of the
  // data section (Error() kNone) or at a record that is not one (Error()
  // says why). Schemas and channels met on the way are kept (Channel()).
  bool Next(McapMessage* message) {
    while (error_ == McapReadError::kNone && !done_) {
      if (bytes_.size() - 8 - offset_ < 9) return Fail(McapReadError::kTruncated);
      const std::uint8_t opcode = bytes_[offset_];
      const std::uint64_t length = Little(offset_ + 1, 8);
      if (length > bytes_.size() - 8 - offset_ - 9) return Fail(McapReadError::kTruncated);
      const std::size_t at = offset_ + 9;
      const std::size_t end = at + static_cast<std::size_t>(length);
      offset_ = end;
      switch (opcode) {
        case 0x03: {  // Schema
          std::size_t field = at;
          std::uint16_t id = 0;
          std::string name;
          if (!Take(field, end, 2, &id) || !TakeString(field, end, &name)) {
            return Fail(McapReadError::kTruncated);
          }
          schemas_[id] = name;
          break;
        }
        case 0x04: {  // Channel
          std::size_t field = at;
          McapChannel channel;
          if (!Take(field, end, 2, &channel.id) || !Take(field, end, 2, &channel.schema_id) ||
              !TakeString(field, end, &channel.topic) ||
              !TakeString(field, end, &channel.message_encoding)) {
            return Fail(McapReadError::kTruncated);
          }
          const auto schema = schemas_.find(channel.schema_id);
          if (schema != schemas_.end()) channel.schema_name = schema->second;
          channels_[channel.id] = channel;
          break;
        }
        case 0x05: {  // Message
          std::size_t field = at;
          McapMessage read;
          if (!Take(field, end, 2, &read.channel_id) || !Take(field, end, 4, &read.sequence) ||
              !Take(field, end, 8, &read.log_time) || !Take(field, end, 8, &read.publish_time)) {
            return Fail(McapReadError::kTruncated);
          }
          if (channels_.count(read.channel_id) == 0) return Fail(McapReadError::kUnknownChannel);
          read.data = bytes_.data() + field;
          read.size = end - field;
          *message = read;
          return true;
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
  bool Matches(std::size_t at, const std::uint8_t* magic) const {
    for (std::size_t i = 0; i < 8; ++i) {
      if (bytes_[at + i] != magic[i]) return false;
    }
    return true;
  }
  std::uint64_t Little(std::size_t at, std::size_t size) const {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size; ++i) value |= std::uint64_t{bytes_[at + i]} << (8 * i);
    return value;
  }
  template <typename T>
  bool Take(std::size_t& at, std::size_t end, std::size_t size, T* value) const {
    if (end - at < size) return false;
    *value = static_cast<T>(Little(at, size));
    at += size;
    return true;
  }
  bool TakeString(std::size_t& at, std::size_t end, std::string* text) const {
    std::uint32_t length = 0;
    if (!Take(at, end, 4, &length) || end - at < length) return false;
    text->assign(reinterpret_cast<const char*>(bytes_.data() + at), length);
    at += length;
    return true;
  }

  std::vector<std::uint8_t> bytes_;
  std::size_t offset_ = 0;
  bool done_ = false;
  McapReadError error_ = McapReadError::kNone;
  std::map<std::uint16_t, std::string> schemas_;
  std::map<std::uint16_t, McapChannel> channels_;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
