#!/usr/bin/env python3
"""Turn results.json (bench/run_suite.py) into report.md and PNG plots.

Usage: report.py DIR
Reads DIR/results.json and, when present, DIR/real_programs.json (records of
real programs run under each allocator, docs/BENCHMARKS.md); writes
DIR/report.md and DIR/*.png. Every table shows the median over repeats with
min and max, and ratios to the best peer computed from medians of this same
run.
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from report_layout import (OPTIONAL_SECTIONS, PATTERNS, SECTIONS, SUMMARY_ROWS,  # noqa: E402
                           UNTOUCHED, VERDICTS)

MIB = 1 << 20
PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
# tslab with the library's defaults is plain "tslab"; its other modes are
# named like the peers' modes.
LABEL = {
    "tslab": "tslab", "tslab-freeall": "tslab, free-all close", "tslab-mixed": "tslab, mixed routing",
    "glibc": "glibc", "jemalloc": "jemalloc",
    "jemalloc-arena": "jemalloc, arena per phase",
    "jemalloc-arena-freeall": "jemalloc, arena per phase, reset frees all",
    "mimalloc": "mimalloc", "mimalloc-heap": "mimalloc, heap per phase",
    "mimalloc-heap-freeall": "mimalloc, heap per phase, destroy frees all",
    "tcmalloc": "tcmalloc",
    "bound": "bound: a bump arena per phase, no work per object",
}
ORDER = list(LABEL)
BURST_DELAYS = ["0", "10", "100", "1000"]
# bench_fastpath_cost's figures: (key, name).
COUNTER_FIGURES = [("churn", "churn ns/pair"), ("batch_fifo", "batch FIFO ns/op"),
                   ("batch_lifo", "batch LIFO ns/op"), ("batch_random", "batch, random frees, ns/op")]
# bench_close_cost's big epochs: (key, how they end).
CLOSE_WAYS = [("points", "frees, then tslab_epoch_close"), ("points_free_all", "tslab_epoch_free_all")]


def fastpath(res, fig, key):
    """Median over repeats of one number of bench_fastpath_cost's figure."""
    return res.median("fastpath_cost", "tslab", lambda r: r["figures"][fig][key])


def is_peer(variant):
    return variant.split("-")[0] in PEERS


def is_plain_peer(variant):
    return variant in PEERS


class Results:
    def __init__(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.meta = doc["meta"]
        self.ok, self.errors = {}, {}
        for r in doc["runs"]:
            key = (r["case"], r["variant"])
            if r["ok"]:
                self.ok.setdefault(key, []).append(r["result"])
            else:
                self.errors.setdefault(key, []).append(r["error"])

    def variants(self, case):
        seen = {v for c, v in list(self.ok) + list(self.errors) if c == case}
        return [v for v in ORDER if v in seen]

    def values(self, case, variant, fn):
        out = []
        for r in self.ok.get((case, variant), []):
            try:
                out.append(float(fn(r)))
            except (KeyError, IndexError, TypeError, ZeroDivisionError):
                pass
        return out

    def median(self, case, variant, fn):
        v = self.values(case, variant, fn)
        return statistics.median(v) if v else None

    def error(self, case, variant):
        return (self.errors.get((case, variant)) or ["no result"])[0]

    def representative(self, case, variant, fn):
        """The run whose fn is the median of the repeats (for series plots)."""
        runs = self.ok.get((case, variant), [])
        if not runs:
            return None
        return sorted(runs, key=fn)[(len(runs) - 1) // 2]


def fmt(x, digits=1):
    if x is None:
        return "n/a"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.{digits}f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.0f}k"
    return f"{x:.{digits}f}"


def best_of(res, case, fn, lower=True, which=is_peer):
    """(best median, its variant) among the variants `which` accepts, or (None, None)."""
    ms = [(res.median(case, v, fn), v) for v in res.variants(case) if which(v)]
    ms = [m for m in ms if m[0] is not None]
    if not ms:
        return None, None
    return min(ms) if lower else max(ms)


def metric_table(res, case, metrics, out, which=is_peer, extra=()):
    """metrics: (title, fn, lower_is_better, scale), one row per variant, each
    with its ratio to the best variant `which` accepts (the peers by default).
    extra: (title, fn, digits) columns for tslab's rows only (its statistics)."""
    variants = res.variants(case)
    ref = "best peer" if which is is_peer else "best plain peer"
    head = "| allocator |"
    sep = "|---|"
    for title, _, lower, _ in metrics:
        head += f" {title} median [min, max] | vs {ref} ({'lower' if lower else 'higher'} is better) |"
        sep += "---:|---:|"
    for title, _, _ in extra:
        head += f" {title} |"
        sep += "---:|"
    out += [head, sep]
    best = [best_of(res, case, fn, lower, which)[0] for _, fn, lower, _ in metrics]
    for v in variants:
        row = f"| {LABEL[v]} |"
        for (title, fn, lower, scale), b in zip(metrics, best):
            vals = res.values(case, v, fn)
            if not vals:
                row += f" failed: {res.error(case, v)[:80]} | |"
                continue
            m = statistics.median(vals)
            row += (f" {fmt(m / scale, 2)} [{fmt(min(vals) / scale, 2)}, {fmt(max(vals) / scale, 2)}] | "
                    f"{times(ratio(m, b))} |")
        for _, fn, digits in extra:
            x = res.median(case, v, fn) if v.startswith("tslab") else None
            row += f" {'' if x is None else f'{x:.{digits}f}'} |"
        out.append(row)
    out.append("")


def section(out, key, text, titles=SECTIONS):
    out += [f"## {titles[key]}", "", text, ""]


def pct_of(r, name, p):
    return r[name][p]


def tslab_stat(r, name):
    return r["tslab"][name]


def recycle_rate(r):
    t = r["tslab"]
    return t["slabs_recycled_total"] / t["slabs_created_total"]


def release_calls_per_request(r):
    return tslab_stat(r, "release_calls_total") / r["requests"]


def forced_closes_of(r):
    return tslab_stat(r, "epochs_forced_close_total")


def median_close(c):
    """Median ns of one kind of request-epoch close (bench_close_cost)."""
    return c["close_ns"]["p50"]


def calls_per_close(c):
    return c["release_calls_per_close"]


# ---- plots ------------------------------------------------------------------

def save(fig, outdir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)


def finish(fig, ax, outdir, name):
    """Legend, grid (minor lines too on a log scale) and save: the end of a one-axis plot."""
    ax.legend(fontsize=8)
    ax.grid(True, which="both" if ax.get_yscale() == "log" else "major", alpha=0.3)
    save(fig, outdir, name)


def plot_latency(res, outdir):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ps = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99")]
    for v in res.variants("batch"):
        ys = [res.median("batch", v, lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p, _ in ps]
        if None not in ys:
            ax.plot([n for _, n in ps], ys, marker="o", label=LABEL[v])
    tm = [res.median("batch", v, lambda r: r["timer_overhead_ns"]["p50"]) for v in res.variants("batch")]
    tm = [t for t in tm if t is not None]
    if tm:
        ax.axhline(statistics.median(tm), color="grey", ls=":", label="timer overhead (p50)")
    ax.set_yscale("log")
    ax.set_ylabel("allocation latency, ns (timer included)")
    ax.set_title("128 B allocation latency percentiles (batch workload, medians of repeats)")
    finish(fig, ax, outdir, "latency_percentiles.png")


# The two ways of starting the threads workload's threads: (case prefix, name).
THREAD_WAYS = [("threads", "created once"), ("threads_win", "created per window, pinned")]


def plot_threads(res, outdir, threads):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (prefix, way), style in zip(THREAD_WAYS, ["-", "--"]):
        for i, v in enumerate(res.variants(f"{prefix}_1")):
            ys = [res.median(f"{prefix}_{t}", v, lambda r: r["ops_per_s"]) for t in threads]
            pts = [(t, y / 1e6) for t, y in zip(threads, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ls=style, color=f"C{i}",
                        label=f"{LABEL[v]}, {way}")
    ax.set_xticks(threads)
    ax.set_xlabel("threads")
    ax.set_ylabel("aggregate Mops/s (alloc or free)")
    ax.set_title("Throughput against threads (128 B, batches of 100, objects touched)")
    finish(fig, ax, outdir, "threads.png")


def plot_series(ax, res, case, title):
    for v in res.variants(case):
        r = res.representative(case, v, lambda r: r["rss_peak"])
        if r is None:
            continue
        ax.plot(r["rss"]["t_ms"], [x / MIB for x in r["rss"]["rss"]], label=LABEL[v], lw=1.2)
    ax.set_xlabel("time, ms")
    ax.set_ylabel("RSS, MiB")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)


def plot_rss(res, outdir):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    plot_series(ax, res, "lifemix", "Lifetime-mixed run: RSS over time (repeat with median peak)")
    ax.legend(fontsize=8)
    save(fig, outdir, "rss_lifemix.png")
    fig, axes = plt.subplots(4, 2, figsize=(12, 14))
    for ax, p in zip(axes.flat, PATTERNS):
        plot_series(ax, res, f"server_{p}", f"server pattern '{p}'")
    for ax in axes.flat[len(PATTERNS):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[len(PATTERNS)].legend(handles, labels, loc="center")
    save(fig, outdir, "rss_server.png")


def plot_burst(res, outdir):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = [int(d) for d in BURST_DELAYS]
    for v in res.variants("phase_burst"):
        ys = [res.median("phase_burst", v, lambda r, d=d: r["held_after_ms"][d]) for d in BURST_DELAYS]
        if None not in ys:
            ax.plot([max(x, 1) for x in xs], [y / MIB for y in ys], marker="o", label=LABEL[v])
    ax.axhline(4, color="red", ls="--", label="tslab target: 4 MiB")
    ax.set_xscale("log")
    ax.set_xticks([1, 10, 100, 1000])
    ax.set_xticklabels(["0", "10", "100", "1000"])
    ax.set_xlabel("ms after the phase ended")
    ax.set_ylabel("RSS held above the start, MiB")
    ax.set_title("Phase burst: 64 MiB of 128 B objects allocated, freed, phase ended")
    finish(fig, ax, outdir, "phase_burst.png")


def close_points(res, key):
    """[(slabs_filled, median slabs released, median close ns, median reserve bytes after)]
    over all runs of the big epochs that ended one way (key of CLOSE_WAYS)."""
    pts = {}
    for r in res.ok.get(("close_cost", "tslab"), []):
        for p in r.get(key, []):
            d = pts.setdefault(p["slabs_filled"], ([], [], []))
            for run in p["runs"]:
                if "close_ns" in run:
                    d[0].append(run["slabs_released"])
                    d[1].append(run["close_ns"])
                    d[2].append(run["reserve_bytes_after"])
    return [(k, statistics.median(v[0]), statistics.median(v[1]), statistics.median(v[2]))
            for k, v in sorted(pts.items()) if v[0]]


def release_slope(pts):
    """(ns per released slab, first point, last point) between the smallest and the
    largest epoch whose close released slabs, or None."""
    pts = [p for p in pts if p[1] > 0]
    if len(pts) < 2 or pts[-1][1] <= pts[0][1]:
        return None
    return (pts[-1][2] - pts[0][2]) / (pts[-1][1] - pts[0][1]), pts[0], pts[-1]


def plot_close(res, outdir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = []
    for key, way in CLOSE_WAYS:
        pts = close_points(res, key)
        if pts:
            ax.plot([p[0] for p in pts], [p[2] / 1e3 for p in pts], marker="o", label=f"tslab, {way}")
            xs = [p[0] for p in pts]
    if xs:
        ax.plot(xs, xs, ls="--", color="grey", label="1 us per slab filled")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("slabs of 128 B objects the epoch filled")
    ax.set_ylabel("close time, us")
    ax.set_title("Epoch close cost against the epoch's slabs")
    finish(fig, ax, outdir, "close_cost.png")


# ---- other programs' results ---------------------------------------------------

def pool_records(res):
    """{(case, variant, malloc): [(ns_per_pair, checksum_ok)] over repeats} from the
    lines of bench/pool_bench_<malloc> (docs/BENCHMARKS.md)."""
    out = {}
    for (case, v), runs in res.ok.items():
        if case != "pool_bench":
            continue
        for r in runs:
            for rec in r["records"]:
                try:
                    key = (f"{rec['bench']}, live={rec['live']}", str(rec["variant"]), str(rec["malloc"]))
                    out.setdefault(key, []).append((float(rec["ns_per_pair"]), rec.get("checksum_ok") is True))
                except (KeyError, TypeError, ValueError):
                    pass
    return out


def load_real_programs(outdir):
    """(records, problem) from DIR/real_programs.json; (None, None) when absent."""
    path = os.path.join(outdir, "real_programs.json")
    if not os.path.exists(path):
        return None, None
    try:
        with open(path) as f:
            recs = json.load(f)
        return [r for r in recs if isinstance(r, dict)], None
    except (OSError, ValueError, TypeError) as e:
        return None, f"real_programs.json unreadable: {e}"


def real_program_stats(recs):
    """{program: {allocator: (ok runs, runs, median seconds, median peak RSS)}} over ok runs."""
    acc = {}
    for r in recs:
        d = acc.setdefault(str(r.get("program")), {}).setdefault(str(r.get("allocator")), [0, 0, [], []])
        d[1] += 1
        if r.get("ok"):
            try:
                secs, rss = float(r["seconds"]), float(r["peak_rss_bytes"])
            except (KeyError, TypeError, ValueError):
                continue
            d[0] += 1
            d[2].append(secs)
            d[3].append(rss)
    return {p: {a: (d[0], d[1], statistics.median(d[2]) if d[2] else None,
                    statistics.median(d[3]) if d[3] else None) for a, d in allocs.items()}
            for p, allocs in acc.items()}


def real_program_refs(allocs):
    """(best peer time, its allocator, lowest peer peak RSS, its allocator) of one program."""
    peers = [(s[2], s[3], a) for a, s in allocs.items() if not a.startswith("tslab") and s[2] is not None]
    if not peers:
        return None, None, None, None
    t = min((p[0], p[2]) for p in peers)
    m = min((p[1], p[2]) for p in peers)
    return t[0], t[1], m[0], m[1]


# ---- summary ----------------------------------------------------------------

def verdict(ok):
    return VERDICTS[2] if ok is None else VERDICTS[0] if ok else VERDICTS[1]


def ratio(a, b):
    return None if a is None or not b else a / b


def times(q):
    """A ratio as the tables show it."""
    return "n/a" if q is None else f"{q:.2f}x"


def summary(res, threads, real):
    """{row key: (tslab's figure, the figure it is compared with, verdict)}
    for the rows of report_layout.SUMMARY_ROWS. Verdicts are for tslab's
    default mode; other modes are given beside it where they apply."""
    med = res.median
    rows = {}

    def ratio_row(key, case, fn, unit):
        t = med(case, "tslab", fn)
        b, bv = best_of(res, case, fn)
        q = ratio(t, b)
        rows[key] = ("n/a" if t is None else f"{t:.2f} {unit}" + ("" if q is None else f" ({q:.2f}x)"),
                     "n/a" if b is None else f"best peer {LABEL[bv]} {b:.2f} {unit}",
                     verdict(None if q is None else q <= 1.0))

    ratio_row("churn", "churn", lambda r: r["ns_per_pair"], "ns/pair")
    ratio_row("batch_fifo", "batch", lambda r: r["fifo_ns_per_op"], "ns/op")
    ratio_row("batch_lifo", "batch", lambda r: r["lifo_ns_per_op"], "ns/op")
    ratio_row("mixed_4k", "mixed_4k", lambda r: r["ns_per_op"], "ns/step")
    ratio_row("mixed_32k", "mixed_32k", lambda r: r["ns_per_op"], "ns/step")

    tails = ["p99", "p999", "p9999"]
    tail = lambda v: [med("batch", v, lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p in tails]  # noqa: E731
    t, gl = tail("tslab"), tail("glibc")
    low = [best_of(res, "batch", lambda r, p=p: pct_of(r, "alloc_latency_ns", p))[0] for p in tails]
    f = lambda xs: "/".join(fmt(x, 0) for x in xs)  # noqa: E731
    ok = None if None in t + gl + low else t[0] <= gl[0] and t[1] <= gl[1] and t[2] < low[2]
    rows["tails"] = (f"{f(t)} ns (p99/p99.9/p99.99)", f"glibc {f(gl)} ns; lowest peer p99.99 {fmt(low[2], 0)} ns",
                     verdict(ok))

    ops = lambda case, v: med(case, v, lambda r: r["ops_per_s"])  # noqa: E731
    for key, (prefix, _) in zip(["threads_once", "threads_window"], THREAD_WAYS):
        one, two = ops(f"{prefix}_1", "tslab"), ops(f"{prefix}_2", "tslab")
        peers = [f"{LABEL[v]} {ops(f'{prefix}_2', v) / ops(f'{prefix}_1', v):.2f}x"
                 for v in res.variants(f"{prefix}_1")
                 if is_peer(v) and ops(f"{prefix}_2", v) and ops(f"{prefix}_1", v)]
        q = ratio(two, one)
        rows[key] = ("n/a" if q is None else f"{q:.2f}x ({two / 1e6:.1f} / {one / 1e6:.1f} Mops/s)",
                     "peers " + (", ".join(peers) or "n/a"), verdict(None if q is None else q >= 1.9))

    t, m = ops("prodcons", "tslab"), ops("prodcons", "mimalloc")
    q = ratio(t, m)
    rows["prodcons"] = ("n/a" if t is None else f"{t / 1e6:.1f}M objects/s" + ("" if q is None else f" ({q:.2f}x)"),
                        "n/a" if m is None else f"mimalloc {m / 1e6:.1f}M objects/s",
                        verdict(None if q is None else q >= 1.0))

    rps = lambda r: r["req_per_s"]  # noqa: E731
    p99 = lambda r: r["request_latency_ns"]["p99"]  # noqa: E731

    def bound_ref(case, best):
        """The bound's requests/s and its ratio to `best`: what no allocator's phase path can beat."""
        x, q = med(case, "bound", rps), ratio(med(case, "bound", rps), best)
        return "" if x is None or q is None else f"; bound (bump arena) {fmt(x)} req/s, {q:.2f}x"

    for p in PATTERNS:
        case = f"server_{p}"
        b, bv = best_of(res, case, rps, lower=False, which=is_plain_peer)
        lp, lv = best_of(res, case, p99, which=is_plain_peer)
        ref = "n/a" if b is None else (f"best plain peer {LABEL[bv]} {fmt(b)} req/s; lowest plain p99 "
                                       f"{LABEL[lv]} {lp / 1e3:.1f} us")
        # (row, variant, required ratio, whether p99 must be no worse than the peers')
        for key, v, need, p99_too in [(case, "tslab", 1.0, True), (f"{case}_freeall", "tslab-freeall", 2.0, False)]:
            t, tp = med(case, v, rps), med(case, v, p99)
            q = ratio(t, b)
            rows[key] = ("n/a" if t is None else f"{fmt(t)} req/s" + ("" if q is None else f" ({q:.2f}x)")
                         + f", p99 {tp / 1e3:.1f} us",
                         ref + bound_ref(case, b),
                         verdict(None if q is None else q >= need and (not p99_too or tp <= lp)))

    req = lambda key, fn: med("close_cost", "tslab", lambda r: fn(r[key]))  # noqa: E731
    t, calls = req("request_close", median_close), req("request_close", calls_per_close)
    fa, fcalls = req("request_free_all", median_close), req("request_free_all", calls_per_close)
    rows["request_close"] = (
        "n/a" if t is None else f"{t:.0f} ns median, {calls:.2f} release calls per close",
        "free-all close of the same epochs: " + ("n/a" if fa is None else f"{fa:.0f} ns, {fcalls:.2f} calls")
        + " (no peer closes an epoch; mimalloc's heap and jemalloc's arena per request are in section 6)",
        verdict(None if t is None else t < 1000 and calls == 0))

    end_us = lambda v: med("phase_burst", v, lambda r: r["phase_end_ns"])  # noqa: E731
    pe = [(end_us(v), v) for v in ["mimalloc-heap", "jemalloc-arena"] if v in res.variants("phase_burst")]
    pe_txt = ", ".join(f"{LABEL[v]} {x / 1e3:.0f} us" for x, v in pe if x is not None)
    tb = end_us("tslab")
    peer_txt = ("no peer has a per-slab close; 64 MiB phase end (phase burst): "
                f"tslab {'n/a' if tb is None else f'{tb / 1e3:.0f} us'}" + (f", {pe_txt}" if pe_txt else ""))
    fa = release_slope(close_points(res, "points_free_all"))
    cl = close_points(res, "points")
    cl_txt = ("" if len(cl) < 2 else f"; after the frees, which release most slabs themselves, the close of "
              f"{cl[-1][0]} slabs takes {cl[-1][2] / 1e3:.0f} us")
    rows["close_slope"] = ("n/a (no close released slabs)" if fa is None else
                           f"{fa[0]:.0f} ns per released slab (free-all, {fa[1][1]:.0f}..{fa[2][1]:.0f} slabs "
                           f"released; {fa[2][2] / 1e3:.0f} us for {fa[2][0]} slabs filled){cl_txt}",
                           peer_txt, verdict(None if fa is None else fa[0] <= 1000))

    t = med("lifemix", "tslab", rps)
    b, bv = best_of(res, "lifemix", rps, lower=False)
    q = ratio(t, b)
    rows["lifemix_speed"] = ("n/a" if t is None else f"{fmt(t)} req/s" + ("" if q is None else f" ({q:.2f}x)"),
                             "n/a" if b is None else f"best peer {LABEL[bv]} {fmt(b)} req/s" + bound_ref("lifemix", b),
                             verdict(None if q is None else q >= 1.0))
    peak_fn = lambda r: r["rss_peak"]  # noqa: E731
    flat_fn = lambda r: r["rss_final"] / r["rss_at_10pct"]  # noqa: E731
    peak = med("lifemix", "tslab", peak_fn)
    lo, lov = best_of(res, "lifemix", peak_fn)
    rows["lifemix_peak"] = ("n/a" if peak is None else f"{peak / MIB:.1f} MiB",
                            "n/a" if lo is None else f"lowest peer {LABEL[lov]} {lo / MIB:.1f} MiB",
                            verdict(None if peak is None or lo is None else peak < lo))
    flat = med("lifemix", "tslab", flat_fn)
    lo_flat = None if lov is None else med("lifemix", lov, flat_fn)
    rows["lifemix_flat"] = ("n/a" if flat is None else f"{flat:.3f}",
                            "n/a" if lo_flat is None else f"lowest-peak peer {LABEL[lov]} {lo_flat:.3f}",
                            verdict(None if flat is None else flat <= 1.05))

    held = lambda v, d: med("phase_burst", v, lambda r: r["held_after_ms"][d])  # noqa: E731
    t0 = held("tslab", "0")
    hot = med("phase_burst", "tslab", lambda r: tslab_stat(r, "reserve_bytes"))
    peers = [(held(v, "100"), v) for v in res.variants("phase_burst") if is_peer(v)]
    ptxt = ", ".join(f"{LABEL[v]} {x / MIB:.1f}" for x, v in peers if x is not None)
    rows["burst_held"] = ("n/a" if t0 is None else f"{t0 / MIB:.2f} MiB at 0 ms"
                          + ("" if hot is None else f" (hot reserve at the end {hot / MIB:.2f} MiB)"),
                          f"peers at 100 ms, MiB: {ptxt or 'n/a'}", verdict(None if t0 is None else t0 <= 4 * MIB))
    alloc_fn = lambda r: r["alloc_ns_per_object"]  # noqa: E731
    t, g = med("phase_burst", "tslab", alloc_fn), med("phase_burst", "glibc", alloc_fn)
    b, bv = best_of(res, "phase_burst", alloc_fn)
    q = ratio(t, g)
    rows["burst_alloc"] = ("n/a" if t is None else f"{t:.1f} ns/object" + ("" if q is None else f" ({q:.2f}x glibc)"),
                           ("n/a" if g is None else f"glibc {g:.1f} ns/object")
                           + ("" if b is None else f"; best peer {LABEL[bv]} {b:.1f}"),
                           verdict(None if q is None else q <= 1.5))

    md = med("mixed_4k", "tslab", lambda r: tslab_stat(r, "metadata_bytes") / tslab_stat(r, "live_bytes"))
    rss = med("mixed_4k", "tslab", lambda r: r["rss_bytes"])
    b, bv = best_of(res, "mixed_4k", lambda r: r["rss_bytes"])
    rows["metadata"] = ("n/a" if md is None else f"{md * 100:.2f}% of live bytes (mixed 16 B..4 KiB live set)"
                        + ("" if rss is None else f"; RSS {rss / MIB:.1f} MiB"),
                        "peers expose no metadata count; RSS of the same live set: "
                        + ("n/a" if b is None else f"lowest peer {LABEL[bv]} {b / MIB:.1f} MiB"),
                        verdict(None if md is None else md < 0.02))

    on_off = [(fastpath(res, fig, "on_off_ratio"), fastpath(res, fig, "control_ratio"), name)
              for fig, name in COUNTER_FIGURES]
    have = [x for x in on_off if x[0] is not None]
    rows["counters"] = ("n/a" if not have else
                        f"{max(x[0] for x in have):.3f} worst on/off ratio ("
                        + ", ".join(f"{n} {r:.3f}" for r, _, n in have) + ")",
                        "n/a" if not have else "A/A control (two copies of one build): "
                        + ", ".join(f"{c:.3f}" for _, c, _ in have),
                        verdict(None if len(have) < len(on_off) else
                                all(abs(r - 1) <= 0.02 and abs(c - 1) <= 0.02 for r, c, _ in have)))

    if real:
        worst_t = worst_r = None
        fails = n = 0
        for prog, allocs in real.items():
            bt, _, lr, _ = real_program_refs(allocs)
            s = allocs.get("tslab")
            if s is None:
                continue
            n += 1
            fails += s[1] - s[0]
            if s[2] is not None and bt:
                worst_t = max(worst_t or 0, s[2] / bt)
            if s[3] is not None and lr:
                worst_r = max(worst_r or 0, s[3] / lr)
        rows["real_programs"] = (
            "n/a (no tslab records)" if not n else
            f"{fmt(worst_t, 2)}x time, {fmt(worst_r, 2)}x peak RSS (worst of {n} programs), {fails} failed runs",
            "best peer time and lowest peer peak RSS per program (section 12)",
            verdict(None if worst_t is None or worst_r is None else fails == 0 and worst_t <= 1.1 and worst_r <= 1.1))
    else:
        rows["real_programs"] = ("n/a (no real_programs.json)", "n/a", verdict(None))
    return rows


def forced_closes(res):
    """(forced closes, tslab runs that reported) over every tslab run."""
    n = runs = 0
    for (case, v), rs in res.ok.items():
        if v.split("-")[0] != "tslab":
            continue
        for r in rs:
            if "tslab" in r:
                runs += 1
                n += r["tslab"].get("epochs_forced_close_total", 0)
    return n, runs


def checksum_mismatches(res):
    """Cases whose runs printed different checksums: an allocator gave some
    workload back other bytes than it wrote."""
    sums = {}
    for (case, v), rs in res.ok.items():
        for r in rs:
            if "checksum" in r:
                sums.setdefault(case, {}).setdefault(r["checksum"], set()).add(v)
    return {c: s for c, s in sums.items() if len(s) > 1}


# ---- report.md --------------------------------------------------------------

def threads_table(res, prefix, threads, out):
    head = "| allocator | " + " | ".join(f"{t} thread(s) Mops/s median [min, max]" for t in threads) \
        + " | 2T / 1T |"
    out += [head, "|---|" + "---:|" * (len(threads) + 1)]
    for v in res.variants(f"{prefix}_1"):
        cells = []
        for t in threads:
            vals = res.values(f"{prefix}_{t}", v, lambda r: r["ops_per_s"])
            cells.append(f"failed: {res.error(f'{prefix}_{t}', v)[:60]}" if not vals else
                         f"{statistics.median(vals) / 1e6:.1f} [{min(vals) / 1e6:.1f}, {max(vals) / 1e6:.1f}]")
        q = ratio(res.median(f"{prefix}_2", v, lambda r: r["ops_per_s"]),
                  res.median(f"{prefix}_1", v, lambda r: r["ops_per_s"]))
        cells.append(times(q))
        out.append(f"| {LABEL[v]} | " + " | ".join(cells) + " |")
    out.append("")


def untouched_tables(res, threads, out):
    """The speed figures with untouched objects, compact: median (ratio to the best peer)."""
    def vs_best(case, fn, lower, scale=1):
        case += UNTOUCHED
        b = best_of(res, case, fn, lower)[0]

        def cell(v):
            m = res.median(case, v, fn)
            q = ratio(m, b)
            return "n/a" if m is None else fmt(m / scale, 2) + ("" if q is None else f" ({q:.2f}x)")
        return cell

    def scaling(v):
        return times(ratio(res.median("threads_2" + UNTOUCHED, v, lambda r: r["ops_per_s"]),
                           res.median("threads_1" + UNTOUCHED, v, lambda r: r["ops_per_s"])))

    speed = [("churn ns/pair", vs_best("churn", lambda r: r["ns_per_pair"], True)),
             ("batch FIFO ns/op", vs_best("batch", lambda r: r["fifo_ns_per_op"], True)),
             ("batch LIFO ns/op", vs_best("batch", lambda r: r["lifo_ns_per_op"], True))] \
        + [(f"alloc {name} ns", vs_best("batch", lambda r, p=p: pct_of(r, "alloc_latency_ns", p), True))
           for p, name in [("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99")]] \
        + [("mixed 4 KiB ns/step", vs_best("mixed_4k", lambda r: r["ns_per_op"], True)),
           ("mixed 32 KiB ns/step", vs_best("mixed_32k", lambda r: r["ns_per_op"], True))] \
        + [(f"threads {t}T Mops/s", vs_best(f"threads_{t}", lambda r: r["ops_per_s"], False, 1e6))
           for t in threads] \
        + [("threads 2T / 1T", scaling),
           ("prodcons Mobjects/s", vs_best("prodcons", lambda r: r["ops_per_s"], False, 1e6))]
    server = [(f"'{p}' req/s", vs_best(f"server_{p}", lambda r: r["req_per_s"], False)) for p in PATTERNS]
    for group in [speed, server]:
        out += ["| allocator | " + " | ".join(t for t, _ in group) + " |", "|---|" + "---:|" * len(group)]
        for v in res.variants("churn" + UNTOUCHED):
            out.append(f"| {LABEL[v]} | " + " | ".join(cell(v) for _, cell in group) + " |")
        out.append("")


def pools_section(res, out):
    recs = pool_records(res)
    if not recs:
        return
    section(out, "pools", "The C++ side (bench/pool_bench.cpp, one binary per malloc): churn of a 32-byte object "
            "through tslab::pool<T> and tslab's C calls, std::pmr::unsynchronized_pool_resource and new/delete. "
            "ns per allocate/free pair (each run's median over its own repeats), median over the suite's "
            "repeats with [min, max], and the ratio to the best variant of the same case whose name does not "
            "start with \"tslab\". A variant that does not use malloc runs in the glibc binary only.",
            OPTIONAL_SECTIONS)
    out += ["| case | variant | malloc | ns/pair median [min, max] | vs best other | read back what was written |",
            "|---|---|---|---:|---:|---|"]
    for case in sorted({c for c, _, _ in recs}):
        rows = sorted((k for k in recs if k[0] == case), key=lambda k: (not k[1].startswith("tslab"), k[1], k[2]))
        others = [statistics.median(ns for ns, _ in recs[k]) for k in rows if not k[1].startswith("tslab")]
        b = min(others) if others else None
        for k in rows:
            ns = [x for x, _ in recs[k]]
            m = statistics.median(ns)
            ok = "yes" if all(c for _, c in recs[k]) else "**no**"
            out.append(f"| {case} | {k[1]} | {k[2]} | {m:.2f} [{min(ns):.2f}, {max(ns):.2f}] | "
                       f"{times(ratio(m, b))} | {ok} |")
    out.append("")


def real_programs_section(real, problem, out):
    if problem:
        out += [f"- **{problem}**", ""]
    if not real:
        return
    section(out, "real_programs", "Real programs run under each allocator (DIR/real_programs.json, written by "
            "the drop-in scripts; docs/BENCHMARKS.md describes the records). Medians over the successful runs; "
            "ratios to the best peer's time and to the lowest peer's peak RSS for the same program (peers: "
            "allocators whose name does not start with \"tslab\").", OPTIONAL_SECTIONS)
    out += ["| program | allocator | runs ok | seconds | vs best peer | peak RSS MiB | vs lowest peer |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for prog in sorted(real):
        allocs = real[prog]
        bt, _, lr, _ = real_program_refs(allocs)
        for a in sorted(allocs, key=lambda a: (not a.startswith("tslab"), a)):
            ok, n, secs, rss = allocs[a]
            out.append(f"| {prog} | {a} | {ok}/{n} | {fmt(secs, 2)} | {times(ratio(secs, bt))} | "
                       f"{fmt(None if rss is None else rss / MIB, 1)} | {times(ratio(rss, lr))} |")
    out.append("")


def write_report(res, outdir, real, real_problem):
    meta = res.meta
    threads = sorted({1, 2, meta["threads"]})
    out = ["# temporal-slab comparison benchmark report", ""]
    out.append(f"Run {meta['started']} .. {meta['finished']} ({meta['duration_s']} s), "
               f"{'quick mode, ' if meta['quick'] else ''}{meta['repeats']} repeat(s) per case, "
               "repeats interleaved across allocators. Every workload writes each object it allocates (all of "
               "its bytes) and reads it back before freeing it; section 10 repeats the speed figures with "
               "untouched objects, as reports before this one measured them. See docs/BENCHMARKS.md for what "
               "each workload does and how to read this report. Raw figures: results.json.")
    out.append("")
    skipped = [(n, a["reason"]) for n, a in meta["allocators"].items() if not a["available"]]
    for n, why in skipped:
        out.append(f"- **{n} skipped**: {why}")
    failed = sum(len(v) for v in res.errors.values())
    if failed:
        out.append(f"- **{failed} run(s) failed**; their cells say why.")
    fc, fc_runs = forced_closes(res)
    out.append(f"- tslab forced epoch closes: {fc} over {fc_runs} tslab runs (default ring of 16 slots, "
               "advance policy skipping open eras; the long-lived epoch is never closed under the workloads)."
               if fc == 0 else
               f"- **tslab forced epoch closes: {fc}** over {fc_runs} tslab runs: the long-lived epoch or a "
               "phase was closed by an advance; see epochs_forced_close_total in results.json.")
    bad = checksum_mismatches(res)
    out.append("- Object checksums: every allocator read back the bytes the workloads wrote (checksums agree "
               "within every case)." if not bad else
               "- **Object checksums differ** (an allocator returned other bytes than were written): "
               + "; ".join(f"{c}: " + " vs ".join("/".join(sorted(vs)) for vs in s.values())
                           for c, s in sorted(bad.items())))
    out.append("")
    rows = summary(res, threads, real)
    out += ["## Summary: targets", "",
            "Every target of DESIGN.md section 5 and issues 11 and 12, measured in this run (medians of repeats; "
            "ratios in parentheses are tslab against the figure it is compared with). Verdicts are for tslab in "
            "its default configuration.", "",
            "| target | tslab, measured | compared with | verdict |", "|---|---|---|---|"]
    out += [f"| {label} | {' | '.join(rows[key])} |" for key, label in SUMMARY_ROWS]
    out.append("")

    m = meta["machine"]
    out += ["## Machine", "",
            f"- CPU: {m['cpu_model']}, {m['cores']} cores", f"- Kernel: {m['kernel']} ({m['os']})",
            f"- Compiler: {m['compiler']}",
            f"- Load average at start / end: {' '.join(m['loadavg_start'])} / {' '.join(m.get('loadavg_end', []))}"]
    for n, a in meta["allocators"].items():
        out.append(f"- {n}: " + (a.get("version", "?") if a["available"] else "not available"))
    for p, v in m["packages"].items():
        out.append(f"- Debian package {p}: {v}")
    out.append("")

    section(out, "churn", "Allocate a 128 B object, write it, read it back and free it, in a tight loop.")
    metric_table(res, "churn", [("ns/pair", lambda r: r["ns_per_pair"], True, 1)], out)

    section(out, "batch", "Allocate and write 10,000 objects of 128 B, then read and free them in allocation "
            "order (FIFO) or reverse order (LIFO); ns per call (alloc or free, the object's write or read "
            "included). Then every call timed on its own (the write and read outside the timed call); "
            "percentiles include the timer's own cost, shown in the last column.")
    metric_table(res, "batch", [("FIFO ns/op", lambda r: r["fifo_ns_per_op"], True, 1),
                                ("LIFO ns/op", lambda r: r["lifo_ns_per_op"], True, 1)], out)
    out += ["Allocation latency, ns (median over repeats):", "",
            "| allocator | p50 | p99 | p99.9 | p99.99 | max | free p99 | free p99.99 | timer p50 / p99 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in res.variants("batch"):
        g = lambda name, p: res.median("batch", v, lambda r: pct_of(r, name, p))  # noqa: E731
        tm = res.median("batch", v, lambda r: r["timer_overhead_ns"]["p50"])
        tp = res.median("batch", v, lambda r: r["timer_overhead_ns"]["p99"])
        out.append(f"| {LABEL[v]} | " + " | ".join(fmt(g("alloc_latency_ns", p), 0) for p in
                                                     ["p50", "p99", "p999", "p9999", "max"])
                   + f" | {fmt(g('free_latency_ns', 'p99'), 0)} | {fmt(g('free_latency_ns', 'p9999'), 0)}"
                   f" | {fmt(tm, 0)} / {fmt(tp, 0)} |")
    out += ["", "![latency percentiles](latency_percentiles.png)", ""]

    section(out, "mixed", "A live set of 10,000 objects; each step reads and frees a random one and allocates "
            "and writes a replacement of a random size, log-uniform in 16 B..4 KiB (and 16 B..32 KiB). "
            "ns per step; RSS at the end.")
    for case, title in [("mixed_4k", "16 B .. 4 KiB"), ("mixed_32k", "16 B .. 32 KiB")]:
        out += [f"**{title}**", ""]
        metric_table(res, case, [("ns/step", lambda r: r["ns_per_op"], True, 1),
                                 ("RSS MiB", lambda r: r["rss_bytes"], True, MIB)], out)

    section(out, "threads", "Each thread allocates and writes 100 objects of 128 B, reads and frees them, "
            "repeatedly, on its own objects. Aggregate calls per second (alloc or free), and the scaling ratio. "
            "Threads created once run all their work in one window; threads created per window are new in each "
            "of the windows (a fresh thread cache each time) and pinned, thread i to CPU i mod the CPUs.")
    for prefix, way in THREAD_WAYS:
        out += [f"**Threads {way}**", ""]
        threads_table(res, prefix, threads, out)
    out += ["![throughput against threads](threads.png)", ""]

    section(out, "prodcons", "One thread allocates and writes 128 B objects and passes them through a ring to "
            "a second thread that reads and frees them (every free is cross-thread). Objects per second.")
    metric_table(res, "prodcons", [("Mobjects/s", lambda r: r["ops_per_s"], False, 1e6)], out)

    section(out, "server", "Requests shaped like the seed's workload patterns (seeds/002) plus 'tiny', run "
            "closed-loop; each object is written when allocated and read back when its request finishes. "
            "tslab (default configuration) opens an epoch per request (per 8 requests for 'steady') and, with "
            "per-object frees, closes it when the request's objects are freed; with free-all close the request "
            "frees nothing and tslab_epoch_free_all ends the epoch with its objects. Peers use plain malloc/free, and a heap "
            "(mimalloc) or arena (jemalloc) per phase, with per-object frees or freed whole by the heap's "
            "destroy or the arena's reset. Ratios are against the best PLAIN peer (malloc/free of the same "
            "objects), as the targets are. Request latency covers its allocations, writes, reads, frees and the "
            "phase end it triggers. For tslab: release (madvise) calls per request and forced closes. The bound "
            "(bench/be_bound.c) is no allocator: each phase bumps through an arena it gives back whole, with no "
            "work per object; it shows what the workload itself costs, and so how far any allocator could go.")
    for p in PATTERNS:
        out += [f"**pattern {p}**", ""]
        metric_table(res, f"server_{p}", [
            ("requests/s", lambda r: r["req_per_s"], False, 1),
            ("p99 latency us", lambda r: r["request_latency_ns"]["p99"], True, 1e3),
            ("p99.9 latency us", lambda r: r["request_latency_ns"]["p999"], True, 1e3),
            ("peak RSS MiB", lambda r: r["rss_peak"], True, MIB),
            ("final RSS MiB", lambda r: r["rss_final"], True, MIB)], out, which=is_plain_peer,
            extra=[("release calls / request", release_calls_per_request, 3),
                   ("forced closes", forced_closes_of, 0)])
    out += ["![RSS over time, server patterns](rss_server.png)", ""]

    section(out, "lifemix", "The drainability experiment of seeds/000: each request allocates 64 "
            "short-lived 128 B objects in its own epoch; one request in 8 also keeps one object alive "
            "for the next 10% of the run. tslab routes it to a long-lived epoch (aligned) or into the "
            "request's epoch (mixed). The bound is the one of section 6.")
    metric_table(res, "lifemix", [
        ("requests/s", lambda r: r["req_per_s"], False, 1),
        ("peak RSS MiB", lambda r: r["rss_peak"], True, MIB),
        ("final RSS MiB", lambda r: r["rss_final"], True, MIB),
        ("RSS end / 10% mark", lambda r: r["rss_final"] / r["rss_at_10pct"], True, 1)], out)
    out += ["Recycle rate = slabs_recycled_total / slabs_created_total from tslab_stats_global: of "
            "all slabs formatted and spans created, the share placed in memory that had served "
            "before (an empty slab from the pool, or memory released to the OS and reused). The "
            "seed measured 0.28% (mixed) against 66.5% (aligned); its net slabs at the end were "
            "~493K (mixed) against ~2K (aligned). Slabs in use at the end are this run's net slabs. "
            "With the strict close the rate is a lower bound: docs/BENCHMARKS.md (workload 7) "
            "describes released memory the library does not count as recycled.", "",
            "| tslab variant | recycle rate median [min, max] | slabs created | slabs recycled | "
            "not recycled | released to the OS, MiB | slabs in use at the end | forced closes |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for v in ["tslab", "tslab-mixed"]:
        vals = res.values("lifemix", v, recycle_rate)
        if vals:
            g = lambda k: res.median("lifemix", v, lambda r: tslab_stat(r, k))  # noqa: E731
            fresh = res.median("lifemix", v, lambda r: tslab_stat(r, "slabs_created_total")
                               - tslab_stat(r, "slabs_recycled_total"))
            out.append(f"| {LABEL[v]}{'' if 'mixed' in v else ', aligned routing'} | "
                       f"{statistics.median(vals) * 100:.2f}% [{min(vals) * 100:.2f}%, "
                       f"{max(vals) * 100:.2f}%] | {g('slabs_created_total'):.0f} | "
                       f"{g('slabs_recycled_total'):.0f} | {fresh:.0f} | "
                       f"{g('release_bytes_total') / MIB:.0f} | {g('slabs_in_use'):.0f} | "
                       f"{g('epochs_forced_close_total'):.0f} |")
    aligned = res.median("lifemix", "tslab", recycle_rate)
    mixed = res.median("lifemix", "tslab-mixed", recycle_rate)
    if aligned is not None and mixed is not None:
        nets = [res.median("lifemix", v, lambda r: tslab_stat(r, "slabs_in_use")) for v in ["tslab", "tslab-mixed"]]
        out += ["", f"Contrast (strict close): recycle rate {aligned * 100:.1f}% aligned against "
                f"{mixed * 100:.1f}% mixed ({'higher' if aligned > mixed else 'not higher'} when aligned; "
                f"the seed: 66.5% against 0.28%); slabs in use at the end {nets[0]:.0f} aligned against "
                f"{nets[1]:.0f} mixed."
                + (" Both rates are high: a slab pinned by a kept object is released by the free that "
                   "empties it (its epoch is closed) and its memory reused, so mixed routing shows "
                   "mostly in net slabs and RSS, not in the rate." if min(aligned, mixed) > 0.5 else "")]
    out += ["", "![RSS over time, lifetime-mixed run](rss_lifemix.png)", ""]

    section(out, "phase_burst", "One phase allocates and writes 64 MiB of 128 B objects, reads and frees them "
            "all, and ends (tslab_epoch_close, mi_heap_destroy, jemalloc tcache flush + arena reset, or "
            "nothing for plain malloc). Allocation: ns per object of the allocation loop, each object's write "
            "included, so page faults count wherever the allocator takes them. tslab keeps its bounded hot "
            "reserve of empty memory resident (reserve_bytes in results.json). RSS held above the starting RSS "
            "is sampled 0, 10, 100 and 1000 ms after the phase end returned.")
    metric_table(res, "phase_burst", [("allocation ns/object", lambda r: r["alloc_ns_per_object"], True, 1),
                                      ("peak MiB", lambda r: r["rss_peak"] - r["rss_base"], True, MIB)]
                 + [(f"held at {d} ms MiB", lambda r, d=d: r["held_after_ms"][d], True, MIB)
                    for d in BURST_DELAYS]
                 + [("phase end us", lambda r: r["phase_end_ns"], True, 1e3)], out)
    out += ["![phase burst](phase_burst.png)", ""]

    section(out, "close_cost", "Request epochs: a fresh instance runs epochs of 16 objects of 16..256 B used by "
            "one thread (allocated, written, read back), each either freed object by object and closed "
            "(tslab_epoch_close) or ended whole with its objects live (tslab_epoch_free_all); each close timed "
            "alone, release (madvise) calls counted over all of them.")
    out += ["| close | objects | median ns [min, max over runs] | p99 ns | release calls per close |",
            "|---|---:|---:|---:|---:|"]
    for key, name in [("request_close", "frees, then tslab_epoch_close"), ("request_free_all", "tslab_epoch_free_all")]:
        vals = res.values("close_cost", "tslab", lambda r: median_close(r[key]))
        if not vals:
            errs = [r[key].get("error") for r in res.ok.get(("close_cost", "tslab"), []) if key in r]
            why = next((e for e in errs if e), None) or res.error("close_cost", "tslab")
            out.append(f"| {name} | failed: {why[:80]} | | | |")
            continue
        g = lambda fn: res.median("close_cost", "tslab", lambda r: fn(r[key]))  # noqa: E731
        out.append(f"| {name} | {g(lambda c: c['objects']):.0f} | "
                   f"{statistics.median(vals):.0f} [{min(vals):.0f}, {max(vals):.0f}] | "
                   f"{g(lambda c: c['close_ns']['p99']):.0f} | {g(calls_per_close):.3f} |")
    out += ["", "Big epochs: an epoch fills N slabs' worth of 128 B objects and either frees every object and is "
            "closed, or is freed whole with every object live (tslab_epoch_free_all); the close is timed alone "
            "(medians of all runs). Slabs released: by the close itself (released_at_close_bytes, in slabs of "
            "the class). The frees already release what the hot reserve cannot keep, so the close after them "
            "releases little; the free-all close releases the epoch, and its slope is the cost per released "
            "slab. Hot reserve: the instance's reserve_bytes after the close.", ""]
    cp = [{p[0]: p for p in close_points(res, key)} for key, _ in CLOSE_WAYS]
    out += ["| slabs filled | close after frees: us | slabs released | hot reserve KiB | free-all: us "
            "| slabs released | ns per released slab | hot reserve KiB |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(set(cp[0]) | set(cp[1])):
        c, f = cp[0].get(n), cp[1].get(n)
        cells = ["n/a", "", ""] if c is None else [f"{c[2] / 1e3:.1f}", f"{c[1]:.0f}", f"{c[3] / 1024:.0f}"]
        cells += (["n/a", "", "", ""] if f is None else
                  [f"{f[2] / 1e3:.1f}", f"{f[1]:.0f}", f"{f[2] / f[1]:.0f}" if f[1] else "n/a", f"{f[3] / 1024:.0f}"])
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    if not cp[0] and not cp[1]:
        out.append(f"| failed: {res.error('close_cost', 'tslab')[:100]} | | | | | | | |")
    out += ["", "![epoch close cost](close_cost.png)", ""]

    section(out, "counters", "tslab with its statistics counters (the shipped library) against the same "
            "sources built with TSLAB_COUNTERS=0 and glibc malloc, taking turns in one process "
            "(bench_fastpath_cost: short blocks in rotated order, ratios per round, each tslab build in 4 "
            "code placements (its functions shifted by 0, 16, 32 and 48 bytes; a round compares the two builds "
            "in one placement) over 8 instance placements; every build writes and reads its objects alike). "
            "The last column gives the on/off ratio of each code placement alone: what the layout of one "
            "compilation moves. The A/A column compares two copies of a build with counters the same way: how "
            "far identical code differs in this measurement. Each cell is the median over repeats of a run's median; brackets hold the median "
            "over repeats of each run's 95% confidence interval bounds. Target: on/off within 2%.")
    out += ["| figure | counters on, ns | counters off, ns | on / off [CI] | A/A control [CI] | glibc, ns "
            "| tslab / glibc | on / off by code placement |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for fig, name in COUNTER_FIGURES:
        g = {k: fastpath(res, fig, k) for k in ["ns_counters_on", "ns_counters_off", "ns_glibc", "on_off_ratio",
                                                "on_off_ratio_lo", "on_off_ratio_hi", "control_ratio",
                                                "control_ratio_lo", "control_ratio_hi", "glibc_ratio"]}
        if g["on_off_ratio"] is None:
            out.append(f"| {name} | failed: {res.error('fastpath_cost', 'tslab')[:100]} | | | | | |")
            continue
        by_code = []
        for k in range(4):
            v = res.median("fastpath_cost", "tslab",
                           lambda r, k=k: r["figures"][fig].get("on_off_ratio_by_code", [])[k])
            if v is not None:
                by_code.append(f"{v:.3f}")
        out.append(f"| {name} | {g['ns_counters_on']:.2f} | {g['ns_counters_off']:.2f} "
                   f"| {g['on_off_ratio']:.3f} [{g['on_off_ratio_lo']:.3f}, {g['on_off_ratio_hi']:.3f}] "
                   f"| {g['control_ratio']:.3f} [{g['control_ratio_lo']:.3f}, {g['control_ratio_hi']:.3f}] "
                   f"| {g['ns_glibc']:.2f} | {g['glibc_ratio']:.3f} | {', '.join(by_code)} |")
    out.append("")

    section(out, "untouched", "The speed figures again with untouched objects (touch=0): each object gets one "
            "or two stores (its first and last word) and is never read, as every report before touched objects "
            "measured it. Same sizes and repeats as the touched runs; each cell is the median over repeats and, "
            "in parentheses, its ratio to the best peer (for ns lower is better, for throughput higher). The "
            "server runs use per-object frees and plain peers only.")
    untouched_tables(res, threads, out)

    pools_section(res, out)
    real_programs_section(real, real_problem, out)

    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/report"
    res = Results(os.path.join(outdir, "results.json"))
    threads = sorted({1, 2, res.meta["threads"]})
    recs, problem = load_real_programs(outdir)
    real = real_program_stats(recs) if recs else None
    plot_latency(res, outdir)
    plot_threads(res, outdir, threads)
    plot_rss(res, outdir)
    plot_burst(res, outdir)
    plot_close(res, outdir)
    write_report(res, outdir, real, problem)
    print(f"report: {os.path.join(outdir, 'report.md')}")


if __name__ == "__main__":
    main()
