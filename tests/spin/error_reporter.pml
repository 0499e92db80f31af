/*
 * Replacing the error callback while the consumer reports (hosted).
 *
 * Models include/sluice/detail/consume/error_reporter.hpp (ErrorReporter::Set and
 * ErrorReporter::Report) with the grace period of
 * include/sluice/detail/consume/dispatch_epoch.hpp (DispatchEpoch::Enter, Exit,
 * WaitForReaders), as Bus::SetErrorCallback and Bus::ProcessBatch use them
 * (include/sluice/bus.hpp). Set takes the writer lock, fills the pair slot
 * the version does not select (callback and context: two stores), bumps the
 * version, releases the lock, and only then waits for readers (not at all on
 * the consumer thread). Report, inside the epoch, copies the pair the version
 * selects and retries until the version is unchanged, then calls it.
 *
 * Two writer threads install pairs (1, 1) and (2, 2); the consumer runs
 * BATCHES batches of one report each, and its callback may call Set(3, 3)
 * itself, once. Each Set installs a pair (k, k), so a torn copy shows as
 * callback != context. The pair installed first is (0, 0).
 *
 * Properties (assertions):
 *  - no torn pair: the callback and context called come from one Set;
 *  - once a Set has returned, the callback it replaced is not called again;
 *    when it returns on a thread other than the consumer, that callback is
 *    not running either;
 *  - no deadlock: every process reaches its end, so every batch ends and
 *    every Set returns (SPIN's invalid end states; a lock spin is modelled as
 *    a statement that blocks until the lock is free, so a spin that can never
 *    end is a deadlock).
 *
 * Planted bugs (spin -DPLANTED_BUG=n):
 *  1: Set waits for readers while it still holds the writer lock. A writer
 *     that does so waits for the batch to end, while a callback in that batch
 *     calls Set and spins on the lock;
 *  2: Report does not re-check the version after copying the pair.
 */

#define NONE 255
#define NCB 4
#define BATCHES 2

byte cb[2];                    /* targets_[i].callback */
byte ctx[2];                   /* targets_[i].context */
byte version = 0;              /* version_ */
bit writer_lock = 0;           /* writer_lock_ */
byte counter = 0;              /* DispatchEpoch::counter_ */
byte dispatching_thread = NONE;

/* Ghosts. */
bit retired[NCB];              /* replaced by a Set that has returned */
bit running[NCB];

inline wait_for_readers(result) {
  observed = counter;
  if
  :: (observed % 2 == 0) -> result = 1
  :: else ->
     if
     :: dispatching_thread == _pid -> result = 0
     :: else -> (counter != observed); result = 1
     fi
  fi
}

/* ErrorReporter::Set(k, k) */
inline set(k) {
  atomic { writer_lock == 0 -> writer_lock = 1 };
  v = version;
  cb[(v + 1) % 2] = k;
  ctx[(v + 1) % 2] = k;
  /* The pair this Set replaces: stable while the lock is held. */
  d_step { replaced = cb[v % 2]; version = v + 1 };
#if PLANTED_BUG == 1
  wait_for_readers(w);
  writer_lock = 0;
#else
  writer_lock = 0;
  wait_for_readers(w);
#endif
  d_step {
    assert(dispatching_thread == _pid || !running[replaced]);
    retired[replaced] = 1
  }
}

proctype Writer(byte k) {
  byte v, replaced, observed;
  bit w;
  set(k)
}

proctype Consumer() {
  byte batch = 0, v, c, x, replaced, observed;
  bit w;
  bit set_called = 0;
  do
  :: batch < BATCHES ->
     /* Enter */
     dispatching_thread = _pid;
     counter = counter + 1;
     /* Report */
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
     atomic {
       assert(c == x);
       assert(!retired[c]);
       running[c] = 1
     };
     /* The callback may replace itself, once. */
     if
     :: !set_called -> set_called = 1; set(3)
     :: true -> skip
     fi;
     running[c] = 0;
     /* Exit */
     counter = counter + 1;
     batch++
  :: else -> break
  od
}

init {
  atomic {
    run Consumer();
    run Writer(1);
    run Writer(2)
  }
}
