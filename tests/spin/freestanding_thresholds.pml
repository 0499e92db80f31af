/*
 * SetAdmissionThresholds from an interrupt that preempts the same call in the
 * main context (bare metal, one core).
 *
 * Models include/sluice/detail/publish/admission_policy.hpp
 * (AdmissionPolicy::SetThresholds, its limit cache, and LimitFor, which
 * publishers read) as called by Bus::SetAdmissionThresholds
 * (include/sluice/bus.hpp) under SLUICE_FREESTANDING. The percents are packed
 * into one atomic word P; limits[0..2] is a cache derived from it. A setter
 * stores P, then recomputes the cache from P until P did not change while it
 * wrote:
 *     P = new; loop { q = P; limits[0..2] = f(q) one by one; if P == q break }
 * Here P holds the id of a thresholds setting (0 initially, 1 from the main
 * context, 2 from the interrupt) and f(q, j) = 3q + j + 1 stands for the
 * limit of priority j.
 *
 * The interrupt: the main context runs only while `isr` is 0 (its proctype's
 * `provided` clause), and the handler sets `isr` on entry and clears it on
 * exit, so it can preempt main between any two of main's statements and then
 * runs to completion with main stopped. (An atomic block would not do: when a
 * statement inside it blocks, SPIN lets other processes run.) The handler
 * fires exactly once, at any point: before, during or after main's call.
 *
 * Properties:
 *  - no deadlock: both calls return (SPIN's invalid end states);
 *  - when both have returned, limits[j] == f(P, j) for every j.
 * (A publisher reads one limit word per publish, so it reads the limit of
 * some setting; mid-update, two priorities may briefly follow different
 * settings.)
 *
 * Planted bug (spin -DPLANTED_BUG=1): the old design, a writer spin lock
 * taken by both callers. The handler spins forever on the lock that the
 * preempted main context holds.
 */

#define F(q, j) (3 * (q) + (j) + 1)

byte P = 0;
byte limits[3];
bit isr = 0;
bit writer_lock = 0;
byte returned = 0;

inline set_thresholds(setting) {
#if PLANTED_BUG == 1
  atomic { writer_lock == 0 -> writer_lock = 1 };
  P = setting;
  limits[0] = F(setting, 0);
  limits[1] = F(setting, 1);
  limits[2] = F(setting, 2);
  writer_lock = 0;
#else
  P = setting;
  do
  :: q = P;
     limits[0] = F(q, 0);
     limits[1] = F(q, 1);
     limits[2] = F(q, 2);
     if
     :: P == q -> break
     :: else -> skip
     fi
  od;
#endif
  returned++
}

proctype Main() provided (isr == 0) {
  byte q;
  set_thresholds(1)
}

proctype Interrupt() {
  byte q;
  isr = 1;
  set_thresholds(2);
  isr = 0
}

init {
  byte j;
  atomic {
    limits[0] = F(0, 0);
    limits[1] = F(0, 1);
    limits[2] = F(0, 2);
    run Main();
    run Interrupt()
  };
  returned == 2;
  for (j : 0 .. 2) {
    assert(limits[j] == F(P, j))
  }
}
