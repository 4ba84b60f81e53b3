#!/usr/bin/env bash
# Model check of the epoch close protocol (docs/model/close_protocol.pml):
# exhaustive safety with 2 and 3 slots, the seq_cst-fence fallback, close
# termination under weak fairness, and checks that the model catches the
# protocol with any of its parts removed (membarrier, the closing free's
# fence, the closer's second wait, the mode check of the closing free). TSLAB_MODEL_FULL=1 runs the larger
# bounds (about three times longer) instead of CI's.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh spin gcc >/dev/null
model=$PWD/docs/model/close_protocol.pml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# run NAME EXPECT SPIN_DEFS PAN_CFLAGS PAN_ARGS: EXPECT is "pass" or "fail".
run() {
  local name=$1 expect=$2 defs=$3 cflags=$4 args=$5 t0 out
  t0=$(date +%s)
  # shellcheck disable=SC2086
  spin -a $defs "$model" >/dev/null
  # shellcheck disable=SC2086
  gcc -O2 -w $cflags -o pan pan.c
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

if [ "${TSLAB_MODEL_FULL:-0}" = 1 ]; then small=5; else small=4; fi
run "safety, 2 slots" pass "" "-DSAFETY -DNOCLAIM" ""
run "safety, 3 slots, $small ops" pass "-DNSLOTS=3 -DMAXOPS=$small" "-DSAFETY -DNOCLAIM -DCOLLAPSE" ""
run "safety, fence fallback" pass "-DNO_MEMBARRIER -DFENCE_FALLBACK" "-DSAFETY -DNOCLAIM" ""
run "close terminates (weak fairness), $small ops" pass "-DMAXOPS=$small" "-DCOLLAPSE" "-a -f"
# Each part of the protocol is needed, and the model sees it missing.
run "bug: no membarrier" fail "-DNO_MEMBARRIER" "-DSAFETY -DNOCLAIM" ""
run "bug: no fence in the closing free" fail "-DNO_CLOSING_FENCE" "-DSAFETY -DNOCLAIM" ""
run "bug: no second wait (step 4b)" fail "-DNO_SECOND_WAIT" "-DSAFETY -DNOCLAIM" ""
run "bug: closing free keyed on the era state" fail "-DSTATE_KEYED" "-DSAFETY -DNOCLAIM" ""
