"""Correctness on the scripts/cluster.sh topology: Galera nodes and responder hosts on TCP.

Skipped unless the cluster runner started the suite (see clusterlib.py).

  topology               every node is in one cluster and Synced; nginx spreads requests over
                         every responder host; a responder answers nginx's address and closes a
                         connection from any other host unanswered (--allow)
  one user, many nodes   concurrent writers of one user whose requests land on different
                         responder hosts and Galera nodes: every write succeeds (certification
                         failures are retried whole), versions are unique and dense, and a device
                         pulling throughout receives every change exactly once (version order =
                         commit order, across nodes)
  read your writes       each write is read back at once through the other responder host and
                         node (round-robin): always seen (wsrep_sync_wait=1)
  account delete         a delete through the front is seen on every node at once: the account's
                         every token is 401 through every responder host, each Galera node has
                         the users row marked deleted and no token of it, the email registers again
  snapshot               one user's snapshot requested at once through every responder host is
                         built once into the directory the hosts share, and every front sends
                         that one file (its digest, a Range resume)
  two fronts             (TODOSYNC_CLUSTER_FRONTS=2) writes through front 1 poke live streams on
                         both fronts, through nchan's shared Redis store; no client publishes
                         through either front
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import threading
import time
import uuid

import pytest
import requests

import clusterlib
import synclib
import tsapi
from clusterlib import requires_cluster
from reliabilitylib import report
from test_live_sync import Stream
from tsapi import assert_json, short

pytestmark = requires_cluster


def test_every_node_is_synced_and_requests_reach_every_responder_host(base_url):
    for n in range(1, clusterlib.NODES + 1):
        status = clusterlib.node_status(n)
        if clusterlib.NODES > 1:
            assert status.get("wsrep_cluster_size") == str(clusterlib.NODES), (n, status)
            assert status.get("wsrep_local_state_comment") == "Synced", (n, status)
    marker = uuid.uuid4().hex
    api = tsapi.Api(None, base_url)
    for _ in range(4 * clusterlib.APPS):
        r = api.get(f"/healthz", headers={"User-Agent": marker})
        assert r.status_code == 200, short(r)
    time.sleep(1.5)  # the access log is flushed every second
    upstreams = set()
    with open(f"{clusterlib.LOG_DIR}/nginx-access.log", errors="replace") as f:
        for line in f:
            if marker in line:
                upstreams.add(json.loads(line)["upstream"])  # the access log is JSON lines
    want = {f"{clusterlib.NET}.{20 + n}:9000" for n in range(1, clusterlib.APPS + 1)}
    assert upstreams == want, f"requests went to {upstreams}, expected every responder host {want}"


def test_responder_hosts_answer_only_nginx():
    fronts = [f"{clusterlib.PREFIX}-fe"] + [f"{clusterlib.PREFIX}-fe{f}" for f in range(2, len(clusterlib.FRONT_URLS) + 1)]
    other = f"{clusterlib.PREFIX}-db1"
    for n in range(1, clusterlib.APPS + 1):
        app = f"{clusterlib.NET}.{20 + n}"
        for front in fronts:
            assert clusterlib.fastcgi_probe(front, app) == "answered", f"{front}'s nginx must be served by {app}"
        assert clusterlib.fastcgi_probe(other, app) == "closed", f"{app} served a host outside its allow-list"


def test_concurrent_writers_of_one_user_on_different_nodes_keep_version_order(make_client, capsys):
    api = make_client()
    todos = [api.create_todo(title=f"shared {i}", deadline="2034-02-02") for i in range(3)]
    tag = api.create_tag(name="shared tag")
    before = clusterlib.counter_sum("wsrep_local_commits")
    app_before = clusterlib.app_retry_counts()

    writers, per_writer = 4, 30
    errors: list[str] = []
    seen: dict[tuple[str, int, int], int] = {}   # (kind, id, version) -> times received by the puller
    puller_store = synclib.ClientStore()
    stop = threading.Event()

    def write(w: int) -> None:
        own = tsapi.Api(api.token, api.base_url)
        for i in range(per_writer):
            target = todos[(w + i) % len(todos)]
            if i % 5 == 4:
                r = own.post("/todos", {"title": f"w{w} new {i}", "deadline": "2034-02-03", "tagId": tag["id"]})
                ok = 201
            else:
                r = own.patch(f"/todos/{target['id']}", {"title": f"w{w} edit {i}", "isImportant": i % 2 == 0})
                ok = 200
            if r.status_code != ok:
                errors.append(short(r))

    def pull_loop() -> None:
        own = tsapi.Api(api.token, api.base_url)
        while True:
            last_round = stop.is_set()
            cursor = puller_store.cursor
            while True:
                body = synclib.pull(own, cursor=cursor, limit=50)
                for kind, rec, _deleted in synclib.page_records(body):
                    if kind == "tags":
                        continue  # a page may repeat a parent tag for referential completeness
                    key = (kind, rec["id"], rec["version"])
                    seen[key] = seen.get(key, 0) + 1
                puller_store.apply_page(body, check_refs=False)
                cursor = body["cursor"]
                if not body["hasMore"]:
                    break
            if last_round:
                return

    synclib.pull_all(api, puller_store)
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    puller = threading.Thread(target=pull_loop)
    puller.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    puller.join(timeout=120)
    assert not puller.is_alive()
    assert not errors, f"{len(errors)} writes failed: {errors[:5]}"

    # Every change reached the puller exactly once, and what it holds equals a fresh full pull.
    repeated = {k: n for k, n in seen.items() if n > 1}
    assert not repeated, f"the puller received changes more than once: {list(repeated.items())[:10]}"
    fresh = synclib.fresh_state(api)
    assert puller_store.snapshot() == fresh.snapshot(), "a change was skipped by the device pulling throughout"

    # Versions come from the user's one change sequence: unique across records.
    versions = [rec["version"] for rec in list(fresh.todos.values()) + list(fresh.tags.values())
                + list(fresh.stats.values())]
    assert len(versions) == len(set(versions)), "two records share a version"

    after = clusterlib.counter_sum("wsrep_local_commits")
    nodes_used = [n for n in after if after[n] > before[n]]
    time.sleep(6)  # responders log their retry counters every 5 s
    app_after = clusterlib.app_retry_counts()
    conflicts = {k: app_after.get(k, 0) - app_before.get(k, 0) for k in ("certification_failures", "deadlocks")}
    report(capsys, "one user, concurrent writers on several nodes",
           writes=writers * per_writer, nodes_with_local_commits=nodes_used,
           changes_pulled=len(seen), **conflicts)
    if clusterlib.NODES > 1 and clusterlib.APPS > 1:
        assert len(nodes_used) >= 2, f"the writes all landed on one node: {before} -> {after}"
        assert sum(conflicts.values()) > 0, (
            "no certification failure or deadlock was retried: the scenario did not exercise the retry")


def test_reads_see_the_write_just_acknowledged_on_another_node(make_client, capsys):
    """A 50-line quick-add is a large write set: without wsrep_sync_wait the other node is still
    applying it when the next request arrives (measured: 16 of 100 such reads missed todos with
    wsrep_sync_wait=0, none with 1)."""
    api = make_client()
    rounds, lines = 50, 50
    t0 = time.monotonic()
    for i in range(rounds):
        date = f"2034-03-{i % 28 + 1:02d}"
        r = api.post("/todos/quick-add", {"date": date, "text": "\n".join(f"ryw {i}.{j}" for j in range(lines))})
        assert r.status_code == 201, short(r)
        created = {t["id"] for t in assert_json(r)["items"]}
        assert len(created) == lines
        # round-robin: the next request goes to the other responder host, hence another node
        listed = {t["id"] for t in assert_json(api.get("/todos", params={"date": date}))["items"]}
        missing = created - listed
        assert not missing, f"round {i}: {len(missing)} of the {lines} todos just created are not visible yet"
        first = min(created)
        r = api.patch(f"/todos/{first}", {"isCompleted": True})
        assert r.status_code == 200, short(r)
        version = assert_json(r)["version"]
        got = api.get_todo(first)
        assert got["version"] == version and got["isCompleted"], (
            f"round {i}: read version {got['version']} after the acknowledged {version}")
    report(capsys, "read-your-writes across responder hosts", rounds=rounds, todos_per_write=lines,
           seconds=round(time.monotonic() - t0, 1))


def test_an_account_deleted_through_the_front_is_gone_on_every_node(make_client):
    phone = make_client()
    laptop = tsapi.login(phone.email, phone.password)
    assert laptop.status_code == 200, short(laptop)
    other = tsapi.Api(laptop.json()["token"])
    assert other.get("/tags").status_code == 200
    r = phone.post("/account/delete", {"password": phone.password})
    assert r.status_code == 204, short(r)
    # round-robin: consecutive requests go to every responder host, hence every node
    for i in range(2 * clusterlib.APPS):
        for api in (phone, other):
            r = api.get("/tags")
            assert r.status_code == 401, f"request {i}: a token of the deleted account answered {r.status_code}"
    user_id = int(phone.user["id"])
    for n in range(1, clusterlib.NODES + 1):
        out = clusterlib.node_sql(n, "SELECT (SELECT COUNT(*) FROM todosync.users WHERE id = %d AND deleted_at IS NOT NULL),"
                                     " (SELECT COUNT(*) FROM todosync.auth_tokens WHERE user_id = %d)" % (user_id, user_id))
        assert out.split() == ["1", "0"], f"db{n}: deleted users row, tokens left: {out!r}"
    r = tsapi.register(phone.email, phone.password)
    assert r.status_code == 201, short(r)
    assert r.json()["user"]["id"] != user_id


def test_a_snapshot_is_built_once_in_the_shared_directory_and_sent_by_every_front(make_client):
    """docs/SCALING.md, "Snapshots": the responder hosts share one cache directory and its build
    locks, and each front's nginx sends the files from it. A file carries its build time, so two
    builds of one state differ in digest: one digest over requests spread round-robin across the
    hosts means one build. With a cache per host, the second host would build its own."""
    api = make_client()
    for start in range(0, 3000, 100):  # enough rows for the build to take a while
        synclib.push(api, [synclib.create_todo_op(f"snap {i}", deadline=f"2031-{1 + i % 12:02d}-{1 + i % 28:02d}")
                           for i in range(start, start + 100)])
    results: list[requests.Response] = []

    def take() -> None:
        deadline = time.monotonic() + 60
        while True:
            r = api.get("/sync/snapshot", params={"schemaVersion": str(tsapi.CURRENT_SCHEMA)},
                        headers={"Accept-Encoding": "identity"}, timeout=60)  # the file itself, not its gzip
            if r.status_code in (429, 503) and time.monotonic() < deadline:
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            results.append(r)
            return

    threads = [threading.Thread(target=take) for _ in range(4 * clusterlib.APPS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert len(results) == len(threads) and all(r.status_code == 200 for r in results), \
        [short(r) for r in results if r.status_code != 200]
    body = results[0].content
    digest = "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"
    assert {r.headers["Repr-Digest"] for r in results} == {digest}, "the hosts built the snapshot more than once"
    assert all(r.content == body for r in results)
    user_dir = os.path.join(clusterlib.SNAPSHOT_DIR, str(api.user["id"]))
    files = [n for n in os.listdir(user_dir) if n.endswith(".sqlite")]
    assert len(files) == 1 and files[0].endswith(hashlib.sha256(body).hexdigest() + ".sqlite"), files
    for url in clusterlib.FRONT_URLS:
        front = tsapi.Api(api.token, base_url=url)
        for _ in range(clusterlib.APPS):  # each responder host authorizes, the front sends the file
            part = front.get("/sync/snapshot", params={"schemaVersion": str(tsapi.CURRENT_SCHEMA)},
                             headers={"Range": "bytes=100-", "Accept-Encoding": "identity"}, timeout=60)
            assert part.status_code == 206, (url, short(part))
            assert part.content == body[100:] and part.headers["Repr-Digest"] == digest, url


two_fronts = pytest.mark.skipif(len(clusterlib.FRONT_URLS) < 2,
                                reason="one front (TODOSYNC_CLUSTER_FRONTS=2 runs two, sharing nchan's Redis store)")


@two_fronts
def test_writes_through_one_front_poke_streams_on_both_fronts():
    """Responder host N publishes to front N's nchan (round-robin spreads the writes over the
    hosts): a subscriber on front 2 gets the pokes published on front 1 only through Redis, and
    the other way round. Without the shared store each stream would miss about half."""
    api = tsapi.new_user(base_url=clusterlib.FRONT_URLS[0])
    streams = [Stream(api.token, base_url=url) for url in clusterlib.FRONT_URLS]
    try:
        assert [s.status for s in streams] == [200] * len(streams), [s.body for s in streams]
        last = [0] * len(streams)
        for i in range(2 * clusterlib.APPS):
            todo = api.create_todo(f"poke across fronts {i}")
            for n, s in enumerate(streams):
                got = s.poke(timeout=2.0)
                assert got is not None, f"write {i}: no poke within 2 s on front {n + 1}"
                body = got[1]
                assert body["deviceId"] is None and body["version"] >= todo["version"] > last[n], (i, n + 1, body)
                last[n] = body["version"]
    finally:
        for s in streams:
            s.close()


@two_fronts
def test_no_client_publishes_through_either_front():
    api = tsapi.new_user(base_url=clusterlib.FRONT_URLS[0])
    streams = [Stream(api.token, base_url=url) for url in clusterlib.FRONT_URLS]
    try:
        assert [s.status for s in streams] == [200] * len(streams)
        forged = '{"version":999999,"deviceId":"forged"}'
        for url in clusterlib.FRONT_URLS:
            for uid in sorted({api.user["id"], 1, 2, 3}):
                for method, path in [("POST", f"/__live/publish/{uid}"), ("GET", f"/__live/subscribe/{uid}"),
                                     ("POST", f"/__live/subscribe/{uid}")]:
                    r = requests.request(method, url + path, data=forged, timeout=3, stream=True,
                                         headers={"Accept": "text/event-stream", "Content-Type": "application/json",
                                                  "Authorization": f"Bearer {api.token}"})
                    assert r.status_code in (404, 405), (url, method, path, r.status_code)
                    r.close()
        for n, s in enumerate(streams):
            assert s.poke(timeout=1.0) is None, f"a forged poke arrived on front {n + 1}"
    finally:
        for s in streams:
            s.close()


def test_watch_shows_every_node_and_dumps_a_lock_wait_of_three_seconds():
    """`cluster.sh watch` is how a replication stall under faults gets caught (docs/SCALING.md): a
    line per node per second, and a node's transactions and InnoDB status once a lock wait there
    passes 3 s (a responder's session gives up after 1 s, so such a wait is an applier's). Here a
    root session holds a row lock on db1 for 6 s while another waits for it."""
    if clusterlib.NODES < 2:
        pytest.skip("one node is plain MariaDB: no wsrep status to watch")
    base = ["mariadb", "--no-defaults", f"--socket={clusterlib.SOCKETS[0]}", "-uroot", "--connect-timeout=3", "-e"]
    clusterlib.node_sql(1, "CREATE DATABASE IF NOT EXISTS watch_probe; "
                           "CREATE TABLE IF NOT EXISTS watch_probe.t (id INT PRIMARY KEY) ENGINE=InnoDB; "
                           "INSERT IGNORE INTO watch_probe.t VALUES (1)")
    holder = subprocess.Popen(base + ["BEGIN; SELECT id FROM watch_probe.t WHERE id = 1 FOR UPDATE; "
                                      "SELECT SLEEP(6); COMMIT"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        waiter = subprocess.Popen(base + ["SET SESSION innodb_lock_wait_timeout = 20; SET SESSION wsrep_sync_wait = 0; "
                                          "SELECT id FROM watch_probe.t WHERE id = 1 FOR UPDATE"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out = clusterlib.cluster("watch", "5", timeout=60)
        assert waiter.wait(timeout=30) == 0, waiter.stderr.read()
    finally:
        holder.wait(timeout=30)
        clusterlib.node_sql(1, "DROP DATABASE IF EXISTS watch_probe")
    for n in range(1, clusterlib.NODES + 1):
        assert re.search(rf"^\d\d:\d\d:\d\d db{n} recv_queue=\d+ fc_sent=\d+ fc_paused=\S+ state=Synced ", out, re.M), \
            f"no line for db{n}:\n{out[:2000]}"
    assert re.search(r"^\d\d:\d\d:\d\d db1 lock wait of [3-9]s: transactions and InnoDB status follow$", out, re.M), out[:3000]
    assert "SELECT id FROM watch_probe.t WHERE id = 1 FOR UPDATE" in out, "the waiting transaction is not in the dump"
    assert "INNODB MONITOR OUTPUT" in out
