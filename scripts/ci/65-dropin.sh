#!/usr/bin/env bash
# The drop-in malloc on real programs, as a smoke: every program of
# bench/real/run_real.py once in quick mode under libtslab-malloc and under
# glibc (their outputs must agree), failing on any crash, failed check or
# wrong result; then a program run under the drop-in with TSLAB_HTTP set is
# scraped like Prometheus would. Times are not judged here (docs/DROPIN.md
# has the full comparison, made by run_real.py without --quick).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh cmake make gcc g++ python3 curl zlib1g-dev redis-server redis-tools sqlite3 \
  python3.11 libpython3.11-testsuite libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 >/dev/null

timeout 900 python3 bench/real/run_real.py --quick --repeats 1 --allocators tslab,glibc \
  --build build/ci-dropin --out build/ci-dropin/real-smoke.json --no-install

# Metrics of an unmodified program: TSLAB_HTTP starts the endpoint.
lib=$PWD/build/ci-dropin/src/malloc/libtslab-malloc.so
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TSLAB_HTTP="127.0.0.1:$port" LD_PRELOAD="$lib" python3.11 -c 'import time; time.sleep(8)' &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
metrics=""
for _ in $(seq 1 50); do
  metrics=$(curl -sf "http://127.0.0.1:$port/metrics" || true)
  [ -n "$metrics" ] && break
  sleep 0.1
done
if ! grep -Eq '^tslab_allocations_total [1-9]' <<<"$metrics" ||
   ! grep -q 'label="process"' <<<"$metrics"; then
  echo "no allocation metrics from the program run under TSLAB_HTTP" >&2
  exit 1
fi
echo "metrics of python3.11 under the drop-in: $(grep -E '^tslab_allocations_total' <<<"$metrics")"
