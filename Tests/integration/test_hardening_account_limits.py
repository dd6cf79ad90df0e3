"""Hardening, item 4: one account cannot occupy every worker.

12 concurrent 500-operation pushes from one account raised another user's GET latency from
3.4 ms to 509 ms median, and requests waiting on one user's row lock blocked everyone for 25 s.
Now nginx answers 429 + Retry-After at once beyond TODOSYNC_ACCOUNT_CONCURRENCY requests in
flight per bearer token, lock waits are short (TODOSYNC_DB_LOCK_WAIT_TIMEOUT, 1 s), and each
account has quotas (records, write operations per hour) with their own 429.
(Figures before/after: scripts/bystander-latency.py push.)
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

import tsapi
from tsapi import assert_error, short


stack_env = tsapi.stack_env


@contextlib.contextmanager
def second_nginx(state, socket_dir: str, responders: int, per_token: int):
    """tsapi.second_nginx in front of `responders` responders on `socket_dir`, with
    TODOSYNC_ACCOUNT_CONCURRENCY = `per_token`: its base URL."""
    with tsapi.second_nginx(state, socket_dir=socket_dir, responders=responders,
                            TODOSYNC_ACCOUNT_CONCURRENCY=str(per_token)) as nginx:
        yield nginx["http"]


@pytest.fixture
def limited_nginx(stack_cmd, tmp_path):
    """A second nginx in front of the test stack's responders, with 2 requests per token."""
    test_env = stack_env()
    with second_nginx(tmp_path / "state", test_env["TODOSYNC_SOCKET_DIR"], int(test_env["TODOSYNC_RESPONDERS"]),
                      per_token=2) as base:
        yield base


class OwnResponder:
    """A `todosync serve` of the test stack's binary and database, on a socket of our own, with
    test hooks and the settings a test gives it (the stack's responders allow 32 per account).
    No CPU share per account unless a test gives one (test_hardening_fairness.py does)."""

    def __init__(self, socket_dir: str, settings: dict[str, str], log_path):
        self.sock = os.path.join(socket_dir, "fcgi-1.sock")
        conf = stack_env()
        self.argv = [conf["TODOSYNC_BIN"], "serve", "--socket", self.sock, "--enable-test-hooks"]
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TODOSYNC_CONFIG": "/dev/null",
                    "TODOSYNC_LOG_LEVEL": "warning", "TODOSYNC_ACCOUNT_CPU_SHARE_MS": "0", **settings}
        for key in ("TODOSYNC_DB_SOCKET", "TODOSYNC_DB_USER", "TODOSYNC_DB_PASSWORD_FILE", "TODOSYNC_DB_NAME"):
            if conf.get(key):
                self.env[key] = conf[key]
        self.log = open(log_path, "a")
        self.proc: subprocess.Popen | None = None

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None, f"serve exited ({self.proc.returncode})"
            assert time.monotonic() < deadline, "serve did not open its socket"
            time.sleep(0.05)
        time.sleep(0.2)  # the socket file exists a moment before listen()

    def kill(self):
        """SIGKILL, like a crash."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def own_stack(stack_cmd, tmp_path):
    """One responder of our own (6 workers, 2 requests in flight per account) behind a second
    nginx (4 per token): (base URL, responder)."""
    socket_dir = tempfile.mkdtemp(prefix="ts-acct-", dir="/tmp")
    responder = OwnResponder(socket_dir, {"TODOSYNC_WORKERS": "6", "TODOSYNC_ACCOUNT_IN_FLIGHT": "2"},
                             tmp_path / "responder.log")
    try:
        responder.start()
        with second_nginx(tmp_path / "state", socket_dir, 1, per_token=4) as base:
            yield base, responder
    finally:
        responder.stop()
        shutil.rmtree(socket_dir, ignore_errors=True)


def logins(api: tsapi.Api, count: int) -> list[str]:
    """`count` more tokens of `api`'s account (logins through the test stack)."""
    tokens = []
    for _ in range(count):
        r = tsapi.login(api.email, api.password)
        assert r.status_code == 200, short(r)
        tokens.append(r.json()["token"])
    return tokens


def spellings(token: str) -> list[str]:
    """`Authorization` values the responder accepts for one token: each was a key of its own for
    nginx's per-token limit, and one over 255 bytes was not counted at all (issue 19, item 3)."""
    return [f"bearer {token}", f"BEARER {token}", f"Bearer   {token}", f"bEaReR {token}",
            "Bearer " + " " * 300 + token]


def slow_todo(base: str, authorization: str, hold_ms: int, title: str = "slow"):
    return requests.post(f"{base}/api/v1/__test/slow-todo?hold_ms={hold_ms}", timeout=60,
                         json={"title": title, "deadline": "2031-03-03"},
                         headers={"Authorization": authorization})


def big_push(n=500):
    return {"deviceId": "flood", "operations": [
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
         "data": {"title": f"t{i}", "deadline": "2031-01-01"}} for i in range(n)]}


def test_requests_beyond_the_per_token_limit_get_a_quick_429(limited_nginx):
    flooder = tsapi.new_user()
    bystander = tsapi.Api(tsapi.new_user().token, limited_nginx)
    flooder_api = tsapi.Api(flooder.token, limited_nginx)
    start = time.monotonic() + 0.3

    def push(_):
        time.sleep(max(0.0, start - time.monotonic()))
        t0 = time.monotonic()
        r = flooder_api.post("/sync/push", big_push(), timeout=120)
        return r, time.monotonic() - t0

    with cf.ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(push, i) for i in range(12)]
        time.sleep(0.5)
        r = bystander.get("/todos?date=2031-01-01")
        assert r.status_code == 200, short(r)
        answers = [f.result() for f in futures]
    statuses = sorted(r.status_code for r, _ in answers)
    assert set(statuses) <= {200, 429, 503}, statuses
    limited = [(r, t) for r, t in answers if r.status_code == 429]
    assert len(limited) >= 6, statuses
    for r, t in limited:
        assert_error(r, 429, "rate_limited")
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
    applied = [t for r, t in answers if r.status_code == 200]
    assert applied, statuses
    assert min(t for _, t in limited) < max(applied), "429s must not wait for the pushes in flight"


def test_every_spelling_of_a_token_shares_its_nginx_limit(limited_nginx):
    """Issue 19, item 3: nginx's per-token limit was keyed on the raw header, so `bearer`,
    `BEARER`, extra spaces or a header padded past 255 bytes (a key nginx skips) each got a
    limit of their own. Now every spelling of one token is one key."""
    api = tsapi.new_user()
    padded = "Bearer " + " " * 300 + api.token
    r = requests.get(f"{limited_nginx}/api/v1/tags", headers={"Authorization": padded}, timeout=10)
    assert r.status_code == 200, f"the responder accepts the padded spelling: {short(r)}"
    with cf.ThreadPoolExecutor(2) as pool:
        # Two requests of the token in flight (the limit here): one holds the account's row lock,
        # the other waits for it (up to a second).
        held = [pool.submit(slow_todo, limited_nginx, f"Bearer {api.token}", 2500, f"held{i}") for i in range(2)]
        time.sleep(0.35)
        answers = []
        for spelling in spellings(api.token):
            t0 = time.monotonic()
            r = requests.get(f"{limited_nginx}/api/v1/tags", headers={"Authorization": spelling}, timeout=10)
            answers.append((spelling[:12], r.status_code, time.monotonic() - t0, r))
        [f.result() for f in held]
    assert [status for _, status, _, _ in answers] == [429] * len(answers), \
        [(spelling, status) for spelling, status, _, _ in answers]
    for _, _, elapsed, r in answers:
        assert_error(r, 429, "rate_limited")
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
        assert elapsed < 0.5, elapsed


def test_one_account_is_limited_whatever_its_tokens(own_stack):
    """Issue 19, item 3: twenty logins gave one account twenty per-token limits, and with its
    row lock held every worker of the responders waited on it (a bystander's p50 went to 17.5 s).
    The responder now counts requests in flight per account (TODOSYNC_ACCOUNT_IN_FLIGHT, 2 here):
    beyond that, 429 at once, whatever the token or its spelling; other accounts are not affected."""
    base, _ = own_stack
    flooder = tsapi.new_user()
    tokens = [flooder.token] + logins(flooder, 19)
    bystander = tsapi.Api(tsapi.new_user().token, base)
    with cf.ThreadPoolExecutor(24) as pool:
        holder = pool.submit(slow_todo, base, f"Bearer {tokens[0]}", 4000, "holder")
        time.sleep(0.4)
        start = time.monotonic() + 0.2

        def write(i):
            time.sleep(max(0.0, start - time.monotonic()))
            authorization = spellings(tokens[i])[i % 5] if i % 2 else f"Bearer {tokens[i]}"
            t0 = time.monotonic()
            r = requests.post(f"{base}/api/v1/todos", json={"title": f"w{i}", "deadline": "2031-03-04"},
                              headers={"Authorization": authorization}, timeout=60)
            return r, time.monotonic() - t0

        writes = [pool.submit(write, i) for i in range(1, 20)]
        time.sleep(0.5)
        t0 = time.monotonic()
        r = bystander.get("/todos?date=2031-03-04")
        bystander_seconds = time.monotonic() - t0
        assert r.status_code == 200, short(r)
        answers = [f.result() for f in writes]
        assert holder.result().status_code == 201
    statuses = sorted(r.status_code for r, _ in answers)
    limited = [(r, t) for r, t in answers if r.status_code == 429]
    # The holder is one of the account's 2; at most one more got in (and waited for the lock).
    assert len(limited) >= 18, statuses
    for r, elapsed in limited:
        err = assert_error(r, 429, "rate_limited")
        assert "in flight" in err["message"], err
        assert r.headers.get("Retry-After") == "1", short(r)
        assert elapsed < 0.5, f"a 429 took {elapsed:.2f} s"
    assert bystander_seconds < 0.5, f"the bystander waited {bystander_seconds:.2f} s"
    # The count is given back: the account works again.
    r = requests.get(f"{base}/api/v1/tags", headers={"Authorization": f"Bearer {tokens[7]}"}, timeout=10)
    assert r.status_code == 200, short(r)


def test_a_keyed_retry_after_a_responder_crash_is_not_kept_waiting(own_stack, db):
    """Issue 19, item 8: a request with an Idempotency-Key whose responder died left its claim
    behind, and every retry got 409 request_in_progress for ~30 s. A claim whose request is gone
    (on one database server: no transaction holds the user's row lock) is taken over at once."""
    base, responder = own_stack
    api = tsapi.new_user()
    key = "crash-" + uuid.uuid4().hex
    body = {"title": "after the crash", "deadline": "2031-03-05"}
    headers = {"Authorization": f"Bearer {api.token}", "Idempotency-Key": key}
    with cf.ThreadPoolExecutor(1) as pool:
        first = pool.submit(requests.post, f"{base}/api/v1/todos", json=body, timeout=60,
                            headers={**headers, "X-TodoSync-Test-Hold-Ms": "20000"})
        time.sleep(1.0)
        responder.kill()
        assert first.result().status_code in (502, 503, 504), short(first.result())
    responder.start()
    t0 = time.monotonic()
    answers = []
    while True:
        r = requests.post(f"{base}/api/v1/todos", json=body, headers=headers, timeout=30)
        answers.append(r.status_code)
        if r.status_code != 409:
            break
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
        assert time.monotonic() - t0 < 5, f"still 409 after {time.monotonic() - t0:.1f} s: {answers}"
        time.sleep(0.5)
    assert r.status_code == 201, short(r)
    assert time.monotonic() - t0 < 5, answers
    again = requests.post(f"{base}/api/v1/todos", json=body, headers=headers, timeout=30)
    assert again.status_code == 201 and again.content == r.content, short(again)
    assert len(api.list_todos(date="2031-03-05")) == 1


def test_replays_are_answered_at_the_operations_quota(client, db):
    """Issue 19, item 8: at the operations quota a push's replay (its response lost) was 429
    instead of its stored results. Replays cost no quota (contract, push), nor do Idempotency-Key
    answers; anything new is still refused."""
    set_quota(db, client.user["id"], operations=3)
    keyed = client.post("/todos", {"title": "keyed", "deadline": "2030-06-20"}, headers={"Idempotency-Key": "q-key"})
    assert keyed.status_code == 201, short(keyed)
    push = {"deviceId": "d", "operations": [
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
         "data": {"title": f"p{i}", "deadline": "2030-06-20"}} for i in range(2)]}
    first = client.post("/sync/push", push)
    assert first.status_code == 200, short(first)
    # The quota (3) is used up. The same push again, and the keyed request again, get their answers.
    again = client.post("/sync/push", push)
    assert again.status_code == 200, short(again)
    assert again.json() == first.json()
    replayed = client.post("/todos", {"title": "keyed", "deadline": "2030-06-20"}, headers={"Idempotency-Key": "q-key"})
    assert replayed.status_code == 201 and replayed.content == keyed.content, short(replayed)
    # Something new is refused and changes nothing.
    r = client.post("/sync/push", {"deviceId": "d", "operations": [
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
         "data": {"title": "new", "deadline": "2030-06-20"}}]})
    assert_error(r, 429, "rate_limited")
    assert len(client.list_todos(date="2030-06-20")) == 3


def set_quota(db, user_id: int, records=None, operations=None):
    db(f"UPDATE users SET quota_records = {records if records is not None else 'NULL'}, "
       f"quota_operations_per_hour = {operations if operations is not None else 'NULL'} WHERE id = {int(user_id)}")


def test_replays_below_the_quota_cost_nothing_either(client, db):
    """A push that replays stored results was charged for them whenever the account was below its
    quota: replays ate the hour's budget (only a push made of replays at the quota was free)."""
    set_quota(db, client.user["id"], operations=4)

    def creates(n):
        return [{"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
                 "data": {"title": f"r{i}", "deadline": "2030-06-21"}} for i in range(n)]
    first = creates(2)
    assert client.post("/sync/push", {"deviceId": "d", "operations": first}).status_code == 200  # costs 2
    for _ in range(3):  # replays, alone and mixed with a repeated opId: cost nothing
        r = client.post("/sync/push", {"deviceId": "d", "operations": first + [first[0]]})
        assert r.status_code == 200, short(r)
    r = client.post("/sync/push", {"deviceId": "d", "operations": first + creates(2)})  # costs 2: the quota
    assert r.status_code == 200, short(r)
    assert [x["status"] for x in r.json()["results"]] == ["applied"] * 4
    assert len(client.list_todos(date="2030-06-21")) == 4
    assert_error(client.post("/sync/push", {"deviceId": "d", "operations": creates(1)}), 429, "rate_limited")


def test_record_quota_has_its_own_429(client, db):
    set_quota(db, client.user["id"], records=3)
    for i in range(3):
        client.create_todo(f"q{i}")
    r = client.post("/todos", {"title": "one too many", "deadline": "2030-06-15"})
    err = assert_error(r, 429, "rate_limited")
    assert "quota" in err["message"].lower() and "record" in err["message"].lower(), err
    assert int(r.headers["Retry-After"]) >= 1
    r = client.post("/sync/push", {"deviceId": "d", "operations": [
        {"opId": str(uuid.uuid4()), "entity": "tag", "action": "create", "clientId": str(uuid.uuid4()),
         "data": {"name": "x", "color": "#112233"}}]})
    assert_error(r, 429, "rate_limited")
    assert len(client.list_todos(date="2030-06-15")) == 3
    # Deleting frees room.
    todo = client.list_todos(date="2030-06-15")[0]
    assert client.delete(f"/todos/{todo['id']}").status_code == 204
    client.create_todo("fits again")


def test_operations_per_hour_quota_has_its_own_429(client, db):
    set_quota(db, client.user["id"], operations=4)
    tag = client.create_tag("ops")
    for i in range(3):
        r = client.patch(f"/tags/{tag['id']}", {"name": f"ops{i}"})
        assert r.status_code == 200, short(r)
    r = client.patch(f"/tags/{tag['id']}", {"name": "over"})
    err = assert_error(r, 429, "rate_limited")
    assert "per hour" in err["message"], err
    assert 1 <= int(r.headers["Retry-After"]) <= 3600, short(r)
    assert client.get_tag(tag["id"])["name"] == "ops2"
    # Reads are not write operations.
    assert client.get("/tags").status_code == 200


def test_a_request_behind_a_held_row_lock_gives_its_worker_back_quickly(client, db):
    uid = int(client.user["id"])
    holder = subprocess.Popen(
        ["mariadb", f"--socket={tsapi.DB_SOCKET}", "-uroot", "todosync", "-e",
         f"BEGIN; SELECT id FROM users WHERE id = {uid} FOR UPDATE; SELECT SLEEP(15); ROLLBACK;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.7)
        t0 = time.monotonic()
        r = client.post("/todos", {"title": "behind the lock", "deadline": "2030-07-07"}, timeout=60)
        elapsed = time.monotonic() - t0
        assert_error(r, 503, "unavailable")
        assert r.headers.get("Retry-After", "").isdigit(), short(r)
        assert elapsed < 10, f"waited {elapsed:.1f} s on the row lock"
    finally:
        holder.kill()
        holder.wait()
    # 503 means nothing was applied.
    assert client.list_todos(date="2030-07-07") == []


def live_counter(db, user_id: int) -> int:
    return int(db(f"SELECT live_records FROM users WHERE id = {int(user_id)}").decode().strip())


def exact_live(db, user_id: int) -> int:
    uid = int(user_id)
    return int(db(f"SELECT (SELECT COUNT(*) FROM todos WHERE user_id = {uid} AND deleted_at IS NULL)"
                  f" + (SELECT COUNT(*) FROM tags WHERE user_id = {uid} AND deleted_at IS NULL)").decode().strip())


def test_the_live_record_counter_follows_creates_deletes_and_restores(client, db):
    uid = client.user["id"]
    tag = client.create_tag("counted")
    todos = [client.create_todo(f"c{i}") for i in range(3)]
    assert client.delete(f"/todos/{todos[0]['id']}").status_code == 204
    client.post("/todos/quick-add", {"text": "one\n\ntwo", "date": "2030-06-16"})
    # A push: a create, a delete, and a client-wins update that restores a tombstone.
    ops = [
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()),
         "data": {"title": "pushed", "deadline": "2030-06-16"}},
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "delete", "id": todos[1]["id"]},
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": todos[0]["id"],
         "data": {"title": "back"}},
    ]
    r = client.post("/sync/push", {"deviceId": "d", "conflictPolicy": "client-wins", "operations": ops})
    assert r.status_code == 200, short(r)
    assert [x["status"] for x in r.json()["results"]] == ["applied"] * 3, short(r)
    assert client.delete(f"/tags/{tag['id']}").status_code == 204
    # 3 todos - 1 + 2 quick-add + 1 pushed - 1 deleted + 1 restored = 5; the tag came and went.
    assert exact_live(db, uid) == 5
    assert live_counter(db, uid) == 5


def test_a_drifted_record_counter_is_corrected_not_obeyed(client, db):
    uid = client.user["id"]
    set_quota(db, uid, records=4)
    client.create_todo("a")
    client.create_todo("b")
    # Rows written around the app (or by a responder older than the counter) leave it wrong.
    db(f"UPDATE users SET live_records = 40 WHERE id = {int(uid)}")
    r = client.post("/todos", {"title": "fits", "deadline": "2030-06-15"})
    assert r.status_code == 201, short(r)
    assert live_counter(db, uid) == 3
    client.create_todo("d")
    assert_error(client.post("/todos", {"title": "over", "deadline": "2030-06-15"}), 429, "rate_limited")
    assert exact_live(db, uid) == live_counter(db, uid) == 4


def test_a_refused_write_costs_no_operation(client, db):
    set_quota(db, client.user["id"], operations=2)
    r = client.patch("/todos/999999999", {"title": "nobody"})
    assert_error(r, 404, "not_found")
    client.create_tag("one")
    client.create_tag("two")
    assert_error(client.post("/tags", {"name": "three", "color": "#112233"}), 429, "rate_limited")
