#!/usr/bin/env bash
# libFuzzer (with ASan+UBSan) on the API driver tests/fuzz/fuzz_api.c for a
# bounded time, on one worker, starting from the committed corpus. Any crash,
# leak or model divergence fails the step; the reproducer is left in the build
# directory (replay it with: build/ci-fuzz/tests/fuzz_api <file>).
# Usage: scripts/ci/40-fuzz.sh [SECONDS]   (default 150)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-150}
scripts/install-deps.sh cmake make clang libclang-rt-14-dev >/dev/null
build=build/ci-fuzz
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSLAB_FUZZ=ON \
  -DTSLAB_BUILD_BENCH=OFF -DTSLAB_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target fuzz_api -j"$(nproc)"
# New inputs go to a scratch directory: the committed corpus stays as it is.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build"
tests/fuzz_api -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
  -print_final_stats=1 "$work" ../../tests/fuzz/corpus
