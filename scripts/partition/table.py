"""Markdown rows for docs/RELIABILITY.md from checked runs' directories (each checked again).

    python3 scripts/partition/table.py RUN_DIR...
"""

from __future__ import annotations

import json
import os
import re
import sys

from checker import PROPERTIES, verdict


def availability(run_dir: str) -> tuple[int, float]:
    """Answers of 503, and the longest time between two acknowledgements (seconds)."""
    n503, oks = 0, []
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "ok" and not e.get("f", "").startswith("cli-") and e.get("f") not in ("final-pull", "view"):
                oks.append(e["t"])
            n503 += e["type"] == "fail" and e.get("status") == 503
    oks.sort()
    return n503, max((b - a for a, b in zip(oks, oks[1:])), default=0.0)


def main() -> int:
    print("| kind | seed | s | ok | fail | unknown | 503 | longest gap s | push ops acked | conflicts | faults | "
          + " | ".join(PROPERTIES) + " |")
    print("|---" * (11 + len(PROPERTIES)) + "|")
    rows = []
    for d in sys.argv[1:]:
        if not os.path.exists(os.path.join(d, "final.json")):
            continue
        line = verdict(d)[0][-1]  # checked again: the checker may have changed since the run
        v = dict(re.findall(r"([\w-]+)=(\S+)", line))
        v["n503"], v["gap"] = availability(d)
        rows.append((v["kind"], int(v["seed"]), v))
    for kind, seed, v in sorted(rows, key=lambda r: (r[0], r[1])):
        print(f"| {kind} | {seed} | {v['seconds']} | {v['ok']} | {v['fail']} | {v['info']} | {v['n503']} | {v['gap']:.1f} | "
              f"{v['push_ops_acked']} | {v.get('conflicts', '-')} | {v['faults']} | " + " | ".join(v[p] for p in PROPERTIES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
