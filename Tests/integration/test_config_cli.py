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
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from test_release_binary import stack_env

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    for path in (REPO_ROOT / "Sources" / "todosync").glob("*.swift"):
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
    assert todosync(conf, ["config", "--check"], {}).returncode == 0
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
        assert out.returncode == 78, (command, out.returncode, out.stderr)
        assert "1045" in out.stderr and "Access denied" in out.stderr, (command, out.stderr)
        assert "not-the-password" not in out.stderr + out.stdout
    no_server = {"TODOSYNC_DB_SOCKET": str(tmp_path / "no-such.sock"), "TODOSYNC_DB_PASSWORD": "x"}
    for command in (["purge"], ["store-days"]):
        out = todosync(conf, command, no_server)
        assert out.returncode == 75, (command, out.returncode, out.stderr)
        assert "2002" in out.stderr and "Can't connect" in out.stderr, (command, out.stderr)
