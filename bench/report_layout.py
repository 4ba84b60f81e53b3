"""What a complete report contains: shared by report.py and check_report.py."""

# The sections of report.md, in order; bench/check_report.py requires each.
SECTIONS = {
    "churn": "1. Churn",
    "batch": "2. Batch alloc-then-free",
    "mixed": "3. Mixed sizes",
    "threads": "4. Threads",
    "prodcons": "5. Producer/consumer",
    "server": "6. Request server simulation",
    "lifemix": "7. Lifetime-mixed memory run",
    "phase_burst": "7b. Phase burst",
    "close_cost": "8. Epoch close cost",
    "counters": "9. Observability overhead",
    "untouched": "10. Untouched objects",
}
# Sections fed by other programs' results, shown only when those ran.
OPTIONAL_SECTIONS = {
    "pools": "11. C++ pools",
    "real_programs": "12. Real programs",
}
# The untouched copy of a case (objects get one or two stores and are not
# read back, as in reports made before objects were touched) has this suffix.
UNTOUCHED = "_untouched"
PATTERNS = ["tiny", "burst", "steady", "leak", "hotspot", "kernel"]

# The summary table: one row per target of DESIGN.md section 5 and issues 11
# and 12, keyed for report.py, labelled as report.md shows them (the first
# cell of the row). check_report.py requires every row, with a figure that
# parses unless the row is optional (fed by another program's results).
SUMMARY_ROWS = [
    ("churn", "Churn 128 B: ns/pair <= best peer"),
    ("batch_fifo", "Batch FIFO: ns/op <= best peer"),
    ("batch_lifo", "Batch LIFO: ns/op <= best peer"),
    ("mixed_4k", "Mixed 16 B..4 KiB: ns/step <= best peer"),
    ("mixed_32k", "Mixed 16 B..32 KiB: ns/step <= best peer"),
    ("tails", "Allocation tails: p99 and p99.9 <= glibc's, p99.99 below every peer's"),
    ("threads_once", "Two threads created once: aggregate >= 1.9x one thread"),
    ("threads_window", "Two threads created per window, pinned: aggregate >= 1.9x one thread"),
    ("prodcons", "Cross-thread free (producer/consumer) >= mimalloc"),
] + [(f"server_{p}", f"Server '{p}': req/s >= best plain peer, p99 no worse") for p in PATTERNS] \
  + [(f"server_{p}_freeall", f"Server '{p}', free-all: req/s >= 2x best plain peer") for p in PATTERNS] + [
    ("request_close", "Close of a one-thread request epoch: < 1 us median, 0 release calls"),
    ("close_slope", "epoch_close of big epochs: about 1 us per released slab"),
    ("lifemix_speed", "Lifetime-mixed run: req/s >= best peer"),
    ("lifemix_peak", "Lifetime-mixed run: peak RSS below every peer's"),
    ("lifemix_flat", "Lifetime-mixed run: RSS end / 10% mark <= 1.05"),
    ("burst_held", "Phase burst: <= 4 MiB held once the close returned"),
    ("burst_alloc", "Phase burst: allocation <= 1.5x glibc per object"),
    ("metadata", "Metadata: under 2% of live bytes"),
    ("counters", "Observability: counters on/off within 2%"),
    ("real_programs", "Drop-in on real programs: time <= 1.1x best peer, peak RSS <= 1.1x lowest"),
]
OPTIONAL_SUMMARY_ROWS = {"real_programs"}
VERDICTS = ("**met**", "**not met**", "n/a")

PLOTS = ["latency_percentiles.png", "threads.png", "rss_lifemix.png", "rss_server.png",
         "phase_burst.png", "close_cost.png"]
