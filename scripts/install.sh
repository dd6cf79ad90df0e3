#!/usr/bin/env bash
# Installs TodoSync on a Debian host that already runs MariaDB and nginx (docs/OPERATIONS.md):
#
#   /usr/local/bin/todosync                         the release binary (static Swift runtime)
#   /usr/local/bin/todosync-backup                  backup and restore (scripts/backup.sh)
#   /usr/local/share/todosync/Sql/                  migrations (todosync-migrate.service)
#   /usr/local/share/doc/todosync/                  API.md, OPERATIONS.md, openapi.yaml
#   /etc/todosync/todosync.env                      configuration, 0640 root:todosync (kept if present)
#   /etc/systemd/system/todosync@.socket, todosync@.service, todosync-migrate.service,
#     todosync-purge.service, todosync-purge.timer, todosync-backup.service, todosync-backup.timer,
#     and hardening.conf as the drop-in of todosync@.service.d/ and todosync-.service.d/
#   /var/backups/todosync/                          the daily backups, 0700 todosync
#   /etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf  binary log for point-in-time recovery (only
#                                                   when absent; MariaDB reads it at its next restart)
#   /etc/nginx/sites-available/todosync (+ sites-enabled link), with /metrics for loopback
#   /etc/logrotate.d/todosync                       rotates /var/log/todosync/ (responder and nginx logs)
#
# and then (not with --root): creates the `todosync` system user, the database and its account
# (a generated password, only in todosync.env), applies the migrations, starts N responder
# instances by socket activation and the daily purge and backup timers, and reloads nginx.
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
#   --root DIR           only write the files, under DIR (for packaging and tests): no user, no
#                        database, no systemctl, no nginx reload
#   --dry-run            with --root: stage the files, then print each host step (users, database,
#                        systemctl, nginx) instead of running it
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
DRY_RUN=0

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
        --root) ROOT=$(realpath -m "$2"); shift 2 ;;
        --dry-run) DRY_RUN=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ $INSTANCES =~ ^[1-9][0-9]?$ ]] || die "--instances must be 1..99"
[[ -n $ROOT || $EUID -eq 0 ]] || die "run as root (or stage files with --root DIR)"
((!DRY_RUN)) || [[ -n $ROOT ]] || die "--dry-run needs --root DIR"

if [[ -z $BINARY ]]; then
    "$REPO_ROOT/scripts/stack.sh" build
    BINARY=$(cd "$REPO_ROOT" && swift build -c release --show-bin-path)/todosync
fi
[[ -x $BINARY ]] || die "no executable binary at $BINARY"

# --- files -------------------------------------------------------------------------------------
SYSTEMD=$ROOT/etc/systemd/system
install -d -m 0755 "$ROOT/usr/local/bin" "$ROOT/usr/local/share/todosync" "$ROOT/usr/local/share/doc/todosync" \
    "$SYSTEMD/todosync@.service.d" "$SYSTEMD/todosync-.service.d" \
    "$ROOT/etc/nginx/sites-available" "$ROOT/etc/nginx/sites-enabled" "$ROOT/etc/logrotate.d"
# The responders' (systemd appends their stderr) and the site's access log; root's, like /var/log.
install -d -m 0755 "$ROOT/var/log/todosync"
install -m 0644 "$REPO_ROOT/scripts/logrotate/todosync" "$ROOT/etc/logrotate.d/todosync"
install -m 0755 "$BINARY" "$ROOT/usr/local/bin/todosync.new"
install -m 0755 "$REPO_ROOT/scripts/backup.sh" "$ROOT/usr/local/bin/todosync-backup"
install -d -m 0700 "$ROOT/var/backups/todosync"
# Point-in-time recovery needs MariaDB's binary log; the file is the administrator's once there.
install -d -m 0755 "$ROOT/etc/mysql/mariadb.conf.d"
BINLOG_CNF=$ROOT/etc/mysql/mariadb.conf.d/60-todosync-binlog.cnf
new_binlog_cnf=0
if [[ ! -f $BINLOG_CNF ]]; then
    install -m 0644 "$REPO_ROOT/scripts/mariadb/60-todosync-binlog.cnf" "$BINLOG_CNF"
    new_binlog_cnf=1
fi
mv -f "$ROOT/usr/local/bin/todosync.new" "$ROOT/usr/local/bin/todosync"   # atomic: running responders keep the old inode
rm -rf "$ROOT/usr/local/share/todosync/Sql.new"
cp -r "$REPO_ROOT/Sql" "$ROOT/usr/local/share/todosync/Sql.new"
rm -rf "$ROOT/usr/local/share/todosync/Sql"
mv "$ROOT/usr/local/share/todosync/Sql.new" "$ROOT/usr/local/share/todosync/Sql"
install -m 0644 "$REPO_ROOT/docs/API.md" "$REPO_ROOT/docs/OPERATIONS.md" "$REPO_ROOT/openapi.yaml" \
    "$ROOT/usr/local/share/doc/todosync/"
for unit in todosync@.socket todosync@.service todosync-migrate.service todosync-purge.service todosync-purge.timer \
    todosync-backup.service todosync-backup.timer; do
    install -m 0644 "$REPO_ROOT/scripts/systemd/$unit" "$SYSTEMD/$unit"
done
install -m 0644 "$REPO_ROOT/scripts/systemd/hardening.conf" "$SYSTEMD/todosync@.service.d/hardening.conf"
install -m 0644 "$REPO_ROOT/scripts/systemd/hardening.conf" "$SYSTEMD/todosync-.service.d/hardening.conf"

# The nginx site: one upstream server per instance socket.
upstream=""
for ((i = 1; i <= INSTANCES; i++)); do
    upstream+="    server unix:/run/todosync/responder-$i.sock max_fails=0;"$'\n'
done
site=$(<"$REPO_ROOT/nginx/todosync-site.conf.template")
site=${site//'${SERVER_NAME}'/$SERVER_NAME}
site=${site//'${TLS_CERT}'/$TLS_CERT}
site=${site//'${TLS_KEY}'/$TLS_KEY}
site=${site//'${UPSTREAM_SERVERS}'/${upstream%$'\n'}}
site=${site//'${AUTH_RATE}'/5}
site=${site//'${AUTH_BURST}'/20}
site=${site//'${ACCOUNT_CONCURRENCY}'/4}
IFS=, read -r -a metrics_allow <<<"$METRICS_ALLOW"
metrics=$("$REPO_ROOT/scripts/nginx-metrics-locations.sh" "$INSTANCES" /run/todosync/responder-%d.sock \
    "${metrics_allow[@]}" | sed 's/^/    /') || die "--metrics-allow: $METRICS_ALLOW"
site=${site//'${METRICS_LOCATIONS}'/$metrics}
[[ $site != *'${'* ]] || die "nginx/todosync-site.conf.template has a placeholder install.sh does not fill"
printf '%s\n' "$site" > "$ROOT/etc/nginx/sites-available/todosync"
ln -sfn ../sites-available/todosync "$ROOT/etc/nginx/sites-enabled/todosync"

# Configuration: written once; an existing file (with its password) is kept on upgrades.
ENV_FILE=$ROOT/etc/todosync/todosync.env
install -d -m 0755 "$ROOT/etc/todosync"
new_password=""
if [[ ! -f $ENV_FILE ]]; then
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

if [[ -n $new_password ]]; then
    log "creating the database and its account (password in $ENV_FILE only)"
    host env TODOSYNC_CONFIG="$ENV_FILE" "$ROOT/usr/local/bin/todosync" create-database --admin-user root
fi

host systemctl daemon-reload
host systemctl restart todosync-migrate.service          # applies pending migrations, fails loudly
host systemctl enable todosync-migrate.service todosync-purge.timer todosync-backup.timer
host systemctl start todosync-purge.timer todosync-backup.timer
for ((i = 1; i <= INSTANCES; i++)); do
    host systemctl enable --now "todosync@$i.socket"
    host systemctl enable "todosync@$i.service"
    # A rolling restart: one instance at a time, its socket keeps queueing meanwhile.
    host systemctl restart "todosync@$i.service"
done
host nginx -t
host systemctl reload nginx
log "installed $("$ROOT/usr/local/bin/todosync" --version): https://$SERVER_NAME/healthz"
if ((new_binlog_cnf)); then
    log "MariaDB's binary log (point-in-time recovery) starts at its next restart: systemctl restart mariadb"
fi
