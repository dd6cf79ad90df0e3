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


def service_users_in_use(env) -> bool:
    """False when the stack kept root (TODOSYNC_DROP_PRIVILEGES=auto) because other users cannot
    enter its state dir, e.g. a clone under a 0700 home or `mktemp -d`."""
    return run(NOBODY + ["test", "-x", env["TODOSYNC_STATE_DIR"]]).returncode == 0


def test_another_os_user_reaching_the_socket_is_not_root(env):
    # The responders' user is in the service group, so it reaches the socket, yet it is not root.
    user = env.get("TODOSYNC_APP_USER", "todosync")
    if run(["id", "-u", user]).returncode != 0:
        pytest.skip(f"no {user} user (service users not in use)")
    r = run(["setpriv", f"--reuid={user}", f"--regid={env['TODOSYNC_SERVICE_GROUP']}", "--init-groups", "--"]
            + mariadb_as_root_cmd(env["TODOSYNC_DB_SOCKET"]))
    assert r.returncode != 0 and "GRANT" not in r.stdout, r.stdout
    if service_users_in_use(env):
        assert "Access denied" in r.stderr or "1698" in r.stderr, r.stderr
    else:
        # The daemons kept root and the socket dir is root's alone: the user does not reach the
        # socket at all (EACCES, "(13)"), which is stronger than reaching it and being refused.
        assert "(13)" in r.stderr, r.stderr


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
    if not service_users_in_use(env):
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


def credentials(pid: int) -> tuple[int, int, set[int]]:
    """(uid, gid, every group) of a process, from /proc."""
    uid = gid = -1
    groups: set[int] = set()
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("Gid:"):
                gid = int(line.split()[1])
            elif line.startswith("Groups:"):
                groups = {int(g) for g in line.split()[1:]}
    return uid, gid, groups | {gid}


def nginx_workers(state: str) -> list[int]:
    with open(os.path.join(state, "nginx", "nginx.pid")) as f:
        return children(int(f.read().strip()))


def test_each_daemon_has_its_own_group_and_nginx_cannot_read_the_database(env):
    # Issue 19, item 8. Before: nginx's workers ran with the group `todosync`, which also owned
    # MariaDB's data dir (0750), so a compromised worker could read the redo log (ib_logfile0:
    # recent rows, password hashes, tokens' hashes).
    if not service_users_in_use(env):
        pytest.skip("the state dir is not reachable by other users: the stack keeps root (TODOSYNC_DROP_PRIVILEGES=auto)")
    state = env["TODOSYNC_STATE_DIR"]
    workers = nginx_workers(state)
    assert workers
    mariadbd = [int(p) for p in run(["pgrep", "-f", "--", f"--datadir={state}/mariadb/data"]).stdout.split()]
    assert mariadbd
    db_uid, db_gid, db_groups = credentials(mariadbd[0])
    app_uid, app_gid, app_groups = credentials(sorted(tsapi.responder_pids())[0])
    web_uid, web_gid, web_groups = credentials(workers[0])
    assert len({db_uid, app_uid, web_uid}) == 3
    assert not db_groups & (app_groups | web_groups), (db_groups, app_groups, web_groups)
    assert app_gid not in web_groups, "nginx's workers have the responders' own group"
    redo = os.path.join(state, "mariadb", "data", "ib_logfile0")
    assert os.path.exists(redo)
    as_worker = ["setpriv", f"--reuid={web_uid}", f"--regid={web_gid}",
                 f"--groups={','.join(str(g) for g in sorted(web_groups))}", "--"]
    r = run(as_worker + ["head", "-c", "1", redo])
    assert r.returncode != 0, "an nginx worker's credentials read MariaDB's redo log"
    assert "Permission denied" in r.stderr, r.stderr
    # The responders still reach MariaDB's socket (their group), nginx's workers do not.
    r = run(as_worker + ["test", "-x", os.path.dirname(env["TODOSYNC_DB_SOCKET"])])
    assert r.returncode != 0, "an nginx worker can enter MariaDB's socket dir"
