"""Markdown rows for docs/RELIABILITY.md from checked runs' directories (each checked again).

    python3 scripts/partition/table.py RUN_DIR...
"""

from __future__ import annotations

import os
import re
import sys

from checker import PROPERTIES, verdict


def main() -> int:
    print("| kind | seed | s | ok | fail | unknown | push ops acked | conflicts | faults | " + " | ".join(PROPERTIES) + " |")
    print("|---" * (9 + len(PROPERTIES)) + "|")
    rows = []
    for d in sys.argv[1:]:
        if not os.path.exists(os.path.join(d, "final.json")):
            continue
        line = verdict(d)[0][-1]  # checked again: the checker may have changed since the run
        v = dict(re.findall(r"([\w-]+)=(\S+)", line))
        rows.append((v["kind"], int(v["seed"]), v))
    for kind, seed, v in sorted(rows, key=lambda r: (r[0], r[1])):
        print(f"| {kind} | {seed} | {v['seconds']} | {v['ok']} | {v['fail']} | {v['info']} | {v['push_ops_acked']} | {v.get('conflicts', '-')} | "
              f"{v['faults']} | " + " | ".join(v[p] for p in PROPERTIES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
