/*
 * One consumer sleeping on two buses at once (a WaitSet): no lost wake-up.
 *
 * Models include/sluice/wait_set.hpp (WaitSet::Wait through
 * detail::WaitUntil) with the buses' notifies (detail/bus_core.hpp: Admit
 * and Close call wake_->Notify(), the set's signal for a bus in a set), as
 * tests/spin/consumer_wakeup.pml models one bus. Each bus has a producer
 * that publishes NMSG messages, each followed by a notify, and then closes
 * its bus (Close notifies too). The waiter dispatches what it finds, one
 * message per bus per round in argument order; finding nothing, it stops
 * if every bus is drained, else announces on the SHARED signal (reads the
 * ticket, counts itself a sleeper), re-checks EVERY bus, bus by bus (its
 * front slot, then its drained state), and parks with its ticket until the
 * sequence moves. No timeout is modelled: a lost wake-up leaves the waiter
 * parked for ever, with a message published and not dispatched or with a
 * close it never saw: an invalid end state.
 *
 * SPIN interleaves statements one at a time (sequential consistency), which
 * is what both sides' seq_cst fences give the Dekker pair of SYNC POINT (W):
 * a producer's store (slot or closed tail), fence, load of `sleepers`; the
 * waiter's increment of `sleepers`, fence, loads of each bus.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the waiter's re-check after announcing looks at the first bus only;
 *  2: bus 2's notifier wakes a signal of its own, not the set's (a bus that
 *     did not join the set, which Wait refuses with kNotMember);
 *  3: bus 2's notifiers (its publishes and its Close) load `sleepers`
 *     before their store is visible (they skip the fence);
 *  4: the re-check after announcing looks for messages but not for the
 *     buses' close (the all-drained end).
 */

#define NMSG 2
#define NBUS 2

byte published[NBUS];   /* slots whose sequence store is visible */
byte consumed[NBUS];
bit closed[NBUS];       /* the close state; nothing is published after it */
byte sleepers = 0;      /* the set's WakeSignal::waiters_ */
byte wake_seq = 0;      /* the set's WakeSignal::sequence_ */
byte own_sleepers = 0;  /* bug 2: bus 2's own signal, which nobody sleeps on */
byte own_seq = 0;

/* WakeSignal::Notify on the signal bus `b` wakes: fence, load of sleepers,
   and if there is one, a sequence bump (then the parker's WakeAll). */
inline notify(b) {
#if PLANTED_BUG == 2
  if
  :: b == 1 ->
     if
     :: own_sleepers != 0 -> own_seq++
     :: else -> skip
     fi
  :: else ->
#endif
     if
     :: sleepers != 0 -> wake_seq++
     :: else -> skip
     fi
#if PLANTED_BUG == 2
  fi
#endif
}

proctype Producer(byte b) {
  byte i = 0;
  bit saw;
  do
  :: i < NMSG ->
#if PLANTED_BUG == 3
     if
     :: b == 1 ->
        /* The load of sleepers overtakes the store that publishes. */
        saw = (sleepers != 0);
        published[b]++;
        if
        :: saw -> wake_seq++
        :: else -> skip
        fi
     :: else ->
        published[b]++;
        notify(b)
     fi;
#else
     published[b]++;
     notify(b);
#endif
     i++
  :: else -> break
  od;
  /* Close: the closed tail's store, then the notify. */
#if PLANTED_BUG == 3
  if
  :: b == 1 ->
     saw = (sleepers != 0);
     closed[b] = 1;
     if
     :: saw -> wake_seq++
     :: else -> skip
     fi
  :: else ->
     closed[b] = 1;
     notify(b)
  fi
#else
  closed[b] = 1;
  notify(b)
#endif
}

/* Bus b is ready (TryFront) / drained (IsDrained): one read each. After
   its close nothing more is published to it, so `closed` and then the
   positions read in one step is what IsDrained's two loads see. */
#define READY(b)   (consumed[b] < published[b])
#define DRAINED(b) (closed[b] && consumed[b] == published[b])

proctype Waiter() {
  byte seq;
  bit r0, r1, d0, d1;
  do
  :: true ->
     /* ProcessBatchWait's dispatch: one message per ready bus, in order. */
     r0 = READY(0);
     r1 = READY(1);
     if
     :: r0 || r1 ->
        if
        :: r0 -> consumed[0]++
        :: else -> skip
        fi;
        if
        :: r1 -> consumed[1]++
        :: else -> skip
        fi
     :: else ->
        /* Nothing found: WaitUntil's stop check, then the announcement on
           the shared signal (PrepareWait: ticket, increment, fence). */
        d0 = DRAINED(0);
        d1 = DRAINED(1);
        if
        :: d0 && d1 -> break           /* kAllDrained */
        :: else -> skip
        fi;
        seq = wake_seq;
        sleepers++;
        /* The re-check of every bus (RecheckAfterAnnouncing: ready, then
           stop), each bus's loads after the announcement. */
        r0 = READY(0);
#if PLANTED_BUG == 1
        r1 = 0;
#else
        r1 = READY(1);
#endif
#if PLANTED_BUG == 4
        d0 = 0;
        d1 = 0;
#else
        d0 = DRAINED(0);
        d1 = DRAINED(1);
#endif
        if
        :: r0 || r1 || (d0 && d1) -> sleepers--   /* CancelWait */
        :: else ->
           (wake_seq != seq);                     /* Wait: parked until woken */
           sleepers--
        fi
     fi
  od;
  assert(consumed[0] == NMSG && consumed[1] == NMSG)
}

init {
  atomic {
    run Producer(0);
    run Producer(1);
    run Waiter()
  }
}
