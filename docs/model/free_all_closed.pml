/* Free-all of a closed era against the frees of its detached runs
 * (docs/ARCHITECTURE.md 7.5, "Free-all of a closed era"; src/epoch.c
 * end_objects and claim_detached, src/slab.c detached_free and
 * tslab_run_retire).
 *
 * After a close, a run of the era with live objects is DETACHED, on the era
 * slot's detached list, with `live` its true count. Each object is freed by
 * a freer (one process per object) or ended by a free-all of the era:
 *   - a free clears its alloc bit with a fetch_and; only if the bit was set
 *     does it count: `live` - 1, and the free that brings `live` to zero
 *     retires the run, which first unlinks it from the list (a load of
 *     `in_era_list` without the mutex, then under it);
 *   - the free-all takes the slot's mutex and claims the run: a CAS takes
 *     `live` from a positive count to one more (a run at zero is its last
 *     freer's to retire, and stays on the list for that freer to unlink),
 *     and unlinks it; after the mutex, the kill exchanges the alloc word
 *     (the objects it ends), and one fetch_sub takes the ends and the claim
 *     back, retiring the run when that reaches zero.
 * Checked: the run is retired exactly once, and only after the kill has
 * read it (no kill of a retired run, whose memory another use may hold);
 * every object is freed or ended, never both; in the end `live` is zero and
 * the run is off the list.
 *
 * The remote word is not modelled: a detached run's remote bits are taken
 * back by their freers or taken by the kill, each then counted as a free
 * (docs/model/close_protocol.pml checks that part with a free-all of an
 * open era); here every free is a detached free.
 *
 * Build variants that must fail (bugs the checks catch):
 *   -DNO_CLAIM     the free-all unlinks every run of its era and takes back
 *                  only the objects it ended (before the fix: a run retired
 *                  twice, or killed after its last freer retired it)
 *   -DCLAIM_ZERO   the claim also takes a run whose `live` is zero
 *
 * Run: spin -a free_all_closed.pml && gcc -O2 -o pan pan.c && ./pan
 * (scripts/ci/45-model.sh runs it and the variants). */

#define N 2
#define BIT(i) (1 << (i))

byte bits = 3;       /* the alloc word: both objects live */
short live = N;      /* the run's detached count, set by the close */
bit in_list = 1;     /* on the era slot's detached list */
bit mu = 0;          /* the era slot's spin lock */
byte retired = 0;
bit freed[N];
bit ended[N];
byte finished = 0;

inline lock() { atomic { mu == 0 -> mu = 1 } }
inline unlock() { mu = 0 }

inline retire() {
  atomic { assert(retired == 0); retired = 1 }
}

/* tslab_run_retire's unlink: a load without the mutex, then under it. */
inline unlink_for_retire() {
  if
  :: in_list ->
     lock();
     if :: in_list -> in_list = 0 :: else -> skip fi;
     unlock()
  :: else -> skip
  fi
}

proctype Freer(byte i) {
  byte old;
  short was;
  atomic { old = bits; bits = bits & ~BIT(i) }
  if
  :: old & BIT(i) ->
     atomic { assert(!ended[i]); freed[i] = 1 };
     atomic { was = live; live = live - 1 };
     if
     :: was - 1 == 0 -> unlink_for_retire(); retire()
     :: else -> skip
     fi
  :: else -> skip /* the kill ended it first: the free fails, counts nothing */
  fi;
  atomic { finished++ }
}

proctype FreeAll() {
  byte old, e;
  short was;
  bit claimed = 0;
  lock();
  if
  :: in_list ->
#ifdef NO_CLAIM
     claimed = 1;
#else
     atomic {
       if
#ifdef CLAIM_ZERO
       :: live >= 0 -> live = live + 1; claimed = 1
#else
       :: live > 0 -> live = live + 1; claimed = 1
#endif
       :: else -> skip
       fi
     };
#endif
     if :: claimed -> in_list = 0 :: else -> skip fi
  :: else -> skip
  fi;
  unlock();
  if
  :: claimed ->
     atomic {
       assert(retired == 0); /* the kill reads a run nobody has retired */
       old = bits;
       bits = 0;
       if :: old & BIT(0) -> assert(!freed[0]); ended[0] = 1 :: else -> skip fi;
       if :: old & BIT(1) -> assert(!freed[1]); ended[1] = 1 :: else -> skip fi
     };
     e = (old & 1) + ((old >> 1) & 1);
#ifdef NO_CLAIM
     atomic { was = live; live = live - e };
     if :: was - e == 0 -> retire() :: else -> skip fi
#else
     atomic { was = live; live = live - (e + 1) };
     if :: was - (e + 1) == 0 -> retire() :: else -> skip fi
#endif
  :: else -> skip
  fi;
  atomic { finished++ }
}

init {
  atomic {
    run Freer(0);
    run Freer(1);
    run FreeAll()
  }
  finished == 3;
  assert(retired == 1);
  assert(live == 0);
  assert(in_list == 0);
  assert(freed[0] + ended[0] == 1 && freed[1] + ended[1] == 1)
}
