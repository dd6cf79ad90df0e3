#!/usr/bin/env python3
"""What one push stores, relative to its size: a measurement that prints numbers (round 3, item 5).

Creates a todo whose `raw` is 2,000 `\\u0001` (6 bytes each once JSON-escaped), pushes 500 no-op
updates of it in one request, and prints the request's size and the bytes the push left in
`sync_operations` and `sync_result_records` (when that table exists). Run against a running stack:

  .state/venv/bin/python bench/storage_amplification.py --base http://127.0.0.1:18080 --db-socket <socket>
"""

from __future__ import annotations

import argparse
import json
import subprocess
import uuid

import requests


def sql(socket: str, query: str) -> str:
    return subprocess.run(["mariadb", f"--socket={socket}", "-uroot", "-N", "-B", "-e", query, "todosync"],
                          capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:18080")
    parser.add_argument("--db-socket", required=True)
    args = parser.parse_args()
    api = f"{args.base}/api/v1"
    r = requests.post(f"{api}/auth/register", json={"email": f"amp-{uuid.uuid4().hex[:10]}@example.test",
                                                    "password": "pw-" + uuid.uuid4().hex}, timeout=30)
    r.raise_for_status()
    user, headers = r.json()["user"]["id"], {"Authorization": f"Bearer {r.json()['token']}"}
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


if __name__ == "__main__":
    main()
