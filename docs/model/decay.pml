/* The decay handshake of docs/ARCHITECTURE.md section 5 (invariant D1):
 * a retire may keep empty runs of an ACTIVE era in the pool beyond its bound
 * (tagged with the era's slot), and the close of that era must release or
 * untag every such run before it returns. The retire announces itself in
 * decay_pending before it reads the era state; the closer CASes the state
 * before it reads decay_pending and decay_bytes. All four operations are
 * seq_cst, so sequential consistency (Promela's) is the memory model here;
 * the heap mutex is a lock bit.
 *
 * Processes: two retirers (an owner retiring its emptied slabs, one retire
 * call each round), two takers that reuse a tagged run as a heap allocation
 * does (the first takes a whole run and untags it, or releases it when it
 * finds no descriptor for it; the second takes the front of a longer one
 * and leaves the rest in the pool with the run's tag, linking the rest
 * before it unlinks the run), and the closer. At the end, no run tagged for
 * the era may remain (D1).
 *
 * Mutants, each expected to fail:
 *   -DREAD_BEFORE_ANNOUNCE  the retire reads the state before decay_pending
 *   -DPENDING_BEFORE_CAS    the closer reads decay_pending before its CAS
 *   -DNO_PENDING            the closer looks at decay_bytes only
 *   -DNO_MUTEX_WAIT         the closer trims without taking the heap mutex
 *   -DSPLIT_UNLINK_FIRST    a split unlinks the run before it links the rest
 *   -DRELINK_TAGGED         a taker that finds no descriptor for the run
 *                           puts it back tagged (instead of releasing it)
 */

#define ACTIVE  1
#define CLOSING 2

#ifndef ROUNDS
#define ROUNDS 2
#endif

byte state = ACTIVE;
byte pending = 0;   /* decay_pending[slot] */
byte tagged = 0;    /* runs in the pool tagged with the slot: decay_bytes[slot] / run */
bool mu = 0;        /* the heap mutex */
byte done = 0;      /* retirers and taker finished */
bool closed = 0;    /* the close returned */

inline lock() { atomic { mu == 0 -> mu = 1 } }
inline unlock() { mu = 0 }

proctype retirer() {
  byte r = 0;
  bool ok;
  do
  :: r < ROUNDS ->
     lock();
#ifdef READ_BEFORE_ANNOUNCE
     ok = (state == ACTIVE);
     pending++;
#else
     pending++;
     ok = (state == ACTIVE);
#endif
     if
     :: ok -> tagged++    /* linked beyond the bound, tagged */
     :: else -> skip      /* released at once (not modelled further) */
     fi;
     pending--;
     unlock();
     r++
  :: else -> break
  od;
  atomic { done++ }
}

/* A heap allocation that takes a tagged run for reuse: the whole run leaves
 * the pool, or (split) its rest stays, tagged. Each step is one update of
 * decay_bytes, which the closer reads without the mutex. */
proctype taker(bool split) {
  lock();
  if
  :: tagged > 0 && !split ->
     tagged--;
#ifdef RELINK_TAGGED
     tagged++    /* no descriptor: back in the pool, still tagged */
#else
     skip        /* used, or (no descriptor) released */
#endif
  :: tagged > 0 && split ->
#ifdef SPLIT_UNLINK_FIRST
     tagged--;
     tagged++
#else
     tagged++;   /* the rest linked, with the run's tag */
     tagged--    /* the run unlinked */
#endif
  :: else -> skip
  fi;
  unlock();
  atomic { done++ }
}

proctype closer() {
  bool look;
#ifdef PENDING_BEFORE_CAS
  look = (pending > 0);
  atomic { state == ACTIVE -> state = CLOSING };
  look = look || (tagged > 0);
#else
  atomic { state == ACTIVE -> state = CLOSING };
#ifdef NO_PENDING
  look = (tagged > 0);
#else
  look = (pending > 0);
  look = look || (tagged > 0);
#endif
#endif
  if
  :: look ->
#ifndef NO_MUTEX_WAIT
     lock();
#endif
     tagged = 0;   /* released while above the bound, the rest untagged */
#ifndef NO_MUTEX_WAIT
     unlock()
#endif
  :: else -> skip
  fi;
  closed = 1
}

init {
  atomic {
    run retirer();
    run retirer();
    run taker(0);
    run taker(1);
    run closer()
  }
  /* Everyone finished: no run of the closed era may still be tagged. */
  (done == 4 && closed);
  assert(tagged == 0)
}
