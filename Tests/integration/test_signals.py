"""Round 3, item 10: signals an operator sends do not kill a responder mid-request.

SIGHUP (`systemctl reload`, `sv hup`) used to end the process, and so did SIGUSR1/SIGUSR2 (their
default action). Now SIGHUP reloads what can change while serving (the log level), names the
settings that need a restart, and leaves requests in flight alone; SIGUSR1/SIGUSR2 are logged and
ignored. Each signal goes to every responder while a slow request is in flight on one of them.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import time
from pathlib import Path

import pytest
import requests

import tsapi


def _responder_logs() -> str:
    state = os.environ.get("TODOSYNC_TEST_STATE_DIR")
    if not state:
        pytest.skip("TODOSYNC_TEST_STATE_DIR not set")
    return "".join(p.read_text(errors="replace") for p in sorted(Path(state, "log").glob("responder-*.log")))


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2], ids=lambda s: s.name)
def test_a_signal_other_than_term_neither_kills_nor_interrupts(sig):
    pids = tsapi.responder_pids()
    assert pids, "responder-pids printed no pid"
    logs_before = len(_responder_logs())
    with cf.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(requests.get, tsapi.BASE_URL + "/healthz?delay_ms=1500", timeout=30) for _ in range(4)]
        time.sleep(0.4)  # the requests are in flight on the responders now
        for pid in pids:
            os.kill(pid, sig)
        answers = [f.result() for f in slow]
    assert [r.status_code for r in answers] == [200] * 4, [tsapi.short(r) for r in answers]
    assert tsapi.responder_pids() == pids, "a responder was restarted"
    assert requests.get(tsapi.BASE_URL + "/healthz", timeout=10).status_code == 200
    deadline = time.monotonic() + 5
    expected = '"msg":"reloaded"' if sig == signal.SIGHUP else f'"signal":"{sig.name}"'
    while expected not in _responder_logs()[logs_before:]:
        assert time.monotonic() < deadline, f"no {expected} line in the responder logs"
        time.sleep(0.2)


def test_systemd_units_keep_the_socket_across_restarts_and_wait_for_readiness():
    """`PartOf=` restarted the socket with the service, dropping the connections queued in it;
    `Type=simple` let install.sh restart every instance back to back before any was ready."""
    units = Path(__file__).resolve().parents[2] / "scripts/systemd"
    socket_unit = (units / "todosync@.socket").read_text()
    service = (units / "todosync@.service").read_text()
    assert not any(line.startswith("PartOf=") for line in socket_unit.splitlines())
    assert "\nType=notify\n" in service and "\nExecReload=/bin/kill -HUP $MAINPID\n" in service
