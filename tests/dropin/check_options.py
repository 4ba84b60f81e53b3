#!/usr/bin/env python3
"""The TSLAB_* environment variables of the drop-in (docs/DROPIN.md), each
checked by its effect on a program run under LD_PRELOAD: the instance's
configuration, the statistics printed at exit (text and JSON), the metrics
endpoint a Prometheus could scrape, and warnings for invalid values.

Usage: check_options.py LIBTSLAB_MALLOC PROBE"""
import json
import os
import re
import resource
import subprocess
import sys
import time
import urllib.request

lib, probe = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAILED: {what}", file=sys.stderr)


def run(env, *args, address_space=None):
    """The probe under the drop-in with env; address_space: a limit on the
    process's address space (RLIMIT_AS, as `ulimit -v` sets), in bytes."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("TSLAB_")}
    e.update(env, LD_PRELOAD=lib)
    limit = None if address_space is None else (
        lambda: resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space)))
    return subprocess.run([probe] + list(args), env=e, capture_output=True, text=True, timeout=60,
                          preexec_fn=limit)


def config(r):
    """(reserved bytes, ring size) the probe reports; reserved_bytes counts the
    metadata's reservation too, so it is compared, not matched."""
    m = re.search(r"reserved_bytes=(\d+) ring=(\d+)", r.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


r = run({})
default_reserve, ring = config(r)
check(r.returncode == 0 and default_reserve >= 64 << 30 and ring == 16 and r.stderr == "",
      f"defaults: {r.stdout!r} {r.stderr!r}")

r = run({"TSLAB_RESERVE": "256m", "TSLAB_EPOCH_RING_SIZE": "64", "TSLAB_RELEASE_POLICY": "eager",
         "TSLAB_POOL_RESIDENT_MAX": "1MiB", "TSLAB_MAX_ALLOC_SIZE": "64M"})
reserve, ring = config(r)
check(r.returncode == 0 and 256 << 20 <= reserve < 512 << 20 and ring == 64 and r.stderr == "",
      f"configured: {r.stdout!r} {r.stderr!r}")

# Under a limit on address space the reservation shrinks until it fits, down
# to the core's smallest (4 MiB): a program under `ulimit -v 40000` runs.
r = run({}, address_space=40 << 20)
reserve, _ = config(r)
check(r.returncode == 0 and 4 << 20 <= reserve < 40 << 20 and r.stderr == "",
      f"limited address space: {r.stdout!r} {r.stderr!r}")

r = run({"TSLAB_RESERVE": "12 GB", "TSLAB_RELEASE_POLICY": "sometimes", "TSLAB_EPOCH_RING_SIZE": "3",
         "TSLAB_SHOW_STATS": "maybe"})
check(r.returncode == 0 and config(r) == (default_reserve, 16), f"invalid kept defaults: {r.stdout!r}")
for name in ["TSLAB_RESERVE", "TSLAB_RELEASE_POLICY", "TSLAB_EPOCH_RING_SIZE", "TSLAB_SHOW_STATS"]:
    check(f"ignoring {name}=" in r.stderr, f"no warning for {name}: {r.stderr!r}")

r = run({"TSLAB_SHOW_STATS": "1"})
m = re.search(r"allocations\s+(\d+)", r.stderr)
check(r.returncode == 0 and m and int(m.group(1)) >= 100 and "foreign frees" in r.stderr,
      f"text statistics: {r.stderr!r}")

r = run({"TSLAB_SHOW_STATS": "json"})
try:
    doc = json.loads(r.stderr)
    check(doc["instance"]["global"]["allocations_total"] >= 100 and "foreign_frees" in doc["dropin"],
          "json statistics fields")
except (ValueError, KeyError, IndexError) as e:
    check(False, f"json statistics: {e}: {r.stderr!r}")

r = run({"TSLAB_SHOW_STATS": "json", "TSLAB_POOL_DECAY_MAX": "2m", "TSLAB_POOL_DECAY_MS": "250"})
try:
    cfg = json.loads(r.stderr)["instance"]["config"]
    check(cfg["pool_decay_max"] == 2 << 20 and cfg["pool_decay_ms"] == 250, f"decay options: {cfg}")
except (ValueError, KeyError) as e:
    check(False, f"decay options: {e}: {r.stderr!r}")
r = run({"TSLAB_POOL_DECAY_MS": "5k", "TSLAB_POOL_DECAY_MAX": "lots", "TSLAB_MAX_ALLOC_SIZE": "100"})
check(r.returncode == 0, f"a too small TSLAB_MAX_ALLOC_SIZE kept the default: {r.stderr!r}")
for name in ["TSLAB_POOL_DECAY_MS", "TSLAB_POOL_DECAY_MAX", "TSLAB_MAX_ALLOC_SIZE"]:
    check(f"ignoring {name}=" in r.stderr, f"no warning for {name}: {r.stderr!r}")

# The endpoint: port 0 picks a free one, which TSLAB_VERBOSE reports.
e = {k: v for k, v in os.environ.items() if not k.startswith("TSLAB_")}
e.update(LD_PRELOAD=lib, TSLAB_HTTP="127.0.0.1:0", TSLAB_VERBOSE="1")
p = subprocess.Popen([probe, "5"], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
line = p.stdout.readline()
m = re.search(r"http_port=(\d+)", line)
port = int(m.group(1)) if m else 0
check(port > 0, f"endpoint port: {line!r}")
body = ""
for _ in range(50):
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        break
    except OSError:
        time.sleep(0.1)
p.terminate()
out, err = p.communicate(timeout=30)
check(re.search(r"^tslab_allocations_total [1-9]", body, re.M) is not None, "metrics scraped")
check('label="process"' in body, "the process epoch's label in the metrics")
check(f"port {port}" in err, f"verbose names the port: {err!r}")

r = run({"TSLAB_HTTP": "127.0.0.1:notaport"})
check("ignoring TSLAB_HTTP=" in r.stderr, "invalid TSLAB_HTTP warned")

if failures:
    print(f"FAILED: {failures} check(s)", file=sys.stderr)
    sys.exit(1)
print("ok")
