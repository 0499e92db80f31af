/*
 * The MPSC ring's claim / publish / release protocol.
 *
 * Models include/sluice/detail/queue/ring.hpp:
 *   Ring::TryClaimShared()  (the producers' claim, with the caller's limit)
 *   Ring::Publish()         (the slot's sequence store)
 *   Ring::TryFront(), PopFront(), Release()  (the consumer; `released` is
 *                            published after every message, after its
 *                            envelope is destroyed)
 *   Ring::TryAt(), PopFronts()  (the consumer's runs: it may take the
 *                            next position too when it is published, then
 *                            destroy both and publish `released` once)
 * Two producers publish NMSG messages each into a ring of CAP = 2 slots. Each
 * publish picks its limit L nondeterministically, 1 (< CAP) or 2 (= CAP), so
 * every mix of priorities is covered. Positions grow without wrapping (the
 * model is too short to need it); unsigned distances are emulated: a negative
 * distance counts as huge, as the C++ unsigned subtraction makes it.
 *
 * Properties (assertions):
 *  - no loss: every admitted message is delivered (checked when all is done);
 *  - no duplicate: no message is delivered twice;
 *  - per-producer order: a producer's admitted messages arrive in order;
 *  - the consumer reads the message claimed at that position;
 *  - a producer never constructs into a slot whose previous envelope has not
 *    been destroyed;
 *  - a refusal is real: when the refusing producer read `released`, the
 *    queue held tail - released >= L claimed and unreleased messages;
 *  - no deadlock: every process reaches its end (SPIN's invalid end states).
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each must be caught:
 *  1: refuse without re-reading the tail;
 *  2: publish `released` before destroying the envelope;
 *  3: claim with a load and a store instead of a CAS;
 *  4: a run that looks ahead without checking the slot's sequence;
 *  5: a run released after destroying only its first envelope.
 */

#define CAP 2
#define NPROD 2
#ifndef NMSG
#define NMSG 3
#endif
#define NPOS (NPROD * NMSG + 1)

/* Shared state, as in the C++ class. */
short tail = 0;            /* producer_.tail */
short cache = 0;           /* producer_.consumer_position_cache */
short released = 0;        /* consumer_.released */
short seq[CAP];            /* slots_[i].sequence */
byte data[CAP];            /* slots_[i].storage: the message id */

/* Ghost state for the properties. */
bit occupied[CAP];             /* slot holds an envelope not yet destroyed */
byte claimed_by[NPOS];     /* message id claimed at each position, +1 */
bit admitted[NPROD * NMSG];
bit delivered[NPROD * NMSG];
short last_delivered[NPROD];
byte done = 0;

/* An unsigned distance `a - b` >= limit, with a negative distance huge. */
#define AT_LEAST(d, limit) ((d) < 0 || (d) >= (limit))

proctype Producer(byte p) {
  byte k = 0;
  byte L;
  short tail_local, rel, t2, fill_at_read;
  do
  :: k < NMSG ->
     /* The limit of this publish's priority. */
     if
     :: L = 1
     :: L = CAP
     fi;
     /* TryClaimShared */
     tail_local = tail;
     rel = cache;
     do
     :: AT_LEAST(tail_local - rel, L) ->
        /* The read of `released`, with the true fill at that moment. */
        atomic { rel = released; fill_at_read = tail - released };
        cache = rel;
        if
        :: (AT_LEAST(tail_local - rel, L) || tail_local - rel > CAP) ->
#if PLANTED_BUG == 1
           assert(fill_at_read >= L);
           goto refused;
#else
           t2 = tail;
           if
           :: t2 == tail_local ->
              assert(fill_at_read >= L);
              goto refused
           :: else -> tail_local = t2
           fi
#endif
        :: else -> goto claim
        fi
     :: else ->
claim:
#if PLANTED_BUG == 3
        t2 = tail;
        if
        :: t2 == tail_local ->
           tail = tail_local + 1;
           claimed_by[tail_local] = p * NMSG + k + 1;
           goto claimed
        :: else -> tail_local = t2
        fi
#else
        atomic {
          if
          :: tail == tail_local ->
             tail = tail_local + 1;
             claimed_by[tail_local] = p * NMSG + k + 1;
             goto claimed
          :: else -> tail_local = tail   /* the failed CAS loads the tail */
          fi
        }
#endif
     od;
claimed:
     /* Construct the envelope, then Publish(). */
     atomic {
       assert(!occupied[tail_local % CAP]);
       occupied[tail_local % CAP] = 1;
       data[tail_local % CAP] = p * NMSG + k;
       admitted[p * NMSG + k] = 1
     };
     d_step { seq[tail_local % CAP] = tail_local + 1; k++ };
     goto next;
refused:
     k++;
next:
     skip
  :: else -> break
  od;
  done++
}

/* Delivers the message at position q. No producer touches its slot until it
   is released, so reading the envelope is one step (a producer that did
   would fail its `occupied` assertion). */
inline deliver(q) {
  d_step {
    m = data[(q) % CAP];
    assert(occupied[(q) % CAP]);
    assert(claimed_by[q] == m + 1);
    assert(!delivered[m]);
    delivered[m] = 1;
    assert(m % NMSG > last_delivered[m / NMSG]);
    last_delivered[m / NMSG] = m % NMSG
  }
}

proctype Consumer() {
  short pos = 0;
  byte m;
  byte k;
  do
  :: seq[pos % CAP] == pos + 1 ->
     /* TryFront, then deliver. */
     deliver(pos);
     k = 1;
     /* A run (the consumer core's DispatchRuns): TryAt(position + 1) looks at
        the next position; if it is published the run may take it too, or
        end there (another type, a clock reading, the batch's limit). */
     if
#if PLANTED_BUG == 4
     :: true -> deliver(pos + 1); k = 2   /* looks ahead without the sequence */
#else
     :: seq[(pos + 1) % CAP] == pos + 2 -> deliver(pos + 1); k = 2
#endif
     :: true -> skip
     fi;
     /* PopFront (k = 1), or PopFronts(k): destroy each, advance; one
        Release() for the run. */
#if PLANTED_BUG == 2
     released = pos + k;
     d_step { occupied[pos % CAP] = 0; occupied[(pos + k - 1) % CAP] = 0; pos = pos + k }
#elif PLANTED_BUG == 5
     /* The run released after destroying its first envelope only. */
     d_step { occupied[pos % CAP] = 0 };
     released = pos + k;
     d_step { occupied[(pos + k - 1) % CAP] = 0; pos = pos + k }
#else
     d_step { occupied[pos % CAP] = 0; occupied[(pos + k - 1) % CAP] = 0; pos = pos + k };
     released = pos
#endif
  :: (done == NPROD && pos == tail) -> break
  od;
  /* No loss. */
  for (m : 0 .. NPROD * NMSG - 1) {
    assert(admitted[m] == delivered[m])
  }
}

init {
  atomic {
    /* The lap before each position: never position + 1. */
    seq[0] = 0 + 1 - CAP;
    seq[1] = 1 + 1 - CAP;
    last_delivered[0] = -1;
    last_delivered[1] = -1;
    run Producer(0);
    run Producer(1);
    run Consumer()
  }
}
