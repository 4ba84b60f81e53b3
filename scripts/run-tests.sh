#!/usr/bin/env bash
# Build the library and run the whole test suite (README's test command).
# Usage: scripts/run-tests.sh [BUILD_DIR] [extra cmake args...]
#   BUILD_DIR defaults to build/tests. Set TSLAB_SANITIZE=address|thread for a
#   sanitizer build of the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/tests}
shift || true
scripts/install-deps.sh cmake make gcc g++ clang python3 pkg-config >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSLAB_BUILD_BENCH=OFF \
  -DTSLAB_SANITIZE="${TSLAB_SANITIZE:-}" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" ${CTEST_ARGS:-}
