#!/usr/bin/env python3
"""Seeds one account for the client benchmark through the public API (push, 500 ops a request).

usage: client_seed.py BASE_URL EMAIL PASSWORD TAGS TODOS
Creates TAGS tags and TODOS todos spread over 365 days from 2026-01-01 (every fifth one tagged,
every third completed), so the server derives one daily stat per day. Prints the record count."""
import json, sys, uuid, urllib.request, datetime

base, email, password, tags, todos = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def call(method, path, body=None, token=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read() or b"null")

token = call("POST", "/api/v1/auth/register", {"email": email, "password": password})["token"]
device = str(uuid.uuid4())
tag_ids = [str(uuid.uuid4()) for _ in range(tags)]
ops = [{"opId": str(uuid.uuid4()), "entity": "tag", "action": "create", "clientId": cid,
        "data": {"name": f"Tag {i}", "color": "#%06X" % (i * 2654435761 % 0xFFFFFF)}} for i, cid in enumerate(tag_ids)]
start = datetime.date(2026, 1, 1)
words = ["Write report", "Call the bank", "Gym", "Read", "Groceries", "Äpfel kaufen", "회의 준비", "📚 study", "Plan trip"]
for i in range(todos):
    data = {"title": f"{words[i % len(words)]} {i}", "deadline": str(start + datetime.timedelta(days=i % 365)),
            "isImportant": i % 7 == 0, "isLife": i % 4 == 0, "difficulty": i % 6, "estimatedTime": (i * 13) % 180,
            "isCompleted": i % 3 == 0}
    if i % 5 == 0 and tags:
        data["tagClientId"] = tag_ids[i % tags]
    ops.append({"opId": str(uuid.uuid4()), "entity": "todo", "action": "create", "clientId": str(uuid.uuid4()), "data": data})
for at in range(0, len(ops), 500):
    results = call("POST", "/api/v1/sync/push", {"deviceId": device, "operations": ops[at:at + 500]}, token)["results"]
    bad = [r for r in results if r["status"] != "applied"]
    if bad:
        sys.exit(f"seed: push failed: {bad[0]}")
stats = sum(len(call("GET", f"/api/v1/daily-stats?month=2026-{m:02d}", token=token)["items"]) for m in range(1, 13))
print(tags + todos + stats)
