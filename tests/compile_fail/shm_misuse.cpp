// Misuse of a shared-memory producer (or bus) that must not compile, one case per
// CASE value (tests/ipc/CMakeLists.txt names each case's diagnostic); CASE 0
// is the control, which compiles.
#include <chrono>
#include <cstdint>
#include <sluice/extras/condition_variable_parker.hpp>
#include <sluice/ipc/shm_bus.hpp>
#include <sluice/record/flight_recorder.hpp>
#include <sluice/wait_set.hpp>
#include <utility>
#include <variant>
#include <vector>

struct Frame {
  unsigned char bytes[64];
};
struct Stop {
  std::uint64_t seq;
};
using Payload = std::variant<Stop, sluice::ipc::Loaned<Frame>>;

int main() {
  sluice::ipc::ShmProducer<Payload, 8> producer;
  (void)producer.PublishWithPriority(Stop{1}, 7, sluice::MessagePriority::HIGH);
#if CASE == 1  // a Loaned<T> names a block of the lane: only PublishLoan publishes one
  (void)producer.PublishWithPriority(sluice::ipc::Loaned<Frame>(), 7,
                                     sluice::MessagePriority::HIGH);
#elif CASE == 2  // ... nor in a batch
  std::vector<sluice::ipc::Loaned<Frame>> loans(2);
  (void)producer.PublishBatch(loans.begin(), loans.end(), 7, sluice::MessagePriority::HIGH);
#elif CASE == 3  // ... nor made in place
  (void)producer.Emplace<sluice::ipc::Loaned<Frame>>(7, sluice::MessagePriority::HIGH);
#elif CASE == 4  // ... nor waiting for room
  (void)producer.PublishBlocking(sluice::ipc::Loaned<Frame>(), 7, sluice::MessagePriority::HIGH,
                                 std::chrono::milliseconds(1));
#elif CASE == 5  // a WaitSet lists a ShmBus only with a parker that waits on several futexes
  sluice::WaitSet<sluice::ConditionVariableParker> set;
  sluice::ipc::ShmBus<Payload, 8> bus;
  (void)set.Wait(std::chrono::milliseconds(1), bus);
#elif CASE == 6  // a flight recorder keeping a loan, whose block is gone by the dump
  sluice::record::FlightRecorder<Payload> recorder({});
  (void)recorder.Keep<sluice::ipc::Loaned<Frame>>("/frames", "Frame");
#endif
  return 0;
}
