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
    "counters": "Observability overhead",
}
PLOTS = ["latency_percentiles.png", "threads.png", "rss_lifemix.png", "rss_server.png",
         "phase_burst.png", "close_cost.png"]
