/* The epoch close protocol against the fast path (docs/ARCHITECTURE.md,
 * sections 3.1, 3.2, 5 and 6.1), for spin.
 *
 * One slab of NSLOTS slots belongs to era e and is the current slab of the
 * owner thread's cache. Three threads race on it:
 *   owner  - allocates, frees locally (or remotely once e is closing), exits
 *            (flush, abandon, hand its objects to others) and goes on as the
 *            thread that adopts the abandoned cache;
 *   remote - frees, from another thread, every object handed to it;
 *   closer - tslab_epoch_close(e): publish CLOSING, membarrier, wait for
 *            busy == 0, detach the slab (or release it from the page heap).
 *
 * Memory model. Shared words are sequentially consistent except the one
 * reordering the protocol is about: a thread's relaxed store to its cache's
 * `busy` flag sits in a store buffer (one entry per thread, drained by the
 * `drain` process at any time), so the thread's later load of the epoch
 * state can complete before the store is visible: the store-buffering
 * pattern against the closer's CLOSING store and busy load. membarrier()
 * drains every thread's buffer at one point of the closer (a full barrier on
 * each running thread, a context switch on the others). The owner's other writes are visible at once; they
 * are ordered after the busy store only by its state check, which is the
 * point of the protocol. Non-atomic read-modify-writes of the owner (the
 * plain stores on alloc[] and used) are split into a load and a store, so a
 * concurrent atomic update by another thread can be lost, as in the code.
 *
 * Build-time switches:
 *   -DNSLOTS=3        three slots instead of two
 *   -DMAXOPS=n        operations of the owner before it frees what it holds
 *   -DNO_MEMBARRIER   the closer skips step 2: must fail (a safety assertion)
 *   -DFENCE_FALLBACK  with NO_MEMBARRIER: the fast path issues a seq_cst
 *                     fence after its busy store instead (must pass)
 *   -DSTRICT_RELEASE  also assert that nobody touches slab metadata after the
 *                     slab is released (fails: see docs/TESTING.md)
 *   -DFREE_IN_WINDOW  the free path of src/alloc.c since the core moved
 *                     non-owner frees into the freer's busy window: the
 *                     era's state, not the slab's mode, picks the attached
 *                     (fetch_or on remote[], no re-check) or the detached
 *                     (fetch_and on alloc[], live--) protocol. Fails: a
 *                     detached free between CLOSING and detach races the
 *                     owner's plain store on alloc[] (docs/TESTING.md)
 *   -DFIX_BY_MODE     with FREE_IN_WINDOW: a free that does not read ACTIVE
 *                     takes the protocol of section 3.1 keyed on `mode`
 *                     (must pass)
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
byte remote_bits;     /* remote[]: freed by another thread, not collected */
byte used;            /* owner-private: allocated minus collected frees */
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
byte inflight;        /* free calls that have not returned */
bit owner_done, remote_done, close_started, close_done;

#define BIT(i) (1 << (i))
#if NSLOTS == 3
#define HELD_BY(t) (holder[0] == t || holder[1] == t || holder[2] == t)
#define ANY_PENDING (pending[0] || pending[1] || pending[2])
#else
#define HELD_BY(t) (holder[0] == t || holder[1] == t)
#define ANY_PENDING (pending[0] || pending[1])
#endif
#define HELD (HELD_BY(T0) || HELD_BY(T1))
#define POP(x) ((((x) >> 0) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1))

#ifdef STRICT_RELEASE
#define TOUCH() assert(!released)
#else
#define TOUCH() skip
#endif

/* ---- the busy window (section 5) ---------------------------------------- */

inline flush_store_buffer(t) {
  atomic { if :: sb_full[t] -> busy[t] = sb_val[t]; sb_full[t] = 0 :: else -> skip fi }
}

inline busy_enter(t) {
  atomic { sb_full[t] == 0 -> sb_val[t] = 1; sb_full[t] = 1 }
#ifdef FENCE_FALLBACK
  flush_store_buffer(t);
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
  atomic { assert(pending[i]); pending[i] = 0 }
}

inline account_bits(r) {
  atomic {
    if :: r & BIT(0) -> assert(pending[0]); pending[0] = 0 :: else -> skip fi;
    if :: r & BIT(1) -> assert(pending[1]); pending[1] = 0 :: else -> skip fi;
#if NSLOTS == 3
    if :: r & BIT(2) -> assert(pending[2]); pending[2] = 0 :: else -> skip fi;
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

/* A free by a thread whose slab is detached, or (FREE_IN_WINDOW) whose era
 * is not ACTIVE. */
inline detached_free(i, old) {
  atomic {                                           /* clearing the bit accounts for it */
    old = alloc_bits; alloc_bits = alloc_bits & ~BIT(i);
    assert(old & BIT(i));
    account(i)
  }
  atomic { old = live; live = live - 1 }
  if :: old == 1 -> release_slab() :: else -> skip fi
}

/* A free the owner path could not take (docs/ARCHITECTURE.md 3.1). */
inline remote_free(i, m, old) {
  TOUCH();
  m = mode;
  if
  :: m == ATTACHED ->
     assert(alloc_bits & BIT(i));                    /* relaxed validation */
     atomic { old = remote_bits; remote_bits = remote_bits | BIT(i) }
     assert(!(old & BIT(i)));                        /* a valid free is no double free */
     TOUCH();
     m = mode;                                       /* seq_cst re-check */
     if
     :: m == DETACHED ->
        TOUCH();
        atomic { old = remote_bits; remote_bits = remote_bits & ~BIT(i) }
        if
        :: old & BIT(i) -> detached_free(i, old)     /* took it back: ours to account */
        :: else -> skip                              /* the owner or the closer took it */
        fi
     :: else -> skip
     fi
  :: else -> detached_free(i, old)
  fi
}

#ifdef FREE_IN_WINDOW
/* src/alloc.c free_general: inside the freer's busy window, st read there.
 * With ACTIVE read in a busy window the closer cannot detach before the
 * fetch_or (it waits for the window), so no re-check is needed. */
inline window_free(st, i, m, old) {
  if
  :: st == ACTIVE ->
     assert((alloc_bits & BIT(i)) && !(remote_bits & BIT(i)));
     atomic { old = remote_bits; remote_bits = remote_bits | BIT(i) }
     assert(!(old & BIT(i)))
#ifdef FIX_BY_MODE
  :: else -> remote_free(i, m, old)                  /* proposed fix: mode decides */
#else
  :: else -> detached_free(i, old)
#endif
  fi
}
#endif

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
  :: st == ACTIVE && own ->
     owner_path_ok();
     assert((alloc_bits & BIT(i)) && !(remote_bits & BIT(i)));
     tmp = alloc_bits;
     alloc_bits = tmp & ~BIT(i);
     used--;
     account(i);
     busy_leave(0)
  :: else ->
#ifdef FREE_IN_WINDOW
     window_free(st, i, m, old);
     busy_leave(0)
#else
     busy_leave(0);
     remote_free(i, m, old)
#endif
  fi;
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

/* The other thread's free: its own cache never owns the slab. */
inline other_free(i, st, m, old) {
  busy_enter(1);
  st = state;
#ifdef FREE_IN_WINDOW
  window_free(st, i, m, old);
  busy_leave(1)
#else
  busy_leave(1);
  remote_free(i, m, old)
#endif
}

active proctype remote() {
  byte st;
  short old;
  bit m;
  do
  :: atomic { holder[0] == T1 -> holder[0] = NONE; pending[0] = 1; inflight++ };
     other_free(0, st, m, old); inflight--
  :: atomic { holder[1] == T1 -> holder[1] = NONE; pending[1] = 1; inflight++ };
     other_free(1, st, m, old); inflight--
#if NSLOTS == 3
  :: atomic { holder[2] == T1 -> holder[2] = NONE; pending[2] = 1; inflight++ };
     other_free(2, st, m, old); inflight--
#endif
  :: owner_done && !HELD_BY(T1) -> break
  od;
  remote_done = 1
}

/* ---- tslab_epoch_close(e) (section 6.1) ---------------------------------- */

active proctype closer() {
  byte r;
  short old, n;
  close_started = 1;
  state = CLOSING;                                   /* step 1, seq_cst */
#ifndef NO_MEMBARRIER
  atomic { flush_store_buffer(0); flush_store_buffer(1) } /* step 2: membarrier */
#endif
  busy[0] == 0;                                      /* step 3: wait (acquire) */
  busy[1] == 0;
  if                                                 /* step 4: detach */
  :: in_cache ->
     TOUCH();
     mode = DETACHED;
     owned = 0;
     atomic { r = remote_bits; remote_bits = 0 }
     atomic { old = alloc_bits; alloc_bits = alloc_bits & ~r }
     account_bits(r);
     n = used - POP(r);
     in_cache = 0;
     atomic { old = live; live = live + n }
     if :: old + n == 0 -> release_slab() :: else -> skip fi
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
