"""The production install path (scripts/install.sh, scripts/systemd/, nginx/todosync-site.conf.template).

- `scripts/install.sh --root DIR` stages every file, keeps an existing configuration (and its
  generated database password) and binlog settings on a second run, makes the backup directory
  0700, and fills every placeholder of the nginx site;
- `systemd-analyze verify` accepts the units as installed (template instance, socket, migrate,
  purge and backup with their timers) with no warning, and `systemd-analyze security --offline` rates every
  service's sandbox (the hardening.conf drop-in) "OK" (exposure ≤ 2.0; 9.6 without it);
- the site file, rendered by install.sh and run by a real nginx in front of the test stack's
  responders, serves the API over TLS, redirects plain HTTP, answers its own errors with
  the contract's JSON body, and serves every responder's metrics to loopback only (403 from
  127.0.0.2; `--metrics-allow` adds addresses and refuses anything else).

- socket activation as todosync@.socket does it: `systemd-socket-activate` opens the listening
  socket and starts the unit's command line (`todosync serve`) on the first connection; the
  responder serves that connection and later ones from the socket it was passed (LISTEN_FDS).
  Skipped (with the reason) while the binary has no `serve --listen-fd` (the scale-out branch
  adds it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

import tsapi
from test_release_binary import db_env, fastcgi_get, stack_env

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL = REPO_ROOT / "scripts/install.sh"
UNITS = ["todosync@1.service", "todosync@1.socket", "todosync-migrate.service", "todosync-purge.service",
         "todosync-purge.timer", "todosync-store-days.service", "todosync-store-days.timer",
         "todosync-backup.service", "todosync-backup.timer"]


def install(root: Path, *args: str, binary: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", str(INSTALL), "--root", str(root), "--binary", binary, *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def conf() -> dict[str, str]:
    return stack_env()


@pytest.fixture(scope="module")
def staged(conf, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("root")
    install(root, "--server-name", "api.example.com", "--instances", "3", binary=conf["TODOSYNC_BIN"])
    return root


def test_install_stages_every_file_and_keeps_the_configuration(staged, conf):
    for path in ["usr/local/bin/todosync", "usr/local/share/todosync/Sql/001_initial_schema.sql",
                 "usr/local/share/doc/todosync/API.md", "etc/todosync/todosync.env",
                 "etc/systemd/system/todosync@.service.d/hardening.conf",
                 "etc/systemd/system/todosync-.service.d/hardening.conf",
                 "etc/nginx/sites-available/todosync", "usr/local/bin/todosync-backup",
                 "etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf", "etc/mtail/todosync-nginx.mtail",
                 "etc/systemd/system/mtail.service.d/todosync.conf"] + [
                     f"etc/systemd/system/{u.replace('@1', '@')}" for u in UNITS]:
        assert (staged / path).exists(), f"install.sh did not stage {path}"
    assert os.readlink(staged / "etc/nginx/sites-enabled/todosync") == "../sites-available/todosync"
    sql = sorted(p.name for p in (REPO_ROOT / "Sql").glob("*.sql"))
    assert sorted(p.name for p in (staged / "usr/local/share/todosync/Sql").iterdir()) == sql

    env_file = staged / "etc/todosync/todosync.env"
    assert env_file.stat().st_mode & 0o077 == 0, "the configuration holds a password: not world- or group-readable"
    password = re.search(r"^TODOSYNC_DB_PASSWORD=(\S{24,})$", env_file.read_text(), re.M)
    assert password, env_file.read_text()
    backups = staged / "var/backups/todosync"
    assert backups.is_dir() and backups.stat().st_mode & 0o077 == 0, "backups hold every user's data: 0700"
    binlog_cnf = staged / "etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf"
    binlog_cnf.write_text(binlog_cnf.read_text() + "# edited by the administrator\n")
    install(staged, "--server-name", "api.example.com", "--instances", "3", binary=conf["TODOSYNC_BIN"])
    assert password.group(1) in env_file.read_text(), "a second install replaced the configuration"
    assert "edited by the administrator" in binlog_cnf.read_text(), "a second install replaced the binlog settings"

    site = (staged / "etc/nginx/sites-available/todosync").read_text()
    assert "${" not in site
    assert re.findall(r"server unix:/run/todosync/responder-(\d+)\.sock", site) == ["1", "2", "3"]
    assert "server_name api.example.com;" in site


@pytest.fixture(scope="module")
def systemd_root(staged) -> Path:
    """The staged tree plus the host's own system units (sysinit.target, …) for --root."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze (Debian's systemd package) is not installed")
    system = Path("/lib/systemd/system")
    target = staged / "usr/lib/systemd/system"
    if not target.exists():
        shutil.copytree(system, target, symlinks=True)
    # The host's own commands that units name (ExecReload=/bin/kill, from procps on every host).
    for command in ("/bin/kill",):
        copy = staged / command.lstrip("/")
        if not copy.exists() and Path(command).exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(command, copy)
    return staged


def test_systemd_units_verify_without_warnings(systemd_root):
    proc = subprocess.run(["systemd-analyze", "verify", f"--root={systemd_root}", *UNITS],
                          capture_output=True, text=True, timeout=60, cwd=systemd_root)
    assert proc.returncode == 0 and not proc.stderr.strip() and not proc.stdout.strip(), (
        f"systemd-analyze verify (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")


@pytest.mark.parametrize("unit", ["todosync@1.service", "todosync-migrate.service", "todosync-purge.service",
                                  "todosync-store-days.service", "todosync-backup.service"])
def test_every_service_runs_in_a_sandbox(systemd_root, unit):
    proc = subprocess.run(["systemd-analyze", "security", f"--root={systemd_root}", "--offline=true", unit],
                          capture_output=True, text=True, timeout=60, cwd=systemd_root)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout + proc.stderr)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) <= 2.0, f"{unit}: exposure {m.group(1)} (hardening.conf drop-in not applied?)"


# --------------------------------------------------------------------------- the nginx site, live

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def localized(text: str, root: Path, sockets: list[Path]) -> str:
    """An installed nginx file with the host's paths moved under `root` and the test stack's
    responder sockets as its upstream."""
    text = text.replace("include /etc/nginx/todosync.d/", f"include {root}/etc/nginx/todosync.d/")  # real-ip.conf
    for i, sock in enumerate(sockets, start=1):
        text = text.replace(f"unix:/run/todosync/responder-{i}.sock", f"unix:{sock}")
    text = text.replace("/var/log/todosync/", f"{root}/logs/")  # the site's JSON access log
    text = text.replace("/run/todosync-front/", f"{root}/front/")  # the connection cap's sockets
    if "pub.sock" in text:
        assert "unix:/run/todosync-live/pub.sock;" in text, "live sync's publisher socket moved: update this test"
        text = text.replace("unix:/run/todosync-live/pub.sock;", f"unix:{root}/live-pub.sock;")
    return text


def start_site_nginx(root: Path, site: str, cert: Path, probe: str, main_level: str = "") -> subprocess.Popen:
    """nginx.conf like Debian's (the enabled modules first, mime.types at http level, the site
    included after it), with `main_level` text at the main level; started and waited for."""
    (root / "site.conf").write_text(site)
    for d in ("tmp", "logs", "front"):
        (root / d).mkdir(exist_ok=True)
    (root / "nginx.conf").write_text(f"""
include /etc/nginx/modules-enabled/*.conf;
{main_level}
user root;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log {root}/logs/access.log;
    client_body_temp_path {root}/tmp/body;
    fastcgi_temp_path {root}/tmp/fastcgi;
    proxy_temp_path {root}/tmp/proxy;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    include {root}/site.conf;
}}
""")
    check = subprocess.run(["nginx", "-t", "-c", str(root / "nginx.conf")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen(["nginx", "-c", str(root / "nginx.conf"), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            requests.get(probe, verify=str(cert), timeout=2)
            return proc
        except requests.ConnectionError:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "nginx did not come up"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def site_nginx(conf, tmp_path_factory):
    """A real nginx running the rendered site in front of the test stack's responders."""
    if os.geteuid() != 0 or not shutil.which("nginx"):
        pytest.skip("needs root and nginx")
    state = Path(os.environ.get("TODOSYNC_TEST_STATE_DIR", ""))
    cert, key = state / "tls/cert.pem", state / "tls/key.pem"
    sockets = sorted(Path(conf.get("TODOSYNC_SOCKET_DIR", state / "sock")).glob("fcgi-*.sock"))
    if not (cert.exists() and key.exists() and sockets):
        pytest.skip("the test stack's certificate or responder sockets are not where expected")
    root = tmp_path_factory.mktemp("site")
    install(root, "--server-name", "localhost", "--tls-cert", str(cert), "--tls-key", str(key),
            "--instances", str(len(sockets)), "--real-ip-from", "10.99.0.0/16", binary=conf["TODOSYNC_BIN"])
    site = localized((root / "etc/nginx/sites-available/todosync").read_text(), root, sockets)
    http, https = free_ports(2)
    site = re.sub(r"listen 80;\n\s*listen \[::\]:80;", f"listen 127.0.0.1:{http};", site)
    site = re.sub(r"listen 443 ssl http2;\n\s*listen \[::\]:443 ssl http2;", f"listen 127.0.0.1:{https} ssl http2;", site)
    assert f":{http};" in site and f":{https} ssl" in site, "the site's listen lines changed: update this test"
    base = f"https://127.0.0.1:{https}"
    proc = start_site_nginx(root, site, cert, base + "/healthz")
    yield {"https": base, "http": f"http://127.0.0.1:{http}", "ca": str(cert), "logs": root / "logs"}
    proc.terminate()
    proc.wait(timeout=15)


def test_site_serves_the_api_over_tls(site_nginx):
    health = requests.get(site_nginx["https"] + "/healthz", verify=site_nginx["ca"], timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}, health.text
    assert health.headers["Content-Type"].startswith("application/json")
    assert health.headers.get("X-Request-Id")
    assert health.headers.get("Strict-Transport-Security")
    login = requests.post(site_nginx["https"] + "/api/v1/auth/login", verify=site_nginx["ca"], timeout=10,
                          json={"email": "nobody@example.com", "password": "not a password"})
    assert login.status_code == 401, login.text
    assert login.json()["error"]["code"] == "unauthorized"


def test_site_serves_live_sync_streams(site_nginx):
    """Issue 22: the production site hands an authenticated stream to nchan (SSE, unbuffered); no
    token is 401 before any stream; the internal subscriber location is not reachable."""
    api = tsapi.new_user()
    url = site_nginx["https"] + "/api/v1/sync/live"
    headers = {"Accept": "text/event-stream"}
    with requests.get(url, verify=site_nginx["ca"], timeout=10, stream=True,
                      headers={**headers, "Authorization": f"Bearer {api.token}"}) as r:
        assert r.status_code == 200, r.text[:200]
        assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
        assert r.headers.get("X-Accel-Buffering") == "no", r.headers
    r = requests.get(url, verify=site_nginx["ca"], timeout=10, headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text[:200]
    r = requests.get(site_nginx["https"] + "/__live/subscribe/1", verify=site_nginx["ca"], timeout=10, headers=headers)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text[:200]


def test_site_answers_its_own_errors_as_contract_json(site_nginx):
    cases = [
        ("GET", "/nothing-here", None, 404, "not_found"),
        ("POST", "/api/v1/todos", b"x" * (2 * 1024 * 1024), 413, "payload_too_large"),
    ]
    for method, path, body, status, code in cases:
        r = requests.request(method, site_nginx["https"] + path, data=body, verify=site_nginx["ca"], timeout=10,
                             headers={"Content-Type": "application/json"})
        assert r.status_code == status, (path, r.status_code, r.text[:200])
        assert r.headers["Content-Type"].startswith("application/json"), (path, r.headers)
        assert json.loads(r.text)["error"]["code"] == code, (path, r.text)


def test_site_answers_an_oversized_http2_body_with_json(site_nginx, tmp_path):
    body = tmp_path / "big.json"
    body.write_bytes(b"x" * (2 * 1024 * 1024))
    out = subprocess.run(["curl", "-s", "--cacert", site_nginx["ca"], "--http2", "-o", "-", "-w", "\\n%{http_version} %{http_code} %{content_type}",
                          "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", f"@{body}",
                          site_nginx["https"] + "/api/v1/todos"], capture_output=True, text=True, timeout=30)
    text, _, meta = out.stdout.rpartition("\n")
    version, status, ctype = (meta.split() + ["", "", ""])[:3]
    assert (version, status) == ("2", "413"), out.stdout[-300:] + out.stderr
    assert ctype.startswith("application/json") and json.loads(text)["error"]["code"] == "payload_too_large", text[:300]


def test_site_redirects_plain_http(site_nginx):
    r = requests.get(site_nginx["http"] + "/api/v1/tags?x=1", allow_redirects=False, timeout=10)
    assert r.status_code == 308
    assert r.headers["Location"].startswith("https://") and r.headers["Location"].endswith("/api/v1/tags?x=1")


def test_site_serves_metrics_to_loopback_only(site_nginx):
    from test_metrics import _get_from
    base = site_nginx["https"]
    responders = len(sorted(Path(os.environ.get("TODOSYNC_TEST_STATE_DIR", "")).glob("sock/fcgi-*.sock"))) or 1
    status, body = _get_from("127.0.0.1", base + "/metrics")
    assert status == 200, body[:300]
    labelled = set(re.findall(rb'^todosync_fastcgi_workers\{responder="(\d+)"\}', body, re.M))
    assert labelled == {str(i).encode() for i in range(1, responders + 1)}, body[:500]
    status, body = _get_from("127.0.0.1", base + "/metrics/1")
    assert status == 200 and b'responder="1"' in body and b'responder="2"' not in body, body[:300]
    for path in ("/metrics", "/metrics/1"):
        status, body = _get_from("127.0.0.2", base + path)   # _get_from checks the 403 is the JSON body
        assert status == 403 and b"todosync_" not in body, (path, status, body[:200])


def test_install_sets_up_mtail_over_the_sites_access_log(staged, conf, tmp_path):
    """nginx's own status counts (docs/OPERATIONS.md): the program where Debian's mtail unit loads
    programs, and a drop-in naming the site's log and --mtail-address (loopback by default)."""
    program = staged / "etc/mtail/todosync-nginx.mtail"
    assert program.read_text() == (REPO_ROOT / "scripts/mtail/todosync-nginx.mtail").read_text()
    dropin = (staged / "etc/systemd/system/mtail.service.d/todosync.conf").read_text()
    assert "Environment=LOGS=/var/log/todosync/nginx-access.log" in dropin.splitlines(), dropin
    site = (staged / "etc/nginx/sites-available/todosync").read_text()
    assert "access_log /var/log/todosync/nginx-access.log todosync_json;" in site, "the log mtail reads moved"
    assert "Environment=HOST=127.0.0.1" in dropin.splitlines(), dropin
    install(tmp_path / "a", "--mtail-address", "10.0.0.4", binary=conf["TODOSYNC_BIN"])
    dropin = (tmp_path / "a/etc/systemd/system/mtail.service.d/todosync.conf").read_text()
    assert "Environment=HOST=10.0.0.4" in dropin.splitlines(), dropin
    proc = subprocess.run(["bash", str(INSTALL), "--root", str(tmp_path / "b"), "--binary", conf["TODOSYNC_BIN"],
                           "--mtail-address", "10.0.0.4\nUser=root"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--mtail-address" in proc.stderr, proc.stdout + proc.stderr


def test_install_adds_metrics_allow_list_and_rejects_garbage(conf, tmp_path):
    install(tmp_path / "a", "--server-name", "x.example", "--instances", "2", "--metrics-allow", "10.0.0.5,10.1.0.0/16",
            binary=conf["TODOSYNC_BIN"])
    site = (tmp_path / "a/etc/nginx/sites-available/todosync").read_text()
    for path in ("/metrics", "/metrics/1", "/metrics/2"):
        block = site.split(f"location = {path} {{", 1)[1].split("}", 1)[0]
        assert re.search(r"allow 127\.0\.0\.1; allow ::1; allow 10\.0\.0\.5; allow 10\.1\.0\.0/16; deny all;", block), block
    proc = subprocess.run(["bash", str(INSTALL), "--root", str(tmp_path / "b"), "--binary", conf["TODOSYNC_BIN"],
                           "--metrics-allow", "10.0.0.5; allow all"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--metrics-allow" in proc.stderr, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- socket activation

def test_responder_unit_is_not_restarted_into_a_failed_socket_on_a_configuration_error(staged, systemd_root):
    """Issue 34, item 8: a bad configuration (78) or a refused password (77) made the responder
    exit, Restart=on-failure started it again every second, and within 5 s systemd's start limit
    failed the service and its socket. The installed unit does not restart on those codes (read
    from ExitStatus.swift), waits for READY=1 (sent once a database session works) at most
    TimeoutStartSec, and restarts on anything else; `systemd-analyze verify` accepts it (above)."""
    from test_config_cli import EXIT

    unit = (staged / "etc/systemd/system/todosync@.service").read_text()
    settings = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    assert set(settings["RestartPreventExitStatus"].split()) == {str(EXIT["configuration"]), str(EXIT["permission"])}, settings
    assert str(EXIT["temporary"]) not in settings["RestartPreventExitStatus"].split()
    assert settings["Type"] == "notify" and settings["Restart"] == "on-failure", settings
    assert settings["TimeoutStartSec"] == "90s", settings
    # systemd itself reads the same: an offline dump of the unit as --root installs it
    proc = subprocess.run(["systemd-analyze", "verify", f"--root={systemd_root}", "todosync@1.service"],
                          capture_output=True, text=True, timeout=60, cwd=systemd_root)
    assert proc.returncode == 0 and "RestartPreventExitStatus" not in proc.stderr, proc.stderr


def test_socket_activation_serves_from_the_passed_socket(conf, tmp_path):
    binary = conf["TODOSYNC_BIN"]
    help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    if "--listen-fd" not in help_text:
        pytest.skip("this todosync has no LISTEN_FDS support yet (serve --listen-fd: the scale-out branch)")
    if not shutil.which("systemd-socket-activate"):
        pytest.skip("systemd-socket-activate (Debian's systemd package) is not installed")
    unit = (REPO_ROOT / "scripts/systemd/todosync@.service").read_text()
    exec_start = re.search(r"^ExecStart=/usr/local/bin/todosync (.*)$", unit, re.M).group(1).split()
    sock = tmp_path / "responder.sock"
    env = db_env(conf)

    def activate():
        # Like the unit's Environment=: systemd-socket-activate passes only what -E names.
        setenv = [arg for key, value in env.items() for arg in ("-E", f"{key}={value}")]
        return subprocess.Popen(["systemd-socket-activate", "-l", str(sock), *setenv, binary, *exec_start],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def wait_for_socket():
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "systemd-socket-activate did not open the socket"
            time.sleep(0.05)

    first = activate()
    try:
        wait_for_socket()
        for _ in range(3):  # the first connection starts the responder; later ones reuse it
            head, _, body = fastcgi_get(str(sock), "/healthz").partition(b"\r\n\r\n")
            assert b"Status: 200" in head and b'"ok"' in body, head + body
    finally:
        os.killpg(first.pid, 15)
        first.wait(timeout=20)


def test_installed_configuration_is_what_the_binary_reads(staged):
    """The staged binary, pointed at the staged todosync.env as the units do (TODOSYNC_CONFIG in
    hardening.conf), takes the socket and password from it; the password is never printed."""
    env_file = staged / "etc/todosync/todosync.env"
    assert "Environment=TODOSYNC_CONFIG=/etc/todosync/todosync.env" in (
        staged / "etc/systemd/system/todosync@.service.d/hardening.conf").read_text()
    password = re.search(r"^TODOSYNC_DB_PASSWORD=(\S+)$", env_file.read_text(), re.M).group(1)
    proc = subprocess.run([str(staged / "usr/local/bin/todosync"), "config"], capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin", "TODOSYNC_CONFIG": str(env_file)})
    assert proc.returncode == 0, proc.stderr
    assert password not in proc.stdout
    assert re.search(rf"^TODOSYNC_DB_PASSWORD=<redacted>\s+# file {re.escape(str(env_file))}$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^TODOSYNC_DB_SOCKET=/run/mysqld/mysqld.sock\s+# file ", proc.stdout, re.M), proc.stdout


def test_host_steps_in_a_dry_run(conf, tmp_path):
    """The real-host path (not --root alone), as far as it can run here: `--dry-run` stages the
    files and prints each host step. On a first install the database is created by the installed
    binary from the installed configuration, migrations run before any responder restarts, every
    instance's socket is enabled, and nginx is tested before it is reloaded."""
    proc = install(tmp_path, "--dry-run", "--instances", "2", binary=conf["TODOSYNC_BIN"])
    steps = [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]
    env_file, binary = tmp_path / "etc/todosync/todosync.env", tmp_path / "usr/local/bin/todosync"
    create = f"env TODOSYNC_CONFIG={env_file} {binary} create-database --admin-user root"
    assert create in steps, steps
    assert f"chmod 0640 {env_file}" in steps and f"chown root:todosync {env_file}" in steps, steps
    migrate = steps.index("systemctl restart todosync-migrate.service")
    restarts = [steps.index(f"systemctl restart todosync@{i}.service") for i in (1, 2)]
    assert steps.index(create) < migrate < min(restarts), steps
    # issue 34, item 8: the configuration is checked against the database before any restart
    check = steps.index(f"env TODOSYNC_CONFIG={env_file} {binary} config --check --sql-dir "
                        f"{tmp_path}/usr/local/share/todosync/Sql")
    assert migrate < check < min(restarts), steps
    assert {"systemctl enable --now todosync@1.socket", "systemctl enable --now todosync@2.socket"} <= set(steps)
    assert ("systemctl enable todosync-migrate.service todosync-purge.timer todosync-store-days.timer "
            "todosync-backup.timer") in steps, steps
    assert f"chown todosync:todosync {tmp_path}/var/backups/todosync" in steps, steps
    assert "systemctl restart todosync@3.service" not in steps
    assert steps.index("nginx -t") < steps.index("systemctl reload nginx") and steps[-1] == "systemctl reload nginx"
    # mtail rereads its programs and the drop-in (nginx's own counts)
    assert steps.index("systemctl daemon-reload") < steps.index("systemctl restart mtail.service"), steps
    assert "systemctl enable mtail.service" in steps, steps
    # an upgrade keeps the configuration: no second database step
    proc = install(tmp_path, "--dry-run", "--instances", "2", binary=conf["TODOSYNC_BIN"])
    assert not any("create-database" in line for line in proc.stdout.splitlines()), proc.stdout


# --------------------------------------------------------------------------- issue 19: items 6, 11

def test_site_caps_the_client_fields_it_logs(site_nginx):
    r = requests.get(site_nginx["https"] + "/healthz", verify=site_nginx["ca"], timeout=10,
                     headers={"User-Agent": "U" * 15000})
    rid = r.headers["X-Request-Id"]
    deadline = time.monotonic() + 5
    while True:
        lines = [line for line in (site_nginx["logs"] / "nginx-access.log").read_bytes().splitlines()
                 if rid.encode() in line]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(lines) == 1 and len(lines[0]) < 1200, [len(line) for line in lines]
    assert json.loads(lines[0])["user_agent"] == "U" * 256 + "..."


def test_install_keeps_an_operators_changes(conf, tmp_path):
    """Before: every install rewrote the units and the site, so an operator's edits vanished at
    the next upgrade, and the site had no place for local settings (e.g. real-ip)."""
    root = tmp_path / "root"
    install(root, "--server-name", "api.example.com", binary=conf["TODOSYNC_BIN"])
    unit = root / "etc/systemd/system/todosync@.service"
    site = root / "etc/nginx/sites-available/todosync"
    edited_unit = unit.read_text() + "# the operator's line\n"
    unit.write_text(edited_unit)
    edited_site = site.read_text().replace("client_max_body_size 1m;", "client_max_body_size 2m;")
    site.write_text(edited_site)
    dropin = root / "etc/systemd/system/todosync@.service.d/override.conf"
    dropin.write_text("[Service]\nEnvironment=TODOSYNC_LOG_LEVEL=debug\n")
    local = root / "etc/nginx/todosync.d/local.conf"
    local.write_text("client_header_timeout 20s;\n")
    proc = install(root, "--server-name", "api.example.com", "--real-ip-from", "10.0.0.0/8,192.0.2.1",
                   binary=conf["TODOSYNC_BIN"])
    assert unit.read_text() == edited_unit and site.read_text() == edited_site
    for path in (unit, site):
        rel = path.relative_to(root)
        assert f"kept /{rel}" in proc.stderr, proc.stderr
        assert (root / "usr/local/share/todosync/pending" / rel).exists()
    assert dropin.read_text().endswith("TODOSYNC_LOG_LEVEL=debug\n") and local.read_text() == "client_header_timeout 20s;\n"
    real_ip = (root / "etc/nginx/todosync.d/real-ip.conf").read_text()
    assert "set_real_ip_from 10.0.0.0/8;\nset_real_ip_from 192.0.2.1;\nreal_ip_header X-Forwarded-For;" in real_ip
    # A file install.sh wrote and nobody changed since is replaced: here an older timer unit.
    timer = root / "etc/systemd/system/todosync-purge.timer"
    timer.write_text("stale\n")
    sums = root / "usr/local/share/todosync/installed.sha256"
    stale = f"{hashlib.sha256(b'stale' + bytes([10])).hexdigest()}  /etc/systemd/system/todosync-purge.timer"
    sums.write_text("\n".join(stale if line.endswith("/todosync-purge.timer") else line
                              for line in sums.read_text().splitlines()) + "\n")
    install(root, "--server-name", "api.example.com", binary=conf["TODOSYNC_BIN"])
    assert timer.read_text() == (REPO_ROOT / "scripts/systemd/todosync-purge.timer").read_text()
    # Local settings have their place in both server blocks.
    assert edited_site.count("include /etc/nginx/todosync.d/*.conf;") == 2
    bad = subprocess.run(["bash", str(INSTALL), "--root", str(tmp_path / "bad"), "--binary", conf["TODOSYNC_BIN"],
                          "--real-ip-from", "10.0.0.0/8; allow all"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--real-ip-from" in bad.stderr, bad.stdout + bad.stderr


def test_install_replaces_the_unedited_files_of_an_install_before_checksums(conf, tmp_path):
    """An install made by install.sh before it recorded checksums: files equal to what that
    version shipped are upgraded, an edited one is kept."""
    if subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--git-dir"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    first = subprocess.run(["git", "-C", str(REPO_ROOT), "log", "--format=%H", "-S", "installed.sha256", "--",
                            "scripts/install.sh"], capture_output=True, text=True, check=True).stdout.split()
    before = f"{first[-1]}^" if first else "HEAD"  # HEAD: the change is not committed yet
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", before, "scripts", "nginx", "docs", "Sql",
                              "openapi.yaml"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    root = tmp_path / "root"
    subprocess.run(["bash", str(old / "scripts/install.sh"), "--root", str(root), "--binary", conf["TODOSYNC_BIN"],
                    "--server-name", "api.example.com"], capture_output=True, check=True, timeout=120)
    logrotate = root / "etc/logrotate.d/todosync"
    logrotate.write_text(logrotate.read_text() + "# edited\n")
    proc = install(root, "--server-name", "api.example.com", binary=conf["TODOSYNC_BIN"])
    assert "kept /etc/logrotate.d/todosync" in proc.stderr, proc.stderr
    assert proc.stderr.count("kept /") == 1, proc.stderr
    assert "todosync_addr" in (root / "etc/nginx/sites-available/todosync").read_text()
    for unit in ("todosync@.service", "todosync@.socket"):
        assert (root / "etc/systemd/system" / unit).read_text() == (REPO_ROOT / "scripts/systemd" / unit).read_text()


# --------------------------------------------------------------------- the per-address connection cap

def test_site_caps_connections_per_address(conf, tmp_path):
    """Issue 34, item 2, on the production layout: install.sh writes the stream server into
    modules-enabled (main level) and the site listens behind it; an address's connections beyond
    --address-connections, idle keep-alive ones included, get 429 with Retry-After."""
    if os.geteuid() != 0 or not shutil.which("nginx"):
        pytest.skip("needs root and nginx")
    if not Path("/usr/lib/nginx/modules/ngx_stream_module.so").exists():
        pytest.skip("libnginx-mod-stream is not installed")
    state = Path(os.environ.get("TODOSYNC_TEST_STATE_DIR", ""))
    cert, key = state / "tls/cert.pem", state / "tls/key.pem"
    sockets = sorted(Path(conf.get("TODOSYNC_SOCKET_DIR", state / "sock")).glob("fcgi-*.sock"))
    if not (cert.exists() and key.exists() and sockets):
        pytest.skip("the test stack's certificate or responder sockets are not where expected")
    root = tmp_path / "root"
    install(root, "--server-name", "localhost", "--tls-cert", str(cert), "--tls-key", str(key),
            "--instances", str(len(sockets)), "--address-connections", "3", binary=conf["TODOSYNC_BIN"])
    site = (root / "etc/nginx/sites-available/todosync").read_text()
    cap = (root / "etc/nginx/modules-enabled/70-todosync-address-cap.conf").read_text()
    assert "listen 443 " not in site and "listen 80;" not in site, "the site must listen behind the stream server"
    http, https = free_ports(2)
    cap = re.sub(r"listen 80 backlog=4096;\n\s*listen \[::\]:80 backlog=4096;", f"listen 127.0.0.1:{http};", cap)
    cap = re.sub(r"listen 443 backlog=4096;\n\s*listen \[::\]:443 backlog=4096;", f"listen 127.0.0.1:{https};", cap)
    assert f":{http};" in cap and f":{https};" in cap, "the stream server's listen lines changed: update this test"
    (root / "cap.conf").write_text(localized(cap, root, sockets))
    proc = start_site_nginx(root, localized(site, root, sockets), cert, f"https://127.0.0.1:{https}/healthz",
                            main_level=f"include {root}/cap.conf;")
    held: list[socket.socket] = []
    try:
        time.sleep(0.5)  # the probe's connection is gone
        statuses = []
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", http), timeout=5)
            held.append(s)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            head = tsapi.read_head(s)
            statuses.append(head.split(b"\r\n")[0])
            if head.startswith(b"HTTP/1.1 429"):
                assert b"\r\nRetry-After: 1" in head, head
        # Plain HTTP only redirects on the site: the first three are its 308s, held open.
        assert [s.split(b" ")[1] for s in statuses] == [b"308", b"308", b"308", b"429", b"429"], statuses
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=15)
