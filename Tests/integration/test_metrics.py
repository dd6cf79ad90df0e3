"""Metrics (issue 14 item 3): `/metrics` on the stack's nginx, loopback only.

- `GET /metrics` answers every responder's page one after the other, each series labelled
  responder="N"; `/metrics/N` is responder N's page alone, a valid Prometheus exposition.
- The counters move with real requests: requests by route *pattern* and status, latency
  histograms by route, Argon2 hashes, push operations by result, pull records, busy workers,
  database reconnects after the server dropped the responders' sessions.
- From any address but 127.0.0.1/::1, nginx refuses both paths (403, JSON), over HTTP and HTTPS.
  The client binds 127.0.0.2 as its source address: a second local address outside the
  allow-list stands in for a remote host (nginx decides on $remote_addr alone).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import synclib
import tsapi

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(path: str = "/metrics") -> dict[tuple[str, frozenset], float]:
    r = requests.get(tsapi.BASE_URL + path, timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, tsapi.short(r)
    assert r.headers["Content-Type"].startswith("text/plain"), r.headers
    samples = {}
    for line in r.text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = frozenset(LABEL_RE.findall(m.group(2) or ""))
        key = (m.group(1), labels)
        assert key not in samples, f"series twice in one scrape: {line!r}"
        samples[key] = float(m.group(3))
    return samples


def total(samples, name: str, **labels) -> float:
    """Sum over every series of `name` whose labels include `labels` (all responders)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def by_responder(samples, name: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (n, ls), v in samples.items():
        if n == name:
            out[dict(ls)["responder"]] += v
    return dict(out)


def responder_count(samples) -> int:
    return len(by_responder(samples, "todosync_fastcgi_workers"))


def test_every_responder_is_scraped_and_labelled():
    # A responder lists todosync_http_requests_total once it has answered a request: on a fresh
    # stack (a `-k metrics` run), make every responder answer one first.
    for _ in range(50):
        if all(b"todosync_http_requests_total" in requests.get(f"{tsapi.BASE_URL}/metrics/{n}", timeout=tsapi.TIMEOUT).content
               for n in range(1, int(os.environ.get("TODOSYNC_RESPONDERS") or 1) + 1)):
            break
        requests.get(tsapi.BASE_URL + "/healthz", timeout=tsapi.TIMEOUT)
    samples = scrape()
    workers = by_responder(samples, "todosync_fastcgi_workers")
    expected = os.environ.get("TODOSYNC_RESPONDERS")
    if expected:
        assert set(workers) == {str(i) for i in range(1, int(expected) + 1)}, workers
    assert workers and all(v >= 1 for v in workers.values()), workers
    for (name, labels) in samples:
        assert "responder" in dict(labels), f"{name}{dict(labels)} has no responder label"
    # Each responder's own page is one valid exposition with only its own series.
    for responder in workers:
        r = requests.get(f"{tsapi.BASE_URL}/metrics/{responder}", timeout=tsapi.TIMEOUT)
        assert r.status_code == 200, tsapi.short(r)
        families = list(text_string_to_metric_families(r.text))
        assert {f.name for f in families} >= {"todosync_fastcgi_workers", "todosync_http_requests"}, families
        for family in families:
            for sample in family.samples:
                assert sample.labels.get("responder") == responder, (responder, sample)


def test_every_series_has_help_and_the_page_has_build_and_process_series():
    """Round 3, item 14: `# HELP` on every series, a build-info series, process metrics."""
    tsapi.new_user()  # some requests, so the request and hash families exist
    r = requests.get(f"{tsapi.BASE_URL}/metrics/1", timeout=tsapi.TIMEOUT)
    assert r.status_code == 200, tsapi.short(r)
    types = re.findall(r"^# TYPE (\S+) ", r.text, re.M)
    helps = set(re.findall(r"^# HELP (\S+) \S", r.text, re.M))
    assert types and set(types) <= helps, set(types) - helps
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    build = families["todosync_build_info"].samples[0]
    assert build.value == 1 and build.labels["version"] and build.labels["commit"], build
    assert families["process_resident_memory_bytes"].samples[0].value > 1_000_000
    assert families["process_cpu_seconds"].samples[0].value > 0
    assert 0 < families["process_open_fds"].samples[0].value < families["process_max_fds"].samples[0].value


def test_counters_move_with_real_requests():
    before = scrape()
    api = tsapi.new_user()                                     # one Argon2 hash
    tag = api.create_tag()                                     # POST /api/v1/tags 201
    for _ in range(3):
        assert api.get(f"/tags/{tag['id']}").status_code == 200
    assert api.get("/todos/999999999").status_code == 404      # a route with a parameter
    ops = [synclib.create_todo_op("metrics a"), synclib.create_todo_op("metrics b")]
    synclib.push(api, ops)                                     # 2 applied
    synclib.push(api, ops[:1])                                 # 1 replayed
    page = synclib.pull(api)
    pulled = sum(len(page["changes"][k]["upserted"]) + len(page["changes"][k]["deleted"]) for k in page["changes"])
    after = scrape()

    def delta(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    assert delta("todosync_http_requests_total", route="/api/v1/auth/register", status="201") == 1
    assert delta("todosync_http_requests_total", route="/api/v1/tags", status="201") == 1
    assert delta("todosync_http_requests_total", route="/api/v1/tags/:id", status="200") == 3
    assert delta("todosync_http_requests_total", route="/api/v1/todos/:id", status="404") == 1
    assert delta("todosync_http_requests_total", route="/api/v1/sync/push", status="200") == 2
    assert delta("todosync_http_request_duration_seconds_count", route="/api/v1/tags/:id") == 3
    assert delta("todosync_http_request_duration_seconds_sum", route="/api/v1/tags/:id") > 0
    # Histogram buckets are cumulative: +Inf counts every request of the route.
    assert delta("todosync_http_request_duration_seconds_bucket", route="/api/v1/tags/:id", le="+Inf") == 3
    assert delta("todosync_argon2_hashes_total", op="hash") >= 1
    assert delta("todosync_push_operations_total", result="applied") == 2
    assert delta("todosync_push_operations_total", result="replayed") == 1
    assert pulled >= 3 and delta("todosync_pull_records_total") == pulled
    # The raw path never becomes a label: ids would make a series per record.
    assert not any("999999999" in v or f"/{tag['id']}" in v
                   for (_, labels) in after for _, v in labels), "a raw path leaked into a label"


def test_busy_workers_gauge_follows_requests_in_flight():
    n = responder_count(scrape())
    idle = by_responder(scrape(), "todosync_fastcgi_workers_busy")
    # Each responder counts only the scrape it is answering.
    assert all(v == 1 for v in idle.values()), idle
    threads = [threading.Thread(target=requests.get, args=(tsapi.BASE_URL + "/healthz?delay_ms=2500",),
                                kwargs={"timeout": 30}) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 2.0
        busy = 0.0
        while time.monotonic() < deadline:
            busy = total(scrape(), "todosync_fastcgi_workers_busy") - n
            if busy >= 3:
                break
            time.sleep(0.1)
        assert busy >= 3, f"3 slow requests in flight, but only {busy} busy workers besides the scrapes"
    finally:
        for t in threads:
            t.join(30)
    assert total(scrape(), "todosync_fastcgi_workers_busy") == n


def test_reconnects_are_counted_after_the_database_drops_sessions(db):
    api = tsapi.new_user()
    before = scrape()
    ids = tsapi.db_query("SELECT id FROM information_schema.processlist WHERE user = 'todosync'").split()
    assert ids, "no responder session in the processlist"
    for session in ids:
        try:
            tsapi.db_query(f"KILL {int(session)}")
        except AssertionError:
            pass  # already gone
    # Every worker with a killed session reconnects on its next statement; enough requests that
    # some land on such a worker, whichever worker accepts them.
    for _ in range(20):
        assert api.get("/tags").status_code == 200
    after = scrape()
    assert total(after, "todosync_db_connects_total", kind="reconnect") > total(before, "todosync_db_connects_total", kind="reconnect")
    assert total(after, "todosync_db_connection_losses_total") >= total(before, "todosync_db_connection_losses_total")


def _get_from(source: str, url: str, path: str | None = None) -> tuple[int, bytes]:
    """GET over a connection from `source` (a local address); `path` is sent as is."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=os.environ.get("TODOSYNC_TEST_CA_CERT") or None)
        if not os.environ.get("TODOSYNC_TEST_CA_CERT"):
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=tsapi.TIMEOUT,
                                           source_address=(source, 0), context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=tsapi.TIMEOUT,
                                          source_address=(source, 0))
    try:
        conn.request("GET", path or parts.path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status == 403:
            assert b'"forbidden"' in body and resp.getheader("Content-Type", "").startswith("application/json"), body
        return resp.status, body
    finally:
        conn.close()


@pytest.mark.parametrize("base", [tsapi.BASE_URL, tsapi.HTTPS_URL], ids=["http", "https"])
@pytest.mark.parametrize("path", ["/metrics", "/metrics/1"])
def test_metrics_refused_from_an_address_outside_the_allow_list(base, path):
    status, body = _get_from("127.0.0.1", base + path)
    assert status == 200 and b"todosync_http_requests_total" in body
    status, body = _get_from("127.0.0.2", base + path)
    assert status == 403 and b"todosync_" not in body


@pytest.mark.parametrize("path", ["/api/../metrics", "/api/v1/../../metrics/1", "/healthz/../metrics/1",
                                  "/api/%2e%2e/metrics/1", "/api/v1/metrics", "/metrics/1?x=/api/"])
def test_metrics_not_reachable_from_outside_through_other_paths(path):
    status, body = _get_from("127.0.0.2", tsapi.BASE_URL, path)
    assert b"todosync_http_requests_total" not in body, (path, status)
    assert status in (400, 403, 404), (path, status)


def test_dashboard_and_docs_name_only_metrics_the_responder_defines():
    """docs/grafana-dashboard.json and docs/OPERATIONS.md stay in step with the code's metric names."""
    root = Path(__file__).resolve().parents[2]
    defined = set()
    for source in (root / "Sources").rglob("*.swift"):
        defined |= set(re.findall(r'(?:Counter|Timer|Meter|Recorder)\(\s*label: "(todosync_[a-z0-9_]+)"', source.read_text()))
    # series the exposition writes itself (build info)
    exposition = (root / "Sources/TodoSyncServer/Observability/MetricsExposition.swift").read_text()
    defined |= {name for name in re.findall(r'"(todosync_[a-z0-9_]+)":', exposition)}
    # nginx's own counts: mtail's program over the access log (docs/OPERATIONS.md, "nginx's own counts")
    for program in (root / "scripts/mtail").glob("*.mtail"):
        defined |= set(re.findall(r"^(?:counter|gauge|histogram) (todosync_[a-z0-9_]+)", program.read_text(), re.M))
    assert "todosync_nginx_responses_total" in defined, defined
    assert {"todosync_http_requests_total", "todosync_db_connects_total"} <= defined, defined

    def base(name: str) -> str:
        return re.sub(r"_(bucket|sum|count)$", "", name)

    dashboard = json.loads((root / "docs/grafana-dashboard.json").read_text())
    queried = {base(n) for panel in dashboard["panels"] for target in panel["targets"]
               for n in re.findall(r"todosync_[a-z0-9_]+", target["expr"])}
    assert queried and queried <= defined, queried - defined
    documented = set(re.findall(r"`(todosync_[a-z0-9_]+)`", (root / "docs/OPERATIONS.md").read_text()))
    assert documented == defined, (defined - documented, documented - defined)
    alerted = {base(n) for n in re.findall(r"todosync_[a-z0-9_]+", (root / "docs/alert-rules.yml").read_text())}
    assert alerted and alerted <= defined, alerted - defined
