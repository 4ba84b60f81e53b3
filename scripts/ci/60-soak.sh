#!/usr/bin/env bash
# Soak: tests/soak.c for 120 s (threads churning across advancing and closing
# epochs; flat memory, no inconsistency, no unexpected failure).
# Usage: scripts/ci/60-soak.sh [soak arguments]   e.g. --hours 8 --threads 8
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh cmake make gcc >/dev/null
build=build/ci-soak
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSLAB_BUILD_BENCH=OFF \
  -DTSLAB_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target soak -j"$(nproc)"
if [ $# -eq 0 ]; then set -- --seconds 120; fi
"$build/tests/soak" "$@"
