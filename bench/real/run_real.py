#!/usr/bin/env python3
"""Real programs on the drop-in malloc and on its peers (docs/DROPIN.md).

Runs every program under every allocator, each loaded the same way with
LD_PRELOAD: tslab (libtslab-malloc.so), glibc, jemalloc, mimalloc and
tcmalloc from Debian's packages. The programs are a real server driven by
its own benchmark client (redis-server and redis-benchmark), a real test
suite (a slice of CPython's regression tests), sqlite3 on a workload, a C++
program on the standard containers, and the field's allocator benchmark
programs written in-tree from their published descriptions (bench/real/*.c).

Each program checks its result: its exit status, its own checks, and an
output that must be the same under every allocator (a checksum, a query
result). Repeats are interleaved (each repeat runs every allocator once, in
an order rotated between repeats), so drift on a shared machine hits all
allocators alike; the JSON output holds one record per program and
allocator with the medians over repeats:

    {"program", "allocator", "seconds", "peak_rss_bytes", "ok"}

Peak RSS is the program's maximum resident set (for redis, the server's),
from wait4; the time is the program's wall time from the launcher that
reaps it (bench/real/peak_rss.c), except for redis, whose time is its
benchmark client's. A second file, <out>-checks.json, records the evidence that each
allocator really served the program (for redis, which links jemalloc
itself: jemalloc's own count of its allocated bytes, the server's count of
what it allocated, the preloaded library mapped in the server).

Usage: bench/real/run_real.py [--quick] [--repeats N] [--out FILE]
       [--programs a,b] [--allocators a,b] [--build DIR]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "real")
ALLOCATORS = ["tslab", "glibc", "jemalloc", "mimalloc", "tcmalloc"]
PEER_LIBS = {
    "jemalloc": "libjemalloc.so.2",
    "mimalloc": "libmimalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
}
DEBIAN_PACKAGES = [
    "cmake", "make", "gcc", "g++", "zlib1g-dev", "redis-server", "redis-tools", "sqlite3",
    "python3.11", "libpython3.11-testsuite", "libjemalloc2", "libmimalloc2.0",
    "libtcmalloc-minimal4",
]
# A slice of CPython's own regression tests that passes on this platform
# under glibc and runs in about a minute (quick: seconds).
PY_TESTS = ["test_json", "test_re", "test_dict", "test_set", "test_list", "test_collections",
            "test_functools", "test_itertools", "test_bisect", "test_heapq", "test_struct",
            "test_zlib", "test_sqlite3", "test_pickle", "test_bytes", "test_math",
            "test_datetime", "test_decimal", "test_unicode", "test_subprocess", "test_mmap"]
PY_TESTS_QUICK = ["test_json", "test_dict", "test_set", "test_bisect", "test_heapq",
                  "test_struct", "test_zlib", "test_sqlite3"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def install_deps():
    subprocess.run([os.path.join(ROOT, "scripts", "install-deps.sh")] + DEBIAN_PACKAGES, check=True)


def find_lib(name):
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith(name + " "):
            return line.split("=>")[-1].strip()
    raise SystemExit(f"run_real: {name} not found (install its Debian package)")


def build(build_dir):
    """The drop-in, the in-tree programs and the glibc shim."""
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DTSLAB_BUILD_TESTS=OFF", "-DTSLAB_BUILD_BENCH=OFF",
                    "-DTSLAB_BUILD_EXAMPLES=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", "tslab_malloc"], check=True,
                   stdout=subprocess.DEVNULL)
    bindir = os.path.join(build_dir, "real")
    os.makedirs(bindir, exist_ok=True)
    # -fno-builtin-malloc: the programs measure the allocator, so the
    # compiler may not elide or merge their allocation calls.
    cflags = ["-O2", "-g", "-pthread", "-fno-builtin-malloc", "-fno-builtin-free"]
    for prog in ["larson", "cache_scratch", "xmalloc_test", "malloc_thread"]:
        subprocess.run(["cc"] + cflags + [os.path.join(HERE, prog + ".c"), "-o",
                        os.path.join(bindir, prog)], check=True)
    subprocess.run(["g++", "-std=c++17"] + cflags + [os.path.join(HERE, "cxx_containers.cpp"), "-o",
                    os.path.join(bindir, "cxx_containers")], check=True)
    subprocess.run(["cc", "-O2", os.path.join(HERE, "peak_rss.c"), "-o", os.path.join(bindir, "peak_rss")],
                   check=True)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", os.path.join(HERE, "glibc_shim.c"), "-o",
                    os.path.join(bindir, "libglibc-shim.so"), "-ldl"], check=True)
    return bindir


def preloads(build_dir, bindir):
    libs = {"tslab": os.path.join(build_dir, "src", "malloc", "libtslab-malloc.so"),
            "glibc": os.path.join(bindir, "libglibc-shim.so")}
    for name, so in PEER_LIBS.items():
        libs[name] = find_lib(so)
    return libs


def env_for(preload):
    env = dict(os.environ)
    env["LD_PRELOAD"] = preload
    return env


class Measured:
    """A program started through bench/real/peak_rss.c, which reports its
    peak RSS (see there why the driver cannot ask the kernel itself)."""

    def __init__(self, ctx, cmd, env, **popen):
        fd, self.rss_file = tempfile.mkstemp(prefix="rss-", dir=ctx["scratch"])
        os.close(fd)
        self.t0 = time.perf_counter()
        # A session of its own: a timeout kills the launcher and the program
        # together, not the launcher alone (the program would keep running,
        # and take CPU from the runs timed after it).
        self.proc = subprocess.Popen([os.path.join(ctx["bindir"], "peak_rss"), self.rss_file] + cmd,
                                     env=env, start_new_session=True, **popen)

    def finish(self, timeout):
        """(exit code, or -1 when it had to be killed; peak RSS bytes; wall
        seconds from the launcher's clock, or from the driver's when the
        launcher left none, killed at the timeout)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            code = -1
        try:
            with open(self.rss_file) as f:
                rss, seconds = f.read().split()
            rss, seconds = int(rss), float(seconds)
        except (OSError, ValueError):
            rss, seconds = 0, time.perf_counter() - self.t0
        os.unlink(self.rss_file)
        return code, rss, seconds


def run_measured(ctx, cmd, env, timeout, stdin=None):
    """(seconds, peak RSS bytes, exit status, output) of one run."""
    with tempfile.TemporaryFile() as out:
        m = Measured(ctx, cmd, env, stdout=out, stderr=subprocess.STDOUT, cwd=ctx["scratch"],
                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        if stdin:
            m.proc.stdin.write(stdin.encode())
            m.proc.stdin.close()
        code, rss, seconds = m.finish(timeout)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return seconds, rss, code, text


# ---- programs: each returns (seconds, peak_rss_bytes, ok, output_for_comparison, evidence) ----

def simple(cmd_of, expect, timeout=300):
    """A program whose run is one process: ok when it exits 0 and its output
    matches `expect`; its comparable output is what must not change between
    allocators."""
    def run(ctx, allocator):
        cmd = cmd_of(ctx)
        s, rss, code, out = run_measured(ctx, cmd, env_for(ctx["preloads"][allocator]), timeout)
        ok = code == 0 and re.search(expect, out) is not None
        if not ok:
            log(f"  {allocator}: exit {code}: {out[-2000:]}")
        m = re.search(expect, out)
        return s, rss, ok, m.group(0) if m else None, None
    return run


SQL_WORKLOAD = """
PRAGMA cache_size = -65536;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB, n REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows})
INSERT INTO t(k, v, n) SELECT printf('key%08d', (x * 7919) % {rows}), zeroblob(16 + x % 300), x * 0.5 FROM c;
CREATE INDEX tk ON t(k);
CREATE TABLE g AS SELECT substr(k, 1, 6) AS p, count(*) AS c, sum(length(v)) AS s, avg(n) AS a FROM t GROUP BY p;
UPDATE t SET v = zeroblob(length(v) / 2) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(v)), total(n) FROM t;
SELECT count(*), sum(c), sum(s) FROM g;
SELECT k FROM t WHERE k > 'key0005' ORDER BY k LIMIT 3;
SELECT group_concat(p, ',') FROM (SELECT p FROM g ORDER BY c DESC, p LIMIT 5);
"""


def sqlite_run(ctx, allocator):
    rows = 30000 if ctx["quick"] else 400000
    s, rss, code, out = run_measured(ctx, ["sqlite3", ":memory:"], env_for(ctx["preloads"][allocator]),
                                     600, stdin=SQL_WORKLOAD.format(rows=rows))
    # Its own check: the counts the workload must produce.
    kept = rows - rows // 5
    ok = code == 0 and out.startswith(f"{kept}|")
    if not ok:
        log(f"  {allocator}: exit {code}: {out[-2000:]}")
    return s, rss, ok, out, None


def python_run(ctx, allocator):
    tests = PY_TESTS_QUICK if ctx["quick"] else PY_TESTS
    s, rss, code, out = run_measured(ctx, ["python3.11", "-m", "test", "-q"] + tests,
                                     env_for(ctx["preloads"][allocator]), 1200)
    ok = code == 0 and "Tests result: SUCCESS" in out
    if not ok:
        log(f"  {allocator}: exit {code}: {out[-3000:]}")
    m = re.search(r"Total tests: run=([\d,]+)", out)
    return s, rss, ok, m.group(1) if m else None, None


def free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def redis_cli(port, *args, stdin=None):
    """A command's reply; with stdin, its text is the command's last argument."""
    r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port)] + (["-x"] if stdin else [])
                       + list(args), input=stdin, capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def redis_run(ctx, allocator):
    """redis-server under the allocator, driven by redis-benchmark; the time
    is the benchmark's, the peak RSS the server's. Checked: every benchmark
    run completes, values written afterwards read back exactly, and the
    allocations went through the preloaded library (see module doc)."""
    port = free_port()
    n = 20000 if ctx["quick"] else 300000
    env = env_for(ctx["preloads"][allocator])
    if allocator == "tslab":
        env["TSLAB_SHOW_STATS"] = "1"
    logf = tempfile.TemporaryFile()
    server = Measured(ctx, ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--daemonize", "no", "--dir", ctx["scratch"]],
                      env, stdout=logf, stderr=subprocess.STDOUT)
    ok, evidence = True, {}
    try:
        for _ in range(200):
            if redis_cli(port, "ping") == "PONG":
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("redis-server did not start")
        server_pid = int(open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read().split()[0])
        maps = open(f"/proc/{server_pid}/maps").read()
        evidence["preload_mapped"] = os.path.basename(ctx["preloads"][allocator]) in maps
        t0 = time.perf_counter()
        bench = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(n),
                                "-c", "50", "-P", "16", "-r", "100000", "-d", "128", "-t",
                                "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100,mset"],
                               capture_output=True, text=True, timeout=900)
        seconds = time.perf_counter() - t0
        lines = [ln for ln in bench.stdout.replace("\r", "\n").splitlines() if "requests per second" in ln]
        ok = bench.returncode == 0 and len(lines) >= 13
        evidence["requests_per_second"] = {ln.split(":")[0]: float(re.findall(r"([\d.]+) requests per second", ln)[0])
                                           for ln in lines}
        # Values of many sizes written and read back exactly.
        for size in [1, 15, 100, 1000, 40000, 300000]:
            value = ("v%d-" % size + "x" * size)[:size]
            redis_cli(port, "set", f"check:{size}", stdin=value)
            ok = ok and redis_cli(port, "get", f"check:{size}") == value
        info = redis_cli(port, "info", "memory")
        fields = dict(ln.split(":", 1) for ln in info.splitlines() if ":" in ln)
        for k in ["used_memory", "used_memory_peak", "allocator_allocated", "mem_allocator"]:
            evidence[k] = fields.get(k)
    except Exception as e:  # a crash or a hang is a failed run
        log(f"  {allocator}: {e}")
        ok, seconds = False, 0.0
    try:
        redis_cli(port, "shutdown", "nosave")
    except subprocess.TimeoutExpired:
        pass
    code, rss, _ = server.finish(30)
    ok = ok and code == 0
    logf.seek(0)
    tail = logf.read().decode(errors="replace")
    # The server's statistics (the launcher prints its own, smaller, too).
    counts = [int(x) for x in re.findall(r"allocations\s+(\d+)", tail)]
    if counts:
        evidence["tslab_allocations_total"] = max(counts)
    # jemalloc (linked into Debian's redis-server) serves the process only
    # under jemalloc: elsewhere its own count stays near zero.
    try:
        used = int(evidence.get("used_memory") or 0)
        jem = int(evidence.get("allocator_allocated") or 0)
        evidence["served_by_preload"] = evidence.get("preload_mapped") and (
            allocator == "jemalloc" or jem < used // 10)
        if allocator == "tslab":
            evidence["served_by_preload"] = evidence["served_by_preload"] and evidence.get(
                "tslab_allocations_total", 0) > n
        ok = ok and bool(evidence["served_by_preload"])
    except ValueError:
        ok = False
    if not ok:
        log(f"  {allocator}: redis evidence {evidence}\n{tail[-2000:]}")
    return seconds, rss, ok, None, evidence


def programs(quick):
    q = quick
    b = lambda ctx, name: os.path.join(ctx["bindir"], name)  # noqa: E731
    return {
        "redis-server": redis_run,
        "python-tests": python_run,
        "sqlite3": sqlite_run,
        "cxx-containers": simple(lambda c: [b(c, "cxx_containers"), "4" if q else "30"],
                                 r"checksum \d+"),
        "larson": simple(lambda c: [b(c, "larson"), "2", "10" if q else "160", "10", "5000", "8", "1000"],
                         r"larson: .*: ok"),
        "cache-scratch-1": simple(lambda c: [b(c, "cache_scratch"), "1", "1000", "8", "20000" if q else "200000"],
                                  r"cache-scratch: .*: ok"),
        "cache-scratch-2": simple(lambda c: [b(c, "cache_scratch"), "2", "1000", "8", "20000" if q else "200000"],
                                  r"cache-scratch: .*: ok"),
        "xmalloc-test": simple(lambda c: [b(c, "xmalloc_test"), "2", "2", "1000" if q else "8000", "128"],
                               r"xmalloc-test: .*: ok"),
        "malloc-thread-1": simple(lambda c: [b(c, "malloc_thread"), "1", "1000000" if q else "10000000"],
                                  r"malloc-thread: .*: ok"),
        "malloc-thread-2": simple(lambda c: [b(c, "malloc_thread"), "2", "1000000" if q else "10000000"],
                                  r"malloc-thread: .*: ok"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs: a smoke run of seconds per program")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "report", "real.json"))
    ap.add_argument("--programs", default="", help="comma-separated subset")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "real"))
    ap.add_argument("--no-install", action="store_true", help="do not install Debian packages")
    args = ap.parse_args()

    args.build = os.path.abspath(args.build)  # programs run in a scratch directory
    if not args.no_install:
        install_deps()
    bindir = build(args.build)
    allocators = [a for a in args.allocators.split(",") if a]
    progs = programs(args.quick)
    if args.programs:
        progs = {k: v for k, v in progs.items() if k in args.programs.split(",")}
    scratch = tempfile.mkdtemp(prefix="tslab-real-")
    ctx = {"quick": args.quick, "bindir": bindir, "preloads": preloads(args.build, bindir),
           "scratch": scratch}

    samples = {}   # (program, allocator) -> list of (seconds, rss, ok)
    outputs = {}   # program -> {allocator: comparable output}
    checks = {}
    for rep in range(args.repeats):
        for name, run in progs.items():
            k = rep % len(allocators)
            for allocator in allocators[k:] + allocators[:k]:
                s, rss, ok, out, ev = run(ctx, allocator)
                samples.setdefault((name, allocator), []).append((s, rss, ok))
                outputs.setdefault(name, {})[allocator] = out
                if ev is not None:
                    checks.setdefault(name, {})[allocator] = ev
                log(f"[{rep + 1}/{args.repeats}] {name:16} {allocator:9} {s:8.3f} s "
                    f"{rss / 2**20:8.1f} MiB {'ok' if ok else 'FAILED'}")
    shutil.rmtree(scratch, ignore_errors=True)

    # The same output under every allocator: a wrong result, not a slow one.
    for name, outs in outputs.items():
        seen = {v for v in outs.values() if v is not None}
        if len(seen) > 1:
            log(f"{name}: outputs differ between allocators: {outs}")
            for allocator, v in outs.items():
                if v != outs.get("glibc", v):
                    samples[(name, allocator)] = [(s, r, False) for s, r, _ in samples[(name, allocator)]]

    records = []
    for (name, allocator), runs in samples.items():
        records.append({"program": name, "allocator": allocator,
                        "seconds": statistics.median(r[0] for r in runs),
                        "peak_rss_bytes": int(statistics.median(r[1] for r in runs)),
                        "ok": all(r[2] for r in runs)})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(records, f, indent=1)
    with open(re.sub(r"\.json$", "", args.out) + "-checks.json", "w") as f:
        json.dump(checks, f, indent=1)

    # Side by side, as ratios to the best peer (time) and the lowest peer (RSS).
    print(f"{'program':16} {'allocator':9} {'seconds':>9} {'peak MiB':>9} {'t/best':>7} {'rss/low':>7} ok")
    for name in progs:
        peers = [r for r in records if r["program"] == name and r["allocator"] != "tslab" and r["ok"]]
        best = min((r["seconds"] for r in peers), default=0)
        low = min((r["peak_rss_bytes"] for r in peers), default=0)
        for r in records:
            if r["program"] != name:
                continue
            tr = r["seconds"] / best if best else float("nan")
            rr = r["peak_rss_bytes"] / low if low else float("nan")
            print(f"{name:16} {r['allocator']:9} {r['seconds']:9.3f} {r['peak_rss_bytes'] / 2**20:9.1f} "
                  f"{tr:7.2f} {rr:7.2f} {'ok' if r['ok'] else 'FAILED'}")
    failed = [r for r in records if not r["ok"]]
    if failed:
        print("failed: " + ", ".join(f"{r['program']}/{r['allocator']}" for r in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
