#!/usr/bin/env bash
# Build the library and the comparison benchmark suite, run every allocator
# side by side, and write the report (docs/BENCHMARKS.md).
# Usage: scripts/run-benchmarks.sh [--quick] [--threads N] [--repeats N] [--out DIR]
#                                   [--real-programs FILE]
#   --quick       small sizes and one repeat: a smoke run of every workload
#   --threads N   also measure N threads in the threads workload (1 and 2 always)
#   --repeats N   repeats per case (default 5, quick 1)
#   --out DIR     where report.md, results.json and the plots go (default build/report)
#   --real-programs FILE  records of real programs run under each allocator
#                 (docs/BENCHMARKS.md) for the report's "Real programs" section
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/report
real=
suite_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) suite_args+=(--quick) ;;
    --threads|--repeats) suite_args+=("$1" "${2:?$1 needs a value}"); shift ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --real-programs) real=${2:?--real-programs needs a file}; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-benchmarks: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
  shift
done

echo "== dependencies"
scripts/install-deps.sh cmake make gcc python3 python3-matplotlib
# A peer whose package cannot be installed is skipped, and the report says so.
peers=(jemalloc:libjemalloc-dev mimalloc:libmimalloc-dev tcmalloc:libgoogle-perftools-dev)
if ! scripts/install-deps.sh "${peers[@]#*:}"; then
  for p in "${peers[@]}"; do
    scripts/install-deps.sh "${p#*:}" ||
      suite_args+=(--skip "${p%%:*}=Debian package ${p#*:} is not installed and could not be installed")
  done
fi

# matplotlib comes from Debian's python3-matplotlib, which only Debian's own
# interpreter sees (a python3 earlier in PATH, e.g. from pyenv, would not).
py=/usr/bin/python3
[ -x "$py" ] || py=python3

echo "== build (Release)"
build=build/bench
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTSLAB_BUILD_BENCH=ON \
  -DTSLAB_BUILD_TESTS=OFF -DTSLAB_BUILD_EXAMPLES=OFF >/dev/null
# Keep going past a target that fails: the suite runs whatever was built and
# the report names what is missing.
cmake --build "$build" -j"$(nproc)" -- -k ||
  echo "run-benchmarks: some targets failed to build; the report lists what is missing" >&2

echo "== suite"
"$py" bench/run_suite.py --bin "$build/bench" --out "$out" "${suite_args[@]}"
echo "== report"
[ -z "$real" ] || cp "$real" "$out/real_programs.json"
"$py" bench/report.py "$out"
