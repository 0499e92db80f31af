/*
 * Replacing the error callback from an interrupt while the main context
 * reports (bare metal, one core).
 *
 * Models include/sluice/detail/consume/error_reporter.hpp (ErrorReporter::Set and
 * ErrorReporter::Report) under SLUICE_FREESTANDING, as Bus::SetErrorCallback
 * and the consumer's error reports (include/sluice/bus.hpp) use them. Report
 * sets `reporting`, copies the pair the version selects (retrying until the
 * version is unchanged), calls it, and clears `reporting`. Set, from a
 * handler, stores the new pair into the slot the version does not select,
 * bumps the version and returns IN_FLIGHT if `reporting` is set (the old
 * callback may still run once, in the preempted report) and NOT_RUNNING
 * otherwise. It does not wait: on one core it could never see the end of
 * the report it preempted.
 *
 * The main context runs REPORTS reports. Two handlers install pairs (1, 1)
 * and (2, 2), each firing once at any point; they do not preempt each other
 * (the documented rule for Set), so `isr` names the running handler, and
 * main runs only while it is 0. The first pair is (0, 0).
 *
 * Properties (assertions):
 *  - no torn pair: callback == context;
 *  - if Set returned NOT_RUNNING, the callback it replaced was not running
 *    and is never called afterwards;
 *  - if Set returned IN_FLIGHT, the callback it replaced is not called after
 *    the preempted report ends;
 *  - no deadlock (SPIN's invalid end states).
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: Report sets `reporting` after copying the pair;
 *  2: Report does not re-check the version after copying the pair.
 */

#define NCB 3
#define REPORTS 2
#define NOT_RUNNING 1
#define IN_FLIGHT 2

byte cb[2];
byte ctx[2];
byte version = 0;
bit reporting = 0;
byte isr = 0;

/* Ghosts. */
bit retired[NCB];        /* must never be called again */
bit retire_at_end[NCB];  /* retired when the running report ends */
bit running[NCB];

proctype Main() provided (isr == 0) {
  byte n = 0, v, c, x, j;
  do
  :: n < REPORTS ->
#if PLANTED_BUG != 1
     reporting = 1;
#endif
     do
     :: v = version;
        c = cb[v % 2];
        x = ctx[v % 2];
#if PLANTED_BUG == 2
        break
#else
        if
        :: version == v -> break
        :: else -> skip
        fi
#endif
     od;
#if PLANTED_BUG == 1
     reporting = 1;
#endif
     atomic {
       assert(c == x);
       assert(!retired[c]);
       running[c] = 1
     };
     running[c] = 0;
     d_step {
       reporting = 0;
       /* IN_FLIGHT replacements: the preempted report has ended. */
       for (j : 0 .. NCB - 1) {
         if
         :: retire_at_end[j] -> retired[j] = 1
         :: else -> skip
         fi
       }
     };
     n++
  :: else -> break
  od
}

proctype Interrupt(byte k) provided (isr == 0 || isr == _pid) {
  byte v, replaced;
  isr = _pid;
  /* Set(k, k) */
  v = version;
  cb[(v + 1) % 2] = k;
  ctx[(v + 1) % 2] = k;
  d_step { replaced = cb[v % 2]; version = v + 1 };
  if
  :: reporting ->
     retire_at_end[replaced] = 1   /* IN_FLIGHT */
  :: else ->
     d_step { assert(!running[replaced]); retired[replaced] = 1 }   /* NOT_RUNNING */
  fi;
  isr = 0
}

init {
  atomic {
    run Main();
    run Interrupt(1);
    run Interrupt(2)
  }
}
