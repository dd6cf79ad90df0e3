"""Hardening, item 7: login throttling that does not tell which emails exist, Retry-After on
every 429/503, NFC emails, "exactly one @" in Unicode scalars, the JSON 413 over HTTP/2, and the
plain-HTTP listener's redirect to HTTPS.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import unicodedata
import uuid

import pytest
import requests

import tsapi
from tsapi import assert_auth_body, assert_error, login, register, short, unique_email

MAX_FAILURES = 10  # TODOSYNC_LOGIN_MAX_FAILURES default
LOCKOUT_SECONDS = 900  # TODOSYNC_LOGIN_LOCKOUT_SECONDS default


def retry_after(resp) -> int:
    value = resp.headers.get("Retry-After")
    assert value is not None and value.isdigit(), f"429/503 must carry Retry-After seconds: {short(resp)}"
    return int(value)


def fail_until_throttled(email: str) -> requests.Response:
    for _ in range(MAX_FAILURES):
        r = login(email, "wrong-password-" + uuid.uuid4().hex, retry_429=False)
        assert_error(r, 401, "unauthorized")
    return login(email, "wrong-password-again", retry_429=False)


def test_throttling_answers_alike_whether_or_not_the_email_exists():
    existing = tsapi.new_user()
    unknown = unique_email("nobody")
    throttled_existing = fail_until_throttled(existing.email)
    throttled_unknown = fail_until_throttled(unknown)
    for r in (throttled_existing, throttled_unknown):
        assert_error(r, 429, "rate_limited")
        assert 1 <= retry_after(r) <= LOCKOUT_SECONDS, short(r)
    assert throttled_existing.json() == throttled_unknown.json()
    assert set(throttled_existing.headers) == set(throttled_unknown.headers)
    # Throttled means no password is checked, not even the right one.
    assert_error(login(existing.email, existing.password, retry_429=False), 429, "rate_limited")


def test_throttle_is_per_email_not_per_spelling_of_it():
    user = tsapi.new_user(email=unique_email("Case"))
    r = fail_until_throttled(user.email.upper())
    assert_error(r, 429, "rate_limited")
    assert_error(login(user.email.lower(), user.password, retry_429=False), 429, "rate_limited")


@pytest.mark.parametrize("spelling", ["{e}   ", "  {e}", "\t{E}\n", "{e}\u00a0", "{e} \u3000"])
def test_a_locked_account_stays_locked_under_every_spelling_with_spaces(spelling):
    """Round 3, item 1 (high): MariaDB compared email_key ignoring trailing spaces while the
    failed-login counter was keyed on the exact text, so `victim@example.com   ` logged in to a
    locked account with the right password, and every spelling had ten more guesses."""
    user = tsapi.new_user(email=unique_email("victim"))
    assert_error(fail_until_throttled(user.email), 429, "rate_limited")
    other = spelling.format(e=user.email, E=user.email.upper())
    assert_error(login(other, user.password, retry_429=False), 429, "rate_limited")
    assert_error(login(other, "wrong-" + user.password, retry_429=False), 429, "rate_limited")


def test_spellings_with_spaces_share_one_counter_of_failures():
    user = tsapi.new_user(email=unique_email("shared"))
    for i in range(MAX_FAILURES):
        email = [user.email + " " * (i % 4 + 1), "\t" + user.email.upper()][i % 2]
        assert_error(login(email, "wrong-password-" + uuid.uuid4().hex, retry_429=False), 401, "unauthorized")
    assert_error(login(user.email, user.password, retry_429=False), 429, "rate_limited")


def test_surrounding_whitespace_is_removed_at_register_and_login():
    email = unique_email("spaced")
    password = tsapi.new_password()
    body = assert_auth_body(register(f"  {email}\t", password), 201)
    assert body["user"]["email"] == email
    assert_auth_body(login(f"{email}   ", password), 200)
    assert_error(register(f"{email} ", password), 409, "email_taken")


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\u00ad", "\u202e", "\u2066", "\ufeff"])
def test_an_invisible_character_in_an_email_is_422_and_creates_nothing(invisible):
    """Round 3, item 2: zero-width space and joiner, soft hyphen, bidi overrides and isolates."""
    email = unique_email("invis")
    local, domain = email.split("@")
    spoof = f"{local[:3]}{invisible}{local[3:]}@{domain}"
    assert_error(register(spoof, tsapi.new_password()), 422, "validation_failed", fields=["email"])
    assert_error(login(spoof, "whatever-password"), 422, "validation_failed", fields=["email"])
    password = tsapi.new_password()
    assert_auth_body(register(email, password), 201)  # the visible address was not taken


def test_email_is_nfc_normalised_for_comparison_and_storage():
    local = "jos\u0065\u0301-" + uuid.uuid4().hex[:10]  # e + combining acute
    decomposed = f"{local}@example.test"
    composed = unicodedata.normalize("NFC", decomposed)
    assert composed != decomposed
    password = tsapi.new_password()
    body = assert_auth_body(register(decomposed, password), 201)
    assert body["user"]["email"] == composed
    assert_auth_body(login(composed, password), 200)
    assert_auth_body(login(decomposed.upper(), password), 200)
    assert_error(register(composed, password), 409, "email_taken")


def test_exactly_one_at_counts_unicode_scalars():
    for email in ("a@\u0301b@c.test", "a\u0301@@b.test", "@\u0301b.test", "a\u0301b.test"):
        r = register(email, tsapi.new_password())
        assert_error(r, 422, "validation_failed", fields=["email"])
    # A combining mark right after the single @ is allowed: it is still one @.
    assert_auth_body(register(f"x{uuid.uuid4().hex[:8]}@\u0301b.test", tsapi.new_password()), 201)


def test_email_length_is_counted_after_normalisation():
    # 269 characters that compose to 139: over 254 before NFC, fine after.
    local = "e\u0301" * 130 + uuid.uuid4().hex[:5]
    email = local + "@x.t"
    assert len(email) > 254 and len(unicodedata.normalize("NFC", email)) <= 254
    assert_auth_body(register(email, tsapi.new_password()), 201)


def test_oversized_body_over_http2_gets_the_json_413(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl not installed")
    big = tmp_path / "big.json"
    big.write_bytes(b'{"x":"' + b"a" * (2 << 20) + b'"}')
    out = subprocess.run(
        ["curl", "-sS", "--http2", "--cacert", os.environ.get("TODOSYNC_TEST_CA_CERT", ""), "-k",
         "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", f"@{big}",
         "-D", "-", "-o", str(tmp_path / "body"), f"{tsapi.HTTPS_URL}/api/v1/sync/push"],
        capture_output=True, text=True, timeout=60)
    head = out.stdout
    assert head.startswith("HTTP/2 413"), head + out.stderr
    assert "content-type: application/json" in head.lower(), head
    body = (tmp_path / "body").read_text()
    assert '"payload_too_large"' in body, body


def test_nginx_own_429_carries_retry_after():
    # The per-address limit on /auth/ (the test stack: 50 r/s, burst 100); bodies that fail
    # validation cost no password hash.
    import concurrent.futures as cf

    def one(_):
        return requests.post(f"{tsapi.API_URL}/auth/login", data=b"{}",
                             headers={"Content-Type": "application/json"}, timeout=10)

    with cf.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(400)))
    limited = [r for r in answers if r.status_code == 429]
    assert limited, "the per-address limit never answered 429"
    for r in limited[:20]:
        assert_error(r, 429, "rate_limited")
        assert retry_after(r) >= 1
    time.sleep(3)  # let the bucket refill for the tests that follow


@pytest.fixture
def redirecting_nginx(tmp_path):
    """A second nginx rendered by stack.sh with TODOSYNC_HTTP_REDIRECT, on spare ports."""
    http_port, https_port = tsapi.free_port(), tsapi.free_port()
    started = []

    def start(mode: str | None, address: str = "127.0.0.1"):
        state = tmp_path / f"state-{mode}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TODOSYNC_")}
        env.update(TODOSYNC_CONFIG="/dev/null", TODOSYNC_STATE_DIR=str(state),
                   TODOSYNC_HTTP_PORT=str(http_port), TODOSYNC_HTTPS_PORT=str(https_port),
                   TODOSYNC_LISTEN_ADDRESS=address, TODOSYNC_SKIP_BUILD="1")
        if mode is not None:
            env["TODOSYNC_HTTP_REDIRECT"] = mode
        stack_sh = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "stack.sh")
        conf = subprocess.run([stack_sh, "nginx-config"], env=env, capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()
        return conf, state

    def run(conf: str, state):
        proc = subprocess.Popen(["nginx", "-p", f"{state}/nginx/", "-c", conf, "-e", f"{state}/log/nginx-error.log",
                                 "-g", "daemon off;"])
        started.append(proc)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                requests.get(f"http://127.0.0.1:{http_port}/", timeout=1, allow_redirects=False)
                return http_port
            except requests.ConnectionError:
                time.sleep(0.1)
        raise AssertionError("second nginx did not start")

    yield start, run
    for proc in started:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_plain_http_redirects_to_https_when_configured(redirecting_nginx):
    start, run = redirecting_nginx
    conf, state = start("on")
    port = run(conf, state)
    r = requests.post(f"http://127.0.0.1:{port}/api/v1/sync/push?x=1", data=b"{}", timeout=5,
                      allow_redirects=False)
    assert r.status_code == 308, short(r)
    assert r.headers["Location"].startswith("https://127.0.0.1:") and r.headers["Location"].endswith(
        "/api/v1/sync/push?x=1"), short(r)


def test_redirect_is_on_by_default_outside_loopback_and_off_on_loopback(redirecting_nginx):
    start, _ = redirecting_nginx
    outside, _ = start(None, address="192.0.2.10")
    assert "http 1;" in open(outside).read()
    loopback, _ = start(None, address="127.0.0.1")
    assert "http 0;" in open(loopback).read()
    # The suite's own stack is on loopback: plain HTTP serves the API.
    r = requests.get(f"{tsapi.BASE_URL}/healthz", timeout=5, allow_redirects=False)
    assert r.status_code == 200, short(r)
