/*
 * The message in hand on the shared-memory bus (SYNC POINT (I) of
 * sluice/ipc/shm_layout.hpp; ShmFront::Take and FinishInHand,
 * ConsumerLanes::TakeOverHand): a consumer that is killed at any step while it takes
 * and dispatches messages leaves, for the consumer that takes its segment
 * over, a count of the message it held that is exact: 1 when it had popped
 * a message from its ring (its slot freed: nothing of it is left queued)
 * and not finished dispatching it, else 0.
 *
 * The lane's fill: `released` messages taken so far, NMSG queued from the
 * start. The consumer, for each message: marks it in hand (lane 0 and its
 * position: mark = position + 1 here), pops it (released + 1), hands it to
 * its subscriber (delivered), then clears the mark. It may be killed
 * between any two steps (a kill is the end of its process: every store it
 * made is in memory, none after). The taker then counts 1 if the mark names
 * the message released last, and dispatches the messages still queued.
 *
 * Checked at the end: no message was delivered twice; every message was
 * delivered by either consumer or is the one counted in hand (which may
 * also have been delivered: the kill came after its callback and before the
 * mark was cleared); the count is at most 1; and a message counted in hand
 * had been popped by the killed consumer, so the taker did not dispatch it.
 *
 * Planted bugs (spin -DPLANTED_BUG=n), each caught:
 *  1: the mark stored after the pop: a kill between them loses a message
 *     with no count.
 *  2: the mark cleared before the delivery: a kill between them loses a
 *     message with no count.
 *  3: the taker compares the mark with `released` rather than released - 1:
 *     a popped message is never counted.
 *  4: the taker counts any mark: a message whose consumer was killed before
 *     its pop is counted lost and also dispatched by the taker.
 */
#define NMSG 3

byte released = 0;     /* the lane's fill: messages popped */
byte mark = 0;         /* 0, or the marked message's position + 1 */
byte delivered[NMSG];  /* deliveries of each message, by either consumer */
bool killed = false;
byte in_hand = 0;      /* the taker's count */

#define KILLABLE  if :: true -> goto dead :: true -> skip fi

active proctype Consumer() {
  byte p = 0;
  do
  :: p < NMSG ->
#if PLANTED_BUG == 1
     released++;
     KILLABLE;
     mark = p + 1;
#else
     mark = p + 1;
     KILLABLE;
     released++;
#endif
     KILLABLE;
#if PLANTED_BUG == 2
     mark = 0;
     KILLABLE;
     delivered[p]++;
#else
     delivered[p]++;
     KILLABLE;
     mark = 0;
#endif
     KILLABLE;
     p++
  :: else -> break
  od;
dead:
  killed = true
}

active proctype Taker() {
  byte p;
  (killed);
#if PLANTED_BUG == 3
  if
  :: mark != 0 && mark - 1 == released -> in_hand = 1
  :: else -> skip
  fi;
#elif PLANTED_BUG == 4
  if
  :: mark != 0 -> in_hand = 1
  :: else -> skip
  fi;
#else
  if
  :: mark != 0 && mark == released -> in_hand = 1
  :: else -> skip
  fi;
#endif
  /* The messages still queued. */
  byte taken_before = released;
  p = released;
  do
  :: p < NMSG -> delivered[p]++; p++
  :: else -> break
  od;
  /* Every message delivered once, but the one in hand. */
  byte missing = 0;
  byte twice = 0;
  p = 0;
  do
  :: p < NMSG ->
     if
     :: delivered[p] == 0 -> missing++
     :: delivered[p] > 1 -> twice++
     :: else -> skip
     fi;
     p++
  :: else -> break
  od;
  assert(twice == 0);
  assert(missing <= in_hand);
  assert(in_hand <= 1);
  /* What is counted in hand was popped by the killed consumer: the taker
     does not dispatch it again. */
  assert(in_hand == 0 || mark - 1 < taken_before)
}
