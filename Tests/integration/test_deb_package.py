"""The Debian package (scripts/build-deb.sh, scripts/deb/; docs/OPERATIONS.md, "Debian package").

Issue 34, item 11: installing was a checkout plus install.sh, whose upgrade detection reads the
checkout's git history and whose staged tree carried a generated database password.

- the package holds the binary at /usr/bin/todosync, the migrations under /usr/share/todosync/Sql,
  units that name those paths, every /etc file as a conffile, and no password at all;
- dpkg installs it into a private root (`dpkg --root DIR --force-script-chrootless`: the
  maintainer scripts run with DPKG_ROOT and touch nothing of this host): the postinst creates the
  user, generates the password into /etc/todosync/todosync.env (0640 root:todosync), enables the
  units and the nginx site, and defers the database account (no MariaDB there);
- an upgrade to a second build keeps the operator's edits (dpkg's conffile handling, no git):
  an edited conffile the package did not change stays silently; for one it changed too dpkg asks,
  and --force-confold keeps the operator's, the new one left as .dpkg-dist; the password is kept;
- remove disables the nginx site (a later install enables it again), purge leaves nothing of the
  package but the backups directory and the system user;
- lintian reports no error and no warning.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from test_release_binary import stack_env

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD = REPO_ROOT / "scripts/build-deb.sh"
DPKG_ROOT_ARGS = ["--force-not-root", "--force-depends", "--force-script-chrootless"]


def build(out: Path, binary: str, *args: str) -> Path:
    proc = subprocess.run(["bash", str(BUILD), "--out", str(out), "--binary", binary, *args],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deb = Path(proc.stdout.strip().splitlines()[-1])
    assert deb.parent == out and deb.exists(), proc.stdout
    return deb


def dpkg(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["dpkg", f"--root={root}", *DPKG_ROOT_ARGS, *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def data_members(deb: Path) -> dict[str, tarfile.TarInfo | bytes]:
    """Every member of the data tarball: path -> contents (files) or TarInfo (the rest)."""
    raw = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    members: dict[str, tarfile.TarInfo | bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for info in tar:
            name = "/" + info.name.removeprefix("./")
            members[name] = tar.extractfile(info).read() if info.isfile() else info
    return members


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    if not shutil.which("dpkg-deb") or not shutil.which("dpkg-shlibdeps") or not shutil.which("chrpath"):
        pytest.skip("dpkg-dev and chrpath are not installed (scripts/stack.sh deps installs them)")
    binary = stack_env()["TODOSYNC_BIN"]
    out = tmp_path_factory.mktemp("deb")
    first = build(out / "1", binary, "--compress", "gzip:1")  # xz: 10-40 s more on a shared box
    # The second: a later version whose site differs (another auth rate), as a release that
    # changes a conffile would; uncompressed, to keep the test short (lintian checks the first).
    second = build(out / "2", binary, "--version", "999.0.0", "--auth-rate", "7", "--compress", "none")
    return first, second


def test_package_layout_and_no_secret(debs):
    deb = debs[0]
    assert re.fullmatch(r"todosync_[0-9][A-Za-z0-9.+~]*_amd64\.deb", deb.name), deb.name
    info = subprocess.run(["dpkg-deb", "-I", str(deb)], capture_output=True, text=True, check=True).stdout
    depends = re.search(r"^ Depends: (.*)$", info, re.M).group(1)
    for package in ("libmariadb3", "libfcgi0ldbl", "libisal2", "libsqlite3-0", "nginx", "libnginx-mod-nchan",
                    "libnginx-mod-stream", "mariadb-client"):
        assert re.search(rf"(^|, ){re.escape(package)}( |,|$)", depends), (package, depends)
    members = data_members(deb)
    binary = members["/usr/bin/todosync"]
    assert isinstance(binary, bytes) and binary.startswith(b"\x7fELF")
    sql = sorted(p.name for p in (REPO_ROOT / "Sql").glob("*.sql"))
    assert sorted(Path(p).name for p in members if p.startswith("/usr/share/todosync/Sql/")
                  and isinstance(members[p], bytes)) == sql
    assert not any(p.startswith("/usr/local") or p.startswith("/etc/systemd") or p.startswith("/var")
                   for p in members), [p for p in members if p.startswith(("/usr/local", "/etc/systemd", "/var"))]
    assert "/etc/todosync/todosync.env" not in members
    # No password in any file: a generated one (the env-file line), or the env file's template.
    for path, content in members.items():
        if isinstance(content, bytes):
            assert not re.search(rb"^TODOSYNC_DB_PASSWORD=[A-Za-z0-9]{8,}\s*$", content, re.M), path
    # Every unit names the packaged binary and migrations, none /usr/local.
    units = {p: c.decode() for p, c in members.items() if p.startswith("/lib/systemd/system/")
             and isinstance(c, bytes)}
    assert "ExecStart=/usr/bin/todosync serve" in units["/lib/systemd/system/todosync@.service"]
    assert ("ExecStart=/usr/bin/todosync migrate --sql-dir /usr/share/todosync/Sql"
            in units["/lib/systemd/system/todosync-migrate.service"])
    assert "ExecStart=/usr/bin/todosync-backup " in units["/lib/systemd/system/todosync-backup.service"]
    assert not [p for p, c in units.items() if re.search(r"^[A-Za-z]+=.*/usr/local/", c, re.M)]
    # Conffiles: exactly the files under /etc.
    control = subprocess.run(["dpkg-deb", "-I", str(deb), "conffiles"], capture_output=True, text=True,
                             check=True).stdout.split()
    etc = sorted(p for p, c in members.items() if p.startswith("/etc/") and isinstance(c, bytes))
    assert sorted(control) == etc and "/etc/nginx/sites-available/todosync" in etc, (control, etc)
    assert {"/etc/logrotate.d/todosync", "/etc/nginx/modules-available/70-todosync-address-cap.conf",
            "/etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf", "/etc/mtail/todosync-nginx.mtail"} <= set(etc)


def private_root(path: Path) -> Path:
    """An empty dpkg database and the few accounts Debian's base system has."""
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
        (path / d).mkdir(parents=True, exist_ok=True)
    for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
        (path / f).touch()
    (path / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                     "www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n")
    (path / "etc/group").write_text("root:x:0:\nwww-data:x:33:\nshadow:x:42:\n")
    (path / "etc/shadow").write_text("root:*:19000:0:99999:7:::\nwww-data:*:19000:0:99999:7:::\n")
    (path / "etc/gshadow").write_text("root:*::\nwww-data:*::\nshadow:*::\n")
    for f in ("etc/shadow", "etc/gshadow"):
        (path / f).chmod(0o640)
    return path


UNITS = ["todosync@1.service", "todosync@1.socket", "todosync-migrate.service", "todosync-purge.service",
         "todosync-purge.timer", "todosync-store-days.service", "todosync-store-days.timer",
         "todosync-backup.service", "todosync-backup.timer"]


def verify_units(root: Path) -> None:
    """systemd-analyze, as test_production_install.py does for install.sh's files: the packaged
    units (in /lib) verify with the commands they name present in the root (/usr/bin/todosync),
    and the hardening drop-in applies. The host's units it needs are copied in, then removed."""
    if not shutil.which("systemd-analyze"):
        return
    system = root / "usr/lib/systemd/system"
    kill = root / "bin/kill"
    shutil.copytree("/lib/systemd/system", system, symlinks=True)
    kill.parent.mkdir(exist_ok=True)
    shutil.copy2("/bin/kill", kill)
    try:
        proc = subprocess.run(["systemd-analyze", "verify", f"--root={root}", *UNITS], capture_output=True,
                              text=True, timeout=60, cwd=root)
        assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr
        proc = subprocess.run(["systemd-analyze", "security", f"--root={root}", "--offline=true",
                               "todosync@1.service"], capture_output=True, text=True, timeout=60, cwd=root)
        exposure = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout + proc.stderr)
        assert exposure and float(exposure.group(1)) <= 2.0, proc.stdout[-500:] + proc.stderr
    finally:
        shutil.rmtree(system)
        kill.unlink()
        kill.parent.rmdir()


def test_install_upgrade_remove_purge_in_a_private_root(debs, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("useradd --prefix and chown need root")
    first, second = debs
    root = private_root(tmp_path / "root")
    proc = dpkg(root, "-i", str(first))
    out = proc.stdout + proc.stderr
    assert "deb-systemd-helper: error" not in out and "WARNING" not in out, out
    assert (root / "usr/bin/todosync").exists() and not (root / "usr/local").exists()
    version = subprocess.run([str(root / "usr/bin/todosync"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("1."), version.stdout + version.stderr

    # The postinst: the user, the configuration with a fresh password, the directories.
    users = {line.split(":")[0]: line.split(":") for line in (root / "etc/passwd").read_text().splitlines()}
    groups = {line.split(":")[0]: line.split(":") for line in (root / "etc/group").read_text().splitlines()}
    assert "todosync" in users and users["todosync"][6] == "/usr/sbin/nologin", users
    uid, gid = int(users["todosync"][2]), int(groups["todosync"][2])
    env_file = root / "etc/todosync/todosync.env"
    st = env_file.stat()
    assert (st.st_mode & 0o777, st.st_uid, st.st_gid) == (0o640, 0, gid), oct(st.st_mode)
    env = env_file.read_text()
    password = re.search(r"^TODOSYNC_DB_PASSWORD=([A-Za-z0-9]{24,})$", env, re.M)
    assert password, env
    assert "TODOSYNC_DB_SOCKET=/run/mysqld/mysqld.sock" in env and "TODOSYNC_SQL_DIR=/usr/share/todosync/Sql" in env
    config = subprocess.run([str(root / "usr/bin/todosync"), "config"], capture_output=True, text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", "TODOSYNC_CONFIG": str(env_file)})
    assert config.returncode == 0 and password.group(1) not in config.stdout, config.stdout + config.stderr
    backups = (root / "var/backups/todosync").stat()
    assert (backups.st_mode & 0o777, backups.st_uid) == (0o700, uid)
    snapshots = (root / "var/lib/todosync/snapshots").stat()
    assert (snapshots.st_uid, snapshots.st_gid) == (uid, 33), "tmpfiles.d ran in the root"
    assert (root / "var/lib/todosync/database-pending").exists(), "no MariaDB here: the account is still to make"
    # Units enabled (offline: links in the root), the site and the connection cap enabled.
    wants = root / "etc/systemd/system"
    for link in ("sockets.target.wants/todosync@1.socket", "sockets.target.wants/todosync@2.socket",
                 "multi-user.target.wants/todosync@1.service", "multi-user.target.wants/todosync-migrate.service",
                 "timers.target.wants/todosync-purge.timer", "timers.target.wants/todosync-backup.timer",
                 "timers.target.wants/todosync-store-days.timer"):
        assert (wants / link).is_symlink(), link
    # the instances' links, as `systemctl enable` makes them from the units' [Install] sections
    for unit, target in (("todosync@.socket", "sockets.target"), ("todosync@.service", "multi-user.target")):
        assert f"WantedBy={target}" in (root / "lib/systemd/system" / unit).read_text(), unit
        for i in (1, 2):
            link = wants / f"{target}.wants" / unit.replace("@", f"@{i}")
            assert os.readlink(link) == f"/lib/systemd/system/{unit}", link
    assert os.readlink(root / "etc/nginx/sites-enabled/todosync") == "../sites-available/todosync"
    assert (root / "etc/nginx/modules-enabled/70-todosync-address-cap.conf").resolve().is_file()

    verify_units(root)

    # The operator edits two conffiles and disables an instance.
    logrotate = root / "etc/logrotate.d/todosync"
    logrotate.write_text(logrotate.read_text() + "# the operator's line\n")
    site = root / "etc/nginx/sites-available/todosync"
    edited_site = site.read_text().replace("server_name _;", "server_name api.example.com;")
    assert edited_site != site.read_text()
    site.write_text(edited_site)
    (wants / "sockets.target.wants/todosync@2.socket").unlink()

    # Upgrade. The site changed in the package too: dpkg asks (here stdin is empty, so it stops
    # with the package unpacked and the operator's site untouched); --force-confold answers "keep
    # mine" and leaves the package's beside it.
    asked = dpkg(root, "-i", str(second), check=False)
    assert asked.returncode != 0 and "conffile prompt" in asked.stdout + asked.stderr, asked.stdout + asked.stderr
    assert site.read_text() == edited_site
    proc = dpkg(root, "--force-confold", "--configure", "todosync")
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert logrotate.read_text().endswith("# the operator's line\n"), "an unchanged conffile lost the edit"
    assert not logrotate.with_name("todosync.dpkg-dist").exists()
    assert site.read_text() == edited_site
    assert "rate=7r/s" in site.with_name("todosync.dpkg-dist").read_text()
    assert env_file.read_text() == env, "the upgrade replaced the configuration (and its password)"
    assert not (wants / "sockets.target.wants/todosync@2.socket").exists(), "the upgrade enabled a disabled instance"
    status = subprocess.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f", "${Version}", "todosync"],
                            capture_output=True, text=True, check=True).stdout
    assert status == "999.0.0"

    # Remove: the site and the cap are disabled, the configuration stays; installing enables them again.
    dpkg(root, "-r", "todosync")
    assert not (root / "usr/bin/todosync").exists() and not (root / "lib/systemd/system/todosync@.service").exists()
    assert not os.path.lexists(root / "etc/nginx/sites-enabled/todosync")
    assert not os.path.lexists(root / "etc/nginx/modules-enabled/70-todosync-address-cap.conf")
    assert site.read_text() == edited_site and env_file.read_text() == env
    dpkg(root, "--force-confold", "-i", str(second))
    assert os.path.islink(root / "etc/nginx/sites-enabled/todosync")
    assert env_file.read_text() == env

    # Purge: nothing of the package is left but the backups' directory and the user.
    dpkg(root, "--purge", "todosync")
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not p.is_dir() and not str(p.relative_to(root)).startswith(("var/lib/dpkg/", "etc/passwd",
                                                                                   "etc/group", "etc/shadow",
                                                                                   "etc/gshadow")))
    assert left == [], left
    assert not (root / "etc/todosync").exists() and not (root / "var/lib/todosync").exists()
    assert (root / "var/backups/todosync").is_dir(), "purge must not delete the backups"


def test_lintian_reports_no_error_or_warning(debs):
    if not shutil.which("lintian"):
        pytest.skip("lintian is not installed (scripts/stack.sh deps installs it)")
    proc = subprocess.run(["lintian", "--fail-on", "error,warning", str(debs[0])], capture_output=True, text=True, timeout=300)
    tags = [line for line in proc.stdout.splitlines() if re.match(r"^[EW]: ", line)]
    assert proc.returncode == 0 and not tags, proc.stdout + proc.stderr


# ------------------------------------------------------------------- the host path of the postinst

SHIM = """#!/bin/sh
echo "$(basename "$0") $*" >>"$SHIM_LOG"
case "$(basename "$0") $*" in
    "todosync create-database"*) exit "${SHIM_CREATE_DATABASE:-0}" ;;
esac
exit 0
"""

NAMESPACE = r"""
set -e
T=$1; shift
mount --bind "$T/etc" /etc
for d in lib log backups; do mount --bind "$T/var-$d" "/var/$d"; done
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system /run/mysqld
if [ "$WITH_MARIADB" = 1 ]; then
    python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/run/mysqld/mysqld.sock")'
fi
mount -t overlay overlay -o "lowerdir=$T/shim:/usr/bin" /usr/bin
mount -t overlay overlay -o "lowerdir=$T/pkg/lib/systemd/system:/lib/systemd/system" /lib/systemd/system
mount -t overlay overlay -o "lowerdir=$T/pkg/usr/lib/tmpfiles.d:/usr/lib/tmpfiles.d" /usr/lib/tmpfiles.d
exec sh "$T/ctrl/postinst" "$@"
"""


@pytest.fixture
def host(debs, tmp_path):
    """A private mount namespace that looks like a host with systemd running, for the postinst
    without DPKG_ROOT: /etc is a copy (without a todosync user), /var/lib, /var/log, /var/backups
    and /run are empty, the package's units are overlaid on /lib/systemd/system, and systemctl,
    deb-systemd-invoke, nginx and /usr/bin/todosync are stand-ins that log their arguments (first
    on PATH; /usr/bin/todosync overlaid). Nothing of this host is written."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a mount namespace)")
    t = tmp_path
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(t / "pkg")], check=True)
    subprocess.run(["dpkg-deb", "-e", str(debs[0]), str(t / "ctrl")], check=True)
    shutil.copytree("/etc", t / "etc", symlinks=True, ignore=shutil.ignore_patterns("todosync"))
    for name in ("passwd", "group", "shadow", "gshadow"):
        f = t / "etc" / name
        f.write_text("".join(line for line in f.read_text().splitlines(keepends=True)
                             if not line.startswith(("todosync:", "todosync-"))))
    shutil.copytree(t / "pkg/etc", t / "etc", dirs_exist_ok=True)  # the conffiles, as dpkg unpacks them
    for d in ("var-lib", "var-log", "var-backups", "shim"):
        (t / d).mkdir()
    for name in ("systemctl", "deb-systemd-invoke", "nginx", "todosync"):
        (t / "shim" / name).write_text(SHIM)
        (t / "shim" / name).chmod(0o755)
    (t / "ns.sh").write_text(NAMESPACE)

    def postinst(*args: str, mariadb: bool, create_database: int = 0) -> tuple[str, list[str]]:
        log = t / "shim.log"
        log.write_text("")
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(t / "ns.sh"), str(t),
                               *args], capture_output=True, text=True, timeout=60,
                              env={"PATH": f"{t}/shim:/usr/sbin:/usr/bin:/sbin:/bin", "SHIM_LOG": str(log),
                                   "DPKG_MAINTSCRIPT_PACKAGE": "todosync", "DPKG_MAINTSCRIPT_NAME": "postinst",
                                   "WITH_MARIADB": "1" if mariadb else "0",
                                   "SHIM_CREATE_DATABASE": str(create_database)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr, log.read_text().splitlines()

    return t, postinst


def test_postinst_on_a_host_defers_the_database_then_migrates_before_restarting(host):
    t, postinst = host
    # MariaDB not there: the install succeeds, says what to do, starts nothing that needs it.
    out, steps = postinst("configure", "", mariadb=False)
    assert "WARNING: MariaDB did not answer on /run/mysqld/mysqld.sock" in out, out
    assert "todosync create-database --admin-user root" in out and "dpkg-reconfigure todosync" in out, out
    assert not any(s.startswith("todosync ") for s in steps), steps
    assert not any("restart todosync@" in s for s in steps), steps
    assert (t / "var-lib/todosync/database-pending").exists()
    env = (t / "etc/todosync/todosync.env").read_text()
    assert re.search(r"^TODOSYNC_DB_PASSWORD=[A-Za-z0-9]{24,}$", env, re.M), env
    assert re.search(r"^todosync:x:\d+:\d+::/nonexistent:/usr/sbin/nologin$", (t / "etc/passwd").read_text(), re.M)
    assert os.readlink(t / "etc/systemd/system/sockets.target.wants/todosync@1.socket") == \
        "/lib/systemd/system/todosync@.socket"
    assert (t / "var-lib/todosync/snapshots").is_dir(), "systemd-tmpfiles did not run"

    # A later configure (dpkg-reconfigure, an upgrade) with MariaDB up: the account, then what
    # install.sh does, in its order.
    out, steps = postinst("configure", "1.0.0", mariadb=True)
    assert "created the database" in out and "WARNING" not in out, out
    assert not (t / "var-lib/todosync/database-pending").exists()
    assert (t / "etc/todosync/todosync.env").read_text() == env, "the password changed"
    create = steps.index("todosync create-database --admin-user root --wait-seconds 5")
    migrate = steps.index("deb-systemd-invoke restart todosync-migrate.service")
    check = steps.index("todosync config --check --sql-dir /usr/share/todosync/Sql")
    restarts = [steps.index(f"deb-systemd-invoke restart todosync@{i}.service") for i in (1, 2)]
    assert create < migrate < check < restarts[0] < restarts[1], steps
    assert steps.index("deb-systemd-invoke start todosync@1.socket") < restarts[0], steps
    assert steps.index("nginx -t") < steps.index("deb-systemd-invoke reload nginx.service"), steps

    # MariaDB up but refusing: a warning, the marker stays, no responder is restarted.
    (t / "var-lib/todosync/database-pending").touch()
    out, steps = postinst("configure", "1.0.0", mariadb=True, create_database=1)
    assert "WARNING: MariaDB did not answer" in out and (t / "var-lib/todosync/database-pending").exists(), out
    assert not any("restart todosync@" in s for s in steps), steps


def test_build_needs_no_git(debs, tmp_path):
    """The package comes from the files alone (install.sh's git lookups run only against an earlier
    install, which a fresh staging tree is not): outside a checkout it builds with --version and,
    without, says to pass one."""
    tree = tmp_path / "tree"
    for name in ("scripts", "nginx", "Sql", "docs"):
        shutil.copytree(REPO_ROOT / name, tree / name, symlinks=True)
    shutil.copy2(REPO_ROOT / "openapi.yaml", tree / "openapi.yaml")
    binary = stack_env()["TODOSYNC_BIN"]
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    proc = subprocess.run(["bash", str(tree / "scripts/build-deb.sh"), "--out", str(tmp_path / "out"), "--binary",
                           binary], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "pass --version" in proc.stderr, proc.stdout + proc.stderr
    proc = subprocess.run(["bash", str(tree / "scripts/build-deb.sh"), "--out", str(tmp_path / "out"), "--binary",
                           binary, "--version", "1.2.3", "--compress", "none"], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = data_members(tmp_path / "out/todosync_1.2.3_amd64.deb")
    first = data_members(debs[0])
    assert {p for p in built if not p.startswith("/usr/share/doc/")} == \
        {p for p in first if not p.startswith("/usr/share/doc/")}
