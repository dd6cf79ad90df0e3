"""Hardening, item 2: the FastCGI socket is not world-writable, and a peer that sends part of a
request and then nothing cannot hold a worker forever.

Before: the socket was 0666 and a worker waited forever for a request's params, so 8
connections that each sent one 16-byte record froze the service while they were held.
(Figures before/after: scripts/bystander-latency.py stall.)
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time

import pytest
import requests

import tsapi


def stack_env() -> dict[str, str]:
    out = tsapi.stack("env")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.fixture
def fcgi_sockets(stack_cmd):
    env = stack_env()
    paths = [os.path.join(env["TODOSYNC_SOCKET_DIR"], f"fcgi-{i}.sock")
             for i in range(1, int(env["TODOSYNC_RESPONDERS"]) + 1)]
    for p in paths:
        assert os.path.exists(p), p
    return paths, int(env["TODOSYNC_WORKERS"])


def test_fastcgi_sockets_are_not_world_accessible(fcgi_sockets):
    paths, _ = fcgi_sockets
    for p in paths:
        st = os.stat(p)
        assert stat.S_ISSOCK(st.st_mode)
        assert st.st_mode & 0o007 == 0, f"{p} is {oct(st.st_mode & 0o777)}"
        assert st.st_mode & 0o060 == 0o060, f"{p}: group (nginx) needs read/write: {oct(st.st_mode & 0o777)}"


def begin_request_only() -> bytes:
    # FCGI_BEGIN_REQUEST header (8 bytes) + body (8 bytes): role responder, keep-conn flag off.
    return bytes([1, 1, 0, 1, 0, 8, 0, 0]) + bytes([0, 1, 0, 0, 0, 0, 0, 0])


def test_stalled_connections_do_not_freeze_the_service(fcgi_sockets, client):
    paths, workers = fcgi_sockets
    held = []
    try:
        for p in paths:
            for _ in range(workers + 2):  # more than every worker of every responder
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(p)
                s.sendall(begin_request_only())
                held.append(s)
        time.sleep(0.5)
        latencies = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            r = client.get("/todos?date=2030-01-01", timeout=30)
            latencies.append(time.monotonic() - t0)
            assert r.status_code == 200, tsapi.short(r)
            time.sleep(0.1)
        # Each stalled connection is dropped after the read deadline (2 s by default): requests
        # wait at most that long, and most do not wait at all once the deadline has passed.
        assert max(latencies) < 6, latencies
        assert sorted(latencies)[len(latencies) // 2] < 1, latencies
        dropped = 0
        for s in held:  # closed by the responder, without an answer to the cut-off request
            s.settimeout(5)
            try:
                data = s.recv(65536)
                dropped += data == b""
            except ConnectionResetError:
                dropped += 1
            except socket.timeout:
                pass
        assert dropped == len(held), f"{len(held) - dropped} stalled connections still open"
    finally:
        for s in held:
            s.close()
