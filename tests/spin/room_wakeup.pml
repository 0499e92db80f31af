/*
 * Producers that wait for room: no lost wake-up.
 *
 * Models include/sluice/bus.hpp (Bus::PublishBlocking, the consumer's room
 * check after each batch, Bus::Close) with one wake signal per priority
 * (include/sluice/detail/wait/wake_signal.hpp: a count of waiters and a wake
 * sequence), over the ring of include/sluice/detail/queue/ring.hpp.
 *
 * The ring: `tail` counts claims, `released` the slots the consumer handed
 * back; depth = tail - released. A claim of priority p succeeds iff
 * depth < L[p], with L[LOW] = 1 < L[MEDIUM] = CAP = 2. The claim is one
 * atomic step here (ring.pml checks the claim itself: a refusal is real as
 * of the producer's read of `released`). Positions do not wrap.
 *
 * PublishBlocking, priority p:
 *   loop: claim -> admitted: publish, return
 *         closed -> return closed
 *         ticket = seq[p]; waiters[p]++; seq_cst fence
 *         claim -> admitted: waiters[p]--, publish, return
 *         closed -> waiters[p]--, return closed
 *         park until seq[p] != ticket; waiters[p]--
 * The consumer hands each slot back after its message (PopFront's store of
 * `released`) and, after the batch, fences and then, for each p, wakes
 * priority p (seq[p]++, wake all) if waiters[p] != 0 and depth < L[p]; a
 * batch ends after any number of messages. A batch that stores `released`
 * once, n slots at a time, is one of these interleavings. Close moves the
 * tail far beyond every limit (one RMW), sets `closed`, fences, and wakes
 * every priority that has a waiter.
 *
 * Instance: a LOW producer with NMSG_LOW blocking publishes and two MEDIUM
 * producers (two waiters on one signal) with NMSG_MEDIUM1 and NMSG_MEDIUM2;
 * the consumer; in some runs a closer, which then closes at any point. HIGH
 * is left out: with CAP = 2 its limit is MEDIUM's, and its signal would be a
 * copy of MEDIUM's. A woken waiter can find the room taken by another
 * producer's claim and park again.
 *
 * A park is a futex wait with no timeout: it blocks until seq[p] differs from
 * the ticket (the kernel compares and sleeps atomically), and a wake reaches
 * every waiter on the word (FUTEX_WAKE with INT_MAX, notify_all). Spurious
 * returns and timeouts are not modelled; they only lead to one more pass of
 * the loop, or out of it.
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution; the C++ argument needs exactly that for its two Dekker pairs,
 * which is why every side fences between its store and its load:
 *  - the waiter's waiters[p] RMW, fence, re-check (load of `released`);
 *    the consumer's store of `released`, fence, load of waiters[p];
 *  - the waiter's waiters[p] RMW, fence, load of `closed`; Close's store of
 *    `closed`, fence, load of waiters[p].
 * Either the waiter's re-check sees the room (or `closed`), or the waker sees
 * the waiter and bumps seq[p] after the ticket was read, so the park returns.
 * The consumer's loads of waiters[p] and of `tail` are separate steps.
 *
 * Properties:
 *  - no producer sleeps while a claim of its priority would succeed: at the
 *    end of each room check, no producer is parked on the current seq[p]
 *    while depth < L[p] (assertion: sleeper_with_room). The wake is not
 *    only eventual: it comes with the batch that made the room;
 *  - none sleeps once the bus is closed: at the end of Close, no producer is
 *    parked on the current seq[p] (assertion: sleeper_after_close);
 *  - no deadlock and no loss: the consumer ends once every publish has been
 *    admitted and dispatched, or, closed, once every admitted message has
 *    been dispatched; every producer ends. A producer parked for ever, or a
 *    message never dispatched, is an invalid end state.
 * The state graph has no cycle although a waiter may park again and again:
 * each park waits for a new value of seq[p], which only grows, so the cycle
 * check (pan -l) needs no progress label.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the consumer loads waiters[p] before its `released` stores are visible
 *     (no fence: the store-load reordering the fence forbids);
 *  2: the producer reads its ticket after the re-check, so a wake between
 *     the two is not seen by the park;
 *  3: the consumer's room check uses L[LOW] for every priority, so a MEDIUM
 *     waiter is not woken at L[LOW] <= depth < L[MEDIUM];
 *  4: Close does not wake the waiters;
 *  5: the waiters of a priority are announced with a flag (stores of 1 and
 *     0, as WakeSignal's `sleeping_` for the one consumer), not counted: a
 *     waiter that leaves clears the announcement of one still parked;
 *  6: a wake reaches one waiter of the priority, not all (FUTEX_WAKE with 1,
 *     notify_one, a semaphore given once): after Close, the other sleeps.
 * All but 3 can leave a producer parked for ever (invalid end states, with
 * the two assertions taken out). Bug 3 only delays the wake: the batch that
 * empties the queue wakes every waiter, so sleeper_with_room catches it.
 */

#ifndef NMSG_LOW
#define NMSG_LOW 1
#endif
#ifndef NMSG_MEDIUM1
#define NMSG_MEDIUM1 2
#endif
#ifndef NMSG_MEDIUM2
#define NMSG_MEDIUM2 1
#endif
#define CAP 2
#define NPRIO 2               /* LOW, MEDIUM; HIGH would be MEDIUM again */
#define LOW 0
#define MEDIUM 1
#define NPROD 3
#define NPOS (NMSG_LOW + NMSG_MEDIUM1 + NMSG_MEDIUM2)   /* no wrap */
#define JUMP 16               /* Ring::kClosedJump, scaled down; > NPOS */

byte limit[NPRIO];    /* L[p], set by init */
byte tail = 0;        /* producer_.tail */
byte released = 0;    /* consumer_.released */
bit published[NPOS];  /* the slot's sequence store */
bit closed = 0;       /* close_state_ == kClosed */
byte waiters[NPRIO];  /* per-priority wake signal: announced waiters */
byte seq[NPRIO];      /* per-priority wake signal: wake sequence */

/* Ghosts. */
byte prio[NPROD];
byte ticket[NPROD];   /* each producer's ticket (a local in the C++) */
bit parked[NPROD];    /* committed to, or inside, the futex wait */
#if PLANTED_BUG == 6
bit asleep[NPROD];    /* inside the futex wait until a wake picks it */
#endif

#define DEPTH (tail - released)
#define ADMITTED (tail % JUMP)   /* claims, with Close's jump taken out */

/* A producer parked on the current sequence: only a wake can free it. */
#if PLANTED_BUG == 6
#define SLEEPS(i) (parked[i] && ticket[i] == seq[prio[i]] || asleep[i])
#else
#define SLEEPS(i) (parked[i] && ticket[i] == seq[prio[i]])
#endif
#define SLEEPS_WITH_ROOM(i) (SLEEPS(i) && DEPTH < limit[prio[i]])

#if PLANTED_BUG == 3
#define ROOM_LIMIT(p) limit[LOW]
#else
#define ROOM_LIMIT(p) limit[p]
#endif

#if PLANTED_BUG == 5
#define ANNOUNCE(p) waiters[p] = 1
#define RETIRE(p) waiters[p] = 0
#else
#define ANNOUNCE(p) waiters[p]++
#define RETIRE(p) waiters[p]--
#endif

#if PLANTED_BUG == 6
/* The bump, then a wake of one sleeper of priority p, if any. */
#define WAKE_ONE(i, p) :: asleep[i] && prio[i] == p -> asleep[i] = 0
#define WAKE(p)                                              \
  atomic {                                                   \
    seq[p]++;                                                \
    if WAKE_ONE(0, p) WAKE_ONE(1, p) WAKE_ONE(2, p) :: else fi \
  }
#else
/* fetch_add on the sequence, then the futex wake of every waiter on it. */
#define WAKE(p) seq[p]++
#endif

/*
 * PublishBlocking, nmsg times. A claim (Ring::TryClaimShared with the
 * priority's limit) is one step: the atomic guard takes the slot, `else` is
 * the refusal.
 */
proctype Producer(byte me; byte p; byte nmsg) {
  byte i = 0;
  byte pos;
  do
  :: i < nmsg ->
retry:
     if
     :: atomic { DEPTH < limit[p] -> pos = tail; tail++ }; goto admit
     :: else
     fi;
     if
     :: closed -> goto next   /* refused: closed */
     :: else
     fi;
#if PLANTED_BUG != 2
     ticket[me] = seq[p];
#endif
     ANNOUNCE(p);
     /* seq_cst fence */
     if   /* the re-check */
     :: atomic { DEPTH < limit[p] -> pos = tail; tail++ }; RETIRE(p); goto admit
     :: else
     fi;
     if
     :: closed -> RETIRE(p); goto next
#if PLANTED_BUG == 2
     :: else
     fi;
     d_step { ticket[me] = seq[p]; parked[me] = 1 };
#else
     :: atomic { !closed -> parked[me] = 1 }
     fi;
#endif
#if PLANTED_BUG == 6
     /* Compare and sleep (one step); then sleep until a wake picks it. */
     atomic {
       if
       :: seq[p] == ticket[me] -> asleep[me] = 1
       :: else
       fi
     };
     atomic { !asleep[me] -> parked[me] = 0; ticket[me] = 0 };
#else
     atomic { seq[p] != ticket[me] -> parked[me] = 0; ticket[me] = 0 };   /* futex wait */
#endif
     RETIRE(p);
     goto retry;
admit:
     atomic { published[pos] = 1; pos = 0 };   /* Ring::Publish */
next:
     i++
  :: else -> break
  od
}

#if PLANTED_BUG == 1
#define WAITERS(p) stale[p]   /* loaded before the stores of `released` */
#else
#define WAITERS(p) waiters[p]
#endif

/* Wake priority p if it has waiters and room (room check after a batch). */
inline wake_if_room(p) {
  if
  :: WAITERS(p) != 0 ->
     if
     :: DEPTH < ROOM_LIMIT(p) -> WAKE(p)
     :: else
     fi
  :: else
  fi
}

/* Dispatches in position order; after each batch, the room check. */
proctype Consumer() {
  bit in_batch = 0;
  bit sleeper_with_room;
#if PLANTED_BUG == 1
  byte stale[NPRIO];
  byte pending = 0;   /* `released` stores still in the store buffer */
#endif
  do
#if PLANTED_BUG == 1
  :: released + pending < NPOS && published[released + pending] ->
     d_step { pending++; in_batch = 1 }
  :: in_batch ->
     /* The loads of waiters overtake the stores of `released`. */
     stale[LOW] = waiters[LOW];
     stale[MEDIUM] = waiters[MEDIUM];
     d_step { released = released + pending; pending = 0 };
#else
  :: released < NPOS && published[released] ->
     d_step { released++; in_batch = 1 }   /* dispatch, PopFront */
  :: in_batch ->
     /* seq_cst fence */
#endif
     wake_if_room(LOW);
     wake_if_room(MEDIUM);
     d_step {
       sleeper_with_room = SLEEPS_WITH_ROOM(0) || SLEEPS_WITH_ROOM(1) ||
                           SLEEPS_WITH_ROOM(2);
       assert(!sleeper_with_room);
       in_batch = 0
     }
  /* Every publish admitted and dispatched; closed, every admitted one. */
  :: !in_batch && (released == NPOS || closed && released == ADMITTED) -> break
  od
}

/* Bus::Close, at any point (init starts it in some runs only). */
proctype Closer() {
  bit sleeper_after_close;
  tail = tail + JUMP;   /* Ring::Close: one RMW */
  closed = 1;
#if PLANTED_BUG != 4
  /* seq_cst fence */
  if
  :: waiters[LOW] != 0 -> WAKE(LOW)
  :: else
  fi;
  if
  :: waiters[MEDIUM] != 0 -> WAKE(MEDIUM)
  :: else
  fi;
#endif
  atomic {
    sleeper_after_close = SLEEPS(0) || SLEEPS(1) || SLEEPS(2);
    assert(!sleeper_after_close)
  }
}

init {
  atomic {
    limit[LOW] = 1;
    limit[MEDIUM] = CAP;
    prio[0] = LOW;
    prio[1] = MEDIUM;
    prio[2] = MEDIUM;
    run Producer(0, LOW, NMSG_LOW);
    run Producer(1, MEDIUM, NMSG_MEDIUM1);
    run Producer(2, MEDIUM, NMSG_MEDIUM2);
    run Consumer();
    if
    :: run Closer()
    :: skip   /* the bus is never closed */
    fi
  }
}
