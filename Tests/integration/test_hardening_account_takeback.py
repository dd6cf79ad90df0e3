"""Issue 34, item 7a: taking an account back always gets through its limits.

A thief holding a stolen token keeps the account's requests in flight (here: snapshot builds held
open by the `__test_hold_ms` test hook, which take no row lock). Before, revoking the session,
logging out and deleting the account counted against the same limits, in nginx (per token,
`limit_conn todosync_account` of `location /api/`) and in the responder (per account,
TODOSYNC_ACCOUNT_IN_FLIGHT), so the owner got 429 until the thief paused (429, 429, 429, then 204
after 3.1 s). Now nginx has a location for `POST /account/delete` and `DELETE
/account/sessions/{id}` without the per-token limit (logout is under `/api/v1/auth/`, which has
none) and the responder counts none of the three: each is 204 at once, while the thief's requests
are still in flight. Runs on a responder of its own (2 requests in flight per account) behind a
second nginx rendered from the templates (2 per token), so both layers are the ones in the way.
"""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import tempfile
import time

import pytest
import requests

import tsapi
from test_hardening_account_limits import OwnResponder, second_nginx
from tsapi import short

HOLD_MS = 6000


@pytest.fixture
def tight_stack(stack_cmd, tmp_path):
    """One responder (6 workers, 2 in flight per account) behind a second nginx (2 per token)."""
    socket_dir = tempfile.mkdtemp(prefix="ts-take-", dir="/tmp")
    state = tmp_path / "state"
    (state / "snapshots").mkdir(parents=True)
    responder = OwnResponder(socket_dir, {"TODOSYNC_WORKERS": "6", "TODOSYNC_ACCOUNT_IN_FLIGHT": "2",
                                          "TODOSYNC_SNAPSHOT_DIR": str(state / "snapshots")},
                             tmp_path / "responder.log")
    try:
        responder.start()
        with second_nginx(state, socket_dir, 1, per_token=2) as base:
            yield base
    finally:
        responder.stop()
        shutil.rmtree(socket_dir, ignore_errors=True)


def call(base: str, method: str, path: str, token: str, json=None) -> tuple[int, float]:
    started = time.monotonic()
    r = requests.request(method, base + "/api/v1" + path, json=json, timeout=60,
                         headers={"Authorization": f"Bearer {token}"})
    return r.status_code, time.monotonic() - started


def test_revoke_logout_and_delete_get_through_a_thiefs_requests_in_flight(tight_stack):
    base = tight_stack
    owner = tsapi.new_user()
    stolen = owner.token  # the thief's copy of the owner's phone token
    laptop = tsapi.login(owner.email, owner.password).json()["token"]
    tablet = tsapi.login(owner.email, owner.password).json()["token"]
    listed = requests.get(base + "/api/v1/account/sessions", headers={"Authorization": f"Bearer {laptop}"}, timeout=10)
    assert listed.status_code == 200, short(listed)
    laptop_id = next(s["id"] for s in listed.json()["items"] if s["current"])

    with cf.ThreadPoolExecutor(4) as pool:
        thief = [pool.submit(call, base, "GET", f"/sync/snapshot?__test_hold_ms={HOLD_MS}", stolen) for _ in range(2)]
        time.sleep(1)  # both arrive before the probes below (which would take their places)
        # Both in flight: every other request of the account is 429, by token (nginx) and by
        # account (the responder).
        deadline = time.monotonic() + 10
        while True:
            by_token, _ = call(base, "GET", "/tags", stolen)
            by_account, _ = call(base, "GET", "/tags", tablet)
            if by_token == 429 and by_account == 429:
                break
            assert time.monotonic() < deadline, (by_token, by_account)
            time.sleep(0.05)
        started = time.monotonic()
        answers = {
            # the owner, on the laptop, revokes the laptop's session... and logs out the tablet
            "revoke": call(base, "DELETE", f"/account/sessions/{laptop_id}", laptop),
            "logout": call(base, "POST", "/auth/logout", tablet),
            # ...and, on the phone whose token was stolen, deletes the account
            "delete": call(base, "POST", "/account/delete", stolen, json={"password": owner.password}),
        }
        elapsed = time.monotonic() - started
        still_running = sum(not f.done() for f in thief)
        print(f"with the thief's {still_running} requests in flight: "
              + ", ".join(f"{name} {status} in {seconds * 1000:.0f} ms" for name, (status, seconds) in answers.items()))
        assert {name: status for name, (status, _) in answers.items()} == {"revoke": 204, "logout": 204, "delete": 204}
        assert still_running == 2 and elapsed < HOLD_MS / 1000 - 1, (still_running, elapsed)
        for name, (_, seconds) in answers.items():
            assert seconds < 2.0, f"{name} took {seconds:.2f} s"
        cf.wait(thief)
    for token in (stolen, laptop, tablet):
        assert call(base, "GET", "/tags", token)[0] == 401
