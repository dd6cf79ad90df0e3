#!/usr/bin/env bash
# Builds the Debian package of TodoSync (docs/OPERATIONS.md, "Debian package"):
#
#   scripts/build-deb.sh --out DIR [--binary PATH] [--version VERSION] [install.sh options]
#
# writes DIR/todosync_<version>_<arch>.deb. The files are the ones scripts/install.sh renders
# (staged with `install.sh --root STAGING --prefix /usr --no-config`), placed where Debian wants them:
#
#   /usr/bin/todosync, /usr/bin/todosync-backup      the binary (stripped: DIR/todosync_<version>_<arch>.debug
#                                                    keeps its symbols; no $ORIGIN RUNPATH) and backup.sh
#   /usr/share/todosync/Sql/                         migrations
#   /usr/share/doc/todosync/                         API.md, OPERATIONS.md, openapi.yaml, copyright, changelog.gz
#   /usr/share/man/man1/todosync.1.gz, todosync-backup.1.gz
#   /lib/systemd/system/                             the units and drop-ins (hardening.conf, nginx's and
#                                                    mtail's): not conffiles; change them with drop-ins in
#                                                    /etc/systemd/system (systemctl edit)
#   /usr/lib/tmpfiles.d/todosync.conf                /run/todosync-live, /run/todosync-front, the snapshots
#   /etc/nginx/sites-available/todosync              conffile (server_name _ and Debian's snakeoil
#                                                    certificate until the operator sets them)
#   /etc/nginx/modules-available/70-todosync-address-cap.conf  conffile; postinst links it into
#                                                    modules-enabled (and the site into sites-enabled)
#   /etc/logrotate.d/todosync, /etc/mtail/todosync-nginx.mtail,
#   /etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf conffiles
#
# No secret is in the package: /etc/todosync/todosync.env, with the generated database password,
# is written on the target by the postinst (scripts/deb/postinst), which also creates the user and
# the database account. The build refuses to package any TODOSYNC_DB_PASSWORD value.
#
# Options:
#   --out DIR        where the .deb goes (required)
#   --binary PATH    the release binary (default: .build/release/todosync; it is not built here)
#   --version V      the package version (default: the binary's version, then "+git", the commit's
#                    UTC date and time and its short hash, e.g. 1.0.0+git20261207150327.fcd0847:
#                    later commits sort later; a checkout with uncommitted changes adds ".dirty".
#                    Without git, --version is required)
#   --compress X     dpkg-deb's compressor, optionally with a level (X:LEVEL): xz (default), gzip
#                    (faster, bigger; gzip:1 fastest), none (lintian refuses it; bookworm's lintian
#                    also refuses zstd)
#   --instances N, --auth-rate N, ... any other option goes to install.sh (not --root, --prefix,
#                    --server-name, --tls-cert, --tls-key: those are set in the site on the host)
set -euo pipefail

REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
OUT=""
BINARY=$REPO_ROOT/.build/release/todosync
VERSION=""
COMPRESS=xz
INSTANCES=2
PASS=()

die() { echo "build-deb.sh: $*" >&2; exit 1; }

while (($#)); do
    case $1 in
        --out) OUT=$2; shift 2 ;;
        --binary) BINARY=$2; shift 2 ;;
        --version) VERSION=$2; shift 2 ;;
        --compress) COMPRESS=$2; shift 2 ;;
        --instances) INSTANCES=$2; PASS+=("$1" "$2"); shift 2 ;;
        --root | --prefix | --server-name | --tls-cert | --tls-key | --dry-run | --no-config)
            die "$1 is not an option of the package (see --help)" ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --*) [[ $# -ge 2 ]] || die "$1 needs a value"; PASS+=("$1" "$2"); shift 2 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ -n $OUT ]] || die "--out DIR is required"
[[ -x $BINARY ]] || die "no executable binary at $BINARY (scripts/stack.sh build, or --binary PATH)"
for tool in dpkg-deb dpkg-shlibdeps chrpath objcopy; do
    command -v "$tool" >/dev/null || die "'$tool' not found (apt-get install dpkg-dev chrpath binutils; scripts/stack.sh deps)"
done
ARCH=$(dpkg --print-architecture)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PKG=$WORK/pkg
cp "$BINARY" "$WORK/todosync"   # one copy: a concurrent rebuild cannot change it half way

if [[ -z $VERSION ]]; then
    upstream=$("$WORK/todosync" --version | awk '{ print $1; exit }')
    [[ $upstream =~ ^[0-9][0-9A-Za-z.]*$ ]] || die "unexpected 'todosync --version': $upstream"
    git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "not a git checkout: pass --version"
    when=$(TZ=UTC git -C "$REPO_ROOT" log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
    VERSION="$upstream+git$when.$(git -C "$REPO_ROOT" rev-parse --short=7 HEAD)"
    [[ -z $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no) ]] || VERSION+=.dirty
fi
[[ $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "--version: not a native Debian version: $VERSION"

# --- the files, as install.sh renders them ------------------------------------------------------
"$REPO_ROOT/scripts/install.sh" --root "$PKG" --binary "$WORK/todosync" --prefix /usr --no-config \
    --server-name _ "${PASS[@]}" >/dev/null
rm -rf "$PKG/usr/share/todosync/installed.sha256" "$PKG/usr/share/todosync/pending" "$PKG/var" \
    "$PKG/etc/nginx/sites-enabled/todosync"
# Units belong to the package in /lib (bookworm's place); /etc/systemd/system stays the operator's.
mkdir -p "$PKG/lib/systemd" "$PKG/usr/lib/tmpfiles.d"
mv "$PKG/etc/systemd/system" "$PKG/lib/systemd/system"
mv "$PKG/etc/tmpfiles.d/todosync.conf" "$PKG/usr/lib/tmpfiles.d/todosync.conf"
if [[ -f $PKG/etc/nginx/modules-enabled/70-todosync-address-cap.conf ]]; then
    mkdir -p "$PKG/etc/nginx/modules-available"
    mv "$PKG/etc/nginx/modules-enabled/70-todosync-address-cap.conf" "$PKG/etc/nginx/modules-available/"
fi
# The binary, stripped (62 MB instead of 84): its debug information and symbols go to
# DIR/todosync_<version>_<arch>.debug, named in the binary (gnu-debuglink), to symbolicate a
# backtrace (keep it with the release). And without the toolchain's RUNPATH $ORIGIN: the Swift
# runtime is linked in statically, nothing is loaded from /usr/bin.
mkdir -p "$OUT"
debug="$OUT/todosync_${VERSION}_$ARCH.debug"
objcopy --only-keep-debug "$PKG/usr/bin/todosync" "$debug"
chmod 0644 "$debug"
objcopy --strip-unneeded --remove-section=.comment --remove-section=.note --add-gnu-debuglink="$debug" \
    "$PKG/usr/bin/todosync"
chrpath -d "$PKG/usr/bin/todosync" >/dev/null
"$PKG/usr/bin/todosync" --version >/dev/null || die "the packaged binary does not run"

doc=$PKG/usr/share/doc/todosync
cat >"$doc/copyright" <<'EOT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: todosync
Comment: The repository states no licence (there is no LICENSE file); until one is chosen the
 package is for the project's own hosts only.

Files: *
Copyright: 2026 the TodoSync authors
License: proprietary
 All rights reserved by the TodoSync authors. The Swift runtime and the Swift packages
 linked into /usr/bin/todosync are under the Apache License 2.0 with the Runtime Library
 Exception (on Debian: /usr/share/common-licenses/Apache-2.0).
EOT
{
    printf 'todosync (%s) unstable; urgency=medium\n\n' "$VERSION"
    printf '  * Built by scripts/build-deb.sh from commit %s.\n\n' \
        "$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    printf ' -- TodoSync maintainers <maintainers@todosync.invalid>  %s\n' "$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}")"
} | gzip -9n >"$doc/changelog.gz"
mkdir -p "$PKG/usr/share/man/man1"
for page in todosync.1 todosync-backup.1; do
    gzip -9n <"$REPO_ROOT/scripts/deb/$page" >"$PKG/usr/share/man/man1/$page.gz"
done
find "$PKG" -type d -empty -delete
chmod -R u+rwX,go+rX,go-w "$PKG"
chmod 0644 "$doc"/* "$PKG/usr/share/todosync/Sql"/* "$PKG/usr/share/man/man1"/*

# --- control ------------------------------------------------------------------------------------
DEBIAN=$PKG/DEBIAN
mkdir -p "$DEBIAN" "$WORK/debian"
for script in postinst prerm postrm; do
    sed "s/@INSTANCES@/$INSTANCES/" "$REPO_ROOT/scripts/deb/$script" >"$DEBIAN/$script"
    chmod 0755 "$DEBIAN/$script"
done
(cd "$PKG" && find etc -type f | sort | sed 's|^|/|') >"$DEBIAN/conffiles"
# Libraries: what the binary links, as dpkg-shlibdeps reads the build host's shlibs/symbols files.
printf 'Source: todosync\n\nPackage: todosync\nArchitecture: any\n' >"$WORK/debian/control"
shlibs=$(cd "$WORK" && dpkg-shlibdeps -O "$PKG/usr/bin/todosync" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $shlibs ]] || die "dpkg-shlibdeps found no libraries"
cat >"$DEBIAN/control" <<EOT
Package: todosync
Version: $VERSION
Architecture: $ARCH
Maintainer: TodoSync maintainers <maintainers@todosync.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$PKG" | cut -f1)
Depends: $shlibs, nginx, libnginx-mod-nchan, libnginx-mod-stream, ssl-cert, mariadb-client, passwd
Recommends: mariadb-server, mtail, logrotate
Section: web
Priority: optional
Description: offline-first todo sync server (FastCGI responder behind nginx)
 TodoSync serves tasks, tags and per-day statistics over HTTPS, with a sync
 protocol for devices that edit a local database offline: they pull every
 change since their cursor and push their queued edits, applied exactly once.
 .
 This package holds the responder, its systemd units (socket-activated
 instances, migrations, hourly purge, daily backup), the nginx site and
 MariaDB's binary-log settings. The postinst creates the todosync user, the
 configuration with a generated database password and, when MariaDB answers
 on its socket, the database account.
EOT
(cd "$PKG" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$DEBIAN/md5sums"
if [[ -e $PKG/etc/todosync/todosync.env ]] ||
    grep -rqE '^TODOSYNC_DB_PASSWORD=[A-Za-z0-9]{16,}[[:space:]]*$' "$PKG" --exclude-dir=DEBIAN; then
    die "a configuration with a database password was staged: refusing to package it"
fi

mkdir -p "$OUT"
deb="$OUT/todosync_${VERSION}_$ARCH.deb"
level=()
[[ $COMPRESS != *:* ]] || level=(-z"${COMPRESS#*:}")
dpkg-deb --root-owner-group -Z"${COMPRESS%%:*}" "${level[@]}" --build "$PKG" "$deb" >/dev/null
echo "$deb"
