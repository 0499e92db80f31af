// Large payloads end to end, loaned against copied, in the same run: 4 KB and
// 64 KB payloads published by one producer and read by one consumer, either
// inline in the variant (copied: every slot is that large) or as a
// Loan<T> from a LoanPool (the producer fills the block in place, the slot
// holds the handle, the block returns after dispatch).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "harness/isolated.hpp"
#include "harness/stats.hpp"
#include "report/spread.hpp"
#include "scenarios/common.hpp"

namespace sluice::bench {
namespace {

template <std::size_t kBytes>
struct Blob {
  std::uint64_t seq;
  unsigned char bytes[kBytes - sizeof(std::uint64_t)];
};

// Slots per bus: the copied bus's ring is about 16 MiB at either size; the
// loaned bus has as many slots (each holding a handle) and a pool of
// kBlocks blocks.
template <std::size_t kBytes>
struct LoanSizes {
  static constexpr std::size_t kCapacity = kBytes <= 4096 ? 4096 : 256;
  static constexpr std::size_t kBlocks = kBytes <= 4096 ? 256 : 64;
};

template <std::size_t kBytes>
using CopiedBus = AsyncBus<std::variant<Blob<kBytes>>, LoanSizes<kBytes>::kCapacity>;
template <std::size_t kBytes>
using LoanedBus = AsyncBus<std::variant<Loan<Blob<kBytes>>>, LoanSizes<kBytes>::kCapacity>;
template <std::size_t kBytes>
using BlobPool = LoanPool<Blob<kBytes>, LoanSizes<kBytes>::kBlocks>;

// Writes the whole payload, as a producer that builds it would.
template <std::size_t kBytes>
void Fill(Blob<kBytes>& blob, std::uint64_t seq) {
  blob.seq = seq;
  std::memset(blob.bytes, static_cast<int>(seq & 0xff), sizeof(blob.bytes));
}

// Reads one byte of every cache line, as a consumer that uses the payload.
template <std::size_t kBytes>
std::uint64_t Touch(const Blob<kBytes>& blob) {
  std::uint64_t sum = blob.seq;
  for (std::size_t i = 0; i < sizeof(blob.bytes); i += 64) sum += blob.bytes[i];
  return sum;
}

template <std::size_t kBytes>
std::uint64_t Touch(const Loan<Blob<kBytes>>& loan) {
  return Touch(*loan);
}

// Seconds for `messages` messages of type Message end to end: `produce(i,
// deadline)` publishes message i on the producer thread (retrying until
// admitted; false once the deadline has expired); one subscriber touches
// each message on the consumer thread. A run that does not finish gives the
// row up: `deadline` says why.
template <typename Message, typename Bus, typename Produce>
double EndToEnd(const Options& options, RowDeadline& deadline, Bus& bus, std::uint64_t messages,
                Produce&& produce) {
  Isolated<std::uint64_t> consumed;
  Isolated<std::uint64_t> sink;
  const auto handle =
      bus.template Subscribe<Message>([&sink](const Message& m) { sink.value += Touch(m); });
  if (!handle.IsValid()) RecordFailure("loan: could not subscribe");
  const double seconds = RunProducersAndConsumer(
      options, deadline, 1,
      [&](int) {
        for (std::uint64_t i = 0; i < messages; ++i) {
          if (!produce(i, deadline)) return;
        }
      },
      [&] {
        const std::uint32_t n = bus.ProcessBatch();
        consumed.value += n;
        return n;
      },
      [&] { return consumed.value >= messages; });
  (void)bus.Unsubscribe(handle);
  KeepAlive(sink.value);
  return seconds;
}

// Copied: built in the producer's own buffer, then copied into the slot.
template <std::size_t kBytes>
double RunCopied(const Options& options, RowDeadline& deadline, CopiedBus<kBytes>& bus,
                 std::uint64_t messages) {
  auto blob = std::make_unique<Blob<kBytes>>();
  return EndToEnd<Blob<kBytes>>(
      options, deadline, bus, messages, [&bus, &blob](std::uint64_t i, RowDeadline& limit) {
        Fill(*blob, i);
        return RetryUntil(limit, "the producer retried a refused publish",
                          [&] { return bus.PublishWithPriority(*blob, 1, MessagePriority::HIGH); });
      });
}

// Loaned: filled in place in a pool block; `empty` counts acquires that
// found the pool exhausted (retried).
template <std::size_t kBytes>
double RunLoaned(const Options& options, RowDeadline& deadline, LoanedBus<kBytes>& bus,
                 BlobPool<kBytes>& pool, std::uint64_t messages, std::uint64_t* empty) {
  Isolated<std::uint64_t> exhausted;  // the producer's count
  const double seconds = EndToEnd<Loan<Blob<kBytes>>>(
      options, deadline, bus, messages,
      [&bus, &pool, &exhausted](std::uint64_t i, RowDeadline& limit) {
        Loan<Blob<kBytes>> blob = pool.Acquire();
        if (!blob && !RetryUntil(limit, "the producer waited for a free loan block", [&] {
              ++exhausted.value;
              blob = pool.Acquire();
              return static_cast<bool>(blob);
            })) {
          return false;
        }
        Fill(*blob, i);
        // A refused Loan stays with the caller (api.md), so the same block
        // is offered again.
        return RetryUntil(limit, "the producer retried a refused publish", [&] {
          return bus.PublishLoan(std::move(blob), 1, MessagePriority::HIGH);
        });
      });
  *empty += exhausted.value;
  return seconds;
}

template <std::size_t kBytes>
void SizeRows(const Options& options, Report& report, Table& table) {
  // Fewer messages for larger payloads: about the same bytes per size.
  const std::uint64_t messages =
      std::max<std::uint64_t>(1000, options.end_to_end_messages / (kBytes <= 4096 ? 20 : 200));
  auto copied = std::make_unique<CopiedBus<kBytes>>();
  auto pool = std::make_unique<BlobPool<kBytes>>();
  auto loaned = std::make_unique<LoanedBus<kBytes>>();
  std::vector<double> copied_mps;
  std::vector<double> loaned_mps;
  std::uint64_t empty = 0;
  // Why a way did not finish one of its runs (the first reason), if it did not.
  std::string copied_why;
  std::string loaned_why;
  // One run of `count` messages under a deadline of its own; M msg/s, or 0
  // when it did not finish.
  const auto copied_run = [&](std::uint64_t count) {
    RowDeadline deadline("loan: copied", CountedRowSeconds(options, count));
    const double seconds = RunCopied<kBytes>(options, deadline, *copied, count);
    if (deadline.Finished()) return static_cast<double>(count) / seconds / 1e6;
    if (copied_why.empty()) copied_why = deadline.Why();
    return 0.0;
  };
  const auto loaned_run = [&](std::uint64_t count) {
    RowDeadline deadline("loan: loaned", CountedRowSeconds(options, count));
    const double seconds = RunLoaned<kBytes>(options, deadline, *loaned, *pool, count, &empty);
    if (deadline.Finished()) return static_cast<double>(count) / seconds / 1e6;
    if (loaned_why.empty()) loaned_why = deadline.Why();
    return 0.0;
  };
  // One unrecorded run each first (page faults, caches), then the rounds,
  // alternating which goes first.
  copied_run(messages / 10 + 1);
  loaned_run(messages / 10 + 1);
  empty = 0;
  for (int round = 0; round < options.rounds; ++round) {
    Progress("loan: " + std::to_string(kBytes) + " bytes, round " + std::to_string(round + 1));
    if (round % 2 == 0) {
      copied_mps.push_back(copied_run(messages));
      loaned_mps.push_back(loaned_run(messages));
    } else {
      loaned_mps.push_back(loaned_run(messages));
      copied_mps.push_back(copied_run(messages));
    }
  }
  if (pool->Available() != pool->Capacity()) {
    RecordFailure("loan: " + std::to_string(kBytes) + "-byte blocks did not all come back (" +
                  std::to_string(pool->Available()) + " of " + std::to_string(pool->Capacity()) +
                  " free)");
  }
  const double gb = static_cast<double>(kBytes) / 1e9 * 1e6;  // GB/s per M msg/s
  const std::string size = std::to_string(kBytes);
  const auto row = [&](const std::string& way, std::size_t slot_bytes, double memory_mib,
                       const std::vector<double>& mps, const std::string& why) {
    if (!why.empty()) {
      table.rows.push_back(
          {size, way, WithThousands(slot_bytes), Fixed(memory_mib, 1), "not finished", "-"});
      ReportNotFinished("loan", size + " bytes, " + way, true, why, &table);
      return;
    }
    std::vector<double> gbps;
    for (const double r : mps) gbps.push_back(r * gb);
    table.rows.push_back({size, way, WithThousands(slot_bytes), Fixed(memory_mib, 1),
                          MeanPlusMinus(mps, 3), MeanPlusMinus(gbps, 2)});
    const std::string prefix = "loan." + size + "." + way + ".";
    SetSpread(mps, &report.AddMetric(prefix + "throughput_mps", Summarize(mps).mean, "M msg/s",
                                     Better::kHigher));
    SetSpread(gbps,
              &report.AddMetric(prefix + "gbps", Summarize(gbps).mean, "GB/s", Better::kHigher));
    report.AddMetric(prefix + "slot_bytes", static_cast<double>(slot_bytes), "bytes",
                     Better::kLower);
  };
  constexpr double kMiB = 1024.0 * 1024.0;
  row("copied", CopiedBus<kBytes>::kBytesPerSlot,
      static_cast<double>(CopiedBus<kBytes>::kRingBytes) / kMiB, copied_mps, copied_why);
  row("loaned", LoanedBus<kBytes>::kBytesPerSlot,
      static_cast<double>(LoanedBus<kBytes>::kRingBytes + BlobPool<kBytes>::kPoolBytes) / kMiB,
      loaned_mps, loaned_why);
  const double ratio = copied_why.empty() && loaned_why.empty() && Summarize(copied_mps).mean > 0
                           ? Summarize(loaned_mps).mean / Summarize(copied_mps).mean
                           : 0;
  table.rows.push_back({size, "loaned / copied", "", "", Fixed(ratio, 2) + "x", ""});
  report.AddMetric("loan." + size + ".loaned_over_copied", ratio, "x", Better::kNeither);
  report.AddMetric("loan." + size + ".exhausted_acquires", static_cast<double>(empty), "acquires",
                   Better::kNeither);
  table.notes.push_back(
      size + " bytes: " + WithThousands(messages) + " messages per run, " +
      WithThousands(LoanSizes<kBytes>::kCapacity) + " slots, a pool of " +
      WithThousands(LoanSizes<kBytes>::kBlocks) + " blocks of " +
      WithThousands(BlobPool<kBytes>::kBytesPerBlock) +
      " bytes; acquires that found the pool empty (retried): " + WithThousands(empty) + ".");
}

}  // namespace

void RunLoans(const Options& options, Report& report) {
  Table table;
  table.id = "loan";
  table.title =
      "16. Large payloads end to end: loaned (LoanPool) against copied (inline in the "
      "slot), MPSC, FULL_FEATURED, callbacks";
  table.columns = {"payload bytes", "way", "bytes/slot", "ring + pool MiB", "M msg/s", "GB/s"};
  table.notes.push_back(
      "One producer, one consumer, one subscriber. Copied: the producer writes the payload "
      "into a buffer of its own and publishes it (PublishWithPriority, HIGH, retried when "
      "refused), which copies it into the slot. Loaned: the producer acquires a block "
      "(retried while the pool is empty), writes the payload into it and publishes the loan "
      "(PublishLoan, HIGH); the block returns to the pool when the consumer destroys the "
      "envelope. Either way the producer writes every byte and the callback reads one byte of "
      "every cache line. First publish to last dispatch; mean +- stddev over " +
      std::to_string(options.rounds) +
      " rounds, the two ways alternating which runs first, after one unrecorded run each.");
  SizeRows<4096>(options, report, table);
  SizeRows<65536>(options, report, table);
  report.tables.push_back(table);
}

}  // namespace sluice::bench
