"""Hardening round 4 (issue 34), item 2: connections from one address, and nginx's file budget.

Before (main): 300 slow-body requests to the live route from one address were all held (the
live location's `limit_conn` replaced the per-address one), idle keep-alive connections counted
against nothing (nginx's http limit_conn counts requests in progress), and three addresses with
14,500 connections each ran nginx out of files: `worker_rlimit_nofile 140000` above the 20,000
this box allows failed (`setrlimit ... Operation not permitted`, an alert only), leaving 65,536
connections per worker on 20,000 files. A bystander timed out on 7 of 34 requests.

Now nginx's stream module owns the public ports and counts each address's connections, idle
ones included (TODOSYNC_ADDRESS_CONNECTIONS, nginx/limits.env); a connection over the cap has
each request answered 429 with Retry-After and is closed. The file budget is computed from what
the box allows (scripts/nginx-fd-budget.sh) and checked against the workers at start.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

import tsapi

STATE_DIR = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")


def cap() -> int:
    value = int(tsapi.stack_env()["TODOSYNC_ADDRESS_CONNECTIONS"])
    if value == 0:
        pytest.skip("the per-address connection cap is off in this stack")
    return value


def raise_file_limit(count: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(count + 1000, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def host_port() -> tuple[str, int]:
    host, port = tsapi.BASE_URL.split("//")[1].split(":")
    return host, int(port)


def connect_from(address: str) -> socket.socket:
    s = socket.socket()
    s.bind((address, 0))
    s.settimeout(5)
    s.connect(host_port())
    return s


def get_healthz(s: socket.socket) -> bytes:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head = tsapi.read_head(s)
    return head


def test_idle_keep_alive_connections_count_against_the_address():
    limit = cap()
    raise_file_limit(limit + 50)
    held: list[socket.socket] = []
    try:
        answers = []
        for _ in range(limit + 10):
            s = connect_from("127.0.0.5")
            held.append(s)
            answers.append(get_healthz(s))  # one request, then the connection idles (keep-alive)
        ok = [a for a in answers if a.startswith(b"HTTP/1.1 200")]
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 429")]
        assert len(ok) == limit and len(refused) == 10, [a.split(b"\r\n")[0] for a in answers]
        assert all(b"\r\nRetry-After: " in a for a in refused), refused[0]
        assert all(b"application/json" in a for a in refused), refused[0]
        # A refused connection is closed after its answer: it never idles uncounted.
        late = held[-1]
        late.settimeout(3)
        closed = False
        try:
            while late.recv(65536):
                pass
            closed = True
        except socket.timeout:
            pass
        assert closed, "a connection over the cap stayed open after its 429"
        # Another address is not affected.
        assert requests.get(tsapi.BASE_URL + "/healthz", timeout=5).status_code == 200
        # Closing some frees their places.
        for s in held[:5]:
            s.close()
        time.sleep(0.3)
        again = connect_from("127.0.0.5")
        held.append(again)
        assert get_healthz(again).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()


def test_the_cap_holds_over_tls_and_http2_too(tmp_path):
    """HTTP/2 multiplexes requests on one connection: the cap counts the connection."""
    limit = cap()
    raise_file_limit(limit + 50)
    import ssl
    ctx = ssl.create_default_context(cafile=os.environ.get("TODOSYNC_TEST_CA_CERT") or None)
    ctx.set_alpn_protocols(["http/1.1"])
    host, _ = host_port()
    port = int(tsapi.HTTPS_URL.rsplit(":", 1)[1])
    held = []
    try:
        statuses = []
        for _ in range(limit + 3):
            raw = socket.socket()
            raw.bind(("127.0.0.6", 0))
            raw.settimeout(5)
            raw.connect((host, port))
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            held.append(s)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            statuses.append(tsapi.read_head(s).split(b"\r\n")[0])
        assert statuses.count(b"HTTP/1.1 200 OK") == limit, statuses
        assert statuses[-3:] == [b"HTTP/1.1 429 Too Many Requests"] * 3, statuses
    finally:
        for s in held:
            s.close()


def test_slow_bodies_to_the_live_route_are_capped_per_address():
    """The reproduction: 300 slow-body requests to the live route from one address were all held;
    now at most the cap's are (the rest 429)."""
    limit = cap()
    count = limit + 100
    raise_file_limit(count + 100)
    head = (b"GET /api/v1/sync/live HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
            b"Content-Length: 200\r\n\r\n")
    held = []
    try:
        for _ in range(count):
            s = connect_from("127.0.0.7")
            s.sendall(head)
            held.append(s)
        time.sleep(1)
        answered = 0
        for s in held:
            s.setblocking(False)
            try:
                data = s.recv(4096)
                answered += data.startswith(b"HTTP/1.1 429")
            except (BlockingIOError, OSError):
                pass
        assert answered >= count - limit, f"{answered} of {count} answered 429 (cap {limit})"
    finally:
        for s in held:
            s.close()


def test_three_addresses_with_many_connections_leave_a_bystander_served():
    limit = cap()
    per_address = 1200
    raise_file_limit(3 * per_address + 200)
    held: list[socket.socket] = []
    stop = threading.Event()
    outcomes: list[object] = []

    def bystander():
        while not stop.is_set():
            try:
                outcomes.append(requests.get(tsapi.BASE_URL + "/healthz", timeout=5,
                                             headers={"Connection": "close"}).status_code)
            except requests.RequestException as exc:
                outcomes.append(type(exc).__name__)
            time.sleep(0.1)

    watcher = threading.Thread(target=bystander, daemon=True)
    watcher.start()
    try:
        for address in ("127.0.0.8", "127.0.0.9", "127.0.0.10"):
            for _ in range(per_address):
                try:
                    s = connect_from(address)
                except OSError:
                    continue
                s.setblocking(False)
                held.append(s)
        time.sleep(2)
    finally:
        stop.set()
        watcher.join(10)
        for s in held:
            s.close()
    assert outcomes and all(o == 200 for o in outcomes), outcomes


# --------------------------------------------------------------------------- file budget

def nginx_workers() -> list[int]:
    master = int((Path(STATE_DIR) / "nginx/nginx.pid").read_text())
    workers = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                workers.append(int(entry.name))
    return workers


@pytest.mark.skipif(not STATE_DIR, reason="TODOSYNC_TEST_STATE_DIR not set")
def test_nginx_workers_have_the_file_budget_the_config_names():
    conf = (Path(STATE_DIR) / "nginx/nginx.conf").read_text()
    import re
    nofile = int(re.search(r"^worker_rlimit_nofile (\d+);", conf, re.M).group(1))
    connections = int(re.search(r"^\s*worker_connections (\d+);", conf, re.M).group(1))
    assert connections <= nofile - 1024 and connections <= 65536, (connections, nofile)
    workers = nginx_workers()
    assert workers, "no nginx worker found"
    for pid in workers:
        limits = Path(f"/proc/{pid}/limits").read_text()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert int(line.split()[3]) >= nofile, line
    error_log = (Path(STATE_DIR) / "log/nginx-error.log").read_text()
    assert "setrlimit(RLIMIT_NOFILE" not in error_log, "nginx could not take its file budget"
