#!/usr/bin/env bash
# TodoSync on several hosts, on one machine: a MariaDB Galera cluster, responder hosts on TCP and
# nginx in front, each host its own Linux network namespace joined by veth links to a bridge.
#
# Usage: scripts/cluster.sh COMMAND
#   deps              install what the cluster needs besides the stack's packages (galera-4, rsync,
#                     iproute2, nginx's stream module, redis-server: never started as a service)
#   up                build the hosts, bootstrap Galera, migrate once, start responders and nginx;
#                     the last line printed is the base URL (http://127.0.0.1:PORT)
#   down              stop everything and delete every namespace and link (idempotent)
#   status            each node's wsrep_cluster_size and wsrep_local_state_comment, and the hosts
#   node-kill N       SIGKILL every process of database host N (a crash)
#   node-start N      start node N again (it rejoins by IST, or SST when its state is gone)
#   node-wait N [S]   wait up to S seconds (default 120) until node N is Synced
#   app-kill N        SIGKILL every process of responder host N
#   app-start N       start responder host N again
#   watch [S]         every second until stopped (or for S seconds), one line per running node:
#                     receive queue, flow control sent/paused, transactions waiting on a lock and
#                     the longest wait, appliers busy over 2 s; a wait of 3 s or more (never one of
#                     the responders' 1 s waits: an applier's) also dumps that node's transactions
#                     and SHOW ENGINE INNODB STATUS. For a write stall under faults (docs/SCALING.md)
#   env               print the effective configuration as KEY=VALUE lines
#   responder-pids    the responder hosts' `todosync serve` pids, one per line (for bench/bench.py)
#   check --nemesis KIND --seed N --seconds S
#                     up, a recorded workload under a seeded nemesis, heal, the history checker, down
#                     (scripts/partition/, docs/HISTORY.md); exits 0 only when every property holds;
#                     `check --nemesis list` prints the kinds at once (nothing built or started);
#                     a batch (`--nemesis K1,K2 --seed 1-5`) runs each kind x seed on one cluster;
#                     `--inject NAME[,NAME]` runs the test build (todosync-test) with those bugs on
#                     purpose on every responder host (TODOSYNC_TEST_INJECT), to see the checker fail
#   test PYTHON [PYTEST ARGS...]
#                     up, run `PYTHON -m pytest PYTEST ARGS` with the suite's environment pointing
#                     at the cluster (see Tests/integration/clusterlib.py), then down; exits with
#                     pytest's status (scripts/test.sh --cluster and the default run use it)
#
# Topology (addresses exist only inside the namespaces, never on the host):
#
#   host loopback 127.0.0.1:HTTP/HTTPS ──nginx stream (PROXY protocol)──▶ unix sockets
#     ──▶ tsx-fe 10.213.0.2: nginx (TLS, routing, limits), upstream of the responder hosts
#     ──FastCGI/TCP──▶ tsx-app1..M 10.213.0.21..: `todosync serve --listen IP:9000 --allow 10.213.0.2`
#     ──MariaDB/TCP──▶ tsx-db1..N 10.213.0.11..: mariadbd + galera-4, replicating to each other
#   All hosts hang off the bridge tsx-br in the namespace tsx-net.
#
#   With TODOSYNC_CLUSTER_FRONTS=2, a second front tsx-fe2 10.213.0.3 (the same upstream), reached
#   on 127.0.0.2:HTTP/HTTPS, and a private redis-server in tsx-rds 10.213.0.5:6379 (its own
#   config and data dir under the state dir; never the system's instance) that both fronts' nchan
#   use (nchan_redis_pass): a poke published on either front reaches streams on both. Responder
#   host N publishes to front ((N-1) mod FRONTS)+1's publisher socket (docs/SCALING.md).
#
# Configuration (environment):
#   TODOSYNC_CLUSTER_STATE_DIR   .state/cluster  logs, front sockets, rendered configs, TLS
#   TODOSYNC_CLUSTER_DB_DIR      /var/lib/todosync-cluster/PREFIX
#                                                the Galera nodes' data dirs, configs and sockets:
#                                                outside the checkout, so that mariadbd (user mysql)
#                                                reaches them wherever the clone lives (a clone
#                                                under a 0700 home cannot be entered by mysql);
#                                                wiped by `up` and removed by `down`
#   TODOSYNC_CLUSTER_NODES       3               Galera nodes (1 runs a single-node "cluster")
#   TODOSYNC_CLUSTER_APPS        2               responder hosts
#   TODOSYNC_CLUSTER_FRONTS      1               nginx fronts: 1, or 2 (live sync through nchan's
#                                                Redis mode and a private redis-server)
#   TODOSYNC_CLUSTER_WORKERS     8               worker threads per responder host
#   TODOSYNC_CLUSTER_HTTP_PORT   48180           front ports on 127.0.0.1
#   TODOSYNC_CLUSTER_HTTPS_PORT  48543
#   TODOSYNC_CLUSTER_NET         10.213.0        the private /24 (first three octets)
#   TODOSYNC_CLUSTER_PREFIX      tsx             namespace and link name prefix (≤ 8 characters);
#                                                clusters with different prefixes run side by side
#                                                (each has its own bridge, so addresses may repeat)
#   TODOSYNC_CLUSTER_SYNC_WAIT   1               wsrep_sync_wait on every node (1: reads wait for
#                                                the node to apply what the cluster committed before)
#   TODOSYNC_CLUSTER_ROUTING     round-robin     nginx upstream balancing: round-robin, or `hash`
#                                                (each bearer token always to the same responder host)
#   TODOSYNC_ENABLE_TEST_HOOKS   0               1: responders get --enable-test-hooks
#   TODOSYNC_TEST_INJECT         (none)          with test hooks only: bugs on purpose every responder
#                                                host starts with (docs/HISTORY.md; `check --inject`)
#   TODOSYNC_AUTH_RATE / _BURST  100 / 200       as in stack.sh, raised for the tests' many logins
#                                                from one address (the stack's: nginx/limits.env)
#   TODOSYNC_ACCOUNT_CONCURRENCY nginx/limits.env as in stack.sh (requests in flight per token)
#   TODOSYNC_ADDRESS_CONCURRENCY nginx/limits.env as in stack.sh (requests in progress per address)
#   TODOSYNC_ACCOUNT_IN_FLIGHT   (binary's)      requests in flight per account in each responder
#   TODOSYNC_ACCOUNT_CPU_SHARE_MS (binary's)     CPU ms per second per account in each responder (0: none)
#   TODOSYNC_BIN                 release build   the responder binary
#
# Needs root (namespaces). Every process is started by this script and stopped by pid; `down`
# kills what is left inside the namespaces it created, then deletes them.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO_ROOT=$(dirname "$(dirname "$SELF")")
cd "$REPO_ROOT"
LOG_TAG=cluster
# What this script shares with scripts/stack.sh (docs/DEVELOPMENT.md, "The scripts' library").
for _lib in common mariadb nginx tls; do source "$REPO_ROOT/scripts/lib/$_lib.sh"; done
unset _lib

: "${TODOSYNC_CLUSTER_STATE_DIR:=.state/cluster}"
: "${TODOSYNC_CLUSTER_DB_DIR:=}"
: "${TODOSYNC_CLUSTER_NODES:=3}"
: "${TODOSYNC_CLUSTER_APPS:=2}"
: "${TODOSYNC_CLUSTER_FRONTS:=1}"
: "${TODOSYNC_CLUSTER_WORKERS:=8}"
: "${TODOSYNC_CLUSTER_HTTP_PORT:=48180}"
: "${TODOSYNC_CLUSTER_HTTPS_PORT:=48543}"
: "${TODOSYNC_CLUSTER_NET:=10.213.0}"
: "${TODOSYNC_CLUSTER_PREFIX:=tsx}"
: "${TODOSYNC_CLUSTER_SYNC_WAIT:=1}"
: "${TODOSYNC_CLUSTER_ROUTING:=round-robin}"
: "${TODOSYNC_ENABLE_TEST_HOOKS:=0}"
: "${TODOSYNC_TEST_INJECT:=}"
: "${TODOSYNC_AUTH_RATE:=100}"
: "${TODOSYNC_AUTH_BURST:=200}"
load_limit_defaults # the other limits' defaults: nginx/limits.env, as for the stack
: "${TODOSYNC_ACCOUNT_IN_FLIGHT:=}"
: "${TODOSYNC_ACCOUNT_CPU_SHARE_MS:=}"
: "${TODOSYNC_BIN:=}"
: "${TODOSYNC_LOG_LEVEL:=info}"

STATE=$(realpath -m "$TODOSYNC_CLUSTER_STATE_DIR")
case $STATE in / | "$REPO_ROOT" | "$REPO_ROOT/.state") die "refusing to use $STATE as state dir" ;; esac
P=$TODOSYNC_CLUSTER_PREFIX
NET=$TODOSYNC_CLUSTER_NET
NODES=$TODOSYNC_CLUSTER_NODES
APPS=$TODOSYNC_CLUSTER_APPS
FRONTS=$TODOSYNC_CLUSTER_FRONTS
[[ $FRONTS == 1 || $FRONTS == 2 ]] || die "TODOSYNC_CLUSTER_FRONTS must be 1 or 2"
LOG_DIR=$STATE/log
PID_DIR=$STATE/pids
# Unix socket paths must stay short.
SOCK_DIR=$STATE/sock
# Snapshot files: one directory shared by every responder host and the fronts, whose nginx sends
# them (docs/SCALING.md, "Snapshots"). The namespaces share the filesystem; real hosts would mount
# one shared directory at this path on each.
SNAPSHOT_DIR=$STATE/snapshots
if ((${#SOCK_DIR} > 80)); then SOCK_DIR=/tmp/$P-$(printf '%s' "$STATE" | cksum | cut -d' ' -f1); fi
# What mariadbd and its SST scripts (as mysql) open: data dirs, my.cnf, pid files, sockets. Their
# logs are their stderr, which this script (root) appends to $LOG_DIR/dbN.log.
DB_ROOT=$(realpath -m "${TODOSYNC_CLUSTER_DB_DIR:-/var/lib/todosync-cluster/$P}")
case $DB_ROOT in
    / | /var | /var/lib | /tmp | /home | /root | "$STATE" | "$REPO_ROOT") die "refusing to use $DB_ROOT as the nodes' dir" ;;
esac
TLS_DIR=$STATE/tls
BRIDGE_NS=$P-net
BRIDGE=$P-br
# Front 1 is the one clients reach by default (HTTP_BASE); front 2 exists with FRONTS=2.
FRONT_NS=$P-fe
HTTP_BASE=http://127.0.0.1:$TODOSYNC_CLUSTER_HTTP_PORT
HTTPS_BASE=https://127.0.0.1:$TODOSYNC_CLUSTER_HTTPS_PORT
# nchan's shared store with two fronts: redis-server on the private network only.
REDIS_NS=$P-rds # (interface names: at most 15 characters with the -b suffix)
REDIS_IP=$NET.5
REDIS_PORT=6379
# Under DB_ROOT, not the state dir: the redis user must reach it, and the state dir may sit in a
# private (0700) checkout such as CI's mktemp -d.
REDIS_DIR=$DB_ROOT/redis
GALERA_LIB=/usr/lib/galera/libgalera_smm.so
STREAM_MODULE=/usr/lib/nginx/modules/ngx_stream_module.so
DB_NAME=todosync DB_USER=todosync DB_PASSWORD=todosync

front_ns() { if (($1 == 1)); then printf '%s' "$FRONT_NS"; else printf '%s-fe%s' "$P" "$1"; fi; }
front_ip() { printf '%s.%s' "$NET" "$((1 + $1))"; }
front_name() { if (($1 == 1)); then printf front; else printf 'front%s' "$1"; fi; } # its files' stem
front_edge_address() { printf '127.0.0.%s' "$1"; } # where the host reaches it
# Live sync's publisher of front N (its nchan): a Unix socket the responder hosts reach because
# the namespaces share this filesystem. On separate hosts it would be a listener on the private
# network allowed only to the responder hosts.
front_publisher() { printf '%s/%s-live-pub.sock' "$SOCK_DIR" "$(front_name "$1")"; }
front_ips() { # comma-separated: the responders' allow-list
    local n list=""
    for ((n = 1; n <= FRONTS; n++)); do list+="${list:+,}$(front_ip "$n")"; done
    printf '%s' "$list"
}
node_ns() { printf '%s-db%s' "$P" "$1"; }
node_ip() { printf '%s.%s' "$NET" "$((10 + $1))"; }
node_dir() { printf '%s/db%s' "$DB_ROOT" "$1"; }
node_sock() { printf '%s/db%s/mariadb.sock' "$DB_ROOT" "$1"; }
app_ns() { printf '%s-app%s' "$P" "$1"; }
app_ip() { printf '%s.%s' "$NET" "$((20 + $1))"; }
all_ns() {
    local i
    for ((i = 1; i <= NODES; i++)); do node_ns "$i"; echo; done
    for ((i = 1; i <= APPS; i++)); do app_ns "$i"; echo; done
    for ((i = 1; i <= FRONTS; i++)); do front_ns "$i"; echo; done
    ((FRONTS == 1)) || echo "$REDIS_NS"
    echo "$BRIDGE_NS"
}

need_root() { ((EUID == 0)) || die "needs root (network namespaces)"; }
((${#P} <= 8)) || die "TODOSYNC_CLUSTER_PREFIX must be at most 8 characters (interface names are limited to 15)"

# --- deps ----------------------------------------------------------------------------------------

cmd_deps() {
    # stack.sh deps installs nginx and its nchan module (libnginx-mod-nchan: live sync) too.
    "$REPO_ROOT/scripts/stack.sh" deps
    # redis-server: nchan's shared store with two fronts, run privately by this script (the
    # policy-rc.d of apt_install_missing keeps apt from starting the system's instance).
    apt_install_missing "cluster packages present" galera-4 rsync iproute2 libnginx-mod-stream lsof redis-server nftables
}

# --- network -------------------------------------------------------------------------------------

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# Creates namespace NS with eth0 = IP/24 on the bridge.
add_host() {
    local ns=$1 ip=$2 peer=$1-b
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "$peer" type veth peer name eth0 netns "$ns"
    ip link set "$peer" netns "$BRIDGE_NS"
    ip -n "$BRIDGE_NS" link set "$peer" master "$BRIDGE" up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
}

net_up() {
    ns_exists "$BRIDGE_NS" && die "namespace $BRIDGE_NS exists: run '$0 down' first"
    log "network: bridge $BRIDGE in $BRIDGE_NS, $NODES database host(s), $APPS responder host(s), $FRONTS front(s)"
    ip netns add "$BRIDGE_NS"
    ip -n "$BRIDGE_NS" link set lo up
    ip -n "$BRIDGE_NS" link add "$BRIDGE" type bridge
    ip -n "$BRIDGE_NS" link set "$BRIDGE" up
    local i
    for ((i = 1; i <= NODES; i++)); do add_host "$(node_ns "$i")" "$(node_ip "$i")"; done
    for ((i = 1; i <= APPS; i++)); do add_host "$(app_ns "$i")" "$(app_ip "$i")"; done
    for ((i = 1; i <= FRONTS; i++)); do add_host "$(front_ns "$i")" "$(front_ip "$i")"; done
    ((FRONTS == 1)) || add_host "$REDIS_NS" "$REDIS_IP"
}

# SIGKILLs every process that lives in namespace NS (only namespaces this script created).
kill_ns() {
    local ns=$1 pids
    ns_exists "$ns" || return 0
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while [[ -n $(ip netns pids "$ns" 2>/dev/null) ]] && ((SECONDS < deadline)); do sleep 0.1; done
}

net_down() {
    local ns
    for ns in $(all_ns) $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P-((db|app|fe)[0-9]+|rds)$" || true); do
        if ns_exists "$ns"; then
            kill_ns "$ns"
            ip netns delete "$ns" 2>/dev/null || true
        fi
    done
}

tcp_listening() { ip netns exec "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; } # NS IP PORT

# Runs CMD in namespace NS, detached: new session, stdin /dev/null, output to LOG, no inherited fds.
spawn_in() {
    local ns=$1 logfile=$2
    shift 2
    (close_inherited_fds && exec ip netns exec "$ns" setsid "$@" </dev/null >>"$logfile" 2>&1) &
    disown "$!" 2>/dev/null || true
}

# --- Galera nodes --------------------------------------------------------------------------------

gcomm_address() {
    local i list=""
    for ((i = 1; i <= NODES; i++)); do list+="${list:+,}$(node_ip "$i")"; done
    printf 'gcomm://%s' "$list"
}

write_node_cnf() {
    local i=$1 dir
    dir=$(node_dir "$i")
    local wsrep=""
    if ((NODES > 1)); then
        wsrep="wsrep_on = ON
wsrep_provider = $GALERA_LIB
wsrep_cluster_name = todosync
wsrep_cluster_address = $(gcomm_address)
wsrep_node_address = $(node_ip "$i")
wsrep_node_name = db$i
wsrep_sst_method = rsync
wsrep_slave_threads = 2
wsrep_sync_wait = $TODOSYNC_CLUSTER_SYNC_WAIT
# A single-statement (autocommit) write that loses certification is re-run by the node itself up
# to this many times (default 1) before the client sees 1213; the app retries whole transactions
# itself, but e.g. the login throttle's counter is one UPDATE on a hot row.
wsrep_retry_autocommit = 10
# Notice a dead node within ~2-3 s instead of the 5-15 s defaults: writes stall until the
# surviving members have agreed on the new view. gcache holds the write sets a returning node
# needs for an incremental transfer (IST) instead of a full copy.
wsrep_provider_options = \"gcache.size=256M;evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S;evs.inactive_check_period=PT0.5S;evs.install_timeout=PT3S\""
    fi
    cat >"$dir/my.cnf" <<EOF
[mysqld]
user = mysql
datadir = $dir/data
# Each node its own: a starting server deletes every #sql* file in its tmpdir, other servers'
# temporary tables too (a push failed with "Error on delete of '/tmp/#sql-temptable-…'" while a
# node rejoined).
tmpdir = $dir/tmp
socket = $(node_sock "$i")
pid-file = $dir/mariadbd.pid
bind-address = $(node_ip "$i")
port = 3306
$(printf '%s\n' "${MARIADB_SERVER_OPTIONS[@]#--}")
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
innodb_flush_log_at_trx_commit = 2
innodb_buffer_pool_size = 256M
$wsrep
EOF
}

db_root() { # db_root N ARGS...: the mariadb client as root on node N's unix socket
    local i=$1
    shift
    mariadb --no-defaults --socket="$(node_sock "$i")" --user=root --connect-timeout=3 "$@"
}

node_status_value() { # node_status_value N VARIABLE
    db_root "$1" -N -B -e "SHOW STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'
}

node_pid() { pidfile_process "$(node_dir "$1")/mariadbd.pid" "--defaults-file=$(node_dir "$1")/my.cnf"; }

node_synced() {
    local i=$1
    if ((NODES == 1)); then
        db_root "$i" -e 'SELECT 1' >/dev/null 2>&1
        return
    fi
    [[ $(node_status_value "$i" wsrep_local_state_comment) == Synced && $(node_status_value "$i" wsrep_ready) == ON ]]
}

cmd_node_wait() {
    local i=$1 limit=${2:-120}
    wait_for "$limit" "node $i not synced after ${limit}s" "$LOG_DIR/db$i.log" node_synced "$i"
}

# node_start N [bootstrap]: starts mariadbd in node N's namespace.
node_start() {
    local i=$1 mode=${2:-join} dir ns args
    dir=$(node_dir "$i")
    ns=$(node_ns "$i")
    [[ -n $(node_pid "$i") ]] && { log "db$i: already running"; return 0; }
    mkdir -p "$dir/data" "$dir/tmp"
    chown mysql:mysql "$dir" "$dir/data" "$dir/tmp"
    write_node_cnf "$i"
    args=(--defaults-file="$dir/my.cnf")
    if [[ $mode == bootstrap ]]; then
        args+=(--wsrep-new-cluster)
    elif [[ -f $dir/data/grastate.dat ]] && ((NODES > 1)); then
        # After a crash the saved position is -1: recover it from InnoDB so the node can rejoin
        # by IST (only the missing write sets) instead of a full state transfer.
        local recovered
        ip netns exec "$ns" mariadbd --defaults-file="$dir/my.cnf" --wsrep-recover \
            </dev/null >>"$LOG_DIR/db$i-recover.log" 2>&1 9>&- || true
        recovered=$(grep -o 'Recovered position: [0-9a-f-]*:-\?[0-9]*' "$LOG_DIR/db$i-recover.log" 2>/dev/null |
            tail -n 1 | awk '{print $3}')
        [[ -n $recovered ]] && args+=(--wsrep-start-position="$recovered")
    fi
    log "db$i: starting in $ns ($(node_ip "$i"))${mode:+ [$mode]}"
    spawn_in "$ns" "$LOG_DIR/db$i.log" mariadbd "${args[@]}"
}

nodes_up() {
    local i dir
    # 0755 up to the nodes' dir (mysql must traverse it), each node's own dir mysql's alone.
    mkdir -p "$DB_ROOT"
    chmod 755 "$DB_ROOT"
    for ((i = 1; i <= NODES; i++)); do
        dir=$(node_dir "$i")
        mkdir -p "$dir"
        chown mysql:mysql "$dir"
        chmod 750 "$dir"
    done
    setpriv --reuid=mysql --regid=mysql --clear-groups -- test -w "$(node_dir 1)" ||
        die "user mysql cannot write $(node_dir 1) (set TODOSYNC_CLUSTER_DB_DIR to a directory it can reach)"
    # Node 1 gets a fresh data dir; the others receive theirs from it by state transfer (SST).
    dir=$(node_dir 1)
    log "db1: initialising data dir"
    mkdir -p "$dir/data"
    chown mysql:mysql "$dir/data"
    mariadb_install_db "$LOG_DIR/db1-install.log" mariadb-install-db --no-defaults --datadir="$dir/data" --user=mysql \
        --auth-root-authentication-method=normal
    node_start 1 bootstrap
    cmd_node_wait 1 60
    for ((i = 2; i <= NODES; i++)); do
        node_start "$i"
        cmd_node_wait "$i" 180
    done
    local size
    size=$(node_status_value 1 wsrep_cluster_size)
    ((NODES == 1)) || [[ $size == "$NODES" ]] || die "cluster size is $size, expected $NODES"
    log "galera: $NODES node(s) synced"
}

db_setup() {
    local user="'$DB_USER'@'$NET.%'" local_user="'$DB_USER'@'localhost'"
    db_root 1 <<EOF || die "could not create the database and user"
CREATE DATABASE IF NOT EXISTS \`$DB_NAME\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS $user IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO $user;
CREATE USER IF NOT EXISTS $local_user IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO $local_user;
EOF
    log "migrate: once, against db1"
    TODOSYNC_DB_SOCKET=$(node_sock 1) TODOSYNC_DB_USER=$DB_USER TODOSYNC_DB_PASSWORD=$DB_PASSWORD \
        TODOSYNC_DB_NAME=$DB_NAME "$TODOSYNC_BIN" migrate --sql-dir "$REPO_ROOT/Sql" \
        </dev/null >"$LOG_DIR/migrate.log" 2>&1 || { tail -n 30 "$LOG_DIR/migrate.log" >&2; die "migrate failed"; }
}

# --- responder hosts -----------------------------------------------------------------------------

# Responder host N prefers node ((N-1) mod NODES)+1 and fails over to the others in turn, so the
# hosts spread over the nodes and every host can reach every node.
app_db_hosts() {
    local n=$1 k list="" node
    for ((k = 0; k < NODES; k++)); do
        node=$(((n - 1 + k) % NODES + 1))
        list+="${list:+,}$(node_ip "$node"):3306"
    done
    printf '%s' "$list"
}

app_pid() { pidfile_process "$PID_DIR/app$1.pid" "serve --listen $(app_ip "$1"):9000"; }

cmd_app_start() {
    local n=$1 ns args
    ns=$(app_ns "$n")
    require_bin
    [[ -n $(app_pid "$n") ]] && { log "app$n: already running"; return 0; }
    args=(serve --listen "$(app_ip "$n"):9000" --allow "$(front_ips)" --workers "$TODOSYNC_CLUSTER_WORKERS")
    [[ $TODOSYNC_ENABLE_TEST_HOOKS == 1 ]] && args+=(--enable-test-hooks)
    [[ -z $TODOSYNC_TEST_INJECT || $TODOSYNC_ENABLE_TEST_HOOKS == 1 ]] ||
        die "TODOSYNC_TEST_INJECT needs the test build: TODOSYNC_ENABLE_TEST_HOOKS=1"
    [[ -z $TODOSYNC_TEST_INJECT ]] || log "app$n: BUGS ON PURPOSE: TODOSYNC_TEST_INJECT=$TODOSYNC_TEST_INJECT"
    log "app$n: starting in $ns ($(app_ip "$n"):9000, databases $(app_db_hosts "$n"))"
    spawn_in "$ns" "$LOG_DIR/app$n.log" env -i PATH="$PATH" TODOSYNC_CONFIG=/dev/null \
        TODOSYNC_DB_HOSTS="$(app_db_hosts "$n")" TODOSYNC_DB_USER=$DB_USER TODOSYNC_DB_PASSWORD=$DB_PASSWORD \
        TODOSYNC_DB_NAME=$DB_NAME TODOSYNC_LOG_LEVEL="$TODOSYNC_LOG_LEVEL" TODOSYNC_RETRY_LOG_SECONDS=5 \
        TODOSYNC_DB_TRANSACTION_ATTEMPTS=12 ${TODOSYNC_ACCOUNT_IN_FLIGHT:+TODOSYNC_ACCOUNT_IN_FLIGHT=$TODOSYNC_ACCOUNT_IN_FLIGHT} \
        ${TODOSYNC_ACCOUNT_CPU_SHARE_MS:+TODOSYNC_ACCOUNT_CPU_SHARE_MS=$TODOSYNC_ACCOUNT_CPU_SHARE_MS} \
        TODOSYNC_LIVE_PUBLISHER="$(front_publisher $(((n - 1) % FRONTS + 1)))" TODOSYNC_SNAPSHOT_DIR="$SNAPSHOT_DIR" \
        ${TODOSYNC_TEST_INJECT:+TODOSYNC_TEST_INJECT=$TODOSYNC_TEST_INJECT} MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=1048576 "$TODOSYNC_BIN" "${args[@]}"
    # the pid of the responder itself: the only process in the namespace running the binary
    local deadline=$((SECONDS + 30)) pid=""
    while ((SECONDS < deadline)); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "serve --listen"; then
                echo "$pid" >"$PID_DIR/app$n.pid"
                break 2
            fi
        done
        sleep 0.1
    done
    wait_for $((deadline - SECONDS)) "app$n is not listening" "$LOG_DIR/app$n.log" tcp_listening "$ns" "$(app_ip "$n")" 9000
}

cmd_app_kill() {
    log "app$1: kill -9 of every process in $(app_ns "$1")"
    kill_ns "$(app_ns "$1")"
    rm -f "$PID_DIR/app$1.pid"
}

cmd_node_kill() {
    log "db$1: kill -9 of every process in $(node_ns "$1")"
    kill_ns "$(node_ns "$1")"
}

cmd_node_start() { node_start "$1"; }

# --- nginx ---------------------------------------------------------------------------------------

# Front F's nginx: the stack's own template, listening on unix sockets behind the host-side
# stream proxy (PROXY protocol carries the client address), upstream = the responder hosts on TCP.
# With two fronts, nchan keeps its channels in the private redis-server.
render_front_conf() {
    local f=$1 name dir logs upstream="" n balance="" redis_http="" redis_pass=""
    name=$(front_name "$f")
    dir=$STATE/$name
    # front 1's logs where they always were (nginx-access.log, nginx-error.log); front N's in log/frontN/
    logs=$LOG_DIR
    ((f == 1)) || logs=$LOG_DIR/$name
    mkdir -p "$dir/tmp" "$logs"
    if ((FRONTS > 1)); then
        redis_http="upstream todosync_redis {
    nchan_redis_server redis://$REDIS_IP:$REDIS_PORT;
}"
        redis_pass="nchan_redis_pass todosync_redis;"
    fi
    [[ $TODOSYNC_CLUSTER_ROUTING == hash ]] && balance=$'        hash $http_authorization consistent;\n'
    for ((n = 1; n <= APPS; n++)); do
        upstream+="        server $(app_ip "$n"):9000 max_fails=1 fail_timeout=2s;"$'\n'
    done
    upstream="$balance${upstream%$'\n'}"
    local listen
    # The front is reached through the host-side stream proxy on loopback: no HTTPS redirect, and
    # the client address comes from the PROXY protocol header of that proxy, on the front's unix
    # sockets (the ports stay in the text for redirects: they are what clients see on the edge).
    # The per-address connection cap is not rendered here: the edge would be its place.
    listen="        listen unix:$SOCK_DIR/$name-http.sock proxy_protocol backlog=4096;"$'\n'
    listen+="        listen unix:$SOCK_DIR/$name-https.sock ssl http2 proxy_protocol backlog=4096;"
    # The placeholders both scripts fill alike: scripts/lib/nginx.sh.
    render_nginx_conf_file "$REPO_ROOT/nginx/todosync.conf.template" "$dir/nginx.conf" \
        NGINX_USER_DIRECTIVE="user root;" \
        NGINX_WORKERS=2 \
        NGINX_DIR="$dir" \
        LOG_DIR="$logs" \
        SERVER_LISTEN="$listen" \
        FASTCGI_PARAMS=/etc/nginx/fastcgi_params \
        UPSTREAM_SERVERS="$upstream" \
        HTTP_REDIRECT=0 \
        HTTPS_REDIRECT_PORT="$TODOSYNC_CLUSTER_HTTPS_PORT" \
        REAL_IP="$("$REPO_ROOT/scripts/nginx-real-ip.sh" unix: proxy_protocol)" \
        NCHAN_MODULE=/usr/lib/nginx/modules/ngx_nchan_module.so \
        SNAPSHOT_DIR="$SNAPSHOT_DIR" \
        LIVE_PUBLISHER_SOCKET="$(front_publisher "$f")" \
        LIVE_REDIS_HTTP="$redis_http" \
        LIVE_REDIS_PASS="$redis_pass"
}

render_edge_conf() {
    local f name servers=""
    for ((f = 1; f <= FRONTS; f++)); do
        name=$(front_name "$f")
        servers+="    server { listen $(front_edge_address "$f"):$TODOSYNC_CLUSTER_HTTP_PORT backlog=4096; proxy_pass unix:$SOCK_DIR/$name-http.sock; proxy_protocol on; }
    server { listen $(front_edge_address "$f"):$TODOSYNC_CLUSTER_HTTPS_PORT backlog=4096; proxy_pass unix:$SOCK_DIR/$name-https.sock; proxy_protocol on; }
"
    done
    cat >"$STATE/edge.conf" <<EOF
# Host side: forwards 127.0.0.1's ports to the front host's unix sockets (bytes only; TLS ends at the front).
load_module $STREAM_MODULE;
# root, like the front: the front's sockets are under the state dir, which may sit in a 0700
# directory (nginx's default worker user, nobody, could not reach them there).
user root;
worker_processes 1;
pid "$STATE/edge.pid";
error_log "$LOG_DIR/edge-error.log" warn;
events { worker_connections 8192; }
stream {
${servers%$'\n'}
}
EOF
}

# redis-server for nchan with two fronts: in its own namespace, on the private address only, with
# its own config and data dir (nothing saved: channels are hints), as the redis user.
redis_up() {
    command -v redis-server >/dev/null || die "redis-server is missing: run '$0 deps'"
    mkdir -p "$DB_ROOT" "$REDIS_DIR"
    chmod 755 "$DB_ROOT"
    cat >"$REDIS_DIR/redis.conf" <<EOF
# Written by scripts/cluster.sh: nchan's store for the cluster's fronts (not the system's instance).
bind $REDIS_IP
port $REDIS_PORT
# Only the private network reaches this address (the fronts; nothing on the host's loopback).
protected-mode no
daemonize no
supervised no
dir $REDIS_DIR
pidfile $REDIS_DIR/redis.pid
logfile ""
save ""
appendonly no
maxmemory 64mb
EOF
    local as=()
    if id redis >/dev/null 2>&1; then
        chown -R redis:redis "$REDIS_DIR"
        as=(setpriv --reuid=redis --regid=redis --clear-groups --)
    fi
    log "redis: redis-server in $REDIS_NS ($REDIS_IP:$REDIS_PORT), nchan's store for $FRONTS fronts"
    spawn_in "$REDIS_NS" "$LOG_DIR/redis.log" "${as[@]}" redis-server "$REDIS_DIR/redis.conf"
    wait_for 20 "redis-server is not listening" "$LOG_DIR/redis.log" tcp_listening "$REDIS_NS" "$REDIS_IP" "$REDIS_PORT"
}

front_start() { # front_start F: front F's nginx in its namespace
    local f=$1 name ns
    name=$(front_name "$f")
    ns=$(front_ns "$f")
    render_front_conf "$f"
    rm -f "$SOCK_DIR/$name-http.sock" "$SOCK_DIR/$name-https.sock" "$(front_publisher "$f")"
    ip netns exec "$ns" nginx -p "$STATE/$name/" -c "$STATE/$name/nginx.conf" -e "$LOG_DIR/$name-error.log" -t -q ||
        die "$name nginx configuration test failed"
    log "$name: nginx in $ns ($(front_ip "$f")), upstream of $APPS responder host(s) ($TODOSYNC_CLUSTER_ROUTING)"
    spawn_in "$ns" "$LOG_DIR/$name.out" nginx -p "$STATE/$name/" -c "$STATE/$name/nginx.conf" -e "$LOG_DIR/$name-error.log"
}

nginx_up() {
    ensure_cert DNS:localhost,IP:127.0.0.1,IP:127.0.0.2
    local f
    for ((f = 1; f <= FRONTS; f++)); do front_start "$f"; done
    render_edge_conf
    log "edge: 127.0.0.N:$TODOSYNC_CLUSTER_HTTP_PORT/$TODOSYNC_CLUSTER_HTTPS_PORT -> front N (of $FRONTS)"
    # The front ports may lie in the ephemeral range, where a passing outgoing connection can hold
    # the number for a moment: retry the bind a few times before giving up.
    local attempt
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        nginx -p "$STATE/" -c "$STATE/edge.conf" -e "$LOG_DIR/edge-error.log" </dev/null >>"$LOG_DIR/edge.out" 2>&1 9>&- && return 0
        log "edge: could not bind 127.0.0.1:$TODOSYNC_CLUSTER_HTTP_PORT/$TODOSYNC_CLUSTER_HTTPS_PORT (attempt $attempt), retrying"
        sleep 1
    done
    die "edge nginx failed to start (log: $LOG_DIR/edge-error.log)"
}

edge_pid() { pidfile_process "$STATE/edge.pid" "$STATE/edge.conf"; }

edge_down() {
    local pid
    pid=$(edge_pid)
    [[ -z $pid ]] && return 0
    kill -QUIT "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.1; done
    [[ -d /proc/$pid ]] && { kill -KILL "$pid" 2>/dev/null || true; }
    rm -f "$STATE/edge.pid"
}

wait_healthy() { wait_http_200 "$HTTP_BASE/healthz" 60 "$LOG_DIR/front-error.log"; }

# --- commands ------------------------------------------------------------------------------------

cmd_up() {
    need_root
    require_bin
    command -v mariadbd >/dev/null && [[ -f $GALERA_LIB && -f $STREAM_MODULE ]] && command -v rsync >/dev/null ||
        die "missing packages: run '$0 deps'"
    local t0=$SECONDS
    cmd_down >/dev/null 2>&1 || true
    rm -rf "$STATE" "$SOCK_DIR" "$DB_ROOT"
    mkdir -p "$LOG_DIR" "$PID_DIR" "$SOCK_DIR"
    chmod 755 "$STATE" "$SOCK_DIR"
    # `die` exits: tear down whatever was built on any failure, not only on ERR.
    trap 'log "up failed: tearing down"; cmd_down >/dev/null 2>&1 || true' EXIT
    net_up
    nodes_up
    db_setup
    local n
    for ((n = 1; n <= APPS; n++)); do cmd_app_start "$n"; done
    ((FRONTS == 1)) || redis_up
    nginx_up
    wait_healthy
    trap - EXIT
    log "up in $((SECONDS - t0)) s: $NODES Galera node(s), $APPS responder host(s) x $TODOSYNC_CLUSTER_WORKERS workers, $FRONTS front(s)"
    echo "$HTTP_BASE"
}

cmd_down() {
    need_root
    edge_down
    # Databases first get a clean shutdown (so a later `up` never finds a half-written data dir
    # in use), then every namespace's remaining processes are killed and the namespaces deleted.
    local i pid
    for ((i = 1; i <= NODES; i++)); do
        pid=$(node_pid "$i")
        [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
    done
    local deadline=$((SECONDS + 20))
    for ((i = 1; i <= NODES; i++)); do
        pid=$(node_pid "$i")
        while [[ -n $pid && -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.1; done
    done
    net_down
    rm -f "$SOCK_DIR"/*.sock "$PID_DIR"/*.pid 2>/dev/null || true
    # The nodes' data is of no use once they are down (their logs stay in $LOG_DIR).
    rm -rf "$DB_ROOT"
    [[ -n $TODOSYNC_CLUSTER_DB_DIR ]] || rmdir /var/lib/todosync-cluster 2>/dev/null || true
    log "down: no namespace, link or process left"
}

cmd_status() {
    local i size state ready
    printf '%-6s %-14s %-10s %-12s %-22s %s\n' host namespace address cluster_size local_state ready
    for ((i = 1; i <= NODES; i++)); do
        if [[ -n $(node_pid "$i") ]]; then
            size=$(node_status_value "$i" wsrep_cluster_size)
            state=$(node_status_value "$i" wsrep_local_state_comment)
            ready=$(node_status_value "$i" wsrep_ready)
        else
            size=- state=down ready=-
        fi
        printf '%-6s %-14s %-10s %-12s %-22s %s\n' "db$i" "$(node_ns "$i")" "$(node_ip "$i")" "${size:--}" "${state:--}" "${ready:--}"
    done
    for ((i = 1; i <= APPS; i++)); do
        printf '%-6s %-14s %-10s %s\n' "app$i" "$(app_ns "$i")" "$(app_ip "$i")" "$([[ -n $(app_pid "$i") ]] && echo "serving :9000 (pid $(app_pid "$i"))" || echo down)"
    done
    for ((i = 1; i <= FRONTS; i++)); do
        printf '%-6s %-14s %-10s %s\n' "$(front_name "$i")" "$(front_ns "$i")" "$(front_ip "$i")" \
            "http://$(front_edge_address "$i"):$TODOSYNC_CLUSTER_HTTP_PORT https://$(front_edge_address "$i"):$TODOSYNC_CLUSTER_HTTPS_PORT"
    done
    ((FRONTS == 1)) || printf '%-6s %-14s %-10s %s\n' redis "$REDIS_NS" "$REDIS_IP" "$(ip netns pids "$REDIS_NS" 2>/dev/null | head -n 1 | sed 's/^/pid /')"
}

# One line per running node per second; a lock wait of 3 s or more also dumps the node's
# transactions and InnoDB status (at most one dump per node per 10 s). The responders' sessions
# wait 1 s at most, so such a wait is an applier's: a replication stall in the making.
cmd_watch() {
    local seconds=${1:-0} started=$SECONDS i line longest
    local -A dumped=()
    while ((seconds == 0 || SECONDS - started < seconds)); do
        for ((i = 1; i <= NODES; i++)); do
            [[ -n $(node_pid "$i") ]] || continue
            line=$(db_root "$i" -N -B -e "
                SELECT CONCAT_WS(' ',
                  CONCAT('recv_queue=', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE')),
                  CONCAT('fc_sent=', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_FLOW_CONTROL_SENT')),
                  CONCAT('fc_paused=', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_FLOW_CONTROL_PAUSED')),
                  CONCAT('state=', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT')),
                  CONCAT('lock_waits=', (SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT')),
                  CONCAT('longest_wait_s=', (SELECT COALESCE(MAX(TIMESTAMPDIFF(SECOND, trx_wait_started, NOW())), 0) FROM information_schema.INNODB_TRX)),
                  CONCAT('appliers_over_2s=', COALESCE((SELECT GROUP_CONCAT(CONCAT(ID, ':', TIME, 's:', LEFT(STATE, 40)) SEPARATOR '|')
                      FROM information_schema.PROCESSLIST WHERE USER = 'system user' AND COMMAND <> 'Daemon' AND STATE NOT LIKE 'wsrep aborter%' AND TIME > 2), '-')))" 2>/dev/null) || continue
            printf '%s db%s %s\n' "$(date -u +%H:%M:%S)" "$i" "$line"
            longest=$(sed -n 's/.*longest_wait_s=\([0-9]*\).*/\1/p' <<<"$line")
            if ((${longest:-0} >= 3 && SECONDS - ${dumped[$i]:--10} >= 10)); then
                dumped[$i]=$SECONDS
                printf '%s db%s lock wait of %ss: transactions and InnoDB status follow\n' "$(date -u +%H:%M:%S)" "$i" "$longest"
                db_root "$i" -e "SELECT trx_id, trx_state, trx_started, trx_wait_started, trx_mysql_thread_id, trx_query
                    FROM information_schema.INNODB_TRX; SHOW FULL PROCESSLIST; SHOW ENGINE INNODB STATUS\\G" 2>&1 | sed 's/^/    /'
            fi
        done
        sleep 1
    done
}

front_urls() { # the fronts' HTTP base URLs, comma-separated (front 1 first)
    local f list=""
    for ((f = 1; f <= FRONTS; f++)); do list+="${list:+,}http://$(front_edge_address "$f"):$TODOSYNC_CLUSTER_HTTP_PORT"; done
    printf '%s' "$list"
}

cmd_env() {
    cat <<EOF
TODOSYNC_CLUSTER_STATE_DIR=$STATE
TODOSYNC_CLUSTER_DB_DIR=$DB_ROOT
TODOSYNC_CLUSTER_NODES=$NODES
TODOSYNC_CLUSTER_APPS=$APPS
TODOSYNC_CLUSTER_FRONTS=$FRONTS
TODOSYNC_CLUSTER_FRONT_URLS=$(front_urls)
TODOSYNC_CLUSTER_BASE_URL=$HTTP_BASE
TODOSYNC_CLUSTER_HTTPS_URL=$HTTPS_BASE
TODOSYNC_CLUSTER_CA_CERT=$TLS_DIR/cert.pem
TODOSYNC_CLUSTER_DB_SOCKETS=$(for ((i = 1; i <= NODES; i++)); do printf '%s%s' "$( ((i > 1)) && echo ,)" "$(node_sock "$i")"; done)
TODOSYNC_CLUSTER_LOG_DIR=$LOG_DIR
TODOSYNC_ENABLE_TEST_HOOKS=$TODOSYNC_ENABLE_TEST_HOOKS
EOF
}

cmd_test() {
    local python=$1 rc=0
    shift
    # in a subshell: `die` inside `up` exits only that, and this function still reports it
    if ! (cmd_up) >"$STATE.up.log" 2>&1; then
        cat "$STATE.up.log" >&2
        return 1
    fi
    tail -n 3 "$STATE.up.log" >&2
    trap 'cmd_down >/dev/null 2>&1 || true' EXIT
    trap 'exit 130' INT TERM
    local wrapper=$STATE/cluster-cmd
    {
        echo '#!/usr/bin/env bash'
        local v
        for v in TODOSYNC_CLUSTER_STATE_DIR TODOSYNC_CLUSTER_DB_DIR TODOSYNC_CLUSTER_NODES TODOSYNC_CLUSTER_APPS TODOSYNC_CLUSTER_FRONTS TODOSYNC_CLUSTER_WORKERS \
            TODOSYNC_CLUSTER_HTTP_PORT TODOSYNC_CLUSTER_HTTPS_PORT TODOSYNC_CLUSTER_NET TODOSYNC_CLUSTER_PREFIX \
            TODOSYNC_CLUSTER_SYNC_WAIT TODOSYNC_CLUSTER_ROUTING TODOSYNC_ENABLE_TEST_HOOKS TODOSYNC_AUTH_RATE \
            TODOSYNC_AUTH_BURST TODOSYNC_ACCOUNT_CONCURRENCY TODOSYNC_ADDRESS_CONCURRENCY TODOSYNC_ACCOUNT_IN_FLIGHT TODOSYNC_ACCOUNT_CPU_SHARE_MS TODOSYNC_BIN TODOSYNC_LOG_LEVEL; do
            printf 'export %s=%q\n' "$v" "${!v}"
        done
        printf 'exec %q "$@"\n' "$SELF"
    } >"$wrapper"
    chmod +x "$wrapper"
    local sockets="" i
    for ((i = 1; i <= NODES; i++)); do sockets+="${sockets:+,}$(node_sock "$i")"; done
    env -u TODOSYNC_TEST_STACK \
        TODOSYNC_TEST_BASE_URL="$HTTP_BASE" TODOSYNC_TEST_HTTPS_URL="$HTTPS_BASE" \
        TODOSYNC_TEST_CA_CERT="$TLS_DIR/cert.pem" TODOSYNC_TEST_DB_SOCKET="$(node_sock 1)" \
        TODOSYNC_TEST_STATE_DIR="$STATE" TODOSYNC_TEST_CLUSTER_CMD="$wrapper" \
        TODOSYNC_TEST_CLUSTER_NODES="$NODES" TODOSYNC_TEST_CLUSTER_APPS="$APPS" TODOSYNC_TEST_CLUSTER_FRONT_URLS="$(front_urls)" \
        TODOSYNC_TEST_CLUSTER_SOCKETS="$sockets" TODOSYNC_TEST_CLUSTER_LOG_DIR="$LOG_DIR" \
        TODOSYNC_TEST_CLUSTER_SNAPSHOT_DIR="$SNAPSHOT_DIR" \
        TODOSYNC_TEST_CLUSTER_NET="$NET" TODOSYNC_TEST_CLUSTER_PREFIX="$P" \
        "$python" -m pytest "$@" || rc=$?
    cmd_status >&2 || true
    return "$rc"
}

# Dispatch only: the nemesis, workload and checker are scripts/partition/*.py.
cmd_check() {
    local args=("$@") i
    for ((i = 0; i < ${#args[@]}; i++)); do
        [[ ${args[i]} == --nemesis && ${args[i + 1]:-} == list ]] && exec python3 "$REPO_ROOT/scripts/partition/run.py" --nemesis list
    done
    # --inject NAME[,NAME]: the test build, every responder host with those bugs (docs/HISTORY.md)
    for ((i = 0; i < ${#args[@]}; i++)); do
        if [[ ${args[i]} == --inject ]]; then
            TODOSYNC_TEST_INJECT=${args[i + 1]:?--inject needs NAME[,NAME]}
            TODOSYNC_ENABLE_TEST_HOOKS=1
            resolve_bin
            [[ $(basename "$TODOSYNC_BIN") == todosync-test && -x $TODOSYNC_BIN ]] ||
                die "--inject needs the test build at $TODOSYNC_BIN (TODOSYNC_ENABLE_TEST_HOOKS=1 scripts/stack.sh build)"
            export TODOSYNC_TEST_INJECT
        fi
    done
    need_root
    command -v nft >/dev/null || die "nft is missing: run '$0 deps'"
    # The log sits beside the state dir; a redirection that fails would skip `up` and yet, under
    # `!`, count as success (bash), so the run would start against no cluster.
    mkdir -p "$(dirname "$STATE")"
    if ! (cmd_up) >"$STATE.up.log" 2>&1; then
        cat "$STATE.up.log" >&2
        return 1
    fi
    trap 'cmd_down >/dev/null 2>&1 || true' EXIT
    trap 'exit 130' INT TERM
    export TODOSYNC_CLUSTER_STATE_DIR TODOSYNC_CLUSTER_PREFIX TODOSYNC_CLUSTER_NET TODOSYNC_CLUSTER_HTTP_PORT \
        TODOSYNC_CLUSTER_HTTPS_PORT TODOSYNC_CLUSTER_NODES TODOSYNC_CLUSTER_APPS TODOSYNC_CLUSTER_FRONTS TODOSYNC_BIN \
        TODOSYNC_ENABLE_TEST_HOOKS TODOSYNC_CLUSTER_DB_DIR TODOSYNC_CLUSTER_WORKERS
    local out rc=0
    out=${TODOSYNC_CHECK_DIR:-$STATE-checks}/$(date -u +%Y%m%dT%H%M%S)
    python3 "$REPO_ROOT/scripts/partition/run.py" "$@" --cluster-cmd "$SELF" --prefix "$P" --net "$NET" --out "$out" || rc=$?
    cmd_status >&2 || true
    return "$rc"
}

case ${1:-} in
    deps) cmd_deps ;;
    check) shift; cmd_check "$@" ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    watch) cmd_watch "${2:-0}" ;;
    node-kill) cmd_node_kill "${2:?node number}" ;;
    node-start) need_root; cmd_node_start "${2:?node number}" ;;
    node-wait) cmd_node_wait "${2:?node number}" "${3:-120}" ;;
    app-kill) cmd_app_kill "${2:?host number}" ;;
    app-start) need_root; cmd_app_start "${2:?host number}" ;;
    test) need_root; shift; cmd_test "$@" ;;
    responder-pids) for ((i = 1; i <= APPS; i++)); do app_pid "$i"; done ;;
    *) sed -n '2,20p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
