#!/usr/bin/env bash
# Instructions per operation under callgrind: a noise-free companion to the
# suite's timings (docs/BENCHMARKS.md, "Instruction counts"). Run on demand;
# CI does not run it.
# Usage: bench/callgrind_counts.sh [ALLOCATOR...]   (default: tslab)
#   ALLOCATOR: tslab, glibc, jemalloc, mimalloc or tcmalloc (a peer needs its
#   Debian package, as for scripts/run-benchmarks.sh)
#
# Only the allocator is counted: collection is on inside the suite's backend
# calls (be_alloc, be_free, be_phase_*: bench/backend.h) and what they call,
# off in the workload's own code (object writes and reads, random numbers).
# Each figure is the difference between two runs of different lengths over
# the difference in operations, so set-up and teardown cancel out. Objects
# are left untouched (touch=0: the workload's code is not counted anyway),
# and tslab reserves 1 GiB of address space instead of its default 64 GiB,
# which valgrind cannot map (other backends ignore reserve_mib).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- tslab

scripts/install-deps.sh cmake make gcc valgrind
build=build/callgrind
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTSLAB_BUILD_BENCH=ON \
  -DTSLAB_BUILD_TESTS=OFF -DTSLAB_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${@/#/bench_}" >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Instructions collected in one run: count BINARY TOGGLES WORKLOAD ARGS...
# (TOGGLES: the backend calls to count, comma-separated; a call counted
# inside another counted call would switch collection off, so free-all runs
# name be_phase_free_all and not be_phase_end, which a backend may call).
count() {
  local bin=$1 toggles=$2 out=$tmp/callgrind.out
  shift 2
  local args=()
  for f in ${toggles//,/ }; do args+=("--toggle-collect=$f"); done
  valgrind --tool=callgrind --collect-atstart=no "${args[@]}" --callgrind-out-file="$out" \
    "$bin" "$@" touch=0 reserve_mib=1024 >/dev/null 2>"$tmp/valgrind.err" || {
    echo "  (${bin##*/} $* failed: $(grep -v '^==' "$tmp/valgrind.err" | tail -1))" >&2
    return 1
  }
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# per_op NAME OPS1 OPS2 BINARY TOGGLES WORKLOAD ARGS1 -- ARGS2 (ARGS shared
# after the workload, then the two runs' own arguments)
per_op() {
  local name=$1 ops1=$2 ops2=$3 bin=$4 toggles=$5 wl=$6
  shift 6
  local shared=() a1 a2
  while [ "$1" != "--" ]; do shared+=("$1"); shift; done
  a1=$2 a2=$3
  local i1 i2
  i1=$(count "$bin" "$toggles" "$wl" "${shared[@]}" "$a1") || return 0
  i2=$(count "$bin" "$toggles" "$wl" "${shared[@]}" "$a2") || return 0
  awk -v n="$name" -v i1="$i1" -v i2="$i2" -v o1="$ops1" -v o2="$ops2" \
    'BEGIN { printf "  %-34s %10.1f\n", n, (i2 - i1) / (o2 - o1) }'
}

each="be_alloc,be_free,be_phase_begin,be_phase_alloc,be_phase_free,be_phase_end"
whole="be_phase_begin,be_phase_alloc,be_phase_free_all"
for alloc in "$@"; do
  bin=$build/bench/bench_$alloc
  if [ ! -x "$bin" ]; then
    echo "callgrind_counts: bench_$alloc was not built (is its package installed?)" >&2
    continue
  fi
  # The mode whose phase end frees a phase whole, if the allocator has one.
  case $alloc in
    tslab) whole_mode=epoch ;;
    jemalloc) whole_mode=arena ;;
    mimalloc) whole_mode=heap ;;
    *) whole_mode= ;;
  esac
  echo "$alloc: instructions per operation (callgrind, allocator calls only)"
  # churn runs pairs + pairs/100 + 1 pairs (a warm-up first).
  per_op "churn pair" 101001 202001 "$bin" "$each" churn -- pairs=100000 pairs=200000
  # batch: rounds + 1 rounds (one warm-up) of n allocations and n frees.
  per_op "batch op, FIFO" 40000 80000 "$bin" "$each" batch n=10000 lat_rounds=0 order=fifo -- rounds=1 rounds=3
  per_op "batch op, LIFO" 40000 80000 "$bin" "$each" batch n=10000 lat_rounds=0 order=lifo -- rounds=1 rounds=3
  per_op "mixed step, 16 B..4 KiB" 100000 200000 "$bin" "$each" mixed max=4096 -- ops=100000 ops=200000
  per_op "mixed step, 16 B..32 KiB" 100000 200000 "$bin" "$each" mixed max=32768 -- ops=100000 ops=200000
  for p in tiny burst steady leak hotspot kernel; do
    per_op "server '$p' request" 200 400 "$bin" "$each" server pattern=$p -- requests=200 requests=400
    [ -z "$whole_mode" ] ||
      per_op "server '$p' request, free-all" 200 400 "$bin" "$whole" server pattern=$p mode=$whole_mode free=all \
        -- requests=200 requests=400
  done
done
