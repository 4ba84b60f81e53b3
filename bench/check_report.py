#!/usr/bin/env python3
"""Check that a benchmark report is complete and well-formed.

Usage: check_report.py DIR
Checks the structure, never the numbers: results.json parses and holds every
workload case for every available allocator (skipped allocators must carry
a reason); report.md has every section, a table in each, and the summary
table has every target's row, with a figure that parses as a number (a
target fed by another program's results may say n/a) and a verdict; every
plot exists and is a non-empty PNG. Exits 1 listing every problem found.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_layout import (OPTIONAL_SUMMARY_ROWS, PLOTS, SECTIONS, SUMMARY_ROWS,  # noqa: E402
                           VERDICTS)
from run_suite import ALLOCATORS, OPTIONAL_CASES, VARIANTS, cases  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?[kMx]?\b")


def table_rows(md, heading):
    """The cells of each row of the first table after heading."""
    at = md.find("\n" + heading)
    if at < 0:
        return None
    body = md[at + 1:].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    return rows[1:]  # without the header


def check_summary(md):
    problems = []
    rows = table_rows(md, "## Summary")
    if rows is None:
        return ["report.md: section '## Summary' missing"]
    by_label = {r[0]: r for r in rows}
    for key, label in SUMMARY_ROWS:
        r = by_label.get(label)
        if r is None:
            problems.append(f"report.md: summary row '{label}' missing")
        elif len(r) != 4:
            problems.append(f"report.md: summary row '{label}' has {len(r)} cells, not 4")
        else:
            if key not in OPTIONAL_SUMMARY_ROWS and not NUMBER.match(r[1]):
                problems.append(f"report.md: summary row '{label}': no figure ({r[1][:60]})")
            if r[3] not in VERDICTS:
                problems.append(f"report.md: summary row '{label}': verdict '{r[3]}' is none of {VERDICTS}")
    return problems


def check(outdir):
    problems = []
    try:
        with open(os.path.join(outdir, "results.json")) as f:
            doc = json.load(f)
        meta, runs = doc["meta"], doc["runs"]
    except (OSError, ValueError, KeyError) as e:
        return [f"results.json unreadable: {e}"]

    allocs = meta.get("allocators", {})
    for name in ALLOCATORS:
        a = allocs.get(name)
        if a is None:
            problems.append(f"results.json: allocator {name} missing")
        elif name == "tslab" and not a.get("available"):
            problems.append(f"results.json: tslab itself did not run: {a.get('reason')}")
        elif not a.get("available") and not a.get("reason"):
            problems.append(f"results.json: {name} unavailable without a reason")

    seen = {(r.get("case"), r.get("variant")) for r in runs if r.get("ok")}
    for cid, wl, variants, _ in cases(meta.get("quick", False), meta.get("threads", 2)):
        if cid in OPTIONAL_CASES:
            continue
        for v in variants:
            if allocs.get(v.split("-")[0], {}).get("available") and (cid, v) not in seen:
                problems.append(f"results.json: no successful run of {cid} for {v}")
    for r in runs:
        if r.get("variant") not in VARIANTS:
            problems.append(f"results.json: unknown variant {r.get('variant')}")
        if r.get("ok") and not isinstance(r.get("result"), dict):
            problems.append(f"results.json: {r.get('case')}/{r.get('variant')} has no result object")

    try:
        with open(os.path.join(outdir, "report.md")) as f:
            md = f.read()
    except OSError as e:
        return problems + [f"report.md unreadable: {e}"]
    for heading in ["## Machine"] + [f"## {s}" for s in SECTIONS.values()]:
        at = md.find("\n" + heading)
        if at < 0:
            problems.append(f"report.md: section '{heading}' missing")
        elif "\n|---" not in md[at + 1:].split("\n## ", 1)[0]:
            if heading != "## Machine":
                problems.append(f"report.md: section '{heading}' has no table")
    problems += check_summary(md)
    for png in PLOTS:
        path = os.path.join(outdir, png)
        try:
            with open(path, "rb") as f:
                head = f.read(8)
            if head != PNG_MAGIC or os.path.getsize(path) < 1000:
                problems.append(f"{png}: not a PNG or nearly empty")
        except OSError:
            problems.append(f"{png}: missing")
        if f"({png})" not in md:
            problems.append(f"report.md: {png} not linked")
    return problems


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/report"
    problems = check(outdir)
    for p in problems:
        print(f"check_report: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check_report: {outdir} is complete")


if __name__ == "__main__":
    main()
