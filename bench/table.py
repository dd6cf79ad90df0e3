"""The one table of bench/table.sh, from the results its parts left under its state dir.

    python3 bench/table.py STATE_DIR

Routes come from bench/run.sh's result files (the ratios and ceiling fractions computed by
bench.py's own functions, so the table and run.sh's report cannot disagree), the first sync from
bench/client-snapshot.sh's printed lines, live sync from bench/live.sh's live.json.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import TARGET_PEER_RATIO as PEER_TARGET, ceiling_fraction  # noqa: E402

ROUTES = [
    ("ceiling_nginx", "ceiling 0: nginx return 200"),
    ("ceiling_fastcgi", "ceiling 1: FastCGI, no database"),
    ("ceiling_db", "ceiling 2: + token check"),
    ("todos_by_date", "GET todos by date"),
    ("ceiling_page", "ceiling 3: a pull page from memory"),
    ("pull_pages", "pull pages of 500"),
]


def routes(state: str) -> list[str]:
    r = {}
    for path in glob.glob(os.path.join(state, "routes", "results", "*.json")):
        name = os.path.basename(path)[:-len(".json")]
        if not name.endswith(".wrk"):
            with open(path) as f:
                r[name] = json.load(f)
    if not r:
        return ["routes: no results"]
    out = [f"{'route':<36} {'variant':<7} {'req/s':>8} {'p99 ms':>7} {'x peer':>7} {'peer req/s':>10} {'/ceiling':>8}"]
    for key, label in ROUTES:
        for variant, suffix in (("plain", ""), ("gzip", "+gzip")):
            x = r.get(key + suffix)
            if not x:
                continue
            peer = r.get(f"peer_{key}{suffix}", {}).get("rps")
            ratio = x["rps"] / peer if peer else None
            fraction = ceiling_fraction(r, key, suffix)
            mark = "" if ratio is None else ("  met" if ratio >= PEER_TARGET else f"  missed (target {PEER_TARGET}x)")
            out.append(f"{label:<36} {variant:<7} {x['rps']:>8,.0f} {x['p99Ms']:>7.2f} "
                       f"{(f'{ratio:.2f}x' if ratio else '-'):>7} {(f'{peer:,.0f}' if peer else '-'):>10} "
                       f"{(f'{fraction:.1%}' if fraction else '-'):>8}{mark}")
    return out


def first_sync(state: str, name: str) -> list[str]:
    path = os.path.join(state, f"{name}.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()
    keep = [l.strip() for l in lines if re.match(r"(snapshot, first request|  Synced|FIRST SYNC|snapshot \(cached\) run|paged pull run)", l)]
    return keep or lines[-8:]


def live(state: str) -> list[str]:
    path = os.path.join(state, "live", "results", "live.json")
    if not os.path.exists(path):
        return ["live: no results"]
    with open(path) as f:
        o = json.load(f)
    p = o["propagation"]
    out = [f"push acknowledged -> in B's store: p50 {p['ackToStored']['p50ms']} ms, p99 {p['ackToStored']['p99ms']} ms "
           f"({p['measured']} of {p['writes']} writes, {o['propagationSubscribers']} idle streams)"]
    for label, d in p["debounce"].items():
        out.append(f"local write -> in B ({label}): p50 {d['localToB']['p50ms']} ms, p99 {d['localToB']['p99ms']} ms"
                   f"{'  met' if d['localToB']['p50ms'] <= 100 else '  missed (target p50 <= 100 ms)'}")
        b = d.get("burst")
        if b:
            out.append(f"  bursts of {b['writes']}: pushes per burst {b['pushesPerBurst']}; last write -> in B "
                       f"p50 {b['lastWriteToB']['p50ms']} ms, p99 {b['lastWriteToB']['p99ms']} ms")
    return out


def main() -> int:
    state = sys.argv[1]
    loads = {}
    with open(os.path.join(state, "loads.txt")) as f:
        for line in f:
            name, *values = line.split()
            loads[name] = " ".join(values)
    out = ["", f"TodoSync benchmark table ({os.cpu_count()} cores): load (1/5/15-min) before {loads.get('table-before')}, "
               f"after {loads.get('table-after')}", ""]
    out.append(f"ROUTES (200 users x 2,000 todos, wrk -t2 -c32, 10 s; load {loads.get('routes-before')} -> {loads.get('routes-after')})")
    out += ["  " + l for l in routes(state)]
    out.append("")
    out.append(f"FIRST SYNC, 65,000 records (load {loads.get('first-sync-before')} -> {loads.get('first-sync-after')})")
    out += ["  " + l for l in first_sync(state, "first-sync")]
    if "million-before" in loads:
        out.append(f"FIRST SYNC, 1,000,000 records (load {loads.get('million-before')} -> {loads.get('million-after')})")
        out += ["  " + l for l in first_sync(state, "million")]
    out.append("")
    out.append(f"LIVE (load {loads.get('live-before')} -> {loads.get('live-after')})")
    out += ["  " + l for l in live(state)]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
