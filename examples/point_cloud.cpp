// Large payloads by loan: a lidar thread fills 48 KB point clouds in place in
// blocks of a LoanPool and publishes them at LOW, beside small IMU samples at
// MEDIUM; the slot holds only the loan handle, so each slot stays small. The
// consumer keeps the latest cloud past its batch (Loan::Share) and drops the
// previous one, which hands its block back to the pool. A cloud that finds
// every block loaned is refused and counted as a dropped LOW message. The
// consumer sleeps while nothing is queued (a condition-variable parker) and
// shuts down cleanly: the lidar thread closes the bus, the consumer
// dispatches until everything admitted is through.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sluice/extras/condition_variable_parker.hpp>
#include <sluice/sluice.hpp>
#include <thread>
#include <variant>

struct Point {
  float x, y, z, intensity;
};
struct PointCloud {
  std::uint32_t scan = 0;
  std::uint32_t count = 0;
  Point points[3000];  // 48,000 bytes
};
struct ImuSample {
  std::uint32_t seq;
  float accel[3];
  float gyro[3];
};
using Payload = std::variant<ImuSample, sluice::Loan<PointCloud>>;

constexpr std::uint32_t kScans = 200;
constexpr std::uint32_t kImuPerScan = 10;

int main() {
  // Eight 48 KB blocks, allocated here and never again. Declared before the
  // bus: the bus (and any cloud still queued in it) goes first.
  auto pool = std::make_unique<sluice::LoanPool<PointCloud, 8>>();
  auto bus = std::make_unique<sluice::MpscBus<Payload, 1024, sluice::SleepingConsumerTraits>>();
  std::printf("slot %zu bytes (a copied cloud would need %zu); pool %zu blocks of %zu bytes\n",
              decltype(bus)::element_type::kBytesPerSlot, sizeof(PointCloud), pool->Capacity(),
              decltype(pool)::element_type::kBytesPerBlock);

  // Consumer state: the latest cloud, kept past its batch.
  sluice::Loan<PointCloud> latest;
  std::uint32_t clouds = 0;
  std::uint32_t imu = 0;
  bool intact = true;
  sluice::SubscriptionHandle cloud_handle =
      bus->Subscribe<sluice::Loan<PointCloud>>([&](const sluice::Loan<PointCloud>& cloud) {
        ++clouds;
        const Point& last = cloud->points[cloud->count - 1];
        intact = intact && last.x == static_cast<float>(cloud->scan);
        latest = cloud.Share();  // the previous cloud's block goes back now
      });
  sluice::SubscriptionHandle imu_handle =
      bus->Subscribe<ImuSample>([&](const ImuSample&) { ++imu; });
  if (!cloud_handle.IsValid() || !imu_handle.IsValid()) return 1;

  std::uint32_t refused_clouds = 0;
  std::uint32_t imu_timed_out = 0;
  std::thread lidar([&] {
    for (std::uint32_t scan = 0; scan < kScans; ++scan) {
      sluice::Loan<PointCloud> cloud = pool->Acquire();  // empty when all 8 are out
      if (cloud) {
        cloud->scan = scan;
        cloud->count = 3000;
        for (std::uint32_t i = 0; i < cloud->count; ++i) {
          cloud->points[i] =
              Point{static_cast<float>(scan), 0.5f * static_cast<float>(i), 1.0f, 0.8f};
        }
      }
      // An empty loan is refused and counted as a dropped LOW message.
      if (!bus->PublishLoan(std::move(cloud), /*sender_id=*/1, sluice::MessagePriority::LOW)) {
        ++refused_clouds;
      }
      // IMU samples must not be lost: wait (up to a second) for room rather
      // than drop, and tell a timeout from a shutdown by the result.
      for (std::uint32_t k = 0; k < kImuPerScan; ++k) {
        const sluice::PublishResult result =
            bus->PublishBlocking(ImuSample{scan * kImuPerScan + k, {0, 0, 9.81f}, {0, 0, 0}}, 2,
                                 sluice::MessagePriority::MEDIUM, std::chrono::seconds(1));
        if (result.Outcome() == sluice::PublishOutcome::kTimedOut) ++imu_timed_out;
      }
      // A sensor's pace (a real lidar scans at 10-20 Hz): how many clouds
      // find a free block depends on the consumer keeping up, not on this.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    bus->Close();
  });

  // One consumer thread (here, main): sleeps while nothing is queued, and
  // dispatches until everything admitted before Close is through (Close
  // wakes it).
  while (!bus->IsDrained()) {
    (void)bus->ProcessBatchWait(std::chrono::milliseconds(100), 64);
  }
  lidar.join();

  const sluice::BusStatisticsSnapshot stats = bus->GetStatistics();
  std::printf("clouds received %u, refused %u (LOW dropped %llu); IMU samples %u, timed out %u\n",
              clouds, refused_clouds, static_cast<unsigned long long>(stats.low_priority_dropped),
              imu, imu_timed_out);
  std::printf("latest cloud: scan %u, %u points; blocks free while it is kept: %zu of %zu\n",
              latest ? latest->scan : 0, latest ? latest->count : 0, pool->Available(),
              pool->Capacity());
  latest.Reset();
  const bool ok = intact && clouds + refused_clouds == kScans &&
                  stats.low_priority_dropped == refused_clouds && imu == kScans * kImuPerScan &&
                  pool->Available() == pool->Capacity();
  std::printf("blocks free after the consumer let go: %zu\n", pool->Available());
  std::printf("%s: every cloud arrived intact or was counted as refused, every block came back\n",
              ok ? "PASS" : "FAIL");
  bus.reset();  // before the pool
  return ok ? 0 : 1;
}
