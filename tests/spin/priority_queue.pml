/*
 * The priority-ordered queue: one ring per priority, one claim cursor for
 * the fill of the whole queue.
 *
 * Models include/sluice/detail/message_queue.hpp (PriorityQueue::TryClaim,
 * ClaimInRun, Publish, TryFront, Select, PopFront) over
 * include/sluice/detail/claim_cursor.hpp (ClaimCursor::TryClaimShared and
 * Release, for the fill cursor and for each ring's) and
 * include/sluice/detail/ring.hpp (Ring::Publish, TryFront, PopFront).
 *
 * A publish of priority r with limit L:
 *  1. claims a position of the whole queue from the fill cursor under L:
 *     refused when fill >= L; the producers' cache of the consumer's
 *     released position is refreshed when it says the fill is at L, and a
 *     refusal stands only if the tail held still;
 *  2. claims a slot of ring r from that ring's cursor with limit CAP, again
 *     until it succeeds (ClaimInRun's loop);
 *  3. constructs the envelope and publishes it (the slot's sequence store).
 * The consumer's TryFront: while a run lasts (run_left != 0) it takes the
 * current ring's front if that is published; otherwise Select reads the
 * rings' fronts, one read a step: with K = 0 from HIGH down, stopping at the
 * first published; with K > 0 all of them, LOW first, then it picks LOW if
 * LOW is starved (passed_over >= K), else the highest published. It
 * dispatches the message, destroys it and releases the ring's position,
 * then the fill's (PopFront), and counts a waiting LOW as passed over.
 *
 * Instance: capacity CAP = 2. Two rings, LOW (0) and HIGH (1), the lowest
 * and the highest of the C++ three: with CAP = 2 no two lower rings can be
 * starved at once, so MEDIUM would only repeat one of them. Producer 0
 * publishes NMSG_LOW LOW messages with L[LOW] = 1 < CAP; producers 1 and 2
 * publish NMSG_HIGH1 and NMSG_HIGH2 HIGH messages with L[HIGH] = CAP, so two
 * producers contend for the HIGH ring's tail and cache, and the HIGH ring
 * fills (its claim takes the refresh path). The check interval is
 * INTERVAL = 2, so TryFront takes both its paths; init picks K = 0 (strict
 * priority) or K = 1 (a starvation limit). Positions grow without wrapping
 * (the model is too short to need it); unsigned distances are emulated: a
 * negative distance counts as huge, as the C++ unsigned subtraction makes
 * it. Close is not modelled: it is the fill cursor's Close, which
 * shutdown.pml checks for one cursor, and the rings are never closed.
 * Batches (TryClaimRun) are not modelled: a run claims several fill
 * positions in one CAS and then ring slots one at a time, which the count
 * argument of (1) covers the same way.
 *
 * Steps: every atomic block below holds one access to shared state (plus
 * local computation and ghost updates), with three merges:
 *  - the producer constructs the envelope in the step of its ring claim:
 *    the slot is its own from then on, and (2) is only checked earlier;
 *  - the consumer reads and dispatches the envelope in the step of the
 *    read that found it published: no producer touches a published slot
 *    until its ring position is released (one that did would fail the
 *    `occupied` assertion); it destroys the envelope in the step of the
 *    ring's release store (ring.pml checks that order);
 *  - the consumer waits for a published front, in the step of its next
 *    read: a published front stays published until the consumer pops it,
 *    so reading at the end of the wait or later is the same. A TryFront
 *    that finds nothing is left out: it only sets run_left = 0 and clears
 *    waiting_below, which the next Select recomputes before any use.
 *
 * Memory model: SPIN executes one statement at a time, so every execution
 * it explores is sequentially consistent, and every read returns the
 * freshest value. The C++ code is release/acquire, and each assertion
 * stands for a happens-before chain there:
 *  (1) room in the ring: from a producer's successful fill claim to its
 *      ring claim, ring r holds fewer than CAP claimed and unreleased
 *      positions by the freshest values (asserted at every step of the ring
 *      claim). So the ring claim is never refused (its re-check of the tail
 *      is never reached here) and never waits for the consumer. The count:
 *      each message is claimed in the fill before its ring and released
 *      from its ring before the fill, so the ring positions claimed and not
 *      released, over all rings, number at most the fill positions claimed
 *      and not released less this producer's own, and those number at most
 *      CAP. In the C++: PopFront's release store of
 *      the ring's `released` (B of ring r) is sequenced before its release
 *      store of the fill's `released` (B of the queue); the fill claim
 *      acquired the fill's, directly or through the producers' cache
 *      (release store, acquire load); so the ring claim's acquire load of
 *      the ring's `released` reads that ring release or a later one. The
 *      ring's tail is a relaxed RMW, so a producer can see another
 *      producer's ring claim without the ring release that made room for
 *      it; that release is a store the consumer has made (it comes before
 *      the fill release that some producer's admission acquired), and the
 *      C++ loop re-reads until it sees it. SPIN's reads are always fresh, so that
 *      stale refusal does not occur here.
 *  (2) slot reuse: no producer constructs into a slot whose previous
 *      envelope has not been destroyed. B of ring r: the destruction, then
 *      the ring's release store; the ring claim's acquire load.
 *  (3) no loss, no duplicate: every admitted message is dispatched exactly
 *      once (checked when all is done), and the consumer finds an admitted
 *      envelope of the ring it reads. A of ring r: the construction, then
 *      the sequence store with release; TryFront's acquire load.
 *  (4) admission: a fill claim succeeds only while fill < L by the freshest
 *      values, so the fill never exceeds CAP and LOW is never admitted at
 *      or above L[LOW]; a refusal is real (when the refusing producer read
 *      the fill's `released`, fill >= L). B of the queue: the claim's
 *      acquire load of `released` (or of the cache) against PopFront's
 *      release store; the tail itself is a relaxed RMW (the CAS).
 *  (5) order: when Select picks LOW, HIGH's front was not published when
 *      that Select began (so neither at Select's read of HIGH: a front
 *      stays published until the consumer pops it), unless LOW is starved:
 *      K > 0 and LOW's front has been passed over by at least K HIGH
 *      messages while it was published. With K > 0, once a Select has seen
 *      LOW's front published and K HIGH messages have been taken since, the
 *      next Select picks LOW. Per-producer FIFO: a producer's messages are
 *      dispatched in the order it published them. The reads are the
 *      acquire loads of A; the counters are the consumer's own.
 *      Within a priority the order is that of the ring claims, not of the
 *      fill claims: two producers of one priority can be dispatched out of
 *      the order of their message ids (fill positions); pan finds that
 *      interleaving when asked to assert it.
 *  No deadlock: every process reaches its end (invalid end states).
 * "Passed over" counts from a Select that saw the lower front: a LOW front
 * published just after a Select read LOW (or during a run) also waits for
 * the run that Select picked, up to INTERVAL HIGH messages that are not
 * counted. pan finds that interleaving (with INTERVAL = 1 too) when the
 * second assertion of (5) counts from publication instead.
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each must be caught:
 *  1: PopFront releases the fill's position before the ring's. A producer
 *     admitted in between finds its ring full by the freshest values: (1).
 *     Its claim then waits for the consumer's next store; without (1) pan
 *     finds no other error, but the cycle check (pan -l) reports the wait.
 *  2: the admission check is off by one (fill > L instead of fill >= L): (4).
 *  3: Select with K = 0 reads LOW first and takes it: (5).
 *  4: Select does not reset the counter of the ring it picks, so LOW, once
 *     starved, is picked again over HIGH: (5).
 *  5: PopFront never counts a waiting LOW as passed over, so it starves: (5).
 *  6: the fill claim refuses on the producers' cache without reading the
 *     consumer's `released`: the refusal is not real (4).
 * Bug 3 runs with K = 0 and bugs 4 and 5 with K = 1, the mode each is in.
 */

#define CAP 2
#define NRING 2            /* LOW = 0, HIGH = 1 */
#define LOW 0
#define HIGH 1
#define NPROD 3
#ifndef NMSG_LOW
#define NMSG_LOW 2
#endif
#ifndef NMSG_HIGH1
#define NMSG_HIGH1 2
#endif
#ifndef NMSG_HIGH2
#define NMSG_HIGH2 1
#endif
#define NMSG 2             /* message id = producer * NMSG + k */
#if NMSG_LOW > NMSG || NMSG_HIGH1 > NMSG || NMSG_HIGH2 > NMSG
#error "at most NMSG messages per producer"
#endif
#define NIDS (NPROD * NMSG)
#define INTERVAL 2         /* kPriorityCheckInterval */
#define NONE 255

/* The fill cursor: PriorityQueue::fill_. */
short tail = 0;            /* producer_.tail */
short cache = 0;           /* producer_.consumer_position_cache */
short released = 0;        /* consumer_.released */

/* The rings: rings_[r]'s cursor and slots; slot s of ring r is r * CAP + s. */
short rtail[NRING];
short rcache[NRING];
short rreleased[NRING];
short seq[NRING * CAP];    /* Slot::sequence */
byte data[NRING * CAP];    /* Slot::storage: the message id */

byte K;                    /* kStarvationLimit, chosen by init */
byte limit[NRING];         /* L[LOW], L[HIGH] */

/* Ghost state for the properties. */
bit occupied[NRING * CAP]; /* the slot holds an envelope not yet destroyed */
bit admitted[NIDS];
bit delivered[NIDS];
byte next_min[NPROD];      /* per-producer FIFO: the lowest k still allowed */
byte done = 0;

/* The ring of message m: producer 0 publishes LOW, the others HIGH. */
#define RING_OF(m) ((m) / NMSG == 0 -> LOW : HIGH)
/* An unsigned distance `d` >= limit, with a negative distance huge. */
#define AT_LEAST(d, lim) ((d) < 0 || (d) >= (lim))
/* Ring r's front (at the consumer's position) is published. */
#define FRONT(r) (seq[(r) * CAP + rpos[r] % CAP] == rpos[r] + 1)
/* (1): ring r has room by the freshest values. */
#define RING_ROOM(r) assert(rtail[r] - rreleased[r] < CAP)

/* The fill claim's test of its limit. */
#if PLANTED_BUG == 2
#define OVER(d, lim) ((d) < 0 || (d) > (lim))
#else
#define OVER(d, lim) AT_LEAST(d, lim)
#endif

proctype Producer(byte p; byte r; byte n) {
  byte k = 0;
  byte L = limit[r];
  short tl, rel, fill_at_read, slot;

  if
  :: n == 0 -> goto finished
  :: else -> skip
  fi;
  /* fill_.TryClaim(L): ClaimCursor::TryClaimShared. */
fill_claim:
  atomic { tl = tail };
  atomic {
    rel = cache;
    if
    :: OVER(tl - rel, L) -> goto fill_refresh
    :: else -> goto fill_cas
    fi
  };
fill_refresh:
#if PLANTED_BUG == 6
  /* Refuses on the cache, after the tail re-check. */
  atomic {
    if
    :: tail == tl ->
       assert(tail - released >= L);
       k++;
       tl = 0; rel = 0;
       if
       :: k < n -> goto fill_claim
       :: else -> goto finished
       fi
    :: else ->
       tl = tail;
       if
       :: OVER(tl - rel, L) -> goto fill_refresh
       :: else -> goto fill_cas
       fi
    fi
  };
#endif
  /* The consumer's released position, with the true fill at that moment. */
  atomic { rel = released; fill_at_read = tail - released };
  atomic {
    cache = rel;
    if
    :: (tl - rel > CAP || OVER(tl - rel, L)) -> goto fill_recheck
    :: else -> goto fill_cas
    fi
  };
fill_recheck:
  /* Refuse only if the tail held still. */
  atomic {
    if
    :: tail == tl ->
       /* (4): the refusal is real. */
       assert(fill_at_read >= L);
       k++;
       tl = 0; rel = 0; fill_at_read = 0;
       if
       :: k < n -> goto fill_claim
       :: else -> goto finished
       fi
    :: else ->
       tl = tail;
       if
       :: OVER(tl - rel, L) -> goto fill_refresh
       :: else -> goto fill_cas
       fi
    fi
  };
fill_cas:
  atomic {
    if
    :: tail == tl ->
       /* (4): admitted only below L by the freshest values. */
       assert(tail - released < L);
       tail = tl + 1;
       rel = 0; fill_at_read = 0;   /* dead */
       goto ring_claim
    :: else ->
       tl = tail;   /* the failed CAS loads the tail */
       if
       :: OVER(tl - rel, L) -> goto fill_refresh
       :: else -> goto fill_cas
       fi
    fi
  };

  /* ClaimInRun: rings_[r].TryClaim(CAP) until it succeeds. (1) holds at
     every step. */
ring_claim:
  atomic { tl = rtail[r]; RING_ROOM(r) };
  atomic {
    rel = rcache[r];
    RING_ROOM(r);
    if
    :: AT_LEAST(tl - rel, CAP) -> goto ring_refresh
    :: else -> goto ring_cas
    fi
  };
ring_refresh:
  atomic { rel = rreleased[r]; RING_ROOM(r) };
  atomic {
    rcache[r] = rel;
    RING_ROOM(r);
    if
    :: AT_LEAST(tl - rel, CAP) -> goto ring_recheck
    :: else -> goto ring_cas
    fi
  };
ring_recheck:
  atomic {
    RING_ROOM(r);
    if
    :: rtail[r] == tl -> goto ring_claim   /* refused: CpuRelax, retry */
    :: else ->
       tl = rtail[r];
       if
       :: AT_LEAST(tl - rel, CAP) -> goto ring_refresh
       :: else -> goto ring_cas
       fi
    fi
  };
ring_cas:
  atomic {
    RING_ROOM(r);
    if
    :: rtail[r] == tl ->
       rtail[r] = tl + 1;
       /* Construct the envelope: (2). The slot is this producer's now;
          constructing in the same step only checks (2) earlier. */
       slot = r * CAP + tl % CAP;
       assert(!occupied[slot]);
       occupied[slot] = 1;
       data[slot] = p * NMSG + k;
       admitted[p * NMSG + k] = 1;
       rel = 0;   /* dead */
       goto publish
    :: else ->
       tl = rtail[r];
       if
       :: AT_LEAST(tl - rel, CAP) -> goto ring_refresh
       :: else -> goto ring_cas
       fi
    fi
  };
publish:
  /* Publish: fill_.Commit is a no-op with several producers; the ring's
     sequence store (A). */
  atomic {
    seq[slot] = tl + 1;
    k++;
    tl = 0; slot = 0;   /* dead */
    if
    :: k < n -> goto fill_claim
    :: else -> goto finished
    fi
  };
finished:
  done++
}

/* Select's choice and the dispatch of the chosen front, in the step of the
   Select's last read: (5), then (3). */
inline choose_and_dispatch() {
  if
  :: chosen == LOW ->
     /* HIGH had no published front when this Select began (nor, the front
        being monotone until the consumer pops, at HIGH's read), or LOW is
        starved. */
     assert(!high_at_start || (K > 0 && passed_ghost >= K))
  :: else -> skip
  fi;
  /* A starved LOW gets the run. */
  if
  :: K > 0 && front_low && seen_low && passed_seen >= K -> assert(chosen == LOW)
  :: else -> skip
  fi;
  if
  :: K > 0 && front_low -> seen_low = 1
  :: else -> skip
  fi;
  cur = chosen;
  run_left = INTERVAL;
  chosen = NONE; front_low = 0; high_at_start = 0;   /* dead */
  dispatch()
}

/* The consumer takes the front of ring `cur`: (3). It owns the envelope:
   no producer touches a published slot before its position is released. */
inline dispatch() {
  slot = cur * CAP + rpos[cur] % CAP;
  m = data[slot];
  assert(occupied[slot]);
  assert(admitted[m] && RING_OF(m) == cur);
  assert(!delivered[m]);
  delivered[m] = 1;
  assert(m % NMSG >= next_min[m / NMSG]);
  next_min[m / NMSG] = m % NMSG + 1;
  m = 0   /* dead */
}

/* Select's first read, with K = 0: HIGH (LOW under bug 3); with K > 0: LOW.
   Records the ghost high_at_start. */
inline select_first() {
  high_at_start = FRONT(HIGH);
  front_low = 0;
  if
  :: K == 0 ->
#if PLANTED_BUG == 3
     if
     :: FRONT(LOW) -> front_low = 1; chosen = LOW; choose_and_dispatch(); goto pop
     :: else -> goto select_2nd
     fi
#else
     if
     :: FRONT(HIGH) -> chosen = HIGH; choose_and_dispatch(); goto pop
     :: else -> goto select_2nd
     fi
#endif
  :: else ->
     front_low = FRONT(LOW);
     goto select_2nd
  fi
}

proctype Consumer() {
  short rpos[NRING];       /* each ring's ConsumerPosition() */
  short fpos = 0;          /* the fill's ConsumerPosition() */
  byte cur = NONE;         /* current_ */
  byte run_left = 0;
  bit waiting_below;       /* waiting_below_, bit LOW */
  byte passed_over;        /* passed_over_[LOW] */
  bit front_low;           /* Select's read of LOW */
  byte chosen, slot, m;
  /* Ghosts for (5). */
  bit high_at_start;
  byte passed_ghost = 0;   /* HIGH messages dispatched while LOW's front was
                              published (and was the front), up to K */
  bit seen_low = 0;        /* a Select saw LOW's current front published */
  byte passed_seen = 0;    /* HIGH messages dispatched since then, up to K */

loop:
  do
  :: atomic {
       /* Waits for a published front (a TryFront that finds none changes
          nothing), then TryFront: the run's read, or Select's first. */
       (FRONT(LOW) || FRONT(HIGH)) ->
       if
       :: run_left != 0 && FRONT(cur) -> dispatch(); goto pop
       :: run_left != 0 && !FRONT(cur) -> goto select_1st
       :: run_left == 0 -> select_first()
       fi
     }
  :: (done == NPROD && fpos == tail) -> break
  od;
  /* No loss. */
  for (m : 0 .. NIDS - 1) {
    assert(admitted[m] == delivered[m])
  }
  goto end_consumer;

select_1st:
  atomic { select_first() };
select_2nd:
  /* The Select's second read, the choice and the dispatch. */
  atomic {
    if
    :: K == 0 ->
#if PLANTED_BUG == 3
       assert(FRONT(HIGH));   /* the gate saw a published front */
       chosen = HIGH
#else
       front_low = FRONT(LOW);
       assert(front_low);     /* the gate saw a published front */
       chosen = LOW
#endif
    :: else ->
       if
       :: front_low && passed_over >= K -> chosen = LOW
       :: else ->
          assert(front_low || FRONT(HIGH));   /* the gate saw one */
          chosen = (FRONT(HIGH) -> HIGH : LOW)
       fi;
       if
       :: chosen == HIGH && front_low -> waiting_below = 1
       :: chosen == HIGH && !front_low -> waiting_below = 0; passed_over = 0
       :: else -> waiting_below = 0
       fi;
#if PLANTED_BUG != 4
       if
       :: chosen == LOW -> passed_over = 0
       :: else -> skip
       fi
#endif
    fi;
    choose_and_dispatch()
  };

pop:
  /* PopFront. */
#if PLANTED_BUG == 1
  atomic { fpos++; released = fpos };
#endif
  /* The ring's: destroy, then release (B of ring `cur`). */
  atomic {
    occupied[slot] = 0;
    slot = 0;   /* dead */
    rpos[cur]++;
    rreleased[cur] = rpos[cur];
    /* Ghosts for (5). */
    if
    :: cur == HIGH ->
       if
       :: FRONT(LOW) && passed_ghost < K -> passed_ghost++
       :: else -> skip
       fi;
       if
       :: seen_low && passed_seen < K -> passed_seen++
       :: else -> skip
       fi
    :: else -> passed_ghost = 0; seen_low = 0; passed_seen = 0
    fi
  };
  atomic {
#if PLANTED_BUG != 1
    /* The fill's (B of the queue). */
    fpos++;
    released = fpos;
#endif
    run_left--;
#if PLANTED_BUG != 5
    if
    :: K > 0 && cur == HIGH && waiting_below && passed_over < K -> passed_over++
    :: else -> skip
    fi;
#endif
    if
    :: run_left == 0 -> cur = NONE   /* dead until the next Select */
    :: else -> skip
    fi;
    goto loop
  };
end_consumer:
  skip
}

init {
  atomic {
    /* The lap before each position: never position + 1. */
    seq[LOW * CAP + 0] = 0 + 1 - CAP;
    seq[LOW * CAP + 1] = 1 + 1 - CAP;
    seq[HIGH * CAP + 0] = 0 + 1 - CAP;
    seq[HIGH * CAP + 1] = 1 + 1 - CAP;
    limit[LOW] = 1;
    limit[HIGH] = CAP;
#if PLANTED_BUG == 3
    K = 0;
#elif PLANTED_BUG == 4 || PLANTED_BUG == 5
    K = 1;
#else
    if
    :: K = 0
    :: K = 1
    fi;
#endif
    run Producer(0, LOW, NMSG_LOW);
    run Producer(1, HIGH, NMSG_HIGH1);
    run Producer(2, HIGH, NMSG_HIGH2);
    run Consumer()
  }
}
