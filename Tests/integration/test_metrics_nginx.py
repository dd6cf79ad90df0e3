"""nginx's own counts: scripts/mtail/todosync-nginx.mtail over access logs the real stack wrote.

mtail (scripts/test-tools.sh) runs the program in --one_shot mode over
- fixtures/nginx-access-sample.log, written by the dev stack (scripts/stack.sh, two responders)
  while: requests were served; MariaDB was stopped (the responder's own 503); responder 1 and
  then both were stopped with `sv down` (failovers to the other, then nginx's 503 for a GET, a
  POST and /metrics/1); both were SIGSTOPped during a POST (nginx's 504 outcome_unknown after
  fastcgi_read_timeout, 30 s); a 404, a 405, a 413, and a user agent that spells out the log's
  own fields. Too slow or too disruptive to make on every run, so kept;
- this test stack's log: requests made here, with both responders stopped for a moment (nginx's
  503s, made now by the nginx of this checkout), and every line the log holds so far (none
  unparsed: the program still reads nginx's log_format);
- the production site's log (nginx/todosync-site.conf.template as install.sh renders it, run by
  a real nginx in front of this stack: test_production_install's fixture), whose error pages
  are /__todosync_error and /__todosync_upstream_error.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import tsapi
from test_alert_rules import tool
from test_production_install import conf, site_nginx  # noqa: F401 (fixtures)

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = REPO_ROOT / "scripts/mtail/todosync-nginx.mtail"
SAMPLE = Path(__file__).resolve().parent / "fixtures/nginx-access-sample.log"


def mtail_counts(log: Path) -> dict[tuple[str, frozenset], float]:
    r = subprocess.run([tool("mtail"), "--one_shot", "--one_shot_format=prometheus", "--port", "0",
                        "--logtostderr", "--progs", str(PROGRAM), "--logs", str(log)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    samples = {}
    for family in text_string_to_metric_families(r.stdout):
        for s in family.samples:
            labels = {k: v for k, v in s.labels.items() if k != "prog"}
            samples[(s.name, frozenset(labels.items()))] = s.value
    assert samples, r.stdout + r.stderr[-2000:]
    return samples


def responses(samples) -> Counter:
    return Counter({(dict(labels)["status"], dict(labels)["made_by"]): int(v)
                    for (name, labels), v in samples.items() if name == "todosync_nginx_responses_total"})


def scalar(samples, name: str) -> int:
    return int(samples.get((name, frozenset()), 0))


def test_program_counts_the_sample_by_status_and_maker():
    samples = mtail_counts(SAMPLE)
    assert responses(samples) == Counter({
        ("200", "responder"): 16, ("401", "responder"): 4, ("405", "responder"): 1,
        ("503", "responder"): 1,            # MariaDB stopped: the responder's own 503
        ("503", "nginx"): 4,                # no responder reachable (GET, POST, /metrics/1)
        ("504", "nginx"): 1,                # a POST handed over, then fastcgi_read_timeout
        ("404", "nginx"): 1, ("413", "nginx"): 1,
    }), samples
    # tried on both responders: two 200s from responder 2 after responder 1 refused, and two 503s
    # once both refused (the second ends on "no live upstreams")
    assert scalar(samples, "todosync_nginx_upstream_failovers_total") == 4
    assert scalar(samples, "todosync_nginx_unparsed_lines_total") == 0
    # The user agent that spells `"status":502` after a forged /__errors/ uri is a responder's 200.
    forged = [line for line in SAMPLE.read_text().splitlines() if '\\"status\\":502' in line]
    assert len(forged) == 1 and '"status":200' in forged[0]


def _lines_for(log: Path, request_ids: list[str], deadline_s: float = 10.0) -> list[str]:
    """The access-log lines of these requests (nginx flushes its log buffer every second)."""
    wanted = {f'"request_id":"{rid}"' for rid in request_ids}
    deadline = time.monotonic() + deadline_s
    while True:
        found = [line for line in log.read_text(errors="replace").splitlines()
                 if any(w in line for w in wanted)]
        if len(found) >= len(wanted) or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_program_reads_this_stacks_log_and_sees_nginx_answer_for_stopped_responders(tmp_path):
    state = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")
    if not state or not tsapi.STACK:
        pytest.skip("needs the test stack (scripts/test.sh)")
    log = Path(state) / "log/nginx-access.log"
    services = sorted((Path(state) / "sv").glob("responder-*"))
    assert log.exists() and services, (log, services)
    tsapi.wait_healthy(30)
    ids: list[str] = []
    expected = Counter()

    def send(method: str, path: str, status: int, made_by: str, **kw) -> None:
        r = requests.request(method, tsapi.BASE_URL + path, timeout=tsapi.TIMEOUT, **kw)
        assert r.status_code == status, tsapi.short(r)
        ids.append(r.headers["X-Request-Id"])
        expected[(str(status), made_by)] += 1

    send("GET", "/healthz", 200, "responder")
    send("GET", "/api/v1/tags", 401, "responder")
    send("GET", "/no-such-path", 404, "nginx")
    send("POST", "/api/v1/auth/login", 413, "nginx", data=b"x" * (2 << 20),
         headers={"Content-Type": "application/json"})
    with _responders_stopped(services):
        send("GET", "/healthz", 503, "nginx")
        send("POST", "/api/v1/auth/login", 503, "nginx", json={"email": "a@example.test", "password": "x" * 10})
    lines = _lines_for(log, ids)
    assert len(lines) == len(ids), (ids, lines)
    sample = tmp_path / "access.log"
    sample.write_text("\n".join(lines) + "\n")
    assert responses(mtail_counts(sample)) == expected, lines

    # Every line this stack has logged so far is one the program reads.
    whole = mtail_counts(log)
    assert scalar(whole, "todosync_nginx_unparsed_lines_total") == 0
    assert sum(responses(whole).values()) >= len(ids)


def test_program_reads_the_production_sites_log(site_nginx, tmp_path):  # noqa: F811
    state = os.environ.get("TODOSYNC_TEST_STATE_DIR", "")
    services = sorted((Path(state) / "sv").glob("responder-*")) if state else []
    if not services:
        pytest.skip("needs the test stack (scripts/test.sh)")
    ids: list[str] = []
    expected = Counter()

    def send(path: str, status: int, made_by: str) -> None:
        r = requests.get(site_nginx["https"] + path, verify=site_nginx["ca"], timeout=tsapi.TIMEOUT)
        assert r.status_code == status, (path, r.status_code, r.text[:200])
        ids.append(r.headers["X-Request-Id"])
        expected[(str(status), made_by)] += 1

    send("/healthz", 200, "responder")
    send("/nothing-here", 404, "nginx")          # /__todosync_error
    with _responders_stopped(services):
        send("/healthz", 503, "nginx")           # /__todosync_upstream_error
    log = site_nginx["logs"] / "nginx-access.log"
    lines = _lines_for(log, ids)
    assert len(lines) == len(ids), (ids, lines)
    # The client's path is the line's uri; the error page nginx went through is internal_uri.
    assert any('"uri":"/healthz","internal_uri":"/__todosync_upstream_error"' in line for line in lines), lines
    assert any('"uri":"/nothing-here","internal_uri":"/__todosync_error"' in line for line in lines), lines
    sample = tmp_path / "access.log"
    sample.write_text("\n".join(lines) + "\n")
    assert responses(mtail_counts(sample)) == expected, lines
    assert scalar(mtail_counts(log), "todosync_nginx_unparsed_lines_total") == 0


class _responders_stopped:
    """Both responders stopped (`sv down`: their sockets are gone, nginx cannot connect), then
    started again and the stack settled."""

    def __init__(self, services: list[Path]):
        self.services = [str(s) for s in services]

    def __enter__(self):
        subprocess.run(["sv", "-w", "30", "down", *self.services], check=True, capture_output=True, timeout=60)

    def __exit__(self, *exc):
        subprocess.run(["sv", "up", *self.services], check=True, capture_output=True, timeout=60)
        _settle()
        return False


def _settle() -> None:
    """Both responders serving again."""
    tsapi.wait_healthy(30)
    tsapi.settle_responders("the responders were stopped")
