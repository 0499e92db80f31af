/*
 * The SPSC ring's index protocol: one producer, one consumer.
 *
 * Models include/sluice/detail/queue/ring.hpp and claim_cursor.hpp with one
 * producer (ProducerModel::kSingle: SpscBus, every producer lane):
 *   ClaimCursor::TryClaimExclusive()  (the claim against the producer's copy
 *                         of `released`, re-read when it says full)
 *   Ring::Publish() -> ClaimCursor::Publish()  (the tail, stored after the
 *                         envelope: the consumer's index of what it may read;
 *                         no slot sequence is written)
 *   Ring::TryFront(), TryAt() -> ClaimCursor::IsPublished()  (the consumer's
 *                         copy of the tail; re-read only when it does not
 *                         cover the position; a closed tail, kClosedJump
 *                         ahead, is read back to the last publish)
 *   Ring::PopFront(), PopFronts()  (destroy, then release: one store for a
 *                         run of two)
 *   ClaimCursor::Close()  (the producer moves the tail kClosedJump ahead and
 *                         publishes no more)
 * The producer publishes NMSG messages into CAP = 2 slots, each under a limit
 * L chosen nondeterministically (1 or CAP), and may close the ring before
 * any of them. Positions grow without wrapping; unsigned distances are
 * emulated (a negative one counts as huge, as the C++ subtraction makes it).
 *
 * Properties (assertions):
 *  - the consumer reads only envelopes constructed and not yet destroyed,
 *    each the message claimed at that position;
 *  - no duplicate, per-producer order, and no loss: every admitted message
 *    is delivered (checked at the end);
 *  - the producer never constructs into a slot whose envelope has not been
 *    destroyed;
 *  - a refusal is real: when the producer read `released`, the queue held
 *    at least L messages;
 *  - nothing is published after Close; no deadlock (invalid end states).
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each must be caught:
 *  1: the tail published before the envelope is constructed;
 *  2: a closed tail taken as it is (not read back by kClosedJump);
 *  3: a run that looks past the consumer's copy of the tail without
 *     re-reading it;
 *  4: `released` published before the run's envelopes are destroyed;
 *  5: a refusal on the producer's copy of `released`, without re-reading it.
 */

#define CAP 2
#ifndef NMSG
#define NMSG 6
#endif
#define JUMP 100          /* kClosedJump: far beyond any position here */

/* Shared state, as in the C++ classes. */
short tail = 0;           /* producer_.tail: the published index */
short released = 0;       /* consumer_.released */
byte data[CAP];           /* slots_[i].storage: the message number */

/* Ghost state for the properties. */
bit occupied[CAP];        /* slot holds an envelope not yet destroyed */
byte claimed_by[NMSG + 1];/* message claimed at each position, +1 */
bit admitted[NMSG];
bit delivered[NMSG];
short last_delivered = -1;
short last_published = 0; /* the tail without the closed jump */
bit done = 0;

/* An unsigned distance d >= limit, a negative distance being huge. */
#define AT_LEAST(d, limit) ((d) < 0 || (d) >= (limit))

proctype Producer() {
  byte k = 0;
  byte L;
  short position = 0;     /* the producer's own tail */
  short cache = 0;        /* producer_.consumer_position_cache */
  short rel, fill_at_read;
  do
  :: k < NMSG ->
     if
     :: L = 1
     :: L = CAP
     fi;
     /* TryClaimExclusive */
     if
     :: AT_LEAST(position - cache, L) ->
#if PLANTED_BUG == 5
        fill_at_read = position - released;
        assert(fill_at_read >= L);
        goto refused
#else
        atomic { rel = released; fill_at_read = position - released };
        cache = rel;
        if
        :: AT_LEAST(position - rel, L) -> assert(fill_at_read >= L); goto refused
        :: else -> skip
        fi
#endif
     :: else -> skip
     fi;
     claimed_by[position] = k + 1;
#if PLANTED_BUG == 1
     /* Publish before the envelope exists. */
     d_step { tail = position + 1; last_published = position + 1 };
#endif
     /* Construct the envelope at Storage(position). */
     atomic {
       assert(!occupied[position % CAP]);
       occupied[position % CAP] = 1;
       data[position % CAP] = k;
       admitted[k] = 1
     };
#if PLANTED_BUG != 1
     /* Publish(): the tail, with release. */
     d_step { tail = position + 1; last_published = position + 1 };
#endif
     position++;
     k++;
     goto next;
refused:
     k++;
next:
     skip
  :: k < NMSG ->
     /* Close(): the tail jumps; no claim succeeds after it. */
     d_step { tail = tail + JUMP };
     break
  :: else -> break
  od;
  done = 1
}

/* Delivers the message at position q: its envelope must be there. */
inline deliver(q) {
  d_step {
    assert((q) < last_published);
    assert(occupied[(q) % CAP]);
    m = data[(q) % CAP];
    assert(claimed_by[q] == m + 1);
    assert(!delivered[m]);
    delivered[m] = 1;
    assert(m > last_delivered);
    last_delivered = m
  }
}

/* IsPublished's re-read of the tail (RefreshPublished). */
inline refresh() {
  t = tail;
#if PLANTED_BUG != 2
  if
  :: AT_LEAST(t - pos, CAP + 1) -> t = t - JUMP
  :: else -> skip
  fi;
  if
  :: AT_LEAST(t - pos, CAP + 1) -> t = pos
  :: else -> skip
  fi;
#endif
  pub = t
}

proctype Consumer() {
  short pos = 0;          /* consumer_.position */
  short pub = 0;          /* consumer_.published: its copy of the tail */
  short t;
  byte m;
  byte k;
  do
  :: pub != pos ->
     /* TryFront: covered by the copy. Deliver. */
     deliver(pos);
     k = 1;
     /* A run: TryAt(pos + 1), the copy first, re-read if it does not
        cover it; or the run ends there (another type, the batch's
        limit). */
     if
#if PLANTED_BUG == 3
     :: true -> deliver(pos + 1); k = 2
#else
     :: AT_LEAST(pub - pos, 2) -> deliver(pos + 1); k = 2
     :: !AT_LEAST(pub - pos, 2) ->
        refresh();
        if
        :: AT_LEAST(pub - pos, 2) -> deliver(pos + 1); k = 2
        :: else -> skip
        fi
#endif
     :: true -> skip
     fi;
     /* PopFront / PopFronts(k): destroy, then one release. */
#if PLANTED_BUG == 4
     released = pos + k;
     d_step { occupied[pos % CAP] = 0; occupied[(pos + k - 1) % CAP] = 0; pos = pos + k }
#else
     d_step { occupied[pos % CAP] = 0; occupied[(pos + k - 1) % CAP] = 0; pos = pos + k };
     released = pos
#endif
  :: pub == pos && (last_published != pub || done) ->
     /* TryFront not covered by the copy: read the tail again (a consumer
        that polls a tail with nothing new only stutters: not modelled). */
     refresh();
     if
     :: pub == pos && done && pos == last_published -> break
     :: else -> skip
     fi
  od;
  /* No loss. */
  for (m : 0 .. NMSG - 1) {
    assert(admitted[m] == delivered[m])
  }
}

init {
  atomic {
    run Producer();
    run Consumer()
  }
}
