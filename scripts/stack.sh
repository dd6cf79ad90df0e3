#!/usr/bin/env bash
# TodoSync local stack: MariaDB + todosync FastCGI responders + nginx, as plain processes.
#
# Usage: scripts/stack.sh COMMAND
#   deps            install missing Debian packages (apt-get; fast no-op when all are present)
#   build           swift build -c release --static-swift-stdlib --product todosync (and todosync-test
#                   with TODOSYNC_ENABLE_TEST_HOOKS=1)
#   up              start MariaDB, migrate, responders (under runsv) and nginx; wait for /healthz
#   down            stop nginx, responders and MariaDB (idempotent)
#   run             deps + build + up, then stay in the foreground until SIGINT/SIGTERM, then down
#   status          show which parts are running
#   migrate         run `todosync migrate` against the stack's database (MariaDB must be up)
#   purge|new-epoch|check-feed|rebuild-feed|store-days|recompute-stats [ARGS]
#                                    run that `todosync` command against the stack's database
#   backup [ARGS]   scripts/backup.sh against the stack's database while it serves: a consistent
#                   dump in <state>/backups/ (keeps the newest 14); prints the file's path
#   restore FILE [ARGS]  stop the responders, scripts/backup.sh restore FILE (the database replaced
#                   by the dump's, migrations, a new sync epoch; ARGS e.g. --until-time for a
#                   point-in-time recovery), start the responders again
#   db-stop         stop MariaDB only (for tests)
#   db-start        start MariaDB again on the same data dir and socket (no re-init)
#   responder-pids  print the pids of the running responder processes, one per line
#   responders-restart  stop the responders and start them again with $TODOSYNC_BIN (MariaDB and nginx
#                   keep running: bench/bench.py push_compare swaps binaries this way)
#   env             print the effective configuration as KEY=VALUE lines (the stack's, then the binary's)
#   nginx-config    render <state>/nginx/nginx.conf (and the TLS certificate) without starting
#                   anything; prints the config's path
#
# Configuration (docs/OPERATIONS.md "Configuration"): a config file of NAME=VALUE lines,
# TODOSYNC_CONFIG, default <repo>/todosync.env when it exists, then the environment, which wins.
# The stack reads only its own variables below; the application's (workers, limits, database
# name and user, log level, ...) and their defaults are the binary's: the file is passed to it as
# TODOSYNC_CONFIG and `todosync config` shows what it uses. Relative paths are resolved against
# the repository root. State dir layout: log/, pids/, sv/ (runit services), mariadb/data, nginx/,
# tls/, secrets/.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO_ROOT=$(dirname "$(dirname "$SELF")")
CALLER_DIR=$PWD # a FILE argument is relative to where the caller is
cd "$REPO_ROOT"
LOG_TAG=stack
# What this script shares with scripts/cluster.sh (docs/DEVELOPMENT.md, "The scripts' library").
for _lib in common mariadb nginx services tls; do source "$REPO_ROOT/scripts/lib/$_lib.sh"; done

# --- configuration -----------------------------------------------------------------------------

# The stack's variables from the config file, without overriding the environment (sourced at top
# level so they stay global; nothing from the file is exported: the binary reads the file itself).
_config_file=${TODOSYNC_CONFIG:-}
[[ -n $_config_file || ! -f $REPO_ROOT/todosync.env ]] || _config_file=$REPO_ROOT/todosync.env
if [[ -n $_config_file ]]; then
    [[ -r $_config_file ]] || { echo "stack.sh: config file $_config_file not readable" >&2; exit 1; }
    _saved_env=$(declare -px | grep -E '^declare -x TODOSYNC_' || true)
    # shellcheck disable=SC1090
    source "$_config_file"
    eval "$_saved_env"
fi
export TODOSYNC_CONFIG=${_config_file:-/dev/null}
unset _config_file _saved_env

: "${TODOSYNC_STATE_DIR:=.state/run}"            # everything this stack writes
: "${TODOSYNC_SOCKET_DIR:=}"                     # default <state>/sock (/tmp/todosync-<hash> if too long)
: "${TODOSYNC_LISTEN_ADDRESS:=127.0.0.1}"        # nginx's IPv4 address
: "${TODOSYNC_HTTP_PORT:=8080}"
: "${TODOSYNC_HTTPS_PORT:=8443}"                 # self-signed certificate for localhost / 127.0.0.1
: "${TODOSYNC_HTTP_REDIRECT:=auto}"              # on: plain HTTP answers 308; auto: on unless loopback
: "${TODOSYNC_RESPONDERS:=1}"                    # `todosync serve` processes, each supervised
: "${TODOSYNC_NGINX_WORKERS:=2}"
: "${TODOSYNC_UPSTREAM_KEEPALIVE:=32}"
# Production's timers (scripts/systemd/*.timer) as runit services: a pass, then this long asleep
# (0: off). store-days every minute and purge hourly, as there; backups stay `stack.sh backup`.
: "${TODOSYNC_STORE_DAYS_SECONDS:=60}"
: "${TODOSYNC_PURGE_SECONDS:=3600}"           # idle kept connections to the responders per nginx worker (0: none)
: "${TODOSYNC_NGINX_USER:=www-data}"             # as root: nginx's workers
: "${TODOSYNC_NGINX_GROUP:=todosync-web}"        # as root: their group, which also owns the responders' sockets
: "${TODOSYNC_SERVICE_GROUP:=todosync}"          # as root: the responders' group (it owns MariaDB's socket dir)
: "${TODOSYNC_APP_USER:=todosync}"               # as root: OS user of the responders
: "${TODOSYNC_DB_OS_USER:=todosync-db}"          # as root: OS user of mariadbd
: "${TODOSYNC_DB_OS_GROUP:=todosync-db}"         # as root: mariadbd's group (its data dir, 0700)
: "${TODOSYNC_DROP_PRIVILEGES:=auto}"            # on | off | auto: service users unless they cannot reach the checkout
# nginx's limits, defaults in nginx/limits.env: TODOSYNC_AUTH_RATE / TODOSYNC_AUTH_BURST (requests/s
# and burst per address on /api/v1/auth/), TODOSYNC_ACCOUNT_CONCURRENCY (requests in flight per
# bearer token), TODOSYNC_ADDRESS_CONCURRENCY (requests in progress per client address),
# TODOSYNC_ADDRESS_CONNECTIONS (open connections per client address, idle ones included; 0: no cap),
# TODOSYNC_LIVE_STREAMS (open live-sync streams per account).
load_limit_defaults
: "${TODOSYNC_REAL_IP_FROM:=}"                   # nginx: trusted proxies (CIDRs, comma-separated); empty: off
: "${TODOSYNC_REAL_IP_HEADER:=X-Forwarded-For}"  # nginx: where those proxies put the client's address
: "${TODOSYNC_ENABLE_TEST_HOOKS:=0}"             # 1: todosync-test `serve --enable-test-hooks`
: "${TODOSYNC_BENCH_LOCATIONS:=0}"               # 1: nginx's /__bench/ locations
: "${TODOSYNC_DB_PORT:=}"                        # set: MariaDB also listens on 127.0.0.1:PORT
: "${TODOSYNC_MARIADB_ARGS:=}"                   # extra mariadbd options, split on whitespace
: "${TODOSYNC_BIN:=}"                            # default: the release build
: "${TODOSYNC_NGINX_TEMPLATE:=nginx/todosync.conf.template}"
: "${TODOSYNC_FASTCGI_PARAMS:=/etc/nginx/fastcgi_params}"
: "${TODOSYNC_NCHAN_MODULE:=/usr/lib/nginx/modules/ngx_nchan_module.so}" # Debian's libnginx-mod-nchan
: "${TODOSYNC_STREAM_MODULE:=/usr/lib/nginx/modules/ngx_stream_module.so}" # Debian's libnginx-mod-stream
: "${TODOSYNC_UP_TIMEOUT:=60}"                   # seconds to wait for MariaDB, sockets and /healthz
: "${TODOSYNC_STOP_TIMEOUT:=20}"                 # seconds between SIGTERM (or nginx QUIT) and SIGKILL
: "${TODOSYNC_SKIP_DEPS:=0}"                     # 1: `run` skips deps
: "${TODOSYNC_SKIP_BUILD:=0}"                    # 1: `run` skips build

# The stack's own variables (`env` prints them; the binary's follow from `todosync config`).
STACK_VARS=(
    TODOSYNC_STATE_DIR TODOSYNC_SOCKET_DIR TODOSYNC_LISTEN_ADDRESS TODOSYNC_HTTP_PORT
    TODOSYNC_HTTPS_PORT TODOSYNC_HTTP_REDIRECT TODOSYNC_RESPONDERS TODOSYNC_NGINX_WORKERS TODOSYNC_UPSTREAM_KEEPALIVE
    TODOSYNC_STORE_DAYS_SECONDS TODOSYNC_PURGE_SECONDS
    TODOSYNC_NGINX_USER TODOSYNC_NGINX_GROUP TODOSYNC_SERVICE_GROUP TODOSYNC_APP_USER TODOSYNC_DB_OS_USER
    TODOSYNC_DB_OS_GROUP
    TODOSYNC_DROP_PRIVILEGES TODOSYNC_AUTH_RATE TODOSYNC_AUTH_BURST TODOSYNC_ACCOUNT_CONCURRENCY
    TODOSYNC_ADDRESS_CONCURRENCY TODOSYNC_ADDRESS_CONNECTIONS TODOSYNC_REAL_IP_FROM TODOSYNC_REAL_IP_HEADER
    TODOSYNC_ENABLE_TEST_HOOKS TODOSYNC_BENCH_LOCATIONS TODOSYNC_DB_PORT TODOSYNC_MARIADB_ARGS
    TODOSYNC_BIN TODOSYNC_NGINX_TEMPLATE TODOSYNC_FASTCGI_PARAMS TODOSYNC_NCHAN_MODULE TODOSYNC_STREAM_MODULE
    TODOSYNC_UP_TIMEOUT
    TODOSYNC_STOP_TIMEOUT TODOSYNC_SKIP_DEPS TODOSYNC_SKIP_BUILD TODOSYNC_CONFIG
)

for _v in TODOSYNC_HTTP_PORT TODOSYNC_HTTPS_PORT TODOSYNC_RESPONDERS TODOSYNC_NGINX_WORKERS TODOSYNC_UPSTREAM_KEEPALIVE TODOSYNC_AUTH_RATE \
    TODOSYNC_STORE_DAYS_SECONDS TODOSYNC_PURGE_SECONDS \
    TODOSYNC_AUTH_BURST TODOSYNC_ACCOUNT_CONCURRENCY TODOSYNC_ADDRESS_CONCURRENCY TODOSYNC_ADDRESS_CONNECTIONS \
    TODOSYNC_LIVE_STREAMS TODOSYNC_UP_TIMEOUT TODOSYNC_STOP_TIMEOUT; do
    is_uint "${!_v}" || die "$_v must be a non-negative integer (got '${!_v}')"
done
[[ -z $TODOSYNC_DB_PORT ]] || is_uint "$TODOSYNC_DB_PORT" || die "TODOSYNC_DB_PORT must be a port number"
((TODOSYNC_RESPONDERS >= 1)) || die "TODOSYNC_RESPONDERS must be at least 1"
# nginx's limit_conn takes 1..65535 and refuses to start otherwise: say so before rendering.
for _v in TODOSYNC_ACCOUNT_CONCURRENCY TODOSYNC_ADDRESS_CONCURRENCY TODOSYNC_LIVE_STREAMS; do
    ((${!_v} >= 1 && ${!_v} <= 65535)) || die "$_v must be between 1 and 65535 (nginx limit_conn; got ${!_v})"
done
((TODOSYNC_ADDRESS_CONNECTIONS <= 65535)) ||
    die "TODOSYNC_ADDRESS_CONNECTIONS must be between 0 (no cap) and 65535 (got $TODOSYNC_ADDRESS_CONNECTIONS)"
unset _v _lib
case $TODOSYNC_DROP_PRIVILEGES in
    auto | on | off) ;;
    *) die "TODOSYNC_DROP_PRIVILEGES must be auto, on or off (got '$TODOSYNC_DROP_PRIVILEGES')" ;;
esac
case $TODOSYNC_HTTP_REDIRECT in
    auto | on | off) ;;
    *) die "TODOSYNC_HTTP_REDIRECT must be auto, on or off (got '$TODOSYNC_HTTP_REDIRECT')" ;;
esac

TODOSYNC_STATE_DIR=$(abspath "$TODOSYNC_STATE_DIR")
TODOSYNC_NGINX_TEMPLATE=$(abspath "$TODOSYNC_NGINX_TEMPLATE")
if [[ -z $TODOSYNC_SOCKET_DIR ]]; then
    TODOSYNC_SOCKET_DIR=$TODOSYNC_STATE_DIR/sock
    # sun_path holds 107 bytes; keep room for "/fcgi-NN.sock".
    if ((${#TODOSYNC_SOCKET_DIR} > 90)); then
        TODOSYNC_SOCKET_DIR=/tmp/todosync-$(printf '%s' "$TODOSYNC_STATE_DIR" | cksum | cut -d' ' -f1)
    fi
fi
TODOSYNC_SOCKET_DIR=$(abspath "$TODOSYNC_SOCKET_DIR")
# MariaDB's socket sits in a sibling of the responders' socket dir, not inside it: each dir is
# 0750 in the group of the daemons that may connect (nginx's workers there, the responders here),
# and mariadbd is in neither group.
TODOSYNC_DB_SOCKET=$TODOSYNC_SOCKET_DIR-db/mariadb.sock
# What the stack decides for the binary: its database is the stack's, with a generated password
# unless TODOSYNC_DB_PASSWORD is set (`todosync create-database` writes the file).
TODOSYNC_DB_PASSWORD_FILE=$TODOSYNC_STATE_DIR/secrets/db-password
# Live sync: nginx's nchan publisher listens on a Unix socket in <socket dir>-live, a directory
# only root (nginx's master binds it) and the responders' group can enter: no client, no other
# local user can publish a poke. The responders post to it after each commit.
# Its nginx's own (a second nginx of the same responders has another state dir, another socket).
if ((${#TODOSYNC_STATE_DIR} <= 90)); then
    TODOSYNC_LIVE_PUBLISHER=$TODOSYNC_STATE_DIR/sock-live/pub.sock
else
    TODOSYNC_LIVE_PUBLISHER=/tmp/todosync-live-$(printf '%s' "$TODOSYNC_STATE_DIR" | cksum | cut -d' ' -f1)/pub.sock
fi
# Snapshot files (GET /sync/snapshot): the responders build them here and nginx's internal
# /__snapshot/ location sends them; its group is nginx's workers' (prepare_snapshot_dir).
TODOSYNC_SNAPSHOT_DIR=$TODOSYNC_STATE_DIR/snapshots
export "${STACK_VARS[@]}" TODOSYNC_DB_SOCKET TODOSYNC_DB_PASSWORD_FILE TODOSYNC_LIVE_PUBLISHER TODOSYNC_SNAPSHOT_DIR

STATE=$TODOSYNC_STATE_DIR
SOCK_DIR=$TODOSYNC_SOCKET_DIR
LOG_DIR=$STATE/log
PID_DIR=$STATE/pids
DB_DIR=$STATE/mariadb
DB_DATA=$DB_DIR/data
# The stack's own tmpdir: a starting mariadbd deletes every #sql* file in its tmpdir, so a shared
# /tmp would let another server on the host (a second stack, a restart) delete this one's
# temporary tables mid-statement.
DB_TMP=$DB_DIR/tmp
DB_PIDFILE=$DB_DIR/mariadbd.pid
DB_SOCK_DIR=$TODOSYNC_SOCKET_DIR-db
LIVE_SOCK_DIR=$(dirname "$TODOSYNC_LIVE_PUBLISHER")
SECRETS_DIR=$STATE/secrets
DB_SOCK=$TODOSYNC_DB_SOCKET
NGINX_DIR=$STATE/nginx
NGINX_CONF=$NGINX_DIR/nginx.conf
TLS_DIR=$STATE/tls
TLS_SAN=DNS:localhost,IP:127.0.0.1
[[ $TODOSYNC_LISTEN_ADDRESS == 127.0.0.1 ]] || TLS_SAN+=",IP:$TODOSYNC_LISTEN_ADDRESS"
HTTP_BASE=http://$TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTP_PORT
HTTPS_BASE=https://$TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTPS_PORT

DEB_PACKAGES=(
    mariadb-server mariadb-client nginx libfcgi-dev libmariadb-dev libargon2-dev libssl-dev libdeflate-dev zlib1g-dev
    libisal-dev  # igzip: the responder gzips whole bodies with it (Deflate.GzipCompressor)
    pkg-config openssl curl python3-venv systemd
    runit  # runsv runs and restarts the dev stack's daemons (production: systemd units)
    logrotate  # ops (issue 14): test_logrotate.py checks the installed config with a real rotation
    libsqlite3-dev  # the system SQLite: the server writes snapshot files with it, the client (GRDB) reads them
    libnginx-mod-nchan  # live sync (issue 22): nginx holds the streams and carries the pokes
    libnginx-mod-stream  # the per-address connection cap (nginx/address-cap-stream.conf.template)
    libcurl4-openssl-dev  # the client's live stream on Linux (CurlLiveStream: URLSession spins there)
    dpkg-dev chrpath lintian  # the Debian package (scripts/build-deb.sh, test_deb_package.py); lintian: ~120 packages, ~30 s
)

# --- helpers -----------------------------------------------------------------------------------

# Lock the state dir against a concurrent up/down of the same stack (not re-entrant); daemons are
# started through spawn_detached, which closes the lock descriptor.
lock_state() {
    mkdir -p "$STATE"
    exec 9>>"$STATE/.lock"
    flock -w 120 9 || die "another stack.sh is working on $STATE (lock held for 120 s)"
}
unlock_state() { exec 9>&-; }

# MariaDB's admin account over the socket: root for OS root (unix_socket), else the invoking user's
# own unix_socket account (mariadb-install-db --auth-root-socket-user).
DB_ADMIN=root
((EUID == 0)) || DB_ADMIN=$(id -un)
db_ping() { mariadb-admin --no-defaults --socket="$DB_SOCK" --user="$DB_ADMIN" --connect-timeout=1 ping >/dev/null 2>&1; }

# --- least privilege -----------------------------------------------------------------------------

# 1 when the daemons run under the service users (decided by ensure_service_users).
TODOSYNC__SERVICE_USERS=0

# Each daemon runs with its own group and no other (setpriv sets them, whatever the user's
# primary group in /etc/passwd): mariadbd as DB_OS_USER:DB_OS_GROUP, the responders as
# APP_USER:SERVICE_GROUP plus NGINX_GROUP (to hand their sockets to it), nginx's workers as
# NGINX_USER:NGINX_GROUP. So nginx's workers reach the responders' sockets and nothing of
# MariaDB's, and only the responders reach MariaDB's socket.
AS_DB=(setpriv --reuid="$TODOSYNC_DB_OS_USER" --regid="$TODOSYNC_DB_OS_GROUP" --clear-groups --)
AS_APP=(setpriv --reuid="$TODOSYNC_APP_USER" --regid="$TODOSYNC_SERVICE_GROUP" --groups="$TODOSYNC_NGINX_GROUP" --)
AS_WEB=(setpriv --reuid="$TODOSYNC_NGINX_USER" --regid="$TODOSYNC_NGINX_GROUP" --clear-groups --) # as nginx's `user` directive

# Started as root: create the service groups and users if missing, and check that they can reach
# the binary and the state dir (a checkout under a 0700 home cannot be reached).
ensure_service_users() {
    TODOSYNC__SERVICE_USERS=0
    ((EUID == 0)) && [[ $TODOSYNC_DROP_PRIVILEGES != off ]] || return 0
    local g u pair
    for g in "$TODOSYNC_SERVICE_GROUP" "$TODOSYNC_DB_OS_GROUP" "$TODOSYNC_NGINX_GROUP"; do
        getent group "$g" >/dev/null || groupadd --system "$g" || die "groupadd $g failed"
    done
    for pair in "$TODOSYNC_APP_USER:$TODOSYNC_SERVICE_GROUP" "$TODOSYNC_DB_OS_USER:$TODOSYNC_DB_OS_GROUP"; do
        u=${pair%%:*}
        id -u "$u" >/dev/null 2>&1 ||
            useradd --system --gid "${pair#*:}" --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u" ||
            die "useradd $u failed"
    done
    id -u "$TODOSYNC_NGINX_USER" >/dev/null 2>&1 || die "TODOSYNC_NGINX_USER $TODOSYNC_NGINX_USER does not exist"
    resolve_bin
    local who=""
    "${AS_APP[@]}" test -x "$TODOSYNC_BIN" -a -x "$STATE" 2>/dev/null || who=$TODOSYNC_APP_USER
    "${AS_DB[@]}" test -x "$STATE" 2>/dev/null || who+=" $TODOSYNC_DB_OS_USER"
    "${AS_WEB[@]}" test -x "$STATE" 2>/dev/null || who+=" $TODOSYNC_NGINX_USER"
    if [[ -n $who ]]; then
        [[ $TODOSYNC_DROP_PRIVILEGES == on ]] &&
            die "${who# } cannot reach $TODOSYNC_BIN or $STATE (TODOSYNC_DROP_PRIVILEGES=on)"
        log "WARNING: ${who# } cannot reach $TODOSYNC_BIN or $STATE: the daemons run as root (TODOSYNC_DROP_PRIVILEGES=auto)"
        return 0
    fi
    TODOSYNC__SERVICE_USERS=1
}

# The socket directories: 0750, reachable by the group of their clients only (or, without service
# users, by the invoking user only). The responders create theirs in <socket dir> (nginx's
# workers connect), MariaDB in <socket dir>-db (the responders connect).
prepare_socket_dirs() {
    mkdir -p "$SOCK_DIR" "$DB_SOCK_DIR"
    chmod 750 "$SOCK_DIR" "$DB_SOCK_DIR"
    if ((TODOSYNC__SERVICE_USERS)); then
        chown "$TODOSYNC_APP_USER:$TODOSYNC_NGINX_GROUP" "$SOCK_DIR"
        chown "$TODOSYNC_DB_OS_USER:$TODOSYNC_SERVICE_GROUP" "$DB_SOCK_DIR"
    elif ((EUID == 0)); then
        chown root:root "$SOCK_DIR" "$DB_SOCK_DIR"
    fi
}

# --- deps / build ------------------------------------------------------------------------------

cmd_deps() {
    apt_install_missing "all Debian packages present" "${DEB_PACKAGES[@]}"
    command -v swift >/dev/null 2>&1 || log "deps: WARNING: swift is not on PATH (the toolchain is not an apt package)"
}

# The git commit as a one-line object for `todosync --version` (Sources/CBuildInfo), named after
# the commit: only the link step reads it, so a new commit relinks without recompiling, and one
# commit always builds the same bytes (no dates). Prints its path, or nothing without git.
build_commit_object() {
    local commit dir=$REPO_ROOT/.build/buildinfo
    commit=$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null) || return 0
    [[ -z $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
    mkdir -p "$dir"
    if [[ ! -f $dir/commit-$commit.o ]]; then
        rm -f "$dir"/commit-*
        printf 'const char todosync_build_commit_value[] = "%s";\n' "$commit" > "$dir/commit-$commit.c"
        cc -c -o "$dir/commit-$commit.o" "$dir/commit-$commit.c" || return 0
    fi
    printf '%s\n' "$dir/commit-$commit.o"
}

cmd_build() {
    require_cmd swift
    # --static-swift-stdlib: the binary needs no Swift toolchain on the host it runs on. Only the
    # server's product: a static todosync-client would need libcurl's development files.
    local start=$SECONDS commit_obj link=()
    commit_obj=$(build_commit_object)
    [[ -z $commit_obj ]] || link=(-Xlinker "$commit_obj")
    log "build: swift build -c release --static-swift-stdlib --product todosync ${link[*]}"
    swift build -c release --static-swift-stdlib --product todosync "${link[@]}" --quiet || die "swift build failed"
    if [[ $TODOSYNC_ENABLE_TEST_HOOKS == 1 ]]; then # the same modules plus the hooks: one file and a link
        log "build: swift build -c release --static-swift-stdlib --product todosync-test ${link[*]}"
        swift build -c release --static-swift-stdlib --product todosync-test "${link[@]}" --quiet ||
            die "swift build failed"
    fi
    resolve_bin
    log "build: done in $((SECONDS - start)) s -> $TODOSYNC_BIN"
}

# --- MariaDB -----------------------------------------------------------------------------------

db_start() {
    require_cmd mariadbd mariadb-install-db mariadb mariadb-admin
    mkdir -p "$DB_DIR" "$DB_TMP" "$LOG_DIR" "$PID_DIR"
    prepare_socket_dirs
    if [[ -z $(runsv_pid mariadb) ]]; then
        local user_args=() socket_user run_as=()
        socket_user=$(id -un)
        if ((TODOSYNC__SERVICE_USERS)); then
            # mariadbd's data: its user's and group's alone (0700; older stacks gave it 0750 in
            # the group nginx's workers had).
            run_as=("${AS_DB[@]}")
            mkdir -p "$DB_DATA" "$DB_TMP"
            chown -R "$TODOSYNC_DB_OS_USER:$TODOSYNC_DB_OS_GROUP" "$DB_DIR"
            chmod 700 "$DB_DIR"
            touch "$LOG_DIR/mariadb.log"
            chown "$TODOSYNC_DB_OS_USER:$TODOSYNC_DB_OS_GROUP" "$LOG_DIR/mariadb.log"
        elif ((EUID == 0)); then
            user_args=(--user=root)
            chown -R root:root "$DB_DIR"
        fi
        if [[ ! -d $DB_DATA/mysql ]]; then
            log "mariadb: initialising data dir $DB_DATA"
            rm -rf "$DB_DATA"
            mkdir -p "$DB_DATA"
            ((TODOSYNC__SERVICE_USERS)) && chown "$TODOSYNC_DB_OS_USER:$TODOSYNC_DB_OS_GROUP" "$DB_DATA"
            # root@localhost (and the invoking user's account) by unix_socket only: no password
            # login, and only that OS user gets in over the socket.
            mariadb_install_db "$LOG_DIR/mariadb-install.log" "${run_as[@]}" mariadb-install-db --no-defaults \
                --datadir="$DB_DATA" "${user_args[@]}" \
                --auth-root-authentication-method=socket --auth-root-socket-user="$socket_user"
        fi
        local args=(
            --no-defaults --datadir="$DB_DATA" --tmpdir="$DB_TMP" --socket="$DB_SOCK" --pid-file="$DB_PIDFILE"
            --log-error="$LOG_DIR/mariadb.log" "${user_args[@]}" "${MARIADB_SERVER_OPTIONS[@]}"
        )
        if [[ -n $TODOSYNC_DB_PORT ]]; then
            args+=(--port="$TODOSYNC_DB_PORT" --bind-address=127.0.0.1)
        else
            args+=(--skip-networking)
        fi
        # shellcheck disable=SC2206 # extra args are intentionally split on whitespace
        [[ -n $TODOSYNC_MARIADB_ARGS ]] && args+=($TODOSYNC_MARIADB_ARGS)
        log "mariadb: starting (socket $DB_SOCK${TODOSYNC_DB_PORT:+, tcp 127.0.0.1:$TODOSYNC_DB_PORT})"
        write_service mariadb "${run_as[@]}" mariadbd "${args[@]}"
        start_service mariadb
    fi
    wait_for "$TODOSYNC_UP_TIMEOUT" "mariadb did not become ready (log: $LOG_DIR/mariadb.log)" "$LOG_DIR/mariadb.log" db_ping
    log "mariadb: ready (pid $(service_pid mariadb))"
}

# The app's database and account, by `todosync create-database` as the socket's admin; its password
# is generated into <state>/secrets/ unless TODOSYNC_DB_PASSWORD is set. Then the secrets are the
# responders' user's alone.
db_setup() {
    local args=(create-database --admin-user "$DB_ADMIN" --account-hosts localhost,127.0.0.1,::1)
    ((EUID == 0)) && args+=(--socket-only-root)
    if ! "$TODOSYNC_BIN" "${args[@]}" </dev/null >"$LOG_DIR/create-database.log" 2>&1 9>&-; then
        show_tail "$LOG_DIR/create-database.log"
        die "todosync create-database failed"
    fi
    if [[ -d $SECRETS_DIR ]]; then
        chmod 700 "$SECRETS_DIR"
        ((TODOSYNC__SERVICE_USERS)) && chown -R "$TODOSYNC_APP_USER:$TODOSYNC_SERVICE_GROUP" "$SECRETS_DIR"
    fi
    log "mariadb: the application's database and account are ready"
}

db_stop() { stop_services mariadb; }

cmd_migrate() {
    require_bin
    log "migrate: $TODOSYNC_BIN migrate"
    if ! "$TODOSYNC_BIN" migrate </dev/null >"$LOG_DIR/migrate.log" 2>&1 9>&-; then
        show_tail "$LOG_DIR/migrate.log" 40
        die "todosync migrate failed"
    fi
    sed 's/^/  migrate: /' "$LOG_DIR/migrate.log" | tail -n 20 >&2
}

# --- services (runit: scripts/lib/services.sh) ---------------------------------------------------

service_pattern() { # a string in the daemon's command line (guards against stale pid files)
    case $1 in
        mariadb) printf '%s\n' "--datadir=$DB_DATA" ;;
        nginx) printf '%s\n' "$NGINX_CONF" ;;
        responder-*) responder_sock "${1#responder-}" ;;
        periodic-*) printf 'sleep\n' ;; # its bash (whose script names sleep), then `sleep N`
    esac
}

# --- responders --------------------------------------------------------------------------------

responder_sock() { printf '%s/fcgi-%s.sock\n' "$SOCK_DIR" "$1"; }

responder_indexes() { # 1..TODOSYNC_RESPONDERS, plus every index that has a service dir
    {
        seq 1 "$TODOSYNC_RESPONDERS"
        local d
        for d in "$STATE"/sv/responder-*; do [[ -d $d ]] && printf '%s\n' "${d##*-}"; done
    } | grep -E '^[0-9]+$' | sort -nu
}

responders_start() {
    require_bin
    require_cmd runsv sv
    mkdir -p "$PID_DIR" "$LOG_DIR"
    prepare_socket_dirs
    prepare_snapshot_dir
    local idx args run_as=() missing extra=()
    # Under the service user, its socket 0660 in nginx's workers' group.
    ((TODOSYNC__SERVICE_USERS)) && run_as=("${AS_APP[@]}")
    for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
        args=(serve --socket "$(responder_sock "$idx")")
        [[ $TODOSYNC_ENABLE_TEST_HOOKS == 1 ]] && args+=(--enable-test-hooks)
        ((TODOSYNC__SERVICE_USERS)) && args+=(--socket-group "$TODOSYNC_NGINX_GROUP")
        # TODOSYNC_INSTANCE: the `responder` label of its metrics (ops, issue 14).
        write_service "responder-$idx" "${run_as[@]}" env TODOSYNC_INSTANCE="$idx" "$TODOSYNC_BIN" "${args[@]}"
        [[ -n $(runsv_pid "responder-$idx") ]] || log "responder $idx: starting (socket $(responder_sock "$idx"))"
        start_service "responder-$idx"
    done
    # responders beyond the configured count (count was lowered): stop them
    for idx in $(responder_indexes); do
        ((idx > TODOSYNC_RESPONDERS)) && extra+=("$idx")
    done
    ((${#extra[@]} == 0)) || responders_stop "${extra[@]}"

    local deadline=$((SECONDS + TODOSYNC_UP_TIMEOUT))
    while :; do
        missing=""
        for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
            [[ -S $(responder_sock "$idx") ]] || missing+=" $idx"
        done
        [[ -z $missing ]] && break
        if ((SECONDS >= deadline)); then
            for idx in $missing; do show_tail "$LOG_DIR/responder-$idx.log"; done
            die "responder socket(s) did not appear within ${TODOSYNC_UP_TIMEOUT}s:$missing"
        fi
        sleep 0.1
    done
    log "responders: $TODOSYNC_RESPONDERS listening"
}

responders_stop() { # [INDEX...] (default: all)
    local indexes=("$@") idx
    ((${#indexes[@]})) || mapfile -t indexes < <(responder_indexes)
    stop_services "${indexes[@]/#/responder-}"
    for idx in "${indexes[@]}"; do
        rm -f "$(responder_sock "$idx")"
        ((idx <= TODOSYNC_RESPONDERS)) || rm -rf "$(service_dir "responder-$idx")"
    done
}

# --- periodic passes ------------------------------------------------------------------------------

# The passes production's systemd timers run (todosync-store-days.timer: a minute after the last
# ended; todosync-purge.timer: hourly), each a runit service whose ./run is one pass followed by
# `exec sleep SECONDS`: when the sleep ends, runsv starts ./run again. Output: <log>/periodic-NAME.log.
PERIODIC=(store-days:TODOSYNC_STORE_DAYS_SECONDS purge:TODOSYNC_PURGE_SECONDS)

periodic_start() {
    require_bin
    require_cmd runsv sv
    local entry name var seconds run_as=()
    ((TODOSYNC__SERVICE_USERS)) && run_as=("${AS_APP[@]}")
    for entry in "${PERIODIC[@]}"; do
        name=${entry%%:*}
        var=${entry#*:}
        seconds=${!var}
        if ((seconds == 0)); then
            stop_services "periodic-$name"
            continue
        fi
        write_service "periodic-$name" "${run_as[@]}" bash -c "\"\$1\" $name </dev/null; exec sleep $seconds" \
            "periodic-$name" "$TODOSYNC_BIN"
        if [[ -n $(runsv_pid "periodic-$name") ]]; then
            sv term "$(service_dir "periodic-$name")" >/dev/null # a new interval: start over
        else
            start_service "periodic-$name"
        fi
    done
}

periodic_stop() {
    local entry names=()
    for entry in "${PERIODIC[@]}"; do names+=("periodic-${entry%%:*}"); done
    stop_services "${names[@]}"
}

cmd_responder_pids() {
    local idx
    for idx in $(responder_indexes); do service_pid "responder-$idx"; done
    return 0
}

# --- nginx -------------------------------------------------------------------------------------

# Live sync's publisher socket dir (nginx's master binds the socket): 0750, root and the
# responders' group only, so no client and no other local user can publish a poke.
# The snapshot cache: 02750, the responders' user and nginx's workers' group (setgid: the files
# the responders create there, 0640, are readable by nginx's workers and nobody else).
prepare_snapshot_dir() {
    mkdir -p "$TODOSYNC_SNAPSHOT_DIR"
    if ((TODOSYNC__SERVICE_USERS)); then
        chown -R "$TODOSYNC_APP_USER:$TODOSYNC_NGINX_GROUP" "$TODOSYNC_SNAPSHOT_DIR"
    fi
    chmod 2750 "$TODOSYNC_SNAPSHOT_DIR"
}

prepare_live_dir() {
    mkdir -p "$LIVE_SOCK_DIR"
    chmod 750 "$LIVE_SOCK_DIR"
    if ((TODOSYNC__SERVICE_USERS)); then
        chown "root:$TODOSYNC_SERVICE_GROUP" "$LIVE_SOCK_DIR"
    elif ((EUID == 0)); then
        chown root:root "$LIVE_SOCK_DIR"
    fi
}

render_nginx_conf() {
    [[ -r $TODOSYNC_FASTCGI_PARAMS ]] || die "$TODOSYNC_FASTCGI_PARAMS not found (install nginx)"
    [[ -r $TODOSYNC_NCHAN_MODULE ]] || die "$TODOSYNC_NCHAN_MODULE not found (run: scripts/stack.sh deps)"
    grep -q 'REQUEST_URI' "$TODOSYNC_FASTCGI_PARAMS" ||
        die "$TODOSYNC_FASTCGI_PARAMS does not pass REQUEST_URI"
    local idx upstream="" bench="" user_directive="" real_ip
    real_ip=$("$REPO_ROOT/scripts/nginx-real-ip.sh" "$TODOSYNC_REAL_IP_FROM" "$TODOSYNC_REAL_IP_HEADER") ||
        die "TODOSYNC_REAL_IP_FROM / TODOSYNC_REAL_IP_HEADER: invalid value"
    for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
        upstream+="        server \"unix:$(responder_sock "$idx")\" max_fails=2 fail_timeout=2s;"$'\n'
    done
    if ((TODOSYNC_UPSTREAM_KEEPALIVE > 0)); then
        # Kept connections (fastcgi_keep_conn on): an idle one costs a responder no thread
        # (TODOSYNC_FASTCGI_DISPATCH=1). nginx closes idle ones after 60 s, before the responder
        # would (300 s), so no close from the responder crosses a request sent on one.
        upstream+="        keepalive $TODOSYNC_UPSTREAM_KEEPALIVE;"$'\n'
        upstream+="        keepalive_timeout 60s;"$'\n'
    fi
    if [[ $TODOSYNC_BENCH_LOCATIONS == 1 ]]; then
        bench=$'        # benchmark baseline: nginx alone, no upstream (TODOSYNC_BENCH_LOCATIONS=1)\n'
        bench+=$'        location = /__bench/nginx {\n'
        bench+=$'            client_max_body_size 1k;\n'
        bench+=$'            default_type text/plain;\n'
        bench+=$'            return 200 "ok\\n";\n'
        bench+=$'        }\n'
        bench+=$'        # benchmark ceilings in the responder (test hooks only): /__bench/fastcgi (no database),\n'
        bench+=$'        # /__bench/db (plus the token check), /__bench/page (a stored pull page, no database)\n'
        bench+=$'        location /__bench/ {\n'
        bench+=$'            client_max_body_size 1m;\n'
        bench+=$'            fastcgi_pass todosync_responders;\n'
        bench+=$'        }\n'
    fi
    if ((TODOSYNC__SERVICE_USERS)); then
        user_directive="user $TODOSYNC_NGINX_USER $TODOSYNC_NGINX_GROUP;"
    elif ((EUID == 0)); then
        user_directive="user root;"
    fi
    # The server's listeners: the public ports, or behind the per-address connection cap its
    # stream server's sockets (off behind a trusted proxy, whose connections are all nginx sees).
    local cap_stream="" cap_http="" listen
    listen="        listen $TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTP_PORT backlog=4096;"$'\n'
    listen+="        listen $TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTPS_PORT ssl http2 backlog=4096;"
    if ((TODOSYNC_ADDRESS_CONNECTIONS > 0)) && [[ -z $TODOSYNC_REAL_IP_FROM ]]; then
        [[ -r $TODOSYNC_STREAM_MODULE ]] || die "$TODOSYNC_STREAM_MODULE not found (run: scripts/stack.sh deps)"
        [[ -d $SOCK_DIR ]] || prepare_socket_dirs  # the front's sockets sit beside the responders'
        cap_stream="@$REPO_ROOT/nginx/address-cap-stream.conf.template"
        cap_http="@$REPO_ROOT/nginx/address-cap-http.conf.template"
        listen="@$REPO_ROOT/nginx/address-cap-listen.conf.template"
    fi
    local redirect=0
    case $TODOSYNC_HTTP_REDIRECT in
        on) redirect=1 ;;
        auto) [[ $TODOSYNC_LISTEN_ADDRESS == 127.* || $TODOSYNC_LISTEN_ADDRESS == ::1 || $TODOSYNC_LISTEN_ADDRESS == "[::1]" || $TODOSYNC_LISTEN_ADDRESS == localhost ]] || redirect=1 ;;
    esac
    # The placeholders both scripts fill alike: scripts/lib/nginx.sh.
    render_nginx_conf_file "$TODOSYNC_NGINX_TEMPLATE" "$NGINX_CONF" \
        NGINX_USER_DIRECTIVE="$user_directive" \
        NGINX_WORKERS="$TODOSYNC_NGINX_WORKERS" \
        NGINX_DIR="$NGINX_DIR" \
        LOG_DIR="$LOG_DIR" \
        SERVER_LISTEN="$listen" \
        ADDRESS_CAP_STREAM="$cap_stream" \
        ADDRESS_CAP_HTTP="$cap_http" \
        STREAM_MODULE="load_module \"$TODOSYNC_STREAM_MODULE\";" \
        STREAM_LISTEN_HTTP="listen $TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTP_PORT backlog=4096;" \
        STREAM_LISTEN_HTTPS="listen $TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTPS_PORT backlog=4096;" \
        FRONT_SOCKET="$SOCK_DIR/front-$TODOSYNC_HTTP_PORT" \
        ADDRESS_CONNECTIONS="$TODOSYNC_ADDRESS_CONNECTIONS" \
        FASTCGI_PARAMS="$TODOSYNC_FASTCGI_PARAMS" \
        UPSTREAM_SERVERS="${upstream%$'\n'}" \
        BENCH_LOCATIONS="${bench%$'\n'}" \
        HTTP_REDIRECT="$redirect" \
        HTTPS_REDIRECT_PORT="$TODOSYNC_HTTPS_PORT" \
        REAL_IP="$real_ip" \
        NCHAN_MODULE="$TODOSYNC_NCHAN_MODULE" \
        SNAPSHOT_DIR="$TODOSYNC_SNAPSHOT_DIR" \
        LIVE_PUBLISHER_SOCKET="$TODOSYNC_LIVE_PUBLISHER"
    prepare_live_dir
    # ops (issue 14): /metrics and /metrics/N, loopback only (the template includes conf.d/*.conf).
    mkdir -p "$NGINX_DIR/conf.d"
    "$REPO_ROOT/scripts/nginx-metrics-locations.sh" "$TODOSYNC_RESPONDERS" "$SOCK_DIR/fcgi-%d.sock" >"$NGINX_DIR/conf.d/metrics.conf"
}

nginx_cmd() { nginx -p "$NGINX_DIR/" -c "$NGINX_CONF" -e "$LOG_DIR/nginx-error.log" "$@"; }

nginx_start() {
    require_cmd nginx
    mkdir -p "$NGINX_DIR/tmp" "$LOG_DIR"
    render_nginx_conf
    if ! nginx_cmd -t -q >"$LOG_DIR/nginx-start.log" 2>&1; then
        cat "$LOG_DIR/nginx-start.log" >&2
        die "nginx configuration test failed ($NGINX_CONF)"
    fi
    if [[ -n $(runsv_pid nginx) ]]; then
        log "nginx: reloading configuration"
        sv hup "$(service_dir nginx)" >/dev/null
        return 0
    fi
    log "nginx: starting on $HTTP_BASE and $HTTPS_BASE"
    # A publisher or front socket left by an nginx that was killed would make every start fail (bind:
    # address in use): the run script removes them first (runsv runs one nginx; a reload keeps them).
    local front=$SOCK_DIR/front-$TODOSYNC_HTTP_PORT
    write_service nginx bash -c 'while [[ $1 != -- ]]; do rm -f -- "$1"; shift; done; shift; exec "$@"' nginx-run \
        "$TODOSYNC_LIVE_PUBLISHER" "$front-http.sock" "$front-https.sock" "$front-over-http.sock" "$front-over-https.sock" -- \
        nginx -p "$NGINX_DIR/" -c "$NGINX_CONF" -e "$LOG_DIR/nginx-error.log" -g "daemon off;"
    # `sv down`/`exit` send QUIT instead of TERM: nginx finishes the requests in flight.
    mkdir -p "$(service_dir nginx)/control"
    printf '#!/bin/sh\nkill -QUIT "$(cat supervise/pid)"\n' >"$(service_dir nginx)/control/t"
    chmod 755 "$(service_dir nginx)/control/t"
    start_service nginx
    nginx_check_files
}

# The file-descriptor budget the config was rendered with (scripts/nginx-fd-budget.sh) must be what
# the workers got: nginx only logs an alert when setrlimit fails, and then runs out of files.
nginx_check_files() {
    local master worker limit deadline=$((SECONDS + 10))
    while :; do
        master=$(service_pid nginx)
        worker=$([[ -n $master ]] && pgrep -P "$master" | head -n 1 || true)
        [[ -n $worker ]] && break
        ((SECONDS < deadline)) || die "nginx has no worker process"
        sleep 0.1
    done
    limit=$(awk '/^Max open files/ { print $4 }' "/proc/$worker/limits")
    [[ $limit == unlimited ]] || ((limit >= NGINX_NOFILE)) ||
        die "nginx's workers may open $limit files, not the $NGINX_NOFILE its configuration was rendered for"
}

wait_healthy() {
    local logs=() idx
    for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do logs+=("$LOG_DIR/responder-$idx.log"); done
    wait_http_200 "$HTTP_BASE/healthz" "$TODOSYNC_UP_TIMEOUT" "${logs[@]}" "$LOG_DIR/nginx-error.log"
}

# --- commands ----------------------------------------------------------------------------------

cmd_up() {
    lock_state
    require_bin
    ensure_service_users
    mkdir -p "$LOG_DIR" "$PID_DIR"
    db_start
    db_setup
    cmd_migrate
    ensure_cert "$TLS_SAN"
    responders_start
    nginx_start
    wait_healthy
    periodic_start
    unlock_state
    log "up: $HTTP_BASE/healthz answers 200 (state: $STATE)"
}

cmd_down() {
    lock_state
    periodic_stop
    stop_services nginx
    responders_stop
    db_stop
    unlock_state
}

cmd_status() { # exit status 0 only when every part is running
    local name pid rc=0
    local periodic=() entry var
    for entry in "${PERIODIC[@]}"; do
        var=${entry#*:}
        ((${!var} == 0)) || periodic+=("periodic-${entry%%:*}")
    done
    for name in mariadb $(responder_indexes | sed 's/^/responder-/') nginx "${periodic[@]}"; do
        pid=$(service_pid "$name")
        if [[ -n $pid ]]; then
            printf '%-13s running (pid %s, runsv %s)\n' "$name" "$pid" "$(runsv_pid "$name")"
        else
            printf '%-13s stopped\n' "$name"
            rc=1
        fi
    done
    return "$rc"
}

cmd_env() { # the stack's variables, then the binary's effective ones (secrets left out)
    resolve_bin
    local v
    for v in "${STACK_VARS[@]}"; do printf '%s=%s\n' "$v" "${!v}"; done
    if [[ -x $TODOSYNC_BIN ]]; then # the stack's own TODOSYNC_DB_PORT (MariaDB's TCP port) wins
        "$TODOSYNC_BIN" config --assignments </dev/null 9>&- | grep -v '^TODOSYNC_DB_PORT='
    else
        log "env: no binary at $TODOSYNC_BIN: only the stack's variables"
        printf '%s=%s\n' TODOSYNC_DB_SOCKET "$TODOSYNC_DB_SOCKET" TODOSYNC_DB_PASSWORD_FILE "$TODOSYNC_DB_PASSWORD_FILE"
    fi
}

# Backup and restore of the stack's database, by the same script a production host runs
# (scripts/backup.sh, installed as todosync-backup), with the stack's configuration.
cmd_backup() {
    require_bin
    db_ping || die "MariaDB is not running (scripts/stack.sh up first)"
    TODOSYNC_BIN=$TODOSYNC_BIN "$REPO_ROOT/scripts/backup.sh" --dir "$STATE/backups" "$@" </dev/null 9>&-
}

cmd_restore() {
    local file=${1:-}
    [[ -n $file ]] || die "restore: which file? (scripts/stack.sh restore FILE)"
    shift
    file=$(cd "$CALLER_DIR" && abspath "$file")
    [[ -r $file ]] || die "restore: cannot read $file"
    lock_state
    require_bin
    ensure_service_users
    db_ping || die "MariaDB is not running (scripts/stack.sh up first): the restore needs it, not the responders"
    log "restore: stopping the responders (nginx answers 503 meanwhile)"
    responders_stop
    # --dir: the journal of account deletions lives next to the stack's backups (backup.sh restore).
    TODOSYNC_BIN=$TODOSYNC_BIN "$REPO_ROOT/scripts/backup.sh" restore "$file" --dir "$STATE/backups" "$@" </dev/null 9>&- ||
        die "restore failed: the responders stay stopped (scripts/stack.sh up starts them)"
    responders_start
    wait_healthy
    unlock_state
    log "restore: done, the responders serve the restored database"
}

print_urls() {
    cat <<EOF

TodoSync is running.
  HTTP   $HTTP_BASE/        (health: $HTTP_BASE/healthz)
  HTTPS  $HTTPS_BASE/       (self-signed: curl --cacert $TLS_DIR/cert.pem, or -k)
  API    $HTTP_BASE/api/v1/
  DB     mariadb --socket=$DB_SOCK -u $DB_ADMIN  (unix_socket: as OS user $DB_ADMIN)$([[ -n $TODOSYNC_DB_PORT ]] && printf ' (also tcp 127.0.0.1:%s)' "$TODOSYNC_DB_PORT")
  Logs   $LOG_DIR/
Press Ctrl-C to stop.

EOF
}

cmd_run() {
    local stop=0
    [[ $TODOSYNC_SKIP_DEPS == 1 ]] || cmd_deps
    [[ $TODOSYNC_SKIP_BUILD == 1 ]] || cmd_build
    trap 'cmd_down' EXIT
    trap 'stop=1' INT TERM
    # `run.sh | tee log` then Ctrl-C: tee dies first, and a write to the dead pipe must not kill
    # this script (SIGPIPE) before it has torn the stack down.
    trap '' PIPE
    cmd_up
    print_urls
    while ((!stop)); do
        sleep 1 &
        wait "$!" 2>/dev/null || true
    done
    # The output may be a pipe whose reader died with the same Ctrl-C (`run.sh | tee log`): no
    # write may stop the teardown, so it runs without errexit and SIGPIPE is ignored (above).
    set +e
    log "run: stopping"
    cmd_down
    trap - EXIT
}

usage() {
    sed -n '2,/^# Configuration/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

main() {
    local cmd=${1:-}
    [[ $# -gt 0 ]] && shift
    case $cmd in
        deps) cmd_deps ;;
        build) cmd_build ;;
        up) cmd_up ;;
        down) cmd_down ;;
        run) cmd_run ;;
        status) cmd_status ;;
        migrate) lock_state; cmd_migrate; unlock_state ;;
        purge | new-epoch | check-feed | rebuild-feed | store-days | recompute-stats) require_bin; "$TODOSYNC_BIN" "$cmd" "$@" </dev/null 9>&- ;;
        backup) cmd_backup "$@" ;;
        restore) cmd_restore "$@" ;;
        db-start) lock_state; ensure_service_users; db_start; unlock_state ;;
        db-stop) lock_state; db_stop; unlock_state ;;
        responders-restart) lock_state; ensure_service_users; responders_stop; responders_start; unlock_state ;;
        responder-pids) cmd_responder_pids ;;
        env) cmd_env ;;
        nginx-config) lock_state; ensure_service_users; mkdir -p "$NGINX_DIR/tmp" "$LOG_DIR"; ensure_cert "$TLS_SAN"; render_nginx_conf; unlock_state; printf '%s\n' "$NGINX_CONF" ;;
        -h | --help | help | "") usage ;;
        *) log "unknown command: $cmd"; usage ;;
    esac
}

main "$@"
