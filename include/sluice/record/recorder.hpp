// Recording a bus into MCAP files: chosen message types, in the order the
// bus dispatches them, each with its header (msg_id, timestamp, sender,
// priority, lane), into files split by size or by time, for the replayer
// (sluice/record/replayer.hpp) and MCAP's readers. Hosted.
//
// The recorder never holds the bus up: it is a subscriber whose callback
// copies the message, encoded by its codec (sluice/nats/codec.hpp, standard
// library only), into a buffer allocated at construction, and a writer of
// the user's (Flush, on any one thread) moves what the buffer holds into the
// files. A message that finds the buffer full is not recorded and is
// counted (Counts().refused): per channel, recorded + refused + failed is
// every message the bus dispatched to the recorder. Recorded means in the
// file: counted once the file's buffer was flushed to the system after it.
//
//   sluice::record::Recorder<Bus> recorder(bus, {"run", 64 << 20, 1 << 20});
//   recorder.Record<Pose>("/robot/pose");
//   ... while the bus runs, on a thread of yours: recorder.Flush(); ...
//   recorder.Close();
//
// A message's MCAP record: log time and publish time its timestamp_ns,
// sequence counted per channel across the files, data the 24-byte header
// (msg_id u64, timestamp_ns u64, sender_id u32, priority u8, 0 u8, lane
// u16, little-endian) then the codec's bytes; the schema named after the
// topic's type (the name given to Record). Encoded by WireCodec with named
// fields, the bytes are a ROS 1 message and the channel says so (message
// encoding "ros1", schema "ros1msg": sluice/record/message_schema.hpp), so
// MCAP tools show the fields by name; with any other codec, message and
// schema encoding "sluice.wire/1".
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/mcap_writer.hpp"
#include "sluice/record/message_schema.hpp"
#include "sluice/record/wire_message.hpp"
#include "sluice/subscription_handle.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

struct RecorderOptions {
  // Files: <path_prefix>-000.mcap, -001, ... (the next when one reaches
  // max_file_bytes; 0: no limit).
  std::string path_prefix = "recording";
  std::uint64_t max_file_bytes = std::uint64_t{64} << 20;
  // The buffer between the bus's consumer and the writer, allocated at
  // construction.
  std::size_t buffer_bytes = std::size_t{1} << 20;
  // Also the next file when a message's timestamp is this many nanoseconds
  // or more past the timestamp of the file's first message (0: no limit).
  std::uint64_t max_file_duration_ns = 0;
};

struct RecorderCounts {
  std::uint64_t recorded = 0;  // written into a file
  std::uint64_t refused = 0;   // found the buffer full: not recorded
  std::uint64_t failed = 0;    // the codec refused it, or its file's write failed
};

template <typename Bus>
class Recorder {
 public:
  Recorder(Bus& bus, RecorderOptions options)
      : bus_(bus), options_(std::move(options)), buffer_(options_.buffer_bytes) {
    scratch_.reserve(256);
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  // Close(). The bus must still exist: destroy the recorder (or Close it)
  // before its bus.
  ~Recorder() { (void)Close(); }

  // Records the bus's messages of type T on `topic`, encoded by Codec;
  // `type_name` names its schema. Before the bus runs and before Flush.
  // False when `topic` is recorded already (one type a topic), `topic` or
  // `type_name` is not valid UTF-8 (MCAP's strings are), the bus's
  // subscription table for T is full, or after Close.
  template <typename T, typename Codec = nats::DefaultCodec<T>>
  bool Record(const std::string& topic, const std::string& type_name) {
    if (closed_ || !IsValidUtf8(topic) || !IsValidUtf8(type_name)) return false;
    for (const auto& channel : channels_) {
      if (channel->topic == topic) return false;  // one type a topic: the replayer decodes by topic
    }
    const auto channel = static_cast<std::uint16_t>(channels_.size());
    channels_.push_back(std::make_unique<ChannelState>(topic, type_name, SchemaOf<T, Codec>()));
    ChannelState* state = channels_.back().get();
    SubscriptionHandle handle = bus_.template Subscribe<T>(
        [this, channel, state](const T& value, const MessageHeader& header) {
          Take<T, Codec>(channel, *state, value, header);
        });
    if (!handle.IsValid()) {
      channels_.pop_back();
      return false;
    }
    handles_.push_back(handle);
    return true;
  }

  // The writer (one thread at a time, any thread, beside the bus's
  // consumer): writes what the buffer holds into the files. How many
  // messages it wrote.
  std::size_t Flush() {
    const std::lock_guard<std::mutex> lock(writer_);
    return FlushLocked();
  }

  // Unsubscribes (Unsubscribe waits for a callback of the recorder's that
  // the bus's consumer is running), flushes and closes the file. True when
  // every write succeeded. Any thread, also while another calls Flush; the
  // bus must still exist (the recorder unsubscribes from it).
  bool Close() {
    const std::lock_guard<std::mutex> lock(writer_);
    if (closed_) return ok_;
    closed_ = true;
    for (SubscriptionHandle& handle : handles_) (void)bus_.Unsubscribe(handle);
    handles_.clear();
    (void)FlushLocked();
    if (mcap_.IsOpen() && !mcap_.Close()) ok_ = false;
    return ok_;
  }

  // The channel `index` (in Record order)'s counts; any thread.
  RecorderCounts Counts(std::size_t index) const {
    RecorderCounts counts;
    if (index >= channels_.size()) return counts;
    const ChannelState& state = *channels_[index];
    counts.recorded = state.recorded.load(std::memory_order_relaxed);
    counts.refused = state.refused.load(std::memory_order_relaxed);
    counts.failed = state.failed.load(std::memory_order_relaxed);
    return counts;
  }
  // How many channels Record made, and each one's topic (in Record
  // order); any thread once the bus runs (Record is done by then).
  std::size_t ChannelCount() const noexcept { return channels_.size(); }
  // An index past them: "".
  const std::string& Topic(std::size_t index) const {
    static const std::string kNone;
    return index < channels_.size() ? channels_[index]->topic : kNone;
  }
  // The files written so far, in order (each one opened; a name whose file
  // could not be made is not listed, and the next try uses it again).
  std::vector<std::string> Files() const {
    const std::lock_guard<std::mutex> lock(writer_);
    return files_;
  }

 private:
  struct ChannelState {
    ChannelState(std::string t, std::string n, MessageSchema s)
        : topic(std::move(t)), type_name(std::move(n)), schema(std::move(s)) {}
    std::string topic;
    std::string type_name;
    MessageSchema schema;
    std::uint32_t sequence = 0;  // the bus's consumer's: every message taken, kept or not
    int mcap_channel = -1;       // in the file open now (the writer's)
    std::uint64_t pending = 0;   // the writer's: in the writer's buffer, not yet flushed
    std::atomic<std::uint64_t> recorded{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> failed{0};
  };

  // Flush's work, holding writer_. A message counts as recorded once the
  // file's buffer is flushed to the system after it (FlushFile here, or
  // the file's close at a split); if that fails, as failed.
  std::size_t FlushLocked() {
    std::size_t written = 0;
    // Acquire: pairs with Take's release store of write_, after the
    // record's bytes.
    const std::uint64_t end = write_.load(std::memory_order_acquire);
    std::uint64_t at = read_.load(std::memory_order_relaxed);
    std::vector<std::uint8_t>& record = out_;
    while (at != end) {
      std::uint8_t head[kRecordHead];
      CopyOut(at, head, sizeof(head));
      const auto size = static_cast<std::uint32_t>(detail::GetLittle(head, 4));
      const auto channel = static_cast<std::uint16_t>(detail::GetLittle(head + 4, 2));
      record_sequence_ = static_cast<std::uint32_t>(detail::GetLittle(head + 6, 4));
      record.resize(size);
      CopyOut(at + sizeof(head), record.data(), size);
      at += sizeof(head) + size;
      // Release: pairs with Take's acquire load; the bytes read above are
      // the writer's no longer.
      read_.store(at, std::memory_order_release);
      ChannelState& state = *channels_[channel];
      if (Write(state, record)) {
        ++state.pending;
        ++written;
      } else {
        state.failed.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (mcap_.IsOpen()) Settle(mcap_.FlushFile());
    return written;
  }

  // The messages written since the last flush are in the file (true) or
  // may not be (false: counted failed).
  void Settle(bool flushed) {
    for (auto& state : channels_) {
      (flushed ? state->recorded : state->failed)
          .fetch_add(state->pending, std::memory_order_relaxed);
      state->pending = 0;
    }
    if (!flushed) ok_ = false;
  }

  // The bus's consumer thread: the message into the buffer, or counted.
  template <typename T, typename Codec>
  void Take(std::uint16_t channel, ChannelState& state, const T& value,
            const MessageHeader& header) {
    // Every message taken has its number, kept or not: a replay sees the
    // ones not kept as gaps.
    const std::uint32_t sequence = state.sequence++;
    std::string& bytes = scratch_;
    bool encoded = false;
#if SLUICE_HAS_EXCEPTIONS
    // A codec that throws (or a string that cannot grow) fails the message,
    // counted, and the exception goes on to the bus (a callback's error).
    try {
      encoded = EncodeWireMessage<Codec>(header, value, bytes);
    } catch (...) {
      state.failed.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
#else
    encoded = EncodeWireMessage<Codec>(header, value, bytes);
#endif
    if (!encoded) {
      state.failed.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const std::uint64_t need = kRecordHead + bytes.size();
    const std::uint64_t at = write_.load(std::memory_order_relaxed);
    // Acquire: pairs with Flush's release store of read_.
    if (buffer_.size() - (at - read_.load(std::memory_order_acquire)) < need) {
      state.refused.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::uint8_t head[kRecordHead];
    detail::PutLittle(head, bytes.size(), 4);
    detail::PutLittle(head + 4, channel, 2);
    detail::PutLittle(head + 6, sequence, 4);
    CopyIn(at, head, sizeof(head));
    CopyIn(at + sizeof(head), reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    // Release: the record's bytes before the position that shows them.
    write_.store(at + need, std::memory_order_release);
  }

  void CopyIn(std::uint64_t at, const std::uint8_t* from, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) buffer_[(at + i) % buffer_.size()] = from[i];
  }
  void CopyOut(std::uint64_t at, std::uint8_t* to, std::size_t size) const {
    for (std::size_t i = 0; i < size; ++i) to[i] = buffer_[(at + i) % buffer_.size()];
  }

  // The writer: one message into the file open now (the next one when it
  // is full), its schema and channel written first in each file.
  bool Write(ChannelState& state, const std::vector<std::uint8_t>& data) {
    const std::uint64_t stamp = detail::GetLittle(data.data() + 8, 8);
    const bool full =
        options_.max_file_bytes != 0 && mcap_.BytesWritten() >= options_.max_file_bytes;
    const bool long_enough = options_.max_file_duration_ns != 0 && mcap_.MessageCount() != 0 &&
                             stamp >= file_first_stamp_ &&
                             stamp - file_first_stamp_ >= options_.max_file_duration_ns;
    if (mcap_.IsOpen() && (full || long_enough)) {
      const bool flushed = mcap_.FlushFile();
      Settle(mcap_.Close() && flushed);
    }
    if (!mcap_.IsOpen()) {
      if (!OpenNext()) {
        ok_ = false;
        return false;
      }
      for (auto& each : channels_) each->mcap_channel = -1;
    }
    if (state.mcap_channel < 0) {
      const std::uint16_t schema =
          mcap_.AddSchema(state.type_name, state.schema.schema_encoding, state.schema.definition);
      state.mcap_channel =
          schema == 0 ? -1 : mcap_.AddChannel(schema, state.topic, state.schema.message_encoding);
      if (state.mcap_channel < 0) return false;
    }
    if (mcap_.MessageCount() == 0) file_first_stamp_ = stamp;
    return mcap_.AddMessage(state.mcap_channel, record_sequence_, stamp, stamp, data.data(),
                            data.size());
  }

  // The writer: the next file of the recording that does not exist yet
  // (numbers whose file exists are skipped: a recording never overwrites a
  // file, an earlier run's say), opened and listed in files_.
  bool OpenNext() {
    std::string path;
    if (!OpenNextMcapFile(mcap_, options_.path_prefix, next_file_, &path)) return false;
    files_.push_back(path);
    return true;
  }

  // A buffer record: the message's size (u32), channel (u16) and sequence
  // (u32), then its bytes.
  static constexpr std::size_t kRecordHead = 10;

  Bus& bus_;
  const RecorderOptions options_;
  std::vector<std::unique_ptr<ChannelState>> channels_;
  std::vector<SubscriptionHandle> handles_;
  // The buffer: Take (the bus's consumer) writes at write_, Flush reads at
  // read_; both only grow.
  std::vector<std::uint8_t> buffer_;
  std::atomic<std::uint64_t> write_{0};
  std::atomic<std::uint64_t> read_{0};
  std::string scratch_;  // Take's (the consumer's)
  // The writer's, under writer_ (Flush and Close; the bus never takes it).
  mutable std::mutex writer_;
  std::vector<std::uint8_t> out_;
  std::uint32_t record_sequence_ = 0;
  std::uint64_t file_first_stamp_ = 0;  // the timestamp of the open file's first message
  McapWriter mcap_;
  std::vector<std::string> files_;
  std::uint64_t next_file_ = 0;  // the number the next file tries first
  bool ok_ = true;
  bool closed_ = false;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
