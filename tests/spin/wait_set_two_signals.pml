/*
 * One consumer sleeping on two buses whose notifiers wake different
 * signals: no lost wake-up. Models a WaitSet that lists an in-process bus
 * of the set (its publishes wake the set's signal) and a ShmBus (its
 * producers, in other processes, wake the segment's signal): the waiter
 * announces on both signals (include/sluice/detail/wait/signal_group.hpp,
 * SignalGroup::PrepareWait: each signal's ticket, then its waiter count),
 * re-checks both buses, and parks on both words at once (WaitAny:
 * futex_waitv), until either sequence leaves its ticket. Each bus has a
 * producer that publishes NMSG messages, each followed by a notify of its
 * bus's signal, then closes its bus (and notifies). No timeout or slice is
 * modelled: a lost wake-up leaves the waiter parked for ever with a
 * message not dispatched, or a close it never saw: an invalid end state.
 *
 * SPIN interleaves statements one at a time (sequential consistency), which
 * is what the seq_cst fences (or the heavy fence) give each signal's Dekker
 * pair of SYNC POINT (W).
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the waiter announces on the set's signal only, not the segment's;
 *  2: the park watches the set's word only (the segment's left out of
 *     futex_waitv);
 *  3: the segment's waiter count, which the waiter clears before it
 *     announces (a count a killed consumer left is stale: ShmBus's
 *     SetView::Signal), is cleared after the announcement instead.
 *  4: the re-check after announcing looks at the in-process bus only.
 */

#define NMSG 2
#define NBUS 2

byte published[NBUS];
byte consumed[NBUS];
bit closed[NBUS];
byte sleepers[NBUS];  /* [0]: the set's WakeSignal; [1]: the segment's */
byte wake_seq[NBUS];

/* WakeSignal::Notify of bus b's signal: fence, load of its waiter count,
   and if there is one, a sequence bump (then the parker's WakeAll). */
inline notify(b) {
  if
  :: sleepers[b] != 0 -> wake_seq[b]++
  :: else -> skip
  fi
}

proctype Producer(byte b) {
  byte i = 0;
  do
  :: i < NMSG ->
     published[b]++;
     notify(b);
     i++
  :: else -> break
  od;
  closed[b] = 1;
  notify(b)
}

#define READY(b)   (consumed[b] < published[b])
#define DRAINED(b) (closed[b] && consumed[b] == published[b])

proctype Waiter() {
  byte t0, t1;
  bit r0, r1, d0, d1, announced1;
  do
  :: true ->
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
        d0 = DRAINED(0);
        d1 = DRAINED(1);
        if
        :: d0 && d1 -> break
        :: else -> skip
        fi;
        /* The segment's count cleared (this waiter is its only one), then
           SignalGroup::PrepareWait: the set's signal, then the segment's. */
#if PLANTED_BUG != 3
        sleepers[1] = 0;
#endif
        t0 = wake_seq[0];
        sleepers[0]++;
#if PLANTED_BUG == 1
        t1 = wake_seq[1];
        announced1 = 0;
#elif PLANTED_BUG == 3
        t1 = wake_seq[1];
        sleepers[1]++;
        sleepers[1] = 0;
        announced1 = 0;
#else
        t1 = wake_seq[1];
        sleepers[1]++;
        announced1 = 1;
#endif
        /* The re-check of every bus, after both announcements. */
        r0 = READY(0);
#if PLANTED_BUG == 4
        r1 = 0;
#else
        r1 = READY(1);
#endif
        d0 = DRAINED(0);
        d1 = DRAINED(1);
        if
        :: r0 || r1 || (d0 && d1) -> skip                /* CancelWait */
        :: else ->
#if PLANTED_BUG == 2
           (wake_seq[0] != t0)                            /* parks on one word */
#else
           (wake_seq[0] != t0 || wake_seq[1] != t1)       /* WaitAny */
#endif
        fi;
        sleepers[0]--;
        if
        :: announced1 -> sleepers[1]--
        :: else -> skip
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
