/*
 * Handing a lane to a producer process through a descriptor, with the
 * consumer killed at any step and taken over: no lane object ever has two
 * writers, and no lane is lost.
 *
 * Models the lane hand-out by descriptor: ipc::detail::ConsumerLanes::
 * HandOut (on the consumer's LaneHandoutService thread), ConsumerLanes::CheckProducers,
 * TendGoneLanes (their LaneRecovery, sluice/ipc/shm_lane_recovery.hpp) and
 * ResetLane (its consumer thread), ConsumerLanes::
 * TakeOver (the consumer that takes a killed one's segment over), and
 * ShmProducer::Attach and Detach (a producer process). SYNC POINT (U) of
 * sluice/ipc/shm_layout.hpp, a lane changing hands, with lanes kept in
 * objects of their own.
 *
 * Why an object per lane: a producer runs as another user and must write
 * its own lane and nothing else, so each lane is a file only the consumer
 * and that lane's producer map. The producer cannot open it by name; the
 * consumer opens it and passes the descriptor over a Unix socket
 * (SCM_RIGHTS). A producer that leaves may keep its mapping and go on
 * writing (nothing can unmap another process), so a lane handed back gets
 * a fresh object: the old one stays the old producer's alone.
 *
 * The role (an open file description lock: the kernel drops it when the
 * last descriptor of that open dies, or its holder unlocks it) says who
 * holds the lane. The consumer takes it on an open of its own, so a
 * consumer killed mid hand-out drops it too; the descriptor sent carries
 * it to the producer; one in flight to a dead producer dies with its
 * socket. `refs` counts the descriptors of the open that holds it.
 *
 * The header (written by the consumer's process alone): per lane, F (free,
 * ready to hand out), A (active: dispatched from) and `cur`, the lane's
 * current object. Per object (the producer writes it): S (Free, Owned,
 * Detached) and R (its role held).
 *
 * HandOut, one request at a time: (U1) a lane with F; (U2) clear F; (U3)
 * open cur and take the role on that open (held: set F back, next lane);
 * (U4) S = Owned (release); (U5) A = 1 (release); (U6) send the descriptor
 * and close our copy. U1 to U6 hold the lock that CheckProducers' reads
 * take (`lk`), so a pass never sees the role held by our copy of a lane
 * whose producer already died. Attach: receive, map, write; Detach: S = Detached
 * (release), drop the role, unmap. CheckProducers, every lane whatever its
 * A: an active lane (A, the header's: only consumers write it) whose role
 * no one holds (the kernel's word) is gone; S, which the lane's producer
 * can write, decides neither, and is read only to tell a detach from a
 * kill. TendGoneLanes, each gone lane: clear A; ResetLane: make a fresh
 * object (S Free, unnamed), rename it over cur, then F = 1 (release).
 *
 * A lane that a killed consumer leaves with F == 0 and A == 0 is a
 * hand-out that died before U5 or a hand-back that died before F = 1:
 * nobody holds it (its descriptor leaves only at U6, after U5), and
 * TakeOver makes it anew and frees it, whatever its S: the object of a
 * hand-back cut short is the old owner's, which that producer may still
 * map and may have written Free into (bug 9).
 *
 * Instance: one lane; producers 0 and 1, each killed at any step (its role
 * and mapping die with it; a descriptor still in flight to it dies with
 * its socket); and the hostile producer 2, which writes its state word as
 * it likes: either it detaches as the consumer expects (S = Detached,
 * role dropped), keeps its mapping and may write Free into the old
 * object at any later moment; or it writes Free over its state while it
 * owns the lane and is then killed. Each producer asks once; a refusal (no free
 * lane) or EOF (the server killed) ends it. Producers 0 and 1 are alike,
 * so 0 asks first. The consumer (a server thread and a consumer thread)
 * may be killed once, at any step; a new consumer then takes over and
 * runs both threads of its own. Objects are numbered as made and never
 * reused.
 *
 * Steps merged where nothing can tell them apart: the request read with U1
 * to U3 (until U3 the lane is the server's alone and nothing is held: a
 * kill among them is a kill after them); U6's send and close (under the
 * lock, so no pass runs between them; a kill between them closes our
 * copy); CheckProducers' reads of a pass, and the
 * clearing of A with them (reads, then a store to a gone lane, which has
 * no F and so is no lane the server touches); a producer's role drop,
 * unmap and close (a kill after Detached does the same); the hostile
 * producer's whole detach. A kill is the last part of one of the killed
 * consumer's steps (MAY_KILL).
 *
 * A pass of the consumer thread that finds no lane gone changes nothing, so
 * a pass is run when one would find one, and once more after every
 * producer is done and the server has stopped; then every lane must be
 * free. Polling makes no cycle.
 *
 * Properties:
 *  - no object with two writers: an object is sent to a producer once, and
 *    to none that another producer (the hostile one included) still maps
 *    (assertions at U6); and in every state where the consumer may
 *    dispatch from a lane (A), only the lane's owner maps its object (the
 *    Dispatch watcher);
 *  - a lane is handed out only when it is free: not active, its object
 *    Free (assertion at U3);
 *  - no lane taken from under a producer: TakeOver makes anew only a lane
 *    whose object no producer that received it and has not left maps;
 *  - no lane leaked: at the end every lane is free (F);
 *  - the exit report: a lane judged killed is mapped by no live honest
 *    producer (no owner that is still detaching; the hostile one can make
 *    its own lane read killed or detached, a label about itself);
 *  - no dead producer read as running: a pass finds gone every lane whose
 *    owner was sent its object and has died, so one CheckProducers after
 *    a producer's death reports it (the pass runs whenever such a lane
 *    exists, besides when one would find a lane gone).
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution: each release store is read by its acquire in order; the
 * role, the descriptors and the socket are the kernel's (each system call
 * one step). Abstracted: the rings (a mapping is the power to write),
 * dispatching what a gone lane holds, the socket's connection and
 * credentials, the consumer's own role and the segment's name
 * (segment_create.pml), the order in which a server looks at lanes.
 *
 * pan reports U3's role-held branch unreached: a lane with F has a fresh
 * object (or one whose hand-out died before U4), whose role nobody holds.
 * With one lane the consumer thread never runs during a hand-out; with
 * two (spin -DLANES=2) the model also verifies: some 7.5 million states,
 * 15 million for the no-cycle run, too many to check each time.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: ResetLane reuses the old object (S set Free in place): the hostile
 *     producer still maps the next owner's object (the Dispatch watcher,
 *     or the exit report's check when that owner is killed);
 *  2: no recovery of a lane in neither set: TakeOver leaves it alone and
 *     CheckProducers looks only at active lanes: a consumer killed in
 *     ResetLane before F = 1, or in a hand-out before U5, leaks the lane
 *     (F at the end);
 *  3: HandOut sends the descriptor (U6) before U4 and U5: the producer
 *     detaches before U4 and the consumer hands the lane back; then U4
 *     marks the old object owned and U5 the lane, free again, active: the
 *     next hand-out finds it active (U3); or a consumer killed before U5
 *     leaves a lane in neither set that a live producer holds, and the
 *     next consumer makes it anew under that producer (TakeOver's
 *     assertion);
 *  4: HandOut clears F after U5, not before U3: a consumer killed between
 *     U5 and the clear leaves a gone lane with F; the next consumer hands
 *     out its old object while it resets the lane (U3);
 *  5: CheckProducers trusts the state word (gone: Detached, or Owned with
 *     no role held): the hostile producer that wrote Free over its state
 *     and was killed keeps its lane for ever (F at the end);
 *  6: Detach drops the role before it stores Detached: the consumer finds
 *     the role dropped and the lane still Owned, and reports a producer
 *     that is detaching as killed (the exit report), or hands the lane
 *     back and, killed in the hand-back, leaves it to a consumer that makes
 *     it anew under the producer still detaching (TakeOver's assertion);
 *  7: ResetLane sets F before the rename: the server hands out the old
 *     object, Detached (U3);
 *  8: HandOut releases the lock after U5 and sends the descriptor and
 *     closes our copy as two steps outside it: the producer receives it
 *     and dies, and a pass between the send and the close finds the role
 *     held by our copy and reads the dead producer as running (the pass's
 *     assertion);
 *  9: TakeOver frees a lane with F == 0 and A == 0 in place when its
 *     object reads Free: a hand-back cut short before the rename leaves
 *     the hostile producer's old object, which it wrote Free into, and the
 *     next hand-out sends that object to another producer, which the
 *     consumer then dispatches from (the Dispatch watcher).
 */

#ifndef LANES
#define LANES 1
#endif
#define NP 3          /* producers 0 and 1; 2 is the hostile one */
#define HOSTILE 2
#define MAXOBJ 8      /* objects ever made */

#define FREE 0        /* kLaneFree, kLaneOwned, kLaneDetached */
#define OWNED 1
#define DETACHED 2

/* The header, the consumer's. */
bit F[LANES];
bit A[LANES];
byte cur[LANES];
/* Each lane object: its state (producer-writable) and role. */
byte S[MAXOBJ];
bit R[MAXOBJ];
byte refs[MAXOBJ];    /* descriptors of the open that holds R */
byte nobj = LANES;    /* objects 0..LANES-1 made with the segment */

chan req = [NP] of { byte };         /* requests: the producer's number */
chan rep[NP] = [1] of { byte };      /* the reply: object + 1, or 0 */

bit killed = 0;       /* the first consumer has been killed */
byte serving = 0;     /* the server is handling producer serving - 1 */
byte sd = 0;          /* the server's own descriptor: object + 1 */
bit pdead[NP];
byte ndone = 0;       /* producers done: detached, killed or refused */
bit srv_done = 0;     /* the server has stopped taking requests */
bit asked = 0;        /* producer 0 has asked for a lane */
bit lk = 0;           /* the hand-out holds the lock CheckProducers takes */

/* Ghosts. */
byte mapped[NP];      /* the object each producer maps, + 1 */
byte owner[LANES];    /* the lane's last owner, + 1 */
bit handed[MAXOBJ];   /* sent to a producer */
bit attached[NP];     /* received an object and has not left */

/* A descriptor of the role's open closed: the last one drops the role. */
inline close_ref(o) {
  refs[o]--;
  if :: refs[o] == 0 -> R[o] = 0 :: else -> skip fi
}

/* Only lane l's owner can write its object. */
#define SOLE_WRITER(l) \
  ((mapped[0] != cur[l] + 1 || owner[l] == 1) && \
   (mapped[1] != cur[l] + 1 || owner[l] == 2) && \
   (mapped[2] != cur[l] + 1 || owner[l] == 3))
/* Nobody maps object o. */
#define UNMAPPED(o) \
  (mapped[0] != o + 1 && mapped[1] != o + 1 && mapped[2] != o + 1)
/* A producer that received object o and has not left (detached or
 * died) maps it. */
#define HELD_BY_ATTACHED(o) \
  (attached[0] && mapped[0] == o + 1 || attached[1] && mapped[1] == o + 1 || \
   attached[2] && mapped[2] == o + 1)
/* No honest producer maps object o. */
#define UNMAPPED_BY_HONEST(o) (mapped[0] != o + 1 && mapped[1] != o + 1)

/*
 * The first consumer's kill, as the last part of any of its steps (a kill
 * between two of its steps is one right after the first: the steps of
 * other processes in between commute with it). The kernel closes its
 * descriptors: its open of a lane being handed out (the role with it, if
 * no copy was sent) and its end of the socket being served (EOF). Then
 * both its threads stop (`unless`, which would cut the sequence short if
 * `killed` were set first).
 */
#define MAY_KILL \
  if \
  :: skip \
  :: g == 0 && !killed -> \
     if :: sd != 0 -> close_ref(sd - 1); sd = 0 :: else -> skip fi; \
     lk = 0; \
     if \
     :: serving != 0 -> \
        if :: !pdead[serving - 1] -> rep[serving - 1]!0 :: else -> skip fi; \
        serving = 0 \
     :: else -> skip \
     fi; \
     killed = 1 \
  fi

/* The hand-out done: its locals cleared (left set, they would tell apart
 * states that differ in nothing else). */
#define FORGET  p = 0; l = 0; o = 0

/* (U6) the descriptor sent (to a dead producer the send fails) and our
 * copy closed, under the lock: one step, since no pass runs between them
 * and a kill between them closes it anyway. Bug 8 makes them two steps
 * after the lock is released. */
inline send_and_close() {
  atomic {
    if
    :: pdead[p] -> skip
    :: else ->
       assert(!handed[o]);
       assert(UNMAPPED(o));
       handed[o] = 1;
       rep[p]!o + 1;
       refs[o]++
    fi;
    serving = 0;
#if PLANTED_BUG == 8
    MAY_KILL
  };
  atomic {
    (sd != 0) ->
#endif
    close_ref(o);
    sd = 0;
    lk = 0;
#if PLANTED_BUG != 3
    FORGET;
#endif
    MAY_KILL
  }
}

/* ConsumerLanes::HandOut, on the hand-out thread of consumer g. */
proctype Server(bit g) {
  byte p;
  byte l;
  byte o;
  bit refused;
  {
    do
    :: /* A request read, then U1 to U3 in one step. */
       atomic {
         req?p;
         serving = p + 1;
         l = 0;
         do
         :: l == LANES ->
            /* No free lane: refused. */
            if :: !pdead[p] -> rep[p]!0 :: else -> skip fi;
            serving = 0;
            FORGET;
            refused = 1;
            break
         :: l < LANES && !F[l] -> l++
         :: l < LANES && F[l] ->   /* (U1), the lock taken */
            lk = 1;
#if PLANTED_BUG != 4
            /* (U2) F cleared before anything is done to the lane. Bug 4
             * breaks this line: the clear moved after U5. */
            F[l] = 0;
#endif
            /* (U3) cur opened, the role taken on that open. */
            o = cur[l];
            if
            :: R[o] ->
               /* Held elsewhere: not ours, F set back. */
               lk = 0;
#if PLANTED_BUG != 4
               F[l] = 1;
#endif
               o = 0;
               l++
            :: else ->
               /* Handed out only free: not active, its object Free. */
               assert(!A[l] && S[o] == FREE);
               R[o] = 1;
               refs[o] = 1;
               sd = o + 1;
               owner[l] = p + 1;
               break
            fi
         od;
         MAY_KILL
       };
       if
       :: refused -> refused = 0; goto next
       :: else -> skip
       fi;
#if PLANTED_BUG == 3
       /* Bug 3 breaks the order of HandOut: the descriptor sent (U6)
        * before the lane reads as owned and active. */
       send_and_close();
#endif
       /* (U4) SYNC POINT WRITE (U): owned, the role taken first. */
       atomic { S[o] = OWNED; MAY_KILL };
       /* (U5) SYNC POINT WRITE (U): active. */
#if PLANTED_BUG == 3
       atomic { A[l] = 1; FORGET; MAY_KILL };
#else
#if PLANTED_BUG == 8
       /* Bug 8: the lock released before the descriptor leaves. */
       atomic { A[l] = 1; lk = 0; MAY_KILL };
#else
       atomic { A[l] = 1; MAY_KILL };
#endif
#if PLANTED_BUG == 4
       /* Bug 4: U2's clear of F, late. */
       atomic { F[l] = 0; MAY_KILL };
#endif
       send_and_close();
#endif
next:
       skip
    :: atomic { ndone == NP && len(req) == 0 -> srv_done = 1; MAY_KILL; break }
    od
  } unless {
    /* Killed: its locals cleared, so that a dead thread's leftovers do
     * not tell states apart. */
    atomic { g == 0 && killed -> FORGET; refused = 0 }
  }
}

/* What a pass of CheckProducers would find: an active lane whose role no
 * one holds. */
#if PLANTED_BUG == 5
/* Bug 5 trusts the state word, as CheckProducers once did. */
#define LEFT(l) (S[cur[l]] == DETACHED || S[cur[l]] == OWNED && !R[cur[l]])
#elif PLANTED_BUG == 2
/* Bug 2, with TakeOver's recovery removed: only active lanes. */
#define LEFT(l) (A[l] && !R[cur[l]])
#else
/* Or in neither set: no step of a running consumer leaves a lane there
 * where a pass can see it (a hand-out holds the lock; a hand-back is the
 * pass's own thread), so only a header written by someone else would;
 * the pass's assertion checks that the protocol never does. */
#define LEFT(l) (A[l] && !R[cur[l]] || !A[l] && !F[l])
#endif
/* An active lane whose owner was sent its object and has died since
 * (ghosts). */
#define DEAD_OWNER(l) \
  (A[l] && handed[cur[l]] && owner[l] != 0 && pdead[owner[l] - 1])
/* Such a lane that a pass would not find gone: what a pass must never see. */
#define DEAD_HELD(l) (DEAD_OWNER(l) && !LEFT(l))
#if LANES == 1
#define WORK LEFT(0)
#define MISJUDGED DEAD_HELD(0)
#else
#define WORK (LEFT(0) || LEFT(1))
#define MISJUDGED (DEAD_HELD(0) || DEAD_HELD(1))
#endif
#define FIN (srv_done && ndone == NP)

/* The consumer thread of consumer g: CheckProducers, TendGoneLanes. */
proctype Consumer(bit g) {
  byte l;
  bit fin;
  bit gone[LANES];
  {
    do
    :: atomic {
         /* A pass when it would find a lane gone, or misjudge one, and
          * once at the end; never while the hand-out holds the lock. */
         !lk && (WORK || MISJUDGED || FIN) ->
         fin = FIN;
         /* CheckProducers. SYNC POINT READ (U): A; an active lane's
          * role; S, which tells a detach from a kill (Detach stores
          * Detached before it drops the role). Reads only, so one step:
          * a kill among them is a kill before them. */
         l = 0;
         do
         :: l < LANES ->
            /* A producer that died is not read as running. */
            assert(!DEAD_HELD(l));
            if
            :: LEFT(l) ->
               /* Never a lane that a producer holds. */
               assert(A[l] || !HELD_BY_ATTACHED(cur[l]));
               /* Judged killed (not Detached): no live honest producer
                * maps it. */
               assert(S[cur[l]] == DETACHED || UNMAPPED_BY_HONEST(cur[l]));
               gone[l] = 1;
               /* TendGoneLanes: what it holds dispatched (elided), then
                * off the active set before it is free. */
               A[l] = 0
            :: else -> skip   /* free, or its owner runs */
            fi;
            l++
         :: else -> l = 0; break
         od;
         MAY_KILL
       };
       /* TendGoneLanes, on: ResetLane of each gone lane. */
       do
       :: atomic { l < LANES && !gone[l] -> l++ }
       :: l < LANES && gone[l] ->
#if PLANTED_BUG == 1
          /* Bug 1 breaks ResetLane's new object: the old one reset in
           * place, whoever still maps it. */
          atomic { S[cur[l]] = FREE; gone[l] = 0; MAY_KILL };
#elif PLANTED_BUG == 7
          /* Bug 7 breaks ResetLane's order: free before the rename. */
          atomic { F[l] = 1; MAY_KILL };
          atomic { cur[l] = nobj; nobj++; gone[l] = 0; l++; MAY_KILL }
#else
          /* A fresh object (made unnamed: nobody reaches it before this),
           * renamed over the lane's name, our mapping replaced. The old
           * one stays whoever's still maps it. */
          atomic { assert(nobj < MAXOBJ); cur[l] = nobj; nobj++; gone[l] = 0; MAY_KILL };
#endif
#if PLANTED_BUG != 7
          /* SYNC POINT WRITE (U): free. */
          atomic { F[l] = 1; l++; MAY_KILL }
#endif
       :: atomic { l == LANES -> l = 0; break }
       od;
       if
       :: fin ->
          /* Every producer done, the server stopped: no lane leaked. */
          do
          :: l < LANES -> assert(F[l]); l++
          :: else -> break
          od;
          break
       :: else -> skip
       fi
    od
  } unless {
    atomic { g == 0 && killed -> l = 0; fin = 0; gone[0] = 0; gone[LANES - 1] = 0 }
  }
}

/* The consumer may dispatch from an active lane at any moment: only the
 * lane's owner may map its object then. A watcher: checked in every
 * state. */
#if LANES == 1
#define DISPATCH_OK (!A[0] || SOLE_WRITER(0))
#else
#define DISPATCH_OK ((!A[0] || SOLE_WRITER(0)) && (!A[1] || SOLE_WRITER(1)))
#endif
active proctype Dispatch() {
end:
  atomic { !DISPATCH_OK -> assert(DISPATCH_OK) }
}

/* ShmProducer::Attach, its writes, Detach; killed at any step (not the
 * hostile one). */
#define DIE \
  atomic { \
    pdead[p] = 1; \
    attached[p] = 0; \
    if :: rep[p]?o :: empty(rep[p]) -> skip fi; \
    if :: o != 0 -> close_ref(o - 1) :: else -> skip fi; \
    mapped[p] = 0; \
    o = 0; \
    ndone++; \
    goto dead \
  }
#define MAY_DIE  if :: skip :: DIE fi

proctype Producer(byte p) {
  byte o = 0;
  /* Producers 0 and 1 are alike: 0 asks first (every run with 1 first is
   * one of these with the two renamed). */
  atomic { (p != 1 || asked) -> req!p; asked = asked || p == 0 };
  if
  :: atomic {
       /* Received, mapped: it writes from here on. */
       rep[p]?o ->
       if :: o != 0 -> mapped[p] = o; attached[p] = 1 :: else -> ndone++; goto dead fi
     }
  :: p != HOSTILE -> DIE   /* what is or will be in flight dies too */
  fi;
  if
  :: p == HOSTILE ->
     if
     :: /* Detaches as the consumer expects, all at once, then closes its
         * descriptor; keeps the mapping and writes into it for ever: at
         * any later moment, Free over the old object's state. */
        atomic {
          S[o - 1] = DETACHED;
          R[o - 1] = 0;
          close_ref(o - 1);
          attached[p] = 0;
          ndone++
        };
        if
        :: S[o - 1] = FREE
        :: skip
        fi;
        o = 0
     :: /* Writes Free over its state while it owns the lane, then is
         * killed: the kernel drops its role and its mapping. */
        S[o - 1] = FREE;
        atomic {
          pdead[p] = 1;
          attached[p] = 0;
          close_ref(o - 1);
          mapped[p] = 0;
          o = 0;
          ndone++
        }
     fi;
     goto dead
  :: else -> skip
  fi;
  MAY_DIE;
#if PLANTED_BUG == 6
  /* Bug 6 breaks Detach's order: the role dropped before Detached. */
  R[o - 1] = 0;
#endif
  /* Detach. SYNC POINT WRITE (U): its last writes, then detached. */
  S[o - 1] = DETACHED;
  /* The role dropped explicitly, then unmapped and closed: one step (its
   * mapping of the old object after the drop is harmless; the hostile
   * one's is not), and a kill before it does the same. */
  atomic { R[o - 1] = 0; mapped[p] = 0; attached[p] = 0; close_ref(o - 1); o = 0; ndone++ };
dead:
  skip
}

/* ConsumerLanes::TakeOver, by the consumer that comes after the killed
 * one: a lane neither free nor active is one nobody holds (a hand-out
 * killed before U5, a hand-back killed before F = 1): made anew and
 * freed; every active lane is CheckProducers'. Then its own two
 * threads. */
active proctype TakeOver() {
  byte l = 0;
end:
  atomic {
    killed ->
    do
    :: l < LANES ->
#if PLANTED_BUG != 2
       /* Bug 2 removes this recovery. */
       if
#if PLANTED_BUG == 9
       /* Bug 9: freed in place when the object reads Free. */
       :: !A[l] && !F[l] && S[cur[l]] == FREE -> F[l] = 1
       :: !A[l] && !F[l] && S[cur[l]] != FREE ->
#else
       :: !A[l] && !F[l] ->
#endif
          /* Nobody holds it: no producer that has its object and has
           * not left. */
          assert(!HELD_BY_ATTACHED(cur[l]));
          assert(nobj < MAXOBJ);
          cur[l] = nobj;
          nobj++;
          F[l] = 1
       :: else -> skip
       fi;
#endif
       l++
    :: else -> break
    od;
    run Server(1);
    run Consumer(1)
  }
}

init {
  byte l = 0;
  atomic {
    do
    :: l < LANES -> cur[l] = l; F[l] = 1; l++
    :: else -> break
    od;
    run Server(0);
    run Consumer(0);
    run Producer(0);
    run Producer(1);
    run Producer(HOSTILE)
  }
}
