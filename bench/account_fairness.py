#!/usr/bin/env python3
"""One account's heavy reads against a bystander, responder binaries side by side (issue 34, item 6).

A measurement that prints numbers, not a test. For each round, for each variant in turn (the
order alternates between rounds): the responders are restarted with the variant (--swap, a shell
command given the variant's name as $1), then the bystander's small reads (GET /todos?date=) run
--seconds alone (`baseline`), then --seconds under `yearlist` (scripts/bystander-latency.py: one
account with --tokens tokens and --todos todos over a year, 16 connections of year-long
`GET /todos?from&to`, no back-off, at nice 19). Prints every run and, per variant, the median of
the bystander's p50 and p99 alone and under load, its non-200 answers, the heavy account's
answers, and whether the goal (p99 under load within 2x the idle p99 + 20 ms) is met.

  python3 bench/account_fairness.py --base http://127.0.0.1:18880 --swap /tmp/swap.sh main h6
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import pathlib
import re
import statistics
import subprocess
import time

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bystander", HERE.parent / "scripts" / "bystander-latency.py")
bystander = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bystander)

LINE = re.compile(r"median=([\d.]+) ms p95=([\d.]+) ms p99=([\d.]+) ms")


def one_run(args, scenario: str, token: str) -> tuple[float, float, dict, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bystander.run(args, scenario, token)
    text = out.getvalue()
    print(text, end="", flush=True)
    median, _, p99 = (float(x) for x in LINE.search(text).groups())
    errors = re.search(r"bystander non-200: (\{.*\})", text)
    heavy = re.search(r"attacker answers: (\{.*\})", text)
    return median, p99, eval(errors.group(1)) if errors else {}, eval(heavy.group(1)) if heavy else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+")
    parser.add_argument("--base", default="http://127.0.0.1:18880")
    parser.add_argument("--swap", required=True, help="command run with the variant's name before its runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--todos", type=int, default=3650)
    args = parser.parse_args()
    args.concurrency, args.hold_lock_ms, args.fcgi_socket = None, 0, None

    token = bystander.register(args.base)
    results: dict[str, dict[str, list]] = {v: collections.defaultdict(list) for v in args.variants}
    for round_ in range(args.rounds):
        order = args.variants if round_ % 2 == 0 else list(reversed(args.variants))
        for variant in order:
            subprocess.run([args.swap, variant], check=True)
            time.sleep(1)
            for scenario in ("baseline", "yearlist"):
                print(f"--- round {round_ + 1}, {variant}, {scenario} ({time.strftime('%H:%M:%S')})", flush=True)
                median, p99, errors, heavy = one_run(args, scenario, token)
                r = results[variant]
                r[f"{scenario} p50"].append(median)
                r[f"{scenario} p99"].append(p99)
                r[f"{scenario} errors"].append(errors)
                if scenario == "yearlist":
                    r["heavy"].append(heavy)
                time.sleep(2)
    print("\n=== medians over rounds (ms) ===")
    for variant, r in results.items():
        idle50, idle99 = statistics.median(r["baseline p50"]), statistics.median(r["baseline p99"])
        load50, load99 = statistics.median(r["yearlist p50"]), statistics.median(r["yearlist p99"])
        bound = 2 * idle99 + 20
        print(f"{variant}: idle p50 {idle50:.1f} p99 {idle99:.1f}; heavy account loading p50 {load50:.1f} "
              f"p99 {load99:.1f} (per round {[round(x, 1) for x in r['yearlist p99']]}); bound {bound:.1f}: "
              + ("within" if load99 <= bound else f"EXCEEDED by {load99 - bound:.1f}"))
        print(f"  bystander non-200: {r['baseline errors'] + r['yearlist errors']}; heavy account: {r['heavy']}")


if __name__ == "__main__":
    main()
