/*
 * The dispatch epoch's grace period for Unsubscribe (hosted).
 *
 * Models include/sluice/detail/consume/dispatch_epoch.hpp (DispatchEpoch::Enter,
 * Exit, WaitForReaders) with its use in
 * include/sluice/detail/consume/subscription_registry.hpp
 * (SubscriptionRegistry::Unsubscribe, Dispatch, ReclaimDeferred) and the
 * batch in include/sluice/bus.hpp (Bus::ProcessBatch: Enter, Dispatch per
 * message, ReclaimDeferred, Exit).
 *
 * Two subscriptions (mask bits 0 and 1). The consumer runs BATCHES batches of
 * MSGS messages. Two other threads each unsubscribe a subscription of their
 * choice; the callback of subscription 0 may itself unsubscribe one (itself
 * or the other) on the consumer thread, once. A callback call is two steps,
 * entry and exit, so a free between them is seen.
 *
 * Properties (assertions):
 *  - a callable is never called, and never still running, after it was
 *    destroyed;
 *  - no callback starts after an Unsubscribe of it returned (either thread);
 *  - when an Unsubscribe on another thread returns, its callback is not
 *    running;
 *  - no deadlock: every process reaches its end (invalid end states).
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution; the C++ argument needs exactly that for the Dekker pair (the
 * consumer's seq_cst counter store then mask load; the writer's seq_cst
 * mask RMW then counter load), which is why those operations are seq_cst.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: WaitForReaders reads the counter before the mask bit is cleared;
 *  2: Unsubscribe does not wait for readers at all.
 */

#define NSUB 2
#define BATCHES 2
#define MSGS 2
#define NONE 255

#define FREE 0
#define ACTIVE 2
#define RETIRING 3
#define DEFERRED 4

byte mask = 3;                 /* TypeTable::active */
byte counter = 0;              /* DispatchEpoch::counter_ */
byte dispatching_thread = NONE;
byte state[NSUB];              /* Slot::state (phase only) */
bit deferred_pending = 0;

/* Ghosts. */
bit freed[NSUB];
bit running[NSUB];
bit unsubscribed[NSUB];        /* an Unsubscribe of it returned true */

inline free_slot(i) {
  d_step { assert(!running[i]); freed[i] = 1; state[i] = FREE }
}

/* DispatchEpoch::WaitForReaders; `observed` is read with the counter. */
inline wait_for_readers(result) {
  observed = counter;
  if
  :: (observed % 2 == 0) -> result = 1
  :: else ->
     if
     :: dispatching_thread == _pid -> result = 0
     :: else -> (counter != observed); result = 1
     fi
  fi
}

/* SubscriptionRegistry::Unsubscribe(i). */
inline unsubscribe(i) {
  atomic {
    if
    :: state[i] == ACTIVE -> state[i] = RETIRING; won = 1
    :: else -> won = 0
    fi
  };
  if
  :: won ->
#if PLANTED_BUG == 1
     wait_for_readers(w);
     mask = mask & ~(1 << i);
#elif PLANTED_BUG == 2
     mask = mask & ~(1 << i);
     w = 1;
#else
     mask = mask & ~(1 << i);
     wait_for_readers(w);
#endif
     if
     :: w -> free_slot(i)
     :: else -> state[i] = DEFERRED; deferred_pending = 1
     fi;
     d_step {
       /* Off the consumer thread the callback is done with. */
       assert(dispatching_thread == _pid || !running[i]);
       unsubscribed[i] = 1
     }
  :: else -> skip
  fi
}

proctype Unsubscriber() {
  byte observed;
  bit won, w;
  byte target;
  if
  :: target = 0
  :: target = 1
  fi;
  unsubscribe(target)
}

proctype Consumer() {
  byte batch = 0, msg, pending, index, target, observed;
  bit won, w;
  bit callback_unsubscribed = 0;
  do
  :: batch < BATCHES ->
     /* Enter */
     dispatching_thread = _pid;
     counter = counter + 1;
     msg = 0;
     do
     :: msg < MSGS ->
        /* Dispatch: the mask, then each set bit in order, re-reading. */
        pending = mask;
        do
        :: pending == 0 -> break
        :: else ->
           index = ((pending & 1) -> 0 : 1);
           d_step {
             assert(!freed[index]);
             assert(!unsubscribed[index]);
             running[index] = 1
           };
           /* The callback of subscription 0 may unsubscribe, once. */
           if
           :: index == 0 && !callback_unsubscribed ->
              callback_unsubscribed = 1;
              if
              :: target = 0
              :: target = 1
              fi;
              unsubscribe(target)
           :: else -> skip
           fi;
           d_step { assert(!freed[index]); running[index] = 0 };
           pending = mask & (((index == 0) -> 2 : 0))
        od;
        msg++
     :: else -> break
     od;
     /* ReclaimDeferred */
     if
     :: deferred_pending ->
        deferred_pending = 0;
        for (index : 0 .. NSUB - 1) {
          if
          :: state[index] == DEFERRED -> free_slot(index)
          :: else -> skip
          fi
        }
     :: else -> skip
     fi;
     /* Exit */
     counter = counter + 1;
     batch++
  :: else -> break
  od
}

init {
  atomic {
    state[0] = ACTIVE;
    state[1] = ACTIVE;
    run Consumer();
    run Unsubscriber();
    run Unsubscriber()
  }
}
