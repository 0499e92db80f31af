// The NATS bridge's JetStream publisher, for the routes forwarded at least
// once (ForwardOptions::jetstream): the asynchronous publish with a
// Nats-Msg-Id, the error path that takes back what the stream did not
// acknowledge, and the resender thread that publishes it again (after an
// error, and after a reconnection).
#pragma once

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/detail/wait/waiting.hpp"
#include "sluice/nats/connection.hpp"
#include "sluice/nats/counters.hpp"
#include "sluice/nats/frame.hpp"
#include "sluice/nats/options.hpp"
#include "sluice/nats/subjects.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {
namespace detail {

class StreamPublisher {
 public:
  // Each argument must outlive the publisher.
  StreamPublisher(const BridgeOptions& options, Counters& counters, const Connection& connection)
      : options_(options), counters_(counters), connection_(connection) {}

  StreamPublisher(const StreamPublisher&) = delete;
  StreamPublisher& operator=(const StreamPublisher&) = delete;

  // The JetStream context's options: the window of unacknowledged
  // publishes, and this publisher's error path.
  jsOptions ContextOptions() {
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.PublishAsync.MaxPending = options_.jetstream_max_pending;
    js_options.PublishAsync.ErrHandler = &OnStreamPublishError;
    js_options.PublishAsync.ErrHandlerClosure = this;
    return js_options;
  }

  // Once the context is open, before any route forwards: starts the
  // resender.
  void Start() {
    // Relaxed: no other thread runs yet (the resender starts below, the
    // forwarding callbacks after it).
    published_to_stream_.store(false, std::memory_order_relaxed);
    give_up_stream_waits_.store(false, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      resend_stop_ = false;
      resend_requested_ = false;
    }
    resender_ = std::thread([this] { ResendLoop(); });
  }

  // At least once (ForwardOptions::jetstream): the frame goes to the
  // client's asynchronous JetStream publish, which keeps it until the
  // stream acknowledges it, with a Nats-Msg-Id the stream deduplicates by.
  // With jetstream_max_pending unacknowledged, the client stalls the call;
  // the consumer thread tries again until there is room or the bridge
  // closes: backpressure into the bus, never a silent drop. Publishes the
  // stream refused (a full stream with discard-new, no stream yet) wait to
  // be sent again; while jetstream_max_pending of them wait, this waits as
  // well, so a stream that refuses pushes back into the bus instead of
  // growing the retry queue.
  void Publish(const std::string& subject, std::size_t p, const std::string& frame,
               const FrameHeader& header) {
    {
      std::unique_lock<std::mutex> lock(resend_mutex_);
      // Acquire: pairs with GiveUpStreamWaits's release.
      room_for_retries_.wait(lock, [this] {
        return retry_.size() + resending_ < RetryBound() ||
               give_up_stream_waits_.load(std::memory_order_acquire);
      });
    }
    natsMsg* message = nullptr;
    natsStatus status = natsMsg_Create(&message, subject.c_str(), nullptr, frame.data(),
                                       static_cast<int>(frame.size()));
    if (status == NATS_OK) {
      const std::string id = StreamMessageId(subject, header);
      status = natsMsgHeader_Set(message, "Nats-Msg-Id", id.c_str());
    }
    // Release: pairs with ResendLoop's acquire (set before the first
    // asynchronous publish, which makes the client's pending list).
    if (status == NATS_OK) published_to_stream_.store(true, std::memory_order_release);
    while (status == NATS_OK) {
      status = js_PublishMsgAsync(connection_.jetstream(), &message, nullptr);
      // Acquire: pairs with GiveUpStreamWaits's release.
      if (status != NATS_TIMEOUT || give_up_stream_waits_.load(std::memory_order_acquire)) break;
      status = NATS_OK;  // stalled at the window: again
    }
    natsMsg_Destroy(message);  // null once the client has it
    if (status == NATS_OK) {
      Count(counters_.frames_sent[p]);
    } else {
      Count(counters_.send_dropped[p]);
    }
  }

  // After a reconnection (on a client thread): the resender publishes again
  // what the stream has not acknowledged.
  void RequestResend() {
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      resend_requested_ = true;
    }
    resend_changed_.notify_all();
  }

  // Set by Shutdown and the destructor: the consumer thread stops waiting
  // for room in the JetStream window. Release: pairs with Publish's acquire
  // load.
  void GiveUpStreamWaits() noexcept {
    {
      const std::lock_guard<std::mutex> lock(resend_mutex_);
      give_up_stream_waits_.store(true, std::memory_order_release);
    }
    room_for_retries_.notify_all();
  }

  // Shutdown: waits up to `timeout` for the stream to acknowledge every
  // publish: none pending in the client (js_PublishAsyncComplete), none
  // waiting to be sent again. NATS_OK only then, so a publish the stream
  // keeps refusing (a full stream with discard-new) makes it NATS_TIMEOUT,
  // and what is left is counted as send_dropped at close. NATS_TIMEOUT at
  // once for a timeout of 0; NATS_OK without a context.
  natsStatus WaitForAcknowledgements(std::chrono::milliseconds timeout) {
    jsCtx* js = connection_.jetstream();
    if (js == nullptr) return NATS_OK;
    if (timeout.count() <= 0) return NATS_TIMEOUT;
    const sluice::detail::Deadline deadline(sluice::detail::SaturatingNanos(timeout));
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
      if (left.count() <= 0) return NATS_TIMEOUT;
      jsPubOptions wait;
      jsPubOptions_Init(&wait);
      wait.MaxWait = left.count();
      const natsStatus status = js_PublishAsyncComplete(js, &wait);
      if (status != NATS_OK) return status;
      // The client has none pending: an error answered meanwhile is in
      // retry_ already (the client calls the error handler before it
      // forgets the publish).
      std::unique_lock<std::mutex> lock(resend_mutex_);
      if (retry_.empty() && resending_ == 0) return NATS_OK;
      // Some wait to be sent again: until they are back in the client.
      (void)resend_changed_.wait_for(
          lock,
          std::min(deadline.Left(), std::chrono::nanoseconds(std::chrono::milliseconds(100))));
    }
  }

  // Stops and joins the resender.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      resend_stop_ = true;
    }
    resend_changed_.notify_all();
    if (resender_.joinable()) resender_.join();
  }

  // At close, once the resender has stopped and no client callback can
  // run: every JetStream publish the stream has not acknowledged, and every
  // one waiting to be published again, is lost: counted as send_dropped
  // (each was counted in frames_sent when handed over).
  void CountUnacknowledged() {
    room_for_retries_.notify_all();
    std::vector<natsMsg*> retry;
    {
      std::lock_guard<std::mutex> lock(resend_mutex_);
      retry.swap(retry_);
    }
    for (natsMsg* message : retry) CountLost(message);
    jsCtx* js = connection_.jetstream();
    natsMsgList pending{};
    // Acquire: pairs with Publish's release (see ResendLoop).
    if (js != nullptr && published_to_stream_.load(std::memory_order_acquire) &&
        js_PublishAsyncGetPendingList(&pending, js) == NATS_OK) {
      for (int i = 0; i < pending.Count; ++i) {
        CountLost(pending.Msgs[i]);
        pending.Msgs[i] = nullptr;
      }
      natsMsgList_Destroy(&pending);
    }
  }

 private:
  // Unique per frame: its stream and number.
  static std::string StreamMessageId(const std::string& subject, const FrameHeader& header) {
    char prefix[48];
    std::snprintf(prefix, sizeof prefix, "%016llx-%016llx-",
                  static_cast<unsigned long long>(header.origin_id),
                  static_cast<unsigned long long>(header.instance_id));
    return prefix + subject + "-" + std::to_string(header.sequence);
  }

  // The stream did not acknowledge a publish (no stream yet, as while a
  // restarted server recovers it, or the acknowledgement timed out): it is
  // published again after a pause, unless the bridge is closing (the
  // client then frees it). Runs on a client thread.
  //
  // Nothing is published or waited for here, on the client's thread that
  // handles every acknowledgement: the message is taken (the field cleared,
  // so the client does not free it) and queued for the resender thread.
  static void OnStreamPublishError(jsCtx*, jsPubAckErr* error, void* closure) {
    auto* self = static_cast<StreamPublisher*>(closure);
    if (error->Msg == nullptr) return;
    natsMsg* message = error->Msg;
    error->Msg = nullptr;
    // Read before the message is queued: from then on the resender may
    // hand it back to the client, which frees it once acknowledged.
    Count(self->counters_.jetstream_refused[PriorityOf(message)]);
    {
      std::lock_guard<std::mutex> lock(self->resend_mutex_);
      self->retry_.push_back(message);
    }
    self->resend_changed_.notify_all();
  }

  static std::size_t PriorityOf(natsMsg* message) noexcept {
    const char* subject = natsMsg_GetSubject(message);
    return PriorityIndexOf(subject == nullptr ? "" : subject);
  }

  // Publishes waiting to be sent again (retry_ and resending_) past which
  // Publish waits: the window's size.
  std::size_t RetryBound() const noexcept {
    return options_.jetstream_max_pending > 0
               ? static_cast<std::size_t>(options_.jetstream_max_pending)
               : std::size_t{1};
  }

  // A message the client gave back (an error, or unacknowledged at close):
  // counted as send_dropped under its subject's priority, and freed.
  void CountLost(natsMsg* message) noexcept {
    Count(counters_.send_dropped[PriorityOf(message)]);
    natsMsg_Destroy(message);
  }

  // Publishes `message` again until the client takes it or the bridge
  // closes; lost (counted, freed) if not taken.
  void Republish(natsMsg*& message) {
    natsStatus status = NATS_TIMEOUT;
    // Acquire (closing): pairs with BeginOwnClose's release.
    while (status == NATS_TIMEOUT && !connection_.closing()) {
      status = js_PublishMsgAsync(connection_.jetstream(), &message, nullptr);
    }
    if (status == NATS_OK) {
      Count(counters_.jetstream_resent);
    } else {
      CountLost(message);
      message = nullptr;
    }
  }

  // After a reconnection, every publish the stream has not acknowledged is
  // published again (the acknowledgements of a server that died never
  // come); the stream drops the ones it had stored, by their
  // Nats-Msg-Id. On the resender thread, woken by RequestResend.
  void ResendLoop() {
    std::unique_lock<std::mutex> lock(resend_mutex_);
    for (;;) {
      resend_changed_.wait(lock,
                           [this] { return resend_requested_ || resend_stop_ || !retry_.empty(); });
      if (resend_stop_) return;
      // Errors answered by the stream: published again after a pause (a
      // restarted server recovering its streams answers "no stream" for a
      // moment), on this thread, HIGH first.
      std::vector<natsMsg*> retry;
      retry.swap(retry_);
      if (!retry.empty()) {
        resending_ = retry.size();
        std::stable_sort(retry.begin(), retry.end(),
                         [](natsMsg* a, natsMsg* b) { return PriorityOf(a) > PriorityOf(b); });
        resend_changed_.wait_for(lock, options_.reconnect_wait, [this] { return resend_stop_; });
        lock.unlock();
        for (natsMsg*& message : retry) {
          Republish(message);
          lock.lock();
          --resending_;
          lock.unlock();
          room_for_retries_.notify_all();
        }
        lock.lock();
        resend_changed_.notify_all();
        continue;
      }
      resend_requested_ = false;
      lock.unlock();
      natsMsgList pending{};
      // Acquire: pairs with Publish's release. nats.c 3.4 crashes here for
      // a context that has never published asynchronously.
      if (published_to_stream_.load(std::memory_order_acquire) &&
          js_PublishAsyncGetPendingList(&pending, connection_.jetstream()) == NATS_OK) {
        for (int i = 0; i < pending.Count; ++i) Republish(pending.Msgs[i]);
        natsMsgList_Destroy(&pending);
      }
      lock.lock();
    }
  }

  const BridgeOptions& options_;
  Counters& counters_;
  const Connection& connection_;
  // The thread that publishes again what the stream had not acknowledged
  // when the connection was lost (ResendLoop), woken through resend_mutex_
  // and resend_changed_.
  std::thread resender_;
  std::mutex resend_mutex_;
  std::condition_variable resend_changed_;
  bool resend_requested_ = false;  // guarded by resend_mutex_
  bool resend_stop_ = false;       // guarded by resend_mutex_
  std::vector<natsMsg*> retry_;    // answered with an error; guarded by resend_mutex_
  // Taken from retry_ by the resender, not yet back in the client; guarded
  // by resend_mutex_.
  std::size_t resending_ = 0;
  // Publish waits on it for room in retry_ (RetryBound); notified as the
  // resender hands each back, and by GiveUpStreamWaits.
  std::condition_variable room_for_retries_;
  std::atomic<bool> published_to_stream_{false};
  std::atomic<bool> give_up_stream_waits_{false};
};

}  // namespace detail
}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
