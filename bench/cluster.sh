#!/usr/bin/env bash
# The cost of scaling out, on one box: the mixed scenario (bench/bench.py's `mixed`: 80 % REST
# reads, 15 % pulls, 5 % pushes of 10 operations; wrk, 32 connections) against two topologies
# built by scripts/cluster.sh, with the same nginx front, edge hop and network namespaces:
#
#   single   1 MariaDB node (no Galera)  + 1 responder host
#   cluster  3 Galera nodes              + 2 responder hosts
#
# and prints req/s and p99 of both and the ratio. Everything runs on the same two cores, so this
# measures the overhead of the cluster (replication, certification, wsrep_sync_wait, more
# processes), not a speed-up.
#
# Usage: bench/cluster.sh
# Options: BENCH_CLUSTER_USERS [100] BENCH_CLUSTER_TAGS [20] BENCH_CLUSTER_TODOS [2000] (data set),
#   BENCH_DURATION [20] BENCH_WARMUP [3] BENCH_CONNECTIONS [32], BENCH_CLUSTER_HTTP_PORT [19180]
#   BENCH_CLUSTER_HTTPS_PORT [19543], BENCH_CLUSTER_TOPOLOGIES ["single cluster"],
#   BENCH_CLUSTER_SYNC_WAIT [1] (wsrep_sync_wait), BENCH_CLUSTER_ROUTING [round-robin|hash],
#   BENCH_SKIP_BUILD [0]. Results: .state/bench-cluster/<topology>/results/.
set -euo pipefail
BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${BENCH_CLUSTER_USERS:=100}" "${BENCH_CLUSTER_TAGS:=20}" "${BENCH_CLUSTER_TODOS:=2000}"
: "${BENCH_DURATION:=20}" "${BENCH_WARMUP:=3}" "${BENCH_CONNECTIONS:=32}" "${BENCH_THREADS:=2}"
: "${BENCH_CLUSTER_HTTP_PORT:=19180}" "${BENCH_CLUSTER_HTTPS_PORT:=19543}"
: "${BENCH_CLUSTER_TOPOLOGIES:=single cluster}" "${BENCH_CLUSTER_SYNC_WAIT:=1}"
: "${BENCH_CLUSTER_ROUTING:=round-robin}" "${BENCH_SKIP_BUILD:=0}"
ROOT_STATE=$REPO_ROOT/.state/bench-cluster
CLUSTER=$REPO_ROOT/scripts/cluster.sh

log() { printf '[bench-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

export TODOSYNC_CLUSTER_HTTP_PORT=$BENCH_CLUSTER_HTTP_PORT TODOSYNC_CLUSTER_HTTPS_PORT=$BENCH_CLUSTER_HTTPS_PORT
export TODOSYNC_CLUSTER_PREFIX=tsxb TODOSYNC_AUTH_RATE=100000 TODOSYNC_AUTH_BURST=100000
export TODOSYNC_CLUSTER_SYNC_WAIT=$BENCH_CLUSTER_SYNC_WAIT TODOSYNC_CLUSTER_ROUTING=$BENCH_CLUSTER_ROUTING
export BENCH_USERS=$BENCH_CLUSTER_USERS BENCH_TAGS=$BENCH_CLUSTER_TAGS BENCH_TODOS=$BENCH_CLUSTER_TODOS
export BENCH_DAYS=365 BENCH_START_DATE=2025-01-01 BENCH_SEED_JOBS=2 BENCH_DURATION BENCH_WARMUP
export BENCH_CONNECTIONS BENCH_THREADS BENCH_SCENARIOS=mixed BENCH_PULL_USERS=10

CURRENT=""
cleanup() {
    local rc=$?
    [[ -n $CURRENT ]] && { TODOSYNC_CLUSTER_STATE_DIR=$CURRENT "$CLUSTER" down >/dev/null 2>&1 || true; }
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >/dev/null
"$CLUSTER" deps >/dev/null
[[ $BENCH_SKIP_BUILD == 1 ]] || "$REPO_ROOT/scripts/stack.sh" build >/dev/null
export TODOSYNC_BIN=$(swift build -c release --show-bin-path)/todosync

declare -A RPS P99 P50
for topology in $BENCH_CLUSTER_TOPOLOGIES; do
    case $topology in
        single) nodes=1 apps=1 ;;
        cluster) nodes=3 apps=2 ;;
        *) log "unknown topology $topology"; exit 2 ;;
    esac
    state=$ROOT_STATE/$topology
    CURRENT=$state
    export TODOSYNC_CLUSTER_STATE_DIR=$state TODOSYNC_CLUSTER_NODES=$nodes TODOSYNC_CLUSTER_APPS=$apps
    log "$topology: $nodes node(s) + $apps responder host(s)"
    "$CLUSTER" up >"$ROOT_STATE.$topology.up.log" 2>&1 || { tail -n 30 "$ROOT_STATE.$topology.up.log" >&2; exit 1; }
    sock=$("$CLUSTER" env | sed -n 's/^TODOSYNC_CLUSTER_DB_SOCKETS=//p' | cut -d, -f1)
    results=$state/results
    mkdir -p "$results"
    export BENCH_TOKEN_SALT=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
    log "$topology: seeding $BENCH_USERS users x $BENCH_TAGS tags x $BENCH_TODOS todos through db1"
    TODOSYNC_DB_SOCKET=$sock TODOSYNC_DB_NAME=todosync TODOSYNC_DB_USER=todosync TODOSYNC_DB_PASSWORD=todosync \
        "$BENCH_DIR/seed.sh" >"$results/seed.out" 2>&1 || { tail -n 20 "$results/seed.out" >&2; exit 1; }
    if ((nodes > 1)); then
        for ((i = 1; i <= nodes; i++)); do "$CLUSTER" node-wait "$i" 300; done
    fi
    log "$topology: mixed scenario, $BENCH_DURATION s, $BENCH_CONNECTIONS connections"
    TODOSYNC_STATE_DIR=$state TODOSYNC_WORKERS=8 TODOSYNC_RESPONDERS=$apps \
        BENCH_BASE_URL=http://127.0.0.1:$BENCH_CLUSTER_HTTP_PORT BENCH_RESULTS=$results BENCH_WRK_DIR=$BENCH_DIR/wrk \
        timeout 900 python3 "$BENCH_DIR/bench.py" --stack "$CLUSTER" >"$results/bench.out" 2>&1 ||
        { tail -n 30 "$results/bench.out" >&2; exit 1; }
    read -r RPS[$topology] P50[$topology] P99[$topology] < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["rps"], r.get("p50Ms", r.get("p50", 0)), r.get("p99Ms", r.get("p99", 0)))' "$results/mixed.json")
    "$CLUSTER" status >"$results/status.txt" 2>&1 || true
    "$CLUSTER" down >/dev/null 2>&1
    CURRENT=""
done

printf '\nmixed scenario (80%% reads / 15%% pulls / 5%% pushes), %s connections, %s s, %s users x %s todos; %s cores\n' \
    "$BENCH_CONNECTIONS" "$BENCH_DURATION" "$BENCH_USERS" "$BENCH_TODOS" "$(nproc)"
printf '%-34s %10s %8s %8s\n' topology req/s p50_ms p99_ms
for topology in $BENCH_CLUSTER_TOPOLOGIES; do
    label=$([[ $topology == single ]] && echo "1 node + 1 responder host" || echo "3 Galera nodes + 2 responder hosts")
    printf '%-34s %10.0f %8.1f %8.1f\n' "$label" "${RPS[$topology]}" "${P50[$topology]}" "${P99[$topology]}"
done
if [[ -n ${RPS[single]:-} && -n ${RPS[cluster]:-} ]]; then
    python3 -c '
import sys
s, c = float(sys.argv[1]), float(sys.argv[2])
print(f"cluster / single throughput: {c / s:.2f} (the cluster costs {max(0.0, 1 - c / s) * 100:.0f} % of single-node throughput; target <= 35 %: {\"met\" if 1 - c / s <= 0.35 else \"MISSED\"})")' \
        "${RPS[single]}" "${RPS[cluster]}"
fi
