#!/usr/bin/env bash
# The README's test command, as a user runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/run-tests.sh build/ci-tests
