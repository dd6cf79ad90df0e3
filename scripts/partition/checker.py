"""The checker of `scripts/cluster.sh check`: reads a run's history and final state, and gives each
of issue 38's six properties a verdict: pass, or its smallest (earliest) counterexample.

    python3 scripts/partition/checker.py RUN_DIR [--inject NAME]

RUN_DIR holds history.jsonl, nemesis.jsonl and final.json (docs/HISTORY.md). The checker checks
the contract (the project's API.md) as written. `--inject NAME` first plants one violation in what
was read (see INJECTIONS), to show that the property it breaks is caught.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "Tests", "integration"))
import synclib  # noqa: E402  (the contract's stat recomputation, shared with the integration suite)

PROPERTIES = ["exactly-once", "versions", "no-lost-update", "read-your-writes", "stats", "convergence"]
CONTENT = ("title", "deadline", "isCompleted", "difficulty", "estimatedTime", "isLife", "isImportant")
DB_FIELDS = {"title": "title", "deadline": "deadline", "isCompleted": "is_completed", "difficulty": "difficulty",
             "estimatedTime": "estimated_time", "isLife": "is_life", "isImportant": "is_important"}


def load(run_dir: str):
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        history = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(run_dir, "final.json")) as f:
        final = json.load(f)
    return history, final


def content(rec: dict) -> tuple:
    return tuple(rec.get(k) for k in CONTENT) + (rec.get("deletedAt") is not None,)


class Check:
    def __init__(self, history: list[dict], final: dict):
        self.h, self.final = history, final
        self.violations: dict[str, list[tuple[float, str]]] = {p: [] for p in PROPERTIES}
        self.counts = defaultdict(int)
        # invokes by (op, attempt), completions in order
        self.invokes = {(e["op"], e["attempt"]): e for e in history if e["type"] == "invoke"}
        self.done = [e for e in history if e["type"] in ("ok", "fail", "info")]
        for e in self.done:
            e["req"] = self.invokes[(e["op"], e["attempt"])]["req"]
            e["t_invoke"] = self.invokes[(e["op"], e["attempt"])]["t"]
        self.db = final["nodes"][0]  # node 1's tables (all nodes are compared under convergence)
        self.user_of_account = {int(k): v for k, v in final["accounts"].items()}
        self.todos_db = {(r["user_id"], r["id"]): r for r in self.db["todos"]}

    def bad(self, prop: str, t: float, text: str) -> None:
        self.violations[prop].append((t, text))

    # ----- acknowledged writes: (account, id, version, record, t_ack, source)
    def acked_writes(self):
        out = []
        for e in self.done:
            if e["type"] != "ok":
                continue
            f, resp = e["f"], e["resp"]
            if f == "push":
                for res in resp.get("results", []):
                    if res.get("status") in ("applied", "merged") and res.get("record"):
                        out.append((e["account"], res["id"], res["version"], res["record"], e["t"], e, res))
            elif f in ("patch", "create"):
                out.append((e["account"], resp["id"], resp["version"], resp, e["t"], e, None))
            elif f == "quick-add":
                for item in resp.get("items", []):
                    out.append((e["account"], item["id"], item["version"], item, e["t"], e, None))
        return out

    def observations(self):
        """Every (account, kind, id, version, content-or-None, t) seen in an answer."""
        for e in self.done:
            if e["type"] != "ok" and not (e["status"] == 412):
                continue
            acc, resp, t = e["account"], e["resp"], e["t"]
            if e["f"] in ("pull", "final-pull", "view"):
                for kind in ("todos", "dailyStats"):
                    lists = resp["changes"].get(kind, {})
                    for rec in lists.get("upserted", []):
                        yield acc, kind, rec["id"], rec["version"], content(rec) if kind == "todos" else None, t
                    for tomb in lists.get("deleted", []):
                        yield acc, kind, tomb["id"], tomb["version"], None, t
            elif e["f"] == "push":
                for res in resp.get("results", []):
                    if res.get("record"):
                        yield acc, "todos", res["record"]["id"], res["record"]["version"], content(res["record"]), t
            elif e["status"] == 412:
                cur = resp.get("current") or (resp.get("error") or {}).get("current")
                if cur:
                    yield acc, "todos", cur["id"], cur["version"], content(cur), t
            elif e["f"] in ("patch", "create", "read"):
                yield acc, "todos", resp["id"], resp["version"], content(resp), t
            elif e["f"] == "quick-add":
                for item in resp.get("items", []):
                    yield acc, "todos", item["id"], item["version"], content(item), t

    # ----- 1. exactly once
    def exactly_once(self):
        user = self.user_of_account
        ops_stored = {(r["user_id"], r["op_key"]) for r in self.db["sync_operations"]}
        by_raw = defaultdict(list)
        for r in self.db["todos"]:
            by_raw[(r["user_id"], r["raw"].lstrip("!").split(" ")[0])].append(r)
        by_client = {(r["user_id"], r["client_id"]): r for r in self.db["todos"] if r["client_id"]}
        # group attempts into logical operations
        ops = defaultdict(list)
        for e in self.done:
            ops[e["op"]].append(e)
        for op, attempts in ops.items():
            first = attempts[0]
            f, acc = first["f"], first["account"]
            uid = user[acc]
            oks = [a for a in attempts if a["type"] == "ok"]
            all_fail = all(a["type"] == "fail" for a in attempts)
            t = (oks[0] if oks else attempts[-1])["t"]
            if f == "push":
                # every delivery of an opId gets the answer of the first: a stored result replayed,
                # nothing applied again (the workload delivers some acknowledged pushes twice)
                results = {}
                for a in oks:
                    for res in a["resp"].get("results", []):
                        first_res = results.setdefault(res["opId"], res)
                        if answer_of(first_res) != answer_of(res):
                            self.bad("exactly-once", a["t"], f"push op {res['opId']} ({first['process']}) answered "
                                     f"{answer_of(first_res)}, then on delivery {a['attempt']} {answer_of(res)} "
                                     f"(status, id, version): not the stored result replayed (the opId applied again)")
                for o in first["req"]["body"]["operations"]:
                    self.counts["push_ops"] += 1
                    res = results.get(o["opId"])
                    if res is not None and res["status"] != "rejected":
                        self.counts["push_ops_acked"] += 1
                        if (uid, o["opId"]) not in ops_stored:
                            self.bad("exactly-once", t, f"push op {o['opId']} acknowledged ({res['status']}) but not in sync_operations")
                    if o["action"] != "create":
                        continue
                    row = by_client.get((uid, o["clientId"]))
                    rows = by_raw.get((uid, o["data"]["title"]), [])
                    if res is not None and res["status"] == "applied":
                        if row is None or row["id"] != res["id"] or len(rows) != 1:
                            self.bad("exactly-once", t, f"push create {o['clientId']} acknowledged as id {res['id']}: "
                                     f"{len(rows)} row(s) with its title, clientId row {row and row['id']}")
                    elif len(rows) > 1 or (all_fail and rows):
                        self.bad("exactly-once", t, f"push create {o['clientId']} ({'503/4xx' if all_fail else 'unknown'}): {len(rows)} row(s)")
            elif f in ("create", "quick-add"):
                titles = [first["req"]["body"]["title"]] if f == "create" else first["req"].get("titles") or first["titles"]
                counts = [len(by_raw.get((uid, ti), [])) for ti in titles]
                self.counts[f] += 1
                if oks:
                    self.counts[f + "_acked"] += 1
                    ids = [oks[0]["resp"]["id"]] if f == "create" else [i["id"] for i in oks[0]["resp"]["items"]]
                    got = [by_raw[(uid, ti)][0]["id"] if c == 1 else None for ti, c in zip(titles, counts)]
                    if counts != [1] * len(titles) or got != ids:
                        self.bad("exactly-once", t, f"{f} with Idempotency-Key acknowledged as ids {ids}: rows per line {counts}")
                    if len({a['resp'] and json.dumps(a['resp'], sort_keys=True) for a in oks}) > 1:
                        self.bad("exactly-once", t, f"{f}: resends with one Idempotency-Key got different answers")
                elif any(c > 1 for c in counts) or (all_fail and any(counts)) or len(set(min(c, 1) for c in counts)) > 1:
                    self.bad("exactly-once", t, f"{f} not acknowledged ({'503/4xx' if all_fail else 'unknown'}): rows per line {counts}")
        # every todo added on a todosync-client device is on the server once (when its store
        # synced to the end: at most once otherwise)
        for name, cli in self.final.get("cli", {}).items():
            uid = user[cli["account"]]
            for word in cli["added"]:
                self.counts["cli_added"] += 1
                n = len(by_raw.get((uid, word), []))
                if n > 1 or (cli["synced"] and n != 1):
                    self.bad("exactly-once", 0, f"{name}: todo {word} added with todosync-client is on the server {n} time(s)")
        # nothing acknowledged is lost: the final row is at least the acknowledged version, and
        # equal to it when nothing changed the record since
        for acc, tid, v, rec, t, e, _ in self.acked_writes():
            row = self.todos_db.get((user[acc], tid))
            if row is None or row["version"] < v:
                self.bad("exactly-once", t, f"todo {tid} acknowledged at version {v}, final row {row and row['version']}")
            elif row["version"] == v and db_content(row) != content(rec):
                self.bad("exactly-once", t, f"todo {tid} version {v}: acknowledged {content(rec)}, final {db_content(row)}")

    # ----- 2. versions
    def versions(self):
        for uid, rows in self.db_versions().items():
            seen = {}
            for kind, rid, v in rows:
                if v in seen and seen[v] != (kind, rid):
                    self.bad("versions", 0, f"user {uid}: version {v} held by {seen[v]} and {(kind, rid)} in the final database")
                seen[v] = (kind, rid)
            seq = self.db["change_seq"].get(str(uid), 0)
            if seen and max(seen) > seq:
                self.bad("versions", 0, f"user {uid}: version {max(seen)} above change_seq {seq}")
        owner, state = {}, {}
        for acc, kind, rid, v, c, t in sorted(self.observations(), key=lambda o: o[5]):
            k = (acc, v)
            if k in owner and owner[k] != (kind, rid):
                self.bad("versions", t, f"account {acc}: version {v} seen for {owner[k]} and for {(kind, rid)}")
            owner[k] = (kind, rid)
            if c is not None:
                s = (acc, kind, rid, v)
                if s in state and state[s] != c:
                    self.bad("versions", t, f"account {acc} {kind} {rid} version {v} seen as {state[s]} and as {c}")
                state.setdefault(s, c)
        # every device's cursor chain: pages strictly after what came before, no change skipped
        acked = sorted(self.acked_writes(), key=lambda w: w[4])
        final_deleted = {(r["user_id"], r["id"]) for r in self.db["todos"] if r["deleted"]}
        by_process = defaultdict(list)
        for e in self.done:
            if e["f"] in ("pull", "final-pull", "view") and e["type"] == "ok":
                by_process[e["process"]].append(e)
        for proc, pages in by_process.items():
            hwm, cursor, store, run_start, run_from_scratch = 0, None, {}, {}, {}
            scratch_end = -1.0  # when the last pull begun without a cursor ended (its answer's time)
            for p in pages:
                self.counts["pull_pages"] += 1
                params = p["req"].get("params", {})
                # a window device's pages (API.md "Windows"): its own chain of the window's cursors
                window = (params.get("from"), params.get("to")) if ("from" in params or "to" in params) else None
                if params.get("cursor") != cursor:
                    self.bad("versions", p["t"], f"{proc}: pulled with cursor {params.get('cursor')!r}, its last was {cursor!r}")
                run_start.setdefault(p["run"], p["t_invoke"])
                run_from_scratch.setdefault(p["run"], params.get("cursor") is None)
                page_max = hwm
                for kind in ("todos", "dailyStats"):
                    lists = p["resp"]["changes"].get(kind, {})
                    for rec in lists.get("upserted", []) + lists.get("deleted", []) + lists.get("left", []):
                        if rec["version"] <= hwm:
                            self.bad("versions", p["t"], f"{proc}: {kind} {rec['id']} version {rec['version']} in a page after version {hwm} (cursor moved back)")
                        page_max = max(page_max, rec["version"])
                        if kind == "todos":
                            store[rec["id"]] = max(store.get(rec["id"], 0), rec["version"])
                    if window is None and "left" in lists:
                        self.bad("versions", p["t"], f"{proc}: a whole pull's {kind} has `left`")
                    for rec in lists.get("upserted", []) if window is not None else []:
                        self.counts["window_records"] += 1
                        date = rec.get("deadline") if kind == "todos" else rec.get("date")
                        if not in_window(date, window):
                            self.bad("versions", p["t"], f"{proc}: {kind} {rec['id']} of {date} upserted by a pull of window "
                                     f"{window}: outside it")
                hwm, cursor = page_max, p["resp"]["cursor"]
                if run_from_scratch[p["run"]]:
                    scratch_end = p["t"]
                if not p["resp"]["hasMore"]:
                    started = run_start[p["run"]]
                    uid = self.user_of_account[p["account"]]
                    for acc, tid, v, rec, t, e, _ in acked:
                        if t >= started:
                            break
                        if acc != p["account"]:
                            continue
                        held = store.get(tid)
                        if held is None and (rec.get("deletedAt") is not None or (uid, tid) in final_deleted):
                            continue  # a first pull sends no tombstones
                        if held is None and window is not None and e["t_invoke"] < scratch_end:
                            # a window's pull without a cursor sends only what is in the window when it
                            # reads, and a write sent before it ended may have committed before that
                            # read: the todo may have been outside then. A write sent after it
                            # committed after the cursor it gave, so it comes in one of the lists.
                            continue
                        if held is None or held < v:
                            self.bad("versions", p["t"], f"{proc}: todo {tid} acknowledged at version {v} (t={t}) before its pull began "
                                     f"(t={started}), the pull ended holding {held} (a change skipped)")

    def db_versions(self):
        out = defaultdict(list)
        for kind in ("todos", "tags", "daily_stats"):
            for r in self.db[kind]:
                out[r["user_id"]].append((kind, r["id"], r["version"]))
        return out

    # ----- 3. no lost update
    def no_lost_update(self):
        seen = defaultdict(set)
        for acc, kind, rid, v, c, t in self.observations():
            if kind == "todos":
                seen[(acc, rid)].add(v)
        for r in self.db["todos"]:
            acc = self.account_of_user(r["user_id"])
            seen[(acc, r["id"])].add(r["version"])
        # which operations answered each (account, todo, version): a delete of a deleted record
        # is `applied` whatever its baseVersion (the contract) and answers the tombstone's version,
        # which another operation wrote; it based nothing on its baseVersion
        writers = defaultdict(set)
        for e in self.done:
            if e["type"] == "ok" and e["f"] == "push":
                for res in e["resp"].get("results", []):
                    if res.get("status") in ("applied", "merged") and res.get("id"):
                        writers[(e["account"], res["id"], res["version"])].add(res["opId"])
        conditional = []
        for e in self.done:
            if e["type"] == "ok" and e["f"] == "patch":
                conditional.append((e["account"], e["resp"]["id"], e["if_match"], e["resp"]["version"], e["t"], "If-Match PATCH"))
            if e["status"] == 412 and e["f"] == "patch":
                self.counts["conflicts"] += 1
                cur = e["resp"].get("current") or (e["resp"].get("error") or {}).get("current") or {}
                if cur.get("version") == e["if_match"]:
                    self.bad("no-lost-update", e["t"], f"412 for If-Match {e['if_match']} while the current version is that one")
            if e["type"] == "ok" and e["f"] == "push":
                body = e["req"]["body"]
                ops = {o["opId"]: o for o in body["operations"]}
                for res in e["resp"].get("results", []):
                    o = ops.get(res["opId"])
                    if o is None or o["action"] == "create":
                        continue
                    self.check_policy(e, body["conflictPolicy"], o, res)
                    self.counts["conflicts"] += res["status"] in ("conflict", "merged")
                    if o["action"] == "delete" and len(writers[(e["account"], res["id"], res["version"])]) > 1:
                        continue  # deleted already: nothing written
                    if body["conflictPolicy"] == "reject" and res["status"] == "applied" and "baseVersion" in o:
                        conditional.append((e["account"], res["id"], o["baseVersion"], res["version"], e["t"], f"push reject {o['action']}"))
        for acc, rid, base, v, t, what in conditional:
            if v <= base:
                continue  # a write that changed nothing keeps the version
            between = sorted(w for w in seen[(acc, rid)] if base < w < v)
            if between:
                self.bad("no-lost-update", t, f"{what} of todo {rid} based on version {base} acknowledged at version {v}, "
                         f"but the todo had version {between[0]} in between (an update lost)")
            self.counts["conditional_acked"] += 1

    def check_policy(self, e, policy, o, res):
        rec, t = res.get("record") or {}, e["t"]
        if res["status"] == "conflict":
            if policy == "client-wins":
                self.bad("no-lost-update", t, f"client-wins op {o['opId']} answered conflict")
            elif "baseVersion" in o and rec and rec.get("deletedAt") is None and rec["version"] <= o["baseVersion"]:
                self.bad("no-lost-update", t, f"op {o['opId']}: conflict, yet the server's version {rec['version']} is not above baseVersion {o['baseVersion']}")
            return
        if o["action"] != "update" or res["status"] not in ("applied", "merged") or not rec:
            return
        data = o["data"]
        if policy == "merge":
            listed = set(res.get("conflictingFields") or [])
            for f, value in data.items():
                if f in listed and rec.get(f) == value:
                    self.bad("no-lost-update", t, f"merge op {o['opId']}: {f} listed as conflicting but holds the client's value")
                if f not in listed and rec.get(f) != value:
                    self.bad("no-lost-update", t, f"merge op {o['opId']}: {f} = {rec.get(f)!r}, neither the client's {value!r} nor listed")
            if (res["status"] == "merged") != bool(listed):
                self.bad("no-lost-update", t, f"merge op {o['opId']}: status {res['status']} with conflictingFields {sorted(listed)}")
        else:
            for f, value in data.items():
                if rec.get(f) != value:
                    self.bad("no-lost-update", t, f"{policy} op {o['opId']} applied, yet {f} = {rec.get(f)!r} not {value!r}")

    def account_of_user(self, uid):
        for acc, u in self.user_of_account.items():
            if u == uid:
                return acc
        return None

    # ----- 4. read your writes
    def read_your_writes(self):
        # versions at which each todo was seen deleted (a 404 is right when the todo was deleted
        # after the write the read must see: it may be restored again later)
        deleted = defaultdict(set)
        for e in self.done:
            if e["type"] != "ok":
                continue
            if e["f"] in ("pull", "final-pull", "view"):
                for tomb in e["resp"]["changes"].get("todos", {}).get("deleted", []):
                    deleted[(e["account"], tomb["id"])].add(tomb["version"])
            elif e["f"] == "push":
                for res in e["resp"].get("results", []):
                    if (res.get("record") or {}).get("deletedAt") is not None:
                        deleted[(e["account"], res["id"])].add(res["version"])
        for r in self.db["todos"]:
            if r["deleted"]:
                deleted[(self.account_of_user(r["user_id"]), r["id"])].add(r["version"])
        for e in self.done:
            if e["f"] != "read" or e["type"] == "info" or e["status"] in (429, 503):
                continue
            self.counts["reads"] += 1
            want = e["want_version"]
            if e["status"] == 200:
                if e["resp"]["version"] < want:
                    self.bad("read-your-writes", e["t"], f"{e['process']} via {e['front']}: todo {e['resp']['id']} read at version "
                             f"{e['resp']['version']} after its write at {want} was acknowledged")
            else:
                tid = int(e["req"]["path"].rsplit("/", 1)[1])
                if not (e["status"] == 404 and any(v > want for v in deleted[(e["account"], tid)])):
                    self.bad("read-your-writes", e["t"], f"{e['process']}: GET todo {tid} after its write at {want}: HTTP {e['status']}")

    # ----- 5. derived stats
    def stats(self):
        for acc, view in self.final["views"].items():
            tags = {t["id"]: t for t in view["tags"]}
            by_date = defaultdict(list)
            for t in view["todos"]:
                by_date[t["deadline"]].append(t)
            stats = {s["date"]: s for s in view["dailyStats"]}
            for date in sorted(set(by_date) | set(stats)):
                want = synclib.expected_stat(by_date.get(date, []), tags)
                got = stats.get(date)
                self.counts["stats_checked"] += 1
                if want is None and got is not None:
                    self.bad("stats", 0, f"account {acc} {date}: a live stat without a live todo")
                elif want is not None and (got is None or synclib.stat_content(got) != {**want, "productivityNum": Fraction(want["productivityNum"])}):
                    self.bad("stats", 0, f"account {acc} {date}: stat {got and synclib.stat_content(got)} != recomputed {want}")

    # ----- 6. convergence
    def convergence(self):
        if self.final.get("heal_error"):
            self.bad("convergence", 0, f"the cluster did not heal: {self.final['heal_error']}")
        first = node_digest(self.final["nodes"][0])
        for i, node in enumerate(self.final["nodes"][1:], start=2):
            if node_digest(node) != first:
                diff = sorted(set(node_digest(node)) ^ set(first))[:3]
                self.bad("convergence", 0, f"db{i} differs from db1: {diff}")
        for name, dev in self.final["devices"].items():
            # a window device converges to the server's view of its window (API.md "Windows": the
            # todos whose deadline and the daily stats whose date fall in it)
            view, window = self.final["views"][str(dev["account"])], dev.get("window")
            want = {("todos", t["id"]): t["version"] for t in view["todos"] if in_window(t["deadline"], window)}
            want.update({("dailyStats", s["id"]): s["version"] for s in view["dailyStats"] if in_window(s["date"], window)})
            if not dev["pulled"]:
                self.bad("convergence", 0, f"{name}: could not pull to the end after the heal")
                continue
            got = {(k, int(i)): v for k, recs in dev["live"].items() for i, v in recs.items()}
            if got != want:
                diff = sorted(set(got.items()) ^ set(want.items()))[:3]
                self.bad("convergence", 0, f"{name}: its copy differs from the server's view: {diff}")
        self.cli_convergence()

    def cli_convergence(self):
        for name, cli in self.final.get("cli", {}).items():
            view = self.final["views"][str(cli["account"])]
            want = {t["id"]: t["version"] for t in view["todos"]}
            got = {t["serverId"]: t["version"] for t in cli["todos"]}
            if not cli["synced"] or any(t["pending"] for t in cli["todos"]):
                self.bad("convergence", 0, f"{name}: todosync-client did not sync to the end after the heal")
            elif got != want:
                diff = sorted(set(got.items()) ^ set(want.items()), key=str)[:3]
                self.bad("convergence", 0, f"{name}: todosync-client's store differs from the server's view: {diff}")

    def run(self):
        for prop, fn in zip(PROPERTIES, (self.exactly_once, self.versions, self.no_lost_update, self.read_your_writes,
                                         self.stats, self.convergence)):
            try:
                fn()
            except Exception as exc:  # a malformed answer is itself a finding
                self.bad(prop, 0, f"checker could not evaluate: {exc!r}")
        return {p: sorted(v) for p, v in self.violations.items()}


def in_window(date, window) -> bool:
    """Whether a date falls in a window (from, to; None: that side open); None: the whole account."""
    if window is None:
        return True
    lo, hi = window
    return date is not None and (lo is None or date >= lo) and (hi is None or date <= hi)


def answer_of(res: dict) -> tuple:
    return res.get("status"), res.get("id"), res.get("version")


def db_content(row: dict) -> tuple:
    return tuple(row[DB_FIELDS[k]] for k in CONTENT) + (bool(row["deleted"]),)


def node_digest(node: dict) -> list:
    return sorted([("todos", r["id"], r["version"], bool(r["deleted"])) for r in node["todos"]]
                  + [("daily_stats", r["id"], r["version"], bool(r["deleted"])) for r in node["daily_stats"]])


# --- planted violations: each breaks one property in what was read, as a server bug would
def _first(history, pred):
    return next(e for e in history if pred(e))


def inject(name: str, history: list[dict], final: dict) -> None:
    db = final["nodes"][0]
    if name == "lost-opid":  # a skipped opId lookup: the retried op created a second row
        row = next(r for r in db["todos"] if r["client_id"])
        db["todos"].append(dict(row, id=row["id"] + 10**9, client_id=None, version=row["version"] + 10**9))
    elif name == "reused-version":  # a version handed out twice
        a, b = [r for r in db["todos"] if r["user_id"] == db["todos"][0]["user_id"]][:2]
        b["version"] = a["version"]
    elif name == "lost-update":  # a disabled version check: an If-Match write applied on a stale base
        e = _first(history, lambda e: e["type"] == "ok" and e.get("f") == "patch" and e["resp"]["version"] > e["if_match"])
        e["if_match"] -= 1  # the version it named is one before the one it replaced
    elif name == "stale-read":  # a read served by a node behind
        e = _first(history, lambda e: e["type"] == "ok" and e.get("f") == "read")
        e["resp"]["version"] = e["want_version"] - 1
    elif name == "stats-off":  # a stats rebuild turned off: one date's stat left as it was
        view = next(v for v in final["views"].values() if v["dailyStats"])
        view["dailyStats"][0]["todoCount"] += 1
    elif name == "window-leak":  # a window pull that sent a todo from outside its window
        windows = {(x["op"], x["attempt"]): x["req"]["params"] for x in history if x["type"] == "invoke"
                   and x.get("f") == "pull" and ({"from", "to"} & set(x["req"].get("params", {})))}
        e = _first(history, lambda e: e["type"] == "ok" and (e["op"], e["attempt"]) in windows
                   and e["resp"]["changes"]["todos"]["upserted"])
        outside = "2999-12-31" if "to" in windows[(e["op"], e["attempt"])] else "2000-01-01"
        e["resp"]["changes"]["todos"]["upserted"][0]["deadline"] = outside
    elif name == "diverged":  # a device that missed a change
        dev = next(iter(final["devices"].values()))
        recs = dev["live"]["todos"]
        k = next(iter(recs))
        recs[k] -= 1
    else:
        raise SystemExit(f"unknown injection {name!r}; one of {', '.join(INJECTIONS)}")


# Bugs injected in the server itself (the test build, TODOSYNC_TEST_INJECT; `cluster.sh check --inject`):
# the property each must fail.
SERVER_INJECTIONS = {"skip-opid-lookup": "exactly-once", "ignore-version-check": "no-lost-update",
                     "skip-stats-rebuild": "stats"}

INJECTIONS = {"lost-opid": "exactly-once", "reused-version": "versions", "lost-update": "no-lost-update",
              "stale-read": "read-your-writes", "stats-off": "stats", "diverged": "convergence", "window-leak": "versions"}


def summarize(verdicts: dict[str, list]) -> str:
    return " ".join(f"{p}={'pass' if not v else f'FAIL({len(v)})'}" for p, v in verdicts.items())


def verdict(run_dir: str, inject_name: str | None = None) -> tuple[list[str], bool]:
    """The report of a run directory: one line per property, then the verdict line (kind, seed,
    operation counts, each property's verdict). True when every property holds."""
    history, final = load(run_dir)
    if inject_name:
        inject(inject_name, history, final)
    check = Check(history, final)
    verdicts = check.run()
    lines = []
    for p, v in verdicts.items():
        if v:
            t, text = v[0]
            lines.append(f"{p}: FAIL ({len(v)} violation(s)); earliest at t={t}: {text}")
        else:
            lines.append(f"{p}: pass")
    kinds = defaultdict(int)
    for e in history:
        kinds[e["type"]] += 1
    harness = final.get("workload_errors", []) + final.get("nemesis", {}).get("errors", [])
    if harness:
        lines.append(f"harness errors: {harness[:3]}")
    faults = sum(final.get("nemesis", {}).get("events", {}).values())
    injected = final.get("inject") or []
    for name in injected:
        prop = SERVER_INJECTIONS.get(name)
        lines.append(f"injected {name}: breaks {prop}: {'caught' if verdicts.get(prop) else 'NOT CAUGHT'}")
    lines.append(f"check kind={final['kind']} seed={final['seed']} seconds={final['seconds']:g} "
                 f"{'inject=' + ','.join(injected) + ' ' if injected else ''}ops ok={kinds['ok']} "
                 f"fail={kinds['fail']} info={kinds['info']} push_ops_acked={check.counts['push_ops_acked']} "
                 f"conflicts={check.counts['conflicts']} window_records={check.counts['window_records']} faults={faults} "
                 f"{summarize(verdicts)}")
    return lines, not any(verdicts.values()) and not harness


INJECTION_HELP = ", ".join(f"{k} ({v})" for k, v in INJECTIONS.items())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--inject", choices=sorted(INJECTIONS), help=INJECTION_HELP)
    args = ap.parse_args()
    lines, ok = verdict(args.run_dir, args.inject)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
