"""Hardening, item 1: a local user is not MariaDB root, and the daemons do not run as root.

Before: the data directory was initialised with root@localhost and no password, the sockets
were world-writable, and `setpriv --reuid=65534 ... mariadb -uroot -e 'SHOW GRANTS'` printed
GRANT ALL PRIVILEGES ... WITH GRANT OPTION. nginx workers, responders and mariadbd ran as root,
and the application's database password was `todosync`.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

import tsapi

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def stack_env() -> dict[str, str]:
    out = tsapi.stack("env")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def env(stack_cmd_module):
    return stack_env()


@pytest.fixture(scope="module")
def stack_cmd_module():
    if not tsapi.STACK:
        pytest.skip("TODOSYNC_TEST_STACK not set: stack control unavailable")
    if os.geteuid() != 0:
        pytest.skip("needs root (to act as nobody and to inspect the daemons)")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, **kw)


def mariadb_as_root_cmd(socket_path: str) -> list[str]:
    return ["mariadb", "--no-defaults", f"--socket={socket_path}", "-uroot", "--connect-timeout=5", "-e", "SHOW GRANTS"]


def test_nobody_cannot_reach_mariadb_as_root(env):
    r = run(NOBODY + mariadb_as_root_cmd(env["TODOSYNC_DB_SOCKET"]))
    assert r.returncode != 0, r.stdout
    assert "GRANT" not in r.stdout


def test_nobody_cannot_reach_the_sockets(env):
    sockets = [env["TODOSYNC_DB_SOCKET"]] + [
        os.path.join(env["TODOSYNC_SOCKET_DIR"], f"fcgi-{i}.sock") for i in range(1, int(env["TODOSYNC_RESPONDERS"]) + 1)]
    probe = ("import socket, sys\n"
             "for p in sys.argv[1:]:\n"
             "    s = socket.socket(socket.AF_UNIX)\n"
             "    try:\n"
             "        s.connect(p); print('connected', p)\n"
             "    except OSError as e:\n"
             "        print('refused', p, e.errno)\n")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3 to probe with as nobody")
    r = run(NOBODY + ["/usr/bin/python3", "-c", probe] + sockets)
    assert r.returncode == 0, r.stderr
    assert "connected" not in r.stdout, r.stdout
    assert r.stdout.count("refused") == len(sockets), r.stdout
    for d in (env["TODOSYNC_SOCKET_DIR"], os.path.dirname(env["TODOSYNC_DB_SOCKET"])):
        mode = stat.S_IMODE(os.stat(d).st_mode)
        assert mode & 0o007 == 0, f"{d} is {oct(mode)}"


def test_root_logs_in_by_unix_socket_only(db):
    grants = db("SHOW CREATE USER root@localhost").decode()
    assert "unix_socket" in grants, grants
    assert "mysql_native_password" not in grants and "PASSWORD" not in grants.upper(), grants
    accounts = db("SELECT CONCAT(user, '@', host) FROM mysql.user WHERE user = 'root'").decode().split()
    assert [a for a in accounts if a.startswith("root@")] == ["root@localhost"], accounts


def test_another_os_user_reaching_the_socket_is_not_root(env):
    # The responders' user is in the service group, so it reaches the socket, yet it is not root.
    user = env.get("TODOSYNC_APP_USER", "todosync")
    if run(["id", "-u", user]).returncode != 0:
        pytest.skip(f"no {user} user (service users not in use)")
    r = run(["setpriv", f"--reuid={user}", f"--regid={env['TODOSYNC_SERVICE_GROUP']}", "--init-groups", "--"]
            + mariadb_as_root_cmd(env["TODOSYNC_DB_SOCKET"]))
    assert r.returncode != 0 and "GRANT" not in r.stdout, r.stdout
    assert "Access denied" in r.stderr or "1698" in r.stderr, r.stderr


def test_application_password_is_generated_and_private(env):
    path = env["TODOSYNC_DB_PASSWORD_FILE"]
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    password = open(path).read().strip()
    assert len(password) >= 24 and password != "todosync"
    r = run(["mariadb", "--no-defaults", f"--socket={env['TODOSYNC_DB_SOCKET']}", "-utodosync", "-ptodosync",
             "-e", "SELECT 1"])
    assert r.returncode != 0, "the old default password still works"


def uid_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise AssertionError(pid)


def children(pid: int) -> list[int]:
    out = run(["ps", "-o", "pid=", "--ppid", str(pid)]).stdout
    return [int(x) for x in out.split()]


def test_daemons_run_as_unprivileged_users(env):
    reachable = run(NOBODY + ["test", "-x", env["TODOSYNC_STATE_DIR"]]).returncode == 0
    if not reachable:
        pytest.skip("the state dir is not reachable by other users: the stack keeps root (TODOSYNC_DROP_PRIVILEGES=auto)")
    state = env["TODOSYNC_STATE_DIR"]
    responders = tsapi.responder_pids()
    assert responders
    for pid in responders:
        assert uid_of(pid) != 0, f"responder {pid} runs as root"
    with open(os.path.join(state, "nginx", "nginx.pid")) as f:
        master = int(f.read().strip())
    workers = children(master)
    assert workers
    for pid in workers:
        assert uid_of(pid) != 0, f"nginx worker {pid} runs as root"
    mariadbd = [int(p) for p in run(["pgrep", "-f", "--", f"--datadir={state}/mariadb/data"]).stdout.split()]
    assert mariadbd
    for pid in mariadbd:
        assert uid_of(pid) != 0, f"mariadbd {pid} runs as root"
