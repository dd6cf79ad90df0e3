#!/usr/bin/env bash
# The cost of scaling out, on one box: the mixed scenario (bench/bench.py's `mixed`: 80 % REST
# reads, 15 % pulls, 5 % pushes of 10 operations; wrk, 32 connections) against two topologies
# built by scripts/cluster.sh, with the same nginx front, edge hop and network namespaces:
#
#   single   1 MariaDB node (no Galera)  + 1 responder host
#   cluster  3 Galera nodes              + 2 responder hosts
#
# both up side by side, measured in alternating rounds (the box may be busy), and prints req/s
# and p99 of every round, the medians and their ratio. Everything runs on the same two cores, so this
# measures the overhead of the cluster (replication, certification, wsrep_sync_wait, more
# processes), not a speed-up.
#
# Usage: bench/cluster.sh
# Options: BENCH_CLUSTER_USERS [100] BENCH_CLUSTER_TAGS [20] BENCH_CLUSTER_TODOS [2000] (data set),
#   BENCH_DURATION [20] BENCH_WARMUP [3] BENCH_CONNECTIONS [32], BENCH_CLUSTER_ROUNDS [3],
#   BENCH_CLUSTER_HTTP_PORT [19480] BENCH_CLUSTER_HTTPS_PORT [19843] (the cluster topology: +100), BENCH_CLUSTER_TOPOLOGIES ["single cluster"],
#   BENCH_CLUSTER_SYNC_WAIT [1] (wsrep_sync_wait), BENCH_CLUSTER_ROUTING [round-robin|hash],
#   BENCH_SKIP_BUILD [0]. Results: .state/bench-cluster/<topology>/results/ (mixed-<round>.json).
set -euo pipefail
BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"

: "${BENCH_CLUSTER_USERS:=100}" "${BENCH_CLUSTER_TAGS:=20}" "${BENCH_CLUSTER_TODOS:=2000}"
: "${BENCH_DURATION:=20}" "${BENCH_WARMUP:=3}" "${BENCH_CONNECTIONS:=32}" "${BENCH_THREADS:=2}"
: "${BENCH_CLUSTER_HTTP_PORT:=19480}" "${BENCH_CLUSTER_HTTPS_PORT:=19843}" "${BENCH_CLUSTER_ROUNDS:=3}"
: "${BENCH_CLUSTER_TOPOLOGIES:=single cluster}" "${BENCH_CLUSTER_SYNC_WAIT:=1}"
: "${BENCH_CLUSTER_ROUTING:=round-robin}" "${BENCH_SKIP_BUILD:=0}"
ROOT_STATE=$REPO_ROOT/.state/bench-cluster
CLUSTER=$REPO_ROOT/scripts/cluster.sh

log() { printf '[bench-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

export TODOSYNC_AUTH_RATE=100000 TODOSYNC_AUTH_BURST=100000 TODOSYNC_ACCOUNT_CONCURRENCY=1000
export TODOSYNC_CLUSTER_SYNC_WAIT=$BENCH_CLUSTER_SYNC_WAIT TODOSYNC_CLUSTER_ROUTING=$BENCH_CLUSTER_ROUTING
export BENCH_USERS=$BENCH_CLUSTER_USERS BENCH_TAGS=$BENCH_CLUSTER_TAGS BENCH_TODOS=$BENCH_CLUSTER_TODOS
export BENCH_DAYS=365 BENCH_START_DATE=2025-01-01 BENCH_SEED_JOBS=2 BENCH_DURATION BENCH_WARMUP
export BENCH_CONNECTIONS BENCH_THREADS BENCH_SCENARIOS=mixed BENCH_PULL_USERS=10

UP=()
cleanup() {
    local rc=$? t
    for t in "${UP[@]}"; do topology_env "$t"; "$CLUSTER" down >/dev/null 2>&1 || true; done
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# topology_env NAME: the cluster.sh settings of one topology (own state dir, prefix and ports, so
# both run side by side and the measured rounds can alternate on the same, possibly busy, box).
topology_env() {
    case $1 in
        single) nodes=1 apps=1 port=$BENCH_CLUSTER_HTTP_PORT tls=$BENCH_CLUSTER_HTTPS_PORT ;;
        cluster) nodes=3 apps=2 port=$((BENCH_CLUSTER_HTTP_PORT + 100)) tls=$((BENCH_CLUSTER_HTTPS_PORT + 100)) ;;
        # the alternative to wsrep_sync_wait: each bearer token always to the same responder host
        # (nginx `hash $http_authorization consistent`), hence the same node while it is up
        cluster-hash) nodes=3 apps=2 port=$((BENCH_CLUSTER_HTTP_PORT + 200)) tls=$((BENCH_CLUSTER_HTTPS_PORT + 200)) ;;
        *) log "unknown topology $1"; exit 2 ;;
    esac
    export TODOSYNC_CLUSTER_STATE_DIR=$ROOT_STATE/$1 TODOSYNC_CLUSTER_NODES=$nodes TODOSYNC_CLUSTER_APPS=$apps
    export TODOSYNC_CLUSTER_PREFIX=tsxb${1:0:1}${1:8:1} TODOSYNC_CLUSTER_HTTP_PORT=$port TODOSYNC_CLUSTER_HTTPS_PORT=$tls
    if [[ $1 == cluster-hash ]]; then
        export TODOSYNC_CLUSTER_SYNC_WAIT=0 TODOSYNC_CLUSTER_ROUTING=hash
    else
        export TODOSYNC_CLUSTER_SYNC_WAIT=$BENCH_CLUSTER_SYNC_WAIT TODOSYNC_CLUSTER_ROUTING=$BENCH_CLUSTER_ROUTING
    fi
}

command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk >/dev/null
"$CLUSTER" deps >/dev/null
[[ $BENCH_SKIP_BUILD == 1 ]] || "$REPO_ROOT/scripts/stack.sh" build >/dev/null
export TODOSYNC_BIN=$(swift build -c release --show-bin-path)/todosync
mkdir -p "$ROOT_STATE"

for topology in $BENCH_CLUSTER_TOPOLOGIES; do
    topology_env "$topology"
    log "$topology: $nodes node(s) + $apps responder host(s) on 127.0.0.1:$port"
    UP+=("$topology")
    "$CLUSTER" up >"$ROOT_STATE/$topology.up.log" 2>&1 || { tail -n 30 "$ROOT_STATE/$topology.up.log" >&2; exit 1; }
    sock=$("$CLUSTER" env | sed -n 's/^TODOSYNC_CLUSTER_DB_SOCKETS=//p' | cut -d, -f1)
    mkdir -p "$TODOSYNC_CLUSTER_STATE_DIR/results"
    export BENCH_TOKEN_SALT=s${topology//-/}
    log "$topology: seeding $BENCH_USERS users x $BENCH_TAGS tags x $BENCH_TODOS todos through db1"
    TODOSYNC_DB_SOCKET=$sock TODOSYNC_DB_NAME=todosync TODOSYNC_DB_USER=todosync TODOSYNC_DB_PASSWORD=todosync \
        "$BENCH_DIR/seed.sh" >"$TODOSYNC_CLUSTER_STATE_DIR/results/seed.out" 2>&1 ||
        { tail -n 20 "$TODOSYNC_CLUSTER_STATE_DIR/results/seed.out" >&2; exit 1; }
    for ((i = 1; i <= nodes; i++)); do "$CLUSTER" node-wait "$i" 300; done
done

declare -A RPS P50 P99
for ((round = 1; round <= BENCH_CLUSTER_ROUNDS; round++)); do
    for topology in $BENCH_CLUSTER_TOPOLOGIES; do
        topology_env "$topology"
        results=$TODOSYNC_CLUSTER_STATE_DIR/results
        log "round $round, $topology: mixed scenario, $BENCH_DURATION s, $BENCH_CONNECTIONS connections (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        BENCH_TOKEN_SALT=s${topology//-/} TODOSYNC_STATE_DIR=$TODOSYNC_CLUSTER_STATE_DIR TODOSYNC_WORKERS=8 TODOSYNC_RESPONDERS=$apps \
            BENCH_BASE_URL=http://127.0.0.1:$port BENCH_RESULTS=$results BENCH_WRK_DIR=$BENCH_DIR/wrk \
            timeout 900 python3 "$BENCH_DIR/bench.py" --stack "$CLUSTER" >"$results/bench-$round.out" 2>&1 ||
            { tail -n 30 "$results/bench-$round.out" >&2; exit 1; }
        cp "$results/mixed.json" "$results/mixed-$round.json"
        read -r rps p50 p99 < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["rps"], r["p50Ms"], r["p99Ms"])' "$results/mixed.json")
        RPS[$topology]+="$rps " P50[$topology]+="$p50 " P99[$topology]+="$p99 "
        log "round $round, $topology: $(printf '%.0f req/s, p99 %.1f ms' "$rps" "$p99")"
    done
done
for topology in $BENCH_CLUSTER_TOPOLOGIES; do topology_env "$topology"; "$CLUSTER" status >"$TODOSYNC_CLUSTER_STATE_DIR/results/status.txt" 2>&1 || true; done

SUMMARY_ARGS=()
for topology in $BENCH_CLUSTER_TOPOLOGIES; do SUMMARY_ARGS+=("$topology" "${RPS[$topology]}" "${P99[$topology]}"); done
python3 - "$BENCH_CONNECTIONS" "$BENCH_DURATION" "$BENCH_USERS" "$BENCH_TODOS" "$BENCH_CLUSTER_SYNC_WAIT" \
    "$BENCH_CLUSTER_ROUTING" "$(cut -d' ' -f1-3 /proc/loadavg)" "${SUMMARY_ARGS[@]}" <<'PY'
import os, statistics, sys
conns, dur, users, todos, sync_wait, routing, load = sys.argv[1:8]
rest = sys.argv[8:]
rows = {rest[i]: ([float(x) for x in rest[i + 1].split()], [float(x) for x in rest[i + 2].split()])
        for i in range(0, len(rest), 3)}
print(f"\nmixed scenario (80 % reads / 15 % pulls / 5 % pushes), {conns} connections, {dur} s per round, "
      f"{users} users x {todos} todos, {os.cpu_count()} cores, load average at the end {load}")
labels = {"single": "1 node + 1 responder host",
          "cluster": f"3 Galera nodes + 2 responder hosts (wsrep_sync_wait={sync_wait}, {routing})",
          "cluster-hash": "3 Galera nodes + 2 responder hosts (wsrep_sync_wait=0, hash by token)"}
print(f"{'topology':72} {'req/s per round':24} {'median':>7}  p99 ms per round")
med = {}
for name, (rps, p99) in rows.items():
    med[name] = statistics.median(rps)
    print(f"{labels[name]:72} {' · '.join(f'{x:,.0f}' for x in rps):24} {med[name]:>7,.0f}  {' · '.join(f'{x:.0f}' for x in p99)}")
for name in ("cluster", "cluster-hash"):
    if name in med and "single" in med:
        ratio = med[name] / med["single"]
        cost = max(0.0, 1 - ratio) * 100
        print(f"{name} / single (medians): {ratio:.2f}: the cluster costs {cost:.0f} % of single-node throughput "
              f"(target <= 35 %: {'met' if cost <= 35 else 'MISSED'})")
if "cluster" in med and "cluster-hash" in med:
    print(f"wsrep_sync_wait={sync_wait} + round-robin vs sync_wait=0 + hash routing: {med['cluster'] / med['cluster-hash']:.2f}")
PY
