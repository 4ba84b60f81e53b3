#!/usr/bin/env bash
# End to end against a real Prometheus: the example request server runs with
# its HTTP endpoint on loopback, Prometheus scrapes it every second, and what
# Prometheus stored must agree with the counts the program wrote itself and
# with its final statistics snapshot. The live document must carry every
# family docs/METRICS.md lists, with the documented type.
# Everything listens on 127.0.0.1; both processes are stopped on any exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh cmake make gcc python3 curl jq prometheus >/dev/null

RUN_SECONDS=15   # the example's lifetime: enough for Prometheus to start and scrape
WAIT_SECONDS=30  # upper bound for every wait below

build=build/ci-prometheus
mkdir -p "$build"
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSLAB_BUILD_TESTS=OFF \
  -DTSLAB_BUILD_BENCH=OFF && cmake --build "$build" --target request_server -j"$(nproc)"; } \
  >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  exit 1
fi

work=$(mktemp -d)
server_pid=""
prom_pid=""
cleanup() {
  for pid in $server_pid $prom_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "50-prometheus: FAIL: $*" >&2
  for log in "$work"/*.log; do
    echo "--- $log" >&2
    tail -n 20 "$log" >&2
  done
  exit 1
}

# Polls a command until it succeeds or WAIT_SECONDS pass.
wait_for() {
  local what=$1
  shift
  for _ in $(seq $((WAIT_SECONDS * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  fail "timed out waiting for $what"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- the example ------------------------------------------------------------
"$build/examples/observability/request_server" -m requests -d "$RUN_SECONDS" \
  -P "$work/port" -c "$work/counts.json" -j "$work/final.json" >"$work/server.log" 2>&1 &
server_pid=$!
wait_for "the example's port file" test -s "$work/port"
port=$(cat "$work/port")
base="http://127.0.0.1:$port"

# --- Prometheus -------------------------------------------------------------
prom_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tslab
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
promtool check config "$work/prometheus.yml" >/dev/null || fail "promtool rejects the config"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
prom_pid=$!
api="http://127.0.0.1:$prom_port"
wait_for "Prometheus to be ready" curl -fsS "$api/-/ready"

# The first value of an instant query's result, or nothing.
query() {
  curl -fsS --get "$api/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // empty'
}
successful_scrapes_at_least() {
  local n
  n=$(query 'sum_over_time(up{job="tslab"}[5m])')
  [ -n "$n" ] && [ "${n%.*}" -ge "$1" ]
}
wait_for "two successful scrapes" successful_scrapes_at_least 2

# --- the live endpoint, while the workload runs ----------------------------
curl -fsS "$base/metrics" >"$work/metrics.txt" || fail "GET /metrics"
promtool check metrics <"$work/metrics.txt" || fail "promtool check metrics"
# Every family of docs/METRICS.md, with its documented type, and no other.
python3 - docs/METRICS.md "$work/metrics.txt" <<'PY' || fail "/metrics does not match docs/METRICS.md"
import re, sys
doc, text = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
part = doc.split("## Prometheus metrics", 1)[1].split("\n## ", 1)[0]
want = dict(re.findall(r"^\| `(tslab_[a-z_]+)` \| (counter|gauge) \|", part, re.M))
have = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
bad = ["%s: documented %s, served %s" % (n, t, have.get(n)) for n, t in want.items() if have.get(n) != t]
bad += ["%s: served, not documented" % n for n in have if n not in want]
for line in bad:
    print("50-prometheus:", line, file=sys.stderr)
print("50-prometheus: %d documented families served" % len(want))
sys.exit(1 if bad or not want else 0)
PY
curl -fsS "$base/stats.json" >"$work/stats.json" || fail "GET /stats.json"
jq -e '.schema_version == 1' "$work/stats.json" >/dev/null || fail "stats.json has no schema_version 1"
# docs/OBSERVABILITY.md's leak query: the leaking route holds live bytes.
jq -e '[.labels[] | select(.live_bytes > 0) | .label] | index("POST /api/upload") != null' \
  "$work/stats.json" >/dev/null || fail "the leaking label is not visible in stats.json"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/nope")" = 404 ] || fail "unknown path is not 404"

# --- after the run: Prometheus against the program's own counts -------------
wait "$server_pid" || fail "the example failed"
server_pid=""
counts="$work/counts.json"
test -s "$counts" || fail "the example wrote no counts"

# The last value Prometheus scraped of a series, whether or not the target is
# still up (range selections skip the staleness marker written at its end).
last() { query "last_over_time(${1}[5m])"; }

check_le() { # name, value seen by Prometheus, the program's final count
  [ -n "$2" ] || fail "$1: Prometheus has no sample"
  python3 -c "import sys; v, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (0 < v <= c))" \
    "$2" "$3" || fail "$1: Prometheus saw $2, the program counted $3 (want 0 < seen <= counted)"
  echo "50-prometheus: $1: Prometheus $2 <= program $3"
}
check_le tslab_allocations_total "$(last 'tslab_allocations_total{job="tslab"}')" \
  "$(jq .allocations "$counts")"
check_le tslab_frees_total "$(last 'tslab_frees_total{job="tslab"}')" "$(jq .frees "$counts")"
check_le tslab_cross_thread_frees_total "$(last 'tslab_cross_thread_frees_total{job="tslab"}')" \
  "$(jq .cross_thread_frees "$counts")"
check_le tslab_epochs_opened_total "$(last 'tslab_epochs_opened_total{job="tslab"}')" \
  "$(jq .epochs_opened "$counts")"

# Blocks, the hot reserve and free-all, against the final snapshot: every
# request epoch bumps through a block, and each worker reuses the block its
# previous request drained. The example makes no free-all, so those two
# counters must be there, at 0.
final="$work/final.json"
test -s "$final" || fail "the example wrote no final snapshot"
check_le tslab_blocks_created_total "$(last 'tslab_blocks_created_total{job="tslab"}')" \
  "$(jq .global.blocks_created_total "$final")"
check_le tslab_blocks_reused_total "$(last 'tslab_blocks_reused_total{job="tslab"}')" \
  "$(jq .global.blocks_reused_total "$final")"
for name in tslab_objects_ended_total tslab_epochs_freed_all_total; do
  v=$(last "$name{job=\"tslab\"}")
  f=$(jq ".global.${name#tslab_}" "$final")
  [ "$v" = 0 ] && [ "$f" = 0 ] || fail "$name: Prometheus '$v', final snapshot '$f' (want 0, 0)"
done
# The hot reserve stays within its bound, computed from the exported
# configuration in the same scrape (the bound holds while the OS accepts
# every release; this run does not lock its memory).
within=$(query 'last_over_time(tslab_hot_reserve_bytes{job="tslab"}[5m]) <= bool
  (last_over_time(tslab_config_pool_resident_max_bytes{job="tslab"}[5m])
   + last_over_time(tslab_thread_caches{job="tslab"}[5m])
     * last_over_time(tslab_config_thread_reserve_max_bytes{job="tslab"}[5m]))')
[ "$within" = 1 ] || fail "tslab_hot_reserve_bytes above its configured bound (or missing): '$within'"
reserve=$(last 'tslab_hot_reserve_bytes{job="tslab"}')
info=$(last 'tslab_config_info{job="tslab",release_policy="on_close",advance_policy="skip_open"}')
[ "$info" = 1 ] || fail "tslab_config_info does not name the default policies: '$info'"
closes=$(query 'count(last_over_time(tslab_epoch_close_duration_seconds{job="tslab",state="closing"}[5m]))')
[ -n "$closes" ] && [ "$closes" -gt 0 ] || fail "no closed epoch's close figures in Prometheus"

epochs=$(query 'count(last_over_time(tslab_epoch_age_seconds{job="tslab"}[5m]))')
[ -n "$epochs" ] && [ "$epochs" -gt 0 ] || fail "no per-epoch series in Prometheus"
labels=$(query 'count(last_over_time(tslab_label_allocations_total{job="tslab"}[5m]))')
[ -n "$labels" ] && [ "$labels" -ge 4 ] || fail "expected at least 4 labels, Prometheus has '$labels'"
leak=$(last 'tslab_label_live_bytes{job="tslab",label="POST /api/upload"}')
[ -n "$leak" ] && [ "${leak%.*}" -gt 0 ] || fail "the leaking label has no live bytes in Prometheus"
samples=$(last 'tslab_slow_path_samples_total{job="tslab"}')
[ -n "$samples" ] && [ "${samples%.*}" -gt 0 ] || fail "no slow-path samples in Prometheus"
scrapes=$(query 'sum_over_time(up{job="tslab"}[5m])')
echo "50-prometheus: ok ($scrapes scrapes, $epochs epoch series, $labels labels," \
  "upload route leaking $leak bytes, hot reserve $reserve bytes)"
