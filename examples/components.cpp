// Components: objects that own their subscriptions.
//  - Logger keeps a sluice::Component member: its subscriptions go when it goes.
//  - Dashboard lives in a std::shared_ptr and subscribes weakly: it may be
//    released on any thread, and a dispatch in flight keeps it alive.
//  - Controller is a StaticComponent: its Handle overloads are found at
//    compile time and called through a visitor, without the subscription table.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sluice/extras/component.hpp>
#include <sluice/extras/static_component.hpp>
#include <sluice/sluice.hpp>
#include <variant>

struct SensorData {
  float temperature;
};
struct MotorCmd {
  std::int32_t speed;
};
struct Heartbeat {};
using Payload = std::variant<SensorData, MotorCmd, Heartbeat>;
using Bus = sluice::SpscBus<Payload, 256>;

class Logger {
 public:
  explicit Logger(Bus& bus) : subscriptions_(bus) {
    const bool sensor = subscriptions_.Subscribe<SensorData>([this](const SensorData& d) {
      ++lines_;
      std::printf("logger: sensor %.1f\n", d.temperature);
    });
    const bool motor = subscriptions_.Subscribe<MotorCmd>([this](const MotorCmd& c) {
      ++lines_;
      std::printf("logger: motor %d\n", c.speed);
    });
    subscribed_ = sensor && motor;
  }
  bool subscribed() const { return subscribed_; }
  int lines() const { return lines_; }

 private:
  bool subscribed_ = false;
  int lines_ = 0;
  sluice::Component<Bus> subscriptions_;  // declared last: unsubscribes first
};

class Dashboard : public std::enable_shared_from_this<Dashboard> {
 public:
  static std::shared_ptr<Dashboard> Create(Bus& bus) {
    std::shared_ptr<Dashboard> dashboard(new Dashboard(bus));
    if (!dashboard->subscriptions_.SubscribeWeak<SensorData>(dashboard->weak_from_this(),
                                                             &Dashboard::Show)) {
      return nullptr;  // its component or the bus's table for SensorData is full
    }
    return dashboard;
  }
  int shown() const { return shown_; }

 private:
  explicit Dashboard(Bus& bus) : subscriptions_(bus) {}
  void Show(const SensorData& d) {
    ++shown_;
    std::printf("dashboard: %.1f C\n", d.temperature);
  }
  int shown_ = 0;
  sluice::Component<Bus> subscriptions_;
};

struct Controller : sluice::StaticComponent<Controller, Payload> {
  void Handle(const SensorData& d) { target_speed = d.temperature > 30.0f ? 0 : 100; }
  void Handle(const MotorCmd& c, const sluice::MessageHeader& h) {
    std::printf("controller: motor %d from sender %u\n", c.speed, h.sender_id);
    ++commands;
  }
  // No Handle(const Heartbeat&): heartbeats are ignored.
  int target_speed = -1;
  int commands = 0;
};

int main() {
  Bus bus;
  bool ok = true;
  {
    Logger logger(bus);
    auto dashboard = Dashboard::Create(bus);
    if (!logger.subscribed() || dashboard == nullptr) return 1;
    // A refused publish is the caller's to handle; here it fails the run.
    ok = bus.Publish(SensorData{21.5f}, 1) && bus.Publish(MotorCmd{50}, 2);
    bus.ProcessBatch();
    std::printf("subscribers of SensorData: %zu\n", bus.SubscriberCount<SensorData>());
    ok = ok && logger.lines() == 2 && dashboard->shown() == 1 &&
         bus.SubscriberCount<SensorData>() == 2;
    dashboard.reset();  // its weak subscription goes quiet, then away
    ok = ok && bus.Publish(SensorData{22.0f}, 1);
    bus.ProcessBatch();
    ok = ok && logger.lines() == 3;
  }
  std::printf("after the components are gone, subscribers of SensorData: %zu\n",
              bus.SubscriberCount<SensorData>());
  ok = ok && bus.SubscriberCount<SensorData>() == 0 && bus.SubscriberCount<MotorCmd>() == 0;

  Controller controller;
  ok = ok && bus.Publish(SensorData{35.0f}, 1) && bus.Publish(Heartbeat{}, 3) &&
       bus.Publish(MotorCmd{75}, 2);
  const std::uint32_t visited = bus.ProcessBatchWith(controller.MakeVisitor());
  std::printf("controller: %u messages visited, target speed %d\n", visited,
              controller.target_speed);
  ok = ok && visited == 3 && controller.target_speed == 0 && controller.commands == 1;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
