/*
 * Sleeping across processes that can die: no lost wake-up, and no sleep
 * that a death leaves without an end.
 *
 * Models include/sluice/ipc/shm_bus.hpp: the consumer in ProcessBatchWait
 * (detail/wait/wake_signal.hpp's protocol on `consumer_wake`, in slices of the
 * peer check interval) and producers in PublishBlocking (the same protocol
 * on their lane's `room`, in slices after which they look whether the
 * consumer still runs). Each process may be killed between any two of its
 * steps (kill -9: it stops, nothing runs on its behalf).
 *
 * The queue holds CAP messages; a claim and its publish are one step here
 * (ring.pml checks claims). Two producers publish NMSG messages each, with
 * PublishBlocking; after each publish a producer notifies: if `sleepers`,
 * it bumps `wake_seq` (futex wake). The consumer takes a message when one is
 * published; with none, it announces its sleep (reads `wake_seq`, then
 * `sleepers` = 1), re-checks, and parks until `wake_seq` moves or its slice
 * ends. After each message it notifies the producers waiting for room.
 *
 * A slice end is modelled only where it is needed: the consumer's when a
 * producer has died (a producer killed between its publish and its notify
 * leaves a message the consumer was never told of), a producer's when the
 * consumer has died (a dead consumer wakes no one). With every process
 * alive, only a notify ends a park, so a lost wake-up shows.
 *
 * The property, checked with SPIN's `timeout` (no statement of the whole
 * system can run: in the real system, every process asleep until its
 * timeout): then the consumer must have nothing queued, and a producer
 * waiting for room must really have none, with its consumer alive.
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution; the C++ argument needs exactly that for the two Dekker pairs
 * (the publish, fence, load of `sleepers` against `sleepers` = 1, fence,
 * re-check; the consumer's release of a slot, fence, load of `room_waiters`
 * against `room_waiters`++, fence, re-check), which the heavy fence of
 * ipc/shared_futex_parker.hpp provides across processes.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: a producer loads `sleepers` before its publish is visible;
 *  2: the consumer re-checks the queue before announcing its sleep;
 *  3: the consumer reads the wake sequence after its re-check;
 *  4: the consumer's sleep has no slice (a producer killed between its
 *     publish and its notify leaves it asleep with a message queued);
 *  5: a producer waiting for room never looks whether the consumer died;
 *  6: the consumer does not wake producers waiting for room.
 */

#define NMSG 2
#define CAP 1

byte published = 0;    /* messages in the queue's history, visible */
byte consumed = 0;
bit sleepers = 0;      /* consumer_wake's waiter count */
byte wake_seq = 0;     /* consumer_wake's sequence */
byte room_waiters = 0; /* the lane's room signal: waiter count */
byte room_seq = 0;     /* and sequence (one lane for both producers) */
byte running = 2;      /* producers neither finished nor dead */
byte dead_producers = 0;
bit consumer_dead = 0;

/* A kill -9 of a producer: any step may be its last. */
#define PRODUCER_MAY_DIE  if :: skip :: atomic { dead_producers++; running--; goto died } fi

proctype Producer() {
  byte sent = 0;
  byte t;
  bit saw;
  do
  :: sent == NMSG -> break
  :: sent < NMSG ->
retry:
     PRODUCER_MAY_DIE;
     if
     :: atomic { published - consumed < CAP && !consumer_dead -> published++ }
        PRODUCER_MAY_DIE;
        /* notify: fence, then the waiter count */
        if
        :: sleepers -> wake_seq++
        :: else -> skip
        fi;
        sent++
     :: atomic { published - consumed >= CAP && !consumer_dead } ->
        /* no room: announce, re-check (room or a closed consumer), park */
        t = room_seq;
        room_waiters++;
        PRODUCER_MAY_DIE;
        if
        :: published - consumed < CAP || consumer_dead -> room_waiters--
        :: else ->
           if
           :: room_seq != t
#if PLANTED_BUG != 5
           :: consumer_dead  /* the slice ends; it looks at the consumer */
#endif
           :: timeout -> assert(published - consumed >= CAP && !consumer_dead)
           fi;
           room_waiters--
        fi;
        goto retry
     :: consumer_dead -> break  /* kClosed */
#if PLANTED_BUG == 1
     :: atomic { published - consumed < CAP && !consumer_dead } ->
        /* A second way to publish, whose load of sleepers overtakes the
         * publish (the search takes either way). */
        saw = sleepers;
        published++;
        if
        :: saw -> wake_seq++
        :: else -> skip
        fi;
        sent++
#endif
     fi
  od;
  running--;
died:
  skip
}

/* A kill -9 of the consumer: any step may be its last. */
#define CONSUMER_MAY_DIE  if :: skip :: consumer_dead = 1; goto gone fi

/* The consumer's park: until the wake sequence moves, or (with a producer
 * dead) its slice ends; the timeout is the whole system asleep. */
#define PARK \
  if \
  :: wake_seq != seq \
  :: SLICE \
  :: timeout -> assert(consumed == published) \
  fi

#if PLANTED_BUG == 4
#define SLICE false
#else
#define SLICE dead_producers > 0 -> progress_slice: skip
#endif

proctype Consumer() {
  byte seq;
  do
  :: atomic { running == 0 && consumed == published } -> break
  :: consumed < published ->
     consumed++;
     CONSUMER_MAY_DIE;
#if PLANTED_BUG != 6
     /* room notify after the batch: fence, then the waiter count */
     if
     :: room_waiters > 0 -> room_seq++
     :: else -> skip
     fi
#endif
  :: consumed == published && running > 0 ->
     /* Empty: PrepareWait, the re-check, Wait. */
#if PLANTED_BUG == 2
     if
     :: consumed < published -> skip
     :: else ->
        seq = wake_seq;
        sleepers = 1;
        PARK;
        sleepers = 0
     fi
#elif PLANTED_BUG == 3
     sleepers = 1;
     if
     :: consumed < published -> sleepers = 0
     :: else ->
        seq = wake_seq;
        PARK;
        sleepers = 0
     fi
#else
     seq = wake_seq;
     sleepers = 1;
     CONSUMER_MAY_DIE;
     if
     :: consumed < published -> sleepers = 0   /* CancelWait */
     :: else ->
        PARK;
        sleepers = 0
     fi
#endif
  :: consumer_dead = 1; goto gone  /* killed between two batches */
  od;
gone:
  skip
}

init {
  atomic {
    run Producer();
    run Producer();
    run Consumer()
  }
}
