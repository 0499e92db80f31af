// Model-based fuzzing: bytes decode into a sequence of bus operations, each
// run on a 16-slot bus and on a simple reference model. Every admission
// decision, every delivery (which subscriber, which message, in what order),
// Unsubscribe's answers, the queue depth and the statistics must agree. The
// same sequence runs twice: on a bus in admission order (DeliveryOrder::kFifo)
// against a model with one queue, and on a bus in priority order
// (DeliveryOrder::kPriority, checked before every message, no starvation
// limit) against a model with one queue per priority that takes the oldest
// message of the highest priority that has one.
// Payloads own heap memory, so a leaked or doubly destroyed one shows up under
// AddressSanitizer. Built with libFuzzer under Clang; with other compilers a
// small main replays corpus files (see tests/CMakeLists.txt).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
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
  static constexpr sluice::DeliveryOrder kDeliveryOrder = sluice::DeliveryOrder::kPriority;
  static constexpr std::uint32_t kPriorityCheckInterval = 1;
  static constexpr std::uint32_t kStarvationLimit = 0;
};
using PriorityBus = sluice::MpscBus<Payload, kCapacity, PriorityFuzzTraits>;

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

struct Model {
  explicit Model(bool by_priority) : queue(by_priority) {}
  ModelQueue queue;
  std::uint64_t next_id = 0;
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

template <typename Bus>
void RunOne(const std::uint8_t* data, std::size_t size) {
  constexpr bool kByPriority = Bus::kDeliveryOrder == sluice::DeliveryOrder::kPriority;
  g_order = kByPriority ? "priority" : "admission";
  auto bus = std::make_unique<Bus>();
  Model model(kByPriority);
  Harness harness;
  Reader in(data, size);

  while (!in.empty()) {
    switch (in.Next() % 9) {
      case 0: {  // publish
        const std::size_t type = in.Next() % kTypes;
        const std::uint8_t priority_byte = in.Next() % 4;  // 3 is out of range
        const std::uint32_t value = in.Next();
        const auto priority = static_cast<sluice::MessagePriority>(priority_byte);
        const bool admitted = bus->PublishWithPriority(MakePayload(type, value), 7, priority);
        if (priority_byte == 3) {
          Check(!admitted, "out-of-range priority refused");
          break;
        }
        // The rule itself, not the bus's arithmetic: admit while the fill is
        // below the priority's percentage of the capacity.
        const std::size_t fill = model.queue.size();
        const bool expected =
            model.mode == sluice::PerformanceMode::BARE_METAL
                ? fill < kCapacity
                : fill * 100 < std::size_t{model.percents[priority_byte]} * kCapacity;
        Check(admitted == expected, "admission decision");
        const bool counting = model.mode == sluice::PerformanceMode::FULL_FEATURED;
        if (admitted) {
          model.queue.push({type, model.next_id++, ValueOf(MakePayload(type, value)), priority_byte,
                            model.mode != sluice::PerformanceMode::BARE_METAL, counting});
          if (counting) ++model.published[priority_byte];
        } else if (counting) {
          ++model.dropped[priority_byte];
        }
        break;
      }
      case 1: {  // dispatch to subscribers
        const std::uint32_t max = in.Next() % 20;
        const std::uint32_t count = bus->ProcessBatch(max);
        const std::size_t expected_count = std::min<std::size_t>(max, model.queue.size());
        Check(count == expected_count, "ProcessBatch count");
        std::vector<Delivery> expected;
        for (std::size_t m = 0; m < expected_count; ++m) {
          const ModelMessage message = model.queue.pop();
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
              seen.push_back({-1, e.header.msg_id, ValueOf(e.payload)});
            },
            max);
        const std::size_t expected_count = std::min<std::size_t>(max, model.queue.size());
        Check(count == expected_count, "ProcessBatchWith count");
        Check(seen.size() == expected_count, "visits");
        for (std::size_t m = 0; m < expected_count; ++m) {
          const ModelMessage message = model.queue.pop();
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
          harness.deliveries.push_back({id, e.header.msg_id, ValueOf(e.payload)});
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
