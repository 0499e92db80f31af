// The bus side of a flight recorder (sluice/record/flight_recorder.hpp): an
// Observer (sluice/observer.hpp) that copies each message the bus's
// consumer takes into a FlightRecorder, counts refusals for it, and starts
// a window when a message of one of `TriggerTypes` is taken.
//
//   struct Traits : sluice::DefaultBusTraits {
//     using Observer =
//         sluice::record::FlightRecorderObserver<sluice::record::FlightRecorder<Payload>, EStop>;
//   };
//   bus.GetObserver().Attach(&recorder);
//
// Armed, it costs the consumer a copy of the envelope, a pointer step and
// a count down a message, plus one compare of the payload's index a trigger
// type (the instruction budget's "flight recorder armed" rows); producers
// three atomic operations a refusal and nothing a publish. A bus whose Observer is NoObserver
// compiles none of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <variant>

#include "sluice/bus_traits.hpp"
#include "sluice/config.hpp"
#include "sluice/detail/consume/variant_index.hpp"
#include "sluice/error.hpp"
#include "sluice/message.hpp"
#include "sluice/publish_result.hpp"
#include "sluice/record/flight_recorder.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace record {

// `Recorder`: a FlightRecorder of the bus's payload; `TriggerTypes`:
// payload types whose message, when taken, starts a window (the e-stop).
template <typename Recorder, typename... TriggerTypes>
class FlightRecorderObserver {
 public:
  using Payload = typename Recorder::Payload;
  static_assert(((detail::VariantIndex<TriggerTypes, Payload>::kOccurrences == 1) && ...),
                "Sluice: each trigger type must be exactly one alternative of the payload");

  // The consumer may take a run of messages before it dispatches them
  // (sluice/observer.hpp): a copy needs no dispatch beside it.
  static constexpr bool kTakesRuns = true;

  FlightRecorderObserver() noexcept { Detached(); }
  // Moves the attachment (a shared-memory bus's consumer moves its
  // observer with it), with what the recorder has kept; the one moved from
  // records nothing. Not while the bus's threads run.
  FlightRecorderObserver(FlightRecorderObserver&& other) noexcept { *this = std::move(other); }
  FlightRecorderObserver& operator=(FlightRecorderObserver&& other) noexcept {
    if (this == &other) return *this;
    Recorder* recorder = other.recorder_.load(std::memory_order_relaxed);
    // Bound to this cursor before the other's is reset: the recorder
    // reads how far the other's got.
    Attach(recorder);
    other.recorder_.store(nullptr, std::memory_order_relaxed);
    other.Detached();
    return *this;
  }
  // Detaches (the recorder keeps what it has, and may still write its
  // last window: EndWindow).
  ~FlightRecorderObserver() { Attach(nullptr); }

  // Starts keeping the bus's messages in `recorder`, where it left off
  // (null: stops; the recorder keeps what it has). Before the bus's
  // consumer starts, or on its thread between batches: the cursor is that
  // thread's. Producers may run: the release store pairs with their
  // acquire loads in OnRefused, and a detach waits for every producer
  // inside OnRefused to leave it, so that the recorder may be destroyed
  // once Attach returns. A recorder serves one bus: attaching it here
  // detaches it from the observer it had.
  void Attach(Recorder* recorder) noexcept {
    Recorder* previous = recorder_.load(std::memory_order_relaxed);
    if (previous != nullptr && previous != recorder) {
      // Seq_cst: ordered before the load of refusing_ below, against
      // OnRefused's seq_cst increment and load (a producer that loaded the
      // old recorder has its increment before this store).
      recorder_.store(nullptr, std::memory_order_seq_cst);
      while (refusing_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
      previous->UnbindCursor(&cursor_);
    }
    if (recorder == nullptr) {
      recorder_.store(nullptr, std::memory_order_release);
      Detached();
      return;
    }
    recorder->BindCursor(&cursor_, this, [](void* observer) {
      static_cast<FlightRecorderObserver*>(observer)->Attach(nullptr);
    });
    recorder_.store(recorder, std::memory_order_release);
  }

  // Inlined into the dispatch loop: a copy, a pointer step and a count
  // down (to the end of the ring or of the window being collected); a
  // message of a trigger type goes to the recorder instead of the count.
  template <typename Envelope>
  SLUICE_ALWAYS_INLINE void OnTakenMessage(const Envelope& envelope) noexcept {
    cursor_.next->envelope = envelope;
    ++cursor_.next;
    if constexpr (sizeof...(TriggerTypes) > 0) {
      const std::size_t index = envelope.payload.index();
      if (SLUICE_UNLIKELY(
              ((index == detail::VariantIndex<TriggerTypes, Payload>::kValue) || ...))) {
        TriggerTypeTaken(index);
        return;
      }
    }
    if (SLUICE_UNLIKELY(--cursor_.left == 0)) CursorDone();
  }
  // Events it has no use for (and no OnDispatched: see kTakesRuns).
  void OnAdmitted(const MessageHeader&) noexcept {}
  void OnTaken(const MessageHeader&) noexcept {}
  void OnError(const BusError&) noexcept {}
  void OnBatchBegin(std::uint64_t) noexcept {
    Recorder* recorder = recorder_.load(std::memory_order_relaxed);
    if (recorder != nullptr) recorder->BatchBegins();
  }
  void OnBatchEnd(std::uint32_t) noexcept {
    Recorder* recorder = recorder_.load(std::memory_order_relaxed);
    if (recorder != nullptr) recorder->BatchEnds();
  }
  // Any producer thread: two atomic adds on refusing_ around the use of
  // the recorder, so that a detach can wait for it (Attach).
  void OnRefused(PublishOutcome, MessagePriority priority, std::uint64_t count) noexcept {
    refusing_.fetch_add(1, std::memory_order_seq_cst);
    // Seq_cst (an acquire at least): pairs with Attach's release store (a
    // recorder attached while producers run), and is ordered after the
    // increment against a detach (Attach).
    Recorder* recorder = recorder_.load(std::memory_order_seq_cst);
    if (recorder != nullptr) recorder->Refused(priority, count);
    // Release: the use of the recorder before a detach that sees 0.
    refusing_.fetch_sub(1, std::memory_order_release);
  }

 private:
  using Cursor = typename Recorder::CaptureCursor;

  SLUICE_NOINLINE void TriggerTypeTaken(std::size_t index) noexcept {
    // Relaxed: the consumer's own store, or one made before it started.
    Recorder* recorder = recorder_.load(std::memory_order_relaxed);
    if (recorder != nullptr) {
      recorder->CapturedTriggerType(index);
    } else if (--cursor_.left == 0) {
      Detached();
    }
  }
  SLUICE_NOINLINE void CursorDone() noexcept {
    Recorder* recorder = recorder_.load(std::memory_order_relaxed);
    if (recorder != nullptr) {
      recorder->CursorDone();
    } else {
      Detached();
    }
  }
  // Not attached: every copy goes to the one scratch slot.
  void Detached() noexcept {
    cursor_.next = &scratch_;
    cursor_.left = 1;
  }

  // The consumer's, written a message.
  Cursor cursor_;
  typename Recorder::Slot scratch_;
  // What producers touch (OnRefused writes refusing_ a refusal), on a line
  // of its own: a storm of refusals does not take the consumer's cursor
  // line from it.
  alignas(kCacheLineSize) std::atomic<Recorder*> recorder_{nullptr};
  std::atomic<std::uint32_t> refusing_{0};  // producers inside OnRefused
};

}  // namespace record
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
