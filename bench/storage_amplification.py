#!/usr/bin/env python3
"""What one push stores, relative to its size: a measurement that prints numbers (round 3, item 5).

Creates a todo whose `raw` is 2,000 `\\u0001` (6 bytes each once JSON-escaped), pushes 500 no-op
updates of it in one request, and prints the request's size and the bytes the push left in
`sync_operations` and `sync_result_records` (when that table exists). Run against a running stack:

  .state/venv/bin/python bench/storage_amplification.py --base http://127.0.0.1:18080 --db-socket <socket>

`--keyed` measures what Idempotency-Key answers store (issue 34, item 4) instead: a 54 KB todo
(raw 2,000 and notes 7,000 `\\u0001`), then 20 pushes of 250 no-op updates of it, each with its own
`Idempotency-Key`; prints the bytes sent, the bytes stored (op results, their records, and the
keys' rows), what the account's stored-bytes quota counted (`account_usage.stored_bytes`) and the
time taken.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import uuid

import requests


def sql(socket: str, query: str) -> str:
    return subprocess.run(["mariadb", f"--socket={socket}", "-uroot", "-N", "-B", "-e", query, "todosync"],
                          capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:18080")
    parser.add_argument("--db-socket", required=True)
    parser.add_argument("--keyed", action="store_true", help="20 keyed pushes of 250 no-op updates of a 54 KB todo")
    parser.add_argument("--pushes", type=int, default=20)
    parser.add_argument("--updates", type=int, default=250)
    args = parser.parse_args()
    api = f"{args.base}/api/v1"
    r = requests.post(f"{api}/auth/register", json={"email": f"amp-{uuid.uuid4().hex[:10]}@example.test",
                                                    "password": "pw-" + uuid.uuid4().hex}, timeout=30)
    r.raise_for_status()
    user, headers = r.json()["user"]["id"], {"Authorization": f"Bearer {r.json()['token']}"}
    if args.keyed:
        keyed(args, api, user, headers)
        return
    todo = requests.post(f"{api}/todos", json={"title": "padded", "raw": "\u0001" * 2000, "deadline": "2031-01-01"},
                         headers=headers, timeout=30).json()
    body = {"deviceId": "amplifier", "operations": [
        {"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": todo["id"], "data": {"isCompleted": False}}
        for _ in range(500)]}
    request_bytes = len(json.dumps(body).encode())
    r = requests.post(f"{api}/sync/push", json=body, headers=headers, timeout=60)
    r.raise_for_status()
    results = int(sql(args.db_socket, f"SELECT COALESCE(SUM(LENGTH(result)), 0) FROM sync_operations WHERE user_id = {user}"))
    has_records = sql(args.db_socket, "SHOW TABLES LIKE 'sync_result_records'") != ""
    records = int(sql(args.db_socket, f"SELECT COALESCE(SUM(LENGTH(record)), 0) FROM sync_result_records WHERE user_id = {user}")) if has_records else 0
    stored = results + records
    print(f"request {request_bytes:,} bytes; stored {stored:,} bytes (results {results:,}, records {records:,}); "
          f"ratio {stored / request_bytes:.1f}x; response {len(r.content):,} bytes")


def keyed(args, api: str, user: int, headers: dict) -> None:
    todo = requests.post(f"{api}/todos", json={"title": "padded", "raw": "\u0001" * 2000, "notes": "\u0001" * 7000,
                                                "deadline": "2031-01-01"}, headers=headers, timeout=30)
    todo.raise_for_status()
    record_bytes = len(todo.content)
    todo = todo.json()

    def stored() -> dict:
        def one(query: str) -> int:
            return int(sql(args.db_socket, query) or 0)
        has_replay = sql(args.db_socket, "SHOW COLUMNS FROM idempotency_keys LIKE 'replay'") != ""
        return {
            "results": one(f"SELECT COALESCE(SUM(LENGTH(result)), 0) FROM sync_operations WHERE user_id = {user}"),
            "records": one(f"SELECT COALESCE(SUM(LENGTH(record)), 0) FROM sync_result_records WHERE user_id = {user}"),
            "answers": one("SELECT COALESCE(SUM(LENGTH(idem_key) + 32 + COALESCE(LENGTH(response_headers), 0)"
                           f" + COALESCE(LENGTH(response_body), 0)), 0) FROM idempotency_keys WHERE user_id = {user}"),
            "keys": one(f"SELECT COUNT(*) FROM idempotency_keys WHERE user_id = {user}"),
            "rebuilt": one(f"SELECT COUNT(*) FROM idempotency_keys WHERE user_id = {user} AND replay = 1") if has_replay else 0,
            "counted": one(f"SELECT COALESCE(SUM(stored_bytes), 0) FROM account_usage WHERE user_id = {user}"),
        }

    before = stored()
    sent = received = 0
    statuses: dict[int, int] = {}
    start = time.monotonic()
    for _ in range(args.pushes):
        body = json.dumps({"deviceId": "amplifier", "schemaVersion": 2, "operations": [
            {"opId": str(uuid.uuid4()), "entity": "todo", "action": "update", "id": todo["id"],
             "data": {"isCompleted": False}} for _ in range(args.updates)]}).encode()
        r = requests.post(f"{api}/sync/push", data=body, timeout=120,
                          headers={**headers, "Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())})
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        sent += len(body)
        received += len(r.content)
    elapsed = time.monotonic() - start
    after = stored()
    delta = {k: after[k] - before[k] for k in after}
    total = delta["results"] + delta["records"] + delta["answers"]
    print(f"todo {record_bytes:,} bytes; {args.pushes} keyed pushes of {args.updates} no-op updates in {elapsed:.1f} s "
          f"(statuses {statuses}); sent {sent:,} bytes, answered {received:,} bytes")
    print(f"stored {total:,} bytes (results {delta['results']:,}, records {delta['records']:,}, "
          f"key rows {delta['answers']:,} in {delta['keys']} keys, {delta['rebuilt']} rebuilt by replay); "
          f"ratio {total / sent:.1f}x sent; quota counted {delta['counted']:,} bytes")


if __name__ == "__main__":
    main()
