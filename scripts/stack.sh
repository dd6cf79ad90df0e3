#!/usr/bin/env bash
# TodoSync local stack: MariaDB + todosync FastCGI responders + nginx, as plain processes.
#
# Usage: scripts/stack.sh COMMAND
#   deps            install missing Debian packages (apt-get; fast no-op when all are present)
#   build           swift build -c release --static-swift-stdlib --product todosync
#   up              start MariaDB, migrate, responders (supervised) and nginx; wait for /healthz
#   down            stop nginx, responders and MariaDB (idempotent)
#   run             deps + build + up, then stay in the foreground until SIGINT/SIGTERM, then down
#   status          show which parts are running
#   migrate         run `todosync migrate` against the stack's database (MariaDB must be up)
#   purge [ARGS]    run `todosync purge ARGS` (tombstone retention) against the stack's database
#   new-epoch       run `todosync new-epoch` (after restoring the database from a backup)
#   check-feed [ARGS]  run `todosync check-feed ARGS` (the sync change feed equals the tables)
#   db-stop         stop MariaDB only (for tests)
#   db-start        start MariaDB again on the same data dir and socket (no re-init)
#   responder-pids  print the pids of the running responder processes, one per line
#   env             print the effective configuration as KEY=VALUE lines
#   nginx-config    render <state>/nginx/nginx.conf (and the TLS certificate) without starting
#                   anything; prints the config's path
#
# Configuration: environment variables, then an optional config file, then defaults. The config
# file is sourced as shell: TODOSYNC_CONFIG, default <repo>/todosync.env when it exists
# (TODOSYNC_CONFIG=/dev/null disables it). Variables already in the environment win over the file.
# Relative paths are resolved against the repository root.
#
#   TODOSYNC_STATE_DIR          .state/run   everything this stack writes: data, logs, pids, config
#   TODOSYNC_SOCKET_DIR         <state>/sock unix sockets (MariaDB, responders); when that path is too
#                                            long for a unix socket, /tmp/todosync-<hash of state dir>
#   TODOSYNC_LISTEN_ADDRESS     127.0.0.1    IPv4 address nginx listens on
#   TODOSYNC_HTTP_PORT          8080
#   TODOSYNC_HTTPS_PORT         8443         self-signed certificate for localhost / 127.0.0.1
#   TODOSYNC_HTTP_REDIRECT      auto         on: the plain-HTTP listener answers 308 to https://; off:
#                                            it serves the API; auto: on unless the listen address
#                                            is loopback (127.0.0.0/8, ::1), so tests and the dev
#                                            stack keep plain HTTP
#   TODOSYNC_RESPONDERS         1            number of `todosync serve` processes, each supervised
#   TODOSYNC_WORKERS            4 x cores    worker threads per responder (--workers), 8..64
#   TODOSYNC_NGINX_WORKERS      2            nginx worker_processes
#   TODOSYNC_NGINX_USER         www-data     nginx worker user when started as root (workers get the
#                                            service group, to reach the responder sockets)
#   TODOSYNC_SERVICE_GROUP      todosync     when started as root: group of the service users; the
#                                            socket directories are 0750 and reachable only by it
#   TODOSYNC_APP_USER           todosync     when started as root: OS user of the responders
#   TODOSYNC_DB_OS_USER         todosync-db  when started as root: OS user of mariadbd
#   TODOSYNC_DROP_PRIVILEGES    auto         when started as root: on = daemons under the service
#                                            users above (created if missing); auto = the same
#                                            unless those users cannot reach the binary or state
#                                            dir (then a warning and root); off = everything root
#   TODOSYNC_AUTH_RATE          5            requests/second per client address on /api/v1/auth/: a
#                                            login costs an Argon2 hash (~20 ms of a core; ~50/s on
#                                            2 cores), so one address gets a tenth of that
#   TODOSYNC_AUTH_BURST         10           burst allowance for the same limit (served without delay)
#   TODOSYNC_HASH_CONCURRENCY   cores / 2    password hashes at once per responder (min 1); more
#                                            logins/registers at that moment get 429 at once
#   TODOSYNC_ACCOUNT_CONCURRENCY 4           requests in flight per bearer token (nginx limit_conn);
#                                            more at once get 429 + Retry-After at once
#   TODOSYNC_ENABLE_TEST_HOOKS  0            1: pass --enable-test-hooks to `todosync serve`
#   TODOSYNC_BENCH_LOCATIONS    0            1: add `location = /__bench/nginx` (200 text from nginx)
#   TODOSYNC_DB_NAME            todosync     database created for the app
#   TODOSYNC_DB_USER            todosync     app user (all privileges on the app database)
#   TODOSYNC_DB_PASSWORD        (generated)  empty: a random password generated on first run and
#                                            kept in <state>/secrets/db-password (mode 0600); the
#                                            responders read it from TODOSYNC_DB_PASSWORD_FILE
#   TODOSYNC_DB_PORT            (unset)      set: MariaDB also listens on 127.0.0.1:PORT; unset:
#                                            --skip-networking (unix socket only). The responders
#                                            always use the unix socket.
#   TODOSYNC_MARIADB_ARGS       (empty)      extra mariadbd options, split on whitespace
#   TODOSYNC_SQL_DIR            Sql          migrations directory for `todosync migrate`
#   TODOSYNC_LOG_LEVEL          info         passed through to the responders
#   TODOSYNC_BIN                (swift build -c release --show-bin-path)/todosync
#   TODOSYNC_NGINX_TEMPLATE     nginx/todosync.conf.template
#   TODOSYNC_FASTCGI_PARAMS     /etc/nginx/fastcgi_params
#   TODOSYNC_UP_TIMEOUT         60           seconds to wait for MariaDB, sockets and /healthz
#   TODOSYNC_STOP_TIMEOUT       20           seconds between SIGTERM (or nginx QUIT) and SIGKILL
#   TODOSYNC_SKIP_DEPS          0            1: `run` skips the deps step
#   TODOSYNC_SKIP_BUILD         0            1: `run` skips the build step
#
# Derived, not configurable: TODOSYNC_DB_SOCKET=<socket dir>/db/mariadb.sock and
# TODOSYNC_DB_PASSWORD_FILE (exported to the responders). MariaDB's root@localhost authenticates
# by unix_socket only: OS root (or, started by another user, that user's own account) over the
# socket, never by password; the socket directories keep every other user away from the sockets.
#
# Layout of the state dir: log/ (mariadb.log, responder-N.log, nginx-error.log, nginx-access.log),
# pids/, mariadb/data, nginx/ (prefix, rendered nginx.conf, temp dirs), tls/ (cert.pem, key.pem).
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO_ROOT=$(dirname "$(dirname "$SELF")")
cd "$REPO_ROOT"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# --- configuration -----------------------------------------------------------------------------

# Environment wins over the config file: remember exported TODOSYNC_* values, source the file,
# then restore them (top level, so `declare` stays global).
_config_file=${TODOSYNC_CONFIG-}
if [[ -z $_config_file && -f $REPO_ROOT/todosync.env ]]; then
    _config_file=$REPO_ROOT/todosync.env
fi
if [[ -n $_config_file ]]; then
    [[ -r $_config_file ]] || { echo "stack.sh: config file $_config_file not readable" >&2; exit 1; }
    _saved_env=""
    while IFS= read -r _name; do
        _saved_env+="$(declare -p "$_name")"$'\n'
    done < <(compgen -e | grep '^TODOSYNC_' || true)
    # shellcheck disable=SC1090
    source "$_config_file"
    eval "$_saved_env"
    unset _saved_env _name
    # The file may also set what only the responders read (TODOSYNC_QUOTA_*, TODOSYNC_LOGIN_*, ...).
    while IFS= read -r _name; do export "${_name?}"; done < <(compgen -v TODOSYNC_ || true)
    unset _name
fi

: "${TODOSYNC_STATE_DIR:=.state/run}"
: "${TODOSYNC_LISTEN_ADDRESS:=127.0.0.1}"
: "${TODOSYNC_HTTP_PORT:=8080}"
: "${TODOSYNC_HTTPS_PORT:=8443}"
: "${TODOSYNC_HTTP_REDIRECT:=auto}"
: "${TODOSYNC_RESPONDERS:=1}"
# Four workers per core: on 2 cores, 8 beat 12 and 32 on throughput and tail latency (README).
: "${TODOSYNC_WORKERS:=$(( $(nproc) * 4 < 8 ? 8 : ($(nproc) * 4 > 64 ? 64 : $(nproc) * 4) ))}"
: "${TODOSYNC_NGINX_WORKERS:=2}"
: "${TODOSYNC_NGINX_USER:=www-data}"
: "${TODOSYNC_SERVICE_GROUP:=todosync}"
: "${TODOSYNC_APP_USER:=todosync}"
: "${TODOSYNC_DB_OS_USER:=todosync-db}"
: "${TODOSYNC_DROP_PRIVILEGES:=auto}"
: "${TODOSYNC_AUTH_RATE:=5}"
: "${TODOSYNC_AUTH_BURST:=10}"
: "${TODOSYNC_HASH_CONCURRENCY:=$(( $(nproc) / 2 < 1 ? 1 : $(nproc) / 2 ))}"
: "${TODOSYNC_ACCOUNT_CONCURRENCY:=4}"
: "${TODOSYNC_ENABLE_TEST_HOOKS:=0}"
: "${TODOSYNC_BENCH_LOCATIONS:=0}"
: "${TODOSYNC_DB_NAME:=todosync}"
: "${TODOSYNC_DB_USER:=todosync}"
: "${TODOSYNC_DB_PASSWORD:=}"
: "${TODOSYNC_DB_PORT:=}"
: "${TODOSYNC_MARIADB_ARGS:=}"
: "${TODOSYNC_SQL_DIR:=Sql}"
: "${TODOSYNC_LOG_LEVEL:=info}"
: "${TODOSYNC_BIN:=}"
: "${TODOSYNC_NGINX_TEMPLATE:=nginx/todosync.conf.template}"
: "${TODOSYNC_FASTCGI_PARAMS:=/etc/nginx/fastcgi_params}"
: "${TODOSYNC_UP_TIMEOUT:=60}"
: "${TODOSYNC_STOP_TIMEOUT:=20}"
: "${TODOSYNC_SOCKET_DIR:=}"
: "${TODOSYNC_SKIP_DEPS:=0}"
: "${TODOSYNC_SKIP_BUILD:=0}"

CONFIG_VARS=(
    TODOSYNC_STATE_DIR TODOSYNC_SOCKET_DIR TODOSYNC_LISTEN_ADDRESS TODOSYNC_HTTP_PORT
    TODOSYNC_HTTPS_PORT TODOSYNC_HTTP_REDIRECT TODOSYNC_RESPONDERS TODOSYNC_WORKERS TODOSYNC_NGINX_WORKERS
    TODOSYNC_NGINX_USER TODOSYNC_SERVICE_GROUP TODOSYNC_APP_USER TODOSYNC_DB_OS_USER
    TODOSYNC_DROP_PRIVILEGES TODOSYNC_DB_PASSWORD_FILE TODOSYNC_AUTH_RATE TODOSYNC_AUTH_BURST TODOSYNC_HASH_CONCURRENCY TODOSYNC_ACCOUNT_CONCURRENCY TODOSYNC_ENABLE_TEST_HOOKS
    TODOSYNC_BENCH_LOCATIONS TODOSYNC_DB_NAME TODOSYNC_DB_USER TODOSYNC_DB_PASSWORD
    TODOSYNC_DB_PORT TODOSYNC_DB_SOCKET TODOSYNC_MARIADB_ARGS TODOSYNC_SQL_DIR
    TODOSYNC_LOG_LEVEL TODOSYNC_BIN TODOSYNC_NGINX_TEMPLATE TODOSYNC_FASTCGI_PARAMS
    TODOSYNC_UP_TIMEOUT TODOSYNC_STOP_TIMEOUT TODOSYNC_SKIP_DEPS TODOSYNC_SKIP_BUILD
)

log() { printf '[stack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2 || true; } # never fatal (see cmd_run)
die() { log "ERROR: $*"; exit 1; }

abspath() { realpath -m -- "$1"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
for _v in TODOSYNC_HTTP_PORT TODOSYNC_HTTPS_PORT TODOSYNC_RESPONDERS TODOSYNC_WORKERS \
    TODOSYNC_NGINX_WORKERS TODOSYNC_AUTH_RATE TODOSYNC_AUTH_BURST TODOSYNC_HASH_CONCURRENCY TODOSYNC_ACCOUNT_CONCURRENCY TODOSYNC_UP_TIMEOUT \
    TODOSYNC_STOP_TIMEOUT; do
    is_uint "${!_v}" || die "$_v must be a non-negative integer (got '${!_v}')"
done
[[ -z $TODOSYNC_DB_PORT ]] || is_uint "$TODOSYNC_DB_PORT" || die "TODOSYNC_DB_PORT must be a port number"
((TODOSYNC_RESPONDERS >= 1)) || die "TODOSYNC_RESPONDERS must be at least 1"
((TODOSYNC_ACCOUNT_CONCURRENCY >= 1)) || die "TODOSYNC_ACCOUNT_CONCURRENCY must be at least 1"
unset _v
case $TODOSYNC_DROP_PRIVILEGES in
    auto | on | off) ;;
    *) die "TODOSYNC_DROP_PRIVILEGES must be auto, on or off (got '$TODOSYNC_DROP_PRIVILEGES')" ;;
esac
case $TODOSYNC_HTTP_REDIRECT in
    auto | on | off) ;;
    *) die "TODOSYNC_HTTP_REDIRECT must be auto, on or off (got '$TODOSYNC_HTTP_REDIRECT')" ;;
esac

TODOSYNC_STATE_DIR=$(abspath "$TODOSYNC_STATE_DIR")
TODOSYNC_SQL_DIR=$(abspath "$TODOSYNC_SQL_DIR")
TODOSYNC_NGINX_TEMPLATE=$(abspath "$TODOSYNC_NGINX_TEMPLATE")
if [[ -z $TODOSYNC_SOCKET_DIR ]]; then
    TODOSYNC_SOCKET_DIR=$TODOSYNC_STATE_DIR/sock
    # sun_path holds 107 bytes; keep room for "/fcgi-NN.sock".
    if ((${#TODOSYNC_SOCKET_DIR} > 90)); then
        TODOSYNC_SOCKET_DIR=/tmp/todosync-$(printf '%s' "$TODOSYNC_STATE_DIR" | cksum | cut -d' ' -f1)
    fi
fi
TODOSYNC_SOCKET_DIR=$(abspath "$TODOSYNC_SOCKET_DIR")
TODOSYNC_DB_SOCKET=$TODOSYNC_SOCKET_DIR/db/mariadb.sock
TODOSYNC_DB_PASSWORD_FILE=$TODOSYNC_STATE_DIR/secrets/db-password
export "${CONFIG_VARS[@]}"

STATE=$TODOSYNC_STATE_DIR
SOCK_DIR=$TODOSYNC_SOCKET_DIR
LOG_DIR=$STATE/log
PID_DIR=$STATE/pids
DB_DIR=$STATE/mariadb
DB_DATA=$DB_DIR/data
DB_PIDFILE=$DB_DIR/mariadbd.pid
DB_SOCK_DIR=$SOCK_DIR/db
SECRETS_DIR=$STATE/secrets
DB_SOCK=$TODOSYNC_DB_SOCKET
NGINX_DIR=$STATE/nginx
NGINX_CONF=$NGINX_DIR/nginx.conf
NGINX_PIDFILE=$NGINX_DIR/nginx.pid
TLS_DIR=$STATE/tls
HTTP_BASE=http://$TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTP_PORT
HTTPS_BASE=https://$TODOSYNC_LISTEN_ADDRESS:$TODOSYNC_HTTPS_PORT

DEB_PACKAGES=(
    mariadb-server mariadb-client nginx libfcgi-dev libmariadb-dev libargon2-dev libssl-dev
    pkg-config openssl curl python3-venv systemd
    logrotate  # ops (issue 14): tests/logrotate checks the installed config with a real rotation
    libsqlite3-dev  # the client library (GRDB) uses the system SQLite
)

# --- helpers -----------------------------------------------------------------------------------

resolve_bin() {
    if [[ -z $TODOSYNC_BIN ]]; then
        local bin_dir=""
        if command -v swift >/dev/null 2>&1; then
            bin_dir=$(swift build -c release --show-bin-path 2>/dev/null || true)
        fi
        TODOSYNC_BIN=${bin_dir:-$REPO_ROOT/.build/release}/todosync
    fi
    TODOSYNC_BIN=$(abspath "$TODOSYNC_BIN")
    export TODOSYNC_BIN
}

require_bin() {
    resolve_bin
    [[ -x $TODOSYNC_BIN ]] || die "responder binary not found at $TODOSYNC_BIN (run: scripts/stack.sh build)"
}

require_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "'$c' not found (run: scripts/stack.sh deps)"
    done
}

# Lock the state dir against a concurrent up/down of the same stack. Re-entrant within one
# process; daemons are started through spawn_detached, which closes the lock descriptor.
LOCK_DEPTH=0
lock_state() {
    if ((LOCK_DEPTH == 0)); then
        mkdir -p "$STATE"
        exec 9>>"$STATE/.lock"
        flock -w 120 9 || die "another stack.sh is working on $STATE (lock held for 120 s)"
    fi
    LOCK_DEPTH=$((LOCK_DEPTH + 1))
}
unlock_state() {
    LOCK_DEPTH=$((LOCK_DEPTH - 1))
    if ((LOCK_DEPTH == 0)); then
        flock -u 9
        exec 9>&-
    fi
}

read_pidfile() { # prints the pid in FILE, if any
    local pid=""
    [[ -f $1 ]] && read -r pid 2>/dev/null <"$1" || true
    if is_uint "$pid"; then printf '%s\n' "$pid"; fi
}

# True when PID is a live (non-zombie) process whose command line contains PATTERN.
# The pattern check guards against stale pid files and pid reuse.
proc_matches() {
    local pid=$1 pattern=$2 cmdline
    [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [[ -n $cmdline && $cmdline == *"$pattern"* ]]
}

children_of() { # direct children of PID, from /proc
    local parent=$1 stat rest
    for stat in /proc/[0-9]*/stat; do
        read -r rest 2>/dev/null <"$stat" || continue
        rest=${rest##*) }
        set -- $rest
        [[ ${2:-} == "$parent" ]] && { stat=${stat#/proc/}; printf '%s\n' "${stat%/stat}"; }
    done
    return 0
}

# wait_gone SECONDS PATTERN PID...: wait until none of the pids matches; 0 if all gone.
wait_gone() {
    local timeout=$1 pattern=$2 deadline pid alive
    shift 2
    deadline=$((SECONDS + timeout))
    while :; do
        alive=0
        for pid in "$@"; do
            if proc_matches "$pid" "$pattern"; then alive=1; fi
        done
        ((alive)) || return 0
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

show_tail() { # show_tail FILE [LINES]
    local file=$1 lines=${2:-30}
    if [[ -s $file ]]; then
        echo "----- last $lines lines of $file -----" >&2
        tail -n "$lines" "$file" >&2
        echo "-----" >&2
    fi
}

as_root() {
    if ((EUID == 0)); then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for: $* (not root and no sudo)"
    fi
}

sql_string() { # single-quoted SQL string literal
    local s=${1//\\/\\\\}
    s=${s//\'/\'\'}
    printf "'%s'" "$s"
}

sql_ident() { # backquoted SQL identifier
    printf '`%s`' "${1//\`/\`\`}"
}

# Run CMD with stdin from /dev/null, output appended to LOG, in a new session (so terminal signals
# never reach it), with every inherited descriptor above 2 closed (a daemon must not keep our
# caller's pipes or the state lock open). Background: `spawn_detached LOG CMD... &` ($! is CMD).
spawn_detached() {
    local logfile=$1 fd
    shift
    for fd in /proc/"$BASHPID"/fd/*; do
        fd=${fd##*/}
        if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid "$@" </dev/null >>"$logfile" 2>&1
}

# MariaDB's admin account over the socket: root for OS root (unix_socket), else the invoking user's
# own unix_socket account (mariadb-install-db --auth-root-socket-user).
DB_ADMIN=root
((EUID == 0)) || DB_ADMIN=$(id -un)
db_client() { mariadb --no-defaults --socket="$DB_SOCK" --user="$DB_ADMIN" --connect-timeout=5 "$@"; }
db_ping() { mariadb-admin --no-defaults --socket="$DB_SOCK" --user="$DB_ADMIN" --connect-timeout=1 ping >/dev/null 2>&1; }

# --- least privilege -----------------------------------------------------------------------------

# 1 when the daemons run under the service users (decided by ensure_service_users, exported so the
# responder supervisors see the same answer).
: "${TODOSYNC__SERVICE_USERS:=0}"
export TODOSYNC__SERVICE_USERS

# Started as root: create the service group and users if missing, and check that they can reach
# the binary and the state dir (a checkout under a 0700 home cannot be reached).
ensure_service_users() {
    TODOSYNC__SERVICE_USERS=0
    ((EUID == 0)) && [[ $TODOSYNC_DROP_PRIVILEGES != off ]] || return 0
    local g=$TODOSYNC_SERVICE_GROUP u
    getent group "$g" >/dev/null || groupadd --system "$g" || die "groupadd $g failed"
    for u in "$TODOSYNC_APP_USER" "$TODOSYNC_DB_OS_USER"; do
        id -u "$u" >/dev/null 2>&1 ||
            useradd --system --gid "$g" --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u" ||
            die "useradd $u failed"
    done
    id -u "$TODOSYNC_NGINX_USER" >/dev/null 2>&1 || die "TODOSYNC_NGINX_USER $TODOSYNC_NGINX_USER does not exist"
    resolve_bin
    if ! setpriv --reuid="$TODOSYNC_APP_USER" --regid="$g" --clear-groups -- test -x "$TODOSYNC_BIN" -a -x "$STATE" 2>/dev/null; then
        [[ $TODOSYNC_DROP_PRIVILEGES == on ]] &&
            die "$TODOSYNC_APP_USER cannot reach $TODOSYNC_BIN or $STATE (TODOSYNC_DROP_PRIVILEGES=on)"
        log "WARNING: $TODOSYNC_APP_USER cannot reach $TODOSYNC_BIN or $STATE: the daemons run as root (TODOSYNC_DROP_PRIVILEGES=auto)"
        return 0
    fi
    TODOSYNC__SERVICE_USERS=1
}

# The socket directories: 0750, reachable by the service group only (or, without service users,
# by the invoking user only). The responders create theirs in <socket dir>, MariaDB in db/.
prepare_socket_dirs() {
    mkdir -p "$SOCK_DIR" "$DB_SOCK_DIR"
    chmod 750 "$SOCK_DIR" "$DB_SOCK_DIR"
    if ((TODOSYNC__SERVICE_USERS)); then
        chown "$TODOSYNC_APP_USER:$TODOSYNC_SERVICE_GROUP" "$SOCK_DIR"
        chown "$TODOSYNC_DB_OS_USER:$TODOSYNC_SERVICE_GROUP" "$DB_SOCK_DIR"
    elif ((EUID == 0)); then
        chown root:root "$SOCK_DIR" "$DB_SOCK_DIR"
    fi
}

# The application's database password: TODOSYNC_DB_PASSWORD when set, else generated once into
# <state>/secrets/db-password (0600, owned by the responders' user).
db_password() {
    if [[ -n $TODOSYNC_DB_PASSWORD ]]; then printf '%s' "$TODOSYNC_DB_PASSWORD"; return 0; fi
    if [[ ! -s $TODOSYNC_DB_PASSWORD_FILE ]]; then
        (umask 077 && mkdir -p "$SECRETS_DIR" &&
            openssl rand -base64 48 | tr -dc 'A-Za-z0-9' | head -c 32 >"$TODOSYNC_DB_PASSWORD_FILE.tmp" &&
            mv -f "$TODOSYNC_DB_PASSWORD_FILE.tmp" "$TODOSYNC_DB_PASSWORD_FILE") || die "could not write $TODOSYNC_DB_PASSWORD_FILE"
    fi
    chmod 700 "$SECRETS_DIR"
    chmod 600 "$TODOSYNC_DB_PASSWORD_FILE"
    if ((TODOSYNC__SERVICE_USERS)); then
        chown "$TODOSYNC_APP_USER:$TODOSYNC_SERVICE_GROUP" "$SECRETS_DIR" "$TODOSYNC_DB_PASSWORD_FILE"
    fi
    cat "$TODOSYNC_DB_PASSWORD_FILE"
}

# --- deps / build ------------------------------------------------------------------------------

cmd_deps() {
    local missing=() pkg
    for pkg in "${DEB_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        log "deps: all Debian packages present"
    else
        log "deps: installing ${missing[*]}"
        # Keep package scripts from starting system-wide mariadb/nginx services.
        local policy=/usr/sbin/policy-rc.d created_policy=0
        if [[ ! -e $policy ]]; then
            printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
            as_root chmod 755 "$policy"
            created_policy=1
        fi
        local rc=0
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
        if ((rc == 0)); then
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                "${missing[@]}" || rc=$?
        fi
        ((created_policy)) && as_root rm -f "$policy"
        ((rc == 0)) || die "apt-get failed (exit $rc)"
    fi
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
    resolve_bin
    log "build: done in $((SECONDS - start)) s -> $TODOSYNC_BIN"
}

# --- MariaDB -----------------------------------------------------------------------------------

db_pid() {
    local pid file
    # pids/mariadbd.pid: where stacks before the service users kept it (an upgrade finds it there)
    for file in "$DB_PIDFILE" "$PID_DIR/mariadbd.pid"; do
        pid=$(read_pidfile "$file")
        if proc_matches "$pid" "--datadir=$DB_DATA"; then printf '%s\n' "$pid"; return 0; fi
    done
}

db_start() {
    require_cmd mariadbd mariadb-install-db mariadb mariadb-admin
    mkdir -p "$DB_DIR" "$LOG_DIR" "$PID_DIR"
    prepare_socket_dirs
    local launched=""
    if [[ -n $(db_pid) ]]; then
        db_ping && { log "mariadb: already running"; return 0; }
    else
        local user_args=() socket_user
        socket_user=$(id -un)
        if ((TODOSYNC__SERVICE_USERS)); then
            user_args=(--user="$TODOSYNC_DB_OS_USER")
            mkdir -p "$DB_DATA"
            chown -R "$TODOSYNC_DB_OS_USER:$TODOSYNC_SERVICE_GROUP" "$DB_DIR"
            chmod 750 "$DB_DIR"
            touch "$LOG_DIR/mariadb.log"
            chown "$TODOSYNC_DB_OS_USER" "$LOG_DIR/mariadb.log"
        elif ((EUID == 0)); then
            user_args=(--user=root)
            chown -R root:root "$DB_DIR"
        fi
        if [[ ! -d $DB_DATA/mysql ]]; then
            log "mariadb: initialising data dir $DB_DATA"
            rm -rf "$DB_DATA"
            mkdir -p "$DB_DATA"
            ((TODOSYNC__SERVICE_USERS)) && chown "$TODOSYNC_DB_OS_USER:$TODOSYNC_SERVICE_GROUP" "$DB_DATA"
            # root@localhost (and the invoking user's account) by unix_socket only: no password
            # login, and only that OS user gets in over the socket.
            if ! mariadb-install-db --no-defaults --datadir="$DB_DATA" "${user_args[@]}" \
                --auth-root-authentication-method=socket --auth-root-socket-user="$socket_user" \
                --skip-test-db --skip-name-resolve \
                >"$LOG_DIR/mariadb-install.log" 2>&1; then
                show_tail "$LOG_DIR/mariadb-install.log"
                die "mariadb-install-db failed"
            fi
        fi
        local args=(
            --no-defaults --datadir="$DB_DATA" --socket="$DB_SOCK" --pid-file="$DB_PIDFILE"
            --log-error="$LOG_DIR/mariadb.log" "${user_args[@]}"
            --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci
            --skip-name-resolve --max-connections=500
        )
        if [[ -n $TODOSYNC_DB_PORT ]]; then
            args+=(--port="$TODOSYNC_DB_PORT" --bind-address=127.0.0.1)
        else
            args+=(--skip-networking)
        fi
        # shellcheck disable=SC2206 # extra args are intentionally split on whitespace
        [[ -n $TODOSYNC_MARIADB_ARGS ]] && args+=($TODOSYNC_MARIADB_ARGS)
        log "mariadb: starting (socket $DB_SOCK${TODOSYNC_DB_PORT:+, tcp 127.0.0.1:$TODOSYNC_DB_PORT})"
        rm -f "$DB_PIDFILE"
        (spawn_detached "$LOG_DIR/mariadb.log" mariadbd "${args[@]}") &
        launched=$!
    fi
    local deadline=$((SECONDS + TODOSYNC_UP_TIMEOUT))
    until db_ping; do
        if ((SECONDS >= deadline)) || { [[ -n $launched && -z $(db_pid) ]] && ! proc_matches "$launched" mariadbd; }; then
            show_tail "$LOG_DIR/mariadb.log"
            die "mariadb did not become ready (log: $LOG_DIR/mariadb.log)"
        fi
        sleep 0.1
    done
    log "mariadb: ready (pid $(db_pid))"
}

db_setup() {
    local db user pass host sql
    db=$(sql_ident "$TODOSYNC_DB_NAME")
    user=$(sql_string "$TODOSYNC_DB_USER")
    local password
    password=$(db_password)
    pass=$(sql_string "$password")
    sql="CREATE DATABASE IF NOT EXISTS $db CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
    if ((EUID == 0)); then
        # Data dirs initialised before root went unix_socket-only (with no password).
        sql+=" ALTER USER root@localhost IDENTIFIED VIA unix_socket;"
        sql+=" DROP USER IF EXISTS root@'127.0.0.1', root@'::1', root@$(sql_string "$(hostname)");"
    fi
    for host in localhost 127.0.0.1 ::1; do
        host=$(sql_string "$host")
        sql+=" CREATE USER IF NOT EXISTS $user@$host IDENTIFIED BY $pass;"
        sql+=" ALTER USER $user@$host IDENTIFIED BY $pass;"
        sql+=" GRANT ALL PRIVILEGES ON $db.* TO $user@$host;"
    done
    # via stdin so the password never shows up in a process list
    db_client <<<"$sql" || die "could not create database/user"
    log "mariadb: database '$TODOSYNC_DB_NAME' and user '$TODOSYNC_DB_USER' ready"
}

db_stop() {
    local pid
    pid=$(db_pid)
    if [[ -z $pid ]]; then
        log "mariadb: not running"
        rm -f "$DB_PIDFILE"
        return 0
    fi
    log "mariadb: stopping (pid $pid)"
    timeout 30 mariadb-admin --no-defaults --socket="$DB_SOCK" --user=root shutdown >/dev/null 2>&1 ||
        kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$TODOSYNC_STOP_TIMEOUT" "--datadir=$DB_DATA" "$pid"; then
        log "mariadb: still running after ${TODOSYNC_STOP_TIMEOUT}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone 5 "--datadir=$DB_DATA" "$pid" || true
    fi
    rm -f "$DB_PIDFILE"
    log "mariadb: stopped"
}

cmd_migrate() {
    require_bin
    [[ -d $TODOSYNC_SQL_DIR ]] || die "migrations directory $TODOSYNC_SQL_DIR not found"
    log "migrate: $TODOSYNC_BIN migrate --sql-dir $TODOSYNC_SQL_DIR"
    if ! "$TODOSYNC_BIN" migrate --sql-dir "$TODOSYNC_SQL_DIR" </dev/null >"$LOG_DIR/migrate.log" 2>&1 9>&-; then
        show_tail "$LOG_DIR/migrate.log" 40
        die "todosync migrate failed"
    fi
    sed 's/^/  migrate: /' "$LOG_DIR/migrate.log" | tail -n 20 >&2
}

# Removes tombstones and push results past the retention horizon (arguments go to `todosync purge`,
# e.g. --retention-days 90 or --retention-seconds 0 in tests). Run it daily against a live stack.
cmd_purge() {
    require_bin
    "$TODOSYNC_BIN" purge "$@" </dev/null 9>&-
}

# --- TLS ---------------------------------------------------------------------------------------

ensure_cert() {
    mkdir -p "$TLS_DIR"
    [[ -s $TLS_DIR/cert.pem && -s $TLS_DIR/key.pem ]] && return 0
    require_cmd openssl
    local san="DNS:localhost,IP:127.0.0.1"
    [[ $TODOSYNC_LISTEN_ADDRESS != 127.0.0.1 ]] && san+=",IP:$TODOSYNC_LISTEN_ADDRESS"
    log "tls: generating self-signed certificate ($san)"
    (
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
            -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" \
            -subj /CN=localhost -addext "subjectAltName=$san" >"$LOG_DIR/openssl.log" 2>&1
    ) || { show_tail "$LOG_DIR/openssl.log"; die "openssl req failed"; }
    chmod 644 "$TLS_DIR/cert.pem"
}

# --- responders --------------------------------------------------------------------------------

responder_sock() { printf '%s/fcgi-%s.sock\n' "$SOCK_DIR" "$1"; }
supervisor_pattern() { printf '__supervise %s %s' "$1" "$STATE"; }

supervisor_pid() {
    local pid
    pid=$(read_pidfile "$PID_DIR/supervisor-$1.pid")
    if proc_matches "$pid" "$(supervisor_pattern "$1")"; then printf '%s\n' "$pid"; fi
}

responder_pid() {
    local pid
    pid=$(read_pidfile "$PID_DIR/responder-$1.pid")
    if proc_matches "$pid" "$(responder_sock "$1")"; then printf '%s\n' "$pid"; fi
}

responder_indexes() { # every index that has a pid file, plus 1..TODOSYNC_RESPONDERS
    {
        seq 1 "$TODOSYNC_RESPONDERS"
        local f
        for f in "$PID_DIR"/supervisor-*.pid "$PID_DIR"/responder-*.pid; do
            [[ -e $f ]] || continue
            f=${f##*-}
            printf '%s\n' "${f%.pid}"
        done
    } | grep -E '^[0-9]+$' | sort -nu
}

# Runs in its own session (setsid): starts `todosync serve`, restarts it with exponential backoff
# when it exits, forwards SIGTERM/SIGINT to it and then stops restarting.
SUP_STOP=0 SUP_CHILD="" SUP_SLEEPER=""
supervise() {
    set +e # a supervisor must not die of a transient error
    local idx=$1 sock pidfile started rc uptime restarts=0 backoff_ms=250
    sock=$(responder_sock "$idx")
    pidfile=$PID_DIR/responder-$idx.pid
    local args=(serve --socket "$sock" --workers "$TODOSYNC_WORKERS")
    [[ $TODOSYNC_ENABLE_TEST_HOOKS == 1 ]] && args+=(--enable-test-hooks)
    # Under the service user, its socket 0660 in the service group (nginx's workers have it).
    local run_as=()
    if ((TODOSYNC__SERVICE_USERS)); then
        args+=(--socket-group "$TODOSYNC_SERVICE_GROUP")
        run_as=(setpriv --reuid="$TODOSYNC_APP_USER" --regid="$TODOSYNC_SERVICE_GROUP" --init-groups --)
    fi
    slog() { printf '[supervisor %s %s] %s\n' "$idx" "$(date '+%Y-%m-%d %H:%M:%S')" "$*"; }
    on_stop() {
        SUP_STOP=1
        slog "stop requested"
        if [[ -n $SUP_CHILD ]]; then kill -TERM "$SUP_CHILD" 2>/dev/null || true; fi
        if [[ -n $SUP_SLEEPER ]]; then kill -TERM "$SUP_SLEEPER" 2>/dev/null || true; fi
        return 0
    }
    trap on_stop TERM INT
    trap '' HUP
    echo "$$" >"$PID_DIR/supervisor-$idx.pid"
    resolve_bin
    slog "supervising: $TODOSYNC_BIN ${args[*]}"
    while ((!SUP_STOP)); do
        started=$SECONDS
        # Two malloc arenas: glibc otherwise gives each busy worker thread its own arena and keeps
        # what it frees, which grows RSS by tens of MB under load (see bench/README.md). A fixed
        # mmap threshold: Argon2's 19 MiB blocks are then always mmapped and returned on free
        # (glibc's dynamic threshold would keep ~19 MiB per worker after its first login).
        # TODOSYNC_INSTANCE: the `responder` label of its metrics (ops, issue 14).
        TODOSYNC_INSTANCE=$idx \
        MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-1048576} \
            "${run_as[@]}" "$TODOSYNC_BIN" "${args[@]}" </dev/null &
        SUP_CHILD=$!
        # a stop request that arrived between fork and the assignment above
        if ((SUP_STOP)); then kill -TERM "$SUP_CHILD" 2>/dev/null || true; fi
        echo "$SUP_CHILD" >"$pidfile.tmp" && mv -f "$pidfile.tmp" "$pidfile"
        slog "responder started (pid $SUP_CHILD)"
        rc=0
        wait "$SUP_CHILD" || rc=$?
        # `wait` returns early when a trapped signal arrives: keep waiting until the child is gone
        # (kill -0 also sees it while it is an unreaped zombie).
        while kill -0 "$SUP_CHILD" 2>/dev/null; do
            rc=0
            wait "$SUP_CHILD" || rc=$?
        done
        rm -f "$pidfile"
        uptime=$((SECONDS - started))
        SUP_CHILD=""
        if ((SUP_STOP)); then
            slog "responder exited (status $rc) after stop request"
            break
        fi
        ((uptime >= 30)) && backoff_ms=250
        restarts=$((restarts + 1))
        slog "responder exited with status $rc after ${uptime}s; restart #$restarts in $((backoff_ms / 1000)).$(printf '%03d' $((backoff_ms % 1000)))s"
        sleep "$((backoff_ms / 1000)).$(printf '%03d' $((backoff_ms % 1000)))" &
        SUP_SLEEPER=$!
        wait "$SUP_SLEEPER" 2>/dev/null || true
        SUP_SLEEPER=""
        backoff_ms=$((backoff_ms * 2))
        ((backoff_ms > 10000)) && backoff_ms=10000
    done
    rm -f "$pidfile"
    [[ $(read_pidfile "$PID_DIR/supervisor-$idx.pid") == "$$" ]] && rm -f "$PID_DIR/supervisor-$idx.pid"
    slog "supervisor exiting"
}

responders_start() {
    require_bin
    mkdir -p "$PID_DIR" "$LOG_DIR"
    prepare_socket_dirs
    local idx sock
    for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
        if [[ -n $(supervisor_pid "$idx") ]]; then
            log "responder $idx: supervisor already running"
            continue
        fi
        sock=$(responder_sock "$idx")
        # an orphaned responder (supervisor killed) would otherwise lose its socket to the new one
        local orphan
        orphan=$(responder_pid "$idx")
        if [[ -n $orphan ]]; then
            kill -TERM "$orphan" 2>/dev/null || true
            wait_gone "$TODOSYNC_STOP_TIMEOUT" "$sock" "$orphan" || kill -KILL "$orphan" 2>/dev/null || true
        fi
        rm -f "$sock"
        log "responder $idx: starting supervisor (socket $sock, $TODOSYNC_WORKERS workers)"
        (spawn_detached "$LOG_DIR/responder-$idx.log" "$SELF" __supervise "$idx" "$STATE") &
        echo "$!" >"$PID_DIR/supervisor-$idx.pid"
    done
    # responders beyond the configured count (count was lowered): stop them
    local extra=()
    for idx in $(responder_indexes); do
        ((idx > TODOSYNC_RESPONDERS)) && extra+=("$idx")
    done
    ((${#extra[@]} == 0)) || responders_stop "${extra[@]}"

    local deadline=$((SECONDS + TODOSYNC_UP_TIMEOUT)) missing
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
    local indexes=("$@") idx pid entry sups=() kids=()
    ((${#indexes[@]})) || mapfile -t indexes < <(responder_indexes)
    local sup
    for idx in "${indexes[@]}"; do
        sup=$(supervisor_pid "$idx")
        pid=$(responder_pid "$idx")
        [[ -n $pid ]] && kids+=("$pid:$(responder_sock "$idx")")
        # The supervisor forwards SIGTERM to its responder and stops restarting it. Exactly one
        # SIGTERM reaches the responder: directly only when its supervisor is gone.
        if [[ -n $sup ]]; then
            sups+=("$sup:$(supervisor_pattern "$idx")")
            kill -TERM "$sup" 2>/dev/null || true
        elif [[ -n $pid ]]; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    if ((${#sups[@]} + ${#kids[@]} > 0)); then
        log "responders: stopping ${#kids[@]} responder(s), ${#sups[@]} supervisor(s)"
        local deadline=$((SECONDS + TODOSYNC_STOP_TIMEOUT)) alive
        while :; do
            alive=()
            for entry in "${sups[@]}" "${kids[@]}"; do
                proc_matches "${entry%%:*}" "${entry#*:}" && alive+=("$entry")
            done
            ((${#alive[@]} == 0)) && break
            if ((SECONDS >= deadline)); then
                log "responders: ${#alive[@]} process(es) still running after ${TODOSYNC_STOP_TIMEOUT}s, sending SIGKILL"
                for entry in "${alive[@]}"; do
                    kill -KILL "${entry%%:*}" 2>/dev/null || true
                done
                for entry in "${sups[@]}"; do # the supervisor's session: its child and a backoff sleep
                    kill -KILL -- "-${entry%%:*}" 2>/dev/null || true
                done
                sleep 0.2
                break
            fi
            sleep 0.1
        done
    fi
    for idx in "${indexes[@]}"; do
        rm -f "$PID_DIR/supervisor-$idx.pid" "$PID_DIR/responder-$idx.pid" "$(responder_sock "$idx")"
    done
}

cmd_responder_pids() {
    local idx pid
    for idx in $(responder_indexes); do
        pid=$(responder_pid "$idx")
        [[ -n $pid ]] && printf '%s\n' "$pid"
    done
    return 0
}

# --- nginx -------------------------------------------------------------------------------------

nginx_pid() {
    local pid
    pid=$(read_pidfile "$NGINX_PIDFILE")
    if proc_matches "$pid" "$NGINX_CONF"; then printf '%s\n' "$pid"; fi
}

render_nginx_conf() {
    [[ -r $TODOSYNC_NGINX_TEMPLATE ]] || die "nginx template $TODOSYNC_NGINX_TEMPLATE not found"
    [[ -r $TODOSYNC_FASTCGI_PARAMS ]] || die "$TODOSYNC_FASTCGI_PARAMS not found (install nginx)"
    grep -q 'REQUEST_URI' "$TODOSYNC_FASTCGI_PARAMS" ||
        die "$TODOSYNC_FASTCGI_PARAMS does not pass REQUEST_URI"
    local -A vals
    local idx upstream="" bench="" user_directive=""
    for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
        upstream+="        server \"unix:$(responder_sock "$idx")\" max_fails=2 fail_timeout=2s;"$'\n'
    done
    if [[ $TODOSYNC_BENCH_LOCATIONS == 1 ]]; then
        bench=$'        # benchmark baseline: nginx alone, no upstream (TODOSYNC_BENCH_LOCATIONS=1)\n'
        bench+=$'        location = /__bench/nginx {\n'
        bench+=$'            default_type text/plain;\n'
        bench+=$'            return 200 "ok\\n";\n'
        bench+=$'        }\n'
        bench+=$'        # benchmark baseline: a responder route that touches no database\n'
        bench+=$'        location = /__bench/fastcgi {\n'
        bench+=$'            client_max_body_size 1m;\n'
        bench+=$'            fastcgi_pass todosync_responders;\n'
        bench+=$'        }\n'
    fi
    if ((TODOSYNC__SERVICE_USERS)); then
        user_directive="user $TODOSYNC_NGINX_USER $TODOSYNC_SERVICE_GROUP;"
    elif ((EUID == 0)); then
        user_directive="user root;"
    fi
    local redirect=0
    case $TODOSYNC_HTTP_REDIRECT in
        on) redirect=1 ;;
        auto) [[ $TODOSYNC_LISTEN_ADDRESS == 127.* || $TODOSYNC_LISTEN_ADDRESS == ::1 || $TODOSYNC_LISTEN_ADDRESS == "[::1]" || $TODOSYNC_LISTEN_ADDRESS == localhost ]] || redirect=1 ;;
    esac
    vals=(
        [NGINX_USER_DIRECTIVE]=$user_directive
        [NGINX_WORKERS]=$TODOSYNC_NGINX_WORKERS
        [NGINX_DIR]=$NGINX_DIR
        [LOG_DIR]=$LOG_DIR
        [LISTEN_ADDRESS]=$TODOSYNC_LISTEN_ADDRESS
        [HTTP_PORT]=$TODOSYNC_HTTP_PORT
        [HTTPS_PORT]=$TODOSYNC_HTTPS_PORT
        [TLS_CERT]=$TLS_DIR/cert.pem
        [TLS_KEY]=$TLS_DIR/key.pem
        [FASTCGI_PARAMS]=$TODOSYNC_FASTCGI_PARAMS
        [UPSTREAM_SERVERS]=${upstream%$'\n'}
        [AUTH_RATE]=$TODOSYNC_AUTH_RATE
        [AUTH_BURST]=$TODOSYNC_AUTH_BURST
        [BENCH_LOCATIONS]=${bench%$'\n'}
        [HTTP_REDIRECT]=$redirect
        [HTTPS_REDIRECT_PORT]=$TODOSYNC_HTTPS_PORT
        [ACCOUNT_CONCURRENCY]=$TODOSYNC_ACCOUNT_CONCURRENCY
    )
    local text key
    text=$(<"$TODOSYNC_NGINX_TEMPLATE")
    for key in "${!vals[@]}"; do
        text=${text//"\${$key}"/"${vals[$key]}"}
    done
    if [[ $text =~ \$\{[A-Z_]+\} ]]; then
        die "unknown placeholder ${BASH_REMATCH[0]} in $TODOSYNC_NGINX_TEMPLATE"
    fi
    printf '%s\n' "$text" >"$NGINX_CONF.tmp"
    mv -f "$NGINX_CONF.tmp" "$NGINX_CONF"
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
    local pid
    pid=$(nginx_pid)
    if [[ -n $pid ]]; then
        log "nginx: reloading configuration (pid $pid)"
        kill -HUP "$pid"
        return 0
    fi
    log "nginx: starting on $HTTP_BASE and $HTTPS_BASE"
    rm -f "$NGINX_PIDFILE"
    : >"$LOG_DIR/nginx-start.log"
    if ! (spawn_detached "$LOG_DIR/nginx-start.log" nginx -p "$NGINX_DIR/" -c "$NGINX_CONF" -e "$LOG_DIR/nginx-error.log"); then
        cat "$LOG_DIR/nginx-start.log" >&2
        show_tail "$LOG_DIR/nginx-error.log" 10
        die "nginx failed to start"
    fi
}

nginx_stop() {
    local pid workers
    pid=$(nginx_pid)
    if [[ -z $pid ]]; then
        log "nginx: not running"
        rm -f "$NGINX_PIDFILE"
        return 0
    fi
    mapfile -t workers < <(children_of "$pid")
    log "nginx: stopping (pid $pid, graceful)"
    kill -QUIT "$pid" 2>/dev/null || true
    if ! wait_gone "$TODOSYNC_STOP_TIMEOUT" "$NGINX_CONF" "$pid"; then
        log "nginx: still running after ${TODOSYNC_STOP_TIMEOUT}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    # workers notice a dead master only lazily; make sure none is left serving
    local w
    for w in "${workers[@]}"; do
        proc_matches "$w" "nginx" && kill -KILL "$w" 2>/dev/null || true
    done
    rm -f "$NGINX_PIDFILE"
    log "nginx: stopped"
}

wait_healthy() {
    local url=$HTTP_BASE/healthz code="" deadline=$((SECONDS + TODOSYNC_UP_TIMEOUT))
    while :; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$url" 2>/dev/null) || true
        [[ $code == 200 ]] && return 0
        if ((SECONDS >= deadline)); then
            local idx
            for ((idx = 1; idx <= TODOSYNC_RESPONDERS; idx++)); do
                show_tail "$LOG_DIR/responder-$idx.log" 20
            done
            show_tail "$LOG_DIR/nginx-error.log" 20
            die "$url did not answer 200 within ${TODOSYNC_UP_TIMEOUT}s (last status: ${code:-none})"
        fi
        sleep 0.2
    done
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
    ensure_cert
    responders_start
    nginx_start
    wait_healthy
    unlock_state
    log "up: $HTTP_BASE/healthz answers 200 (state: $STATE)"
}

cmd_down() {
    lock_state
    nginx_stop
    responders_stop
    db_stop
    unlock_state
}

cmd_status() { # exit status 0 only when every part is running
    local pid idx sp rp rc=0
    pid=$(db_pid)
    if [[ -n $pid ]]; then echo "mariadb       running (pid $pid, socket $DB_SOCK)"; else echo "mariadb       stopped"; rc=1; fi
    for idx in $(responder_indexes); do
        sp=$(supervisor_pid "$idx")
        rp=$(responder_pid "$idx")
        if [[ -n $sp || -n $rp ]]; then
            printf 'responder %-3s supervisor %s, responder %s\n' "$idx" "${sp:-none}" "${rp:-none}"
        else
            printf 'responder %-3s stopped\n' "$idx"
        fi
        [[ -n $rp ]] || rc=1
    done
    pid=$(nginx_pid)
    if [[ -n $pid ]]; then echo "nginx         running (pid $pid, config $NGINX_CONF)"; else echo "nginx         stopped"; rc=1; fi
    return "$rc"
}

cmd_env() {
    resolve_bin
    local v
    for v in "${CONFIG_VARS[@]}"; do
        printf '%s=%s\n' "$v" "${!v}"
    done
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
    sed -n '2,21p' "$SELF" | sed 's/^# \{0,1\}//' >&2
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
        purge) cmd_purge "$@" ;;
        new-epoch) require_bin; "$TODOSYNC_BIN" new-epoch </dev/null 9>&- ;;
        check-feed) require_bin; "$TODOSYNC_BIN" check-feed "$@" </dev/null 9>&- ;;
        db-start) lock_state; ensure_service_users; db_start; unlock_state ;;
        db-stop) lock_state; db_stop; unlock_state ;;
        responder-pids) cmd_responder_pids ;;
        env) cmd_env ;;
        nginx-config) lock_state; ensure_service_users; mkdir -p "$NGINX_DIR/tmp" "$LOG_DIR"; ensure_cert; render_nginx_conf; unlock_state; printf '%s\n' "$NGINX_CONF" ;;
        __supervise) supervise "$1" ;;
        -h | --help | help | "") usage ;;
        *) log "unknown command: $cmd"; usage ;;
    esac
}

main "$@"
