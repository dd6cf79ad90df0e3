"""Helpers for the tests that run against scripts/cluster.sh's topology (Galera nodes and
responder hosts in network namespaces).  Those tests skip unless the cluster runner set:

  TODOSYNC_TEST_CLUSTER_CMD      scripts/cluster.sh with the cluster's configuration
  TODOSYNC_TEST_CLUSTER_NODES    number of Galera nodes
  TODOSYNC_TEST_CLUSTER_APPS     number of responder hosts
  TODOSYNC_TEST_CLUSTER_SOCKETS  the nodes' MariaDB unix sockets (root, no password), comma-separated
  TODOSYNC_TEST_CLUSTER_LOG_DIR  logs: dbN.log, appN.log, nginx-access.log
  TODOSYNC_TEST_CLUSTER_SNAPSHOT_DIR  the snapshot cache directory every responder host and front shares
  TODOSYNC_TEST_CLUSTER_FRONT_URLS  the fronts' base URLs, comma-separated (front 1 first; two with
                                 TODOSYNC_CLUSTER_FRONTS=2, whose nchan share a private redis-server)

TODOSYNC_TEST_BASE_URL then points at the cluster's front.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

CMD = os.environ.get("TODOSYNC_TEST_CLUSTER_CMD", "").strip()
NODES = int(os.environ.get("TODOSYNC_TEST_CLUSTER_NODES", "0") or 0)
APPS = int(os.environ.get("TODOSYNC_TEST_CLUSTER_APPS", "0") or 0)
SOCKETS = [s for s in os.environ.get("TODOSYNC_TEST_CLUSTER_SOCKETS", "").split(",") if s]
LOG_DIR = os.environ.get("TODOSYNC_TEST_CLUSTER_LOG_DIR", "").strip()
NET = os.environ.get("TODOSYNC_TEST_CLUSTER_NET", "10.213.0")
PREFIX = os.environ.get("TODOSYNC_TEST_CLUSTER_PREFIX", "tsx")
SNAPSHOT_DIR = os.environ.get("TODOSYNC_TEST_CLUSTER_SNAPSHOT_DIR", "").strip()
FRONT_URLS = [u for u in os.environ.get("TODOSYNC_TEST_CLUSTER_FRONT_URLS", "").split(",") if u]

requires_cluster = pytest.mark.skipif(not CMD, reason="not running against scripts/cluster.sh (TODOSYNC_TEST_CLUSTER_CMD unset)")


def cluster(*args: str, timeout: float = 300) -> str:
    proc = subprocess.run([CMD, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"cluster.sh {' '.join(args)} failed: {proc.stderr[-3000:]}"
    return proc.stdout


def node_sql(node: int, sql: str, timeout: float = 10) -> str:
    proc = subprocess.run(["mariadb", "--no-defaults", f"--socket={SOCKETS[node - 1]}", "-uroot", "-N", "-B",
                           "--connect-timeout=3", "-e", sql], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"db{node}: {proc.stderr[-1000:]}"
    return proc.stdout


def node_status(node: int) -> dict[str, str]:
    out = node_sql(node, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', "
                         "'wsrep_local_state_comment', 'wsrep_ready', 'wsrep_local_commits', "
                         "'wsrep_local_cert_failures', 'wsrep_local_bf_aborts', 'wsrep_last_committed')")
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def counter_sum(name: str) -> dict[int, int]:
    return {n: int(node_status(n).get(name, "0")) for n in range(1, NODES + 1)}


def app_retry_counts() -> dict[str, int]:
    """The latest `transaction retries since start` line of every responder host, summed."""
    total: dict[str, int] = {}
    for n in range(1, APPS + 1):
        path = os.path.join(LOG_DIR, f"app{n}.log")
        last = None
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    if "transaction retries since start" in line:
                        last = line
        except FileNotFoundError:
            continue
        if last:
            for key, value in re.findall(r"(\w+)=(\d+)", last.split("since start:", 1)[1]):
                total[key] = total.get(key, 0) + int(value)
    return total


def wait_synced(node: int, timeout: float = 180) -> float:
    t0 = time.monotonic()
    cluster("node-wait", str(node), str(int(timeout)), timeout=timeout + 30)
    return time.monotonic() - t0


def fastcgi_probe(namespace: str, host: str, port: int = 9000) -> str:
    """From inside `namespace`, send one FastCGI GET /healthz to host:port; returns 'answered' when
    a FastCGI response came back, 'closed' when the connection was closed without one."""
    script = r'''
import socket, struct, sys
def rec(t, body, rid=1):
    pad = (8 - len(body) % 8) % 8
    return struct.pack(">BBHHBB", 1, t, rid, len(body), pad, 0) + body + b"\0" * pad
def nv(k, v):
    return bytes([len(k)]) + bytes([len(v)]) + k + v
params = b"".join(nv(k, v) for k, v in [(b"REQUEST_METHOD", b"GET"), (b"REQUEST_URI", b"/healthz"),
                                        (b"DOCUMENT_URI", b"/healthz"), (b"QUERY_STRING", b"")])
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(rec(1, struct.pack(">HB5x", 1, 0)) + rec(4, params) + rec(4, b"") + rec(5, b""))
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except ConnectionResetError:
    pass
print("answered" if data[:2] == b"\x01\x06" else "closed")
'''
    proc = subprocess.run(["ip", "netns", "exec", namespace, "python3", "-c", script, host, str(port)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()
