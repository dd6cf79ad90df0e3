"""The release binary runs on a host without the Swift toolchain, and says what it is.

- `ldd` on the binary the stack runs names no library under the Swift toolchain (the Swift
  runtime and Foundation are linked in: `scripts/stack.sh build` uses --static-swift-stdlib),
  and every library it needs is found;
- with the toolchain hidden (a private mount namespace with an empty tmpfs over it; needs root
  and util-linux's unshare), the binary prints its version, lists the migrations and answers a
  FastCGI request for /healthz from the stack's database;
- `todosync --version` prints the version written in Sources/TodoSyncServer/Version.swift, with the
  git commit it was built from when the build recorded one (`scripts/stack.sh build` does);
- `todosync migrate --status` lists every Sql/ migration as applied on the test stack, none
  pending, and changes nothing;
- the test hooks are not in it: the stack runs `todosync-test` (the same commands with
  `TodoSyncTestHooks` linked in), and these tests check the shipping `todosync` beside it, whose
  bytes hold none of the hooks' routes, headers or symbols (the test build's do, so the check can
  fail) and whose `serve --enable-test-hooks` refuses to start (78);
- bugs on purpose (issue 38's TODOSYNC_TEST_INJECT, docs/HISTORY.md) cannot be switched on in it:
  with the variable set it refuses to start (78), and so does the test build without
  --enable-test-hooks or with a name it does not know; the test build with its hooks on starts
  and says loudly which bugs it runs with (so the refusal is not the only thing it can do).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def stack_env() -> dict[str, str]:
    stack = os.environ.get("TODOSYNC_TEST_STACK", "").strip()
    if not stack:
        pytest.skip("TODOSYNC_TEST_STACK not set: the release binary is unknown")
    out = subprocess.run(shlex.split(stack) + ["env"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def conf() -> dict[str, str]:
    return stack_env()


@pytest.fixture(scope="module")
def binary(conf) -> str:
    """The shipping binary: the stack's own, or `todosync` beside the test build it runs."""
    path = conf["TODOSYNC_BIN"]
    if Path(path).name == "todosync-test":
        path = str(Path(path).with_name("todosync"))
    assert os.access(path, os.X_OK), f"no executable at {path}"
    return path


# What only the test hooks (Sources/TodoSyncTestHooks) put into a binary: their routes, a query
# parameter's refusal, the hold header, the store's slow write and the module (symbol names). Only
# strings longer than 15 bytes: Swift keeps shorter literals inside the instructions (small
# strings), where no byte search finds them (`/__bench/page`, `die_mid_body_ms`).
TEST_HOOK_MARKS = [b"/__bench/fastcgi", b"/api/v1/__test/slow-todo", b"`__test_hold_ms` must be",
                   b"x-todosync-test-hold-ms", b"createTodoHoldingLock", b"TodoSyncTestHooks",
                   b"skip-opid-lookup", b"ignore-version-check", b"skip-stats-rebuild",
                   b"BUGS INJECTED ON PURPOSE"]


def hook_marks(path: str) -> list[bytes]:
    data = Path(path).read_bytes()
    return [mark for mark in TEST_HOOK_MARKS if mark in data]


def test_the_release_binary_has_no_test_hooks(binary, conf):
    assert Path(binary).name == "todosync", binary
    assert hook_marks(binary) == [], f"{binary} contains test hooks: {hook_marks(binary)}"
    test_build = Path(binary).with_name("todosync-test")
    if conf["TODOSYNC_BIN"] == str(test_build) or test_build.exists():
        # The same check finds every mark in the test build, so it is not vacuous.
        assert hook_marks(str(test_build)) == TEST_HOOK_MARKS, hook_marks(str(test_build))


def test_the_release_binary_refuses_to_enable_test_hooks(binary, conf, tmp_path):
    out = subprocess.run([binary, "serve", "--enable-test-hooks", "--socket", str(tmp_path / "s.sock")],
                         env=db_env(conf), capture_output=True, text=True, timeout=60)
    assert out.returncode == 78, out.stdout + out.stderr
    assert "this build has no test hooks" in out.stderr, out.stderr
    assert not (tmp_path / "s.sock").exists()


def serve_with_injection(binary: str, conf, tmp_path, inject: str, *flags: str) -> subprocess.CompletedProcess:
    env = dict(db_env(conf), TODOSYNC_TEST_INJECT=inject)
    return subprocess.run([binary, "serve", *flags, "--socket", str(tmp_path / "s.sock")],
                          env=env, capture_output=True, text=True, timeout=60)


def test_the_release_binary_refuses_bugs_injected_on_purpose(binary, conf, tmp_path):
    for flags in ((), ("--enable-test-hooks",)):
        out = serve_with_injection(binary, conf, tmp_path, "skip-opid-lookup", *flags)
        assert out.returncode == 78, out.stdout + out.stderr
        assert "refusing to start" in out.stderr or "this build has no test hooks" in out.stderr, out.stderr
        assert not (tmp_path / "s.sock").exists()


def test_the_test_build_injects_bugs_only_with_its_hooks_on(binary, conf, tmp_path):
    test_build = str(Path(binary).with_name("todosync-test"))
    if not os.access(test_build, os.X_OK):
        pytest.skip(f"no test build at {test_build}")
    out = serve_with_injection(test_build, conf, tmp_path, "skip-opid-lookup")  # hooks off
    assert out.returncode == 78 and "TODOSYNC_TEST_INJECT=skip-opid-lookup" in out.stderr, out.stdout + out.stderr
    out = serve_with_injection(test_build, conf, tmp_path, "skip-opid-lookup,no-such-bug", "--enable-test-hooks")
    assert out.returncode == 78 and "unknown injection no-such-bug" in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "s.sock").exists()
    log = open(tmp_path / "serve.log", "w")
    env = dict(db_env(conf), TODOSYNC_TEST_INJECT="skip-stats-rebuild")
    proc = subprocess.Popen([test_build, "serve", "--enable-test-hooks", "--socket", str(tmp_path / "s.sock"),
                             "--workers", "1"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "s.sock").exists():
            assert proc.poll() is None, f"serve exited ({proc.returncode}): {(tmp_path / 'serve.log').read_text()}"
            assert time.monotonic() < deadline, "serve did not open its socket in 20 s"
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()
    text = (tmp_path / "serve.log").read_text()
    loud = [line for line in text.splitlines() if "BUGS INJECTED ON PURPOSE" in line]
    assert loud and "skip-stats-rebuild" in loud[0] and '"critical"' in loud[0], text[-2000:]


def toolchain_root() -> Path:
    """The Swift toolchain's root (/opt/swift here): two levels above the real `swift`."""
    swift = shutil.which("swift")
    if not swift:
        return Path("/opt/swift")
    return Path(os.path.realpath(swift)).parents[2]


def db_env(conf: dict[str, str]) -> dict[str, str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TODOSYNC_CONFIG": "/dev/null", "TODOSYNC_LOG_LEVEL": "warning"}
    for key in ("TODOSYNC_DB_SOCKET", "TODOSYNC_DB_HOST", "TODOSYNC_DB_PORT", "TODOSYNC_DB_USER",
                "TODOSYNC_DB_PASSWORD", "TODOSYNC_DB_PASSWORD_FILE", "TODOSYNC_DB_NAME"):
        if conf.get(key):
            env[key] = conf[key]
    return env


def hidden(argv: list[str]) -> list[str]:
    """argv run in a private mount namespace where the toolchain directory is an empty tmpfs."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("hiding the toolchain needs root and unshare (util-linux)")
    root = toolchain_root()
    script = f"mount -t tmpfs none {shlex.quote(str(root))} && exec " + shlex.join(argv)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def test_ldd_names_nothing_under_the_toolchain(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    root = str(toolchain_root())
    under = [line.strip() for line in out.stdout.splitlines() if root in line]
    missing = [line.strip() for line in out.stdout.splitlines() if "not found" in line]
    assert not under, f"{binary} loads libraries from the Swift toolchain ({root}): {under}"
    assert not missing, f"{binary} needs libraries that are not installed: {missing}"
    assert not re.search(r"libswiftCore|libFoundation", out.stdout), out.stdout


def test_version_names_the_release_and_the_commit(binary):
    source = (REPO_ROOT / "Sources/TodoSyncServer/Version.swift").read_text()
    version = re.search(r'let todosyncVersion = "([^"]+)"', source).group(1)
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.strip()
    assert printed.split()[0] == version, printed
    if os.environ.get("TODOSYNC_TEST_BIN"):
        return  # another build: its commit is its own
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0:
        return  # no git: the build recorded no commit
    m = re.fullmatch(rf"{re.escape(version)} \(commit ([0-9a-f]{{12}})(-dirty)?\)", printed)
    assert m, f"expected '{version} (commit <12 hex digits>)', got {printed!r}"
    if os.environ.get("TODOSYNC_TEST_SKIP_BUILD") == "1":
        # A binary from an earlier build: its commit must at least be one of HEAD's history.
        ancestor = subprocess.run(["git", "-C", str(REPO_ROOT), "merge-base", "--is-ancestor", m.group(1), "HEAD"])
        assert ancestor.returncode == 0, f"{printed!r} names no commit of this branch's history"
    else:
        assert m.group(1) == head.stdout.strip(), (
            f"the stack's binary was just built from {head.stdout.strip()}, but says {printed!r}")


def test_migrate_status_lists_every_migration_applied(binary, conf):
    files = sorted(p.name for p in (REPO_ROOT / "Sql").glob("*.sql"))
    env = db_env(conf)
    out = subprocess.run([binary, "migrate", "--status", "--sql-dir", str(REPO_ROOT / "Sql")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    applied = [line.split()[2] for line in lines if line.startswith("applied ")]
    assert applied == files, out.stdout
    assert not [line for line in lines if line.startswith("pending ")], out.stdout
    assert lines[-1] == f"{len(files)} applied, 0 pending", out.stdout


def test_migrate_status_shows_a_new_migration_as_pending(binary, conf, tmp_path):
    for sql in (REPO_ROOT / "Sql").glob("*.sql"):
        shutil.copy(sql, tmp_path / sql.name)
    (tmp_path / "999_not_applied.sql").write_text("SELECT 1;\n")
    out = subprocess.run([binary, "migrate", "--status", "--sql-dir", str(tmp_path)],
                         env=db_env(conf), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pending  999  999_not_applied.sql" in out.stdout, out.stdout
    again = subprocess.run([binary, "migrate", "--status", "--sql-dir", str(tmp_path)],
                           env=db_env(conf), capture_output=True, text=True, timeout=60)
    assert "pending  999  999_not_applied.sql" in again.stdout, "--status applied something"


def test_binary_runs_and_serves_with_the_toolchain_hidden(binary, conf, tmp_path):
    root = toolchain_root()
    probe = subprocess.run(hidden(["ls", "-A", str(root)]), capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0 and probe.stdout.strip() == "", f"toolchain not hidden: {probe}"

    version = subprocess.run(hidden([binary, "--version"]), capture_output=True, text=True, timeout=30)
    assert version.returncode == 0, f"the binary does not start without {root}: {version.stderr}"

    status = subprocess.run(hidden([binary, "migrate", "--status", "--sql-dir", str(REPO_ROOT / "Sql")]),
                            env=db_env(conf), capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "0 pending" in status.stdout, status.stdout + status.stderr

    sock = tmp_path / "fcgi.sock"
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(hidden([binary, "serve", "--socket", str(sock), "--workers", "2"]),
                            env=db_env(conf), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert proc.poll() is None, f"serve exited ({proc.returncode}): {(tmp_path / 'serve.log').read_text()}"
            assert time.monotonic() < deadline, "serve did not open its socket in 20 s"
            time.sleep(0.1)
        for attempt in range(50):  # the socket file exists a moment before listen()
            try:
                reply = fastcgi_get(str(sock), "/healthz")
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert b"Status: 200" in head, reply[:500]
        assert b'"status":"ok"' in body.replace(b" ", b""), reply[:500]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# --------------------------------------------------------------------------- a FastCGI GET

def _record(kind: int, content: bytes) -> bytes:
    return struct.pack("!BBHHBx", 1, kind, 1, len(content), 0) + content


def _pair(name: str, value: str) -> bytes:
    def length(n: int) -> bytes:
        return bytes([n]) if n < 128 else struct.pack("!I", n | 0x80000000)
    n, v = name.encode(), value.encode()
    return length(len(n)) + length(len(v)) + n + v


def fastcgi_get(sock_path: str, uri: str) -> bytes:
    """One FastCGI GET as nginx would send it; returns the responder's stdout (CGI head + body)."""
    params = {"REQUEST_METHOD": "GET", "REQUEST_URI": uri, "DOCUMENT_URI": uri.split("?")[0],
              "QUERY_STRING": uri.partition("?")[2], "SERVER_PROTOCOL": "HTTP/1.1",
              "CONTENT_LENGTH": "", "CONTENT_TYPE": "", "REMOTE_ADDR": "127.0.0.1"}
    begin = struct.pack("!HB5x", 1, 0)  # FCGI_RESPONDER, close the connection afterwards
    payload = b"".join(_pair(k, v) for k, v in params.items())
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(15)
        s.connect(sock_path)
        s.sendall(_record(1, begin) + _record(4, payload) + _record(4, b"") + _record(5, b""))
        out, buf = b"", b""
        while True:
            while len(buf) < 8:
                chunk = s.recv(65536)
                assert chunk, "the responder closed the connection before FCGI_END_REQUEST"
                buf += chunk
            _, kind, _, length, padding = struct.unpack("!BBHHBx", buf[:8])
            while len(buf) < 8 + length + padding:
                chunk = s.recv(65536)
                assert chunk, "the responder closed the connection mid-record"
                buf += chunk
            content, buf = buf[8:8 + length], buf[8 + length + padding:]
            if kind == 6:
                out += content
            elif kind == 3:
                return out
