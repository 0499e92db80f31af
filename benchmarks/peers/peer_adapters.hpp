// One shape for every queue in the peer comparison, so a single measurement
// template drives them all without virtual calls:
//
//   bool TryPush(const Sample<24>&)            producer thread
//   std::size_t PopSome(Probe&)                consumer thread: pops what is
//                                              there (up to a batch), calling
//                                              probe(sample) for each
//
// A peer whose fastest documented usage waits (atomic_queue's push and pop,
// which spin until they can complete) declares kBlocking = true and offers
// instead
//
//   void Push(const Sample<24>&)               producer: waits for room
//   void Pop(Probe&, std::size_t count)        consumer: waits for `count`
//
// The scenarios drive both shapes through PushOne and PopExpected below,
// with the message counts they know.
//
// Peers compile in when CMake found them (SLUICE_PEER_* definitions). What
// an adapter's producer or consumer side writes lives in Isolated storage
// (harness/isolated.hpp), so no peer pays for false sharing in its adapter.
#pragma once

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sluice/record/flight_recorder.hpp>
#include <sluice/record/flight_recorder_observer.hpp>
#include <sluice/sluice.hpp>
#include <sluice/trace/trace_ring.hpp>
#include <sluice/trace/tracing_observer.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "bench_payload.hpp"
#include "harness/isolated.hpp"

#if defined(__linux__)
#include <sluice/extras/membarrier_fence.hpp>
#endif

#if SLUICE_PEER_ATOMIC_QUEUE
#include <atomic_queue/atomic_queue.h>
#endif
#if SLUICE_PEER_CONCURRENTQUEUE
#include <concurrentqueue/concurrentqueue.h>
#endif
#if SLUICE_PEER_BOOST_LOCKFREE
#include <boost/lockfree/queue.hpp>
#include <boost/lockfree/spsc_queue.hpp>
#endif
#if SLUICE_PEER_ZEROMQ
#include <zmq.hpp>
#endif

namespace sluice::bench {

inline constexpr std::size_t kPeerCapacity = 131072;
inline constexpr std::size_t kPeerBatch = 256;
// The Sluice PublishFast rows read the bus clock once per this many pushes.
inline constexpr std::uint64_t kStampEvery = 64;
using Message = Sample<24>;

enum class SluiceCall { kPublish, kPublishFast };
enum class SluicePath { kCallbacks, kVisitor };

// Sluice itself, in one configuration (Traits: PriorityOrderTraits for the
// priority-ordered bus; traits with producer lanes: the producer registers
// and publishes through its lane).
template <ProducerModel kModel, PerformanceMode kMode, SluiceCall kCall, SluicePath kPath,
          typename Probe, typename Traits = DefaultBusTraits>
class SluiceAdapter {
  static constexpr bool kLane = Traits::Lanes::kMaxProducers > 0;

 public:
  explicit SluiceAdapter(Probe& probe) : probe_(probe), bus_(std::make_unique<Bus>()) {
    if constexpr (!Bus::kModeIsFixed) bus_->SetPerformanceMode(kMode);
    if constexpr (kLane) lane_ = bus_->RegisterProducer();
    if constexpr (kPath == SluicePath::kCallbacks) {
      // A fresh bus has room for this subscription.
      (void)bus_->template Subscribe<Message>([this](const Message& m) { probe_(m); });
    }
  }
  bool TryPush(const Message& m) {
    if constexpr (kLane) {
      return Push(lane_, m);
    } else {
      return Push(*bus_, m);
    }
  }
  const auto& bus() const { return *bus_; }
  auto& bus() { return *bus_; }
  std::size_t PopSome(Probe& probe) {
    if constexpr (kPath == SluicePath::kCallbacks) {
      return bus_->ProcessBatch(kPeerBatch);
    } else {
      return bus_->ProcessBatchWith([&probe](const Message& m) { probe(m); }, kPeerBatch);
    }
  }

 private:
  using Bus = AsyncBus<std::variant<Message>, kPeerCapacity, kModel, Traits>;
  struct Stamp {
    std::uint64_t pushes = 0;
    std::uint64_t nanos = 0;
  };
  template <typename Target>
  bool Push(Target& target, const Message& m) {
    if constexpr (kCall == SluiceCall::kPublish) {
      return target.Publish(m, 1).IsAdmitted();
    } else {
      // A caller with its own timestamp: the bus clock read every
      // kStampEvery pushes. A timestamp of 0 would make the consumer skip
      // the latency histograms, which is not the configuration named.
      Stamp& stamp = producer_.value;
      if (stamp.pushes++ % kStampEvery == 0) stamp.nanos = DefaultBusTraits::Clock::NowNanos();
      return target.PublishFast(m, 1, std::chrono::nanoseconds(stamp.nanos)).IsAdmitted();
    }
  }
  Probe& probe_;  // read by the consumer's callback for every message
  std::unique_ptr<Bus> bus_;
  typename Bus::Producer lane_;  // read by the producer for every push (lanes)
  Isolated<Stamp> producer_;     // written by the producer for every push
};

// Counts what the consumer receives, and sums the sequence numbers so the
// work cannot be optimised away.
struct CountProbe {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  void operator()(const Message& m) {
    ++count;
    sum += m.seq;
  }
};

// The Sluice configurations the peer tables measure.
constexpr auto kSpsc = ProducerModel::kSingle;
constexpr auto kMpsc = ProducerModel::kMulti;
constexpr auto kFull = PerformanceMode::FULL_FEATURED;
constexpr auto kNoStats = PerformanceMode::NO_STATS;
constexpr auto kBare = PerformanceMode::BARE_METAL;
constexpr auto kPublish = SluiceCall::kPublish;
constexpr auto kFast = SluiceCall::kPublishFast;
constexpr auto kCallbacks = SluicePath::kCallbacks;
constexpr auto kVisitor = SluicePath::kVisitor;

template <typename P>
using SpscBareFastVisitor = SluiceAdapter<kSpsc, kBare, kFast, kVisitor, P>;
template <typename P>
using SpscFullCallbacks = SluiceAdapter<kSpsc, kFull, kPublish, kCallbacks, P>;
template <typename P>
using SpscFullFastCallbacks = SluiceAdapter<kSpsc, kFull, kFast, kCallbacks, P>;
template <typename P>
using SpscFullVisitor = SluiceAdapter<kSpsc, kFull, kPublish, kVisitor, P>;
template <typename P>
using SpscNoStatsCallbacks = SluiceAdapter<kSpsc, kNoStats, kPublish, kCallbacks, P>;
template <typename P>
using MpscBareFastVisitor = SluiceAdapter<kMpsc, kBare, kFast, kVisitor, P>;
template <typename P>
using MpscFullCallbacks = SluiceAdapter<kMpsc, kFull, kPublish, kCallbacks, P>;
template <typename P>
using MpscFullFastCallbacks = SluiceAdapter<kMpsc, kFull, kFast, kCallbacks, P>;
template <typename P>
using MpscFullVisitor = SluiceAdapter<kMpsc, kFull, kPublish, kVisitor, P>;
template <typename P>
using MpscNoStatsCallbacks = SluiceAdapter<kMpsc, kNoStats, kPublish, kCallbacks, P>;
template <typename P>
using SpscBareFastCallbacks = SluiceAdapter<kSpsc, kBare, kFast, kCallbacks, P>;
template <typename P>
using SpscOrderedFastCallbacks =
    SluiceAdapter<kSpsc, kFull, kFast, kCallbacks, P, PriorityOrderTraits>;
template <typename P>
using MpscOrderedFastCallbacks =
    SluiceAdapter<kMpsc, kFull, kFast, kCallbacks, P, PriorityOrderTraits>;
template <typename P>
using MpscOrderedBareFastVisitor =
    SluiceAdapter<kMpsc, kBare, kFast, kVisitor, P, PriorityOrderTraits>;

// The mode fixed at compile time (FixedMode): no run-time test of it, and
// none of the other modes' code.
template <PerformanceMode kFixedMode>
struct FixedModeTraits : DefaultBusTraits {
  using Mode = FixedMode<kFixedMode>;
};
template <typename P>
using SpscFixedBareFastVisitor =
    SluiceAdapter<kSpsc, kBare, kFast, kVisitor, P, FixedModeTraits<kBare>>;
template <typename P>
using SpscFixedFullFastCallbacks =
    SluiceAdapter<kSpsc, kFull, kFast, kCallbacks, P, FixedModeTraits<kFull>>;

// Traced (sluice/trace/): every event recorded into a TraceRing, which the
// consumer drains after each batch (a drain that writes nowhere: what it
// costs to take the events out, not to store them). The ring holds a
// round's events (1,024 messages: three each, and two a batch).
template <ProducerModel kModel, PerformanceMode kMode, SluicePath kPath, typename Probe>
class TracedSluiceAdapter {
 public:
  using Ring = trace::TraceRing<8192>;
  struct Traits : DefaultBusTraits {
    using Observer = trace::TracingObserver<Ring>;
  };
  explicit TracedSluiceAdapter(Probe& probe) : inner_(probe), ring_(std::make_unique<Ring>()) {
    inner_.bus().GetObserver().Attach(ring_.get(), 1);
  }
  bool TryPush(const Message& m) { return inner_.TryPush(m); }
  std::size_t PopSome(Probe& probe) {
    const std::size_t taken = inner_.PopSome(probe);
    (void)ring_->Drain([this](const trace::TraceEvent& event) { drained_.value += event.msg_id; });
    return taken;
  }
  // Events the ring could not hold (0 when each round's fit).
  std::uint64_t Lost() const { return ring_->Lost(); }

 private:
  SluiceAdapter<kModel, kMode, SluiceCall::kPublishFast, kPath, Probe, Traits> inner_;
  std::unique_ptr<Ring> ring_;
  Isolated<std::uint64_t> drained_;  // the drain's sum, so the events are read
};
template <typename P>
using SpscFullFastCallbacksTraced = TracedSluiceAdapter<kSpsc, kFull, kCallbacks, P>;
template <typename P>
using SpscBareFastVisitorTraced = TracedSluiceAdapter<kSpsc, kBare, kVisitor, P>;

// A flight recorder armed (sluice/record/flight_recorder.hpp): every message
// the consumer takes copied into the recorder's live window (3,072 before a
// trigger, 1,024 after), no trigger type; no trigger comes, so no window
// is ever written: what keeping the last messages costs.
template <ProducerModel kModel, PerformanceMode kMode, SluicePath kPath, typename Probe>
class FlightRecordedSluiceAdapter {
 public:
  using Recorder = record::FlightRecorder<std::variant<Message>>;
  struct Traits : DefaultBusTraits {
    using Observer = record::FlightRecorderObserver<Recorder>;
  };
  explicit FlightRecordedSluiceAdapter(Probe& probe)
      : inner_(probe), recorder_(std::make_unique<Recorder>(record::FlightRecorderOptions{})) {
    inner_.bus().GetObserver().Attach(recorder_.get());
  }
  bool TryPush(const Message& m) { return inner_.TryPush(m); }
  std::size_t PopSome(Probe& probe) { return inner_.PopSome(probe); }

 private:
  SluiceAdapter<kModel, kMode, SluiceCall::kPublishFast, kPath, Probe, Traits> inner_;
  std::unique_ptr<Recorder> recorder_;
};
template <typename P>
using SpscFullFastCallbacksFlight = FlightRecordedSluiceAdapter<kSpsc, kFull, kCallbacks, P>;
template <typename P>
using SpscBareFastVisitorFlight = FlightRecordedSluiceAdapter<kSpsc, kBare, kVisitor, P>;

// The flight recorder armed as above, and dumping a window a round: each
// PopSome first writes the window the consumer froze, if there is one
// (WriteDumps on the consumer's own thread, as a program that writes its
// dumps from its loop does), then raises a trigger. One window of 1,024
// messages is frozen and written each round (the other triggers merge into
// it, counted). What the row adds to "armed" is the freeze, the trigger
// and the writer's work, all on this one thread. The recorder keeps no
// type, so a dump is its metadata record (the consumer's freeze does not
// depend on what is written); each file is removed once written.
template <ProducerModel kModel, PerformanceMode kMode, SluicePath kPath, typename Probe>
class FlightDumpingSluiceAdapter {
 public:
  using Recorder = record::FlightRecorder<std::variant<Message>>;
  struct Traits : DefaultBusTraits {
    using Observer = record::FlightRecorderObserver<Recorder>;
  };
  explicit FlightDumpingSluiceAdapter(Probe& probe)
      : inner_(probe), directory_(ScratchDirectory()), recorder_(MakeRecorder(directory_)) {
    inner_.bus().GetObserver().Attach(recorder_.get());
  }
  FlightDumpingSluiceAdapter(const FlightDumpingSluiceAdapter&) = delete;
  FlightDumpingSluiceAdapter& operator=(const FlightDumpingSluiceAdapter&) = delete;
  ~FlightDumpingSluiceAdapter() {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
  bool TryPush(const Message& m) { return inner_.TryPush(m); }
  std::size_t PopSome(Probe& probe) {
    if (recorder_->DumpPending() && recorder_->WriteDumps() != 0) {
      std::remove(recorder_->LastFile().c_str());
    }
    recorder_->Trigger();
    return inner_.PopSome(probe);
  }

 private:
  static std::filesystem::path ScratchDirectory() {
    static std::atomic<unsigned> next{0};
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("sluice-flight-bench-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(next.fetch_add(1)));
    std::filesystem::create_directories(path);
    return path;
  }
  static std::unique_ptr<Recorder> MakeRecorder(const std::filesystem::path& directory) {
    record::FlightRecorderOptions options;
    options.path_prefix = (directory / "dump").string();
    return std::make_unique<Recorder>(options);
  }

  SluiceAdapter<kModel, kMode, SluiceCall::kPublishFast, kPath, Probe, Traits> inner_;
  std::filesystem::path directory_;
  std::unique_ptr<Recorder> recorder_;
};
template <typename P>
using SpscFullFastCallbacksDumping = FlightDumpingSluiceAdapter<kSpsc, kFull, kCallbacks, P>;
template <typename P>
using SpscBareFastVisitorDumping = FlightDumpingSluiceAdapter<kSpsc, kBare, kVisitor, P>;

// A registered producer: one lane as large as the bus, and the heavy fence
// where there is one (Linux), so a lane publish fences nothing.
#if defined(__linux__)
using PeerHeavyFence = MembarrierHeavyFence;
#else
using PeerHeavyFence = NoHeavyFence;
#endif
struct OneLaneTraits : DefaultBusTraits {
  using Lanes = ProducerLanes<1, kPeerCapacity, 64, PeerHeavyFence>;
};
template <typename P>
using LaneFullFastCallbacks = SluiceAdapter<kMpsc, kFull, kFast, kCallbacks, P, OneLaneTraits>;
template <typename P>
using LaneBareFastVisitor = SluiceAdapter<kMpsc, kBare, kFast, kVisitor, P, OneLaneTraits>;

// std::mutex + std::deque: the consumer takes everything under one lock.
template <typename Probe>
class MutexDequeAdapter {
 public:
  explicit MutexDequeAdapter(Probe&) {}
  bool TryPush(const Message& m) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kPeerCapacity) return false;
    queue_.push_back(m);
    return true;
  }
  std::size_t PopSome(Probe& probe) {
    std::deque<Message>& taken = taken_.value;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      taken.swap(queue_);
    }
    const std::size_t count = taken.size();
    for (const Message& m : taken) probe(m);
    taken.clear();
    return count;
  }

 private:
  std::mutex mutex_;
  std::deque<Message> queue_;
  Isolated<std::deque<Message>> taken_;  // the consumer's alone
};

// True for an adapter of the waiting shape (kBlocking = true).
template <typename Adapter, typename = void>
struct IsBlocking : std::false_type {};
template <typename Adapter>
struct IsBlocking<Adapter, std::void_t<decltype(Adapter::kBlocking)>>
    : std::bool_constant<Adapter::kBlocking> {};

// Producer side, one message: a waiting adapter pushes (and returns true once
// it is in); the others try once, false when the queue is full.
template <typename Adapter>
inline bool PushOne(Adapter& queue, const Message& m) {
  if constexpr (IsBlocking<Adapter>::value) {
    queue.Push(m);
    return true;
  } else {
    return queue.TryPush(m);
  }
}

// Consumer side, when at most `expected` messages are still to come (and at
// least one is, for a waiting adapter): a waiting adapter pops exactly
// min(expected, kPeerBatch), waiting for each; the others pop what is there,
// up to a batch. Returns how many it popped.
template <typename Adapter, typename Probe>
inline std::size_t PopExpected(Adapter& queue, Probe& probe, std::uint64_t expected) {
  if constexpr (IsBlocking<Adapter>::value) {
    const std::size_t count =
        expected < kPeerBatch ? static_cast<std::size_t>(expected) : kPeerBatch;
    queue.Pop(probe, count);
    return count;
  } else {
    return queue.PopSome(probe);
  }
}

#if SLUICE_PEER_ATOMIC_QUEUE
// atomic_queue's AtomicQueueB2 through its blocking push and pop: each claims
// its slot at once and spins until the slot is free (push) or written (pop),
// the usage atomic_queue's own throughput benchmarks measure. kSpsc: the SPSC
// queue with MAXIMIZE_THROUGHPUT off (a bare spin, their SPSC setting);
// otherwise MPMC (a shared claim like Sluice's MPSC bus) with it on (a pause
// in each spin, their MPMC setting).
template <typename Probe, bool kSpsc>
class AtomicQueueBlockingAdapter {
 public:
  static constexpr bool kBlocking = true;
  explicit AtomicQueueBlockingAdapter(Probe&) : queue_(kPeerCapacity) {}
  // The ordering is atomic_queue's: push's release store of the slot's
  // state pairs with pop's acquire load of it, so the consumer reads the
  // whole message; pop's release store of EMPTY pairs with push's acquire
  // load before it overwrites the slot.
  void Push(const Message& m) { queue_.push(m); }
  void Pop(Probe& probe, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) probe(queue_.pop());
  }

 private:
  atomic_queue::AtomicQueueB2<Message, std::allocator<Message>, /*MAXIMIZE_THROUGHPUT=*/!kSpsc,
                              /*TOTAL_ORDER=*/false, kSpsc>
      queue_;
};
template <typename Probe>
using AtomicQueueSpscBlockingAdapter = AtomicQueueBlockingAdapter<Probe, true>;
template <typename Probe>
using AtomicQueueMpmcBlockingAdapter = AtomicQueueBlockingAdapter<Probe, false>;

// atomic_queue's AtomicQueueB2 SPSC through try_push and try_pop, which
// check for room or a message first and never wait: the shape of the other
// queues' calls.
template <typename Probe, bool kSpsc>
class AtomicQueueAdapter {
 public:
  explicit AtomicQueueAdapter(Probe&) : queue_(kPeerCapacity) {}
  bool TryPush(const Message& m) { return queue_.try_push(Message(m)); }
  std::size_t PopSome(Probe& probe) {
    std::size_t count = 0;
    Message m;
    while (count < kPeerBatch && queue_.try_pop(m)) {
      probe(m);
      ++count;
    }
    return count;
  }

 private:
  atomic_queue::AtomicQueueB2<Message, std::allocator<Message>, true, false, kSpsc> queue_;
};
template <typename Probe>
using AtomicQueueSpscAdapter = AtomicQueueAdapter<Probe, true>;
#endif

#if SLUICE_PEER_CONCURRENTQUEUE
// moodycamel::ConcurrentQueue with a producer token and a consumer token,
// draining with try_dequeue_bulk, the usage its documentation calls the
// fastest. kMayAllocate: the producer calls enqueue, which takes a new block
// from the heap when the preallocated ones are all in use, so the queue is
// not bounded at kPeerCapacity and its producer never waits for room; else
// try_enqueue, which fails instead, a bound like the other queues'. The two
// run the same code while a preallocated block has room.
template <typename Probe, bool kMayAllocate>
class ConcurrentQueueAdapter {
 public:
  explicit ConcurrentQueueAdapter(Probe&)
      : queue_(kPeerCapacity),
        producer_token_{moodycamel::ProducerToken(queue_)},
        consumer_token_{moodycamel::ConsumerToken(queue_)} {}
  bool TryPush(const Message& m) {
    if constexpr (kMayAllocate) {
      return queue_.enqueue(producer_token_.value, m);
    } else {
      return queue_.try_enqueue(producer_token_.value, m);
    }
  }
  std::size_t PopSome(Probe& probe) {
    Message* const buffer = buffer_.value.data();
    const std::size_t count = queue_.try_dequeue_bulk(consumer_token_.value, buffer, kPeerBatch);
    for (std::size_t i = 0; i < count; ++i) probe(buffer[i]);
    return count;
  }

 private:
  moodycamel::ConcurrentQueue<Message> queue_;
  // The consumer's token and buffer change with every pop: neither may
  // share a block with the producer's token.
  Isolated<moodycamel::ProducerToken> producer_token_;
  Isolated<moodycamel::ConsumerToken> consumer_token_;
  Isolated<std::array<Message, kPeerBatch>> buffer_;
};
template <typename Probe>
using ConcurrentQueueEnqueueAdapter = ConcurrentQueueAdapter<Probe, true>;
template <typename Probe>
using ConcurrentQueueTryEnqueueAdapter = ConcurrentQueueAdapter<Probe, false>;
#endif

#if SLUICE_PEER_BOOST_LOCKFREE
// boost::lockfree::spsc_queue: push one at a time, pop in bulk into an array
// (pop(T*, size)), its fastest way out.
template <typename Probe>
class BoostSpscAdapter {
 public:
  explicit BoostSpscAdapter(Probe&) : queue_(std::make_unique<Queue>()) {}
  bool TryPush(const Message& m) { return queue_->push(m); }
  std::size_t PopSome(Probe& probe) {
    Message* const buffer = buffer_.value.data();
    const std::size_t count = queue_->pop(buffer, kPeerBatch);
    for (std::size_t i = 0; i < count; ++i) probe(buffer[i]);
    return count;
  }

 private:
  using Queue = boost::lockfree::spsc_queue<Message, boost::lockfree::capacity<kPeerCapacity>>;
  std::unique_ptr<Queue> queue_;                      // the producer reads it for every push
  Isolated<std::array<Message, kPeerBatch>> buffer_;  // the consumer writes it
};

// boost::lockfree::queue (MPMC, fixed capacity): bounded_push, and pop one at
// a time (it has no bulk pop).
template <typename Probe>
class BoostQueueAdapter {
 public:
  explicit BoostQueueAdapter(Probe&) : queue_(std::make_unique<Queue>()) {}
  bool TryPush(const Message& m) { return queue_->bounded_push(m); }
  std::size_t PopSome(Probe& probe) {
    std::size_t count = 0;
    Message m;
    while (count < kPeerBatch && queue_->pop(m)) {
      probe(m);
      ++count;
    }
    return count;
  }

 private:
  // boost's fixed-size queue indexes nodes with 16 bits.
  using Queue = boost::lockfree::queue<Message, boost::lockfree::capacity<65534>>;
  std::unique_ptr<Queue> queue_;
};
#endif

#if SLUICE_PEER_ZEROMQ
// ZeroMQ inproc PUSH/PULL, one 24-byte message per send.
template <typename Probe>
class ZeroMqAdapter {
 public:
  explicit ZeroMqAdapter(Probe&)
      : push_(context_, zmq::socket_type::push), pull_(context_, zmq::socket_type::pull) {
    const std::string endpoint = "inproc://sluice-peer-" + std::to_string(++instances_);
    pull_.set(zmq::sockopt::rcvhwm, static_cast<int>(kPeerCapacity));
    push_.set(zmq::sockopt::sndhwm, static_cast<int>(kPeerCapacity));
    pull_.bind(endpoint);
    push_.connect(endpoint);
  }
  bool TryPush(const Message& m) {
    return push_.send(zmq::const_buffer(&m, sizeof(m)), zmq::send_flags::dontwait).has_value();
  }
  std::size_t PopSome(Probe& probe) {
    std::size_t count = 0;
    Message m;
    while (count < kPeerBatch &&
           pull_.recv(zmq::mutable_buffer(&m, sizeof(m)), zmq::recv_flags::dontwait)) {
      probe(m);
      ++count;
    }
    return count;
  }

 private:
  static inline int instances_ = 0;
  zmq::context_t context_;
  zmq::socket_t push_;
  zmq::socket_t pull_;
};
#endif

}  // namespace sluice::bench
