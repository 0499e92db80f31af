/*
 * The priority-ordered queue: one ring per priority, one claim cursor for
 * the fill of the whole queue.
 *
 * Models include/sluice/detail/queue/message_queue.hpp (PriorityQueue::TryClaim,
 * ClaimRingSlots, Publish, TryFront, Look, Select, PopFront) over
 * include/sluice/detail/queue/claim_cursor.hpp (ClaimCursor::TryClaimShared,
 * ClaimedTail and Release, for the fill cursor and for each ring's) and
 * include/sluice/detail/queue/ring.hpp (Ring::Publish, TryFront,
 * HasUnpublishedClaim, PopFront). K is PriorityDelivery's starvation limit, N
 * its check interval.
 *
 * A publish of priority r with limit L:
 *  1. claims a position of the whole queue from the fill cursor under L:
 *     refused when fill >= L; the producers' cache of the consumer's
 *     released position is refreshed when it says the fill is at L, and a
 *     refusal stands only if the tail held still;
 *  2. claims a slot of ring r from that ring's cursor with limit CAP, again
 *     until it succeeds (ClaimRingSlots' loop);
 *  3. constructs the envelope and publishes it (the slot's sequence store).
 * The consumer, as in the C++:
 *  - Look(p) takes ring p's front if it is published (p becomes the current
 *    ring, with a new run of N); else it reads whether p is held: p's tail
 *    is past the consumer's position, a slot claimed and not yet published.
 *  - TryFront with K = 0: when the run is over (run_left = 0) it starts a
 *    new one and, unless the current ring is HIGH, looks above it:
 *    Look(HIGH), then, when HIGH is not held and the current ring is LOW,
 *    Look(MEDIUM); a held ring ends the TryFront with nullptr. Then the
 *    current ring's front if published, else Select: Look(p) from HIGH
 *    down, the first published front, or nullptr at the first held ring.
 *  - TryFront with K > 0: the current ring's front while the run lasts, else
 *    Select: it reads every ring's front, LOW first, and whether a ring
 *    without one is held; picks the lowest starved ring (front published,
 *    passed_over >= K) for a starvation run, else the highest published
 *    front, or nothing when a held ring lies above it; marks the rings
 *    below the pick that have a published front as waiting, resets the
 *    counters of those that have none and of the pick.
 *  - PopFront destroys the envelope and releases the ring's position, then
 *    the fill's, and, unless the run is a starvation run, counts each ring
 *    waiting below as passed over (up to K).
 *  - When TryFront returns nullptr, the consumer waits for a publish that
 *    comes after that TryFront's first access. With none, another TryFront
 *    would return nullptr too: it takes only a published front, and every
 *    front is as the last TryFront read it, or was not read because a held
 *    ring above stopped it, which is still held (tails only grow, and the
 *    consumer's position has not moved); the counters that pick a
 *    starvation run have not changed either.
 *
 * Instances: init picks one, and K = 0 (strict priority) or K = 1; N = 2,
 * so TryFront takes both its paths; CAP is the capacity (`cap`). Positions grow without wrapping (the
 * model is too short to need it); unsigned distances are emulated: a
 * negative distance counts as huge, as the C++ unsigned subtraction makes
 * it.
 *  A: capacity 2; rings LOW and HIGH (MEDIUM is never claimed there, so
 *     its reads, which find it empty and not held, are left out). Producer
 *     0 publishes NMSG_LOW (1) LOW messages with L[LOW] = 1 < CAP; producers
 *     1 and 2 publish NMSG_HIGH1 (2) and NMSG_HIGH2 (1) HIGH messages with
 *     L[HIGH] = CAP, so two producers contend for the HIGH ring's tail and
 *     cache, and the HIGH ring fills (its claim takes the refresh path).
 *  B: capacity 3; all three rings; every limit 3. Producer 0 publishes
 *     LOW, MEDIUM, HIGH, LOW in that order, producer 1 one HIGH. Capacity 3
 *     is what lets a LOW and a MEDIUM be passed over by one HIGH, so that
 *     both are starved at once, and a LOW wait while one HIGH producer's
 *     slot is claimed and not published and the other's, behind it, is
 *     published. Neither fits in A's capacity of 2, so A cannot tell the
 *     hold (bug 7) or the starvation runs' counting (bug 8) from their
 *     absence: with two rings a starvation run is LOW's, and no ring lies
 *     below LOW to be counted.
 * Message ids are stream * NMSG + k, a stream being one producer's messages
 * of one priority (A: one stream per producer; B: producer 0's LOW, MEDIUM
 * and HIGH, then producer 1's HIGH). Close is not modelled: it is the fill
 * cursor's Close, which shutdown.pml checks for one cursor, and the rings
 * are never closed. Batches (TryClaimRun) are not modelled: a run claims
 * several fill positions in one CAS and then its ring slots in one claim,
 * which the count argument of (1) covers the same way.
 *
 * Steps: every atomic block below holds one access to shared state (plus
 * local computation and ghost updates), with these merges:
 *  - the producer constructs the envelope in the step of its ring claim:
 *    the slot is its own from then on, and (2) is only checked earlier;
 *  - the consumer reads and dispatches the envelope in the step of the read
 *    that found it published (Select with K > 0: of its last read, HIGH's):
 *    no producer touches a published slot until its ring position is
 *    released (one that did would fail the `occupied` assertion); it
 *    destroys the envelope in the step of the ring's release store
 *    (ring.pml checks that order);
 *  - the consumer's wait is the guard of its next TryFront's first access;
 *  - LOW's HasUnpublishedClaim is not read: whether LOW is held decides
 *    nothing (the look above never reads LOW, and Select's choice comes to
 *    LOW last, where a front that is not published gives nullptr, held or
 *    not).
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
 *      the sequence store with release; TryFront's acquire load. FIFO per
 *      stream: a producer's messages of one priority are dispatched in the
 *      order it published them.
 *  (4) admission: a fill claim succeeds only while fill < L by the freshest
 *      values, so the fill never exceeds CAP and LOW is never admitted at
 *      or above L[LOW]; a refusal is real (when the refusing producer read
 *      the fill's `released`, fill >= L). B of the queue: the claim's
 *      acquire load of `released` (or of the cache) against PopFront's
 *      release store; the tail itself is a relaxed RMW (the CAS).
 *  (5) order, with the hold: when a run of ring c starts (a look above
 *      TryFront's current ring, or Select, picks c), no message of a ring
 *      above c that was published before the look (when the look began,
 *      or, for a ring the look reads, at that read) is still undispatched,
 *      unless the run is a starved ring's: K > 0 and c's front has been
 *      passed over, while published, by at least K messages of normal (not
 *      starvation) runs. The run's later messages need no check of their
 *      own: a run takes only ring c, so what waited at its look still
 *      waits, and what was published after the look may be passed by up to
 *      N - 1 more. The look's read of ring q is TryFront's acquire load of
 *      q's front slot and, when that is not published, the relaxed load of
 *      q's tail. In the C++ a publish that happens before that read is a
 *      published front (A), or sits behind the front, and then its ring
 *      claim, a RMW on the tail sequenced before it, is read by the tail
 *      load or a later value is (coherence): the ring is held. A publish
 *      not ordered before the read is one that the look may miss, as a
 *      publish after the read is here.
 *  (6) a starved ring gets the run: with K > 0, a Select that reads
 *      published the front of a ring below HIGH, which an earlier choosing
 *      Select had seen published and K messages of normal runs have passed
 *      over since, picks that ring (the lowest such), whether or not a ring
 *      above is held. The reads are the acquire loads of A; the counters
 *      are the consumer's own.
 *  (7) a starvation run passes over no one: while HIGH's front is
 *      published, each lower ring starts at most one run, so that front
 *      waits for at most the run under way and one run of each lower
 *      ring. (For a HIGH message behind other HIGH messages this does not
 *      hold: each HIGH message taken ahead of it counts, so with N = 1, in
 *      instance B, LOW runs twice after producer 1's publish has returned
 *      and before its message is taken. pan finds that interleaving when
 *      asked to assert one LOW run from the publish.)
 *  Within a priority the order is that of the ring claims, not of the fill
 *  claims: two producers of one priority can be dispatched out of the order
 *  of their message ids (fill positions); pan finds that interleaving when
 *  asked to assert it.
 *  No deadlock: every process reaches its end (invalid end states); a held
 *  ring never keeps the consumer waiting once its producer has published.
 * "Passed over" counts from a Select that saw the lower front: a LOW front
 * published just after a Select read LOW (or during a run) also waits for
 * the run that Select picked, up to N HIGH messages that are not counted.
 * pan finds that interleaving (with N = 1 too) when (6) counts from
 * publication instead.
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each must be caught; each runs in
 * one instance, and bugs 3 to 5 and 8 with the K they concern:
 *  1: (A) PopFront releases the fill's position before the ring's. A
 *     producer admitted in between finds its ring full by the freshest
 *     values: (1). Its claim then waits for the consumer's next store;
 *     without (1) pan finds no other error, but the cycle check (pan -l)
 *     reports the wait.
 *  2: (A) the admission check is off by one (fill > L instead of
 *     fill >= L): (4).
 *  3: (A, K = 0) Select reads LOW first and takes it: (5).
 *  4: (B, K = 1) Select does not reset the counter of the ring it picks, so
 *     LOW, once starved, is picked again: ahead of a starved MEDIUM, (6),
 *     or over HIGH, (5).
 *  5: (A, K = 1) PopFront never counts a waiting ring as passed over, so
 *     LOW starves: (6).
 *  6: (A) the fill claim refuses on the producers' cache without reading
 *     the consumer's `released`: the refusal is not real (4).
 *  7: (B) no hold: Look and Select take a held ring for an empty one. With
 *     HIGH's front claimed and not published and a published HIGH behind
 *     it, the consumer takes LOW: (5), with K = 0 and with K = 1 (no other
 *     property catches it).
 *  8: (B, K = 1) starvation runs are counted: a MEDIUM starvation run
 *     counts LOW as passed over, so LOW takes a starvation run over a
 *     published HIGH that no normal run has earned it: (5), whose
 *     exception counts normal runs only. With (5) left out, (7): LOW runs a
 *     second time while HIGH's front waits.
 */

#define NRING 3            /* LOW = 0, MEDIUM = 1, HIGH = 2, as MessagePriority */
#define LOW 0
#define MED 1
#define HIGH 2
#define TOP HIGH           /* kTop */
#define MAXCAP 3           /* the larger of the two instances' capacities */
#ifndef NMSG_LOW
#define NMSG_LOW 1
#endif
#ifndef NMSG_HIGH1
#define NMSG_HIGH1 2
#endif
#ifndef NMSG_HIGH2
#define NMSG_HIGH2 1
#endif
#define NMSG 2             /* message id = stream * NMSG + k */
#if NMSG_LOW > NMSG || NMSG_HIGH1 > NMSG || NMSG_HIGH2 > NMSG
#error "at most NMSG messages per stream"
#endif
#define NSTREAM 4
#define NIDS (NSTREAM * NMSG)
#define NPUB_B 4           /* instance B: producer 0's publishes (B_RING) */
#define INTERVAL 2         /* PriorityDelivery's check interval */
#define NONE 255

/* The fill cursor: PriorityQueue::fill_. */
short tail = 0;            /* producer_.tail */
short cache = 0;           /* producer_.consumer_position_cache */
short released = 0;        /* consumer_.released */

/* The rings: rings_[r]'s cursor and slots; slot s of ring r is
   r * MAXCAP + s. */
short rtail[NRING];
short rcache[NRING];
short rreleased[NRING];
short seq[NRING * MAXCAP]; /* Slot::sequence */
byte data[NRING * MAXCAP]; /* Slot::storage: the message id */

/* The instance, chosen by init. */
bit three;                 /* instance B: three rings */
byte cap;                  /* kCapacity */
byte K;                    /* PriorityDelivery's starvation limit */
byte limit[NRING];         /* L[LOW], L[MEDIUM], L[HIGH] */
byte nprod;
byte stream_ring[NSTREAM]; /* the ring of each stream's messages */

/* Ghost state for the properties. */
bit occupied[NRING * MAXCAP]; /* the slot holds an envelope not yet destroyed */
bit admitted[NIDS];
bit delivered[NIDS];
byte next_min[NSTREAM];    /* FIFO per stream: the lowest k still allowed */
byte done = 0;
byte pubs = 0;             /* publishes so far (the consumer's wait) */

#define SLOT(r, j) ((r) * MAXCAP + (j) % cap)
/* An unsigned distance `d` >= limit, with a negative distance huge. */
#define AT_LEAST(d, lim) ((d) < 0 || (d) >= (lim))
/* The message at position j of ring r is published (a slot's sequence is
   j + 1 only once position j's publish has stored it). */
#define PUB_AT(r, j) (seq[SLOT(r, j)] == (j) + 1)
/* Ring r's front (at the consumer's position) is published: TryFront. */
#define FRONT(r) PUB_AT(r, rpos[r])
/* A message of ring r is published and not yet taken (at most MAXCAP
   positions from the front are claimed). */
#define PENDING(r) (PUB_AT(r, rpos[r]) || PUB_AT(r, rpos[r] + 1) || PUB_AT(r, rpos[r] + 2))
/* Ring::HasUnpublishedClaim: ClaimedTail() != ConsumerPosition(). */
#if PLANTED_BUG == 7
#define HELD(r) false
#else
#define HELD(r) (rtail[r] != rpos[r])
#endif
/* (1): ring r has room by the freshest values. */
#define RING_ROOM(r) assert(rtail[r] - rreleased[r] < cap)
/* Instance B, producer 0's script: LOW, MEDIUM, HIGH, LOW; the ring and the
   message id (stream * NMSG + k) of its publish k, streams LOW, MED, HIGH.
   Producer 1 publishes one HIGH message, stream 3. */
#define B_RING(k) ((k) == 1 -> MED : ((k) == 2 -> HIGH : LOW))
#define B_ID(k) ((k) == 0 -> LOW * NMSG : ((k) == 3 -> LOW * NMSG + 1 : ((k) == 1 -> MED * NMSG : HIGH * NMSG)))

/* The fill claim's test of its limit. */
#if PLANTED_BUG == 2
#define OVER(d, lim) ((d) < 0 || (d) > (lim))
#else
#define OVER(d, lim) AT_LEAST(d, lim)
#endif

/* Producer p publishes n messages: in instance A all to ring r, ids
   p * NMSG + k; in instance B (r unused) the script B_RING, B_ID. */
proctype Producer(byte p; byte r; byte n) {
  byte k = 0;
  byte L, id;
  short tl, rel, fill_at_read, slot;

  if
  :: n == 0 -> goto finished
  :: else -> skip
  fi;
  /* fill_.TryClaim(L): ClaimCursor::TryClaimShared. The publish's ring
     and id are producer-local, chosen in its first step. */
fill_claim:
  atomic {
    if
    :: three && p == 0 -> r = B_RING(k); id = B_ID(k)
    :: three && p == 1 -> id = 3 * NMSG
    :: else -> id = p * NMSG + k
    fi;
    L = limit[r];
    tl = tail
  };
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
    :: (tl - rel > cap || OVER(tl - rel, L)) -> goto fill_recheck
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

  /* ClaimRingSlots: rings_[r].TryClaimExactly(CAP, 1) until it succeeds.
     (1) holds at every step. */
ring_claim:
  atomic { tl = rtail[r]; RING_ROOM(r) };
  atomic {
    rel = rcache[r];
    RING_ROOM(r);
    if
    :: AT_LEAST(tl - rel, cap) -> goto ring_refresh
    :: else -> goto ring_cas
    fi
  };
ring_refresh:
  atomic { rel = rreleased[r]; RING_ROOM(r) };
  atomic {
    rcache[r] = rel;
    RING_ROOM(r);
    if
    :: AT_LEAST(tl - rel, cap) -> goto ring_recheck
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
       :: AT_LEAST(tl - rel, cap) -> goto ring_refresh
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
       slot = SLOT(r, tl);
       assert(!occupied[slot]);
       occupied[slot] = 1;
       data[slot] = id;
       admitted[id] = 1;
       rel = 0;   /* dead */
       goto publish
    :: else ->
       tl = rtail[r];
       if
       :: AT_LEAST(tl - rel, cap) -> goto ring_refresh
       :: else -> goto ring_cas
       fi
    fi
  };
publish:
  /* Publish: fill_.Commit is a no-op with several producers; the ring's
     sequence store (A). */
  atomic {
    seq[slot] = tl + 1;
    pubs++;
    k++;
    tl = 0; slot = 0; id = 0; L = 0;   /* dead */
    if
    :: three && p == 0 -> r = 0
    :: else -> skip
    fi;
    if
    :: k < n -> goto fill_claim
    :: else -> goto finished
    fi
  };
finished:
  done++
}

/* The consumer's program counter: the shared access its next step makes. */
#define TF 0          /* TryFront's first access (the wait, when idle) */
#define LOOK_SEQ 1    /* K = 0, run over: Look(p) above the current ring */
#define LOOK_TAIL 2   /* ... its HasUnpublishedClaim */
#define CUR_READ 3    /* rings_[current_].TryFront() */
#define SEL 4         /* Select, no access yet */
#define SEL0_SEQ 5    /* K = 0 Select: Look(p), from HIGH down */
#define SEL0_TAIL 6
#define SELK_SEQ 7    /* K > 0 Select: fronts[p], from LOW up */
#define SELK_TAIL 8   /* ... held[p] */
#define POP_RING 9    /* PopFront: the ring's release */
#define POP_FILL 10   /* PopFront: the fill's release */

/* The ring below p that the instance has (B: MEDIUM; A: none between). */
#define BELOW(p) ((p) == HIGH && three -> MED : LOW)
#define ABOVE(p) ((p) == LOW && three -> MED : HIGH)

/* TryFront returns nullptr: the consumer waits for the next publish. */
inline none() {
  idle = 1;
  pc = TF;
  p = 0; looked = 0; pend = 0; fronts = 0; helds = 0
}

/* The look starts (TryFront's look above, or Select): what each ring has
   published and not yet taken, refreshed at each ring's own read. */
inline look_begin() {
  pend = (PENDING(LOW) -> 1 : 0) | (PENDING(MED) -> 2 : 0) | (PENDING(HIGH) -> 4 : 0)
}
inline look_read(q) {
  pend = (pend & ~(1 << (q))) | (PENDING(q) -> 1 << (q) : 0)
}

/* A run of `cur` starts (current_ chosen, run_left_ = kCheckInterval):
   (5) and (7). */
inline run_start() {
  /* (7): while HIGH's front is published, each lower ring starts at most
     one run. */
  if
  :: cur < TOP && FRONT(HIGH) -> assert(!hf_run[cur]); hf_run[cur] = 1
  :: else -> skip
  fi;
  /* (5): no message of a higher ring that was published before the look
     (at the look's start, or at its read of that ring) is still waiting,
     unless the run is a starved ring's: its front was passed over by K
     messages of normal runs while published. */
  assert((pend >> (cur + 1)) == 0 || (K > 0 && cur < TOP && passed_ghost[cur] >= K));
  pend = 0; looked = 0
}

/* The consumer takes the front of ring `cur`: (3) and FIFO per stream. It
   owns the envelope: no producer touches a published slot before its
   position is released. */
inline take() {
  slot = SLOT(cur, rpos[cur]);
  m = data[slot];
  assert(occupied[slot]);
  assert(admitted[m] && stream_ring[m / NMSG] == cur);
  assert(!delivered[m]);
  delivered[m] = 1;
  assert(m % NMSG >= next_min[m / NMSG]);
  next_min[m / NMSG] = m % NMSG + 1;
  m = 0; p = 0;   /* dead */
  pc = POP_RING
}

/* Ghosts at the ring's release of `cur`'s front. */
inline pop_ghosts() {
  if
  :: K > 0 && !starvation_run ->
     /* A message of a normal run passes over the published fronts below. */
     if
     :: cur > LOW && FRONT(LOW) -> passed_ghost[LOW] = 1
     :: else -> skip
     fi;
     if
     :: cur > MED && FRONT(MED) -> passed_ghost[MED] = 1
     :: else -> skip
     fi;
     if
     :: cur > LOW && seen[LOW] -> passed_seen[LOW] = 1
     :: else -> skip
     fi;
     if
     :: cur > MED && seen[MED] -> passed_seen[MED] = 1
     :: else -> skip
     fi
  :: else -> skip
  fi;
  if
  :: cur < TOP -> passed_ghost[cur] = 0; seen[cur] = 0; passed_seen[cur] = 0
  :: else -> hf_run[LOW] = 0; hf_run[MED] = 0   /* HIGH has a new front */
  fi
}

/* Select with K > 0, in the step of its last read: the choice. */
inline select_choose() {
  chosen = NONE;
  starvation_run = 0;
  /* A starved priority first, the lowest first. */
  if
  :: (fronts & 1) && passed_over[LOW] >= K -> chosen = LOW; starvation_run = 1
  :: else ->
     if
     :: three && (fronts & 2) && passed_over[MED] >= K -> chosen = MED; starvation_run = 1
     :: else -> skip
     fi
  fi;
  /* Else the highest published front, stopping at a held ring. */
  if
  :: chosen == NONE ->
     if
     :: fronts & 4 -> chosen = HIGH
     :: !(fronts & 4) && (helds & 4) -> skip
     :: !(fronts & 4) && !(helds & 4) ->
        if
        :: fronts & 2 -> chosen = MED
        :: !(fronts & 2) && (helds & 2) -> skip
        :: !(fronts & 2) && !(helds & 2) ->
           if
           :: fronts & 1 -> chosen = LOW
           :: else -> skip
           fi
        fi
     fi
  :: else -> skip
  fi;
  /* (6): a starved ring gets the run: the lowest ring whose front this
     Select read published, that a choosing Select had seen published
     before, and that K messages of normal runs have passed over since. */
  if
  :: (fronts & 1) && seen[LOW] && passed_seen[LOW] >= K -> assert(chosen == LOW)
  :: else ->
     if
     :: (fronts & 2) && seen[MED] && passed_seen[MED] >= K -> assert(chosen == MED)
     :: else -> skip
     fi
  fi;
  waiting_below = 0;
  if
  :: chosen == NONE -> none()
  :: else ->
     /* The rings below the chosen one: waiting, or nothing waits there. */
     if
     :: chosen > LOW && (fronts & 1) -> waiting_below = 1
     :: chosen > LOW && !(fronts & 1) -> passed_over[LOW] = 0
     :: else -> skip
     fi;
     if
     :: chosen > MED && (fronts & 2) -> waiting_below = waiting_below | 2
     :: chosen > MED && !(fronts & 2) -> passed_over[MED] = 0
     :: else -> skip
     fi;
#if PLANTED_BUG != 4
     if
     :: chosen < TOP -> passed_over[chosen] = 0
     :: else -> skip
     fi;
#endif
     if
     :: fronts & 1 -> seen[LOW] = 1
     :: else -> skip
     fi;
     if
     :: fronts & 2 -> seen[MED] = 1
     :: else -> skip
     fi;
     cur = chosen;
     run_left = INTERVAL;
     chosen = NONE; fronts = 0; helds = 0; p = 0;   /* dead */
     run_start();
     take()
  fi
}

proctype Consumer() {
  short rpos[NRING];       /* each ring's ConsumerPosition() */
  short fpos = 0;          /* the fill's ConsumerPosition() */
  byte cur = LOW;          /* current_ */
  byte run_left = 0;       /* run_left_ */
  byte waiting_below = 0;  /* waiting_below_: bit 0 LOW, bit 1 MEDIUM */
  byte passed_over[2];     /* passed_over_[LOW], [MEDIUM] */
  bit starvation_run = 0;  /* starvation_run_ */
  byte fronts = 0;         /* Select's fronts[p] != nullptr, bit p */
  byte helds = 0;          /* Select's held[p], bit p */
  byte pc = TF;
  byte p = 0;              /* the ring the next read is of */
  byte chosen = NONE;
  byte slot, m;
  bit looked = 0;          /* this TryFront looked above: its take starts a run */
  bit idle = 1;            /* the last TryFront returned nullptr */
  byte seen_pubs = 0;      /* pubs at that TryFront's first access */
  /* Ghosts for (5), (6), (7). */
  byte pend = 0;           /* bit q: ring q had a message published and not
                              taken at the look */
  bit passed_ghost[2];     /* K messages of normal runs were taken while
                              this ring's front was published (K <= 1) */
  bit seen[2];             /* a choosing Select saw this ring's front */
  bit passed_seen[2];      /* K messages of normal runs taken since then */
  bit hf_run[2];           /* a run of this ring started while HIGH's
                              current front was published */

  do
  :: atomic {
       (pc != TF || ((!idle || pubs != seen_pubs) && !(done == nprod && fpos == tail))) ->
       if
       :: pc == TF ->
          /* TryFront. */
          idle = 0;
          seen_pubs = pubs;
          if
          :: K == 0 && run_left == 0 ->
             /* Time to look above the current ring. */
             run_left = INTERVAL;
             looked = 1;
             if
             :: cur != TOP -> look_begin(); p = TOP; pc = LOOK_SEQ
             :: else -> pc = CUR_READ
             fi
          :: K > 0 && run_left == 0 -> pc = SEL
          :: else -> pc = CUR_READ
          fi
       :: else -> skip
       fi;
       if
       :: pc == SEL ->
          /* Select, before its first read. */
          run_left = 0;
          look_begin();
          looked = 0;
          if
#if PLANTED_BUG == 3
          :: K == 0 -> p = LOW; pc = SEL0_SEQ
#else
          :: K == 0 -> p = TOP; pc = SEL0_SEQ
#endif
          :: else -> p = LOW; pc = SELK_SEQ
          fi
       :: else -> skip
       fi;
       /* The step's one access to shared state. */
       if
       :: pc == LOOK_SEQ ->
          /* Look(p): TryFront of ring p. */
          look_read(p);
          if
          :: FRONT(p) -> cur = p; run_left = INTERVAL; run_start(); take()
          :: else -> pc = LOOK_TAIL
          fi
       :: pc == LOOK_TAIL ->
          /* Look(p): HasUnpublishedClaim. */
          if
          :: HELD(p) -> run_left = 0; none()
          :: else ->
             if
             :: p == TOP && cur == LOW && three -> p = MED; pc = LOOK_SEQ
             :: else -> p = 0; pc = CUR_READ
             fi
          fi
       :: pc == CUR_READ ->
          if
          :: FRONT(cur) ->
             if
             :: looked -> run_start()
             :: else -> skip
             fi;
             take()
          :: else -> looked = 0; pc = SEL
          fi
       :: pc == SEL0_SEQ ->
          look_read(p);
          if
          :: FRONT(p) -> cur = p; run_left = INTERVAL; p = 0; run_start(); take()
#if PLANTED_BUG == 3
          /* LOW first, then up. */
          :: !FRONT(p) && p == TOP -> none()
          :: !FRONT(p) && p != TOP -> p = ABOVE(p)
#else
          /* LOW's held flag decides nothing: its tail read is left out. */
          :: !FRONT(p) && p == LOW -> none()
          :: !FRONT(p) && p != LOW -> pc = SEL0_TAIL
#endif
          fi
       :: pc == SEL0_TAIL ->
          if
          :: HELD(p) -> none()
          :: else -> p = BELOW(p); pc = SEL0_SEQ
          fi
       :: pc == SELK_SEQ ->
          look_read(p);
          if
          :: FRONT(p) -> fronts = fronts | (1 << p)
          :: else -> skip
          fi;
          if
          :: p == TOP && FRONT(p) -> select_choose()
          :: p != TOP && (FRONT(p) || p == LOW) -> p = ABOVE(p)   /* LOW's held: unused */
          :: else -> pc = SELK_TAIL
          fi
       :: pc == SELK_TAIL ->
          if
          :: HELD(p) -> helds = helds | (1 << p)
          :: else -> skip
          fi;
          if
          :: p == TOP -> select_choose()
          :: else -> p = ABOVE(p); pc = SELK_SEQ
          fi
       :: pc == POP_RING ->
#if PLANTED_BUG == 1
          /* The fill's first. */
          fpos++;
          released = fpos;
          pc = POP_FILL
#else
          /* The ring's: destroy, then release (B of ring `cur`). */
          occupied[slot] = 0;
          slot = 0;   /* dead */
          rpos[cur]++;
          rreleased[cur] = rpos[cur];
          pc = POP_FILL;
          /* Ghosts for (5), (6), (7). */
          pop_ghosts()
#endif
       :: pc == POP_FILL ->
#if PLANTED_BUG == 1
          occupied[slot] = 0;
          slot = 0;
          rpos[cur]++;
          rreleased[cur] = rpos[cur];
          pop_ghosts();
#else
          /* The fill's (B of the queue). */
          fpos++;
          released = fpos;
#endif
          run_left--;
#if PLANTED_BUG == 8
          if
          :: K > 0 ->
#else
          if
          :: K > 0 && !starvation_run ->
#endif
#if PLANTED_BUG != 5
             if
             :: cur > LOW && (waiting_below & 1) && passed_over[LOW] < K -> passed_over[LOW]++
             :: else -> skip
             fi;
             if
             :: cur > MED && (waiting_below & 2) && passed_over[MED] < K -> passed_over[MED]++
             :: else -> skip
             fi
#else
             skip
#endif
          :: else -> skip
          fi;
          if
          :: K > 0 && run_left == 0 ->
             /* Dead until the next Select. */
             cur = LOW; waiting_below = 0; starvation_run = 0
          :: else -> skip
          fi;
          seen_pubs = 0;   /* dead */
          pc = TF
       :: else -> skip
       fi
     }
  :: atomic { pc == TF && done == nprod && fpos == tail -> break }
  od;
  /* No loss. */
  for (m : 0 .. NIDS - 1) {
    assert(admitted[m] == delivered[m])
  }
end_consumer:
  skip
}

init {
  atomic {
#if PLANTED_BUG == 4 || PLANTED_BUG == 7 || PLANTED_BUG == 8
    three = 1;
#elif PLANTED_BUG != 0
    three = 0;
#else
    if
    :: three = 0
    :: three = 1
    fi;
#endif
#if PLANTED_BUG == 3
    K = 0;
#elif PLANTED_BUG == 4 || PLANTED_BUG == 5 || PLANTED_BUG == 8
    K = 1;
#else
    if
    :: K = 0
    :: K = 1
    fi;
#endif
    if
    :: !three ->
       cap = 2;
       limit[LOW] = 1;
       limit[HIGH] = 2;
       stream_ring[0] = LOW;
       stream_ring[1] = HIGH;
       stream_ring[2] = HIGH;
       nprod = 3
    :: else ->
       cap = 3;
       limit[LOW] = 3;
       limit[MED] = 3;
       limit[HIGH] = 3;
       stream_ring[0] = LOW;
       stream_ring[1] = MED;
       stream_ring[2] = HIGH;
       stream_ring[3] = HIGH;
       nprod = 2
    fi;
    /* The lap before each position: never position + 1. */
    byte r, i;
    for (r : 0 .. NRING - 1) {
      for (i : 0 .. cap - 1) {
        seq[r * MAXCAP + i] = i + 1 - cap
      }
    };
    r = 0; i = 0;
    if
    :: !three ->
       run Producer(0, LOW, NMSG_LOW);
       run Producer(1, HIGH, NMSG_HIGH1);
       run Producer(2, HIGH, NMSG_HIGH2)
    :: else ->
       run Producer(0, LOW, NPUB_B);
       run Producer(1, HIGH, 1)
    fi;
    run Consumer()
  }
}
