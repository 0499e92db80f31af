// Model-based fuzzing: bytes decode into a sequence of bus operations, each
// run on a 16-slot bus and on a simple reference model. Every admission
// decision, every delivery (which subscriber, which message, in what order),
// Unsubscribe's answers, the queue depth and the statistics must agree. The
// same sequence runs twice: on a bus in admission order (DeliveryOrder::kFifo)
// against a model with one queue, and on a bus in priority order
// (DeliveryOrder::kPriority, checked before every message, no starvation
// limit) against a model with one queue per priority that takes the oldest
// message of the highest priority that has one. Then twice more, on buses
// with producer lanes (three lanes of four slots) in both orders: the model
// keeps one such queue per source (the shared queue, each lane), admits by
// each source's own fill, and merges them as the bus promises (FIFO: turns
// of the lanes' burst of messages over the sources that have some; priority: the
// highest front over all sources, ties in turn).
// Payloads own heap memory, so a leaked or doubly destroyed one shows up under
// AddressSanitizer. Built with libFuzzer under Clang; with other compilers a
// small main replays corpus files (see tests/CMakeLists.txt).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

constexpr std::size_t kCapacity = 16;
constexpr std::size_t kTypes = 3;
constexpr std::size_t kSlots = 4;  // subscribers per type, small so the table fills

struct Small {
  std::uint32_t value;
};
using Payload = std::variant<Small, std::string, std::unique_ptr<std::uint32_t>>;

struct FuzzTraits : sluice::DefaultBusTraits {
  static constexpr std::size_t kMaxSubscribersPerType = kSlots;
};
using FifoBus = sluice::MpscBus<Payload, kCapacity, FuzzTraits>;
struct PriorityFuzzTraits : FuzzTraits {
  using Delivery = sluice::PriorityDelivery<1, 0>;
};
using PriorityBus = sluice::MpscBus<Payload, kCapacity, PriorityFuzzTraits>;
constexpr std::size_t kLanes = 3;
constexpr std::size_t kLaneSlots = 4;
constexpr std::uint32_t kBurst = 2;
template <typename Base>
struct LaneFuzzTraits : Base {
  using Lanes = sluice::ProducerLanes<kLanes, kLaneSlots, kBurst>;
};
using FifoLaneBus = sluice::MpscBus<Payload, kCapacity, LaneFuzzTraits<FuzzTraits>>;
using PriorityLaneBus = sluice::MpscBus<Payload, kCapacity, LaneFuzzTraits<PriorityFuzzTraits>>;

// The bus and model being compared, for the failure message.
const char* g_order = "";

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "model mismatch (%s order): %s\n", g_order, what);
  std::abort();
}
void Check(bool condition, const char* what) {
  if (!condition) Fail(what);
}

std::uint32_t ValueOf(const Payload& payload) {
  switch (payload.index()) {
    case 0:
      return std::get<0>(payload).value;
    case 1:
      return static_cast<std::uint32_t>(std::get<1>(payload).size());
    default:
      return *std::get<2>(payload);
  }
}

Payload MakePayload(std::size_t type, std::uint32_t value) {
  switch (type) {
    case 0:
      return Small{value};
    case 1:
      return std::string(value % 64, 'x');  // sizes past the small-string buffer
    default:
      return std::make_unique<std::uint32_t>(value);
  }
}

struct Delivery {
  int subscriber;
  std::uint64_t msg_id;
  std::uint32_t value;
  bool operator==(const Delivery& o) const {
    return subscriber == o.subscriber && msg_id == o.msg_id && value == o.value;
  }
};

// The reference model.
struct ModelMessage {
  std::size_t type;
  std::uint64_t msg_id;
  std::uint32_t value;
  std::size_t priority;
  bool stamped;  // Publish reads the clock unless the bus is in BARE_METAL
  // Counted in published since the last reset: counted as processed when
  // dispatched, whatever the mode then.
  bool counted;
};
struct ModelSubscriber {
  bool active = false;
  int id = 0;
  int calls = 0;
  int unsubscribe_after = 0;  // 0: never
};
// The admitted messages in the order the consumer takes them: one queue
// (admission order), or one per priority with the highest non-empty first.
class ModelQueue {
 public:
  explicit ModelQueue(bool by_priority) : by_priority_(by_priority) {}
  std::size_t size() const { return lanes_[0].size() + lanes_[1].size() + lanes_[2].size(); }
  void push(const ModelMessage& message) {
    lanes_[by_priority_ ? message.priority : 0].push_back(message);
  }
  // The next message to dispatch; the queue is not empty.
  ModelMessage pop() {
    for (std::size_t lane = lanes_.size(); lane-- > 0;) {
      if (!lanes_[lane].empty()) {
        const ModelMessage message = lanes_[lane].front();
        lanes_[lane].pop_front();
        return message;
      }
    }
    Fail("the model's queue is empty");
  }
  // The priority of the message pop() would return; -1 when empty.
  int front_priority() const {
    for (std::size_t lane = lanes_.size(); lane-- > 0;) {
      if (!lanes_[lane].empty()) return static_cast<int>(lane);
    }
    return -1;
  }
  template <typename Function>
  void for_each(Function&& function) {
    for (std::deque<ModelMessage>& lane : lanes_) {
      for (ModelMessage& message : lane) function(message);
    }
  }

 private:
  bool by_priority_;
  std::array<std::deque<ModelMessage>, 3> lanes_;  // indexed by priority
};

// Every source's queue (0: the shared one, k: lane k) and the consumer's
// merge of them.
class ModelSources {
 public:
  ModelSources(bool by_priority, std::size_t lanes)
      : by_priority_(by_priority), sources_(1 + lanes, ModelQueue(by_priority)) {}
  ModelQueue& source(std::size_t s) { return sources_[s]; }
  std::size_t size() const {
    std::size_t total = 0;
    for (const ModelQueue& q : sources_) total += q.size();
    return total;
  }
  void lane_taken(std::size_t lane) {
    if (lane > lanes_in_use_) lanes_in_use_ = lane;
  }
  // The consumer's look for its next message (the bus's TryFront): the
  // source to take it from, or -1 when none has one.
  int look() {
    if (sources_.size() == 1) return sources_[0].size() != 0 ? 0 : -1;
    const std::size_t n = 1 + lanes_in_use_;
    if (!by_priority_ && run_left_ != 0 && sources_[current_].size() != 0) {
      return static_cast<int>(current_);
    }
    run_left_ = 0;
    int best = -1;
    std::size_t best_source = 0;
    for (std::size_t k = 1; k <= n; ++k) {
      const std::size_t s = (current_ + k) % n;
      if (!by_priority_) {
        if (sources_[s].size() != 0) {
          current_ = s;
          run_left_ = kBurst;
          return static_cast<int>(s);
        }
      } else if (sources_[s].front_priority() > best) {
        best = sources_[s].front_priority();
        best_source = s;
      }
    }
    if (best < 0) return -1;
    current_ = best_source;
    run_left_ = 1;
    return static_cast<int>(best_source);
  }
  ModelMessage pop(std::size_t s) {
    if (run_left_ != 0) --run_left_;
    return sources_[s].pop();
  }
  // A batch of up to `max`: the messages in the order the bus takes them,
  // with its looks (one more after the last when the batch ends short).
  std::vector<ModelMessage> batch(std::uint32_t max) {
    std::vector<ModelMessage> taken;
    if (max == 0) return taken;
    for (int s = look(); s >= 0; s = look()) {
      taken.push_back(pop(static_cast<std::size_t>(s)));
      if (taken.size() == max) break;
    }
    return taken;
  }
  template <typename Function>
  void for_each(Function&& function) {
    for (ModelQueue& q : sources_) q.for_each(function);
  }

 private:
  bool by_priority_;
  std::vector<ModelQueue> sources_;
  std::size_t lanes_in_use_ = 0;
  std::size_t current_ = 0;
  std::uint32_t run_left_ = 0;
};

struct Model {
  Model(bool by_priority, std::size_t lanes)
      : queue(by_priority, lanes), next_id(1 + lanes, 0), held(kLanes, -1) {}
  ModelSources queue;
  std::vector<std::uint64_t> next_id;  // per source
  // The lane each of the harness's producer handles holds, or -1.
  std::vector<int> held;
  std::array<std::uint8_t, 3> percents = {60, 80, 99};  // LOW, MEDIUM, HIGH
  sluice::PerformanceMode mode = sluice::PerformanceMode::FULL_FEATURED;
  std::array<std::array<ModelSubscriber, kSlots>, kTypes> subscribers{};
  std::array<std::uint64_t, 3> published{}, dropped{};
  std::uint64_t processed = 0;
  // Messages the latency histograms counted: stamped ones dispatched in
  // batches that began in FULL_FEATURED.
  std::array<std::uint64_t, 3> latencies{};
};

// The consumer took `message` from the model's queue in a batch: processed
// if its publish was counted, and measured by the latency histograms if it
// was stamped and the batch began in FULL_FEATURED.
void CountDispatch(Model& model, const ModelMessage& message) {
  if (message.counted) ++model.processed;
  if (model.mode == sluice::PerformanceMode::FULL_FEATURED && message.stamped) {
    ++model.latencies[message.priority];
  }
}

// What the bus tells the harness.
struct Harness {
  std::vector<Delivery> deliveries;
  // The handle and behaviour of every subscription made, by id.
  struct Subscription {
    sluice::SubscriptionHandle handle;
    std::size_t type = 0;
    int unsubscribe_after = 0;
    int calls = 0;
  };
  std::vector<Subscription> subscriptions;
};

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  std::uint8_t Next() { return position_ < size_ ? data_[position_++] : 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

template <typename Bus>
void CompareStatistics(const Bus& bus, const Model& model) {
  const sluice::BusStatisticsSnapshot s = bus.GetStatistics();
  Check(s.low_priority_published == model.published[0], "LOW published");
  Check(s.medium_priority_published == model.published[1], "MEDIUM published");
  Check(s.high_priority_published == model.published[2], "HIGH published");
  Check(s.low_priority_dropped == model.dropped[0], "LOW dropped");
  Check(s.medium_priority_dropped == model.dropped[1], "MEDIUM dropped");
  Check(s.high_priority_dropped == model.dropped[2], "HIGH dropped");
  Check(s.messages_processed == model.processed, "processed");
  Check(s.messages_published == model.published[0] + model.published[1] + model.published[2],
        "published total");
  Check(s.processing_errors == 0, "no callback throws here");
  const sluice::LatencySnapshot latency = bus.GetLatencyHistograms();
  for (std::size_t p = 0; p < 3; ++p) {
    const sluice::LatencyHistogram& histogram = latency.by_priority[p];
    Check(histogram.count == model.latencies[p], "latency histogram count");
    std::uint64_t buckets = 0;
    for (std::uint64_t b : histogram.buckets) buckets += b;
    Check(buckets == histogram.count, "latency buckets add up");
  }
}

// A message's id as the harness records it: the source's id with the lane
// above it, so that ids of different sources never compare equal.
std::uint64_t TaggedId(const sluice::MessageHeader& header) {
  return header.msg_id | std::uint64_t{header.lane} << 48;
}

// The model's side of one publish into `source` (of `slots` slots): the
// admission decision by the rule itself, not the bus's arithmetic (admit
// while the source's fill is below the priority's percentage of its
// slots), then the queue and the counts.
bool ModelPublish(Model& model, std::size_t source, std::size_t slots, std::size_t type,
                  std::uint32_t value, std::uint8_t priority_byte) {
  const std::size_t fill = model.queue.source(source).size();
  const bool admitted = model.mode == sluice::PerformanceMode::BARE_METAL
                            ? fill < slots
                            : fill * 100 < std::size_t{model.percents[priority_byte]} * slots;
  const bool counting = model.mode == sluice::PerformanceMode::FULL_FEATURED;
  if (admitted) {
    const std::uint64_t id = model.next_id[source]++ | std::uint64_t{source} << 48;
    model.queue.source(source).push({type, id, ValueOf(MakePayload(type, value)), priority_byte,
                                     model.mode != sluice::PerformanceMode::BARE_METAL, counting});
    if (counting) ++model.published[priority_byte];
  } else if (counting) {
    ++model.dropped[priority_byte];
  }
  return admitted;
}

template <typename Bus>
void RunOne(const std::uint8_t* data, std::size_t size) {
  constexpr bool kByPriority = Bus::kDeliveryOrder == sluice::DeliveryOrder::kPriority;
  constexpr bool kWithLanes = !std::is_same_v<Bus, FifoBus> && !std::is_same_v<Bus, PriorityBus>;
  g_order = kWithLanes ? (kByPriority ? "priority, lanes" : "admission, lanes")
                       : (kByPriority ? "priority" : "admission");
  auto bus = std::make_unique<Bus>();
  Model model(kByPriority, kWithLanes ? kLanes : 0);
  Harness harness;
  std::vector<typename Bus::Producer> producers(kLanes);
  Reader in(data, size);

  while (!in.empty()) {
    switch (in.Next() % 12) {
      case 0: {  // publish
        const std::size_t type = in.Next() % kTypes;
        const std::uint8_t priority_byte = in.Next() % 4;  // 3 is out of range
        const std::uint32_t value = in.Next();
        const auto priority = static_cast<sluice::MessagePriority>(priority_byte);
        const bool admitted =
            bus->PublishWithPriority(MakePayload(type, value), 7, priority).IsAdmitted();
        if (priority_byte == 3) {
          Check(!admitted, "out-of-range priority refused");
          break;
        }
        Check(admitted == ModelPublish(model, 0, kCapacity, type, value, priority_byte),
              "admission decision");
        break;
      }
      case 1: {  // dispatch to subscribers
        const std::uint32_t max = in.Next() % 20;
        const std::uint32_t count = bus->ProcessBatch(max);
        const std::vector<ModelMessage> taken = model.queue.batch(max);
        const std::size_t expected_count = taken.size();
        Check(count == expected_count, "ProcessBatch count");
        std::vector<Delivery> expected;
        for (std::size_t m = 0; m < expected_count; ++m) {
          const ModelMessage& message = taken[m];
          CountDispatch(model, message);
          for (ModelSubscriber& s : model.subscribers[message.type]) {
            if (!s.active) continue;
            expected.push_back({s.id, message.msg_id, message.value});
            if (s.unsubscribe_after != 0 && ++s.calls == s.unsubscribe_after) s.active = false;
          }
        }
        Check(harness.deliveries == expected, "deliveries");
        harness.deliveries.clear();
        break;
      }
      case 2: {  // dispatch to a visitor
        const std::uint32_t max = in.Next() % 20;
        std::vector<Delivery> seen;
        const std::uint32_t count = bus->ProcessBatchWith(
            [&](const sluice::MessageEnvelope<Payload>& e) {
              seen.push_back({-1, TaggedId(e.header), ValueOf(e.payload)});
            },
            max);
        const std::vector<ModelMessage> taken = model.queue.batch(max);
        const std::size_t expected_count = taken.size();
        Check(count == expected_count, "ProcessBatchWith count");
        Check(seen.size() == expected_count, "visits");
        for (std::size_t m = 0; m < expected_count; ++m) {
          const ModelMessage& message = taken[m];
          CountDispatch(model, message);
          Check(seen[m] == Delivery{-1, message.msg_id, message.value}, "visited message");
        }
        break;
      }
      case 3: {  // subscribe, perhaps to unsubscribe itself after a few calls
        const std::size_t type = in.Next() % kTypes;
        const int unsubscribe_after = in.Next() % 4;
        const int id = static_cast<int>(harness.subscriptions.size());
        harness.subscriptions.push_back({});
        Bus* raw = bus.get();
        auto callback = [&harness, raw, id](const sluice::MessageEnvelope<Payload>& e) {
          Harness::Subscription& me = harness.subscriptions[static_cast<std::size_t>(id)];
          harness.deliveries.push_back({id, TaggedId(e.header), ValueOf(e.payload)});
          if (me.unsubscribe_after != 0 && ++me.calls == me.unsubscribe_after) {
            Check(raw->Unsubscribe(me.handle).Removed(), "self-unsubscribe inside a callback");
          }
        };
        sluice::SubscriptionHandle handle;
        switch (type) {
          case 0:
            handle = bus->template Subscribe<Small>(callback);
            break;
          case 1:
            handle = bus->template Subscribe<std::string>(callback);
            break;
          default:
            handle = bus->template Subscribe<std::unique_ptr<std::uint32_t>>(callback);
        }
        harness.subscriptions.back() = {handle, type, unsubscribe_after, 0};
        ModelSubscriber* free_slot = nullptr;
        for (ModelSubscriber& s : model.subscribers[type]) {
          if (!s.active) {
            free_slot = &s;
            break;
          }
        }
        Check(handle.IsValid() == (free_slot != nullptr), "subscribe capacity");
        if (free_slot != nullptr) *free_slot = {true, id, 0, unsubscribe_after};
        break;
      }
      case 4: {  // unsubscribe any handle made so far, stale ones too
        if (harness.subscriptions.empty()) break;
        const std::size_t pick = in.Next() % harness.subscriptions.size();
        const Harness::Subscription& target = harness.subscriptions[pick];
        bool expected = false;
        if (target.handle.IsValid()) {
          for (ModelSubscriber& s : model.subscribers[target.type]) {
            if (s.active && s.id == static_cast<int>(pick)) {
              s.active = false;
              expected = true;
            }
          }
        }
        Check(bus->Unsubscribe(target.handle).Removed() == expected, "Unsubscribe answer");
        break;
      }
      case 5: {  // switch mode
        const auto mode = static_cast<sluice::PerformanceMode>(in.Next() % 3);
        bus->SetPerformanceMode(mode);
        model.mode = mode;
        break;
      }
      case 6: {  // change thresholds
        const std::uint8_t low = in.Next() % 102, medium = in.Next() % 102, high = in.Next() % 102;
        const bool valid = low > 0 && low <= medium && medium <= high && high <= 100;
        Check(bus->SetAdmissionThresholds(low, medium, high) == valid, "threshold validation");
        if (valid) model.percents = {low, medium, high};
        break;
      }
      case 7:
        CompareStatistics(*bus, model);
        break;
      case 8:
        bus->ResetStatistics();
        model.published = {};
        model.dropped = {};
        model.processed = 0;
        model.latencies = {};
        // Counted before the reset: no part of the new counts.
        model.queue.for_each([](ModelMessage& message) { message.counted = false; });
        break;
      case 9: {  // register a producer in handle slot k (handing back what it held)
        const std::size_t k = in.Next() % kLanes;
        if constexpr (kWithLanes) {
          // Registers first, then the assignment hands slot k's old lane
          // back: the new lane is the lowest one no slot holds, k included.
          producers[k] = bus->RegisterProducer();
          int lane = -1;
          for (std::size_t l = 1; l <= kLanes && lane < 0; ++l) {
            bool taken = false;
            for (int h : model.held) taken = taken || h == static_cast<int>(l);
            if (!taken) lane = static_cast<int>(l);
          }
          model.held[k] = lane;
          if (lane > 0) model.queue.lane_taken(static_cast<std::size_t>(lane));
          Check(producers[k].IsValid() == (lane > 0), "registration while lanes are free");
          Check(producers[k].Lane() == (lane > 0 ? lane : 0),
                "registration takes the lowest free lane");
          Check(bus->RegisteredProducers() ==
                    static_cast<std::size_t>(std::count_if(model.held.begin(), model.held.end(),
                                                           [](int h) { return h > 0; })),
                "registered producers");
        }
        break;
      }
      case 10: {  // unregister handle slot k
        const std::size_t k = in.Next() % kLanes;
        if constexpr (kWithLanes) {
          producers[k].Unregister();
          model.held[k] = -1;
          Check(!producers[k].IsValid(), "unregistered");
        }
        break;
      }
      case 11: {  // publish through handle slot k
        const std::size_t k = in.Next() % kLanes;
        const std::size_t type = in.Next() % kTypes;
        const std::uint8_t priority_byte = in.Next() % 4;
        const std::uint32_t value = in.Next();
        if constexpr (kWithLanes) {
          const auto priority = static_cast<sluice::MessagePriority>(priority_byte);
          const bool admitted =
              producers[k].PublishWithPriority(MakePayload(type, value), 9, priority).IsAdmitted();
          if (priority_byte == 3 || model.held[k] < 0) {
            Check(!admitted, "a bad priority, or no lane: refused");
            break;
          }
          Check(admitted == ModelPublish(model, static_cast<std::size_t>(model.held[k]), kLaneSlots,
                                         type, value, priority_byte),
                "lane admission decision");
        }
        break;
      }
    }
    Check(bus->QueueDepth() == model.queue.size(), "queue depth");
  }
  CompareStatistics(*bus, model);
  // The bus goes with messages still queued: their payloads must be freed.
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RunOne<FifoBus>(data, size);
  RunOne<PriorityBus>(data, size);
  RunOne<FifoLaneBus>(data, size);
  RunOne<PriorityLaneBus>(data, size);
  return 0;
}

#if !defined(SLUICE_LIBFUZZER)
// Without libFuzzer: replay the files named on the command line.
#include <fstream>
#include <iterator>

int main(int argc, char** argv) {
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                  std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
  }
  std::printf("replayed %d inputs: %d passed, 0 failed\n", replayed, replayed);
  return replayed > 0 ? 0 : 1;
}
#endif
