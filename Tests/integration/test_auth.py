"""Auth: register, login, logout, tokens, e-mail/password rules, per-account throttling.

Assumptions where API.md is silent (a careful REST API's behaviour):
- The returned `user.email` equals the submitted address up to simple lowercasing (the contract
  does not say whether it is stored as typed or lowercased).
- Every login issues its own token; logging out one token leaves the user's other tokens
  (other devices) working.  Passwords are compared exactly (case-sensitive).
- Logout presenting no token or an already revoked token answers 204 or 401 (either is
  defensible: "every other route needs Authorization" may or may not cover logout); never 5xx.
- "chars" (password 8–128, e-mail <= 254) count Unicode characters, not bytes or UTF-16 units;
  the strings used here have one code point per grapheme, so either reading agrees.
- Validation errors on register name the field `email` / `password` in details.
- Per-account throttling counts failures case-insensitively on the e-mail (the account is one
  account whatever case is typed) and does not lock other accounts from the same address.
- A 401 carries `WWW-Authenticate: Bearer ...` (RFC 9110 requires the header on a 401).
- Tokens are printable ASCII and at least 22 characters (>= 128 random bits in base64/hex).
- The stored-secrets check searches every column of every table (as hex) for the password
  and tokens in clear, including the token's decoded raw bytes when it is hex/base64.
"""

from __future__ import annotations

import base64
import re

import pytest

import tsapi
from tsapi import Api, assert_auth_body, assert_error, login, register, unique_email, new_password


# --------------------------------------------------------------------------- register

def test_register_returns_201_user_and_token():
    email, pw = unique_email(), new_password()
    r = register(email, pw)
    body = assert_auth_body(r, 201)
    assert body["user"]["email"].lower() == email.lower()


def test_register_tokens_are_distinct_per_user():
    a = assert_auth_body(register(unique_email(), new_password()), 201)
    b = assert_auth_body(register(unique_email(), new_password()), 201)
    assert a["token"] != b["token"]
    assert a["user"]["id"] != b["user"]["id"]


def test_register_token_works_immediately():
    api = tsapi.new_user()
    r = api.get("/tags")
    assert r.status_code == 200, tsapi.short(r)
    assert tsapi.assert_json(r) == {"items": []}


# --------------------------------------------------------------------------- login

def test_login_returns_200_same_user_and_working_token():
    email, pw = unique_email(), new_password()
    reg = assert_auth_body(register(email, pw), 201)
    body = assert_auth_body(login(email, pw), 200)
    assert body["user"]["id"] == reg["user"]["id"]
    assert body["user"]["email"].lower() == email.lower()
    r = Api(body["token"]).get("/tags")
    assert r.status_code == 200, tsapi.short(r)


def test_login_wrong_password_and_unknown_email_same_401():
    email, pw = unique_email(), new_password()
    assert_auth_body(register(email, pw), 201)
    wrong = login(email, pw + "x")
    unknown = login(unique_email(), pw)
    e1 = assert_error(wrong, 401, "unauthorized")
    e2 = assert_error(unknown, 401, "unauthorized")
    assert e1["message"] == e2["message"], (e1, e2)
    assert e1 == e2, "wrong password and unknown e-mail must be indistinguishable"


def test_login_password_is_case_sensitive():
    email = unique_email()
    pw = "Secret-" + new_password()
    assert_auth_body(register(email, pw), 201)
    assert_error(login(email, pw.upper()), 401, "unauthorized")
    assert_error(login(email, pw.lower()), 401, "unauthorized")


# --------------------------------------------------------------------------- logout

def test_logout_204_and_token_revoked_at_once():
    api = tsapi.new_user()
    todo = api.create_todo()
    r = api.post("/auth/logout")
    assert r.status_code == 204, tsapi.short(r)
    assert r.content == b""
    for method, path in (("GET", "/tags"), ("GET", f"/todos/{todo['id']}"),
                         ("GET", "/todos?date=2030-06-15"), ("DELETE", f"/todos/{todo['id']}")):
        assert_error(api.request(method, path), 401, "unauthorized")


def test_logout_only_revokes_the_presented_token():
    email, pw = unique_email(), new_password()
    t0 = assert_auth_body(register(email, pw), 201)["token"]
    t1 = assert_auth_body(login(email, pw), 200)["token"]
    t2 = assert_auth_body(login(email, pw), 200)["token"]
    assert len({t0, t1, t2}) == 3, "each login must issue its own token"
    r = Api(t1).post("/auth/logout")
    assert r.status_code == 204, tsapi.short(r)
    assert_error(Api(t1).get("/tags"), 401, "unauthorized")
    assert Api(t0).get("/tags").status_code == 200
    assert Api(t2).get("/tags").status_code == 200


def test_logout_with_revoked_or_missing_token_is_not_an_error_5xx():
    api = tsapi.new_user()
    assert api.post("/auth/logout").status_code == 204
    again = api.post("/auth/logout")
    assert again.status_code in (204, 401), tsapi.short(again)
    if again.status_code == 401:
        assert_error(again, 401, "unauthorized")
    anon = Api(None).post("/auth/logout")
    assert anon.status_code in (204, 401), tsapi.short(anon)
    if anon.status_code == 401:
        assert_error(anon, 401, "unauthorized")


def test_login_after_logout_works_again():
    email, pw = unique_email(), new_password()
    api = tsapi.new_user(email, pw)
    tag = api.create_tag()
    assert api.post("/auth/logout").status_code == 204
    body = assert_auth_body(login(email, pw), 200)
    again = Api(body["token"])
    assert [t["id"] for t in again.list_tags()] == [tag["id"]]


# --------------------------------------------------------------------------- e-mail rules

def test_email_case_insensitive_for_login():
    u = tsapi.unique("")
    email = f"Mixed.Case-{u}@Example.TEST"
    pw = new_password()
    reg = assert_auth_body(register(email, pw), 201)
    for variant in (email.lower(), email.upper(), f"mIXED.cASE-{u}@eXAMPLE.test"):
        body = assert_auth_body(login(variant, pw), 200)
        assert body["user"]["id"] == reg["user"]["id"], variant


@pytest.mark.parametrize("transform", [lambda e: e, str.upper, str.lower, str.swapcase],
                         ids=["same", "upper", "lower", "swapcase"])
def test_register_existing_email_409(transform):
    email = "Dup-" + unique_email()
    pw = new_password()
    assert_auth_body(register(email, pw), 201)
    assert_error(register(transform(email), new_password()), 409, "email_taken")
    # The original password still works (the account was not overwritten).
    assert_auth_body(login(email, pw), 200)


def test_email_sharp_s_is_not_ss():
    u = tsapi.unique("")
    e_sharp, e_ss = f"straße-{u}@example.test", f"strasse-{u}@example.test"
    p1, p2 = new_password(), new_password()
    a = assert_auth_body(register(e_sharp, p1), 201)
    b = assert_auth_body(register(e_ss, p2), 201)  # not a duplicate: no collation folding
    assert a["user"]["id"] != b["user"]["id"]
    assert assert_auth_body(login(e_sharp, p1), 200)["user"]["id"] == a["user"]["id"]
    assert assert_auth_body(login(e_ss, p2), 200)["user"]["id"] == b["user"]["id"]
    # simple lowercasing: STRAßE -> straße, STRAẞE (capital sharp s) -> straße, STRASSE -> strasse
    # (note: Python's str.upper() would turn ß into SS, so the variants are spelled out)
    for variant in (f"STRAßE-{u}@EXAMPLE.TEST", f"STRA\u1e9eE-{u}@EXAMPLE.TEST"):
        assert assert_auth_body(login(variant, p1), 200)["user"]["id"] == a["user"]["id"], variant
    assert assert_auth_body(login(f"STRASSE-{u}@EXAMPLE.TEST", p2), 200)["user"]["id"] == b["user"]["id"]
    assert_error(login(e_ss, p1), 401, "unauthorized")
    assert_error(login(e_sharp, p2), 401, "unauthorized")


def test_email_accents_are_not_folded_but_case_is():
    u = tsapi.unique("")
    e_acc, e_plain = f"rené-{u}@example.test", f"rene-{u}@example.test"
    p1, p2 = new_password(), new_password()
    a = assert_auth_body(register(e_acc, p1), 201)
    b = assert_auth_body(register(e_plain, p2), 201)
    assert a["user"]["id"] != b["user"]["id"]
    assert assert_auth_body(login(f"RENÉ-{u}@EXAMPLE.TEST", p1), 200)["user"]["id"] == a["user"]["id"]
    assert_error(register(f"RENÉ-{u}@example.test", new_password()), 409, "email_taken")


def test_email_dotted_capital_i_is_simply_lowercased_to_i():
    """Issue 34: U+0130's simple lowercase mapping is U+0069, so `İx@` and `ix@` are one account
    (it was kept as `İ`, and both registered). Either spelling, or I + U+0307, logs in to it."""
    u = tsapi.unique("")
    pw = new_password()
    first = assert_auth_body(register(f"\u0130x-{u}@example.com", pw), 201)
    assert_error(register(f"ix-{u}@example.com", new_password()), 409, "email_taken")
    assert_error(register(f"I\u0307x-{u}@example.com", new_password()), 409, "email_taken")
    for spelling in (f"ix-{u}@example.com", f"\u0130X-{u}@EXAMPLE.COM", f"I\u0307x-{u}@example.com"):
        assert assert_auth_body(login(spelling, pw), 200)["user"]["id"] == first["user"]["id"], spelling
    # And the other way round: `ix@` first, then `İx@` is taken.
    v = tsapi.unique("")
    assert_auth_body(register(f"ix-{v}@example.com", new_password()), 201)
    assert_error(register(f"\u0130x-{v}@example.com", new_password()), 409, "email_taken")


def test_sql_029_rekeys_old_dotted_capital_i_keys_but_never_merges_two_accounts(db):
    """Accounts registered before the fix kept `İ` in their key. Sql/029's UPDATE (run again here on
    keys put back in the old form) re-keys them, so they log in by either spelling; a key whose new
    form another account has is left alone (two accounts, which no migration may merge)."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "Sql" / "029_account_deletions.sql").read_text()
    update = next(part for part in text.split(";") if "UPDATE users u" in part)
    update = "\n".join(line for line in update.splitlines() if not line.lstrip().startswith("--"))
    u = tsapi.unique("")
    pw_a, pw_c = new_password(), new_password()
    a = assert_auth_body(register(f"ia-{u}@example.com", pw_a), 201)
    c_old = assert_auth_body(register(f"ic-old-{u}@example.com", new_password()), 201)
    c_new = assert_auth_body(register(f"ic-{u}@example.com", pw_c), 201)
    old_a, old_c = f"\u0130a-{u}@example.com", f"\u0130c-{u}@example.com"
    db(f"UPDATE users SET email = '{old_a}', email_key = '{old_a}' WHERE id = {a['user']['id']}")
    db(f"UPDATE users SET email = '{old_c}', email_key = '{old_c}' WHERE id = {c_old['user']['id']}")
    db(update)
    keys = dict(line.split("\t") for line in db(
        f"SELECT id, email_key FROM users WHERE id IN ({a['user']['id']}, {c_old['user']['id']})").decode().splitlines())
    assert keys == {str(a["user"]["id"]): f"ia-{u}@example.com", str(c_old["user"]["id"]): old_c}, keys
    for spelling in (old_a, f"ia-{u}@example.com"):
        assert assert_auth_body(login(spelling, pw_a), 200)["user"]["id"] == a["user"]["id"], spelling
    assert assert_auth_body(login(f"ic-{u}@example.com", pw_c), 200)["user"]["id"] == c_new["user"]["id"]


def test_email_of_254_chars_accepted():
    domain = "@example.test"
    local = tsapi.unique("l") + "a" * (254 - len(domain) - 17)
    email = local + domain
    assert len(email) == 254
    assert_auth_body(register(email, new_password()), 201)


def test_email_of_254_non_ascii_chars_accepted():
    domain = "@예시.테스트"
    prefix = tsapi.unique("k")
    email = prefix + "가" * (254 - len(domain) - len(prefix)) + domain
    assert len(email) == 254 and len(email.encode()) > 254
    pw = new_password()
    reg = assert_auth_body(register(email, pw), 201)
    assert assert_auth_body(login(email, pw), 200)["user"]["id"] == reg["user"]["id"]


def _long_email(n: int) -> str:
    domain = "@example.test"
    local = tsapi.unique("l")
    return local + "b" * (n - len(domain) - len(local)) + domain


@pytest.mark.parametrize("email", [
    "no-at-sign.example.test",
    "two@@example.test",
    "a@b@example.test",
    "",
    pytest.param("LONG255", id="255-chars"),
    123,
    None,
    ["a@b.test"],
], ids=lambda v: repr(v)[:20])
def test_register_invalid_email_422(email):
    if email == "LONG255":
        email = _long_email(255)
        assert len(email) == 255
    r = register(email, new_password())
    assert_error(r, 422, "validation_failed", fields=["email"])


def test_register_missing_email_or_password_422():
    assert_error(tsapi.auth_post("register", {"password": new_password()}), 422, "validation_failed",
                 fields=["email"])
    assert_error(tsapi.auth_post("register", {"email": unique_email()}), 422, "validation_failed",
                 fields=["password"])
    assert_error(tsapi.auth_post("register", {}), 422, "validation_failed", fields=["email", "password"])


# --------------------------------------------------------------------------- password rules

@pytest.mark.parametrize("password", ["", "1234567", "x" * 129, "😀" * 7, "😀" * 129, 12345678, None, True],
                         ids=["empty", "7", "129", "7-emoji", "129-emoji", "number", "null", "bool"])
def test_register_invalid_password_422(password):
    r = register(unique_email(), password)
    assert_error(r, 422, "validation_failed", fields=["password"])


@pytest.mark.parametrize("password", ["12345678", "y" * 128, "😀" * 8, "비밀번호비밀번호" * 16, "  spaces  "],
                         ids=["8", "128", "8-emoji", "128-korean", "spaces"])
def test_register_password_boundaries_accepted_and_login_works(password):
    email = unique_email()
    reg = assert_auth_body(register(email, password), 201)
    assert assert_auth_body(login(email, password), 200)["user"]["id"] == reg["user"]["id"]


# --------------------------------------------------------------------------- throttling

def test_failed_logins_throttle_the_account_even_for_the_right_password():
    email = f"Throttle-{tsapi.unique('')}@Example.TEST"
    pw = new_password()
    victim = assert_auth_body(register(email, pw), 201)
    bystander_email, bystander_pw = unique_email(), new_password()
    assert_auth_body(register(bystander_email, bystander_pw), 201)

    statuses = []
    variants = [email, email.lower(), email.upper()]
    for i in range(12):  # default threshold is 10 failures
        r = login(variants[i % 3], "wrong-" + pw, retry_429=False)
        assert r.status_code in (401, 429), tsapi.short(r)
        assert_error(r, r.status_code, "unauthorized" if r.status_code == 401 else "rate_limited")
        statuses.append(r.status_code)
    assert statuses[0] == 401, statuses
    r = login(email, pw, retry_429=False)
    assert_error(r, 429, "rate_limited")
    # Per account, not per address: another account from this address is unaffected.
    assert_auth_body(login(bystander_email, bystander_pw, retry_429=False), 200)
    assert_error(login(bystander_email, "nope-" + bystander_pw, retry_429=False), 401, "unauthorized")
    # The throttled account's existing session keeps working (throttling is about logins).
    assert Api(victim["token"]).get("/tags").status_code == 200


# --------------------------------------------------------------------------- protected routes

PROTECTED = [
    ("GET", "/api/v1/tags", None),
    ("POST", "/api/v1/tags", {"name": "Work", "color": "#FF8800"}),
    ("GET", "/api/v1/tags/1", None),
    ("PATCH", "/api/v1/tags/1", {"name": "Home"}),
    ("DELETE", "/api/v1/tags/1", None),
    ("GET", "/api/v1/todos?date=2030-01-01", None),
    ("GET", "/api/v1/todos?from=2030-01-01&to=2030-01-31", None),
    ("POST", "/api/v1/todos", {"title": "x", "deadline": "2030-01-01"}),
    ("GET", "/api/v1/todos/1", None),
    ("PATCH", "/api/v1/todos/1", {"title": "y"}),
    ("DELETE", "/api/v1/todos/1", None),
]

AUTH_VARIANTS = ["none", "garbage", "empty-bearer", "basic", "basic-with-token", "token-no-scheme",
                 "token-plus-x", "token-truncated", "two-tokens"]


@pytest.mark.parametrize("variant", AUTH_VARIANTS)
@pytest.mark.parametrize("method,path,body", PROTECTED, ids=[f"{m} {p}" for m, p, _ in PROTECTED])
def test_protected_route_rejects_bad_auth_401(shared_client, method, path, body, variant):
    tok = shared_client.token
    header = {
        "none": None,
        "garbage": "Bearer this-is-not-a-token-0123456789abcdef",
        "empty-bearer": "Bearer ",
        "basic": "Basic " + base64.b64encode(b"user@example.test:password123").decode(),
        "basic-with-token": "Basic " + tok,
        "token-no-scheme": tok,
        "token-plus-x": f"Bearer {tok}x",
        "token-truncated": f"Bearer {tok[:-1]}",
        "two-tokens": f"Bearer {tok} {tok}",
    }[variant]
    api = Api(None)
    headers = {"Authorization": header} if header is not None else {}
    r = api.request(method, path, body if body is not None else tsapi._MISSING, headers=headers)
    assert_error(r, 401, "unauthorized")


def test_401_carries_www_authenticate_bearer():
    r = Api(None).get("/tags")
    assert_error(r, 401, "unauthorized")
    assert "bearer" in r.headers.get("WWW-Authenticate", "").lower(), tsapi.short(r)


def test_unauthenticated_write_is_401_before_validation():
    # An invalid body must not be validated (or reveal anything) before authentication.
    r = Api(None).post("/todos", {"title": "", "deadline": "nope"})
    assert_error(r, 401, "unauthorized")
    r = Api(None).post("/tags", data=b"{not json", headers={"Content-Type": "application/json"})
    assert_error(r, 401, "unauthorized")


# --------------------------------------------------------------------------- storage of secrets

def test_no_password_or_token_stored_in_clear(db):
    email = unique_email()
    pw = "Cleartext-Canary-" + new_password()
    reg = assert_auth_body(register(email, pw), 201)
    logged = assert_auth_body(login(email, pw), 200)

    cols = db("SELECT table_name, column_name FROM information_schema.columns "
              "WHERE table_schema = 'todosync' ORDER BY table_name, ordinal_position").decode()
    tables: dict[str, list[str]] = {}
    for line in cols.splitlines():
        t, c = line.split("\t")
        tables.setdefault(t, []).append(c)
    assert tables, "no tables found in database todosync"

    needles = [pw.encode()] + tsapi.secret_forms(reg["token"]) + tsapi.secret_forms(logged["token"])
    needles_hex = [n.hex().upper() for n in needles]
    phc_strings: list[str] = []
    for table, columns in tables.items():
        exprs = ", ".join(f"HEX(`{c}`)" for c in columns)
        dump = db(f"SELECT CONCAT_WS('|', {exprs}) FROM `{table}`").decode().upper()
        for hx in needles_hex:
            assert hx not in dump, f"a password or token is stored in clear in table {table!r}"
        for cell in re.split(r"[|\n]", dump):
            if cell.startswith("246172676F6E32"):  # hex of "$argon2"
                phc_strings.append(bytes.fromhex(cell).decode("ascii", "replace"))
    # If the hash is a PHC argon2 string, its cost must meet OWASP's minimum (m*t >= 19 MiB*2).
    for phc in phc_strings:
        m = re.search(r"m=(\d+),t=(\d+)", phc)
        if m:
            mem, t = int(m.group(1)), int(m.group(2))
            assert mem >= 7168 and mem * t >= 35840, f"Argon2 parameters below OWASP minimum: {phc[:60]}"


def test_list_reads_check_the_token_before_their_input():
    # GET /todos and GET /daily-stats check the token inside their own query; a bad token must
    # still win over bad input (401, not 400), and a good token with bad input is a 400.
    api = tsapi.new_user()
    api.create_todo(deadline="2030-06-15")
    revoked = Api(api.token)
    assert revoked.post("/auth/logout").status_code == 204
    bad_inputs = [("/todos", {"date": "2030-13-01"}), ("/todos", {"from": "2030-06-02", "to": "2030-06-01"}),
                  ("/todos", {}), ("/daily-stats", {"month": "2030-6"}), ("/daily-stats", {})]
    good_inputs = [("/todos", {"date": "2030-06-15"}), ("/todos", {"date": "2030-06-16"}),
                   ("/daily-stats", {"month": "2030-06"}), ("/daily-stats", {"month": "2030-07"})]
    fresh = tsapi.new_user()
    for path, params in bad_inputs + good_inputs:
        for who in (revoked, Api(None), Api("not-a-token")):
            assert_error(who.get(path, params=params), 401, "unauthorized")
    for path, params in bad_inputs:
        assert_error(fresh.get(path, params=params), 400)
    for path, params in good_inputs:
        r = fresh.get(path, params=params)
        assert r.status_code == 200 and r.json() == {"items": []}, tsapi.short(r)
