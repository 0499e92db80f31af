// The dispatch table on its own, driven as the bus drives it: a batch is
// DispatchEpoch::Enter, Dispatch per envelope, ReclaimDeferred, Exit.
#include "sluice/detail/consume/subscription_registry.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "sluice/detail/consume/dispatch_epoch.hpp"
#include "sluice/detail/test_access.hpp"

namespace sluice_test {
namespace subscription_registry_test {
namespace {

using sluice::MessageEnvelope;
using sluice::MessageHeader;
using sluice::SubscriptionHandle;
using sluice::UnsubscribeResult;
using sluice::UnsubscribeStatus;
using sluice::detail::DispatchEpoch;

struct Alpha {
  int value = 0;
};
struct Beta {
  int value = 0;
};
struct Gamma {};
using Payload = std::variant<Alpha, Beta, Gamma>;
using Envelope = MessageEnvelope<Payload>;

template <std::size_t kSlots>
struct TableTraits {
  static constexpr std::size_t kMaxSubscribersPerType = kSlots;
  static constexpr std::size_t kCallbackStorageBytes = 48;
};

template <std::size_t kSlots>
using Registry = sluice::detail::SubscriptionRegistry<Payload, TableTraits<kSlots>>;

// TestAccess reaches the table through a member named registry_, as in a bus.
template <std::size_t kSlots>
struct Holder {
  Registry<kSlots> registry_;
  DispatchEpoch epoch_;
};

// One dispatch batch of one envelope, as ProcessBatch runs it. Returns the
// errors reported through the hook.
template <typename R>
std::vector<std::string> RunBatch(R& registry, DispatchEpoch& epoch, const Payload& payload) {
  std::vector<std::string> errors;
  const Envelope envelope{MessageHeader{}, payload};
  epoch.Enter();
  registry.Dispatch(envelope, [&errors](const char* what) { errors.emplace_back(what); });
  registry.ReclaimDeferred();
  epoch.Exit();
  return errors;
}

// A callable that counts its own destructions (moves from it do not count).
struct Counted {
  Counted(std::vector<int>* calls_in, int id_in, int* destroyed_in)
      : calls(calls_in), id(id_in), destroyed(destroyed_in) {}
  Counted(const Counted& other) = default;
  Counted(Counted&& other) noexcept : calls(other.calls), id(other.id), destroyed(other.destroyed) {
    other.destroyed = nullptr;
  }
  Counted& operator=(const Counted&) = delete;
  Counted& operator=(Counted&&) = delete;
  ~Counted() {
    if (destroyed != nullptr) ++*destroyed;
  }
  void operator()(const Alpha&) const { calls->push_back(id); }

  std::vector<int>* calls;
  int id;
  int* destroyed;
};

TEST(SubscriptionRegistryTest, SubscribesUpToTheTableSizeThenRefuses) {
  Registry<4> registry;
  std::vector<SubscriptionHandle> handles;
  for (int i = 0; i < 4; ++i) {
    handles.push_back(registry.Subscribe<Alpha>([](const Alpha&) {}));
    ASSERT_TRUE(handles.back().IsValid()) << "subscription " << i;
    EXPECT_EQ(handles.back().TypeIndex(), 0u);
    for (int j = 0; j < i; ++j) EXPECT_NE(handles[j], handles.back());
  }
  EXPECT_EQ(registry.SubscriberCount(0), 4u);
  const SubscriptionHandle refused = registry.Subscribe<Alpha>([](const Alpha&) {});
  EXPECT_FALSE(refused.IsValid());
  EXPECT_EQ(refused, SubscriptionHandle());
  EXPECT_EQ(registry.SubscriberCount(0), 4u);
  // Each type has a table of its own.
  const SubscriptionHandle beta = registry.Subscribe<Beta>([](const Beta&) {});
  ASSERT_TRUE(beta.IsValid());
  EXPECT_EQ(beta.TypeIndex(), 1u);
  EXPECT_EQ(registry.SubscriberCount(1), 1u);
  EXPECT_EQ(registry.SubscriberCount(2), 0u);
  EXPECT_EQ(registry.SubscriberCount(3), 0u) << "past the last type";

  // A freed slot can be subscribed again.
  DispatchEpoch epoch;
  EXPECT_TRUE(registry.Unsubscribe(handles[2], epoch));
  EXPECT_TRUE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
  EXPECT_FALSE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
}

TEST(SubscriptionRegistryTest, DispatchCallsTheTypesSubscribersInSubscriptionOrder) {
  Registry<8> registry;
  DispatchEpoch epoch;
  std::vector<std::string> calls;
  ASSERT_TRUE(registry
                  .Subscribe<Alpha>([&](const Alpha& a, const MessageHeader& h) {
                    calls.push_back("a1:" + std::to_string(a.value) + ":" +
                                    std::to_string(h.msg_id));
                  })
                  .IsValid());
  ASSERT_TRUE(
      registry
          .Subscribe<Beta>([&](const Beta& b) { calls.push_back("b1:" + std::to_string(b.value)); })
          .IsValid());
  ASSERT_TRUE(registry
                  .Subscribe<Alpha>(
                      [&](const Alpha& a) { calls.push_back("a2:" + std::to_string(a.value)); })
                  .IsValid());
  ASSERT_TRUE(registry
                  .Subscribe<Alpha>([&](const Envelope& e) {
                    calls.push_back("a3:" + std::to_string(std::get<Alpha>(e.payload).value));
                  })
                  .IsValid());

  std::vector<std::string> errors;
  Envelope alpha{MessageHeader{}, Alpha{7}};
  alpha.header.msg_id = 42;
  epoch.Enter();
  registry.Dispatch(alpha, [&errors](const char* what) { errors.emplace_back(what); });
  registry.ReclaimDeferred();
  epoch.Exit();
  EXPECT_EQ(calls, (std::vector<std::string>{"a1:7:42", "a2:7", "a3:7"}));

  calls.clear();
  RunBatch(registry, epoch, Beta{3});
  EXPECT_EQ(calls, (std::vector<std::string>{"b1:3"}));

  calls.clear();
  RunBatch(registry, epoch, Gamma{});
  EXPECT_TRUE(calls.empty()) << "a type without subscribers calls nothing";
  EXPECT_TRUE(errors.empty());
}

// The call order is the order of the places in the type's table, and a
// subscription takes the lowest free place (api.md): after an Unsubscribe,
// a later subscription is called before earlier ones.
TEST(SubscriptionRegistryTest, ASubscriptionTakesTheLowestFreePlaceInTheCallOrder) {
  Registry<4> registry;
  DispatchEpoch epoch;
  std::vector<std::string> calls;
  const SubscriptionHandle a =
      registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back("A"); });
  ASSERT_TRUE(a.IsValid());
  ASSERT_TRUE(registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back("B"); }).IsValid());
  RunBatch(registry, epoch, Alpha{1});
  EXPECT_EQ(calls, (std::vector<std::string>{"A", "B"})) << "subscription order";
  ASSERT_TRUE(registry.Unsubscribe(a, epoch));
  ASSERT_TRUE(registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back("C"); }).IsValid());
  calls.clear();
  RunBatch(registry, epoch, Alpha{2});
  EXPECT_EQ(calls, (std::vector<std::string>{"C", "B"})) << "C took A's place";
}

TEST(SubscriptionRegistryTest, UnsubscribeSucceedsOnceThenTheHandleIsStale) {
  int destroyed = 0;
  std::vector<int> calls;
  {
    Registry<4> registry;
    DispatchEpoch epoch;
    const SubscriptionHandle first = registry.Subscribe<Alpha>(Counted(&calls, 1, &destroyed));
    const SubscriptionHandle second = registry.Subscribe<Alpha>(Counted(&calls, 2, &destroyed));
    ASSERT_TRUE(first.IsValid());
    ASSERT_TRUE(second.IsValid());
    EXPECT_EQ(destroyed, 0);

    const UnsubscribeResult removed = registry.Unsubscribe(first, epoch);
    EXPECT_TRUE(removed);
    EXPECT_TRUE(removed.Removed());
    EXPECT_FALSE(removed.StillRunning());
    EXPECT_EQ(removed.Status(), UnsubscribeStatus::kRemoved);
    EXPECT_EQ(destroyed, 1) << "outside a batch the callable is destroyed at once";

    const UnsubscribeResult again = registry.Unsubscribe(first, epoch);
    EXPECT_FALSE(again);
    EXPECT_EQ(again.Status(), UnsubscribeStatus::kNotSubscribed);
    EXPECT_EQ(destroyed, 1);
    EXPECT_EQ(registry.Unsubscribe(SubscriptionHandle(), epoch).Status(),
              UnsubscribeStatus::kNotSubscribed);

    RunBatch(registry, epoch, Alpha{});
    EXPECT_EQ(calls, std::vector<int>{2});
    EXPECT_EQ(registry.SubscriberCount(0), 1u);
  }
  EXPECT_EQ(destroyed, 2) << "the registry destroys the callables it still holds";
}

TEST(SubscriptionRegistryTest, RefusesAHandleFromAnotherRegistry) {
  Registry<4> mine;
  Registry<4> other;
  DispatchEpoch epoch;
  int mine_calls = 0;
  int other_calls = 0;
  // Same type, same slot, same generation: only the issuing registry differs.
  const SubscriptionHandle handle = mine.Subscribe<Alpha>([&](const Alpha&) { ++mine_calls; });
  const SubscriptionHandle other_handle =
      other.Subscribe<Alpha>([&](const Alpha&) { ++other_calls; });
  ASSERT_TRUE(handle.IsValid());
  EXPECT_NE(handle, other_handle);

  EXPECT_EQ(other.Unsubscribe(handle, epoch).Status(), UnsubscribeStatus::kNotSubscribed);
  RunBatch(other, epoch, Alpha{});
  RunBatch(mine, epoch, Alpha{});
  EXPECT_EQ(other_calls, 1) << "the foreign handle removed nothing";
  EXPECT_EQ(mine_calls, 1);
  // The handle still works where it was issued.
  EXPECT_TRUE(mine.Unsubscribe(handle, epoch));
}

TEST(SubscriptionRegistryTest, AReusedSlotGivesANewHandleAndTheOldOneStaysStale) {
  // One slot per type, so the second subscription must reuse the first's slot.
  Registry<1> registry;
  DispatchEpoch epoch;
  std::vector<int> calls;
  const SubscriptionHandle old_handle =
      registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back(1); });
  ASSERT_TRUE(registry.Unsubscribe(old_handle, epoch));
  const SubscriptionHandle new_handle =
      registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back(2); });
  ASSERT_TRUE(new_handle.IsValid());
  EXPECT_NE(new_handle, old_handle);

  EXPECT_EQ(registry.Unsubscribe(old_handle, epoch).Status(), UnsubscribeStatus::kNotSubscribed);
  RunBatch(registry, epoch, Alpha{});
  EXPECT_EQ(calls, std::vector<int>{2}) << "the stale handle removed nothing";
  EXPECT_TRUE(registry.Unsubscribe(new_handle, epoch));
}

TEST(SubscriptionRegistryTest, ASlotWhoseGenerationWouldWrapIsRetired) {
  Holder<2> holder;
  auto& registry = holder.registry_;
  constexpr auto kLast = sluice::detail::TestAccess::LastSubscriptionGeneration<Holder<2>>();
  sluice::detail::TestAccess::SetSubscriptionGeneration(holder, 0, 0, kLast);
  const SubscriptionHandle last = registry.Subscribe<Alpha>([](const Alpha&) {});
  ASSERT_TRUE(last.IsValid());
  ASSERT_TRUE(registry.Unsubscribe(last, holder.epoch_));
  // Slot 0 is retired: the next two land in slot 1, then the table is full.
  const SubscriptionHandle next = registry.Subscribe<Alpha>([](const Alpha&) {});
  ASSERT_TRUE(next.IsValid());
  EXPECT_NE(next, last);
  EXPECT_FALSE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
  EXPECT_FALSE(registry.Unsubscribe(last, holder.epoch_));
  EXPECT_TRUE(registry.Unsubscribe(next, holder.epoch_));
}

TEST(SubscriptionRegistryTest, UnsubscribeInsideACallbackDefersItsOwnDestruction) {
  // What the self-unsubscribing callback sees; it holds only a pointer, to fit
  // the inline storage.
  struct Context {
    Registry<4> registry;
    DispatchEpoch epoch;
    SubscriptionHandle self;
    SubscriptionHandle later;
    UnsubscribeResult self_result{UnsubscribeStatus::kNotSubscribed};
    UnsubscribeResult later_result{UnsubscribeStatus::kNotSubscribed};
    std::vector<int> calls;
    int destroyed = 0;
    int destroyed_after_self = -1;
  } context;
  struct Self {
    Context* context;
    void operator()(const Alpha&) const {
      context->calls.push_back(1);
      context->self_result = context->registry.Unsubscribe(context->self, context->epoch);
      // The running callable (this object) must not have been destroyed.
      context->destroyed_after_self = context->destroyed;
      context->later_result = context->registry.Unsubscribe(context->later, context->epoch);
    }
  };
  Registry<4>& registry = context.registry;
  context.self = registry.Subscribe<Alpha>(Self{&context});
  context.later = registry.Subscribe<Alpha>(Counted(&context.calls, 2, &context.destroyed));
  ASSERT_TRUE(context.self.IsValid());
  ASSERT_TRUE(context.later.IsValid());

  RunBatch(registry, context.epoch, Alpha{});
  EXPECT_EQ(context.calls, std::vector<int>{1})
      << "a subscriber removed earlier in the dispatch is skipped";
  EXPECT_TRUE(context.self_result.Removed());
  EXPECT_TRUE(context.self_result.StillRunning());
  EXPECT_EQ(context.self_result.Status(), UnsubscribeStatus::kRemovedWhileRunning);
  // A callable that is not running is destroyed at once, even in the batch.
  EXPECT_EQ(context.later_result.Status(), UnsubscribeStatus::kRemoved);
  EXPECT_EQ(context.destroyed_after_self, 0);
  EXPECT_EQ(context.destroyed, 1);
  EXPECT_EQ(registry.SubscriberCount(0), 0u);

  context.calls.clear();
  RunBatch(registry, context.epoch, Alpha{});
  EXPECT_TRUE(context.calls.empty()) << "neither is called again";
  EXPECT_FALSE(registry.Unsubscribe(context.self, context.epoch));
  // The deferred slot was freed at the end of the batch: all four are free.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
}

TEST(SubscriptionRegistryTest, ACallbackMaySubscribeALaterOneThatRunsInTheSameDispatch) {
  Registry<4> registry;
  DispatchEpoch epoch;
  std::vector<int> calls;
  bool subscribed = false;
  ASSERT_TRUE(
      registry
          .Subscribe<Alpha>([&](const Alpha&) {
            calls.push_back(1);
            if (!subscribed) {
              subscribed =
                  registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back(2); }).IsValid();
            }
          })
          .IsValid());
  RunBatch(registry, epoch, Alpha{});
  EXPECT_TRUE(subscribed);
  EXPECT_EQ(calls, (std::vector<int>{1, 2}));
}

#if SLUICE_HAS_EXCEPTIONS
TEST(SubscriptionRegistryTest, AThrowingCallbackIsReportedAndTheRestStillRun) {
  Registry<4> registry;
  DispatchEpoch epoch;
  std::vector<int> calls;
  ASSERT_TRUE(registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back(1); }).IsValid());
  ASSERT_TRUE(registry
                  .Subscribe<Alpha>([&](const Alpha&) {
                    calls.push_back(2);
                    throw std::runtime_error("boom");
                  })
                  .IsValid());
  ASSERT_TRUE(registry
                  .Subscribe<Alpha>([&](const Alpha&) {
                    calls.push_back(3);
                    throw 42;
                  })
                  .IsValid());
  ASSERT_TRUE(registry.Subscribe<Alpha>([&](const Alpha&) { calls.push_back(4); }).IsValid());

  const std::vector<std::string> errors = RunBatch(registry, epoch, Alpha{});
  EXPECT_EQ(calls, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(errors, (std::vector<std::string>{"boom", "non-standard exception"}));
  // The throwers stay subscribed.
  calls.clear();
  EXPECT_EQ(RunBatch(registry, epoch, Alpha{}).size(), 2u);
  EXPECT_EQ(calls, (std::vector<int>{1, 2, 3, 4}));
}

TEST(SubscriptionRegistryTest, ACallableWhoseCopyThrowsLeavesItsSlotFree) {
  struct ThrowsOnCopy {
    ThrowsOnCopy() = default;
    ThrowsOnCopy(const ThrowsOnCopy&) { throw std::runtime_error("copy"); }
    void operator()(const Alpha&) const {}
  };
  Registry<2> registry;
  const ThrowsOnCopy callable;
  EXPECT_THROW((void)registry.Subscribe<Alpha>(callable), std::runtime_error);
  EXPECT_EQ(registry.SubscriberCount(0), 0u);
  EXPECT_TRUE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
  EXPECT_TRUE(registry.Subscribe<Alpha>([](const Alpha&) {}).IsValid());
}
#endif  // SLUICE_HAS_EXCEPTIONS

}  // namespace
}  // namespace subscription_registry_test
}  // namespace sluice_test
