#!/usr/bin/env python3
"""Run the comparison benchmark suite and write results.json.

Every allocator runs the same workload binary code (see bench/workloads.c).
Repeats are interleaved: each repeat runs every case once for every
allocator, in an order rotated from one repeat to the next, so drift on a
shared machine hits all allocators alike. The report (bench/report.py) takes
medians over repeats and ratios within this one run.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

from report_layout import PATTERNS, UNTOUCHED

PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
# "bound" is the phase workloads' reference (bench/be_bound.c), not a peer.
ALLOCATORS = ["tslab"] + PEERS + ["bound"]

# Variant id -> (binary suffix, extra arguments). The part before the first
# "-" names the allocator. tslab runs with the library's defaults.
# "freeall" variants free none of a request's objects: the phase end frees
# them all (tslab_epoch_free_all, mi_heap_destroy, jemalloc's arena reset).
VARIANTS = {
    "tslab": ("tslab", []),
    "tslab-freeall": ("tslab", ["free=all"]),
    "tslab-mixed": ("tslab", ["routing=mixed"]),
    "glibc": ("glibc", []),
    "jemalloc": ("jemalloc", []),
    "jemalloc-arena": ("jemalloc", ["mode=arena"]),
    "jemalloc-arena-freeall": ("jemalloc", ["mode=arena", "free=all"]),
    "mimalloc": ("mimalloc", []),
    "mimalloc-heap": ("mimalloc", ["mode=heap"]),
    "mimalloc-heap-freeall": ("mimalloc", ["mode=heap", "free=all"]),
    "tcmalloc": ("tcmalloc", []),
    # The phase workloads' bound (bench/be_bound.c): a bump arena per phase,
    # freed whole at its end; a reference, not a peer.
    "bound": ("bound", ["free=all"]),
    # The C++ pool benchmark, one binary per malloc (bench/pool_bench.cpp).
    "pools-glibc": ("glibc", []),
    "pools-jemalloc": ("jemalloc", []),
    "pools-mimalloc": ("mimalloc", []),
    "pools-tcmalloc": ("tcmalloc", []),
}
PLAIN = ["tslab", "glibc", "jemalloc", "mimalloc", "tcmalloc"]
# Phase workloads: the peers plain and in their phase-scoped modes.
PHASED = PLAIN + ["jemalloc-arena", "mimalloc-heap"]
FREE_ALL = ["tslab-freeall", "jemalloc-arena-freeall", "mimalloc-heap-freeall"]
# Workloads with a program of their own instead of bench_<allocator>
# ({suffix}: the variant's binary suffix).
OWN_BINARY = {"close_cost": "bench_close_cost", "fastpath_cost": "bench_fastpath_cost",
              "pool_bench": "pool_bench_{suffix}"}
# Cases whose program may be missing (it needs a C++ compiler); the report
# shows them only when they ran.
OPTIONAL_CASES = {"pool_bench"}


def cases(quick, threads):
    """(case id, workload, variants, arguments) for one repeat."""
    s = 10 if quick else 1  # quick mode divides the work by this
    speed = [
        ("churn", "churn", PLAIN, [f"pairs={20000000 // s}"]),
        ("batch", "batch", PLAIN,
         ["n=10000", f"rounds={100 // s}", f"lat_rounds={max(20 // s, 5)}"]),
        ("mixed_4k", "mixed", PLAIN, ["max=4096", f"ops={2000000 // s}"]),
        ("mixed_32k", "mixed", PLAIN, ["max=32768", f"ops={1000000 // s}"]),
    ]
    # Threads created once, and created per window and pinned: every
    # thread does the same calls either way.
    for t in sorted({1, 2, threads}):
        speed.append((f"threads_{t}", "threads", PLAIN, [f"threads={t}", f"ops={10000000 // s}"]))
    for t in sorted({1, 2, threads}):
        speed.append((f"threads_win_{t}", "threads", PLAIN,
                      [f"threads={t}", f"ops={10000000 // s}", "spawn=window", f"windows={20 if s == 1 else 5}"]))
    speed.append(("prodcons", "prodcons", PLAIN, [f"items={5000000 // s}"]))
    server = [(f"server_{p}", "server", PHASED + FREE_ALL + ["bound"], [f"pattern={p}", f"requests={10000 // s}"])
              for p in PATTERNS]
    out = speed + server + [
        ("lifemix", "lifemix", PHASED + ["tslab-mixed", "bound"], [f"requests={200000 // s}"]),
        ("phase_burst", "phase_burst", PHASED, ["mib=64"]),
        ("close_cost", "close_cost", ["tslab"],
         # Quick mode keeps two epochs whose free-all releases slabs beyond the hot reserve: the slope.
         [f"max_slabs={4096 if s == 1 else 1024}", "reps=3", f"closes={2000 // s}"]),
        # The counters' cost: both tslab builds and glibc take turns in one process.
        ("fastpath_cost", "fastpath_cost", ["tslab"], ["--json", f"rounds={61 if s == 1 else 15}"]),
        ("pool_bench", "pool_bench", ["pools-glibc", "pools-jemalloc", "pools-mimalloc", "pools-tcmalloc"],
         [f"pairs={1000000 // s}", f"repeats={5 if s == 1 else 3}"]),
    ]
    # The untouched copies: the speed figures, and the server with plain frees.
    for cid, wl, variants, args in speed + server:
        if not cid.startswith("threads_win"):
            out.append((cid + UNTOUCHED, wl, [v for v in variants if v in PLAIN], args + ["touch=0"]))
    return out


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(bindir):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    compiler = ""
    cache = os.path.join(bindir, "..", "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache) as f:
            for line in f:
                if line.startswith("CMAKE_C_COMPILER:"):
                    compiler = sh(f"{line.split('=', 1)[1].strip()} --version").splitlines()[0]
    pkgs = {}
    for p in ["libc6", "libjemalloc2", "libmimalloc2.0", "libtcmalloc-minimal4", "python3-matplotlib"]:
        v = sh(f"dpkg-query -W -f='${{Version}}' {p} 2>/dev/null")
        if v:
            pkgs[p] = v
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "compiler": compiler,
        "packages": pkgs,
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
    }


def run_one(bindir, variant, workload, args, timeout):
    suffix, extra = VARIANTS[variant]
    if workload in OWN_BINARY:
        cmd = [os.path.join(bindir, OWN_BINARY[workload].format(suffix=suffix))] + args + extra
    else:
        cmd = [os.path.join(bindir, f"bench_{suffix}"), workload] + args + extra
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout}s", "seconds": timeout}
    secs = round(time.monotonic() - t0, 3)
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or [""])[-1][:300]
        return {"ok": False, "error": f"exit status {p.returncode}: {err}", "seconds": secs}
    try:
        if workload == "pool_bench":
            # One JSON object per line (docs/BENCHMARKS.md); other lines are ignored.
            recs = [json.loads(line) for line in p.stdout.splitlines() if line.lstrip().startswith("{")]
            return {"ok": True, "result": {"records": recs}, "seconds": secs}
        return {"ok": True, "result": json.loads(p.stdout), "seconds": secs}
    except json.JSONDecodeError as e:
        return {"ok": False, "error": f"bad output: {e}", "seconds": secs}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory holding the bench_* binaries")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip", action="append", default=[], metavar="ALLOCATOR=REASON",
                    help="an allocator that could not be installed, and why")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    repeats = a.repeats or (1 if a.quick else 5)

    allocators = {}
    reasons = dict(s.split("=", 1) for s in a.skip)
    for name in ALLOCATORS:
        exe = os.path.join(a.bin, f"bench_{name}")
        if name in reasons or not os.access(exe, os.X_OK):
            allocators[name] = {"available": False,
                                "reason": reasons.get(name, f"bench_{name} was not built")}
        else:
            allocators[name] = {"available": True}

    def usable(variant, workload):
        exe = OWN_BINARY.get(workload, "bench_{suffix}").format(suffix=VARIANTS[variant][0])
        return (allocators.get(variant.split("-")[0], {"available": True})["available"]
                and os.access(os.path.join(a.bin, exe), os.X_OK))

    planned = [(cid, wl, [v for v in variants if usable(v, wl)], args)
               for cid, wl, variants, args in cases(a.quick, a.threads)]
    planned = [c for c in planned if c[2] or c[0] not in OPTIONAL_CASES]
    plan = []
    for r in range(repeats):
        for cid, wl, vs, args in planned:
            k = r % len(vs) if vs else 0
            for v in vs[k:] + vs[:k]:
                plan.append((r, cid, wl, v, args))

    meta = {"quick": a.quick, "repeats": repeats, "threads": a.threads,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "allocators": allocators,
            "machine": machine(a.bin),
            "cases": {cid: {"workload": wl, "variants": v, "args": args} for cid, wl, v, args in planned}}
    runs = []
    t_start = time.monotonic()
    for i, (r, cid, wl, v, args) in enumerate(plan):
        res = run_one(a.bin, v, wl, args, a.timeout)
        res.update({"case": cid, "variant": v, "repeat": r})
        runs.append(res)
        status = "ok" if res["ok"] else "FAILED: " + res["error"]
        el = time.monotonic() - t_start
        print(f"[{i + 1:4d}/{len(plan)}] {el:6.1f}s  repeat {r + 1}/{repeats}  {cid:<24} {v:<22} "
              f"{res['seconds']:6.2f}s {status}", file=sys.stderr, flush=True)
        if res["ok"] and "version" in res["result"] and v.split("-")[0] in allocators:
            allocators[v.split("-")[0]].setdefault("version", res["result"]["version"])

    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    meta["duration_s"] = round(time.monotonic() - t_start, 1)
    meta["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
    failed = sum(not r["ok"] for r in runs)
    print(f"suite: {len(runs)} runs, {failed} failed, {meta['duration_s']}s", file=sys.stderr)


if __name__ == "__main__":
    main()
