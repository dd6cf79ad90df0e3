"""`todosync config`: the binary owns its defaults and reads the config file itself.

- the effective value of each variable comes from the environment over the config file
  (TODOSYNC_CONFIG) over the binary's default, and each line names its source;
- secrets are never printed: the password shows as <redacted>, and `--assignments` (what
  `scripts/stack.sh env` prints) leaves it out;
- the file is really used by the commands, not only printed: `todosync migrate --status` reaches
  the test stack's database with only a config file naming the socket and the password file,
  and fails when the file names a database account that does not exist;
- a config file that cannot be read or parsed stops the binary with exit 78 and names the line;
- every TODOSYNC_* variable the server's sources read is one `todosync config` knows (one place
  for defaults), and the stack's effective worker count is the binary's, not a script's copy.
- issue 34, item 8: `config --check` opens a database session and compares the migration state,
  with one exit code per cause (read from Sources/TodoSyncServer/ExitStatus.swift, the one place they
  are defined): a misspelt TODOSYNC_* name or a missing password file 78, a wrong password 77, an
  unreachable socket 75, a pending or edited migration 65; `migrate --status` reports an edited
  migration as `migrate` refuses it (item 11); and `serve` tells systemd READY=1 (a fake
  NOTIFY_SOCKET here) only once a database session works.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_release_binary import db_env, fastcgi_get, stack_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def exit_statuses() -> dict[str, int]:
    """`case name = code` of ExitStatus.swift: the codes are defined there and nowhere else."""
    text = (REPO_ROOT / "Sources/TodoSyncServer/ExitStatus.swift").read_text()
    codes = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*case (\w+) = (\d+)\s*$", text, re.M)}
    assert len(set(codes.values())) == len(codes), f"two causes share an exit code: {codes}"
    return codes


EXIT = exit_statuses()


@pytest.fixture(scope="module")
def conf() -> dict[str, str]:
    return stack_env()


def todosync(conf, args, env, timeout=60):
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run([conf["TODOSYNC_BIN"], *args], env={**base, **env}, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT)


def parse(text: str) -> dict[str, tuple[str, str]]:
    """NAME -> (value, source) from `todosync config` lines `NAME=VALUE   # source`."""
    result = {}
    for line in text.splitlines():
        m = re.match(r"^(TODOSYNC_[A-Z0-9_]+)=(.*?)\s+# (.*)$", line)
        if m:
            result[m.group(1)] = (m.group(2), m.group(3))
    return result


def test_environment_wins_over_file_over_default(conf, tmp_path):
    cfg = tmp_path / "todosync.env"
    cfg.write_text("# operator's file\nTODOSYNC_WORKERS=12\nexport TODOSYNC_DB_NAME='from_file'\n"
                   "TODOSYNC_LOGIN_MAX_FAILURES=3\n")
    out = todosync(conf, ["config"], {"TODOSYNC_CONFIG": str(cfg), "TODOSYNC_WORKERS": "20"})
    assert out.returncode == 0, out.stderr
    values = parse(out.stdout)
    assert values["TODOSYNC_WORKERS"] == ("20", "environment"), out.stdout
    assert values["TODOSYNC_DB_NAME"] == ("from_file", f"file {cfg}"), out.stdout
    assert values["TODOSYNC_LOGIN_MAX_FAILURES"] == ("3", f"file {cfg}"), out.stdout
    assert values["TODOSYNC_TOKEN_TTL_DAYS"] == ("90", "default"), out.stdout
    assert out.stdout.startswith(f"# TODOSYNC_CONFIG: {cfg}\n")
    # without the file, the binary's own defaults
    out = todosync(conf, ["config"], {})
    values = parse(out.stdout)
    assert values["TODOSYNC_DB_NAME"] == ("todosync", "default"), out.stdout
    workers = int(values["TODOSYNC_WORKERS"][0])
    assert 8 <= workers <= 64 and workers == min(max(4 * os.cpu_count(), 8), 64), out.stdout


def test_secrets_are_redacted(conf, tmp_path):
    cfg = tmp_path / "todosync.env"
    cfg.write_text("TODOSYNC_DB_PASSWORD='correct horse battery'\nTODOSYNC_SMTP_PASSWORD=hunter2hunter2\n")
    env = {"TODOSYNC_CONFIG": str(cfg)}
    out = todosync(conf, ["config", "--verbose"], env)
    assert out.returncode == 0, out.stderr
    assert "correct horse" not in out.stdout and "hunter2" not in out.stdout, out.stdout
    values = parse(out.stdout)
    assert values["TODOSYNC_DB_PASSWORD"] == ("<redacted>", f"file {cfg}")
    # an unknown variable is listed as such, redacted by its name
    assert values["TODOSYNC_SMTP_PASSWORD"] == ("<redacted>", f"file {cfg}")
    assert "not read by todosync" in out.stdout
    out = todosync(conf, ["config", "--assignments"], {**env, "TODOSYNC_DB_PASSWORD": "from-env-secret"})
    assert "from-env-secret" not in out.stdout and "correct horse" not in out.stdout
    assert not any(line.startswith("TODOSYNC_DB_PASSWORD=") for line in out.stdout.splitlines()), out.stdout
    assert "TODOSYNC_DB_PASSWORD_FILE=\n" in out.stdout


def test_config_file_reaches_the_database(conf, tmp_path):
    cfg = tmp_path / "todosync.env"
    cfg.write_text(f"TODOSYNC_DB_SOCKET={conf['TODOSYNC_DB_SOCKET']}\n"
                   f"TODOSYNC_DB_PASSWORD_FILE={conf['TODOSYNC_DB_PASSWORD_FILE']}\nTODOSYNC_LOG_LEVEL=error\n")
    out = todosync(conf, ["migrate", "--status", "--wait-seconds", "0"], {"TODOSYNC_CONFIG": str(cfg)})
    assert out.returncode == 0, out.stderr
    assert "applied  001" in out.stdout and " applied, 0 pending" in out.stdout, out.stdout
    # the same file with an account that does not exist: the binary really used the file
    cfg.write_text(cfg.read_text() + "TODOSYNC_DB_USER=nobody_here\n")
    out = todosync(conf, ["migrate", "--status", "--wait-seconds", "0"], {"TODOSYNC_CONFIG": str(cfg)})
    assert out.returncode != 0
    assert "nobody_here" in out.stderr or "Access denied" in out.stderr, out.stderr


@pytest.mark.parametrize("text,line", [("TODOSYNC_WORKERS=8\nthis is not an assignment\n", 2),
                                       ("TODOSYNC_DB_NAME=$(rm -rf /)\n", 1)])
def test_a_bad_config_file_stops_the_binary(conf, tmp_path, text, line):
    cfg = tmp_path / "bad.env"
    cfg.write_text(text)
    out = todosync(conf, ["config"], {"TODOSYNC_CONFIG": str(cfg)})
    assert out.returncode == 78, (out.returncode, out.stdout, out.stderr)
    assert f"{cfg}:{line}:" in out.stderr, out.stderr
    out = todosync(conf, ["config"], {"TODOSYNC_CONFIG": str(tmp_path / "missing.env")})
    assert out.returncode == 78 and "cannot read" in out.stderr, out.stderr


def test_every_variable_the_server_reads_is_known(conf):
    out = todosync(conf, ["config", "--assignments"], {})
    known = {line.split("=", 1)[0] for line in out.stdout.splitlines()} | {"TODOSYNC_DB_PASSWORD", "TODOSYNC_CONFIG"}
    read = set()
    # the responder's commands (TodoSyncServer) and its two executables' mains
    for path in (p for d in ("todosync", "todosync-test", "TodoSyncServer") for p in (REPO_ROOT / "Sources" / d).glob("**/*.swift")):
        read |= set(re.findall(r'"(TODOSYNC_[A-Z0-9_]+)"', path.read_text()))
    assert read and read <= known, f"read but not in Settings.swift: {sorted(read - known)}"


def test_stack_takes_its_application_defaults_from_the_binary(conf):
    # `stack.sh env` ends with the binary's effective values: the test stack sets no worker count,
    # so the responders' is the binary's default.
    assert conf["TODOSYNC_WORKERS"] == parse(todosync(conf, ["config"], {}).stdout)["TODOSYNC_WORKERS"][0]
    assert conf["TODOSYNC_CONFIG"] == "/dev/null"


@pytest.mark.parametrize("name,value", [("TODOSYNC_WORKERS", "abc"), ("TODOSYNC_LOG_LEVEL", "verbose"),
                                        ("TODOSYNC_DB_PORT", "70000"), ("TODOSYNC_LOG_REQUESTS", "yes"),
                                        ("TODOSYNC_REQUEST_BUDGET_MS", "5")])
def test_config_check_refuses_an_invalid_value_like_nginx_t(conf, tmp_path, name, value):
    """Round 3, item 13: `todosync config --check` exits 78 (EX_CONFIG) naming the value; every other
    command refuses to start with it too (an unknown log level used to mean `info`, silently)."""
    ok = todosync(conf, ["config", "--check"], db_env(conf))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    out = todosync(conf, ["config", "--check"], {name: value})
    assert out.returncode == 78, (out.returncode, out.stdout, out.stderr)
    assert f"{name}={value}" in out.stderr, out.stderr
    cfg = tmp_path / "bad.env"
    cfg.write_text(f"{name}={value}\n")
    out = todosync(conf, ["migrate", "--status", "--wait-seconds", "0"], {"TODOSYNC_CONFIG": str(cfg)})
    assert out.returncode == 78 and f"{name}={value} (file {cfg})" in out.stderr, out.stderr
    # plain `config` still shows what is set, so an operator can see the bad value
    assert todosync(conf, ["config"], {name: value}).returncode == 0


def test_no_default_database_password(conf):
    out = todosync(conf, ["config"], {})
    assert parse(out.stdout)["TODOSYNC_DB_PASSWORD"] == ("", "unset"), out.stdout


def test_maintenance_commands_name_the_database_error_and_exit_for_retry_or_fix(conf, tmp_path):
    """Round 3, item 9: `purge`, `new-epoch` and `check-feed` printed only `Error: unavailable`."""
    wrong_password = {"TODOSYNC_DB_SOCKET": conf["TODOSYNC_DB_SOCKET"], "TODOSYNC_DB_PASSWORD": "not-the-password"}
    for command in (["purge"], ["new-epoch"], ["check-feed"], ["store-days"]):
        out = todosync(conf, command, wrong_password)
        assert out.returncode == EXIT["permission"], (command, out.returncode, out.stderr)
        assert "1045" in out.stderr and "Access denied" in out.stderr, (command, out.stderr)
        assert "not-the-password" not in out.stderr + out.stdout
    no_server = {"TODOSYNC_DB_SOCKET": str(tmp_path / "no-such.sock"), "TODOSYNC_DB_PASSWORD": "x"}
    for command in (["purge"], ["store-days"]):
        out = todosync(conf, command, no_server)
        assert out.returncode == EXIT["temporary"], (command, out.returncode, out.stderr)
        assert "2002" in out.stderr and "Can't connect" in out.stderr, (command, out.stderr)


# --------------------------------------------------------------------------- issue 34, item 8

def check(conf, env, *args):
    return todosync(conf, ["config", "--check", *args], env)


def test_exit_codes_are_documented():
    """docs/OPERATIONS.md's "Exit codes" table lists every code of ExitStatus.swift, and only those."""
    text = (REPO_ROOT / "docs/OPERATIONS.md").read_text()
    section = text.split("### Exit codes", 1)[1].split("\n#", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert documented == set(EXIT.values()), (documented, EXIT)


def test_config_check_passes_a_working_configuration(conf):
    out = check(conf, db_env(conf))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("configuration ok: ") and "none pending or edited" in out.stdout, out.stdout


def test_config_check_refuses_a_wrong_password(conf):
    password = "not-the-password-34"
    out = check(conf, {**db_env(conf), "TODOSYNC_DB_PASSWORD": password})
    assert out.returncode == EXIT["permission"], (out.returncode, out.stdout, out.stderr)
    assert "1045" in out.stderr and "Access denied" in out.stderr and "configuration ok" not in out.stdout, out.stderr
    assert "refused the account or its password" in out.stderr, out.stderr
    assert password not in out.stdout + out.stderr


def test_config_check_refuses_a_missing_password_file(conf, tmp_path):
    env = {k: v for k, v in db_env(conf).items() if k != "TODOSYNC_DB_PASSWORD"}
    missing = tmp_path / "no-password-file"
    out = check(conf, {**env, "TODOSYNC_DB_PASSWORD_FILE": str(missing)})
    assert out.returncode == EXIT["configuration"], (out.returncode, out.stdout, out.stderr)
    assert f"TODOSYNC_DB_PASSWORD_FILE={missing} (environment): cannot read the password file" in out.stderr, out.stderr
    # every command that opens a session says the same with the same code, the responder included
    for command in (["migrate", "--status", "--wait-seconds", "0"], ["purge"]):
        other = todosync(conf, command, {**env, "TODOSYNC_DB_PASSWORD_FILE": str(missing)})
        assert other.returncode == EXIT["configuration"], (command, other.returncode, other.stderr)
        assert "cannot read the password file" in other.stderr, (command, other.stderr)


def test_config_check_refuses_an_unreachable_socket(conf, tmp_path):
    out = check(conf, {**db_env(conf), "TODOSYNC_DB_SOCKET": str(tmp_path / "no-such.sock")})
    assert out.returncode == EXIT["temporary"], (out.returncode, out.stdout, out.stderr)
    assert "2002" in out.stderr and "could not be reached" in out.stderr, out.stderr


@pytest.mark.parametrize("where", ["environment", "file"])
def test_config_check_refuses_a_misspelt_name(conf, tmp_path, where):
    env = db_env(conf)
    if where == "environment":
        env["TODOSYNC_WROKERS"] = "8"
        source, wrong, meant = "environment", "TODOSYNC_WROKERS", "TODOSYNC_WORKERS"
    else:
        cfg = tmp_path / "todosync.env"
        cfg.write_text("TODOSYNC_LOG_LEVEL=info\nTODOSYNC_DB_PASWORD=hunter2hunter2\n")
        env["TODOSYNC_CONFIG"] = str(cfg)
        source, wrong, meant = f"file {cfg}", "TODOSYNC_DB_PASWORD", "TODOSYNC_DB_PASSWORD"
    out = check(conf, env)
    assert out.returncode == EXIT["configuration"], (out.returncode, out.stdout, out.stderr)
    assert f"{wrong} ({source}): no setting reads it; did you mean {meant}?" in out.stderr, out.stderr
    assert "hunter2" not in out.stderr + out.stdout
    # plain `config` still shows it, as a name todosync does not read
    assert "not read by todosync" in todosync(conf, ["config"], env).stdout


def sql_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "Sql"
    shutil.copytree(REPO_ROOT / "Sql", copy)
    return copy


def test_config_check_refuses_a_pending_migration(conf, tmp_path):
    sql = sql_copy(tmp_path)
    (sql / "999_not_applied_yet.sql").write_text("SELECT 1;\n")
    out = check(conf, db_env(conf), "--sql-dir", str(sql))
    assert out.returncode == EXIT["migrations"], (out.returncode, out.stdout, out.stderr)
    assert "1 migration(s) pending (999_not_applied_yet.sql): run `todosync migrate`" in out.stderr, out.stderr


def test_an_edited_migration_is_reported_alike_by_check_status_and_migrate(conf, tmp_path):
    """Item 8, and item 11: `migrate --status` listed an edited migration as applied, exit 0."""
    sql = sql_copy(tmp_path)
    edited = sql / "002_daily_stats.sql"
    edited.write_text(edited.read_text() + "\nSELECT 'an edit after it was applied';\n")
    message = "migration 002_daily_stats.sql was edited after it was applied (checksum "
    env = db_env(conf)
    out = check(conf, env, "--sql-dir", str(sql))
    assert out.returncode == EXIT["migrations"], (out.returncode, out.stdout, out.stderr)
    assert message in out.stderr, out.stderr
    status = todosync(conf, ["migrate", "--status", "--wait-seconds", "0", "--sql-dir", str(sql)], env)
    assert status.returncode == EXIT["migrations"], (status.returncode, status.stdout, status.stderr)
    assert re.search(r"^edited   002  002_daily_stats\.sql  .* UTC  checksum [0-9a-f]{12}… recorded, [0-9a-f]{12}… now$",
                     status.stdout, re.M), status.stdout
    assert ", 1 edited" in status.stdout and message in status.stderr, status.stdout + status.stderr
    migrate = todosync(conf, ["migrate", "--wait-seconds", "0", "--sql-dir", str(sql)], env)
    assert migrate.returncode == EXIT["migrations"], (migrate.returncode, migrate.stderr)
    # the same sentence, checksums included
    line = next(l for l in migrate.stderr.splitlines() if message in l)
    assert line in status.stderr.splitlines(), (line, status.stderr)
    # the unedited files: nothing edited, exit 0
    clean = todosync(conf, ["migrate", "--status", "--wait-seconds", "0"], env)
    assert clean.returncode == 0 and "edited" not in clean.stdout, clean.stdout + clean.stderr


# ------------------------------------------------------ serve: READY=1 only with a database session

class NotifySocket:
    """systemd's side of sd_notify(3): an AF_UNIX datagram socket named by NOTIFY_SOCKET."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ts-notify-", dir="/tmp")  # sun_path holds 108 bytes
        self.path = os.path.join(self.dir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages: list[str] = []

    def wait_for(self, predicate, seconds: float, proc=None) -> bool:
        """Collects datagrams until one satisfies `predicate`, `proc` exits, or time runs out."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(0.2)
            try:
                message = self.sock.recv(4096).decode()
            except socket.timeout:
                if proc is not None and proc.poll() is not None:
                    self.drain()
                    return any(predicate(m) for m in self.messages)
                continue
            self.messages.append(message)
            if predicate(message):
                return True
        return False

    def drain(self):
        self.sock.setblocking(False)
        try:
            while True:
                self.messages.append(self.sock.recv(4096).decode())
        except BlockingIOError:
            pass

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def is_ready(message: str) -> bool:
    return "READY=1" in message.split("\n")


@pytest.fixture
def responder(conf, tmp_path):
    """Starts `todosync serve` under a fake NOTIFY_SOCKET with the given environment changes."""
    started = []

    def start(changes: dict[str, str | None]):
        env = {**db_env(conf), "TODOSYNC_WORKERS": "2", "TODOSYNC_LOG_LEVEL": "info"}
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        notify = NotifySocket()
        env["NOTIFY_SOCKET"] = notify.path
        sock = tmp_path / f"fcgi-{len(started)}.sock"
        log = tmp_path / f"serve-{len(started)}.log"
        proc = subprocess.Popen([conf["TODOSYNC_BIN"], "serve", "--socket", str(sock)], env=env,
                                stdout=subprocess.DEVNULL, stderr=open(log, "w"), cwd=REPO_ROOT)
        started.append((proc, notify))
        return proc, notify, sock, log

    yield start
    for proc, notify in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        notify.close()


def test_serve_is_ready_once_a_database_session_works(responder):
    proc, notify, sock, log = responder({})
    assert notify.wait_for(is_ready, 30, proc), (notify.messages, proc.poll(), log.read_text()[-2000:])
    head, _, body = fastcgi_get(str(sock), "/healthz").partition(b"\r\n\r\n")
    assert b"Status: 200" in head, head + body
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, log.read_text()[-2000:]
    notify.drain()
    assert "STOPPING=1" in notify.messages, notify.messages


def test_serve_is_not_ready_with_a_wrong_password_and_exits_77(responder, conf):
    proc, notify, sock, log = responder({"TODOSYNC_DB_PASSWORD": "not-the-password-34"})
    assert not notify.wait_for(is_ready, 30, proc), notify.messages
    assert proc.wait(timeout=30) == EXIT["permission"], log.read_text()[-2000:]
    text = log.read_text()
    assert "1045" in text and "not-the-password-34" not in text, text[-2000:]
    assert not any(is_ready(m) for m in notify.messages), notify.messages


def test_serve_with_a_missing_password_file_exits_78_before_listening(responder, tmp_path):
    proc, notify, sock, log = responder({"TODOSYNC_DB_PASSWORD": None,
                                         "TODOSYNC_DB_PASSWORD_FILE": str(tmp_path / "missing")})
    assert proc.wait(timeout=30) == EXIT["configuration"], log.read_text()[-2000:]
    assert "cannot read the password file" in log.read_text()
    notify.drain()
    assert notify.messages == [], notify.messages
    assert not sock.exists()


def test_serve_waits_for_an_unreachable_database_answering_503(responder, tmp_path):
    proc, notify, sock, log = responder({"TODOSYNC_DB_SOCKET": str(tmp_path / "no-such.sock")})
    assert notify.wait_for(lambda m: m.startswith("STATUS=waiting for the database"), 30, proc), (
        notify.messages, log.read_text()[-2000:])
    assert proc.poll() is None, log.read_text()[-2000:]
    head, _, body = fastcgi_get(str(sock), "/healthz").partition(b"\r\n\r\n")
    assert b"Status: 503" in head, head + body
    assert not notify.wait_for(is_ready, 3, proc), notify.messages
    assert proc.poll() is None, "serve gave up on a database that may come back"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, log.read_text()[-2000:]
    notify.drain()
    assert not any(is_ready(m) for m in notify.messages), notify.messages


def fault_hold_seconds() -> float:
    text = (REPO_ROOT / "Sources/TodoSyncServer/FaultHold.swift").read_text()
    return float(re.search(r"static let seconds: Double = ([\d.]+)", text).group(1))


@pytest.mark.parametrize("changes,cause", [({"TODOSYNC_DB_PASSWORD": "not-the-password-34"}, "permission"),
                                           ({"TODOSYNC_LOG_LEVEL": "loud"}, "configuration")])
def test_socket_activated_responder_holds_a_fault_answering_503_before_it_exits(conf, tmp_path, changes, cause):
    """Started by its socket as todosync@.socket does (systemd-socket-activate here), a responder
    that exited at once on 77/78 was started again by nginx's next connection: in a drill under
    systemd 252, 20 clients hit the start limit (5 starts in 10 s) within 15 s and the socket
    failed with it (`service-start-limit-hit`, socket file removed). It now answers every request
    503 `unavailable` for FaultHold.seconds first, then exits with the cause's code."""
    if not shutil.which("systemd-socket-activate"):
        pytest.skip("systemd-socket-activate (Debian's systemd package) is not installed")
    notify = NotifySocket()
    env = {**db_env(conf), "TODOSYNC_WORKERS": "2", **changes, "NOTIFY_SOCKET": notify.path}
    sock = tmp_path / "activated.sock"
    setenv = [arg for key, value in env.items() for arg in ("-E", f"{key}={value}")]
    log = tmp_path / "activated.log"
    proc = subprocess.Popen(["systemd-socket-activate", "-l", str(sock), *setenv, conf["TODOSYNC_BIN"], "serve"],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"), start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "systemd-socket-activate did not open the socket"
            time.sleep(0.05)
        started = time.monotonic()
        answers = []
        while proc.poll() is None and time.monotonic() - started < 30:
            try:
                answers.append(fastcgi_get(str(sock), "/healthz"))
            except OSError:
                break
            time.sleep(0.2)
        code = proc.wait(timeout=30)
        held = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        notify.drain()
        notify.close()
    assert code == EXIT[cause], (code, log.read_text()[-2000:])
    assert held >= fault_hold_seconds() - 0.5, (held, log.read_text()[-2000:])
    heads = [a.partition(b"\r\n\r\n") for a in answers if a]
    assert len(heads) >= 3 and all(b"Status: 503" in h and b'"unavailable"' in body for h, _, body in heads), answers[:3]
    assert not any(is_ready(m) for m in notify.messages), notify.messages
    assert any(m.startswith("STATUS=") and f"exiting {EXIT[cause]} in" in m for m in notify.messages), notify.messages
    assert "not-the-password-34" not in log.read_text()
