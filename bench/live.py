#!/usr/bin/env python3
"""Live-sync benchmarks (issue 22, "Benchmarks"; contract "Sync: live (pokes)").

Run by bench/live.sh against a private stack seeded with one small account per subscriber
(bench/seed.sh) plus one bystander account; standard library only (asyncio streams, no aiohttp).
Every phase is bounded in time and talks to 127.0.0.x only. Phases, in order:

1. bystander alone: a REST client (GET todos by date at a fixed rate) without subscribers;
2. propagation: LIVE_BENCH_IDLE idle subscribers open; device B runs `todosync-client watch
   --json` on its own store; device A pushes one new todo at a time over HTTP. Per write:
   A's push acknowledged (response read) -> B's engine reports the poke -> B's engine reports
   the sync that stored it (the `synced` JSON line, printed after the store's commit); then the
   record is looked up in B's SQLite file. Then the debounce, separately: A runs `watch` too, a
   `todosync-client add` on A's file is the local write, and A's `synced (local-write)` line and
   B's stored line are timed from the moment `add` exited;
3. idle cost: subscribers up to LIVE_BENCH_SUBSCRIBERS; nginx RSS/PSS added, the responders'
   `todosync_fastcgi_workers_busy` sampled from /metrics, the bystander again with them;
4. reconnect storm: nginx's master gets SIGTERM (fast shutdown: every stream is cut), runsv
   starts it again; the subscribers come back as the engine does (full-jitter backoff from
   0..5 s, doubling to 120 s, and a pull when the stream opens); the bystander runs throughout;
5. bystander alone again after the subscribers are gone (the "without" figure is bracketed).

A subscriber is one stream `GET /api/v1/sync/live` from a source address 127.0.0.2..(1+SPREAD),
run in child processes (`live.py subscribers FIRST LAST`) of LIVE_BENCH_PER_PROCESS each.
"""

import asyncio
import json
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Stack, percentile, token_of: one place for them)

BASE = urllib.parse.urlsplit(bench.BASE_URL)
HOST, PORT = BASE.hostname, BASE.port or 80
SPREAD = bench.env_int("LIVE_BENCH_SPREAD", 250)          # source addresses 127.0.0.2 ..
LIVE = "/api/v1/sync/live"
# The engine's stream backoff (docs/CLIENT.md, "The live stream"): full jitter from
# 0..min(max, initial * 2^(n-1)), the sequence restarting once a stream stayed open `max` s.
LIVE_INITIAL_BACKOFF, LIVE_MAX_BACKOFF = 5.0, 120.0
BYSTANDERS = 4  # the bystander's connections, one account each (the seed's last BYSTANDERS users)


def log(message):
    print(f"[live {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# --- a minimal HTTP/1.1 client over asyncio streams -------------------------------------------

def request_bytes(method, path, token=None, body=None, accept="application/json", close=False):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{PORT}", f"Accept: {accept}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    payload = b""
    if body is not None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


async def read_head(reader):
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = {}
    for line in head[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def read_body(reader, headers):
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b""):
                    pass
                return body
            body += await reader.readexactly(size)
            await reader.readline()
    return await reader.read()


class Conn:
    """One keep-alive connection; reopened on the next request after it broke."""

    def __init__(self, local_addr=None):
        self.local_addr = local_addr
        self.reader = self.writer = None

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method, path, token=None, body=None, timeout=10.0, retry=True):
        for attempt in (0, 1):
            fresh = self.writer is None
            try:
                if fresh:
                    self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(
                        HOST, PORT, local_addr=self.local_addr), timeout)
                self.writer.write(request_bytes(method, path, token, body))
                status, headers = await asyncio.wait_for(read_head(self.reader), timeout)
                data = await asyncio.wait_for(read_body(self.reader, headers), timeout)
                if headers.get("connection", "").lower() == "close":
                    self.close()
                return status, data
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                    asyncio.TimeoutError):
                self.close()
                if attempt or fresh or not retry:
                    raise
        raise AssertionError("unreachable")


async def one_request(method, path, token=None, local_addr=None, timeout=10.0):
    conn = Conn(local_addr)
    try:
        return await conn.request(method, path, token, timeout=timeout, retry=False)
    finally:
        conn.close()


def pct(values, p, scale=1000.0):
    v = bench.percentile(values, p)
    return None if v is None else round(v * scale, 2)


# --- subscribers (child process) ----------------------------------------------------------------

async def run_subscribers(first, last, out_path):
    """Streams for users first..last, each reconnecting and pulling as the engine does. Prints a
    status line every 0.5 s; on SIGTERM writes every connect and pull instant to out_path."""
    raise_fd_limit()
    state = {"open": 0, "connects": 0, "pulls": 0, "pokes": 0}
    failures, pull_status = {}, {}
    connect_times, pull_times = {}, []  # user -> [wall times of each 200 stream], [(start, status)]
    handshakes = asyncio.Semaphore(int(os.environ.get("LIVE_BENCH_HANDSHAKES", "32")))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    def fail(kind):
        failures[kind] = failures.get(kind, 0) + 1

    async def pull(u, local, device, cursor_box):
        # A sync on the stream opening: here one pull page (each account's history fits in one).
        for attempt in range(1, 6):
            path = f"/api/v1/sync/pull?limit=500&deviceId={device}"
            if cursor_box[0]:
                path += "&cursor=" + urllib.parse.quote(cursor_box[0])
            started = time.time()
            try:
                status, data = await one_request("GET", path, bench.token_of(u), (local, 0))
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
                status = type(e).__name__
            pull_times.append((started, status))
            pull_status[str(status)] = pull_status.get(str(status), 0) + 1
            state["pulls"] += 1
            if status == 200:
                cursor_box[0] = json.loads(data)["cursor"]
                return
            await asyncio.sleep(random.uniform(0, min(60.0, 1.0 * 2 ** (attempt - 1))))

    async def subscriber(u):
        local = f"127.0.0.{2 + u % SPREAD}"
        device, cursor_box, attempt = str(uuid.uuid4()), [None], 0
        request = request_bytes("GET", LIVE, bench.token_of(u), accept="text/event-stream")
        while not stop.is_set():
            opened = None
            writer = None
            try:
                async with handshakes:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(HOST, PORT, local_addr=(local, 0)), 10)
                    writer.write(request)
                    status, _ = await asyncio.wait_for(read_head(reader), 10)
                if status != 200:
                    fail(f"stream {status}")
                else:
                    opened = time.monotonic()
                    connect_times.setdefault(u, []).append(time.time())
                    state["open"] += 1
                    state["connects"] += 1
                    asyncio.ensure_future(pull(u, local, device, cursor_box))
                    try:
                        while True:
                            chunk = await reader.read(4096)
                            if not chunk:
                                fail("stream ended")
                                break
                            if b"data:" in chunk:
                                state["pokes"] += 1
                                asyncio.ensure_future(pull(u, local, device, cursor_box))
                    finally:
                        state["open"] -= 1
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                    ValueError, IndexError) as e:
                fail(type(e).__name__)
            finally:
                if writer is not None:
                    writer.close()
            if opened is not None and time.monotonic() - opened >= LIVE_MAX_BACKOFF:
                attempt = 0
            attempt += 1
            await asyncio.sleep(random.uniform(0, min(LIVE_MAX_BACKOFF, LIVE_INITIAL_BACKOFF * 2 ** (attempt - 1))))

    tasks = [asyncio.ensure_future(subscriber(u)) for u in range(first, last + 1)]
    while not stop.is_set():
        try:
            print(json.dumps({"t": time.time(), **state, "failures": failures, "pullStatus": pull_status}), flush=True)
        except BrokenPipeError:  # the bench ended (or died): stop too
            stop.set()
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass
    for t in tasks:
        t.cancel()
    with open(out_path, "w") as f:
        json.dump({"connects": connect_times, "pulls": pull_times, "failures": failures}, f)


class Subscribers:
    """The child processes and their latest status lines."""

    def __init__(self, results):
        self.results = results
        self.procs = []  # (proc, status dict, dump path, reader task)

    async def add(self, first, last):
        path = os.path.join(self.results, f"subscribers-{first}-{last}.json")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, os.path.abspath(__file__), "subscribers", str(first), str(last), path,
            stdout=asyncio.subprocess.PIPE, limit=1 << 20)
        entry = {"proc": proc, "status": {}, "path": path, "first": first, "last": last}

        async def follow():
            while True:
                line = await proc.stdout.readline()
                if not line:
                    return
                entry["status"] = json.loads(line)
        entry["task"] = asyncio.ensure_future(follow())
        self.procs.append(entry)

    def total(self, key):
        return sum(e["status"].get(key, 0) for e in self.procs)

    def cpu_ticks(self):
        return sum(bench.proc_cpu_ticks(e["proc"].pid) for e in self.procs)

    def count(self):
        return sum(e["last"] - e["first"] + 1 for e in self.procs)

    def failures(self):
        out = {}
        for e in self.procs:
            for k, v in e["status"].get("failures", {}).items():
                out[k] = out.get(k, 0) + v
        return out

    async def wait_open(self, n, timeout):
        deadline = time.monotonic() + timeout
        while self.total("open") < n and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        return self.total("open")

    async def stop(self):
        for e in self.procs:
            e["proc"].send_signal(signal.SIGTERM)
        dumps = []
        for e in self.procs:
            await e["proc"].wait()
            await e["task"]
            with open(e["path"]) as f:
                dumps.append(json.load(f))
        self.procs = []
        return dumps


# --- measurements of the stack --------------------------------------------------------------------

def nginx_memory(stack):
    """RSS and PSS (kB) summed over nginx's master and workers."""
    pids = stack.server_pids()["nginx"]
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return {"processes": len(pids), "rssMB": round(rss / 1024, 1), "pssMB": round(pss / 1024, 1)}


class Cores:
    """bench.CpuMeter (nginx, responders, MariaDB, the rest of the box), with the subscriber
    processes taken out of "other" (they are the load generator)."""

    def __init__(self, stack, subs):
        self.meter, self.subs = bench.CpuMeter(stack), subs

    def __enter__(self):
        self.meter.__enter__()
        self.ticks = self.subs.cpu_ticks()
        return self

    def __exit__(self, *exc):
        self.meter.__exit__(*exc)
        r = self.meter.result
        subscribers = (self.subs.cpu_ticks() - self.ticks) / bench.CLK_TCK / max(r["wallSeconds"], 1e-3)
        r["subscriberCores"] = round(subscribers, 2)
        r["otherCores"] = round(max(0.0, r["otherCores"] - subscribers), 2)
        self.result = r
        return False


async def workers_busy(samples=10, every=1.0):
    """todosync_fastcgi_workers_busy summed over responders, sampled; the scrape's own request is
    served by one worker of each responder, so it shows up in the figure (see the baseline)."""
    values = []
    for _ in range(samples):
        status, data = await one_request("GET", "/metrics")
        if status == 200:
            values.append(sum(float(line.rsplit(" ", 1)[1]) for line in data.decode().splitlines()
                              if line.startswith("todosync_fastcgi_workers_busy")))
        await asyncio.sleep(every)
    return values


async def publishes():
    """todosync_live_publishes_total by result, summed over responders."""
    status, data = await one_request("GET", "/metrics")
    out = {}
    for line in data.decode().splitlines() if status == 200 else []:
        if line.startswith("todosync_live_publishes_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            out[result] = out.get(result, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


class Bystander:
    """REST reads at a fixed rate (GET todos by date of its own account) from WORKERS keep-alive
    connections; every request's start, latency and status (or exception) is kept."""

    def __init__(self, first_user, rate, workers=BYSTANDERS):
        # one account per connection: an app has at most TODOSYNC_ACCOUNT_IN_FLIGHT (2) in flight
        self.tokens = [bench.token_of(first_user + i) for i in range(workers)]
        self.rate, self.workers = rate, workers
        self.samples = []
        self.bodies = {}  # status -> the first body answered with it (other than 200)
        self.stopping = False

    async def _worker(self, i, until):
        conn = Conn(("127.0.0.1", 0))
        period = self.workers / self.rate
        nxt = time.monotonic() + i * period / self.workers
        while time.monotonic() < until and not self.stopping:
            await asyncio.sleep(max(0.0, nxt - time.monotonic()))
            nxt += period
            t0 = time.monotonic()
            try:
                status, body = await conn.request("GET", f"/api/v1/todos?date={bench.START_DATE}", self.tokens[i],
                                                  timeout=5, retry=False)
                if status != 200:
                    self.bodies.setdefault(str(status), body[:200].decode("utf-8", "replace"))
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
                status = type(e).__name__
            self.samples.append((time.time(), time.monotonic() - t0, status))
        conn.close()

    async def run(self, seconds):
        until = time.monotonic() + seconds
        await asyncio.gather(*(self._worker(i, until) for i in range(self.workers)))
        return {**self.summary(self.samples), "bodies": self.bodies}

    @staticmethod
    def summary(samples):
        ok = [lat for _, lat, s in samples if s == 200]
        statuses = {}
        for _, _, s in samples:
            statuses[str(s)] = statuses.get(str(s), 0) + 1
        return {"requests": len(samples), "p50ms": pct(ok, 50), "p99ms": pct(ok, 99), "maxms": pct(ok, 100),
                "statuses": statuses,
                "http5xx": sum(1 for _, _, s in samples if isinstance(s, int) and s >= 500)}


# --- devices A and B --------------------------------------------------------------------------------

class Watch:
    """`todosync-client watch --json` on one store: every JSON line with its arrival instant."""

    def __init__(self, client, db, args):
        self.client, self.db, self.args = client, db, args
        self.events = asyncio.Queue()

    async def start(self):
        self.proc = await asyncio.create_subprocess_exec(
            self.client, "watch", "--db", self.db, "--json", *self.args, stdout=asyncio.subprocess.PIPE)
        self.task = asyncio.ensure_future(self._follow())
        await self.next(lambda e: e.get("event") == "connected", 15)
        await self.next(lambda e: e.get("event") == "synced", 15)

    async def _follow(self):
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                return
            at = time.monotonic()
            await self.events.put((at, json.loads(line)))

    def drain(self):
        while not self.events.empty():
            self.events.get_nowait()

    async def next(self, match, timeout, seen=None):
        """The first event matching `match` within `timeout` (arrival time, event); the others
        on the way are passed to `seen`."""
        deadline = time.monotonic() + timeout
        others = []
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                at, event = await asyncio.wait_for(self.events.get(), left)
            except asyncio.TimeoutError:
                raise TimeoutError(f"no matching event from watch on {self.db} within {timeout} s; others: {others}")
            others.append(event)
            if match(event):
                return at, event
            if seen:
                seen(at, event)

    async def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        await self.proc.wait()
        await self.task


def stored_in(db, title):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return c.execute("SELECT COUNT(*) FROM todo WHERE title = ? AND id IS NOT NULL", (title,)).fetchone()[0] == 1


def pulled(event):
    return event.get("event") == "synced" and event.get("pulled", 0) >= 1


async def propagation(client, work, writes):
    """A pushes over HTTP, B's engine (watch) stores; then A with an engine too (the debounce)."""
    email, password = f"live-{uuid.uuid4().hex[:10]}@example.com", "live bench password"
    _, data = await one_request_json("POST", "/api/v1/auth/register", {"email": email, "password": password})
    token_a = data["token"]
    env = {**os.environ, "TODOSYNC_PASSWORD": password}
    stores = {}
    for name in ("a", "b"):
        stores[name] = os.path.join(work, f"device-{name}.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(stores[name] + suffix):
                os.remove(stores[name] + suffix)
        subprocess.run([client, "login", "--db", stores[name], "--email", email, "--server", bench.BASE_URL, "--json"],
                       env=env, check=True, capture_output=True)
    # B: no periodic pull during the run (--interval), so every record arrives through a poke.
    watch_b = Watch(client, stores["b"], ["--interval", "3600"])
    await watch_b.start()
    device_a = str(uuid.uuid4())
    conn = Conn(("127.0.0.1", 0))
    rows, missing = [], 0
    for i in range(writes):
        await asyncio.sleep(random.uniform(0.05, 0.15))  # B idle again; no coalescing of two writes
        watch_b.drain()
        title = f"live bench {i} {uuid.uuid4().hex[:6]}"
        body = {"deviceId": device_a, "operations": [{
            "opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
            "data": {"title": title, "deadline": bench.START_DATE}}]}
        t_send = time.monotonic()
        status, data = await conn.request("POST", "/api/v1/sync/push", token_a, body)
        t_ack = time.monotonic()
        if status != 200 or json.loads(data)["results"][0]["status"] != "applied":
            raise RuntimeError(f"push {i}: {status} {data[:200]!r}")
        pokes = []
        try:
            t_stored, _ = await watch_b.next(pulled, 5, seen=lambda at, e: pokes.append(at) if e.get("event") == "poke" else None)
        except (TimeoutError, asyncio.TimeoutError):
            missing += 1  # no poke reached B's engine (a publish that failed: counted below)
            continue
        if not stored_in(stores["b"], title):
            # an earlier sync may have pulled it with the previous record: wait for the next one
            try:
                t_stored, _ = await watch_b.next(pulled, 5)
            except (TimeoutError, asyncio.TimeoutError):
                pass
            if not stored_in(stores["b"], title):
                missing += 1
                continue
        rows.append({"sendToAck": t_ack - t_send, "ackToStored": t_stored - t_ack,
                     "ackToPoke": (pokes[0] - t_ack) if pokes else None, "sendToStored": t_stored - t_send})
    conn.close()
    result = {"writes": writes, "measured": len(rows), "missing": missing, "publishes": await publishes()}
    for key in ("sendToAck", "ackToPoke", "ackToStored", "sendToStored"):
        vals = [r[key] for r in rows if r[key] is not None]
        result[key] = {"p50ms": pct(vals, 50), "p99ms": pct(vals, 99), "maxms": pct(vals, 100), "n": len(vals)}
    # pokes before the ack: the responder publishes after COMMIT, before it writes the answer
    result["pokeBeforeAck"] = sum(1 for r in rows if r["ackToPoke"] is not None and r["ackToPoke"] < 0)

    # The local write: A runs an engine too; a local write is another invocation's `add` on A's
    # file. Two settings, alternated write by write in one run (issue 39, item 6): "poll" checks
    # the file every 20 ms (watch before it woke on the file's change), "inotify" is watch's
    # defaults (woken by the file's change; both sync once 20 ms pass without another write, at
    # most 0.3 s after the first). LIVE_BENCH_VARIANTS=session15 compares the session-15 pair
    # instead (the 0.5 s check and 0.3 s debounce against the 20 ms poll). Single writes, then
    # bursts of LIVE_BENCH_BURST (50) `add`s started at once; for a burst: the last write -> B,
    # and the pushes A made for it.
    if os.environ.get("LIVE_BENCH_VARIANTS") == "session15":
        variants = {"before (--check-every 0.5 --quiet 0.3 --debounce 0.3)": ["--poll-store", "--check-every", "0.5", "--quiet", "0.3"],
                    "poll (--poll-store --check-every 0.02 --quiet 0.02 --debounce 0.3)": ["--poll-store"]}
    else:
        variants = {"poll (--poll-store --check-every 0.02 --quiet 0.02 --debounce 0.3)": ["--poll-store"],
                    "inotify (watch defaults: woken by the file's change, --quiet 0.02 --debounce 0.3)": []}
    result["debounce"] = {}
    watches = {}
    for label, args in variants.items():
        store = os.path.join(work, f"device-a-{len(watches)}.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(store + suffix):
                os.remove(store + suffix)
        subprocess.run([client, "login", "--db", store, "--email", email, "--server", bench.BASE_URL, "--json"],
                       env=env, check=True, capture_output=True)
        watches[label] = (store, Watch(client, store, ["--interval", "3600", *args]))
        await watches[label][1].start()
    local_rows = {label: [] for label in variants}
    for i in range(bench.env_int("LIVE_BENCH_DEBOUNCE_WRITES", 30)):
        for label, (store, watch_a) in watches.items():
            await asyncio.sleep(random.uniform(0.2, 0.6))
            watch_a.drain()
            watch_b.drain()
            title = f"local write {i} {uuid.uuid4().hex[:6]}"
            proc = await asyncio.create_subprocess_exec(client, "add", "--db", store, "--date", bench.START_DATE,
                                                        "--json", title, stdout=asyncio.subprocess.DEVNULL)
            await proc.wait()
            t_local = time.monotonic()
            row = {"localToPushed": None, "localToB": None}
            try:
                t_pushed, _ = await watch_a.next(lambda e: e.get("event") == "synced" and e.get("sent", 0) >= 1, 10)
                row["localToPushed"] = t_pushed - t_local
                t_b, _ = await watch_b.next(pulled, 5)
                row["localToB"] = t_b - t_local
            except (TimeoutError, asyncio.TimeoutError) as e:
                log(f"  {label} local write {i}: {e}")
            local_rows[label].append(row)
    burst = bench.env_int("LIVE_BENCH_BURST", 50)
    burst_rows = {label: [] for label in variants}
    for i in range(bench.env_int("LIVE_BENCH_BURSTS", 5)):
        for label, (store, watch_a) in watches.items():
            await asyncio.sleep(1.0)
            watch_a.drain()
            watch_b.drain()
            titles = [f"burst {i} {k} {uuid.uuid4().hex[:6]}" for k in range(burst)]
            procs = [await asyncio.create_subprocess_exec(client, "add", "--db", store, "--date", bench.START_DATE,
                                                          "--json", title, stdout=asyncio.subprocess.DEVNULL)
                     for title in titles]
            for proc in procs:
                await proc.wait()
            t_local = time.monotonic()
            pushes, sent = 0, 0
            try:
                while sent < burst:
                    _, event = await watch_a.next(lambda e: e.get("event") == "synced" and e.get("sent", 0) >= 1, 10)
                    pushes += 1
                    sent += event["sent"]
                t_b = None
                while not stored_in(stores["b"], titles[-1]):
                    t_b, _ = await watch_b.next(pulled, 5)
                t_b = t_b or time.monotonic()
                burst_rows[label].append({"pushes": pushes, "lastToB": t_b - t_local})
            except (TimeoutError, asyncio.TimeoutError) as e:
                log(f"  {label} burst {i}: {e}")
    for label, (_, watch_a) in watches.items():
        await watch_a.stop()
        result["debounce"][label] = {}
        for key in ("localToPushed", "localToB"):
            vals = [r[key] for r in local_rows[label] if r[key] is not None]
            result["debounce"][label][key] = {"p50ms": pct(vals, 50), "p99ms": pct(vals, 99), "n": len(vals),
                                              "missing": len(local_rows[label]) - len(vals)}
        rows_b = burst_rows[label]
        result["debounce"][label]["burst"] = {
            "writes": burst, "bursts": len(rows_b),
            "pushesPerBurst": sorted(r["pushes"] for r in rows_b),
            "lastWriteToB": {"p50ms": pct([r["lastToB"] for r in rows_b], 50),
                             "p99ms": pct([r["lastToB"] for r in rows_b], 99)}}
    await watch_b.stop()
    result["publishesAfterDebounce"] = await publishes()
    return result


async def one_request_json(method, path, body, token=None):
    conn = Conn(("127.0.0.1", 0))
    try:
        status, data = await conn.request(method, path, token, body, retry=False)
    finally:
        conn.close()
    if status not in (200, 201):
        raise RuntimeError(f"{method} {path} -> {status}: {data[:200]!r}")
    return status, json.loads(data)


# --- the storm ----------------------------------------------------------------------------------

async def storm(stack, subs, bystander_user, rate, n):
    state = os.environ["TODOSYNC_STATE_DIR"]
    master = bench.Stack._read_pid(os.path.join(state, "nginx", "nginx.pid"))
    by = Bystander(bystander_user, rate)
    by_task = asyncio.ensure_future(by.run(600))
    await asyncio.sleep(5)
    connects_before = subs.total("connects")
    t_kill_wall = time.time()
    t_kill = time.monotonic()
    os.kill(master, signal.SIGTERM)  # what `systemctl restart nginx` sends first: every stream is cut
    # nginx back: the first 200 on /healthz from a new master
    t_up = None
    while time.monotonic() - t_kill < 60:
        try:
            status, _ = await one_request("GET", "/healthz", timeout=2)
            if status == 200 and bench.Stack._read_pid(os.path.join(state, "nginx", "nginx.pid")) != master:
                t_up = time.monotonic() - t_kill
                break
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
            pass
        await asyncio.sleep(0.05)
    # all back: every subscriber has a stream open again (each at least one connect after the kill).
    # The cores from nginx's return (the new nginx's processes are the ones counted) until then.
    deadline = time.monotonic() + bench.env_int("LIVE_BENCH_STORM_TIMEOUT", 300)
    with Cores(stack, subs) as cores:
        while time.monotonic() < deadline:
            if subs.total("open") >= n and subs.total("connects") - connects_before >= n:
                break
            await asyncio.sleep(0.25)
    await asyncio.sleep(5)
    by.stopping = True
    await by_task
    dumps = await subs.stop()
    back = []
    pulls_after = []
    for d in dumps:
        for times in d["connects"].values():
            later = [t for t in times if t > t_kill_wall]
            if later:
                back.append(later[0] - t_kill_wall)
        pulls_after += [(t, s) for t, s in d["pulls"] if t > t_kill_wall]
    per_second = {}
    for t, _ in pulls_after:
        per_second[int(t - t_kill_wall)] = per_second.get(int(t - t_kill_wall), 0) + 1
    statuses = {}
    for _, s in pulls_after:
        statuses[str(s)] = statuses.get(str(s), 0) + 1
    during = [x for x in by.samples if x[0] >= t_kill_wall]
    return {"subscribers": n, "nginxBackSeconds": None if t_up is None else round(t_up, 2),
            "reconnected": len(back), "allBackSeconds": round(max(back), 2) if back else None,
            "backP50Seconds": round(bench.percentile(back, 50), 2) if back else None,
            "backP99Seconds": round(bench.percentile(back, 99), 2) if back else None,
            "pullsAfterRestart": len(pulls_after), "pullPeakPerSecond": max(per_second.values()) if per_second else 0,
            "pullsPerSecond": [per_second.get(s, 0) for s in range(0, (max(per_second) + 1) if per_second else 0)],
            "pullStatuses": statuses, "cpuUntilAllBack": cores.result,
            "bystanderDuringStorm": {**Bystander.summary(during), "bodies": by.bodies},
            "bystanderWholeWindow": Bystander.summary(by.samples)}


# --- the run ----------------------------------------------------------------------------------------

def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


async def main():
    raise_fd_limit()
    results_dir = os.environ.get("BENCH_RESULTS", "/tmp/todosync-live-bench")
    os.makedirs(results_dir, exist_ok=True)
    client = os.environ["LIVE_BENCH_CLIENT"]
    stack = bench.Stack(os.environ.get("LIVE_BENCH_STACK", "scripts/stack.sh"))
    idle = bench.env_int("LIVE_BENCH_IDLE", 1000)
    total = bench.env_int("LIVE_BENCH_SUBSCRIBERS", 10000)
    per_process = bench.env_int("LIVE_BENCH_PER_PROCESS", 2500)
    writes = bench.env_int("LIVE_BENCH_WRITES", 500)
    rate = bench.env_int("LIVE_BENCH_BYSTANDER_RATE", 100)
    by_seconds = bench.env_int("LIVE_BENCH_BYSTANDER_SECONDS", 20)
    bystander_user = total + 1
    out = {"uptimeBefore": uptime(), "cores": os.cpu_count(), "fdLimit": resource.getrlimit(resource.RLIMIT_NOFILE)[1]}
    log(f"uptime before: {out['uptimeBefore']}")

    log(f"bystander alone: {rate} req/s for {by_seconds} s")
    out["bystanderAlone"] = await Bystander(bystander_user, rate).run(by_seconds)
    out["nginxAlone"] = nginx_memory(stack)
    out["workersBusyAlone"] = await workers_busy()
    log(f"  {out['bystanderAlone']}; nginx {out['nginxAlone']}; busy {out['workersBusyAlone']}")

    subs = Subscribers(results_dir)
    t0 = time.monotonic()
    await subs.add(1, idle)
    opened = await subs.wait_open(idle, 120)
    log(f"{opened} idle subscribers open in {time.monotonic() - t0:.1f} s")
    out["propagationSubscribers"] = opened
    out["propagation"] = await propagation(client, results_dir, writes)
    log(f"  propagation: {json.dumps(out['propagation'])}")
    if os.environ.get("LIVE_BENCH_ONLY_PROPAGATION") == "1":
        # The write -> other store figures only (issue 39, item 6): no idle-cost or storm phases.
        await subs.stop()
        out["uptimeAfter"] = uptime()
        log(f"uptime after: {out['uptimeAfter']}")
        with open(os.path.join(results_dir, "live.json"), "w") as f:
            json.dump(out, f, indent=1)
        print("\n".join(propagation_lines(out)))
        return

    t0 = time.monotonic()
    first = idle + 1
    while first <= total:
        last = min(total, first + per_process - 1)
        await subs.add(first, last)
        first = last + 1
    with Cores(stack, subs) as cores:
        opened = await subs.wait_open(total, bench.env_int("LIVE_BENCH_RAMP_TIMEOUT", 300))
    out["rampCpu"] = cores.result
    out["rampSeconds"] = round(time.monotonic() - t0, 1)
    out["subscribersOpen"] = opened
    out["subscriberFailures"] = subs.failures()
    log(f"{opened} of {total} subscribers open after {out['rampSeconds']} s; failures {out['subscriberFailures']}")
    await asyncio.sleep(5)  # the pulls of the ramp are over
    out["nginxWith"] = nginx_memory(stack)
    out["workersBusyWith"] = await workers_busy()
    log(f"bystander with {subs.total('open')} subscribers")
    out["bystanderWith"] = await Bystander(bystander_user, rate).run(by_seconds)
    out["subscribersOpenAfterBystander"] = subs.total("open")
    log(f"  {out['bystanderWith']}; nginx {out['nginxWith']}; busy {out['workersBusyWith']}")

    log("reconnect storm: nginx restarted under the subscribers")
    out["storm"] = await storm(stack, subs, bystander_user, rate, opened)
    log(f"  storm: {json.dumps({k: v for k, v in out['storm'].items() if k != 'pullsPerSecond'})}")

    await asyncio.sleep(3)
    log("bystander alone again")
    out["bystanderAloneAfter"] = await Bystander(bystander_user, rate).run(by_seconds)
    out["nginxAfter"] = nginx_memory(stack)
    out["uptimeAfter"] = uptime()
    log(f"uptime after: {out['uptimeAfter']}")
    with open(os.path.join(results_dir, "live.json"), "w") as f:
        json.dump(out, f, indent=1)
    report(out)


def propagation_lines(o):
    p = o["propagation"]
    lines = [f"uptime before: {o['uptimeBefore']}", f"uptime after:  {o['uptimeAfter']}",
             f"PROPAGATION ({p['measured']} of {p['writes']} writes, {o['propagationSubscribers']} idle subscribers):"]
    for key, label in (("sendToAck", "A's push sent -> acknowledged"), ("ackToPoke", "ack -> poke seen by B's engine"),
                       ("ackToStored", "ack -> stored in B's SQLite"), ("sendToStored", "push sent -> stored in B")):
        lines.append(f"  {label:34} p50 {p[key]['p50ms']} ms  p99 {p[key]['p99ms']} ms  max {p[key]['maxms']} ms")
    lines.append("  [targets: ack -> stored p50 <= 50 ms, p99 <= 250 ms]")
    lines.append(f"  writes that never reached B through a poke: {p['missing']}; pokes published by result: "
                 f"{p['publishes']} (after the debounce phase: {p['publishesAfterDebounce']})")
    for label, d in p["debounce"].items():
        lines.append(f"  local write -> A pushed, {label}: p50 {d['localToPushed']['p50ms']} ms p99 {d['localToPushed']['p99ms']} ms;"
                     f" -> in B: p50 {d['localToB']['p50ms']} ms p99 {d['localToB']['p99ms']} ms"
                     f" (missing {d['localToPushed']['missing']} / {d['localToB']['missing']})")
        b = d.get("burst")
        if b:
            lines.append(f"    bursts of {b['writes']} adds ({b['bursts']}): pushes per burst {b['pushesPerBurst']};"
                         f" last write -> in B p50 {b['lastWriteToB']['p50ms']} ms p99 {b['lastWriteToB']['p99ms']} ms")
    lines.append("  [target: local write -> in B p50 <= 100 ms; pushes per burst not more than before]")
    return lines


def report(o):
    lines = propagation_lines(o)
    added = o["nginxWith"]["rssMB"] - o["nginxAlone"]["rssMB"]
    added_pss = o["nginxWith"]["pssMB"] - o["nginxAlone"]["pssMB"]
    n = o["subscribersOpen"]
    lines += [f"IDLE COST: {n} streams open (ramp {o['rampSeconds']} s)",
              f"  nginx RSS {o['nginxAlone']['rssMB']} -> {o['nginxWith']['rssMB']} MB (+{added:.1f} MB, "
              f"{added * 1024 / max(n, 1):.1f} kB a stream); PSS +{added_pss:.1f} MB",
              f"  workers busy (scrapes of /metrics): alone {o['workersBusyAlone']}, with {o['workersBusyWith']}",
              f"  bystander REST: alone p50 {o['bystanderAlone']['p50ms']} / p99 {o['bystanderAlone']['p99ms']} ms; "
              f"with streams p50 {o['bystanderWith']['p50ms']} / p99 {o['bystanderWith']['p99ms']} ms; "
              f"alone after p50 {o['bystanderAloneAfter']['p50ms']} / p99 {o['bystanderAloneAfter']['p99ms']} ms"]
    s = o["storm"]
    lines += [f"RECONNECT STORM ({s['subscribers']} subscribers): nginx answering again after {s['nginxBackSeconds']} s; "
              f"{s['reconnected']} back, all after {s['allBackSeconds']} s (p50 {s['backP50Seconds']} s, p99 {s['backP99Seconds']} s)",
              f"  pulls on reconnect: {s['pullsAfterRestart']}, peak {s['pullPeakPerSecond']}/s; statuses {s['pullStatuses']}",
              f"  bystander during the storm: {s['bystanderDuringStorm']}",
              f"  cores from nginx's return until all were back: {s['cpuUntilAllBack']}",
              f"  cores during the ramp to {n}: {o['rampCpu']}"]
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "subscribers":
        asyncio.run(run_subscribers(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
    else:
        asyncio.run(main())
