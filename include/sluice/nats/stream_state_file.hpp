// A receiver's stream table in a file (BridgeOptions::stream_state_path):
// the StreamJournal a receiving bridge writes every stream's state to as
// it changes, through a shared mapping, and reads back when it starts
// again. So a receiver killed (SIGKILL included) and started again counts
// the frames sent while it was down as gaps, and refuses a replay of the
// frames it had taken.
//
// Crash safety: a kill stops the writing thread between two stores, and
// the kernel keeps every store made before it (the mapping's pages belong
// to the file, not the process). Each record's state is written to the
// older of two copies and committed by one 32-bit store of that copy's
// generation; the arrival bits, kept once, are first widened to the union
// of the old and the new (before the commit), then narrowed to the new
// (after it). A record read back after a kill at any store is therefore
// the state before or after the frame being noted, with at most some more
// numbers marked as arrived: a replay is never taken as new. A machine
// that loses power may lose what the kernel had not written back.
//
// The file is the receiver's own: created with mode 0600, refused if it
// is not a regular file of this user or others may write it, and locked
// (flock) while open, so two receivers cannot share it. Its content is
// still checked as untrusted: a record that is not one this code writes
// is dropped and counted, never read past.
// The file also keeps where each JetStream durable consumer the receiver
// read was (sluice/nats/stream_state_durables.hpp); both are written
// through the stores of sluice/nats/stream_state_stores.hpp.
// Linux (and other POSIX systems with flock); the bridge's own platform.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/nats/stream_journal.hpp"
#include "sluice/nats/stream_state_durables.hpp"
#include "sluice/nats/stream_state_stores.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// The journal of a receiver's streams (StreamJournal) and the places of
// the JetStream durables it reads (detail::DurablePlaces: DurablePlace,
// FindDurable, MarkDurable and the rest), in one file.
class StreamStateFile final : public StreamJournal, public detail::DurablePlaces {
 public:
  // The longest subject a record holds; a stream on a longer one is not
  // kept (counted in StreamCounts::streams_not_saved).
  static constexpr std::size_t kMaxSubject = 256;
  // The most records a file holds (each kRecordSize bytes).
  static constexpr std::size_t kMaxRecords = std::size_t{1} << 20;
  static constexpr std::uint32_t kVersion = 2;

 private:
  struct Header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t byte_order;  // kByteOrder as written: a file of another byte order is refused
    std::uint32_t record_size;
    std::uint32_t max_subject;
    std::uint64_t capacity;  // records
    std::uint64_t window;    // kStreamWindow
    std::uint64_t durables;  // kMaxDurables: the durable places before the records
    std::uint64_t reserved[2];
  };
  // One copy of a record's state; `generation` (written last) commits it.
  struct Copy {
    std::uint32_t generation;
    std::uint8_t held_count;
    std::uint8_t confirmed;
    std::uint8_t ended;
    std::uint8_t inherited;
    std::uint64_t baseline;
    std::uint64_t highest;
    std::uint64_t beat_stamp;
    std::uint64_t heartbeat_ns;
    std::uint64_t held[kMaxHeldFrames];
  };
  struct Record {
    std::uint32_t live;  // kLive: holds a stream (written last when one is added)
    std::uint16_t subject_size;
    std::uint8_t trust;
    std::uint8_t jetstream;  // 0 or 1 (StreamState::jetstream); fixed, as the key is
    std::uint64_t origin_id;
    std::uint64_t instance_id;
    char subject[kMaxSubject];
    Copy copies[2];
    std::uint64_t seen[kStreamWindow / 64];
  };
  static constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'T'};
  static constexpr std::uint32_t kByteOrder = 0x01020304;

 public:
  static constexpr std::size_t kRecordSize = sizeof(Record);
  static constexpr std::size_t kRecordsOffset = sizeof(Header) + kMaxDurables * kDurableSize;

  // Opens the file at `path` (creating it) for `capacity` streams, and
  // locks it. A file made for fewer is grown; one made for more keeps its
  // size. Null, and *error says why: the path cannot be opened or is not a
  // regular file of this user that only it may write, another receiver
  // holds it, it is not a stream state file of this version and byte
  // order (nothing of it is changed then), it is shorter than its header
  // says, or `capacity` is 0 or over kMaxRecords.
  static std::unique_ptr<StreamStateFile> Open(const std::string& path, std::size_t capacity,
                                               std::string* error) {
    const auto fail = [&](const std::string& why) {
      *error = "stream_state_path " + path + ": " + why;
      return std::unique_ptr<StreamStateFile>();
    };
    if (capacity == 0 || capacity > kMaxRecords) {
      return fail("the stream table's bounds must add up to 1 to " + std::to_string(kMaxRecords) +
                  " streams");
    }
    // Not opened at all if it is there and not a regular file: opening a
    // device read-write can do something (fstat below checks what was
    // opened, should the path change in between).
    struct stat before {};
    if (::lstat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode)) {
      return fail("not a regular file");
    }
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) return fail(ErrorText(errno));
    std::unique_ptr<StreamStateFile> file(new StreamStateFile(fd));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      return fail(errno == EWOULDBLOCK ? "in use by another receiver" : ErrorText(errno));
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0) return fail(ErrorText(errno));
    if (!S_ISREG(info.st_mode)) return fail("not a regular file");
    if (info.st_uid != ::geteuid()) return fail("owned by another user");
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return fail("others may write it (it must be mode 0600 or 0644)");
    }
    auto size = static_cast<std::uint64_t>(info.st_size);
    Header header{};
    if (size == 0) {
      // New: the whole header in one write (a process killed in a write
      // of 64 bytes to a file leaves all of it or none), then the records
      // (grown below). Killed between the two, the file is the header
      // alone, grown by the next Open.
      header.version = kVersion;
      header.byte_order = kByteOrder;
      header.record_size = static_cast<std::uint32_t>(kRecordSize);
      header.max_subject = static_cast<std::uint32_t>(kMaxSubject);
      header.window = kStreamWindow;
      header.durables = kMaxDurables;
      header.capacity = capacity;
      std::memcpy(header.magic, kMagic, sizeof kMagic);
      if (::pwrite(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
        return fail(ErrorText(errno));
      }
      size = sizeof header;
    } else {
      if (size < sizeof header ||
          ::pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) ||
          std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
        return fail("not a Sluice stream state file");
      }
      if (header.byte_order != kByteOrder || header.version != kVersion ||
          header.record_size != kRecordSize || header.max_subject != kMaxSubject ||
          header.window != kStreamWindow || header.durables != kMaxDurables) {
        return fail("a stream state file of another version or byte order");
      }
      if (header.capacity == 0 || header.capacity > kMaxRecords) {
        return fail("its header names " + std::to_string(header.capacity) + " records");
      }
      // Shorter than its records, and not the header alone (above).
      if (size != sizeof header && size < kRecordsOffset + header.capacity * kRecordSize) {
        return fail("shorter than its header says (truncated)");
      }
    }
    const std::uint64_t records = header.capacity > capacity ? header.capacity : capacity;
    const std::uint64_t bytes = kRecordsOffset + records * kRecordSize;
    if (size < bytes && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      return fail(ErrorText(errno));
    }
    void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return fail(ErrorText(errno));
    file->map_ = map;
    file->bytes_ = bytes;
    file->MapDurables(static_cast<char*>(map) + sizeof(Header));
    file->records_ = reinterpret_cast<Record*>(static_cast<char*>(map) + kRecordsOffset);
    file->capacity_ = static_cast<std::size_t>(records);
    file->free_.reserve(file->capacity_);
    // Grown above: a file killed before this store is read as its old
    // size, and grown again.
    auto* mapped = static_cast<Header*>(map);
    if (mapped->capacity < records) mapped->capacity = records;
    return file;
  }

  ~StreamStateFile() override {
    if (map_ != nullptr) ::munmap(map_, bytes_);
    ::close(fd_);  // and the lock with it
  }
  StreamStateFile(const StreamStateFile&) = delete;
  StreamStateFile& operator=(const StreamStateFile&) = delete;

  // Each stream the file holds: restore(state, entry) (a bool: kept). One
  // that is not a state this code writes, or that `restore` does not keep,
  // is dropped from the file (and counted: RecordsDropped). Once, before
  // any Write.
  template <typename Restore>
  void ForEachStream(Restore&& restore) {
    for (std::size_t i = capacity_; i-- > 0;) {
      Record& record = records_[i];
      const std::uint32_t live = detail::LoadFromFile(record.live);
      if (live == 0) {
        free_.push_back(static_cast<std::uint32_t>(i));
        continue;
      }
      StreamState state;
      if (live != detail::kLive || !Read(record, &state) ||
          !restore(static_cast<const StreamState&>(state), static_cast<std::uint32_t>(i))) {
        detail::StoreInFile(record.live, 0);
        free_.push_back(static_cast<std::uint32_t>(i));
        ++dropped_;
      }
    }
  }

  // Records read back that were not kept (not a state this code writes,
  // a stream twice, or no room for it in the table).
  std::uint64_t RecordsDropped() const noexcept { return dropped_; }
  std::size_t Capacity() const noexcept { return capacity_; }

  std::uint32_t Write(std::uint32_t entry, const StreamState& state) noexcept override {
    if (entry == kNoEntry || entry >= capacity_) return Add(state);
    Record& record = records_[entry];
    const int current = detail::NewerCopy(record.copies);
    Copy& next = record.copies[1 - current];
    // Arrivals widened first: until the commit, the file's bits cover the
    // old state's and the new one's.
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) {
      const std::uint64_t both = record.seen[w] | state.seen[w];
      if (both != record.seen[w]) detail::StoreInFile(record.seen[w], both);
    }
    Fill(next, state);
    Commit(next, record.copies[current].generation + 1);
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) {
      if (record.seen[w] != state.seen[w]) detail::StoreInFile(record.seen[w], state.seen[w]);
    }
    return entry;
  }

  void Remove(std::uint32_t entry) noexcept override {
    if (entry >= capacity_) return;
    detail::StoreInFile(records_[entry].live, 0);
    free_.push_back(entry);  // reserved for every record: never allocates
  }

 private:
  explicit StreamStateFile(int fd) noexcept : fd_(fd) {}

  // errno's text (std::strerror is not thread-safe).
  static std::string ErrorText(int error) { return std::generic_category().message(error); }

  static void Fill(Copy& copy, const StreamState& state) noexcept {
    copy.held_count = static_cast<std::uint8_t>(state.held_count);
    copy.confirmed = state.confirmed ? 1 : 0;
    copy.ended = state.ended ? 1 : 0;
    copy.inherited = state.inherited ? 1 : 0;
    copy.baseline = state.baseline;
    copy.highest = state.highest;
    copy.beat_stamp = state.beat_stamp;
    copy.heartbeat_ns = state.heartbeat_ns;
    for (std::size_t i = 0; i < kMaxHeldFrames; ++i) copy.held[i] = state.held[i];
  }

  static void Commit(Copy& copy, std::uint32_t generation) noexcept {
    detail::StoreInFile(copy.generation, generation == 0 ? 1 : generation);
  }

  std::uint32_t Add(const StreamState& state) noexcept {
    if (state.subject.empty() || state.subject.size() > kMaxSubject || free_.empty()) {
      return kNoEntry;
    }
    const std::uint32_t entry = free_.back();
    free_.pop_back();
    Record& record = records_[entry];
    record.subject_size = static_cast<std::uint16_t>(state.subject.size());
    record.trust = static_cast<std::uint8_t>(state.trust);
    record.jetstream = state.jetstream ? 1 : 0;
    record.origin_id = state.origin_id;
    record.instance_id = state.instance_id;
    std::memcpy(record.subject, state.subject.data(), state.subject.size());
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) record.seen[w] = state.seen[w];
    Fill(record.copies[0], state);
    record.copies[0].generation = 1;
    record.copies[1].generation = 0;
    detail::StoreInFile(record.live, detail::kLive);  // the commit: after everything above
    return entry;
  }

  // A record's stream, if it is one this code writes.
  static bool Read(const Record& record, StreamState* state) noexcept {
    if (record.subject_size == 0 || record.subject_size > kMaxSubject || record.trust > 1 ||
        record.jetstream > 1) {
      return false;
    }
    if (record.copies[0].generation == 0 && record.copies[1].generation == 0) return false;
    const Copy& copy = record.copies[detail::NewerCopy(record.copies)];
    if (copy.held_count > kMaxHeldFrames || copy.confirmed > 1 || copy.ended > 1 ||
        copy.inherited > 1 || (copy.inherited != 0 && record.jetstream == 0)) {
      return false;
    }
    state->origin_id = record.origin_id;
    state->instance_id = record.instance_id;
    state->subject = std::string_view(record.subject, record.subject_size);
    state->trust = record.trust == 0 ? OriginTrust::kKnown : OriginTrust::kUnknown;
    state->jetstream = record.jetstream != 0;
    state->baseline = copy.baseline;
    state->highest = copy.highest;
    state->beat_stamp = copy.beat_stamp;
    state->heartbeat_ns = copy.heartbeat_ns;
    state->confirmed = copy.confirmed != 0;
    state->ended = copy.ended != 0;
    state->inherited = copy.inherited != 0;
    state->held_count = copy.held_count;
    for (std::size_t i = 0; i < kMaxHeldFrames; ++i) state->held[i] = copy.held[i];
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) state->seen[w] = record.seen[w];
    return true;
  }

  int fd_;
  void* map_ = nullptr;
  std::uint64_t bytes_ = 0;
  Record* records_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<std::uint32_t> free_;  // records holding no stream
  std::uint64_t dropped_ = 0;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
