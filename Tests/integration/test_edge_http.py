"""The HTTP edge (nginx in front of the responder): 404/413/429 as JSON, gzip, security
headers, HTTPS with TLS 1.2+ only.

Assumptions where API.md is silent (a careful REST API's behaviour):
- Paths outside the API (/, /nope, /index.html, /.env) are "no such route": 404 in the JSON
  error shape, like the API's own 404s (clients and monitors parse one error format).
  Paths nginx rejects while parsing (/../x, %00) need only a 400/404, JSON not required.
- "Over 1 MiB" means more than 1,048,576 bytes of body; a body of exactly 1 MiB is not 413 and
  gets the API's normal answer.  Chunked bodies obey the same limit.
- nginx's per-address auth limit (test stack: 50 r/s, burst 100) answers excess requests with
  429 `rate_limited` in the JSON error shape.
- gzip is offered for large JSON when the client sends `Accept-Encoding: gzip`, and not used
  when the client asks for identity.
- Security headers, following OWASP's REST Security Cheat Sheet: `X-Content-Type-Options:
  nosniff` on every response (success and error); framing forbidden (`X-Frame-Options: DENY`
  or CSP `frame-ancestors 'none'`); `Strict-Transport-Security` with a positive max-age on
  HTTPS; no server version in `Server`.
- TLS 1.0 and 1.1 handshakes fail on the HTTPS port; TLS 1.2 succeeds; default negotiation is
  1.2 or newer.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
import urllib3
from urllib.parse import urlsplit

import pytest
import requests

import tsapi
from tsapi import assert_error, assert_json, raw_request, short

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
# The test stack's certificate is self-signed: HTTPS calls use verify=False on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

MIB = 1024 * 1024


# --------------------------------------------------------------------------- 404 outside the API

@pytest.mark.parametrize("path", ["/", "/nope", "/index.html", "/favicon.ico", "/robots.txt", "/api", "/api/",
                                  "/.env", "/api/v1/../../etc/passwd", "/healthz/extra"])
def test_unknown_paths_404_json(path):
    r = raw_request("GET", path)
    assert_error(r, 404, "not_found")


@pytest.mark.parametrize("path", ["/%2e%2e/etc/passwd", "/../etc/passwd", "/api/v1/todos/%00"])
def test_hostile_paths_get_a_client_error(shared_client, path):
    # nginx may reject these while parsing the request line, before any location (and so
    # before any JSON error_page) applies: only a clean 4xx is required here.
    r = raw_request("GET", path, {"Authorization": f"Bearer {shared_client.token}"})
    assert r.status_code in (400, 404), (r.status_code, r.content[:200])
    if tsapi.media_type(r) == "application/json":
        assert_error(r, r.status_code)


# --------------------------------------------------------------------------- 413

def _body_of_size(size: int) -> bytes:
    head, tail = b'{"title": "', b'", "deadline": "2030-01-01"}'
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    return body


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_1_mib_is_413_json(shared_client, chunked):
    body = _body_of_size(MIB + 512 * 1024)
    r = raw_request("POST", "/api/v1/todos", {"Authorization": f"Bearer {shared_client.token}",
                                              "Content-Type": "application/json"}, body, chunked=chunked)
    assert_error(r, 413, "payload_too_large")


def test_body_one_byte_over_1_mib_is_413(shared_client):
    r = raw_request("POST", "/api/v1/todos", {"Authorization": f"Bearer {shared_client.token}",
                                              "Content-Type": "application/json"}, _body_of_size(MIB + 1))
    assert_error(r, 413, "payload_too_large")


def test_unauthenticated_huge_body_is_413_json():
    body = b'{"email": "' + b"a" * (2 * MIB) + b'@x.test", "password": "12345678"}'
    r = raw_request("POST", "/api/v1/auth/register", {"Content-Type": "application/json"}, body)
    assert r.status_code in (413, 429), r.status_code
    if r.status_code == 429:
        time.sleep(2)
        r = raw_request("POST", "/api/v1/auth/register", {"Content-Type": "application/json"}, body)
    assert_error(r, 413, "payload_too_large")


@pytest.mark.parametrize("size", [1_000_000, MIB], ids=["1e6", "exactly-1MiB"])
def test_body_up_to_1_mib_reaches_the_api(shared_client, size):
    r = raw_request("POST", "/api/v1/todos", {"Authorization": f"Bearer {shared_client.token}",
                                              "Content-Type": "application/json"}, _body_of_size(size))
    assert_error(r, 422, "validation_failed", fields=["title"])


# --------------------------------------------------------------------------- 429 (nginx)

def test_auth_flood_is_rate_limited_with_json_429():
    n = 250
    payload = tsapi.build_raw("POST", "/api/v1/auth/login", {"Content-Type": "application/json"}, b"{")
    deadline = time.monotonic() + 20  # bound the whole flood, whatever the server does
    socks = []
    responses = []
    try:
        for _ in range(n):
            if time.monotonic() > deadline - 10:
                break
            try:
                s = tsapi.raw_connect(timeout=5)
                s.sendall(payload)
            except OSError:
                continue
            socks.append(s)
        for s in socks:
            try:
                s.settimeout(max(0.5, deadline - time.monotonic()))
                responses.append(tsapi.raw_read(s))
            except (OSError, AssertionError):
                responses.append(None)
    finally:
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
    got = [r for r in responses if r is not None]
    limited = [r for r in got if r.status_code == 429]
    try:
        assert len(got) >= n * 0.9, f"only {len(got)} of {n} requests answered"
        assert limited, f"no 429 among {sorted({r.status_code for r in got})}"
        for r in limited[:20]:
            assert_error(r, 429, "rate_limited")
        for r in got:
            assert r.status_code in (400, 429), (r.status_code, r.content[:200])
    finally:
        time.sleep(3.5)  # let the bucket refill so later auth calls are not limited
    # after the refill, auth works again
    assert tsapi.login(tsapi.unique_email(), "whatever-123", retry_429=False).status_code == 401


# --------------------------------------------------------------------------- gzip

@pytest.fixture
def big_list_client(client):
    date = "2031-08-08"
    for i in range(12):
        client.create_todo(title=f"gzip {i}", raw="lorem ipsum dolor sit amet " * 70, deadline=date)
    return client, date


def test_large_json_is_gzipped_when_accepted(big_list_client):
    client, date = big_list_client
    plain = client.get("/todos", params={"date": date}, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200
    assert plain.headers.get("Content-Encoding") in (None, "identity"), plain.headers
    assert len(plain.content) > 20_000
    r = raw_request("GET", f"/api/v1/todos?date={date}",
                    {"Authorization": f"Bearer {client.token}", "Accept-Encoding": "gzip"})
    assert r.status_code == 200, (r.status_code, r.headers)
    assert r.headers.get("Content-Encoding", "").lower() == "gzip", dict(r.headers)
    assert len(r.raw_content) < len(plain.content) / 3
    assert tsapi.media_type(r) == "application/json"
    # the date's list is sent as compressed when it was written (Sql/026): the same bytes
    assert r.content == plain.content
    vary = [v.strip().lower() for v in r.headers.get("Vary", "").split(",") if v.strip()]
    assert vary == ["accept-encoding"], r.headers.get("Vary")


def test_gzip_refused_by_quality_zero_is_not_used_and_vary_is_said_once(big_list_client):
    client, date = big_list_client
    path = f"/api/v1/todos?date={date}"
    auth = {"Authorization": f"Bearer {client.token}"}
    refused = raw_request("GET", path, {**auth, "Accept-Encoding": "gzip;q=0, identity"})
    assert refused.status_code == 200
    assert refused.headers.get("Content-Encoding") in (None, "identity"), dict(refused.headers)
    assert refused.json()["items"], refused.raw_content[:200]
    for accept in ("gzip", "br, gzip;q=0.8"):
        r = raw_request("GET", path, {**auth, "Accept-Encoding": accept})
        assert r.headers.get("Content-Encoding", "").lower() == "gzip", (accept, dict(r.headers))
        vary = [v.strip().lower() for v in r.headers.get("Vary", "").split(",") if v.strip()]
        assert vary == ["accept-encoding"], (accept, r.headers.get("Vary"))
        assert r.json() == refused.json()


def test_a_pull_page_is_gzipped_and_equals_the_identity_page(big_list_client):
    client, _ = big_list_client
    plain = client.get("/sync/pull", params={"limit": 500}, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and len(plain.content) > 20_000
    r = raw_request("GET", "/api/v1/sync/pull?limit=500",
                    {"Authorization": f"Bearer {client.token}", "Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers.get("Content-Encoding", "").lower() == "gzip", dict(r.headers)
    assert len(r.raw_content) < len(plain.content) / 3
    assert r.json() == plain.json()


# --------------------------------------------------------------------------- security headers

def _sample_responses(shared_client):
    return {
        "healthz": requests.get(tsapi.BASE_URL + "/healthz", timeout=tsapi.TIMEOUT),
        "api-200": shared_client.get("/tags"),
        "api-401": tsapi.Api(None).get("/tags"),
        "api-404": shared_client.get("/todos/999999999"),
        "api-422": shared_client.post("/tags", {"name": "", "color": "x"}),
        "edge-404": raw_request("GET", "/nope"),
    }


def _header_tokens(r, name: str) -> set[str]:
    # a header repeated with the same value (app and nginx both adding it) is harmless
    return {v.strip().lower() for v in r.headers.get(name, "").split(",") if v.strip()}


def test_nosniff_on_every_response(shared_client):
    for name, r in _sample_responses(shared_client).items():
        assert _header_tokens(r, "X-Content-Type-Options") == {"nosniff"}, f"{name}: {dict(r.headers)}"


def test_framing_forbidden(shared_client):
    for name, r in _sample_responses(shared_client).items():
        csp = r.headers.get("Content-Security-Policy", "")
        assert _header_tokens(r, "X-Frame-Options") == {"deny"} or re.search(r"frame-ancestors\s+'none'", csp), (
            f"{name}: {dict(r.headers)}")


def test_server_header_reveals_no_version(shared_client):
    for name, r in _sample_responses(shared_client).items():
        server = r.headers.get("Server", "")
        assert not re.search(r"\d", server), f"{name}: Server header reveals a version: {server!r}"
        assert "X-Powered-By" not in r.headers, name


def test_hsts_on_https(shared_client):
    r = requests.get(tsapi.HTTPS_URL + "/api/v1/tags", headers={"Authorization": f"Bearer {shared_client.token}"},
                     verify=False, timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, short(r)
    hsts = r.headers.get("Strict-Transport-Security", "")
    m = re.search(r"max-age=(\d+)", hsts)
    assert m and int(m.group(1)) > 0, dict(r.headers)


# --------------------------------------------------------------------------- HTTPS / TLS

def test_https_serves_the_api(shared_client):
    r = requests.get(tsapi.HTTPS_URL + "/healthz", verify=False, timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, short(r)
    assert assert_json(r)["status"] == "ok"
    api = tsapi.Api(shared_client.token, tsapi.HTTPS_URL, verify=False)
    r = api.get("/tags")
    assert r.status_code == 200, short(r)
    assert isinstance(assert_json(r)["items"], list)


def _handshake(version_min, version_max) -> str:
    u = urlsplit(tsapi.HTTPS_URL)
    host, port = u.hostname, u.port or 443
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.set_ciphers("ALL:@SECLEVEL=0")  # let the *client* offer old protocols
    except ssl.SSLError:
        pass
    if version_min is not None:
        ctx.minimum_version = version_min
    if version_max is not None:
        ctx.maximum_version = version_max
    with socket.create_connection((host, port), timeout=tsapi.TIMEOUT) as sock:
        with ctx.wrap_socket(sock, server_hostname=host) as tls:
            return tls.version()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_old_tls_versions_rejected(version):
    v = getattr(ssl.TLSVersion, version)
    try:
        got = _handshake(v, v)
    except ssl.SSLError as exc:
        if "no protocols available" in str(exc).lower() or "NO_PROTOCOLS_AVAILABLE" in str(exc):
            pytest.skip(f"this client's OpenSSL cannot offer {version}: {exc}")
        return  # the server refused the handshake
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return  # the server dropped the connection
    pytest.fail(f"the HTTPS port accepted a {got} handshake")


def test_tls_1_2_accepted():
    assert _handshake(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"


def test_default_negotiation_is_tls_1_2_or_newer():
    assert _handshake(None, None) in ("TLSv1.2", "TLSv1.3")
