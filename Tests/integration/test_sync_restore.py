"""Pull cursors after a restore from backup (API.md, "Sync: pull"): never a silent skip.

A restore rewinds every user's change sequence. A cursor a device got after the backup was taken
then names a position this database either has not reached (caught by "beyond the user's latest
change") or will reach again with *other* changes once writes resume (caught only by the epoch
that `todosync new-epoch` renews as part of the restore). Both get 410 `cursor_expired`.

Real backup and restore of the test stack's whole database: `mariadb-dump --single-transaction`,
then the dump replayed with the `mariadb` client, as docs/DEVELOPMENT.md's procedure says.
"""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

import tsapi
from synclib import create_todo_op, pull, pull_all, push
from tsapi import assert_error, short


def mariadb(args: list[str], stdin=None, stdout=None) -> subprocess.CompletedProcess:
    return subprocess.run(args, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=300, check=True)


@pytest.fixture
def backup(tmp_path, stack_cmd):
    if not tsapi.DB_SOCKET or shutil.which("mariadb-dump") is None:
        pytest.skip("needs the stack's database socket and mariadb-dump")
    path = tmp_path / "todosync.sql"

    def take():
        with open(path, "wb") as out:
            mariadb(["mariadb-dump", f"--socket={tsapi.DB_SOCKET}", "-uroot", "--single-transaction",
                     "--routines", "todosync"], stdout=out)

    def restore():
        with open(path, "rb") as dump:
            mariadb(["mariadb", f"--socket={tsapi.DB_SOCKET}", "-uroot", "todosync"], stdin=dump)

    return take, restore


def pull_status(api, cursor):
    return api.get("/sync/pull", params={"cursor": cursor})


def test_cursor_newer_than_a_restored_backup_is_410_never_a_silent_skip(client, backup, stack_cmd):
    take, restore = backup
    push(client, [create_todo_op(f"before backup {i}", deadline="2031-08-01") for i in range(3)])
    before = pull_all(client).pages[-1]["cursor"]
    take()

    push(client, [create_todo_op(f"after backup {i}", deadline="2031-08-02") for i in range(4)])
    newer = pull_all(client, cursor=before).pages[-1]["cursor"]
    assert pull_status(client, newer).status_code == 200

    restore()
    # The token survives (it was in the backup); the device's newer cursor is beyond the restored
    # change sequence: 410 even before the epoch is renewed.
    assert_error(pull_status(client, newer), 410, "cursor_expired")
    # The older cursor is still a valid position of this (not yet renewed) history.
    assert pull_status(client, before).status_code == 200

    # Part of the restore procedure: a new epoch. Writes resume and pass the newer cursor's
    # position with different changes; that cursor, and every other old one, is still 410.
    epoch = stack_cmd("new-epoch").strip().splitlines()[-1]
    assert len(epoch) >= 1 and int(epoch, 16) > 0, epoch
    push(client, [create_todo_op(f"after restore {i}", deadline="2031-08-03") for i in range(6)])
    for cursor in (newer, before):
        assert_error(pull_status(client, cursor), 410, "cursor_expired")

    # Starting again without a cursor yields exactly what the database now holds.
    run = pull_all(client)
    titles = sorted(t["title"] for body in run.pages for t in body["changes"]["todos"]["upserted"])
    assert titles == sorted([f"before backup {i}" for i in range(3)] + [f"after restore {i}" for i in range(6)])
    # ...and its cursor works.
    assert pull_status(client, run.pages[-1]["cursor"]).status_code == 200


def test_new_epoch_expires_every_cursor_and_first_format_cursors_are_410(client, stack_cmd):
    push(client, [create_todo_op("x", deadline="2031-08-04")])
    cursor = pull_all(client).pages[-1]["cursor"]
    assert pull_status(client, cursor).status_code == 200
    stack_cmd("new-epoch")
    assert_error(pull_status(client, cursor), 410, "cursor_expired")

    # A cursor of the format issued before epochs existed ("1:user:position:skip:checksum"),
    # made with the real checksum rule, for this user: 410, not 400 (it is well-formed).
    user_id = int(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":")[1])
    payload = f"1:{user_id}:0:0"
    h = 0xcbf29ce484222325
    for byte in f"todosync-cursor|{payload}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    legacy = base64.urlsafe_b64encode(f"{payload}:{h:x}".encode()).decode().rstrip("=")
    assert_error(pull_status(client, legacy), 410, "cursor_expired")
    # An edited one is still a 400.
    assert_error(pull_status(client, legacy[:-2] + ("AA" if legacy[-2:] != "AA" else "BB")), 400)
