// Each CASE discards a result of the shared-memory bus that says whether a
// call worked; built with -Werror=unused-result it must not compile. CASE=0
// uses every result and compiles. tests/ipc/CMakeLists.txt checks the
// diagnostic.
#include <cstdint>
#include <sluice/ipc/shm_bus.hpp>
#include <variant>

struct Frame {
  unsigned char bytes[64];
};
struct Stop {
  std::uint64_t seq;
};
using Payload = std::variant<Stop, sluice::ipc::Loaned<Frame>>;

void OnError(const sluice::BusError&, void*) {}

int main() {
  sluice::ipc::ShmBus<Payload, 8> bus;
  sluice::ipc::ShmProducer<Payload, 8> producer;
#if CASE == 1
  bus.Create("/sluice-nodiscard");
#elif CASE == 2
  producer.Attach("/sluice-nodiscard");
#elif CASE == 3
  producer.Loan<Frame>();
#elif CASE == 4
  producer.PublishWithPriority(Stop{1}, 7, sluice::MessagePriority::HIGH);
#elif CASE == 5
  bus.SetErrorCallback(&OnError);
#elif CASE == 6
  producer.PublishLoan(producer.Loan<Frame>(), 7, sluice::MessagePriority::HIGH);
#else
  bool ok = bus.Create("/sluice-nodiscard") == sluice::ipc::AttachError::kNone;
  ok = producer.Attach("/sluice-nodiscard") == sluice::ipc::AttachError::kNone && ok;
  sluice::ipc::ShmLoan<Frame> frame = producer.Loan<Frame>();
  ok = producer.PublishWithPriority(Stop{1}, 7, sluice::MessagePriority::HIGH) && ok;
  ok = bus.SetErrorCallback(&OnError) && ok;
  ok = producer.PublishLoan(std::move(frame), 7, sluice::MessagePriority::HIGH) && ok;
  return ok ? 0 : 1;
#endif
  return 0;
}
