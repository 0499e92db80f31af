/*
 * Unsubscribe from an interrupt while the main context dispatches (bare
 * metal, one core).
 *
 * Models include/sluice/detail/consume/subscription_registry.hpp
 * (SubscriptionRegistry::Dispatch, Unsubscribe and ReclaimDeferred) and the
 * batch of Bus::ProcessBatch (include/sluice/bus.hpp) under
 * SLUICE_FREESTANDING. Before calling subscriber i the consumer records
 * `current = i`, then (after a compiler barrier) reloads the mask and skips i
 * if its bit is clear; after the batch `current` is NONE again. Unsubscribe
 * from a handler clears the bit, then: if `current == i` the callback may be
 * running in the preempted context, so it is marked deferred, the consumer
 * destroys it at the end of the batch, and the result is IN_FLIGHT (the
 * caller must not free the callback's captured state yet); otherwise it is
 * destroyed at once and the result is REMOVED.
 *
 * Two subscriptions; the consumer runs BATCHES batches of MSGS messages; the
 * handler fires once, at any point, and unsubscribes one of the two. The
 * interrupt is modelled as in freestanding_thresholds.pml: main runs only while
 * `isr` is 0, and the handler, once entered, runs to completion.
 *
 * Properties (assertions):
 *  - a callable is never called, nor still running, after it was destroyed;
 *  - if Unsubscribe returned REMOVED, the callback was not running and never
 *    starts again;
 *  - if it returned IN_FLIGHT, the callback runs at most in the visit of its
 *    slot that the handler preempted (it may be running, or about to start
 *    when the handler came between the mask reload and the call), never in
 *    a later one;
 *  - no deadlock (SPIN's invalid end states).
 *
 * Planted bug (spin -DPLANTED_BUG=1): no reload of the mask after
 * `current = i`: the consumer calls on the strength of the mask it loaded
 * before, as the old code did.
 */

#define NSUB 2
#define BATCHES 2
#define MSGS 2
#define NONE 255

#define FREE 0
#define ACTIVE 2
#define RETIRING 3
#define DEFERRED 4

byte mask = 3;
byte current = NONE;
byte state[NSUB];
bit deferred_pending = 0;
bit isr = 0;

/* Ghosts. */
bit freed[NSUB];
bit running[NSUB];
bit removed[NSUB];          /* Unsubscribe returned REMOVED */
bit in_flight[NSUB];        /* Unsubscribe returned IN_FLIGHT */
byte in_flight_visit[NSUB]; /* the slot visit it preempted */
byte visit = 0;             /* counts main's `current = i` stores */

inline free_slot(i) {
  d_step { assert(!running[i]); freed[i] = 1; state[i] = FREE }
}

proctype Main() provided (isr == 0) {
  byte batch = 0, msg, pending, index;
  do
  :: batch < BATCHES ->
     msg = 0;
     do
     :: msg < MSGS ->
        pending = mask;
        do
        :: pending == 0 -> break
        :: else ->
           index = ((pending & 1) -> 0 : 1);
           d_step { current = index; visit++ };
#if PLANTED_BUG != 1
           if
           :: (mask & (1 << index)) != 0 ->
#endif
              d_step {
                assert(!freed[index]);
                assert(!removed[index]);
                assert(!in_flight[index] || in_flight_visit[index] == visit);
                running[index] = 1
              };
              d_step { assert(!freed[index]); running[index] = 0 }
#if PLANTED_BUG != 1
           :: else -> skip
           fi
#endif
           ;
           pending = mask & (((index == 0) -> 2 : 0))
        od;
        msg++
     :: else -> break
     od;
     current = NONE;
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
     batch++
  :: else -> break
  od
}

proctype Interrupt() {
  byte target;
  isr = 1;
  if
  :: target = 0
  :: target = 1
  fi;
  /* Unsubscribe(target): the state CAS (nothing else runs now). */
  assert(state[target] == ACTIVE);
  state[target] = RETIRING;
  mask = mask & ~(1 << target);
  if
  :: current == target ->
     state[target] = DEFERRED;
     deferred_pending = 1;
     d_step { in_flight[target] = 1; in_flight_visit[target] = visit }
  :: else ->
     free_slot(target);
     removed[target] = 1
  fi;
  isr = 0
}

init {
  atomic {
    state[0] = ACTIVE;
    state[1] = ACTIVE;
    run Main();
    run Interrupt()
  }
}
