/* The epoch close protocol against the fast paths, the users of an era and
 * the reuse of run metadata (docs/ARCHITECTURE.md sections 3.1, 3.3, 3.4, 4,
 * 6 and 7.2-7.5), for spin.
 *
 * One run S (a class slab, or with -DBLOCK a block) of NSLOTS slots belongs
 * to era e and to the owner thread's cache C0, which formats it on its first
 * allocation in e. Five processes race on it (a sixth checks the end state):
 *   owner  - thread T0 with cache C0: registers as a user of e (7.2) and
 *            formats S on its first allocation, allocates, frees (the local
 *            fast path while e is ACTIVE and S is its own, the non-owner path
 *            otherwise, in the same window after a fence), collects remote frees (refill, flush), exits (flush,
 *            retire S if empty, abandon, hand its objects to others) and goes
 *            on as the thread that adopts C0; it may be the closer itself,
 *            between two of its calls; at the end, once every other free has
 *            returned, one more collection;
 *   remote - thread T1 with cache C1: maybe first allocates in e from a run
 *            of its own (registration: C1 becomes `user`, or `multi` is set;
 *            nothing it frees depends on it, and it may wait arbitrarily
 *            long for its first object, so it comes first), then frees every
 *            object handed to it (the non-owner path, in its fenced window);
 *   closer - tslab_epoch_close(e) by a thread without a cache, when the
 *            owner does not close: CAS to CLOSING, read `user` and `multi`,
 *            the sole-user path (no fence, no wait) or the heavy fence and a
 *            wait for the users' windows, detach their slots (S: a block
 *            first collects and may turn out drained; detach stores DETACHED,
 *            exchanges the remote words, delta), then (block: trim) add delta
 *            to `live`; the party that brings it to 0 retires S. With
 *            -DFREE_ALL it is tslab_epoch_free_all(e): after the detach it
 *            ends every object of S (the kill: the remote word exchanged
 *            only when a load finds a bit in it, the alloc word exchanged
 *            with 0), then adds delta less what it ended and took;
 *   reuser - any thread that formats S's descriptor again once S is retired
 *            (the heap's next run, or the owner's hot block): only after the
 *            quiet check or a seal and its completion (section 4);
 *   drain  - drains the store buffers (below).
 * Initial choices (init): whether the era's opener registered C0 as `user`
 * or nobody (7.1), with BLOCK also whether it readied C0 (7.1: before the era
 * is ACTIVE, C0's slot counts for e and S, a drained block of its reserve
 * formatted for e, is its bumping block), and whether T0 or the separate
 * closer closes.
 *
 * Memory model. Shared words are sequentially consistent except the one
 * reordering the protocols are about: a thread's relaxed store to its cache's
 * `busy` word on entering a window (a counter, odd inside; here modulo 4)
 * sits in a store buffer (one entry per thread, drained by the `drain`
 * process at any time), so the thread's later loads, and its later stores,
 * take effect before it is visible (arm64 allows both, x86 the first): the
 * store-buffering pattern against the closer's CLOSING store and its busy
 * loads, and against a retirement and the reuser's busy loads. A seq_cst
 * fence of a thread drains its own buffer: non-owner windows open with one
 * (section 4), owner windows do not (section 6, light); membarrier drains
 * every thread's buffer at one point of the closer (a full barrier on each
 * running thread, a context switch on the others). The store that leaves a
 * window is not buffered: seen late, it could only make others wait longer;
 * for the same reason the counter may wrap (a waiter that finds the value it
 * recorded again, two windows later, waits for one more).
 * Owner read-modify-writes of alloc[] and `used` are a plain load and a
 * plain store, so a concurrent atomic update by another thread can be lost,
 * as it would be in the code. Everything else (the era state and its CAS,
 * `user`, `multi`, `mode`, remote words, `remote_hint`, `live`, the grace
 * clock) is sequentially consistent: the code uses seq_cst there, or acquire
 * and release pairs whose reorderings no step of the model depends on.
 *
 * Properties (assertions; the last one LTL):
 *   - owner paths (format, allocation, local free, collection, flush) act on
 *     S only while it is C0's, ATTACHED and not retired, and never after the
 *     closer has detached the era's users (S1, C1, G3);
 *   - when the closer has detached the users, no cache counts for e any more
 *     (U1: a cache that registered was seen, one that was not backed out);
 *   - no slot handed out twice; every valid free finds its bits as the
 *     relaxed validation expects and is accounted exactly once, by the
 *     owner's collection, the closer's exchange, a take-back or a detached
 *     free (C2); at the end the bitmaps are empty, `live` is 0 and S retired;
 *   - S is retired once, empty, never while an object in it is held or a
 *     free in it unaccounted, and never while the closer trims it;
 *   - a window that validated S never reads or writes S's descriptor or
 *     bitmaps after they were formatted again (G1);
 *   - once every remote free has returned, the owner's next collection in an
 *     ACTIVE era leaves no remote bit (the hint loses none);
 *   - when close returns, a run with no live object has left use (contract
 *     2.3);
 *   - close terminates (C3): no invalid end state, and
 *     [] (close_started -> <> close_done) under weak fairness;
 *   - free-all: every object ends exactly once, by a free that took effect
 *     (accounted) or by the kill; a free of an object the kill ended fails
 *     (its bits are clear, or the run is gone) and accounts nothing; S is
 *     retired with `live` 0 once the last racing free returned (C2 with
 *     free-all, contract line 8).
 *
 * Not modelled: notification (ARMED/QUEUED), several runs per bin or cache,
 * set-aside masks and next words, cache-hot reuse and the bins' free stacks (owner-only
 * state that names slots free in the bitmaps; the closer empties it before
 * it detaches the runs, with the owner out of its windows, as it drops the
 * masks: docs/ARCHITECTURE.md section 3, F3), the block's bias and `block_remote`
 * counter, free-all of runs detached by an earlier close (its own model,
 * docs/model/free_all_closed.pml), spans, the cacheless freers' counter (it plays the busy
 * word's part with read-modify-writes, which are fences), `inflight` of era
 * slots (it guards counters at advance and at a free-all's fold of its
 * ends), registration by a non-owner free before it acts (it attaches no
 * memory; it only makes the closer wait for the freer's window as for any
 * user's), statistics, and fork. T1's own run is a
 * flag: its attachment and its detach by the closer. Reuse formats S's
 * descriptor for another use; the model records that it happened and checks
 * that nobody who validated the old incarnation touches it afterwards. The
 * reuser checks both caches; in the code a reuser skips its own, which is in
 * no other window then. Only seals that start after the retirement are
 * modelled (an earlier one cannot cover its stamp); a retirement's stamp and
 * its kind store are one step, as they are against seals, which run under
 * the heap mutex too.
 *
 * Build-time switches: the protocol as documented passes; each variant that
 * drops one of its parts must fail, which shows the part is needed and the
 * model can see its absence.
 *   -DNSLOTS=3            three slots instead of two
 *   -DMAXOPS=n            operations of the owner before it frees what it holds
 *   -DBLOCK               S is a block: bump allocation, drained when a stopped
 *                         block empties, collected then detached or drained at
 *                         close, trimmed before its live count is added
 *   -DNO_REMOTE           T1 does not register or allocate (smaller runs)
 *   -DLIVENESS            without the reuser and the end-state check (for the
 *                         LTL run: neither bears on termination)
 *   -DNO_MEMBARRIER       the closer skips the heavy fence (fails)
 *   -DFENCE_FALLBACK      with NO_MEMBARRIER: every owner window fences after
 *                         its busy store, as where membarrier is missing (passes)
 *   -DNO_WINDOW_FENCE     non-owner windows open without their fence (fails)
 *   -DNO_OWNER_FENCE      a free that finds the run not its own goes on in its
 *                         owner window without the fence that makes it a
 *                         non-owner one (fails)
 *   -DSTATE_KEYED         a non-owner free takes the detached path whenever
 *                         the era is not ACTIVE, without reading `mode` (fails)
 *   -DNO_MODE_RECHECK     a non-owner free does not re-read `mode` after its
 *                         fetch_or, so it never takes its bit back (fails)
 *   -DNO_USER_REREAD      registration does not re-read the era state (fails)
 *   -DUSERS_READ_FIRST    the closer reads `user` and `multi` before its CAS
 *                         to CLOSING (fails)
 *   -DSOLE_IGNORES_USER   the closer takes the sole-user path whenever `multi`
 *                         is clear, whoever `user` is (fails)
 *   -DNO_GRACE            the reuser formats S as soon as it is retired (fails)
 *   -DHINT_CLEARED_AFTER  the owner's collection clears `remote_hint` with a
 *                         plain store after it read the remote words (fails)
 *   -DTRIM_AFTER_LIVE     with BLOCK: the closer trims after adding the live
 *                         count (fails)
 *   -DFREE_ALL            the close is a free-all (passes)
 *   -DKILL_PLAIN_ALLOC    with FREE_ALL: the kill reads and clears the alloc
 *                         word in two steps instead of an exchange (fails)
 *   -DKILL_NO_LIVE        with FREE_ALL: the closer retires S after the kill
 *                         without adding what is left of delta to `live`,
 *                         also when a freer took a bit in between (fails)
 *   -DREADY_UNREGISTERED  with BLOCK: the opener readies C0 without
 *                         registering it as `user` (fails)
 * (With FREE_ALL and NO_MODE_RECHECK the model fails too, as it does without
 * FREE_ALL: free-all rests on the freers' take-back like the close. The
 * kill's remote exchange itself is not needed for safety: the detach took
 * every remote bit set before DETACHED, and a later one is taken back by its
 * freer; the kill takes what it finds so that such a free counts as a free.
 * A kill that never exchanges the remote word passes as well.)
 *
 * Ghost state: holder[i] says who holds slot i's object (the user's view;
 * after a free-all it may hold a pointer to an ended object, ended[i]),
 * pending[i] is set from the moment a free takes effect for the user until
 * exactly one party accounts for it in the run's counters; inflight counts
 * free calls that have not returned yet; claimed[c] says cache c counts for
 * e (its slot's era is e: it may hold memory of e); owner_paths_closed is set
 * when the closer has detached every user's slot (after it, no owner path
 * may act for e: C1); trimming brackets the closer's trim.
 */

#ifndef NSLOTS
#define NSLOTS 2
#endif
#define FULL ((1 << NSLOTS) - 1)
#ifndef MAXOPS
#define MAXOPS 4
#endif

#define ACTIVE 1
#define CLOSING 2
#define CLOSED 3
#define ATTACHED 0
#define DETACHED 1
#define NONE 0
#define T0 1          /* holders: threads */
#define T1 2
#define C0 1          /* caches (user): C0 is T0's, C1 is T1's */
#define C1 2
#define NOREC 4       /* a seal recorded no window of this cache */

/* run S's descriptor and bitmaps */
byte alloc_bits;      /* alloc[]: 1 = slot allocated */
byte remote_bits;     /* remote[]: freed by a non-owner, not collected */
bit hint;             /* remote_hint */
byte used;            /* owner-private: handed out minus collected frees */
short live;           /* DETACHED accounting, may go below zero transiently */
bit mode = ATTACHED;
bit owned;            /* `owner` field names C0 */
bit formatted;        /* C0 formatted S for era e */
bit in_cache;         /* linked in C0's bin (slab) or slot (block) */
bit retired;          /* S left use (heap or hot reserve), stamped */
bit reused;           /* S's descriptor formatted again for another use */
bit trimming;         /* the closer is trimming S (block) */
#ifdef BLOCK
byte top;             /* bump pointer, in slots; NSLOTS: stopped */
#endif

/* era e's slot */
byte state = ACTIVE;
byte user;            /* NONE, C0, C1 */
bit multi;

/* each thread's cache busy word as seen by others, and its store buffer
 * (index 0: C0, 1: C1) */
byte busy[2];
bit sb_full[2];
byte sb_val[2];

/* choices */
bit closer_is_owner;

/* ghosts */
byte holder[NSLOTS];
bit pending[NSLOTS];
bit ended[NSLOTS];    /* free-all ended the object: its frees must fail */
byte inflight;
bit claimed[2];
bit owner_paths_closed;
bit objects_done, owner_done, remote_done, close_started, close_done;

#define BIT(i) (1 << (i))
#define POP(x) ((((x) >> 0) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1))
#if NSLOTS == 3
#define HELD_BY(t) (holder[0] == t || holder[1] == t || holder[2] == t)
#define ANY_PENDING (pending[0] || pending[1] || pending[2])
#define LIVE_HELD ((holder[0] != NONE && !ended[0]) || (holder[1] != NONE && !ended[1]) || \
                   (holder[2] != NONE && !ended[2]))
#define LIVE_PENDING ((pending[0] && !ended[0]) || (pending[1] && !ended[1]) || (pending[2] && !ended[2]))
#else
#define HELD_BY(t) (holder[0] == t || holder[1] == t)
#define ANY_PENDING (pending[0] || pending[1])
#define LIVE_HELD ((holder[0] != NONE && !ended[0]) || (holder[1] != NONE && !ended[1]))
#define LIVE_PENDING ((pending[0] && !ended[0]) || (pending[1] && !ended[1]))
#endif
#define ODD(v) (((v) & 1) == 1)

/* A window that validated S (a live object's run) reads and writes S's
 * descriptor and bitmaps only while they still are that incarnation: G1. */
#define TOUCH() assert(!reused)

/* ---- busy windows (sections 4 and 6) -------------------------------------- */

inline fence(t) {
  atomic { if :: sb_full[t] -> busy[t] = sb_val[t]; sb_full[t] = 0 :: else -> skip fi }
}

/* Owner windows: relaxed store, compiler barrier only. */
inline busy_enter(t) {
  atomic { sb_full[t] == 0 -> sb_val[t] = (busy[t] + 1) % 4; sb_full[t] = 1 }
#ifdef FENCE_FALLBACK
  fence(t);
#endif
}

/* Non-owner windows: the busy store, then a full fence, before any load. */
inline busy_enter_fenced(t) {
  atomic { sb_full[t] == 0 -> sb_val[t] = (busy[t] + 1) % 4; sb_full[t] = 1 }
#ifndef NO_WINDOW_FENCE
  fence(t);
#endif
}

/* Leaving (a release store) after the entry's store has drained. Others
 * seeing the even value late could only make them wait longer, so the store
 * is not buffered. */
inline busy_leave(t) {
  atomic { sb_full[t] == 0 -> busy[t] = (busy[t] + 1) % 4 }
}

proctype drain() {
end:
  do
  :: atomic { sb_full[0] -> busy[0] = sb_val[0]; sb_full[0] = 0 }
  :: atomic { sb_full[1] -> busy[1] = sb_val[1]; sb_full[1] = 0 }
  od
}

/* ---- accounting and retirement --------------------------------------------- */

inline account(i) {
  assert(pending[i]);
  pending[i] = 0
}

/* A free of an object free-all ended finds it not live and fails: it
 * accounts nothing. */
inline fail_ended(i) {
  atomic { assert(ended[i] && pending[i]); pending[i] = 0 }
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

/* 3.3: S leaves use: exactly once, empty, never while the closer trims it;
 * the stamp and the kind store are one step against seals (heap mutex). */
inline retire() {
  atomic {
    assert(!retired && !trimming);
    assert(!in_cache || mode == DETACHED);
    assert(!LIVE_HELD && !LIVE_PENDING);
    retired = 1
  }
}

/* An owner path (alloc, local free, collection, format) acts on S: S is
 * C0's and attached, and no close has passed its detach of the users. */
inline owner_path_ok() {
  assert(!retired && mode == ATTACHED && owned && in_cache && !owner_paths_closed)
}

/* ---- users of the era (7.2) ------------------------------------------------- */

/* Cache c, in its window with the era read ACTIVE, takes memory for e for
 * the first time: CAS `user` from nobody, else set `multi`; then re-read the
 * era state into st. */
inline claim(c, st) {
  if
  :: user == c -> skip                                   /* the opener */
  :: else ->
     if
     :: atomic { user == NONE -> user = c }
     :: atomic { user != NONE -> skip }; multi = 1
     fi
  fi;
#ifndef NO_USER_REREAD
  st = state
#endif
}

/* ---- free paths (section 3.1) ----------------------------------------------- */

/* DETACHED: clearing the alloc bit is the accounting event. */
inline detached_free(i, old) {
  atomic {
    TOUCH();
    old = alloc_bits; alloc_bits = alloc_bits & ~BIT(i);
    if
    :: old & BIT(i) -> account(i)
    :: else -> assert(ended[i] && pending[i]); pending[i] = 0   /* fails: not live */
    fi
  }
  if
  :: old & BIT(i) ->
     atomic { TOUCH(); old = live; live = live - 1 };
     if :: old == 1 -> retire() :: else -> skip fi
  :: else -> skip
  fi
}

/* Thread t's non-owner free of slot i, inside its fenced window. */
inline nonowner_free(t, i, st, m, old) {
  if
  :: atomic { !retired -> TOUCH(); assert(formatted) } ->   /* the view: S validated */
#ifdef STATE_KEYED
  if
  :: st != ACTIVE -> detached_free(i, old)
  :: else ->
#endif
  atomic { TOUCH(); m = mode }
  if
  :: m == DETACHED -> detached_free(i, old)
  :: else ->
     if                                                  /* relaxed validation */
     :: atomic { (alloc_bits & BIT(i)) && !(remote_bits & BIT(i)) -> TOUCH() } ->
        atomic { TOUCH(); old = remote_bits; remote_bits = remote_bits | BIT(i) }
        assert(!(old & BIT(i)));
#ifdef NO_MODE_RECHECK
        atomic { TOUCH(); hint = 1 }
#else
        atomic { TOUCH(); m = mode }                     /* seq_cst re-check */
        if
        :: m == DETACHED ->
           atomic { TOUCH(); old = remote_bits; remote_bits = remote_bits & ~BIT(i) }
           if
           :: old & BIT(i) -> detached_free(i, old)      /* took it back: ours */
           :: else -> skip                               /* the closer took it */
           fi
        :: else ->                                       /* the hint, stored only when clear */
           atomic { TOUCH(); old = hint };               /* seq_cst load */
           if
           :: !old -> atomic { TOUCH(); hint = 1 }       /* seq_cst */
           :: else -> skip
           fi
        fi
#endif
     :: else -> atomic { TOUCH() }; fail_ended(i)        /* free-all ended it */
     fi
  fi
#ifdef STATE_KEYED
  fi
#endif
  :: else -> fail_ended(i)                               /* the view fails: S is gone */
  fi
}

/* Owner collection of remote frees (owner window, era ACTIVE; or the closer
 * on a block, owner quiescent): only after a hint, which it takes with an
 * exchange before it reads the words. (A load of the hint and a later plain
 * store of 0, before the words are read, would do here, where everything but
 * `busy` is sequentially consistent; in the code, even on x86, the store can
 * land after a freer's fetch_or and hint store that the owner's word loads
 * missed, and that free would wait for the close.) */
inline collect(r, tmp) {
  if
#ifndef HINT_CLEARED_AFTER
  :: atomic { hint -> hint = 0 } ->                      /* exchange(hint, 0) */
#else
  :: hint ->
#endif
     atomic { TOUCH(); r = remote_bits; remote_bits = 0 }
     tmp = alloc_bits;
     assert((r & tmp) == r);                             /* S2 */
     alloc_bits = tmp & ~r;
     used = used - POP(r);
     account_bits(r)
#ifdef HINT_CLEARED_AFTER
     ; hint = 0
#endif
  :: else -> skip
  fi
}

/* ---- the owner thread (and the thread that adopts its cache) ---------------- */

/* Take a free slot of S into i (255: none). */
inline find_slot(i) {
#ifdef BLOCK
  if :: top < NSLOTS -> i = top; top++ :: else -> i = 255 fi
#else
  i = 0;
  do :: i < NSLOTS && (alloc_bits & BIT(i)) -> i++ :: else -> break od;
  if :: i == NSLOTS -> i = 255 :: else -> skip fi
#endif
}

inline owner_alloc(st, i, r, tmp) {
  busy_enter(0);
  st = state;
  if
  :: st == ACTIVE && !claimed[0] ->
     claim(C0, st);
     if
     :: st == ACTIVE ->
        claimed[0] = 1;
        assert(!owner_paths_closed && !formatted);
        formatted = 1; owned = 1; in_cache = 1           /* format S */
     :: else -> skip                                     /* backs out: EPOCH_CLOSED */
     fi
  :: else -> skip
  fi;
  if
  :: st == ACTIVE && in_cache ->
     owner_path_ok();
     find_slot(i);
#ifdef BLOCK
     if
     :: i == 255 ->                                      /* stopped: collect, maybe drained */
        collect(r, tmp);
        if :: used == 0 -> in_cache = 0; owned = 0; retire() :: else -> skip fi
     :: else -> skip
     fi;
#else
     if :: i == 255 -> collect(r, tmp); find_slot(i) :: else -> skip fi;
#endif
     if
     :: i != 255 ->
        owner_path_ok();
        assert(holder[i] == NONE && !pending[i]);
        tmp = alloc_bits;
        alloc_bits = tmp | BIT(i);
        used++;
        if :: holder[i] = T0 :: holder[i] = T1 fi
     :: else -> skip                                     /* full: another run (not modelled) */
     fi
  :: else -> skip                                        /* rejected, or S gone */
  fi;
  busy_leave(0)
}

inline owner_free(i, st, own, m, old, tmp, r) {
  atomic { holder[i] = NONE; pending[i] = 1; inflight++ }
  busy_enter(0);                                         /* the thread's own cache, from its entry */
  st = state;
  own = owned;                                           /* s->owner names C0, read after the era */
  if
  :: st == ACTIVE && own ->                              /* local free */
     owner_path_ok();
     assert((alloc_bits & BIT(i)) && !(remote_bits & BIT(i)));
     tmp = alloc_bits;
     alloc_bits = tmp & ~BIT(i);
     atomic { used--; account(i) }
#ifdef BLOCK
     if                                                  /* a stopped block drained */
     :: top == NSLOTS && used == 0 -> in_cache = 0; owned = 0; retire()
     :: else -> skip
     fi;
#endif
     own = 0
  :: else -> own = 1                                     /* the non-owner path */
  fi;
  if
  :: own ->                                              /* in the same window, made a non-owner one */
#if !defined(NO_WINDOW_FENCE) && !defined(NO_OWNER_FENCE)
     fence(0);
#endif
     st = state;
     nonowner_free(0, i, st, m, old)
  :: else -> skip
  fi;
  busy_leave(0);
  inflight--
}

/* Thread exit: flush (collect, retire an empty S), abandon the cache, hand
 * the thread's objects to the rest of the program. */
inline owner_exit(st, r, tmp) {
  busy_enter(0);
  st = state;
  if
  :: st == ACTIVE && in_cache ->
     owner_path_ok();
     collect(r, tmp);
     if
     :: used == 0 -> in_cache = 0; owned = 0; retire()
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

/* ---- tslab_epoch_close(e) (7.3), by `me` (C0 or NONE) -------------------- */

/* Wait until cache c's window open when we looked has ended (its busy word
 * is even or has moved on). A closer never waits in a window of its own, so
 * its own store buffer is empty. */
inline wait_window(c, v) {
  v = busy[c];
  if :: ODD(v) -> (busy[c] != v) :: else -> skip fi
}

/* Step 4 for S: detach (a block first collects; drained, it just leaves). */
inline detach_run(r, old, delta, detached) {
#ifdef BLOCK
  collect(r, old);
  if
  :: used == 0 -> in_cache = 0; owned = 0; retire()     /* drained: hot block or heap */
  :: else ->
#endif
  TOUCH();
  mode = DETACHED;
  owned = 0;
  atomic { TOUCH(); r = remote_bits; remote_bits = 0 }
  atomic { TOUCH(); old = alloc_bits; assert((r & old) == r); alloc_bits = alloc_bits & ~r }
  account_bits(r);
  delta = used - POP(r);
  in_cache = 0;
  detached = 1
#ifdef BLOCK
  fi
#endif
}

/* Detach cache c's slot of e, if it counts for e. */
inline detach_slot(c, r, old, delta, detached) {
  if
  :: c == C0 && claimed[0] ->
     if :: in_cache -> detach_run(r, old, delta, detached) :: else -> skip fi;
     claimed[0] = 0
  :: c == C1 && claimed[1] -> claimed[1] = 0             /* T1's own run */
  :: else -> skip
  fi
}

inline trim() {
  atomic { assert(!retired); TOUCH(); trimming = 1 }
  atomic { TOUCH(); trimming = 0 }                       /* reads alloc bits, madvise */
}

#ifdef FREE_ALL
/* The objects in `ended` end (free-all). */
inline end_bits(x) {
  atomic {
    if :: x & BIT(0) -> assert(!ended[0]); ended[0] = 1 :: else -> skip fi;
    if :: x & BIT(1) -> assert(!ended[1]); ended[1] = 1 :: else -> skip fi;
#if NSLOTS == 3
    if :: x & BIT(2) -> assert(!ended[2]); ended[2] = 1 :: else -> skip fi;
#endif
  }
}

/* Step 5 of a free-all for detached S (7.3): the remote word is exchanged
 * only when a load finds a bit in it (S is DETACHED: a freer that sets its
 * bit later takes it back), the alloc word is exchanged with 0; remote bits
 * taken are frees that completed, the other objects end; then `live` gets
 * delta less both, and whoever brings it to 0 retires S. When nothing is
 * left of delta, no freer took a bit between the detach and the kill, so
 * none will touch `live`: the closer retires S without updating it (7.5). */
inline kill(r, old, delta) {
  atomic { TOUCH(); assert(mode == DETACHED); r = remote_bits }
  if
  :: r != 0 -> atomic { TOUCH(); r = remote_bits; remote_bits = 0 }
  :: else -> skip
  fi;
  /* The ghosts change in the step that takes the bits. */
#ifdef KILL_PLAIN_ALLOC
  atomic { TOUCH(); old = alloc_bits };
  atomic { TOUCH(); alloc_bits = 0; assert((r & old) == r); account_bits(r); end_bits(old & ~r) };
#else
  atomic { TOUCH(); old = alloc_bits; alloc_bits = 0; assert((r & old) == r); account_bits(r); end_bits(old & ~r) };
#endif
  delta = delta - POP(old);
  if
#ifdef KILL_NO_LIVE
  :: true -> retire()
#else
  :: delta == 0 -> retire()
#endif
  :: else ->
     atomic { TOUCH(); old = live; live = live + delta };
     if :: old + delta == 0 -> retire() :: else -> skip fi
  fi
}
#endif

inline close(me, u, m, v, r, old, delta, detached) {
  close_started = 1;
#ifdef USERS_READ_FIRST
  u = user;
  m = multi;
  state = CLOSING;
#else
  state = CLOSING;                                       /* step 1: CAS, seq_cst */
  u = user;
  m = multi;
#endif
  if
#ifdef SOLE_IGNORES_USER
  :: !m ->
#else
  :: !m && (u == me || u == NONE) ->                     /* step 2: sole user */
#endif
     if :: u != NONE -> detach_slot(u, r, old, delta, detached) :: else -> skip fi
  :: else ->                                             /* step 3 */
#ifndef NO_MEMBARRIER
     atomic { fence(0); fence(1) }                       /* membarrier */
#endif
     if
     :: m ->
        wait_window(0, v);
        wait_window(1, v);
        detach_slot(C0, r, old, delta, detached);
        detach_slot(C1, r, old, delta, detached)
     :: else ->
        wait_window(u - 1, v);
        detach_slot(u, r, old, delta, detached)
     fi
  fi;
  atomic {
    owner_paths_closed = 1;
    assert(!claimed[0] && !claimed[1])                   /* U1: every user detached */
  }
#ifdef FREE_ALL
  if :: detached -> kill(r, old, delta) :: else -> skip fi;
#else
  if                                                     /* step 5: settle */
  :: detached && delta == 0 -> retire()
  :: detached && delta != 0 ->
#if defined(BLOCK) && !defined(TRIM_AFTER_LIVE)
     trim();
#endif
     atomic { TOUCH(); old = live; live = live + delta };
     if
     :: old + delta == 0 -> retire()
     :: else ->
        skip
#if defined(BLOCK) && defined(TRIM_AFTER_LIVE)
        ; trim()
#endif
     fi
  :: else -> skip
  fi;
#endif
  state = CLOSED;                                        /* step 7 */
  /* contract 2.3: a run empty when close returns has left use (a free still
   * running counts as not done yet) */
  atomic {
    assert(!formatted || retired || inflight > 0 || LIVE_HELD);
    close_done = 1
  }
}

proctype owner() {
  byte ops, i, st, r, tmp, u, v;
  short old, delta;
  bit own, m, detached;
  do
  :: ops < MAXOPS ->
     ops++;
     if
     :: owner_alloc(st, i, r, tmp)
     :: holder[0] == T0 -> owner_free(0, st, own, m, old, tmp, r)
     :: holder[1] == T0 -> owner_free(1, st, own, m, old, tmp, r)
#if NSLOTS == 3
     :: holder[2] == T0 -> owner_free(2, st, own, m, old, tmp, r)
#endif
     :: owner_exit(st, r, tmp)
     :: closer_is_owner && !close_started -> close(C0, u, m, v, r, old, delta, detached)
     fi
  :: else -> break
  od;
  /* the program ends: every object still held is freed */
  if :: holder[0] == T0 -> owner_free(0, st, own, m, old, tmp, r) :: else -> skip fi;
  if :: holder[1] == T0 -> owner_free(1, st, own, m, old, tmp, r) :: else -> skip fi;
#if NSLOTS == 3
  if :: holder[2] == T0 -> owner_free(2, st, own, m, old, tmp, r) :: else -> skip fi;
#endif
  objects_done = 1;
  /* Once every other free returned, the owner's next collection (a refill
   * or a flush) in an ACTIVE era takes every remote bit: none is left
   * behind for good by the hint. */
  remote_done;
  busy_enter(0);
  st = state;
  if
  :: st == ACTIVE && in_cache ->
     owner_path_ok();
     collect(r, tmp);
     assert(remote_bits == 0)
  :: else -> skip
  fi;
  busy_leave(0);
  if
  :: closer_is_owner && !close_started -> close(C0, u, m, v, r, old, delta, detached)
  :: else -> skip
  fi;
  owner_done = 1
}

/* ---- another thread: cross-thread frees, its own allocation ------------------ */

inline other_free(i, st, m, old) {
  atomic { holder[i] == T1 -> holder[i] = NONE; pending[i] = 1; inflight++ }
  busy_enter_fenced(1);
  st = state;
  nonowner_free(1, i, st, m, old);
  busy_leave(1);
  inflight--
}

/* T1's first allocation in e: registration, then (the era still ACTIVE) an
 * owner path on a run of its own. */
inline other_alloc(st) {
  busy_enter(1);
  st = state;
  if
  :: st == ACTIVE ->
     claim(C1, st);
     if
     :: st == ACTIVE -> atomic { assert(!owner_paths_closed); claimed[1] = 1 }
     :: else -> skip
     fi
  :: else -> skip
  fi;
  busy_leave(1)
}

proctype remote() {
  byte st;
  short old;
  bit m;
#ifndef NO_REMOTE
  /* T1's allocation, if any, comes before its frees (nothing it frees
   * depends on it, and it may wait arbitrarily long for its first object) */
  if :: other_alloc(st) :: skip fi;
#endif
  do
  :: holder[0] == T1 -> other_free(0, st, m, old)
  :: holder[1] == T1 -> other_free(1, st, m, old)
#if NSLOTS == 3
  :: holder[2] == T1 -> other_free(2, st, m, old)
#endif
  :: objects_done && !HELD_BY(T1) -> break
  od;
  remote_done = 1
}

proctype closer() {
  byte u, v, r;
  short old, delta;
  bit m, detached;
  close(NONE, u, m, v, r, old, delta, detached)
}

/* ---- reuse of S's metadata (section 4) ------------------------------------ */

proctype reuser() {
  byte rec0, rec1;
end:
  retired;
#ifndef NO_GRACE
  do
  :: /* quiet check: a fence, then no other cache's window is open */
     atomic { !ODD(busy[0]) && !ODD(busy[1]) } -> break
  :: /* seal: gen++, a fence, record the open windows; it completes when
      * each recorded window has moved on */
     atomic {
       rec0 = (ODD(busy[0]) -> busy[0] : NOREC);
       rec1 = (ODD(busy[1]) -> busy[1] : NOREC)
     };
     (rec0 == NOREC || busy[0] != rec0);
     (rec1 == NOREC || busy[1] != rec1);
     break
  od;
#endif
  reused = 1
}

/* ---- end state: nothing lost, nothing leaked --------------------------------- */

proctype final() {
  atomic {
    (owner_done && remote_done && close_done && !sb_full[0] && !sb_full[1]) ->
    assert(!ANY_PENDING);
    assert(!formatted || (alloc_bits == 0 && remote_bits == 0 && live == 0 && retired));
    assert(!in_cache && !ODD(busy[0]) && !ODD(busy[1]))
  }
}

init {
  atomic {
    if :: user = NONE :: user = C0 fi;                   /* the opener (7.1) */
#ifdef BLOCK
    if                                                   /* and readied C0 with S (7.1) */
    :: user == C0 -> claimed[0] = 1; formatted = 1; owned = 1; in_cache = 1
#ifdef READY_UNREGISTERED
       ; user = NONE
#endif
    :: skip
    fi;
#endif
    if :: closer_is_owner = 1 :: closer_is_owner = 0 fi;
    run drain();
    run owner();
    run remote();
    if :: !closer_is_owner -> run closer() :: else -> skip fi;
#ifndef LIVENESS
    run reuser();
    run final()
#endif
  }
}

/* Close terminates (C3), under weak fairness: check with pan -a -f. */
ltl close_terminates { [] (close_started -> <> close_done) }
