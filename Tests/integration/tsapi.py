"""Helpers shared by the TodoSync black-box integration tests.

Everything here talks to the running stack over HTTP(S) (``requests`` or a raw socket) or, for
a few storage checks, through the ``mariadb`` command-line client.  Nothing imports project code.

Environment (set by scripts/test.sh):
  TODOSYNC_TEST_BASE_URL   plain-HTTP base, default http://127.0.0.1:18080
  TODOSYNC_TEST_HTTPS_URL  HTTPS base (self-signed), default https://127.0.0.1:18443
  TODOSYNC_TEST_STACK      command prefix controlling the stack (db-stop, db-start, responder-pids)
  TODOSYNC_TEST_DB_SOCKET  MariaDB unix socket (root, no password, database ``todosync``)
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as _dt
import gzip
import json
import os
import re
import shlex
import signal
import socket
import ssl
import subprocess
import time
import uuid
from typing import Any, Iterable
from urllib.parse import urlsplit

import requests
from requests.structures import CaseInsensitiveDict

BASE_URL = os.environ.get("TODOSYNC_TEST_BASE_URL", "http://127.0.0.1:18080").rstrip("/")
HTTPS_URL = os.environ.get("TODOSYNC_TEST_HTTPS_URL", "https://127.0.0.1:18443").rstrip("/")
STACK = os.environ.get("TODOSYNC_TEST_STACK", "").strip()
DB_SOCKET = os.environ.get("TODOSYNC_TEST_DB_SOCKET", "").strip()
API_PREFIX = "/api/v1"
API_URL = BASE_URL + API_PREFIX
TIMEOUT = 10.0  # seconds, every HTTP call

TAG_KEYS = {"id", "clientId", "name", "color", "version", "createdAt", "updatedAt", "deletedAt"}
# Schema versions (API.md "Schema versions"): REST always uses the current one; a sync request
# names its own (absent: 1). A todo has `notes` from version 2 on, `remindAt` from 3 on.
CURRENT_SCHEMA = 3
TODO_KEYS_V1 = {
    "id", "clientId", "title", "raw", "isImportant", "isLife", "tagId", "difficulty",
    "estimatedTime", "deadline", "isCompleted", "version", "createdAt", "updatedAt", "deletedAt",
}
TODO_KEYS_V2 = TODO_KEYS_V1 | {"notes"}
TODO_KEYS_V3 = TODO_KEYS_V2 | {"remindAt"}
TODO_KEYS = TODO_KEYS_V3  # the current version's
NOTES_MAX = 10_000


def todo_keys(schema: int) -> set[str]:
    return TODO_KEYS_V1 if schema < 2 else TODO_KEYS_V2 if schema < 3 else TODO_KEYS_V3
TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ERROR_CODE_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")

# Things that must never appear in an error body (internals leaking to a client).
LEAK_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"sql", r"mariadb", r"traceback", r"stack ?trace", r"\.swift\b", r"fatal error",
        r"/work/", r"/usr/", r"/home/", r"/tmp/", r"/var/", r"/sources/", r"\bline \d+\b",
        r"errno", r"segmentation", r"nil\b.*unwrap", r"swift_", r"\bat 0x[0-9a-f]+",
    )
]

_MISSING = object()


# --------------------------------------------------------------------------- small utilities

def unique(prefix: str = "u") -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


def unique_email(local_prefix: str = "t", domain: str = "example.test") -> str:
    return f"{local_prefix}-{uuid.uuid4().hex[:16]}@{domain}"


def new_password() -> str:
    return "pw-" + uuid.uuid4().hex  # 35 ASCII characters


def days_from(date: str, days: int) -> str:
    d = _dt.date.fromisoformat(date) + _dt.timedelta(days=days)
    return d.isoformat()


def parse_ts(value: str) -> _dt.datetime:
    assert isinstance(value, str) and TIMESTAMP_RE.match(value), f"not an RFC 3339 UTC ms timestamp: {value!r}"
    return _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.timezone.utc)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def media_type(resp) -> str:
    return resp.headers.get("Content-Type", "").split(";")[0].strip().lower()


def short(resp) -> str:
    try:
        text = resp.text
    except Exception:  # pragma: no cover - diagnostics only
        text = repr(resp.content[:300])
    return f"HTTP {resp.status_code} {dict(resp.headers)!r} {text[:600]!r}"


# --------------------------------------------------------------------------- assertions

def assert_no_leak(text: str) -> None:
    for pat in LEAK_PATTERNS:
        m = pat.search(text)
        assert m is None, f"error body leaks internals ({pat.pattern!r} matched {m.group(0)!r}): {text[:600]!r}"


def assert_json(resp) -> Any:
    assert media_type(resp) == "application/json", f"expected JSON: {short(resp)}"
    try:
        return resp.json()
    except ValueError as exc:  # pragma: no cover - assertion message path
        raise AssertionError(f"body is not JSON: {short(resp)}") from exc


def assert_error(resp, status: int, code: str | None = None, fields: Iterable[str] | None = None) -> dict:
    """Assert the contract's error body: {"error": {"code", "message", "details"?}}."""
    assert resp.status_code == status, f"expected {status}: {short(resp)}"
    body = assert_json(resp)
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), f"no error object: {short(resp)}"
    err = body["error"]
    assert isinstance(err.get("code"), str) and ERROR_CODE_RE.match(err["code"]), f"bad code: {short(resp)}"
    if code is not None:
        assert err["code"] == code, f"expected code {code!r}: {short(resp)}"
    assert isinstance(err.get("message"), str) and err["message"].strip(), f"empty message: {short(resp)}"
    details = err.get("details")
    if details is not None:
        assert isinstance(details, list), f"details must be a list: {short(resp)}"
        for d in details:
            assert isinstance(d, dict), f"detail not an object: {short(resp)}"
            assert isinstance(d.get("field"), str), f"detail without field: {short(resp)}"
            assert isinstance(d.get("problem"), str) and d["problem"].strip(), f"detail without problem: {short(resp)}"
    if fields:
        named = {d["field"] for d in (details or [])}
        missing = set(fields) - named
        assert not missing, f"details must name {sorted(missing)}: {short(resp)}"
    assert_no_leak(resp.text)
    return err


def assert_timestamps(rec: dict, now_slack_s: float = 900.0) -> None:
    created = parse_ts(rec["createdAt"])
    updated = parse_ts(rec["updatedAt"])
    assert updated >= created, rec
    now = _dt.datetime.now(_dt.timezone.utc)
    # The stack runs on this machine and every record is made by this test run, so a real UTC
    # timestamp is within minutes of now (catches local-time-labelled-as-Z bugs).
    for key, value in (("createdAt", created), ("updatedAt", updated)):
        assert abs((value - now).total_seconds()) < now_slack_s, f"{key} far from now (not UTC?): {rec}"
    if rec["deletedAt"] is not None:
        assert parse_ts(rec["deletedAt"]) >= created, rec


def _assert_common(rec: dict) -> None:
    assert is_int(rec["id"]) and rec["id"] > 0, rec
    assert is_int(rec["version"]) and rec["version"] > 0, rec
    assert rec["clientId"] is None or isinstance(rec["clientId"], str), rec
    assert rec["deletedAt"] is None or TIMESTAMP_RE.match(rec["deletedAt"]), rec
    assert_timestamps(rec)


def assert_tag(rec: Any, live: bool = True) -> dict:
    assert isinstance(rec, dict), rec
    assert set(rec) == TAG_KEYS, f"tag keys {sorted(rec)} != {sorted(TAG_KEYS)}"
    _assert_common(rec)
    assert isinstance(rec["name"], str) and 1 <= len(rec["name"]) <= 50, rec
    assert isinstance(rec["color"], str) and re.fullmatch(r"#[0-9A-F]{6}", rec["color"]), rec
    if live:
        assert rec["deletedAt"] is None, rec
    return rec


def assert_todo(rec: Any, live: bool = True, schema: int = CURRENT_SCHEMA) -> dict:
    """A todo with exactly the fields of schema version `schema` (REST: the current one)."""
    assert isinstance(rec, dict), rec
    keys = todo_keys(schema)
    assert set(rec) == keys, f"todo keys at schema {schema}: {sorted(rec)} != {sorted(keys)}"
    if "notes" in rec:
        assert rec["notes"] is None or (isinstance(rec["notes"], str) and len(rec["notes"]) <= NOTES_MAX), rec
    if "remindAt" in rec:
        assert rec["remindAt"] is None or TIMESTAMP_RE.match(rec["remindAt"]), rec
    _assert_common(rec)
    assert isinstance(rec["title"], str), rec
    assert isinstance(rec["raw"], str), rec
    for b in ("isImportant", "isLife", "isCompleted"):
        assert isinstance(rec[b], bool), rec
    assert rec["tagId"] is None or is_int(rec["tagId"]), rec
    assert is_int(rec["difficulty"]) and 0 <= rec["difficulty"] <= 5, rec
    assert is_int(rec["estimatedTime"]) and 0 <= rec["estimatedTime"] <= 1440, rec
    assert isinstance(rec["deadline"], str) and DATE_RE.match(rec["deadline"]), rec
    if live:
        assert rec["deletedAt"] is None, rec
    return rec


def assert_etag(resp, rec: dict) -> None:
    assert resp.headers.get("ETag") == f'"{rec["version"]}"', (
        f"ETag must be the quoted version {rec['version']}: {resp.headers.get('ETag')!r}")


def without(rec: dict, *keys: str) -> dict:
    return {k: v for k, v in rec.items() if k not in keys}


# --------------------------------------------------------------------------- HTTP client

class Api:
    """A small JSON client for /api/v1 that carries one user's bearer token."""

    def __init__(self, token: str | None = None, base_url: str = BASE_URL, *, verify: bool = True):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.session = requests.Session()
        self.verify = verify
        self.user: dict | None = None
        self.email: str | None = None
        self.password: str | None = None

    # -- raw-ish request -------------------------------------------------------------------
    def request(self, method: str, path: str, json_body: Any = _MISSING, *, data: bytes | str | None = None,
                headers: dict | None = None, auth: bool = True, ascii_json: bool = False,
                timeout: float = TIMEOUT, retry_429: bool = True, **kw) -> requests.Response:
        if path.startswith("http://") or path.startswith("https://"):
            url = path
        elif path.startswith("/api/") or path.startswith("/healthz") or not path.startswith("/"):
            url = self.base_url + (path if path.startswith("/") else "/" + path)
        else:
            url = self.base_url + API_PREFIX + path
        hdrs: dict[str, str] = {}
        if auth and self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if json_body is not _MISSING:
            data = json.dumps(json_body, ensure_ascii=ascii_json).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        if headers:
            for k, v in headers.items():
                if v is None:
                    hdrs.pop(k, None)
                else:
                    hdrs[k] = v
        if isinstance(data, str):
            data = data.encode("utf-8")
        is_auth_route = urlsplit(url).path.startswith(API_PREFIX + "/auth/")
        for attempt in range(AUTH_RETRIES if is_auth_route else 1):
            # verify is passed per request: a session-level verify=False loses to
            # REQUESTS_CA_BUNDLE in requests' environment merging.
            r = self.session.request(method, url, data=data, headers=hdrs, timeout=timeout,
                                     allow_redirects=False, verify=self.verify, **kw)
            # nginx's per-address limit on /auth/ may bite when many tests run back to back;
            # tests that assert 429 themselves use auth_post(..., retry_429=False) or raw sockets.
            if not (is_auth_route and r.status_code == 429 and retry_429):
                return r
            time.sleep(auth_backoff(attempt))
        return r

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json_body: Any = _MISSING, **kw):
        return self.request("POST", path, json_body, **kw)

    def patch(self, path, json_body: Any = _MISSING, **kw):
        return self.request("PATCH", path, json_body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # -- conveniences that assert success -------------------------------------------------
    def create_tag(self, name: str | None = None, color: str = "#3366CC", **extra) -> dict:
        body = {"name": name if name is not None else unique("tag-")[:20], "color": color, **extra}
        r = self.post("/tags", body)
        assert r.status_code == 201, short(r)
        rec = assert_tag(assert_json(r))
        assert_etag(r, rec)
        return rec

    def create_todo(self, title: str | None = None, deadline: str = "2030-06-15", **extra) -> dict:
        body = {"title": title if title is not None else unique("todo-"), "deadline": deadline, **extra}
        r = self.post("/todos", body)
        assert r.status_code == 201, short(r)
        rec = assert_todo(assert_json(r))
        assert_etag(r, rec)
        return rec

    def get_tag(self, tag_id: int) -> dict:
        r = self.get(f"/tags/{tag_id}")
        assert r.status_code == 200, short(r)
        rec = assert_tag(assert_json(r))
        assert_etag(r, rec)
        return rec

    def get_todo(self, todo_id: int) -> dict:
        r = self.get(f"/todos/{todo_id}")
        assert r.status_code == 200, short(r)
        rec = assert_todo(assert_json(r))
        assert_etag(r, rec)
        return rec

    def list_tags(self) -> list[dict]:
        r = self.get("/tags")
        assert r.status_code == 200, short(r)
        body = assert_json(r)
        assert isinstance(body, dict) and isinstance(body.get("items"), list), body
        return [assert_tag(t) for t in body["items"]]

    def list_todos(self, **params) -> list[dict]:
        r = self.get("/todos", params=params)
        assert r.status_code == 200, short(r)
        body = assert_json(r)
        assert isinstance(body, dict) and isinstance(body.get("items"), list), body
        return [assert_todo(t) for t in body["items"]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing uses right now (for a second nginx in a test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- auth helpers

# Auth answers 429 when the address's nginx bucket is empty and, at once, when every password-hash
# slot of the responder is busy (TODOSYNC_HASH_CONCURRENCY): many tests register or log in
# concurrently, so helpers retry with a jittered backoff.
AUTH_RETRIES = 24


def auth_backoff(attempt: int) -> float:
    import random
    return min(0.25 + 0.25 * attempt, 2.0) + random.random() * 0.5


def auth_post(path: str, body: Any, *, retry_429: bool = True, base_url: str = BASE_URL,
              verify: bool = True) -> requests.Response:
    """POST to /api/v1/auth/<path>.  Retries nginx's per-address 429 unless told not to."""
    url = f"{base_url}{API_PREFIX}/auth/{path}"
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    for attempt in range(AUTH_RETRIES):
        r = requests.post(url, data=data, headers={"Content-Type": "application/json"},
                          timeout=TIMEOUT, verify=verify)
        if r.status_code != 429 or not retry_429:
            return r
        time.sleep(auth_backoff(attempt))
    return r


def register(email: str, password: str, **kw) -> requests.Response:
    return auth_post("register", {"email": email, "password": password}, **kw)


def login(email: str, password: str, **kw) -> requests.Response:
    return auth_post("login", {"email": email, "password": password}, **kw)


def assert_auth_body(resp, status: int) -> dict:
    assert resp.status_code == status, short(resp)
    body = assert_json(resp)
    assert isinstance(body, dict) and set(body) == {"user", "token"}, body
    assert isinstance(body["user"], dict) and set(body["user"]) == {"id", "email"}, body
    assert is_int(body["user"]["id"]) and body["user"]["id"] > 0, body
    assert isinstance(body["user"]["email"], str), body
    tok = body["token"]
    # >= 128 random bits: at least 22 base64 / 32 hex characters.
    assert isinstance(tok, str) and len(tok) >= 22, body
    assert all(0x21 <= ord(c) < 0x7F for c in tok), f"token must be header-safe ASCII: {tok!r}"
    return body


def new_user(email: str | None = None, password: str | None = None, base_url: str = BASE_URL) -> Api:
    email = email or unique_email()
    password = password or new_password()
    r = register(email, password, base_url=base_url)
    body = assert_auth_body(r, 201)
    api = Api(body["token"], base_url)
    api.user, api.email, api.password = body["user"], email, password
    return api


# --------------------------------------------------------------------------- raw sockets

class RawResponse:
    """Minimal response object compatible with the assertion helpers above."""

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]], content: bytes):
        self.status_code = status
        self.reason = reason
        self.header_list = headers
        self.headers = CaseInsensitiveDict()
        for k, v in headers:
            self.headers[k] = v if k not in self.headers else self.headers[k] + ", " + v
        self.raw_content = content
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            content = gzip.decompress(content)
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content.decode("utf-8"))


def _split_base(base_url: str):
    u = urlsplit(base_url)
    https = u.scheme == "https"
    return u.hostname or "127.0.0.1", u.port or (443 if https else 80), https


def raw_connect(base_url: str = BASE_URL, timeout: float = TIMEOUT) -> socket.socket:
    host, port, https = _split_base(base_url)
    sock = socket.create_connection((host, port), timeout=timeout)
    if https:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        sock = ctx.wrap_socket(sock, server_hostname=host)
    return sock


def build_raw(method: str, path: str, headers: dict | list | None = None, body: bytes = b"", *,
              base_url: str = BASE_URL, chunked: bool = False, content_length: bool = True) -> bytes:
    host, port, _ = _split_base(base_url)
    items = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in items}
    lines = [f"{method} {path} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host}:{port}")
    if "connection" not in names:
        lines.append("Connection: close")
    for k, v in items:
        lines.append(f"{k}: {v}")
    payload = body
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        parts = []
        for i in range(0, len(body), 65536):
            piece = body[i:i + 65536]
            parts.append(b"%x\r\n" % len(piece) + piece + b"\r\n")
        parts.append(b"0\r\n\r\n")
        payload = b"".join(parts)
    elif content_length and (body or method in ("POST", "PUT", "PATCH")) and "content-length" not in names:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def raw_read(sock: socket.socket) -> RawResponse:
    """Read one response from a Connection: close socket (EOF or Content-Length ends it)."""
    buf = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            head_end = buf.find(b"\r\n\r\n")
            if head_end >= 0:
                head = buf[:head_end].decode("latin-1")
                m = re.search(r"(?im)^content-length:\s*(\d+)\s*$", head)
                if m and len(buf) >= head_end + 4 + int(m.group(1)):
                    break
    except (ConnectionResetError, BrokenPipeError):
        if not buf:
            raise
    finally:
        try:
            sock.close()
        except OSError:
            pass
    head_end = buf.find(b"\r\n\r\n")
    assert head_end >= 0, f"no complete HTTP response head: {buf[:300]!r}"
    head = buf[:head_end].decode("latin-1").split("\r\n")
    status_line = head[0].split(" ", 2)
    status = int(status_line[1])
    reason = status_line[2] if len(status_line) > 2 else ""
    headers = []
    for line in head[1:]:
        k, _, v = line.partition(":")
        headers.append((k.strip(), v.strip()))
    body = buf[head_end + 4:]
    hmap = {k.lower(): v for k, v in headers}
    if hmap.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2:]
        body = out
    elif "content-length" in hmap:
        body = body[: int(hmap["content-length"])]
    return RawResponse(status, reason, headers, body)


def raw_request(method: str, path: str, headers: dict | list | None = None, body: bytes = b"", *,
                base_url: str = BASE_URL, chunked: bool = False, content_length: bool = True,
                timeout: float = TIMEOUT) -> RawResponse:
    """Send one hand-built HTTP/1.1 request and parse the answer.

    Survives a server that answers early (e.g. 413) and stops reading the body.
    """
    data = build_raw(method, path, headers, body, base_url=base_url, chunked=chunked,
                     content_length=content_length)
    sock = raw_connect(base_url, timeout)
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        pass
    return raw_read(sock)


# --------------------------------------------------------------------------- stack & database

def stack(*args: str, timeout: float = 90.0) -> str:
    assert STACK, "TODOSYNC_TEST_STACK is not set"
    cmd = shlex.split(STACK) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    return proc.stdout


def stack_env() -> dict[str, str]:
    """The test stack's effective configuration (`stack.sh env`)."""
    return dict(line.split("=", 1) for line in stack("env").splitlines() if "=" in line)


@contextlib.contextmanager
def second_nginx(state_dir, socket_dir: str | None = None, responders: int | None = None, **settings: str):
    """A second nginx rendered by `stack.sh nginx-config` with TODOSYNC_* `settings` (e.g.
    TODOSYNC_REAL_IP_FROM="127.0.0.1"), on free ports, in front of the test stack's responders or
    of `responders` responders listening on `<socket_dir>/fcgi-1.sock`...
    Yields {"http": base URL, "https": base URL, "state": its state dir (log/ holds its logs)}."""
    test_env = stack_env()
    http_port, https_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TODOSYNC_")}
    env.update(TODOSYNC_CONFIG="/dev/null", TODOSYNC_STATE_DIR=str(state_dir), TODOSYNC_HTTP_PORT=str(http_port),
               TODOSYNC_HTTPS_PORT=str(https_port), TODOSYNC_SOCKET_DIR=socket_dir or test_env["TODOSYNC_SOCKET_DIR"],
               TODOSYNC_RESPONDERS=str(responders or test_env["TODOSYNC_RESPONDERS"]), TODOSYNC_SKIP_BUILD="1",
               TODOSYNC_BIN=test_env["TODOSYNC_BIN"], **settings)
    if os.geteuid() == 0 and socket_dir and not socket_dir.startswith(test_env["TODOSYNC_SOCKET_DIR"]):
        env["TODOSYNC_DROP_PRIVILEGES"] = "off"  # nginx's workers reach a test's root-owned sockets as root
    stack_sh = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "stack.sh")
    conf = subprocess.run([stack_sh, "nginx-config"], env=env, capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()
    proc = subprocess.Popen(["nginx", "-p", f"{state_dir}/nginx/", "-c", conf, "-e",
                             f"{state_dir}/log/nginx-error.log", "-g", "daemon off;"])
    base = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None, "second nginx exited"
            assert time.monotonic() < deadline, "second nginx did not start"
            time.sleep(0.1)
        yield {"http": base, "https": f"https://127.0.0.1:{https_port}", "state": str(state_dir)}
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def responder_pids() -> set[int]:
    out = stack("responder-pids", timeout=30)
    return {int(line) for line in out.split() if line.strip().isdigit()}


def db_query(sql: str, timeout: float = 30.0) -> bytes:
    assert DB_SOCKET, "TODOSYNC_TEST_DB_SOCKET is not set"
    cmd = ["mariadb", f"--socket={DB_SOCKET}", "-uroot", "-N", "-B", "-e", sql, "todosync"]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"mariadb failed: {proc.stderr.decode(errors='replace')[-2000:]}"
    return proc.stdout


def wait_healthy(timeout: float = 30.0, base_url: str = BASE_URL) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            r = requests.get(base_url + "/healthz", timeout=5)
            if r.status_code == 200:
                return
            last = short(r)
        except requests.RequestException as exc:
            last = repr(exc)
        time.sleep(0.25)
    raise AssertionError(f"/healthz not healthy after {timeout}s: {last}")


def settle_responders(after: str, timeout: float = 30.0) -> None:
    """Leave the stack as the next test expects it after responders were stopped or killed: nginx
    keeps a responder it could not reach marked down for `fail_timeout` (2 s), so wait that out,
    then until /healthz answers 200 ten times in a row (every responder serving)."""
    time.sleep(2.5)
    deadline = time.monotonic() + timeout
    streak = 0
    while streak < 10:
        assert time.monotonic() < deadline, f"stack did not settle after {after}"
        try:
            ok = requests.get(BASE_URL + "/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            ok = False
        streak = streak + 1 if ok else 0
        if not ok:
            time.sleep(0.2)


def read_head(sock: socket.socket) -> bytes:
    """A response's status line and headers as they arrive on `sock` (up to the blank line)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def proc_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def secret_forms(secret: str) -> list[bytes]:
    """The byte forms a password or token could be stored in without hashing: as text, hex-decoded,
    base64/base64url-decoded (when that yields 16+ bytes) and base64-encoded; for "no secret in
    clear" scans of tables and logs."""
    out = [secret.encode()]
    if re.fullmatch(r"[0-9a-fA-F]+", secret) and len(secret) % 2 == 0:
        out.append(bytes.fromhex(secret))
    for dec in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            raw = dec(secret + "=" * (-len(secret) % 4))
        except (binascii.Error, ValueError):
            continue
        if len(raw) >= 16:
            out.append(raw)
    out.append(base64.b64encode(secret.encode()))
    return out
