#!/usr/bin/env bash
# The whole suite under ThreadSanitizer: zero reports allowed.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh clang libclang-rt-14-dev >/dev/null
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=66
TSLAB_SANITIZE=thread CC=clang CXX=clang++ scripts/run-tests.sh build/ci-tsan
