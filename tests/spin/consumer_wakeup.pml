/*
 * The sleeping consumer's wake-up protocol: no lost wake-up.
 *
 * Models include/sluice/detail/wait/wake_signal.hpp (WakeSignal::PrepareWait,
 * CancelWait, Wait, Notify) as the bus uses it: a producer publishes a
 * message, then notifies; the consumer, finding the queue empty, announces
 * that it sleeps, re-checks the queue, and parks on the wake sequence with
 * the value it read before announcing.
 *
 * Two producers publish NMSG messages each; the consumer dispatches until it
 * has seen them all. A park is a futex wait on `wake_seq` with the value read
 * before the re-check: it blocks until `wake_seq` differs (the kernel compares
 * and sleeps atomically). No timeout is modelled: a lost wake-up leaves the
 * consumer parked for ever with messages queued, an invalid end state.
 *
 * SPIN interleaves statements one at a time, a sequentially consistent
 * execution; the C++ argument needs exactly that for the Dekker pair (the
 * producer's slot store, seq_cst fence, load of `sleepers`; the consumer's
 * store of `sleepers`, seq_cst fence, load of the slot), which is why both
 * sides fence.
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: the producer loads `sleepers` before its publish is visible (no fence:
 *     the store-load reordering the fence forbids);
 *  2: the consumer re-checks the queue before announcing that it sleeps;
 *  3: the consumer reads the wake sequence after its re-check, so a notify
 *     between the two is not seen by the park.
 */

#define NMSG 2
#define TOTAL (2 * NMSG)

byte published = 0;   /* slots whose sequence store is visible */
byte consumed = 0;
bit sleepers = 0;     /* WakeSignal::sleeping_ */
byte wake_seq = 0;    /* WakeSignal::sequence_ */

/* WakeSignal::Notify, after the publish: fence, then a load of sleepers. */
inline notify() {
  if
  :: sleepers != 0 -> wake_seq++   /* fetch_add, then futex wake */
  :: else -> skip
  fi
}

proctype Producer() {
  byte i = 0;
  bit saw;
  do
  :: i < NMSG ->
#if PLANTED_BUG == 1
     /* The load of sleepers overtakes the store that publishes. */
     saw = sleepers;
     published++;
     if
     :: saw -> wake_seq++
     :: else -> skip
     fi;
#else
     published++;
     notify();
#endif
     i++
  :: else -> break
  od
}

proctype Consumer() {
  byte seq;
  do
  :: consumed == TOTAL -> break
  :: consumed < published -> consumed++   /* ProcessBatch took one */
  :: consumed == published && consumed < TOTAL ->
     /* Empty: WakeSignal::PrepareWait, the re-check, Wait. */
#if PLANTED_BUG == 2
     seq = wake_seq;
     if
     :: consumed < published -> skip
     :: else ->
        sleepers = 1;
        (wake_seq != seq);
        sleepers = 0
     fi
#elif PLANTED_BUG == 3
     sleepers = 1;
     if
     :: consumed < published -> sleepers = 0
     :: else ->
        seq = wake_seq;
        (wake_seq != seq);
        sleepers = 0
     fi
#else
     seq = wake_seq;
     sleepers = 1;
     if
     :: consumed < published -> sleepers = 0   /* CancelWait */
     :: else ->
        (wake_seq != seq);                     /* Wait: parked until notified */
        sleepers = 0
     fi
#endif
  od;
  assert(consumed == TOTAL)
}

init {
  atomic {
    run Producer();
    run Producer();
    run Consumer()
  }
}
