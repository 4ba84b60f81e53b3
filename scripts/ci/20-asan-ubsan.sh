#!/usr/bin/env bash
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, with
# LeakSanitizer on: any report fails the step.
set -euo pipefail
cd "$(dirname "$0")/../.."
# clang's sanitizer runtimes live in their own Debian package.
scripts/install-deps.sh clang libclang-rt-14-dev >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_init_order=1
export LSAN_OPTIONS=report_objects=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
TSLAB_SANITIZE=address CC=clang CXX=clang++ scripts/run-tests.sh build/ci-asan
