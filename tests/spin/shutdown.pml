/*
 * Shutdown: Close and Drain (MPSC).
 *
 * Models include/sluice/bus.hpp (AsyncBus::Close, IsClosed, IsDrained) and
 * include/sluice/detail/queue/ring.hpp (Ring::Close, TryClaimShared, Publish,
 * PopFront). Close moves the tail by JUMP with one RMW; a claim that reads a
 * tail at or past JUMP computes a fill beyond any limit and is refused. Two
 * producers try NMSG publishes each; a third process closes and then drains
 * (waits until the consumer's released position reaches the closed tail);
 * the consumer dispatches published slots in position order until the bus
 * is drained.
 *
 * Properties (assertions):
 *  - a publish that started after Close returned (IsClosed() true) is never
 *    admitted;
 *  - when Drain returns, every admitted message has been dispatched, and no
 *    message is admitted later;
 *  - no deadlock: every process ends (invalid end states).
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: Close sets a flag that producers read before claiming, instead of
 *     moving the tail (a producer that read "open" claims after Close);
 *  2: IsClosed() turns true before the tail moves.
 */

#define NMSG 2
#define NPOS 6      /* positions that can ever be claimed: 2 * NMSG < NPOS */
#define JUMP 16     /* Ring::kClosedJump, scaled down */

byte tail = 0;
byte released = 0;
bit published[NPOS];
bit closed_flag = 0;   /* bug 1 only */
bit is_closed = 0;     /* close_state_ == kClosed */
byte closed_tail = 0;
bit drained = 0;

/* Ghosts. */
byte admitted = 0;
byte consumed = 0;

proctype Producer() {
  byte i = 0;
  byte t;
  bit started_after_close;
  bit won;
  do
  :: i < NMSG ->
     started_after_close = is_closed;
#if PLANTED_BUG == 1
     if
     :: closed_flag -> goto refused
     :: else -> skip
     fi;
#endif
retry:
     t = tail;
     if
     :: t >= JUMP -> goto refused   /* fill beyond every limit */
     :: else -> skip
     fi;
     atomic {
       if
       :: tail == t -> tail = t + 1; won = 1
       :: else -> won = 0
       fi
     };
     if
     :: !won -> goto retry
     :: else -> skip
     fi;
     d_step {
       assert(!started_after_close);
       assert(!drained);
       admitted++
     };
     published[t] = 1;   /* the envelope, then the release store */
refused:
     i++
  :: else -> break
  od
}

proctype Closer() {
  /* AsyncBus::Close */
#if PLANTED_BUG == 1
  closed_flag = 1;
  closed_tail = tail;
#elif PLANTED_BUG == 2
  is_closed = 1;
  atomic { closed_tail = tail; tail = tail + JUMP };
#else
  atomic { closed_tail = tail; tail = tail + JUMP };
#endif
  is_closed = 1;
  /* AsyncBus::Drain: wait for the consumer to reach the closed tail. */
  (released == closed_tail);
  d_step {
    drained = 1;
    assert(consumed == admitted)
  }
}

proctype Consumer() {
  do
  :: is_closed && released == closed_tail -> break   /* IsDrained() */
  :: released < NPOS && published[released] ->
     d_step { consumed++; released++ }               /* dispatch, PopFront */
  od
}

init {
  atomic {
    run Producer();
    run Producer();
    run Closer();
    run Consumer()
  }
}
