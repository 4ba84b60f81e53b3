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
# tslab's default mode (strict close: the library's default release policy)
# is plain "tslab"; its other modes are named like the peers' modes.
LABEL = {
    "tslab": "tslab", "tslab-pooled": "tslab, pooled close",
    "tslab-mixed": "tslab, mixed routing", "tslab-pooled-mixed": "tslab, pooled close, mixed routing",
    "glibc": "glibc", "jemalloc": "jemalloc",
    "jemalloc-arena": "jemalloc, arena per phase", "mimalloc": "mimalloc",
    "mimalloc-heap": "mimalloc, heap per phase", "tcmalloc": "tcmalloc",
}
ORDER = list(LABEL)
PATTERNS = ["burst", "steady", "leak", "hotspot", "kernel"]
BURST_DELAYS = ["0", "10", "100", "1000"]
# bench_fastpath_cost's figures: (key, name).
COUNTER_FIGURES = [("churn", "churn ns/pair"), ("batch_fifo", "batch FIFO ns/op"),
                   ("batch_lifo", "batch LIFO ns/op"), ("batch_random", "batch, random frees, ns/op")]


def fastpath(res, fig, key):
    """Median over repeats of one number of bench_fastpath_cost's figure."""
    return res.median("fastpath_cost", "tslab", lambda r: r["figures"][fig][key])


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
    finish(fig, ax, outdir, "phase_burst.png")


CLOSE_VARIANTS = ["tslab", "tslab-pooled"]


def close_points(res, variant="tslab"):
    """[(slabs_filled, median slabs released, median close ns, median empty slabs kept)]
    over all runs of one variant."""
    pts = {}
    for r in res.ok.get(("close_cost", variant), []):
        for p in r["points"]:
            d = pts.setdefault(p["slabs_filled"], ([], [], []))
            for run in p["runs"]:
                d[0].append(run["slabs_released"])
                d[1].append(run["close_ns"])
                d[2].append(run.get("slabs_empty_after", 0))
    return [(k, statistics.median(v[0]), statistics.median(v[1]), statistics.median(v[2]))
            for k, v in sorted(pts.items())]


def plot_close(res, outdir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = []
    for v in CLOSE_VARIANTS:
        pts = close_points(res, v)
        if pts:
            ax.plot([p[0] for p in pts], [p[2] / 1e3 for p in pts], marker="o", label=LABEL[v])
            xs = [p[0] for p in pts]
    if xs:
        ax.plot(xs, xs, ls="--", color="grey", label="1 us per slab filled")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("slabs the epoch filled (all emptied before the close)")
    ax.set_ylabel("tslab_epoch_close time, us")
    ax.set_title("Epoch close cost against the epoch's slabs")
    finish(fig, ax, outdir, "close_cost.png")


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
    """One row per DESIGN.md section 5 target: (target, tslab's figure, the
    peer figure it is compared with, verdict). Verdicts are for tslab's
    default (strict close) mode; pooled-close figures are given beside it."""
    rows = []
    med = res.median

    def ratio_row(target, case, fn, unit):
        t = med(case, "tslab", fn)
        b, bv = best_peer(res, case, fn)
        ok = None if t is None or b is None else t / b <= 1.0
        rows.append((target, "n/a" if t is None else f"{t:.2f} {unit}",
                     "n/a" if b is None else f"best peer {LABEL[bv]} {b:.2f} {unit}"
                     + ("" if t is None else f" (tslab {t / b:.2f}x)"),
                     verdict(ok)))

    ratio_row("Churn 128 B: ns/pair <= best peer (ratio <= 1.0)", "churn", lambda r: r["ns_per_pair"], "ns/pair")
    ratio_row("Batch FIFO 10,000: ns/op <= best peer", "batch", lambda r: r["fifo_ns_per_op"], "ns/op")
    ratio_row("Batch LIFO 10,000: ns/op <= best peer", "batch", lambda r: r["lifo_ns_per_op"], "ns/op")

    tails = ["p99", "p999", "p9999"]
    tail = lambda v: [med("batch", v, lambda r, p=p: pct_of(r, "alloc_latency_ns", p)) for p in tails]  # noqa: E731
    t, mi, gl = tail("tslab"), tail("mimalloc"), tail("glibc")
    f = lambda xs: "/".join(fmt(x, 0) for x in xs)  # noqa: E731
    target = "Allocation tails p99/p99.9/p99.99 <= mimalloc, well (strictly) below glibc"
    if None in t or None in mi or None in gl:
        rows.append((target, f"{f(t)} ns", f"mimalloc {f(mi)} ns, glibc {f(gl)} ns", "n/a"))
    else:
        ok = all(a <= b for a, b in zip(t, mi)) and all(a < b for a, b in zip(t, gl))
        rows.append((target, f"{f(t)} ns", f"mimalloc {f(mi)} ns, glibc {f(gl)} ns", verdict(ok)))

    ops = lambda case, v: med(case, v, lambda r: r["ops_per_s"])  # noqa: E731
    one, two = ops("threads_1", "tslab"), ops("threads_2", "tslab")
    peers = [f"{LABEL[v]} {ops('threads_2', v) / ops('threads_1', v):.2f}x"
             for v in res.variants("threads_1") if is_peer(v) and ops("threads_2", v) and ops("threads_1", v)]
    rows.append(("Two threads: aggregate >= 1.8x one thread",
                 f"{two / one:.2f}x ({two / 1e6:.1f} / {one / 1e6:.1f} Mops/s)" if one and two else "n/a",
                 "peers " + (", ".join(peers) or "n/a"),
                 verdict(two / one >= 1.8 if one and two else None)))

    t, m = ops("prodcons", "tslab"), ops("prodcons", "mimalloc")
    rows.append(("Cross-thread free (producer/consumer) >= mimalloc",
                 "n/a" if not t else f"{t / 1e6:.1f}M objects/s",
                 "n/a" if not m else f"mimalloc {m / 1e6:.1f}M/s" + (f" (tslab {t / m:.2f}x)" if t else ""),
                 verdict(None if not (t and m) else t >= m)))

    held = lambda v, d: med("phase_burst", v, lambda r: r["held_after_ms"][d])  # noqa: E731
    t0, p0 = held("tslab", "0"), held("tslab-pooled", "0")
    peers = [(held(v, "100"), v) for v in res.variants("phase_burst") if is_peer(v)]
    ptxt = ", ".join(f"{LABEL[v]} {x / MIB:.1f}" for x, v in peers if x is not None)
    rows.append(("Phase burst 64 MiB: <= 4 MiB held once tslab_epoch_close returned",
                 "n/a" if t0 is None else f"{t0 / MIB:.2f} MiB at 0 ms"
                 + ("" if p0 is None else f" (pooled close: {p0 / MIB:.2f} MiB)"),
                 f"peers at 100 ms, MiB: {ptxt or 'n/a'}",
                 verdict(None if t0 is None else t0 <= 4 * MIB)))

    flat_fn = lambda r: r["rss_final"] / r["rss_at_10pct"]  # noqa: E731
    flat, peak = med("lifemix", "tslab", flat_fn), med("lifemix", "tslab", lambda r: r["rss_peak"])
    pflat, ppeak = med("lifemix", "tslab-pooled", flat_fn), med("lifemix", "tslab-pooled", lambda r: r["rss_peak"])
    ppeaks = [(med("lifemix", v, lambda r: r["rss_peak"]), v) for v in res.variants("lifemix") if is_peer(v)]
    ppeaks = [p for p in ppeaks if p[0] is not None]
    target = "Lifetime-mixed run: RSS end/10% <= 1.05 and peak RSS below every peer's"
    if flat is None or peak is None or not ppeaks:
        rows.append((target, "n/a", "n/a", "n/a"))
    else:
        lo = min(ppeaks)
        lo_flat = med("lifemix", lo[1], flat_fn)
        rows.append((target, f"end/10% {flat:.3f}, peak {peak / MIB:.1f} MiB"
                     + ("" if pflat is None or ppeak is None else
                        f" (pooled close: {pflat:.3f}, {ppeak / MIB:.1f} MiB)"),
                     f"lowest peer peak {LABEL[lo[1]]} {lo[0] / MIB:.1f} MiB (its end/10% "
                     f"{'n/a' if lo_flat is None else f'{lo_flat:.3f}'})",
                     verdict(flat <= 1.05 and peak < lo[0])))

    end_us = lambda v: med("phase_burst", v, lambda r: r["phase_end_ns"])  # noqa: E731
    pe = [(end_us(v), v) for v in ["mimalloc-heap", "jemalloc-arena"] if v in res.variants("phase_burst")]
    pe_txt = ", ".join(f"{LABEL[v]} {x / 1e3:.0f} us" for x, v in pe if x is not None)
    tb = end_us("tslab")
    peer_txt = ("no peer has a per-slab close; 64 MiB phase end (phase burst): "
                f"tslab {'n/a' if tb is None else f'{tb / 1e3:.0f} us'}" + (f", {pe_txt}" if pe_txt else ""))
    pts = [p for p in close_points(res) if p[1] > 0]
    target = "epoch_close: cost linear in the epoch's slabs, about 1 us per released slab"
    if len(pts) >= 2:
        (_, s0, c0, _), (_, s1, c1, _) = pts[0], pts[-1]
        slope = (c1 - c0) / (s1 - s0) if s1 > s0 else None
        rows.append((target, "n/a" if slope is None else f"{slope:.0f} ns per slab (slope {s0:.0f}..{s1:.0f} "
                     f"slabs); {c1 / 1e3:.0f} us for {s1:.0f} slabs",
                     peer_txt, verdict(None if slope is None else slope <= 1000)))
    else:
        rows.append((target, "n/a (no slabs released)", peer_txt, "n/a"))

    md = med("mixed_4k", "tslab", lambda r: tslab_stat(r, "metadata_bytes") / tslab_stat(r, "live_bytes"))
    rss = med("mixed_4k", "tslab", lambda r: r["rss_bytes"])
    b, bv = best_peer(res, "mixed_4k", lambda r: r["rss_bytes"])
    rows.append(("Metadata: no per-object header, under 2% of live bytes (mixed 16 B..4 KiB live set)",
                 "n/a" if md is None else f"{md * 100:.2f}% (metadata_bytes / live_bytes)"
                 + ("" if rss is None else f"; RSS {rss / MIB:.1f} MiB"),
                 "peers expose no metadata count; RSS of the same live set: "
                 + ("n/a" if b is None else f"lowest peer {LABEL[bv]} {b / MIB:.1f} MiB"),
                 verdict(None if md is None else md < 0.02)))
    return rows


def counter_rows(res):
    """Always-on counters (DESIGN.md principle 7): tslab against itself."""
    rows = []
    for fig, name in COUNTER_FIGURES:
        on, ratio = fastpath(res, fig, "ns_counters_on"), fastpath(res, fig, "on_off_ratio")
        control = fastpath(res, fig, "control_ratio")
        rows.append((f"Counters on vs off within 2% ({name})",
                     "n/a" if on is None else f"{on:.2f}",
                     "n/a" if ratio is None else f"counters off: on/off {ratio:.3f} ({(ratio - 1) * 100:+.1f}%); "
                     f"two copies of one build: {control:.3f}",
                     verdict(None if ratio is None else ratio <= 1.02)))
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
    fc, fc_runs = forced_closes(res)
    out.append(f"- tslab forced epoch closes: {fc} over {fc_runs} tslab runs (default ring of 16 slots, "
               "advance policy skipping open eras; the long-lived epoch is never closed under the workloads)."
               if fc == 0 else
               f"- **tslab forced epoch closes: {fc}** over {fc_runs} tslab runs: the long-lived epoch or a "
               "phase was closed by an advance; see epochs_forced_close_total in results.json.")
    out.append("")
    out += ["## Summary: DESIGN.md section 5 targets", "",
            "Every target of DESIGN.md section 5, measured in this run (medians of repeats). Verdicts are "
            "for tslab in its default mode (strict close); the pooled-close mode is given in parentheses "
            "where it applies.", "",
            "| target | tslab, measured | compared with | tslab meets it |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in summary(res, threads)]
    out += ["", "Not a section 5 target, but DESIGN.md principle 7 (counters always on):", "",
            "| check | tslab, counters on | compared with | met |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in counter_rows(res)]
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
            "it when the request's objects are freed, with its default release policy (the close "
            "returns the epoch's empty slabs to the OS: \"tslab\") and with TSLAB_RELEASE_POOLED (the "
            "close hands them to the pool, which keeps up to pool_resident_max = 4 MiB resident: "
            "\"tslab, pooled close\"); peers use plain malloc/free, and also a heap (mimalloc) or "
            "arena (jemalloc) per phase. Request latency covers its allocations, frees and phase end.")
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
            "short-lived 128 B objects in its own epoch; one request in 8 also keeps one object alive "
            "for the next 10% of the run. tslab routes it to a long-lived epoch (aligned) or into the "
            "request's epoch (mixed), each with both release policies.")
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
    for v in ["tslab", "tslab-mixed", "tslab-pooled", "tslab-pooled-mixed"]:
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

    section(out, "phase_burst", "One phase allocates 64 MiB of 128 B objects, frees them all and "
            "ends (tslab_epoch_close, mi_heap_destroy, jemalloc tcache flush + arena reset, or "
            "nothing for plain malloc). With pooled close, tslab keeps up to pool_resident_max "
            "(4 MiB) of the empty slabs resident. RSS held above the starting RSS is sampled 0, 10, 100 and "
            "1000 ms after the phase end returned.")
    metric_table(res, "phase_burst", [("peak MiB", lambda r: r["rss_peak"] - r["rss_base"], True, MIB)]
                 + [(f"held at {d} ms MiB", lambda r, d=d: r["held_after_ms"][d], True, MIB)
                    for d in BURST_DELAYS]
                 + [("phase end us", lambda r: r["phase_end_ns"], True, 1e3)], out)
    out += ["![phase burst](phase_burst.png)", ""]

    section(out, "close_cost", "An epoch fills N slabs of the 128 B class, frees every object, and "
            "is closed; the close is timed alone (medians of all runs). Slabs released: by the close "
            "itself (released_at_close_bytes); the frees already released what the pool could not "
            "keep. Empty slabs kept: the pool's resident empty slabs after the close. With the "
            "default policy the close releases the epoch's pooled slabs; with pooled close it keeps "
            "them (up to pool_resident_max).")
    cp = {v: {p[0]: p for p in close_points(res, v)} for v in CLOSE_VARIANTS}
    filled = sorted(set(cp["tslab"]) | set(cp["tslab-pooled"]))
    out += ["| slabs filled | tslab: slabs released | close us | ns per released slab | empty slabs kept "
            "| pooled close: slabs released | close us | empty slabs kept |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in filled:
        t, p = cp["tslab"].get(n), cp["tslab-pooled"].get(n)
        row = f"| {n} |"
        row += (f" {t[1]:.0f} | {t[2] / 1e3:.1f} | {t[2] / t[1] if t[1] else float('nan'):.0f} | {t[3]:.0f} |"
                if t else " n/a | | | |")
        row += f" {p[1]:.0f} | {p[2] / 1e3:.1f} | {p[3]:.0f} |" if p else " n/a | | |"
        out.append(row)
    for v in CLOSE_VARIANTS:
        if not cp[v]:
            errs = res.errors.get(("close_cost", v), ["no result"])
            out.append(f"| {LABEL[v]} failed: {errs[0][:100]} | | | | | | | |")
    out += ["", "![epoch close cost](close_cost.png)", ""]

    section(out, "counters", "tslab with its statistics counters (the shipped library) against the same "
            "sources built with TSLAB_COUNTERS=0 and glibc malloc, taking turns in one process "
            "(bench_fastpath_cost: short blocks in rotated order, ratios per round, each tslab build over "
            "8 instance placements). The A/A column compares two copies of the shipped library the same "
            "way: how far identical code differs in this measurement. Each cell is the median over repeats "
            "of a run's median; brackets hold the median over repeats of each run's 95% confidence interval "
            "bounds. Target: on/off within 2%.")
    out += ["| figure | counters on, ns | counters off, ns | on / off [CI] | A/A control [CI] | glibc, ns "
            "| tslab / glibc |", "|---|---:|---:|---:|---:|---:|---:|"]
    for fig, name in COUNTER_FIGURES:
        g = {k: fastpath(res, fig, k) for k in ["ns_counters_on", "ns_counters_off", "ns_glibc", "on_off_ratio",
                                                "on_off_ratio_lo", "on_off_ratio_hi", "control_ratio",
                                                "control_ratio_lo", "control_ratio_hi", "glibc_ratio"]}
        if g["on_off_ratio"] is None:
            errs = res.errors.get(("fastpath_cost", "tslab"), ["no result"])
            out.append(f"| {name} | failed: {errs[0][:100]} | | | | | |")
            continue
        out.append(f"| {name} | {g['ns_counters_on']:.2f} | {g['ns_counters_off']:.2f} "
                   f"| {g['on_off_ratio']:.3f} [{g['on_off_ratio_lo']:.3f}, {g['on_off_ratio_hi']:.3f}] "
                   f"| {g['control_ratio']:.3f} [{g['control_ratio_lo']:.3f}, {g['control_ratio_hi']:.3f}] "
                   f"| {g['ns_glibc']:.2f} | {g['glibc_ratio']:.3f} |")
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
