#!/usr/bin/env python3
"""What metrics and request logs cost per request, in instructions (callgrind), side by side.

Runs `todosync serve --workers 1` of each binary under `valgrind --tool=callgrind`, on a unix
socket, against a running stack's database, and sends it FastCGI requests directly (no nginx):
a run with N1 requests and one with N2; (I(N2) - I(N1)) / (N2 - N1) is the cost of one request
with startup and shutdown cancelled out. Instruction counts do not depend on the machine's load.

Usage (a stack must be up: scripts/stack.sh up; its env gives the database):
  bench/observability_cost.py BASE_BINARY NEW_BINARY [--n1 50] [--n2 450]
     [--path /api/v1/tags] [--stack scripts/stack.sh] [--new-env TODOSYNC_LOG_REQUESTS=0]
valgrind cannot read the DWARF of the static release binary ("possibly corrupted debuginfo"):
pass stripped copies (`strip -o /tmp/todosync-new .build/.../release/todosync`); counts are the same.
Prints one line per binary and path, and the difference.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request

from fcgi_client import fcgi_request  # bench/fcgi_client.py


def fastcgi_get(sock_path: str, path: str, token: str | None) -> None:
    headers = {"X-Request-Id": os.urandom(16).hex()}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    status, body = fcgi_request(sock_path, "GET", path, headers)
    assert status == 200, (status, body[:200])


def run(binary: str, env: dict, n: int, path: str, token: str | None) -> int:
    tmp = tempfile.mkdtemp(prefix="obs-cost-")
    sock = os.path.join(tmp, "fcgi.sock")
    out = os.path.join(tmp, "callgrind.out")
    log = open(os.path.join(tmp, "responder.log"), "w")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "serve",
                             "--socket", sock, "--workers", "1"], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while not os.path.exists(sock):
        assert proc.poll() is None and time.monotonic() < deadline, open(log.name).read()[-2000:]
        time.sleep(0.2)
    for _ in range(5):  # warm up: connect, prepare statements
        fastcgi_get(sock, path, token)
    for _ in range(n):
        fastcgi_get(sock, path, token)
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    total = 0
    for f in glob.glob(out + "*"):  # one file; several with --separate-threads
        for line in open(f):
            if line.startswith("summary:"):
                total += int(line.split()[1])
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--n1", type=int, default=50)
    ap.add_argument("--n2", type=int, default=450)
    ap.add_argument("--path", action="append")
    ap.add_argument("--stack", default="scripts/stack.sh")
    ap.add_argument("--new-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment for the new binary only, e.g. TODOSYNC_LOG_REQUESTS=0")
    args = ap.parse_args()
    paths = args.path or ["/healthz", "/api/v1/tags"]
    env_text = subprocess.run([args.stack, "env"], capture_output=True, text=True, check=True).stdout
    stack_env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TODOSYNC_")}
    for key in ("TODOSYNC_DB_SOCKET", "TODOSYNC_DB_NAME", "TODOSYNC_DB_USER", "TODOSYNC_DB_PASSWORD_FILE"):
        if stack_env.get(key):
            env[key] = stack_env[key]
    env["TODOSYNC_INSTANCE"] = "1"
    env["TODOSYNC_CONFIG"] = "/dev/null"
    # A user and a token, through the stack's nginx.
    base_url = f"http://127.0.0.1:{stack_env.get('TODOSYNC_HTTP_PORT', '8080')}"
    email = f"cost-{os.urandom(4).hex()}@example.test"
    body = json.dumps({"email": email, "password": "cost of observability"}).encode()
    req = urllib.request.Request(base_url + "/api/v1/auth/register", body, {"Content-Type": "application/json"})
    token = json.load(urllib.request.urlopen(req))["token"]
    results = {}
    for path in paths:
        for name, binary in (("base", args.base), ("new", args.new)):
            run_env = dict(env, **dict(e.split("=", 1) for e in args.new_env)) if name == "new" else env
            i1 = run(binary, run_env, args.n1, path, token)
            i2 = run(binary, run_env, args.n2, path, token)
            per = (i2 - i1) / (args.n2 - args.n1)
            results[(path, name)] = per
            print(f"{path:16} {name:4} {per:12,.0f} instructions/request  ({binary})", flush=True)
        base, new = results[(path, "base")], results[(path, "new")]
        print(f"{path:16} diff {new - base:+12,.0f} instructions/request ({(new - base) / base:+.1%})", flush=True)


if __name__ == "__main__":
    main()
