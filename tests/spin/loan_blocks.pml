/*
 * Loan blocks of one shared-memory lane across a consumer's death
 * (sluice/ipc/loan.hpp, SYNC POINTs (P) and (I)): the producer takes a free
 * block, writes it and publishes it (or gives it back unpublished); the
 * consumer, for each message, marks it in hand with its block, sets the
 * block's held bit, takes it from the ring, hands it to its subscriber and
 * gives the block back (free set and held cleared in one step), then clears
 * the mark. It may be killed between any two steps. A second consumer then
 * takes over: it frees every held block but that of a message marked and
 * not yet taken from the ring (which it only un-holds), and dispatches what
 * is queued as the first did; it too may be killed between any two steps
 * of its takeover, and a third then takes over from it.
 *
 * The free and held bits of a block share one word in the code, so each
 * step on them is one atomic step here. `use[b]` is what block b really is:
 * 0 unused, 1 lent to the producer, 2 named by a queued message, 3 read by
 * a subscriber.
 *
 * Checked: a block is never made free while a queued message names it or a
 * subscriber reads it, nor taken by the producer unless unused; and once
 * the producer has stopped and the second consumer has drained the ring,
 * every block is free again (none leaked by the kill).
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each caught:
 *  1: the held bit set after the message is taken from the ring: a kill
 *     between them leaks the block.
 *  2: the taker frees every held block, the marked one still queued
 *     included: the producer reuses a block a queued message names.
 *  3: the give-back in two steps (held cleared, then free set): a kill
 *     between them leaks the block.
 *  4: the taker frees nothing: the killed consumer's blocks leak.
 *  5: the taker clears the in-hand mark before its hand-back: killed
 *     between them, it leaves the next taker to free the block of a message
 *     still queued.
 */
#define NB 2    /* blocks */
#define NMSG 3  /* loans the producer makes (published or given back) */

bool free[NB];
bool held[NB];
byte use[NB];
chan ring = [NB] of { byte };
byte released = 0;  /* messages taken from the ring */
byte mark_pos = 0;  /* in-hand mark: position + 1 (0: none) */
byte mark_block = 0;
bool killed = false;
bool producer_done = false;
bool first_gone = false;

inline make_free(b) {
  assert(use[b] != 2 && use[b] != 3);
  free[b] = true;
  use[b] = 0
}

proctype Producer() {
  byte made = 0;
  byte b;
  do
  :: made < NMSG ->
     /* Take a free block (the CAS that clears its free bit). */
     atomic {
       if
       :: free[0] -> b = 0
       :: free[1] -> b = 1
       :: else -> goto stop  /* none free now: the producer stops */
       fi;
       free[b] = false;
       assert(use[b] == 0);
       use[b] = 1
     };
     if
     :: atomic { use[b] = 2; ring!b }; made++   /* published */
     :: atomic { use[b] = 0; free[b] = true }; made++  /* given back unpublished */
     fi
  :: made == NMSG -> break
  od;
stop:
  producer_done = true
}

#define KILLABLE  if :: !killed -> skip :: !killed -> killed = true; goto dead fi
#define TAKER_KILLABLE  if :: true -> skip :: true -> goto taker_dead fi

/* One consumer's loop; the first may be killed, the second is not. The
   first's end, killed or not, lets the second take over. */
proctype Consumer(bool killable) {
  byte b;
  do
  :: true ->
     if
     :: ring?[b] -> skip
     :: producer_done && empty(ring) -> break
     fi;
     ring?<b>;  /* look at the front (the copy), not yet taken */
     mark_pos = released + 1; mark_block = b + 1;
     if :: killable -> KILLABLE :: else -> skip fi;
#if PLANTED_BUG == 1
     atomic { ring?b; released++; use[b] = 3 };
     if :: killable -> KILLABLE :: else -> skip fi;
     held[b] = true;
#else
     held[b] = true;
     if :: killable -> KILLABLE :: else -> skip fi;
     atomic { ring?b; released++; use[b] = 3 };
#endif
     if :: killable -> KILLABLE :: else -> skip fi;
     /* dispatched; then the block back */
#if PLANTED_BUG == 3
     held[b] = false;
     if :: killable -> KILLABLE :: else -> skip fi;
     atomic { use[b] = 0; make_free(b) };
#else
     atomic { use[b] = 0; make_free(b); held[b] = false };
#endif
     if :: killable -> KILLABLE :: else -> skip fi;
     mark_pos = 0
  od;
dead:
  first_gone = true
}

/* A consumer taking over once the one before it is gone (`gone`), then
   running the same loop. The first taker may itself be killed between any
   two of its steps (then `taker_gone`, and a second, never killed, takes
   over from it): its hand-back is block by block, and it clears the
   in-hand mark only after it. */
bool taker_gone = false;
bool taker_done = false;  /* the first taker finished its takeover */

proctype Taker(bool killable) {
  byte b;
  if
  :: killable -> (first_gone)
  :: else ->
     (taker_gone || taker_done);
     if :: taker_done -> goto over :: else -> skip fi
  fi;
#if PLANTED_BUG == 5
  mark_pos = 0;
  if :: killable -> TAKER_KILLABLE :: else -> skip fi;
#endif
  b = 0;
  do
  :: b < NB ->
     atomic {
#if PLANTED_BUG == 2
       if
       :: held[b] ->
          if :: use[b] == 3 -> use[b] = 0 :: else -> skip fi;
          make_free(b)
       :: else -> skip
       fi;
#elif PLANTED_BUG == 4
       skip;
#else
       if
       :: held[b] && !(mark_pos == released + 1 && mark_block == b + 1) ->
          if :: use[b] == 3 -> use[b] = 0 :: else -> skip fi;  /* its reader died */
          make_free(b)
       :: else -> skip
       fi;
#endif
       held[b] = false
     };
     if :: killable -> TAKER_KILLABLE :: else -> skip fi;
     b++
  :: else -> break
  od;
  mark_pos = 0;
  if :: killable -> TAKER_KILLABLE :: else -> skip fi;
  if :: killable -> taker_done = true :: else -> skip fi;
  run Consumer(false);
  goto over;
taker_dead:
  taker_gone = true;
over:
  skip
}

init {
  free[0] = true; free[1] = true;
  atomic {
    run Producer();
    run Consumer(true);
    run Taker(true);
    run Taker(false)
  };
  /* Once everything has stopped: every block free again. */
  (_nr_pr == 1);
  assert(free[0] && free[1])
}

