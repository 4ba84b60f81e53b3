/* The epoch close protocol against the fast path (docs/ARCHITECTURE.md,
 * sections 3.1, 3.2, 5 and 6.1), for spin.
 *
 * One slab of NSLOTS slots belongs to era e and is the current slab of the
 * owner thread's cache. Three threads race on it:
 *   owner  - allocates, frees (local while e is ACTIVE, the closing free
 *            after), exits (flush, abandon, hand its objects to others) and
 *            goes on as the thread that adopts the abandoned cache;
 *   remote - another thread with a cache of its own: frees, in its own busy
 *            window, every object handed to it (remote or closing free);
 *   closer - tslab_epoch_close(e): publish CLOSING, membarrier, wait for
 *            every busy flag, detach (4a), fence and wait again, add `live`
 *            (4b), release the retired run of e (5).
 *
 * Memory model. Shared words are sequentially consistent except the one
 * reordering the protocol is about: a thread's relaxed store to its cache's
 * `busy` flag sits in a store buffer (one entry per thread, drained by the
 * `drain` process at any time), so the thread's later loads can complete
 * before the store is visible: the store-buffering pattern against the
 * closer's CLOSING (or DETACHED) store and its busy load. A seq_cst fence of
 * a thread drains its own buffer; membarrier() drains every thread's buffer
 * at one point of the closer (a full barrier on each running thread, a
 * context switch on the others). Owner read-modify-writes of alloc[] and
 * `used` are a plain load and a plain store, so a concurrent atomic update by
 * another thread can be lost, as it would be in the code.
 *
 * Build-time switches: the protocol as documented passes; each variant that
 * drops one of its parts must fail, which shows the part is needed and the
 * model can see its absence.
 *   -DNSLOTS=3            three slots instead of two
 *   -DMAXOPS=n            operations of the owner before it frees what it holds
 *   -DNO_MEMBARRIER       the closer skips step 2 (fails)
 *   -DFENCE_FALLBACK      with NO_MEMBARRIER: every busy window fences after
 *                         its busy store, as where membarrier is missing (passes)
 *   -DNO_CLOSING_FENCE    the closing free reads `mode` without its fence (fails)
 *   -DNO_SECOND_WAIT      the closer adds `live` right after detaching (fails)
 *   -DSTATE_KEYED         the closing free takes the detached path whenever
 *                         the era is not ACTIVE, without reading `mode` (fails)
 *
 * Ghost state: holder[i] says who holds slot i's object (the user's view),
 * pending[i] is set from the moment a free takes effect for the user until
 * exactly one party accounts for it in the slab's counters; inflight counts
 * free calls that have not returned yet.
 */

#ifndef NSLOTS
#define NSLOTS 2
#endif
#define FULL ((1 << NSLOTS) - 1)
#ifndef MAXOPS
#define MAXOPS 5
#endif

#define ACTIVE 1
#define CLOSING 2
#define ATTACHED 0
#define DETACHED 1
#define NONE 0
#define T0 1
#define T1 2

/* slab descriptor */
byte alloc_bits;      /* alloc[]: 1 = slot allocated */
byte remote_bits;     /* remote[]: freed by a non-owner, not collected */
byte used;            /* owner-private: handed out minus collected frees */
short live;           /* DETACHED accounting, may go below zero transiently */
bit mode = ATTACHED;
bit owned = 1;        /* `owner` field: the cache owns the slab */
bit in_cache = 1;     /* linked in the owner's bin */
bit in_heap;          /* retired to the page heap as a dirty run of era e */
bit released;         /* madvise'd */

byte state = ACTIVE;  /* ring[slot(e)].state */

/* each thread's cache busy flag, as seen by others, and its store buffer
 * (index 0: the owner's cache, 1: the other thread's) */
bit busy[2];
bit sb_full[2];
bit sb_val[2];

/* ghosts */
byte holder[NSLOTS];
bit pending[NSLOTS];
byte inflight;
bit owner_done, remote_done, close_started, close_done;

#define BIT(i) (1 << (i))
#define POP(x) ((((x) >> 0) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1))
#if NSLOTS == 3
#define HELD_BY(t) (holder[0] == t || holder[1] == t || holder[2] == t)
#define ANY_PENDING (pending[0] || pending[1] || pending[2])
#else
#define HELD_BY(t) (holder[0] == t || holder[1] == t)
#define ANY_PENDING (pending[0] || pending[1])
#endif
#define HELD (HELD_BY(T0) || HELD_BY(T1))

/* Nobody reads or writes a slab's descriptor once it is released: 6.1 step
 * 4b promises that no slab is retired under a free's feet. */
#define TOUCH() assert(!released)

/* ---- the busy window (section 5) ---------------------------------------- */

inline fence(t) {
  atomic { if :: sb_full[t] -> busy[t] = sb_val[t]; sb_full[t] = 0 :: else -> skip fi }
}

inline busy_enter(t) {
  atomic { sb_full[t] == 0 -> sb_val[t] = 1; sb_full[t] = 1 }
#ifdef FENCE_FALLBACK
  fence(t);
#endif
}

inline busy_leave(t) {
  atomic { sb_full[t] == 0 -> sb_val[t] = 0; sb_full[t] = 1 }
}

active proctype drain() {
end:
  do
  :: atomic { sb_full[0] -> busy[0] = sb_val[0]; sb_full[0] = 0 }
  :: atomic { sb_full[1] -> busy[1] = sb_val[1]; sb_full[1] = 0 }
  od
}

/* ---- accounting ---------------------------------------------------------- */

inline account(i) {
  assert(pending[i]);
  pending[i] = 0
}

inline account_bits(r) {
  atomic {
    if :: r & BIT(0) -> account(0) :: else -> skip fi;
    if :: r & BIT(1) -> account(1) :: else -> skip fi;
#if NSLOTS == 3
    if :: r & BIT(2) -> account(2) :: else -> skip fi;
#endif
  }
}

inline release_slab() {
  atomic {
    assert(!released);
    assert(!in_cache || mode == DETACHED);
    assert(!HELD && !ANY_PENDING);
    released = 1
  }
}

/* ---- free paths (section 3.1), all inside the freer's busy window ------- */

/* DETACHED: clearing the alloc bit is the accounting event. */
inline detached_free(i, old) {
  atomic {
    TOUCH();
    old = alloc_bits; alloc_bits = alloc_bits & ~BIT(i);
    assert(old & BIT(i));
    account(i)
  }
  atomic { TOUCH(); old = live; live = live - 1 }
  if :: old == 1 -> release_slab() :: else -> skip fi
}

inline set_remote(i, old) {
  assert((alloc_bits & BIT(i)) && !(remote_bits & BIT(i)));   /* relaxed validation */
  atomic { TOUCH(); old = remote_bits; remote_bits = remote_bits | BIT(i) }
  assert(!(old & BIT(i)))                                      /* a valid free is no double free */
}

/* The era is not ACTIVE: the closer may be anywhere in steps 2-5. */
inline closing_free(t, i, m, old) {
#ifdef STATE_KEYED
  detached_free(i, old)
#else
#ifndef NO_CLOSING_FENCE
  fence(t);
#endif
  atomic { TOUCH(); m = mode }
  if
  :: m == DETACHED -> detached_free(i, old)
  :: else ->
     set_remote(i, old);
     atomic { TOUCH(); m = mode }                              /* seq_cst re-check */
     if
     :: m == DETACHED ->
        atomic { TOUCH(); old = remote_bits; remote_bits = remote_bits & ~BIT(i) }
        if
        :: old & BIT(i) -> detached_free(i, old)               /* took it back: ours */
        :: else -> skip                                        /* the closer took it */
        fi
     :: else -> skip
     fi
  fi
#endif
}

/* Owner-private collection of remote frees (inside the busy window). */
inline collect(r, tmp) {
  atomic { r = remote_bits; remote_bits = 0 }
  tmp = alloc_bits;
  alloc_bits = tmp & ~r;
  used = used - POP(r);
  account_bits(r)
}

inline owner_path_ok() {
  assert(!released && mode == ATTACHED && owned)
}

/* ---- the owner thread (and the thread that adopts its cache) ------------- */

inline owner_alloc(st, i, r, tmp) {
  busy_enter(0);
  st = state;
  if
  :: st == ACTIVE && in_cache ->
     if :: alloc_bits == FULL -> collect(r, tmp) :: else -> skip fi;
     if
     :: alloc_bits != FULL ->
        i = 0;
        do :: alloc_bits & BIT(i) -> i++ :: else -> break od;
        owner_path_ok();
        assert(holder[i] == NONE && !pending[i]);
        tmp = alloc_bits;
        alloc_bits = tmp | BIT(i);
        used++;
        if :: holder[i] = T0 :: holder[i] = T1 fi
     :: else -> skip                                 /* full: takes another slab (not modelled) */
     fi
  :: else -> skip                                    /* rejected: EPOCH_CLOSED, or no slab */
  fi;
  busy_leave(0)
}

inline owner_free(i, st, own, m, old, tmp) {
  atomic { holder[i] = NONE; pending[i] = 1; inflight++ }
  busy_enter(0);
  st = state;
  own = owned;
  if
  :: st == ACTIVE && own ->                          /* local free */
     owner_path_ok();
     assert((alloc_bits & BIT(i)) && !(remote_bits & BIT(i)));
     tmp = alloc_bits;
     alloc_bits = tmp & ~BIT(i);
     atomic { used--; account(i) }
  :: st == ACTIVE && !own -> set_remote(i, old)      /* retired and not ours: unreachable with one slab */
  :: else -> closing_free(0, i, m, old)
  fi;
  busy_leave(0);
  inflight--
}

/* Thread exit: flush (collect, retire the empty slab), abandon the cache,
 * hand the thread's objects to the rest of the program. */
inline owner_exit(st, r, tmp) {
  busy_enter(0);
  st = state;
  if
  :: st == ACTIVE && in_cache ->
     owner_path_ok();
     collect(r, tmp);
     if
     :: used == 0 -> in_cache = 0; owned = 0; in_heap = 1
     :: else -> skip
     fi
  :: else -> skip
  fi;
  busy_leave(0);
  atomic {
    if :: holder[0] == T0 -> holder[0] = T1 :: else -> skip fi;
    if :: holder[1] == T0 -> holder[1] = T1 :: else -> skip fi;
#if NSLOTS == 3
    if :: holder[2] == T0 -> holder[2] = T1 :: else -> skip fi;
#endif
  }
}

active proctype owner() {
  byte ops, i, st, r, tmp;
  short old;
  bit own, m;
  do
  :: ops < MAXOPS ->
     ops++;
     if
     :: owner_alloc(st, i, r, tmp)
     :: holder[0] == T0 -> owner_free(0, st, own, m, old, tmp)
     :: holder[1] == T0 -> owner_free(1, st, own, m, old, tmp)
#if NSLOTS == 3
     :: holder[2] == T0 -> owner_free(2, st, own, m, old, tmp)
#endif
     :: owner_exit(st, r, tmp)
     fi
  :: else -> break
  od;
  /* the program ends: every object still held is freed */
  if :: holder[0] == T0 -> owner_free(0, st, own, m, old, tmp) :: else -> skip fi;
  if :: holder[1] == T0 -> owner_free(1, st, own, m, old, tmp) :: else -> skip fi;
#if NSLOTS == 3
  if :: holder[2] == T0 -> owner_free(2, st, own, m, old, tmp) :: else -> skip fi;
#endif
  owner_done = 1
}

/* ---- another thread: cross-thread frees ---------------------------------- */

inline other_free(i, st, m, old) {
  atomic { holder[i] == T1 -> holder[i] = NONE; pending[i] = 1; inflight++ }
  busy_enter(1);
  st = state;
  if
  :: st == ACTIVE -> set_remote(i, old)              /* remote free */
  :: else -> closing_free(1, i, m, old)
  fi;
  busy_leave(1);
  inflight--
}

active proctype remote() {
  byte st;
  short old;
  bit m;
  do
  :: holder[0] == T1 -> other_free(0, st, m, old)
  :: holder[1] == T1 -> other_free(1, st, m, old)
#if NSLOTS == 3
  :: holder[2] == T1 -> other_free(2, st, m, old)
#endif
  :: owner_done && !HELD_BY(T1) -> break
  od;
  remote_done = 1
}

/* ---- tslab_epoch_close(e) (section 6.1) ---------------------------------- */

active proctype closer() {
  byte r;
  short old, delta;
  bit detached;
  close_started = 1;
  state = CLOSING;                                   /* step 1, seq_cst */
#ifndef NO_MEMBARRIER
  atomic { fence(0); fence(1) }                      /* step 2: membarrier */
#endif
  busy[0] == 0;                                      /* step 3: wait (acquire) */
  busy[1] == 0;
  if                                                 /* step 4a: detach */
  :: in_cache ->
     TOUCH();
     mode = DETACHED;
     owned = 0;
     atomic { r = remote_bits; remote_bits = 0 }
     atomic { old = alloc_bits; alloc_bits = alloc_bits & ~r }
     account_bits(r);
     delta = used - POP(r);
     in_cache = 0;
     detached = 1
  :: else -> skip
  fi;
#ifndef NO_SECOND_WAIT
  busy[0] == 0;                                      /* step 4b: fence (SC here), wait again */
  busy[1] == 0;
#endif
  if
  :: detached ->
     atomic { TOUCH(); old = live; live = live + delta }
     if :: old + delta == 0 -> release_slab() :: else -> skip fi
  :: else -> skip
  fi;
  if                                                 /* step 5: dirty runs of e */
  :: in_heap && !released -> release_slab()
  :: else -> skip
  fi;
  /* contract 2.3: a slab empty when close returns has been released
   * (a free still running counts as not done yet) */
  atomic {
    assert(released || inflight > 0 || HELD);
    close_done = 1
  }
}

/* ---- end state: nothing lost, nothing leaked ----------------------------- */

active proctype final() {
  atomic {
    (owner_done && remote_done && close_done && !sb_full[0] && !sb_full[1]) ->
    assert(!ANY_PENDING);
    assert(alloc_bits == 0 && remote_bits == 0 && live == 0);
    assert(released && !in_cache && busy[0] == 0 && busy[1] == 0)
  }
}

/* Close terminates (C3), under weak fairness: check with pan -a -f. */
ltl close_terminates { [] (close_started -> <> close_done) }
