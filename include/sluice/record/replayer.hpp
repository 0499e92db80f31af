// Replaying a recording (sluice/record/recorder.hpp) into a bus: each
// message published again in the order it was recorded, which is the order
// the recording bus dispatched it, with its recorded timestamp, sender and
// priority (PublishFast: the recording's clock, injected). A consumer that
// dispatches the replayed bus in FIFO order sees what the recorded
// subscribers saw, in the same order, with the same timestamps. Hosted.
//
//   sluice::record::Replayer<Bus> replayer(bus);
//   replayer.Replay<Pose>("/robot/pose");
//   const auto result = replayer.Run(recorder.Files(), [&] { return bus.ProcessBatch() != 0; });
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/little_endian.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/record/mcap_reader.hpp"
#include "sluice/record/message_schema.hpp"
#include "sluice/record/recorder.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

struct ReplayResult {
  std::uint64_t published = 0;
  // Messages on a topic not given to Replay, or not in sluice.wire/1.
  std::uint64_t skipped = 0;
  // Messages whose bytes the codec refused, or shorter than the header.
  std::uint64_t undecodable = 0;
  // Messages missing from a topic's numbers (each topic's start at 0): the
  // recorder's refusals and failures, a file left out.
  std::uint64_t sequence_gaps = 0;
  // Messages whose number was not past the topic's last (a file given
  // twice, or out of order): published all the same.
  std::uint64_t sequence_repeats = 0;
  // Refused for room and not admitted after make_room gave up.
  std::uint64_t refused = 0;
  // Refused as bad input by the bus (kRejected).
  std::uint64_t rejected = 0;
  // The bus closed: the run stopped at the first message it refused.
  bool closed = false;
  // The first file that could not be read, and why (kNone: every file read).
  McapReadError error = McapReadError::kNone;
  std::string error_file;
};

template <typename Bus>
class Replayer {
 public:
  explicit Replayer(Bus& bus) : bus_(bus) {}

  // Replays the messages recorded on `topic` as T, decoded by Codec.
  template <typename T, typename Codec = nats::DefaultCodec<T>>
  void Replay(const std::string& topic) {
    topics_[topic] = [this](const std::uint8_t* data, std::size_t size, std::uint32_t sender,
                            std::chrono::nanoseconds stamp, MessagePriority priority,
                            const std::function<bool()>& make_room) {
      std::optional<T> value = Codec::Decode(data, size);
      if (!value) return Outcome::kUndecodable;
      for (;;) {
        const PublishResult result = bus_.PublishFast(*value, sender, stamp, priority);
        switch (result.Outcome()) {
          case PublishOutcome::kAdmitted:
            return Outcome::kPublished;
          case PublishOutcome::kRefusedFull:
          case PublishOutcome::kLaneFull:
            if (!make_room()) return Outcome::kRefused;
            break;  // room made: again
          case PublishOutcome::kClosed:
            return Outcome::kClosed;
          default:
            return Outcome::kRejected;
        }
      }
    };
  }

  // Publishes every message of `files`, in order. A publish refused for
  // room (kRefusedFull, kLaneFull) calls `make_room()` (dispatch some of
  // the bus, say) and tries again, until it returns false. Stops at the
  // first file that cannot be read (result.error), or when the bus is
  // closed (result.closed).
  ReplayResult Run(const std::vector<std::string>& files, const std::function<bool()>& make_room) {
    ReplayResult result;
    std::map<std::string, std::uint64_t> next_sequence;  // by topic; 0 before its first
    for (const std::string& path : files) {
      McapReader reader(path);
      McapMessage message;
      while (reader.Next(&message)) {
        const McapChannel* channel = reader.Channel(message.channel_id);
        const auto replay = topics_.find(channel->topic);
        if (replay == topics_.end() ||
            !IsReplayable(channel->message_encoding, channel->schema_encoding,
                          channel->schema_data)) {
          ++result.skipped;
          continue;
        }
        std::uint64_t& expected = next_sequence[channel->topic];
        if (message.sequence >= expected) {
          result.sequence_gaps += message.sequence - expected;
          expected = std::uint64_t{message.sequence} + 1;
        } else {
          ++result.sequence_repeats;
        }
        if (message.size < kWireHeaderBytes || message.data[20] > 2) {
          ++result.undecodable;
          continue;
        }
        const auto stamp = std::chrono::nanoseconds(detail::GetLittle(message.data + 8, 8));
        const auto sender = static_cast<std::uint32_t>(detail::GetLittle(message.data + 16, 4));
        const auto priority = static_cast<MessagePriority>(message.data[20]);
        switch (replay->second(message.data + kWireHeaderBytes, message.size - kWireHeaderBytes,
                               sender, stamp, priority, make_room)) {
          case Outcome::kPublished:
            ++result.published;
            break;
          case Outcome::kUndecodable:
            ++result.undecodable;
            break;
          case Outcome::kRefused:
            ++result.refused;
            break;
          case Outcome::kRejected:
            ++result.rejected;
            break;
          case Outcome::kClosed:
            result.closed = true;
            return result;
        }
      }
      if (reader.Error() != McapReadError::kNone) {
        result.error = reader.Error();
        result.error_file = path;
        return result;
      }
    }
    return result;
  }

 private:
  enum class Outcome { kPublished, kUndecodable, kRefused, kRejected, kClosed };
  using Publish = std::function<Outcome(const std::uint8_t*, std::size_t, std::uint32_t,
                                        std::chrono::nanoseconds, MessagePriority,
                                        const std::function<bool()>&)>;

  Bus& bus_;
  std::map<std::string, Publish> topics_;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
