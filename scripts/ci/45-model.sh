#!/usr/bin/env bash
# Model check of the epoch close protocol, the users of an era, the remote
# hint and metadata reuse after grace periods (docs/model/close_protocol.pml),
# and of the decay handshake (docs/model/decay.pml):
# exhaustive safety for a slab and for a block (trim), with 3 slots, the
# seq_cst-fence fallback, close termination under weak fairness, and checks
# that the model catches the protocol with any of its parts removed (the
# membarrier, the non-owner window's fence, the mode re-check, the mode-keyed
# detached path, the registration's re-read, the order of CLOSING and the
# reads of the users, the sole-user test, the grace check, the hint's
# exchange, trim before live), and free-all's kill of a detached run (its
# alloc-word exchange; the freers' take-back, which it rests on as the close
# does; the live count of frees between the detach and the kill), and the
# opener's readied cache (its registration); and free-all of a closed era
# against the frees of its detached runs (docs/model/free_all_closed.pml).
# TSLAB_MODEL_FULL=1 runs larger bounds (about
# four times longer, 4.5 GB of memory) instead of CI's.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh spin gcc >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy in the working directory, where pan writes its trail for spin -t.
cp docs/model/close_protocol.pml docs/model/decay.pml docs/model/free_all_closed.pml "$work/"
cd "$work"
model=close_protocol.pml

# run NAME EXPECT SPIN_DEFS PAN_CFLAGS PAN_ARGS: EXPECT is "pass" or "fail".
# Runs expected to fail stop at their first counterexample, after a few
# thousand states: they are compiled without optimisation, which is faster.
run() {
  local name=$1 expect=$2 defs=$3 cflags=$4 args=$5 t0 out opt=-O2
  t0=$(date +%s)
  [ "$expect" = fail ] && opt=-O0
  # shellcheck disable=SC2086
  spin -a $defs "$model" >/dev/null
  # shellcheck disable=SC2086
  gcc $opt -w $cflags -o pan pan.c
  # shellcheck disable=SC2086
  out=$(./pan -m100000 $args 2>&1) || true
  if grep -q "max search depth too small" <<<"$out"; then
    echo "model: $name: search depth bound hit, the result would be partial" >&2
    exit 1
  fi
  local stored errors
  stored=$(awk '/states, stored/ {print $1; exit}' <<<"$out")
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | head -n1)
  if [ -z "$errors" ]; then
    echo "$out" >&2
    echo "model: $name: pan did not finish" >&2
    exit 1
  fi
  echo "model: $name: $stored states, errors: $errors ($(( $(date +%s) - t0 ))s)"
  if [ "$expect" = pass ] && [ "$errors" != 0 ]; then
    echo "$out" >&2
    # shellcheck disable=SC2086
    spin -t -p $defs "$model" >&2 || true
    exit 1
  fi
  if [ "$expect" = fail ]; then
    if [ "$errors" = 0 ]; then
      echo "model: $name: expected a counterexample, found none" >&2
      exit 1
    fi
    grep -m1 "assertion violated" <<<"$out"
  fi
}

# CI's bounds; TSLAB_MODEL_FULL=1: larger ones. "T1 only frees": the other
# thread does not register as a user of the era (no multi path), which makes
# the state space several times smaller.
slab="-DMAXOPS=3" block="-DMAXOPS=4 -DNO_REMOTE" three="-DMAXOPS=3 -DNO_REMOTE"
fallback="-DMAXOPS=2" live="-DMAXOPS=2" freeall="-DMAXOPS=2"
if [ "${TSLAB_MODEL_FULL:-0}" = 1 ]; then
  slab="-DMAXOPS=4" block="-DMAXOPS=3" three="-DMAXOPS=3" fallback="-DMAXOPS=3" live="-DMAXOPS=3"
  freeall="-DMAXOPS=3"
fi
# "-DMAXOPS=3 -DNO_REMOTE" -> "3 ops, T1 only frees"
bounds() { sed -e 's/-DMAXOPS=\([0-9]*\)/\1 ops/' -e 's/ -DNO_REMOTE/, T1 only frees/' <<<"$1"; }
safety="-DSAFETY -DNOCLAIM -DCOLLAPSE"
run "safety, slab, 2 slots, $(bounds "$slab")" pass "$slab" "$safety" ""
run "safety, block, 2 slots, $(bounds "$block")" pass "-DBLOCK $block" "$safety" ""
run "safety, slab, 3 slots, $(bounds "$three")" pass "-DNSLOTS=3 $three" "$safety" ""
run "safety, fence fallback, $(bounds "$fallback")" pass "-DNO_MEMBARRIER -DFENCE_FALLBACK $fallback" "$safety" ""
run "close terminates (weak fairness), $(bounds "$live")" pass "-DLIVENESS $live" "-DCOLLAPSE" "-a -f"
run "free-all, slab, 2 slots, $(bounds "$freeall")" pass "-DFREE_ALL $freeall" "$safety" ""
run "free-all, block, 2 slots, $(bounds "$block")" pass "-DFREE_ALL -DBLOCK $block" "$safety" ""
# Each part of the protocol is needed, and the model sees it missing.
bug="-DSAFETY -DNOCLAIM"
run "bug: no membarrier" fail "-DNO_MEMBARRIER" "$bug" ""
run "bug: non-owner window without its fence" fail "-DNO_WINDOW_FENCE" "$bug" ""
run "bug: owner window made a non-owner one without its fence" fail "-DNO_OWNER_FENCE" "$bug" ""
run "bug: non-owner free keyed on the era state" fail "-DSTATE_KEYED" "$bug" ""
run "bug: no re-check of mode after fetch_or" fail "-DNO_MODE_RECHECK" "$bug" ""
run "bug: registration without re-reading the era state" fail "-DNO_USER_REREAD" "$bug" ""
run "bug: closer reads the users before CLOSING" fail "-DUSERS_READ_FIRST" "$bug" ""
run "bug: sole-user path whenever multi is clear" fail "-DSOLE_IGNORES_USER" "$bug" ""
run "bug: metadata reused without a grace period" fail "-DNO_GRACE" "$bug" ""
run "bug: hint cleared after the remote words are read" fail "-DHINT_CLEARED_AFTER" "$bug" ""
run "bug: block trimmed after its live count is added" fail "-DBLOCK -DTRIM_AFTER_LIVE" "$bug" ""
run "bug: free-all clears an alloc word without an exchange" fail "-DFREE_ALL -DKILL_PLAIN_ALLOC" "$bug" ""
run "bug: free-all, freers never take their remote bits back" fail "-DFREE_ALL -DNO_MODE_RECHECK" "$bug" ""
run "bug: free-all retires without the live count of frees after the detach" fail "-DFREE_ALL -DKILL_NO_LIVE" "$bug" ""
run "bug: the opener readies its cache without registering it" fail "-DBLOCK -DREADY_UNREGISTERED -DMAXOPS=1 -DNO_REMOTE" "$bug" ""

# Free-all of a closed era against the frees of its detached runs
# (docs/model/free_all_closed.pml, ARCHITECTURE.md 7.5): each run retired
# once, never killed once retired.
model=free_all_closed.pml
run "free-all of a closed era: one retire per run" pass "" "" ""
run "bug: free-all unlinks and kills without claiming the run" fail "-DNO_CLAIM" "" ""
run "bug: free-all claims a run its last freer is retiring" fail "-DCLAIM_ZERO" "" ""

# The decay handshake (docs/model/decay.pml, ARCHITECTURE.md section 5, D1):
# no run kept beyond the pool's bound for an era survives its close.
model=decay.pml
run "decay: close releases what retires kept" pass "" "-DSAFETY" ""
run "bug: retire reads the era state before announcing itself" fail "-DREAD_BEFORE_ANNOUNCE" "-DSAFETY" ""
run "bug: closer reads decay_pending before its CAS" fail "-DPENDING_BEFORE_CAS" "-DSAFETY" ""
run "bug: closer looks at decay_bytes only" fail "-DNO_PENDING" "-DSAFETY" ""
run "bug: closer trims without the heap mutex" fail "-DNO_MUTEX_WAIT" "-DSAFETY" ""
run "bug: a split unlinks the run before linking its rest" fail "-DSPLIT_UNLINK_FIRST" "-DSAFETY" ""
run "bug: a run without a descriptor goes back to the pool tagged" fail "-DRELINK_TAGGED" "-DSAFETY" ""
