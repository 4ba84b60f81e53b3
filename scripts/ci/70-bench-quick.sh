#!/usr/bin/env bash
# The benchmark command in quick mode, then a check that the report is
# complete and well-formed (its numbers are not judged here).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/run-benchmarks.sh --quick --out build/ci-report
python3 bench/check_report.py build/ci-report
