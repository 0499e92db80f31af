// A flight recorder: the last messages a bus dispatched, kept in memory
// allocated at construction, and written to an MCAP file when something
// happens (a call, a signal handler, a failed check, a message of a chosen
// type such as an e-stop): the window before the trigger and a chosen
// window after it. Hosted (the dump is written through std::FILE).
//
//   sluice::record::FlightRecorder<Payload> recorder({/*before=*/3000,
//       /*before_ns=*/2'000'000'000, /*after=*/1000, /*after_ns=*/0, "estop"});
//   recorder.Keep<Pose>("/robot/pose", "Pose");
//   struct Traits : sluice::DefaultBusTraits {
//     using Observer =
//         sluice::record::FlightRecorderObserver<sluice::record::FlightRecorder<Payload>, EStop>;
//   };
//   sluice::AsyncBus<Payload, 1024, sluice::ProducerModel::kMulti, Traits> bus;
//   bus.GetObserver().Attach(&recorder);
//   ... on a thread of yours: recorder.WriteDumps() writes a completed window ...
//
// Who does what, and why nothing waits:
//  - The bus's consumer (through FlightRecorderObserver, sluice/record/
//    flight_recorder_observer.hpp) copies each message it takes into the
//    live window, a ring of `before + after` envelopes (rounded up to a
//    power of two): a copy and a compare a message, no allocation, no lock.
//    Producers are not involved: a refusal is counted (one relaxed add) and
//    a publish costs what it did.
//  - A trigger is a count any thread or signal handler raises (Trigger: one
//    lock-free add); the consumer takes it at the start or the end of a
//    batch (or at Tick). A message of a trigger type is a trigger where it
//    is taken.
//  - Once `after` more messages are taken (or `after_ns` of the bus clock
//    passed, seen at a batch's end or by Tick), the consumer freezes the
//    window: it hands the ring to the writer and goes on in a second ring
//    of the same size. That costs it a few stores, and, with `before_ns`,
//    one pass over at most `before` timestamps.
//  - The writer (WriteDumps, one thread of yours) writes the frozen window
//    to <path_prefix>-NNN.mcap, then hands the ring back.
//  - One window at a time: a trigger while a window is collected is part
//    of it (counted as merged); one while the last window is still being
//    written is counted as missed and starts nothing.
//
// A dump holds, in the order the bus dispatched them, every message of the
// kept types the bus dispatched from the window's first message to its
// last: the last `before` messages before the trigger (fewer where the
// ring holds fewer: since the recorder was attached, or since the last
// window was frozen; and only those at most `before_ns` older than the
// trigger, where set) and `after` from it on. Each producer's messages are
// therefore contiguous: every message it had admitted between its first
// and last in the dump is in it. Its Metadata record "sluice.flight"
// says why it was triggered, where, and how many messages the bus refused
// from the start of the dispatch batch that took the window's first
// message to the window's end, by priority. Messages are written as the
// recorder writes them (sluice/record/flight_dump_writer.hpp): the replayer
// reads a dump as it reads a recording.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/bus_traits.hpp"
#include "sluice/clock.hpp"
#include "sluice/config.hpp"
#include "sluice/message.hpp"
#include "sluice/nats/codec.hpp"
#include "sluice/record/flight_dump_writer.hpp"
#include "sluice/record/flight_recorder_options.hpp"
#include "sluice/record/flight_refusals.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

struct FlightRecorderCounts {
  std::uint64_t triggers = 0;          // triggers that started a window
  std::uint64_t triggers_merged = 0;   // came while a window was collected: part of it
  std::uint64_t triggers_missed = 0;   // came while the last window was still being written
  std::uint64_t dumps_written = 0;     // files written and closed
  std::uint64_t dumps_failed = 0;      // a file that could not be made or written
  std::uint64_t messages_dumped = 0;   // messages in the written files
  std::uint64_t messages_skipped = 0;  // in a window, of a type not kept (Keep)
};

// A ring slot's alignment: for an envelope of up to 128 bytes the power of
// two at or above its size, so that the copy's address is a shift; a larger
// one keeps its own (its copy costs more than the multiply).
constexpr std::size_t FlightSlotAlignment(std::size_t size, std::size_t alignment) noexcept {
  if (size > 128) return alignment;
  std::size_t stride = 1;
  while (stride < size) stride <<= 1;
  return stride < alignment ? alignment : stride;
}

// `Payload`: the bus's payload (a std::variant of trivially copyable
// types, so that a copy allocates nothing). `Clock`: the bus clock's kind,
// for `before_ns`, `after_ns` and Tick.
template <typename PayloadType, typename Clock = typename DefaultBusTraits::Clock>
class FlightRecorder {
 public:
  using Payload = PayloadType;
  using Envelope = MessageEnvelope<Payload>;
  static_assert(
      std::is_trivially_copyable_v<Envelope>,
      "Sluice: FlightRecorder keeps copies of the bus's envelopes: the payload's types must be "
      "trivially copyable (a copy that allocates would allocate on the dispatch path)");

  explicit FlightRecorder(FlightRecorderOptions options)
      : options_(detail::ClampedFlightOptions(std::move(options))),
        capacity_(detail::FlightRingCapacity(options_.before, options_.after)),
        mask_(capacity_ - 1),
        rings_{std::make_unique<Slot[]>(capacity_), std::make_unique<Slot[]>(capacity_)},
        active_(rings_[0].get()),
        spare_(rings_[1].get()),
        refusals_(capacity_),
        dumps_(options_.path_prefix) {}
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;
  // Detaches the observer still attached (its bus's consumer must not be
  // dispatching, and it waits for producers inside OnRefused).
  ~FlightRecorder() {
    if (detach_ != nullptr) detach_(observer_);
  }

  // Writes messages of type T into dumps on `topic`, encoded by Codec
  // (sluice/nats/codec.hpp), its schema named `type_name`. Before the
  // recorder is attached. False when T or `topic` is kept already, or
  // `topic` or `type_name` is not valid UTF-8 (MCAP's strings are). Messages
  // of types not kept are in the window but not in the file (counted).
  template <typename T, typename Codec = nats::DefaultCodec<T>>
  bool Keep(const std::string& topic, const std::string& type_name) {
    const std::lock_guard<std::mutex> lock(writer_);
    return dumps_.template Keep<T, Codec>(topic, type_name);
  }

  // Asks for a window around now: any thread, and a signal handler (one
  // lock-free add; nothing else). The bus's consumer takes it at the start
  // or the end of a batch, whichever comes first (or at Tick): the
  // window's "after" part starts with the next message it takes.
  // Of several triggers the consumer takes together, the window keeps the
  // first one's reason.
  void Trigger(FlightTriggerReason reason = FlightTriggerReason::kCall) noexcept {
    static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                      std::atomic<std::uint8_t>::is_always_lock_free,
                  "Sluice: Trigger must be safe in a signal handler");
    std::uint8_t none = kNoReason;
    (void)request_reason_.compare_exchange_strong(none, static_cast<std::uint8_t>(reason),
                                                  std::memory_order_relaxed);
    // Release: the reason before the count the consumer acquires.
    requests_.fetch_add(1, std::memory_order_release);
  }

  // The bus's consumer thread, when it is idle (after a ProcessBatchWait
  // that timed out, say): takes a pending Trigger, and ends a window whose
  // `after_ns` passed. A window's end is otherwise seen only at the end of
  // a batch, so a bus that falls silent after a trigger needs Tick (or
  // EndWindow) for its dump.
  void Tick() noexcept {
    TakeRequests();
    if (stop_at_ != kNever && options_.after_ns != 0 && AfterTimePassed()) Freeze(true);
  }
  // The bus's consumer thread: ends the window being collected now (at
  // shutdown, say), with what it holds.
  void EndWindow() noexcept {
    TakeRequests();
    if (stop_at_ != kNever) Freeze(true);
  }

  // The writer (one thread at a time, any thread beside the bus's): writes
  // the window the consumer froze, if there is one, to a new file, and
  // hands its ring back. How many dumps it wrote (0 or 1; a file that
  // failed is counted in dumps_failed and also returns 1). Files are
  // numbered from -000 on, a number whose file exists already skipped, so
  // that a restarted program never overwrites an earlier run's dumps. A
  // codec that throws fails the dump (counted); the ring is handed back
  // all the same, and the exception goes on to the caller.
  std::size_t WriteDumps() {
    const std::lock_guard<std::mutex> lock(writer_);
    // Acquire: pairs with Freeze's release store; the frozen ring's
    // envelopes and the dump's fields were written before it.
    const Dump* dump = ready_.load(std::memory_order_acquire);
    if (dump == nullptr) return 0;
    // Whatever happens below, the ring goes back to the consumer.
    struct HandBack {
      FlightRecorder& recorder;
      bool ok = false;
      ~HandBack() {
        (ok ? recorder.dumps_written_ : recorder.dumps_failed_)
            .fetch_add(1, std::memory_order_relaxed);
        // Release: this thread's reads of the ring before the consumer,
        // whose acquire load in Start sees null, writes into it again.
        recorder.ready_.store(nullptr, std::memory_order_release);
      }
    } hand_back{*this};
    std::uint64_t dumped = 0;
    std::uint64_t skipped = 0;
    hand_back.ok = dumps_.Write(
        *dump,
        [dump, this](std::uint64_t at) -> const Envelope& {
          return dump->ring[at & mask_].envelope;
        },
        &dumped, &skipped);
    messages_dumped_.fetch_add(dumped, std::memory_order_relaxed);
    messages_skipped_.fetch_add(skipped, std::memory_order_relaxed);
    return 1;
  }

  // Any thread.
  FlightRecorderCounts Counts() const noexcept {
    FlightRecorderCounts counts;
    counts.triggers = triggers_.load(std::memory_order_relaxed);
    counts.triggers_merged = triggers_merged_.load(std::memory_order_relaxed);
    counts.triggers_missed = triggers_missed_.load(std::memory_order_relaxed);
    counts.dumps_written = dumps_written_.load(std::memory_order_relaxed);
    counts.dumps_failed = dumps_failed_.load(std::memory_order_relaxed);
    counts.messages_dumped = messages_dumped_.load(std::memory_order_relaxed);
    counts.messages_skipped = messages_skipped_.load(std::memory_order_relaxed);
    return counts;
  }
  // The dump files written so far, in order; also those that failed (the
  // name tried last).
  std::vector<std::string> Files() const {
    const std::lock_guard<std::mutex> lock(writer_);
    return dumps_.Files();
  }
  // The dump file WriteDumps tried last ("" before the first): what a
  // program that moves or uploads each dump needs, without copying Files().
  std::string LastFile() const {
    const std::lock_guard<std::mutex> lock(writer_);
    return dumps_.Files().empty() ? std::string() : dumps_.Files().back();
  }
  // A window is frozen and waits for WriteDumps. Any thread.
  bool DumpPending() const noexcept { return ready_.load(std::memory_order_acquire) != nullptr; }
  // The options in force: `before` and `after` at most 2^30 each.
  const FlightRecorderOptions& Options() const noexcept { return options_; }
  // Envelopes each of the two rings holds.
  std::size_t Capacity() const noexcept { return capacity_; }

  // ---- Called by FlightRecorderObserver (the bus's threads). ----

  // Where the consumer copies the next message: the observer keeps it (in
  // the bus, beside the core, so the copy needs no pointer to the
  // recorder) and calls CursorDone when `left` reaches 0.
  struct Slot;
  struct CaptureCursor {
    Slot* next = nullptr;
    std::uint64_t left = 0;
  };
  // The consumer, at Attach: the observer's cursor, set to the live ring
  // where the last cursor (another observer's, or this one's before a
  // move) left it. `detach(observer)` stops that observer (the
  // recorder's destructor calls it).
  void BindCursor(CaptureCursor* cursor, void* observer, void (*detach)(void*)) noexcept {
    // Another observer's: detached first (it unbinds, keeping its count).
    if (detach_ != nullptr && observer_ != observer) detach_(observer_);
    taken_ = Taken();
    cursor_ = cursor;
    observer_ = observer;
    detach_ = detach;
    SetCursor(taken_);
  }
  // The consumer, at Attach(another) or the observer's end: the cursor is
  // the observer's no longer; what it copied is kept.
  void UnbindCursor(const CaptureCursor* cursor) noexcept {
    if (cursor_ != cursor) return;
    taken_ = Taken();
    cursor_ = nullptr;
    observer_ = nullptr;
    detach_ = nullptr;
  }
  // The consumer: the cursor ran out (the end of the ring, or of the
  // window being collected).
  SLUICE_NOINLINE void CursorDone() noexcept {
    const std::uint64_t taken = Taken();
    if (taken == stop_at_) {
      Freeze(false);
    } else {
      SetCursor(taken);
    }
  }
  // The consumer: the message just copied is of a trigger type; its count
  // is not yet off the cursor's `left`. In a window being collected it is
  // part of it (merged), also when it is the window's last.
  SLUICE_NOINLINE void CapturedTriggerType(std::size_t type_index) noexcept {
    const std::uint64_t taken = Taken();
    if (stop_at_ != kNever) {
      triggers_merged_.fetch_add(1, std::memory_order_relaxed);
      if (--cursor_->left == 0) CursorDone();
      return;
    }
    if (--cursor_->left == 0) SetCursor(taken);  // the ring's end (no window)
    Start(taken - 1, FlightTriggerReason::kMessageType, type_index);
  }
  // The consumer, before a batch's first message: where the refusal
  // counts stood (for the window's refusals).
  // A Trigger raised between batches is taken here, before the batch's
  // first message.
  void BatchBegins() noexcept {
    if (SLUICE_UNLIKELY(requests_.load(std::memory_order_relaxed) != seen_requests_)) {
      TakeRequests();
    }
    refusals_.NoteBatchStart(Taken());
  }
  // The consumer, after a batch's last message: a pending Trigger, and a
  // window's `after_ns`.
  void BatchEnds() noexcept {
    if (SLUICE_UNLIKELY(requests_.load(std::memory_order_relaxed) != seen_requests_)) {
      TakeRequests();
    }
    if (stop_at_ != kNever && options_.after_ns != 0 && AfterTimePassed()) Freeze(true);
  }
  // A producer (any thread, an interrupt handler): `count` messages of
  // `priority` refused. Bad input with no valid priority is not counted.
  void Refused(MessagePriority priority, std::uint64_t count) noexcept {
    refusals_.Count(priority, count);
  }

  // A ring's element: an envelope, its stride a power of two (the copy's
  // address is a shift).
  struct alignas(FlightSlotAlignment(sizeof(Envelope), alignof(Envelope))) Slot {
    Envelope envelope;
  };

 private:
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  // A frozen window, the consumer's until it is handed over (ready_), the
  // writer's until it is handed back.
  struct Dump : FlightWindow {
    const Slot* ring = nullptr;
  };

  // A clock that reads less than at the trigger (stepped back, or 0) has
  // not passed anything.
  bool AfterTimePassed() const noexcept {
    const std::uint64_t now = sluice::detail::ClockNanos<Clock>();
    return now >= trigger_time_ns_ && now - trigger_time_ns_ >= options_.after_ns;
  }

  // The consumer: Trigger's requests since the last look.
  void TakeRequests() noexcept {
    // Acquire: pairs with Trigger's release add (its reason).
    const std::uint32_t requests = requests_.load(std::memory_order_acquire);
    if (requests == seen_requests_) return;
    const std::uint32_t count = requests - seen_requests_;
    seen_requests_ = requests;
    // A Trigger between the exchange and its add is taken next time, with
    // its reason or the one after it.
    std::uint8_t reason = request_reason_.exchange(kNoReason, std::memory_order_relaxed);
    if (reason == kNoReason) reason = static_cast<std::uint8_t>(FlightTriggerReason::kCall);
    Start(Taken(), static_cast<FlightTriggerReason>(reason), 0, count);
  }

  // The consumer: a window around position `trigger`, for `count`
  // triggers seen together (one window: the others merged into it).
  void Start(std::uint64_t trigger, FlightTriggerReason reason, std::size_t type_index,
             std::uint32_t count = 1) noexcept {
    if (stop_at_ != kNever) {
      triggers_merged_.fetch_add(count, std::memory_order_relaxed);
      return;
    }
    // Acquire: pairs with WriteDumps' release store; the writer is done
    // with the spare ring before this thread writes into it.
    if (ready_.load(std::memory_order_acquire) != nullptr) {
      triggers_missed_.fetch_add(count, std::memory_order_relaxed);
      return;
    }
    triggers_.fetch_add(1, std::memory_order_relaxed);
    if (count > 1) triggers_merged_.fetch_add(count - 1, std::memory_order_relaxed);
    // A trigger message taken as the last window froze is in that window's
    // ring: this window starts with the next message.
    trigger_at_ = trigger < base_ ? base_ : trigger;
    trigger_reason_ = reason;
    trigger_type_ = type_index;
    trigger_time_ns_ = sluice::detail::ClockNanos<Clock>();
    stop_at_ = trigger_at_ + options_.after;
    const std::uint64_t taken = Taken();
    if (taken >= stop_at_) {
      Freeze(false);
    } else {
      SetCursor(taken);  // ends where the window ends
    }
  }

  // The consumer: hands the window to the writer and goes on in the spare
  // ring. `by_time`: the window ended before `after` messages.
  void Freeze(bool by_time) noexcept {
    const std::uint64_t taken = Taken();
    // Free: a window starts only while none is handed over (Start), and
    // only the window it started freezes.
    Dump& dump = dump_;
    dump = Dump{};
    dump.ring = active_;
    dump.trigger = trigger_at_;
    dump.end = taken < stop_at_ ? taken : stop_at_;
    dump.trigger_time_ns = trigger_time_ns_;
    dump.reason = trigger_reason_;
    dump.type_index = trigger_type_;
    dump.ended_by_time = by_time && dump.end - trigger_at_ < options_.after;
    // The ring holds the messages from base_ (its start) on.
    std::uint64_t first =
        trigger_at_ - base_ >= options_.before ? trigger_at_ - options_.before : base_;
    dump.history_short = trigger_at_ - first < options_.before;
    if (options_.before_ns != 0 && trigger_time_ns_ > options_.before_ns) {
      const std::uint64_t oldest = trigger_time_ns_ - options_.before_ns;
      while (first < trigger_at_) {
        const std::uint64_t stamp = active_[first & mask_].envelope.header.timestamp_ns;
        if (stamp == 0 || stamp >= oldest) break;
        ++first;
        ++dump.aged_out;
      }
    }
    dump.first = first;
    refusals_.RefusedSinceBatchOf(first, dump.refused);
    // The spare ring is free: Start saw ready_ null (WriteDumps done).
    std::swap(active_, spare_);
    base_ = taken;
    stop_at_ = kNever;
    SetCursor(taken);
    // Release: the ring's envelopes and the dump before the pointer that
    // hands them over (WriteDumps' acquire load).
    ready_.store(&dump, std::memory_order_release);
  }

  // The consumer: messages captured so far.
  std::uint64_t Taken() const noexcept {
    if (cursor_ == nullptr) return taken_;
    return taken_ + static_cast<std::uint64_t>(cursor_->next - segment_);
  }
  // The consumer: the cursor at position `taken` of the live ring, up to
  // the ring's end or the window's, whichever comes first.
  void SetCursor(std::uint64_t taken) noexcept {
    taken_ = taken;
    if (cursor_ == nullptr) return;
    const std::uint64_t slot = taken & mask_;
    std::uint64_t left = capacity_ - slot;
    if (stop_at_ != kNever && stop_at_ - taken < left) left = stop_at_ - taken;
    segment_ = active_ + slot;
    cursor_->next = active_ + slot;
    cursor_->left = left;
  }

  const FlightRecorderOptions options_;
  const std::size_t capacity_;
  const std::uint64_t mask_;
  std::unique_ptr<Slot[]> rings_[2];

  // The bus's consumer's.
  Slot* active_;
  Slot* spare_;
  CaptureCursor* cursor_ = nullptr;  // the observer's (BindCursor)
  void* observer_ = nullptr;
  void (*detach_)(void*) = nullptr;
  // Messages captured, ever (their positions): taken_ at the cursor's
  // segment start, the cursor's progress since (Taken).
  std::uint64_t taken_ = 0;
  const Slot* segment_ = nullptr;
  std::uint64_t base_ = 0;          // the first position the active ring holds
  std::uint64_t stop_at_ = kNever;  // while a window is collected: its end
  std::uint64_t trigger_at_ = 0;
  std::uint64_t trigger_time_ns_ = 0;
  std::size_t trigger_type_ = 0;
  FlightTriggerReason trigger_reason_ = FlightTriggerReason::kCall;
  std::uint32_t seen_requests_ = 0;
  Dump dump_;

  // Shared.
  std::atomic<std::uint32_t> requests_{0};
  static constexpr std::uint8_t kNoReason = 0xFF;
  std::atomic<std::uint8_t> request_reason_{kNoReason};
  std::atomic<const Dump*> ready_{nullptr};
  // Producers' (a relaxed add a refusal), apart from the consumer's state
  // above and the counts below; its checkpoints are the consumer's.
  FlightRefusals refusals_;
  alignas(kCacheLineSize) std::atomic<std::uint64_t> triggers_{0};
  std::atomic<std::uint64_t> triggers_merged_{0};
  std::atomic<std::uint64_t> triggers_missed_{0};
  std::atomic<std::uint64_t> dumps_written_{0};
  std::atomic<std::uint64_t> dumps_failed_{0};
  std::atomic<std::uint64_t> messages_dumped_{0};
  std::atomic<std::uint64_t> messages_skipped_{0};

  // The writer's (and Keep's, before the bus runs).
  mutable std::mutex writer_;
  FlightDumpWriter<Payload> dumps_;
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
