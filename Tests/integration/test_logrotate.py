"""Log rotation on the production install path (issue 14 item 4).

scripts/install.sh installs /etc/logrotate.d/todosync, the systemd unit appends each responder's
stderr to /var/log/todosync/responder-N.log, and the site writes its JSON access log to
/var/log/todosync/nginx-access.log. Here the installed config runs for real (`logrotate -f`) on
copies of those paths under a temporary directory:

- the responder log is rotated by copytruncate: the responder's descriptor (O_APPEND, as systemd
  opens it) keeps writing, and its next line lands at the start of the emptied file (no hole, no
  line lost after the rotation);
- the nginx log is renamed and nginx is told to reopen it (SIGUSR1 to the pid in /run/nginx.pid;
  here a stand-in process records the signal).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tsapi

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL = REPO_ROOT / "scripts/install.sh"

pytestmark = pytest.mark.skipif(shutil.which("logrotate") is None,
                                reason="logrotate (Debian's package, installed by scripts/stack.sh deps) missing")


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("install")
    env = dict(line.split("=", 1) for line in tsapi.stack("env").splitlines() if "=" in line)
    binary = env["TODOSYNC_BIN"]
    subprocess.run([str(INSTALL), "--root", str(root), "--binary", binary, "--instances", "2"],
                   check=True, capture_output=True)
    return root


def test_install_wires_the_logs_to_the_rotated_directory(staged):
    config = staged / "etc/logrotate.d/todosync"
    assert config.exists(), "install.sh did not install the logrotate config"
    assert (staged / "var/log/todosync").is_dir()
    unit = (staged / "etc/systemd/system/todosync@.service").read_text()
    assert "StandardError=append:/var/log/todosync/responder-%i.log" in unit
    site = (staged / "etc/nginx/sites-available/todosync").read_text()
    assert "access_log /var/log/todosync/nginx-access.log todosync_json;" in site
    assert "log_format todosync_json escape=json" in site
    # Syntax check of the installed file as it is (paths that do not exist here are `missingok`).
    check = subprocess.run(["logrotate", "-d", "-s", "/dev/null", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert "error" not in check.stderr.lower(), check.stderr


def test_rotation_keeps_the_responder_writing_and_reopens_nginx(staged, tmp_path):
    logs = tmp_path / "log"
    logs.mkdir(mode=0o755)
    pid_file = tmp_path / "nginx.pid"
    config = (staged / "etc/logrotate.d/todosync").read_text()
    config = config.replace("/var/log/todosync/", f"{logs}/").replace("/run/nginx.pid", str(pid_file))
    assert str(logs) in config and str(pid_file) in config, "the config's paths changed: update this test"
    conf = tmp_path / "todosync.logrotate"
    conf.write_text(config)
    conf.chmod(0o644)

    # A stand-in for nginx's master: records SIGUSR1 (reopen logs) in a file.
    marker = tmp_path / "usr1"
    nginx = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGUSR1, lambda *a: open({str(marker)!r}, 'a').write('usr1\\n'))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert nginx.stdout.readline().strip() == "ready"
        pid_file.write_text(f"{nginx.pid}\n")
        access = logs / "nginx-access.log"
        access.write_text('{"request_id":"before"}\n')

        responder = logs / "responder-1.log"
        fd = os.open(responder, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            before = b"".join(b'{"msg":"before rotation","n":%d}\n' % i for i in range(100))
            os.write(fd, before)
            inode = responder.stat().st_ino
            state = tmp_path / "state"
            run = subprocess.run(["logrotate", "-f", "-s", str(state), str(conf)], capture_output=True, text=True)
            assert run.returncode == 0, run.stderr
            after = b'{"msg":"after rotation"}\n'
            os.write(fd, after)
        finally:
            os.close(fd)
        assert (logs / "responder-1.log.1").read_bytes() == before
        assert responder.stat().st_ino == inode, "copytruncate keeps the file the responder writes to"
        assert responder.read_bytes() == after, "the next line must land at the start of the emptied file"

        assert (logs / "nginx-access.log.1").read_text() == '{"request_id":"before"}\n'
        deadline = time.monotonic() + 5
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "nginx was not told to reopen its logs (SIGUSR1)"
    finally:
        nginx.send_signal(signal.SIGTERM)
        nginx.wait(10)
