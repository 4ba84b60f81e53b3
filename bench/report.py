#!/usr/bin/env python3
"""Turn results.json (bench/run_suite.py) into report.md and PNG plots.

Usage: report.py DIR   (reads DIR/results.json, writes DIR/report.md, DIR/*.png)
Every table shows the median over repeats with min and max, and ratios to
the best peer computed from medians of this same run.
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from report_layout import SECTIONS  # noqa: E402

MIB = 1 << 20
PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
LABEL = {
    "tslab": "tslab", "tslab-nocounters": "tslab, counters off",
    "tslab-mixed": "tslab, mixed routing", "glibc": "glibc", "jemalloc": "jemalloc",
    "jemalloc-arena": "jemalloc, arena per phase", "mimalloc": "mimalloc",
    "mimalloc-heap": "mimalloc, heap per phase", "tcmalloc": "tcmalloc",
}
ORDER = list(LABEL)
PATTERNS = ["burst", "steady", "leak", "hotspot", "kernel"]
BURST_DELAYS = ["0", "10", "100", "1000"]
COUNTER_FIGURES = [("churn", lambda r: r["ns_per_pair"], "churn ns/pair"),
                   ("batch", lambda r: r["fifo_ns_per_op"], "batch FIFO ns/op"),
                   ("batch", lambda r: r["lifo_ns_per_op"], "batch LIFO ns/op")]


def is_peer(variant):
    return variant.split("-")[0] in PEERS


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
            except (KeyError, TypeError, ZeroDivisionError):
                pass
        return out

    def median(self, case, variant, fn):
        v = self.values(case, variant, fn)
        return statistics.median(v) if v else None

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


def metric_table(res, case, metrics, out):
    """metrics: (title, fn, lower_is_better, scale). One row per variant."""
    variants = res.variants(case)
    head = "| allocator |"
    sep = "|---|"
    for title, _, lower, _ in metrics:
        head += f" {title} median [min, max] | vs best peer ({'lower' if lower else 'higher'} is better) |"
        sep += "---:|---:|"
    out += [head, sep]
    best = []
    for _, fn, lower, _ in metrics:
        peers = [m for v in variants if is_peer(v) for m in [res.median(case, v, fn)] if m is not None]
        best.append((min(peers) if lower else max(peers)) if peers else None)
    for v in variants:
        row = f"| {LABEL[v]} |"
        for (title, fn, lower, scale), b in zip(metrics, best):
            vals = res.values(case, v, fn)
            if not vals:
                err = (res.errors.get((case, v)) or ["no result"])[0]
                row += f" failed: {err[:80]} | |"
                continue
            m = statistics.median(vals)
            ratio = f"{m / b:.2f}x" if b else "n/a"
            row += f" {fmt(m / scale, 2)} [{fmt(min(vals) / scale, 2)}, {fmt(max(vals) / scale, 2)}] | {ratio} |"
        out.append(row)
    out.append("")


def section(out, key, text):
    out += [f"## {SECTIONS[key]}", "", text, ""]


def pct_of(r, name, p):
    return r[name][p]


def tslab_stat(r, name):
    return r["tslab"][name]


def recycle_rate(r):
    t = r["tslab"]
    return t["slabs_recycled_total"] / t["slabs_created_total"]


# ---- plots ------------------------------------------------------------------

def save(fig, outdir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)


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
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, outdir, "latency_percentiles.png")


def plot_threads(res, outdir, threads):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for v in res.variants("threads_1"):
        ys = [res.median(f"threads_{t}", v, lambda r: r["ops_per_s"]) for t in threads]
        pts = [(t, y / 1e6) for t, y in zip(threads, ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABEL[v])
    ax.set_xticks(threads)
    ax.set_xlabel("threads")
    ax.set_ylabel("aggregate Mops/s (alloc or free)")
    ax.set_title("Throughput against threads (128 B, batches of 100)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    save(fig, outdir, "threads.png")


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
    fig, axes = plt.subplots(3, 2, figsize=(12, 11))
    for ax, p in zip(axes.flat, PATTERNS):
        plot_series(ax, res, f"server_{p}", f"server pattern '{p}'")
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center")
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
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    save(fig, outdir, "phase_burst.png")


def close_points(res):
    """[(slabs_filled, median slabs released, median close ns)] over all runs."""
    pts = {}
    for r in res.ok.get(("close_cost", "tslab"), []):
        for p in r["points"]:
            d = pts.setdefault(p["slabs_filled"], ([], []))
            for run in p["runs"]:
                d[0].append(run["slabs_released"])
                d[1].append(run["close_ns"])
    return [(k, statistics.median(v[0]), statistics.median(v[1])) for k, v in sorted(pts.items())]


def plot_close(res, outdir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = close_points(res)
    if pts:
        ax.plot([max(p[1], 1) for p in pts], [p[2] / 1e3 for p in pts], marker="o", label="tslab")
        ax.plot([max(p[1], 1) for p in pts], [max(p[1], 1) for p in pts], ls="--", color="grey",
                label="1 us per slab")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("slabs released by the close")
    ax.set_ylabel("tslab_epoch_close time, us")
    ax.set_title("Epoch close cost against slabs released")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, outdir, "close_cost.png")


# ---- summary ----------------------------------------------------------------

def best_peer(res, case, fn, lower=True):
    ms = [(res.median(case, v, fn), v) for v in res.variants(case) if is_peer(v)]
    ms = [m for m in ms if m[0] is not None]
    if not ms:
        return None, None
    return min(ms) if lower else max(ms)


def verdict(ok):
    return "n/a" if ok is None else ("**yes**" if ok else "**no**")


def summary(res, threads):
    rows = []
    med = res.median

    def ratio_row(target, case, fn, unit):
        t = med(case, "tslab", fn)
        b, bv = best_peer(res, case, fn)
        ok = None if t is None or b is None else t / b <= 1.0
        fig = "n/a" if ok is None else f"tslab {t:.2f} {unit}, best peer {LABEL[bv]} {b:.2f} {unit}: {t / b:.2f}x"
        rows.append((target, fig, verdict(ok)))

    ratio_row("Churn 128 B: ratio to best peer <= 1.0", "churn", lambda r: r["ns_per_pair"], "ns/pair")
    ratio_row("Batch FIFO 10,000: ratio to best peer <= 1.0", "batch", lambda r: r["fifo_ns_per_op"], "ns/op")
    ratio_row("Batch LIFO 10,000: ratio to best peer <= 1.0", "batch", lambda r: r["lifo_ns_per_op"], "ns/op")

    tails = ["p99", "p999", "p9999"]
    t = [med("batch", "tslab", lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p in tails]
    mi = [med("batch", "mimalloc", lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p in tails]
    gl = [med("batch", "glibc", lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p in tails]
    if None in t or None in mi or None in gl:
        rows.append(("Allocation tails p99/p99.9/p99.99 <= mimalloc, well below glibc", "n/a", "n/a"))
    else:
        ok = all(a <= b for a, b in zip(t, mi)) and all(a < b for a, b in zip(t, gl))
        f = lambda xs: "/".join(f"{x:.0f}" for x in xs)  # noqa: E731
        rows.append(("Allocation tails p99/p99.9/p99.99 <= mimalloc, well below glibc",
                     f"tslab {f(t)} ns, mimalloc {f(mi)}, glibc {f(gl)}", verdict(ok)))

    one = med("threads_1", "tslab", lambda r: r["ops_per_s"])
    two = med("threads_2", "tslab", lambda r: r["ops_per_s"])
    if one and two:
        peers = [f"{LABEL[v]} {med('threads_2', v, lambda r: r['ops_per_s']) / med('threads_1', v, lambda r: r['ops_per_s']):.2f}x"
                 for v in res.variants("threads_1") if is_peer(v)
                 and med("threads_2", v, lambda r: r["ops_per_s"]) and med("threads_1", v, lambda r: r["ops_per_s"])]
        rows.append(("Two threads: aggregate >= 1.8x one thread", f"tslab {two / one:.2f}x ({', '.join(peers)})",
                     verdict(two / one >= 1.8)))
    else:
        rows.append(("Two threads: aggregate >= 1.8x one thread", "n/a", "n/a"))

    t = med("prodcons", "tslab", lambda r: r["ops_per_s"])
    m = med("prodcons", "mimalloc", lambda r: r["ops_per_s"])
    rows.append(("Cross-thread free (producer/consumer) >= mimalloc",
                 "n/a" if not (t and m) else f"tslab {t / 1e6:.1f}M/s, mimalloc {m / 1e6:.1f}M/s: {t / m:.2f}x",
                 verdict(None if not (t and m) else t >= m)))

    t0 = med("phase_burst", "tslab", lambda r: r["held_after_ms"]["0"])
    peers = [(med("phase_burst", v, lambda r: r["held_after_ms"]["100"]), v)
             for v in res.variants("phase_burst") if is_peer(v)]
    ptxt = ", ".join(f"{LABEL[v]} {x / MIB:.1f}" for x, v in peers if x is not None)
    rows.append(("Phase burst 64 MiB: <= 4 MiB held once tslab_epoch_close returned",
                 "n/a" if t0 is None else f"tslab {t0 / MIB:.2f} MiB at 0 ms; peers at 100 ms (MiB): {ptxt}",
                 verdict(None if t0 is None else t0 <= 4 * MIB)))

    flat = med("lifemix", "tslab", lambda r: r["rss_final"] / r["rss_at_10pct"])
    peak = med("lifemix", "tslab", lambda r: r["rss_peak"])
    ppeaks = [(med("lifemix", v, lambda r: r["rss_peak"]), v) for v in res.variants("lifemix") if is_peer(v)]
    ppeaks = [p for p in ppeaks if p[0] is not None]
    if flat is None or peak is None or not ppeaks:
        rows.append(("Lifetime-mixed: RSS end/10% <= 1.05 and peak below every peer", "n/a", "n/a"))
    else:
        lo = min(ppeaks)
        rows.append(("Lifetime-mixed: RSS end/10% <= 1.05 and peak below every peer",
                     f"tslab end/10% {flat:.3f}, peak {peak / MIB:.1f} MiB; lowest peer peak "
                     f"{LABEL[lo[1]]} {lo[0] / MIB:.1f} MiB",
                     verdict(flat <= 1.05 and peak < lo[0])))

    pts = [p for p in close_points(res) if p[1] > 0]
    if len(pts) >= 2:
        (_, s0, c0), (_, s1, c1) = pts[0], pts[-1]
        slope = (c1 - c0) / (s1 - s0) if s1 > s0 else None
        rows.append(("epoch_close: linear, about 1 us per released slab",
                     "n/a" if slope is None else f"{slope:.0f} ns per slab (slope {s0:.0f}..{s1:.0f} slabs); "
                     f"{c1 / 1e3:.0f} us for {s1:.0f} slabs",
                     verdict(None if slope is None else slope <= 1000)))
    else:
        rows.append(("epoch_close: linear, about 1 us per released slab", "n/a (no slabs released)", "n/a"))

    md = med("mixed_4k", "tslab", lambda r: tslab_stat(r, "metadata_bytes") / tslab_stat(r, "live_bytes"))
    rows.append(("Metadata under 2% of live bytes (mixed 16 B..4 KiB live set)",
                 "n/a" if md is None else f"{md * 100:.2f}% (metadata_bytes / live_bytes)",
                 verdict(None if md is None else md < 0.02)))

    for case, fn, name in COUNTER_FIGURES:
        on, off = med(case, "tslab", fn), med(case, "tslab-nocounters", fn)
        rows.append((f"Counters on vs off within 2% ({name})",
                     "n/a" if not (on and off) else f"{on:.2f} vs {off:.2f}: {(on / off - 1) * 100:+.1f}%",
                     verdict(None if not (on and off) else on / off <= 1.02)))
    return rows


def write_report(res, outdir):
    meta = res.meta
    threads = sorted({1, 2, meta["threads"]})
    out = ["# temporal-slab comparison benchmark report", ""]
    out.append(f"Run {meta['started']} .. {meta['finished']} ({meta['duration_s']} s), "
               f"{'quick mode, ' if meta['quick'] else ''}{meta['repeats']} repeat(s) per case, "
               "repeats interleaved across allocators. See docs/BENCHMARKS.md for what each workload "
               "does and how to read this report. Raw figures: results.json.")
    out.append("")
    skipped = [(n, a["reason"]) for n, a in meta["allocators"].items() if not a["available"]]
    for n, why in skipped:
        out.append(f"- **{n} skipped**: {why}")
    failed = sum(len(v) for v in res.errors.values())
    if failed:
        out.append(f"- **{failed} run(s) failed**; their cells say why.")
    out.append("")
    out += ["## Summary: DESIGN.md section 5 targets", "",
            "| target | measured (medians, this run) | tslab meets it |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in summary(res, threads)]
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

    section(out, "churn", "Allocate and free one 128 B object in a tight loop.")
    metric_table(res, "churn", [("ns/pair", lambda r: r["ns_per_pair"], True, 1)], out)

    section(out, "batch", "Allocate 10,000 objects of 128 B, then free them in allocation order (FIFO) "
            "or reverse order (LIFO); ns per call (alloc or free). Then every call timed on its own; "
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

    section(out, "mixed", "A live set of 10,000 objects; each step frees a random one and allocates "
            "a replacement of a random size, log-uniform in 16 B..4 KiB (and 16 B..32 KiB). "
            "ns per step (one free and one allocation); RSS at the end.")
    for case, title in [("mixed_4k", "16 B .. 4 KiB"), ("mixed_32k", "16 B .. 32 KiB")]:
        out += [f"**{title}**", ""]
        metric_table(res, case, [("ns/step", lambda r: r["ns_per_op"], True, 1),
                                 ("RSS MiB", lambda r: r["rss_bytes"], True, MIB)], out)

    section(out, "threads", "Each thread allocates 100 objects of 128 B and frees them, repeatedly, "
            "on its own objects. Aggregate calls per second (alloc or free), and the scaling ratio.")
    head = "| allocator | " + " | ".join(f"{t} thread(s) Mops/s median [min, max]" for t in threads) \
        + " | 2T / 1T |"
    out += [head, "|---|" + "---:|" * (len(threads) + 1)]
    for v in res.variants("threads_1"):
        cells = []
        for t in threads:
            vals = res.values(f"threads_{t}", v, lambda r: r["ops_per_s"])
            cells.append("n/a" if not vals else
                         f"{statistics.median(vals) / 1e6:.1f} [{min(vals) / 1e6:.1f}, {max(vals) / 1e6:.1f}]")
        one = res.median("threads_1", v, lambda r: r["ops_per_s"])
        two = res.median("threads_2", v, lambda r: r["ops_per_s"])
        cells.append(f"{two / one:.2f}x" if one and two else "n/a")
        out.append(f"| {LABEL[v]} | " + " | ".join(cells) + " |")
    out += ["", "![throughput against threads](threads.png)", ""]

    section(out, "prodcons", "One thread allocates 128 B objects and passes them through a ring to "
            "a second thread that frees them (every free is cross-thread). Objects per second.")
    metric_table(res, "prodcons", [("Mobjects/s", lambda r: r["ops_per_s"], False, 1e6)], out)

    section(out, "server", "Requests shaped like the seed's workload patterns (seeds/002), run "
            "closed-loop. tslab opens an epoch per request (per 8 requests for 'steady') and closes "
            "it when the request's objects are freed; peers use plain malloc/free, and also a heap "
            "(mimalloc) or arena (jemalloc) per phase. Request latency covers its allocations, "
            "frees and phase end.")
    for p in PATTERNS:
        out += [f"**pattern {p}**", ""]
        metric_table(res, f"server_{p}", [
            ("requests/s", lambda r: r["req_per_s"], False, 1),
            ("p99 latency us", lambda r: r["request_latency_ns"]["p99"], True, 1e3),
            ("p99.9 latency us", lambda r: r["request_latency_ns"]["p999"], True, 1e3),
            ("peak RSS MiB", lambda r: r["rss_peak"], True, MIB),
            ("final RSS MiB", lambda r: r["rss_final"], True, MIB)], out)
    out += ["![RSS over time, server patterns](rss_server.png)", ""]

    section(out, "lifemix", "The drainability experiment of seeds/000: each request allocates 64 "
            "short-lived 128 B objects; one request in 8 also keeps one object alive for the next "
            "10% of the run. tslab routes it to a long-lived epoch (aligned) or into the request's "
            "epoch (mixed). Recycle rate = slabs_recycled_total / slabs_created_total from "
            "tslab_stats_global: the share of slab formats that reused a pooled empty slab instead "
            "of fresh address space. The seed measured 0.28% (mixed) against 66.5% (aligned).")
    metric_table(res, "lifemix", [
        ("requests/s", lambda r: r["req_per_s"], False, 1),
        ("peak RSS MiB", lambda r: r["rss_peak"], True, MIB),
        ("final RSS MiB", lambda r: r["rss_final"], True, MIB),
        ("RSS end / 10% mark", lambda r: r["rss_final"] / r["rss_at_10pct"], True, 1)], out)
    out += ["| tslab routing | recycle rate median [min, max] | slabs created | slabs recycled | "
            "released to the OS, MiB | slabs in use at the end |", "|---|---:|---:|---:|---:|---:|"]
    for v in ["tslab", "tslab-mixed"]:
        vals = res.values("lifemix", v, recycle_rate)
        if vals:
            g = lambda k: res.median("lifemix", v, lambda r: tslab_stat(r, k))  # noqa: E731
            out.append(f"| {LABEL[v]} | {statistics.median(vals) * 100:.2f}% [{min(vals) * 100:.2f}%, "
                       f"{max(vals) * 100:.2f}%] | {g('slabs_created_total'):.0f} | "
                       f"{g('slabs_recycled_total'):.0f} | {g('release_bytes_total') / MIB:.0f} | "
                       f"{g('slabs_in_use'):.0f} |")
    out += ["", "A slab that drains in a closing epoch is released to the OS by the close rather than "
            "kept in the pool, so its next use counts as a new format, not as a recycle. Where the "
            "recycle rate is near zero for both routings, the drainability contrast shows in the "
            "slabs still in use at the end (the seed's net slabs: ~2K aligned against ~493K mixed) "
            "and in RSS."]
    out += ["", "![RSS over time, lifetime-mixed run](rss_lifemix.png)", ""]

    section(out, "phase_burst", "One phase allocates 64 MiB of 128 B objects, frees them all and "
            "ends (tslab_epoch_close, mi_heap_destroy, jemalloc tcache flush + arena reset, or "
            "nothing for plain malloc). RSS held above the starting RSS is sampled 0, 10, 100 and "
            "1000 ms after the phase end returned.")
    metric_table(res, "phase_burst", [("peak MiB", lambda r: r["rss_peak"] - r["rss_base"], True, MIB)]
                 + [(f"held at {d} ms MiB", lambda r, d=d: r["held_after_ms"][d], True, MIB)
                    for d in BURST_DELAYS]
                 + [("phase end us", lambda r: r["phase_end_ns"], True, 1e3)], out)
    out += ["![phase burst](phase_burst.png)", ""]

    section(out, "close_cost", "An epoch fills N slabs of the 128 B class, frees every object, and "
            "is closed; the close is timed alone (medians of all runs).")
    out += ["| slabs filled | slabs released | close us | ns per released slab |", "|---:|---:|---:|---:|"]
    for filled, rel, ns in close_points(res):
        out.append(f"| {filled} | {rel:.0f} | {ns / 1e3:.1f} | {ns / rel if rel else float('nan'):.0f} |")
    if not close_points(res):
        errs = res.errors.get(("close_cost", "tslab"), ["no result"])
        out.append(f"| failed: {errs[0][:100]} | | | |")
    out += ["", "![epoch close cost](close_cost.png)", ""]

    section(out, "counters", "tslab with its statistics counters (the default) against the same "
            "library built with TSLAB_COUNTERS=0. Target: within 2%.")
    out += ["| figure | counters on, median [min, max] | counters off, median [min, max] | on / off |",
            "|---|---:|---:|---:|"]
    for case, fn, name in COUNTER_FIGURES:
        cells = []
        for v in ["tslab", "tslab-nocounters"]:
            vals = res.values(case, v, fn)
            cells.append(f"{statistics.median(vals):.2f} [{min(vals):.2f}, {max(vals):.2f}]" if vals else "n/a")
        on, off = res.median(case, "tslab", fn), res.median(case, "tslab-nocounters", fn)
        out.append(f"| {name} | {cells[0]} | {cells[1]} | " + (f"{on / off:.3f}" if on and off else "n/a") + " |")
    out.append("")

    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/report"
    res = Results(os.path.join(outdir, "results.json"))
    threads = sorted({1, 2, res.meta["threads"]})
    plot_latency(res, outdir)
    plot_threads(res, outdir, threads)
    plot_rss(res, outdir)
    plot_burst(res, outdir)
    plot_close(res, outdir)
    write_report(res, outdir)
    print(f"report: {os.path.join(outdir, 'report.md')}")


if __name__ == "__main__":
    main()
