#!/usr/bin/env python3
"""TodoSync benchmark scenarios and report (standard library only).

Run by bench/run.sh against a seeded private stack; prints the results table and writes every
figure to $BENCH_RESULTS/*.json. Configuration comes from the BENCH_* environment variables that
run.sh documents. Every phase is bounded in time (wrk -d, a deadline for the Python drivers) and
talks to 127.0.0.1 only.

Per phase it records requests/s, latency percentiles, records/s (pulls) or operations/s (pushes),
responder RSS before and after, and where the two cores went: the stack's processes (nginx,
responders, MariaDB), the load generator, and everything else on the machine ("other": noise
from other users of the box); the stack's parts also as CPU microseconds per request. Each route
is reported as a fraction of its own ceiling measured in the same run (CEILING_OF).
"""

import argparse
import gzip
import http.client
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import zlib


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


BASE_URL = os.environ.get("BENCH_BASE_URL", "http://127.0.0.1:19080")
RESULTS = os.environ.get("BENCH_RESULTS", "/tmp/todosync-bench")
WRK_DIR = os.environ.get("BENCH_WRK_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk"))
USERS = env_int("BENCH_USERS", 200)
TAGS = env_int("BENCH_TAGS", 50)
TODOS = env_int("BENCH_TODOS", 5000)
DAYS = env_int("BENCH_DAYS", 365)
START_DATE = os.environ.get("BENCH_START_DATE", "2025-01-01")
SALT = os.environ.get("BENCH_TOKEN_SALT", "s0")
DURATION = env_int("BENCH_DURATION", 20)
PUSH_DURATION = env_int("BENCH_PUSH_DURATION", 20)
WARMUP = env_int("BENCH_WARMUP", 2)
CONNECTIONS = env_int("BENCH_CONNECTIONS", 32)
THREADS = env_int("BENCH_THREADS", 2)
PULL_USERS = env_int("BENCH_PULL_USERS", 20)
INCREMENTAL_USERS = env_int("BENCH_INCREMENTAL_USERS", 20)
PUSH_OPS = env_int("BENCH_PUSH_OPS", 100)
MIXED_PUSH_OPS = env_int("BENCH_MIXED_PUSH_OPS", 10)
GZIP = os.environ.get("BENCH_GZIP", "0") == "1"  # the current variant's; set per variant by main()
VARIANTS = [v.strip() for v in os.environ.get("BENCH_VARIANTS", "plain,gzip").split(",") if v.strip()]
PEER_URL = os.environ.get("BENCH_PEER_URL", "")
PEER_TOKENS = os.environ.get("BENCH_PEER_TOKENS", "")
PEER_RUN = os.environ.get("BENCH_PEER_RUN", "")
BIG_USER_RECORDS = env_int("BENCH_BIG_USER_RECORDS", 0)
SCENARIOS = os.environ.get("BENCH_SCENARIOS", "all")
QUICK = os.environ.get("BENCH_QUICK", "0") == "1"

ALL_SCENARIOS = ["ceilings", "todos_by_date", "stats_by_month", "full_pull", "pull_pages",
                 "incremental_pull", "push", "mixed", "push_compare"]
# push_compare: the push phase with another responder binary ("before", e.g. main's release build)
# and this run's ("after"), alternating, BENCH_PUSH_ROUNDS rounds, each round's order swapped.
PUSH_BEFORE_BIN = os.environ.get("BENCH_PUSH_BEFORE_BIN", "")
PUSH_ROUNDS = env_int("BENCH_PUSH_ROUNDS", 3)

# Targets (issue 11): ratios to the PHP peer measured in the same run, plain and gzip.
TARGET_PEER_RATIO = 2.5          # pull pages of 500 and GET todos by date, each >= 2.5x the peer
TARGET_BIG_PULL_S = 0.5          # first full pull of a user with BIG_USER_RECORDS (65,000) records
TARGET_PUSH_OPS = 6000           # push operations/s with the feed and stats maintained (issue 25; was 5,000)
TARGET_RSS_MB = 64
TARGET_CEILING_FRACTION = 0.8    # GET todos by date >= 80 % of ceiling 2 (issue 25)

# Each route's own ceiling (issue 25), measured in the same run: todos by date (and stats by
# month, the same shape: one statement that checks the token and reads the rows) against
# ceiling 2, pull pages against ceiling 3 of the same variant (plain or gzip).
CEILING_OF = {"todos_by_date": "ceiling_db", "stats_by_month": "ceiling_db", "pull_pages": "ceiling_page"}

CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def token_of(user_id):
    return f"bench-{SALT}-{user_id}"


LAYOUT = os.environ.get("BENCH_SEED_LAYOUT", "interleaved")


def todo_id(user_id, k):
    """The id bench/seed.sh gave todo k (1-based) of a user."""
    return (k - 1) * USERS + user_id if LAYOUT == "interleaved" else (user_id - 1) * TODOS + k


# --- the stack's processes ------------------------------------------------------------------

class Stack:
    def __init__(self, stack_script):
        self.script = stack_script
        self.state = os.environ["TODOSYNC_STATE_DIR"]

    def restart_responders(self, binary):
        """Restarts the responders with another binary; MariaDB and nginx keep running (warm)."""
        subprocess.run([self.script, "responders-restart"], env={**os.environ, "TODOSYNC_BIN": binary},
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def responder_pids(self):
        out = subprocess.run([self.script, "responder-pids"], capture_output=True, text=True, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    @staticmethod
    def _read_pid(path):
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _children(parent):
        kids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent:
                    kids.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
        return kids

    def server_pids(self):
        """The stack's processes by part: {"nginx": {...}, "app": {...}, "db": {...}}."""
        groups = {"nginx": set(), "app": set(self.responder_pids()), "db": set()}
        db = self._read_pid(os.path.join(self.state, "mariadb", "mariadbd.pid"))  # mariadbd's own --pid-file
        if db:
            groups["db"].add(db)
        nginx = self._read_pid(os.path.join(self.state, "nginx", "nginx.pid"))
        if nginx:
            groups["nginx"].add(nginx)
            groups["nginx"].update(self._children(nginx))
        return groups

    def rss_mb(self):
        total_kb = 0
        for pid in self.responder_pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total_kb += int(line.split()[1])
            except OSError:
                pass
        return total_kb / 1024.0


def proc_cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime, all threads
    except (OSError, IndexError, ValueError):
        return 0


def system_ticks():
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    steal = values[7] if len(values) > 7 else 0
    return sum(values[:8]) - idle - steal, steal  # busy (without steal), steal


class PeerStack:
    """The PHP-FPM peer's processes (from its pid files), for the CPU split and php-fpm's RSS."""

    def __init__(self, run_dir):
        self.run = run_dir

    def _tree(self, pidfile):
        pid = Stack._read_pid(os.path.join(self.run, pidfile))
        if not pid:
            return set()
        return {pid, *Stack._children(pid)}

    def server_pids(self):
        return {"nginx": self._tree("nginx.pid"), "app": self._tree("php-fpm.pid"), "db": self._tree("mysqld.pid")}

    def rss_mb(self):
        total_kb = 0
        for pid in self._tree("php-fpm.pid"):
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total_kb += int(line.split()[1])
            except OSError:
                pass
        return total_kb / 1024.0


class CpuMeter:
    """Where the CPU went during a phase, in cores (CPU seconds per wall second)."""

    def __init__(self, stack):
        self.stack = stack

    def __enter__(self):
        self.groups = self.stack.server_pids()
        self.t0 = time.monotonic()
        self.busy0, self.steal0 = system_ticks()
        self.server0 = {part: {pid: proc_cpu_ticks(pid) for pid in pids} for part, pids in self.groups.items()}
        self.children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        return self

    def __exit__(self, *exc):
        wall = time.monotonic() - self.t0
        busy, steal = system_ticks()
        parts = {part: sum(max(0, proc_cpu_ticks(pid) - t) for pid, t in ticks.items()) / CLK_TCK
                 for part, ticks in self.server0.items()}
        server = sum(parts.values())
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        me = resource.getrusage(resource.RUSAGE_SELF)
        client = (children.ru_utime + children.ru_stime - self.children0.ru_utime - self.children0.ru_stime
                  + me.ru_utime + me.ru_stime - self.self0.ru_utime - self.self0.ru_stime)
        total = (busy - self.busy0) / CLK_TCK
        wall = max(wall, 1e-6)
        self.result = {
            "wallSeconds": round(wall, 3),
            "serverCores": round(server / wall, 2),
            "nginxCores": round(parts["nginx"] / wall, 2),
            "responderCores": round(parts["app"] / wall, 2),
            "databaseCores": round(parts["db"] / wall, 2),
            "clientCores": round(client / wall, 2),
            "otherCores": round(max(0.0, total - server - client) / wall, 2),
            "stealCores": round((steal - self.steal0) / CLK_TCK / wall, 2),
            # unrounded CPU seconds of the stack's parts, for CPU per request (cpu_us_per_request)
            "nginxSeconds": parts["nginx"], "responderSeconds": parts["app"], "databaseSeconds": parts["db"],
        }
        return False


# --- HTTP helpers ---------------------------------------------------------------------------

_base = urllib.parse.urlsplit(BASE_URL)


def connection():
    return http.client.HTTPConnection(_base.hostname, _base.port or 80, timeout=30)


def headers_for(user_id, body=False):
    h = {"Authorization": f"Bearer {token_of(user_id)}"}
    if GZIP:
        h["Accept-Encoding"] = "gzip"
    if body:
        h["Content-Type"] = "application/json"
    return h


def request_json(conn, method, path, user_id, body=None):
    payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    conn.request(method, path, body=payload, headers=headers_for(user_id, body is not None))
    response = conn.getresponse()
    data = response.read()
    if response.getheader("Content-Encoding") == "gzip":
        data = gzip.decompress(data)
    if response.status != 200:
        raise RuntimeError(f"{method} {path} -> {response.status}: {data[:300]!r}")
    return json.loads(data)


def page_records(page):
    n = 0
    for kind in page["changes"].values():
        n += len(kind["upserted"]) + len(kind["deleted"])
    return n


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def sample_users(count):
    """`count` distinct user ids spread over 1..USERS."""
    count = max(1, min(count, USERS))
    step = USERS / count
    return sorted({int(i * step) + 1 for i in range(count)})


def full_pull(conn, user_id, cursor=None, limit=None):
    """Follows pages until hasMore is false. Returns (pages, records, [(cursor, page records, kinds)], end cursor)."""
    pages, records, trail = 0, 0, []
    while True:
        query = {}
        if cursor:
            query["cursor"] = cursor
        if limit:
            query["limit"] = str(limit)
        path = "/api/v1/sync/pull" + ("?" + urllib.parse.urlencode(query) if query else "")
        page = request_json(conn, "GET", path, user_id)
        n = page_records(page)
        kinds = {k: len(v["upserted"]) + len(v["deleted"]) for k, v in page["changes"].items()}
        trail.append((cursor or "", n, kinds))
        pages += 1
        records += n
        cursor = page["cursor"]
        if not page["hasMore"]:
            return pages, records, trail, cursor


_TAIL = re.compile(rb'"cursor":"([A-Za-z0-9_-]+)","hasMore":(true|false)(?:,"schemaVersion":\d+)?}\s*$')


def full_pull_bytes(conn, user_id):
    """A whole first pull like `full_pull`, without decoding the pages as JSON: the client's
    parse of 130 pages would otherwise dominate the figure of a big user's pull on a busy box. The
    cursor and hasMore come from the page's tail (the contract puts them last in our bodies, before
    the optional schemaVersion);
    records are counted by their one `"version":` member each. Returns (pages, records)."""
    cursor, pages, records = None, 0, 0
    while True:
        path = "/api/v1/sync/pull" + ("?" + urllib.parse.urlencode({"cursor": cursor}) if cursor else "")
        conn.request("GET", path, headers=headers_for(user_id))
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Content-Encoding") == "gzip":
            data = gzip.decompress(data)
        if response.status != 200:
            raise RuntimeError(f"GET {path} -> {response.status}: {data[:300]!r}")
        tail = _TAIL.search(data[-300:])
        if not tail:
            raise RuntimeError(f"pull page without a cursor/hasMore tail: {data[-300:]!r}")
        pages += 1
        records += data.count(b'"version":')
        cursor = tail.group(1).decode()
        if tail.group(2) == b"false":
            return pages, records


def push_ops(user_id, count, rng, label):
    """`count` fresh operations: alternating creates and updates of existing todos."""
    ops = []
    for k in range(count):
        if k % 2 == 0:
            day = rng.randrange(DAYS)
            ops.append({
                "opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                "data": {"title": f"{label} {k}", "deadline": date_plus(day), "difficulty": rng.randrange(6),
                         "estimatedTime": 15 * rng.randrange(9), "isLife": rng.random() < 0.3,
                         "isImportant": rng.random() < 0.15},
            })
        else:
            ops.append({
                "opId": str(uuid.uuid4()), "entity": "todo", "action": "update",
                "id": todo_id(user_id, rng.randrange(1, TODOS + 1)),
                "data": {"isCompleted": rng.random() < 0.5, "title": f"{label} edit {rng.randrange(10**9)}"},
            })
    return ops


_start = time.strptime(START_DATE, "%Y-%m-%d")


def date_plus(days):
    t = time.mktime((_start.tm_year, _start.tm_mon, _start.tm_mday + days, 12, 0, 0, 0, 0, -1))
    return time.strftime("%Y-%m-%d", time.localtime(t))


# --- phases ---------------------------------------------------------------------------------

class Bench:
    def __init__(self, stack):
        self.stack = stack
        self.results = {}
        os.makedirs(RESULTS, exist_ok=True)
        self.tokens_file = os.path.join(RESULTS, "tokens.txt")
        with open(self.tokens_file, "w") as f:
            for u in range(1, USERS + 1):
                f.write(f"{u} {token_of(u)}\n")
        self.pull_cursors_file = os.path.join(RESULTS, "cursors-todo-pages.txt")
        self.all_cursors_file = os.path.join(RESULTS, "cursors-all.txt")
        self.end_cursors = {}
        self.suffix = ""  # "" for the plain variant, "+gzip" for the gzip one
        self.peer_stack = PeerStack(PEER_RUN) if PEER_URL else None
        if PEER_URL:
            # The peer's tokens (one per line, users 1..U in order) and its pull positions: the
            # peer's cursor is a version, todo k of a user has version k, so positions 0, 500, ...
            # give the same 500-todo pages our stored cursors give, for the same sampled users.
            self.peer_tokens_file = os.path.join(RESULTS, "peer-tokens.txt")
            with open(PEER_TOKENS) as f, open(self.peer_tokens_file, "w") as out:
                for u, token in enumerate((line.strip() for line in f if line.strip()), start=1):
                    out.write(f"{u} {token}\n")
            self.peer_cursors_file = os.path.join(RESULTS, "peer-cursors.txt")
            with open(self.peer_cursors_file, "w") as f:
                for u in sample_users(PULL_USERS):
                    for position in range(0, TODOS - 500 + 1, 500):
                        f.write(f"{u}\t{position}\n")

    def save(self, name, result):
        name += self.suffix
        self.results[name] = result
        with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=2)

    def wrk(self, name, script, path="/", duration=None, extra_env=None, peer=False):
        """One wrk phase against our stack, or with `peer` the same script against the peer."""
        duration = duration or DURATION
        out = os.path.join(RESULTS, f"{name}{self.suffix}.wrk.json")
        env = dict(os.environ, BENCH_WRK_DIR=WRK_DIR, BENCH_TOKENS_FILE=self.tokens_file, BENCH_WRK_OUT=out,
                   BENCH_CURSORS_FILE=self.pull_cursors_file, BENCH_GZIP="1" if GZIP else "0")
        stack = self.stack
        if peer:
            env.update(BENCH_TOKENS_FILE=self.peer_tokens_file, BENCH_CURSORS_FILE=self.peer_cursors_file)
            stack = self.peer_stack
        env.update(extra_env or {})
        cmd = ["wrk", "-t", str(THREADS), "-c", str(CONNECTIONS), "--timeout", "10s",
               "-s", os.path.join(WRK_DIR, script), (PEER_URL if peer else BASE_URL) + path]
        if WARMUP > 0:
            subprocess.run(cmd[:1] + ["-d", f"{WARMUP}s"] + cmd[1:], env=dict(env, BENCH_WRK_OUT=out + ".warmup"),
                           stdout=subprocess.DEVNULL, check=True, timeout=WARMUP + 60)
        rss0 = stack.rss_mb()
        with CpuMeter(stack) as cpu:
            proc = subprocess.run(cmd[:1] + ["-d", f"{duration}s"] + cmd[1:], env=env, capture_output=True,
                                  text=True, timeout=duration + 60)
        if proc.returncode != 0:
            raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr or proc.stdout}")
        with open(out) as f:
            raw = json.load(f)
        seconds = raw["durationUs"] / 1e6
        lat = raw["latencyUs"]
        errors = raw["errors"]
        result = {
            "kind": "wrk", "script": script, "path": path, "connections": CONNECTIONS, "threads": THREADS,
            "seconds": round(seconds, 2), "requests": raw["requests"],
            "rps": raw["requests"] / seconds if seconds else 0.0,
            "p50Ms": lat["p50"] / 1000, "p90Ms": lat["p90"] / 1000, "p99Ms": lat["p99"] / 1000,
            "p999Ms": lat["p999"] / 1000, "maxMs": lat["max"] / 1000, "meanMs": lat["mean"] / 1000,
            "mbPerSecond": raw["bytes"] / seconds / 1e6 if seconds else 0.0,
            "errors": sum(errors.values()), "errorDetail": errors,
            "rssBeforeMB": rss0, "rssAfterMB": stack.rss_mb(), "cpu": cpu.result, "gzip": GZIP,
        }
        if "counters" in raw:
            result["counters"] = raw["counters"]
        return result

    def run_ceilings(self):
        log(f"ceiling: nginx return 200 ({DURATION} s)")
        self.save("ceiling_nginx", self.wrk("ceiling_nginx", "static.lua", "/__bench/nginx"))
        log(f"ceiling 1: FastCGI responder without database ({DURATION} s)")
        self.save("ceiling_fastcgi", self.wrk("ceiling_fastcgi", "static.lua", "/__bench/fastcgi"))

    def fill_page_ceiling(self):
        """Ceiling 3's page: a real pull page of 500 todos (the first stored cursor's), fetched as
        identity and PUT to /__bench/page. Each responder process holds its own copy and nginx
        spreads requests round-robin, so it is PUT several times per responder, then checked."""
        with open(self.pull_cursors_file) as f:
            u, cursor = next(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
        conn = connection()
        conn.request("GET", "/api/v1/sync/pull" + (f"?cursor={cursor}" if cursor else ""),
                     headers={"Authorization": f"Bearer {token_of(int(u))}"})
        response = conn.getresponse()
        page = response.read()
        if response.status != 200 or response.getheader("Content-Encoding"):
            raise RuntimeError(f"ceiling page: GET pull -> {response.status} {page[:200]!r}")
        for _ in range(8 * env_int("TODOSYNC_RESPONDERS", 1)):
            conn.request("PUT", "/__bench/page", body=page, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 204:
                raise RuntimeError(f"ceiling page: PUT /__bench/page -> {response.status}")
        for _ in range(8 * env_int("TODOSYNC_RESPONDERS", 1)):
            conn.request("GET", "/__bench/page")
            response = conn.getresponse()
            if response.read() != page:
                raise RuntimeError("ceiling page: GET /__bench/page did not answer the stored page")
        conn.close()
        self.page_bytes = len(page)

    def run_ceiling_page(self):
        # Filled before each variant: the responders forget the page when they restart
        # (push_compare restarts them between the variants).
        self.fill_page_ceiling()
        log(f"ceiling 3: a {self.page_bytes:,}-byte pull page served from the responder's memory ({DURATION} s){self.suffix}")
        result = self.wrk("ceiling_page", "ceiling.lua", "/__bench/page")
        result["pageBytes"] = self.page_bytes
        self.save("ceiling_page", result)

    def run_ceiling_db(self):
        log(f"ceiling 2: ceiling 1 plus the bearer-token check, one statement round trip ({DURATION} s){self.suffix}")
        self.save("ceiling_db", self.wrk("ceiling_db", "ceiling.lua", "/__bench/db"))

    def store_days(self):
        """What todosync-store-days.timer does every minute in a deployment: store again the day
        lists earlier phases' pushes of many dates marked (the plain variant's push and mixed
        phases, before the gzip variant's), so that the phase reads what a deployment serves a
        minute later. Timed, reported on its own, outside every measured phase."""
        started = time.monotonic()
        proc = subprocess.run([self.stack.script, "store-days"], capture_output=True, text=True, check=True,
                              env={**os.environ, "TODOSYNC_LOG_LEVEL": "warning"}, timeout=1800)
        result = {"kind": "store_days", "seconds": round(time.monotonic() - started, 2),
                  "report": proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""}
        log(f"{result['report']} in {result['seconds']} s (the store-days timer's pass){self.suffix}")
        self.save("store_days", result)

    def run_todos_by_date(self):
        self.store_days()
        self.run_ceiling_db()
        log(f"GET todos by date, random user and date ({DURATION} s){self.suffix}")
        self.save("todos_by_date", self.wrk("todos_by_date", "todos_by_date.lua"))
        if PEER_URL:
            log(f"peer: GET todos by date, random user and date ({DURATION} s){self.suffix}")
            self.save("peer_todos_by_date", self.wrk("peer_todos_by_date", "todos_by_date.lua", peer=True))

    def run_stats_by_month(self):
        log(f"GET daily stats by month, random user and month ({DURATION} s)")
        self.save("stats_by_month", self.wrk("stats_by_month", "stats_by_month.lua"))

    def collect_cursors(self, u, trail, end, todo_pages, all_cursors):
        """Remembers a user's pull cursors: every page's, and those whose page is 500 todos."""
        self.end_cursors[u] = end
        for cursor, n, kinds in trail:
            all_cursors.append((u, cursor))
            if cursor and n == 500 and kinds.get("todos") == 500:
                todo_pages.append((u, cursor))
        all_cursors.append((u, end))

    def write_cursor_files(self, todo_pages, all_cursors):
        """The cursor files the wrk pull scripts read (user TAB cursor per line)."""
        with open(self.pull_cursors_file, "w") as f:
            for u, c in (todo_pages or all_cursors):
                f.write(f"{u}\t{c}\n")
        with open(self.all_cursors_file, "w") as f:
            for u, c in all_cursors:
                f.write(f"{u}\t{c}\n")

    def run_full_pull(self):
        users = sample_users(PULL_USERS)
        log(f"first full pull (all pages, limit 500), {len(users)} users one after another")
        conn = connection()
        times, records, pages, todo_pages, all_cursors = [], [], [], [], []
        rss0 = self.stack.rss_mb()
        with CpuMeter(self.stack) as cpu:
            for u in users:
                t0 = time.perf_counter()
                n_pages, n_records, trail, end = full_pull(conn, u)
                elapsed = time.perf_counter() - t0
                times.append(elapsed)
                records.append(n_records)
                pages.append(n_pages)
                self.collect_cursors(u, trail, end, todo_pages, all_cursors)
            big_times, big_records = [], 0
            if BIG_USER_RECORDS:
                for _ in range(3):
                    t0 = time.perf_counter()
                    _, big_records = full_pull_bytes(conn, USERS + 1)
                    big_times.append(time.perf_counter() - t0)
        conn.close()
        self.write_cursor_files(todo_pages, all_cursors)
        if big_times:
            self.save("big_pull", {"kind": "python", "records": big_records, "seconds": big_times,
                                   "p50Ms": statistics.median(big_times) * 1000, "maxMs": max(big_times) * 1000,
                                   "recordsPerSecond": big_records / statistics.median(big_times), "errors": 0})
        total_time = sum(times)
        self.save("full_pull", {
            "kind": "python", "users": len(users), "connections": 1,
            "recordsPerPull": statistics.median(records), "pagesPerPull": statistics.median(pages),
            "rps": sum(pages) / total_time, "recordsPerSecond": sum(records) / total_time,
            "p50Ms": percentile(times, 50) * 1000, "p99Ms": percentile(times, 99) * 1000,
            "maxMs": max(times) * 1000, "meanMs": statistics.mean(times) * 1000,
            "pullSecondsP50": percentile(times, 50), "pullSecondsMax": max(times),
            "todoPages": len(todo_pages), "errors": 0,
            "rssBeforeMB": rss0, "rssAfterMB": self.stack.rss_mb(), "cpu": cpu.result,
        })

    def run_pull_pages(self):
        if not os.path.exists(self.pull_cursors_file):
            self.run_full_pull_untimed()
        self.run_ceiling_page()
        log(f"pull pages of 500 todos from stored cursors ({DURATION} s){self.suffix}")
        result = self.wrk("pull_pages", "pull_pages.lua")
        with open(self.pull_cursors_file) as f:
            n_cursors = sum(1 for _ in f)
        result["cursors"] = n_cursors
        result["recordsPerPage"] = 500
        result["recordsPerSecond"] = result["rps"] * 500
        self.save("pull_pages", result)
        if "gzip_levels" not in self.results:
            self.measure_gzip_levels()
        if PEER_URL:
            log(f"peer: pull pages of 500 todos from positions of the same users ({DURATION} s){self.suffix}")
            result = self.wrk("peer_pull_pages", "pull_pages.lua", peer=True)
            result["recordsPerPage"] = 500
            result["recordsPerSecond"] = result["rps"] * 500
            self.save("peer_pull_pages", result)

    def run_full_pull_untimed(self):
        conn = connection()
        todo_pages, all_cursors = [], []
        for u in sample_users(PULL_USERS):
            _, _, trail, end = full_pull(conn, u)
            self.collect_cursors(u, trail, end, todo_pages, all_cursors)
        conn.close()
        self.write_cursor_files(todo_pages, all_cursors)

    def measure_gzip_levels(self):
        """What nginx's gzip_comp_level costs and saves on our real bodies: 10 pull pages of 500
        todos and 20 lists by date fetched as identity, each compressed with zlib (the deflate nginx
        uses, same 32 KiB window) at several levels: size ratio and CPU microseconds per body."""
        with open(self.pull_cursors_file) as f:
            cursors = [line.rstrip("\n").split("\t", 1) for line in f if "\t" in line]
        conn = connection()
        bodies = {"pull page": [], "todos by date": []}
        for u, cursor in cursors[:: max(1, len(cursors) // 10)][:10]:
            conn.request("GET", f"/api/v1/sync/pull?cursor={cursor}", headers={"Authorization": f"Bearer {token_of(int(u))}"})
            bodies["pull page"].append(conn.getresponse().read())
        for i in range(20):
            conn.request("GET", f"/api/v1/todos?date={date_plus(i * 17 % DAYS)}",
                         headers={"Authorization": f"Bearer {token_of(1 + i * 7 % USERS)}"})
            bodies["todos by date"].append(conn.getresponse().read())
        conn.close()
        result = {}
        for kind, items in bodies.items():
            raw = sum(len(b) for b in items)
            rows = []
            for level in (1, 2, 4, 6, 9):
                out, t0 = 0, time.process_time()
                for b in items:
                    c = zlib.compressobj(level, zlib.DEFLATED, 16 + 15, 8)
                    out += len(c.compress(b) + c.flush())
                rows.append({"level": level, "ratio": out / raw,
                             "usPerBody": (time.process_time() - t0) / len(items) * 1e6})
            result[kind] = {"bytesPerBody": raw / len(items), "levels": rows}
        self.results["gzip_levels"] = result
        with open(os.path.join(RESULTS, "gzip_levels.json"), "w") as f:
            json.dump(result, f, indent=2)

    def run_incremental_pull(self):
        users = sample_users(INCREMENTAL_USERS)
        log(f"incremental pull: 100 changes by push, then pull from the previous cursor, {len(users)} users")
        conn = connection()
        rng = random.Random(42)
        for u in users:  # users without a stored end cursor get one, untimed
            if u not in self.end_cursors:
                self.end_cursors[u] = full_pull(conn, u)[3]
        pull_times, push_times, records, pages = [], [], [], []
        rss0 = self.stack.rss_mb()
        with CpuMeter(self.stack) as cpu:
            for u in users:
                body = {"deviceId": str(uuid.uuid4()), "conflictPolicy": "merge",
                        "operations": push_ops(u, 100, rng, "Incremental")}
                t0 = time.perf_counter()
                reply = request_json(conn, "POST", "/api/v1/sync/push", u, body)
                push_times.append(time.perf_counter() - t0)
                bad = [r for r in reply["results"] if r["status"] not in ("applied", "merged")]
                if bad:
                    raise RuntimeError(f"push for user {u}: {len(bad)} operations not applied: {bad[0]}")
                t0 = time.perf_counter()
                n_pages, n_records, _, end = full_pull(conn, u, cursor=self.end_cursors[u])
                pull_times.append(time.perf_counter() - t0)
                self.end_cursors[u] = end
                records.append(n_records)
                pages.append(n_pages)
        conn.close()
        total = sum(pull_times)
        self.save("incremental_pull", {
            "kind": "python", "users": len(users), "connections": 1, "changesPushed": 100,
            "recordsPerPull": statistics.median(records), "pagesPerPull": statistics.median(pages),
            "rps": sum(pages) / total, "recordsPerSecond": sum(records) / total,
            "p50Ms": percentile(pull_times, 50) * 1000, "p99Ms": percentile(pull_times, 99) * 1000,
            "maxMs": max(pull_times) * 1000,
            "pushP50Ms": percentile(push_times, 50) * 1000, "pushP99Ms": percentile(push_times, 99) * 1000,
            "errors": 0, "rssBeforeMB": rss0, "rssAfterMB": self.stack.rss_mb(), "cpu": cpu.result,
        })

    def run_push(self, name="push"):
        devices = min(CONNECTIONS, USERS)
        if devices < CONNECTIONS:
            log(f"push: only {USERS} users, so {devices} devices instead of {CONNECTIONS}")
        users = sample_users(devices)
        log(f"push: {len(users)} devices (distinct users) x {PUSH_OPS}-operation batches ({PUSH_DURATION} s)")
        lock = threading.Lock()
        latencies, statuses, failures = [], {}, []
        pushes = [0]
        start_barrier = threading.Barrier(len(users) + 1)
        stop_at = [0.0]

        def device(u, seed):
            rng = random.Random(seed)
            conn = connection()
            start_barrier.wait()
            try:
                while time.monotonic() < stop_at[0]:
                    body = json.dumps({"deviceId": str(uuid.uuid4()), "conflictPolicy": "merge",
                                       "operations": push_ops(u, PUSH_OPS, rng, "Pushed")},
                                      separators=(",", ":")).encode()
                    t0 = time.perf_counter()
                    conn.request("POST", "/api/v1/sync/push", body=body, headers=headers_for(u, True))
                    response = conn.getresponse()
                    data = response.read()
                    elapsed = time.perf_counter() - t0
                    if response.getheader("Content-Encoding") == "gzip":
                        data = gzip.decompress(data)
                    if response.status != 200:
                        with lock:
                            failures.append(f"HTTP {response.status}: {data[:200]!r}")
                        continue
                    counts = {}
                    for r in json.loads(data)["results"]:
                        counts[r["status"]] = counts.get(r["status"], 0) + 1
                    with lock:
                        latencies.append(elapsed)
                        pushes[0] += 1
                        for k, v in counts.items():
                            statuses[k] = statuses.get(k, 0) + v
            except Exception as error:  # noqa: BLE001 - reported below
                with lock:
                    failures.append(repr(error))
            finally:
                conn.close()

        threads = [threading.Thread(target=device, args=(u, i), daemon=True) for i, u in enumerate(users)]
        for t in threads:
            t.start()
        rss0 = self.stack.rss_mb()
        with CpuMeter(self.stack) as cpu:
            t_start = time.monotonic()
            stop_at[0] = t_start + PUSH_DURATION
            start_barrier.wait()
            for t in threads:
                t.join(PUSH_DURATION + 120)
            seconds = time.monotonic() - t_start
        applied = statuses.get("applied", 0) + statuses.get("merged", 0)
        self.save(name, {
            "kind": "python", "devices": len(users), "opsPerPush": PUSH_OPS, "seconds": round(seconds, 2),
            "requests": pushes[0], "rps": pushes[0] / seconds, "opsPerSecond": applied / seconds,
            "statuses": statuses, "errors": len(failures) + sum(v for k, v in statuses.items()
                                                               if k not in ("applied", "merged")),
            "failures": failures[:5],
            "p50Ms": (percentile(latencies, 50) or 0) * 1000, "p99Ms": (percentile(latencies, 99) or 0) * 1000,
            "maxMs": max(latencies, default=0) * 1000,
            "rssBeforeMB": rss0, "rssAfterMB": self.stack.rss_mb(), "cpu": cpu.result,
        })

    def run_push_compare(self):
        if not PUSH_BEFORE_BIN:
            log("push_compare: BENCH_PUSH_BEFORE_BIN is not set: skipped")
            return
        after_bin = os.environ["TODOSYNC_BIN"]
        for r in range(1, PUSH_ROUNDS + 1):
            order = [("before", PUSH_BEFORE_BIN), ("after", after_bin)]
            for label, binary in (order if r % 2 else order[::-1]):
                log(f"push_compare: round {r}, {label} ({binary})")
                self.stack.restart_responders(binary)
                self.run_push(name=f"push_{label}_{r}")
                if label == "before":
                    # A binary without Sql/023 does not maintain the stats' sums: rebuild the pushed
                    # users' (unmeasured) so the next "after" phase starts from true sums.
                    t0 = time.monotonic()
                    for u in sample_users(min(CONNECTIONS, USERS)):
                        subprocess.run([self.stack.script, "recompute-stats", "--user", str(u)],
                                       env={**os.environ, "TODOSYNC_BIN": after_bin}, check=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    log(f"push_compare: pushed users' stats rebuilt in {time.monotonic() - t0:.1f} s")
        self.stack.restart_responders(after_bin)

    def run_mixed(self):
        if not os.path.exists(self.all_cursors_file):
            self.run_full_pull_untimed()
        log(f"mixed: 80% REST reads, 15% pulls, 5% pushes of {MIXED_PUSH_OPS} operations ({DURATION} s)")
        result = self.wrk("mixed", "mixed.lua", extra_env={"BENCH_CURSORS_FILE": self.all_cursors_file})
        c = result.get("counters", {})
        sent = max(1, sum(c.get(k, 0) for k in ("n_read", "n_pull", "n_push")))
        share = {k: c.get(k, 0) / sent for k in ("n_read", "n_pull", "n_push")}
        result["share"] = share
        result["readRps"] = result["rps"] * share["n_read"]
        result["pullRps"] = result["rps"] * share["n_pull"]
        result["pushRps"] = result["rps"] * share["n_push"]
        result["opsPerSecond"] = result["pushRps"] * MIXED_PUSH_OPS
        self.save("mixed", result)


# --- report ---------------------------------------------------------------------------------

def fmt(value, digits=0):
    if value is None:
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def ceiling_fraction(r, key, suffix):
    """A row's req/s as a fraction of its own ceiling's (CEILING_OF), or None. Ceiling 2 runs once
    (its body is too short to compress), so the gzip rows use the plain one."""
    ceiling = CEILING_OF.get(key)
    x = r.get(key + suffix)
    c = ceiling and (r.get(ceiling + suffix) or r.get(ceiling))
    if not x or not c or not x.get("rps") or not c.get("rps"):
        return None
    return x["rps"] / c["rps"]


def ceiling_cpu_fraction(r, key, suffix):
    """The same fraction from CPU instead of req/s: the ceiling's server CPU per request (nginx +
    responders + MariaDB) over the route's, with both figures. Steadier than req/s on a shared
    box, where the neighbours' load changes between the two phases."""
    ceiling = CEILING_OF.get(key)
    x, c = r.get(key + suffix), ceiling and (r.get(ceiling + suffix) or r.get(ceiling))
    ours, ceil = (cpu_us_per_request(x) if x else None), (cpu_us_per_request(c) if c else None)
    if not ours or not ceil or not sum(ours):
        return None
    return sum(ceil) / sum(ours), sum(ceil), sum(ours)


def cpu_us_per_request(x):
    """CPU microseconds per request of nginx, the responders (or php-fpm) and MariaDB: each
    part's CPU seconds during the phase over the requests served in it."""
    cpu, rps = x.get("cpu") or {}, x.get("rps")
    if not rps or "nginxSeconds" not in cpu:
        return None
    served = rps * cpu["wallSeconds"]
    return tuple(cpu[k] / served * 1e6 for k in ("nginxSeconds", "responderSeconds", "databaseSeconds"))


def report(bench, stack, uptime_before, uptime_after, seed):
    r = bench.results
    fcgi = r.get("ceiling_fastcgi", {}).get("rps")
    lines = []
    add = lines.append
    add("")
    add("TodoSync benchmark" + ("  (BENCH_QUICK smoke run: small data, short phases; targets are for full size)" if QUICK else ""))
    add(f"data: {USERS} users x {TAGS} tags x {TODOS} todos over {DAYS} days"
        + (f" = {seed.get('todos', 0):,} todos, {seed.get('dailyStats', 0):,} daily stats, {seed.get('sizeMB', '?')} MB;"
           f" seeded in {seed.get('totalSeconds', 0):.1f} s (rows {seed.get('insertSeconds', 0):.1f} s,"
           f" recompute-stats {seed.get('statsSeconds', 0):.1f} s)" if seed else ""))
    add(f"load: wrk -t{THREADS} -c{CONNECTIONS}, {DURATION} s per phase (+{WARMUP} s warm-up); "
        f"{os.environ.get('TODOSYNC_RESPONDERS', '1')} responder x {os.environ.get('TODOSYNC_WORKERS', '?')} workers, "
        f"{os.environ.get('TODOSYNC_NGINX_WORKERS', '2')} nginx workers; variants {', '.join(VARIANTS)}; "
        f"seed layout {LAYOUT}; {os.cpu_count()} cores")
    add("peer: " + (f"PHP-FPM + PDO at {PEER_URL}, same users/todos/days, measured right after ours in each phase"
                    if PEER_URL else "not run (BENCH_PEER_DIR missing or BENCH_PEER=0): no ratios"))
    add(f"uptime before: {uptime_before.strip()}")
    add(f"uptime after:  {uptime_after.strip()}")
    add("")
    header = (f"{'scenario':<40} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'records/s':>11} {'ops/s':>8} "
              f"{'x peer':>7} {'/ceil':>7} {'/fcgi':>7} {'RSS MB before>after':>20} {'cpu ngx/app/db/cli/oth':>24} "
              f"{'us/req ngx/app/db':>18} {'err':>4}")
    add(header)
    add("-" * len(header))
    rows = [
        ("ceiling_nginx", "ceiling: nginx return 200"),
        ("ceiling_fastcgi", "ceiling 1: FastCGI, no database"),
        ("ceiling_db", "ceiling 2: + token check (1 statement)"),
        ("todos_by_date", "GET todos?date (random user/date)"),
        ("peer_todos_by_date", "  peer: GET todos?date"),
        ("stats_by_month", "GET daily-stats?month"),
        ("full_pull", "first full pull (1 conn; ms=whole)"),
        ("big_pull", f"full pull, {BIG_USER_RECORDS:,}-record user (ms=whole)"),
        ("ceiling_page", "ceiling 3: pull page from memory"),
        ("pull_pages", "pull pages of 500 todos"),
        ("peer_pull_pages", "  peer: pull pages of 500 todos"),
        ("incremental_pull", "incr. pull, 100 changes (ms=whole)"),
        ("push", f"push {PUSH_OPS}-op batches"),
        ("mixed", "mixed 80/15/5"),
    ]
    for variant in VARIANTS:
        suffix = "+gzip" if variant == "gzip" else ""
        add(f"[{variant}{': Accept-Encoding: gzip on every request' if suffix else ': identity bodies'}]")
        for key, label in rows:
            x = r.get(key + suffix)
            if not x:
                continue
            rps = x.get("rps")
            cpu = x.get("cpu", {})
            peer = r.get(f"peer_{key}{suffix}", {}).get("rps")
            ratio = f"{rps / peer:5.2f}x" if peer and rps else "-"
            fraction = ceiling_fraction(r, key, suffix)
            us = cpu_us_per_request(x)
            add(f"{label:<40} {fmt(rps):>9} {fmt(x.get('p50Ms'), 2):>8} {fmt(x.get('p99Ms'), 2):>8} "
                f"{fmt(x.get('recordsPerSecond')):>11} {fmt(x.get('opsPerSecond')):>8} {ratio:>7} "
                f"{(f'{fraction:6.1%}' if fraction else '-'):>7} {(f'{rps / fcgi:6.1%}' if fcgi and rps else '-'):>7} "
                f"{fmt(x.get('rssBeforeMB'), 1) + ' > ' + fmt(x.get('rssAfterMB'), 1):>20} "
                f"{'/'.join('%.2f' % cpu.get(k, 0) for k in ('nginxCores', 'responderCores', 'databaseCores', 'clientCores', 'otherCores')):>24} "
                f"{('/'.join('%.0f' % v for v in us) if us else '-'):>18} "
                f"{x.get('errors', 0):>4}")
    add("")
    notes = []
    if "full_pull" in r:
        x = r["full_pull"]
        notes.append(f"first full pull: {x['users']} users, {fmt(x['recordsPerPull'])} records in {fmt(x['pagesPerPull'])} pages each; "
                     f"end to end p50 {x['p50Ms']:.0f} ms, p99 {x['p99Ms']:.0f} ms, max {x['maxMs']:.0f} ms "
                     "(p50/p99 columns above are per whole pull)")
    if "big_pull" in r:
        x = r["big_pull"]
        notes.append(f"big pull: user {USERS + 1}, {x['records']:,} records at the default limit 500, one connection, "
                     "3 times; the client reads each page's bytes and takes cursor/hasMore from its tail (no JSON "
                     "decode), so the figure is the server's")
    if "gzip_levels" in r:
        for kind, x in r["gzip_levels"].items():
            notes.append(f"gzip of a {kind} ({x['bytesPerBody'] / 1024:.0f} KiB), zlib level: size / CPU per body: "
                         + ", ".join(f"{l['level']}: {l['ratio']:.1%} / {l['usPerBody']:,.0f} us" for l in x["levels"]))
    if "incremental_pull" in r:
        x = r["incremental_pull"]
        notes.append(f"incremental pull: {x['users']} users, {fmt(x['recordsPerPull'])} records per pull after a 100-op push "
                     f"(push p50 {x['pushP50Ms']:.0f} ms, p99 {x['pushP99Ms']:.0f} ms); pull p50/p99 above are per whole pull")
    if "push" in r:
        x = r["push"]
        notes.append(f"push: {x['devices']} devices, {x['requests']} pushes, statuses {x['statuses']}"
                     + (f", failures {x['failures']}" if x["failures"] else ""))
    compare = [(key, x) for key, x in r.items() if key.startswith(("push_before_", "push_after_"))]
    if compare:
        notes.append(f"push before/after, alternating (before: {PUSH_BEFORE_BIN}):")
        for key, x in compare:
            cpu = x.get("cpu") or {}
            notes.append(f"  {key:<22} {x['opsPerSecond']:>8,.0f} ops/s  p50 {x['p50Ms']:>6.0f} ms  p99 {x['p99Ms']:>6.0f} ms"
                         f"  errors {x['errors']}  cpu {cpu}")
        for label in ("before", "after"):
            runs = [x["opsPerSecond"] for key, x in compare if key.startswith(f"push_{label}_")]
            notes.append(f"  {label}: median {statistics.median(runs):,.0f} ops/s of {len(runs)} runs")
    if "mixed" in r:
        x = r["mixed"]
        notes.append(f"mixed: reads {fmt(x['readRps'])}/s, pulls {fmt(x['pullRps'])}/s, pushes {fmt(x['pushRps'], 1)}/s "
                     f"({fmt(x['opsPerSecond'])} ops/s); latency is over all request kinds")
    for key, x in r.items():
        if x.get("kind") == "wrk" and x.get("errors"):
            notes.append(f"{key}: {x['errors']} errors {x.get('errorDetail')}")
    notes.append("cpu ngx/app/db/cli/oth: cores used by nginx / the responders / MariaDB / the load generator / "
                 "everything else on the machine (noise); us/req ngx/app/db: CPU microseconds per request of "
                 "nginx / the responders (php-fpm for the peer) / MariaDB")
    notes.append("/ceil: req/s as a fraction of the route's own ceiling in this run (todos by date and stats by "
                 "month: ceiling 2; pull pages: ceiling 3 of the same variant); /fcgi: of ceiling 1")
    for variant in VARIANTS:
        suffix = "+gzip" if variant == "gzip" else ""
        for key in ("todos_by_date", "pull_pages"):
            f = ceiling_cpu_fraction(r, key, suffix)
            if f:
                notes.append(f"{key}{suffix}: server CPU per request {f[2]:,.0f} us against its ceiling's {f[1]:,.0f} us: "
                             f"{f[0]:.1%} of the ceiling by CPU (by req/s: {ceiling_fraction(r, key, suffix):.1%})")
    if "ceiling_page" in r:
        notes.append(f"ceiling 3 serves a real {r['ceiling_page']['pageBytes']:,}-byte page of 500 todos from the "
                     "responder's memory; gzip: compressed per request by the same encoder as the pull route "
                     "(igzip level 1)")
    for variant in VARIANTS:
        suffix = "+gzip" if variant == "gzip" else ""
        if "store_days" + suffix in r:
            x = r["store_days" + suffix]
            notes.append(f"before todos_by_date{suffix}, {x['report']} in {x['seconds']} s: the pass "
                         "todosync-store-days.timer runs every minute in a deployment, outside the measured phases")
    for n in notes:
        add("  " + n)
    add("")

    final_rss = stack.rss_mb()
    targets = []

    def target(label, ok, measured):
        targets.append((label, ok, measured))

    for variant in VARIANTS:
        suffix = "+gzip" if variant == "gzip" else ""
        for key, label in (("pull_pages", "pull pages of 500"), ("todos_by_date", "GET todos by date")):
            ours, peer = r.get(key + suffix), r.get(f"peer_{key}{suffix}")
            if ours and peer:
                ratio = ours["rps"] / peer["rps"]
                target(f"{label} >= {TARGET_PEER_RATIO}x the peer ({variant})",
                       ratio >= TARGET_PEER_RATIO and not ours["errors"] and not peer["errors"],
                       f"{ratio:.2f}x ({ours['rps']:,.0f} vs {peer['rps']:,.0f} req/s)")
        fraction = ceiling_fraction(r, "todos_by_date", suffix)
        if fraction:
            target(f"GET todos by date >= {TARGET_CEILING_FRACTION:.0%} of ceiling 2 ({variant})",
                   fraction >= TARGET_CEILING_FRACTION, f"{fraction:.1%}")
        if "big_pull" + suffix in r:
            x = r["big_pull" + suffix]
            target(f"first full pull of a {x['records']:,}-record user <= {TARGET_BIG_PULL_S} s ({variant})",
                   x["p50Ms"] / 1000 <= TARGET_BIG_PULL_S,
                   f"median {x['p50Ms'] / 1000:.3f} s, max {x['maxMs'] / 1000:.3f} s of 3")
        if "push" + suffix in r:
            x = r["push" + suffix]
            target(f"push >= {TARGET_PUSH_OPS:,} operations/s with the feed ({variant})",
                   x["opsPerSecond"] >= TARGET_PUSH_OPS and not x["failures"], f"{x['opsPerSecond']:,.0f} ops/s")
    target(f"responder RSS <= {TARGET_RSS_MB} MB after the run", final_rss <= TARGET_RSS_MB,
           f"{final_rss:.1f} MB (idle after start-up and seeding: {getattr(bench, 'rss_start', 0):.1f} MB)")
    add("targets (2 cores, 32 connections)" + ("  -- quick run: not at target data size" if QUICK else ""))
    for label, ok, measured in targets:
        add(f"  {'PASS' if ok else 'MISS'}  {label:<66} {measured}")
    add("")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(RESULTS, "table.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(RESULTS, "summary.json"), "w") as f:
        json.dump({"results": r, "seed": seed, "finalRssMB": final_rss, "uptimeBefore": uptime_before,
                   "uptimeAfter": uptime_after,
                   "targets": [{"target": t, "pass": ok, "measured": m} for t, ok, m in targets]}, f, indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stack", required=True, help="path of scripts/stack.sh")
    args = parser.parse_args()
    stack = Stack(args.stack)
    bench = Bench(stack)
    wanted = ALL_SCENARIOS if SCENARIOS == "all" else [s.strip() for s in SCENARIOS.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in ALL_SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(ALL_SCENARIOS)})")
    seed = {}
    seed_path = os.path.join(RESULTS, "seed.json")
    if os.path.exists(seed_path):
        with open(seed_path) as f:
            text = f.read().strip()
            seed = json.loads(text) if text else {}
    uptime_before = os.environ.get("BENCH_UPTIME_BEFORE") or subprocess.run(
        ["uptime"], capture_output=True, text=True).stdout
    bench.rss_start = stack.rss_mb()
    global GZIP
    for variant in VARIANTS:
        if variant not in ("plain", "gzip"):
            sys.exit(f"unknown variant {variant} (known: plain, gzip)")
        GZIP = variant == "gzip"
        bench.suffix = "+gzip" if GZIP else ""
        for name in ALL_SCENARIOS:
            # The ceilings measure nginx and the FastCGI path, not bodies: once is enough.
            if name in wanted and not (name == "ceilings" and variant != VARIANTS[0]):
                getattr(bench, f"run_{name}")()
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout
    report(bench, stack, uptime_before, uptime_after, seed)


if __name__ == "__main__":
    main()
