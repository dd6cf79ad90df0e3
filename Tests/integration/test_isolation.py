"""Isolation and security: another user's ids on every route, pull and push; logout revocation on
every route and responder; secrets in the database and the logs; TLS cipher suites; login rate
limiting (per address and per account); internals never in error bodies, also when the database
itself reports a conflict.

Extends test_auth.py, test_edge_http.py, test_tags.py, test_todos.py, test_sync_push.py and
test_daily_stats.py (plain 404s for another user's records, logout of one token, stored-secret
scan of register/login tokens, TLS versions, a single-address auth flood, sequential account
throttling), which are not repeated here.

Assumptions where API.md / the README are silent:
- "Learns nothing": for another user's record, a request gets exactly the answer (status, code,
  message, details, push result) it gets for an id or clientId that exists for nobody, with
  or without `If-Match` (a quoted version, `*` or a stale one).  Ids the client itself sent may
  be echoed; they are masked before comparing.  Another account's pull cursor is answered like
  any other account's cursor.
- Revocation is immediate on every responder: no responder caches tokens.
- Passwords are hashed with a per-user salt: two accounts with the same password never share a
  stored value.  No password or bearer token (in any encoding) appears in any table or in the
  stack's log files (responder, nginx, MariaDB).
- TLS: every TLS 1.2 suite the server accepts uses ephemeral (EC)DH key exchange and an AEAD
  cipher (GCM, CCM, ChaCha20-Poly1305); TLS 1.3 suites all do; no TLS compression.
- The per-account failed-login throttle (TODOSYNC_LOGIN_MAX_FAILURES, default 10) bounds the
  guesses an attacker gets, also when the guesses arrive concurrently: at most that many wrong
  passwords are answered 401 before the account answers 429.
- nginx's per-address auth limit keys on the connection's address; forwarding headers
  (X-Forwarded-For, X-Real-IP, Forwarded) do not give a client a fresh allowance, on HTTP or HTTPS.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import socket
import ssl
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
import urllib3

import reliabilitylib as rl
import synclib
import tsapi
from tsapi import Api, assert_error, short

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

MISSING_ID = 2 ** 62 + 12345
MAX_LOGIN_FAILURES = int(os.environ.get("TODOSYNC_LOGIN_MAX_FAILURES", "10"))


def _masked(r, *ids) -> tuple:
    """(status, body with the probe's own identifiers masked) for comparing two answers."""
    text = r.text
    for i in ids:
        if i is not None:
            text = text.replace(str(i), "<ID>")
    try:
        body = json.loads(text)
    except ValueError:
        body = text
    return r.status_code, body


# --------------------------------------------------------------------------- another user's ids

def test_other_users_records_answer_exactly_like_missing_ones(make_client, capsys):
    owner, intruder = make_client(), make_client()
    seed = rl.seed_user(owner)
    base = rl.Baseline(owner)
    mine = intruder.create_todo(title="intruder's own", deadline=seed["date"])
    secrets = ["Seed todo", "Seed tag", "Seed done", "Seed later", "Seed deleted", "Other seed tag", owner.email]
    compared = 0
    answers = []

    def same(fn, theirs, missing, what):
        nonlocal compared
        a, b = fn(theirs), fn(missing)
        answers.extend([a, b])
        compared += 1
        assert a.status_code < 500 and b.status_code < 500, f"{what}: {short(a)} / {short(b)}"
        assert _masked(a, theirs) == _masked(b, missing), (
            f"{what}: another user's record ({theirs}) is distinguishable from a missing one ({missing}):\n"
            f"  theirs:  {short(a)}\n  missing: {short(b)}")
        for s in secrets:
            assert s not in a.text, f"{what}: the answer reveals {s!r}: {short(a)}"
        return a

    ids = {"tag": seed["tag"], "todo": seed["todo"], "tombstone": seed["deleted"]}
    for label, rec in ids.items():
        kind = "tags" if label == "tag" else "todos"
        versions = ['"%d"' % rec["version"], str(rec["version"]), f'W/"{rec["version"]}"', "*", '"0"']
        r = same(lambda i: intruder.get(f"/{kind}/{i}"), rec["id"], MISSING_ID, f"GET {label}")
        assert_error(r, 404, "not_found")
        for body in ({"title": "hijack", "name": "hijack"}, {"title": "", "name": ""}, {}):
            r = same(lambda i: intruder.patch(f"/{kind}/{i}", body), rec["id"], MISSING_ID, f"PATCH {label} {body}")
            for v in versions:
                same(lambda i: intruder.patch(f"/{kind}/{i}", body, headers={"If-Match": v}), rec["id"], MISSING_ID,
                     f"PATCH {label} {body} If-Match {v}")
        same(lambda i: intruder.delete(f"/{kind}/{i}"), rec["id"], MISSING_ID, f"DELETE {label}")
        for v in versions:
            same(lambda i: intruder.delete(f"/{kind}/{i}", headers={"If-Match": v}), rec["id"], MISSING_ID,
                 f"DELETE {label} If-Match {v}")
    # references to another user's tag
    tag_id = seed["tag"]["id"]
    same(lambda i: intruder.post("/todos", {"title": "t", "deadline": seed["date"], "tagId": i}), tag_id, MISSING_ID,
         "create todo with their tagId")
    same(lambda i: intruder.patch(f"/todos/{mine['id']}", {"tagId": i}), tag_id, MISSING_ID,
         "patch own todo to their tagId")
    # their date has a stat; the intruder has one on the same date too, the month lists only theirs
    r = intruder.get(f"/daily-stats/{seed['date']}")
    assert r.status_code == 200 and r.json()["todoCount"] == 1, short(r)
    r = intruder.get("/daily-stats", params={"month": seed["date"][:7]})
    assert [s["date"] for s in r.json()["items"]] == [seed["date"]] and r.json()["items"][0]["todoCount"] == 1
    same(lambda d: intruder.get(f"/daily-stats/{d}"), tsapi.days_from(seed["date"], 1), "2033-04-20",
         "their other date")
    # quick-add names their tag: unknown for the intruder, stays in the title
    r = intruder.post("/todos/quick-add", {"date": "2030-01-02", "text": "call #Seed"})
    assert r.status_code == 201 and r.json()["items"][0]["tagId"] is None, short(r)

    # push: every operation on their records is answered like one on a record that does not exist
    def push_one(o):
        out = {"deviceId": "intruder", "conflictPolicy": "client-wins", "operations": [o]}
        return intruder.post("/sync/push", out)

    missing_cid = str(uuid.uuid4())
    for action in ("update", "delete"):
        for by in ("id", "clientId"):
            for base_version in (None, 0, seed["todo"]["version"]):
                for label, rec, cid in (("todo", seed["todo"], seed["todo_cid"]), ("tag", seed["tag"], seed["tag_cid"])):
                    theirs = rec["id"] if by == "id" else cid
                    missing = MISSING_ID if by == "id" else missing_cid

                    def probe(ident, label=label, by=by, action=action, base_version=base_version):
                        o = {"opId": "fixed-op-" + uuid.uuid4().hex, "entity": label, "action": action, by: ident}
                        if action == "update":
                            o["data"] = {"title": "hijack"} if label == "todo" else {"name": "hijack"}
                        if base_version is not None:
                            o["baseVersion"] = base_version
                        return push_one(o)

                    a, b = probe(theirs), probe(missing)
                    compared += 1
                    ra, rb = a.json()["results"][0], b.json()["results"][0]
                    for res in (ra, rb):
                        res.pop("opId")
                    assert json.loads(json.dumps(ra).replace(str(theirs), "<ID>")) == \
                        json.loads(json.dumps(rb).replace(str(missing), "<ID>")), (
                        f"push {action} {label} by {by}: their record answered {ra}, a missing one {rb}")
                    assert ra["status"] == "rejected", ra
                    for s in secrets:
                        assert s not in a.text
    for field, theirs, missing in (("tagClientId", seed["tag_cid"], missing_cid), ("tagId", tag_id, MISSING_ID)):
        def probe(ident, field=field):
            return push_one({"opId": uuid.uuid4().hex, "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                             "data": {"title": "x", "deadline": "2030-01-01", field: ident}})
        ra, rb = probe(theirs).json()["results"][0], probe(missing).json()["results"][0]
        compared += 1
        for res in (ra, rb):
            res.pop("opId")
            res.pop("clientId")
        assert json.loads(json.dumps(ra).replace(str(theirs), "<ID>")) == \
            json.loads(json.dumps(rb).replace(str(missing), "<ID>")), f"push create with their {field}: {ra} vs {rb}"

    # their clientIds name nothing for the intruder: REST creates make the intruder's own records
    t = intruder.create_todo(title="own with their clientId", deadline="2030-01-01", clientId=seed["todo_cid"])
    assert t["id"] != seed["todo"]["id"] and t["title"] == "own with their clientId"
    g = intruder.create_tag(name="own tag, their clientId", clientId=seed["tag_cid"])
    assert g["id"] != seed["tag"]["id"]
    # pull: the intruder's pages hold only the intruder's records; their cursor is like any other's
    store = synclib.fresh_state(intruder)
    owner_ids = {("tags", seed["tag"]["id"]), ("tags", seed["other_tag"]["id"]), ("todos", seed["todo"]["id"]),
                 ("todos", seed["done"]["id"]), ("todos", seed["later"]["id"]), ("todos", seed["deleted"]["id"])}
    got = {(k, i) for k in ("tags", "todos") for i in store.data[k]}
    assert not (got & owner_ids), f"the intruder's pull holds the owner's records: {got & owner_ids}"
    third = make_client()
    third_cursor = synclib.pull(third)["cursor"]
    r = same(lambda c: intruder.get("/sync/pull", params={"cursor": c}), base.cursor, third_cursor,
             "pull with another account's cursor")
    assert r.status_code == 400, short(r)
    for r in answers:
        if r.status_code >= 400:
            assert_error(r, r.status_code)
    base.assert_unchanged("the intruder's requests")
    rl.report(capsys, "isolation by id", comparisons=compared, requests=len(answers) + 2 * compared,
              distinguishable=0, owner_data_changed=False)


# --------------------------------------------------------------------------- logout

def test_logout_revokes_at_once_on_every_route_and_responder(make_client, capsys):
    api = make_client()
    seed = rl.seed_user(api)
    t_keep = tsapi.login(api.email, api.password).json()["token"]
    keeper = Api(t_keep)
    base = rl.Baseline(keeper)
    # warm the token on every responder and worker (a per-process cache would now hold it)
    with cf.ThreadPoolExecutor(16) as ex:
        for r in ex.map(lambda _: Api(api.token).get("/tags"), range(48)):
            assert r.status_code == 200
    r = api.post("/auth/logout")
    assert r.status_code == 204, short(r)
    t_revoked = time.monotonic()
    tok = api.token
    calls = [
        ("GET", "/tags", None), ("GET", f"/tags/{seed['tag']['id']}", None), ("GET", "/todos?date=2033-04-05", None),
        ("GET", f"/todos/{seed['todo']['id']}", None), ("GET", "/daily-stats?month=2033-04", None),
        ("GET", "/daily-stats/2033-04-05", None), ("GET", "/sync/pull", None),
        ("POST", "/tags", {"name": "after logout", "color": "#000000"}),
        ("PATCH", f"/tags/{seed['tag']['id']}", {"name": "after logout"}),
        ("DELETE", f"/tags/{seed['tag']['id']}", None),
        ("POST", "/todos", {"title": "after logout", "deadline": "2033-04-05"}),
        ("PATCH", f"/todos/{seed['todo']['id']}", {"title": "after logout"}),
        ("DELETE", f"/todos/{seed['todo']['id']}", None),
        ("POST", "/todos/quick-add", {"date": "2033-04-05", "text": "after logout"}),
        ("POST", "/sync/push", {"deviceId": "d", "operations": [synclib.create_todo_op("after logout")]}),
    ]

    def one(k):
        method, path, body = calls[k % len(calls)]
        base_url = tsapi.HTTPS_URL if k % 3 == 0 else tsapi.BASE_URL
        c = Api(tok, base_url, verify=False)
        try:
            return method, path, c.request(method, path, body if body is not None else tsapi._MISSING)
        finally:
            c.session.close()

    with cf.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(one, range(len(calls) * 4)))
    for method, path, r in results:
        assert_error(r, 401, "unauthorized")
    first_answer_s = time.monotonic() - t_revoked
    # the token is not accepted by other carriers either
    for kw in ({"params": {"access_token": tok}}, {"params": {"token": tok}}, {"headers": {"Cookie": f"token={tok}"}},
               {"headers": {"X-Auth-Token": tok}}, {"headers": {"Authorization": f"Token {tok}"}}):
        assert_error(Api(None).get("/tags", **kw), 401, "unauthorized")
    again = Api(tok).post("/auth/logout")
    assert again.status_code in (204, 401), short(again)
    assert keeper.get("/tags").status_code == 200, "logging out one session ended another"
    base.assert_unchanged("requests with a revoked token")
    rl.report(capsys, "logout", revoked_requests=len(results), routes=len(calls), over_https=len(results[::3]),
              accepted_after_logout=0, all_checked_within_s=round(first_answer_s, 2))


# --------------------------------------------------------------------------- secrets at rest

def _looks_like_time(hex_value: str) -> bool:
    try:
        text = bytes.fromhex(hex_value).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return False
    return re.match(r"^\d{4}-\d{2}-\d{2}", text) is not None


def test_no_secret_in_database_or_logs_and_hashes_are_salted(db, capsys):
    shared_pw = "Shared-Canary-" + uuid.uuid4().hex
    a = tsapi.new_user(password=shared_pw)
    b = tsapi.new_user(password=shared_pw)
    tokens = [a.token, b.token]
    tokens.append(tsapi.login(a.email, shared_pw).json()["token"])
    revoked = tsapi.login(b.email, shared_pw).json()["token"]
    assert Api(revoked).post("/auth/logout").status_code == 204
    tokens.append(revoked)
    wrong_pw = "Wrong-Canary-" + uuid.uuid4().hex
    assert tsapi.login(a.email, wrong_pw).status_code == 401
    dup = tsapi.register(a.email, "Dup-Canary-" + uuid.uuid4().hex)
    assert dup.status_code == 409
    dup_pw = json.loads(dup.request.body)["password"]
    passwords = [shared_pw, wrong_pw, dup_pw]

    cols = db("SELECT table_name, column_name FROM information_schema.columns "
              "WHERE table_schema = 'todosync' ORDER BY table_name, ordinal_position").decode()
    tables: dict[str, list[str]] = {}
    for line in cols.splitlines():
        t, c = line.split("\t")
        tables.setdefault(t, []).append(c)
    needles = {}
    for s in passwords + tokens:
        for f in tsapi.secret_forms(s):
            needles[f.hex().upper()] = s[:12] + "…"
    cells = 0
    for table, columns in tables.items():
        exprs = ", ".join(f"HEX(`{c}`)" for c in columns)
        dump = db(f"SELECT CONCAT_WS('|', {exprs}) FROM `{table}`").decode().upper()
        cells += dump.count("|") + dump.count("\n")
        for hx, what in needles.items():
            assert hx not in dump, f"secret {what} stored in clear (or trivially encoded) in table {table!r}"

    # salted: the two accounts with one password share no stored value of 16 bytes or more
    ucols = tables["users"]
    rows = {}
    for u in (a, b):
        exprs = ", ".join(f"HEX(`{c}`)" for c in ucols)
        out = db(f"SELECT {exprs} FROM users WHERE id = {int(u.user['id'])}").decode().strip().split("\t")
        rows[u.user["id"]] = {c: v for c, v in zip(ucols, out)
                              if len(v) >= 32 and v != "NULL" and not _looks_like_time(v)}
    ra, rb = rows.values()
    shared = {c for c in ra if c in rb and ra[c] == rb[c]}
    assert not shared, f"two accounts with the same password store identical values in {sorted(shared)}: unsalted?"

    # logs: responder, nginx and MariaDB logs of this stack
    scanned = []
    if rl.STATE_DIR and os.path.isdir(os.path.join(rl.STATE_DIR, "log")):
        time.sleep(1.2)  # nginx flushes its access log buffer every second
        raw_needles = {s: [f for f in tsapi.secret_forms(s) if len(f) >= 16] for s in passwords + tokens}
        for p in sorted(Path(rl.STATE_DIR, "log").iterdir()):
            if not p.is_file():
                continue
            data = p.read_bytes()
            scanned.append(f"{p.name}:{len(data) // 1024}K")
            for s, forms in raw_needles.items():
                for f in forms:
                    assert f not in data, f"secret {s[:12]}… appears in log file {p}"
    rl.report(capsys, "secrets at rest", tables=len(tables), cells_scanned=cells, secrets=len(passwords) + len(tokens),
              encodings=len(needles), logs=" ".join(scanned) or "n/a", found=0, salted=True)


# --------------------------------------------------------------------------- TLS

def _tls_try(cipher: str | None, version: ssl.TLSVersion) -> tuple[bool, str, str]:
    u = urlsplit(tsapi.HTTPS_URL)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = version
    ctx.maximum_version = version
    if cipher:
        ctx.set_ciphers(f"{cipher}:@SECLEVEL=0")
    try:
        with socket.create_connection((u.hostname, u.port or 443), timeout=5) as sock:
            with ctx.wrap_socket(sock, server_hostname=u.hostname) as tls:
                name, proto, _ = tls.cipher()
                assert tls.compression() is None, f"TLS compression enabled ({tls.compression()})"
                return True, name, proto
    except (ssl.SSLError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError, OSError) as exc:
        return False, cipher or "", type(exc).__name__


def _modern(name: str) -> bool:
    fs = name.startswith(("ECDHE-", "DHE-"))
    aead = any(x in name for x in ("GCM", "CHACHA20", "CCM"))
    return fs and aead


def test_tls_offers_only_forward_secret_aead_suites(capsys):
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        probe.set_ciphers("ALL:COMPLEMENTOFALL:@SECLEVEL=0")
    except ssl.SSLError:
        probe.set_ciphers("ALL:@SECLEVEL=0")
    tls12 = sorted({c["name"] for c in probe.get_ciphers() if c["protocol"] != "TLSv1.3"})
    assert tls12, "this client's OpenSSL offers no TLS 1.2 suites to probe with"
    accepted, refused = [], []
    for name in tls12:
        ok, got, _ = _tls_try(name, ssl.TLSVersion.TLSv1_2)
        (accepted if ok else refused).append(name)
    assert accepted, "the HTTPS port accepts no TLS 1.2 suite at all"
    weak = [n for n in accepted if not _modern(n)]
    assert not weak, f"the HTTPS port accepts TLS 1.2 suites without forward secrecy or AEAD: {weak}"
    ok13, suite13, _ = _tls_try(None, ssl.TLSVersion.TLSv1_3)
    if ok13:
        assert any(x in suite13 for x in ("GCM", "CHACHA20", "CCM")), suite13
    # plain HTTP on the TLS port is refused with the JSON error shape
    u = urlsplit(tsapi.HTTPS_URL)
    r = tsapi.raw_request("GET", "/healthz", base_url=f"http://{u.hostname}:{u.port}")
    assert r.status_code == 400, (r.status_code, r.content[:200])
    assert_error(r, 400)
    rl.report(capsys, "TLS", probed_tls12_suites=len(tls12), accepted=",".join(accepted), refused=len(refused),
              tls13=suite13 if ok13 else "not offered", weak=0)


# --------------------------------------------------------------------------- login rate limits

def _is_account_throttle(r) -> bool:
    return r.status_code == 429 and "account" in r.json()["error"]["message"].lower()


def test_concurrent_wrong_passwords_cannot_exceed_the_account_throttle(capsys):
    """Guesses sent at once must not each slip past the failure count (check-then-act race)."""
    victim = tsapi.new_user()
    n = 32

    def guess(i):
        for attempt in range(20):
            r = tsapi.login(victim.email, f"wrong-guess-{i}-{uuid.uuid4().hex}", retry_429=False)
            if r.status_code == 429 and not _is_account_throttle(r):
                time.sleep(0.3 + 0.2 * attempt)  # nginx's per-address limit: try again
                continue
            return r
        return r

    barrier = threading.Barrier(n)

    def at_once(i):
        barrier.wait(5)
        return guess(i)

    with cf.ThreadPoolExecutor(n) as ex:
        answers = list(ex.map(at_once, range(n)))
    statuses = [r.status_code for r in answers]
    for r in answers:
        assert r.status_code in (401, 429), short(r)
        assert_error(r, r.status_code, "unauthorized" if r.status_code == 401 else "rate_limited")
    evaluated = statuses.count(401)
    after = tsapi.login(victim.email, victim.password, retry_429=False)
    rl.report(capsys, "concurrent password guesses", guesses=n, answered_401=evaluated,
              answered_429=statuses.count(429), allowed_failures=MAX_LOGIN_FAILURES,
              right_password_after=after.status_code)
    assert _is_account_throttle(after), f"the account is not throttled after {n} wrong guesses: {short(after)}"
    assert evaluated <= MAX_LOGIN_FAILURES, (
        f"POST /api/v1/auth/login: {n} concurrent wrong passwords for one account were answered "
        f"{evaluated}x 401 (each one a password check) and {statuses.count(429)}x 429; expected at most "
        f"{MAX_LOGIN_FAILURES} failures to be evaluated before the account answers 429 — the failure count "
        f"is read before the password check and written after it, so concurrent guesses all pass the check")


def test_forwarding_headers_do_not_bypass_the_per_address_auth_limit(capsys):
    n = 320
    spoof = [("X-Forwarded-For", "203.0.113.{}"), ("X-Real-IP", "198.51.100.{}"), ("Forwarded", "for=192.0.2.{}"),
             ("X-Client-IP", "203.0.113.{}"), ("True-Client-IP", "198.51.100.{}")]
    sessions = threading.local()

    def one(i):
        base = tsapi.HTTPS_URL if i % 2 else tsapi.BASE_URL
        name, fmt = spoof[i % len(spoof)]
        path = "/api/v1/auth/login" if i % 3 else "/api/v1/auth/register"
        s = getattr(sessions, "s", None)
        if s is None:
            s = sessions.s = requests.Session()
        try:
            return s.post(base + path, data=b"{", verify=False, timeout=10,
                          headers={"Content-Type": "application/json", name: fmt.format(1 + i % 250)})
        except requests.RequestException as exc:
            return exc

    try:
        with cf.ThreadPoolExecutor(24) as ex:
            answers = list(ex.map(one, range(n)))
        errors = [a for a in answers if isinstance(a, Exception)]
        got = [a for a in answers if not isinstance(a, Exception)]
        assert len(errors) <= n * 0.05, f"{len(errors)} requests failed: {errors[:3]}"
        limited = [r for r in got if r.status_code == 429]
        for r in got:
            assert r.status_code in (400, 429), short(r)
            assert_error(r, r.status_code)
        assert limited, (f"{len(got)} auth requests with spoofed forwarding headers in a burst, none limited "
                         f"(statuses {sorted({r.status_code for r in got})})")
    finally:
        time.sleep(3.5)  # let the bucket refill for the tests after this one
    rl.report(capsys, "auth limit vs spoofed forwarding headers", requests=n, answered=len(got),
              limited_429=len(limited), http_and_https=True)


# --------------------------------------------------------------------------- database conflicts stay clean

def test_concurrent_conflicts_answer_cleanly_without_internals(make_client, capsys):
    email, pw = tsapi.unique_email("race"), tsapi.new_password()

    def reg(_):
        return tsapi.register(email, pw)

    with cf.ThreadPoolExecutor(8) as ex:
        regs = list(ex.map(reg, range(8)))
    codes = sorted(r.status_code for r in regs)
    assert codes.count(201) == 1 and codes.count(409) == 7, f"concurrent registrations of one e-mail: {codes}"
    for r in regs:
        if r.status_code == 409:
            assert_error(r, 409, "email_taken")
    api = make_client()
    cid = str(uuid.uuid4())

    def create(k):
        c = Api(api.token)
        try:
            return c.post("/tags" if k % 2 else "/todos", {"name": "race", "color": "#101010", "title": "race",
                                                           "deadline": "2030-01-01", "clientId": cid})
        finally:
            c.session.close()

    with cf.ThreadPoolExecutor(16) as ex:
        made = list(ex.map(create, range(16)))
    for kind in (0, 1):
        group = [r for k, r in enumerate(made) if k % 2 == kind]
        statuses = sorted(r.status_code for r in group)
        assert statuses.count(201) == 1 and statuses.count(200) == len(group) - 1, statuses
        assert len({r.json()["id"] for r in group}) == 1, "one clientId, several records"
    # every error the API can produce here carries no internals
    samples = [
        Api(None).get("/tags"), api.get("/tags/0"), api.request("PUT", "/tags"),
        api.post("/tags", {"name": "x" * 51, "color": "red"}), api.request("POST", "/tags", data=b"{", headers={
            "Content-Type": "application/json"}),
        api.request("POST", "/tags", data=b"{}", headers={"Content-Type": "text/plain"}),
        api.patch(f"/tags/{made[1].json()['id']}", {"name": "y"}, headers={"If-Match": '"999999"'}),
        api.get("/sync/pull", params={"cursor": "' OR 1=1 --"}), api.get("/todos", params={"date": "2033-02-30"}),
        regs[1] if regs[1].status_code == 409 else regs[0],
    ]
    for r in samples:
        assert r.status_code >= 400, short(r)
        assert_error(r, r.status_code)
    rl.report(capsys, "concurrent conflicts", same_email_registrations=8, created=1, email_taken=7,
              same_client_id_creates=16, records=2, error_samples=len(samples), leaks=0)
