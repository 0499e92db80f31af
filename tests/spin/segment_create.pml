/*
 * Consumers making one segment name at once, any of them killed at any
 * step: never two owners, and no leftover that wedges the name.
 *
 * Models include/sluice/ipc/shm_bus.hpp and shm_consumer_segment.hpp:
 * ShmBus::Create (ConsumerSegment::Create: the new segment made whole and
 * unnamed, then linked; on a taken name JudgeName: open, lock, recheck,
 * judge; then TakeOver, or Link again under the old segment's lock) and
 * ShmBus::Close (closed, then under its segment's lock the name removed if
 * it is still that segment's: RemoveOwnNames), over
 * include/sluice/ipc/segment.hpp (Segment::CreateUnnamed, Link, Open, Lock,
 * IsNamed, Unlink). The mode and owner check (fstat) is left out: no other
 * user is modelled.
 *
 * The name (a file in /dev/shm) names at most one object at a time:
 * `name` is its index, 0 none. Consumer c makes object c unnamed (O_TMPFILE:
 * nobody else can reach it, so making it is one step), then links it
 * (linkat: one step, which fails while the name is taken). On a taken name
 * it opens the object `o` the name names then (none: link again), locks
 * `o` (flock: waits while another holds it), rechecks that the name still
 * names `o` (else unlock, link again), and judges: unstamped: kNotReady;
 * its consumer alive, not closed: kConsumerExists; killed, not closed: take
 * over (its id written into the header under the lock); closed: replace
 * (unlink the name and link its own, both under o's lock; a name taken in
 * between: kConsumerExists). The links tried are bounded (three here, the
 * real code's kCreateAttempts more), so no loop runs forever; each retry
 * needs another consumer's move, and three racing consumers never exhaust
 * them (pan reports that kNotReady unreached). A consumer told kNone (made,
 * or took over) closes later; closed, it owns nothing.
 *
 * Each consumer but the last may be killed between any two of its steps
 * (kill -9: it stops, nothing runs on its behalf; the kernel drops its
 * flock). "Alive" is exactly "not killed": the real judge reads /proc,
 * out of scope. The judge reads liveness before `closed`: closed is
 * written without the lock, but only by the live owner, so once the owner
 * is seen dead its flag no longer moves, and while it lives either value
 * is safe (refuse; or replace a name its owner will then not remove).
 * Read the other way round (planted bug 7), an owner that closes and dies
 * between the two reads has its closed segment taken over, and the next
 * consumer replaces the taker's name.
 *
 * Properties:
 *  - safety: whenever a consumer is told kNone, no other live consumer
 *    owns the name's segment (told kNone and not closed): `owners`;
 *  - no wedge: once the three racing consumers have all finished or been
 *    killed, a last consumer (never killed) is told kNone;
 *  - no deadlock (invalid end state): every flock is given back.
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution. The name and the flock are the kernel's (each syscall one
 * step, ordered by its locks); the header fields that the judge reads are
 * written before the segment is named (under the release of (T)) or under
 * the flock the judge holds, except `closed`: its store precedes its
 * owner's death, which the judge learns from the kernel after taking the
 * lock, so a judge that sees the owner dead sees the flag as last written.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the judge takes no lock;
 *  2: no recheck after the lock: a judge of the old object replaces the
 *     name that another consumer made anew meanwhile;
 *  3: the old protocol: named first (O_EXCL, unstamped) and stamped after;
 *     a maker killed in between wedges the name (kNotReady for ever);
 *  4: take over writes its consumer id after unlocking;
 *  5: close removes the name without checking it names its own segment;
 *  6: replace unlocks right after the judge, before unlink and link;
 *  7: the judge reads `closed` before liveness: an owner that closes and
 *     dies in between has its closed segment taken over, then replaced.
 */

#define N 4          /* consumers 1..3 race; 4 is the last */
#define TRIES 3      /* links tried */

#define MADE 1       /* kNone, and made the name's segment */
#define TOOK_OVER 2  /* kNone, and took it over: kNone is result <= 2 */
#define EXISTS 3     /* kConsumerExists */
#define NOT_READY 4  /* kNotReady */

byte name = 0;          /* the object the name names; 0: none */
bit magic[N + 1];       /* stamped */
byte consumer[N + 1];   /* the consumer id in the header */
bit closed[N + 1];
byte lock[N + 1];       /* the flock's holder; 0: none */
bit dead[N + 1];        /* killed */
byte owners = 0;        /* live consumers told kNone, not closed */
byte running = 3;       /* racing consumers neither finished nor killed */

/* A kill -9: the kernel drops its flock; it owns nothing any more. */
#define DIE \
  atomic { \
    dead[c] = 1; \
    running--; \
    if :: held != 0 -> lock[held] = 0 :: else -> skip fi; \
    if :: mine != 0 -> owners-- :: else -> skip fi; \
    goto died \
  }
#define MAY_DIE  if :: skip :: !last -> DIE fi

#if PLANTED_BUG == 1
#define LOCK(x) skip
#define UNLOCK  skip
#else
#define LOCK(x) atomic { lock[x] == 0 -> lock[x] = c; held = x }
#define UNLOCK  atomic { lock[held] = 0; held = 0 }
#endif

/* Told kNone for object x: nobody else may own the name's segment. */
#define TOLD_NONE(x)  assert(owners == 0); owners++; mine = x

/* Link: name object c, or find the name taken (linked = 0). */
#if PLANTED_BUG == 3
/* The old protocol: shm_open(O_EXCL) names the object unstamped; the
 * header and the stamp follow. */
#define LINK \
  atomic { if :: name == 0 -> name = c; linked = 1 :: else -> linked = 0 fi }; \
  if \
  :: linked -> \
     MAY_DIE; \
     consumer[c] = c; \
     MAY_DIE; \
     atomic { magic[c] = 1; TOLD_NONE(c) } \
  :: else -> skip \
  fi
#else
/* linkat: one step. A kill right after it is a kill of an owner. */
#define LINK \
  atomic { if :: name == 0 -> name = c; linked = 1; TOLD_NONE(c) :: else -> linked = 0 fi }
#endif

proctype Consumer(byte c; bit last) {
  byte o;         /* the object the name named when opened */
  byte held;      /* the object whose flock c holds; 0: none */
  byte mine;      /* the object c owns (told kNone, not closed); 0: none */
  byte tries = 0;
  byte result;
  bit linked;
  bit gone;       /* o's consumer was killed */
#if PLANTED_BUG == 7
  bit was_closed;
#endif

#if PLANTED_BUG != 3
  /* MAKE: header (consumer c) and stamp, all before any name reaches it. */
  atomic { consumer[c] = c; magic[c] = 1 };
#endif
link:
  MAY_DIE;
  tries++;
  LINK;
  if :: linked -> result = MADE; goto owned :: else -> skip fi;
  /* EEXIST: open what the name names now; removed meanwhile: link again. */
  MAY_DIE;
  o = name;
  if :: o == 0 -> goto retry :: else -> skip fi;
  MAY_DIE;
  LOCK(o);
  MAY_DIE;
#if PLANTED_BUG != 2
  /* Replaced or removed while we waited for the lock. */
  if :: name != o -> UNLOCK; goto retry :: else -> skip fi;
  MAY_DIE;
#endif
  /* JUDGE, under o's lock. */
  if :: magic[o] == 0 -> UNLOCK; result = NOT_READY; goto done :: else -> skip fi;
  MAY_DIE;
#if PLANTED_BUG == 7
  was_closed = closed[o];
  MAY_DIE;
#endif
  gone = dead[consumer[o]];
  MAY_DIE;
#if PLANTED_BUG == 7
  if :: was_closed -> goto replace :: else -> skip fi;
#else
  if :: closed[o] -> goto replace :: else -> skip fi;
#endif
  if :: !gone -> UNLOCK; result = EXISTS; goto done :: else -> skip fi;
  /* TAKE OVER: the killed consumer's segment becomes ours. */
#if PLANTED_BUG == 4
  UNLOCK;
  MAY_DIE;
  consumer[o] = c;
#else
  consumer[o] = c;
  MAY_DIE;
  UNLOCK;
#endif
  MAY_DIE;
  atomic { TOLD_NONE(o); result = TOOK_OVER };
  goto owned;
replace:
  /* REPLACE: unlink, then link ours, the lock held until the link is done
   * (a consumer that judged o too finds the name made anew). */
#if PLANTED_BUG == 6
  UNLOCK;
  MAY_DIE;
#endif
  name = 0;
  MAY_DIE;
  LINK;
#if PLANTED_BUG != 6
  MAY_DIE;
  UNLOCK;
#endif
  if :: linked -> result = MADE; goto owned :: else -> result = EXISTS; goto done fi;
retry:
  if :: tries < TRIES -> goto link :: else -> result = NOT_READY; goto done fi;

owned:
  if :: last -> goto done :: else -> skip fi;
  /* CLOSE: closed first (producers refused), then the name removed under
   * the segment's lock, only while it still names this segment. */
  MAY_DIE;
  atomic { closed[mine] = 1; owners--; o = mine; mine = 0 };
  MAY_DIE;
  LOCK(o);
  MAY_DIE;
#if PLANTED_BUG == 5
  name = 0;
#else
  if :: name == o -> MAY_DIE; name = 0 :: else -> skip fi;
#endif
  MAY_DIE;
  UNLOCK;
done:
  if
  :: last -> assert(result <= TOOK_OVER)
  :: else -> running--
  fi;
died:
  skip
}

init {
  atomic {
    run Consumer(1, 0);
    run Consumer(2, 0);
    run Consumer(3, 0)
  }
  /* No wedge: whatever they left, a consumer that comes after them all. */
  running == 0;
  run Consumer(4, 1)
}
