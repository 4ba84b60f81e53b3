#!/usr/bin/env python3
"""Checks exporter output against docs/METRICS.md.

Usage: check_export.py METRICS.md EXPORT.json EXPORT.prom

The two exports must come from the same quiescent instance (test_export
writes them). Checks: the JSON is strict UTF-8 JSON and valid under the JSON
Schema in the doc; the fields of every JSON table in the doc are exactly the
fields exported; the Prometheus families emitted are exactly the documented
ones, with the documented type, one HELP and one TYPE line each and their
samples grouped under them; every value that has a single JSON field in the
doc equals that field; tslab_config_info names the policies of the JSON
config; the families test_export's workload must make non-zero are; and
`promtool check metrics` accepts the text when promtool is installed.
"""
import json
import re
import shutil
import subprocess
import sys

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, file=sys.stderr)


# ----------------------------------------------------------------------------
# The document

def parse_doc(text):
    prom = {}    # family -> (type, json column)
    tables = {}  # JSON section -> list of field names
    schema = None
    part = None
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            part = line[3:].strip()
            section = None
        elif line.startswith("### ") and part == "JSON":
            m = re.match(r"### `([a-z]+)(\[\])?`", line)
            section = m.group(1) if m else ("top" if "Top level" in line else None)
        elif line.startswith("| `") and part == "Prometheus metrics":
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            name = cells[0].strip("`")
            if name.startswith("tslab_"):
                if name in prom:
                    fail("doc lists %s twice" % name)
                prom[name] = (cells[1], cells[4])
        elif line.startswith("| `") and part == "JSON" and section:
            tables.setdefault(section, []).append(line.split("|")[1].strip().strip("`"))
    m = re.search(r"### JSON Schema.*?```json\n(.*?)```", text, re.S)
    if m:
        schema = json.loads(m.group(1))
    return prom, tables, schema


# ----------------------------------------------------------------------------
# A JSON Schema validator for the keywords the doc uses

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}
KNOWN = {"$schema", "title", "type", "required", "properties", "additionalProperties",
         "items", "const", "enum", "minimum"}


def validate(value, schema, path):
    unknown = set(schema) - KNOWN
    if unknown:
        fail("schema at %s uses unsupported keywords %s" % (path, sorted(unknown)))
    if "type" in schema and not TYPES[schema["type"]](value):
        fail("%s: expected %s, got %r" % (path, schema["type"], value))
        return
    if "const" in schema and value != schema["const"]:
        fail("%s: expected %r, got %r" % (path, schema["const"], value))
    if "enum" in schema and value not in schema["enum"]:
        fail("%s: %r not in %r" % (path, value, schema["enum"]))
    if "minimum" in schema and TYPES["integer"](value) and value < schema["minimum"]:
        fail("%s: %r below %r" % (path, value, schema["minimum"]))
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                fail("%s: missing %s" % (path, key))
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            if key in props:
                validate(v, props[key], path + "." + key)
            elif extra is False:
                fail("%s: unexpected field %s" % (path, key))
            elif isinstance(extra, dict):
                validate(v, extra, path + "." + key)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            validate(v, schema["items"], "%s[%d]" % (path, i))


# ----------------------------------------------------------------------------
# The Prometheus text

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"(,|$)')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse_labels(text):
    labels = {}
    pos = 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            fail("bad label set {%s}" % text)
            return labels
        labels[m.group(1)] = unescape(m.group(2))
        pos = m.end()
    return labels


def parse_prom(text):
    families = {}  # name -> {"type", "help", "samples": [(labels, value)]}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], line.split(" ")[2], line.split(" ", 3)[3]
            fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
            if fam[kind.lower()] is not None:
                fail("%s: second %s line" % (name, kind))
            if fam["samples"]:
                fail("%s: %s after its samples" % (name, kind))
            fam[kind.lower()] = rest
            current = name
            continue
        m = SAMPLE.match(line)
        if not m:
            fail("unparsable line: %r" % line)
            continue
        name = m.group(1)
        if name != current:
            fail("%s: sample outside its family's block" % name)
            continue
        families[name]["samples"].append((parse_labels(m.group(3) or ""), m.group(4)))
    for name, fam in families.items():
        if fam["type"] is None or fam["help"] is None:
            fail("%s: HELP or TYPE missing" % name)
        if fam["type"] == "counter" and not name.endswith("_total"):
            fail("%s: counter without _total" % name)
        if not name.startswith("tslab_"):
            fail("%s: not tslab_-prefixed" % name)
    return families


# ----------------------------------------------------------------------------
# Cross-checks

ITEM_KEYS = {  # JSON array -> (Prometheus label, JSON field identifying an item)
    "classes": ("class", "object_size"),
    "epochs": ("epoch", "era"),
    "labels": ("label", "label"),
    "leaks": ("epoch", "era"),
}
# Values that change between the two export calls even on a quiescent instance.
VOLATILE = {"global.rss_bytes", "epochs[].age_ns", "leaks[].age_ns"}
# Families that test_export's workload makes non-zero (in at least one
# sample), so that a family stuck at 0 in both formats does not pass the
# cross-check: blocks bumped, drained into the hot reserve and reused; a
# free-all close ending live objects; a close trimming a block kept by a
# live object; a timed close.
NONZERO = ["tslab_blocks_in_use", "tslab_blocks_created_total", "tslab_blocks_reused_total",
           "tslab_hot_reserve_bytes", "tslab_objects_ended_total", "tslab_epochs_freed_all_total",
           "tslab_epoch_released_at_close_bytes", "tslab_epoch_close_duration_seconds",
           "tslab_config_pool_resident_max_bytes", "tslab_config_thread_reserve_max_bytes",
           "tslab_config_block_budget_bytes"]


def as_prom_value(json_value, name):
    if "_seconds" in name:
        return json_value / 1e9
    return float(json_value)


def cross_check(doc_prom, families, data):
    for name, (typ, column) in doc_prom.items():
        fam = families.get(name)
        if fam is None:
            continue
        if fam["type"] != typ:
            fail("%s: emitted as %s, documented as %s" % (name, fam["type"], typ))
        m = re.fullmatch(r"`([a-z_]+)(\[\])?(?:\.([a-z_]+))?`", column)
        if not m or m.group(0).strip("`") in VOLATILE:
            continue
        section, is_array, field = m.group(1), m.group(2), m.group(3)
        for labels, value in fam["samples"]:
            if is_array:
                label, key = ITEM_KEYS[section]
                items = [it for it in data[section] if str(it[key]) == labels.get(label)]
                if len(items) != 1:
                    fail("%s%s: no single %s item" % (name, labels, section))
                    continue
                expected = items[0][field]
            else:
                expected = data[section][field] if field else data[section]
            want = as_prom_value(expected, name)
            if abs(float(value) - want) > 1e-9 * max(1.0, abs(want)):
                fail("%s%s = %s, JSON %s says %r" % (name, labels, value, column, expected))


def main():
    doc_path, json_path, prom_path = sys.argv[1:4]
    with open(doc_path, encoding="utf-8") as f:
        doc_prom, tables, schema = parse_doc(f.read())
    with open(json_path, "rb") as f:
        data = json.loads(f.read().decode("utf-8", errors="strict"))
    with open(prom_path, "rb") as f:
        prom_text = f.read().decode("utf-8", errors="strict")

    if schema is None:
        fail("no JSON Schema in the doc")
    else:
        validate(data, schema, "$")

    exported = {"top": list(data), "global": list(data["global"]),
                "sampling": list(data["sampling"]), "config": list(data.get("config", {}))}
    for section in ITEM_KEYS:
        if not data[section]:
            fail("%s is empty: the test workload must produce at least one" % section)
            continue
        exported[section] = list(data[section][0])
    for section, fields in exported.items():
        if tables.get(section) != fields:
            fail("doc table %s lists %s, export has %s" % (section, tables.get(section), fields))

    families = parse_prom(prom_text)
    for name in sorted(set(families) - set(doc_prom)):
        fail("%s is emitted but not documented" % name)
    for name in sorted(set(doc_prom) - set(families)):
        fail("%s is documented but not emitted" % name)
    cross_check(doc_prom, families, data)
    if float(families["tslab_leak_epochs"]["samples"][0][1]) != len(data["leaks"]):
        fail("tslab_leak_epochs disagrees with the length of leaks")
    info = families.get("tslab_config_info", {"samples": []})["samples"]
    config = data.get("config", {})
    want = {"release_policy": config.get("release_policy"),
            "advance_policy": config.get("advance_policy")}
    if len(info) != 1 or info[0][0] != want or float(info[0][1]) != 1:
        fail("tslab_config_info is %r, JSON config says %r" % (info, want))
    for name in NONZERO:
        fam = families.get(name)
        if fam is not None and not any(float(v) > 0 for _, v in fam["samples"]):
            fail("%s is 0 in every sample: the test workload must make it non-zero" % name)

    promtool = shutil.which("promtool")
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=prom_text.encode(),
                           capture_output=True)
        if r.returncode != 0:
            fail("promtool check metrics: %s%s" % (r.stdout.decode(), r.stderr.decode()))
        else:
            print("promtool check metrics: ok")
    else:
        print("SKIP promtool check: promtool is not installed "
              "(scripts/install-deps.sh prometheus installs it)")

    print("%d families, %d JSON sections checked" % (len(families), len(exported)))
    if failures:
        print("FAILED: %d problem(s)" % len(failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
