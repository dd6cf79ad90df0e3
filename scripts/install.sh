#!/usr/bin/env bash
# Installs TodoSync on a Debian host that already runs MariaDB and nginx (docs/OPERATIONS.md):
#
#   /usr/local/bin/todosync                         the release binary (static Swift runtime)
#   /usr/local/bin/todosync-backup                  backup and restore (scripts/backup.sh)
#   /usr/local/share/todosync/Sql/                  migrations (todosync-migrate.service)
#   /usr/local/share/doc/todosync/                  API.md, OPERATIONS.md, openapi.yaml
#   /etc/todosync/todosync.env                      configuration, 0640 root:todosync (kept if present)
#   /etc/systemd/system/todosync@.socket, todosync@.service, todosync-migrate.service,
#     todosync-purge.service, todosync-purge.timer, todosync-store-days.service, todosync-store-days.timer,
#     todosync-backup.service, todosync-backup.timer, and hardening.conf as the drop-in of todosync@.service.d/ and todosync-.service.d/
#   /var/backups/todosync/                          the daily backups, 0700 todosync
#   /etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf  binary log for point-in-time recovery (only
#                                                   when absent; MariaDB reads it at its next restart)
#   /etc/nginx/sites-available/todosync (+ sites-enabled link), with /metrics for loopback; it
#     includes /etc/nginx/todosync.d/*.conf, the operator's own settings (never overwritten)
#   /etc/tmpfiles.d/todosync.conf                   /run/todosync-live/ (0750 root:todosync), live sync's publisher socket
#   /etc/systemd/system/nginx.service.d/todosync-live.conf  removes a stale publisher socket before nginx starts
#   /etc/nginx/todosync.d/real-ip.conf              with --real-ip-from: the proxies' client addresses
#   /etc/nginx/modules-enabled/70-todosync-address-cap.conf  the per-address connection cap: nginx's
#                                                   stream server on ports 80 and 443 (not with
#                                                   --real-ip-from or --address-connections 0); main
#                                                   level, the one place Debian's nginx.conf includes
#   /etc/logrotate.d/todosync                       rotates /var/log/todosync/ (responder and nginx logs)
#   /etc/mtail/todosync-nginx.mtail, /etc/systemd/system/mtail.service.d/todosync.conf
#                                                   nginx's own status counts: mtail over the site's
#                                                   access log, served on --mtail-address:3903
#
# An operator's changes survive upgrades (docs/OPERATIONS.md, "Local changes"): a file above under
# /etc that was edited since install.sh wrote it is kept, the new version is put in
# /usr/local/share/todosync/pending/ and a warning says so (install.sh records what it wrote in
# /usr/local/share/todosync/installed.sha256). Unit changes belong in drop-ins
# (`systemctl edit todosync@.service`: /etc/systemd/system/todosync@.service.d/override.conf),
# nginx changes in /etc/nginx/todosync.d/: install.sh never writes either.
#
# and then (not with --root): creates the `todosync` system user, the database and its account
# (a generated password, only in todosync.env), applies the migrations, starts N responder
# instances by socket activation, the daily purge and backup timers and the store-days timer, installs nginx's nchan
# module (libnginx-mod-nchan, live sync) and mtail when missing, restarts mtail, and reloads nginx.
#
# Usage: scripts/install.sh [options]
#   --binary PATH        the todosync binary (default: build it with `scripts/stack.sh build`)
#   --instances N        responder instances, each with its own socket (default 2)
#   --server-name NAME   nginx server_name (default: this host's FQDN)
#   --tls-cert PATH      certificate and key for nginx (default: Debian's snakeoil pair, from
#   --tls-key PATH         the ssl-cert package; use real ones in production)
#   --db-socket PATH     MariaDB's unix socket (default /run/mysqld/mysqld.sock)
#   --metrics-allow LIST addresses or CIDR ranges (comma-separated) that may read /metrics besides
#                        loopback, e.g. the Prometheus server (default: none)
#   --real-ip-from LIST  the load balancers or proxies in front of nginx (addresses or CIDR ranges,
#                        comma-separated): nginx takes each client's address from their
#                        --real-ip-header (default X-Forwarded-For; or proxy_protocol), so that the
#                        per-address limits apply per client (writes todosync.d/real-ip.conf)
#   --auth-rate N, --auth-burst N, --account-concurrency N, --address-concurrency N,
#   --address-connections N
#                        the site's limits (defaults: nginx/limits.env; --address-connections 0:
#                        no per-address connection cap)
#   --mtail-address ADDR where mtail serves nginx's counts (port 3903) for Prometheus: 127.0.0.1
#                        (the default) when Prometheus runs here, else a private address it reaches
#   --root DIR           only write the files, under DIR (for packaging and tests): no user, no
#                        database, no systemctl, no nginx reload
#   --dry-run            with --root: stage the files, then print each host step (users, database,
#                        systemctl, nginx) instead of running it
#   --prefix DIR         where the binary, migrations and docs go (default /usr/local; the units
#                        name DIR/bin/todosync and DIR/share/todosync/Sql; scripts/build-deb.sh
#                        stages with --prefix /usr)
#   --no-config          with --root: no /etc/todosync/todosync.env (no password generated; the
#                        Debian package's postinst writes it on the target)
set -euo pipefail

REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
BINARY=""
INSTANCES=2
SERVER_NAME=$(hostname -f 2>/dev/null || hostname)
TLS_CERT=/etc/ssl/certs/ssl-cert-snakeoil.pem
TLS_KEY=/etc/ssl/private/ssl-cert-snakeoil.key
DB_SOCKET=/run/mysqld/mysqld.sock
ROOT=""
METRICS_ALLOW=""
REAL_IP_FROM=""
REAL_IP_HEADER=X-Forwarded-For
MTAIL_ADDRESS=127.0.0.1
DRY_RUN=0
PREFIX=/usr/local
WRITE_CONFIG=1
# The limits' defaults, shared with the dev stack.
while IFS='=' read -r key value; do
    printf -v "${key#TODOSYNC_}" '%s' "$value"
done < <("$REPO_ROOT/scripts/render-nginx.sh" --limits)

die() { echo "install.sh: $*" >&2; exit 1; }
log() { echo "install.sh: $*"; }

while (($#)); do
    case $1 in
        --binary) BINARY=$2; shift 2 ;;
        --instances) INSTANCES=$2; shift 2 ;;
        --server-name) SERVER_NAME=$2; shift 2 ;;
        --tls-cert) TLS_CERT=$2; shift 2 ;;
        --tls-key) TLS_KEY=$2; shift 2 ;;
        --db-socket) DB_SOCKET=$2; shift 2 ;;
        --metrics-allow) METRICS_ALLOW=$2; shift 2 ;;
        --real-ip-from) REAL_IP_FROM=$2; shift 2 ;;
        --real-ip-header) REAL_IP_HEADER=$2; shift 2 ;;
        --mtail-address) MTAIL_ADDRESS=$2; shift 2 ;;
        --auth-rate) AUTH_RATE=$2; shift 2 ;;
        --auth-burst) AUTH_BURST=$2; shift 2 ;;
        --account-concurrency) ACCOUNT_CONCURRENCY=$2; shift 2 ;;
        --address-concurrency) ADDRESS_CONCURRENCY=$2; shift 2 ;;
        --address-connections) ADDRESS_CONNECTIONS=$2; shift 2 ;;
        --root) ROOT=$(realpath -m "$2"); shift 2 ;;
        --dry-run) DRY_RUN=1; shift ;;
        --prefix) PREFIX=${2%/}; shift 2 ;;
        --no-config) WRITE_CONFIG=0; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ $INSTANCES =~ ^[1-9][0-9]?$ ]] || die "--instances must be 1..99"
for limit in AUTH_RATE AUTH_BURST ACCOUNT_CONCURRENCY ADDRESS_CONCURRENCY; do
    option=${limit,,}
    [[ ${!limit} =~ ^[1-9][0-9]{0,6}$ ]] || die "--${option//_/-} must be a positive integer (got '${!limit}')"
done
[[ $MTAIL_ADDRESS =~ ^[0-9A-Fa-f.:]+$ ]] || die "--mtail-address must be an IP address (got '$MTAIL_ADDRESS')"
[[ $ADDRESS_CONNECTIONS =~ ^[0-9]{1,5}$ ]] && ((ADDRESS_CONNECTIONS <= 65535)) ||
    die "--address-connections must be 0..65535 (got '$ADDRESS_CONNECTIONS')"
[[ -n $ROOT || $EUID -eq 0 ]] || die "run as root (or stage files with --root DIR)"
((!DRY_RUN)) || [[ -n $ROOT ]] || die "--dry-run needs --root DIR"
((WRITE_CONFIG)) || { [[ -n $ROOT ]] && ((!DRY_RUN)); } || die "--no-config needs --root DIR (and no --dry-run)"
[[ $PREFIX =~ ^(/[A-Za-z0-9._-]+)+$ ]] || die "--prefix must be an absolute path (got '$PREFIX')"

if [[ -z $BINARY ]]; then
    "$REPO_ROOT/scripts/stack.sh" build
    BINARY=$(cd "$REPO_ROOT" && swift build -c release --show-bin-path)/todosync
fi
[[ -x $BINARY ]] || die "no executable binary at $BINARY"

# --- files -------------------------------------------------------------------------------------
SHARE=$ROOT$PREFIX/share/todosync
INSTALLED_SUMS=$SHARE/installed.sha256
PENDING=$SHARE/pending
KEPT=()

sha256_of() { sha256sum | cut -d' ' -f1; }
# The units as this install's --prefix has them: they name /usr/local/bin/todosync and
# /usr/local/share/todosync/Sql (unchanged with the default prefix).
relocate() { if [[ $PREFIX == /usr/local ]]; then cat; else sed "s#/usr/local/#$PREFIX/#g"; fi; }

# Whether FILE is byte for byte a version of SOURCE (a path in this repository) that an earlier
# commit shipped, rendered by RENDER (a command reading the template on stdin; default cat):
# how a file written before install.sh kept checksums is told from one an operator edited. RENDER
# finds that same commit's nginx/ snippets and scripts/ under $RENDER_ROOT: a snippet or a
# generated location changed since must not make an old site look edited.
RENDER_ROOT=$REPO_ROOT
shipped_before() { # SOURCE FILE [RENDER...]
    local source=$1 file=$2 sum commit old found=1
    shift 2
    (($#)) || set -- cat
    [[ -n $source ]] && git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1 || return 1
    sum=$(sha256_of <"$file")
    old=$(mktemp -d)
    while IFS= read -r commit; do
        rm -rf "${old:?}/nginx" "${old:?}/scripts"
        git -C "$REPO_ROOT" archive "$commit" nginx scripts 2>/dev/null | tar -x -C "$old" 2>/dev/null || true
        if [[ $(git -C "$REPO_ROOT" show "$commit:$source" 2>/dev/null | RENDER_ROOT=$old "$@" 2>/dev/null |
            sha256_of) == "$sum" ]]; then
            found=0
            break
        fi
    done < <(git -C "$REPO_ROOT" log --format=%H -- "$source" 2>/dev/null)
    rm -rf "$old"
    return "$found"
}

# install_conffile MODE DEST SOURCE [RENDER...] < CONTENT: writes DEST (a file under /etc) unless
# an operator changed it since install.sh wrote it: then DEST is kept, CONTENT goes to
# $PENDING/<path> and a warning names both. Unchanged means: its checksum is the one recorded
# when install.sh wrote it, or (no record: an install before checksums) it equals a version
# SOURCE had in an earlier commit, rendered by RENDER (SOURCE empty: a file that is new).
install_conffile() {
    local mode=$1 dest=$2 source=$3 rel new tmp current recorded=""
    shift 3
    rel=${dest#"$ROOT"}
    tmp=$(mktemp)
    cat >"$tmp"
    new=$(sha256_of <"$tmp")
    [[ -f $INSTALLED_SUMS ]] && recorded=$(awk -v p="$rel" '$2 == p { sum = $1 } END { print sum }' "$INSTALLED_SUMS")
    if [[ -f $dest ]]; then
        current=$(sha256_of <"$dest")
        if [[ $current != "$new" && $current != "$recorded" ]] &&
            { [[ -n $recorded ]] || ! shipped_before "$source" "$dest" "$@"; }; then
            install -D -m "$mode" "$tmp" "$PENDING$rel"
            rm -f "$tmp"
            KEPT+=("$rel")
            echo "install.sh: WARNING: kept $rel: it was changed since install.sh wrote it; the new version is" \
                "${PENDING#"$ROOT"}$rel (merge it in, or delete $rel and install again)" >&2
            return 0
        fi
    fi
    install -D -m "$mode" "$tmp" "$dest.todosync-new"
    rm -f "$tmp" "$PENDING$rel"
    mv -f "$dest.todosync-new" "$dest"
    mkdir -p "$SHARE"
    { awk -v p="$rel" '$2 != p' "$INSTALLED_SUMS" 2>/dev/null || true; printf '%s  %s\n' "$new" "$rel"; } >"$INSTALLED_SUMS.new"
    mv -f "$INSTALLED_SUMS.new" "$INSTALLED_SUMS"
}

SYSTEMD=$ROOT/etc/systemd/system
install -d -m 0755 "$ROOT$PREFIX/bin" "$ROOT$PREFIX/share/todosync" "$ROOT$PREFIX/share/doc/todosync" \
    "$SYSTEMD/todosync@.service.d" "$SYSTEMD/todosync-.service.d" \
    "$ROOT/etc/nginx/sites-available" "$ROOT/etc/nginx/sites-enabled" "$ROOT/etc/logrotate.d"
# The responders' (systemd appends their stderr) and the site's access log; root's, like /var/log.
install -d -m 0755 "$ROOT/var/log/todosync"
install_conffile 0644 "$ROOT/etc/logrotate.d/todosync" scripts/logrotate/todosync <"$REPO_ROOT/scripts/logrotate/todosync"
# nginx's own status counts (docs/OPERATIONS.md, "nginx's own counts"): Debian's mtail unit loads
# every program in /etc/mtail; the drop-in names the log and the address.
install -d -m 0755 "$ROOT/etc/mtail" "$ROOT/etc/systemd/system/mtail.service.d"
install_conffile 0644 "$ROOT/etc/mtail/todosync-nginx.mtail" scripts/mtail/todosync-nginx.mtail \
    <"$REPO_ROOT/scripts/mtail/todosync-nginx.mtail"
install_conffile 0644 "$ROOT/etc/systemd/system/mtail.service.d/todosync.conf" scripts/systemd/mtail-todosync.conf \
    < <(sed "s/^Environment=HOST=.*/Environment=HOST=$MTAIL_ADDRESS/" "$REPO_ROOT/scripts/systemd/mtail-todosync.conf")
install -m 0755 "$BINARY" "$ROOT$PREFIX/bin/todosync.new"
install -m 0755 "$REPO_ROOT/scripts/backup.sh" "$ROOT$PREFIX/bin/todosync-backup"
install -d -m 0700 "$ROOT/var/backups/todosync"
# Point-in-time recovery needs MariaDB's binary log; the file is the administrator's once there.
install -d -m 0755 "$ROOT/etc/mysql/mariadb.conf.d"
BINLOG_CNF=$ROOT/etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf
new_binlog_cnf=0
if [[ ! -f $BINLOG_CNF ]]; then
    install -m 0644 "$REPO_ROOT/scripts/mariadb/60-todosync-binlog.cnf" "$BINLOG_CNF"
    new_binlog_cnf=1
fi
mv -f "$ROOT$PREFIX/bin/todosync.new" "$ROOT$PREFIX/bin/todosync"   # atomic: running responders keep the old inode
rm -rf "$ROOT$PREFIX/share/todosync/Sql.new"
cp -r "$REPO_ROOT/Sql" "$ROOT$PREFIX/share/todosync/Sql.new"
rm -rf "$ROOT$PREFIX/share/todosync/Sql"
mv "$ROOT$PREFIX/share/todosync/Sql.new" "$ROOT$PREFIX/share/todosync/Sql"
install -m 0644 "$REPO_ROOT/docs/API.md" "$REPO_ROOT/docs/OPERATIONS.md" "$REPO_ROOT/openapi.yaml" \
    "$ROOT$PREFIX/share/doc/todosync/"
for unit in todosync@.socket todosync@.service todosync-migrate.service todosync-purge.service todosync-purge.timer \
    todosync-store-days.service todosync-store-days.timer todosync-backup.service todosync-backup.timer; do
    install_conffile 0644 "$SYSTEMD/$unit" "scripts/systemd/$unit" relocate < <(relocate <"$REPO_ROOT/scripts/systemd/$unit")
done
for dir in todosync@.service.d todosync-.service.d; do
    install_conffile 0644 "$SYSTEMD/$dir/hardening.conf" scripts/systemd/hardening.conf relocate \
        < <(relocate <"$REPO_ROOT/scripts/systemd/hardening.conf")
done

# Live sync: nginx's nchan publisher listens on a Unix socket in a directory of root and the
# responders' group only (tmpfiles.d creates it at boot, before nginx), named to the responders
# by their unit (TODOSYNC_LIVE_PUBLISHER in todosync@.service).
LIVE_PUBLISHER=/run/todosync-live/pub.sock
install -d -m 0755 "$ROOT/etc/tmpfiles.d"
install_conffile 0644 "$ROOT/etc/tmpfiles.d/todosync.conf" scripts/systemd/todosync.tmpfiles \
    <"$REPO_ROOT/scripts/systemd/todosync.tmpfiles"
install -d -m 0755 "$SYSTEMD/nginx.service.d"
install_conffile 0644 "$SYSTEMD/nginx.service.d/todosync-live.conf" scripts/systemd/nginx-todosync-live.conf \
    <"$REPO_ROOT/scripts/systemd/nginx-todosync-live.conf"

# The nginx site: one upstream server per instance socket; the local settings' directory.
upstream=""
for ((i = 1; i <= INSTANCES; i++)); do
    upstream+="    server unix:/run/todosync/responder-$i.sock max_fails=0;"$'\n'
done
# Kept connections: idle ones cost a responder no thread (TODOSYNC_FASTCGI_DISPATCH=1); nginx
# closes them after 60 s, before a responder would (300 s). Sites installed before checksums
# had none (render_site_as_before).
UPSTREAM_KEEPALIVE=$'    keepalive 32;\n    keepalive_timeout 60s;\n'
IFS=, read -r -a metrics_allow <<<"$METRICS_ALLOW"
metrics_locations() { # the loopback metrics locations, as the scripts of $RENDER_ROOT write them
    "$RENDER_ROOT/scripts/nginx-metrics-locations.sh" "$INSTANCES" /run/todosync/responder-%d.sock \
        "${metrics_allow[@]}" | sed 's/^/    /'
}
metrics_locations >/dev/null || die "--metrics-allow: $METRICS_ALLOW"
# The per-address connection cap (nginx/address-cap-stream.conf.template): its stream server owns
# ports 80 and 443 and hands the site's two servers each connection on a Unix socket in
# /run/todosync-front/ (tmpfiles.d), with the client's address in the PROXY protocol. Off behind
# proxies (--real-ip-from), whose connections are all nginx sees.
FRONT_SOCKET=/run/todosync-front/nginx
CAP_FILE=$ROOT/etc/nginx/modules-enabled/70-todosync-address-cap.conf
address_cap=0
((ADDRESS_CONNECTIONS > 0)) && [[ -z $REAL_IP_FROM ]] && address_cap=1
if ((address_cap)); then
    behind=$'\n    set_real_ip_from unix:;\n    real_ip_header proxy_protocol;'
    site_listen_http="    listen unix:$FRONT_SOCKET-http.sock proxy_protocol;$behind"
    site_listen_https="    listen unix:$FRONT_SOCKET-https.sock ssl http2 proxy_protocol;$behind"
    cap_http=1
else
    site_listen_http=$'    listen 80;\n    listen [::]:80;'
    site_listen_https=$'    listen 443 ssl http2;\n    listen [::]:443 ssl http2;'
    cap_http=""
fi
render_site() { # the site template on stdin, rendered with this install's values
    local template
    template=$(mktemp)
    cat >"$template"
    "$REPO_ROOT/scripts/render-nginx.sh" "$template" SERVER_NAME="$SERVER_NAME" TLS_CERT="$TLS_CERT" \
        TLS_KEY="$TLS_KEY" UPSTREAM_SERVERS="$(printf '%s%s' "$upstream" "$UPSTREAM_KEEPALIVE")" AUTH_RATE="$AUTH_RATE" AUTH_BURST="$AUTH_BURST" \
        ACCOUNT_CONCURRENCY="$ACCOUNT_CONCURRENCY" ADDRESS_CONCURRENCY="$ADDRESS_CONCURRENCY" \
        METRICS_LOCATIONS="$(metrics_locations)" LOCAL_INCLUDE="/etc/nginx/todosync.d/*.conf" \
        LIVE_STREAMS="$LIVE_STREAMS" LIVE_PUBLISHER_SOCKET="$LIVE_PUBLISHER" LIVE_REDIS_HTTP="" LIVE_REDIS_PASS="" \
        SNAPSHOT_DIR=/var/lib/todosync/snapshots \
        LIVE_HTTP="@$RENDER_ROOT/nginx/live-http.conf.template" \
        LIVE_LOCATIONS="@$RENDER_ROOT/nginx/live-locations.conf.template" \
        BODY_LIMITS_HTTP="@$RENDER_ROOT/nginx/body-limits-http.conf.template" \
        SITE_LISTEN_HTTP="$site_listen_http" SITE_LISTEN_HTTPS="$site_listen_https" ADDRESS_CAP_HTTP="${cap_http:+@$RENDER_ROOT/nginx/address-cap-http.conf.template}" \
        FRONT_SOCKET="$FRONT_SOCKET"
    local rc=$?
    rm -f "$template"
    return "$rc"
}
# Installs before checksums rendered the site with these limits, whatever the options: how such
# a site is recognised as unedited.
render_site_as_before() { AUTH_RATE=5 AUTH_BURST=20 ACCOUNT_CONCURRENCY=4 UPSTREAM_KEEPALIVE="" RENDER_NGINX_UNCHECKED=1 render_site; }
site=$(render_site <"$REPO_ROOT/nginx/todosync-site.conf.template") || die "could not render the nginx site"
install_conffile 0644 "$ROOT/etc/nginx/sites-available/todosync" nginx/todosync-site.conf.template \
    render_site_as_before <<<"$site"
ln -sfn ../sites-available/todosync "$ROOT/etc/nginx/sites-enabled/todosync"
if ((address_cap)); then
    install -d -m 0755 "$(dirname "$CAP_FILE")"
    cap=$("$REPO_ROOT/scripts/render-nginx.sh" "$REPO_ROOT/nginx/address-cap-stream.conf.template" STREAM_MODULE="" \
        STREAM_LISTEN_HTTP=$'listen 80 backlog=4096;\n        listen [::]:80 backlog=4096;' \
        STREAM_LISTEN_HTTPS=$'listen 443 backlog=4096;\n        listen [::]:443 backlog=4096;' \
        FRONT_SOCKET="$FRONT_SOCKET" ADDRESS_CONNECTIONS="$ADDRESS_CONNECTIONS") || die "could not render the connection cap"
    install_conffile 0644 "$CAP_FILE" "" <<<"$cap"
elif [[ -f $CAP_FILE ]]; then
    # The site listens on the ports itself now: the stream server must not (nginx would not start).
    rm -f "$CAP_FILE"
    log "removed ${CAP_FILE#"$ROOT"}: no per-address connection cap (--real-ip-from or --address-connections 0)"
fi
install -d -m 0755 "$ROOT/etc/nginx/todosync.d"
if [[ -n $REAL_IP_FROM ]]; then
    real_ip=$("$REPO_ROOT/scripts/nginx-real-ip.sh" "$REAL_IP_FROM" "$REAL_IP_HEADER" 0) ||
        die "--real-ip-from / --real-ip-header: $REAL_IP_FROM / $REAL_IP_HEADER"
    install_conffile 0644 "$ROOT/etc/nginx/todosync.d/real-ip.conf" "" <<<"$real_ip"
fi

# Configuration: written once; an existing file (with its password) is kept on upgrades.
ENV_FILE=$ROOT/etc/todosync/todosync.env
install -d -m 0755 "$ROOT/etc/todosync"
new_password=""
if ((WRITE_CONFIG)) && [[ ! -f $ENV_FILE ]]; then
    new_password=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32)
    umask 077
    cat > "$ENV_FILE" <<EOF
# TodoSync configuration: NAME=VALUE lines, read by the todosync binary (TODOSYNC_CONFIG).
# Only what differs from the binary's defaults; every variable, its value and its source:
#   TODOSYNC_CONFIG=/etc/todosync/todosync.env todosync config --verbose
# Restart the responders after a change: systemctl restart 'todosync@*.service'
TODOSYNC_DB_SOCKET=$DB_SOCKET
TODOSYNC_DB_PASSWORD=$new_password
EOF
    umask 022
fi

if [[ -n $ROOT ]] && ((!DRY_RUN)); then
    log "files staged under $ROOT (no user, database or services touched)"
    ((${#KEPT[@]} == 0)) || log "kept ${#KEPT[@]} changed file(s) (see the warnings above): ${KEPT[*]}"
    exit 0
fi

# --- host --------------------------------------------------------------------------------------
host() { if ((DRY_RUN)); then printf '+ %s\n' "$*"; else "$@"; fi; }
getent group todosync >/dev/null || host groupadd --system todosync
getent passwd todosync >/dev/null ||  # lookups run even in a dry run
    host useradd --system --gid todosync --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin todosync
host chown root:todosync "$ENV_FILE"
host chmod 0640 "$ENV_FILE"
host chown todosync:todosync "$ROOT/var/backups/todosync"
host systemd-tmpfiles --create /etc/tmpfiles.d/todosync.conf
# Live sync: nginx's nchan module (Debian loads it from /etc/nginx/modules-enabled).
dpkg-query -W -f='${Status}' libnginx-mod-nchan 2>/dev/null | grep -q 'install ok installed' ||
    host env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libnginx-mod-nchan
# The per-address connection cap: nginx's stream module (Debian loads it from modules-enabled).
((!address_cap)) || dpkg-query -W -f='${Status}' libnginx-mod-stream 2>/dev/null | grep -q 'install ok installed' ||
    host env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libnginx-mod-stream
# Libraries the binary links that releases added after the first: the system SQLite (snapshots)
# and ISA-L (igzip, the responder's gzip); and mtail, nginx's own status counts.
for package in libsqlite3-0 libisal2 mtail; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
        host env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package"
done

if [[ -n $new_password ]]; then
    log "creating the database and its account (password in $ENV_FILE only)"
    host env TODOSYNC_CONFIG="$ENV_FILE" "$ROOT$PREFIX/bin/todosync" create-database --admin-user root
fi

host systemctl daemon-reload
host systemctl restart todosync-migrate.service          # applies pending migrations, fails loudly
# Before any responder restarts: the configuration as the responders will use it (values, names,
# a session with the password, no migration pending or edited). A failure stops here, with the
# running responders untouched (docs/OPERATIONS.md, "Exit codes").
host env TODOSYNC_CONFIG="$ENV_FILE" "$ROOT$PREFIX/bin/todosync" config --check --sql-dir "$SHARE/Sql"
host systemctl enable todosync-migrate.service todosync-purge.timer todosync-store-days.timer todosync-backup.timer
host systemctl start todosync-purge.timer todosync-store-days.timer todosync-backup.timer
for ((i = 1; i <= INSTANCES; i++)); do
    host systemctl enable --now "todosync@$i.socket"
    host systemctl enable "todosync@$i.service"
    # A rolling restart: one instance at a time, its socket keeps queueing meanwhile.
    host systemctl restart "todosync@$i.service"
done
host systemctl enable mtail.service
host systemctl restart mtail.service                     # reads /etc/mtail and the drop-in again
host nginx -t
host systemctl reload nginx
# worker_connections lives in /etc/nginx/nginx.conf, which is the host's; the file budget is the
# drop-in's LimitNOFILE (140,000, at nginx's next restart). Say when one client address could fill
# the connections (docs/OPERATIONS.md, "File descriptors").
if ((!DRY_RUN)); then
    if ((address_cap)) && ! nginx -T 2>/dev/null | grep -Eq '^\s*worker_shutdown_timeout\s'; then
        echo "install.sh: WARNING: nginx has no worker_shutdown_timeout: behind the connection cap an old worker" \
            "stays after a reload until its last live stream ends (up to 10 minutes); set" \
            "'worker_shutdown_timeout 3s;' in /etc/nginx/nginx.conf (docs/OPERATIONS.md, \"Slow and greedy clients\")" >&2
    fi
    connections=$(nginx -T 2>/dev/null | awk '$1 == "worker_connections" { sub(";", "", $2); print $2; exit }')
    if [[ ! ${connections:-0} =~ ^[0-9]+$ ]] || ((${connections:-0} < 65536)); then
        echo "install.sh: WARNING: nginx has worker_connections ${connections:-unset}: set 'worker_connections 65536;'" \
            "in events {} of /etc/nginx/nginx.conf (LimitNOFILE=140000 in the drop-in covers it), then" \
            "systemctl restart nginx (docs/OPERATIONS.md, \"File descriptors\")" >&2
    fi
fi
log "installed $("$ROOT$PREFIX/bin/todosync" --version): https://$SERVER_NAME/healthz"
if ((new_binlog_cnf)); then
    log "MariaDB's binary log (point-in-time recovery) starts at its next restart: systemctl restart mariadb"
fi
((${#KEPT[@]} == 0)) || log "kept ${#KEPT[@]} changed file(s) (see the warnings above): ${KEPT[*]}"
