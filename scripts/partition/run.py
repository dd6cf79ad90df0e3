"""One checked run on a cluster that is up: workload + nemesis for S seconds, heal, final reads, checker.

    python3 scripts/partition/run.py --nemesis KIND --seed N --seconds S --cluster-cmd CMD --out DIR
    python3 scripts/partition/run.py --nemesis KIND[,KIND...] --seed A-B|A,B,... --seconds S ... (a batch)
    python3 scripts/partition/run.py --nemesis list

`scripts/cluster.sh check` brings the cluster up, calls this, and takes it down; the integration
suite's short run (test_cluster_partitions.py) calls it on the cluster it already has. CMD is
scripts/cluster.sh with the cluster's configuration in its environment. Writes DIR/history.jsonl,
DIR/nemesis.jsonl, DIR/final.json and DIR/verdict.txt (docs/HISTORY.md); the last line printed is
the verdict line; exit status 0 only when every property holds.

A batch (several kinds or seeds) runs them one after another on the same cluster, which heals
between runs; each run gets DIR/KIND-sSEED and its own verdict line, and the batch's last line
counts the runs that held. Exit status 0 only when every run held.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from checker import SERVER_INJECTIONS  # noqa: E402
from nemesis import KINDS, Nemesis, Topology  # noqa: E402


def cluster_env(cmd: str) -> dict[str, str]:
    out = subprocess.run([cmd, "env"], capture_output=True, text=True, timeout=60, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


TODO_COLUMNS = ["id", "user_id", "client_id", "raw", "title", "deadline", "is_completed", "difficulty",
                "estimated_time", "is_life", "is_important", "version", "deleted"]
BOOLS = {"is_completed", "is_life", "is_important", "deleted"}
INTS = {"id", "user_id", "difficulty", "estimated_time", "version"}


def sql(socket: str, query: str) -> list[list[str]]:
    proc = subprocess.run(["mariadb", "--no-defaults", f"--socket={socket}", "-uroot", "-N", "-B", "--connect-timeout=5",
                           "todosync", "-e", query], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{socket}: {proc.stderr.strip()}")
    return [line.split("\t") for line in proc.stdout.splitlines()]


def typed(columns: list[str], row: list[str]) -> dict:
    out = {}
    for name, value in zip(columns, row):
        if value == "NULL":
            out[name] = None
        elif name in BOOLS:
            out[name] = value == "1"
        elif name in INTS:
            out[name] = int(value)
        else:
            out[name] = value
    return out


def dump_node(socket: str, users: list[int]) -> dict:
    """The test accounts' rows on one node, read by column name."""
    ids = ",".join(str(u) for u in users)
    todos = [typed(TODO_COLUMNS, r) for r in sql(socket, f"""
        SELECT id, user_id, client_id, raw, title, deadline, is_completed, difficulty, estimated_time, is_life,
               is_important, version, deleted_at IS NOT NULL FROM todos WHERE user_id IN ({ids})""")]
    cols = ["id", "user_id", "version", "deleted"]
    tags = [typed(cols, r) for r in sql(socket, f"SELECT id, user_id, version, deleted_at IS NOT NULL FROM tags WHERE user_id IN ({ids})")]
    stats = [typed(cols, r) for r in sql(socket, f"SELECT id, user_id, version, deleted_at IS NOT NULL FROM daily_stats WHERE user_id IN ({ids})")]
    ops = [{"user_id": int(u), "op_key": k} for u, k in sql(socket, f"SELECT user_id, op_key FROM sync_operations WHERE user_id IN ({ids})")]
    seq = {u: int(s) for u, s in sql(socket, f"SELECT id, change_seq FROM users WHERE id IN ({ids})")}
    return {"todos": todos, "tags": tags, "daily_stats": stats, "sync_operations": ops, "change_seq": seq}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nemesis", required=True)
    ap.add_argument("--seed", default="1", help="N, or a batch: A-B or A,B,...")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--cluster-cmd")
    ap.add_argument("--prefix", default=os.environ.get("TODOSYNC_CLUSTER_PREFIX", "tsx"))
    ap.add_argument("--net", default=os.environ.get("TODOSYNC_CLUSTER_NET", "10.213.0"))
    ap.add_argument("--out")
    ap.add_argument("--accounts", type=int, default=3)
    ap.add_argument("--devices", type=int, default=4, help="simulated devices per account")
    ap.add_argument("--inject", default="",
                    help="NAME[,NAME]: the responders run with these bugs on purpose (TODOSYNC_TEST_INJECT, set by "
                         "cluster.sh check --inject); recorded, and the verdict says whether each was caught")
    ap.add_argument("--client-bin", default=os.environ.get("TODOSYNC_CLIENT_BIN") or os.path.join(
        os.path.dirname(os.path.dirname(HERE)), ".build", "release", "todosync-client"),
        help="todosync-client: one more device per account runs it (none when the file is missing)")
    args = ap.parse_args()
    if args.nemesis == "list":
        for name, what in KINDS.items():
            print(f"{name}\t{what}")
        return 0
    kinds = args.nemesis.split(",")
    for kind in kinds:
        if kind not in KINDS:
            print(f"unknown nemesis kind {kind!r}; `--nemesis list` prints them", file=sys.stderr)
            return 2
    try:
        seeds = parse_seeds(args.seed)
    except ValueError:
        print(f"--seed {args.seed!r}: give N, A-B or A,B,...", file=sys.stderr)
        return 2
    unknown = [n for n in args.inject.split(",") if n and n not in SERVER_INJECTIONS]
    if unknown:
        print(f"--inject: unknown {', '.join(unknown)}; known: {', '.join(SERVER_INJECTIONS)}", file=sys.stderr)
        return 2
    if not args.cluster_cmd or not args.out:
        print("--cluster-cmd and --out are needed for a run", file=sys.stderr)
        return 2
    runs = [(kind, seed) for kind in kinds for seed in seeds]
    if len(runs) == 1:
        return 0 if run_one(args, kinds[0], seeds[0], args.out) else 1
    held = 0
    for kind, seed in runs:
        held += run_one(args, kind, seed, os.path.join(args.out, f"{kind}-s{seed}"))
    print(f"batch: {held} of {len(runs)} runs held every property ({','.join(kinds)}; seeds {args.seed}; "
          f"{args.seconds:g} s each; run dirs under {args.out})", flush=True)
    return 0 if held == len(runs) else 1


def parse_seeds(text: str) -> list[int]:
    if "-" in text.strip("-"):
        first, last = (int(x) for x in text.split("-", 1))
        if last < first:
            raise ValueError(text)
        return list(range(first, last + 1))
    return [int(x) for x in text.split(",")]


def run_one(args: argparse.Namespace, kind: str, seed: int, out: str) -> bool:
    """One run on the cluster as it is: workload under the nemesis, heal, final reads, the verdict."""
    import checker
    import workload as wl

    env = cluster_env(args.cluster_cmd)
    fronts = env["TODOSYNC_CLUSTER_FRONT_URLS"].split(",")
    sockets = env["TODOSYNC_CLUSTER_DB_SOCKETS"].split(",")
    topo = Topology(args.prefix, args.net, int(env["TODOSYNC_CLUSTER_NODES"]), int(env["TODOSYNC_CLUSTER_APPS"]),
                    len(fronts), args.cluster_cmd)
    os.makedirs(out, exist_ok=True)
    for name in ("history.jsonl", "nemesis.jsonl"):
        open(os.path.join(out, name), "w").close()
    t0 = time.monotonic()
    history = wl.History(os.path.join(out, "history.jsonl"), t0)
    accounts = [wl.register(fronts[0], n, history) for n in range(1, args.accounts + 1)]
    devices = [wl.Device(f"a{a['n']}d{d}", a, fronts[(a["n"] + d) % len(fronts)], seed, history,
                         window=wl.window_for(a["n"], d))
               for a in accounts for d in range(1, args.devices + 1)]
    clis = []
    if os.path.isfile(args.client_bin) and os.access(args.client_bin, os.X_OK):
        os.makedirs(os.path.join(out, "cli"), exist_ok=True)
        clis = [wl.CliDevice(f"a{a['n']}cli", a, fronts[a["n"] % len(fronts)], seed, history, args.client_bin,
                             os.path.join(out, "cli")) for a in accounts]
        for c in clis:
            c.login()
    nem = Nemesis(topo, kind, seed, os.path.join(out, "nemesis.jsonl"), t0)
    print(f"check: nemesis {kind}, seed {seed}, {args.seconds:g} s, {len(accounts)} accounts x "
          f"{args.devices} devices ({sum(1 for d in devices if d.window)} with a window) + {len(clis)} todosync-client"
          f"{', bugs injected: ' + args.inject if args.inject else ''}, fronts {', '.join(fronts)}; run dir {out}", flush=True)
    errors: list[str] = []
    nem.begin()
    try:
        wl.run_devices(devices + clis, args.seconds, errors)
    finally:
        nem.end()
    final: dict = {"kind": kind, "seed": seed, "seconds": args.seconds, "inject": [n for n in args.inject.split(",") if n],
                   "accounts": {a["n"]: a["user_id"] for a in accounts}}
    try:
        nem.wait_whole()
    except Exception as exc:
        final["heal_error"] = repr(exc)
    # after the heal: every device pulls to the end (convergence), then one fresh view per account
    time.sleep(2)
    # the todosync-client devices first: their final sync pushes what they still queue
    final["cli"] = {c.name: c.final() for c in clis}
    for dev in devices:
        for _ in range(10):
            if dev.pull_to_end("final-pull", max_pages=1000):
                break
            time.sleep(2)
    final["devices"] = {}
    for dev in devices:
        live = {"todos": {}, "dailyStats": {}}
        for table in live:
            for rid, rec in dev.store[table].items():
                if not rec.get("deleted") and rec.get("deletedAt") is None:
                    live[table][rid] = rec["version"]
        final["devices"][dev.name] = {"account": dev.account["n"], "pulled": True, "live": live, "window": dev.window}
        final["devices"][dev.name]["pulled"] = dev.cursor is not None
    final["views"] = {}
    for a in accounts:
        viewer = wl.Device(f"a{a['n']}view", a, fronts[0], seed, history)
        ok = any(viewer.pull_to_end("view", max_pages=1000) or time.sleep(2) for _ in range(10))
        final["views"][a["n"]] = {k: [r for r in viewer.store[k].values() if not r.get("deleted")]
                                  for k in ("tags", "todos", "dailyStats")}
        if not ok:
            final["heal_error"] = f"account {a['n']}: the fresh pull did not finish"
    final["nodes"] = [dump_node(s, [a["user_id"] for a in accounts]) for s in sockets]
    final["nemesis"] = {"events": nem.counts, "errors": nem.errors}
    final["workload_errors"] = errors
    with open(os.path.join(out, "final.json"), "w") as f:
        json.dump(final, f)

    lines, ok = checker.verdict(out)
    with open(os.path.join(out, "verdict.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
