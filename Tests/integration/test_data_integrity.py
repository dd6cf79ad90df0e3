"""Data integrity: Unicode round-trips byte for byte; SQL metacharacters and LIKE wildcards are
stored and matched literally; nothing an attacker types reaches SQL.

Assumptions where API.md is silent:
- The server performs no Unicode normalisation (NFC and NFD spellings stay distinct and are
  returned as sent), and no trimming of inner whitespace; leading/trailing whitespace is
  avoided in these titles.
- Sending a string as raw UTF-8 or as JSON \\u escapes (including surrogate pairs) is the same
  string.
- An apostrophe, `%` and `_` are legal in an e-mail local part (only "exactly one @" is
  required), so they must be matched literally, never as SQL LIKE patterns.
"""

from __future__ import annotations

import json
import unicodedata

import pytest

import tsapi
from tsapi import assert_error, assert_json, login, new_password, register, assert_auth_body, short

D = "2031-05-05"

UNICODE_STRINGS = {
    "emoji": "Ship it 🚀🔥😀",
    "zwj-family": "👩‍👩‍👧‍👦 family",
    "flags-skin": "🇰🇷🇯🇵 👍🏽👋🏿",
    "korean": "할 일 목록: 장보기",
    "korean-nfd": unicodedata.normalize("NFD", "한국어 할 일"),
    "arabic-rtl": "مرحبا بالعالم — مهمة",
    "hebrew-mixed": "שלום abc 123 עולם",
    "bidi-controls": "\u202eevil\u202c \u200fRTL\u200e",
    "combining": "e\u0301 a\u0300 n\u0303 Z\u0324\u0354\u0367\u0311\u0313",
    "nfc-e": "caf\u00e9",
    "nfd-e": "cafe\u0301",
    "cjk-ext-b": "𠀀𠀁𪚥",
    "math-astral": "𝄞 𝕳𝖊𝖑𝖑𝖔 𝟘𝟙",
    "zero-width": "a\u200bb\u200cc\u200dd\ufeffe",
    "specials": "tab\there \"quotes\" back\\slash /slash <b>&amp;</b>",
    "newlines": "line1\nline2\r\nline3",
    "replacement-char": "\ufffd\ufffe?",
}


@pytest.mark.parametrize("escaped", [False, True], ids=["utf8", "json-escapes"])
def test_unicode_round_trips_in_todos(client, escaped):
    made = {}
    for key, s in UNICODE_STRINGS.items():
        r = client.post("/todos", {"title": s, "raw": s + " (raw)", "deadline": D}, ascii_json=escaped)
        assert r.status_code == 201, f"{key}: {short(r)}"
        rec = assert_json(r)
        assert rec["title"] == s, key
        assert rec["raw"] == s + " (raw)", key
        made[rec["id"]] = s
    for todo_id, s in made.items():
        got = client.get_todo(todo_id)
        assert got["title"].encode("utf-8") == s.encode("utf-8")
    listed = {t["id"]: t["title"] for t in client.list_todos(date=D)}
    assert listed == made


def test_nfc_and_nfd_are_distinct_strings(client):
    a = client.create_todo(title=UNICODE_STRINGS["nfc-e"], deadline=D)
    b = client.create_todo(title=UNICODE_STRINGS["nfd-e"], deadline=D)
    assert a["title"] != b["title"]
    assert client.get_todo(a["id"])["title"] == "caf\u00e9"
    assert client.get_todo(b["id"])["title"] == "cafe\u0301"


def test_unicode_round_trips_in_tag_names_and_patch(client):
    for key, s in UNICODE_STRINGS.items():
        if len(s) + 3 > 50:
            continue
        tag = client.create_tag(name=s)
        assert tag["name"] == s, key
        patched = client.patch(f"/tags/{tag['id']}", {"name": s + " v2"})
        assert patched.status_code == 200, short(patched)
        assert client.get_tag(tag["id"])["name"] == s + " v2", key


def test_response_is_utf8_json(client):
    client.create_todo(title="한글 🚀", deadline=D)
    r = client.get("/todos", params={"date": D})
    assert r.status_code == 200
    charset = r.headers.get("Content-Type", "").lower()
    assert "charset" not in charset or "utf-8" in charset, charset
    json.loads(r.content.decode("utf-8"))  # strict UTF-8 decoding


def test_unicode_email_round_trip():
    email = f"사용자-{tsapi.unique('')}@예시.테스트"
    pw = "비밀번호-" + new_password()
    reg = assert_auth_body(register(email, pw), 201)
    assert reg["user"]["email"].lower() == email.lower()
    assert assert_auth_body(login(email, pw), 200)["user"]["id"] == reg["user"]["id"]


INJECTIONS = [
    "'; DROP TABLE todos; --",
    "\" OR 1=1 --",
    "' OR '1'='1",
    "Robert'); DROP TABLE users;--",
    "\\'; DROP TABLE tags; --",
    "C:\\Users\\test\\new\\table",
    "\\",
    "\\\\",
    "\\0 \\n \\r \\Z \\b \\t \\%",
    "100% done_ok",
    "%",
    "_",
    "%_%",
    "`backtick` $1 ? :name @var",
    "/* comment */ SELECT 1; #",
    "1; SHUTDOWN; --",
    "' UNION SELECT password_hash FROM users --",
    "'); UPDATE todos SET title='pwned' WHERE ('1'='1",
    "0x27 CHAR(39) SLEEP(5)",
]


def test_sql_metacharacters_stored_literally(client, other_client):
    bystander = other_client.create_todo(title="bystander", deadline=D)
    made = {}
    for s in INJECTIONS:
        todo = client.create_todo(title=s, raw=s, deadline=D)
        assert todo["title"] == s and todo["raw"] == s
        made[todo["id"]] = s
    listed = client.list_todos(date=D)
    assert {t["id"]: t["title"] for t in listed} == made
    for todo_id, s in made.items():
        got = client.get_todo(todo_id)
        assert got["title"] == s and got["raw"] == s
    # tables intact, other users untouched
    assert other_client.get_todo(bystander["id"]) == bystander
    assert [t["id"] for t in other_client.list_todos(date=D)] == [bystander["id"]]


def test_sql_metacharacters_in_tag_names_and_patches(client):
    for s in INJECTIONS:
        if len(s) > 50:
            continue
        tag = client.create_tag(name=s)
        assert client.get_tag(tag["id"])["name"] == s
    names = [t["name"] for t in client.list_tags()]
    assert names == [s for s in INJECTIONS if len(s) <= 50]
    todo = client.create_todo(title="patch target", deadline=D)
    for s in INJECTIONS:
        r = client.patch(f"/todos/{todo['id']}", {"title": s})
        assert r.status_code == 200, short(r)
        assert client.get_todo(todo["id"])["title"] == s


def test_sql_injection_in_login_is_just_a_wrong_login():
    for email, pw in [("' OR '1'='1' --@x.test", "' OR '1'='1"), ("admin'--@x.test", "x' OR 1=1 #aa"),
                      ("\" OR \"\"=\"@x.test", "\" OR \"\"=\"aaaa")]:
        assert_error(login(email, pw), 401, "unauthorized")


def test_apostrophe_email_is_legal_and_literal():
    email = f"o'brien-{tsapi.unique('')}@example.test"
    pw = new_password()
    reg = assert_auth_body(register(email, pw), 201)
    assert assert_auth_body(login(email, pw), 200)["user"]["id"] == reg["user"]["id"]
    assert_error(login(email.replace("'", "''"), pw), 401, "unauthorized")


@pytest.mark.parametrize("pattern,probe", [("a_b", "aXb"), ("p%q", "pANYTHINGq"), ("x%", "xyz")],
                         ids=["underscore", "percent", "trailing-percent"])
def test_like_wildcards_in_email_are_literal(pattern, probe):
    u = tsapi.unique("")
    email = f"{pattern}-{u}@example.test"
    other = f"{probe}-{u}@example.test"
    pw = new_password()
    reg = assert_auth_body(register(email, pw), 201)
    # A different address that a LIKE pattern would match is neither the same login ...
    assert_error(login(other, pw), 401, "unauthorized")
    # ... nor a duplicate on register.
    second = assert_auth_body(register(other, pw), 201)
    assert second["user"]["id"] != reg["user"]["id"]
    assert assert_auth_body(login(email, pw), 200)["user"]["id"] == reg["user"]["id"]


def test_sql_in_query_and_path_are_plain_400_404(client):
    assert_error(client.get("/todos?date=2026-01-01%27%20OR%20%271%27%3D%271"), 400, "bad_request")
    assert_error(client.get("/todos?from=2026-01-01&to=2026-01-02%27--"), 400, "bad_request")
    assert_error(client.get("/todos/1%20OR%201%3D1"), 404, "not_found")
    assert_error(client.get("/todos/1;DROP%20TABLE%20todos"), 404, "not_found")
    assert client.get("/todos", params={"date": D}).status_code == 200
