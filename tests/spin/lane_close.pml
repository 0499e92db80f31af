/*
 * Producer lanes and Close: SYNC POINT (L), an asymmetric Dekker pair.
 *
 * Models include/sluice/detail/queue/producer_lanes.hpp (LanedQueue::
 * BeginLanePublish, EndLanePublish, Close, LanesDrained) as
 * include/sluice/bus.hpp uses it (Bus::LaneAdmit, Close, IsDrained), over
 * one lane's single-producer queue (its claim cursor `tail`, its slots'
 * sequence stores, the consumer's `released`).
 *
 * A lane publish: store publishing = 1; fence; load closed: if set, store
 * publishing = 0 and refuse; else claim (store tail + 1), construct, publish
 * the slot, store publishing = 0 (release). Close: store closed; the heavy
 * fence (or a full fence); store the close state. IsDrained, once the close
 * state is seen: a full fence; load publishing (acquire); the lane's depth,
 * `released` (acquire) then `tail`. The consumer dispatches published slots
 * in order and stores `released` after each.
 *
 * Weak memory: store buffering, as on x86 (TSO). Each process's stores go
 * into its own FIFO store buffer (a channel of SB entries) and reach memory
 * (`mem`) when that process's Flusher takes them, at any time; every load
 * reads memory. No process loads a variable it stores itself (each keeps
 * its own copy), so store forwarding is not needed. A full fence empties the
 * process's own buffer. The heavy fence (membarrier: every running thread
 * executes a full barrier before it returns) empties every process's buffer
 * at the moment it runs: the barrier falls at that point of each other
 * thread's execution. A compiler fence is nothing here: each process runs in
 * program order. With the heavy fence in use (`heavy`, chosen at the start:
 * asymmetric_) the publish has only the compiler fence; without it, both
 * sides fence.
 *
 * The argument the model checks: the publish's load of closed either
 * follows the moment Close's fence empties the closer's buffer (it sees
 * closed, and refuses), or precedes it; then its publishing = 1 has left
 * the producer's buffer by that moment (its own fence, or the heavy fence),
 * and stays in memory until the store of 0, which follows the claim's store
 * of `tail` in the same FIFO. An IsDrained after Close therefore sees
 * publishing = 1, or a depth that counts the claim until the consumer has
 * released it.
 *
 * Instance: one lane, its producer with NMSG publishes (the lane holds
 * them all); a closer that closes at any point and then polls IsDrained
 * until it is true (Drain, on the thread that closed); the consumer, which
 * dispatches until its own IsDrained, once it sees the bus closed, is true
 * (another thread). A poll is retried only when memory it read has changed
 * (the same loads of the same memory give the same verdict), so polling
 * makes no cycle, and a poll that can never turn true is an invalid end
 * state.
 *
 * Properties:
 *  - when an IsDrained returns true, every admitted message has been
 *    dispatched (assertion at the verdict), and no publish is admitted
 *    after it (assertion at the admission: a publish is admitted when its
 *    load of closed finds it clear);
 *  - the consumer dispatches only admitted messages, each once (one
 *    position after the other);
 *  - at the end, every publish was refused or admitted, and every admitted
 *    one dispatched; no deadlock: both IsDrained polls turn true.
 *
 * Abstracted: the shared queue and its closed tail (shutdown.pml); the
 * close state's CAS (one closer); the lane's limit (the lane never refuses
 * as full; that path stores publishing = 0 as a refusal does); the
 * message's construction (the slot's sequence store stands for it); the
 * wake-up of a sleeping consumer (consumer_wakeup.pml); loads that other
 * hardware can reorder (TSO keeps them in order); registration.
 * Store buffering does not make Close's fence necessary when lane publishes
 * fence themselves: a thread that sees the close state also sees closed
 * (FIFO buffers), and the closer's IsDrained fences. The C++ memory model
 * promises less, so both sides keep the fence; with the heavy fence the
 * model needs it (bug 5).
 *
 * Storing publishing = 0 after the claim and before the slot's publish is
 * not a bug: the depth counts the claim (pan finds no error for that
 * variant). Storing it before the claim is (bug 4).
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the publish loads closed before it stores publishing = 1;
 *  2: no heavy fence, and the publish's fence is a compiler fence only
 *     (Close keeps its full fence);
 *  3: IsDrained loads the depth before publishing;
 *  4: the publish stores publishing = 0 before its claim;
 *  5: Close runs neither the heavy fence nor its full fence.
 * Bugs 2 and 5 need the store buffers: with every store going straight to
 * memory (sequential consistency) pan finds no error for either.
 */

#ifndef NMSG
#define NMSG 2
#endif
#ifndef SB
#define SB 2          /* store buffer entries per process */
#endif

/* Shared memory: variable indices into mem[]. */
#define CLOSED 0      /* closed_ */
#define STATE 1       /* close_state_ == kClosed */
#define PUB 2         /* lane.publishing */
#define TAIL 3        /* the lane's claim cursor */
#define REL 4         /* the lane's `released` */
#define READY 5       /* READY + i: slot i's sequence store (published) */
#define NVAR (READY + NMSG)

byte mem[NVAR];
chan sb_p = [SB] of { byte, byte };   /* the producer's store buffer */
chan sb_c = [SB] of { byte, byte };   /* the closer's */
chan sb_k = [SB] of { byte, byte };   /* the consumer's */
bit heavy;                            /* asymmetric_: the heavy fence is in use */
byte fv;                              /* scratch of a fence, 0 outside one */
byte fx;

/* Ghosts. */
byte admitted = 0;
byte refused = 0;
byte dispatched = 0;
bit drained = 0;      /* an IsDrained has returned true */
byte done = 0;

/* Moves a buffer's stores to memory, oldest first. */
proctype Flusher(chan sb) {
  byte v;
  byte x;
end:
  do
  :: atomic { sb?v,x -> mem[v] = x; v = 0; x = 0 }
  od
}

inline flush(sb) {
  do
  :: sb?fv,fx -> mem[fv] = fx
  :: empty(sb) -> break
  od
}

/* A full fence: the process's own buffer is empty before its next load. */
inline fence(sb) {
  atomic { flush(sb); fv = 0; fx = 0 }
}

/* The heavy fence: a full barrier on every thread, at this moment. */
inline heavy_fence() {
  atomic { flush(sb_p); flush(sb_c); flush(sb_k); fv = 0; fx = 0 }
}

/*
 * IsDrained (the close state already seen): sets `verdict`. r_* are the
 * values read; the caller's next poll waits until memory differs from them.
 */
inline is_drained(sb, verdict) {
  fence(sb);
#if PLANTED_BUG == 3
  r_rel = mem[REL];
  r_tail = mem[TAIL];
  r_pub = mem[PUB];
#else
  r_pub = mem[PUB];     /* acquire: EndLanePublish's release */
  r_rel = mem[REL];     /* Depth(): `released` (acquire), then `tail` */
  r_tail = mem[TAIL];
#endif
  atomic {
    if
    :: r_pub == 0 && r_tail == r_rel ->
       verdict = 1;
       drained = 1;
       assert(dispatched == admitted)
    :: else -> verdict = 0
    fi
  }
}

#define CHANGED (mem[PUB] != r_pub || mem[REL] != r_rel || mem[TAIL] != r_tail)

/* Bus::LaneAdmit, NMSG times. */
proctype Producer() {
  byte i = 0;
  do
  :: i < NMSG ->
#if PLANTED_BUG == 1
     if
     :: atomic { mem[CLOSED] -> refused++ }; goto next
     :: atomic { !mem[CLOSED] -> admitted++; assert(!drained) }
     fi;
     sb_p!PUB,1;
#else
     sb_p!PUB,1;
     if
     :: heavy -> skip          /* compiler fence: the closer's heavy fence */
#if PLANTED_BUG == 2
     :: else -> skip           /* no fence on either side of this one */
#else
     :: else -> fence(sb_p)    /* seq_cst fence */
#endif
     fi;
     if
     :: atomic { mem[CLOSED] -> refused++ }; sb_p!PUB,0; goto next
     :: atomic { !mem[CLOSED] -> admitted++; assert(!drained) }
     fi;
#endif
#if PLANTED_BUG == 4
     sb_p!PUB,0;
     sb_p!TAIL,i + 1;          /* the claim */
     sb_p!READY + i,1;         /* the message, its slot published */
#else
     sb_p!TAIL,i + 1;          /* the claim */
     sb_p!READY + i,1;         /* the message, its slot published */
     sb_p!PUB,0;               /* EndLanePublish: release */
#endif
next:
     i++
  :: else -> break
  od;
  done++
}

/* Bus::Close, then Drain: IsDrained until it is true. */
proctype Closer() {
  byte r_pub = 255;
  byte r_rel = 255;
  byte r_tail = 255;
  bit verdict = 0;
  sb_c!CLOSED,1;
#if PLANTED_BUG != 5
  if
  :: heavy -> heavy_fence()
  :: else -> fence(sb_c)
  fi;
#endif
  sb_c!STATE,1;                /* release: Close has returned */
  do
  :: CHANGED ->
     is_drained(sb_c, verdict);
     if
     :: verdict -> break
     :: else
     fi
  od;
  done++
}

/* Dispatches published slots in order until IsDrained, after Close. */
proctype Consumer() {
  byte pos = 0;
  byte r_pub = 255;
  byte r_rel = 255;
  byte r_tail = 255;
  bit verdict = 0;
  do
  :: pos < NMSG && mem[READY + pos] ->
     atomic { assert(pos < admitted); dispatched++ };
     pos++;
     sb_k!REL,pos              /* PopFront: release */
  :: mem[STATE] && CHANGED ->
     is_drained(sb_k, verdict);
     if
     :: verdict -> break
     :: else
     fi
  od;
  done++
}

init {
  atomic {
    if
    :: heavy = 1
    :: heavy = 0
    fi;
    run Flusher(sb_p);
    run Flusher(sb_c);
    run Flusher(sb_k);
    run Producer();
    run Closer();
    run Consumer()
  }
  (done == 3);
  assert(admitted + refused == NMSG && dispatched == admitted)
}
