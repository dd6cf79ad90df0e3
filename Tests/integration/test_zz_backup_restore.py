"""Backup and restore of the dev stack, run exactly as docs/DEVELOPMENT.md writes it (issue 19, item 12).

The recipe's commands are read from the first `sh` block of that page's "Backup and restore"
section and run against the test stack (`scripts/stack.sh` there is the test stack's
$TODOSYNC_TEST_STACK), with writes between the backup and the restore:
- the backup is taken while the stack serves, through the stack's own database socket and account
  (the old recipe's `mariadb-dump` went to /run/mysqld/mysqld.sock), and is a complete gzip file;
- the restore keeps MariaDB up (the old recipe's `down` stopped it before the import), brings
  back exactly the data of the backup, renews the epoch (the old recipe's `todosync new-epoch`
  only said "unavailable") so every earlier cursor gets 410, and leaves the responders serving
  a feed equal to the tables (`check-feed`);
- `todosync-backup restore` refuses while the responders are still connected, and a maintenance
  command that cannot reach the database says where it looked instead of a bare "unavailable".

Named test_zz_* so that it runs after the other modules (its restore stops and starts the
responders and rewinds the database to its own backup, taken moments before) and before
test_zz_lifecycle stops the database.
"""

from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import requests

import tsapi
from synclib import create_todo_op, pull_all, push
from test_release_binary import stack_env
from tsapi import assert_error

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE_PAGE = REPO_ROOT / "docs" / "DEVELOPMENT.md"


def recipe() -> list[str]:
    """The command lines of the first ```sh block under "## Backup and restore"."""
    text = RECIPE_PAGE.read_text()
    section = text.split("\n## Backup and restore\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_recipe_lines(lines: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Runs the lines in one bash, `scripts/stack.sh` meaning the test stack; prints $backup last."""
    stack = shlex.quote(os.environ["TODOSYNC_TEST_STACK"])
    script = "set -euo pipefail\n" + "\n".join(line.replace("scripts/stack.sh", stack) for line in lines)
    script += '\nprintf "BACKUP=%s\\n" "${backup:-}"\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, cwd=REPO_ROOT)


@pytest.fixture
def stack():
    if not os.environ.get("TODOSYNC_TEST_STACK") or not tsapi.DB_SOCKET:
        pytest.skip("needs the test stack (TODOSYNC_TEST_STACK, its database socket)")


def titles(api) -> list[str]:
    run = pull_all(api)
    return sorted(t["title"] for page in run.pages for t in page["changes"]["todos"]["upserted"])


def test_the_documented_backup_and_restore_works_as_written(client, stack, stack_cmd):
    lines = recipe()
    restore_at = next(i for i, line in enumerate(lines) if " restore" in line)
    assert restore_at > 0, f"the recipe backs up before it restores: {lines}"

    push(client, [create_todo_op(f"kept {i}", deadline="2031-09-01") for i in range(3)])
    old_cursor = pull_all(client).pages[-1]["cursor"]

    backup = run_recipe_lines(lines[:restore_at], {})
    assert backup.returncode == 0, backup.stdout + backup.stderr
    path = Path(re.search(r"^BACKUP=(.+)$", backup.stdout, re.M).group(1))
    with gzip.open(path, "rt") as dump:
        assert dump.read().rstrip().splitlines()[-1].startswith("-- Dump completed"), path

    push(client, [create_todo_op(f"lost {i}", deadline="2031-09-02") for i in range(4)])
    newer_cursor = pull_all(client, cursor=old_cursor).pages[-1]["cursor"]
    assert "lost 0" in titles(client)

    restore = run_recipe_lines(lines[restore_at:], {"backup": str(path)})
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert re.search(r"new sync epoch [0-9a-f]+", restore.stderr), restore.stderr

    # The responders serve again, the same token works (it was in the backup), and the data is
    # exactly the backup's: the todos written after it are gone.
    assert requests.get(tsapi.BASE_URL + "/healthz", timeout=10).status_code == 200
    assert [t for t in titles(client) if t.startswith(("kept", "lost"))] == [f"kept {i}" for i in range(3)]
    # A new epoch: cursors from before the restore, older or newer than the backup, start again.
    for cursor in (old_cursor, newer_cursor):
        assert_error(client.get("/sync/pull", params={"cursor": cursor}), 410, "cursor_expired")
    assert "0 differences" in stack_cmd("check-feed")


def backup_env() -> dict[str, str]:
    conf = stack_env()
    state = Path(os.environ["TODOSYNC_TEST_STATE_DIR"])
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TODOSYNC_CONFIG": "/dev/null",
            "TODOSYNC_BIN": conf["TODOSYNC_BIN"], "TODOSYNC_DB_SOCKET": conf["TODOSYNC_DB_SOCKET"],
            "TODOSYNC_DB_PASSWORD_FILE": str(state / "secrets" / "db-password"), "TODOSYNC_LOG_LEVEL": "warning"}


def test_restore_refuses_while_the_responders_are_connected(stack, tmp_path):
    env = backup_env()
    made = subprocess.run([str(REPO_ROOT / "scripts/backup.sh"), "--dir", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    path = made.stdout.strip()
    assert Path(path).parent == tmp_path and oct(tmp_path.stat().st_mode & 0o777) == "0o700"
    refused = subprocess.run([str(REPO_ROOT / "scripts/backup.sh"), "restore", path], env=env,
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "stop the responders first" in refused.stderr, refused.stderr
    assert requests.get(tsapi.BASE_URL + "/healthz", timeout=10).status_code == 200


def test_a_maintenance_command_that_cannot_reach_the_database_says_where_it_looked(stack):
    socket = f"/tmp/todosync-test-{os.getpid()}-none.sock"  # short: MariaDB's message cuts long paths
    env = {**backup_env(), "TODOSYNC_DB_SOCKET": socket}
    for command in (["new-epoch"], ["purge"], ["check-feed"]):
        out = subprocess.run([env["TODOSYNC_BIN"], *command], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert socket in out.stderr, f"{command}: {out.stderr}"


def deleted_account_is_gone(db, api: tsapi.Api, tokens: list[str]) -> None:
    """Issue 34, item 5: none of the account's tokens works, its password logs in to nothing, and
    no row of it is in the database."""
    user_id = int(api.user["id"])
    for token in tokens:
        assert_error(tsapi.Api(token).get("/tags"), 401, "unauthorized")
    assert_error(tsapi.login(api.email, api.password), 401, "unauthorized")
    assert db(f"SELECT COUNT(*) FROM users WHERE id = {user_id}").decode().split() == ["0"]
    assert db(f"SELECT COUNT(*) FROM todos WHERE user_id = {user_id}").decode().split() == ["0"]


def test_a_restore_does_not_bring_deleted_accounts_back(stack, stack_cmd, db, tmp_path):
    """backup -> POST /account/delete (204) -> purge -> restore brought the account back, its
    tokens and its old password working (issue 34, item 5). Now the restore re-applies the
    journal of account deletions (Sql/029), which it saves outside the database it replaces
    (<state>/backups/account-deletions.tsv), so: an account deleted and erased after the backup,
    one deleted after it and not yet erased, both stay gone; a bystander's account is the backup's.
    And when the database is lost too (dropped) and the journal file is not where the restore
    looks, it refuses loudly instead of resurrecting them; with the file it succeeds."""
    erased, marked, bystander = tsapi.new_user(), tsapi.new_user(), tsapi.new_user()
    tokens = {}
    for api in (erased, marked, bystander):
        api.create_todo(title="mine", deadline="2031-09-03")
        second = tsapi.login(api.email, api.password)
        assert second.status_code == 200
        tokens[api.email] = [api.token, second.json()["token"]]

    path = stack_cmd("backup").strip().splitlines()[-1]
    assert path.endswith(".sql.gz"), path

    assert erased.post("/account/delete", {"password": erased.password}).status_code == 204
    out = stack_cmd("purge")
    assert re.search(r"accountsErased=[1-9]", out), out
    assert marked.post("/account/delete", {"password": marked.password}).status_code == 204  # not purged

    stack_cmd("restore", path, timeout=300)
    assert requests.get(tsapi.BASE_URL + "/healthz", timeout=10).status_code == 200
    for api in (erased, marked):
        deleted_account_is_gone(db, api, tokens[api.email])
    assert [t["title"] for t in bystander.list_todos(date="2031-09-03")] == ["mine"]
    for token in tokens[bystander.email]:
        assert tsapi.Api(token).get("/tags").status_code == 200
    journal = Path(os.environ["TODOSYNC_TEST_STATE_DIR"]) / "backups" / "account-deletions.tsv"
    ids = {line.split("\t")[0] for line in journal.read_text().splitlines()}
    assert {str(erased.user["id"]), str(marked.user["id"])} <= ids
    # Their emails are free again.
    assert tsapi.register(erased.email, tsapi.new_password()).status_code == 201

    # The database lost (dropped), the journal file not in the directory named: refused, loudly.
    db("DROP DATABASE todosync")
    empty = tmp_path / "elsewhere"
    refused = subprocess.run(shlex.split(os.environ["TODOSYNC_TEST_STACK"]) + ["restore", path, "--dir", str(empty)],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0, refused.stderr
    assert "no journal of account deletions" in refused.stderr, refused.stderr
    # With the file (the stack's backups directory): restored, and both accounts still gone.
    stack_cmd("restore", path, timeout=300)
    assert requests.get(tsapi.BASE_URL + "/healthz", timeout=10).status_code == 200
    for api in (erased, marked):
        deleted_account_is_gone(db, api, tokens[api.email])
    assert [t["title"] for t in bystander.list_todos(date="2031-09-03")] == ["mine"]
    assert "0 differences" in stack_cmd("check-feed")
