"""The workload of `scripts/cluster.sh check`: simulated devices of a few accounts, through the fronts.

Each device is a thread with its own seeded random source, its own local copy of its account (built
only from its pulls: by id, the newest version it received, tombstones included) and its own cursor.
It loops over (a pull 12 % of the time, so copies go stale): pushes (create / update / delete, each policy: reject, client-wins, merge), REST
PATCH with If-Match, REST POST with Idempotency-Key, quick-add with Idempotency-Key, and pulls to
the end of its account's changes. Every acknowledged todo write is read back at once through the
same front (GET /todos/{id}), for read-your-writes. All todos of a run fall on a few dates, so the
accounts' daily stats change all the time; an update may move a todo to another date. Some devices
hold a window (partial sync, API.md "Windows"): they pull with `from`/`to` and the window's cursors,
keep only what the window holds and forget what comes in `left` (`window_for`). One device of
each account is the real `todosync-client` (CliDevice) when its binary is there.

Every attempt of every operation is two lines of the history (docs/HISTORY.md): an `invoke` and
its completion, `ok` (acknowledged), `fail` (the contract says nothing was applied: 4xx, 503, 412)
or `info` (unknown: a timeout, a broken connection, 504 `outcome_unknown`, any other 5xx). An
operation whose outcome is unknown or 503 is resent unchanged (same opId, clientId or
Idempotency-Key) a few times, as a client would.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
import uuid

import requests

DATES = ["2031-05-01", "2031-05-02", "2031-05-03", "2031-05-04"]
POLICIES = ["reject", "client-wins", "merge"]
FIELDS = ("isCompleted", "difficulty", "estimatedTime", "isLife", "title", "deadline")
TIMEOUT = (3.0, 8.0)  # connect, read (seconds): a cut shows as a timeout, never a hang
RESENDS = 3
HOT = 6  # the hot todos of an account
DELIVER_AGAIN = 0.1  # acknowledged pushes sent once more, unchanged (same opIds): a lost answer


class History:
    """Append-only JSON lines, shared by every device thread."""

    def __init__(self, path: str, t0: float):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()
        self.t0 = t0
        self.counts: dict[str, int] = {}

    def write(self, **entry) -> None:
        entry["t"] = round(time.monotonic() - self.t0, 4)
        with self.lock:
            if entry["type"] != "invoke":
                self.counts[entry["type"]] = self.counts.get(entry["type"], 0) + 1
            self.f.write(json.dumps(entry, separators=(",", ":")) + "\n")


def classify(status: int | None) -> str:
    if status is None or status == 504 or (status >= 500 and status != 503):
        return "info"
    return "ok" if 200 <= status < 300 else "fail"


def window_for(account: int, device: int) -> tuple[str | None, str | None] | None:
    """The window (from, to; None: that side open) device `device` of account `account` holds, or
    None for the whole account: device 4 of every account the two middle dates, device 3 of odd
    accounts everything up to the second date, device 2 of account 2 everything from the third."""
    if device == 4:
        return DATES[1], DATES[2]
    if device == 3 and account % 2 == 1:
        return None, DATES[1]
    if device == 2 and account == 2:
        return DATES[2], None
    return None


class Device:
    def __init__(self, name: str, account: dict, front: str, seed: int, history: History, window=None):
        self.name, self.account, self.front = name, account, front
        self.window = window
        self.rng = random.Random(f"device-{name}-{seed}")
        self.history = history
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {account['token']}"
        self.store: dict[str, dict[int, dict]] = {"tags": {}, "todos": {}, "dailyStats": {}}
        self.cursor: str | None = None
        self.device_id = f"{name}-{uuid.uuid4()}"

    # --- one attempt
    def attempt(self, op: str, f: str, attempt: int, method: str, path: str, body=None, headers=None, params=None,
                extra: dict | None = None):
        req = {"method": method, "path": path}
        if body is not None:
            req["body"] = body
        if headers:
            req["headers"] = headers
        if params:
            req["params"] = params
        base = {"process": self.name, "account": self.account["n"], "front": self.front, "op": op, "f": f,
                "attempt": attempt, **(extra or {})}
        self.history.write(type="invoke", req=req, **base)
        status, resp, err = None, None, None
        try:
            r = self.session.request(method, self.front + "/api/v1" + path, json=body, headers=headers, params=params,
                                     timeout=TIMEOUT)
            status = r.status_code
            try:
                resp = r.json()
            except ValueError:
                resp = r.text[:300]
            if status in (200, 201) and r.headers.get("ETag"):
                base["etag"] = r.headers["ETag"]
        except requests.RequestException as exc:
            err = type(exc).__name__
        kind = classify(status)
        self.history.write(type=kind, status=status, resp=resp, error=err, **base)
        return kind, status, resp

    def send(self, f: str, method: str, path: str, body=None, headers=None, params=None, extra=None,
             deliver_again: float = 0.0):
        """Resends an unknown, 429 or 503 outcome unchanged; returns the last (kind, status, body).
        `deliver_again`: the chance that an acknowledged request is sent once more, unchanged, as
        by a client that lost the answer (the second answer is recorded, the first returned)."""
        op = uuid.uuid4().hex
        for attempt in range(1, RESENDS + 2):
            kind, status, resp = self.attempt(op, f, attempt, method, path, body, headers, params, extra)
            if kind == "ok" and deliver_again and self.rng.random() < deliver_again:
                self.attempt(op, f, attempt + 1, method, path, body, headers, params, dict(extra or {}, again=True))
            if kind == "ok" or (kind == "fail" and status not in (429, 503)) or attempt > RESENDS:
                return kind, status, resp
            time.sleep(self.rng.uniform(0.3, 1.0))
        return kind, status, resp

    # --- local state from pulls
    def apply_page(self, page: dict) -> None:
        for kind, lists in page.get("changes", {}).items():
            held = self.store.setdefault(kind, {})
            for rec in lists.get("upserted", []):
                if rec["version"] >= held.get(rec["id"], {}).get("version", -1):
                    held[rec["id"]] = rec
            for tomb in lists.get("deleted", []):
                if tomb["version"] >= held.get(tomb["id"], {}).get("version", -1):
                    held[tomb["id"]] = dict(tomb, deleted=True)
            for gone in lists.get("left", []):  # a window pull: still exists, outside the window now
                if gone["version"] >= held.get(gone["id"], {}).get("version", -1):
                    held.pop(gone["id"], None)

    def pull_to_end(self, f: str = "pull", max_pages: int = 50) -> bool:
        run = uuid.uuid4().hex
        for page_no in range(max_pages):
            params = {"limit": "50", "schemaVersion": "2"}
            if self.window:
                lo, hi = self.window
                params.update({k: v for k, v in (("from", lo), ("to", hi)) if v})
            if self.cursor:
                params["cursor"] = self.cursor
            kind, status, resp = self.send(f, "GET", "/sync/pull", params=params, extra={"run": run, "page": page_no})
            if kind != "ok":
                return False
            self.apply_page(resp)
            self.cursor = resp["cursor"]
            if not resp["hasMore"]:
                return True
        return False

    def live_todos(self) -> list[dict]:
        return [t for t in self.store["todos"].values() if not t.get("deleted") and t.get("deletedAt") is None]

    def pick(self, live: list[dict]) -> dict:
        """Mostly one of the account's few oldest live todos (the same ones on every device of the
        account, so that writes of its devices collide and conflicts are common)."""
        if self.rng.random() < 0.75:
            return self.rng.choice(sorted(live, key=lambda t: t["id"])[:HOT])
        return self.rng.choice(live)

    # --- operations
    def new_todo_data(self) -> dict:
        r = self.rng
        return {"title": f"t-{uuid.uuid4().hex[:12]}", "deadline": r.choice(DATES), "difficulty": r.randint(0, 5),
                "estimatedTime": r.choice([0, 15, 30, 60, 90]), "isLife": r.random() < 0.5,
                "isCompleted": r.random() < 0.4}

    def changed_fields(self, todo: dict) -> tuple[dict, dict]:
        r = self.rng
        data, base = {}, {}
        for name in r.sample(FIELDS, r.randint(1, 2)):
            if name == "isCompleted" or name == "isLife":
                data[name] = not todo[name]
            elif name == "difficulty":
                data[name] = r.randint(0, 5)
            elif name == "deadline":
                data[name] = r.choice(DATES)
            elif name == "estimatedTime":
                data[name] = r.choice([0, 15, 30, 60, 90, 120])
            else:
                data[name] = f"t-{uuid.uuid4().hex[:12]}"
            base[name] = todo[name]
        return data, base

    def read_back(self, todo_id: int, version: int, after: str) -> None:
        self.send("read", "GET", f"/todos/{todo_id}", extra={"after": after, "want_version": version})

    def push(self, ops: list[dict], policy: str) -> None:
        body = {"deviceId": self.device_id, "conflictPolicy": policy, "schemaVersion": 2, "operations": ops}
        kind, status, resp = self.send("push", "POST", "/sync/push", body=body, deliver_again=DELIVER_AGAIN)
        if kind == "ok" and self.rng.random() < 0.7:
            for res in resp.get("results", []):
                if res.get("status") in ("applied", "merged") and res.get("id") and res.get("record"):
                    if res["record"].get("deletedAt") is None:
                        self.read_back(res["id"], res["version"], res["opId"])

    def step(self) -> None:
        r = self.rng
        live = self.live_todos()
        if r.random() < 0.12 or not self.cursor:
            self.pull_to_end()
            return
        # without a live todo to change, only the creating operations
        x = r.random() if live else r.choice([0.1, 0.85, 0.95])
        if x < 0.18:
            ops = [{"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                    "data": self.new_todo_data()} for _ in range(r.randint(1, 3))]
            self.push(ops, r.choice(POLICIES))
        elif x < 0.50:
            todo = self.pick(live)
            data, base = self.changed_fields(todo)
            op = {"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": todo["id"],
                  "baseVersion": todo["version"], "data": data}
            if r.random() < 0.8:
                op["base"] = base
            self.push([op], r.choice(POLICIES))
        elif x < 0.56:
            todo = self.pick(live)
            self.push([{"opId": str(uuid.uuid4()), "entity": "todo", "action": "delete", "id": todo["id"],
                        "baseVersion": todo["version"]}], r.choice(POLICIES))
        elif x < 0.78:
            todo = self.pick(live)
            data, _ = self.changed_fields(todo)
            kind, status, resp = self.send("patch", "PATCH", f"/todos/{todo['id']}", body=data,
                                           headers={"If-Match": f'"{todo["version"]}"'},
                                           extra={"if_match": todo["version"], "id": todo["id"]})
            if kind == "ok":
                self.read_back(resp["id"], resp["version"], "patch")
        elif x < 0.92:
            kind, status, resp = self.send("create", "POST", "/todos", body=self.new_todo_data(),
                                           headers={"Idempotency-Key": uuid.uuid4().hex})
            if kind == "ok":
                self.read_back(resp["id"], resp["version"], "create")
        else:
            words = [f"q-{uuid.uuid4().hex[:12]}" for _ in range(r.randint(1, 3))]
            text = "\n".join(f"{'!' if r.random() < 0.3 else ''}{w} {r.choice(['30m', '1h', '', '*3'])}".strip() for w in words)
            self.send("quick-add", "POST", "/todos/quick-add", body={"text": text, "date": r.choice(DATES)},
                      headers={"Idempotency-Key": uuid.uuid4().hex}, extra={"titles": words})


def register(front: str, n: int, history: History) -> dict:
    email = f"p{n}-{uuid.uuid4().hex[:10]}@partition.test"
    password = "pw-" + uuid.uuid4().hex
    for _ in range(60):
        try:
            r = requests.post(front + "/api/v1/auth/register", json={"email": email, "password": password},
                              timeout=TIMEOUT)
            if r.status_code == 201:
                body = r.json()
                account = {"n": n, "user_id": body["user"]["id"], "token": body["token"], "email": email, "password": password}
                history.write(type="note", f="account", account=n, user_id=account["user_id"])
                return account
            if r.status_code == 409:
                email = f"p{n}-{uuid.uuid4().hex[:10]}@partition.test"
        except requests.RequestException:
            pass
        time.sleep(1)
    raise RuntimeError("could not register an account")


def run_devices(devices: list, seconds: float, errors: list[str]) -> None:
    stop_at = time.monotonic() + seconds

    def loop(dev: Device) -> None:
        try:
            while time.monotonic() < stop_at:
                dev.step()
        except Exception as exc:  # a workload bug, not a server answer: the run fails with it
            errors.append(f"{dev.name}: {exc!r}")

    threads = [threading.Thread(target=loop, args=(d,), name=d.name, daemon=True) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class CliDevice:
    """A device running the real `todosync-client` (its own SQLite store): it adds todos offline
    and syncs; each command is one invoke and one completion in the history (`f`: `cli-add`,
    `cli-sync`, ...; `ok` for exit 0 or 6, `info` for 3 (offline or timed out), else `fail`)."""

    def __init__(self, name: str, account: dict, front: str, seed: int, history: History, binary: str, workdir: str):
        self.name, self.account, self.front, self.binary = name, account, front, binary
        self.rng = random.Random(f"cli-{name}-{seed}")
        self.history = history
        self.db = os.path.join(workdir, f"{name}.sqlite")
        self.env = dict(os.environ, TODOSYNC_PASSWORD=account["password"], TODOSYNC_CLIENT_REQUEST_TIMEOUT="8")
        self.added: list[str] = []

    def run(self, *args: str) -> tuple[int | None, dict | None]:
        op = uuid.uuid4().hex
        base = {"process": self.name, "account": self.account["n"], "front": self.front, "op": op, "f": f"cli-{args[0]}",
                "attempt": 1}
        self.history.write(type="invoke", req={"argv": list(args)}, **base)
        rc, out, err = None, None, None
        try:
            proc = subprocess.run([self.binary, *args, "--db", self.db, "--json"], capture_output=True, text=True,
                                  timeout=120, env=self.env)
            rc = proc.returncode
            text = proc.stdout.strip() or proc.stderr.strip()
            try:
                out = json.loads(text.splitlines()[-1]) if text else None
            except ValueError:
                err = text[-300:]
        except subprocess.TimeoutExpired:
            err = "TimeoutExpired"
        kind = "ok" if rc in (0, 6) else "info" if rc in (3, None) else "fail"
        self.history.write(type=kind, status=rc, resp=out, error=err, **base)
        return rc, out

    def login(self) -> None:
        for _ in range(10):
            rc, _ = self.run("login", "--server", self.front, "--email", self.account["email"])
            if rc == 0:
                return
            time.sleep(1)
        raise RuntimeError(f"{self.name}: todosync-client could not log in")

    def step(self) -> None:
        if self.rng.random() < 0.5:
            word = f"c-{uuid.uuid4().hex[:12]}"
            rc, out = self.run("add", "--date", self.rng.choice(DATES), f"{word} {self.rng.choice(['30m', '1h', '*2'])}")
            if rc == 0:
                self.added.append(word)
        else:
            self.run("sync")
        time.sleep(self.rng.uniform(0.2, 0.6))

    def final(self) -> dict:
        synced = False
        for _ in range(10):
            rc, _ = self.run("sync")
            if rc == 0:
                synced = True
                break
            time.sleep(2)
        rc, out = self.run("list", "--all")
        todos = [{"serverId": t["serverId"], "version": t["version"], "title": t["title"], "pending": t["pending"]}
                 for t in (out or {}).get("todos", [])]
        return {"account": self.account["n"], "synced": synced and rc == 0, "added": self.added, "todos": todos}
