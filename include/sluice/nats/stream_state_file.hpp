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
// Linux (and other POSIX systems with flock); the bridge's own platform.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
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

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

class StreamStateFile final : public StreamJournal {
 public:
  // Where a JetStream durable consumer was: its creation time (the
  // server's, in nanoseconds since the epoch: a durable made again is
  // another) and the consumer sequence of the last message it delivered.
  struct DurablePlace {
    std::int64_t created = 0;
    std::uint64_t delivered = 0;
    bool operator==(const DurablePlace& other) const noexcept {
      return created == other.created && delivered == other.delivered;
    }
  };

  // The longest subject a record holds; a stream on a longer one is not
  // kept (counted in StreamCounts::streams_not_saved).
  static constexpr std::size_t kMaxSubject = 256;
  // The most records a file holds (each kRecordSize bytes).
  static constexpr std::size_t kMaxRecords = std::size_t{1} << 20;
  static constexpr std::uint32_t kVersion = 2;
  // The JetStream durable consumers a file keeps the place of, and their
  // names' longest ("<stream>/<durable>"): a route's durable beyond them is
  // not kept (its restored streams are judged as taken over).
  static constexpr std::size_t kMaxDurables = 64;
  static constexpr std::size_t kMaxDurableName = 240;
  // The stream sequences of each durable's last messages dispatched here
  // that the file keeps (NoteDispatched).
  static constexpr std::size_t kDispatchedKept = 1024;

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
  // One copy of a durable's place; `generation` (written last) commits it.
  struct DurableCopy {
    std::uint32_t generation;
    std::uint32_t unused;
    std::uint64_t created;  // DurablePlace::created, as written
    std::uint64_t delivered;
  };
  // A JetStream durable consumer this receiver read: its name, and where it
  // was when this receiver last took a message of it (DurablePlace).
  struct Durable {
    std::uint32_t live;  // kLive: names a durable (written last when one is added)
    std::uint16_t name_size;
    std::uint16_t unused;
    char name[kMaxDurableName];
    DurableCopy copies[2];
    // Stream sequences dispatched: the last min(dispatched_count,
    // kDispatchedKept), dispatched_count % kDispatchedKept next.
    std::uint64_t dispatched_count;
    std::uint64_t dispatched[kDispatchedKept];
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
  static constexpr std::uint32_t kLive = 0x4C495645;  // "LIVE"

 public:
  static constexpr std::size_t kRecordSize = sizeof(Record);
  static constexpr std::size_t kDurableSize = sizeof(Durable);
  static constexpr std::size_t kRecordsOffset = sizeof(Header) + kMaxDurables * sizeof(Durable);

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
    file->durables_ = reinterpret_cast<Durable*>(static_cast<char*>(map) + sizeof(Header));
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
      const std::uint32_t live = Load(record.live);
      if (live == 0) {
        free_.push_back(static_cast<std::uint32_t>(i));
        continue;
      }
      StreamState state;
      if (live != kLive || !Read(record, &state) ||
          !restore(static_cast<const StreamState&>(state), static_cast<std::uint32_t>(i))) {
        Store(record.live, 0);
        free_.push_back(static_cast<std::uint32_t>(i));
        ++dropped_;
      }
    }
  }

  // The durable places are written by three kinds of thread of one
  // receiver, never to the same bytes at once, so they need no atomic read-
  // modify-write and no fence between threads:
  //  - FindDurable, ClaimDurable and ForgetDispatched run under the
  //    receiver's lock, before the durable's route is subscribed; they
  //    write a place's `live`, name and copies, or its dispatched count,
  //    only for a durable no route of this receiver reads now.
  //  - MarkDurable writes a place's copies, on its route's fetch thread only,
  //    which starts after the subscription (thread creation orders the
  //    writes above before it) and is joined before the route goes.
  //  - NoteDispatched writes a place's dispatched sequences, on the bus's
  //    consumer thread only, for a message DispatchAcks holds; DispatchAcks'
  //    mutex orders the filing (after the subscription) before it, and the
  //    route withdraws its messages, under that mutex, before it goes.
  // A later process reads them after this one died (the stores' order
  // within each writer, Store, is what it relies on).
  // Threaded tests: the NATS bridge suite under ThreadSanitizer (CI step 8),
  // NatsDispatchAckTest.EachBridgeOnABusKeepsItsOwnDispatchedMessages among
  // them (one bridge subscribes while another's messages are dispatched).

  // Where the durable `name` ("<stream>/<durable>") was when this receiver
  // last took a message of it: `*saved` (false: not kept, or never read
  // here), and from now on where its place is kept (kNoEntry: nowhere, the
  // name too long or every place taken). A place that is not one this code
  // writes reads as none. Not thread-safe with another call of it (the
  // receiver's lock), but with MarkDurable on other entries.
  std::uint32_t FindDurable(std::string_view name, DurablePlace* saved, bool* found) noexcept {
    *found = false;
    if (name.empty() || name.size() > kMaxDurableName) return kNoEntry;
    std::uint32_t free = kNoEntry;
    std::uint32_t unclaimed = kNoEntry;  // a place this receiver does not use
    for (std::size_t i = 0; i < kMaxDurables; ++i) {
      Durable& durable = durables_[i];
      const std::uint32_t live = Load(durable.live);
      if (live != kLive || durable.name_size == 0 || durable.name_size > kMaxDurableName) {
        if (free == kNoEntry) free = static_cast<std::uint32_t>(i);
        continue;
      }
      if (std::string_view(durable.name, durable.name_size) != name) {
        if (unclaimed == kNoEntry && !claimed_[i]) unclaimed = static_cast<std::uint32_t>(i);
        continue;
      }
      claimed_[i] = true;
      if (durable.copies[0].generation != 0 || durable.copies[1].generation != 0) {
        const DurableCopy& copy = durable.copies[Newer(durable.copies)];
        saved->created = static_cast<std::int64_t>(copy.created);
        saved->delivered = copy.delivered;
        *found = true;
      }
      return static_cast<std::uint32_t>(i);
    }
    // Every place taken: the one of a durable this receiver does not read
    // (ClaimDurable) goes (that durable, read again, is judged as taken
    // over).
    if (free == kNoEntry) free = unclaimed;
    if (free == kNoEntry) return kNoEntry;
    claimed_[free] = true;
    Durable& durable = durables_[free];
    Store(durable.live, 0);
    durable.name_size = static_cast<std::uint16_t>(name.size());
    std::memcpy(durable.name, name.data(), name.size());
    durable.copies[0] = DurableCopy{};
    durable.copies[1] = DurableCopy{};
    durable.dispatched_count = 0;
    Store(durable.live, kLive);  // the commit: after the name
    return free;
  }

  // The place of the durable `name`, if the file has one, is this
  // receiver's: FindDurable gives it to no other durable. For every durable
  // a receiver is about to read, before it reads any.
  void ClaimDurable(std::string_view name) noexcept {
    for (std::size_t i = 0; i < kMaxDurables; ++i) {
      const Durable& durable = durables_[i];
      if (Load(durable.live) == kLive && durable.name_size != 0 &&
          durable.name_size <= kMaxDurableName &&
          std::string_view(durable.name, durable.name_size) == name) {
        claimed_[i] = true;
        return;
      }
    }
  }

  // A message of the durable at `entry` (FindDurable) was dispatched: its
  // stream sequence is kept (the last kDispatchedKept of them). On the
  // consumer's thread, the only one that writes them; a kill at any store
  // leaves it kept or not, and the others as they were.
  void NoteDispatched(std::uint32_t entry, std::uint64_t stream_sequence) noexcept {
    if (entry >= kMaxDurables) return;
    Durable& durable = durables_[entry];
    const std::uint64_t count = durable.dispatched_count;
    Store(durable.dispatched[count % kDispatchedKept], stream_sequence);
    Store(durable.dispatched_count, count + 1);
  }

  // The stream sequences kept for the durable at `entry` (NoteDispatched),
  // each to `take(sequence)`.
  template <typename Take>
  void ForEachDispatched(std::uint32_t entry, Take&& take) const {
    if (entry >= kMaxDurables) return;
    const Durable& durable = durables_[entry];
    const std::uint64_t count = durable.dispatched_count;
    const std::uint64_t kept = count < kDispatchedKept ? count : kDispatchedKept;
    for (std::uint64_t i = 0; i < kept; ++i) take(durable.dispatched[i]);
  }

  // Forgets the stream sequences kept for the durable at `entry` (the
  // durable was made again: they may name other messages now).
  void ForgetDispatched(std::uint32_t entry) noexcept {
    if (entry < kMaxDurables) Store(durables_[entry].dispatched_count, 0);
  }

  // The durable at `entry` (FindDurable) is at `place` now. One thread per
  // entry at a time; a kill at any store leaves the place before or after.
  void MarkDurable(std::uint32_t entry, const DurablePlace& place) noexcept {
    if (entry >= kMaxDurables) return;
    Durable& durable = durables_[entry];
    const int current = Newer(durable.copies);
    DurableCopy& next = durable.copies[1 - current];
    Store(next.created, static_cast<std::uint64_t>(place.created));
    Store(next.delivered, place.delivered);
    const std::uint32_t generation = durable.copies[current].generation + 1;
    Store(next.generation, generation == 0 ? 1 : generation);
  }

  // Records read back that were not kept (not a state this code writes,
  // a stream twice, or no room for it in the table).
  std::uint64_t RecordsDropped() const noexcept { return dropped_; }
  std::size_t Capacity() const noexcept { return capacity_; }

  std::uint32_t Write(std::uint32_t entry, const StreamState& state) noexcept override {
    if (entry == kNoEntry || entry >= capacity_) return Add(state);
    Record& record = records_[entry];
    const int current = Newer(record.copies);
    Copy& next = record.copies[1 - current];
    // Arrivals widened first: until the commit, the file's bits cover the
    // old state's and the new one's.
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) {
      const std::uint64_t both = record.seen[w] | state.seen[w];
      if (both != record.seen[w]) Store(record.seen[w], both);
    }
    Fill(next, state);
    Commit(next, record.copies[current].generation + 1);
    for (std::size_t w = 0; w < kStreamWindow / 64; ++w) {
      if (record.seen[w] != state.seen[w]) Store(record.seen[w], state.seen[w]);
    }
    return entry;
  }

  void Remove(std::uint32_t entry) noexcept override {
    if (entry >= capacity_) return;
    Store(records_[entry].live, 0);
    free_.push_back(entry);  // reserved for every record: never allocates
  }

 private:
  explicit StreamStateFile(int fd) noexcept : fd_(fd) {}

  // errno's text (std::strerror is not thread-safe).
  static std::string ErrorText(int error) { return std::generic_category().message(error); }

  // The stores a later process reads after this one was killed: single
  // stores (never torn), in program order for the compiler too. No other
  // thread or process reads the file meanwhile (the lock).
  // A 32-bit store commits (a generation, `live`): the fences keep every
  // store before it before it, and every store after it after it.
  static void Store(std::uint32_t& word, std::uint32_t value) noexcept {
    StoreSeam();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    __atomic_store_n(&word, value, __ATOMIC_RELAXED);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    StoreSeam();
  }
  static void Store(std::uint64_t& word, std::uint64_t value) noexcept {
    StoreSeam();
    __atomic_store_n(&word, value, __ATOMIC_RELAXED);
  }

#if defined(SLUICE_NATS_TEST_SEAMS)

 public:
  // Tests only (SLUICE_NATS_TEST_SEAMS): called before each store a later
  // process reads and after each commit, where a test kills the writer.
  static inline void (*store_seam)() = nullptr;

 private:
  static void StoreSeam() noexcept {
    if (store_seam != nullptr) store_seam();
  }
#else
  static void StoreSeam() noexcept {}
#endif
  static std::uint32_t Load(const std::uint32_t& word) noexcept {
    return __atomic_load_n(&word, __ATOMIC_RELAXED);
  }

  // The copy committed last: the higher generation (by serial number
  // arithmetic, so a wrap is no step back); 0 is never written.
  template <typename Copies>
  static int Newer(const Copies& copies) noexcept {
    const std::uint32_t a = copies[0].generation;
    const std::uint32_t b = copies[1].generation;
    if (b == 0) return 0;
    if (a == 0) return 1;
    return static_cast<std::int32_t>(b - a) > 0 ? 1 : 0;
  }

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
    Store(copy.generation, generation == 0 ? 1 : generation);
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
    Store(record.live, kLive);  // the commit: after everything above
    return entry;
  }

  // A record's stream, if it is one this code writes.
  static bool Read(const Record& record, StreamState* state) noexcept {
    if (record.subject_size == 0 || record.subject_size > kMaxSubject || record.trust > 1 ||
        record.jetstream > 1) {
      return false;
    }
    if (record.copies[0].generation == 0 && record.copies[1].generation == 0) return false;
    const Copy& copy = record.copies[Newer(record.copies)];
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
  Durable* durables_ = nullptr;
  std::array<bool, kMaxDurables> claimed_{};  // places FindDurable gave this receiver
  Record* records_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<std::uint32_t> free_;  // records holding no stream
  std::uint64_t dropped_ = 0;
};

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
